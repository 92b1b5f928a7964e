"""The hedged-capital betting confidence sequence of Waudby-Smith & Ramdas for the mean of bounded
observations: the tightest of the anytime-valid sequences the lab reads, and ``lab race``'s
default (:mod:`lab.stats.sequences` names the others).

Reference: I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables by
betting", JRSS-B 86(1), 2024, arXiv:2010.09686: Section 4 (capital processes and the CS they
define, Proposition 1 and Theorem 3, the hedged capital process) with the predictable plug-in bets
``lambda^PrPl+-`` of its Section 4.3. The same construction as the authors' library confseq
0.0.11, ``confseq.betting.hedged_cs`` (``betting_mart`` with ``theta = 1/2``, ``trunc_scale =
1/2``, ``m_trunc``, the maximum of the two capitals rather than their convex combination, the
bets of ``lambda_predmix_eb`` at ``alpha * theta`` and ``alpha * (1 - theta)``), whose names the
comments below mirror; the tests hold this module to that library's values.

On observations ``X_i`` in ``[0, 1]`` and a candidate mean ``m`` in ``[0, 1]``::

    K+_t(m)   = prod_{i<=t} (1 + lambda+_i(m) (X_i - m))          (the capital betting that mean > m)
    K-_t(m)   = prod_{i<=t} (1 - lambda-_i(m) (X_i - m))          (the capital betting that mean < m)
    K_t(m)    = max( theta K+_t(m), (1 - theta) K-_t(m) )          (hedged capital, Theorem 3)
    C_t       = { m in [0, 1] : K_t(m) < 1 / alpha }

Under the true mean ``m = mu`` both capitals are nonnegative martingales from 1, so by Ville's
inequality ``P(exists t: theta K+_t(mu) >= 1 / alpha) <= alpha theta`` and the same for ``K-``
with ``1 - theta``: ``C_t`` misses ``mu`` at some t with probability at most alpha. The bets are
predictable (they read only ``X_1 .. X_{t-1}``)::

    mu_t         = (1/2 + sum_{i<=t} X_i) / (t + 1)
    sigma2_t     = (1/4 + sum_{i<=t} (X_i - mu_i)^2) / (t + 1)
    lambda_t(a)  = sqrt( 2 log(1 / a) / (sigma2_{t-1} t log(1 + t)) )        (sigma2_0 = 1/4)
    lambda+_t(m) = min( lambda_t(alpha theta), c / m )
    lambda-_t(m) = min( lambda_t(alpha (1 - theta)), c / (1 - m) )

(with ``theta = 1/2`` both are the paper's ``sqrt(2 log(2 / alpha) / (sigma2_{t-1} t log(1 + t)))``),
with the truncation ``c`` in (0, 1) (1/2 here, as confseq; the paper suggests 1/2 or 3/4), which
keeps every factor at least ``1 - c > 0``.

Each factor of ``K+_t(m)`` is nonincreasing in ``m`` (``1 + lambda (X - m)`` where the bet is
``lambda``, ``1 - c + c X / m`` where it is ``c / m``) and each factor of ``K-_t(m)``
nondecreasing, so ``C_t`` is the interval between ``L_t``, the root of
``theta K+_t(m) = 1/alpha``, and ``U_t``, that of ``(1 - theta) K-_t(m) = 1/alpha``. Both are found
on the log capitals to :data:`ROOT_TOL` (a grid brackets each, Newton steps narrow it), each
rounded outwards (the interval never excludes a candidate the capital keeps), where confseq reads
a grid of 1,000 candidates.
:func:`log_capital` is the capital at one candidate mean, which answers "is ``m`` excluded at t?"
for every t in one pass (what a race's stop and a simulation's error read).

Arrays of shape ``(n,)`` are one path; ``(..., n)`` many paths along the last axis, at once.
"""

from __future__ import annotations

import math

import numpy as np

from lab.stats.sequential import ConfidenceSequence, check_alpha, observations

__all__ = ["betting_cs", "log_capital", "plugin_bets", "ROOT_TOL"]

#: The roots' tolerance on the [0, 1] scale: each bound is within this of the exact root.
ROOT_TOL = 1e-9
# the elements of one (paths, grid, n) block of the grid, kept under ~32 MB of float64
_BLOCK = 4_000_000
# candidates of the grid that brackets each root, and the steps that narrow it: Illinois steps, then
# bisection steps where those have not reached ROOT_TOL (a bracket of 1/64 halves to 1e-9 in 24)
_GRID = 64
# a candidate counts as rejected when its log capital passes log(1 / alpha) by this much: the roots
# the Newton steps land on exactly stay rejected whatever order a later sum adds the factors in
_SLACK = 1e-9
_ILLINOIS_STEPS = 12
_MAX_STEPS = _ILLINOIS_STEPS + 26


def _unit(x, lo: float, hi: float) -> np.ndarray:
    if not hi > lo:
        raise ValueError(f"need lo < hi, got lo={lo}, hi={hi}")
    xs = observations(x)
    y = (xs - lo) / (hi - lo)
    if y.size and (y.min() < -1e-9 or y.max() > 1 + 1e-9):
        raise ValueError(f"observations must lie in [{lo}, {hi}], got min {xs.min()}, max {xs.max()}")
    return np.clip(y, 0.0, 1.0)


def plugin_bets(y: np.ndarray, level: float) -> np.ndarray:
    """The predictable plug-in bets ``lambda_t(level)`` of the module docstring (before the
    truncation at ``c / m``) of observations ``y`` in [0, 1], along the last axis (confseq's
    ``lambda_predmix_eb(y, alpha=level)``)."""
    log_term = math.log(1 / level)
    n = y.shape[-1]
    t = np.arange(1, n + 1, dtype=float)
    mu_hat_t = (0.5 + np.cumsum(y, axis=-1)) / (t + 1)
    sigma2_t = (0.25 + np.cumsum((y - mu_hat_t) ** 2, axis=-1)) / (t + 1)
    sigma2_tminus1 = np.concatenate([np.full(y.shape[:-1] + (1,), 0.25), sigma2_t[..., :-1]], axis=-1)
    return np.sqrt(2 * log_term / (sigma2_tminus1 * t * np.log1p(t)))


def _factors(y: np.ndarray, lam: np.ndarray, m: np.ndarray, c: float, sign: int) -> np.ndarray:
    """``log(1 + sign lambda_i(m) (y_i - m))`` with the bet truncated at ``c / m`` (sign +1) or
    ``c / (1 - m)`` (sign -1); ``m`` broadcasts against ``y``."""
    room = m if sign > 0 else 1 - m
    with np.errstate(divide="ignore"):
        cap = np.where(room > 0, c / np.where(room > 0, room, 1.0), np.inf)
    return np.log1p(sign * np.minimum(lam, cap) * (y - m))


def log_capital(x, m: float, alpha: float = 0.05, lo: float = 0.0, hi: float = 1.0, *, c: float = 0.5,
                theta: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """``(log(theta K+_t(m)), log((1 - theta) K-_t(m)))`` for every t, at the candidate mean ``m``
    (in the units of ``x``, which lies in ``[lo, hi]``): ``m`` is outside the sequence at t when
    either reaches ``log(1 / alpha)`` (the lower side excludes it from below: the mean is above
    ``m``; the upper side from above). One pass over the observations, each of the shape of ``x``."""
    check_alpha(alpha)
    _check(c, theta)
    y = _unit(x, lo, hi)
    mu = (m - lo) / (hi - lo)
    if not 0 <= mu <= 1:
        raise ValueError(f"m must lie in [{lo}, {hi}], got {m}")
    mm = np.asarray(mu, dtype=float)
    up = (math.log(theta) + np.cumsum(_factors(y, plugin_bets(y, alpha * theta), mm, c, +1), axis=-1)
          if theta > 0 else np.full(y.shape, -np.inf))
    down = (math.log(1 - theta) + np.cumsum(_factors(y, plugin_bets(y, alpha * (1 - theta)), mm, c, -1), axis=-1)
            if theta < 1 else np.full(y.shape, -np.inf))
    return up, down


def _check(c: float, theta: float) -> None:
    if not 0 < c < 1:
        raise ValueError(f"the truncation c must be in (0, 1), got {c}")
    if not 0 <= theta <= 1:
        raise ValueError(f"theta must be in [0, 1], got {theta}")


def _slopes(y: np.ndarray, lam: np.ndarray, m: np.ndarray, c: float, sign: int) -> np.ndarray:
    """The derivatives in ``m`` of :func:`_factors`: ``-lambda / (1 + lambda (y - m))`` where the bet
    is ``lambda`` (sign +1), ``-(c y / m^2) / (1 - c + c y / m)`` where it is ``c / m``; mirrored
    for sign -1 (``u = 1 - m``: ``lambda / (1 - lambda (y - m))``, ``(c (1 - y) / u^2) / (1 - c +
    c (1 - y) / u)``)."""
    room = m if sign > 0 else 1 - m
    near = y if sign > 0 else 1 - y
    with np.errstate(divide="ignore", invalid="ignore"):
        capped = (room > 0) & (lam * room > c)
        free = -sign * lam / (1 + sign * lam * (y - m))
        safe = np.where(room > 0, room, 1.0)
        held = -sign * (c * near / safe ** 2) / (1 - c + c * near / safe)
    return np.where(capped, held, free)


def _root(y: np.ndarray, lam: np.ndarray, c: float, sign: int, log_weight: float, threshold: float) -> np.ndarray:
    """For every path and t, the boundary of ``{m : log_weight + log K^sign_t(m) >= threshold}``
    (``[0, L_t)`` for the lower side, sign +1; ``(U_t, 1]`` for the upper, sign -1), rounded
    outwards: bracketed on a grid of :data:`_GRID` candidates (every t at once, one cumulative sum
    per candidate), then narrowed to :data:`ROOT_TOL` by Newton steps kept inside the bracket
    (bisection where a step would leave it or stalls; each step past the root by a little, so that
    both ends of the bracket close in), each step reading the first t observations of the paths
    and times whose bracket is still wider than the tolerance."""
    n = y.shape[-1]
    flat_y, flat_lam = y.reshape(-1, n), lam.reshape(-1, n)
    grid = np.linspace(0.0, 1.0, _GRID + 1)
    rows = max(1, _BLOCK // (n * (_GRID + 1)))
    hg = np.concatenate([  # h on the grid, every t at once: hg[path, g, t], monotone in g
        log_weight - threshold + np.cumsum(_factors(flat_y[i:i + rows, None, :], flat_lam[i:i + rows, None, :],
                                                    grid[None, :, None], c, sign), axis=-1)
        for i in range(0, flat_y.shape[0], rows)])
    rejected = (hg >= _SLACK).sum(axis=1)  # rejected grid points per (path, t): a run at the side's end
    if sign > 0:  # rejected: grid[0 .. r-1], so the bracket is grid[r-1] (excluded), grid[r] (kept)
        e_idx, k_idx = np.maximum(rejected - 1, 0), np.minimum(rejected, _GRID)
    else:  # rejected: grid[G-r+1 .. G]
        e_idx, k_idx = np.minimum(_GRID - rejected + 1, _GRID), np.maximum(_GRID - rejected, 0)
    path, t = np.indices(rejected.shape)
    e, k = grid[e_idx], grid[k_idx]
    he, hk = hg[path, e_idx, t], hg[path, k_idx, t]
    with np.errstate(divide="ignore", invalid="ignore"):  # the first step: where the chord crosses
        x = np.where(np.isfinite(he), e + (he - _SLACK) * (k - e) / (he - hk), (e + k) / 2)
    live = rejected > 0  # where even the side's end is kept, the whole side is
    i_of = np.arange(n)
    for _ in range(_MAX_STEPS):
        todo = np.nonzero(live & (np.abs(k - e) > ROOT_TOL))
        if not todo[0].size:
            break
        ee, kk, xx = e[todo], k[todo], x[todo]
        inside = (xx - ee) * (xx - kk) < 0
        xx = np.where(inside, xx, (ee + kk) / 2)
        p_, t_ = todo
        first = i_of[None, :] <= t_[:, None]  # (pairs, n): the observations the capital at t holds
        yy, ll, mm = flat_y[p_], flat_lam[p_], xx[:, None]
        hx = log_weight - threshold + np.where(first, _factors(yy, ll, mm, c, sign), 0.0).sum(axis=-1)
        dx = np.where(first, _slopes(yy, ll, mm, c, sign), 0.0).sum(axis=-1)
        rej = hx >= _SLACK
        ee, kk = np.where(rej, xx, ee), np.where(rej, kk, xx)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = xx - (hx - _SLACK) / dx
        # a little past the root, towards the end that did not move, so that it moves next
        newton = newton + np.sign(np.where(rej, kk, ee) - newton) * ROOT_TOL / 4
        ok = np.isfinite(newton) & ((newton - ee) * (newton - kk) < 0)
        e[todo], k[todo], x[todo] = ee, kk, np.where(ok, newton, (ee + kk) / 2)
    # outwards: the bound is the last rejected candidate, so every kept candidate stays inside
    return np.where(live, e, 0.0 if sign > 0 else 1.0).reshape(y.shape)


def betting_cs(
    x,
    alpha: float = 0.05,
    lo: float = 0.0,
    hi: float = 1.0,
    *,
    c: float = 0.5,
    theta: float = 0.5,
    running_intersection: bool = True,
) -> ConfidenceSequence:
    """The hedged-capital betting confidence sequence (the module docstring's ``C_t``) for the
    mean of observations bounded in ``[lo, hi]``, two-sided, at level ``1 - alpha``.

    The observations are mapped to ``[0, 1]`` by ``(x - lo) / (hi - lo)``, the bounds ``L_t`` and
    ``U_t`` found there (to :data:`ROOT_TOL`, outwards) and mapped back. A side whose
    capital stays under ``1 / alpha`` at every candidate keeps its end (``lo`` or ``hi``). With
    ``running_intersection`` (default) the bounds are made monotone, as :func:`eb_cs` does
    (an intersection of (1 - alpha) CSs holding the mean on one event is one too); on the rare
    paths where the sequence has missed the mean it may become empty (``lower > upper``).

    Args:
        x: the observations in order, shape ``(n,)``, or ``(..., n)`` for many paths at once.
        alpha: the error probability over the whole sequence, in (0, 1).
        lo, hi: known bounds on every observation (a difference of [0, 1] metrics: -1, 1; of judge
            scores 1-5: -4, 4).
        c: the truncation of the bets, in (0, 1).
        theta: the weight of the upward capital, in [0, 1] (1/2: symmetric).
        running_intersection: make the bounds monotone.

    Returns:
        ``ConfidenceSequence(lower, upper)``, each of the shape of ``x``.
    """
    check_alpha(alpha)
    _check(c, theta)
    y = _unit(x, lo, hi)
    if y.shape[-1] == 0:
        return ConfidenceSequence(np.empty_like(y), np.empty_like(y))
    threshold = math.log(1 / alpha)
    lower = (_root(y, plugin_bets(y, alpha * theta), c, +1, math.log(theta), threshold) if theta > 0
             else np.zeros_like(y))
    upper = (_root(y, plugin_bets(y, alpha * (1 - theta)), c, -1, math.log(1 - theta), threshold) if theta < 1
             else np.ones_like(y))
    if running_intersection:
        lower = np.maximum.accumulate(lower, axis=-1)
        upper = np.minimum.accumulate(upper, axis=-1)
    scale = hi - lo
    return ConfidenceSequence(lo + scale * lower, lo + scale * upper)
