"""``lab optimize``: search chunk size, overlap and k with Optuna on a dev split, report the
best configuration on a held-out split, and write it out as a new experiment config.

The eval set is split once, stratified by category and seeded, into dev and held-out files
(written into the optimize folder, so every trial's run names the questions it used). Each
trial is a retrieval-only run on the dev questions; trials that repeat a chunking reuse its
index, and chunks whose text was embedded before are served from the embedding cache. The
sampler is Optuna's TPE with a fixed seed, so a search repeats exactly. The best trial and
the base experiment are then both run on the held-out questions: the held-out figures, not the
dev ones, say how much better the found configuration is.
"""

from __future__ import annotations

import json
import logging
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from lab.config import ExperimentConfig, load_experiment, merge, retrieval_only, set_path
from lab.errors import ConfigError
from lab.eval.evalset import EvalRow, load_eval_set, stratified_sample
from lab.eval.runner import RunOptions
from lab.eval.sweep import run_point
from lab.paths import project_path, write_atomic
from lab.report.sweep import render_sweep

log = logging.getLogger(__name__)

DEFAULT_SPACE = ("chunker.chunk_size=400:1600:200", "chunker.chunk_overlap=0:300:50", "retriever.top_k=2:8:1")


@dataclass
class Range:
    path: tuple[str, ...]
    low: float
    high: float
    step: float
    integer: bool

    @property
    def name(self) -> str:
        return ".".join(self.path)


def parse_range(spec: str) -> Range:
    """``chunker.chunk_size=400:1600:200`` (low:high[:step]; integers unless a bound has a dot)."""
    m = re.fullmatch(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)=([-\d.]+):([-\d.]+)(?::([-\d.]+))?", spec.strip())
    if not m:
        raise ConfigError(f"--space {spec!r} is not PATH=LOW:HIGH[:STEP]", hint="e.g. --space chunker.chunk_size=400:1600:200")
    integer = not any("." in (g or "") for g in m.group(2, 3, 4))
    cast = int if integer else float
    low, high = cast(m.group(2)), cast(m.group(3))
    step = cast(m.group(4)) if m.group(4) else (1 if integer else None)
    if low >= high:
        raise ConfigError(f"--space {spec!r}: LOW must be below HIGH", hint="e.g. 400:1600:200")
    return Range(tuple(m.group(1).split(".")), low, high, step, integer)


def split_rows(rows: list[EvalRow], dev_fraction: float, seed: int) -> tuple[list[EvalRow], list[EvalRow]]:
    """(dev, held-out): a stratified seeded sample of ``dev_fraction`` of the rows, and the rest."""
    dev = stratified_sample(rows, max(1, round(len(rows) * dev_fraction)), seed)
    dev_ids = {r.id for r in dev}
    return dev, [r for r in rows if r.id not in dev_ids]


def _write_rows(path: Path, rows: list[EvalRow]) -> None:
    write_atomic(path, "".join(r.model_dump_json(exclude_none=True) + "\n" for r in rows))


def run_optimize(name: str, experiments_dir: Path, ranges: list[Range], base_overrides: dict, opts: RunOptions,
                 metric: str = "mrr", trials: int = 12, dev_fraction: float = 0.5, seed: int = 13,
                 write_config: bool = True) -> dict:
    base = load_experiment(name, experiments_dir, base_overrides)
    eval_set = load_eval_set(project_path(opts.project_root, base.data.eval_set), base.data.categories)
    dev, held = split_rows(eval_set.rows, dev_fraction, seed)
    folder = opts.reports_root / "_optimize" / f"{name}-{metric}"
    folder.mkdir(parents=True, exist_ok=True)
    _write_rows(folder / "dev.jsonl", dev)
    _write_rows(folder / "held-out.jsonl", held)
    def config(values: dict, split: str, label: str) -> ExperimentConfig:
        overrides = retrieval_only(merge(base_overrides, {"data": {"eval_set": str((folder / f"{split}.jsonl").resolve())},
                                                          "sample": {"limit": None}}))
        for r in ranges:
            if r.name in values:
                overrides = set_path(overrides, r.path, values[r.name])
        cfg = load_experiment(name, experiments_dir, overrides)
        return cfg.model_copy(update={"name": f"{name}[{label}]"})

    def evaluate(cfg: ExperimentConfig) -> dict:
        return run_point(cfg, opts, folder / "runs", False)

    points: list[dict] = []

    def objective(trial: Any) -> float:
        values = {}
        for r in ranges:
            if r.integer:
                values[r.name] = trial.suggest_int(r.name, r.low, r.high, step=r.step)
            else:
                values[r.name] = trial.suggest_float(r.name, r.low, r.high, step=r.step)
        label = ",".join(f"{k.split('.')[-1]}={v}" for k, v in values.items())
        try:
            cfg = config(values, "dev", f"trial{trial.number}:{label}")
        except ConfigError as exc:  # e.g. overlap >= size: not a configuration at all
            log.info("trial %d %s is invalid: %s", trial.number, label, exc.message)
            raise optuna.TrialPruned(exc.message) from None
        out = evaluate(cfg)
        points.append({"point": values, "label": label, "trial": trial.number, **out})
        log.info("trial %d %s: dev %s %.4f", trial.number, label, metric, out["metrics"].get(metric) or 0.0)
        return out["metrics"].get(metric) or 0.0

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    study.optimize(objective, n_trials=trials)
    if not points:
        raise ConfigError("every trial was invalid", hint="widen the --space ranges")
    best = max(range(len(points)), key=lambda i: (points[i]["metrics"].get(metric) or 0.0, -i))
    best_values = points[best]["point"]
    held_best = evaluate(config(best_values, "held-out", "best"))
    held_base = evaluate(config({}, "held-out", "base"))
    summary = {
        "experiment": name, "metric": metric, "trials": trials, "seed": seed, "dev_fraction": dev_fraction,
        "n_dev": len(dev), "n_held_out": len(held), "space": {r.name: [r.low, r.high, r.step] for r in ranges},
        "dials": {r.name: sorted({p["point"][r.name] for p in points}) for r in ranges},
        "best": best, "best_values": best_values, "points": points,
        "held_out": {"best": held_best["metrics"], "base": held_base["metrics"]},
    }
    if write_config:
        summary["config"] = str(_write_config(name, experiments_dir, best_values, summary))
    write_atomic(folder / "optimize.json", json.dumps(summary, indent=2))
    render_sweep(summary, folder / "optimize.html")
    summary["folder"] = str(folder)
    return summary


def _write_config(name: str, experiments_dir: Path, values: dict, summary: dict) -> Path:
    m = summary["metric"]
    dev_best = summary["points"][summary["best"]]["metrics"].get(m)

    note = (f"Found by `lab optimize {name}`: Optuna TPE (seed {summary['seed']}), {summary['trials']} trials, "
            f"maximising {m} on {summary['n_dev']} dev questions (stratified, seeded); scored on the "
            f"{summary['n_held_out']} held-out questions: {m} {summary['held_out']['best'].get(m):.4f} against "
            f"{summary['held_out']['base'].get(m):.4f} for {name} (dev: {dev_best:.4f}), with "
            f"{summary['held_out']['best'].get('context_chars') or 0:,.0f} context chars per question against "
            f"{summary['held_out']['base'].get('context_chars') or 0:,.0f}.")
    lines = [f"# {line}" for line in textwrap.wrap(note, 94)] + [
        "schema_version: 1",
        f"extends: {name}",
        f"description: {name} with " + ", ".join(f"{k.split('.')[-1]} {v}" for k, v in values.items())
        + f" (lab optimize, {m})",
    ]
    sections: dict[str, dict] = {}
    for key, value in values.items():
        section, field = key.split(".", 1)
        sections.setdefault(section, {})[field] = value
    for section, fields in sections.items():
        lines.append(f"{section}:")
        for field, value in fields.items():
            lines.append(f"  {field}: {value}")
    out = experiments_dir / f"{name}-optimized.yaml"
    write_atomic(out, "\n".join(lines) + "\n")
    return out
