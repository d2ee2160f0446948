"""Tests for sepsti.core.samplers.gibbs: exact posterior means, invariants and simulation-based calibration."""

import numpy as np
import pytest
from scipy.stats import chisquare

from _pltf_closed_form import TinyModel
from sepsti.core.errors import ParameterError
from sepsti.core.models.pltf import pltf_model
from sepsti.core.samplers import gibbs
from sepsti.core.samplers.diagnostics import effective_sample_size
from sepsti.core.samplers.driver import run_chain

A_W, B_W, A_H, B_H = np.array([2.0, 3.0]), np.array([1.0, 2.0]), 2.0, 1.5
X_TINY = np.array([0, 2, 6, 6])


def tiny_model():
    return pltf_model("k,kj->j", dict(k=2, j=4), prior_shape=[A_W, A_H], prior_rate=[B_W, B_H])


def assert_means_within_mcse(draws, truth, *, k=4.0, min_ess=300):
    """ESS-gated check: every |mean - truth| below k Monte-Carlo standard errors."""
    draws = draws.reshape(len(draws), -1)
    truth = np.ravel(truth)
    for column, target in zip(draws.T, truth):
        ess = float(effective_sample_size(column, method="mean"))
        assert ess >= min_ess, f"ESS {ess:.0f} below {min_ess}"
        se = column.std(ddof=1) / np.sqrt(ess)
        assert abs(column.mean() - target) < k * se, f"mean {column.mean():.4f}, truth {target:.4f}, se {se:.4f}"


def run(model, X, seed, num_steps, burn_in, **kernel_options):
    rng = np.random.default_rng(seed)
    state = gibbs.init(model, X, rng=rng)
    kernel = gibbs.build_kernel(model, X, **kernel_options)
    return run_chain(kernel, state, rng, num_steps=num_steps, burn_in=burn_in, transform=lambda s: s.factors)


def test_block_gibbs_matches_exact_posterior_means():
    exact = TinyModel(X_TINY, A_W, B_W, A_H, B_H)
    result = run(tiny_model(), X_TINY, 1, 12000, 500)
    assert_means_within_mcse(result.samples[0], exact.posterior_w)
    assert_means_within_mcse(result.samples[1], exact.posterior_H)


def test_factor_draws_have_the_closed_form_gamma_moments():
    # one component: the sources are the data, and every sweep draws H_j independently from its exact conditional
    # Gamma(a + sum_i X_ij, b + sum_i W_i); mean and variance of 4000 draws within 4 Monte-Carlo standard errors
    # from the Gamma's own moments (a rate 5 % off moves the means by 11-22 of them)
    W = np.array([[0.4], [1.3], [0.8], [2.1], [0.6]])
    model = pltf_model("ik,kj->ij", dict(k=1, j=4), prior_shape=2.0, prior_rate=0.5, fixed={0: W})
    X = np.array([[3, 0, 7, 2], [9, 4, 12, 5], [6, 1, 9, 3], [14, 6, 19, 8], [2, 1, 6, 2]])
    shape, rate = 2.0 + X.sum(axis=0), 0.5 + W.sum()
    draws = run(model, X, 9, 4000, 0).samples[1][:, 0, :]
    n = len(draws)
    mean, variance = shape / rate, shape / rate ** 2
    # se of the sample variance: sqrt((mu_4 - sigma^4) / n), mu_4 = sigma^4 (3 + 6 / shape) for a Gamma
    np.testing.assert_array_less(np.abs(draws.mean(axis=0) - mean), 4 * np.sqrt(variance / n))
    np.testing.assert_array_less(np.abs(draws.var(axis=0, ddof=1) - variance),
                                 4 * variance * np.sqrt((2 + 6 / shape) / n))


def test_fixed_factor_comes_back_bit_identical_and_same_seed_same_chain(rng):
    W = rng.random((5, 2))
    model = pltf_model("ik,kj->ij", dict(j=4), prior_shape=1.0, prior_rate=1.0, fixed={0: W})
    X = model.sample_data(rng, model.sample_prior(rng))
    first = run(model, X, 7, 50, 10)
    second = run(model, X, 7, 50, 10)
    assert first.state.factors[0] is W
    np.testing.assert_array_equal(first.samples[1], second.samples[1])
    np.testing.assert_array_equal(first.info.log_joint, second.info.log_joint)


def test_sources_sum_to_data_and_statistics_agree(rng):
    model = pltf_model("fi,ik,kt->ft", dict(f=6, i=3, k=2, t=5), prior_shape=1.0, prior_rate=0.5)
    factors = model.sample_prior(rng)
    X = model.sample_data(rng, factors) * 7  # large counts take the binomial-chain path
    kernel = gibbs.build_kernel(model, X, keep_sources=True)
    state, _ = kernel(rng, gibbs.init(model, X, factors))
    layout = kernel.layout
    np.testing.assert_array_equal(state.sources.sum(axis=1), layout.counts)
    full = np.zeros((X.size, model.num_latent))
    full[layout.entries] = state.sources
    full = full.reshape(model.output_shape + tuple(model.dims[c] for c in model.latent))
    letters = model.output + model.latent
    for a, indices in enumerate(model.factor_indices):
        np.testing.assert_allclose(state.source_stats[a], np.einsum(f"{letters}->{indices}", full))
    # log p(S, Z, X) from the statistics equals the direct sum over sources
    lam = model.intensity(state.factors)
    from scipy.special import gammaln, xlogy
    direct = np.sum(xlogy(full, lam) - lam - gammaln(full + 1)) + model.log_prior(state.factors)
    assert state.logdensity == pytest.approx(direct)


def test_log_likelihood_and_starting_density_match_scipy(rng):
    """log p(X | Z) after a sweep, and log p(X | Z) + log p(Z) at the start, against scipy's Poisson and Gamma
    densities (the log X! term left out of the sweep's log-likelihood, and the prior left out of the start's
    density, passed before)."""
    from scipy import stats

    model = pltf_model("fi,ik,kt->ft", dict(f=6, i=3, k=2, t=5), prior_shape=1.5, prior_rate=0.5)
    factors = model.sample_prior(rng)
    X = model.sample_data(rng, factors) * 3
    start = gibbs.init(model, X, factors)
    log_prior = sum(stats.gamma(1.5, scale=2.0).logpdf(z).sum() for z in factors)
    log_likelihood = stats.poisson(model.xhat(factors)).logpmf(X).sum()
    assert start.log_likelihood == pytest.approx(log_likelihood, rel=1e-12)
    assert start.logdensity == pytest.approx(log_likelihood + log_prior, rel=1e-12)
    state, info = gibbs.build_kernel(model, X)(rng, start)
    expected = stats.poisson(model.xhat(state.factors)).logpmf(X).sum()
    assert state.log_likelihood == info.log_likelihood == pytest.approx(expected, rel=1e-12)


def test_clamping_and_errors(rng):
    model = tiny_model()
    with pytest.raises(ParameterError, match="not free"):
        gibbs.build_kernel(model, X_TINY, clamped_factors=(5,))
    # 1.5 was taken as 1, "a" met int()'s ValueError, None a TypeError
    for clamped, message in (((1.5,), r"clamped_factors\[0\]=1.5 must be an integer of at least 0"),
                             ((0, "a"), r"clamped_factors\[1\]='a' must be an integer"),
                             ((None,), r"clamped_factors\[0\]=None must be an integer"),
                             ((True,), r"clamped_factors\[0\]=True must be an integer"),
                             (None, r"clamped_factors=None: expected a sequence of integers of at least 0")):
        with pytest.raises(ParameterError, match=rf"^{message}"):
            gibbs.build_kernel(model, X_TINY, clamped_factors=clamped)
    with pytest.raises(ParameterError, match="integer counts"):
        gibbs.init(model, X_TINY + 0.5, rng=rng)
    state = gibbs.init(model, X_TINY, rng=rng)
    kernel = gibbs.build_kernel(model, X_TINY, clamped_factors=(0,))
    new, _ = kernel(rng, state)
    assert new.factors[0] is state.factors[0]


def sbc_ranks(num_replicates, num_steps, thin, seed):
    """Rank of the true w_0 and H_00 among thinned posterior draws, for data simulated from the prior."""
    model = pltf_model("k,kj->j", dict(k=2, j=3), prior_shape=[A_W, A_H], prior_rate=[B_W, B_H])
    rng = np.random.default_rng(seed)
    ranks = []
    for _ in range(num_replicates):
        truth = model.sample_prior(rng)
        X = model.sample_data(rng, truth)
        # an independent start and a burn-in, so the thinned draws and the truth are exchangeable
        result = run_chain(gibbs.build_kernel(model, X), gibbs.init(model, X, rng=rng), rng,
                           num_steps=num_steps + 5 * thin, burn_in=5 * thin, thin=thin,
                           transform=lambda s: (s.factors[0][0], s.factors[1][0, 0]))
        ranks.append([np.sum(result.samples[0] < truth[0][0]), np.sum(result.samples[1] < truth[1][0, 0])])
    return np.array(ranks), len(result.samples[0])


def check_uniform_ranks(ranks, num_draws, num_bins):
    # ranks take num_draws + 1 values; equal bins need num_bins to divide that
    assert (num_draws + 1) % num_bins == 0
    for column in ranks.T:
        counts = np.bincount(column * num_bins // (num_draws + 1), minlength=num_bins)
        assert chisquare(counts).pvalue > 1e-3, f"rank histogram {counts} is not uniform"


def test_simulation_based_calibration_small():
    ranks, num_draws = sbc_ranks(120, 190, 10, seed=11)
    check_uniform_ranks(ranks, num_draws, 4)


@pytest.mark.slow
def test_simulation_based_calibration():
    ranks, num_draws = sbc_ranks(1000, 380, 20, seed=12)
    check_uniform_ranks(ranks, num_draws, 10)


def test_masked_entries_are_ignored_by_the_posterior():
    # the last entry is unobserved: the posterior of w is the one of the three observed entries
    mask = np.array([True, True, True, False])
    model = pltf_model("k,kj->j", dict(k=2, j=4), prior_shape=[A_W, A_H], prior_rate=[B_W, B_H], mask=mask)
    exact = TinyModel(X_TINY[:3], A_W, B_W, A_H, B_H)
    X = X_TINY.copy()
    X[3] = 100
    result = run(model, X, 4, 8000, 300)
    assert_means_within_mcse(result.samples[0], exact.posterior_w)
    assert_means_within_mcse(result.samples[1][:, :, :3], exact.posterior_H[:, :3])


def test_sources_beyond_the_log_factorial_table_are_scored_exactly(rng, monkeypatch):
    # the table of log s! stops at _LONGEST_TABLE (its memory grows with the largest count); larger
    # sources take lgamma: a table of 4 makes most sources here larger than it
    from scipy.special import gammaln, xlogy

    monkeypatch.setattr(gibbs, "_LONGEST_TABLE", 4)
    monkeypatch.setattr(gibbs, "_TABLES", {})
    model = pltf_model("ik,kj->ij", dict(i=5, k=2, j=4), prior_shape=1.0, prior_rate=0.1)
    factors = model.sample_prior(rng)
    X = model.sample_data(rng, factors) * 13
    kernel = gibbs.build_kernel(model, X, keep_sources=True)
    state, _ = kernel(rng, gibbs.init(model, X, factors))
    layout = kernel.layout
    assert layout.counts.max() > 4
    full = np.zeros((X.size, model.num_latent))
    full[layout.entries] = state.sources
    full = full.reshape(model.output_shape + (2,))
    lam = model.intensity(state.factors)
    direct = np.sum(xlogy(full, lam) - lam - gammaln(full + 1)) + model.log_prior(state.factors)
    assert state.logdensity == pytest.approx(direct)
