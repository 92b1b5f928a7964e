"""bench/scifact.py --smoke: on a slice of BEIR SciFact, the lab's index build and retrieval runs
and the raw libraries' (sentence-transformers + numpy, LanceDB's full-text search called directly)
score the same nDCG@10 and Recall@100, and every ratio is a positive number."""

from __future__ import annotations

import pytest

from test_bench import NUM, ROOT, _line, _smoke

pytestmark = pytest.mark.slow


@pytest.mark.skipif(not (ROOT.parent / "shared" / "benchmarks" / "scifact").is_dir(),
                    reason="../shared/benchmarks/scifact is not beside the project")
def test_bench_scifact_smoke():
    out = _smoke("scifact.py", timeout=600)
    m = _line(out, r"^corpus: (\d+) documents, (\d+) chunks, (\d+) questions$")
    docs, chunks, questions = map(int, m.groups())
    assert questions == 10 and docs == chunks and 40 < docs <= 40 + 12  # one chunk per abstract
    m = _line(out, rf"^index build\s+lab\s+{NUM} s\s+plain encode\+lancedb\s+{NUM} s\s+ratio {NUM}$")
    assert all(float(v) > 0 for v in m.groups())
    for name, plain in (("dense", r"encode\+numpy"), ("bm25", "lancedb fts")):
        m = _line(out, rf"^{name} run\s+lab\s+{NUM} s\s+plain {plain}\s+{NUM} s\s+ratio {NUM}\s+"
                       rf"nDCG@10 lab {NUM} plain {NUM}\s+R@100 lab {NUM} plain {NUM}$")
        lab_s, plain_s, ratio, lab_ndcg, plain_ndcg, lab_r, plain_r = map(float, m.groups())
        assert lab_s > 0 and plain_s > 0 and ratio > 0
        assert lab_ndcg == plain_ndcg and lab_r == plain_r and 0 < lab_ndcg <= 1
