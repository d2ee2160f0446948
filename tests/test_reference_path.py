import warnings

import numpy as np
import pytest

from core.errors import ParameterError
from core.evidence.rank_one import rank_one_log_evidence
from core.evidence.reference_path import LogSpaceReference, log_space_mode, reference_at_mode
from core.evidence.sti_nmf import select_rank_sti
from core.models.poisson_nmf import PoissonNMF
from core.random import stream


@pytest.fixture
def reference(rng):
    shape_U, shape_V = (3, 2), (2, 4)
    return LogSpaceReference(rng.normal(size=shape_U), rng.normal(size=shape_V), rng.uniform(1, 5, size=shape_U),
                             rng.uniform(1, 5, size=shape_V), np.array([0.3, 2.0]))


def dense_covariance(q):
    """D^-1 + sum_k a_k e_k e_k^T written out over the flattened (U, V)."""
    rank = q.ridge_precision.size
    d = q.precision_U.sum(axis=0) + q.precision_V.sum(axis=1)
    covariance = np.diag(np.concatenate([1 / q.precision_U.ravel(), 1 / q.precision_V.ravel()]))
    for k in range(rank):
        e = np.concatenate([np.zeros_like(q.precision_U), np.zeros_like(q.precision_V)], axis=None)
        eU, eV = np.zeros_like(q.precision_U), np.zeros_like(q.precision_V)
        eU[:, k], eV[k, :] = 1.0, -1.0
        e = np.concatenate([eU.ravel(), eV.ravel()])
        covariance += (1 / q.ridge_precision[k] - 1 / d[k]) * np.outer(e, e)
    return covariance


def test_reference_density_gradient_and_products_match_the_dense_gaussian(reference, rng):
    from scipy.stats import multivariate_normal

    q = reference
    covariance = dense_covariance(q)
    mean = np.concatenate([q.mean_U.ravel(), q.mean_V.ravel()])
    U, V = rng.normal(size=q.mean_U.shape), rng.normal(size=q.mean_V.shape)
    point = np.concatenate([U.ravel(), V.ravel()])
    assert q.log_density(U, V) == pytest.approx(multivariate_normal(mean, covariance).logpdf(point), rel=1e-12)
    gU, gV = q.grad_log_density(U, V)
    np.testing.assert_allclose(np.concatenate([gU.ravel(), gV.ravel()]),
                               -np.linalg.solve(covariance, point - mean), rtol=1e-10)
    sU, sV = q.times_covariance(U, V)
    np.testing.assert_allclose(np.concatenate([sU.ravel(), sV.ravel()]), covariance @ point, rtol=1e-10)


def test_reference_draws_have_its_covariance(reference):
    # 40,000 draws: each covariance entry within 5 of its Monte-Carlo standard errors
    q = reference
    draws = np.array([np.concatenate([u.ravel(), v.ravel()]) for u, v in (q.sample(stream(3, n))
                                                                           for n in range(40_000))])
    covariance = dense_covariance(q)
    se = np.sqrt((covariance ** 2 + np.outer(np.diag(covariance), np.diag(covariance))) / len(draws))
    assert np.all(np.abs(np.cov(draws.T) - covariance) < 5 * se)


def test_mode_keeps_entries_positive_and_q_is_proper(rng):
    X = PoissonNMF.sample(rng, (20, 15), 2, rate_W=5.0, rate_H=5.0)[2]
    W, H = log_space_mode(X, 3, rng, prior_rate=5.0, iterations=200)
    assert np.all(W > 0) and np.all(H > 0)
    q = reference_at_mode(W, H, 5.0)
    assert np.all(q.precision_U > 0) and np.all(q.ridge_precision > 0)
    assert np.isfinite(q.log_density(*q.sample(rng)))


def test_reference_path_recovers_the_rank_one_evidence():
    # the default length; four replicates' spread gives the standard error
    X = PoissonNMF.sample(stream(4, 2000), (100, 75), 1, rate_W=5.0, rate_H=5.0)[2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = select_rank_sti(X, [1], preset="reference", prior_rate=5.0, seed=2, num_intervals=8)
    exact = rank_one_log_evidence(X, 5.0)
    assert abs(result.log_marginal_likelihood[0] - exact) < 3 * result.stderr[0] + 0.1, \
        (result.log_marginal_likelihood[0], exact, result.stderr[0])
    assert result.stderr[0] < 2.0
    assert result.settings["path"] == "log_space_reference"


def test_reference_path_adds_log_r_factorial_and_refuses_blocks(rng):
    from math import lgamma

    X = PoissonNMF.sample(rng, (12, 10), 2, rate_W=5.0, rate_H=5.0)[2]
    settings = dict(preset="reference", prior_rate=5.0, num_intervals=2, num_steps=20, num_keep=10,
                    num_replicates=2, prior_draws=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = select_rank_sti(X, [2], **settings)
    from core.evidence.sti import integration_weights

    grid = result.per_temperature[0]
    weights = integration_weights(grid.temperatures, rule="simpson", power=2.0)
    assert result.log_marginal_likelihood[0] == pytest.approx(weights @ grid.mean_log_likelihood + lgamma(3),
                                                              rel=1e-12)
    with pytest.raises(ParameterError, match="full-data"):
        select_rank_sti(X, [2], **{**settings, "num_blocks": 2})
