"""The anytime-valid confidence sequences a race (``lab race --sequence``) and ``lab power`` read,
by name, and the question a simulation asks of each: when does it first exclude a value?

- ``betting`` (the default): the hedged-capital betting CS (:func:`lab.stats.betting.betting_cs`),
  nonasymptotic, adapts to the spread of the differences;
- ``eb``: the predictable plug-in empirical-Bernstein CS (:func:`lab.stats.sequential.eb_cs`),
  nonasymptotic, the races' sequence before ``betting`` (a ``race.json`` without a ``sequence``
  was read with it);
- ``normal-mixture``: the asymptotic Gaussian-mixture CS
  (:func:`lab.stats.sequential.normal_mixture_cs`), tuned for ``t_opt`` questions fixed in
  advance; valid only as the questions grow, so read from question :data:`NM_FIRST` on (before
  it the interval is the whole range: two tied differences have a spread of 0 and an interval of
  width 0).
"""

from __future__ import annotations

import numpy as np

from lab.stats.betting import betting_cs, log_capital
from lab.stats.sequential import ConfidenceSequence, eb_cs, normal_mixture_cs

__all__ = ["SEQUENCES", "DEFAULT_SEQUENCE", "LEGACY_SEQUENCE", "LABELS", "sequence_cs", "first_exclusion"]

SEQUENCES = ("betting", "eb", "normal-mixture")
DEFAULT_SEQUENCE = "betting"
#: The sequence of a race recorded before races named theirs.
LEGACY_SEQUENCE = "eb"
LABELS = {"betting": "hedged-capital betting confidence sequence (Waudby-Smith & Ramdas)",
          "eb": "empirical-Bernstein confidence sequence (Waudby-Smith & Ramdas)",
          "normal-mixture": "normal-mixture confidence sequence (asymptotic; Waudby-Smith et al.)"}
#: ``t_opt`` of the normal mixture when none is given.
T_OPT = 100
#: The first question at which the normal mixture is read (its miss rate counted from the 10th
#: question is about alpha in simulation; from the 2nd, 0.1 to 0.3: lab.stats.sequential).
NM_FIRST = 10


def _check(name: str) -> None:
    if name not in SEQUENCES:
        raise ValueError(f"unknown sequence {name!r}: one of {', '.join(SEQUENCES)}")


def sequence_cs(name: str, x, alpha: float, lo: float, hi: float, t_opt: int | None = None) -> ConfidenceSequence:
    """The ``1 - alpha`` confidence sequence ``name`` of observations in ``[lo, hi]`` (shape
    ``(n,)`` or ``(..., n)``), its bounds clipped to ``[lo, hi]`` (the normal mixture's first
    interval is unbounded); ``t_opt`` tunes the normal mixture (fixed before the data are seen)."""
    _check(name)
    if name == "betting":
        return betting_cs(x, alpha, lo, hi)
    if name == "eb":
        return eb_cs(x, alpha, lo, hi)
    cs = normal_mixture_cs(x, alpha, t_opt=t_opt or T_OPT)
    early = np.arange(1, cs.lower.shape[-1] + 1) < NM_FIRST
    return ConfidenceSequence(np.where(early, lo, np.clip(cs.lower, lo, hi)),
                              np.where(early, hi, np.clip(cs.upper, lo, hi)))


def first_exclusion(name: str, x, alpha: float, lo: float, hi: float, value: float = 0.0,
                    t_opt: int | None = None) -> np.ndarray:
    """Per path (the last axis of ``x``), the first t (1-based) at which the sequence ``name``
    excludes ``value``, 0 where it never does: a claim of a difference when ``value`` is 0 and a
    miss when it is the true mean. The betting sequence reads its capital at ``value`` alone
    (:func:`lab.stats.betting.log_capital`: one pass, the same answer as its bounds)."""
    _check(name)
    if name == "betting":
        up, down = log_capital(x, value, alpha, lo, hi)
        out = np.maximum(up, down) >= np.log(1 / alpha)
    else:
        cs = sequence_cs(name, x, alpha, lo, hi, t_opt)
        out = (cs.lower > value) | (cs.upper < value)
    return np.where(out.any(axis=-1), out.argmax(axis=-1) + 1, 0)
