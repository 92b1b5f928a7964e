"""Bootstrap intervals and paired tests, checked against values worked out by hand."""

import numpy as np
import pytest

from lab.report.stats import bootstrap_ci, paired, permutation_p, sign_test_p


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
