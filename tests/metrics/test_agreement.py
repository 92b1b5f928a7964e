"""Rank agreement between two eval sets: the correlations against hand-computed values."""

import pytest

from lab.metrics.agreement import rank_agreement


def test_one_swapped_pair_of_four():
    # set A ranks w < x < y < z; set B swaps x and y: 5 concordant pairs, 1 discordant of 6
    a = {"w": [0.1, 0.1], "x": [0.2, 0.2], "y": [0.3, 0.3], "z": [0.4, 0.4]}
    b = {"w": [0.1] * 3, "x": [0.3] * 3, "y": [0.2] * 3, "z": [0.4] * 3}
    out = rank_agreement(a, b, resamples=50)
    assert out["kendall_tau"] == pytest.approx((5 - 1) / 6)
    assert out["spearman"] == pytest.approx(1 - 6 * (0 + 1 + 1 + 0) / (4 * (16 - 1)))  # 0.8
    # constant values per config: every resample gives the same means, so the interval is the point
    assert out["kendall_tau_ci"] == pytest.approx([2 / 3, 2 / 3]) and out["spearman_ci"] == pytest.approx([0.8, 0.8])
    assert (out["n_a"], out["n_b"], out["configs"]) == (2, 3, ["w", "x", "y", "z"])


def test_interval_widens_with_noisy_questions():
    a = {"p": [0.0, 1.0, 0.5, 0.2], "q": [0.1, 0.9, 0.6, 0.3], "r": [1.0, 0.0, 0.4, 0.9]}
    b = {"p": [0.2, 0.3, 0.1, 0.4], "q": [0.3, 0.4, 0.2, 0.5], "r": [0.9, 0.1, 0.5, 0.8]}
    out = rank_agreement(a, b, resamples=400, seed=1)
    lo, hi = out["kendall_tau_ci"]
    assert out["kendall_tau"] == pytest.approx(1.0) and lo < 1.0 <= hi  # p < q < r on both sets' means


def test_needs_three_configs_and_equal_lengths():
    with pytest.raises(ValueError, match="at least 3 configs"):
        rank_agreement({"a": [1], "b": [2]}, {"a": [1], "b": [2]})
    with pytest.raises(ValueError, match="same questions"):
        rank_agreement({"a": [1], "b": [2, 3], "c": [1]}, {"a": [1], "b": [2], "c": [3]})
