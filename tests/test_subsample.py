import numpy as np
import pytest

from sepsti.core.models.gaussian_additive import GaussianAdditiveModel, GaussianAdditiveTheta
from sepsti.core.models.subsample import log_likelihood_estimate, make_reference, subset_scale, tempered_gradient


@pytest.fixture
def model(rng):
    _, x = GaussianAdditiveModel.sample(rng, 100, 2)
    return GaussianAdditiveModel(x, 2)


def test_tempered_gradient_combines_prior_scale_and_temperature(model, rng):
    theta = GaussianAdditiveTheta(np.array([4.0, 6.5]))
    subset = rng.integers(0, 100, 20)
    gradient, mean = tempered_gradient(model, theta, subset, 0.3)
    expected = model.grad_log_prior(theta).theta + 0.3 * 5.0 * model.grad_log_likelihood(theta, subset).theta
    np.testing.assert_allclose(gradient.theta, expected)
    np.testing.assert_allclose(mean.theta, 0.3 / 20 * model.grad_log_likelihood(theta, subset).theta)
    assert subset_scale(model, subset) == 5.0


def test_zero_temperature_is_the_prior_gradient(model):
    theta = GaussianAdditiveTheta(np.array([4.0, 6.5]))
    gradient, mean = tempered_gradient(model, theta, None, 0.0)
    np.testing.assert_array_equal(gradient.theta, model.grad_log_prior(theta).theta)
    assert mean is None


@pytest.mark.parametrize("with_reference", [False, True])
def test_estimates_are_unbiased(model, rng, with_reference):
    theta = GaussianAdditiveTheta(np.array([4.0, 6.5]))
    reference = None
    if with_reference:
        theta_ref = GaussianAdditiveTheta(np.array([4.1, 6.3]))
        reference = (theta_ref, model.log_likelihood(theta_ref))
    values = np.array([log_likelihood_estimate(model, theta, rng.integers(0, 100, 10), reference=reference)
                       for _ in range(4000)])
    se = values.std(ddof=1) / np.sqrt(values.size)
    assert abs(values.mean() - model.log_likelihood(theta)) < 4 * se + 1e-9


def test_first_order_reference_estimate_is_unbiased_and_exact_for_a_quadratic_likelihood(model, rng):
    theta = GaussianAdditiveTheta(np.array([4.0, 6.5]))
    reference = make_reference(model, GaussianAdditiveTheta(np.array([4.1, 6.3])))
    values = np.array([log_likelihood_estimate(model, theta, rng.integers(0, 100, 10), reference=reference)
                       for _ in range(50)])
    # the per-datum remainder of a first-order expansion of a quadratic is the same for every datum:
    # no subsampling noise at all
    np.testing.assert_allclose(values, model.log_likelihood(theta), rtol=1e-12)


def test_control_variate_gradient_is_the_full_gradient_for_a_quadratic_likelihood(model, rng):
    theta = GaussianAdditiveTheta(np.array([4.0, 6.5]))
    reference = make_reference(model, GaussianAdditiveTheta(np.array([4.1, 6.3])))
    subset = rng.integers(0, 100, 10)
    gradient, mean, value = tempered_gradient(model, theta, subset, 0.3, with_likelihood=True, reference=reference)
    exact, _ = tempered_gradient(model, theta, None, 0.3)
    np.testing.assert_allclose(gradient.theta, exact.theta, rtol=1e-12)
    np.testing.assert_allclose(mean.theta, 0.3 / 100 * model.grad_log_likelihood(theta).theta, rtol=1e-12)
    assert value == pytest.approx(model.log_likelihood(theta), rel=1e-12)


def test_batched_temperatures_scale_each_chain(model, rng):
    thetas = GaussianAdditiveTheta(rng.normal(5, 1, (3, 2)))
    temperatures = np.array([0.0, 0.5, 1.0])
    subsets = rng.integers(0, 100, (3, 20))
    gradient, _ = tempered_gradient(model, thetas, subsets, temperatures)
    for c, t in enumerate(temperatures):
        one, _ = tempered_gradient(model, GaussianAdditiveTheta(thetas.theta[c]), subsets[c], float(t))
        np.testing.assert_allclose(gradient.theta[c], one.theta, rtol=1e-12)


def test_an_empty_subset_is_refused(rng):
    """It met a ZeroDivisionError."""
    from sepsti.core.errors import ParameterError

    model = GaussianAdditiveModel(GaussianAdditiveModel.sample(rng, 10, 2)[1], 2)
    with pytest.raises(ParameterError, match="^subset: no data entries"):
        subset_scale(model, np.array([], dtype=int))
    assert subset_scale(model, np.array([0, 3])) == 5.0


def test_tree_vdot_keeps_the_chain_axes():
    # per chain: chain 0 sums 1*1 + 2*1 + 10*2 = 23, chain 1 sums 3*1 + 4*1 + 20*2 = 47
    # (one sum over the chains too, 70 for both, passed before)
    from sepsti.core.models.subsample import tree_vdot

    a = GaussianAdditiveTheta(np.array([[1.0, 2.0], [3.0, 4.0]]))
    b = GaussianAdditiveTheta(np.ones((2, 2)))
    c = GaussianAdditiveTheta(np.array([[10.0], [20.0]]))
    d = GaussianAdditiveTheta(np.full((2, 1), 2.0))
    np.testing.assert_array_equal(tree_vdot(tuple(a) + tuple(c), tuple(b) + tuple(d), 1), [23.0, 47.0])
    assert tree_vdot(tuple(a) + tuple(c), tuple(b) + tuple(d)) == 70.0


def test_likelihood_estimates_alongside_the_gradient_are_eq_9_and_the_difference_estimator(model, rng):
    # N/N_s = 5; at t = 0 the estimate is still asked for (a bare prior gradient without it passed before),
    # and a reference without gradient gives full_ref + 5 (sum_S log p(x|theta) - sum_S log p(x|theta_ref))
    # (the subset difference left unscaled passed before).
    theta = GaussianAdditiveTheta(np.array([4.0, 6.5]))
    theta_ref = GaussianAdditiveTheta(np.array([4.1, 6.3]))
    subset = rng.integers(0, 100, 20)
    gradient, mean, value = tempered_gradient(model, theta, subset, 0.0, with_likelihood=True)
    np.testing.assert_array_equal(gradient.theta, model.grad_log_prior(theta).theta)
    assert value == pytest.approx(5.0 * model.log_likelihood(theta, subset), rel=1e-12)
    full_ref = model.log_likelihood(theta_ref)
    _, _, value = tempered_gradient(model, theta, subset, 0.3, with_likelihood=True, reference=(theta_ref, full_ref))
    expected = full_ref + 5.0 * (model.log_likelihood(theta, subset) - model.log_likelihood(theta_ref, subset))
    assert value == pytest.approx(expected, rel=1e-12)
