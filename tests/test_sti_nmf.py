import re
import warnings

import numpy as np
import pytest

from sepsti.core.errors import ConvergenceWarning, ParameterError
from sepsti.core.evidence.rank_one import rank_one_log_evidence
from sepsti.core.evidence.sti import LangevinSettings
from sepsti.core.evidence.sti_nmf import rayleigh_dispersion, select_rank_sti, validate_identifiable_ranks
from sepsti.core.models.poisson_nmf import PoissonNMF, prior_rate_at
from sepsti.core.parallel.blocks import init_state, initial_factors, run_block_chain
from sepsti.core.random import stream

SMALL = dict(preset="blocks", num_intervals=2, num_steps=30, num_keep=10, num_blocks=3, step_a=1e-4, prior_rate=0.5,
             num_replicates=2)


@pytest.fixture
def X(rng):
    return PoissonNMF.sample(rng, (24, 21), 2, rate_W=0.5, rate_H=0.5)[2]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short traces: MCSE warnings
        yield


def test_result_carries_replicates_and_settings(X):
    result = select_rank_sti(X, [2, 1], **SMALL)
    assert result.ranks == [2, 1]
    assert result.replicates.shape == (2, 2)
    np.testing.assert_allclose(result.replicates.mean(axis=1), result.log_marginal_likelihood, rtol=1e-12)
    assert result.settings["chain"]["num_steps"] == 30 and result.settings["grid"]["num_intervals"] == 2
    assert result.settings["model"] == {"name": "poisson_nmf", "prior_rate": 0.5, "dispersion": 1.0}
    assert result.selected_rank == result.ranks[int(np.argmax(result.log_marginal_likelihood))]


def test_validation(X):
    with pytest.raises(ParameterError, match="ranks"):
        select_rank_sti(X, [2, 2], **SMALL)
    with pytest.raises(ParameterError, match="num_keep=40"):
        select_rank_sti(X, [2], **{**SMALL, "num_keep": 40})
    with pytest.raises(ParameterError, match="unknown setting"):
        select_rank_sti(X, [2], **{**SMALL, "num_step": 40})
    with pytest.raises(ParameterError, match="preset"):
        select_rank_sti(X, [2], preset="fast")
    with pytest.raises(ParameterError, match="num_blocks"):
        select_rank_sti(X, [2], **{**SMALL, "num_blocks": 30})


def test_every_kept_sample_finite_and_nonnegative_at_rank_512(rng):
    # speech-like magnitudes on the int16 scale: heavy-tailed, many small entries
    X = (rng.gamma(0.3, 2e4, size=(257, 160)) * (rng.uniform(size=(257, 160)) > 0.05))
    for sampler in ("sgld", "psgld"):
        W, H = initial_factors(X, 512, rng)
        settings = LangevinSettings(sampler=sampler, num_steps=24, num_keep=16, step_a=5e-7, step_b=0.51)
        result = run_block_chain(X, init_state(W, H, seed=0, chain=0, num_blocks=8), settings, temperature=1.0,
                                 num_blocks=8, rate_W=4e-4, rate_H=4e-4)
        assert result.all_finite, sampler
        assert result.min_kept >= 0.0
        assert np.all(np.isfinite(result.trace))


def test_em_starts_are_shared_per_replicate_and_independent_of_threads(X):
    settings = {**SMALL, "init": "em", "init_iterations": 5}
    one = select_rank_sti(X, [1, 2], threads=1, **settings)
    two = select_rank_sti(X, [1, 2], threads=2, **settings)
    np.testing.assert_array_equal(one.replicates, two.replicates)
    assert one.min_kept == two.min_kept
    assert one.replicates[1, 0] != one.replicates[1, 1]  # replicates start from different EM fits
    # chains that hardly move (steps of 1e-20) report the log-likelihood of their start: one EM fit for every
    # temperature of a replicate (measured: within 0.006 nats), where random starts part by 74 nats
    frozen = {**settings, "step_a": 1e-20, "num_blocks": 1, "num_replicates": 1, "num_intervals": 3}
    spreads = {init: np.ptp(select_rank_sti(X, [2], **{**frozen, "init": init})
                            .per_temperature[0].mean_log_likelihood) for init in ("em", "random")}
    assert spreads["em"] < 0.1 and spreads["random"] > 10.0, spreads


def test_frozen_chains_are_reported_as_not_equilibrated(X):
    # with steps ~1e-14 every chain stays at its own random start (one block: no subsample noise), so
    # E_t[log p] follows the starts, not t: with one chain per temperature the expectations fall
    # between some neighbouring temperatures by far more than their (zero) standard errors (with
    # replicates, the starts' spread enters the standard errors instead)
    settings = {**SMALL, "num_intervals": 4, "step_a": 1e-14, "init": "random", "num_replicates": 1,
                "num_blocks": 1}
    with pytest.warns(ConvergenceWarning, match="did not reach their power posteriors"):
        select_rank_sti(X, [1, 2], **settings)


def test_rayleigh_dispersion_is_pearsons_statistic_of_gaussian_stft_magnitudes(rng):
    # magnitudes of complex Gaussian coefficients around a low-rank power profile: Pearson's statistic
    # with the true means, sum((x - mu)^2 / mu) / N, has the expectation the rule gives from mean(X)
    power = rng.gamma(0.5, 1e4, size=(80, 1)) @ rng.gamma(0.5, 2.0, size=(1, 300))
    coefficients = np.sqrt(power / 2) * (rng.standard_normal(power.shape) + 1j * rng.standard_normal(power.shape))
    X = np.abs(coefficients)
    mu = np.sqrt(np.pi * power) / 2
    pearson = np.mean((X - mu) ** 2 / mu)
    terms = (X - mu) ** 2 / mu
    assert rayleigh_dispersion(X) == pytest.approx(pearson, abs=4 * terms.std() / np.sqrt(X.size))
    # it scales with the data, so X / dispersion does not change when the audio is scaled
    assert rayleigh_dispersion(7.5 * X) == pytest.approx(7.5 * rayleigh_dispersion(X), rel=1e-12)
    assert np.mean(X / rayleigh_dispersion(X)) == pytest.approx(1 / (4 / np.pi - 1), rel=1e-12)


@pytest.mark.filterwarnings("ignore::sepsti.core.errors.ConvergenceWarning")
def test_dispersion_models_the_scaled_data(X):
    # quasi-Poisson: the estimates are those of X / dispersion
    scaled = select_rank_sti(X, [1, 2], dispersion=2.0, **SMALL)
    direct = select_rank_sti(X / 2.0, [1, 2], **SMALL)
    np.testing.assert_array_equal(scaled.log_marginal_likelihood, direct.log_marginal_likelihood)
    assert scaled.settings["model"]["dispersion"] == 2.0 and direct.settings["model"]["dispersion"] == 1.0
    rayleigh = select_rank_sti(X, [1, 2], dispersion="rayleigh", **SMALL)
    assert rayleigh.settings["model"]["dispersion"] == rayleigh_dispersion(X)
    for bad in (0.0, -1.0, np.inf, np.nan, "lots", "auto"):
        with pytest.raises(ParameterError, match="dispersion"):
            select_rank_sti(X, [1, 2], dispersion=bad, **SMALL)


@pytest.mark.filterwarnings("ignore::sepsti.core.errors.ConvergenceWarning")
def test_a_dispersion_beyond_float64_counts_is_refused(X):
    # X / dispersion may total at most 2**53 counts: 1e-300 gave -9.7e302 with a NaN standard error
    bound = X.sum() / 2**53
    for bad in (1e-300, 0.99 * bound):
        with pytest.raises(ParameterError, match=rf"^{re.escape(f'dispersion={float(bad)!r}')}: .*dispersion >= "
                                                 rf"{bound:.3g}$"):
            select_rank_sti(X, [1], dispersion=bad, **SMALL)
    result = select_rank_sti(X, [1], dispersion=1.01 * bound, **SMALL)
    assert np.isfinite(result.log_marginal_likelihood[0]) and np.isfinite(result.stderr[0])


@pytest.mark.parametrize("dispersion", [1e39, 1e308])
def test_a_dispersion_that_divides_the_data_to_zero_is_refused(X, dispersion):
    # float32 X / 1e308 underflowed to all zeros, unchecked, and the reference path failed with LinAlgError
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nor a warning of the cast on the way
        with pytest.raises(ParameterError, match=rf"^{re.escape(f'dispersion={dispersion!r}')}: X / dispersion rounds "
                                                 "to zero in float32"):
            select_rank_sti(X.astype(np.float32), [1], dispersion=dispersion, num_intervals=2, num_steps=20,
                            num_keep=10)


def test_ranks_that_are_not_integers_are_refused(X):
    # int() truncated them: ranks=[1.5] ran rank 1
    for bad in ([1.5], [1, 2.0], ["2"], [True]):
        with pytest.raises(ParameterError, match=r"^ranks\[\d\]="):
            select_rank_sti(X, bad, **SMALL)
    assert select_rank_sti(X, np.array([2, 1]), **SMALL).ranks == [2, 1]


def test_matched_prior_puts_the_prior_predictive_mean_on_the_data():
    for rank in (1, 7, 128):
        rate = prior_rate_at("matched", 3.2, rank)
        assert rank / rate ** 2 == pytest.approx(3.2, rel=1e-12)
    assert prior_rate_at(0.25, 3.2, 7) == 0.25


@pytest.mark.parametrize("rate", [1e200, 1e-200])
def test_a_rate_whose_square_leaves_float64_is_refused_before_sampling(rate):
    """prior_rate=1e300 gave NumPy's invalid-value warnings and a ValueError from deep in the reference path."""
    X = np.full((10, 8), 4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ParameterError, match=r"^prior_rate=1e[+-]200: its square is beyond float64's range; "
                                                 r"expected a rate between 1.5e-154 and 1.3e\+154, or 'matched'$"):
            select_rank_sti(X, [2, 3], prior_rate=rate)


@pytest.mark.filterwarnings("ignore::sepsti.core.errors.ConvergenceWarning")
def test_speech_model_is_exact_at_rank_one_and_blind_to_the_amplitude_scale(rng):
    # the reference path under the speech model (Rayleigh dispersion, matched prior) against the
    # closed-form rank-1 evidence of the same model: the rate it uses reaches the density and q
    X = 40.0 * PoissonNMF.sample(rng, (30, 25), 1, rate_W=0.3, rate_H=0.3)[2]
    options = dict(dispersion="rayleigh", prior_rate="matched", num_replicates=3, seed=1)
    result = select_rank_sti(X, [1], **options)
    modelled = X / rayleigh_dispersion(X)
    rate = prior_rate_at("matched", modelled.mean(), 1)
    exact = rank_one_log_evidence(modelled, rate)
    assert result.settings["model"]["prior_rate"] == "matched"
    assert abs(result.log_marginal_likelihood[0] - exact) < 4 * result.stderr[0] + 0.05
    louder = select_rank_sti(9.0 * X, [1], **options)
    np.testing.assert_allclose(louder.log_marginal_likelihood, result.log_marginal_likelihood, atol=1e-6)
    with pytest.raises(ParameterError, match="prior_rate"):
        select_rank_sti(X, [1], prior_rate="wide")


def test_block_preset_bias_on_small_counts_stays_within_its_documented_bound():
    # docs/rank_selection.md: on ICASSP'16-shaped counts (W, H ~ Exp(5), 100 x 75) at R = 1 the `blocks` preset
    # (B = 5) sits 7.65 +- 1.65 nats below the closed form over seeds 1-8, where each run's own z is only
    # -0.5 ... -2.4 (its four replicates share the bias). Seeds 1-3 (mean -9.56) within 3 standard errors of a
    # three-seed mean (2.7) of that bias: a bias beyond 15.7 nats fails (three seeds cannot tell it from none).
    # A single run is no test: at 4000 / 1000 steps seed 1 gave z -1.8, seed 2 -38.4 +- 17.7.
    _, _, X = PoissonNMF.sample(stream(4, 2000), (100, 75), 1, rate_W=5.0, rate_H=5.0)
    exact = rank_one_log_evidence(X, 5.0)
    errors = [select_rank_sti(X, [1], preset="blocks", num_blocks=5, prior_rate=5.0, seed=seed)
              .log_marginal_likelihood[0] - exact for seed in (1, 2, 3)]
    assert abs(np.mean(errors) + 7.65) < 3 * 1.65 * np.sqrt(8 / 3), errors


def test_ranks_the_data_cannot_identify_are_flagged(X):
    with pytest.warns(UserWarning, match=r"ranks \[30\] exceed min\(24, 21\) = 21"):
        select_rank_sti(X, [30], **SMALL)
    with pytest.warns(UserWarning, match=r"ranks \[12\] have more parameters"):
        select_rank_sti(X, [2, 12], **SMALL)


def test_speech_model_makes_the_block_selection_blind_to_the_amplitude_scale_and_the_candidates(X):
    # X / phi is what is modelled and the matched prior follows it: scaling the data by c scales phi by
    # c, so the modelled data agree to rounding and so do the estimates (measured: within 4e-5 nats; a
    # prior that followed the raw data instead moves them by 629 nats); the candidate list changes nothing
    settings = {**SMALL, "dispersion": "rayleigh", "prior_rate": "matched"}
    base = select_rank_sti(X * 50.0, [1, 2, 3], **settings)
    louder = select_rank_sti(X * 500.0, [1, 2, 3], **settings)
    fewer = select_rank_sti(X * 50.0, [2, 3], **settings)
    phi = base.settings["model"]["dispersion"]
    assert louder.settings["model"]["dispersion"] == pytest.approx(10 * phi, rel=1e-6)
    np.testing.assert_allclose(louder.replicates, base.replicates, rtol=0, atol=0.01)
    assert fewer.settings["model"]["dispersion"] == phi
    np.testing.assert_array_equal(fewer.replicates, base.replicates[1:])


def test_exact_prior_draws_at_t0_their_own_number_and_the_prior_expectation(X, tmp_path):
    # t = 0 takes prior_draws independent prior draws, however short its chain length; their part
    # estimates (each part equally often: 300 draws over B = 3 parts of equal size) average to
    # E_prior[log p(X | W, H)], computed here by direct Monte Carlo outside the model
    from scipy.stats import poisson

    settings = {**SMALL, "num_steps": (10, 30, 30), "num_keep": 20, "exact_prior": True, "prior_draws": 300}
    select_rank_sti(X, [2], checkpoint=tmp_path, **settings)
    draws = np.concatenate([np.load(tmp_path / f"R2-t0-r{r}.npz")["trace"] for r in range(2)])
    assert draws.size == 600
    rng = np.random.default_rng(5)
    reference = np.array([poisson.logpmf(X, rng.exponential(2.0, (24, 2)) @ rng.exponential(2.0, (2, 21))).sum()
                          for _ in range(4000)])
    se = np.sqrt(draws.var() / draws.size + reference.var() / reference.size)
    assert abs(draws.mean() - reference.mean()) < 4 * se


def test_a_rank_equal_to_the_smaller_dimension_is_flagged_and_silence_refused():
    """At R = min(I, J) many directions keep the fit and the reference path's estimate is checked on small counts
    only (docs/rank_selection.md): warned; all-zero data (the Rayleigh dispersion 0, the matched prior infinite)
    is refused by name instead of failing inside."""
    X = np.arange(16.0).reshape(8, 2)
    with pytest.warns(UserWarning, match=r"rank 2 = min\(8, 2\).*checked against the exact value on small counts "
                                         r"only \(8 x 2 to 20 x 2"):
        validate_identifiable_ranks([1, 2], X.shape, sampler="mala")
    with pytest.raises(ParameterError, match="all zero"):
        select_rank_sti(np.zeros((8, 6)), [1], dispersion="rayleigh", prior_rate="matched")


@pytest.mark.filterwarnings("ignore:rank [23] = min")
@pytest.mark.parametrize("shape, rate, seeds", [((8, 2), 0.5, (3, 5)), ((12, 3), 1.5, (2, 3))])
def test_the_default_at_the_smaller_dimension_agrees_with_the_exact_value(shape, rate, seeds):
    """At R = min(I, J) on 8 x 2 and 12 x 3 counts, where many W Q, Q^-1 H keep the fit: the default preset
    against the value with W integrated out exactly (``small_counts_log_evidence``), two draws each whose
    estimates have errors of 0.2-0.35 nats, so that a labelling counted twice or missed (log 2) is 4 standard
    errors. At R = 3 q's components differ, and its mixture over the labellings needs the exact permanent:
    the approximation by classes of alike components (``LABEL_MIXING_MAX_RANK = 0``) puts these two draws
    1.1 nats high, z +3.6 and +4.1 (with 50,000 reference samples)."""
    from sepsti.core.evidence.small_counts import small_counts_log_evidence

    rank = shape[1]
    z = []
    for seed in seeds:
        _, _, X = PoissonNMF.sample(stream(seed, 77), shape, rank, rate_W=rate, rate_H=rate)
        selection = select_rank_sti(X, [rank], prior_rate=rate, seed=seed)
        exact = small_counts_log_evidence(X, rank, rate, num_samples=50_000, seed=seed)
        z.append((selection.log_marginal_likelihood[0] - exact.log_evidence)
                 / np.hypot(selection.stderr[0], exact.stderr))
    assert max(map(abs, z)) < 3, z


@pytest.mark.filterwarnings("ignore::sepsti.core.errors.ConvergenceWarning")  # chains of 20 iterations
@pytest.mark.parametrize("preset, says, not_said", [
    ("reference", "; the reference path's estimate there is checked", "block-parallel"),
    ("blocks", "the block-parallel pSGLD chains miss the exact value there", "; the reference path"),
    ("paper", "the block-parallel SGLD chains miss the exact value there", "; the reference path"),
])
def test_the_warning_at_the_smaller_dimension_names_the_chains_of_the_preset_run(preset, says, not_said):
    X = np.arange(1.0, 17.0).reshape(8, 2)
    blocks = {} if preset == "reference" else {"num_blocks": 2}
    with pytest.warns(UserWarning, match=r"rank 2 = min\(8, 2\)") as caught:
        select_rank_sti(X, [2], preset=preset, num_intervals=2, num_steps=20, num_keep=10, num_replicates=2,
                        **blocks)
    (message,) = [str(w.message) for w in caught if "min(8, 2)" in str(w.message)]
    assert says in message and not_said not in message


def test_each_replicate_starts_from_the_em_fit_of_its_own_stream(X, monkeypatch):
    # replicate r of rank R starts from em_start on stream(seed, R, SHARED_KEY, r) (every replicate from
    # replicate 0's fit passed before: the chains' own streams kept their traces apart); no chain is run here,
    # so the kernels' compilation is skipped
    monkeypatch.setattr("sepsti.core.evidence.sti_nmf.warm_up", lambda dtypes: None)
    from sepsti.core.evidence.rank_selection import SHARED_KEY, ChainTask, resolve_settings
    from sepsti.core.evidence.sti_nmf import PRESETS, NMFChains, em_start

    _, chain, _ = resolve_settings(PRESETS, "blocks", init="em", init_iterations=5, num_blocks=3)
    chains = NMFChains(X, chain, prior_rate=0.5, model_settings={})
    chains.prepare([ChainTask(2, 1, r, 1.0) for r in range(2)], seed=4, comm=None, threads=1)
    for r in range(2):
        W, H = em_start(X, 2, stream(4, 2, SHARED_KEY, r), prior_rate=0.5, iterations=5)
        np.testing.assert_array_equal(chains._starts[2, r][0], W)
        np.testing.assert_array_equal(chains._starts[2, r][1], H)
    assert not np.array_equal(chains._starts[2, 0][0], chains._starts[2, 1][0])


def test_as_many_parameters_as_entries_is_not_flagged():
    # R (n_rows + n_cols) = 2 x 8 = 16 = 4 x 4 entries: not more parameters than entries (>= passed before)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert validate_identifiable_ranks([2], (4, 4), sampler="psgld") == [2]
    with pytest.warns(UserWarning, match=r"ranks \[3\] have more parameters \(R x 8\) than the data have entries"):
        validate_identifiable_ranks([3], (4, 4), sampler="psgld")


def test_em_start_is_a_stationary_point_of_the_posterior_with_the_prior_rate_on_both_factors():
    # 3000 EM iterations on an 8 x 7 matrix reach the MAP point of Exp(0.5) priors on W and H: there
    # (X / WH - 1) H^T = 0.5 and W^T (X / WH - 1) = 0.5 wherever the factor is positive (measured: within 1e-10;
    # a rate of 1 on H passed before)
    from sepsti.core.evidence.sti_nmf import em_start

    X = PoissonNMF.sample(np.random.default_rng(1), (8, 7), 2, rate_W=0.5, rate_H=0.5)[2]
    W, H = em_start(X, 2, stream(3), prior_rate=0.5, iterations=3000)
    ratio = X / (W @ H) - 1
    np.testing.assert_allclose((ratio @ H.T)[W > 1e-6], 0.5, atol=1e-6)
    np.testing.assert_allclose((W.T @ ratio)[H > 1e-6], 0.5, atol=1e-6)


def test_matched_rate_of_the_chains_follows_the_data_mean():
    # X = [[0, 0, 9]]: mean 3 (median 0), so the matched rate at R = 3 is sqrt(3 / 3) = 1 (the median passed before)
    from sepsti.core.evidence.rank_selection import resolve_settings
    from sepsti.core.evidence.sti_nmf import PRESETS, NMFChains

    _, chain, _ = resolve_settings(PRESETS, "blocks", num_blocks=1)
    chains = NMFChains(np.array([[0.0, 0.0, 9.0]]), chain, prior_rate="matched", model_settings={})
    assert chains.rate_at(3) == pytest.approx(1.0, rel=1e-12)


def test_a_chain_runs_from_its_own_start_and_streams_under_its_ranks_rate(X):
    """Chain (R, i, r) starts from initial_factors on stream(seed, R, i, r), draws its block noise from the streams
    of (R, i, r) and runs at t_i under the rate of rank R (docs/rank_selection.md, seeds): the start or the noise of
    replicate 0 for every replicate, t = 1, H at the default rate, or the matched rate of rank 1, passed before."""
    from sepsti.core.evidence.rank_selection import ChainTask, resolve_settings
    from sepsti.core.evidence.sti_nmf import PRESETS, NMFChains

    _, chain, _ = resolve_settings(PRESETS, "blocks", num_steps=30, num_keep=10, num_blocks=3, step_a=1e-4)
    chains = NMFChains(X, chain, prior_rate="matched", model_settings={})
    rate = np.sqrt(2 / X.mean())
    for replicate in (0, 1):
        got = chains.run(ChainTask(2, 1, replicate, 0.5), seed=4, progress=None).trace
        start = initial_factors(X, 2, stream(4, 2, 1, replicate))
        want = run_block_chain(X, init_state(*start, seed=4, chain=(2, 1, replicate), num_blocks=3), chain.at(1),
                               temperature=0.5, num_blocks=3, rate_W=rate, rate_H=rate, threads=1).trace
        np.testing.assert_array_equal(got, want)


def test_em_starts_under_the_matched_prior_take_the_rate_of_their_rank(X, monkeypatch):
    # rank 2's EM start is fitted under sqrt(2 / mean(X)) (rank 1's rate passed before); no chain is run here
    monkeypatch.setattr("sepsti.core.evidence.sti_nmf.warm_up", lambda dtypes: None)
    from sepsti.core.evidence.rank_selection import SHARED_KEY, ChainTask, resolve_settings
    from sepsti.core.evidence.sti_nmf import PRESETS, NMFChains, em_start

    _, chain, _ = resolve_settings(PRESETS, "blocks", init="em", init_iterations=5, num_blocks=3)
    chains = NMFChains(X, chain, prior_rate="matched", model_settings={})
    chains.prepare([ChainTask(2, 1, 0, 1.0)], seed=4, comm=None, threads=1)
    W, H = em_start(X, 2, stream(4, 2, SHARED_KEY, 0), prior_rate=np.sqrt(2 / X.mean()), iterations=5)
    np.testing.assert_array_equal(chains._starts[2, 0][0], W)
    np.testing.assert_array_equal(chains._starts[2, 0][1], H)


def test_nmf_chains_refuse_full_data_evaluation(X):
    # the block chains score their part only: evaluate="full" is refused by name (accepted passed before)
    from sepsti.core.evidence.rank_selection import resolve_settings
    from sepsti.core.evidence.sti_nmf import PRESETS, NMFChains

    _, chain, _ = resolve_settings(PRESETS, "blocks", num_blocks=3, evaluate="full")
    with pytest.raises(ParameterError, match="evaluate='full' is not available for NMF chains"):
        NMFChains(X, chain, prior_rate=0.5, model_settings={})


@pytest.mark.parametrize("name, grid, chain, replicates", [
    ("reference", (16, "beta", 2.0, "simpson"),
     dict(sampler="mala", num_steps=300, num_keep=150, init_iterations=2000, exact_prior=True, prior_draws=None), 4),
    ("blocks", (10, "power", 5.0, "simpson"),
     dict(sampler="psgld", alpha=0.99, sigma=0.1, step_a=1e-7, step_b=0.51, num_steps=10_000, num_keep=2_000,
          num_blocks=8, evaluate="before_update", init="random", exact_prior=False), 4),
    ("paper", (5, "uniform", 1.0, "trapezoid"),
     dict(sampler="sgld", step_a=5e-7, step_b=0.51, num_steps=1250, num_keep=500, num_blocks=8,
          evaluate="after_update", init="em", init_iterations=100, exact_prior=False), 1),
])
def test_presets_are_those_of_the_documented_table(name, grid, chain, replicates):
    # docs/rank_selection.md's table of presets (ICASSP'16 §4.2 for `paper`: a = 5e-6 passed before)
    from sepsti.core.evidence.sti_nmf import PRESETS

    preset = PRESETS[name]
    assert (preset.grid.num_intervals, preset.grid.schedule, preset.grid.power, preset.grid.rule) == grid
    assert {field: getattr(preset.chain, field) for field in chain} == chain
    assert preset.num_replicates == replicates
