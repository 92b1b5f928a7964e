"""The hedged-capital betting confidence sequence (lab.stats.betting): its capital worked by hand,
its bounds and capitals against the authors' library (confseq 0.0.11's ``hedged_cs`` and
``betting_mart``, values below), the roots exact, and its validity under continuous monitoring by
simulation beside a t-test looked at after every question."""

import math

import numpy as np
import pytest

from lab.stats.betting import ROOT_TOL, betting_cs, log_capital, plugin_bets
from lab.stats.sequential import eb_cs

ALPHA = 0.05
# hand-made sequences: A on [0, 1]; D a difference on [-1, 1] (B = (D + 1) / 2 is what confseq reads)
A = [0.5, 1, 0.75, 0.25, 1, 1, 0.5, 0.75, 1, 0.5, 0.75, 1.0]
D = [0.5, 0, 1, -0.5, 0.75, 0, 0, 0.25, 1, 0, -0.25, 0.5, 0, 1, 0.5, 0, 0.75, -1, 0.5, 0.25]

# confseq 0.0.11 (the sdist, built with pybind11 2.13 for this Python, numpy 1.26), running_intersection
# False, breaks 10000: hedged_cs(x, alpha, theta=theta, breaks=10000) -> (l, u), the grid's bounds widened by
# one step; betting_mart(x, m, alpha, lambdas of lambda_predmix_eb at alpha * theta and alpha * (1 - theta),
# theta=theta, trunc_scale=1/2) at t = 1, n // 2 + 1, n.
CONFSEQ = {
    ("A", 0.05, 0.5): {
        "l": [0.0, 0.0, 0.1219, 0.1413, 0.2027, 0.2594, 0.2804, 0.3135, 0.3545, 0.3649, 0.3876, 0.4187],
        "u": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.9709, 0.9513, 0.9561, 0.9303, 0.9207, 0.9251],
        "cap": {0.3: [0.666666666667, 14.5035150892, 278.017612161], 0.5: [0.5, 1.58203125, 5.56182861328],
                0.7: [0.666666666667, 0.462247550371, 0.626685336858]}},
    ("D", 0.05, 0.5): {
        "l": [0.0, 0.0, 0.1242, 0.1412, 0.1968, 0.2243, 0.2473, 0.2743, 0.3154, 0.3281, 0.3314, 0.3536, 0.362,
              0.3896, 0.4063, 0.411, 0.4296, 0.4012, 0.4148, 0.4231],
        "u": [1.0, 1.0, 1.0, 1.0, 0.9884, 0.9303, 0.8979, 0.8787, 0.8911, 0.8685, 0.8424, 0.8367, 0.8197, 0.8326,
              0.8287, 0.8157, 0.8186, 0.7962, 0.7947, 0.7899],
        "cap": {0.3: [0.875, 40.419251186, 1110.69159457], 0.5: [0.625, 1.42753601074, 3.23469692376],
                0.7: [0.517857142857, 0.778565457819, 0.895912413268]}},
    ("D", 0.1, 0.3): {
        "l": [0.0, 0.0, 0.1334, 0.1498, 0.2067, 0.2341, 0.2568, 0.2838, 0.3253, 0.3376, 0.3402, 0.3624, 0.3704,
              0.3981, 0.4147, 0.419, 0.4376, 0.4084, 0.4219, 0.43],
        "u": [1.0, 1.0, 1.0, 0.942, 0.9296, 0.8893, 0.8621, 0.8386, 0.8585, 0.8346, 0.81, 0.8062, 0.7903, 0.8049,
              0.8023, 0.7902, 0.7944, 0.771, 0.7703, 0.7659],
        "cap": {0.3: [0.525, 24.2515507116, 654.88040717], 0.5: [0.525, 0.856521606445, 1.94081815425],
                0.7: [0.641666666667, 1.08999164095, 1.25069065708]}},
}


def unit(name):
    return np.asarray(A) if name == "A" else (np.asarray(D) + 1) / 2


@pytest.mark.parametrize("key", list(CONFSEQ), ids=lambda k: f"{k[0]}-alpha{k[1]}-theta{k[2]}")
def test_the_bounds_and_capitals_are_confseqs(key):
    name, alpha, theta = key
    ref, x = CONFSEQ[key], unit(name)
    cs = betting_cs(x, alpha, theta=theta, running_intersection=False)
    # confseq reads a grid of 1e-4 and widens by a step: its lower is the last grid point the capital
    # rejects, below the exact root by less than a step (the upper likewise, mirrored)
    l, u = np.asarray(ref["l"]), np.asarray(ref["u"])
    assert np.all(l - 1e-12 <= cs.lower) and np.all(cs.lower <= l + 1e-4 + 1e-12)
    assert np.all(u - 1e-4 - 1e-12 <= cs.upper) and np.all(cs.upper <= u + 1e-12)
    n = x.size
    for m, caps in ref["cap"].items():
        up, down = log_capital(x, m, alpha, theta=theta)
        hedged = np.exp(np.maximum(up, down))[[0, n // 2, n - 1]]
        assert hedged == pytest.approx(caps, rel=1e-10)
    # the same sequence on the difference's own scale is the unit one mapped back
    if name == "D":
        full = betting_cs(D, alpha, -1, 1, theta=theta, running_intersection=False)
        np.testing.assert_allclose(full.lower, 2 * cs.lower - 1, atol=1e-12)


def test_the_capital_by_hand_on_three_observations():
    x, m = [1.0, 0.0, 0.5], 0.25
    # the bets: sigma2_0 = 1/4; after X_1 = 1, mu_1 = (1/2 + 1) / 2 = 3/4 and sigma2_1 = (1/4 + 1/16) / 2 = 5/32
    lam1 = math.sqrt(2 * math.log(40) / (0.25 * 1 * math.log(2)))
    lam2 = math.sqrt(2 * math.log(40) / (5 / 32 * 2 * math.log(3)))
    assert plugin_bets(np.asarray(x), ALPHA / 2)[:2] == pytest.approx([lam1, lam2], rel=1e-12)
    # the upward bets are capped at c / m = 2 (lam1 = 6.5, lam2 = 4.6); the downward at c / (1 - m) = 2/3
    up = 0.5 * (1 + 2 * (1 - m)) * (1 + 2 * (0 - m))
    down = 0.5 * (1 - 2 / 3 * (1 - m)) * (1 - 2 / 3 * (0 - m))
    lu, ld = log_capital(x, m, ALPHA)
    assert math.exp(lu[1]) == pytest.approx(up, rel=1e-12) and math.exp(ld[1]) == pytest.approx(down, rel=1e-12)


def test_each_bound_is_the_root_of_its_capital_to_the_tolerance():
    rng = np.random.default_rng(2)
    x = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=60, p=[0.1, 0.15, 0.35, 0.25, 0.15])
    cs = betting_cs(x, ALPHA, -1, 1, running_intersection=False)
    threshold = math.log(1 / ALPHA)
    for t in (10, 30, 60):
        lower, upper = cs.lower[t - 1], cs.upper[t - 1]
        assert -1 < lower < upper < 1
        # rejected at the bound (from its side), kept a step inside it: the bound is the root, rounded outwards
        assert log_capital(x[:t], lower, ALPHA, -1, 1)[0][-1] >= threshold
        assert log_capital(x[:t], lower + 4 * ROOT_TOL, ALPHA, -1, 1)[0][-1] < threshold
        assert log_capital(x[:t], upper, ALPHA, -1, 1)[1][-1] >= threshold
        assert log_capital(x[:t], upper - 4 * ROOT_TOL, ALPHA, -1, 1)[1][-1] < threshold


def test_many_paths_at_once_are_each_paths_sequence_and_the_defaults_intersect():
    rng = np.random.default_rng(5)
    x = rng.choice([-1.0, 0.0, 0.5, 1.0], size=(2, 3, 25))
    cs = betting_cs(x, ALPHA, -1, 1)
    for idx in np.ndindex(2, 3):
        one = betting_cs(x[idx], ALPHA, -1, 1)
        np.testing.assert_allclose(cs.lower[idx], one.lower)
        np.testing.assert_allclose(cs.upper[idx], one.upper)
        raw = betting_cs(x[idx], ALPHA, -1, 1, running_intersection=False)
        np.testing.assert_allclose(one.lower, np.maximum.accumulate(raw.lower))
    assert betting_cs([], ALPHA).lower.size == 0


def test_on_real_shaped_differences_it_is_narrower_than_the_empirical_bernstein_sequence():
    """Differences of two rank metrics: mostly ties, a spread of 0.3 on a range of 2. The betting
    sequence's width after 150 questions is under the empirical-Bernstein one's (0.18 against 0.24)."""
    rng = np.random.default_rng(1)
    x = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=150, p=[0.03, 0.07, 0.7, 0.12, 0.08])
    b, e = betting_cs(x, ALPHA, -1, 1), eb_cs(x, ALPHA, -1, 1)
    assert b.upper[-1] - b.lower[-1] < 0.8 * (e.upper[-1] - e.lower[-1])


@pytest.mark.parametrize("kwargs, x", [({"alpha": 0.0}, [0.5]), ({"c": 1.0}, [0.5]), ({"theta": 1.5}, [0.5]),
                                       ({"lo": 1.0, "hi": 0.0}, [0.5]), ({}, [0.5, 1.2]), ({}, [float("nan")]),
                                       ({}, 0.5)])
def test_bad_input_is_refused(kwargs, x):
    with pytest.raises(ValueError):
        betting_cs(x, **kwargs)
    with pytest.raises(ValueError):
        log_capital(x, 0.5, **kwargs)


def _ever_above(x, alpha, value):
    """Per path, whether the capital ever rejects ``value``: the sequence, read after every
    question, ever excludes it."""
    up, down = log_capital(x, value, alpha, -1, 1)
    return np.any(np.maximum(up, down) >= math.log(1 / alpha), axis=-1)


def test_monitored_after_every_question_it_keeps_the_false_positive_rate_and_the_coverage():
    """400 paths of 150 differences with mean 0 on {-1, -0.5, 0, 0.5, 1}: the sequence read after
    every question ever excludes 0 on at most alpha of them, where a t-test read the same way (from
    the 10th question) does on several times alpha. With a true mean of 0.1 it holds 0.1 at every
    question on at least 1 - alpha of the paths."""
    from scipy import stats

    rng = np.random.default_rng(3)
    values = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    null = rng.choice(values, size=(400, 150), p=[0.1, 0.2, 0.4, 0.2, 0.1])
    false = _ever_above(null, ALPHA, 0.0).mean()
    t = np.arange(1, 151)
    mean = np.cumsum(null, axis=1) / t
    sd = np.sqrt(np.maximum((np.cumsum(null ** 2, axis=1) - t * mean ** 2) / np.maximum(t - 1, 1), 1e-12))
    p = 2 * stats.t.sf(np.abs(mean) / (sd / np.sqrt(t)), np.maximum(t - 1, 1))
    peeked = np.any((t >= 10) & (p < ALPHA), axis=1).mean()
    assert false <= ALPHA < 3 * ALPHA < peeked
    shifted = rng.choice(values, size=(400, 150), p=[0.1, 0.15, 0.4, 0.15, 0.2])  # mean 0.1
    assert 1 - _ever_above(shifted, ALPHA, 0.1).mean() >= 1 - ALPHA
