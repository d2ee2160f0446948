import numpy as np
import pytest
from scipy.stats import kstest

from sepsti.core.models.gaussian_additive import GaussianAdditiveModel, GaussianAdditiveTheta
from sepsti.core.models.poisson_nmf import NMFTheta, PoissonNMF
from sepsti.core.samplers import psgld


def test_preconditioner_average_follows_eq9(rng):
    _, x = GaussianAdditiveModel.sample(rng, 50, 1)
    model = GaussianAdditiveModel(x, 2)
    kernel = psgld.build_kernel(alpha=0.9, sigma=1e-3)
    state = psgld.init(GaussianAdditiveTheta(np.array([3.0, 4.0])))
    subset = np.arange(10)
    new, _ = kernel(rng, state, model, 1e-4, subset, 0.5)
    g_bar = 0.5 / 10 * model.grad_log_likelihood(state.position, subset).theta
    np.testing.assert_allclose(new.v.theta, g_bar ** 2)  # the first update starts the average at g_bar^2
    np.testing.assert_allclose(psgld.preconditioner(new.v, 1e-3).theta, 1 / (1e-3 + np.abs(g_bar)))
    newer, _ = kernel(rng, new, model, 1e-4, subset, 0.5)
    g_bar_2 = 0.5 / 10 * model.grad_log_likelihood(new.position, subset).theta
    np.testing.assert_allclose(newer.v.theta, 0.9 * g_bar ** 2 + 0.1 * g_bar_2 ** 2)


def test_first_move_is_on_the_scale_of_step_size_times_n(rng):
    # v_1 = g_bar^2 makes G |g_bar| <= 1: the drift moves each coordinate by at most
    # eps (N + |prior gradient| / |g_bar|); starting the average at 0 would move ~10 eps N
    _, x = GaussianAdditiveModel.sample(rng, 200, 2)
    model = GaussianAdditiveModel(x, 2)
    position = GaussianAdditiveTheta(np.array([30.0, -40.0]))
    subset = np.arange(20)
    step = 1e-3
    new, _ = psgld.build_kernel(alpha=0.99, sigma=1e-5)(rng, psgld.init(position), model, step, subset, 1.0)
    g_bar = np.abs(model.grad_log_likelihood(position, subset).theta) / 20
    prior = np.abs(model.grad_log_prior(position).theta)
    bound = step * (model.n_data + prior / g_bar) + 5.0 * np.sqrt(2.0 * step / g_bar)  # drift + 5 noise sd
    assert np.all(step * model.n_data > 3.0 * np.sqrt(2.0 * step / g_bar))  # the drift dominates the noise
    assert np.all(np.abs(new.position.theta - position.theta) <= bound)


def test_zero_temperature_samples_the_prior(rng):
    model = PoissonNMF(rng.poisson(3.0, (200, 150)).astype(float), 3, rate_W=1.0, rate_H=1.0)
    kernel = psgld.build_kernel(alpha=0.99, sigma=1.0)  # G = 1 at t = 0
    state = psgld.init(NMFTheta(np.ones((200, 3)), np.ones((3, 150))))
    for _ in range(2000):
        state, _ = kernel(rng, state, model, 2e-3, None, 0.0)
    assert not np.any(state.v.W)
    assert kstest(np.concatenate([state.position.W.ravel(), state.position.H.ravel()]), "expon").pvalue > 1e-3


def test_zero_gradient_at_zero_temperature_without_prior_pull_stays_nonnegative(rng):
    # factors near zero and noise far larger (sd √(2 ε / σ) ≈ 0.45 per step): the mirror does the work,
    # as the same steps without it show
    model = PoissonNMF(rng.poisson(3.0, (20, 10)).astype(float), 2, rate_W=1e-9, rate_H=1e-9)
    start = NMFTheta(np.full((20, 2), 1e-3), np.full((2, 10), 1e-3))
    for flags, stays in ((None, True), ((False, False), False)):
        kernel, state, draws = psgld.build_kernel(nonnegative=flags), psgld.init(start), np.random.default_rng(1)
        for _ in range(20):
            state, info = kernel(draws, state, model, 1e-6, None, 0.0)
            assert not info.is_divergent
        assert (min(state.position.W.min(), state.position.H.min()) >= 0) == stays


@pytest.mark.parametrize("options, message", [({"alpha": 2.0}, "alpha=2.0"), ({"alpha": -0.1}, "alpha=-0.1"),
                                              ({"sigma": 0.0}, "sigma=0.0"), ({"sigma": np.inf}, "sigma=inf")])
def test_bad_kernel_settings_are_refused(options, message):
    from sepsti.core.errors import ParameterError

    with pytest.raises(ParameterError, match=message):
        psgld.build_kernel(**options)


def test_steps_per_chain_and_integer_positions_are_accepted(rng):
    model = GaussianAdditiveModel(GaussianAdditiveModel.sample(rng, 10, 2)[1], 2)
    kernel = psgld.build_kernel()
    state, info = kernel(rng, psgld.init(GaussianAdditiveTheta(np.ones(2))), model, np.array([1e-3, 2e-3]), None, 1.0)
    assert not info.is_divergent
    # an integer start raised a raw TypeError from the noise draw, and v was an integer array
    state = psgld.init(GaussianAdditiveTheta(np.array([2, 3])))
    assert state.position.theta.dtype == state.v.theta.dtype == np.float64
    assert np.all(np.isfinite(kernel(rng, state, model, 1e-3, None, 1.0)[0].position.theta))


def test_unset_entries_count_as_zero_in_the_preconditioner():
    """G = 1 / sigma where v is UNSET (v = 0); |UNSET| = 1, giving 1 / (sigma + 1), passed before."""
    state = psgld.init(GaussianAdditiveTheta(np.array([3.0, 4.0])))
    v = GaussianAdditiveTheta(np.array([psgld.UNSET, 0.25]))
    np.testing.assert_allclose(psgld.preconditioner(state.v, 1e-3).theta, [1e3, 1e3])
    np.testing.assert_allclose(psgld.preconditioner(v, 1e-3).theta, [1 / 1e-3, 1 / (1e-3 + 0.5)])
