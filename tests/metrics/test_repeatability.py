"""Judge repeatability: flip rate, ICC(1,1) and the nested variance split against hand arithmetic,
an independent least-squares ANOVA, a published table and the F-formula interval."""

import json

import numpy as np
import pytest
from scipy import stats

from lab.metrics.repeatability import flip_rate, icc, summary, variance_components

# Shrout & Fleiss (1979), Table 2: 6 targets x 4 judges. Table 2 gives BMS 11.24 and WMS 6.26;
# Table 4 gives ICC(1,1) = .17.
SHROUT_FLEISS = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]


@pytest.mark.parametrize("items, flips, pairs, mad", [
    # 3 items x 2 repeats: [4,4] agrees, [3,5] and [2,3] flip -> 2/3; one pair each: 0, 1, 1 -> 2/3;
    # |x - median| with 2 repeats is |a - b| / 2: 0, 1, 0.5 -> 1.5 / 3
    ([[4, 4], [3, 5], [2, 3]], 2 / 3, 2 / 3, 0.5),
    # 3 repeats: [5,5,4] flips, 2 of its 3 pairs differ, median 5, deviations 0,0,1 -> 1/3;
    # [3,3,3] agrees: 0, 0 -> means 1/2, (2/3 + 0) / 2, (1/3 + 0) / 2
    ([[5, 5, 4], [3, 3, 3]], 1 / 2, 1 / 3, 1 / 6),
    # unequal repeats weigh items equally: [1,2,3] has 3 of 3 pairs differing, mad 2/3; [2,2] none
    ([[1, 2, 3], [2, 2]], 1 / 2, 1 / 2, 1 / 3),
    # a judge that never changes its mind
    ([[1, 1], [5, 5, 5]], 0.0, 0.0, 0.0),
])
def test_flip_rate_by_hand(items, flips, pairs, mad):
    out = flip_rate(items)
    assert out["flip_rate"] == pytest.approx(flips)
    assert out["pairwise_disagreement"] == pytest.approx(pairs)
    assert out["mean_abs_dev"] == pytest.approx(mad)
    assert (out["n_items"], out["n_left_out"], out["n_missing"], out["reason"]) == (len(items), 0, 0, None)


def test_missing_scores_are_dropped_and_items_with_fewer_than_two_left_out_and_counted():
    # [4, None, 4] -> [4, 4]; [None, 5] and [] keep < 2 scores; [3, nan] too; [3, 5] flips -> 1 of 2
    out = flip_rate([[4, None, 4], [None, 5], [3, 5], [], [3, float("nan")]])
    assert (out["n_items"], out["n_left_out"], out["n_missing"]) == (2, 3, 3)
    assert out["flip_rate"] == pytest.approx(0.5)
    nothing = flip_rate([[None, None], [2]])
    assert nothing["flip_rate"] is None and nothing["n_left_out"] == 2 and "no item" in nothing["reason"]


@pytest.mark.parametrize("items, expected", [
    # 3 items x 2: means 1.5, 3.5, 5, grand 10/3. SSB = 2 (121 + 1 + 100) / 36 = 37/3, MSB = 37/6;
    # SSW = 4 x 0.25 = 1, MSW = 1/3; ICC = (37/6 - 1/3) / (37/6 + 1/3) = 35/39
    ([[1, 2], [3, 4], [5, 5]], 35 / 39),
    # unbalanced 3 + 2 scores: means 2 and 5, grand 3.2; MSB = 3 (1.2)^2 + 2 (1.8)^2 = 10.8 (df 1);
    # MSW = (1 + 0 + 1 + 1 + 1) / 3 = 4/3; k0 = (5 - 13/5) / 1 = 2.4;
    # ICC = (10.8 - 4/3) / (10.8 + 1.4 x 4/3) = (142/15) / (190/15) = 71/95
    ([[1, 2, 3], [4, 6]], 71 / 95),
    # items with equal means: MSB = 0, MSW = 4 x 0.25 / 2 = 0.5 -> ICC = -MSW / MSW = -1/(k - 1) = -1
    ([[1, 2], [2, 1]], -1.0),
])
def test_icc_by_hand(items, expected):
    assert icc(items)["icc"] == pytest.approx(expected)


def test_icc_on_the_shrout_fleiss_table():
    out = icc(SHROUT_FLEISS)
    assert round(out["msb"], 2) == 11.24 and round(out["msw"], 2) == 6.26
    assert round(out["icc"], 2) == 0.17
    assert (out["df_between"], out["df_within"], out["k0"]) == (5, 18, 4.0)


def _icc_by_least_squares(items):
    """A second computation: SSW is the residual of regressing every score on item indicators;
    SSB is what the indicators explain (total SS minus SSW)."""
    y = np.concatenate([np.asarray(s, dtype=float) for s in items])
    item_of = np.repeat(np.arange(len(items)), [len(s) for s in items])
    design = (item_of[:, None] == np.arange(len(items))[None, :]).astype(float)
    fitted = design @ np.linalg.lstsq(design, y, rcond=None)[0]
    ssw = float(((y - fitted) ** 2).sum())
    ssb = float(((y - y.mean()) ** 2).sum()) - ssw
    a, n = len(items), len(y)
    msb, msw = ssb / (a - 1), ssw / (n - a)
    n0 = (n - sum(len(s) ** 2 for s in items) / n) / (a - 1)
    return (msb - msw) / (msb + (n0 - 1) * msw), msb / msw


@pytest.mark.parametrize("seed, unbalanced", [(0, False), (1, False), (2, True), (3, True)])
def test_icc_agrees_with_a_least_squares_anova(seed, unbalanced):
    rng = np.random.default_rng(seed)
    items = []
    for _ in range(25):
        k = int(rng.integers(2, 6)) if unbalanced else 3
        items.append(list(np.clip(np.round(rng.normal(rng.uniform(1, 5), 0.8, size=k)), 1, 5)))
    want_icc, want_f = _icc_by_least_squares(items)
    out = icc(items)
    assert out["icc"] == pytest.approx(want_icc, rel=1e-9)
    assert out["f"] == pytest.approx(want_f, rel=1e-9)


@pytest.mark.parametrize("items, level", [
    (SHROUT_FLEISS, 0.95),
    (SHROUT_FLEISS, 0.9),
    ([[1, 2, 3], [4, 6], [2, 2, 3]], 0.95),  # unbalanced: k0 stands in for k
])
def test_icc_interval_is_the_f_formula(items, level):
    out = icc(items, level=level)
    f0, df1, df2, k0 = out["f"], out["df_between"], out["df_within"], out["k0"]
    q = 1 - (1 - level) / 2
    fl = f0 / stats.f.ppf(q, df1, df2)  # McGraw & Wong (1996) case 1: F_L = F_obs / F(1-a/2; n-1, n(k-1))
    fu = f0 * stats.f.ppf(q, df2, df1)  # F_U = F_obs x F(1-a/2; n(k-1), n-1)
    assert out["ci"] == pytest.approx([(fl - 1) / (fl + k0 - 1), (fu - 1) / (fu + k0 - 1)])
    assert out["ci"][0] < out["icc"] < out["ci"][1]


def test_shrout_fleiss_interval_rounded():
    lo, hi = icc(SHROUT_FLEISS)["ci"]
    assert (round(lo, 2), round(hi, 2)) == (-0.13, 0.72)


def test_icc_undefined_or_degenerate_says_why():
    same = icc([[3, 3], [3, 3, 3]])
    assert same["icc"] is None and same["ci"] is None and "every score is the same" in same["reason"]
    one = icc([[1, 2], [4], [None, None]])
    assert one["icc"] is None and "at least 2 items" in one["reason"] and one["n_left_out"] == 2
    # items differ, repeats never do: MSW = 0, ICC = 1, the interval is the point
    exact = icc([[1, 1], [4, 4, 4]])
    assert exact["icc"] == 1.0 and exact["ci"] == [1.0, 1.0] and "MSW = 0" in exact["reason"]


def test_icc_drops_missing_scores_and_counts_them():
    # the hand table above plus missing scores and an item left with one score
    out = icc([[1, 2, None], [3, 4], [5, float("nan"), 5], [None, 2]])
    assert out["icc"] == pytest.approx(35 / 39)
    assert (out["n_items"], out["n_left_out"], out["n_missing"]) == (3, 1, 3)


def test_bad_scores_say_where():
    with pytest.raises(ValueError, match=r"item 1, repeat 0: score 'five' is not a number"):
        icc([[1, 2], ["five", 3]])
    with pytest.raises(ValueError, match=r"question 0, answer 0: expected a list of judge scores"):
        variance_components([[4, 5], [3, 2]])  # items x repeats given where questions x answers x repeats is due


# y = 4 + Q + A + J with Q = +-2 per question, A = +-1 per answer, J = +-1 per judgement (a = g = k = 2):
# question means 6 and 2 (grand 4): MS_question = g k (2^2 + 2^2) / (a - 1) = 4 x 8 = 32;
# answer means 7,5 | 3,1: MS_answer = k x 4 x 1^2 / (a (g - 1)) = 8 / 2 = 4;
# judgements +-1 about each answer: MS_judge = 8 x 1^2 / (a g (k - 1)) = 8 / 4 = 2.
# judge = 2, answer = (4 - 2) / 2 = 1, question = (32 - 4) / 4 = 7; total 10
NESTED = [[[8, 6], [6, 4]], [[4, 2], [2, 0]]]


def test_variance_components_by_hand():
    out = variance_components(NESTED)
    assert out["mean_squares"] == pytest.approx({"question": 32.0, "answer": 4.0, "judge": 2.0})
    parts = [(name, c["variance"], c["share"]) for name, c in out["components"].items()]
    assert [name for name, _, _ in parts] == ["question", "answer", "judge"]
    assert [v for _, v, _ in parts] == pytest.approx([7.0, 1.0, 2.0])
    assert [s for _, _, s in parts] == pytest.approx([0.7, 0.1, 0.2])
    assert (out["n_questions"], out["answers_per_question"], out["judgements_per_answer"]) == (2, 2, 2)
    assert out["truncated"] == [] and out["reason"] is None


def test_variance_components_recover_known_variances_from_simulation():
    rng = np.random.default_rng(7)
    a, g, k = 3000, 3, 3
    y = (rng.normal(0, 1.0, (a, 1, 1)) + rng.normal(0, 0.5 ** 0.5, (a, g, 1))
         + rng.normal(0, 0.5, (a, g, k)))  # variances 1, 0.5, 0.25
    comps = variance_components(y.tolist())["components"]
    assert comps["question"]["variance"] == pytest.approx(1.0, abs=0.08)
    assert comps["answer"]["variance"] == pytest.approx(0.5, abs=0.05)
    assert comps["judge"]["variance"] == pytest.approx(0.25, abs=0.02)


def test_negative_estimate_is_truncated_and_named():
    # every answer mean is 2: MS_question = MS_answer = 0; MS_judge = 8 x 1 / 4 = 2;
    # answer = (0 - 2) / 2 = -1 -> 0 (truncated); question = 0 (not negative); judge takes it all
    out = variance_components([[[1, 3], [3, 1]], [[1, 3], [1, 3]]])
    assert out["truncated"] == ["answer"]
    assert out["components"]["answer"] == {"variance": 0.0, "share": 0.0}
    assert out["components"]["judge"] == {"variance": 2.0, "share": 1.0}


def test_incomplete_cells_are_dropped_and_counted():
    # a third question whose first answer lost a judgement: that answer goes, then the question
    # (1 complete answer of 2); the rest is the hand table
    out = variance_components(NESTED + [[[5, None], [3, 3]]])
    assert (out["n_missing"], out["n_answers_dropped"], out["n_questions_dropped"]) == (1, 1, 1)
    assert out["mean_squares"] == pytest.approx({"question": 32.0, "answer": 4.0, "judge": 2.0})


def test_variance_components_undefined_says_why():
    single = variance_components([[[4], [5]], [[3], [2]]])  # one judgement per answer
    assert single["components"] is None and "judged 2+ times" in single["reason"]
    assert "2 x 2 x 1" in single["reason"]
    same = variance_components([[[3, 3], [3, 3]], [[3, 3], [3, 3]]])
    assert same["components"]["judge"] == {"variance": 0.0, "share": None}
    assert "every score is the same" in same["reason"]


def _plain_json(value) -> bool:
    if isinstance(value, dict):
        return all(type(k) is str and _plain_json(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain_json(v) for v in value)
    return value is None or type(value) in (str, int, float)


def test_summary_is_json_ready_per_dimension():
    # numpy scores in, plain Python out; accuracy has answer repeats, relevance does not
    per_dim = {
        "accuracy": [[list(np.array(a, dtype=np.int64)) for a in q] for q in NESTED],
        "relevance": [[[1, 2]], [[3, 4]], [[5, 5]], [[None, 4]]],
    }
    out = summary(per_dim)
    assert _plain_json(out)
    json.dumps(out, allow_nan=False)
    rel = out["relevance"]
    assert set(rel) == {"n_items", "n_left_out", "n_missing", "flip_rate", "pairwise_disagreement", "mean_abs_dev",
                        "icc", "icc_ci", "icc_reason"}
    assert (rel["n_items"], rel["n_left_out"], rel["n_missing"]) == (3, 1, 1)
    assert rel["flip_rate"] == pytest.approx(2 / 3) and rel["icc"] == pytest.approx(35 / 39)
    assert len(rel["icc_ci"]) == 2
    acc = out["accuracy"]
    assert acc["n_items"] == 4 and acc["flip_rate"] == 1.0  # every answer's two judgements differ by 2
    assert acc["variance_components"]["components"]["question"]["share"] == pytest.approx(0.7)
