"""Tests for sepsti.core.samplers.sada: exact posterior means and agreement with the block Gibbs sampler."""

import numpy as np
import pytest

from _pltf_closed_form import TinyModel
from sepsti.core.errors import ParameterError
from sepsti.core.models.pltf import pltf_model
from sepsti.core.samplers import gibbs, sada
from sepsti.core.samplers.diagnostics import effective_sample_size
from sepsti.core.samplers.driver import run_chain

A_W, B_W, A_H, B_H = np.array([2.0, 3.0]), np.array([1.0, 2.0]), 2.0, 1.5
X_TINY = np.array([0, 2, 6, 6])


def run(module, model, X, seed, num_steps, burn_in):
    rng = np.random.default_rng(seed)
    return run_chain(module.build_kernel(model, X), module.init(model, X, rng=rng), rng, num_steps=num_steps,
                     burn_in=burn_in, transform=lambda s: s.factors)


def mean_and_se(draws, min_ess=200):
    draws = draws.reshape(len(draws), -1)
    ess = np.asarray(effective_sample_size(draws[None], method="mean"))
    assert np.all(ess >= min_ess), f"ESS {ess.min():.0f} below {min_ess}"
    return draws.mean(axis=0), draws.std(axis=0, ddof=1) / np.sqrt(ess)


def assert_agree(a, b, k=4.0):
    (mean_a, se_a), (mean_b, se_b) = a, b
    z = np.abs(mean_a - mean_b) / np.hypot(se_a, se_b)
    assert np.all(z < k), f"means differ by {z.max():.2f} combined standard errors"


def test_sada_matches_exact_posterior_means():
    model = pltf_model("k,kj->j", dict(k=2, j=4), prior_shape=[A_W, A_H], prior_rate=[B_W, B_H])
    exact = TinyModel(X_TINY, A_W, B_W, A_H, B_H)
    result = run(sada, model, X_TINY, 3, 6000, 300)
    for draws, truth in [(result.samples[0], exact.posterior_w), (result.samples[1], exact.posterior_H)]:
        mean, se = mean_and_se(draws)
        assert np.all(np.abs(mean - np.ravel(truth)) < 4 * se), (mean, truth, se)


@pytest.mark.parametrize("case", ["nmf_fixed_dictionary", "deconvolution"])
def test_sada_block_gibbs_and_long_reference_agree(case):
    rng = np.random.default_rng(21)
    if case == "nmf_fixed_dictionary":
        model = pltf_model("ik,kj->ij", dict(j=4), prior_shape=2.0, prior_rate=1.0,
                           fixed={0: rng.gamma(2.0, 1.0, size=(6, 3))})
    else:
        delta = np.zeros((4, 6, 3))  # Z3(d, t, r) = delta(d - t + r)
        for t in range(6):
            for r in range(3):
                if 0 <= t - r < 4:
                    delta[t - r, t, r] = 1.0
        model = pltf_model("r,d,dtr->t", prior_shape=2.0, prior_rate=1.0, fixed={2: delta})
    X = model.sample_data(rng, model.sample_prior(rng))
    block = run(gibbs, model, X, 1, 3000, 200)
    slices = run(sada, model, X, 2, 3000, 200)
    reference = run(gibbs, model, X, 3, 12000, 200)
    for a in model.free:
        stats = [mean_and_se(r.samples[a]) for r in (block, slices, reference)]
        assert_agree(stats[0], stats[1])
        assert_agree(stats[1], stats[2])
        assert_agree(stats[0], stats[2])


def test_sada_log_likelihood_rises_and_same_seed_same_chain(rng):
    model = pltf_model("fi,ik,kt->ft", dict(i=3, k=2, t=30), prior_shape=1.0, prior_rate=1.0,
                       fixed={0: rng.gamma(1.0, 5.0, size=(20, 3))})
    X = model.sample_data(rng, model.sample_prior(rng))
    first = run(sada, model, X, 5, 60, 1)
    second = run(sada, model, X, 5, 60, 1)
    np.testing.assert_array_equal(first.info.log_likelihood, second.info.log_likelihood)
    assert np.mean(first.info.log_likelihood[-10:]) > first.info.log_likelihood[0]
    assert first.state.factors[0] is model.fixed[0]
    assert first.state.log_likelihood == pytest.approx(model.log_likelihood(first.state.factors, X), rel=1e-12)


def test_densities_at_the_start_and_after_a_sweep_match_scipy(rng):
    """log p(X | Z) and log p(X | Z) + log p(Z), at the start and after a sweep, against scipy's Poisson and Gamma
    densities (the prior left out of the start's density passed before)."""
    from scipy import stats

    model = pltf_model("fi,ik,kt->ft", dict(f=6, i=3, k=2, t=5), prior_shape=1.5, prior_rate=0.5)
    factors = model.sample_prior(rng)
    X = model.sample_data(rng, factors)
    state = sada.init(model, X, factors)
    kernel = sada.build_kernel(model, X)
    for _ in range(2):
        log_likelihood = stats.poisson(model.xhat(state.factors)).logpmf(X).sum()
        log_prior = sum(stats.gamma(1.5, scale=2.0).logpdf(z).sum() for z in state.factors)
        assert state.log_likelihood == pytest.approx(log_likelihood, rel=1e-12)
        assert state.logdensity == pytest.approx(log_likelihood + log_prior, rel=1e-12)
        state, _ = kernel(rng, state)


def test_errors(rng):
    model = pltf_model("ik,kj->ij", dict(i=2, k=2, j=2))
    with pytest.raises(ParameterError, match="integer counts"):
        sada.build_kernel(model, np.full((2, 2), 0.5))
    with pytest.raises(ParameterError, match="factors or an rng"):
        sada.init(model, np.ones((2, 2), dtype=int))


@pytest.mark.parametrize("masked", [False, True])
def test_a_large_count_takes_no_table_of_log_factorials(rng, masked):
    # sum log x! over the observed entries is a constant, taken once: a table of log x! up to the largest count
    # took 16 bytes per count (7.45 GiB for one count of 1e9); here 1e7 would make it 160 MB
    import tracemalloc

    mask = np.ones((3, 4), dtype=bool)
    mask[1, 2] = not masked
    model = pltf_model("ik,kj->ij", dict(i=3, k=2, j=4), prior_shape=1.0, prior_rate=1.0, mask=mask)
    X = model.sample_data(rng, model.sample_prior(rng))
    sada.build_kernel(model, X)(rng, sada.init(model, X, rng=rng))  # compiled before the count
    X[0, 0], X[1, 2] = 10 ** 7, 10 ** 7 + 5
    state = sada.init(model, X, rng=rng)
    tracemalloc.start()
    try:
        state, _ = sada.build_kernel(model, X)(rng, state)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 ** 20
    # x log xhat and log x! are ~1.5e8 each and cancel to ~-20: agreement to their rounding
    assert state.log_likelihood == pytest.approx(model.log_likelihood(state.factors, X), abs=1e-6)
