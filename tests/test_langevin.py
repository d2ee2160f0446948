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
    np.testing.assert_allclose(plain.a, position.a + 0.01 * gradient.a + np.sqrt(0.02) * noise.a)
    G = Pair(np.array([4.0, 9.0]), np.array([0.25]))
    pre = langevin_step(rng, position, gradient, 0.01, noise=noise, preconditioner=G)
    np.testing.assert_allclose(pre.a, position.a + 0.01 * G.a * gradient.a + np.sqrt(0.02 * G.a) * noise.a)


def test_mirroring_keeps_flagged_leaves_nonnegative(rng):
    position = Pair(np.full(1000, 0.01), np.full(1000, 0.01))
    gradient = Pair(np.full(1000, -5.0), np.full(1000, -5.0))
    moved = langevin_step(rng, position, gradient, 0.1, nonnegative=(True, False))
    assert moved.a.min() >= 0.0
    assert moved.b.min() < 0.0  # the unflagged leaf is left alone
    assert position.a.min() == 0.01  # inputs untouched


class One(NamedTuple):
    x: np.ndarray


def _stationary_variance(rng, step, precision, *, lm, num_chains=20000, num_steps=60):
    # many independent chains on N(0, 1/precision), one step size per chain (batched)
    x = rng.standard_normal(num_chains) / np.sqrt(precision)
    z = rng.standard_normal(num_chains)
    steps = np.full(num_chains, step)
    for _ in range(num_steps):
        fresh = rng.standard_normal(num_chains)
        noise = (z + fresh) / 2 if lm else fresh
        (x,) = langevin_step(rng, One(x), One(-precision * x), steps, noise=One(noise))
        z = fresh
    return x.var()


def test_leimkuhler_matthews_noise_has_the_exact_gaussian_invariant_law(rng):
    precision, step = 4.0, 0.25  # step * precision = 1: Euler's variance is twice the target's
    tolerance = 5 * np.sqrt(2 / 20000)  # relative MC error of a variance from 20000 independent draws
    lm = _stationary_variance(rng, step, precision, lm=True) * precision
    euler = _stationary_variance(rng, step, precision, lm=False) * precision
    assert abs(lm - 1) < tolerance
    assert abs(euler * (1 - step * precision / 2) - 1) < tolerance
