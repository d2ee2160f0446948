"""Scale (group) moves: invariance of the target with the Jacobian, and its failure without it."""

import numpy as np
import pytest

from sepsti.core.samplers import group_move
from sepsti.core.samplers.hmc import HMCState

SCALES = np.array([1.0, 2.0])


def logdensity_and_grad(x):
    return -0.5 * float(np.sum((x / SCALES) ** 2)), -x / SCALES ** 2


def scale_both(x, log_scales):
    # θ → e^u θ in two dimensions: log |det| = 2u.
    return x * np.exp(log_scales[0]), 2.0 * float(log_scales[0])


def radial_moments(transform_fn, rng, num_chains=3000, num_moves=8):
    kernel = group_move.build_kernel(transform_fn, logdensity_and_grad, num_groups=1, num_moves=num_moves)
    squares = np.empty((num_chains, 2))
    for c in range(num_chains):
        x = SCALES * rng.standard_normal(2)
        state = HMCState(x, *logdensity_and_grad(x))
        state, info = kernel(rng, state, np.log([0.5]))
        squares[c] = state.position ** 2
    mean = squares.mean(0)
    mcse = squares.std(0, ddof=1) / np.sqrt(num_chains)  # chains are independent
    return mean, mcse, info


def test_scale_moves_leave_the_target_invariant(rng):
    # Started from exact draws, the moved draws keep E[x_i^2] = s_i^2; only the radius moves.
    mean, mcse, info = radial_moments(scale_both, rng)
    np.testing.assert_array_less(np.abs(mean - SCALES ** 2), 4 * mcse)
    assert 0.0 < info.acceptance_rate[0] <= 1.0


def test_dropping_the_jacobian_biases_the_moves(rng):
    # The same test has the power to see a wrong move: without |det| the radius shrinks.
    mean, mcse, _ = radial_moments(lambda x, u: (x * np.exp(u[0]), 0.0), rng)
    assert np.all(mean < SCALES ** 2 - 4 * mcse)


def test_non_finite_proposals_are_rejected(rng):
    kernel = group_move.build_kernel(lambda x, u: (np.full(2, np.nan), 0.0), logdensity_and_grad, num_groups=1)
    state = HMCState(np.ones(2), *logdensity_and_grad(np.ones(2)))
    new, info = kernel(rng, state, np.zeros(1))
    assert new is state and info.num_accepted[0] == 0 and info.acceptance_rate[0] == 0.0


def test_adaptation_moves_the_proposal_towards_the_target_acceptance():
    log_std = np.zeros(2)
    updated = group_move.adapt_log_proposal_std(log_std, np.array([0.9, 0.1]), 4)
    assert updated[0] > 0 > updated[1]
    assert updated[0] == pytest.approx((0.9 - 0.44) / 4 ** 0.6)


def test_acceptance_rate_is_the_mean_of_min_one_alpha_and_evaluations_are_counted(rng):
    # Every proposal has log alpha = log |det| = -1 on a flat target: the rate is exactly e^-1 over any sweeps
    # (0 for every alpha < 1 passed before); each of the 3 x 2 finite proposals is evaluated once (no count
    # passed before).
    kernel = group_move.build_kernel(lambda x, u: (x + u.sum(), -1.0), lambda x: (0.0, np.zeros_like(x)),
                                     num_groups=2, num_moves=3)
    state = HMCState(np.zeros(2), 0.0, np.zeros(2))
    _, info = kernel(rng, state, np.zeros(2))
    np.testing.assert_allclose(info.acceptance_rate, np.exp(-1.0), rtol=1e-12)
    assert info.num_evaluations == 6


def test_proposals_have_the_standard_deviation_exp_log_proposal_std(rng):
    # u ~ N(0, s^2) with s = exp(log s) = 3: the sample standard deviation of 2000 proposals within 4 standard
    # errors, s / sqrt(2 n) (a standard deviation of log s = 1.1 passed before)
    proposals = []

    def record(x, log_scales):
        proposals.append(log_scales[0])
        return np.full(2, np.nan), 0.0

    kernel = group_move.build_kernel(record, logdensity_and_grad, num_groups=1, num_moves=2000)
    state = HMCState(np.ones(2), *logdensity_and_grad(np.ones(2)))
    kernel(rng, state, np.log([3.0]))
    assert abs(np.std(proposals) - 3.0) < 4 * 3.0 / np.sqrt(2 * 2000)


def test_each_move_scales_its_own_group_only(rng):
    # a sweep over 3 groups proposes u e_0, then u e_1, then u e_2 (a stale scale left in another group passed
    # before)
    seen = []

    def record(x, log_scales):
        seen.append(log_scales.copy())
        return x, 0.0

    kernel = group_move.build_kernel(record, lambda x: (0.0, np.zeros_like(x)), num_groups=3, num_moves=2)
    kernel(rng, HMCState(np.zeros(2), 0.0, np.zeros(2)), np.zeros(3))
    for k, log_scales in enumerate(seen):
        assert np.count_nonzero(log_scales) == 1 and log_scales[k % 3] != 0
