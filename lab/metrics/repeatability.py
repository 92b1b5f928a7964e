"""Is the judge repeatable? Flip rate, intra-class correlation and a nested variance split for
scores given more than once to the same thing.

Shapes. ``items``: a list of items (answers), each a list of the scores the judge gave it on
its repeats (``judge.repeats: k``). ``questions``: a list of questions, each a list of answers
(``generation.repeats: g``), each a list of judge scores. A score is a number or None (a failed
judge call); None and NaN are *missing*: never used, always counted (``n_missing``).

Everything returned is JSON-ready: plain ``int``/``float``/``str``/``None``, lists and dicts;
an undefined value is ``None`` with a ``reason``, never NaN.
"""

from __future__ import annotations

import math
import numbers
from typing import Mapping, Sequence

import numpy as np
from scipy import stats

Score = float | int | None


def _scores(scores: object, where: str) -> tuple[list[float], int]:
    """(the valid scores as floats, how many were missing) of one judged answer."""
    if isinstance(scores, (str, bytes)) or not isinstance(scores, Sequence):
        raise ValueError(f"{where}: expected a list of judge scores, got {scores!r}")
    valid = []
    for r, score in enumerate(scores):
        if score is None:
            continue
        if isinstance(score, bool) or not isinstance(score, numbers.Real):
            raise ValueError(f"{where}, repeat {r}: score {score!r} is not a number "
                             "(give a number, or None for a failed judge call)")
        if not math.isnan(score):
            valid.append(float(score))
    return valid, len(scores) - len(valid)


def _clean(items: Sequence[Sequence[Score]]) -> tuple[list[list[float]], int, int]:
    """(items with 2+ valid scores, their missing scores removed; items left out; scores missing)."""
    kept, left_out, missing = [], 0, 0
    for i, item in enumerate(items):
        valid, lost = _scores(item, f"item {i}")
        missing += lost
        if len(valid) >= 2:
            kept.append(valid)
        else:
            left_out += 1
    return kept, left_out, missing


def flip_rate(items: Sequence[Sequence[Score]]) -> dict:
    """How often the judge changes its mind about one item.

    Over the items with at least 2 valid scores (the others are left out and counted):

    - ``flip_rate``: share of items whose scores are not all equal;
    - ``pairwise_disagreement``: per item, the share of its n(n-1)/2 pairs of repeats that differ,
      averaged over items (every item weighs the same, whatever its number of valid scores);
    - ``mean_abs_dev``: per item, the mean of |score - the item's median|, averaged over items
      (score points; with 2 repeats a and b it is |a - b| / 2).

    Returns ``{n_items, n_left_out, n_missing, flip_rate, pairwise_disagreement, mean_abs_dev,
    reason}``; the three rates are None (with a ``reason``) when no item is usable.
    """
    kept, left_out, missing = _clean(items)
    out = {"n_items": len(kept), "n_left_out": left_out, "n_missing": missing}
    if not kept:
        return {**out, "flip_rate": None, "pairwise_disagreement": None, "mean_abs_dev": None,
                "reason": "no item has 2 or more valid scores"}
    flips, pairs, devs = [], [], []
    for scores in kept:
        n = len(scores)
        counts = np.unique(scores, return_counts=True)[1]
        flips.append(len(counts) > 1)
        pairs.append(1.0 - float(np.sum(counts * (counts - 1))) / (n * (n - 1)))  # 1 - equal pairs / all pairs
        devs.append(float(np.mean(np.abs(np.asarray(scores) - np.median(scores)))))
    return {**out, "flip_rate": sum(flips) / len(kept), "pairwise_disagreement": sum(pairs) / len(kept),
            "mean_abs_dev": sum(devs) / len(kept), "reason": None}


def icc(items: Sequence[Sequence[Score]], level: float = 0.95) -> dict:
    """ICC(1,1), one-way random effects, single rating (Shrout & Fleiss 1979; McGraw & Wong 1996
    case 1): the share of score variance that lies between items rather than between repeats of
    one item. 1 = the repeats always agree; 0 or below = repeats vary as much as items do.

    One-way ANOVA over the items with at least 2 valid scores (a items, n_i scores each, N in all):
    MSB = sum n_i (mean_i - mean)^2 / (a - 1), MSW = sum (x - mean_i)^2 / (N - a),
    ICC = (MSB - MSW) / (MSB + (k0 - 1) MSW), with k0 = (N - sum n_i^2 / N) / (a - 1), which is
    k when every item has k scores. Interval at ``level`` from F0 = MSB / MSW:
    FL = F0 / F_q(a-1, N-a), FU = F0 * F_q(N-a, a-1), q = (1 + level) / 2, and the bounds
    (FL - 1) / (FL + k0 - 1), (FU - 1) / (FU + k0 - 1) (exact when balanced, approximate with k0
    otherwise).

    Returns ``{n_items, n_left_out, n_missing, icc, ci: [lo, hi], msb, msw, f, df_between,
    df_within, k0, reason}``. ``icc`` and ``ci`` are None with a ``reason`` when undefined: fewer
    than 2 usable items, or every score the same (MSB = MSW = 0). When no item varies within
    itself (MSW = 0) but items differ, ICC is 1 and the interval is the point 1 (``reason`` says so).
    """
    kept, left_out, missing = _clean(items)
    out = {"n_items": len(kept), "n_left_out": left_out, "n_missing": missing}
    none = {"icc": None, "ci": None, "msb": None, "msw": None, "f": None, "df_between": None,
            "df_within": None, "k0": None}
    a = len(kept)
    if a < 2:
        return {**out, **none, "reason": f"ICC needs at least 2 items with 2 or more valid scores (got {a})"}
    if all(min(s) == max(s) == kept[0][0] for s in kept):
        return {**out, **none, "reason": "every score is the same: no variance between or within items"}
    sizes = np.array([len(s) for s in kept], dtype=float)
    n_total = float(sizes.sum())
    means = np.array([np.mean(s) for s in kept])
    grand = float(np.concatenate(kept).mean())
    df_b, df_w = a - 1, int(n_total) - a
    msb = float(np.sum(sizes * (means - grand) ** 2)) / df_b
    within_constant = all(min(s) == max(s) for s in kept)
    msw = 0.0 if within_constant else sum(float(np.sum((np.asarray(s) - m) ** 2)) for s, m in zip(kept, means)) / df_w
    k0 = (n_total - float(np.sum(sizes ** 2)) / n_total) / df_b
    stats_out = {"msb": msb, "msw": msw, "df_between": df_b, "df_within": df_w, "k0": float(k0)}
    if within_constant:
        return {**out, **stats_out, "icc": 1.0, "ci": [1.0, 1.0], "f": None,
                "reason": "no item varies across its repeats (MSW = 0): ICC is 1 and the interval is the point"}
    f0 = msb / msw
    q = (1.0 + level) / 2.0
    f_lo = f0 / float(stats.f.ppf(q, df_b, df_w))
    f_hi = f0 * float(stats.f.ppf(q, df_w, df_b))
    value = (msb - msw) / (msb + (k0 - 1.0) * msw)
    ci = [(f_lo - 1.0) / (f_lo + k0 - 1.0), (f_hi - 1.0) / (f_hi + k0 - 1.0)]
    return {**out, **stats_out, "icc": float(value), "ci": [float(c) for c in ci], "f": f0, "reason": None}


def _balanced(questions: Sequence[Sequence[Sequence[Score]]]) -> tuple[np.ndarray, dict]:
    """The largest balanced block: answers with fewer valid judgements than the most any answer
    has are dropped, then questions with fewer such answers than the most any question has."""
    cells, missing = [], 0
    for qi, answers in enumerate(questions):
        row = []
        for ai, judged in enumerate(answers):
            valid, lost = _scores(judged, f"question {qi}, answer {ai}")
            missing += lost
            row.append(valid)
        cells.append(row)
    k = max((len(c) for row in cells for c in row), default=0)
    full = [[c for c in row if len(c) == k] for row in cells]
    g = max((len(row) for row in full), default=0)
    kept = [row for row in full if len(row) == g]
    counts = {"n_missing": missing, "n_answers_dropped": sum(len(r) for r in cells) - sum(len(r) for r in full),
              "n_questions_dropped": len(cells) - len(kept)}
    shape = {"n_questions": len(kept), "answers_per_question": g, "judgements_per_answer": k}
    return np.array(kept, dtype=float).reshape(len(kept), g, k), {**shape, **counts}


def variance_components(questions: Sequence[Sequence[Sequence[Score]]]) -> dict:
    """Where the score variance comes from, for questions -> g answers -> k judgements each.

    Balanced nested random-effects ANOVA (a questions, g answers per question, k judgements per
    answer), y_qaj = mu + Q_q + A_qa + J_qaj:
    MS_question = g k sum (mean_q - mean)^2 / (a - 1),
    MS_answer = k sum (mean_qa - mean_q)^2 / (a (g - 1)),
    MS_judge = sum (y - mean_qa)^2 / (a g (k - 1)); then
    judge variance = MS_judge, answer variance = (MS_answer - MS_judge) / k,
    question variance = (MS_question - MS_answer) / (g k).
    A negative estimate is set to 0 and named in ``truncated``; shares are of the sum of the three
    (after truncation). Mild imbalance: an answer with fewer valid judgements than the fullest
    answer is dropped (``n_answers_dropped``), then a question with fewer complete answers than
    the fullest question (``n_questions_dropped``).

    Returns ``{n_questions, answers_per_question, judgements_per_answer, n_missing,
    n_answers_dropped, n_questions_dropped, components: {question|answer|judge: {variance, share}},
    mean_squares: {question, answer, judge}, truncated: [...], reason}``; ``components`` and
    ``mean_squares`` are None with a ``reason`` when the block is too small (fewer than 2
    questions, answers or judgements), shares None when every score is the same.
    """
    y, out = _balanced(questions)
    a, g, k = y.shape
    if a < 2 or g < 2 or k < 2:
        return {**out, "components": None, "mean_squares": None, "truncated": [],
                "reason": f"variance components need 2+ questions, each with 2+ answers judged 2+ times "
                          f"(complete block: {a} x {g} x {k})"}
    cell = y.mean(axis=2)
    question = cell.mean(axis=1)
    grand = float(y.mean())
    ms = {"question": g * k * float(np.sum((question - grand) ** 2)) / (a - 1),
          "answer": k * float(np.sum((cell - question[:, None]) ** 2)) / (a * (g - 1)),
          "judge": float(np.sum((y - cell[:, :, None]) ** 2)) / (a * g * (k - 1))}
    raw = {"question": (ms["question"] - ms["answer"]) / (g * k), "answer": (ms["answer"] - ms["judge"]) / k,
           "judge": ms["judge"]}
    truncated = [name for name, v in raw.items() if v < 0]
    var = {name: max(v, 0.0) for name, v in raw.items()}
    total = sum(var.values())
    components = {name: {"variance": v, "share": v / total if total > 0 else None} for name, v in var.items()}
    reason = None if total > 0 else "every score is the same: no variance to share out"
    return {**out, "components": components, "mean_squares": ms, "truncated": truncated, "reason": reason}


def summary(per_dimension: Mapping[str, Sequence[Sequence[Sequence[Score]]]], level: float = 0.95) -> dict:
    """Repeatability per judge dimension, ready for results.json.

    ``per_dimension``: dimension -> questions -> answers -> judge scores (without answer repeats
    each question holds one answer: ``[[4, 4, 5]]``). Flip rate and ICC treat every answer as an
    item judged k times; ``variance_components`` is added when some question has 2+ answers.

    Returns ``{dimension: {n_items, n_left_out, n_missing, flip_rate, pairwise_disagreement,
    mean_abs_dev, icc, icc_ci: [lo, hi] | None, icc_reason[, variance_components]}}``.
    """
    out = {}
    for dim, questions in per_dimension.items():
        items = [answer for answers in questions for answer in answers]
        flips, rel = flip_rate(items), icc(items, level)
        row = {key: flips[key] for key in ("n_items", "n_left_out", "n_missing", "flip_rate",
                                           "pairwise_disagreement", "mean_abs_dev")}
        row.update({"icc": rel["icc"], "icc_ci": rel["ci"], "icc_reason": rel["reason"]})
        if any(len(answers) >= 2 for answers in questions):
            row["variance_components"] = variance_components(questions)
        out[dim] = row
    return out
