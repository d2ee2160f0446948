import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.models.poisson_parafac import reconstruct
from sepsti.core.random import stream
from sepsti.core.sparse_tensor import to_dense, validate_sparse_tensor
from sepsti.corpora.tensors import FACEBOOK_SHAPE, prior_rate_for_count, simulate_dense, simulate_sparse


def _pearson_within_bounds(X, mean):
    """Pearson statistic Σ (x − μ)²/μ of Poisson data: mean n, variance 2n + Σ 1/μ."""
    chi2 = np.sum((X - mean) ** 2 / mean)
    n = mean.size
    sd = np.sqrt(2 * n + np.sum(1.0 / mean))
    return abs(chi2 - n) < 5 * sd, chi2, n, sd


def test_dense_counts_follow_the_model(rng):
    X, theta = simulate_dense((10, 15, 20), 4, prior_rate=0.8, rng=rng)
    assert X.shape == (10, 15, 20) and theta.A.shape == (10, 4) and theta.C.shape == (20, 4)
    assert np.all(X >= 0) and np.all(X == np.round(X))
    ok, chi2, n, sd = _pearson_within_bounds(X, reconstruct(theta))
    assert ok, f"Pearson {chi2:.1f} vs expected {n} ± {sd:.1f}"


def test_sparse_counts_follow_the_model(rng):
    X, theta = simulate_sparse((20, 25, 30), 3, prior_rate=0.7, rng=rng)
    X = validate_sparse_tensor(X, nonnegative=True)
    dense = to_dense(X)
    ok, chi2, n, sd = _pearson_within_bounds(dense, reconstruct(theta))
    assert ok, f"Pearson {chi2:.1f} vs expected {n} ± {sd:.1f}"
    # the mode-0 marginals are independent Poisson too
    marginal = reconstruct(theta).sum(axis=(1, 2))
    ok, chi2, n, sd = _pearson_within_bounds(dense.sum(axis=(1, 2)), marginal)
    assert ok, f"marginal Pearson {chi2:.1f} vs expected {n} ± {sd:.1f}"


def test_sparse_is_sorted_distinct_and_reproducible():
    X1, theta1 = simulate_sparse((50, 40, 30), 2, prior_rate=1.0, rng=stream(3, 1))
    X2, theta2 = simulate_sparse((50, 40, 30), 2, prior_rate=1.0, rng=stream(3, 1))
    np.testing.assert_array_equal(X1.coords, X2.coords)
    np.testing.assert_array_equal(X1.values, X2.values)
    np.testing.assert_array_equal(theta1.A, theta2.A)
    linear = np.ravel_multi_index(tuple(X1.coords.T), X1.shape)
    assert np.all(np.diff(linear) > 0)


def test_facebook_shaped_tensor_without_densifying(rng):
    target = 100_000
    rate = prior_rate_for_count(FACEBOOK_SHAPE, 5, target)
    X, theta = simulate_sparse(FACEBOOK_SHAPE, 5, prior_rate=rate, rng=rng)
    assert X.shape == FACEBOOK_SHAPE
    expected = float(np.prod([f.sum(axis=0) for f in theta], axis=0).sum())
    total = X.values.sum()
    assert abs(total - expected) < 5 * np.sqrt(expected)
    # the prior's expected count is the target; the draw of the factors varies it: each factor's column sum
    # over n exponentials by 1/√n, so the sum over the 5 components by √(Σ 1/n / 5) (1.2 %)
    spread = np.sqrt(sum(1.0 / n for n in FACEBOOK_SHAPE) / 5)
    assert abs(expected / target - 1.0) < 4 * spread, (expected / target, spread)
    assert np.all(X.coords.max(axis=0) < np.array(FACEBOOK_SHAPE)) and X.coords.min() >= 0


def test_guard_against_huge_counts(rng):
    with pytest.raises(ParameterError, match="max_count"):
        simulate_sparse(FACEBOOK_SHAPE, 3, prior_rate=1.0, rng=rng)


@pytest.mark.parametrize("kwargs, match", [
    (dict(shape=(3, 4), rank=2, prior_rate=1.0), "shape"),
    (dict(shape=(3, 4, 5), rank=0, prior_rate=1.0), "rank"),
    (dict(shape=(3, 4, 5), rank=2, prior_rate=0.0), "prior_rate"),
])
def test_invalid_arguments(rng, kwargs, match):
    with pytest.raises(ParameterError, match=match):
        simulate_dense(rng=rng, **kwargs)


def test_sparse_draws_beyond_two_to_the_63_entries_follow_the_factors():
    """(10**7)**3 entries: the int64 linear index wrapped and the coordinates drawn had nothing to do with θ.

    A row is drawn in proportion to its a_i, so over the events the mean of a is E[a²] / E[a] = 2 / λ, twice its
    mean over the rows (the size-biased exponential is Gamma(2, 1/λ): standard deviation √2 / λ per event).
    """
    shape = (10 ** 7,) * 3
    X, theta = simulate_sparse(shape, 1, prior_rate=prior_rate_for_count(shape, 1, 20_000), rng=stream(4, 1))
    events = X.values.sum()
    assert X.shape == shape and X.coords.min() >= 0 and X.coords.max() < 10 ** 7
    for mode, factor in enumerate(theta):
        a = factor[:, 0]
        ratio = np.sum(a[X.coords[:, mode]] * X.values) / events / a.mean()
        assert abs(ratio - 2.0) < 5 * np.sqrt(2.0 / events), (mode, ratio, events)
    order = np.lexsort(X.coords.T[::-1])  # distinct coordinates in row-major order
    np.testing.assert_array_equal(order, np.arange(X.nnz))
    assert np.all(np.any(np.diff(X.coords, axis=0) != 0, axis=1))


@pytest.mark.parametrize("call, match", [
    (lambda: simulate_dense((3, 4, 5), np.nan, prior_rate=1.0, rng=stream(0)), r"^rank=nan must be an integer"),
    (lambda: simulate_sparse((3, 4, 5), 2.5, prior_rate=1.0, rng=stream(0)), r"^rank=2.5 must be an integer"),
    (lambda: prior_rate_for_count((3, 4, 5), 2, np.nan), r"^expected_count=nan must be a positive number"),
    (lambda: prior_rate_for_count((3, 4, 5), 2, 0), r"^expected_count=0 must be a positive number"),
    (lambda: prior_rate_for_count((3, 4, 5), 0, 10), r"^rank=0 must be an integer of at least 1"),
])
def test_ranks_and_counts_are_checked_by_name(call, match):
    """rank=nan met a raw ValueError, a NaN count gave λ = NaN, rank 0 gave λ = 0."""
    with pytest.raises(ParameterError, match=match):
        call()


@pytest.mark.parametrize("simulate", [simulate_dense, simulate_sparse])
def test_each_factor_has_the_mean_of_its_own_prior_rate(rng, simulate):
    """Factor A, B, C ~ Exp(1), Exp(4), Exp(16); rates applied in the reverse order passed before."""
    rates = (1.0, 4.0, 16.0)
    _, theta = simulate((40, 40, 40), 2, prior_rate=rates, rng=rng)
    for factor, rate in zip(theta, rates):
        # Exp(rate) has mean and standard deviation 1 / rate: within 4 standard errors of the mean
        assert abs(factor.mean() - 1 / rate) < 4 / (rate * np.sqrt(factor.size))
