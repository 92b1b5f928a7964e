"""Render ``report.html`` from ``results.json`` + ``samples.jsonl``: a pure function of the files.

The page is one self-contained file: styles, the table script and the charts (inline SVG) are
in it, so it opens from disk with no network. Every text from the knowledge base, the eval set
or a model goes through Jinja's autoescaping.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from lab.report.stats import bootstrap_ci

PERCENT_METRICS = {"mrr", "ndcg", "coverage", "span_precision", "span_recall", "span_iou", "label_recall",
                   "label_mrr"}
SCORE_METRICS = {"accuracy", "completeness", "relevance"}
LABELS = {"mrr": "MRR", "ndcg": "nDCG", "coverage": "Coverage", "context_chars": "Context chars",
          "span_precision": "Span precision", "span_recall": "Span recall", "span_iou": "Span IoU",
          "label_recall": "Recall@k (labels)", "label_mrr": "MRR@k (labels)",
          "accuracy": "Accuracy", "completeness": "Completeness", "relevance": "Relevance",
          "answer_chars": "Answer chars", "sent_context_chars": "Context sent (chars)",
          "ragas_faithfulness": "Faithfulness (ragas)", "ragas_answer_relevancy": "Answer relevancy (ragas)",
          "ragas_context_precision": "Context precision (ragas)", "ragas_context_recall": "Context recall (ragas)"}
#: Higher is better for these; the others (sizes) are shown without a direction.
HIGHER_IS_BETTER = {"mrr", "ndcg", "coverage", "span_precision", "span_recall", "span_iou", "label_recall",
                    "label_mrr", "accuracy",
                    "completeness", "relevance", "ragas_faithfulness", "ragas_answer_relevancy",
                    "ragas_context_precision", "ragas_context_recall"}
#: Dashboard thresholds of the InsureLLM exercise: green >= 0.9, amber >= 0.75 for shares of 1;
#: green >= 4.5, amber >= 4.0 for the judge's 1-5 scores. A config's ``report.thresholds``
#: overrides them per metric.
THRESHOLDS = {"mrr": (0.9, 0.75), "ndcg": (0.9, 0.75), "coverage": (0.9, 0.75),
              "accuracy": (4.5, 4.0), "completeness": (4.5, 4.0), "relevance": (4.5, 4.0)}
CHART_METRICS = ("mrr", "ndcg", "accuracy", "completeness")
COLOURS = {"good": "#2e9d5b", "ok": "#e0a526", "bad": "#d64545", "neutral": "#7b8499"}


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


def fmt_delta(metric: str, delta: float | None) -> str:
    if delta is None:
        return "-"
    if metric == "coverage":
        return f"{100 * delta:+.1f} pt"
    if metric in SCORE_METRICS:
        return f"{delta:+.2f}"
    if metric in PERCENT_METRICS or metric.startswith("ragas_"):
        return f"{delta:+.4f}"
    return f"{delta:+,.0f}"


def thresholds(results: dict) -> dict[str, tuple[float, float]]:
    own = ((results.get("config") or {}).get("report") or {}).get("thresholds") or {}
    return {**THRESHOLDS, **{m: tuple(v) for m, v in own.items()}}


def make_level(limits: dict[str, tuple[float, float]]):
    def level(metric: str, value: float | None) -> str:
        if value is None or metric not in limits:
            return "neutral"
        good, ok = limits[metric]
        return "good" if value >= good else "ok" if value >= ok else "bad"

    return level


def level(metric: str, value: float | None) -> str:
    """The colour class of ``value`` under the default thresholds."""
    return make_level(THRESHOLDS)(metric, value)


def values(samples: list[dict], metric: str, category: str | None = None) -> list[float]:
    """Per-question values of ``metric`` (numbers only, as the means in results.json use)."""
    return [s["metrics"][metric] for s in samples
            if isinstance(s["metrics"].get(metric), (int, float)) and not isinstance(s["metrics"][metric], bool)
            and (category is None or s["category"] == category)]


def run_view(results: dict, samples: list[dict]) -> dict:
    """What the page shows beyond the files' own fields: intervals, colours, filters."""
    from lab.metrics.aggregate import SMALL_CATEGORY

    lv = make_level(thresholds(results))
    computed = results["metrics"]["overall"]
    metrics = [m for m in LABELS if m in computed]
    cards = [{"metric": m, "label": LABELS[m], "mean": computed[m]["mean"], "n": computed[m]["n"],
              "ci": bootstrap_ci(values(samples, m)), "level": lv(m, computed[m]["mean"])} for m in metrics]
    categories = []
    for cat, row in results["metrics"]["by_category"].items():
        cells = {m: {"mean": row[m]["mean"], "n": row[m]["n"], "level": lv(m, row[m]["mean"]),
                     "ci": bootstrap_ci(values(samples, m, cat))} for m in metrics if m in row}
        categories.append({"name": cat, "n": row["n"], "small": row["n"] < SMALL_CATEGORY, "cells": cells,
                           "judge_failed": row.get("judge_failed", 0)})
    table_metrics = [m for m in ("mrr", "ndcg", "coverage", "span_iou", "accuracy", "completeness", "relevance")
                     if m in computed]
    return {
        "metrics": metrics,
        "cards": cards,
        "categories": categories,
        "charts": [chart(m, categories, lv) for m in CHART_METRICS if m in computed],
        "table_metrics": table_metrics,
        "small": SMALL_CATEGORY,
        "thresholds": {m: t for m, t in thresholds(results).items() if m in computed},
    }


def chart(metric: str, categories: list[dict], lv) -> dict:
    """A horizontal bar per category with its 95% interval as a whisker (drawn as inline SVG)."""
    top = 5.0 if metric in SCORE_METRICS else 1.0
    width = 330
    bars = []
    for i, c in enumerate(categories):
        cell = c["cells"].get(metric) or {}
        mean = cell.get("mean")
        ci = cell.get("ci")
        bars.append({
            "y": 24 + 22 * i, "label": c["name"], "n": c["n"], "small": c["small"],
            "w": 0 if mean is None else width * mean / top,
            "lo": None if ci is None else width * ci[0] / top, "hi": None if ci is None else width * ci[1] / top,
            "text": fmt(metric, mean), "colour": COLOURS[lv(metric, mean)],
        })
    return {"metric": metric, "label": LABELS[metric], "width": width, "height": 34 + 22 * len(bars), "bars": bars}


def _environment():
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(loader=PackageLoader("lab.report", "templates"), autoescape=select_autoescape(["html"]))
    env.filters["fmt"] = lambda v, m: fmt(m, v)
    env.filters["fmt_delta"] = lambda v, m: fmt_delta(m, v)
    env.globals.update(labels=LABELS, score_metrics=SCORE_METRICS, higher_is_better=HIGHER_IS_BETTER)
    return env


def failure_kinds(s: dict) -> list[str]:
    """Why a question counts as a failure in the report's filter."""
    out = []
    if (s.get("answer") or {}).get("status") == "failed":
        out.append("answer")
    if (s.get("judgement") or {}).get("status") == "failed":
        out.append("judge")
    if s["metrics"].get("mrr") == 0:
        out.append("miss")
    if (s.get("answer") or {}).get("refused"):
        out.append("refused")
    if s.get("low_confidence"):
        out.append("guarded")
    return out


def write_atomic(path: Path, text: str) -> None:
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def render_run(run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` and the per-question exports (atomically); return the page."""
    from lab.report.export import write_exports

    results, samples = load_run(run_dir)
    view = run_view(results, samples)
    html = _environment().get_template("run.html").render(
        r=results, samples=samples, v=view, level=make_level(thresholds(results)), failure_kinds=failure_kinds,
    )
    write_exports([(results, samples)], run_dir)
    out = run_dir / "report.html"
    write_atomic(out, html)
    return out
