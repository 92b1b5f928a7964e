"""Anytime-valid comparison of two pipelines, one question at a time: confidence sequences (CS)
for the mean of the paired per-question differences ``d_i = b_i - a_i`` (candidate ``b`` minus
baseline ``a``, for a metric where higher is better), and the stopping rules that read them.

A (1 - alpha) confidence sequence is a sequence of intervals ``C_1, C_2, ...`` with
``P(exists t: mean not in C_t) <= alpha``: the guarantee holds at every t at once, so the bounds can be
looked at after every question and the comparison stopped the moment it is clear (at any stopping
time), with no inflation from peeking. A fixed-n confidence interval or t-test looked at after every
question has no such guarantee (its false-positive rate grows with each look).

- :func:`eb_cs`: the predictable plug-in empirical-Bernstein CS of
  Waudby-Smith & Ramdas (2023). Nonasymptotic: valid at every t for observations bounded in a known
  ``[lo, hi]``, which every per-question metric difference is (MRR, recall, a 0/1 judge verdict:
  ``d_i`` lies in ``[-1, 1]``).
- (:func:`lab.stats.betting.betting_cs`, the hedged-capital betting CS of the same paper, is the
  races' default: as valid, and narrower where the differences spread much less than their range.)
- :func:`normal_mixture_cs`: the asymptotic Gaussian-mixture CS of Waudby-Smith, Arbour, Sinha,
  Kennedy & Ramdas (2024); narrower, no bounds needed, but only valid as t grows.
- :func:`decide` and :func:`gate_decide`: the stopping rules (difference / futile / continue, and the
  non-inferiority gate's pass / fail / continue) on the latest bounds.

Arrays of shape ``(n,)`` are one monitoring path; arrays of shape ``(..., n)`` are many paths, each
along the last axis, computed at once. Pure functions of numbers: numpy only.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = [
    "ConfidenceSequence",
    "eb_cs",
    "normal_mixture_cs",
    "optimal_rho2",
    "decide",
    "gate_decide",
]

# how far outside [lo, hi] an observation may lie from rounding (relative to hi - lo) before it is refused
_RANGE_TOLERANCE = 1e-9
# the floor on the running standard deviation of normal_mixture_cs
SD_FLOOR = 1e-12


class ConfidenceSequence(NamedTuple):
    """The running bounds of a confidence sequence: ``lower[..., t-1]`` and ``upper[..., t-1]`` are
    the interval after t observations."""

    lower: np.ndarray
    upper: np.ndarray


def observations(x) -> np.ndarray:
    """``x`` as a float array of observations: a sequence (or paths of them), every value finite."""
    xs = np.asarray(x, dtype=float)
    if xs.ndim == 0:
        raise ValueError("x must be a sequence of observations, not a scalar")
    if not np.all(np.isfinite(xs)):
        raise ValueError("x has a NaN or infinite value")
    return xs


def check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


def eb_cs(
    x,
    alpha: float = 0.05,
    lo: float = 0.0,
    hi: float = 1.0,
    *,
    c: float = 0.5,
    running_intersection: bool = True,
    clip: bool = True,
    increments: str = "paper",
) -> ConfidenceSequence:
    r"""The predictable plug-in empirical-Bernstein (PrPl-EB) confidence sequence for the mean of
    observations bounded in ``[lo, hi]``, two-sided, at level ``1 - alpha``.

    Reference: I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables by
    betting", JRSS-B 86(1), 2024 (read paper 2023), arXiv:2010.09686, Theorem 2 and eqs. (13)-(15)
    (the predictable plug-in empirical-Bernstein CS). The same computation is confseq's
    ``predmix_empbern_twosided_cs`` with ``lambda_predmix_eb`` (prior_mean 1/2, prior_variance 1/4,
    fake_obs 1, truncation c), whose names the comments below mirror.

    The observations are mapped to ``[0, 1]`` by ``X_i = (x_i - lo) / (hi - lo)``; on that scale,
    with ``mu_0 = 1/2`` and ``sigma2_0 = 1/4``::

        mu_t      = (1/2 + sum_{i<=t} X_i) / (t + 1)                         (mu_hat_t)
        sigma2_t  = (1/4 + sum_{i<=t} (X_i - mu_i)^2) / (t + 1)              (sigma2_t)
        lambda_t  = min( sqrt( 2 log(2/alpha) / (sigma2_{t-1} t log(1 + t)) ), c )
        v_i       = 4 (X_i - mu_{i-1})^2
        psi_E(l)  = (-log(1 - l) - l) / 4
        center_t  = sum_{i<=t} lambda_i X_i / sum_{i<=t} lambda_i
        width_t   = (log(2/alpha) + sum_{i<=t} v_i psi_E(lambda_i)) / sum_{i<=t} lambda_i
        C_t       = [center_t - width_t, center_t + width_t]

    ``lambda_t``, ``mu_{t-1}`` and ``sigma2_{t-1}`` use only the first t - 1 observations (the bets
    are predictable), which is what makes ``C_t`` valid simultaneously for every t. The
    ``log(2/alpha)`` is the two-sided split (alpha/2 for each of the lower and upper sequences).

    With ``clip`` each interval is intersected with ``[0, 1]`` (the mean cannot lie outside it);
    with ``running_intersection`` the bounds are made monotone (``lower`` the running max of the
    lowers, ``upper`` the running min of the uppers): an intersection of intervals each holding
    the mean at every t with probability 1 - alpha holds it on the same event, so it is still a
    (1 - alpha) CS. On the rare paths where the CS has already missed the mean the running
    intersection can become empty (``lower > upper``). The bounds are mapped back by
    ``lo + (hi - lo) * bound``.

    Args:
        x: the observations in order, shape ``(n,)``, or ``(..., n)`` for many paths at once.
        alpha: the error probability over the whole sequence, in (0, 1).
        lo, hi: known bounds on every observation (``d_i = b_i - a_i`` of a [0, 1] metric: -1, 1).
        c: the truncation of lambda, in (0, 1); the paper suggests 1/2 or 3/4.
        running_intersection: make the bounds monotone (default).
        clip: intersect each interval with ``[lo, hi]`` (default).
        increments: ``"paper"`` (default): the variance increments ``v_i`` about the regularised
            ``mu_{i-1}`` (from 1/2), as the paper writes them; ``"confseq"``: about the plain
            running mean, from 0 for the lower bound and from 1 for the upper, as confseq 0.0.11's
            ``predmix_empbern_twosided_cs`` computes them (the tests check this variant against
            that library's values; the two differ only in the first increments).

    Returns:
        ``ConfidenceSequence(lower, upper)``, each of the shape of ``x``.
    """
    check_alpha(alpha)
    if not hi > lo:
        raise ValueError(f"need lo < hi, got lo={lo}, hi={hi}")
    if not 0 < c < 1:
        raise ValueError(f"the truncation c must be in (0, 1), got {c}")
    xs = observations(x)
    scale = hi - lo
    y = (xs - lo) / scale
    if y.size and (y.min() < -_RANGE_TOLERANCE or y.max() > 1 + _RANGE_TOLERANCE):
        raise ValueError(f"observations must lie in [{lo}, {hi}], got min {xs.min()}, max {xs.max()}")
    y = np.clip(y, 0.0, 1.0)
    n = y.shape[-1]
    if n == 0:
        return ConfidenceSequence(np.empty_like(y), np.empty_like(y))

    t = np.arange(1, n + 1, dtype=float)
    log_term = math.log(2 / alpha)
    # mu_hat_t and sigma2_t, and their predictable (t - 1) versions with the priors 1/2 and 1/4
    mu_hat_t = (0.5 + np.cumsum(y, axis=-1)) / (t + 1)
    sigma2_t = (0.25 + np.cumsum((y - mu_hat_t) ** 2, axis=-1)) / (t + 1)
    lead = y.shape[:-1] + (1,)
    mu_hat_tminus1 = np.concatenate([np.full(lead, 0.5), mu_hat_t[..., :-1]], axis=-1)
    sigma2_tminus1 = np.concatenate([np.full(lead, 0.25), sigma2_t[..., :-1]], axis=-1)
    # lambda_predmix_eb, truncated at c
    lambdas = np.minimum(np.sqrt(2 * log_term / (sigma2_tminus1 * t * np.log1p(t))), c)
    psi_e = (-np.log1p(-lambdas) - lambdas) / 4
    sum_lambdas = np.cumsum(lambdas, axis=-1)
    center = np.cumsum(lambdas * y, axis=-1) / sum_lambdas  # weighted_mu_hat_t
    if increments == "paper":
        v = 4 * (y - mu_hat_tminus1) ** 2
        width = (log_term + np.cumsum(v * psi_e, axis=-1)) / sum_lambdas  # margin
        lower, upper = center - width, center + width
    elif increments == "confseq":  # confseq 0.0.11: the plain running mean, from 0 below and from 1 above
        plain = np.cumsum(y, axis=-1) / t
        for_lower = np.concatenate([np.zeros(lead), plain[..., :-1]], axis=-1)
        for_upper = np.concatenate([np.ones(lead), plain[..., :-1]], axis=-1)
        lower = center - (log_term + np.cumsum(4 * (y - for_lower) ** 2 * psi_e, axis=-1)) / sum_lambdas
        upper = center + (log_term + np.cumsum(4 * (y - for_upper) ** 2 * psi_e, axis=-1)) / sum_lambdas
    else:
        raise ValueError(f"increments must be 'paper' or 'confseq', got {increments!r}")
    if clip:
        lower = np.clip(lower, 0.0, 1.0)
        upper = np.clip(upper, 0.0, 1.0)
    if running_intersection:
        lower = np.maximum.accumulate(lower, axis=-1)
        upper = np.minimum.accumulate(upper, axis=-1)
    return ConfidenceSequence(lo + scale * lower, lo + scale * upper)


def optimal_rho2(t_opt: float, alpha: float = 0.05) -> float:
    """The mixture variance ``rho2`` that makes the two-sided Gaussian-mixture boundary of
    :func:`normal_mixture_cs` (nearly) tightest at ``t = t_opt``.

    The closed-form approximation of Waudby-Smith et al. (arXiv:2103.06476; from the Lambert-W
    solution of the exact minimisation, as in Howard et al. 2021)::

        rho2 = (-2 log(alpha) + log(-2 log(alpha) + 1)) / t_opt

    ``t_opt`` must be fixed before the data are seen (the planned number of questions, say), never
    the current length of the data: a ``rho2`` that moves with the data voids the guarantee.
    """
    check_alpha(alpha)
    if not t_opt > 0:
        raise ValueError(f"t_opt must be positive, got {t_opt}")
    a = -2 * math.log(alpha)
    return (a + math.log(a + 1)) / t_opt


def normal_mixture_cs(
    x,
    alpha: float = 0.05,
    rho2: float | None = None,
    *,
    t_opt: float = 100,
    running_intersection: bool = False,
) -> ConfidenceSequence:
    r"""The asymptotic confidence sequence from Robbins' Gaussian (normal) mixture, two-sided, at
    level ``1 - alpha``.

    Reference: I. Waudby-Smith, D. Arbour, R. Sinha, E. H. Kennedy and A. Ramdas, "Time-uniform
    central limit theory and asymptotic confidence sequences", Annals of Statistics 2024,
    arXiv:2103.06476: the two-sided Gaussian-mixture asymptotic CS for a mean::

        C_t = mean_t +- sigma_t * sqrt( 2 (t rho2 + 1) / (t^2 rho2) * log( sqrt(t rho2 + 1) / alpha ) )

    with ``mean_t`` the running mean and ``sigma_t`` the running sample standard deviation of the
    first t observations (Bessel's n - 1, floored at ``SD_FLOOR``; at t = 1 there is none and the
    interval is ``(-inf, inf)``). ``rho2`` defaults to :func:`optimal_rho2` at ``t_opt`` (fixed in
    advance: 100 questions unless told).

    ASYMPTOTIC: the coverage guarantee holds as t grows (the boundary is that of a Gaussian
    process that approximates the running mean), not at every finite t; with few questions,
    skewed or heavily tied data it can cover less than 1 - alpha. In particular, a run of identical
    differences (every question tied, ``d_i = 0``) gives sigma_t = 0 and a zero-width interval, which
    is why the running intersection is off by default here. (On 5-valued differences in [-1, 1],
    simulated, the share of paths it ever misses the mean is about 0.1-0.3 counting from t = 2, but
    about alpha counting from t = 10 on.) The races' default, :func:`lab.stats.betting.betting_cs`,
    and :func:`eb_cs` are valid at every t for bounded metrics; use this one only where no bounds
    are known or for comparison.

    Args:
        x: the observations in order, shape ``(n,)``, or ``(..., n)`` for many paths at once.
        alpha: the error probability over the whole sequence, in (0, 1).
        rho2: the mixture variance (> 0); None for ``optimal_rho2(t_opt, alpha)``.
        t_opt: the time the boundary is tuned for when ``rho2`` is None.
        running_intersection: make the bounds monotone.

    Returns:
        ``ConfidenceSequence(lower, upper)``, each of the shape of ``x``.
    """
    check_alpha(alpha)
    if rho2 is None:
        rho2 = optimal_rho2(t_opt, alpha)
    if not rho2 > 0:
        raise ValueError(f"rho2 must be positive, got {rho2}")
    xs = observations(x)
    n = xs.shape[-1]
    if n == 0:
        return ConfidenceSequence(np.empty_like(xs), np.empty_like(xs))

    t = np.arange(1, n + 1, dtype=float)
    # running mean and variance, shifted by the first observation against cancellation
    shifted = xs - xs[..., :1]
    s1 = np.cumsum(shifted, axis=-1)
    s2 = np.cumsum(shifted**2, axis=-1)
    mean = xs[..., :1] + s1 / t
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.where(t > 1, (s2 - s1**2 / t) / np.maximum(t - 1, 1), np.nan)
    sd = np.maximum(np.sqrt(np.maximum(var, 0.0)), SD_FLOOR)
    boundary = np.sqrt(2 * (t * rho2 + 1) / (t**2 * rho2) * np.log(np.sqrt(t * rho2 + 1) / alpha))
    width = np.where(t > 1, sd * boundary, np.inf)
    lower = mean - width
    upper = mean + width
    if running_intersection:
        lower = np.maximum.accumulate(lower, axis=-1)
        upper = np.minimum.accumulate(upper, axis=-1)
    return ConfidenceSequence(lower, upper)


def _latest(value) -> float:
    """The last bound of a running sequence (or the scalar itself)."""
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        return float(arr)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("bounds must be a number or a non-empty 1-d sequence of running bounds")
    return float(arr[-1])


def decide(
    lower,
    upper,
    margin: float = 0.0,
    effect: float | None = None,
    n_left: int | None = None,
) -> str:
    """What the latest confidence-sequence bounds of the mean difference ``d = b - a`` say.

    ``lower`` and ``upper`` are the current bounds (numbers), or running bounds from :func:`eb_cs`
    (the last entries are used). In order:

    - ``"difference"``: the CS excludes ``[-margin, margin]`` (with the default margin 0: excludes
      0), i.e. ``lower > margin`` (b is better) or ``upper < -margin`` (b is worse); read the sign
      from the bounds. Takes precedence over the rest.
    - ``"futile"``: ``effect`` (> 0, the smallest difference that matters) is given and the whole
      CS lies within ``(-effect, effect)``, i.e. ``lower > -effect`` and ``upper < effect``: no
      difference as large as ``effect`` is plausible any more, so more questions are wasted.
    - ``"inconclusive"``: ``n_left == 0`` (no questions left to look at) and neither of the above.
    - ``"continue"``: otherwise; look at another question.

    Because the CS is valid at every t, stopping at the first ``"difference"`` or ``"futile"``
    keeps the error probability at the alpha of the CS.
    """
    lo_, up_ = _latest(lower), _latest(upper)
    if margin < 0:
        raise ValueError(f"margin must be non-negative, got {margin}")
    if effect is not None and not effect > 0:
        raise ValueError(f"effect must be positive, got {effect}")
    if n_left is not None and n_left < 0:
        raise ValueError(f"n_left must be non-negative, got {n_left}")
    if lo_ > margin or up_ < -margin:
        return "difference"
    if effect is not None and lo_ > -effect and up_ < effect:
        return "futile"
    if n_left == 0:
        return "inconclusive"
    return "continue"


def gate_decide(lower, upper, margin: float) -> str:
    """The non-inferiority gate on the latest CS bounds of ``d = candidate - baseline`` (higher is
    better), with ``margin`` (>= 0) the largest acceptable drop in the metric's units:

    - ``"pass"`` when ``lower > -margin``: every plausible mean drop is smaller than the margin;
    - ``"fail"`` when ``upper < -margin``: every plausible mean drop exceeds the margin;
    - ``"continue"`` otherwise.

    ``lower`` and ``upper`` are numbers or running bounds (the last entries are used).
    """
    lo_, up_ = _latest(lower), _latest(upper)
    if margin < 0:
        raise ValueError(f"margin must be non-negative, got {margin}")
    if lo_ > -margin:
        return "pass"
    if up_ < -margin:
        return "fail"
    return "continue"
