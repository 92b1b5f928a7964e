"""Does the judge agree with people? Human labels of answers against the judge's accuracy.

A person labels an answer ``correct``, ``partly`` (partly correct) or ``wrong``, and may correct
the accuracy score (1 to 5). Definitions:

- **Human score**: the corrected accuracy when given, else correct = 5, partly = 3, wrong = 1.
- **Class** of a score, the judge's accuracy or the human score alike (judge-v1's rubric: any
  wrong answer scores 1, an acceptable one 3 or more): 4-5 ``correct``, 2-3 ``partly``,
  1 ``wrong``; the classes are ordered wrong < partly < correct. The probability-weighted
  judging methods score in [1, 5] (``rubric-expected``, ``per-dimension``, ``claims``): such a
  score takes the class of the nearest whole score (3.5 and above correct, 1.5 and above partly),
  and Spearman and the means use it as it is.
- **Weighted Cohen's kappa** (linear weights) over the 3 ordered classes: with ``O`` the
  confusion table of n pairs, ``E[i][j] = row_i * col_j / n`` (chance agreement) and
  ``w[i][j] = |i - j| / 2``, ``kappa = 1 - sum(w * O) / sum(w * E)``. 1 is perfect agreement,
  0 what chance gives, below 0 worse. Undefined (None, with the reason) with no pairs, or when
  either side used one class only: then sum(w * O) equals sum(w * E) (kappa is 0 whatever the agreement)
  or both are 0 (0 / 0), so the figure says nothing about the judge.
- **Spearman's rho** between the human scores and the judge's accuracy (scipy's, ties get
  their mean rank). Undefined with fewer than 2 pairs or when either side is constant.
- **Mean accuracy, prediction-powered** (Angelopoulos et al. 2023, "Prediction-powered
  inference"): the judge scores all N + n answers, people label n of them. With ``f`` the
  judge's score and ``y`` the human score, ``theta = mean(f over the N unlabelled) +
  mean(y - f over the n labelled)``, and its 95% interval ``theta +- 1.96 * sqrt(var(f,
  unlabelled) / N + var(y - f, labelled) / n)`` (sample variances, ddof 1). When every answer is
  labelled, it is the human mean with its t interval. Beside it, the judge-only mean over all
  answers with its t interval: the figure the run reports, whose bias nothing checks. PPI's
  interval holds when the labelled answers are a random sample of the answers: labelling only
  the ones that look wrong biases the rectifier.

Pure functions of numbers; keeping people's labels is :mod:`lab.judge.labels`' and pairing them
with a run :mod:`lab.judge.agree`'s.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from dataclasses import dataclass
from typing import Sequence

from scipy import stats

#: The labels a person gives, each with its score when no accuracy is given.
LABEL_SCORES = {"correct": 5, "partly": 3, "wrong": 1}
#: The ordered classes (index = position on the scale).
CLASSES = ("wrong", "partly", "correct")
Z95 = 1.96


def score_class(score: float) -> str:
    """4-5 correct, 2-3 partly, 1 wrong; a fractional score by its nearest whole score."""
    return "correct" if score >= 3.5 else "partly" if score >= 1.5 else "wrong"


def human_score(label: str, accuracy: int | None) -> int:
    """The corrected accuracy when given, else the label's score."""
    return LABEL_SCORES[label] if accuracy is None else accuracy


@dataclass(frozen=True)
class Pair:
    """One answer scored by both: its id, category, the human score and the judge's accuracy."""

    id: str
    category: str
    human: float  # one labeller's score, or several labellers' mean
    judge: float


def confusion(human: Sequence[str], judge: Sequence[str]) -> list[list[int]]:
    """Counts, rows the human class and columns the judge's, both in :data:`CLASSES` order."""
    table = [[0] * len(CLASSES) for _ in CLASSES]
    for h, j in zip(human, judge, strict=True):
        table[CLASSES.index(h)][CLASSES.index(j)] += 1
    return table


def weighted_kappa(table: Sequence[Sequence[int]],
                   sides: tuple[str, str] = ("the human labels", "the judge's scores")) -> tuple[float | None, str | None]:
    """Cohen's kappa with linear weights of a square confusion table (see the module): the value,
    or None and why it is undefined (``sides`` name the rows and the columns in it)."""
    k = len(table)
    n = sum(map(sum, table))
    if n == 0:
        return None, "no pairs"
    rows = [sum(r) for r in table]
    cols = [sum(table[i][j] for i in range(k)) for j in range(k)]
    for side, margin in ((sides[0], rows), (sides[1], cols)):
        used = [CLASSES[i] if k == len(CLASSES) else str(i) for i in range(k) if margin[i]]
        if len(used) == 1:
            return None, f"{side} use one class only ({used[0]})"
    weight = [[abs(i - j) / (k - 1) for j in range(k)] for i in range(k)]
    observed = sum(weight[i][j] * table[i][j] for i in range(k) for j in range(k))
    expected = sum(weight[i][j] * rows[i] * cols[j] / n for i in range(k) for j in range(k))
    return 1 - observed / expected, None


def spearman(a: Sequence[float], b: Sequence[float]) -> tuple[float | None, float | None, str | None]:
    """Spearman's rho and its p-value, or None, None and why it is undefined."""
    if len(a) < 2:
        return None, None, f"{len(a)} pair{'s' if len(a) != 1 else ''}: needs 2"
    if len(set(a)) == 1 or len(set(b)) == 1:
        return None, None, "constant scores on one side"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.spearmanr(a, b)
    p = float(res.pvalue)
    return float(res.statistic), (None if math.isnan(p) else p), None  # 2 pairs: rho +-1, no p-value


def _var(values: Sequence[float]) -> float:
    m = sum(values) / len(values)
    return sum((v - m) ** 2 for v in values) / (len(values) - 1)


def mean_ci(values: Sequence[float]) -> dict:
    """Mean and its 95% t interval (``mean +- t(0.975, n - 1) * sd / sqrt(n)``, sd with ddof 1);
    the interval is None below 2 values."""
    n = len(values)
    if n == 0:
        return {"mean": None, "ci": None, "n": 0}
    mean = sum(values) / n
    if n < 2:
        return {"mean": mean, "ci": None, "n": n}
    half = float(stats.t.ppf(0.975, n - 1)) * math.sqrt(_var(values) / n)
    return {"mean": mean, "ci": [mean - half, mean + half], "n": n}


def ppi_mean(judge_unlabelled: Sequence[float], human: Sequence[float], judge_labelled: Sequence[float]) -> dict:
    """The prediction-powered mean (see the module): ``human`` and ``judge_labelled`` pair up
    over the labelled answers. Returns mean, ci, the rectifier ``mean(y - f)``, the counts, the
    method, and ``why`` when the interval cannot be computed."""
    n, big_n = len(human), len(judge_unlabelled)
    if len(judge_labelled) != n:
        raise ValueError("every labelled answer needs its judge score")
    if n == 0:
        return {"method": "ppi", "mean": None, "ci": None, "rectifier": None, "n_labelled": 0,
                "n_unlabelled": big_n, "why": "no labelled answers"}
    diffs = [y - f for y, f in zip(human, judge_labelled)]
    rectifier = sum(diffs) / n
    if big_n == 0:
        return {"method": "human mean (every answer labelled)", **_human_mean(human), "rectifier": rectifier,
                "n_labelled": n, "n_unlabelled": 0}
    theta = sum(judge_unlabelled) / big_n + rectifier
    out = {"method": "ppi", "mean": theta, "ci": None, "rectifier": rectifier, "n_labelled": n,
           "n_unlabelled": big_n, "why": None}
    if n < 2 or big_n < 2:
        out["why"] = "the interval needs 2 labelled and 2 unlabelled answers"
        return out
    half = Z95 * math.sqrt(_var(judge_unlabelled) / big_n + _var(diffs) / n)
    out["ci"] = [theta - half, theta + half]
    return out


def _human_mean(human: Sequence[float]) -> dict:
    m = mean_ci(human)
    return {"mean": m["mean"], "ci": m["ci"], "why": None if m["ci"] else "the interval needs 2 answers"}


def agreement_table(pairs: Sequence[Pair]) -> dict:
    """Kappa, Spearman and the confusion table of ``pairs``:
    ``{n, kappa: {value, why}, spearman: {value, p, why}, confusion: {human class: {judge class: count}}}``."""
    table = confusion([score_class(p.human) for p in pairs], [score_class(p.judge) for p in pairs])
    kappa, k_why = weighted_kappa(table)
    rho, p, r_why = spearman([p.human for p in pairs], [p.judge for p in pairs])
    return {"n": len(pairs), "kappa": {"value": kappa, "why": k_why},
            "spearman": {"value": rho, "p": p, "why": r_why},
            "confusion": {h: dict(zip(CLASSES, row)) for h, row in zip(CLASSES, table)}}


def agreement(pairs: Sequence[Pair], unlabelled_judge: Sequence[float], category_order: Sequence[str] = ()) -> dict:
    """Everything ``lab agree`` reports from the labelled ``pairs`` and the judge's scores of the
    unlabelled answers: agreement overall and per category (in ``category_order``, then any
    others), the judge-only and the prediction-powered mean accuracy, and the disagreements
    (pairs whose classes differ, largest score gap first)."""
    groups: dict[str, list[Pair]] = defaultdict(list)
    for p in pairs:
        groups[p.category].append(p)
    order = [c for c in category_order if c in groups] + sorted(set(groups) - set(category_order))
    disagree = [p for p in pairs if score_class(p.human) != score_class(p.judge)]
    disagree.sort(key=lambda p: -abs(p.human - p.judge))
    return {
        "overall": agreement_table(pairs),
        "by_category": {c: agreement_table(groups[c]) for c in order},
        "accuracy_mean": {
            "judge_only": mean_ci([p.judge for p in pairs] + list(unlabelled_judge)),
            "ppi": ppi_mean(unlabelled_judge, [p.human for p in pairs], [p.judge for p in pairs]),
        },
        "disagreements": [{"id": p.id, "category": p.category, "human": p.human, "judge": p.judge,
                           "human_class": score_class(p.human), "judge_class": score_class(p.judge)}
                          for p in disagree],
    }
