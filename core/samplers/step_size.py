"""Step-size schedules in (init, update, final) form.

The SGLD schedule of ICASSP'16 §2.1: eps_k = (a / k)^b during burn-in, then
held at its last burn-in value. The state works on the log step size, like
blackjax's adaptation schedules.
"""

from typing import NamedTuple

import numpy as np

from sepsti.core.checks import integer_at_least, is_number, scalar
from sepsti.core.errors import ParameterError

__all__ = ["PolynomialDecayState", "polynomial_decay", "step_sizes", "validate_step_schedule"]


class PolynomialDecayState(NamedTuple):
    """Iteration k (from 1) and log eps_k."""

    iteration: int
    log_step_size: float


def validate_step_schedule(a, b):
    """Return (a, b) as floats if a is a finite number > 0 and b a number in (0.5, 1], else raise ParameterError."""
    a, b = scalar(a), scalar(b)
    if not (is_number(a) and 0 < a < np.inf):  # NaN fails; float() read strings and took True as 1
        raise ParameterError(f"step_a={a!r} must be positive and finite")
    if not (is_number(b) and 0.5 < b <= 1.0):
        raise ParameterError(f"step_b={b!r} must lie in (0.5, 1] (Welling & Teh's conditions)")
    return float(a), float(b)


def polynomial_decay(a, b, *, num_decay_steps):
    """eps_k = (a / k)^b for k <= num_decay_steps, then fixed.

    Parameters
    ----------
    a, b : float
        Scale and exponent (ICASSP'16: a_eps, b_eps): a finite and positive, b in (0.5, 1] (Welling & Teh's
        conditions on the steps).
    num_decay_steps : int
        Iterations over which the step decays (the burn-in), an integer of at
        least 0; afterwards the step stays at eps_{num_decay_steps}
        (at eps_1 = a^b for 0 and 1).

    Returns
    -------
    init_fn : callable
        ``init_fn() -> PolynomialDecayState`` at k = 1.
    update_fn : callable
        ``update_fn(state) -> PolynomialDecayState`` at k + 1.
    final_fn : callable
        ``final_fn(state) -> float``, the step size of ``state``.

    Raises
    ------
    ParameterError
        An ``a``, ``b`` or ``num_decay_steps`` outside the ranges above (a string or a bool included).
    """
    a, b = validate_step_schedule(a, b)
    last = max(integer_at_least("num_decay_steps", num_decay_steps, 0), 1)

    def log_step(k):
        return b * (np.log(a) - np.log(min(k, last)))

    def init_fn():
        return PolynomialDecayState(1, log_step(1))

    def update_fn(state):
        k = state.iteration + 1
        return PolynomialDecayState(k, log_step(k))

    def final_fn(state):
        return float(np.exp(state.log_step_size))

    return init_fn, update_fn, final_fn


def step_sizes(a, b, *, num_steps, num_decay_steps):
    """The first ``num_steps`` (an integer of at least 0) step sizes of :func:`polynomial_decay`, as an array."""
    num_steps = integer_at_least("num_steps", num_steps, 0)
    init_fn, update_fn, final_fn = polynomial_decay(a, b, num_decay_steps=num_decay_steps)
    state = init_fn()
    out = np.empty(num_steps)
    for k in range(num_steps):
        out[k] = final_fn(state)
        state = update_fn(state)
    return out
