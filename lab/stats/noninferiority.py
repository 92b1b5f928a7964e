"""Paired non-inferiority tests over several metrics at once, with Holm's family-wise control:
the statistics of ``lab gate``, on per-question values alone.

For one metric, ``d_i`` is how much worse the candidate did than the baseline on question ``i``:
``baseline_i - candidate_i`` for a metric where higher is better, ``candidate_i - baseline_i``
where lower is better. With the margin ``M`` (how much worse is acceptable, in the metric's units),

- H0 (inferior): ``mean(d) >= M``; H1 (non-inferior): ``mean(d) < M``;
- the test is the one-sided paired t-test (``scipy.stats.ttest_1samp(d, popmean=M,
  alternative="less")``, n - 1 degrees of freedom), so ``p = T_{n-1}((mean(d) - M) / (sd(d) / sqrt(n)))``;
- the upper confidence bound of ``mean(d)`` at one-sided level ``a`` (the "worst plausible drop") is
  ``mean(d) + t_{1-a, n-1} * sd(d) / sqrt(n)``, and ``p < a`` exactly when that bound is below M.

Over m metrics the p-values are Holm-adjusted (``statsmodels.stats.multitest.multipletests``,
method "holm"); a metric passes when its adjusted p is below alpha. The printed bound of each
metric is taken at the level Holm's step-down used for it, so bound and verdict always agree: with
p-values sorted ascending, the j-th is tested at ``alpha / (m - j + 1)``; once a step fails, every
later one is reported at the level of the step that failed (their p-values are at least as large,
so their bounds are at least M too). For one metric this is the plain (1 - alpha) one-sided bound.

When every ``d_i`` is the same (sd 0; identical runs, say) the bound is that value, and ``p`` is 0
when it is below M and 1 otherwise.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Mapping, Sequence

import numpy as np
from scipy import stats

from lab.stats.paired import holm as holm_adjusted

METHOD = "one-sided paired t-test of the per-question drop against the margin, Holm-adjusted across the metrics"


@dataclass(frozen=True)
class OneSided:
    """The one-sided test of one metric's drops ``d`` against its margin."""

    n: int
    mean_drop: float
    sd: float
    margin: float
    p: float

    def bound(self, level: float) -> float:
        """Upper confidence bound of the mean drop at one-sided level ``level`` (e.g. 0.05)."""
        if self.sd == 0:
            return self.mean_drop
        return self.mean_drop + float(stats.t.ppf(1 - level, self.n - 1)) * self.sd / math.sqrt(self.n)


def one_sided(drops: Sequence[float], margin: float) -> OneSided:
    """The one-sided paired t-test of H0 ``mean(drops) >= margin`` (at least two drops)."""
    d = np.asarray(drops, dtype=float)
    if d.size < 2:
        raise ValueError(f"a paired test needs at least 2 questions, got {d.size}")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd == 0 or not np.isfinite(sd):
        return OneSided(int(d.size), mean, 0.0, margin, 0.0 if mean < margin else 1.0)
    p = float(stats.ttest_1samp(d, popmean=margin, alternative="less").pvalue)
    return OneSided(int(d.size), mean, sd, margin, p)


def holm(p_values: Sequence[float], alpha: float) -> tuple[list[float], list[float]]:
    """Holm-adjusted p-values (statsmodels) and, for each hypothesis, the one-sided level of its
    confidence bound under Holm's step-down (see the module docstring)."""
    p = np.asarray(p_values, dtype=float)
    m = p.size
    adjusted = holm_adjusted(p_values)
    levels = [0.0] * m
    stopped_at: int | None = None  # the first step (0-based, in sorted order) that fails
    for step, i in enumerate(np.argsort(p, kind="stable")):
        if stopped_at is None and not adjusted[i] < alpha:
            stopped_at = step
        levels[i] = alpha / (m - (step if stopped_at is None else stopped_at))
    return adjusted, levels


@dataclass(frozen=True)
class MetricGate:
    """One gated metric's outcome. ``bound`` is the worst plausible drop (in the metric's units)
    at the Holm level ``level``; ``passed`` is ``p_adjusted < alpha`` (equivalently ``bound < margin``)."""

    metric: str
    higher_is_better: bool
    n: int
    baseline: float
    candidate: float
    mean_drop: float
    margin: float
    p: float
    p_adjusted: float
    level: float
    bound: float
    passed: bool

    def as_dict(self) -> dict:
        return asdict(self)


def drops(baseline: Mapping[str, float], candidate: Mapping[str, float], ids: Sequence[str],
          higher_is_better: bool) -> list[float]:
    """Per question, how much worse the candidate did (positive: worse)."""
    sign = 1.0 if higher_is_better else -1.0
    return [sign * (baseline[q] - candidate[q]) for q in ids]


def gate_metrics(values: Mapping[str, tuple[Mapping[str, float], Mapping[str, float]]],
                 margins: Mapping[str, float], higher_is_better: Mapping[str, bool], alpha: float) -> list[MetricGate]:
    """Gate every metric of ``margins``: ``values[metric]`` is (baseline, candidate), each
    question id -> value; the questions compared are those both have a value for (at least 2)."""
    tests, rows = [], []
    for metric, margin in margins.items():
        base, cand = values[metric]
        ids = sorted(q for q in base if q in cand)
        test = one_sided(drops(base, cand, ids, higher_is_better[metric]), margin)
        tests.append(test)
        rows.append((metric, ids, base, cand))
    adjusted, levels = holm([t.p for t in tests], alpha)
    out = []
    for (metric, ids, base, cand), t, p_adj, level in zip(rows, tests, adjusted, levels):
        out.append(MetricGate(
            metric=metric, higher_is_better=higher_is_better[metric], n=t.n,
            baseline=float(np.mean([base[q] for q in ids])), candidate=float(np.mean([cand[q] for q in ids])),
            mean_drop=t.mean_drop, margin=t.margin, p=t.p, p_adjusted=p_adj, level=level, bound=t.bound(level),
            passed=p_adj < alpha))
    return out
