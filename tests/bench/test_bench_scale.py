"""The scale bench (bench/scale.py) still runs: its --smoke mode in a subprocess, values asserted
(never how fast anything was); and its recall@k by hand arithmetic."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("scale_data", ROOT / "bench" / "scale_data.py")
scale_data = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("scale_data", scale_data)  # its dataclass looks itself up there
_spec.loader.exec_module(scale_data)

TRUTH_IDS = np.array([[7, 3, 5, 9]])
TRUTH_D2 = np.array([[0.1, 0.2, 0.2, 0.4]])  # 3 and 5 tie at the 2nd distance


@pytest.mark.parametrize("found, k, expected", [
    ([7, 3], 2, 1.0),  # both true top-2
    ([7, 5], 2, 1.0),  # 5 ties with the 2nd neighbour: as right as 3
    ([7, 9], 2, 0.5),  # 9 is 4th
    ([9, 1], 2, 0.0),  # 1 is beyond the truth's depth: farther than the 2nd
    ([7], 2, 0.5),  # fewer than k returned: hits over k
    ([7, 7], 2, 0.5),  # an id counts once
    ([5, 3, 7, 9], 3, 1.0),  # order does not matter
    ([9, 5, 3, 7], 3, 2 / 3),  # only the first k returned count: 7 comes 4th
])
def test_recall_at_k_by_hand(found, k, expected):
    assert scale_data.recall_at_k([np.array(found)], TRUTH_IDS, TRUTH_D2, k) == expected


def test_recall_at_k_averages_queries():
    ids, d2 = np.repeat(TRUTH_IDS, 2, 0), np.repeat(TRUTH_D2, 2, 0)
    assert scale_data.recall_at_k([np.array([7, 3]), np.array([9, 1])], ids, d2, 2) == (1.0 + 0.0) / 2


def test_topk_matches_full_sort():
    rng = np.random.default_rng(0)
    q, v = rng.standard_normal((3, 8)).astype(np.float32), rng.standard_normal((50, 8)).astype(np.float32)
    top = scale_data.TopK(q, 5)
    for start in range(0, 50, 12):  # batches of 12, the last one short
        top.add(v[start:start + 12], start)
    ids, d2 = top.result()
    full = ((q[:, None, :] - v[None, :, :]) ** 2).sum(-1)
    assert (ids == np.argsort(full, axis=1)[:, :5]).all()
    assert np.allclose(d2, np.sort(full, axis=1)[:, :5], atol=1e-4)


@pytest.mark.slow
def test_bench_scale_smoke(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run([sys.executable, "bench/scale.py", "--smoke", "--out", str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-4000:]}"
    assert "smoke: ok" in proc.stdout, proc.stdout
    assert (tmp_path / "scale.png").stat().st_size > 10_000

    result = json.loads((tmp_path / "scale.json").read_text())
    assert result["model"]["chunks_per_s"] > 0 and result["model"]["dimension"] == 384
    assert result["data"]["real_chunks"] == 100 and result["data"]["questions"] == 20
    [size] = result["sizes"]
    assert size["rows"] == size["rows_in_table"] == 5_000
    assert size["queries"] == 30 and size["warmup"] == 5 and size["sigma"] > 0
    # the noise was calibrated: generated rows are about as far from their neighbours as real chunks
    real, generated = result["data"]["real_nn_l2"]["p50"], size["generated_nn_l2"]["p50"]
    assert abs(generated - real) < 0.1 * real
    exact, ivf_pq = size["indexes"]
    assert exact["kind"] == "exact" and exact["build_s"] == 0 and len(exact["searches"]) == 1
    assert exact["searches"][0]["recall"] == exact["searches"][0]["batch_recall"] == 1.0  # LanceDB's = numpy's
    assert ivf_pq["kind"] == "ivf_pq" and ivf_pq["num_sub_vectors"] == 24
    assert ivf_pq["build_s"] > 0 and ivf_pq["index_mb"] > 0 and ivf_pq["index_size_bytes"] > 0
    assert [(s["nprobes"], s["refine_factor"]) for s in ivf_pq["searches"]] == [(8, None), (8, 5)]
    for idx in size["indexes"]:
        assert idx["peak_rss_mb"] >= idx["build_peak_rss_mb"] > 0
        for s in idx["searches"]:
            assert 0 <= s["recall"] <= 1 and 0 <= s["batch_recall"] <= 1
            assert 0 < s["p50_ms"] <= s["p95_ms"] and s["batch_ms"] > 0
    # re-ranking with full vectors cannot lose neighbours the PQ pass found at the same nprobes
    assert ivf_pq["searches"][1]["recall"] >= ivf_pq["searches"][0]["recall"]
