"""Tests of sepsti.core.factorization.em: monotone EM, fixed factors, recovery, sklearn agreement, priors."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.special import gammaln, xlogy

from sepsti.core.errors import ConvergenceWarning, ParameterError
from sepsti.core.factorization import EMResult, initialize_nmf, poisson_log_likelihood, poisson_nmf_em
from sepsti.core.factorization.em import _rate_floor


def planted(rng, n_rows=30, n_cols=40, rank=4, scale=20.0):
    W = rng.gamma(1.0, 1.0, (n_rows, rank))
    H = rng.gamma(1.0, 1.0, (rank, n_cols))
    X = rng.poisson(scale * W @ H).astype(np.float64)
    return X, W, H


def reference_em(X, W, H, rate_W, rate_H, num_iter):
    """Dense textbook MAP-EM updates (W then H), float64, no buffers."""
    W, H = W.astype(np.float64).copy(), H.astype(np.float64).copy()
    for _ in range(num_iter):
        W = W * ((X / (W @ H)) @ H.T) / (H.sum(axis=1)[None, :] + rate_W)
        H = H * (W.T @ (X / (W @ H))) / (W.sum(axis=0)[:, None] + rate_H)
    return W, H


def reference_log_posterior(X, W, H, rate_W, rate_H):
    rate = W @ H
    value = np.sum(xlogy(X, rate) - rate - gammaln(X + 1))
    for factor, r in ((W, rate_W), (H, rate_H)):
        r = np.broadcast_to(r, factor.shape)
        positive = r > 0
        value += np.sum(np.log(r[positive]) - r[positive] * factor[positive])
    return value


def test_log_likelihood_matches_dense_formula(rng):
    X, W, H = planted(rng)
    X[0, :5] = 0.0
    result = poisson_nmf_em(X, W, H, max_iter=0)
    assert isinstance(result, EMResult)
    assert result.n_iter == 0
    np.testing.assert_allclose(result.log_likelihood[0], poisson_log_likelihood(X, W, H), rtol=1e-12)
    np.testing.assert_allclose(result.log_likelihood[0], reference_log_posterior(X, W, H, 0, 0), rtol=1e-12)


@settings(max_examples=25, deadline=None)
@given(n_rows=st.integers(1, 12), n_cols=st.integers(1, 12), rank=st.integers(1, 6),
       seed=st.integers(0, 2**31 - 1), sparsity=st.floats(0.0, 0.9),
       rate=st.sampled_from([0.0, 0.1, 3.0]))
def test_log_posterior_never_decreases(n_rows, n_cols, rank, seed, sparsity, rate):
    rng = np.random.default_rng(seed)
    X = rng.poisson(5.0, (n_rows, n_cols)).astype(np.float64)
    X[rng.random(X.shape) < sparsity] = 0.0
    W, H = initialize_nmf(X + 1.0, rank, rng)
    result = poisson_nmf_em(X, W, H, prior_rate_W=rate, prior_rate_H=rate, max_iter=60, tol=0,
                            track_log_likelihood=True)
    history = result.log_likelihood
    assert history.shape == (61,)
    assert np.all(np.isfinite(history))
    # EM increases the log-posterior; allow float64 rounding of the sums only
    slack = 1e-10 * np.abs(history).max() + 1e-9
    assert np.diff(history).min() >= -slack, np.diff(history).min()
    assert np.all(result.W >= 0) and np.all(result.H >= 0)


def test_agrees_with_reference_updates_and_priors(rng):
    X, W0, H0 = planted(rng, rank=3)
    W, H = initialize_nmf(X, 3, rng)
    rate_W = rng.uniform(0.0, 2.0, (1, 3))       # per component
    rate_H = rng.uniform(0.0, 2.0, (3, X.shape[1]))  # per entry
    result = poisson_nmf_em(X, W, H, prior_rate_W=rate_W, prior_rate_H=rate_H, max_iter=40, tol=0,
                            track_log_likelihood=True)
    W_ref, H_ref = reference_em(X, W, H, rate_W, rate_H, 40)
    np.testing.assert_allclose(result.W, W_ref, rtol=1e-10)
    np.testing.assert_allclose(result.H, H_ref, rtol=1e-10)
    np.testing.assert_allclose(result.log_likelihood[-1],
                               reference_log_posterior(X, W_ref, H_ref, rate_W, rate_H), rtol=1e-12)


def test_agrees_with_sklearn_kl_mu(rng):
    from sklearn.decomposition import NMF

    X, _, _ = planted(rng, n_rows=25, n_cols=35, rank=4)
    X += 0.5
    W, H = initialize_nmf(X, 4, rng)
    model = NMF(4, init="custom", beta_loss="kullback-leibler", solver="mu", max_iter=100, tol=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        W_sk = model.fit_transform(X, W=W.copy(), H=H.copy())
    result = poisson_nmf_em(X, W, H, max_iter=100, tol=0)
    np.testing.assert_allclose(result.W, W_sk, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(result.H, model.components_, rtol=1e-9, atol=1e-12)


def test_fixed_factors_are_bit_identical_and_inputs_untouched(rng):
    X, _, _ = planted(rng, rank=5)
    W, H = initialize_nmf(X, 5, rng)
    W_copy, H_copy, X_copy = W.copy(), H.copy(), X.copy()
    fixed_W = poisson_nmf_em(X, W, H, update_W=False, max_iter=20, tol=0)
    assert np.array_equal(fixed_W.W, W_copy) and fixed_W.W is not W
    assert not np.array_equal(fixed_W.H, H_copy)
    fixed_H = poisson_nmf_em(X, W, H, update_H=False, max_iter=20, tol=0)
    assert np.array_equal(fixed_H.H, H_copy)
    mask = np.array([True, False, True, False, False])
    partial = poisson_nmf_em(X, W, H, update_W=mask, update_H=~mask, max_iter=20, tol=0,
                             track_log_likelihood=True)
    assert np.array_equal(partial.W[:, ~mask], W_copy[:, ~mask])
    assert np.array_equal(partial.H[mask], H_copy[mask])
    assert not np.array_equal(partial.W[:, mask], W_copy[:, mask])
    assert np.diff(partial.log_likelihood).min() >= -1e-9 * abs(partial.log_likelihood[-1])
    for original, copy in ((W, W_copy), (H, H_copy), (X, X_copy)):
        assert np.array_equal(original, copy)


def test_masked_update_equals_reference(rng):
    """A column mask on W is the same EM as updating those columns alone."""
    X, _, _ = planted(rng, rank=4)
    W, H = initialize_nmf(X, 4, rng)
    mask = np.array([False, False, True, True])
    result = poisson_nmf_em(X, W, H, update_W=mask, prior_rate_H=0.5, max_iter=15, tol=0)
    W_ref, H_ref = W.copy(), H.copy()
    for _ in range(15):
        ratio = X / (W_ref @ H_ref)
        W_ref[:, mask] *= (ratio @ H_ref[mask].T) / H_ref[mask].sum(axis=1)[None, :]
        H_ref *= (W_ref.T @ (X / (W_ref @ H_ref))) / (W_ref.sum(axis=0)[:, None] + 0.5)
    np.testing.assert_allclose(result.W, W_ref, rtol=1e-10)
    np.testing.assert_allclose(result.H, H_ref, rtol=1e-10)


@pytest.mark.parametrize("n_cols, threads, update_W", [(60, None, True), (2300, 2, False)])
def test_rank_one_background_is_a_fixed_component(rng, n_cols, threads, update_W):
    """A known background w hᵀ is the same EM as w and h as a dictionary column and activation row held fixed."""
    X = rng.poisson(4.0, (12, n_cols)).astype(np.float64)
    W, H = initialize_nmf(X + 1.0, 3, rng)
    w, h = rng.uniform(0.1, 1.0, 12), rng.uniform(0.5, 2.0, n_cols)
    result = poisson_nmf_em(X, W, H, update_W=update_W, prior_rate_H=0.3, max_iter=25, tol=0,
                            track_log_likelihood=True, threads=threads, background=np.outer(w, h))
    fixed = np.r_[[True] * 3, False]
    extended = poisson_nmf_em(X, np.c_[W, w], np.r_[H, h[None]], update_W=fixed & update_W, update_H=fixed,
                              prior_rate_H=np.r_[[0.3] * 3, 0.0][:, None], max_iter=25, tol=0,
                              track_log_likelihood=True)
    np.testing.assert_allclose(result.W, extended.W[:, :3], rtol=1e-10)
    np.testing.assert_allclose(result.H, extended.H[:3], rtol=1e-10)
    np.testing.assert_allclose(result.log_likelihood, extended.log_likelihood, rtol=1e-12)
    assert np.diff(result.log_likelihood).min() >= -1e-9 * abs(result.log_likelihood[-1])


def test_background_updates_equal_reference(rng):
    """With any known background the updates are the multiplicative ones with W H + B in the ratio."""
    X, _, _ = planted(rng, rank=4)
    W, H = initialize_nmf(X, 4, rng)
    B = rng.gamma(0.5, 2.0, X.shape)
    result = poisson_nmf_em(X, W, H, prior_rate_H=0.5, max_iter=15, tol=0, background=B,
                            track_log_likelihood=True)
    W_ref, H_ref = W.copy(), H.copy()
    for _ in range(15):
        W_ref *= ((X / (W_ref @ H_ref + B)) @ H_ref.T) / H_ref.sum(axis=1)[None, :]
        H_ref *= (W_ref.T @ (X / (W_ref @ H_ref + B))) / (W_ref.sum(axis=0)[:, None] + 0.5)
    np.testing.assert_allclose(result.W, W_ref, rtol=1e-10)
    np.testing.assert_allclose(result.H, H_ref, rtol=1e-10)
    rate = W_ref @ H_ref + B
    expected = np.sum(X * np.log(rate) - rate - gammaln(X + 1)) + np.sum(np.log(0.5) - 0.5 * H_ref)
    np.testing.assert_allclose(result.log_likelihood[-1], expected, rtol=1e-10)
    with pytest.raises(ParameterError, match="background: expected the shape of X"):
        poisson_nmf_em(X, W, H, background=B[:, :-1])
    with pytest.raises(ParameterError, match="background: must be non-negative"):
        poisson_nmf_em(X, W, H, background=-B)


def test_recovers_planted_factorization(rng):
    W_true = rng.gamma(0.5, 1.0, (40, 3))
    H_true = rng.gamma(0.5, 1.0, (3, 60))
    rate = 200.0 * W_true @ H_true
    X = rng.poisson(rate).astype(np.float64)
    W, H = initialize_nmf(X, 3, rng)
    result = poisson_nmf_em(X, W, H, max_iter=3000, tol=1e-9)
    fit = result.W @ result.H
    error = np.linalg.norm(fit - rate) / np.linalg.norm(rate)
    # a Poisson sample's own noise level: ||X - rate|| / ||rate||
    noise = np.linalg.norm(X - rate) / np.linalg.norm(rate)
    assert error < 0.5 * noise, f"relative error {error:.4f} vs noise level {noise:.4f}"
    # the components themselves, up to order and scale
    W_n = result.W / result.W.sum(axis=0)
    T_n = W_true / W_true.sum(axis=0)
    corr = np.corrcoef(W_n.T, T_n.T)[:3, 3:]
    assert np.all(corr.max(axis=0) > 0.98), corr


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_preserved(rng, dtype):
    X, _, _ = planted(rng)
    W, H = initialize_nmf(X.astype(dtype), 4, rng)
    assert W.dtype == dtype and H.dtype == dtype
    result = poisson_nmf_em(X.astype(dtype), W, H, max_iter=30, tol=0, track_log_likelihood=True)
    assert result.W.dtype == dtype and result.H.dtype == dtype
    assert result.log_likelihood.dtype == np.float64
    reference = poisson_nmf_em(X, W.astype(np.float64), H.astype(np.float64), max_iter=30, tol=0)
    np.testing.assert_allclose(result.W, reference.W, rtol=1e-3 if dtype == np.float32 else 1e-12)
    history = result.log_likelihood
    # float32 products round at ~6e-8 relative per entry: allow that much noise only
    slack = (1e-5 if dtype == np.float32 else 1e-12) * np.abs(history).max()
    assert np.diff(history).min() >= -slack


def test_the_log_likelihood_is_computed_only_where_asked(rng, monkeypatch):
    # default with tol=0: the first and last values; False: none, and no log-gamma of the data (the enhancer's
    # many fits); the factors are the same either way
    X, _, _ = planted(rng)
    W, H = initialize_nmf(X, 4, rng)
    rates = rng.uniform(0.1, 1.0, H.shape)
    ends = poisson_nmf_em(X, W, H, max_iter=5, tol=0, prior_rate_H=rates, background=np.full(X.shape, 0.5))
    assert np.isfinite(ends.log_likelihood[[0, -1]]).all() and np.isnan(ends.log_likelihood[1:-1]).all()
    import scipy.special

    def refused(*args, **kwargs):
        raise AssertionError("gammaln called")

    monkeypatch.setattr(scipy.special, "gammaln", refused)
    none = poisson_nmf_em(X, W, H, max_iter=5, tol=0, prior_rate_H=rates, background=np.full(X.shape, 0.5),
                          track_log_likelihood=False)
    assert np.isnan(none.log_likelihood).all() and len(none.log_likelihood) == 6 and none.n_iter == 5
    np.testing.assert_array_equal(none.W, ends.W)
    np.testing.assert_array_equal(none.H, ends.H)


def test_integer_input_becomes_float64(rng):
    X = rng.poisson(3.0, (6, 7))
    W, H = initialize_nmf(X, 2, rng)
    assert W.dtype == np.float64
    assert poisson_nmf_em(X, W, H, max_iter=3, tol=0).W.dtype == np.float64


def test_zeros_and_underflow_give_no_nan(rng):
    # rows and columns of zeros, and tiny values whose products underflow
    X = rng.poisson(2.0, (20, 30)).astype(np.float64)
    X[3] = 0.0
    X[:, 7] = 0.0
    X[5, 5] = 1e-300
    W, H = initialize_nmf(X, 3, rng)
    W[:, 0] = 1e-200
    H[0] = 1e-200
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = poisson_nmf_em(X, W, H, max_iter=200, tol=0, track_log_likelihood=True)
    assert np.all(np.isfinite(result.W)) and np.all(np.isfinite(result.H))
    assert np.all(np.isfinite(result.log_likelihood))
    assert np.diff(result.log_likelihood).min() >= -1e-9 * abs(result.log_likelihood[-1])
    # an all-zero matrix: the fit goes to zero and stays finite
    zeros = np.zeros((5, 6))
    result = poisson_nmf_em(zeros, *initialize_nmf(np.ones((5, 6)), 2, rng), max_iter=20, tol=0)
    assert np.all(np.isfinite(result.W)) and np.all(np.isfinite(result.H))
    assert (result.W @ result.H).max() < 1e-3


def test_float32_underflow_regression(rng):
    # one count of 1e-30: the rates of the other entries shrink until their products underflow
    X = np.zeros((10, 12), dtype=np.float32)
    X[0, 0] = 1e-30
    W = np.full((10, 2), 1e-20, dtype=np.float32)
    H = np.full((2, 12), 1e-10, dtype=np.float32)
    result = poisson_nmf_em(X, W, H, max_iter=10, tol=0, track_log_likelihood=True)
    assert np.all(np.isfinite(result.W)) and np.all(np.isfinite(result.H))
    assert np.all(np.isfinite(result.log_likelihood))
    assert (result.W.astype(np.float64) @ result.H).sum() == pytest.approx(1e-30, rel=1e-5, abs=0)


@pytest.mark.parametrize("dtype, scales", [
    (np.float64, [1e-30, 1e-18, 1e-9, 1e9, 1e18, 1e30]),
    (np.float32, [1e-30, 1e-18, 1e-9, 1e9, 1e18, 1e30]),
])
def test_fit_is_scale_covariant(rng, dtype, scales):
    """The fit of c·X is c times the fit of X, far from the scale of 1 too."""
    V, _, _ = planted(rng, 8, 50, 2, 5.0)
    X = V.astype(dtype)
    reference = poisson_nmf_em(X, *initialize_nmf(X, 2, 0), max_iter=300, tol=0)
    fit = reference.W.astype(np.float64) @ reference.H
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    for c in scales:
        Xc = (V * c).astype(dtype)
        result = poisson_nmf_em(Xc, *initialize_nmf(Xc, 2, 0), max_iter=300, tol=0)
        np.testing.assert_allclose(result.W.astype(np.float64) @ result.H / c, fit, rtol=rtol, atol=rtol * fit.max())
    if dtype == np.float64:
        # the stopping rule sees the same relative gains at every scale
        counts = {poisson_nmf_em(V * c, *initialize_nmf(V * c, 2, 0), max_iter=5000, tol=1e-6).n_iter
                  for c in (1.0, *scales)}
        assert len(counts) == 1, counts


@pytest.mark.parametrize("dtype, scale", [(np.float64, 1e-296), (np.float32, 1e-34)])
def test_data_too_small_for_the_dtype_are_fitted_with_the_floor_at_tiny(rng, dtype, scale):
    X = (planted(rng, 6, 7, 2)[0] * scale).astype(dtype)
    assert X.max() > 0
    assert _rate_floor(X) == np.finfo(dtype).tiny
    result = poisson_nmf_em(X, *initialize_nmf(X, 2, 0), max_iter=5, tol=0)
    assert np.all(np.isfinite(result.W)) and np.all(np.isfinite(result.H))


@pytest.mark.parametrize("dtype, scale", [(np.float64, 1e-312), (np.float32, 1e-42)])
def test_subnormal_data_are_named_as_such(rng, dtype, scale):
    # initialize_nmf's own start was refused as "a negligible start ... start at the data's level (initialize_nmf)"
    X = (planted(rng, 6, 7, 2)[0] * scale).astype(dtype)
    assert 0 < X.max() < np.finfo(dtype).tiny
    with pytest.raises(ParameterError, match=r"^X: its largest entry .* is below the least rate .*; scale the data up"):
        poisson_nmf_em(X, *initialize_nmf(X, 2, 0), max_iter=5)


def test_the_dense_log_likelihood_checks_its_arguments(rng):
    # it multiplied whatever it was given: mismatched shapes met a bare broadcast error, negative counts gave -inf
    X, W, H = planted(rng, 6, 7, 2)
    with pytest.raises(ParameterError, match=r"shapes do not agree: X \(6, 7\), W \(5, 2\)"):
        poisson_log_likelihood(X, W[:5], H)
    with pytest.raises(ParameterError, match="X: must be non-negative"):
        poisson_log_likelihood(-X, W, H)
    with pytest.raises(ParameterError, match="W: expected a 2-D array"):
        poisson_log_likelihood(X, None, H)


def test_starts_that_multiplicative_updates_cannot_leave_are_refused(rng):
    X, _, _ = planted(rng, 10, 12, 3)
    W, H = initialize_nmf(X, 3, rng)
    for kwargs in (dict(W=np.zeros_like(W)), dict(H=np.where(np.arange(3)[:, None] == 1, 0.0, H))):
        with pytest.raises(ParameterError, match="must be finite and strictly positive"):
            poisson_nmf_em(X, kwargs.get("W", W), kwargs.get("H", H), max_iter=50, tol=1e-4)
    # negligible: every rate far below the floor, which would set the log-likelihood and stop the rule at once
    with pytest.raises(ParameterError, match="negligible start"):
        poisson_nmf_em(X, np.full_like(W, 1e-200), H, max_iter=50, tol=1e-4)
    with pytest.raises(ParameterError, match="negligible start"):
        poisson_nmf_em(X, W, np.full_like(H, 1e-200), update_W=False, max_iter=50, tol=1e-4)
    # a zero in a column or row that is not learned is not a start of the updates
    H0 = H.copy()
    H0[0, :4] = 0.0
    result = poisson_nmf_em(X, W, H0, update_H=np.array([False, True, True]), max_iter=5, tol=0)
    assert np.array_equal(result.H[0], H0[0])


def test_fixed_factors_may_hold_zeros_while_every_count_can_be_explained(rng):
    X, _, _ = planted(rng, 10, 12, 3)
    W, H = initialize_nmf(X, 3, rng)
    W[:4, 0] = 0.0           # a fixed atom with empty bins, beside learned ones
    result = poisson_nmf_em(X, W, H, update_W=np.array([False, True, True]), max_iter=100, tol=0,
                            track_log_likelihood=True)
    assert np.array_equal(result.W[:, 0], W[:, 0])
    assert np.diff(result.log_likelihood).min() >= -1e-9 * abs(result.log_likelihood[-1])
    assert result.log_likelihood[-1] == pytest.approx(poisson_log_likelihood(X, result.W, result.H), rel=1e-12)
    X[:, 5] = 0.0
    H[:2, 5] = 0.0           # fixed activations, off where the data are 0
    result = poisson_nmf_em(X, W, H, update_W=False, update_H=np.array([False, False, True]), max_iter=100, tol=0,
                            track_log_likelihood=True)
    assert np.array_equal(result.H[:2], H[:2])
    assert result.log_likelihood[-1] == pytest.approx(poisson_log_likelihood(X, result.W, result.H), rel=1e-12)
    # zeros of the fixed factors that hold a rate at 0 where X > 0: no fit explains that count
    W[2] = 0.0
    with pytest.raises(ParameterError, match="no fit can explain"):
        poisson_nmf_em(X, W, H, update_W=False, update_H=np.array([False, False, True]), max_iter=5, tol=0)
    # unless the background does
    background = np.where(np.arange(10)[:, None] == 2, 1.0, 0.0) * np.ones_like(X)
    result = poisson_nmf_em(X, W, H, update_W=False, update_H=np.array([False, False, True]), background=background,
                            max_iter=5, tol=0)
    assert np.isfinite(result.log_likelihood[-1])


def test_tolerance_and_iteration_count(rng):
    X, _, _ = planted(rng)
    W, H = initialize_nmf(X, 4, rng)
    exact = poisson_nmf_em(X, W, H, max_iter=17, tol=0)
    assert exact.n_iter == 17 and exact.log_likelihood.shape == (18,)
    assert np.isfinite(exact.log_likelihood[[0, -1]]).all()
    loose = poisson_nmf_em(X, W, H, max_iter=5000, tol=1e-3)
    assert 1 < loose.n_iter < 5000
    history = loose.log_likelihood
    assert history.shape == (loose.n_iter + 1,) and np.all(np.isfinite(history))
    # stopped at the first iteration whose gain fell below tol times the objective
    saturated = np.sum(xlogy(X, X) - X - gammaln(X + 1))
    objective = saturated - history
    gains = np.diff(history)
    assert gains[-1] <= 1e-3 * objective[-2]
    assert np.all(gains[:-1] > 1e-3 * objective[:-2])
    # same result when continuing is deterministic
    again = poisson_nmf_em(X, W, H, max_iter=5000, tol=1e-3)
    assert np.array_equal(again.W, loose.W)


def test_a_tolerance_above_one_stops_after_one_iteration_without_overflow(rng):
    """tol=1e308 multiplied the objective into an overflow warning (train --tol 1e308)."""
    X, _, _ = planted(rng)
    W, H = initialize_nmf(X, 4, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        huge = poisson_nmf_em(X, W, H, max_iter=50, tol=1e308)
    assert huge.n_iter == 1 and np.array_equal(huge.W, poisson_nmf_em(X, W, H, max_iter=50, tol=1.0).W)


def test_convergence_warning_at_cap(rng):
    X, _, _ = planted(rng)
    W, H = initialize_nmf(X, 4, rng)
    with pytest.warns(ConvergenceWarning, match="max_iter=3"):
        poisson_nmf_em(X, W, H, max_iter=3, tol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        poisson_nmf_em(X, W, H, max_iter=3, tol=0)


def test_priors_shrink_factors(rng):
    X, _, _ = planted(rng)
    W, H = initialize_nmf(X, 4, rng)
    free = poisson_nmf_em(X, W, H, update_W=False, max_iter=200, tol=0)
    sparse = poisson_nmf_em(X, W, H, update_W=False, prior_rate_H=5.0, max_iter=3000, tol=0)
    assert sparse.H.sum() < free.H.sum()
    # with W fixed the problem in H is convex: the MAP H meets the KKT conditions
    # (gradient 0 where H > 0, gradient <= 0 where H = 0), relative to the terms' size
    scale = sparse.W.sum(axis=0)[:, None] + 5.0
    gradient = (sparse.W.T @ (X / (sparse.W @ sparse.H)) - scale) / scale
    active = sparse.H > 1e-3 * sparse.H.max()
    assert np.abs(gradient[active]).max() < 1e-3
    assert gradient[~active].max() < 1e-3


@pytest.mark.parametrize("kwargs, match", [
    (dict(update_W=np.ones(3, dtype=bool)), "update_W"),
    (dict(prior_rate_W=-1.0), "prior_rate_W"),
    (dict(prior_rate_H=np.ones((2, 2))), "prior_rate_H"),
    (dict(max_iter=-1), "max_iter"),
    (dict(tol=np.nan), "tol"),
    (dict(tol=1e-3, track_log_likelihood=False), "track_log_likelihood"),
    (dict(threads=0), "threads"),
])
def test_bad_options(rng, kwargs, match):
    X, _, _ = planted(rng)
    W, H = initialize_nmf(X, 4, rng)
    with pytest.raises(ParameterError, match=match):
        poisson_nmf_em(X, W, H, **kwargs)


def test_bad_arrays(rng):
    X, _, _ = planted(rng)
    W, H = initialize_nmf(X, 4, rng)
    with pytest.raises(ParameterError, match="shapes do not agree"):
        poisson_nmf_em(X, W[:-1], H)
    with pytest.raises(ParameterError, match="non-negative"):
        poisson_nmf_em(-X, W, H)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ParameterError, match="NaN"):
        poisson_nmf_em(bad, W, H)
    with pytest.raises(ParameterError, match="rank"):
        initialize_nmf(X, 0, rng)
    with pytest.raises(ParameterError, match="method"):
        initialize_nmf(X, 2, rng, method="nndsvd")


def test_initialization_is_deterministic(rng):
    X, _, _ = planted(rng)
    a = initialize_nmf(X, 4, 7)
    b = initialize_nmf(X, 4, np.random.default_rng(7))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    W, H = initialize_nmf(X, 4, 7, method="columns")
    np.testing.assert_allclose(W.sum(axis=0), 1.0)
    assert np.all(W > 0) and np.all(H > 0)


def test_column_blocks_and_threads(rng):
    """Wide matrices run in column blocks, in worker threads or not, with the same result."""
    X = rng.poisson(4.0, (12, 2300)).astype(np.float64)
    W, H = initialize_nmf(X + 1.0, 3, rng)
    rate_H = rng.uniform(0.0, 1.0, (3, X.shape[1]))  # per entry: no folding into W
    for kwargs in ({}, {"prior_rate_W": 0.3, "prior_rate_H": 0.7}, {"prior_rate_H": rate_H}):
        serial = poisson_nmf_em(X, W, H, max_iter=25, tol=0, track_log_likelihood=True, threads=1, **kwargs)
        threaded = poisson_nmf_em(X, W, H, max_iter=25, tol=0, track_log_likelihood=True, threads=2, **kwargs)
        assert np.array_equal(serial.W, threaded.W) and np.array_equal(serial.H, threaded.H)
        assert np.array_equal(serial.log_likelihood, threaded.log_likelihood)
        assert (serial.num_threads, threaded.num_threads) == (1, 2)
        W_ref, H_ref = reference_em(X, W, H, kwargs.get("prior_rate_W", 0.0), kwargs.get("prior_rate_H", 0.0), 25)
        np.testing.assert_allclose(threaded.W, W_ref, rtol=1e-10)
        np.testing.assert_allclose(threaded.H, H_ref, rtol=1e-10)
        history = threaded.log_likelihood
        assert np.diff(history).min() >= -1e-12 * np.abs(history).max()
    # at a size where BLAS would use its threads (257 x 2300, rank 32): one worker or two, the same bits
    X = rng.poisson(2.0, (257, 2300)).astype(np.float32)
    W, H = initialize_nmf(X + 1.0, 32, rng)
    one, two = (poisson_nmf_em(X, W, H, max_iter=15, tol=0, threads=threads) for threads in (1, 2))
    assert poisson_nmf_em(X[:, :1000], W, H[:, :1000], max_iter=1, tol=0, threads=2).num_threads == 1  # one block
    assert np.array_equal(one.W, two.W) and np.array_equal(one.H, two.H)
    X = rng.poisson(4.0, (12, 2300)).astype(np.float64)
    W, H = initialize_nmf(X + 1.0, 3, rng)
    # masks, and H alone (its log-likelihood is taken in the H pass)
    mask = np.array([True, False, True])
    for kwargs in ({"update_W": mask, "update_H": ~mask}, {"update_W": False}):
        serial = poisson_nmf_em(X, W, H, max_iter=10, tol=0, track_log_likelihood=True, threads=1, **kwargs)
        threaded = poisson_nmf_em(X, W, H, max_iter=10, tol=0, track_log_likelihood=True, threads=2, **kwargs)
        assert np.array_equal(serial.W, threaded.W) and np.array_equal(serial.H, threaded.H)
        assert np.diff(threaded.log_likelihood).min() >= -1e-12 * np.abs(threaded.log_likelihood).max()
    assert np.array_equal(threaded.W, W)


def test_initialization_takes_the_data_level_in_float64(rng):
    """A float32 matrix whose total exceeds float32's range gave an infinite start (its mean overflowed), which EM
    then blamed on the caller's W; a bad scale met a bare TypeError or ValueError."""
    X = (rng.poisson(5.0, (20, 30)) * 1e37).astype(np.float32)
    W, H = initialize_nmf(X, 3)
    assert W.dtype == np.float32 and np.isfinite(W).all() and np.isfinite(H).all()
    # the documented start: entries s u, u ~ Uniform(0.5, 1.5), s = sqrt(mean(X) / rank) (float32 rounding aside)
    scale = np.sqrt(X.mean(dtype=float) / 3)
    for factor in (W, H):
        u = factor.astype(float) / scale
        assert 0.5 * (1 - 1e-6) <= u.min() and u.max() <= 1.5 * (1 + 1e-6), (u.min(), u.max())
    # so W H starts at the data's level: mean(W H) / mean(X) = sum_r a_r b_r / 3, a_r and b_r the means of 20 and
    # 30 uniforms, has mean 1 and standard deviation sqrt((1 / 240 + 1 / 360) / 3) = 0.048
    level = (W.astype(float) @ H.astype(float)).mean() / X.mean(dtype=float)
    assert abs(level - 1) < 4 * np.sqrt((1 / 240 + 1 / 360) / 3), level
    for scale in ("1", np.array([1.0, 2.0]), -1.0, np.nan):
        with pytest.raises(ParameterError, match="^scale=.* must be a positive number"):
            initialize_nmf(X, 3, scale=scale)


@pytest.mark.parametrize("seed", [-1, 1.5, "a", True])
def test_initialization_refuses_a_seed_that_is_not_a_non_negative_integer(seed):
    """-1 met a bare ValueError, 1.5 and 'a' TypeErrors from SeedSequence."""
    with pytest.raises(ParameterError, match=r"^rng=.* must be an integer of at least 0$"):
        initialize_nmf(np.ones((4, 3)), 2, rng=seed)


@pytest.mark.parametrize("options, match", [(dict(tol=True), "tol: expected a finite number"),
                                            (dict(track_log_likelihood="no"), "track_log_likelihood: expected")])
def test_flags_and_tolerances_are_not_taken_by_their_truth(options, match):
    """tol=True ran with a tolerance of 1; track_log_likelihood='no' tracked it."""
    X = np.ones((4, 3))
    with pytest.raises(ParameterError, match=match):
        poisson_nmf_em(X, *initialize_nmf(X, 2), **options)


@pytest.mark.parametrize("per_entry", [False, True])
def test_a_row_mask_on_h_takes_its_own_rows_prior_rates_in_every_column_block(rng, per_entry):
    """Rows 1 and 2 of H learned, row 0 fixed, with a prior rate per row (it folds into W) or per entry (it does not)
    that differs between rows and columns, over 1100 columns (two blocks): the textbook MAP-EM update of those rows
    alone, each with its own rates."""
    X, _, _ = planted(rng, n_rows=20, n_cols=1100, rank=3)
    W, H = initialize_nmf(X, 3, rng)
    mask = np.array([False, True, True])
    rate_H = rng.uniform(0.5, 4.0, (3, 1100) if per_entry else (3, 1))
    result = poisson_nmf_em(X, W, H, update_W=False, update_H=mask, prior_rate_H=rate_H, max_iter=5, tol=0)
    H_ref = H.copy()
    rate = np.broadcast_to(rate_H, H.shape)
    for _ in range(5):
        H_ref[mask] *= (W[:, mask].T @ (X / (W @ H_ref))) / (W[:, mask].sum(axis=0)[:, None] + rate[mask])
    np.testing.assert_allclose(result.H, H_ref, rtol=1e-10)
    assert np.array_equal(result.H[0], H[0])


def test_the_stopping_rule_with_priors_measures_the_kl_divergence_plus_the_prior_penalty(rng):
    """With priors the objective is D = KL(X | W H) + Σ λ w: the saturated log-likelihood plus the priors' constant
    Σ log λ, minus the log-posterior. EM stops at the first iteration whose gain is below tol · D. (A rate of 0.01 on
    every entry puts Σ log λ = -4.6 per entry, which would make D far larger, and the stop far earlier.)"""
    X, _, _ = planted(rng)
    W, H = initialize_nmf(X, 4, rng)
    rate_W, rate_H, tol = 0.01, 0.01, 1e-4
    result = poisson_nmf_em(X, W, H, prior_rate_W=rate_W, prior_rate_H=rate_H, max_iter=5000, tol=tol)
    history = result.log_likelihood
    assert 1 < result.n_iter < 5000
    constant = np.log(rate_W) * W.size + np.log(rate_H) * H.size
    objective = np.sum(xlogy(X, X) - X - gammaln(X + 1)) + constant - history
    # D is KL plus the penalty of the final factors, computed from them
    rate = result.W @ result.H
    kl = np.sum(xlogy(X, X / rate) - X + rate)
    np.testing.assert_allclose(objective[-1], kl + rate_W * result.W.sum() + rate_H * result.H.sum(), rtol=1e-9)
    gains = np.diff(history)
    assert gains[-1] <= tol * objective[-2]
    assert np.all(gains[:-1] > tol * objective[:-2])
