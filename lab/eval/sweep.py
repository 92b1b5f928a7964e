"""``lab sweep``: one experiment over a grid of numeric dials, the index reused, the best point
checked on questions it was not chosen on.

Every point is the experiment's config with the dials set (``--set retriever.alpha=0,0.5,1``;
several ``--set`` make a grid), validated like any config, run like ``lab run`` (retrieval only
unless asked) into ``reports/_sweep/<NAME>-<dials>/<point>/``. Points that differ only in
retrieval dials share one index and the embedding cache, so a sweep embeds nothing the
experiment has embedded before.

By default the questions are split as ``lab optimize`` splits them (:mod:`lab.evalsets.holdout`:
stratified, seeded, half for dev): every point runs on the dev questions, and the best point
and the base experiment then both run on the held-out ones (``held-out/``), with a paired test
between them and the optimism of the choice. ``--no-holdout`` runs every point on every question
and flags the best point as optimistic. The sweep writes ``sweep.json``, ``sweep.csv`` and
``sweep.html`` (a chart of the metric per value, and the held-out check).
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

from lab.config import ExperimentConfig, load_experiment, merge, retrieval_only, set_path
from lab.errors import ConfigError
from lab.evalsets.holdout import DEV_FRACTION, half_overrides, held_out_check, write_split
from lab.eval.parallel import Workers
from lab.runfiles import overall_means, read_results
from lab.eval.runner import RunOptions, run_experiment
from lab.metrics import catalog
from lab.metrics.catalog import DEFAULT_METRIC
from lab.paths import inside, write_atomic
from lab.report.sweep import OPTIMISTIC, held_out_lines, point_label, render_sweep

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
    values = []
    for v in m.group(2).split(","):
        if not v.strip():
            continue
        try:
            values.append(yaml.safe_load(v))
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set {spec!r}: the value {v!r} is not valid YAML ({getattr(exc, 'problem', None) or exc})",
                              hint="quote text that holds quotes, brackets or a leading * or &: --set 'description=\"x\"' "
                                   "(values are split at commas, so a list cannot be one)") from None
    if not values:
        raise ConfigError(f"--set {spec!r} lists no values", hint="e.g. --set retriever.top_k=3,5,8")
    return Dial(tuple(m.group(1).split(".")), values)


def points(dials: list[Dial]) -> list[dict[str, Any]]:
    """The grid: every combination, in the order the values were given."""
    return [dict(zip([d.name for d in dials], combo)) for combo in itertools.product(*[d.values for d in dials])]


def point_config(name: str, experiments_dir: Path, dials: list[Dial], point: dict[str, Any], base_overrides: dict,
                 answers: bool) -> ExperimentConfig:
    """One point's validated config (``point`` empty: the base experiment), named after the point."""
    overrides = dict(base_overrides)
    for d in dials:
        if d.name in point:
            overrides = set_path(overrides, d.path, point[d.name])
    if not answers:
        overrides = retrieval_only(overrides)
    label = point_label(point) if point else "base"
    try:
        cfg = load_experiment(name, experiments_dir, overrides)
    except ConfigError as exc:
        raise ConfigError(f"sweep point {label}: {exc.message}", hint=exc.hint) from None
    return cfg.model_copy(update={"name": f"{name}[{label}]"})


def run_sweep(name: str, experiments_dir: Path, dials: list[Dial], base_overrides: dict, opts: RunOptions,
              metric: str = DEFAULT_METRIC, answers: bool = False, holdout: bool = True,
              dev_fraction: float = DEV_FRACTION, workers: int = 1, ray_address: str | None = None,
              force: bool = False) -> Path:
    """Run the grid (on the dev questions unless ``holdout`` is off), then the held-out check;
    the split's seed is the config's ``sample.seed`` (``--seed``, 13 by default). With ``workers``
    > 1 the points, then the held-out runs, are Ray tasks (:mod:`lab.eval.parallel`); the results
    are the same, in the same order."""
    folder = folder_of(opts.reports_root, name, dials)
    base = load_experiment(name, experiments_dir, base_overrides)

    def config(point: dict, half: str | None) -> ExperimentConfig:
        over = merge(base_overrides, half_overrides(folder, half, bool(base.data.labels))) if half else base_overrides
        return point_config(name, experiments_dir, dials, point, over, answers)

    # every point's config, validated before any work: a bad dial fails here
    configs = [(point, config(point, "dev" if holdout else None)) for point in points(dials)]
    check_earlier(folder, dials, force)  # then the folder: an earlier sweep's page is not replaced unasked
    split = write_split(base, opts.project_root, folder, dev_fraction, base.sample.seed) if holdout else None
    folder.mkdir(parents=True, exist_ok=True)
    with Workers(workers, ray_address) as pool:
        show = opts.show_progress and not pool.parallel  # no bars from several processes at once

        def run(cfgs: list[ExperimentConfig], root: Path = folder, desc: str = "sweep") -> list[dict]:
            return pool.map(run_point, [(cfg, opts, root, show) for cfg in cfgs], desc, [c.name for c in cfgs])

        outs = run([cfg for _, cfg in configs])
        rows = [{"point": point, "label": point_label(point), **out} for (point, _), out in zip(configs, outs)]
        best = best_point(rows, metric)
        summary: dict = {"experiment": name, "metric": metric, "dials": {d.name: d.values for d in dials},
                         "best": best, "points": rows, "holdout": split is not None}
        if split is None:
            summary["optimistic"] = OPTIMISTIC
        else:
            summary.update(split.as_dict())
        if split is not None and best is not None:
            # the best point and the base on the held-out questions; the base's dev score is its grid
            # point's when one has its config, else one more run on the dev questions
            held_best, held_base = run([config(rows[best]["point"], "held-out"), config({}, "held-out")],
                                       folder / "held-out", "held-out")
            base_dev = config({}, "dev")
            same = [i for i, (_, cfg) in enumerate(configs) if _same_config(cfg, base_dev)]
            dev_base = rows[same[0]]["metrics"] if same else run([base_dev])[0]["metrics"]
            summary["held_out"] = held_out_check(metric, held_best, held_base, rows[best]["metrics"].get(metric),
                                                 dev_base.get(metric),
                                                 {d.name: config_value(base, d.path) for d in dials})
    write_atomic(folder / "sweep.json", json.dumps(summary, indent=2))
    write_atomic(folder / "sweep.csv", to_csv(summary))
    render_sweep(summary, folder / "sweep.html")
    return folder


def folder_of(reports_root: Path, name: str, dials: list[Dial]) -> Path:
    """``reports/_sweep/<NAME>-<dials>/``: one folder per experiment and set of dials."""
    return inside(reports_root / "_sweep", f"{name}-{'-'.join(d.name for d in dials)}")


def check_earlier(folder: Path, dials: list[Dial], force: bool = False) -> None:
    """Refuse, unless ``force``, to run into ``folder`` when it holds a sweep over other values
    of the dials: this sweep would replace its page and table. The same values again are the same
    sweep, run afresh."""
    page = folder / "sweep.json"
    if force or not page.exists():
        return
    try:
        earlier = json.loads(page.read_text(encoding="utf-8")).get("dials")
    except (OSError, ValueError, AttributeError):
        earlier = None
    wanted = json.loads(json.dumps({d.name: d.values for d in dials}))
    if earlier != wanted:
        were = ", ".join(f"{k}={','.join(map(str, v))}" for k, v in earlier.items()) if isinstance(earlier, dict) \
            else "unreadable values"
        raise ConfigError(f"{folder} holds an earlier sweep over {were}: this one would replace its page",
                          hint="pass --force to replace it, or move the folder away first")


def _same_config(a: ExperimentConfig, b: ExperimentConfig) -> bool:
    return a.model_dump(exclude={"name"}) == b.model_dump(exclude={"name"})


def config_value(cfg: ExperimentConfig, path: tuple[str, ...]) -> Any:
    """The value at a dial's path in a config (None where it has none)."""
    data: Any = cfg.model_dump()
    for part in path:
        data = data.get(part) if isinstance(data, dict) else None
    return data


def run_point(cfg: ExperimentConfig, opts: RunOptions, reports_root: Path, show_progress: bool) -> dict:
    """Run one configuration into ``reports_root`` and read back what a sweep or a search needs."""
    run_dir = run_experiment(cfg, RunOptions(project_root=opts.project_root, reports_root=reports_root,
                                             cache_root=opts.cache_root, show_progress=show_progress))
    results = read_results(run_dir)
    return {"run": str(run_dir), "metrics": overall_means(results),
            "index_reused": results["index"]["reused"], "texts_embedded": results["index"]["texts_embedded"],
            "seconds": results["timings"]["total_s"]}


def best_point(rows: list[dict], metric: str) -> int | None:
    """Index of the row with the highest ``metric`` (the first on ties); None if none has it."""
    scored = [(r["metrics"].get(metric), -i) for i, r in enumerate(rows) if r["metrics"].get(metric) is not None]
    return -max(scored)[1] if scored else None


def to_csv(summary: dict) -> str:
    """One line per point (``questions``: dev, or all without a held-out split), then the best
    point and the base on the held-out questions (``role`` best / base)."""
    rows, held = summary["points"], summary.get("held_out")
    keys = list(summary["dials"])
    metrics = [m for m in SHOWN if rows and m in rows[0]["metrics"]]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(keys + metrics + ["seconds", "index_reused", "texts_embedded", "questions", "role"])
    questions = "dev" if summary.get("holdout") else "all"
    for i, r in enumerate(rows):
        w.writerow([r["point"][k] for k in keys] + [r["metrics"].get(m) for m in metrics]
                   + [round(r["seconds"], 3), r["index_reused"], r["texts_embedded"], questions,
                      "best" if i == summary["best"] else ""])
    if held:
        for role, point in (("best", rows[summary["best"]]["point"]), ("base", held["base_point"])):
            w.writerow([point.get(k) for k in keys] + [held[role].get(m) for m in metrics]
                       + ["", "", "", "held-out", role])
    return buf.getvalue()


def table(summary: dict) -> list[str]:
    """The terminal's summary: the points, the best marked, then the held-out check (or the
    warning that the best point is optimistic)."""
    rows = summary["points"]
    keys = list(summary["dials"])
    metrics = [m for m in SHOWN if rows and m in rows[0]["metrics"]]
    lines = ["".join(f"{k:>22}" for k in keys) + "".join(f"{m:>14}" for m in metrics) + f"{'seconds':>10}"]
    for i, r in enumerate(rows):
        cells = "".join(f"{str(r['point'][k]):>22}" for k in keys)
        cells += "".join(f"{r['metrics'][m]:>14,.0f}" if m == "context_chars" else f"{r['metrics'][m]:>14.4f}"
                         for m in metrics)
        lines.append(cells + f"{r['seconds']:>10.1f}" + ("   <- best " + summary["metric"] if i == summary["best"] else ""))
    return lines + held_out_lines(summary)
