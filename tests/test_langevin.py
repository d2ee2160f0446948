from typing import NamedTuple

import numpy as np

from sepsti.core.samplers.langevin import langevin_step


class Pair(NamedTuple):
    a: np.ndarray
    b: np.ndarray


def test_zero_gradient_and_zero_noise_does_not_move(rng):
    position = Pair(rng.normal(size=3), rng.uniform(size=(2, 2)))
    zeros = Pair(np.zeros(3), np.zeros((2, 2)))
    moved = langevin_step(rng, position, zeros, 0.1, noise=zeros, nonnegative=(False, True))
    np.testing.assert_array_equal(moved.a, position.a)
    np.testing.assert_array_equal(moved.b, position.b)


def test_step_formula_with_and_without_preconditioner(rng):
    position = Pair(np.array([1.0, -2.0]), np.array([0.5]))
    gradient = Pair(np.array([0.3, 0.1]), np.array([-1.0]))
    noise = Pair(np.array([1.0, -1.0]), np.array([2.0]))
    plain = langevin_step(rng, position, gradient, 0.01, noise=noise)
    G = Pair(np.array([4.0, 9.0]), np.array([0.25]))
    pre = langevin_step(rng, position, gradient, 0.01, noise=noise, preconditioner=G)
    for leaf in ("a", "b"):  # each leaf with its own gradient, noise and preconditioner
        x, g, z, p = (getattr(pair, leaf) for pair in (position, gradient, noise, G))
        np.testing.assert_allclose(getattr(plain, leaf), x + 0.01 * g + np.sqrt(0.02) * z, rtol=1e-15)
        np.testing.assert_allclose(getattr(pre, leaf), x + 0.01 * p * g + np.sqrt(0.02 * p) * z, rtol=1e-15)


def test_mirroring_keeps_flagged_leaves_nonnegative(rng):
    position = Pair(np.full(1000, 0.01), np.full(1000, 0.01))
    gradient = Pair(np.full(1000, -5.0), np.full(1000, -5.0))
    moved = langevin_step(rng, position, gradient, 0.1, nonnegative=(True, False))
    assert moved.a.min() >= 0.0
    assert moved.b.min() < 0.0  # the unflagged leaf is left alone
    assert position.a.min() == 0.01  # inputs untouched
    # the flagged leaf is reflected at zero, |x + ε g + √(2ε) z|, not clipped to it (a clip passed the bound
    # above); with the drift 0.49 below zero most of these steps cross it
    noise = Pair(rng.standard_normal(1000), rng.standard_normal(1000))
    moved = langevin_step(rng, position, gradient, 0.1, noise=noise, nonnegative=(True, False))
    unmirrored = 0.01 - 0.5 + np.sqrt(0.2) * noise.a
    assert np.mean(unmirrored < 0) > 0.8
    np.testing.assert_allclose(moved.a, np.abs(unmirrored), rtol=1e-15)
    np.testing.assert_allclose(moved.b, 0.01 - 0.5 + np.sqrt(0.2) * noise.b, rtol=1e-15)


def _stationary_variance(rng, precision, *, integrator, num_chains=20000, num_steps=60):
    """The spread of many chains of :func:`sepsti.core.evidence.sti.power_posterior_chains` at t = 0, where the
    target is the Gaussian model's prior N(0, 1/precision), each step 1/precision."""
    from sepsti.core.evidence.sti import LangevinSettings, power_posterior_chains
    from sepsti.core.models.gaussian_additive import GaussianAdditiveModel, GaussianAdditiveTheta

    model = GaussianAdditiveModel(np.zeros(5), 1, mu=0.0, sigma2_theta=1.0 / precision)
    start = GaussianAdditiveTheta(rng.standard_normal((num_chains, 1)) / np.sqrt(precision))
    # one burn-in step: the base step (a/k)^b is (1/1)^1 = 1 throughout, divided by max(t, step_floor) = precision
    chain = LangevinSettings(num_steps=num_steps, num_keep=num_steps - 1, step_a=1.0, step_b=1.0, step_floor=precision,
                             integrator=integrator)
    _, state = power_posterior_chains(model, start, rng, temperatures=np.zeros(num_chains), chain=chain)
    return state.position.theta.var()


def test_leimkuhler_matthews_noise_has_the_exact_gaussian_invariant_law(rng):
    precision = 4.0  # step * precision = 1: Euler's variance is twice the target's
    tolerance = 5 * np.sqrt(2 / 20000)  # relative MC error of a variance from 20000 independent draws
    lm = _stationary_variance(rng, precision, integrator="lm") * precision
    euler = _stationary_variance(rng, precision, integrator="euler") * precision
    assert abs(lm - 1) < tolerance, lm
    assert abs(euler * (1 - 1 / 2) - 1) < tolerance, euler
