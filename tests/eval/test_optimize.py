"""lab optimize: ranges, the dev/held-out split, and a real search on the fixture project."""

import json

import pytest
import yaml

from lab.errors import ConfigError
from lab.evalsets.holdout import split_rows
from lab.eval.optimize import parse_range
from runs import lab


def test_parse_range():
    r = parse_range("chunker.chunk_size=400:1600:200")
    assert (r.path, r.low, r.high, r.step, r.integer) == (("chunker", "chunk_size"), 400, 1600, 200, True)
    f = parse_range("retriever.alpha=0.0:1.0:0.25")
    assert (f.low, f.high, f.step, f.integer) == (0.0, 1.0, 0.25, False)
    assert parse_range("retriever.top_k=2:8").step == 1
    for bad in ("chunk_size=400", "x=5:1", "a.b=1:2:3:4"):
        with pytest.raises(ConfigError):
            parse_range(bad)


def test_split_is_stratified_disjoint_and_seeded():
    from lab.evalsets.evalset import EvalRow

    rows = [EvalRow(id=f"q{i}", question="q?", keywords=["k"], reference_answer="a",
                    category="a" if i < 8 else "b") for i in range(12)]
    dev, held = split_rows(rows, 0.5, 13)
    assert len(dev) == 6 and len(held) == 6 and not {r.id for r in dev} & {r.id for r in held}
    assert sum(r.category == "a" for r in dev) == 4  # 8 of 12 are "a": two thirds of 6
    assert [r.id for r in split_rows(rows, 0.5, 13)[0]] == [r.id for r in dev]


@pytest.mark.slow
def test_optimize_searches_checks_held_out_and_writes_a_config(project):
    p = lab(project, "optimize", "small-retrieval", "--trials", "4", "--space", "chunker.chunk_size=150:250:50",
            "--space", "retriever.top_k=1:3", "--seed", "3")
    assert p.returncode == 0, p.stderr
    folder = project / "reports" / "_optimize" / "small-retrieval-mrr"
    s = json.loads((folder / "optimize.json").read_text())
    assert (s["n_dev"], s["n_held_out"]) == (3, 3) and len(s["points"]) == 4
    dev_ids = [json.loads(x)["id"] for x in (folder / "dev.jsonl").read_text().splitlines()]
    held_ids = [json.loads(x)["id"] for x in (folder / "held-out.jsonl").read_text().splitlines()]
    assert sorted(dev_ids + held_ids) == ["f1", "f2", "f3", "f4", "f5", "f6"]
    best = s["points"][s["best"]]
    assert best["metrics"]["mrr"] == max(p["metrics"]["mrr"] for p in s["points"])
    h = s["held_out"]
    assert {"best", "base", "paired", "optimism"} <= set(h) and 0 <= h["best"]["mrr"] <= 1
    assert h["optimism"] == pytest.approx(best["metrics"]["mrr"] - h["best"]["mrr"])
    assert (h["paired"]["n"], h["paired"]["delta"]) == (3, pytest.approx(h["best"]["mrr"] - h["base"]["mrr"]))
    assert h["base_point"] == {"chunker.chunk_size": 200, "retriever.top_k": 3}  # small-retrieval's own
    cfg = yaml.safe_load((project / "experiments" / "small-retrieval-optimized.yaml").read_text())
    assert cfg["extends"] == "small-retrieval"
    assert cfg["chunker"]["chunk_size"] == best["point"]["chunker.chunk_size"]
    assert cfg["retriever"]["top_k"] == best["point"]["retriever.top_k"]
    assert "held-out" in p.stdout and "<- best" in p.stdout
    again = lab(project, "run", "small-retrieval-optimized", "--no-progress")  # the written config runs
    assert again.returncode == 0, again.stderr
