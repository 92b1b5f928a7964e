"""Bootstrap intervals and paired tests, checked against values worked out by hand."""

import numpy as np
import pytest

from lab.stats.paired import benjamini_hochberg, bootstrap_ci, holm, paired, paired_deltas, permutation_p, sign_test_p


def test_bootstrap_of_constant_and_single_values_is_a_point():
    assert bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)
    assert bootstrap_ci([3]) == (3.0, 3.0)
    assert bootstrap_ci([]) is None
    assert bootstrap_ci([None, None]) is None


def test_bootstrap_of_two_values_spans_both():
    # resampled means of [0, 1] are 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4: the 2.5th and
    # 97.5th percentiles are the extremes
    assert bootstrap_ci([0, 1]) == (0.0, 1.0)


def test_bootstrap_matches_the_normal_interval_for_many_values():
    x = np.random.default_rng(0).normal(0.0, 1.0, 400)
    lo, hi = bootstrap_ci(x)
    half = 1.96 * x.std(ddof=1) / np.sqrt(x.size)  # ~0.098
    assert lo < x.mean() < hi
    assert (hi - lo) / 2 == pytest.approx(half, rel=0.1)


def test_bootstrap_is_seeded():
    x = [0.1, 0.4, 0.35, 0.8, 0.2]
    assert bootstrap_ci(x) == bootstrap_ci(list(x))


def test_permutation_p_exact_by_enumeration():
    # sign flips of (1, 2, 3): sums 6, 4, 2, 0, 0, -2, -4, -6; |sum| >= 6 in 2 of 8
    assert permutation_p([1, 2, 3]) == 0.25
    assert permutation_p([1, 1, 1, 1, 1]) == 2 / 32
    assert permutation_p([0, 0, 1]) == 1.0  # zeros carry no sign; one delta: 2 of 2 reach it
    assert permutation_p([0, 0]) == 1.0
    assert permutation_p([1, -1]) == 1.0


def test_permutation_p_monte_carlo_for_many_deltas():
    # 30 equal deltas: only the all-plus and all-minus assignments (2 in 2**30) reach the
    # observed sum, so 10,000 random draws almost surely hit none: p = (0 + 1) / (10000 + 1)
    assert permutation_p([0.5] * 30) == 1 / 10001
    assert permutation_p([1, -1] * 15) == 1.0


def test_sign_test():
    assert sign_test_p(5, 0) == 2 / 32
    assert sign_test_p(0, 5) == 2 / 32
    assert sign_test_p(3, 3) == 1.0
    assert sign_test_p(9, 1) == 2 * (1 + 10) / 1024
    assert sign_test_p(0, 0) == 1.0


def test_paired_uses_shared_questions_and_b_minus_a():
    a = {"q1": 0.0, "q2": 0.5, "q3": 1.0, "q4": 1.0, "q5": None}
    b = {"q1": 1.0, "q2": 1.0, "q3": 1.0, "q4": 0.5, "q5": 1.0, "q6": 0.0}
    s = paired(a, b)
    assert s.n == 4  # q5 has no value in A, q6 is not in A
    assert s.mean_a == pytest.approx(0.625) and s.mean_b == pytest.approx(0.875)
    assert s.delta == pytest.approx(0.25)  # (1 + 0.5 + 0 - 0.5) / 4
    assert (s.wins, s.losses, s.ties) == (2, 1, 1)
    # non-zero deltas 1, 0.5, -0.5: |sum| = 1; sign flips reaching 1: (+1,+.5,-.5), (+1,-.5,+.5),
    # their negatives, and (+1,+.5,+.5) = 2 and its negative: 6 of 8
    assert s.p_permutation == 0.75
    assert s.p_sign == 1.0
    assert not s.significant()


def test_paired_without_shared_questions():
    s = paired({"a": 1.0}, {"b": 1.0})
    assert s.n == 0 and s.delta is None and s.ci is None and not s.significant()


def test_paired_deltas_are_b_minus_a_on_shared_questions():
    a = {"q1": 0.0, "q2": 0.5, "q3": None, "q4": 1.0}
    b = {"q1": 1.0, "q2": 0.25, "q3": 1.0, "q5": 0.0}
    assert paired_deltas(a, b).tolist() == [1.0, -0.25]  # q3 has no value in A; q4, q5 are in one run only
    assert paired_deltas({}, b).tolist() == []


# Holm on (0.01, 0.04, 0.03, 0.20), by hand: sorted 0.01, 0.03, 0.04, 0.20 times 4, 3, 2, 1 gives
# 0.04, 0.09, 0.08, 0.20; made non-decreasing: 0.04, 0.09, 0.09, 0.20; back in the given order.
# Benjamini-Hochberg, by hand: p * 4 / rank gives 0.04, 0.06, 0.0533, 0.20; the running minimum
# from the largest rank down: 0.04, 0.0533, 0.0533, 0.20.
P = [0.01, 0.04, 0.03, 0.20]


def test_holm_by_hand():
    assert holm(P) == pytest.approx([0.04, 0.09, 0.09, 0.20])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([0.03]) == [0.03] and holm([]) == []


def test_holm_equals_statsmodels_on_random_and_tied_p_values():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(7)
    for m in (1, 2, 3, 5, 8, 13, 40):
        for _ in range(25):
            p = rng.uniform(0, 1, m) ** 3
            if m > 2:
                p[1] = p[0]  # a tie
            assert holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]), abs=1e-15)


def test_benjamini_hochberg_by_hand_and_against_scipy():
    from scipy.stats import false_discovery_control

    assert benjamini_hochberg(P) == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.20])
    ps = np.random.default_rng(3).uniform(0, 0.2, 40)
    assert benjamini_hochberg(ps) == pytest.approx(false_discovery_control(ps, method="bh").tolist())
    assert benjamini_hochberg([]) == []


def test_the_permutation_signs_are_those_rng_choice_draws():
    for seed in (0, 13, 2024):
        for shape in ((7, 3), (100, 41), (10_000, 25)):
            choice = np.random.default_rng(seed).choice([-1.0, 1.0], size=shape)
            fast = np.array([-1.0, 1.0])[np.random.default_rng(seed).integers(0, 2, size=shape)]
            assert np.array_equal(choice, fast)
