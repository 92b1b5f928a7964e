"""Render ``report.html`` from ``results.json`` + ``samples.jsonl``: a pure function of the files.

The page is one self-contained file: styles, the table script and the charts (inline SVG) are
in it, so it opens from disk with no network. Every text from the knowledge base, the eval set
or a model goes through Jinja's autoescaping.
"""

from __future__ import annotations

import json
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from lab.metrics import catalog
from lab.metrics.aggregate import SMALL_CATEGORY
from lab.metrics.catalog import fmt, fmt_delta
from lab.paths import write_atomic
from lab.report.export import write_exports
from lab.report.stats import bootstrap_ci

CHART_METRICS = catalog.names("chart")
#: Question rows shown at once; more on request. A browser lays out every visible row of a table,
#: and at 10,000 questions that alone took seconds per sort.
PAGE_ROWS = 500
COLOURS = {"good": "#2e9d5b", "ok": "#e0a526", "bad": "#d64545", "neutral": "#7b8499"}


def load_run(run_dir: Path) -> tuple[dict, list[dict]]:
    results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    with open(run_dir / "samples.jsonl", encoding="utf-8") as fh:
        samples = [json.loads(line) for line in fh if line.strip()]
    return results, samples


def thresholds(results: dict) -> dict[str, tuple[float, float]]:
    own = ((results.get("config") or {}).get("report") or {}).get("thresholds") or {}
    return {**catalog.default_thresholds(), **{m: tuple(v) for m, v in own.items()}}


def make_level(limits: dict[str, tuple[float, float]]):
    def level(metric: str, value: float | None) -> str:
        if value is None or metric not in limits:
            return "neutral"
        good, ok = limits[metric]
        return "good" if value >= good else "ok" if value >= ok else "bad"

    return level


def level(metric: str, value: float | None) -> str:
    """The colour class of ``value`` under the default thresholds."""
    return make_level(catalog.default_thresholds())(metric, value)


def values(samples: list[dict], metric: str, category: str | None = None) -> list[float]:
    """Per-question values of ``metric`` (numbers only, as the means in results.json use)."""
    return [s["metrics"][metric] for s in samples
            if isinstance(s["metrics"].get(metric), (int, float)) and not isinstance(s["metrics"][metric], bool)
            and (category is None or s["category"] == category)]


def run_view(results: dict, samples: list[dict]) -> dict:
    """What the page shows beyond the files' own fields: intervals, colours, filters."""
    lv = make_level(thresholds(results))
    computed = results["metrics"]["overall"]
    metrics = [m for m in catalog.by_group() if m in computed]
    cards = [{"metric": m, "label": catalog.METRICS[m].label, "mean": computed[m]["mean"], "n": computed[m]["n"],
              "ci": bootstrap_ci(values(samples, m)), "level": lv(m, computed[m]["mean"])} for m in metrics]
    categories = []
    for cat, row in results["metrics"]["by_category"].items():
        cells = {m: {"mean": row[m]["mean"], "n": row[m]["n"], "level": lv(m, row[m]["mean"]),
                     "ci": bootstrap_ci(values(samples, m, cat))} for m in metrics if m in row}
        categories.append({"name": cat, "n": row["n"], "small": row["n"] < SMALL_CATEGORY, "cells": cells,
                           "judge_failed": row.get("judge_failed", 0)})
    table_metrics = [m for m in catalog.names("table") if m in computed]
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
    top = catalog.top(metric)
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
    return {"metric": metric, "label": catalog.METRICS[metric].label, "width": width, "height": 34 + 22 * len(bars),
            "bars": bars}


def environment() -> Environment:
    """The templates' environment (autoescaping on), with the catalogue's formats and labels."""
    env = Environment(loader=PackageLoader("lab.report", "templates"), autoescape=select_autoescape(["html"]))
    env.filters["fmt"] = lambda v, m: fmt(m, v)
    env.filters["fmt_delta"] = lambda v, m: fmt_delta(m, v)
    env.globals.update(labels=catalog.labels(), score_metrics=set(catalog.names(group="judge")),
                       higher_is_better={m.name for m in catalog.CATALOG if m.higher_is_better})
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


def render_run(run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` and the per-question exports (atomically); return the page."""
    results, samples = load_run(run_dir)
    view = run_view(results, samples)
    html = environment().get_template("run.html").render(
        r=results, samples=samples, v=view, level=make_level(thresholds(results)), failure_kinds=failure_kinds,
        page_rows=PAGE_ROWS,
    )
    write_exports([(results, samples)], run_dir)
    out = run_dir / "report.html"
    write_atomic(out, html)
    return out
