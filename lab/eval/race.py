"""``lab race A B``: two configs on the same questions, in one seeded random order, stopped as
soon as the answer is clear, and still valid.

After each question the paired differences ``B - A`` of each chosen metric update an
anytime-valid confidence sequence (``sequence``: by default the hedged-capital betting CS of
Waudby-Smith & Ramdas, :func:`lab.stats.betting.betting_cs`; ``eb`` and ``normal-mixture`` on
request, :mod:`lab.stats.sequences`), so the comparison may be looked at after every question.
The race stops at the first question where, for every metric, the sequence

- excludes 0 (a difference, with its sign), or
- with ``effect`` given, lies inside ``(-effect, effect)`` (futile: no difference that matters is
  still plausible);

or when the questions (or ``max_n``) run out, where the fixed-n paired test of ``lab compare``
gives the verdict as today. With several metrics each sequence is at ``alpha / m`` (Bonferroni,
Holm's first step), so the chance of any false difference stays at most ``alpha``. With
``by_category``, every metric also has a sequence per category (over that category's questions
in race order), and the family is metrics x (1 + categories), each sequence at ``alpha / family``:
the stop is still the overall metrics' decision, and at the stop each category says what its own
sequence shows (a difference with its sign, or undecided; pass, fail or undecided for a gate),
every claim, overall or per category, valid together at ``alpha``.

The questions are evaluated in batches of ``step`` through the ordinary runner, on the order's
prefix (every model call is cached, so a batch recomputes nothing of the last), without the
judge's calibration and perturbation checks (they do not change a question's scores; the final
runs have them); the decision is read question by question inside each batch. The two runs of the prefix the race stopped at are
written as ordinary run folders (``results.json`` ``sequential`` says where and why it stopped),
and ``reports/_race/A--B/<run-id>/`` holds ``race.json`` (the order, each metric's path, the
decision, the calls saved) and ``compare.html`` with the path plotted. Rerunning with a larger
``max_n`` continues the same order from where it stopped: the guarantee holds for the whole path.
A race whose metrics are all read from retrieval (MRR, the default) runs retrieval only: nothing
is answered or judged, whatever the configs say.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from lab.config import ExperimentConfig, load_experiment
from lab.config.load import merge, retrieval_only
from lab.errors import ConfigError, DataError
from lab.evalsets.evalset import EvalRow, load_eval_set
from lab.eval.records import write_run
from lab.eval.runner import RunOptions, evaluate, run_experiment
from lab.eval.status import running
from lab.metrics import catalog
from lab.paths import inside, remove_orphans, write_atomic
from lab.progress import duration
from lab.runfiles import load_run
from lab.stats.power import diff_range, mde
from lab.stats.sequences import DEFAULT_SEQUENCE, SEQUENCES, sequence_cs
from lab.stats.sequential import decide, gate_decide

log = logging.getLogger(__name__)

RACE_DIR = "_race"


@dataclass
class RaceOptions:
    metrics: list[str] = field(default_factory=lambda: [catalog.DEFAULT_METRIC])
    alpha: float = 0.05
    effect: float | None = None
    max_n: int | None = None
    step: int = 10
    seed: int = 13
    margin: float | None = None  # --gate: a non-inferiority gate with this margin instead of a comparison
    by_category: bool = False  # a sequence per metric and category too (the family shares alpha)
    sequence: str = DEFAULT_SEQUENCE  # the confidence sequence (lab.stats.sequences)


@dataclass
class MetricPath:
    """One metric's confidence sequence over the questions that have its value."""

    metric: str
    ids: list[str]
    deltas: list[float]
    lower: list[float]
    upper: list[float]
    category: str | None = None  # a category's own sequence (by_category); None: all questions

    def as_dict(self) -> dict:
        return {"metric": self.metric, **({"category": self.category} if self.category is not None else {}),
                "ids": self.ids, "deltas": [round(d, 6) for d in self.deltas],
                "mean": [round(float(np.mean(self.deltas[:t])), 6) for t in range(1, len(self.deltas) + 1)],
                "lower": [round(x, 6) for x in self.lower], "upper": [round(x, 6) for x in self.upper]}


def order(rows: list[EvalRow], seed: int) -> list[EvalRow]:
    """The race's question order: the eval set shuffled with ``seed`` (the same for every rerun)."""
    out = list(rows)
    random.Random(seed).shuffle(out)
    return out


def _values(samples: list[dict], metric: str) -> dict[str, float]:
    return {s["id"]: float(v) for s in samples
            if isinstance(v := s["metrics"].get(metric), (int, float)) and not isinstance(v, bool)}


def paths(ids: list[str], a: list[dict], b: list[dict], metrics: list[str], alpha: float,
          categories: list[str] = (), sequence: str = DEFAULT_SEQUENCE,
          t_opt: int | None = None) -> list[MetricPath]:
    """Each metric's paired differences ``B - A`` in race order and their confidence sequence
    (``sequence``, :func:`lab.stats.sequences.sequence_cs`; ``t_opt`` tunes the normal mixture),
    then, for each of ``categories``, each metric's over that category's questions: every
    sequence at ``alpha / (len(metrics) * (1 + len(categories)))`` (the module's family)."""
    family = [(m, None) for m in metrics] + [(m, c) for c in categories for m in metrics]
    category_of = {s["id"]: s.get("category") for s in a}
    out = []
    for m, c in family:
        va, vb = _values(a, m), _values(b, m)
        kept = [q for q in ids if q in va and q in vb and (c is None or category_of.get(q) == c)]
        d = [vb[q] - va[q] for q in kept]
        lo, hi = diff_range(m)
        if d:
            cs = sequence_cs(sequence, np.asarray(d), alpha / len(family), lo, hi, t_opt)
            lower, upper = [float(x) for x in cs.lower], [float(x) for x in cs.upper]
        else:
            lower = upper = []
        out.append(MetricPath(m, kept, d, lower, upper, c))
    return out


#: Questions with values before the hopeless rule may read their spread.
HOPELESS_AFTER = 10


def stop_point(ids: list[str], ps: list[MetricPath], effect: float | None, start: int,
               margin: float | None = None, total: int | None = None, alpha: float = 0.05
               ) -> tuple[int, dict] | None:
    """The first prefix length ``k > start`` (questions in race order) at which the race is
    decided, with each metric's verdict; None when it is not. A comparison is decided when every
    metric's sequence has (a difference, or futile with ``effect``); a gate (``margin`` given)
    when any metric fails (the candidate worse than the margin) or every metric passes.

    Futile, with ``effect``: the sequence lies inside ``(-effect, effect)``, or (hopeless) the
    smallest difference the whole set of ``total`` questions could detect at the spread seen so
    far (:func:`lab.stats.power.mde`, 80% power, after :data:`HOPELESS_AFTER` questions) is
    larger than ``effect``. Stopping for futility claims no difference, so it costs no validity.
    Only the overall sequences decide; a category's (``by_category``) shares the family's alpha."""
    family = len(ps)
    ps = [p for p in ps if p.category is None]
    for k in range(start + 1, len(ids) + 1):
        asked = set(ids[:k])
        verdicts = {}
        for p in ps:
            t = sum(1 for q in p.ids if q in asked)
            v = "continue" if t == 0 else (
                gate_decide(p.lower[t - 1], p.upper[t - 1], margin) if margin is not None
                else decide(p.lower[t - 1], p.upper[t - 1], effect=effect))
            if v == "continue" and margin is None and effect is not None and total and t >= HOPELESS_AFTER:
                least = mde(total, float(np.std(p.deltas[:t], ddof=1)), alpha / family)
                if least is not None and least > effect:
                    v = "futile"
            verdicts[p.metric] = v
        if margin is not None and "fail" in verdicts.values():
            return k, verdicts
        if all(v != "continue" for v in verdicts.values()):
            return k, verdicts
    return None


def _prefix_file(folder: Path, rows: list[EvalRow], k: int) -> Path:
    """The order's first ``k`` questions as an eval set, named by the hash of its text (the same
    prefix of the same rows is the same file, so its runs' eval-set hash is stable across reruns;
    an eval set edited in place, or another set reusing its ids, is another file). A file of that
    name is used only when it holds that text."""
    text = "".join(json.dumps(r.model_dump(mode="json", exclude_none=True), ensure_ascii=False) + "\n"
                   for r in rows[:k])
    path = folder / f"{hashlib.sha256(text.encode()).hexdigest()[:12]}-{k}.jsonl"
    try:
        if path.read_text(encoding="utf-8") == text:
            return path
    except (OSError, UnicodeDecodeError):
        pass
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)
    return path


def race(names: tuple[str, str], experiments: Path, overrides: dict[str, Any], opts: RunOptions,
         ropts: RaceOptions, say: Callable[[str], None] = print) -> Path:
    """Race the experiments ``names`` (see the module docstring); returns the race folder."""
    t0 = time.perf_counter()
    if len(set(names)) != 2:
        raise ConfigError("lab race needs two different experiments", hint="example: lab race turn13 hybrid")
    if ropts.step < 1:
        raise ConfigError(f"--step {ropts.step}: give at least 1")
    for m in ropts.metrics:
        if m not in catalog.METRICS:
            raise ConfigError(f"--metric {m!r} is not a metric", hint=f"one of: {', '.join(catalog.names())}")
    if ropts.sequence not in SEQUENCES:
        raise ConfigError(f"--sequence {ropts.sequence!r} is not a confidence sequence",
                          hint=f"one of: {', '.join(SEQUENCES)}")
    if not any(catalog.needs_answers(m) for m in ropts.metrics):
        overrides = retrieval_only(overrides)  # no metric read needs an answer: nothing is answered or judged
    cfgs = [load_experiment(n, experiments, overrides) for n in names]
    root = opts.project_root
    evals = {str(Path(root, c.data.eval_set).resolve()) if not Path(c.data.eval_set).is_absolute()
             else c.data.eval_set for c in cfgs}
    if len(evals) != 1:
        raise ConfigError(f"{names[0]} and {names[1]} read different eval sets ({' and '.join(sorted(evals))})",
                          hint="race them on one: --eval FILE")
    eval_path = Path(next(iter(evals)))
    eval_set = load_eval_set(eval_path, cfgs[0].data.categories)
    rows = order(eval_set.rows, ropts.seed)
    categories = [c for c in dict.fromkeys([*(cfgs[0].data.categories or []), *sorted({r.category for r in rows})])
                  if any(r.category == c for r in rows)] if ropts.by_category else []
    total = len(rows)
    budget = min(total, ropts.max_n or total)
    ids = [r.id for r in rows]
    base = inside(opts.reports_root / RACE_DIR, f"{names[0]}--{names[1]}")
    remove_orphans(base)  # the .RUN-ID.tmp-PID of a race killed before it could clean up
    run_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    folder = base / run_id
    work = base / f".{run_id}.tmp-{os.getpid()}"
    work.mkdir(parents=True)
    try:
        batch_opts = replace(opts, reports_root=work / "runs", show_progress=False)

        def run_both(k: int, into: RunOptions, record: dict | None = None) -> list[tuple[dict, list[dict], Path]]:
            prefix = _prefix_file(base / "orders", rows, k)
            return [_one(n, prefix, into, record) for n in names]

        def _one(n: str, prefix: Path, into: RunOptions, record: dict | None) -> tuple[dict, list[dict], Path]:
            here = merge(overrides, {"data": {"eval_set": str(prefix)}, "sample": {"limit": None}})
            cfg = load_experiment(n, experiments, here)
            if record is None and cfg.judge is not None:  # a batch needs the scores, not the judge's own checks
                cfg = load_experiment(n, experiments, merge(here, {"judge": {"calibration": False, "checks": 0}}))
            # quiet: each run's start-up lines would bury the race's own
            run = run_experiment(cfg, into, quiet=True) if record is None else _race_run(cfg, into, record)
            results, samples = load_run(run)
            return results, samples, run

        checked, k, stop, reason = 0, 0, None, None
        while stop is None and k < budget:
            k = min(budget, k + ropts.step)
            (_, sa, _), (_, sb, _) = run_both(k, batch_opts)
            ps = paths(ids[:k], sa, sb, ropts.metrics, ropts.alpha, categories, ropts.sequence, total)
            for p in ps:
                if p.category is None and not p.deltas:  # after the first batch: a metric no question has in both runs never decides
                    raise DataError(f"--metric {p.metric}: no question of the first {k} has a value of it in both "
                                    f"{names[0]} and {names[1]}",
                                    hint="race on a metric both runs compute (a retrieval-only race has no judge "
                                         "scores; rows without keywords have no keyword metrics)")
            found = stop_point(ids[:k], ps, ropts.effect, checked, ropts.margin, total, ropts.alpha)
            checked = k
            spent = time.perf_counter() - t0
            eta = f"{duration(spent)} so far, at most {duration(spent / k * (budget - k))} more"
            for p in ps:
                if p.lower and p.category is None:
                    say(f"after {k} of {total} questions ({eta}): {p.metric} {names[1]} - {names[0]} "
                        f"{np.mean(p.deltas):+.4f}, {1 - ropts.alpha:.0%} confidence sequence "
                        f"[{p.lower[-1]:+.4f}, {p.upper[-1]:+.4f}]")
            if found is not None:
                stop, verdicts = found
                vs = set(verdicts.values())
                reason = ("fail" if "fail" in vs else "pass") if ropts.margin is not None else \
                    "difference" if vs == {"difference"} else "futile" if vs == {"futile"} else "decided"
        if stop is None:
            stop, verdicts = k, {}
            reason = "exhausted" if k == total else "budget"
        # the two runs of the questions the race used, as ordinary run folders
        final_paths = paths(ids[:stop], *[x[1] for x in run_both(stop, batch_opts)], ropts.metrics, ropts.alpha,
                            categories, ropts.sequence, total)
        record = {"race": f"{names[0]}--{names[1]}/{run_id}", "stopped_at": stop, "of": total, "reason": reason,
                  "seed": ropts.seed, "alpha": ropts.alpha, "effect": ropts.effect, "metrics": ropts.metrics,
                  "margin": ropts.margin, "sequence": ropts.sequence}
        if categories:  # only a race by category: others' records keep their keys
            record["categories"] = categories
        (ra, sa, fa), (rb, sb, fb) = run_both(stop, replace(opts, show_progress=False), record)
        calls = {n: sum(u["calls"] + u["cached"] for u in (r.get("llm_usage") or {}).values())
                 for n, r in zip(names, (ra, rb))}
        per_q = sum(calls.values()) / stop if stop else 0.0
        out = {
            **record, "a": names[0], "b": names[1], "n_total": total, "max_n": ropts.max_n, "step": ropts.step,
            "order_sha256": hashlib.sha256("\n".join(ids).encode()).hexdigest(), "order": ids,
            "eval_set": str(eval_path), "eval_sha256": eval_set.sha256,
            "verdicts": {p.metric: _verdict(p, verdicts.get(p.metric), ropts.margin) for p in final_paths
                         if p.category is None},
            **({"by_category": {c: {p.metric: _verdict(p, _last(p, ropts.margin), ropts.margin)
                                    for p in final_paths if p.category == c} for c in categories}}
               if categories else {}),
            "paths": [p.as_dict() for p in final_paths],
            "runs": {names[0]: str(fa), names[1]: str(fb)},
            "llm_calls": calls, "questions_saved": total - stop,
            "llm_calls_saved": round(per_q * (total - stop)),
            "wall_s": round(time.perf_counter() - t0, 1),
        }
        shutil.rmtree(work / "runs", ignore_errors=True)
        write_atomic(work / "race.json", json.dumps(out, indent=1))
        os.replace(work, folder)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return folder


def _race_run(cfg: ExperimentConfig, opts: RunOptions, record: dict) -> Path:
    """The run of the questions a race used, as an ordinary run folder marked as the race's:
    ``results.json`` holds the race's ``record`` as ``sequential``, and the run counts as a sample
    of the whole set even when the race used every question, since its figures come from a
    stopped race and must never stand for the experiment (its ``LATEST-FULL`` stays put)."""
    with running(inside(opts.reports_root, cfg.name), cfg.name):
        results, samples = evaluate(cfg, opts, quiet=True)
        results["sequential"] = record
        results["sample"].update(is_sample=True, n_total=record["of"])
        return write_run(results, samples, cfg, opts.reports_root)


def _last(p: MetricPath, margin: float | None) -> str | None:
    """What a category's sequence shows at the stop: pass, fail or continue for a gate; a
    difference or continue for a comparison (a category never stops the race)."""
    if not p.lower:
        return None
    return (gate_decide(p.lower[-1], p.upper[-1], margin) if margin is not None
            else decide(p.lower[-1], p.upper[-1]))


def _verdict(p: MetricPath, v: str | None, margin: float | None) -> dict:
    if not p.lower:
        return {"verdict": "no values", "n": 0}
    lo, up = p.lower[-1], p.upper[-1]
    if margin is not None:  # the gate: pass, fail, or (the questions ran out) undecided
        word = v if v in ("pass", "fail") else "undecided"
    else:
        word = v if v not in (None, "continue") else ("difference" if lo > 0 or up < 0 else "undecided")
        if word == "difference":
            word = "B better" if lo > 0 else "B worse"
    return {"verdict": word, "n": len(p.deltas), "mean": float(np.mean(p.deltas)), "lower": lo, "upper": up}
