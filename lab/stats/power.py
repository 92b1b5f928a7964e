"""Power: how large a difference a paired comparison can detect, and how many questions a
difference needs.

The tests ``lab compare`` runs (a paired permutation test beside a bootstrap interval) have no
closed-form power; the paired t-test, to which the permutation test of a mean delta is
asymptotically equivalent, stands in for them:

- :func:`t_power`: the power of the two-sided paired t-test with ``n`` pairs at a standardised
  effect ``d`` (the mean delta over the sd of the deltas): ``P(|T| > t(1 - alpha/2, n - 1))``
  with ``T`` non-central t, ``n - 1`` degrees of freedom, non-centrality ``d * sqrt(n)``.
- :func:`effect_size`: the smallest ``d`` that ``n`` pairs detect with the given power;
  :func:`needed_n`: the fewest pairs that detect ``d``.
- :func:`detectable`: the minimum detectable effect (MDE) of a comparison, in the metric's own
  units: ``effect_size(n) * sd`` with ``sd`` the sample sd (n - 1) of the observed deltas.
- :func:`plan` and :func:`plan_lines`: ``lab power``, from one run's per-question values (the sd
  of a difference assumed from an assumed correlation) or from two runs' paired deltas.

A permutation test of ``k`` non-zero deltas cannot give a p-value below ``2 / 2**k``, so under
:func:`min_permutation_n` questions (6 at alpha 0.05) nothing is detectable, whatever the t-test
says: :func:`detectable` says so, and :func:`needed_n` never answers fewer.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

import numpy as np

from lab.errors import LabError
from lab.metrics.catalog import fmt_delta, is_score
from lab.runfiles import values
from lab.stats.paired import paired_deltas
from lab.stats.sequences import DEFAULT_SEQUENCE, SEQUENCES, first_exclusion

ALPHA, POWER = 0.05, 0.80
#: The correlation assumed between two pipelines' per-question values when only one run is
#: given (the assumption ``lab audit`` makes too): the sd of their difference is then
#: ``sd * sqrt(2 * (1 - RHO))``, which is ``sd`` itself at 0.5.
RHO = 0.5


def t_power(d: float, n: int, alpha: float = ALPHA) -> float:
    """Power of the two-sided paired t-test with ``n`` pairs at standardised effect ``d``."""
    # deferred: scipy.stats takes seconds to import, and only power figures need it
    from scipy.stats import nct, t

    df, nc = n - 1, abs(d) * math.sqrt(n)
    crit = float(t.isf(alpha / 2, df))
    lower = float(nct.cdf(-crit, df, nc))  # the wrong-sign tail: nan in scipy where it underflows to 0
    return float(nct.sf(crit, df, nc)) + (0.0 if math.isnan(lower) else lower)


def min_permutation_n(alpha: float = ALPHA) -> int:
    """The fewest non-zero deltas whose smallest permutation p-value, ``2 / 2**n``, is below
    ``alpha``."""
    return max(1, math.floor(1 - math.log2(alpha)) + 1)


@lru_cache(maxsize=4096)
def effect_size(n: int, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The smallest standardised effect ``d`` that ``n`` pairs detect with ``power`` (None under
    two pairs, where a t-test has no degrees of freedom)."""
    if n < 2:
        return None
    # deferred: see t_power
    from scipy.optimize import brentq

    hi = 1.0
    while t_power(hi, n, alpha) < power:
        hi *= 2
    return float(brentq(lambda d: t_power(d, n, alpha) - power, 0.0, hi, xtol=1e-12, rtol=1e-12))


def needed_n(d: float, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """The fewest pairs that detect the standardised effect ``d`` with ``power``, and never fewer
    than :func:`min_permutation_n` (None when ``d`` is 0)."""
    if not d:
        return None
    lo = min_permutation_n(alpha)
    if t_power(d, lo, alpha) >= power:
        return lo
    hi = 2 * lo
    while t_power(d, hi, alpha) < power:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:  # t_power(d, lo) < power <= t_power(d, hi)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if t_power(d, mid, alpha) >= power else (mid, hi)
    return hi


def _why_not(n: int, sd: float | None, alpha: float, flat: str) -> str | None:
    """Why a comparison has no detectable effect to state (None when it has one); ``flat`` says
    what an sd of 0 means."""
    if n < min_permutation_n(alpha):
        return (f"n={n}: a permutation test of fewer than {min_permutation_n(alpha)} questions cannot reach "
                f"p < {alpha:g}")
    return None if sd else flat


def mde(n: int, sd: float | None, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The minimum detectable effect of ``n`` pairs whose deltas have sd ``sd``, in the deltas'
    units: :func:`effect_size` (n) * sd. None under :func:`min_permutation_n` pairs or without
    spread (sd 0 or None)."""
    return None if _why_not(n, sd, alpha, "flat") else effect_size(n, alpha, power) * sd


def detectable(deltas: Sequence[float], alpha: float = ALPHA, power: float = POWER) -> dict:
    """The minimum detectable effect of a paired comparison: ``n``, ``sd`` (sample sd of the
    deltas, n - 1), ``mde`` (:func:`mde`), and ``mde_why`` when there is none (too few questions
    for the permutation test, or deltas without spread)."""
    d = np.asarray(deltas, dtype=float)
    n = int(d.size)
    sd = float(d.std(ddof=1)) if n >= 2 else None
    why = _why_not(n, sd, alpha, "sd 0: every question moved by the same amount" if np.any(d != 0)
                   else "no question changed")
    return {"n": n, "sd": sd, "mde": mde(n, sd, alpha, power), "mde_why": why}


def mde_text(metric: str, stats: dict, ge: str = "≥") -> str:
    """"could detect ≥ 0.0412" (the ``mde`` of :func:`detectable` in the metric's format of a
    difference), or why it cannot be said."""
    if stats.get("mde") is None:
        return stats.get("mde_why") or "-"
    return f"could detect {ge} {fmt_delta(metric, stats['mde']).lstrip('+')}"


# ---------------------------------------------------------------------------------------------
# Sequential: questions to a decision under an anytime-valid confidence sequence

#: Simulated monitoring paths per figure, and their seed.
SEQ_PATHS, SEQ_SEED = 400, 13


def diff_range(metric: str) -> tuple[float, float]:
    """The bounds of a per-question difference of ``metric``: [-4, 4] for a judge score (1..5),
    [-1, 1] for a share."""
    span = 4.0 if is_score(metric) else 1.0
    return -span, span


def sequential_n(delta: float, sd_d: float, metric: str, alpha: float = ALPHA, max_n: int = 2000,
                 deltas: Sequence[float] | None = None, paths: int = SEQ_PATHS, seed: int = SEQ_SEED,
                 sequence: str = DEFAULT_SEQUENCE, t_opt: int | None = None) -> dict | None:
    """Questions until the sequential rule (the confidence sequence ``sequence`` of
    :mod:`lab.stats.sequences` at ``alpha``, looked at after every question, stopped when it
    excludes 0; ``t_opt`` tunes the normal mixture) decides, were the true mean difference
    ``delta``: simulated over ``paths`` monitoring paths of at most ``max_n`` questions. The
    per-question differences are the observed ``deltas`` shifted to mean ``delta`` where given
    (resampled), else normal with sd ``sd_d``; clipped to the metric's range. Every sequence reads
    the same paths (one seed). Returns the median and 90th percentile of the questions used, and
    the share decided within ``max_n`` (None for sd 0)."""
    if not sd_d or sd_d <= 0:
        return None
    lo, hi = diff_range(metric)
    rng = np.random.default_rng(seed)
    if deltas is not None and len(deltas) >= 2:
        base = np.asarray(deltas, dtype=float)
        x = rng.choice(base - base.mean() + delta, size=(paths, max_n))
    else:
        x = rng.normal(delta, sd_d, size=(paths, max_n))
    first = first_exclusion(sequence, np.clip(x, lo, hi), alpha, lo, hi, 0.0, t_opt)
    hit = first > 0
    n = np.where(hit, first, max_n)
    return {"median": int(np.median(n)), "p90": int(np.percentile(n, 90)), "decided": float(hit.mean()),
            "max_n": max_n, "paths": paths}


# ---------------------------------------------------------------------------------------------
# lab power


def _rows(label: str, samples: list[dict], category: str | None) -> list[tuple[str, str | None]]:
    cats = list(dict.fromkeys(s["category"] for s in samples))  # in the eval set's order
    if category is not None and category not in cats:
        raise LabError(f"--category: {label} has no category {category!r}", hint=f"categories: {', '.join(cats)}")
    return [("overall", None)] + [(c, c) for c in cats if category in (None, c)]


def _by_id(samples: list[dict], metric: str, category: str | None) -> dict[str, float]:
    return {s["id"]: v for s in samples if (category is None or s["category"] == category)
            and isinstance(v := s["metrics"].get(metric), (int, float)) and not isinstance(v, bool)}


def _check_values(label: str, samples: list[dict], metric: str) -> None:
    if not values(samples, metric):
        have = sorted({m for s in samples for m, v in (s.get("metrics") or {}).items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool)})
        raise LabError(f"{label} has no per-question {metric} values",
                       hint=f"pass --metric with one of: {', '.join(have) or 'none (the run has no samples)'}")


def plan(runs: list[tuple[str, list[dict]]], metric: str, delta: float | None = None, category: str | None = None,
         alpha: float = ALPHA, power: float = POWER, rho: float = RHO) -> dict:
    """``lab power``'s figures from one run ``[(label, samples)]`` or two. Per row (overall, then
    each category or only ``category``): the questions there are now (``n``), the sd of a
    per-question difference (``sd_d``), the minimum detectable effect at that n, and with
    ``delta`` the questions needed to detect it (:func:`needed_n` of ``delta / sd_d``).

    With two runs, ``sd_d`` is the observed sd of the paired deltas over the questions both
    runs scored. With one, no difference has been observed: ``sd_d = sd * sqrt(2 * (1 - rho))``
    from the sd of the metric's per-question values, the sd of the difference of two pipelines
    whose per-question values correlate at ``rho``."""
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise LabError(f"--alpha {alpha} and --power {power} must lie between 0 and 1")
    if delta is not None and delta <= 0:
        raise LabError(f"--delta {delta}: give the difference to detect as a positive number, in the metric's units")
    if not -1 <= rho < 1:
        raise LabError(f"--rho {rho} must lie in [-1, 1)")
    for label, samples in runs:
        _check_values(label, samples, metric)
    rows = []
    for name, cat in _rows(*runs[0], category):
        if len(runs) == 2:
            x = detectable(paired_deltas(*(_by_id(samples, metric, cat) for _, samples in runs)), alpha, power)
            n, sd_d, least, why = x["n"], x["sd"], x["mde"], x["mde_why"]
        else:
            v = np.asarray(values(runs[0][1], metric, cat), dtype=float)
            n = int(v.size)
            sd_d = float(v.std(ddof=1)) * math.sqrt(2 * (1 - rho)) if n >= 2 else None
            why = _why_not(n, sd_d, alpha, f"sd 0: every question has the same {metric}")
            least = mde(n, sd_d, alpha, power)
        needed = needed_n(delta / sd_d, alpha, power) if delta and sd_d else None
        observed = (paired_deltas(*(_by_id(samples, metric, cat) for _, samples in runs)) if len(runs) == 2
                    else None)
        seq = ({name: sequential_n(delta, sd_d, metric, alpha, max_n=max(500, 10 * (needed or 50)), deltas=observed,
                                   sequence=name, t_opt=n or None) for name in SEQUENCES}
               if delta and sd_d else None)
        rows.append({"name": name, "n": n, "sd_d": sd_d, "mde": least, "mde_why": why, "needed": needed,
                     "sequential": seq})
    return {"metric": metric, "runs": [label for label, _ in runs], "delta": delta, "alpha": alpha, "power": power,
            "rho": None if len(runs) == 2 else rho, "min_n": min_permutation_n(alpha), "rows": rows}


def plan_lines(p: dict) -> list[str]:
    """The terminal view of :func:`plan`."""
    m = p["metric"]
    if p["rho"] is None:
        source = (f"sd of the paired differences {p['runs'][1]} - {p['runs'][0]}, observed over the questions "
                  "both runs scored")
    else:
        source = (f"sd of a difference assumed: sd({m}) of {p['runs'][0]} x sqrt(2 x (1 - rho)), rho = {p['rho']:g} "
                  "(two pipelines' per-question values correlated at rho; pass a second --run for the observed sd)")
    out = [f"{m}: paired t-test, two-sided alpha {p['alpha']:g}, power {p['power']:.0%}",
           f"  {source}"]
    need = f"needed for {fmt_delta(m, p['delta']).lstrip('+')}" if p["delta"] else ""
    out.append(f"{'':<16}{'n now':>7}{'sd diff':>12}{'detectable now':>18}{need:>24}")
    for r in p["rows"]:
        sd = "-" if r["sd_d"] is None else fmt_delta(m, r["sd_d"]).lstrip("+")
        mde = "-" if r["mde"] is None else fmt_delta(m, r["mde"]).lstrip("+")
        cell = "" if not p["delta"] else ("-" if r["needed"] is None else f"{r['needed']:,}")
        out.append(f"{r['name']:<16}{r['n']:>7}{sd:>12}{mde:>18}{cell:>24}"
                   + (f"   ({r['mde_why']})" if r["mde_why"] else ""))
    if p["delta"] and any(r.get("sequential") for r in p["rows"]):
        out.append(f"  sequentially (lab race: look after every question, stop when an anytime-valid confidence "
                   f"sequence at alpha {p['alpha']:g} excludes 0), questions to a decision were the true difference "
                   f"{fmt_delta(m, p['delta']).lstrip('+')}: median / 90th percentile of {SEQ_PATHS} simulated paths, "
                   f"per --sequence of lab race ({DEFAULT_SEQUENCE}: the default; normal-mixture: asymptotic, "
                   "tuned for the questions there are now)")
        out.append(f"    {'':<14}" + "".join(f"{name:>22}" for name in SEQUENCES))
        for r in p["rows"]:
            seqs = r.get("sequential")
            if seqs:
                cells = []
                for name in SEQUENCES:
                    q = seqs[name]
                    late = "" if q["decided"] >= 0.995 else f" ({1 - q['decided']:.0%} undecided)"
                    cells.append(f"{q['median']:,} / {q['p90']:,}{late}")
                out.append(f"    {r['name']:<14}" + "".join(f"{c:>22}" for c in cells))
        simulated = [q for r in p["rows"] if r.get("sequential") for q in r["sequential"].values()]
        if any(q["decided"] < 0.995 for q in simulated):
            out.append(f"    (undecided: the share of paths still undecided after the most questions simulated, "
                       f"{max(q['max_n'] for q in simulated):,})")
    cats = sum(r["name"] != "overall" for r in p["rows"])
    out.append(f"  never fewer than {p['min_n']} questions: under that a permutation test cannot reach "
               f"p < {p['alpha']:g}")
    if cats > 1:
        out.append(f"  lab compare adjusts each metric's {cats} category p-values (Holm): to plan for that, "
                   f"pass --alpha {p['alpha'] / cats:.4g} (alpha / {cats}, the strictest step)")
    return out
