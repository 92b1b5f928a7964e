"""Comparing runs: deltas, and warnings whenever figures are not comparable."""

import json

import pytest

from lab.errors import LabError
from lab.paths import resolve_run
from lab.report.compare import table, warnings


def run(name="turn13", run_id="20261122-100000", mrr=0.5, acc=3.0, judge="qwen2.5-coder-1.5b-instruct",
        prompt="judge-v1", fp="aaaa", eval_sha="e1", k=10, n=20):
    return {
        "name": name, "run_id": run_id, "config_fingerprint": fp,
        "data": {"eval_sha256": eval_sha},
        "sample": {"n_questions": n, "n_total": 121, "limit": n, "seed": 13},
        "metrics": {"k": k, "overall": {"mrr": {"mean": mrr, "n": n}, "accuracy": {"mean": acc, "n": n}}},
        "models": {"judge": {"backend": "llama_cpp", "model": judge, "fingerprint": judge, "prompt_version": prompt,
                             "prompt_sha256": "x", "temperature": 0.0, "max_tokens": 160}},
    }


def test_comparable_runs_have_no_warning_and_deltas_against_the_first():
    a, b = run(), run(name="turn18", mrr=0.75, acc=2.5, fp="bbbb")
    assert warnings([a, b]) == []
    lines = table([a, b])
    assert lines[1].split() == ["mrr", "0.5000", "0.7500", "(+0.2500)", "▲"]
    assert lines[2].split() == ["accuracy", "3.0000", "2.5000", "(-0.5000)", "▼"]


def test_a_different_judge_is_said():
    w = warnings([run(), run(name="turn18", judge="gpt-4.1-nano")])
    assert w == ["judged by different judges, so answer scores are not comparable: "
                 "turn13 qwen2.5-coder-1.5b-instruct (judge-v1), turn18 gpt-4.1-nano (judge-v1)"]
    assert "different judges" in warnings([run(), run(name="turn18", prompt="judge-v2")])[0]


@pytest.mark.parametrize("change, says", [
    ({"eval_sha": "e2"}, "different eval sets"),
    ({"n": 30}, "different questions"),
    ({"k": 5}, "different metric k"),
    ({"fp": "cccc", "name": "turn13"}, "turn13 was run with 2 different resolved configs"),
])
def test_other_reasons_not_to_compare(change, says):
    b = run(**{"name": "turn18", **change})
    assert any(says in w for w in warnings([run(), b]))


def test_resolve_by_name_or_folder(tmp_path):
    folder = tmp_path / "turn13" / "20261122-100000"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(run()))
    (tmp_path / "turn13" / "LATEST").write_text("20261122-100000\n")
    assert resolve_run("turn13", tmp_path) == folder == resolve_run(str(folder), tmp_path)
    assert resolve_run(str(tmp_path / "turn13" / "LATEST"), tmp_path) == folder
    with pytest.raises(LabError, match="neither a run folder nor an experiment"):
        resolve_run("nope", tmp_path)


def test_compare_says_a_mean_over_fewer_questions():
    def run(name, mrr, n_mrr, span):
        return {"name": name, "run_id": "20261125-100000", "sample": {"n_questions": 12},
                "metrics": {"overall": {"mrr": {"mean": mrr, "n": n_mrr}, "span_mrr": {"mean": span, "n": 12}}}}

    lines = table([run("bm25", 0.5, 5, 0.75), run("hybrid", 0.5, 5, 0.8)])
    assert lines[1].split() == ["mrr", "0.5000", "n=5", "0.5000", "(+0.0000)", "n=5"]
    assert lines[2].split() == ["span_mrr", "0.7500", "0.8000", "(+0.0500)", "▲"]
