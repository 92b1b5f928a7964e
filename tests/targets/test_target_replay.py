"""A ``replay`` target: recorded outputs in each format, looked up by id then by question text; a
question with no record is a failed row; another run's samples replayed score as that run did."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.config import TargetConfig
from lab.errors import ConfigError
from lab.targets.contract import TargetCallError
from lab.targets.replay import ReplayTarget
from runs import lab, latest, load
from test_target_python import _diff_target

Q2 = "How much does the Ember 90 cost?"


def _target(tmp_path: Path, name: str, text: str, **cfg) -> ReplayTarget:
    path = tmp_path / name
    path.write_text(text)
    return ReplayTarget(TargetConfig(replay=str(path), **cfg), path)


def test_formats_told_apart_and_read(tmp_path):
    log = _target(tmp_path, "log.jsonl", json.dumps({"id": "f2", "question": Q2, "answer": "8,400 euros",
                                                    "contexts": ["costs 8,400 euros."],
                                                    "usage": {"cost_usd": 0.01}}) + "\n")
    assert log.format == "log"
    assert log.ask("anything", [], "f2") == {"answer": "8,400 euros", "contexts": [
        {"text": "costs 8,400 euros.", "source": None, "id": None, "score": None, "start": None, "end": None}],
        "candidates": None, "usage": {"cost_usd": 0.01}}
    ragas = _target(tmp_path, "ragas.json", json.dumps({"samples": [
        {"user_input": "how much does the  EMBER 90 cost?", "retrieved_contexts": ["a", "b"], "response": "8,400",
         "reference": "8,400 euros"}]}))
    assert ragas.format == "ragas"
    reply = ragas.ask(Q2, [], "no-such-id")  # by text, whitespace and case folded
    assert reply["answer"] == "8,400" and [c["text"] for c in reply["contexts"]] == ["a", "b"]
    deepeval = _target(tmp_path, "cases.json", json.dumps({"test_cases": [
        {"input": Q2, "actual_output": "It costs 8,400 euros.", "retrieval_context": ["costs 8,400 euros."]}]}))
    assert deepeval.format == "deepeval" and deepeval.ask(Q2, [], "x")["answer"] == "It costs 8,400 euros."
    run = _target(tmp_path, "samples.jsonl", json.dumps({
        "id": "f2", "question": Q2, "answer": {"status": "ok", "text": "8,400 euros.", "prompt_tokens": 7,
                                               "completion_tokens": 3},
        "retrieved": [{"text": "costs 8,400 euros.", "source": "products/ember90.md", "id": "n1", "score": 0.5,
                       "start_char_idx": 104, "end_char_idx": 122}]}) + "\n")
    assert run.format == "run"
    reply = run.ask(Q2, [], "f2")
    assert reply["contexts"][0] == {"text": "costs 8,400 euros.", "source": "products/ember90.md", "id": "n1",
                                    "score": 0.5, "start": 104, "end": 122}
    assert reply["usage"] == {"prompt_tokens": 7, "completion_tokens": 3}


def test_missing_rows_and_fields_fail_the_row(tmp_path):
    ragas = _target(tmp_path, "r.jsonl", json.dumps({"user_input": Q2, "retrieved_contexts": ["a"]}) + "\n")
    with pytest.raises(TargetCallError, match=r"no recorded output for this question in r.jsonl \(1 rows"):
        ragas.ask("Who founded Brightwater Kilns?", [], "f1")
    with pytest.raises(TargetCallError, match=r"'answer' \(the answer\) is null, not a string"):
        ragas.ask(Q2, [], "f2")  # recorded without a response, and answers were asked for
    contexts_only = _target(tmp_path, "r2.jsonl", json.dumps({"user_input": Q2, "retrieved_contexts": ["a"]}) + "\n",
                            answers=False)
    assert contexts_only.ask(Q2, [], "f2")["answer"] is None
    with pytest.raises(ConfigError, match="cannot tell the format"):
        _target(tmp_path, "odd.jsonl", json.dumps({"prompt": "x"}) + "\n")


@pytest.mark.slow
def test_another_runs_samples_replayed_score_as_that_run(project):
    proc = lab(project, "run", "small-retrieval", "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    native = latest(project, "small-retrieval")
    (project / "experiments" / "replayed.yaml").write_text(
        "schema_version: 1\ndata:\n  knowledge_base: kb\n  eval_set: eval.jsonl\ntarget:\n"
        f"  replay: {native / 'samples.jsonl'}\njudge: null\ngeneration: null\n")
    proc = lab(project, "run", "replayed", "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    replayed = latest(project, "replayed")
    assert _diff_target().differences(native, replayed) == []
    t = load(replayed)[0]["target"]
    assert (t["kind"], t["format"], t["rows"], t["called"], t["failed"]) == ("replay", "run", 6, 6, 0)
    # a ragas dataset with responses: answers recorded, a question it lacks is a failed row, and
    # `lab compare` reads the two runs side by side
    rows = [{"user_input": s["question"], "retrieved_contexts": [r["text"] for r in s["retrieved"]],
             "response": "recorded answer"} for s in load(native)[1][:5]]
    (project / "ragas.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (project / "experiments" / "ragas-rows.yaml").write_text(
        "schema_version: 1\ndata:\n  knowledge_base: kb\n  eval_set: eval.jsonl\ntarget:\n"
        "  replay: ragas.jsonl\njudge: null\n")
    proc = lab(project, "run", "ragas-rows", "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    results, samples = load(latest(project, "ragas-rows"))
    assert results["target"]["failed_ids"] == ["f6"] and results["answers"]["n"] == 6
    assert [s["answer"]["text"] for s in samples[:5]] == ["recorded answer"] * 5
    assert results["metrics"]["overall"]["mrr"]["n"] == 5
    proc = lab(project, "compare", "small-retrieval", "ragas-rows")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ragas-rows" in proc.stdout
