import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.factorization import ParafacMAPResult, poisson_parafac_map
from sepsti.core.models.poisson_parafac import PoissonParafac
from sepsti.core.sparse_tensor import from_dense
from sepsti.corpora.tensors import simulate_dense


def test_log_posterior_never_decreases(rng):
    X, _ = simulate_dense((8, 9, 10), 3, prior_rate=0.7, rng=rng)
    model = PoissonParafac(X, 4, prior_rate=0.7)
    result = poisson_parafac_map(model, model.sample_prior(rng), max_iter=60)
    steps = np.diff(result.log_posterior)
    assert np.all(steps >= -1e-9 * np.abs(result.log_posterior[1:])), steps.min()
    assert result.log_posterior[-1] > result.log_posterior[0]
    assert all(np.all(f > 0) for f in result.theta)


def test_sparse_and_dense_agree(rng):
    X, _ = simulate_dense((6, 7, 8), 2, prior_rate=1.0, rng=rng)
    dense, sparse = PoissonParafac(X, 3), PoissonParafac(from_dense(X), 3)
    start = dense.sample_prior(rng)
    a = poisson_parafac_map(dense, start, max_iter=20)
    b = poisson_parafac_map(sparse, start, max_iter=20)
    for x, y in zip(a.theta, b.theta):
        np.testing.assert_allclose(x, y, rtol=1e-9)
    np.testing.assert_allclose(a.log_posterior, b.log_posterior, rtol=1e-12)


def test_stationary_point_of_the_posterior(rng):
    # at a MAP point the gradient of the log posterior vanishes wherever a factor is positive
    X, _ = simulate_dense((5, 6, 7), 1, prior_rate=0.5, rng=rng)
    model = PoissonParafac(X, 1, prior_rate=0.5)
    start = model.sample_prior(rng)

    def max_gradient(theta):
        grad = model.grad_log_likelihood(theta)
        return max(np.max(np.abs(g - rate)[f > 1e-6]) for g, f, rate in zip(grad, theta, model.prior_rates))

    theta = poisson_parafac_map(model, start, max_iter=1500, record=False).theta
    assert max_gradient(theta) < 1e-4 * max_gradient(start)


def test_start_must_be_positive(rng):
    model = PoissonParafac(np.ones((2, 2, 2)), 1)
    theta = model.sample_prior(rng)
    theta.A[0, 0] = 0.0
    with pytest.raises(ParameterError, match="strictly positive"):
        poisson_parafac_map(model, theta)


def test_is_exported_and_validates_sweeps(rng):
    model = PoissonParafac(np.ones((2, 3, 4)), 1)
    theta = model.sample_prior(rng)
    assert isinstance(poisson_parafac_map(model, theta, max_iter=2), ParafacMAPResult)
    for max_iter in (2.7, -1, True, "3"):
        with pytest.raises(ParameterError, match="max_iter"):
            poisson_parafac_map(model, theta, max_iter=max_iter)
    assert poisson_parafac_map(model, theta, max_iter=np.int64(0)).n_iter == 0


def test_one_sweep_is_the_multiplicative_update_written_out(rng):
    # A <- A (sum_jk X/Xhat B C) / (sum_j B sum_k C + rate_A), then B, then C with the new A, each mode with
    # its own rate; the recorded value is log p(X | theta) + log p(theta) from scipy's densities, once per
    # sweep (mode 0's rate for every mode, one sweep fewer, and the prior left out passed before)
    from scipy.stats import expon, poisson

    X = rng.poisson(2.0, (4, 5, 6)).astype(float)
    model = PoissonParafac(X, 2, prior_rate=(0.5, 2.0, 3.0))
    start = model.sample_prior(rng)
    factors = [f.copy() for f in start]
    for mode, rate in enumerate((0.5, 2.0, 3.0)):
        A, B, C = factors
        ratio = X / np.einsum("ir,jr,kr->ijk", A, B, C)
        numerator = [np.einsum("ijk,jr,kr->ir", ratio, B, C), np.einsum("ijk,ir,kr->jr", ratio, A, C),
                     np.einsum("ijk,ir,jr->kr", ratio, A, B)][mode]
        others = [f.sum(axis=0) for m, f in enumerate(factors) if m != mode]
        factors[mode] = factors[mode] * numerator / (others[0] * others[1] + rate)
    result = poisson_parafac_map(model, start, max_iter=1)
    for x, y in zip(result.theta, factors):
        np.testing.assert_allclose(x, y, rtol=1e-12)
    A, B, C = factors
    expected = (poisson.logpmf(X, np.einsum("ir,jr,kr->ijk", A, B, C)).sum()
                + sum(expon.logpdf(f, scale=1 / rate).sum() for f, rate in zip(factors, (0.5, 2.0, 3.0))))
    assert result.log_posterior.shape == (1,)
    assert result.log_posterior[0] == pytest.approx(expected, rel=1e-12)
    assert poisson_parafac_map(model, start, max_iter=3).log_posterior.shape == (3,)


def test_a_factor_row_over_an_empty_slice_stays_at_the_least_positive_float(rng):
    # X[0] = 0 sends A[0] to 0 in one update; it is floored at the least positive float so that the next
    # update can still move it (A[0] left at exactly 0 passed before)
    X = rng.poisson(2.0, (3, 4, 5)).astype(float)
    X[0] = 0
    model = PoissonParafac(X, 2)
    result = poisson_parafac_map(model, model.sample_prior(rng), max_iter=2)
    np.testing.assert_array_equal(result.theta.A[0], np.finfo(np.float64).tiny)
