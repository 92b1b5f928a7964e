"""Anytime-valid confidence sequences (lab.stats.sequential): the empirical-Bernstein CS against the
paper's formulas worked by hand, its validity under continuous monitoring by simulation (against
a t-test looked at after every question), its coverage and power; the normal-mixture CS by hand;
the stopping rules on made-up bounds."""

import math
import statistics

import numpy as np
import pytest
from scipy import stats

from lab.stats.sequential import decide, eb_cs, gate_decide, normal_mixture_cs, optimal_rho2

ALPHA = 0.05
# the per-question difference of two [0, 1] metrics, in steps of 1/2
VALUES = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
NULL_P = [0.1, 0.2, 0.4, 0.2, 0.1]  # symmetric: mean 0
MEAN_01_P = [0.1, 0.15, 0.4, 0.15, 0.2]  # mean 0.1
MEAN_03_P = [0.05, 0.1, 0.3, 0.3, 0.25]  # mean 0.3
PATHS, LENGTH = 400, 150


def hand_eb(x01, alpha, c=0.5):
    """Waudby-Smith & Ramdas PrPl-EB (Theorem 2, eqs. 13-15) on [0, 1] data, written out with
    plain loops: the raw center -/+ width at every t (no clipping, no running intersection), and the
    lambdas."""
    log_term = math.log(2 / alpha)
    mu_prev, sigma2_prev = 0.5, 0.25  # mu_0, sigma2_0
    sum_x = sum_sq = 0.0
    sum_lam = sum_lam_x = sum_v_psi = 0.0
    lowers, uppers, lambdas = [], [], []
    for t, xt in enumerate(x01, start=1):
        lam = min(math.sqrt(2 * log_term / (sigma2_prev * t * math.log(1 + t))), c)
        v = 4 * (xt - mu_prev) ** 2
        psi = (-math.log(1 - lam) - lam) / 4
        sum_lam += lam
        sum_lam_x += lam * xt
        sum_v_psi += v * psi
        center = sum_lam_x / sum_lam
        width = (log_term + sum_v_psi) / sum_lam
        lowers.append(center - width)
        uppers.append(center + width)
        lambdas.append(lam)
        # the estimates after t observations, used by the next step
        sum_x += xt
        mu_t = (0.5 + sum_x) / (t + 1)
        sum_sq += (xt - mu_t) ** 2
        sigma2_t = (0.25 + sum_sq) / (t + 1)
        mu_prev, sigma2_prev = mu_t, sigma2_t
    return lowers, uppers, lambdas


def raw_eb(x, alpha=ALPHA, lo=0.0, hi=1.0, **kw):
    return eb_cs(x, alpha, lo, hi, running_intersection=False, clip=False, **kw)


def test_eb_cs_on_four_observations_matches_the_formulas_by_hand():
    x = [1.0, 0.0, 1.0, 1.0]
    lowers, uppers, lambdas = hand_eb(x, ALPHA)
    assert lambdas == [0.5] * 4  # so early every bet is truncated at c
    # step 1 written out: lambda 1/2, center x_1, width (log 40 + 4 (1 - 1/2)^2 psi_E(1/2)) / (1/2)
    psi = (-math.log(0.5) - 0.5) / 4
    assert lowers[0] == pytest.approx(1 - (math.log(40) + psi) / 0.5)
    assert uppers[0] == pytest.approx(1 + (math.log(40) + psi) / 0.5)
    cs = raw_eb(x)
    assert cs.lower == pytest.approx(lowers, rel=1e-12)
    assert cs.upper == pytest.approx(uppers, rel=1e-12)


def test_eb_cs_matches_the_formulas_by_hand_where_the_bets_fall_below_c():
    rng = np.random.default_rng(7)
    x = rng.beta(0.5, 0.5, size=120)  # variance 1/8: the bets drop below c after ~50 steps
    for alpha, c in [(ALPHA, 0.5), (0.2, 0.75)]:
        lowers, uppers, lambdas = hand_eb(x.tolist(), alpha, c)
        assert min(lambdas) < c and lambdas[0] == c  # both branches of the min
        cs = raw_eb(x, alpha, c=c)
        assert cs.lower == pytest.approx(lowers, rel=1e-10)
        assert cs.upper == pytest.approx(uppers, rel=1e-10)


def test_eb_cs_maps_minus_one_one_to_the_unit_interval_and_back():
    rng = np.random.default_rng(3)
    d = rng.choice(VALUES, size=80, p=MEAN_01_P)
    lowers, uppers, _ = hand_eb(((d + 1) / 2).tolist(), ALPHA)
    cs = raw_eb(d, lo=-1.0, hi=1.0)
    assert cs.lower == pytest.approx([-1 + 2 * v for v in lowers], rel=1e-10, abs=1e-12)
    assert cs.upper == pytest.approx([-1 + 2 * v for v in uppers], rel=1e-10, abs=1e-12)
    # the defaults (clipped to [-1, 1], running intersection) are the unit-interval CS mapped back
    unit = eb_cs((d + 1) / 2, ALPHA)
    full = eb_cs(d, ALPHA, -1.0, 1.0)
    np.testing.assert_allclose(full.lower, -1 + 2 * unit.lower, atol=1e-12)
    np.testing.assert_allclose(full.upper, -1 + 2 * unit.upper, atol=1e-12)


def test_eb_cs_defaults_clip_and_intersect():
    rng = np.random.default_rng(11)
    d = rng.choice(VALUES, size=150, p=MEAN_03_P)
    raw = raw_eb(d, lo=-1.0, hi=1.0)
    cs = eb_cs(d, ALPHA, -1.0, 1.0)
    assert np.all(cs.lower >= -1) and np.all(cs.upper <= 1)
    assert np.all(np.diff(cs.lower) >= 0) and np.all(np.diff(cs.upper) <= 0)
    np.testing.assert_allclose(cs.lower, np.maximum.accumulate(np.clip(raw.lower, -1, 1)))
    np.testing.assert_allclose(cs.upper, np.minimum.accumulate(np.clip(raw.upper, -1, 1)))
    assert cs.upper[0] == 1 and cs.lower[0] == -1  # one question says nothing
    assert cs.lower[-1] > 0  # and 150 questions with a mean difference of 0.3 do


def test_eb_cs_on_many_paths_is_the_cs_of_each_path():
    rng = np.random.default_rng(5)
    x = rng.choice(VALUES, size=(3, 2, 40), p=NULL_P)
    cs = eb_cs(x, ALPHA, -1, 1)
    assert cs.lower.shape == x.shape
    for idx in np.ndindex(3, 2):
        one = eb_cs(x[idx], ALPHA, -1, 1)
        np.testing.assert_allclose(cs.lower[idx], one.lower)
        np.testing.assert_allclose(cs.upper[idx], one.upper)


@pytest.mark.parametrize(
    "kwargs, x",
    [
        ({"alpha": 0.0}, [0.5]),
        ({"alpha": 1.0}, [0.5]),
        ({"lo": 1.0, "hi": 1.0}, [1.0]),
        ({"c": 1.0}, [0.5]),
        ({}, [0.5, 1.2]),
        ({}, [0.5, float("nan")]),
        ({}, 0.5),
    ],
)
def test_eb_cs_refuses_bad_input(kwargs, x):
    with pytest.raises(ValueError):
        eb_cs(x, **kwargs)


def test_eb_cs_of_nothing_is_empty():
    cs = eb_cs([], ALPHA, -1, 1)
    assert cs.lower.size == 0 and cs.upper.size == 0


def _paths(p, seed):
    return np.random.default_rng(seed).choice(VALUES, size=(PATHS, LENGTH), p=p)


def _ever_excludes(cs, value):
    return np.any((cs.lower > value) | (cs.upper < value), axis=1)


def test_monitoring_the_eb_cs_after_every_question_keeps_the_false_positive_rate():
    d = _paths(NULL_P, seed=2024)
    cs_rate = _ever_excludes(eb_cs(d, ALPHA, -1, 1), 0.0).mean()
    # the naive way: a two-sided paired t-test after every question from the 10th on
    rejected = np.zeros(PATHS, dtype=bool)
    for t in range(10, LENGTH + 1):
        p = stats.ttest_1samp(d[:, :t], 0.0, axis=1).pvalue
        rejected |= np.nan_to_num(p, nan=1.0) < ALPHA
    peek_rate = rejected.mean()
    msg = f"CS false positives {cs_rate:.4f}, peeking t-test false positives {peek_rate:.4f}"
    assert cs_rate <= ALPHA, msg
    assert peek_rate > 0.10, msg


def test_the_eb_cs_keeps_its_level_on_a_skewed_null():
    # mean 0 but lopsided: a fifth of the questions lose 1, the rest gain 1/4
    d = np.random.default_rng(99).choice([-1.0, 0.25], size=(PATHS, LENGTH), p=[0.2, 0.8])
    rate = _ever_excludes(eb_cs(d, ALPHA, -1, 1), 0.0).mean()
    assert rate <= ALPHA, f"CS false positives on the skewed null {rate:.4f}"


def test_the_eb_cs_covers_the_true_mean_at_all_times():
    d = _paths(MEAN_01_P, seed=17)
    mean = float(VALUES @ MEAN_01_P)
    assert mean == pytest.approx(0.1)
    coverage = 1 - _ever_excludes(eb_cs(d, ALPHA, -1, 1), mean).mean()
    assert coverage >= 1 - ALPHA, f"paths covered at every t: {coverage:.4f}"


def test_the_eb_cs_finds_a_difference_of_0_3_before_150_questions():
    d = _paths(MEAN_03_P, seed=31)
    assert float(VALUES @ MEAN_03_P) == pytest.approx(0.3)
    cs = eb_cs(d, ALPHA, -1, 1)
    found = cs.lower[:, -1] > 0  # monotone bounds: excluded at some t <= 150 iff at t = 150
    assert found.mean() > 0.80, f"paths with a difference found: {found.mean():.4f}"
    assert not np.any(cs.upper[:, -1] < 0)  # never the wrong sign


def test_normal_mixture_cs_matches_the_formula_by_hand():
    x = [0.5, -0.25, 1.0, 0.0, 0.75, -1.0, 0.5]
    rho2 = 0.3
    cs = normal_mixture_cs(x, ALPHA, rho2)
    assert cs.lower[0] == -math.inf and cs.upper[0] == math.inf
    for t in range(2, len(x) + 1):
        mean = statistics.fmean(x[:t])
        sd = statistics.stdev(x[:t])
        half = sd * math.sqrt(2 * (t * rho2 + 1) / (t**2 * rho2) * math.log(math.sqrt(t * rho2 + 1) / ALPHA))
        assert cs.lower[t - 1] == pytest.approx(mean - half, rel=1e-12)
        assert cs.upper[t - 1] == pytest.approx(mean + half, rel=1e-12)


def test_optimal_rho2_is_the_closed_form_and_nearly_minimises_the_boundary():
    t_opt = 150
    a = -2 * math.log(ALPHA)
    assert optimal_rho2(t_opt, ALPHA) == pytest.approx((a + math.log(a + 1)) / t_opt)

    def boundary(rho2):
        return math.sqrt(2 * (t_opt * rho2 + 1) / (t_opt**2 * rho2) * math.log(math.sqrt(t_opt * rho2 + 1) / ALPHA))

    best = min(boundary(r) for r in np.geomspace(1e-4, 10, 4000))
    assert boundary(optimal_rho2(t_opt, ALPHA)) <= best * 1.01
    # the default rho2 is the one for t_opt = 100
    x = np.random.default_rng(0).normal(size=30)
    np.testing.assert_allclose(
        normal_mixture_cs(x, ALPHA).upper, normal_mixture_cs(x, ALPHA, optimal_rho2(100, ALPHA)).upper
    )


def test_normal_mixture_cs_is_about_valid_after_a_burn_in_and_narrower_than_eb():
    d = _paths(NULL_P, seed=8)
    nm = normal_mixture_cs(d, ALPHA)
    late = np.any(((nm.lower > 0) | (nm.upper < 0))[:, 19:], axis=1).mean()
    assert late <= 0.08, f"normal-mixture false positives from t = 20 on: {late:.4f}"
    eb = eb_cs(d, ALPHA, -1, 1)
    assert np.median(nm.upper[:, -1] - nm.lower[:, -1]) < np.median(eb.upper[:, -1] - eb.lower[:, -1])


def test_normal_mixture_cs_with_every_question_tied_has_zero_width():
    cs = normal_mixture_cs(np.zeros(5), ALPHA)
    assert np.all(np.abs(cs.upper[1:] - cs.lower[1:]) < 1e-9)


@pytest.mark.parametrize(
    "lower, upper, kwargs, expected",
    [
        (0.02, 0.3, {}, "difference"),  # b better
        (-0.4, -0.01, {}, "difference"),  # b worse
        (-0.1, 0.2, {}, "continue"),
        (0.02, 0.3, {"margin": 0.05}, "continue"),  # excludes 0 but not [-0.05, 0.05]
        (0.06, 0.3, {"margin": 0.05}, "difference"),
        (-0.03, 0.04, {"effect": 0.05}, "futile"),
        (-0.03, 0.06, {"effect": 0.05}, "continue"),
        (-0.06, 0.04, {"effect": 0.05}, "continue"),
        (0.01, 0.04, {"effect": 0.05}, "difference"),  # a difference smaller than effect is still one
        (-0.1, 0.2, {"n_left": 0}, "inconclusive"),
        (-0.1, 0.2, {"n_left": 3}, "continue"),
        (-0.03, 0.04, {"effect": 0.05, "n_left": 0}, "futile"),
        ([-1.0, -0.5, 0.01], [1.0, 0.5, 0.2], {}, "difference"),  # running bounds: the last ones count
    ],
)
def test_decide(lower, upper, kwargs, expected):
    assert decide(lower, upper, **kwargs) == expected


@pytest.mark.parametrize(
    "lower, upper, margin, expected",
    [
        (-0.01, 0.1, 0.02, "pass"),
        (0.01, 0.1, 0.0, "pass"),
        (-0.2, -0.05, 0.02, "fail"),
        (-0.05, 0.01, 0.02, "continue"),
        ([-1.0, -0.3], [1.0, -0.03], 0.02, "fail"),
    ],
)
def test_gate_decide(lower, upper, margin, expected):
    assert gate_decide(lower, upper, margin) == expected


def test_stopping_rules_refuse_bad_arguments():
    with pytest.raises(ValueError):
        decide(0.0, 1.0, margin=-0.1)
    with pytest.raises(ValueError):
        decide(0.0, 1.0, effect=0.0)
    with pytest.raises(ValueError):
        decide(0.0, 1.0, n_left=-1)
    with pytest.raises(ValueError):
        decide([], [])
    with pytest.raises(ValueError):
        gate_decide(0.0, 1.0, margin=-0.1)


def test_decide_on_a_monitored_comparison_stops_with_the_right_sign():
    d = np.random.default_rng(4).choice(VALUES, size=LENGTH, p=MEAN_03_P)
    cs = eb_cs(d, ALPHA, -1, 1)
    verdicts = [decide(cs.lower[t], cs.upper[t], n_left=LENGTH - t - 1) for t in range(LENGTH)]
    stop = verdicts.index("difference")
    assert set(verdicts[:stop]) == {"continue"}
    assert cs.lower[stop] > 0


# confseq 0.0.11 (by the method's authors), predmix_empbern_twosided_cs(X, alpha=0.05,
# truncation=0.5, running_intersection=False): its values, recorded once from the library (it builds
# a C++ extension and has no wheel on the package index, so it is not a dependency here)
X = [0.75, 1.0, 1.0, 0.5, 0.5, 1.0, 0.0, 1.0, 1.0, 0.75, 0.5, 0.5, 0.5, 0.75, 0.75, 0.75, 1.0, 1.0, 0.75, 1.0, 0.5, 0.25, 0.75, 0.0, 0.0, 0.75, 0.75, 1.0, 0.75, 0.75, 0.75, 0.5, 0.0, 0.25, 0.75, 0.5, 0.5, 0.0, 1.0, 0.25]
CONFSEQ_LOWER = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0324308809, 0.0671080248, 0.1157941843, 0.1580006636, 0.1949402636, 0.240294015, 0.2808244385, 0.3055139672, 0.3389006845, 0.3454223949, 0.3369018499, 0.3548431196, 0.3317743853, 0.3112000321, 0.3279566084, 0.3434806999, 0.3653949036, 0.3785891866, 0.3909083034, 0.4024365238, 0.4050700645, 0.3873873845, 0.3814451545, 0.3918583353, 0.3946208365, 0.3972468824, 0.3826045168, 0.3970422819, 0.3919376215]
CONFSEQ_UPPER = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.9915377308, 0.9826990342, 0.9848498399, 0.9768195313, 0.9693201239, 0.9623006639, 0.9482690861, 0.9249414888, 0.9069916931, 0.9026231738, 0.8916806308, 0.8813167073, 0.8623126626, 0.8672359955, 0.853233699]


def test_the_confseq_variant_reproduces_confseq_and_the_papers_differs_only_a_little():
    ours = eb_cs(np.asarray(X), 0.05, 0.0, 1.0, running_intersection=False, increments="confseq")
    assert ours.lower == pytest.approx(CONFSEQ_LOWER, abs=1e-9)
    assert ours.upper == pytest.approx(CONFSEQ_UPPER, abs=1e-9)
    paper = eb_cs(np.asarray(X), 0.05, 0.0, 1.0, running_intersection=False)
    assert np.max(np.abs(paper.lower - np.asarray(CONFSEQ_LOWER))) < 0.02  # the first increments' centre only
    assert np.max(np.abs(paper.upper - np.asarray(CONFSEQ_UPPER))) < 0.001
    with pytest.raises(ValueError, match="increments"):
        eb_cs(np.asarray(X), increments="nope")
