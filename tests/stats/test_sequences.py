"""The sequences a race reads, by name (lab.stats.sequences): each is its module's function, the
normal mixture read from its 10th question, and the first exclusion of a value is what the bounds
say."""

import numpy as np
import pytest

from lab.stats.betting import betting_cs
from lab.stats.sequences import NM_FIRST, SEQUENCES, first_exclusion, sequence_cs
from lab.stats.sequential import eb_cs, normal_mixture_cs

RNG = np.random.default_rng(4)
X = RNG.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=(6, 80), p=[0.05, 0.1, 0.45, 0.25, 0.15])


def test_each_name_is_its_function():
    np.testing.assert_array_equal(sequence_cs("betting", X, 0.05, -1, 1).lower, betting_cs(X, 0.05, -1, 1).lower)
    np.testing.assert_array_equal(sequence_cs("eb", X, 0.05, -1, 1).upper, eb_cs(X, 0.05, -1, 1).upper)
    nm, raw = sequence_cs("normal-mixture", X, 0.05, -1, 1, t_opt=80), normal_mixture_cs(X, 0.05, t_opt=80)
    assert np.all(nm.lower[:, :NM_FIRST - 1] == -1) and np.all(nm.upper[:, :NM_FIRST - 1] == 1)
    np.testing.assert_allclose(nm.lower[:, NM_FIRST - 1:], np.clip(raw.lower[:, NM_FIRST - 1:], -1, 1))
    with pytest.raises(ValueError, match="unknown sequence 'bets'"):
        sequence_cs("bets", X, 0.05, -1, 1)


@pytest.mark.parametrize("name", SEQUENCES)
@pytest.mark.parametrize("value", [0.0, 0.1])
def test_the_first_exclusion_is_where_the_bounds_first_leave_out_the_value(name, value):
    cs = sequence_cs(name, X, 0.05, -1, 1, t_opt=80)
    out = (cs.lower > value) | (cs.upper < value)
    want = np.where(out.any(axis=1), out.argmax(axis=1) + 1, 0)
    got = first_exclusion(name, X, 0.05, -1, 1, value, t_opt=80)
    if name == "betting":  # read from the capital at the value: the bounds are its roots to 1e-9
        assert np.all(np.abs(got - want) <= 1)
    else:
        np.testing.assert_array_equal(got, want)
    assert np.any(want > 0) or (name, value) == ("eb", 0.1)  # something to compare (eb holds 0.1 on all six)
