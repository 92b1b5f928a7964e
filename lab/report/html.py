"""Render ``report.html`` from ``results.json`` + ``samples.jsonl``: a pure function of the files."""

from __future__ import annotations

import json
import os
from pathlib import Path

PERCENT_METRICS = {"mrr", "ndcg", "coverage"}
SCORE_METRICS = {"accuracy", "completeness", "relevance"}
LABELS = {"mrr": "MRR", "ndcg": "nDCG", "coverage": "Coverage", "context_chars": "Context chars",
          "accuracy": "Accuracy", "completeness": "Completeness", "relevance": "Relevance",
          "answer_chars": "Answer chars", "sent_context_chars": "Context sent (chars)",
          "ragas_faithfulness": "Faithfulness (ragas)", "ragas_answer_relevancy": "Answer relevancy (ragas)",
          "ragas_context_precision": "Context precision (ragas)", "ragas_context_recall": "Context recall (ragas)"}
#: Dashboard thresholds of the InsureLLM exercise: green >= 0.9, amber >= 0.75 for shares of 1;
#: green >= 4.5, amber >= 4.0 for the judge's 1-5 scores.
THRESHOLDS = {"mrr": (0.9, 0.75), "ndcg": (0.9, 0.75), "coverage": (0.9, 0.75),
              "accuracy": (4.5, 4.0), "completeness": (4.5, 4.0), "relevance": (4.5, 4.0)}


def load_run(run_dir: Path) -> tuple[dict, list[dict]]:
    results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    with open(run_dir / "samples.jsonl", encoding="utf-8") as fh:
        samples = [json.loads(line) for line in fh if line.strip()]
    return results, samples


def fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "-"
    if metric in SCORE_METRICS:
        return f"{value:.2f}"
    if metric.startswith("ragas_"):
        return f"{value:.3f}"
    if metric in PERCENT_METRICS:
        return f"{value:.4f}" if metric != "coverage" else f"{100 * value:.1f}%"
    return f"{value:,.0f}"


def level(metric: str, value: float | None) -> str:
    if value is None or metric not in THRESHOLDS:
        return "neutral"
    good, ok = THRESHOLDS[metric]
    return "good" if value >= good else "ok" if value >= ok else "bad"


def _environment():
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(loader=PackageLoader("lab.report", "templates"), autoescape=select_autoescape(["html"]))
    env.filters["fmt"] = lambda v, m: fmt(m, v)
    env.globals.update(level=level, labels=LABELS)
    return env


def render_run(run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` (atomically) and return its path."""
    from lab.metrics.aggregate import SMALL_CATEGORY

    results, samples = load_run(run_dir)
    computed = results["metrics"]["overall"]
    metrics = [m for m in LABELS if m in computed]
    html = _environment().get_template("run.html").render(
        r=results,
        samples=samples,
        metrics=metrics,
        chart_metrics=[m for m in ("mrr", "ndcg", "accuracy", "completeness") if m in computed],
        score_metrics=SCORE_METRICS,
        small=SMALL_CATEGORY,
    )
    out = run_dir / "report.html"
    tmp = run_dir / f".report.html.tmp-{os.getpid()}"
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, out)
    return out
