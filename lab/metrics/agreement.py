"""Do two eval sets rank pipelines alike? Kendall's tau and Spearman's rho between the configs'
means on set A and on set B, with a percentile-bootstrap interval over questions.

Each bootstrap draw resamples the questions of each set (with replacement, the same draw for
every config: the configs answered the same questions, so their means move together) and
recomputes both correlations. Ties count as scipy's tau-b counts them.
"""

from __future__ import annotations

import random
import warnings
from typing import Mapping, Sequence

from scipy import stats


def _corr(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    with warnings.catch_warnings():  # a draw where every config ties: nan, left out by the caller
        warnings.simplefilter("ignore")
        tau = stats.kendalltau(a, b).statistic
        rho = stats.spearmanr(a, b).statistic
    return float(tau), float(rho)


def _means(per_question: Mapping[str, Sequence[float]], names: Sequence[str], idx: Sequence[int]) -> list[float]:
    return [sum(per_question[n][i] for i in idx) / len(idx) for n in names]


def rank_agreement(a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]], resamples: int = 2000,
                   seed: int = 0) -> dict:
    """``a`` and ``b``: config name -> per-question values on each set (every config scored on
    the same questions of a set, in the same order). Returns the means, both correlations and
    their 95% intervals."""
    names = sorted(set(a) & set(b))
    if len(names) < 3:
        raise ValueError(f"rank agreement needs at least 3 configs on both sets (got {len(names)})")
    na, nb = len(a[names[0]]), len(b[names[0]])
    if any(len(a[n]) != na for n in names) or any(len(b[n]) != nb for n in names):
        raise ValueError("every config must be scored on the same questions of a set")
    mean_a, mean_b = _means(a, names, range(na)), _means(b, names, range(nb))
    tau, rho = _corr(mean_a, mean_b)
    rng = random.Random(seed)
    taus, rhos = [], []
    for _ in range(resamples):
        ia = [rng.randrange(na) for _ in range(na)]
        ib = [rng.randrange(nb) for _ in range(nb)]
        t, r = _corr(_means(a, names, ia), _means(b, names, ib))
        if t == t and r == r:  # a draw where every config ties has no correlation (nan)
            taus.append(t)
            rhos.append(r)

    def interval(values: list[float]) -> list[float] | None:
        if not values:
            return None
        values = sorted(values)
        return [values[int(0.025 * (len(values) - 1))], values[int(0.975 * (len(values) - 1))]]

    return {"configs": names, "n_a": na, "n_b": nb, "mean_a": dict(zip(names, mean_a)),
            "mean_b": dict(zip(names, mean_b)), "kendall_tau": tau, "spearman": rho,
            "kendall_tau_ci": interval(taus), "spearman_ci": interval(rhos), "resamples": len(taus)}
