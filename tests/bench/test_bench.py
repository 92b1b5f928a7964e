"""The benchmarks still run: each bench script's --smoke mode on the test fixture, in a subprocess.

Checks what the scripts print (equal MRRs, same chunks, texts the raw libraries reproduce,
positive ratios), never how fast anything was.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NUM = r"([0-9]+(?:\.[0-9]+)?)"


def _smoke(script: str, timeout: int) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run([sys.executable, f"bench/{script}", "--smoke"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, (f"bench/{script} --smoke exited {proc.returncode}\n"
                                  f"{proc.stdout}\n{proc.stderr[-4000:]}")
    assert "smoke: ok" in proc.stdout, proc.stdout
    return proc.stdout


def _line(out: str, pattern: str) -> re.Match:
    m = re.search(pattern, out, re.MULTILINE)
    assert m, f"no line matching {pattern!r} in:\n{out}"
    return m


def test_bench_run_smoke():
    last = ROOT / "bench" / "last.json"
    before = last.stat().st_mtime_ns if last.exists() else None
    out = _smoke("run.py", timeout=300)

    m = _line(out, r"^corpus: (\d+) documents, (\d+) \S+ chunks, (\d+) questions$")
    docs, chunks, questions = map(int, m.groups())
    assert (docs, questions) == (4, 6) and chunks > docs  # the fixture, cut into small chunks

    m = _line(out, rf"^index build\s+lab\s+{NUM} s\s+plain encode\s+{NUM} s\s+ratio {NUM}$")
    lab_s, plain_s, ratio = map(float, m.groups())
    assert lab_s > 0 and plain_s > 0 and ratio > 0

    m = _line(out, rf"^retrieval eval\s+lab\s+{NUM} s\s+plain encode\+numpy\s+{NUM} s\s+ratio {NUM}"
                   rf"\s+MRR lab {NUM} plain {NUM}$")
    lab_s, plain_s, ratio, lab_mrr, plain_mrr = map(float, m.groups())
    assert lab_s > 0 and plain_s > 0 and ratio > 0
    assert lab_mrr == plain_mrr
    assert 0 < lab_mrr <= 1  # the fixture's questions are answerable: some keyword is retrieved

    m = _line(out, rf"^semantic split\s+stock\s+{NUM} s\s+lab\s+{NUM} s\s+speedup {NUM}x\s+"
                   r"same chunks: (\w+) \((\d+) chunks from (\d+) sentence groups\)$")
    assert float(m[1]) > 0 and float(m[2]) > 0 and float(m[3]) > 0
    assert m[4] == "True"
    assert 0 < int(m[5]) <= int(m[6])

    assert "wrote" not in out  # smoke mode writes nothing in the project
    after = last.stat().st_mtime_ns if last.exists() else None
    assert after == before


@pytest.mark.slow
def test_bench_llm_smoke():
    out = _smoke("llm.py", timeout=600)
    m = _line(out, r"^(\d+) questions of small; generator smollm2-135m-instruct, judge smollm2-135m-instruct$")
    assert m[1] == "2"
    for stage in ("generate", "judge"):
        m = _line(out, rf"^{stage}\s+(\d+)\s+(\d+)\s+(\d+)\s+{NUM}\s+{NUM}\s+{NUM}\s+(\d+)$")
        calls, prompt_tok, out_tok = int(m[1]), int(m[2]), int(m[3])
        lab_s, raw_s, ratio, differ = float(m[4]), float(m[5]), float(m[6]), int(m[7])
        assert calls > 0 and prompt_tok > 0 and out_tok > 0
        assert lab_s > 0 and raw_s > 0 and ratio > 0
        assert differ == 0, f"{stage}: {differ} raw texts differ from the lab's"
    # 2 questions: 2 answers; the judge grades each and calibrates on 2 more judgements apiece
    assert int(_line(out, r"^generate\s+(\d+)\s")[1]) == 2
    assert int(_line(out, r"^judge\s+(\d+)\s")[1]) >= 6
    m = _line(out, rf"^total\s+{NUM}\s+{NUM}\s+{NUM}\s+\(goal <= 1\.2\)$")
    assert all(float(x) > 0 for x in m.groups())
