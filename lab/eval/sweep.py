"""``lab sweep``: one experiment over a grid of numeric dials, the index reused.

Every point is the experiment's config with the dials set (``--set retriever.alpha=0,0.5,1``;
several ``--set`` make a grid), validated like any config, run like ``lab run`` (retrieval only
unless asked) into ``reports/_sweep/<NAME>-<dials>/<point>/``. Points that differ only in
retrieval dials share one index and the embedding cache, so a sweep embeds nothing the
experiment has embedded before. The sweep writes ``sweep.json``, ``sweep.csv`` and
``sweep.html`` (a chart of the metric per value) and marks the best point.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lab.config import ExperimentConfig, load_experiment, retrieval_only, set_path
from lab.errors import ConfigError
from lab.eval.records import overall_means, read_results
from lab.eval.runner import RunOptions, run_experiment
from lab.metrics import catalog
from lab.paths import inside, write_atomic
from lab.report.sweep import render_sweep

SHOWN = catalog.names("sweep")


@dataclass
class Dial:
    path: tuple[str, ...]
    values: list[Any]

    @property
    def name(self) -> str:
        return ".".join(self.path)


def parse_dial(spec: str) -> Dial:
    """``retriever.alpha=0,0.25,0.5`` -> Dial(("retriever", "alpha"), [0, 0.25, 0.5])."""
    m = re.fullmatch(r"([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)=(.+)", spec.strip())
    if not m:
        raise ConfigError(f"--set {spec!r} is not PATH=V1,V2,...",
                          hint="e.g. --set retriever.alpha=0,0.25,0.5,0.75,1")
    values = [yaml.safe_load(v) for v in m.group(2).split(",") if v.strip()]
    if not values:
        raise ConfigError(f"--set {spec!r} lists no values", hint="e.g. --set retriever.top_k=3,5,8")
    return Dial(tuple(m.group(1).split(".")), values)


def points(dials: list[Dial]) -> list[dict[str, Any]]:
    """The grid: every combination, in the order the values were given."""
    return [dict(zip([d.name for d in dials], combo)) for combo in itertools.product(*[d.values for d in dials])]


def point_label(point: dict[str, Any]) -> str:
    return ",".join(f"{k.split('.')[-1]}={v}" for k, v in point.items())


def point_configs(name: str, experiments_dir: Path, dials: list[Dial], base_overrides: dict,
                  answers: bool) -> list[tuple[dict, ExperimentConfig]]:
    """Every point's validated config; a bad dial fails here, before any run."""
    out = []
    for point in points(dials):
        overrides = dict(base_overrides)
        for d in dials:
            overrides = set_path(overrides, d.path, point[d.name])
        if not answers:
            overrides = retrieval_only(overrides)
        try:
            cfg = load_experiment(name, experiments_dir, overrides)
        except ConfigError as exc:
            raise ConfigError(f"sweep point {point_label(point)}: {exc.message}", hint=exc.hint) from None
        out.append((point, cfg))
    return out


def run_sweep(name: str, experiments_dir: Path, dials: list[Dial], base_overrides: dict, opts: RunOptions,
              metric: str = "mrr", answers: bool = False) -> Path:
    configs = point_configs(name, experiments_dir, dials, base_overrides, answers)
    folder = inside(opts.reports_root / "_sweep", f"{name}-{'-'.join(d.name for d in dials)}")
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for point, cfg in configs:
        label = point_label(point)
        cfg = cfg.model_copy(update={"name": f"{name}[{label}]"})
        rows.append({"point": point, "label": label, **run_point(cfg, opts, folder, opts.show_progress)})
    best = best_point(rows, metric)
    summary = {"experiment": name, "metric": metric, "dials": {d.name: d.values for d in dials},
               "best": best, "points": rows}
    write_atomic(folder / "sweep.json", json.dumps(summary, indent=2))
    write_atomic(folder / "sweep.csv", to_csv(rows))
    render_sweep(summary, folder / "sweep.html")
    return folder


def run_point(cfg: ExperimentConfig, opts: RunOptions, reports_root: Path, show_progress: bool) -> dict:
    """Run one configuration into ``reports_root`` and read back what a sweep or a search needs."""
    run_dir = run_experiment(cfg, RunOptions(opts.project_root, reports_root, opts.cache_root, show_progress))
    results = read_results(run_dir)
    return {"run": str(run_dir), "metrics": overall_means(results),
            "index_reused": results["index"]["reused"], "texts_embedded": results["index"]["texts_embedded"],
            "seconds": results["timings"]["total_s"]}


def best_point(rows: list[dict], metric: str) -> int | None:
    """Index of the row with the highest ``metric`` (the first on ties); None if none has it."""
    scored = [(r["metrics"].get(metric), -i) for i, r in enumerate(rows) if r["metrics"].get(metric) is not None]
    return -max(scored)[1] if scored else None


def to_csv(rows: list[dict]) -> str:
    keys = list(rows[0]["point"]) if rows else []
    metrics = [m for m in SHOWN if rows and m in rows[0]["metrics"]]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(keys + metrics + ["seconds", "index_reused", "texts_embedded"])
    for r in rows:
        w.writerow([r["point"][k] for k in keys] + [r["metrics"].get(m) for m in metrics]
                   + [round(r["seconds"], 3), r["index_reused"], r["texts_embedded"]])
    return buf.getvalue()


def table(summary: dict) -> list[str]:
    rows = summary["points"]
    keys = list(summary["dials"])
    metrics = [m for m in SHOWN if rows and m in rows[0]["metrics"]]
    lines = ["".join(f"{k:>22}" for k in keys) + "".join(f"{m:>14}" for m in metrics) + f"{'seconds':>10}"]
    for i, r in enumerate(rows):
        cells = "".join(f"{str(r['point'][k]):>22}" for k in keys)
        cells += "".join(f"{r['metrics'][m]:>14,.0f}" if m == "context_chars" else f"{r['metrics'][m]:>14.4f}"
                         for m in metrics)
        lines.append(cells + f"{r['seconds']:>10.1f}" + ("   <- best " + summary["metric"] if i == summary["best"] else ""))
    return lines
