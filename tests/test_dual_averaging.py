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


def test_three_updates_match_algorithm_5_in_closed_form():
    # H̄_m = Σ_{i≤m} (δ − α_i) / (m + t0) (the weights 1 − 1/(i + t0) telescope), x_m = μ − √m H̄_m / γ, and
    # x̄_3 = w_3 x_3 + (1 − w_3) w_2 x_2 + (1 − w_3)(1 − w_2) x_1 with w_m = m^−κ: m = 1 alone checks neither κ nor
    # the average (a weight of 1/m, or x̄ = x, passed)
    target, gamma, t0, kappa = 0.65, 0.05, 10.0, 0.75
    da_init, da_update, da_final = dual_averaging(target=target, gamma=gamma, t0=t0, kappa=kappa)
    state, mu = da_init(0.5), math.log(5.0)
    accepts = [0.2, 0.9, 0.5]
    for a in accepts:
        state = da_update(state, a)
    assert state.error_avg == pytest.approx((0.45 - 0.25 + 0.15) / 13, rel=1e-12)
    x = [mu - math.sqrt(m) / gamma * sum(target - a for a in accepts[:m]) / (m + t0) for m in (1, 2, 3)]
    w2, w3 = 2.0 ** -kappa, 3.0 ** -kappa
    average = w3 * x[2] + (1 - w3) * w2 * x[1] + (1 - w3) * (1 - w2) * x[0]
    assert state.log_step_size == pytest.approx(x[2], rel=1e-12)
    assert state.log_step_size_avg == pytest.approx(average, rel=1e-12)
    assert da_final(state) == pytest.approx(math.exp(average), rel=1e-12)
    assert abs(average - x[2]) > 0.1  # the average is not the last iterate here


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


@pytest.mark.parametrize("kwargs", [{"target": 1.0}, {"target": 0.0}, {"kappa": 0.5}, {"gamma": 0.0},
                                    {"gamma": math.nan}, {"t0": math.nan}, {"gamma": math.inf}, {"t0": math.inf},
                                    {"t0": -1.0}, {"target": math.nan}, {"kappa": math.nan}])
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


class StanWindows:
    """Stan's ``windowed_adaptation`` (src/stan/mcmc/windowed_adaptation.hpp), member by member.

    ``set_window_params`` is followed by ``restart()`` in both branches, so the 15/75/10 fallback's first
    window ends at ``init_buffer + base_window - 1`` as the default's does. Below 20 iterations the
    members stay 0 and ``adapt_next_window_`` is -1 (unsigned wrap-around in C++): no window ever ends.
    """

    def __init__(self, num_warmup, init_buffer=75, term_buffer=50, base_window=25):
        self.num_warmup = self.init_buffer = self.term_buffer = self.base_window = 0
        if num_warmup >= 20:
            self.num_warmup = num_warmup
            if init_buffer + base_window + term_buffer > num_warmup:
                self.init_buffer = int(0.15 * num_warmup)
                self.term_buffer = int(0.10 * num_warmup)
                self.base_window = num_warmup - (self.init_buffer + self.term_buffer)
            else:
                self.init_buffer, self.term_buffer, self.base_window = init_buffer, term_buffer, base_window
        self.restart()

    def restart(self):
        self.counter = 0
        self.window_size = self.base_window
        self.next_window = self.init_buffer + self.window_size - 1

    def adaptation_window(self):
        return self.init_buffer <= self.counter < self.num_warmup - self.term_buffer and self.counter != self.num_warmup

    def end_adaptation_window(self):
        return self.counter == self.next_window and self.counter != self.num_warmup

    def compute_next_window(self):
        last = self.num_warmup - self.term_buffer - 1
        if self.next_window == last:
            return
        self.window_size *= 2
        self.next_window = self.counter + self.window_size
        if self.next_window == last:
            return
        if self.next_window + 2 * self.window_size >= self.num_warmup - self.term_buffer:
            self.next_window = last

    def window_ends(self):
        """The counters at which ``learn_variance`` ends a window; only those counters change the state."""
        ends = []
        while self.counter < self.num_warmup:
            if self.end_adaptation_window():
                ends.append(self.counter)
                self.compute_next_window()
            # learn_variance's ++adapt_window_counter_, skipping counters where nothing happens
            self.counter = self.next_window if self.next_window > self.counter else self.num_warmup
        return ends


def test_warmup_schedule_is_stans_windowed_adaptation():
    # the first window was stretched as later ones are: 151-199 iterations gave one window where Stan has two
    for num_steps in range(3001):
        is_slow, is_end = warmup_schedule(num_steps)
        stan = StanWindows(num_steps)
        assert np.flatnonzero(is_end).tolist() == stan.window_ends(), num_steps
        assert is_slow.tolist() == [stan.adaptation_window() for stan.counter in range(num_steps)], num_steps
    assert np.flatnonzero(warmup_schedule(190)[1]).tolist() == [99, 139]


@pytest.mark.parametrize("kwargs, name", [({"num_steps": 25.0}, "num_steps=25.0"), ({"num_steps": -1}, "num_steps=-1"),
                                          ({"num_steps": True}, "num_steps=True"),
                                          ({"num_steps": 200, "initial_buffer": 7.5}, "initial_buffer=7.5"),
                                          ({"num_steps": 200, "first_window": 0}, "first_window=0"),
                                          ({"num_steps": 200, "final_buffer": -5}, "final_buffer=-5")])
def test_warmup_schedule_refuses_counts_that_are_not_integers(kwargs, name):
    # 25.0 gave a raw TypeError, and a first window of 0 never ended the loop
    with pytest.raises(ParameterError, match=name):
        warmup_schedule(**kwargs)


def test_welford_matches_numpy(rng):
    draws = rng.standard_normal((200, 4)) * [1.0, 2.0, 0.1, 5.0]
    v_init, v_update, v_final = welford_variance(regularize=False)
    state = v_init(4)
    for x in draws:
        state = v_update(state, x)
    np.testing.assert_allclose(state.mean, draws.mean(0), rtol=1e-12)
    np.testing.assert_allclose(v_final(state), draws.var(0, ddof=1), rtol=1e-10)
    # the warm-up's default shrinks as Stan's var_adaptation: n/(n+5) var + 1e-3 · 5/(n+5) (a variance left
    # unshrunk passed: only regularize=False was checked)
    r_init, r_update, r_final = welford_variance()
    state = r_init(4)
    for x in draws:
        state = r_update(state, x)
    np.testing.assert_allclose(r_final(state), (200 / 205) * draws.var(0, ddof=1) + 1e-3 * (5 / 205), rtol=1e-10)


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
