"""Tests for sepsti.core.factorization.pltf_em: monotone objective, the NMF kernels, fixed factors, known structure."""

import numpy as np
import pytest

from sepsti.core.errors import ConvergenceWarning, ParameterError
from sepsti.core.factorization.pltf_em import initialize_pltf, pltf_em
from sepsti.core.models.pltf import pltf_model


@pytest.mark.parametrize("spec,dims,map_estimate", [
    ("ir,jr,kr->ijk", dict(i=6, j=5, k=4, r=3), False),
    ("fi,ik,kt->ft", dict(f=8, i=3, k=2, t=7), True),
    ("ik,kj->ij", dict(i=7, k=3, j=6), True),
])
def test_objective_never_decreases(spec, dims, map_estimate, rng):
    model = pltf_model(spec, dims, prior_shape=1.5, prior_rate=0.5)
    X = model.sample_data(rng, model.sample_prior(rng))
    result = pltf_em(model, X, max_iter=60, tol=0, map_estimate=map_estimate)
    assert result.n_iter == 60 and result.objective.shape == (61,)
    assert np.all(np.diff(result.objective) >= -1e-9 * np.abs(result.objective[1:]))


@pytest.mark.parametrize("map_estimate", [False, True])
def test_generic_updates_equal_the_nmf_kernels(map_estimate, rng):
    X = rng.poisson(4.0, size=(9, 7))
    dims = dict(i=9, k=3, j=7)
    nmf = pltf_model("ik,kj->ij", dims, prior_shape=1.0, prior_rate=0.3)
    # an all-true mask takes the generic path through the contraction engine
    generic = pltf_model("ik,kj->ij", dims, prior_shape=1.0, prior_rate=0.3, mask=np.ones((9, 7), bool))
    start = initialize_pltf(nmf, X, 1)
    fast = pltf_em(nmf, X, start, max_iter=40, tol=0, map_estimate=map_estimate)
    slow = pltf_em(generic, X, start, max_iter=40, tol=0, map_estimate=map_estimate)
    for a, b in zip(fast.factors, slow.factors):
        np.testing.assert_allclose(a, b, rtol=1e-9)
    np.testing.assert_allclose(fast.objective, slow.objective, rtol=1e-10)


def test_fixed_factor_is_untouched_and_known_structure_is_recovered(rng):
    W = rng.gamma(2.0, 1.0, size=(12, 3))
    H = rng.gamma(2.0, 10.0, size=(3, 15))
    model = pltf_model("fi,it->ft", prior_shape=1.0, prior_rate=1e-6, fixed={0: W}, mask=np.ones((12, 15), bool))
    X = W @ H
    result = pltf_em(model, X, max_iter=2000, tol=1e-12, map_estimate=False)
    assert result.factors[0] is W
    error = np.linalg.norm(result.factors[1] - H) / np.linalg.norm(H)
    assert error < 1e-3, f"relative error of H is {error:.2e}"


def test_masked_entries_are_ignored(rng):
    mask = rng.random((6, 5)) < 0.8
    model = pltf_model("ik,kj->ij", dict(i=6, k=2, j=5), mask=mask)
    X = model.sample_data(rng, model.sample_prior(rng))
    Y = X.copy()
    Y[~mask] = 1000
    start = initialize_pltf(model, X, 3)
    a = pltf_em(model, X, start, max_iter=20, tol=0)
    b = pltf_em(model, Y, start, max_iter=20, tol=0)
    np.testing.assert_array_equal(a.factors[1], b.factors[1])


def test_warnings_and_errors(rng):
    model = pltf_model("ir,jr,kr->ijk", dict(i=3, j=3, k=3, r=2))
    X = model.sample_data(rng, model.sample_prior(rng))
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        pltf_em(model, X, max_iter=2, tol=1e-12)
    with pytest.raises(ParameterError, match="max_iter"):
        pltf_em(model, X, max_iter=-1)
    with pytest.raises(ParameterError, match="tol"):
        pltf_em(model, X, tol=-1.0)
    for flag in ("no", 0, None):  # "no" fitted the MAP estimate
        with pytest.raises(ParameterError, match=rf"^map_estimate={flag!r}: expected True or False$"):
            pltf_em(model, X, map_estimate=flag)
    for seed in (-1, 1.5, "0"):  # were NumPy's ValueError and TypeErrors
        with pytest.raises(ParameterError, match=r"^seed=.* must be an integer in \[0, 2\*\*32\)$"):
            pltf_em(model, X, seed=seed)
        with pytest.raises(ParameterError, match=r"^seed="):
            initialize_pltf(model, X, seed)


def test_missing_entries_change_nothing(rng):
    """Masked-out entries may hold NaN; their values set neither the start nor the fit."""
    mask = rng.random((8, 10)) > 0.2
    model = pltf_model("ik,kj->ij", dict(i=8, k=2, j=10), mask=mask)
    X = rng.poisson(3.0, (8, 10)).astype(float)
    runs = [pltf_em(model, np.where(mask, X, fill), max_iter=50, tol=0) for fill in (np.nan, 0.0, 1e9)]
    for run in runs[1:]:
        np.testing.assert_array_equal(run.objective, runs[0].objective)
        for a, b in zip(run.factors, runs[0].factors):
            np.testing.assert_array_equal(a, b)
    start = initialize_pltf(model, np.where(mask, X, np.nan), 0)
    assert model.xhat(start).mean() == pytest.approx(X[mask].mean(), rel=0.5)


@pytest.mark.parametrize("mask", [None, np.ones((3, 4), bool)])  # the NMF kernels, the contraction engine
def test_starts_are_refused_as_by_poisson_nmf_em(mask, rng):
    model = pltf_model("ik,kj->ij", dict(i=3, k=2, j=4), mask=mask)
    X = rng.poisson(5.0, (3, 4)).astype(float) + 4.0
    W, H = rng.uniform(0.5, 1.5, (3, 2)), rng.uniform(0.5, 1.5, (2, 4))
    W[0] = 0.0
    with pytest.raises(ParameterError, match="must be finite and strictly positive"):
        pltf_em(model, X, (W, H), max_iter=10, tol=0)
    with pytest.raises(ParameterError, match="negligible start"):
        pltf_em(model, X, (np.full((3, 2), 1e-200), H), max_iter=10, tol=0)


def test_fixed_zeros_give_no_nan(rng):
    """A fixed factor may hold zeros, unless they hold Xhat at 0 where X > 0 (they gave NaN factors)."""
    A = rng.uniform(0.5, 1.5, (3, 2))
    A[0] = 0.0
    model = pltf_model("ir,jr,kr->ijk", dict(j=4, k=5), fixed={0: A})
    X = rng.poisson(5.0, model.output_shape).astype(float) + 4.0
    with pytest.raises(ParameterError, match="no fit can explain"):
        pltf_em(model, X, max_iter=10, tol=0)
    X[0] = 0.0
    result = pltf_em(model, X, max_iter=30, tol=0)
    assert result.factors[0] is A
    assert all(np.all(np.isfinite(z)) for z in result.factors) and np.all(np.isfinite(result.objective))
    assert np.all(np.diff(result.objective) >= -1e-9 * np.abs(result.objective[1:]))


def test_fit_is_scale_covariant(rng):
    model = pltf_model("ir,jr,kr->ijk", dict(i=4, j=5, k=6, r=2))
    X = rng.poisson(3.0, model.output_shape).astype(float)
    fit = model.xhat(pltf_em(model, X, max_iter=100, tol=0, map_estimate=False).factors)
    for c in (1e-30, 1e-12, 1e12):
        scaled = model.xhat(pltf_em(model, c * X, max_iter=100, tol=0, map_estimate=False).factors)
        np.testing.assert_allclose(scaled / c, fit, rtol=1e-9, atol=1e-12 * fit.max())


def test_nmf_map_with_gamma_priors_is_stationary_in_the_log_posterior(rng):
    """Shape-2.5 priors on the plain NMF pattern: at the MAP, the gradient of the log posterior in each factor,
    written out here by hand, vanishes (the exponential-prior NMF kernels, with the shape ignored, passed before)."""
    a, b = 2.5, 0.5
    X = rng.poisson(4.0, size=(8, 6)).astype(float)
    model = pltf_model("ik,kj->ij", dict(i=8, k=2, j=6), prior_shape=a, prior_rate=b)
    W, H = pltf_em(model, X, max_iter=3000, tol=0, map_estimate=True).factors
    R = X / (W @ H)
    # z * d/dz [sum(X log Xhat - Xhat) + (a - 1) log z - b z]; with the shape ignored it is a - 1 = 1.5
    grad_W = W * (R @ H.T - H.sum(axis=1)[None, :] - b) + (a - 1.0)
    grad_H = H * (W.T @ R - W.sum(axis=0)[:, None] - b) + (a - 1.0)
    np.testing.assert_allclose(grad_W, 0.0, atol=1e-8)
    np.testing.assert_allclose(grad_H, 0.0, atol=1e-8)


def test_stops_at_the_first_relative_rise_below_tol(rng):
    """The documented rule, |rise| <= tol * |objective|, read off the objective history: the run stops at the first
    iteration that meets it (an absolute rise below tol, a later iteration here, passed before)."""
    model = pltf_model("ir,jr,kr->ijk", dict(i=5, j=4, k=6, r=2))
    X = rng.poisson(3.0, model.output_shape).astype(float)
    tol = 1e-6
    result = pltf_em(model, X, max_iter=500, tol=tol)
    objective = result.objective
    assert np.all(np.abs(objective) > 100.0)  # so the relative and the absolute rules differ
    met = np.abs(np.diff(objective)) <= tol * np.abs(objective[1:])
    assert objective.shape == (result.n_iter + 1,) and result.n_iter < 500
    assert met[-1] and not met[:-1].any()
