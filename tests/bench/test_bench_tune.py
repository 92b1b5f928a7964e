"""bench/tune.py --smoke: the lab's trainer and sentence-transformers' own, on the same pairs, train
alike (equal losses), and reranking through LlamaIndex scores what the raw model scores."""

from __future__ import annotations

import re

import pytest

from test_bench import NUM, _line, _smoke

pytestmark = pytest.mark.slow


def test_bench_tune_smoke():
    out = _smoke("tune.py", timeout=600)
    m = _line(out, r"^corpus: (\d+) passages of small-retrieval, (\d+) training questions, (\d+) hard negatives$")
    passages, questions, negatives = map(int, m.groups())
    assert passages == 7 and questions == 11 and 0 < negatives <= 5 * questions  # 3 hard, 2 random
    for target in ("reranker", "embedding"):
        m = _line(out, rf"^train {target}\s+lab\s+{NUM} s\s+raw\s+{NUM} s\s+ratio {NUM}\s+{NUM} pairs/s\s+"
                       rf"loss lab {NUM} raw {NUM}$")
        lab_s, raw_s, ratio, pairs_s, lab_loss, raw_loss = map(float, m.groups())
        assert lab_s > 0 and raw_s > 0 and ratio > 0 and pairs_s > 0
        assert lab_loss == raw_loss > 0  # same pairs, same seed, same steps: the same training
    m = _line(out, rf"^rerank top 6\s+batch (\d+)\s+lab {NUM} ms/question\s+raw {NUM} ms/question\s+ratio {NUM}$")
    assert int(m[1]) in (8, 16, 32, 50) and float(m[2]) > 0 and float(m[3]) > 0
    assert re.search(r"^smoke: ok$", out, re.MULTILINE)
