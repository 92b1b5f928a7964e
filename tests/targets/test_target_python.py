"""A ``python`` target end to end, in a copy of the fixture project: a plain callable scored by the
lab's metrics (values by hand), its replies cached per target identity, resumed and refreshed,
a question whose call raises recorded as a failed row, every call failing exiting 3, a bad
``target:`` section exiting 2 naming the field; and the identity check: the fixture's own query
engine as a target gives the native run's samples."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from runs import ROOT, lab, latest, load

RAG = '''
from pathlib import Path

HERE = Path(__file__).parent
ABOUT = (HERE / "kb" / "company" / "about.md").read_text()


def answer(question, history):
    with open(HERE / "calls.txt", "a") as fh:
        fh.write(question + "\\n")
    if "Ghent" in question:
        raise RuntimeError("the index is offline")
    ember = (HERE / "kb" / "products" / "ember90.md").read_text()
    return {"answer": "It costs 8,400 euros [1].",
            "contexts": [{"text": ember[100:130], "source": "products/ember90.md"},
                         "Odile Ferrand is the chief executive.  Marco Feltri leads engineering and reports to her.",
                         "This sentence is nowhere in the knowledge base."]}


def broken(question, history):
    raise ValueError("no model loaded")
'''

CONFIG = '''schema_version: 1
data:
  knowledge_base: kb
  eval_set: eval.jsonl
target:
  python: my_rag:{attr}
  version: "1"
judge: null
'''


def _project(project: Path, attr: str = "answer") -> Path:
    (project / "my_rag.py").write_text(RAG)
    (project / "experiments" / "mine.yaml").write_text(CONFIG.format(attr=attr))
    return project


def _calls(project: Path) -> list[str]:
    path = project / "calls.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_callable_scored_cached_resumed_refreshed(project):
    _project(project)
    proc = lab(project, "run", "mine", "--retrieval-only", "--dry-run")  # asks nothing
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "  target     python my_rag:answer (version 1): 6 questions, contexts only; 0 cached (no call), 6 to ask: " \
           "its time is not known until it has answered (try --limit 5 first)" in proc.stdout
    assert _calls(project) == []
    proc = lab(project, "run", "mine", "--retrieval-only", "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    results, samples = load(latest(project, "mine"))
    by_id = {s["id"]: s for s in samples}
    # mrr by hand: f1 "Odile Ferrand" at rank 2, "2009" nowhere: (1/2 + 0) / 2; f2 "8,400" at rank 1;
    # f4 "Marco Feltri" at rank 2: 1/4; f5 neither number: 0; f6 both at rank 2: 1/2. f3 failed: n/a
    assert [by_id[q]["metrics"]["mrr"] for q in ("f1", "f2", "f3", "f4", "f5", "f6")] == [0.25, 1.0, None, 0.25, 0.0, 0.5]
    assert results["metrics"]["overall"]["mrr"] == {"mean": (0.25 + 1 + 0.25 + 0 + 0.5) / 5, "n": 5}
    # f2's golden span (104, 122) lies inside the first context, located exactly at 100..130 of its document
    assert by_id["f2"]["retrieved"][0]["start_char_idx"] == 100 and by_id["f2"]["retrieved"][0]["end_char_idx"] == 130
    assert by_id["f2"]["metrics"]["span_recall"] == 1.0 and by_id["f2"]["metrics"]["span_mrr"] == 1.0
    about = (project / "kb" / "company" / "about.md").read_text()
    at = about.find("Odile Ferrand is the chief executive.")  # the second context differs by a double space
    assert by_id["f1"]["retrieved"][1]["start_char_idx"] == at
    assert by_id["f1"]["target"]["located"] == ["exact", "tolerant", "not_located"]
    t = results["target"]
    assert t["contexts"] == {"n": 15, "given": 0, "exact": 5, "tolerant": 5, "not_located": 5}
    assert (t["kind"], t["where"], t["version"], t["failed"], t["failed_ids"]) == ("python", "my_rag:answer", "1", 1, ["f3"])
    assert t["errors"] == {"f3": "RuntimeError: the index is offline"} and by_id["f3"]["target"]["status"] == "failed"
    assert results["not_scored"]["mrr"] == {"n": 1, "why": "the target's call failed", "ids": ["f3"]}
    assert results["funnel"]["not_observed"] == ["chunking", "first_stage", "second_stage", "budget"]
    assert "retrieval" in results["funnel"]["stages"]
    assert len(_calls(project)) == 6
    proc = lab(project, "run", "mine", "--retrieval-only", "--dry-run")  # the failed question is the one to ask
    assert re.search(r"6 questions, contexts only; 5 cached \(no call\), 1 to ask, about \d+ s \(\d+\.\d\d s a question, "
                     r"the median of 5 cached replies, 1 at a time\)", proc.stdout), proc.stdout
    assert len(_calls(project)) == 6

    # a rerun asks only the question that failed; --refresh asks every question again
    proc = lab(project, "run", "mine", "--retrieval-only", "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(_calls(project)) == 7
    assert load(latest(project, "mine"))[0]["target"]["cached"] == 5
    proc = lab(project, "run", "mine", "--retrieval-only", "--no-progress", "--refresh")
    assert proc.returncode == 0 and len(_calls(project)) == 13

    # a new version is a new identity: asked again, and the fingerprint changes with it
    before = results["config_fingerprint"]
    (project / "experiments" / "mine.yaml").write_text(CONFIG.format(attr="answer").replace('"1"', '"2"'))
    proc = lab(project, "run", "mine", "--retrieval-only", "--no-progress")
    assert proc.returncode == 0 and len(_calls(project)) == 19
    after = load(latest(project, "mine"))[0]
    assert after["config_fingerprint"] != before and after["target"]["identity"] != t["identity"]


def test_answers_recorded_without_judge(project):
    _project(project)
    proc = lab(project, "run", "mine", "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    results, samples = load(latest(project, "mine"))
    s = next(s for s in samples if s["id"] == "f2")
    assert s["answer"]["text"] == "It costs 8,400 euros [1]." and s["answer"]["citations"] == [1]
    assert s["answer"]["cited_sources"] == ["products/ember90.md"]
    assert s["context"]["n_passages"] == 3 and s["metrics"]["sent_context_chars"] == s["metrics"]["context_chars"]
    assert results["answers"]["failed_ids"] == ["f3"] and results["answers"]["n"] == 6
    page = (latest(project, "mine") / "report.html").read_text()
    assert "<td>target</td><td>python: my_rag:answer" in page and "version 1" in page
    proc = lab(project, "funnel", "mine")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "mine: cannot see chunking (not observed: the target does not expose it)" in proc.stdout
    assert "retrieval (stage not recorded)" in proc.stdout


def test_every_call_failing_exits_3(project):
    _project(project, "broken")
    proc = lab(project, "run", "mine", "--retrieval-only", "--no-progress")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "every call to the target failed (6 of 6): ValueError: no model loaded" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (latest(project, "mine") / "results.json").is_file()  # the run is kept


def test_bad_target_section_exits_2_naming_the_field(project):
    _project(project)
    cases = {
        "  python: my_rag:answer\n  http: http://127.0.0.1:9/rag\n": "field 'target': Value error, give exactly one of",
        "  python: no_such_module:answer\n": "field 'target.python': cannot import 'no_such_module'",
        "  python: my_rag:nothing\n": "field 'target.python': my_rag has no 'nothing'",
        "  http: http://127.0.0.1:9/rag\n  headers:\n    Authorization: Bearer abc\n": "field 'target.headers'",
    }
    for body, expected in cases.items():
        (project / "experiments" / "bad.yaml").write_text(
            "schema_version: 1\ndata:\n  knowledge_base: kb\n  eval_set: eval.jsonl\ntarget:\n" + body + "judge: null\n")
        proc = lab(project, "run", "bad", "--retrieval-only", "--no-progress")
        assert proc.returncode == 2, (body, proc.stderr)
        assert expected in proc.stderr, (body, proc.stderr)
        assert "Traceback" not in proc.stderr and not (project / "reports" / "bad").exists()
    (project / "experiments" / "bad.yaml").write_text(
        "schema_version: 1\nextends: small\ntarget:\n  python: my_rag:answer\n")
    proc = lab(project, "run", "bad", "--no-progress")
    assert proc.returncode == 2 and "a target replaces the pipeline, but chunker, retriever, generation are set" in proc.stderr


def _diff_target():
    spec = importlib.util.spec_from_file_location("diff_target", ROOT / "scripts" / "diff_target.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["diff_target"] = module
    spec.loader.exec_module(module)
    return module


def test_identity_of_the_labs_own_query_engine(project):
    """The fixture's pipeline and its query engine as a target: every question's passages, ranks,
    offsets, scores and metrics equal (retrieval only; scripts/diff_target.py)."""
    (project / "experiments" / "small-target.yaml").write_text(
        "schema_version: 1\ndata:\n  knowledge_base: kb\n  eval_set: eval.jsonl\ntarget:\n"
        "  python: lab.rag.pipeline:query_engine\n  kwargs:\n    name: small\n  version: small\nmetrics:\n  k: 10\n")
    for name in ("small", "small-target"):
        proc = lab(project, "run", name, "--retrieval-only", "--no-progress")
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert _diff_target().differences(latest(project, "small"), latest(project, "small-target")) == []
    results, _ = load(latest(project, "small-target"))
    assert results["target"]["adapter"] == "llama-query-engine"
    assert results["target"]["contexts"]["given"] == results["target"]["contexts"]["n"] > 0
