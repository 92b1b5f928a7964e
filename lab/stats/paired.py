"""Statistics that say what is real: bootstrap intervals and paired tests on per-question values.

Every function is seeded, so a report rendered twice from the same files shows the same numbers.

- :func:`bootstrap_ci`: percentile bootstrap 95% interval of a mean.
- :func:`paired`: for two runs over the same questions, the mean per-question delta, its
  bootstrap interval, a paired permutation test (random sign flips of the deltas; exact
  enumeration up to 16 non-zero deltas) and a two-sided sign test (exact binomial).
- :func:`holm` and :func:`benjamini_hochberg`: p-values adjusted for the number of tests read
  together (statsmodels' ``multipletests``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Mapping, Sequence

import numpy as np

LEVEL = 0.95
N_BOOT = 2000
N_PERM = 10000
EXACT_UP_TO = 16
SEED = 13


def bootstrap_ci(values: Sequence[float], level: float = LEVEL, n_boot: int = N_BOOT,
                 seed: int = SEED) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of ``values`` (None when there are none)."""
    x = np.asarray([v for v in values if v is not None], dtype=float)
    if x.size == 0:
        return None
    if x.size == 1 or np.all(x == x[0]):
        return float(x[0]), float(x[0])
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(lo), float(hi)


def permutation_p(deltas: Sequence[float], n_perm: int = N_PERM, seed: int = SEED) -> float:
    """Two-sided p-value of a paired permutation test: under "no difference" each delta's sign
    is a coin flip, so count sign assignments whose |sum| reaches the observed |sum|."""
    d = np.asarray([x for x in deltas if x != 0], dtype=float)
    if d.size == 0:
        return 1.0
    observed = abs(d.sum())
    tol = 1e-9 * max(1.0, observed)
    if d.size <= EXACT_UP_TO:
        grid = np.array(np.meshgrid(*[[-1.0, 1.0]] * d.size)).reshape(d.size, -1).T
        sums = np.abs(grid @ d)
        return float(np.mean(sums >= observed - tol))
    rng = np.random.default_rng(seed)
    # the very signs rng.choice([-1.0, 1.0], size=...) draws (it takes these integers as its
    # indices; tested), made ten times faster than choice makes them
    signs = np.array([-1.0, 1.0])[rng.integers(0, 2, size=(n_perm, d.size))]
    hits = int(np.sum(np.abs(signs @ d) >= observed - tol))
    return (hits + 1) / (n_perm + 1)


def sign_test_p(wins: int, losses: int) -> float:
    """Two-sided exact sign test (ties dropped): P(a split at least this uneven | p = 1/2)."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


@dataclass
class Paired:
    n: int
    mean_a: float | None
    mean_b: float | None
    delta: float | None
    ci: tuple[float, float] | None
    p_permutation: float | None
    wins: int
    losses: int
    ties: int
    p_sign: float | None

    def significant(self, alpha: float = 0.05) -> bool:
        """The interval excludes 0 and the permutation test agrees."""
        return (self.ci is not None and self.p_permutation is not None and self.p_permutation < alpha
                and (self.ci[0] > 0 or self.ci[1] < 0))

    def as_dict(self) -> dict:
        return {**asdict(self), "significant": self.significant()}


def _shared(a: Mapping[str, float | None], b: Mapping[str, float | None]) -> tuple[np.ndarray, np.ndarray]:
    """A's and B's values on the questions both have a value for, in A's order."""
    ids = [q for q in a if q in b and a[q] is not None and b[q] is not None]
    return (np.asarray([a[q] for q in ids], dtype=float).reshape(-1),
            np.asarray([b[q] for q in ids], dtype=float).reshape(-1))


def paired_deltas(a: Mapping[str, float | None], b: Mapping[str, float | None]) -> np.ndarray:
    """The per-question deltas B - A that :func:`paired` tests (questions both have a value for)."""
    xa, xb = _shared(a, b)
    return xb - xa


def paired(a: Mapping[str, float | None], b: Mapping[str, float | None]) -> Paired:
    """Compare per-question values of run A and run B on the questions both have a value for;
    deltas are B - A, so a positive delta means B scored higher."""
    xa, xb = _shared(a, b)
    if not xa.size:
        return Paired(0, None, None, None, None, None, 0, 0, 0, None)
    d = xb - xa
    wins, losses = int(np.sum(d > 0)), int(np.sum(d < 0))
    return Paired(
        n=int(d.size),
        mean_a=float(xa.mean()),
        mean_b=float(xb.mean()),
        delta=float(d.mean()),
        ci=bootstrap_ci(d),
        p_permutation=permutation_p(d),
        wins=wins,
        losses=losses,
        ties=int(d.size) - wins - losses,
        p_sign=sign_test_p(wins, losses),
    )


def _multipletests(pvalues: Sequence[float], method: str) -> list[float]:
    if not len(pvalues):
        return []
    # deferred: statsmodels takes seconds to import, and only a comparison adjusts p-values
    from statsmodels.stats.multitest import multipletests

    return [float(p) for p in multipletests(np.asarray(pvalues, dtype=float), method=method)[1]]


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: with the m p-values sorted
    ``p(1) <= ... <= p(m)``, ``adj(i) = max over j <= i of min(1, (m - j + 1) * p(j))``. Rejecting
    where ``adj < alpha`` keeps the chance of any false rejection among the m tests (the
    family-wise error) at most alpha, whatever the dependence between the tests.

    Computed here as that formula (statsmodels' ``multipletests(method="holm")`` gives the same
    values, tested, but runs a full garbage collection on every call: 75 ms each in a process
    holding two 2,000-question runs, as ``lab serve`` does)."""
    p = np.asarray(pvalues, dtype=float)
    if p.size == 0:
        return []
    order = np.argsort(p, kind="stable")
    steps = p[order] * np.arange(p.size, 0, -1)
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(steps))
    return [float(x) for x in adjusted]


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg q-values, in the order given: ``q(i) = min over j >= i of
    min(1, m * p(j) / j)`` over the sorted p-values. Rejecting where ``q < alpha`` keeps the
    expected share of false rejections among the rejections (the false discovery rate) at most
    alpha for independent or positively dependent tests."""
    return _multipletests(pvalues, "fdr_bh")
