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
from lab.evalsets.holdout import DEV_FRACTION, SEED, held_out_check, write_split
from lab.eval.parallel import Workers, windowed
from lab.eval.runner import RunOptions
from lab.eval.sweep import config_value, run_point
from lab.metrics.catalog import DEFAULT_METRIC
from lab.paths import write_atomic
from lab.progress import Ticker
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


def run_optimize(name: str, experiments_dir: Path, ranges: list[Range], base_overrides: dict, opts: RunOptions,
                 metric: str = DEFAULT_METRIC, trials: int = 12, dev_fraction: float = DEV_FRACTION, seed: int = SEED,
                 write_config: bool = True, workers: int = 1, ray_address: str | None = None) -> dict:
    """The search; ``workers`` > 1 runs that many trials at once as Ray tasks. Trials are asked
    and told in order (:func:`lab.eval.parallel.windowed`), so a search with the same seed and
    ``workers`` repeats exactly; ``workers`` 1 is the serial search."""
    base = load_experiment(name, experiments_dir, base_overrides)
    folder = opts.reports_root / "_optimize" / f"{name}-{metric}"
    split = write_split(base, opts.project_root, folder, dev_fraction, seed)

    def config(values: dict, half: str, label: str) -> ExperimentConfig:
        overrides = retrieval_only(merge(base_overrides, split.overrides(half)))
        for r in ranges:
            if r.name in values:
                overrides = set_path(overrides, r.path, values[r.name])
        cfg = load_experiment(name, experiments_dir, overrides)
        return cfg.model_copy(update={"name": f"{name}[{label}]"})

    points: list[dict] = []
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    folder.mkdir(parents=True, exist_ok=True)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed),
                                storage=_storage(folder / "optuna.journal"))

    def ask() -> tuple:
        """The next trial: its values, and its run (None when its config is invalid)."""
        trial = study.ask()
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
            return None, None, (trial, values, label)
        return run_point, (cfg, opts, folder / "runs", False), (trial, values, label)

    def tell(token: tuple, out: dict | None) -> None:
        trial, values, label = token
        if out is None:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            ticker.update(note=f"trial {trial.number} {label}: invalid")
            return
        points.append({"point": values, "label": label, "trial": trial.number, **out})
        score = out["metrics"].get(metric) or 0.0
        study.tell(trial, score)
        ticker.update(note=f"trial {trial.number} {label}: dev {metric} {score:.4f}")

    with Workers(workers, ray_address) as pool:
        with Ticker("optimize", trials, False, unit="trials", every=0.0, quiet=0.0) as ticker:
            windowed(pool, ask, tell, trials)
        if not points:
            raise ConfigError("every trial was invalid", hint="widen the --space ranges")
        best = max(range(len(points)), key=lambda i: (points[i]["metrics"].get(metric) or 0.0, -i))
        best_values = points[best]["point"]
        held = [config(best_values, "held-out", "best"), config({}, "held-out", "base")]
        held_best, held_base = pool.map(run_point, [(cfg, opts, folder / "runs", False) for cfg in held], "held-out",
                                        [cfg.name for cfg in held])
    summary = {
        "experiment": name, "metric": metric, "trials": trials, **split.as_dict(),
        "space": {r.name: [r.low, r.high, r.step] for r in ranges},
        "dials": {r.name: sorted({p["point"][r.name] for p in points}) for r in ranges},
        "best": best, "best_values": best_values, "points": points,
        "held_out": held_out_check(metric, held_best, held_base, points[best]["metrics"].get(metric),
                                   base_point={r.name: config_value(base, r.path) for r in ranges}),
    }
    if write_config:
        summary["config"] = str(_write_config(name, experiments_dir, best_values, summary))
    write_atomic(folder / "optimize.json", json.dumps(summary, indent=2))
    render_sweep(summary, folder / "optimize.html")
    summary["folder"] = str(folder)
    return summary


def _storage(path: Path) -> Any:
    """The study's record: Optuna's journal file (an append-only log under a file lock, the
    storage Optuna recommends for processes sharing a study), started afresh for each search."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    path.unlink(missing_ok=True)
    return JournalStorage(JournalFileBackend(str(path)))


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
