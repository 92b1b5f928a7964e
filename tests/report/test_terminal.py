"""The terminal summary (`lab run`, `lab show`): each metric's own n beside its mean where it
differs from the question count; old runs (no span rank metrics) print as they did."""

from __future__ import annotations

import json

import pytest

from lab.report.terminal import cell, summary_lines
from lab.runfiles import load_run
from report_fixtures import ACC_A, MRR_A, results_for, write_run


@pytest.mark.parametrize("name, stat, n, shown", [
    ("mrr", {"mean": 0.5, "n": 12}, 12, "0.5000"),  # every question scored: no n
    ("mrr", {"mean": 0.5, "n": 5}, 12, "0.5000 (n=5)"),  # keyword MRR over 5 of 12 questions
    ("coverage", {"mean": 0.8, "n": 5}, 12, "80.0% (n=5)"),
    ("span_mrr", {"mean": None, "n": 0}, 12, "-"),  # n/a for all: nothing to qualify
    ("mrr", {"mean": 0.25}, 12, "0.2500"),  # a mean without its n (hand-made results): as before
])
def test_cell(name, stat, n, shown):
    assert cell(name, stat, n) == shown


def _generated_run(tmp_path):
    """Twelve questions: seven without keywords (keyword metrics n/a), every one with a golden
    span; keyword MRR 1, 0.5, 0.5, 0, 0.5 on the five (mean 2.5 / 5 = 0.5); span MRR 1 on the
    first six and 0.5 on the last six (mean 0.75)."""
    samples = []
    for i in range(12):
        keywords = i < 5
        mrr = [1, 0.5, 0.5, 0, 0.5][i] if keywords else None
        samples.append({"id": f"g{i:02d}", "category": "direct_fact" if i < 8 else "temporal",
                        "keywords": ["x"] if keywords else [], "keyword_ranks": {},
                        "metrics": {"mrr": mrr, "ndcg": mrr, "coverage": None if mrr is None else float(mrr > 0),
                                    "span_mrr": 1.0 if i < 6 else 0.5, "context_chars": 100, "judge_failed": 0},
                        "retrieved": [], "judgement": {"status": "ok"}})
    results = results_for("generated", "20261125-100000", samples)
    # results_for averages the fixture's own metrics; the span metric too, as a run would
    from lab.metrics.aggregate import by_category, mean_table

    rows = [{"category": s["category"], **s["metrics"]} for s in samples]
    names = ["mrr", "ndcg", "coverage", "span_mrr", "context_chars"]
    results["metrics"] = {"k": 10, "overall": mean_table(rows, names),
                          "by_category": by_category(rows, names, ["direct_fact", "temporal"])}
    for key in ("judge", "calibration", "llm_usage"):
        results.pop(key)
    folder = tmp_path / "generated" / "20261125-100000"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(results))
    (folder / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    return folder


def test_each_metric_prints_its_own_n(tmp_path):
    lines = summary_lines(*load_run(_generated_run(tmp_path)), intervals=False)
    header = lines[1].split()
    assert header[:6] == ["category", "n", "mrr", "ndcg", "coverage", "span_mrr"]
    overall = next(line for line in lines if line.startswith("overall"))
    # MRR (keywords) over 5 of the 12; coverage 4 of 5; span MRR (6 + 3) / 12 over all of them
    assert overall.split() == ["overall", "12", "0.5000", "(n=5)", "0.5000", "(n=5)", "80.0%", "(n=5)", "0.7500",
                               "100"]
    # direct_fact (8 rows): the five with keywords are all there; span MRR (6 + 1) / 8 = 0.875
    assert next(line for line in lines if line.startswith("direct_fact")).split() == [
        "direct_fact", "8", "0.5000", "(n=5)", "0.5000", "(n=5)", "80.0%", "(n=5)", "0.8750", "100"]
    # temporal (4 rows): no keywords at all, so "-" without an n; span MRR 0.5
    assert next(line for line in lines if line.startswith("temporal")).split() == [
        "temporal", "4", "-", "-", "-", "0.5000", "100"]


def test_an_old_run_prints_as_before(tmp_path):
    """A run from before the span rank metrics: the same columns; only accuracy, whose failed
    judgement (q05) leaves 14 of 15, says its n."""
    lines = summary_lines(*load_run(write_run(tmp_path, "base", "20261122-100000", MRR_A, ACC_A, "A")),
                          intervals=False)
    assert lines[1].split() == ["category", "n", "mrr", "ndcg", "coverage", "context_chars", "accuracy",
                                "completeness", "relevance"]
    overall = next(line for line in lines if line.startswith("overall"))
    assert overall.split()[2:4] == ["0.5833", "0.5833"]  # 8.75 / 15
    assert "(n=14)" in overall and overall.count("(n=") == 3  # accuracy, completeness, relevance

