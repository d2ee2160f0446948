import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.samplers.step_size import polynomial_decay, step_sizes


def test_polynomial_decay_then_fixed():
    init_fn, update_fn, final_fn = polynomial_decay(5e-7, 0.51, num_decay_steps=10)
    state = init_fn()
    seen = []
    for _ in range(15):
        seen.append(final_fn(state))
        state = update_fn(state)
    k = np.arange(1, 16)
    np.testing.assert_allclose(seen, (5e-7 / np.minimum(k, 10)) ** 0.51, rtol=1e-12)
    np.testing.assert_array_equal(step_sizes(5e-7, 0.51, num_steps=15, num_decay_steps=10), seen)


def test_validation():
    with pytest.raises(ParameterError, match="step_b=0.4"):
        polynomial_decay(1e-3, 0.4, num_decay_steps=5)
    with pytest.raises(ParameterError, match="step_a"):
        polynomial_decay(0.0, 0.6, num_decay_steps=5)


@pytest.mark.parametrize("a, b, message", [(np.inf, 0.6, "step_a=inf must be positive and finite"),
                                           (np.nan, 0.6, "step_a=nan"), ("1e-3", 0.6, "step_a='1e-3'"),
                                           ("fast", 0.6, "step_a='fast'"), (True, 0.6, "step_a=True"),
                                           (1e-3, True, "step_b=True must lie in"), (1e-3, "0.6", "step_b='0.6'"),
                                           (1e-3, np.nan, "step_b=nan")])
def test_a_schedule_that_is_not_finite_numbers_is_refused_by_name(a, b, message):
    """a=inf gave infinite steps, a string met float()'s ValueError (or was read) and True was taken as 1."""
    with pytest.raises(ParameterError, match=rf"^{message}"):
        step_sizes(a, b, num_steps=4, num_decay_steps=3)


@pytest.mark.parametrize("kwargs, name", [({"num_decay_steps": 2.7}, "num_decay_steps=2.7"),
                                          ({"num_decay_steps": -5}, "num_decay_steps=-5"),
                                          ({"num_decay_steps": 10.0}, "num_decay_steps=10.0"),
                                          ({"num_steps": -1}, "num_steps=-1"), ({"num_steps": 4.0}, "num_steps=4.0")])
def test_counts_that_are_not_non_negative_integers_are_refused(kwargs, name):
    # 2.7 decayed over 2 steps and -5 over 1, silently; num_steps=-1 gave a raw ValueError
    with pytest.raises(ParameterError, match=name):
        step_sizes(1.0, 0.6, **{"num_steps": 4, "num_decay_steps": 3, **kwargs})


def test_no_decay_steps_hold_the_first_step():
    np.testing.assert_array_equal(step_sizes(0.5, 0.6, num_steps=3, num_decay_steps=0), [0.5 ** 0.6] * 3)
    assert step_sizes(0.5, 0.6, num_steps=0, num_decay_steps=np.int64(2)).shape == (0,)


def test_the_exponent_range_is_open_at_one_half_and_closed_at_one():
    # Welling & Teh need sum eps_k^2 < inf, which (a / k)^b meets only for b > 1/2 (b = 0.5 accepted passed before)
    with pytest.raises(ParameterError, match="step_b=0.5 must lie in"):
        polynomial_decay(1e-3, 0.5, num_decay_steps=5)
    np.testing.assert_allclose(step_sizes(0.5, 1.0, num_steps=3, num_decay_steps=5), [0.5, 0.25, 0.5 / 3], rtol=1e-12)
