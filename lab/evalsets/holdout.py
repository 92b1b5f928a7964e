"""The dev/held-out split that ``lab sweep`` and ``lab optimize`` share, and the held-out check.

A search (a grid of dials, or Optuna's trials) picks its best configuration on the dev questions;
the best configuration and the base experiment (unchanged) then both run on the held-out
questions, which played no part in the choice. On those:

- the paired test of best against base (:func:`lab.stats.paired.paired`: the mean per-question
  delta best - base, its bootstrap interval, the permutation p) says whether the chosen
  configuration is really better than the one it replaces;
- the optimism, the chosen configuration's dev score minus its held-out score, says how much
  picking it on the dev questions flattered it.

The split is stratified by category and seeded (:func:`split_rows`), and written into the
search's folder as ``dev.jsonl`` and ``held-out.jsonl``, so every run names the questions it used.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from lab.config import ExperimentConfig
from lab.errors import ConfigError
from lab.evalsets.evalset import EvalRow, load_eval_set, stratified_sample
from lab.metrics.labels import labelled_ids
from lab.paths import project_path, write_atomic
from lab.report.compare import Run
from lab.runfiles import load_run
from lab.stats.paired import paired

#: Share of the questions the search runs on, and the seed of the split (``--dev-fraction``, ``--seed``).
DEV_FRACTION = 0.5
SEED = 13


def split_rows(rows: list[EvalRow], dev_fraction: float, seed: int) -> tuple[list[EvalRow], list[EvalRow]]:
    """(dev, held-out): a stratified seeded sample of ``dev_fraction`` of the rows (each category
    in proportion, :func:`stratified_sample`), and the rest; both keep the rows' order."""
    if not 0 < dev_fraction < 1:
        raise ConfigError(f"--dev-fraction {dev_fraction} is not between 0 and 1", hint="e.g. --dev-fraction 0.5")
    dev = stratified_sample(rows, max(1, round(len(rows) * dev_fraction)), seed)
    dev_ids = {r.id for r in dev}
    held = [r for r in rows if r.id not in dev_ids]
    if not held:
        raise ConfigError(f"{len(rows)} question(s) leave none for a held-out split at --dev-fraction {dev_fraction}",
                          hint="use more questions, a smaller --dev-fraction, or --no-holdout")
    return dev, held


def half_overrides(folder: Path, half: str, labels: bool) -> dict:
    """Config overrides that run on one half of a split written into ``folder`` ("dev" or
    "held-out"): its questions file (and its labels file, ``labels``), every question of it."""
    data = {"eval_set": str((folder / f"{half}.jsonl").resolve())}
    if labels:
        data["labels"] = str((folder / f"{half}-labels.csv").resolve())
    return {"data": data, "sample": {"limit": None}}


@dataclass
class Split:
    """The two halves, written into ``folder``; :meth:`overrides` runs a config on one of them."""

    folder: Path
    dev: list[EvalRow]
    held_out: list[EvalRow]
    dev_fraction: float
    seed: int
    labels: bool = False

    def overrides(self, half: str) -> dict:
        return half_overrides(self.folder, half, self.labels)

    def as_dict(self) -> dict:
        return {"seed": self.seed, "dev_fraction": self.dev_fraction, "n_dev": len(self.dev),
                "n_held_out": len(self.held_out)}


def write_split(cfg: ExperimentConfig, project_root: Path, folder: Path, dev_fraction: float, seed: int) -> Split:
    """Split ``cfg``'s questions (its stratified sample when ``sample.limit`` is set) into
    ``folder/dev.jsonl`` and ``folder/held-out.jsonl`` (and each half's labels, if it has any)."""
    label_path = project_path(project_root, cfg.data.labels) if cfg.data.labels else None
    eval_set = load_eval_set(project_path(project_root, cfg.data.eval_set), cfg.data.categories,
                             labelled_ids(label_path) if label_path else ())
    rows = eval_set.rows
    if cfg.sample.limit:
        rows = stratified_sample(rows, cfg.sample.limit, cfg.sample.seed)
    dev, held = split_rows(rows, dev_fraction, seed)
    split = Split(folder, dev, held, dev_fraction, seed, labels=label_path is not None)
    folder.mkdir(parents=True, exist_ok=True)
    for half, part in (("dev", dev), ("held-out", held)):
        write_atomic(folder / f"{half}.jsonl", "".join(r.model_dump_json(exclude_none=True) + "\n" for r in part))
        if label_path is not None:
            write_atomic(folder / f"{half}-labels.csv", _labels_of(label_path, {r.id for r in part}))
    return split


def split_file(eval_path: Path, out: Path, dev_fraction: float = DEV_FRACTION, seed: int = SEED
               ) -> tuple[list[EvalRow], list[EvalRow]]:
    """Write the dev/held-out halves of the eval set at ``eval_path`` as ``out/dev.jsonl`` and
    ``out/held-out.jsonl`` (``lab split``): the same halves a sweep of these questions with the
    same ``dev_fraction`` and ``seed`` makes."""
    dev, held = split_rows(load_eval_set(eval_path, None).rows, dev_fraction, seed)
    out.mkdir(parents=True, exist_ok=True)
    for half, part in (("dev", dev), ("held-out", held)):
        write_atomic(out / f"{half}.jsonl", "".join(r.model_dump_json(exclude_none=True) + "\n" for r in part))
    return dev, held


def _labels_of(path: Path, ids: set[str]) -> str:
    """The labels file's header and the lines of the questions in ``ids``."""
    with open(path, newline="", encoding="utf-8") as fh:
        lines = list(csv.reader(fh))
    buf = io.StringIO()
    csv.writer(buf).writerows(lines[:1] + [row for row in lines[1:] if row and row[0].strip() in ids])
    return buf.getvalue()


def question_values(run_dir: str | Path, metric: str) -> dict[str, float]:
    """A run's per-question values of ``metric`` (question id -> value), from its files."""
    folder = Path(run_dir)
    return Run(folder, *load_run(folder)).values(metric)


def held_out_check(metric: str, best: dict, base: dict, dev_best: float | None,
                   dev_base: float | None = None, base_point: dict | None = None) -> dict:
    """The held-out verdict of a search. ``best`` and ``base``: the held-out runs of the chosen
    configuration and of the base experiment (``run_point``'s dicts); ``dev_best``/``dev_base``:
    their ``metric`` on the dev questions; ``base_point``: the base's values of the searched dials.

    ``paired`` is best against base on the held-out questions (delta = best - base);
    ``optimism`` = dev_best - the best's held-out ``metric`` (it also holds any difference in
    difficulty between the halves, which ``margin``, best - base on each half, cancels)."""
    test = paired(question_values(base["run"], metric), question_values(best["run"], metric))
    held_best, held_base = best["metrics"].get(metric), base["metrics"].get(metric)

    def minus(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a - b

    return {
        "best": best["metrics"], "base": base["metrics"], "best_run": best["run"], "base_run": base["run"],
        "base_point": base_point or {}, "dev": {"best": dev_best, "base": dev_base},
        "paired": {"metric": metric, "a": "base", "b": "best", **test.as_dict()},
        "optimism": minus(dev_best, held_best),
        "margin": {"dev": minus(dev_best, dev_base), "held_out": minus(held_best, held_base)},
    }
