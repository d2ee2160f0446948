import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import multivariate_normal

from sepsti.core.errors import ParameterError
from sepsti.core.models.gaussian_additive import GaussianAdditiveModel, GaussianAdditiveTheta


@pytest.mark.parametrize("rank", [1, 3, 7])
def test_exact_evidence_matches_dense_multivariate_normal(rng, rank):
    _, x = GaussianAdditiveModel.sample(rng, 40, 2)
    model = GaussianAdditiveModel(x, rank)
    cov = 5.0 * np.eye(40) + rank * 3.0 * np.ones((40, 40))
    dense = multivariate_normal(mean=np.full(40, rank * 5.0), cov=cov).logpdf(x)
    assert model.log_marginal_likelihood() == pytest.approx(dense, rel=1e-12, abs=1e-9)


def test_gradients_match_finite_differences(rng):
    _, x = GaussianAdditiveModel.sample(rng, 30, 2)
    model = GaussianAdditiveModel(x, 3)
    theta = GaussianAdditiveTheta(rng.normal(5, 1, 3))
    subset = rng.integers(0, 30, 10)
    h = 1e-6
    for fn, grad in ((lambda th: model.log_likelihood(th, subset), model.grad_log_likelihood(theta, subset).theta),
                     (model.log_prior, model.grad_log_prior(theta).theta)):
        numeric = [(fn(GaussianAdditiveTheta(theta.theta + h * e)) - fn(GaussianAdditiveTheta(theta.theta - h * e)))
                   / (2 * h) for e in np.eye(3)]
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-6)


def test_thermodynamic_identity_of_closed_form_integrand(rng):
    # log p(x) = int_0^1 E_t[log p(x|theta)] dt: the two closed forms must agree.
    _, x = GaussianAdditiveModel.sample(rng, 200, 2)
    model = GaussianAdditiveModel(x, 4)
    # integrate in u with t = u^5 where the integrand is smooth
    value, _ = quad(lambda u: 5 * u ** 4 * model.expected_log_likelihood(u ** 5), 0, 1, limit=200, epsabs=1e-10)
    assert value == pytest.approx(model.log_marginal_likelihood(), abs=1e-6)


def test_expected_log_likelihood_at_zero_is_prior_average(rng):
    _, x = GaussianAdditiveModel.sample(rng, 50, 2)
    model = GaussianAdditiveModel(x, 3)
    draws = np.array([model.log_likelihood(model.sample_prior(rng)) for _ in range(4000)])
    se = draws.std(ddof=1) / np.sqrt(draws.size)
    assert abs(draws.mean() - model.expected_log_likelihood(0.0)) < 4 * se


def test_validation():
    with pytest.raises(ParameterError, match="rank=0"):
        GaussianAdditiveModel(np.zeros(3), 0)
    with pytest.raises(ParameterError, match="1-d"):
        GaussianAdditiveModel(np.zeros((2, 2)), 1)


def test_batched_methods_match_one_chain_at_a_time(rng):
    _, x = GaussianAdditiveModel.sample(rng, 60, 2)
    model = GaussianAdditiveModel(x, 3)
    thetas = GaussianAdditiveTheta(rng.normal(5, 1, (4, 3)))
    subsets = rng.integers(0, 60, (4, 7))
    values, gradients = model.log_likelihood_and_grad(thetas, subsets)
    full = model.log_likelihood(thetas)
    priors = model.log_prior(thetas)
    for c in range(4):
        one = GaussianAdditiveTheta(thetas.theta[c])
        assert values[c] == pytest.approx(model.log_likelihood(one, subsets[c]), rel=1e-12)
        np.testing.assert_allclose(gradients.theta[c], model.grad_log_likelihood(one, subsets[c]).theta, rtol=1e-12)
        assert full[c] == pytest.approx(model.log_likelihood(one), rel=1e-12)
        assert priors[c] == pytest.approx(model.log_prior(one), rel=1e-12)
    assert model.subset_size(subsets) == 7


@pytest.mark.parametrize("x, rank, options, match", [
    (np.zeros(3), np.nan, {}, r"^rank=nan must be an integer of at least 1$"),  # a bare ValueError
    (np.zeros(3), np.inf, {}, r"^rank=inf must be an integer"),  # an OverflowError
    (np.zeros(3), True, {}, r"^rank=True must be an integer"),  # was rank 1
    (np.zeros(3), "2", {}, r"^rank='2' must be an integer"),  # a TypeError
    (np.zeros(3), 2, {"mu": "5"}, r"^mu='5' must be a finite number$"),  # a TypeError
    (np.zeros(3, complex), 2, {}, r"^x: complex values"),  # was its real part
    (np.full(3, "1.5"), 2, {}, r"^x: expected real numbers"),  # was read as numbers
])
def test_a_rank_mean_or_data_of_the_wrong_kind_is_refused(x, rank, options, match):
    with pytest.raises(ParameterError, match=match):
        GaussianAdditiveModel(x, rank, **options)


def test_settings_and_subsets_are_checked(rng):
    """Variances that are not positive numbers and means that are not finite are refused; a boolean mask
    as a subset (read as indices 0 and 1, or counted by its length) is refused, integer indices work."""
    x = rng.standard_normal(100)
    for options, message in (({"sigma2_x": np.nan}, "sigma2_x=nan"), ({"sigma2_theta": 0.0}, "sigma2_theta=0.0"),
                             ({"mu": np.inf}, "mu=inf")):
        with pytest.raises(ParameterError, match=message):
            GaussianAdditiveModel(x, 2, **options)
    model = GaussianAdditiveModel(x, 2)
    theta = model.sample_prior(rng)
    mask = np.zeros(100, dtype=bool)
    mask[:10] = True
    with pytest.raises(ParameterError, match="got dtype bool; give np.flatnonzero"):
        model.subset_size(mask)
    with pytest.raises(ParameterError, match="got dtype bool"):
        model.log_likelihood(theta, mask)
    assert model.subset_size(np.flatnonzero(mask)) == 10


def test_log_densities_match_scipy(rng):
    """log_prior and log_likelihood against sums of scipy's normal log densities (a prior normaliser counted once
    instead of once per component passed before)."""
    from scipy.stats import norm

    x = rng.normal(2.0, 1.0, 25)
    model = GaussianAdditiveModel(x, 4, mu=0.5, sigma2_theta=2.0, sigma2_x=0.7)
    theta = rng.normal(0.5, 1.0, 4)
    point = GaussianAdditiveTheta(theta)
    assert model.log_prior(point) == pytest.approx(norm(0.5, np.sqrt(2.0)).logpdf(theta).sum(), rel=1e-12)
    assert model.log_likelihood(point) == pytest.approx(norm(theta.sum(), np.sqrt(0.7)).logpdf(x).sum(), rel=1e-12)


def test_sample_draws_from_the_generative_model(rng):
    """Moments of sample() draws against the model's: theta_r ~ N(mu, sigma2_theta) and x_n - sum(theta) ~
    N(0, sigma2_x) (a standard deviation of sigma2_theta, or x about the mean of theta, passed before)."""
    draws = [GaussianAdditiveModel.sample(rng, 5, 3, mu=1.0, sigma2_theta=2.0, sigma2_x=0.5) for _ in range(2000)]
    theta = np.concatenate([t for t, _ in draws])
    noise = np.concatenate([x - t.sum() for t, x in draws])
    # 4 standard errors: sqrt(v / n) for a mean, v sqrt(2 / (n - 1)) for a Gaussian variance
    assert abs(theta.mean() - 1.0) < 4 * np.sqrt(2.0 / theta.size)
    assert abs(theta.var(ddof=1) - 2.0) < 4 * 2.0 * np.sqrt(2.0 / (theta.size - 1))
    assert abs(noise.mean()) < 4 * np.sqrt(0.5 / noise.size)
    assert abs(noise.var(ddof=1) - 0.5) < 4 * 0.5 * np.sqrt(2.0 / (noise.size - 1))
