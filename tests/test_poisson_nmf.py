import numpy as np
import pytest
from scipy.stats import poisson

from sepsti.core.errors import ParameterError
from sepsti.core.models.poisson_nmf import NMFTheta, PoissonNMF


def _blocks():
    return ((slice(0, 4), slice(3, 6)), (slice(4, 7), slice(0, 3)))


def test_log_likelihood_matches_scipy_poisson_on_integers(rng):
    W, H, X = PoissonNMF.sample(rng, (7, 6), 2, rate_W=1.0, rate_H=1.0)
    model = PoissonNMF(X, 2)
    theta = NMFTheta(W, H)
    assert model.log_likelihood(theta) == pytest.approx(poisson.logpmf(X, W @ H).sum(), rel=1e-12)
    expected = sum(poisson.logpmf(X[r, c], (W @ H)[r, c]).sum() for r, c in _blocks())
    assert model.log_likelihood(theta, _blocks()) == pytest.approx(expected, rel=1e-12)
    assert model.subset_size(_blocks()) == 12 + 9


def test_gradients_match_finite_differences(rng):
    X = rng.gamma(2.0, 3.0, size=(7, 6))  # real-valued magnitudes
    model = PoissonNMF(X, 3, rate_W=0.5, rate_H=2.0)
    theta = NMFTheta(rng.uniform(0.5, 2, (7, 3)), rng.uniform(0.5, 2, (3, 6)))
    value, grad = model.log_likelihood_and_grad(theta, _blocks())
    assert value == pytest.approx(model.log_likelihood(theta, _blocks()))
    h = 1e-6
    for leaf in range(2):
        for index in [(0, 0), (2, 1), (5, 2)] if leaf == 0 else [(0, 0), (1, 4), (2, 5)]:
            plus = [x.copy() for x in theta]
            minus = [x.copy() for x in theta]
            plus[leaf][index] += h
            minus[leaf][index] -= h
            numeric = (model.log_likelihood(NMFTheta(*plus), _blocks())
                       - model.log_likelihood(NMFTheta(*minus), _blocks())) / (2 * h)
            assert grad[leaf][index] == pytest.approx(numeric, rel=1e-5, abs=1e-6)
            numeric = (model.log_prior(NMFTheta(*plus)) - model.log_prior(NMFTheta(*minus))) / (2 * h)
            assert model.grad_log_prior(theta)[leaf][index] == pytest.approx(numeric, rel=1e-6)


def test_zero_data_with_tiny_rate_is_exact():
    # x = 0 must give log p = -rate exactly, even when the rate underflows log.
    model = PoissonNMF(np.zeros((2, 2)), 1)
    theta = NMFTheta(np.full((2, 1), 1e-200), np.full((1, 2), 1e-200))
    assert model.log_likelihood(theta) == 0.0
    value, grad = model.log_likelihood_and_grad(theta)
    assert np.all(np.isfinite(grad.W)) and np.all(np.isfinite(grad.H))


def test_float32_preserved(rng):
    X = rng.gamma(2.0, 3.0, size=(5, 4)).astype(np.float32)
    model = PoissonNMF(X, 2)
    theta = model.sample_prior(rng)
    assert theta.W.dtype == np.float32
    _, grad = model.log_likelihood_and_grad(theta)
    assert grad.W.dtype == np.float32 and grad.H.dtype == np.float32


def test_validation():
    with pytest.raises(ParameterError, match="non-negative"):
        PoissonNMF(-np.ones((2, 2)), 1)
    with pytest.raises(ParameterError, match="rank=1.5"):
        PoissonNMF(np.ones((2, 2)), 1.5)
    with pytest.raises(ParameterError, match="rate_W=0 must be a positive number"):
        PoissonNMF(np.ones((2, 2)), 1, rate_W=0)
    with pytest.raises(ParameterError, match="rate_H=inf must be a positive number"):
        PoissonNMF(np.ones((2, 2)), 1, rate_H=np.inf)
    with pytest.raises(ParameterError, match="rank=nan"):
        PoissonNMF(np.ones((2, 2)), np.nan)
    with pytest.raises(ParameterError, match="X is complex \\(an STFT\\?\\)"):
        PoissonNMF(np.ones((2, 2)) + 1j, 1)


def test_factors_are_checked_against_the_data(rng):
    X = rng.poisson(2.0, (6, 7)).astype(float)
    model = PoissonNMF(X, 2)
    W, H = rng.gamma(1.0, 1.0, (6, 2)), rng.gamma(1.0, 1.0, (2, 7))
    for theta in (NMFTheta(W, H[:, :1]), NMFTheta(W[:5], H), NMFTheta(W, H[:1]), NMFTheta(W[:, 0], H)):
        for method in (model.log_likelihood, model.log_likelihood_and_grad, model.log_prior):
            with pytest.raises(ParameterError, match="expected \\(n_rows, R\\), \\(R, n_cols\\)"):
                method(theta)
    # one R for both, whatever it is
    assert np.isfinite(model.log_likelihood(NMFTheta(W[:, :1], H[:1])))


def test_log_prior_is_minus_infinity_off_the_nonnegative_orthant(rng):
    model = PoissonNMF(np.ones((3, 4)), 2)
    W, H = rng.gamma(1.0, 1.0, (3, 2)), rng.gamma(1.0, 1.0, (2, 4))
    assert np.isfinite(model.log_prior(NMFTheta(W, H)))
    W[1, 0] = -1e-12
    assert model.log_prior(NMFTheta(W, H)) == -np.inf
    assert model.log_prior(NMFTheta(np.abs(W), -H)) == -np.inf


def test_matched_prior_rate_is_the_square_root_of_rank_over_the_data_mean():
    # R / lambda^2 = mean(X): rank 4, mean 9 gives lambda = 2/3 (R / mean = 4/9 passed before).
    from sepsti.core.models.poisson_nmf import MATCHED, prior_rate_at

    assert prior_rate_at(MATCHED, 9.0, 4) == pytest.approx(2.0 / 3.0, rel=1e-12)
    assert prior_rate_at(0.3, 9.0, 4) == 0.3


def test_log_prior_matches_scipy_exponentials_with_different_rates(rng):
    # rate_W != rate_H, so log(rate_H) in place of log(rate_W) would no longer cancel.
    from scipy.stats import expon

    model = PoissonNMF(np.ones((3, 4)), 2, rate_W=0.5, rate_H=3.0)
    W, H = rng.gamma(1.0, 1.0, (3, 2)), rng.gamma(1.0, 1.0, (2, 4))
    expected = expon.logpdf(W, scale=1 / 0.5).sum() + expon.logpdf(H, scale=1 / 3.0).sum()
    assert model.log_prior(NMFTheta(W, H)) == pytest.approx(expected, rel=1e-12)


def test_sample_prior_means_are_the_inverse_rates(rng):
    # Exp(rate) has mean and standard deviation 1/rate; means within 4 standard errors of 1/rate
    # (scale = rate, a mean of 4 for W and 0.25 for H, passed before).
    model = PoissonNMF(np.ones((40, 50)), 5, rate_W=4.0, rate_H=0.25)
    theta = model.sample_prior(rng)
    for x, rate in ((theta.W, 4.0), (theta.H, 0.25)):
        assert abs(x.mean() - 1 / rate) < 4 * (1 / rate) / np.sqrt(x.size)


def test_gradient_over_blocks_sharing_rows_and_columns_is_the_masked_closed_form(rng):
    # d/dW = (M * (X / WH - 1)) H^T and d/dH = W^T (M * (X / WH - 1)) for the mask M of the blocks' union;
    # the blocks share rows and columns (each block overwriting the last one's gradient passed before).
    X = rng.gamma(2.0, 3.0, size=(7, 6))
    model = PoissonNMF(X, 2)
    W, H = rng.uniform(0.5, 2, (7, 2)), rng.uniform(0.5, 2, (2, 6))
    blocks = ((slice(0, 4), slice(0, 3)), (slice(2, 7), slice(1, 5)))
    mask = np.zeros_like(X)
    mask[0:4, 0:3] = 1
    mask[2:7, 1:5] += 1
    ratio = mask * (X / (W @ H) - 1)
    grad = model.grad_log_likelihood(NMFTheta(W, H), blocks)
    np.testing.assert_allclose(grad.W, ratio @ H.T, rtol=1e-12)
    np.testing.assert_allclose(grad.H, W.T @ ratio, rtol=1e-12)
