"""Dual averaging, the initial-step heuristic, the warm-up schedule and the running variance."""

import copy
import math

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.samplers.dual_averaging import dual_averaging
from sepsti.core.samplers.hmc import find_reasonable_step_size, init, sample_momentum
from sepsti.core.samplers.integrators import IntegratorState, kinetic_energy, leapfrog
from sepsti.core.samplers.mass_matrix import warmup_schedule, welford_variance


def test_first_update_matches_algorithm_5():
    da_init, da_update, _ = dual_averaging(target=0.65, gamma=0.05, t0=10.0, kappa=0.75)
    state = da_init(0.5)
    assert state.mu == pytest.approx(math.log(5.0))
    state = da_update(state, 0.2)
    error = (0.65 - 0.2) / 11.0
    log_step = math.log(5.0) - 1.0 / 0.05 * error
    assert state.error_avg == pytest.approx(error)
    assert state.log_step_size == pytest.approx(log_step)
    assert state.log_step_size_avg == pytest.approx(log_step)  # m^-κ = 1 at m = 1


def test_converges_to_step_with_target_acceptance(rng):
    # A noisy acceptance statistic decreasing in the step size: E[α | ε] = exp(-ε).
    target = 0.8
    da_init, da_update, da_final = dual_averaging(target=target)
    state = da_init(3.0)
    for _ in range(3000):
        step = math.exp(state.log_step_size)
        accept = min(1.0, max(0.0, math.exp(-step) + 0.1 * rng.standard_normal()))
        state = da_update(state, accept)
    assert math.exp(-da_final(state)) == pytest.approx(target, abs=0.02)


@pytest.mark.parametrize("kwargs", [{"target": 1.0}, {"target": 0.0}, {"kappa": 0.5}, {"gamma": 0.0}])
def test_rejects_bad_parameters(kwargs):
    with pytest.raises(ParameterError):
        dual_averaging(**kwargs)


def test_initial_step_crosses_one_half(rng):
    scales = np.array([0.1, 1.0, 3.0])

    def logdensity_and_grad(x):
        return -0.5 * np.sum((x / scales) ** 2), -x / scales ** 2

    state = init(np.array([0.3, -1.0, 2.0]), logdensity_and_grad)
    inverse_mass = np.ones(3)
    replay = copy.deepcopy(rng)
    step = find_reasonable_step_size(rng, state, logdensity_and_grad, inverse_mass)
    momentum = sample_momentum(replay, inverse_mass)
    start = IntegratorState(state.position, momentum, state.logdensity, state.logdensity_grad)
    energy0 = -state.logdensity + kinetic_energy(momentum, inverse_mass)

    def log_ratio(eps):
        end = leapfrog(start, eps, logdensity_and_grad, inverse_mass)
        return energy0 + end.logdensity - kinetic_energy(end.momentum, inverse_mass)

    first_above = log_ratio(1.0) > math.log(0.5)
    # Algorithm 4 stops at the first power of two on the other side of 1/2.
    assert (log_ratio(step) > math.log(0.5)) != first_above
    previous = step / 2 if first_above else step * 2
    assert (log_ratio(previous) > math.log(0.5)) == first_above
    assert 0.01 < step < 1.0


def test_warmup_schedule_matches_stan_windows():
    is_slow, is_end = warmup_schedule(1000)
    assert list(np.flatnonzero(is_end)) == [99, 149, 249, 449, 949]
    assert not is_slow[:75].any() and is_slow[75:950].all() and not is_slow[950:].any()
    is_slow, is_end = warmup_schedule(100)  # too short for the defaults: 15 % / 75 % / 10 %
    assert is_slow.sum() == 75 and is_end[89]
    assert not warmup_schedule(10)[0].any()


def test_welford_matches_numpy(rng):
    draws = rng.standard_normal((200, 4)) * [1.0, 2.0, 0.1, 5.0]
    v_init, v_update, v_final = welford_variance(regularize=False)
    state = v_init(4)
    for x in draws:
        state = v_update(state, x)
    np.testing.assert_allclose(state.mean, draws.mean(0), rtol=1e-12)
    np.testing.assert_allclose(v_final(state), draws.var(0, ddof=1), rtol=1e-10)


@pytest.mark.parametrize("statistic", [math.nan, math.inf, -math.inf])
def test_a_non_finite_acceptance_statistic_counts_as_a_rejection(statistic):
    """A non-finite statistic (a diverged proposal) updates Algorithm 5 as alpha = 0: the step shrinks."""
    da_init, da_update, da_final = dual_averaging(target=0.65, gamma=0.05, t0=10.0, kappa=0.75)
    state = da_update(da_init(0.5), statistic)
    error = 0.65 / 11.0
    assert state.error_avg == pytest.approx(error)
    assert state.log_step_size == pytest.approx(math.log(5.0) - error / 0.05)
    # later on too: after an acceptance of 1 the next update with the statistic matches alpha = 0
    accepted = da_update(state, 1.0)
    assert da_update(accepted, statistic) == da_update(accepted, 0.0)
    assert da_final(da_update(accepted, statistic)) < da_final(da_update(accepted, 1.0))
