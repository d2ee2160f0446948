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
