"""Render ``report.html`` from ``results.json`` + ``samples.jsonl``: a pure function of the files."""

from __future__ import annotations

import json
import os
from pathlib import Path

PERCENT_METRICS = {"mrr", "ndcg", "coverage"}
LABELS = {"mrr": "MRR", "ndcg": "nDCG", "coverage": "Coverage", "context_chars": "Context chars"}
#: Dashboard thresholds of the InsureLLM exercise (share of 1): green >= 0.9, amber >= 0.75.
THRESHOLDS = {"mrr": (0.9, 0.75), "ndcg": (0.9, 0.75), "coverage": (0.9, 0.75)}


def load_run(run_dir: Path) -> tuple[dict, list[dict]]:
    results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    with open(run_dir / "samples.jsonl", encoding="utf-8") as fh:
        samples = [json.loads(line) for line in fh if line.strip()]
    return results, samples


def fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "-"
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
    html = _environment().get_template("run.html").render(
        r=results,
        samples=samples,
        metrics=["mrr", "ndcg", "coverage", "context_chars"],
        chart_metrics=["mrr", "ndcg"],
        small=SMALL_CATEGORY,
    )
    out = run_dir / "report.html"
    tmp = run_dir / f".report.html.tmp-{os.getpid()}"
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, out)
    return out
