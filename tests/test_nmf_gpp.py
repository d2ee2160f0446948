"""NMF-GPP: kernels, the exponential-to-Gaussian link at extreme values, gradients against finite differences."""

import numpy as np
import pytest
from scipy import stats

from sepsti.core.errors import ParameterError
from sepsti.core.models.nmf_gpp import (NMFGPP, exp_to_gauss, exp_to_gauss_derivative, exponential_kernel_2d,
                                 gauss_to_exp, squared_exponential_kernel)


@pytest.fixture
def small_model(rng):
    D = rng.uniform(0, 1, (6 * 5, 2))
    H = rng.uniform(0, 1, (2, 12))
    return NMFGPP(D @ H + 0.05 * rng.standard_normal((30, 12)), num_components=2, plate_shape=(6, 5), beta=3.0,
                  noise_std=0.1, rate_d=1.5, rate_h=0.7)


def test_kernels_match_the_paper_forms():
    K = squared_exponential_kernel(5, 2.0)
    assert K[0, 3] == pytest.approx(np.exp(-9 / 4))
    K2 = exponential_kernel_2d((3, 4), 2.0)  # positions row-major: (0,0), (0,1), ..., (2,3)
    assert K2[0, 11] == pytest.approx(np.exp(-np.hypot(2, 3) / 4))
    assert np.allclose(np.diag(K2), 1.0) and np.allclose(K2, K2.T)


def test_link_maps_gaussian_to_exponential(rng):
    h = 2.0 * rng.standard_normal(4000)
    values = exp_to_gauss(h, 2.0, 3.0)
    assert stats.kstest(values, stats.expon(scale=1 / 3.0).cdf).pvalue > 1e-3
    np.testing.assert_allclose(gauss_to_exp(exp_to_gauss(h[:50], 2.0, 3.0), 2.0, 3.0), h[:50], rtol=1e-6, atol=1e-6)


def test_link_is_finite_and_accurate_at_extreme_arguments():
    h = np.array([-1e300, -1e8, -1e3, -40.0, -5.0, 0.0, 5.0, 40.0, 1e3, 1e8, 1e150])
    with np.errstate(all="raise"):
        value = exp_to_gauss(h, 1.0, 2.0)
        slope = exp_to_gauss_derivative(h, 1.0, 2.0)
    assert np.all(np.isfinite(value)) and np.all(value >= 0)
    assert np.all(np.isfinite(slope)) and np.all(slope >= 0)
    # Far left: the factor vanishes. Far right: −log Φ(−z) ≈ z²/2 + log(z √(2π)) and the slope ≈ z / λ.
    assert value[0] == 0.0 and value[1] == 0.0
    z = h[8:10]
    np.testing.assert_allclose(value[8:10], (z ** 2 / 2 + np.log(z * np.sqrt(2 * np.pi))) / 2.0, rtol=1e-6)
    np.testing.assert_allclose(slope[8:10], z / 2.0, rtol=1e-6)
    # Eq. 23 in its literal form agrees where it does not overflow.
    moderate = np.array([-5.0, 0.0, 5.0])
    literal = np.exp(2.0 * exp_to_gauss(moderate, 1.0, 2.0) - moderate ** 2 / 2) / (np.sqrt(2 * np.pi) * 2.0)
    np.testing.assert_allclose(exp_to_gauss_derivative(moderate, 1.0, 2.0), literal, rtol=1e-12)
    # The derivative is the derivative, including at large arguments.
    for point in (-30.0, -3.0, 0.5, 30.0, 3e4):
        step = 1e-6 * max(1.0, abs(point))
        numeric = (exp_to_gauss(point + step, 1.3, 0.8) - exp_to_gauss(point - step, 1.3, 0.8)) / (2 * step)
        assert exp_to_gauss_derivative(point, 1.3, 0.8) == pytest.approx(numeric, rel=1e-5, abs=1e-300)


@pytest.mark.parametrize("scale", [0.3, 3.0])
def test_gradient_matches_finite_differences(small_model, rng, scale):
    model = small_model
    theta = scale * rng.standard_normal(model.dim)
    _, grad = model.logdensity_and_grad(theta)
    numeric = np.empty(model.dim)
    for i in range(model.dim):
        step = np.zeros(model.dim)
        step[i] = 1e-6
        numeric[i] = (model.logdensity_and_grad(theta + step)[0] - model.logdensity_and_grad(theta - step)[0]) / 2e-6
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-5 * np.abs(numeric).max())


def test_log_density_is_eq_19_and_parts_agree(small_model, rng):
    model = small_model
    theta = rng.standard_normal(model.dim)
    D, H = model.factors(theta)
    expected = -0.5 * (np.sum((model.X - D @ H) ** 2) / 0.01 + theta @ theta)
    logp, grad = model.logdensity_and_grad(theta)
    assert logp == pytest.approx(expected, rel=1e-12)
    constant = model.log_likelihood(theta) + model.log_prior(theta) - logp
    assert constant == pytest.approx(-model.n_data * np.log(0.1 * np.sqrt(2 * np.pi))
                                     - 0.5 * model.dim * np.log(2 * np.pi))
    np.testing.assert_allclose(model.grad_log_likelihood(theta) + model.grad_log_prior(theta), grad, rtol=1e-12)
    params = model.split(theta)
    assert params.delta.shape == (30, 2) and params.eta.shape == (2, 12)
    np.testing.assert_array_equal(model.join(params), theta)


def test_latent_from_factors_round_trips(small_model, rng):
    D = rng.uniform(0.1, 2.0, (30, 2))
    H = rng.uniform(0.1, 2.0, (2, 12))
    D2, H2 = small_model.factors(small_model.latent_from_factors(D, H))
    np.testing.assert_allclose(D2, D, rtol=1e-6)
    np.testing.assert_allclose(H2, H, rtol=1e-6)


def test_validation(rng):
    X = rng.uniform(size=(30, 12))
    with pytest.raises(ParameterError, match="plate_shape"):
        NMFGPP(X, num_components=2, plate_shape=(5, 5), beta=3.0, noise_std=0.1)
    with pytest.raises(ParameterError, match="noise_std"):
        NMFGPP(X, num_components=2, plate_shape=(6, 5), beta=3.0, noise_std=0.0)
    with pytest.raises(ParameterError, match="noise_std=inf"):
        NMFGPP(X, num_components=2, plate_shape=(6, 5), beta=3.0, noise_std=np.inf)
    with pytest.raises(ParameterError, match="plate_shape=-6"):  # (-6, -5) multiplies to the 30 positions
        NMFGPP(X, num_components=2, plate_shape=(-6, -5), beta=3.0, noise_std=0.1)
    with pytest.raises(ParameterError, match="num_components=1.7"):
        NMFGPP(X, num_components=1.7, plate_shape=(6, 5), beta=3.0, noise_std=0.1)
    model = NMFGPP(X, num_components=2, plate_shape=(6, 5), beta=3.0, noise_std=0.1)
    with pytest.raises(ParameterError, match="theta has shape"):
        model.logdensity_and_grad(np.zeros(3))


@pytest.mark.parametrize("X, setting, match", [
    (np.ones((6, 4)), dict(beta_d=-1.0), r"^beta_d=-1.0 must be a positive number$"),  # built a kernel
    (np.ones((6, 4)), dict(beta_h=np.nan), r"^beta_h=nan must be a positive number$"),  # SciPy's ValueError
    (np.ones((6, 4)), dict(jitter=np.nan), r"^jitter=nan must be a finite number$"),  # SciPy's ValueError
    (np.ones((6, 4)), dict(jitter=-1.0), r"^jitter=-1.0 must be a finite number >= 0$"),  # blamed beta
    (np.ones((6, 4), complex), {}, r"^X: complex values"),  # was its real part
    (np.full((6, 4), "1"), {}, r"^X: expected real numbers"),  # was read as numbers
])
def test_bad_length_scales_jitter_and_data_are_refused(X, setting, match):
    with pytest.raises(ParameterError, match=match):
        NMFGPP(X, num_components=2, plate_shape=(2, 3), beta=1.0, noise_std=0.5, **setting)


@pytest.mark.parametrize("num_components", [1, 2, 3])
def test_compiled_pass_equals_the_numpy_reference(rng, num_components):
    # The compiled kernel pairs components (an odd last one alone) and switches the link
    # between one erfcx and log_ndtr at x = -1: every branch is reached at these scales.
    X = rng.uniform(0, 1, (6 * 5, 12))
    model = NMFGPP(X, num_components=num_components, plate_shape=(6, 5), beta=2.0, noise_std=0.2, rate_d=1.5,
                   rate_h=0.7)
    for scale in (0.1, 1.0, 10.0, 100.0):
        theta = scale * rng.standard_normal(model.dim)
        logp, grad = model.logdensity_and_grad(theta)
        ref_logp, ref_grad = model.logdensity_and_grad_numpy(theta)
        assert logp == pytest.approx(ref_logp, rel=1e-12)
        np.testing.assert_allclose(grad, ref_grad, rtol=1e-10, atol=1e-12 * np.abs(ref_grad).max())


def test_compiled_link_matches_scipy_across_branches():
    from sepsti.core.models import _nmf_gpp_kernels as kernels

    h = np.array([[-1e300, -1e8, -40.0, -3.0, -1.5, -1.0 - 1e-12, -1.0, -0.3, 0.0, 2.0, 30.0, 1e4, 1e150]])
    sigma, rate = 1.3, 0.8
    value, slope = np.empty_like(h), np.empty_like(h)
    inv_sqrt2_sigma = np.full(h.shape[1], 1 / (np.sqrt(2) * sigma))
    slope_scale = np.full(h.shape[1], np.sqrt(2 / np.pi) / (rate * sigma))
    factor = kernels.GPFactor(np.empty(0), inv_sqrt2_sigma, 1 / rate, slope_scale)
    kernels.link(h * np.sqrt(2) * sigma, factor, value, slope)
    np.testing.assert_allclose(value, exp_to_gauss(h * np.sqrt(2) * sigma, sigma, rate), rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(slope, exp_to_gauss_derivative(h * np.sqrt(2) * sigma, sigma, rate), rtol=1e-13,
                               atol=1e-300)


def test_rescale_keeps_the_product_and_its_jacobian_is_the_determinant(small_model, rng):
    model = small_model
    theta = 0.7 * rng.standard_normal(model.dim)
    log_scales = np.array([0.4, -0.3])
    moved, log_jacobian = model.rescale(theta, log_scales)
    D, H = model.factors(theta)
    D2, H2 = model.factors(moved)
    np.testing.assert_allclose(D2, D * np.exp(log_scales), rtol=1e-9)
    np.testing.assert_allclose(D2 @ H2, D @ H, rtol=1e-9)
    np.testing.assert_allclose(model.rescale(moved, -log_scales)[0], theta, atol=1e-9)
    jacobian = np.empty((model.dim, model.dim))
    for i in range(model.dim):
        step = np.zeros(model.dim)
        step[i] = 1e-6
        jacobian[:, i] = (model.rescale(theta + step, log_scales)[0]
                          - model.rescale(theta - step, log_scales)[0]) / 2e-6
    sign, log_det = np.linalg.slogdet(jacobian)
    assert sign > 0 and log_jacobian == pytest.approx(log_det, abs=1e-5)


def test_gauss_newton_precision_is_the_hessian_at_zero_residual(rng):
    D = rng.uniform(0.2, 1, (6 * 5, 2))
    H = rng.uniform(0.2, 1, (2, 12))
    model = NMFGPP(D @ H, num_components=2, plate_shape=(6, 5), beta=3.0, noise_std=0.1, rate_d=1.5, rate_h=0.7)
    theta = model.latent_from_factors(D, H)
    precision = model.gauss_newton_precision(theta)
    hessian = np.empty((model.dim, model.dim))
    for i in range(model.dim):
        step = np.zeros(model.dim)
        step[i] = 1e-6
        hessian[i] = (model.logdensity_and_grad(theta + step)[1] - model.logdensity_and_grad(theta - step)[1]) / 2e-6
    np.testing.assert_allclose(precision, -0.5 * (hessian + hessian.T), atol=1e-6 * np.abs(precision).max())
    assert np.linalg.eigvalsh(precision).min() >= 1.0 - 1e-9


def test_compiled_pass_does_not_depend_on_array_alignment(small_model, rng):
    # Reassociated (vectorised) sums must not change with where the arrays start: chains stay reproducible.
    values = rng.standard_normal(small_model.dim)
    results = []
    for offset in range(4):
        buffer = np.empty(small_model.dim + 4)
        theta = buffer[offset:offset + small_model.dim]
        theta[:] = values
        results.append(small_model.logdensity_and_grad(theta))
    for logp, grad in results[1:]:
        assert logp == results[0][0]
        np.testing.assert_array_equal(grad, results[0][1])


def test_component_log_scales_move_by_twice_the_log_scale(small_model, rng):
    theta = 0.5 * rng.standard_normal(small_model.dim)
    log_scales = np.array([0.3, -0.2])
    moved, _ = small_model.rescale(theta, log_scales)
    np.testing.assert_allclose(small_model.component_log_scales(moved) - small_model.component_log_scales(theta),
                               2 * log_scales, rtol=1e-6)


def test_the_link_inverts_far_into_the_tail():
    """h = -σ Φ⁻¹(exp(-λ v)) where exp(-λ v) underflows (λ v > 745): finite, and exp_to_gauss's inverse."""
    from sepsti.core.models.nmf_gpp import exp_to_gauss, gauss_to_exp

    values = np.array([1e-20, 1e-3, 1.0, 700.0, 760.0, 5e4])
    h = gauss_to_exp(values, 1.0, 1.0)
    assert np.all(np.isfinite(h)) and h[4] == pytest.approx(38.87, abs=0.01)
    np.testing.assert_allclose(exp_to_gauss(h, 1.0, 1.0), values, rtol=1e-9)


def test_link_scales_are_the_field_standard_deviations(small_model):
    # d = C δ with δ ~ N(0, I) has variance diag(C Cᵀ) = kernel diagonal 1 plus the jitter 1e-6 × 1, so every
    # field's standard deviation is sqrt(1 + 1e-6) (the column norms of C, down to the last diagonal entry,
    # passed before).
    np.testing.assert_allclose(small_model.sigma_d, np.full((30, 1), np.sqrt(1 + 1e-6)), rtol=1e-12)
    np.testing.assert_allclose(small_model.sigma_h, np.full((1, 12), np.sqrt(1 + 1e-6)), rtol=1e-12)


def test_stable_cholesky_grows_the_jitter_tenfold_until_the_factor_exists():
    # [[1, 1 + 5e-4], [1 + 5e-4, 1]] has eigenvalue -5e-4: jitters 1e-6, 1e-5 and 1e-4 fail, 1e-3 succeeds
    # (a jitter that never grows, and so a refusal, passed before).
    from sepsti.core.models.nmf_gpp import stable_cholesky

    cov = np.array([[1.0, 1.0 + 5e-4], [1.0 + 5e-4, 1.0]])
    L = stable_cholesky(cov)
    np.testing.assert_allclose(L @ L.T, cov + 1e-3 * np.eye(2), rtol=1e-12, atol=1e-15)


def test_latent_from_factors_floors_zero_entries(small_model, rng):
    # a zero in D or H maps to a field of -inf; floored at 1e-8 it comes back as 1e-8 (a factor left unfloored, so
    # an infinite theta, passed before)
    D, H = rng.uniform(0.5, 2.0, (30, 2)), rng.uniform(0.5, 2.0, (2, 12))
    D[3, 1], H[0, 5] = 0.0, 0.0
    theta = small_model.latent_from_factors(D, H)
    assert np.all(np.isfinite(theta))
    D_back, H_back = small_model.factors(theta)
    np.testing.assert_allclose(D_back, np.maximum(D, 1e-8), rtol=1e-6)
    np.testing.assert_allclose(H_back, np.maximum(H, 1e-8), rtol=1e-6)
