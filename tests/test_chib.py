"""Tests for sepsti.core.evidence.chib against evidences computed exactly by enumerating the sources."""

import numpy as np
import pytest

from _pltf_closed_form import TinyModel, three_factor_log_evidence
from sepsti.core.errors import ParameterError
from sepsti.core.evidence.chib import chib_log_marginal_likelihood, chib_poisson_nmf, log_mean_exp
from sepsti.core.models.pltf import pltf_model

A_W, B_W, A_H, B_H = np.array([2.0, 3.0]), np.array([1.0, 2.0]), 2.0, 1.5
X_TINY = np.array([0, 2, 6, 6])
W_FIXED = np.array([0.7, 1.6])


def two_factor_model():
    return pltf_model("k,kj->j", dict(k=2, j=4), prior_shape=[A_W, A_H], prior_rate=[B_W, B_H])


def one_factor_model():
    return pltf_model("k,kj->j", dict(j=4), prior_shape=[1.0, A_H], prior_rate=[1.0, B_H], fixed={0: W_FIXED})


A_U, B_U = np.array([3.0, 2.0]), np.array([2.0, 1.0])


def three_factor_model():
    return pltf_model("k,k,kj->j", dict(k=2, j=4), prior_shape=[A_W, A_U, A_H], prior_rate=[B_W, B_U, B_H])


def check_against_truth(model, truth, seed, method="sources", k=3.0):
    result = chib_log_marginal_likelihood(model, X_TINY, num_burn_in=300, num_samples=3000, seed=seed,
                                          method=method)
    # the estimate must be informative for the comparison to mean anything
    assert result.stderr < 0.3
    assert abs(result.log_marginal_likelihood - truth) < k * result.stderr, (
        f"Chib {result.log_marginal_likelihood:.4f} +- {result.stderr:.4f}, exact {truth:.4f}")
    return result


def test_chib_sources_two_free_factors_matches_enumeration():
    truth = TinyModel(X_TINY, A_W, B_W, A_H, B_H).log_evidence
    result = check_against_truth(two_factor_model(), truth, seed=0)
    assert result.ordinate_names == ("S", "k", "kj")
    assert result.ordinate_stderr[1] == 0.0 and result.ordinate_samples[1] is None  # exact first ordinate
    assert result.ordinate_samples[0].shape == (3000,) and result.ordinate_samples[2].shape == (3000,)
    assert result.log_marginal_likelihood == pytest.approx(result.log_joint - result.log_ordinates.sum())


def test_chib_factors_two_free_factors_matches_enumeration():
    truth = TinyModel(X_TINY, A_W, B_W, A_H, B_H).log_evidence
    result = check_against_truth(two_factor_model(), truth, seed=0, method="factors")
    assert result.ordinate_names == ("k", "kj")
    assert np.all(result.ordinate_stderr > 0)


@pytest.mark.parametrize("method", ["sources", "factors"])
def test_chib_one_free_factor_matches_negative_binomial_sum(method):
    truth = TinyModel(X_TINY, A_W, B_W, A_H, B_H, w_fixed=W_FIXED).log_evidence
    result = check_against_truth(one_factor_model(), truth, seed=0, method=method)
    assert len(result.log_ordinates) == (2 if method == "sources" else 1)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["sources", "factors"])
@pytest.mark.parametrize("seed", range(1, 6))
def test_chib_across_seeds(seed, method):
    check_against_truth(two_factor_model(), TinyModel(X_TINY, A_W, B_W, A_H, B_H).log_evidence, seed, method)
    check_against_truth(one_factor_model(), TinyModel(X_TINY, A_W, B_W, A_H, B_H, w_fixed=W_FIXED).log_evidence,
                        seed, method)


def test_same_seed_same_estimate():
    a = chib_poisson_nmf(np.array([[1, 0, 2], [0, 3, 1]]), 2, 1.0, num_burn_in=20, num_samples=30, seed=4)
    b = chib_poisson_nmf(np.array([[1, 0, 2], [0, 3, 1]]), 2, 1.0, num_burn_in=20, num_samples=30, seed=4)
    assert a.log_marginal_likelihood == b.log_marginal_likelihood


def test_log_mean_exp(rng):
    from scipy.stats import chi2

    # E exp(N(0, 1)) = e^{1/2}; by the delta method the standard error of log mean exp over n independent draws
    # is sd(e^Z) / E e^Z / sqrt(n) = sqrt((e - 1) / n), 0.0207 here
    n, replicates = 4000, 200
    exact_se = np.sqrt(np.expm1(1.0) / n)
    estimates, ses = np.array([log_mean_exp(rng.normal(size=n)) for _ in range(replicates)]).T
    # the reported errors, on average within 4 of their own standard errors of the closed form (spread 7 %
    # per run: a factor 1.1 moves their mean by 21 of those)
    assert abs(ses.mean() - exact_se) < 4 * ses.std(ddof=1) / np.sqrt(replicates), (ses.mean(), exact_se)
    # and the estimates scatter about e^{1/2} as much as they say: sum z^2 in chi^2_200's 99.8 % range
    assert abs(estimates.mean() - 0.5) < 4 * exact_se / np.sqrt(replicates)
    total = float(np.sum(((estimates - 0.5) / ses) ** 2))
    assert chi2.ppf(0.001, replicates) < total < chi2.ppf(0.999, replicates), total
    assert log_mean_exp(np.full(10, -3.0)) == (-3.0, 0.0)
    with pytest.raises(ParameterError, match="^log_values is empty: no mean to take$"):
        log_mean_exp([])  # was (nan, inf) with a RuntimeWarning


def test_errors():
    with pytest.raises(ParameterError, match="num_samples"):
        chib_poisson_nmf(np.ones((2, 2), dtype=int), 1, 1.0, num_burn_in=1, num_samples=1)
    with pytest.raises(ParameterError, match="method"):
        chib_poisson_nmf(np.ones((2, 2), dtype=int), 1, 1.0, num_burn_in=1, num_samples=5, method="nope")
    with pytest.raises(ParameterError, match="rank"):
        chib_poisson_nmf(np.ones((2, 2), dtype=int), 0, 1.0, num_burn_in=1, num_samples=5)


@pytest.mark.parametrize("order, message", [((1.5, 0), r"order\[0\]=1.5 must be an integer of at least 0"),
                                            ((0, "a"), r"order\[1\]='a' must be an integer"),
                                            ((0, None), r"order\[1\]=None must be an integer"),
                                            (1, r"order=1: expected a sequence of integers"),
                                            ((1, 1), r"order=\(1, 1\) must be a permutation of the free factors")])
def test_an_order_that_is_not_factor_positions_is_refused(order, message):
    """1.5 was taken as 1, "a" met int()'s ValueError and None a TypeError."""
    with pytest.raises(ParameterError, match=rf"^{message}"):
        chib_log_marginal_likelihood(two_factor_model(), X_TINY, num_burn_in=1, num_samples=5, order=order)


def test_warns_when_one_sample_carries_an_ordinate(rng):
    # 400 counts over a rank-3 NMF: the multinomial ordinate of eq. 23 is carried by one draw
    X = rng.poisson(2.0, size=(20, 20))
    with pytest.warns(UserWarning, match="carried by one sample"):
        result = chib_poisson_nmf(X, 3, 1.0, num_burn_in=50, num_samples=100, seed=0)
    assert result.max_weight_fraction.max() > 0.5


@pytest.mark.parametrize("method", ["sources", "factors"])
def test_chib_with_a_mask_is_the_evidence_of_the_observed_entries(method):
    mask = np.array([True, True, True, False])
    model = pltf_model("k,kj->j", dict(k=2, j=4), prior_shape=[A_W, A_H], prior_rate=[B_W, B_H], mask=mask)
    truth = TinyModel(X_TINY[:3], A_W, B_W, A_H, B_H).log_evidence
    X = X_TINY.copy()
    X[3] = 100
    result = chib_log_marginal_likelihood(model, X, num_burn_in=300, num_samples=3000, seed=2, method=method)
    assert abs(result.log_marginal_likelihood - truth) < 3 * result.stderr, (result.log_marginal_likelihood, truth)


@pytest.mark.parametrize("method", ["sources", "factors"])
def test_chib_three_free_factors_matches_enumeration(method):
    # two reduced runs: the clamping of Z~_a+1:K (sources) or Z~_1:a-1 (factors) at every stage
    truth = three_factor_log_evidence(X_TINY, A_W, B_W, A_U, B_U, A_H, B_H)
    result = check_against_truth(three_factor_model(), truth, seed=0, method=method)
    assert len(result.log_ordinates) == (4 if method == "sources" else 3)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["sources", "factors"])
@pytest.mark.parametrize("seed", range(1, 6))
def test_chib_three_factors_across_seeds(seed, method):
    truth = three_factor_log_evidence(X_TINY, A_W, B_W, A_U, B_U, A_H, B_H)
    check_against_truth(three_factor_model(), truth, seed, method)


def test_chib_column_blocks_match_enumeration():
    # split along k: with a k-dependent prior the components are not exchangeable (no symmetrisation)
    truth = three_factor_log_evidence(X_TINY, A_W, B_W, A_U, B_U, A_H, B_H)
    result = chib_log_marginal_likelihood(three_factor_model(), X_TINY, num_burn_in=300, num_samples=3000, seed=0,
                                          method="factors", blocks="columns")
    assert result.ordinate_names == ("k[0]", "k[1]", "k[0]", "k[1]", "kj[0]", "kj[1]")
    assert result.stderr < 0.3
    assert abs(result.log_marginal_likelihood - truth) < 3 * result.stderr, (result.log_marginal_likelihood, truth)


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_chib_column_blocks_exchangeable_components_match_enumeration(seed):
    # equal priors across k: the first factor's column ordinates are averaged over the label permutations
    a_w, b_w = np.array([2.0, 2.0]), np.array([1.0, 1.0])
    model = pltf_model("k,kj->j", dict(k=2, j=4), prior_shape=[a_w, A_H], prior_rate=[b_w, B_H])
    truth = TinyModel(X_TINY, a_w, b_w, A_H, B_H).log_evidence
    result = chib_log_marginal_likelihood(model, X_TINY, num_burn_in=300, num_samples=3000, seed=seed,
                                          method="factors", blocks="columns")
    assert result.stderr < 0.3
    assert abs(result.log_marginal_likelihood - truth) < 3 * result.stderr, (result.log_marginal_likelihood, truth)


def test_column_blocks_need_the_factors_method():
    with pytest.raises(ParameterError, match="blocks"):
        chib_poisson_nmf(np.ones((2, 2), dtype=int), 1, 1.0, num_burn_in=1, num_samples=5, blocks="columns")
    with pytest.raises(ParameterError, match="blocks"):
        chib_poisson_nmf(np.ones((2, 2), dtype=int), 1, 1.0, num_burn_in=1, num_samples=5, method="factors",
                         blocks="rows")


@pytest.mark.parametrize("blocks", ["factors", "columns"])
def test_chib_at_the_posterior_mean_matches_enumeration(blocks):
    truth = three_factor_log_evidence(X_TINY, A_W, B_W, A_U, B_U, A_H, B_H)
    result = chib_log_marginal_likelihood(three_factor_model(), X_TINY, num_burn_in=300, num_samples=3000, seed=3,
                                          method="factors", blocks=blocks, point="mean")
    assert result.stderr < 0.3
    assert abs(result.log_marginal_likelihood - truth) < 3 * result.stderr, (result.log_marginal_likelihood, truth)
    # the last factor's ordinate is a product over its output index j: one column of log values per j
    assert result.ordinate_samples[-1].shape == (3000, 4)
    # its largest share of one sample is the largest over the columns, worked out here (the least passed before)
    columns = result.ordinate_samples[-1]
    shares = 1.0 / np.exp(columns - columns.max(axis=0)).sum(axis=0)  # exp(max) / sum(exp) per column
    assert result.max_weight_fraction[-1] == pytest.approx(shares.max(), rel=1e-12) and np.ptp(shares) > 1e-4


@pytest.mark.filterwarnings("ignore:Chib ordinate")  # five samples: the estimate itself is not checked here
def test_point_mean_is_the_mean_of_the_kept_draws_of_the_main_run():
    """point="mean" is the plain mean of the num_samples kept draws of the main run, rerun here from its documented
    stream(seed, 0) (a sum divided by num_samples - 1, 5/4 of the mean here, passed before)."""
    from sepsti.core.random import stream
    from sepsti.core.samplers import gibbs
    from sepsti.core.samplers.driver import run_chain

    model = two_factor_model()
    result = chib_log_marginal_likelihood(model, X_TINY, num_burn_in=20, num_samples=5, seed=4, method="factors",
                                          point="mean")
    rng = stream(4, 0)
    kept = run_chain(gibbs.build_kernel(model, X_TINY), gibbs.init(model, X_TINY, rng=rng), rng, num_steps=25,
                     burn_in=20, transform=lambda s: s.factors).samples
    for a in range(2):
        np.testing.assert_allclose(result.point[a], kept[a].mean(axis=0), rtol=1e-12)


def test_point_mean_needs_the_factors_method():
    with pytest.raises(ParameterError, match="point"):
        chib_poisson_nmf(np.ones((2, 2), dtype=int), 1, 1.0, num_burn_in=1, num_samples=5, point="mean")


def test_chib_factors_recovers_the_exact_rank_one_evidence():
    """Rank-1 Poisson NMF has a closed-form evidence; Chib over the factors must agree within 4 standard errors."""
    from sepsti.core.evidence.rank_one import rank_one_log_evidence
    from sepsti.core.models.poisson_nmf import PoissonNMF
    from sepsti.core.random import stream
    X = PoissonNMF.sample(stream(1, 1), (6, 5), 1, rate_W=1.0, rate_H=1.0)[2].astype(np.int64)
    exact = rank_one_log_evidence(X, 1.0)
    r = chib_poisson_nmf(X, 1, 1.0, num_burn_in=300, num_samples=3000, method="factors", seed=0)
    # tolerance: 4 Monte-Carlo standard errors of the Chib estimate (its reported stderr, ~0.02 here)
    assert abs(r.log_marginal_likelihood - exact) < 4 * r.stderr


@pytest.mark.parametrize("method", ["sources", "factors"])
def test_chib_reduced_runs_draw_from_streams_of_their_own(monkeypatch, method):
    """Reduced run a draws from stream(seed, a): re-keying those streams moves its ordinates, not the main run's."""
    from sepsti.core.evidence import chib
    from sepsti.core.random import stream

    def run():
        return chib_log_marginal_likelihood(three_factor_model(), X_TINY, num_burn_in=10, num_samples=40, seed=5,
                                            method=method)

    base = run()
    monkeypatch.setattr(chib, "stream", lambda seed, *keys: stream(seed if keys == (0,) else seed + 1, *keys))
    moved = run()
    # the main run (stream(seed, 0)) and so the point and the ordinate averaged over it are unchanged
    np.testing.assert_array_equal(moved.log_likelihood_trace, base.log_likelihood_trace)
    np.testing.assert_array_equal(moved.ordinate_samples[0], base.ordinate_samples[0])
    reduced = [(a, b) for a, b in zip(moved.ordinate_samples[1:], base.ordinate_samples[1:]) if b is not None]
    assert len(reduced) == 2
    for a, b in reduced:
        assert not np.array_equal(a, b)


X_SLICES = np.array([3, 5, 6, 6])


def three_factor_truth():
    return three_factor_log_evidence(X_TINY, A_W, B_W, A_U, B_U, A_H, B_H)


def one_factor_truth():
    return TinyModel(X_SLICES, A_W, B_W, A_H, B_H, w_fixed=W_FIXED).log_evidence


# (model, data, exact log evidence, Chib's settings, number of seeds) of the replicate check
REPLICATE_CASES = {
    # six column ordinates of comparable error: their plain sum would overstate the standard error ~2.1-fold
    "column ordinates": (three_factor_model, X_TINY, three_factor_truth, dict(num_samples=100, blocks="columns"), 30),
    # one ordinate, the product of the four output slices' means: their plain sum would overstate it ~1.9-fold
    "output slices": (one_factor_model, X_SLICES, one_factor_truth, dict(num_samples=200), 40),
}


@pytest.mark.parametrize("case", REPLICATE_CASES)
def test_chib_standard_error_matches_the_spread_of_independent_replicates(case):
    """Independent errors add in quadrature: over n seeds, sum z^2 against the exact evidence is in chi^2_n's 99.8 %."""
    from scipy.stats import chi2

    make_model, x, exact, settings, count = REPLICATE_CASES[case]
    truth = exact()
    z = []
    for seed in range(count):
        result = chib_log_marginal_likelihood(make_model(), x, num_burn_in=100, seed=seed, method="factors",
                                              **settings)
        z.append((result.log_marginal_likelihood - truth) / result.stderr)
    total = float(np.sum(np.square(z)))
    assert chi2.ppf(0.001, count) < total < chi2.ppf(0.999, count), total


def test_replicates_are_independent_runs_combined_by_their_spread():
    """Run r of chib_replicates is the estimator called with replicate=r (run 0 the plain call); the runs draw from
    streams of their own, not the next seed's; the estimate is their mean, its error their spread over sqrt(n)."""
    from sepsti.core.evidence.chib import chib_replicates

    settings = dict(num_burn_in=10, num_samples=40, method="factors")
    combined = chib_replicates(chib_log_marginal_likelihood, three_factor_model(), X_TINY, seed=5,
                               num_replicates=3, **settings)
    plain = [chib_log_marginal_likelihood(three_factor_model(), X_TINY, seed=5, replicate=r, **settings)
             for r in range(3)]
    alone = chib_log_marginal_likelihood(three_factor_model(), X_TINY, seed=5, **settings)
    assert alone.log_marginal_likelihood == plain[0].log_marginal_likelihood
    for run, single in zip(combined.runs, plain):
        assert run.log_marginal_likelihood == single.log_marginal_likelihood
        np.testing.assert_array_equal(run.log_likelihood_trace, single.log_likelihood_trace)
    traces = [run.log_likelihood_trace for run in combined.runs]
    traces.append(chib_log_marginal_likelihood(three_factor_model(), X_TINY, seed=6, **settings).log_likelihood_trace)
    assert all(not np.array_equal(a, b) for i, a in enumerate(traces) for b in traces[i + 1:])
    values = np.array([run.log_marginal_likelihood for run in plain])
    np.testing.assert_array_equal(combined.estimates, values)
    assert combined.log_marginal_likelihood == pytest.approx(values.mean(), abs=1e-12)
    assert combined.stderr == pytest.approx(values.std(ddof=1) / np.sqrt(3), rel=1e-12)
    nmf = chib_replicates(chib_poisson_nmf, np.array([[1, 0, 2], [0, 3, 1]]), 2, 1.0, num_burn_in=20,
                          num_samples=30, seed=4, num_replicates=2)
    assert nmf.runs[0].log_marginal_likelihood == chib_poisson_nmf(
        np.array([[1, 0, 2], [0, 3, 1]]), 2, 1.0, num_burn_in=20, num_samples=30, seed=4).log_marginal_likelihood
    assert nmf.runs[1].log_marginal_likelihood != nmf.runs[0].log_marginal_likelihood


@pytest.mark.parametrize("options, message", [
    (dict(num_replicates=1), "num_replicates=1 must be an integer of at least 2"),
    (dict(num_replicates=True), "num_replicates=True"),
    (dict(num_replicates=2.5), "num_replicates=2.5"),
    (dict(replicate=1), "^replicate: set by chib_replicates"),
])
def test_replicates_refuse_bad_counts_and_a_replicate_of_their_own(options, message):
    from sepsti.core.evidence.chib import chib_replicates

    with pytest.raises(ParameterError, match=message):
        chib_replicates(chib_poisson_nmf, np.ones((2, 2), dtype=int), 1, 1.0, num_burn_in=1, num_samples=5,
                        **options)


@pytest.mark.parametrize("replicate", [-1, 2.5, True])
def test_a_replicate_that_is_not_a_count_is_refused(replicate):
    with pytest.raises(ParameterError, match="^replicate="):
        chib_poisson_nmf(np.ones((2, 2), dtype=int), 1, 1.0, num_burn_in=1, num_samples=5, replicate=replicate)


def test_replicates_cover_the_exact_evidence_at_their_t_level():
    """Four runs per estimate: (estimate - exact) / stderr follows Student's t with 3 degrees of freedom, so over 16
    seeds the counts outside its central 50 % and 95 % intervals are binomial (bounds at 99.9 % each); four runs
    of one stream (no independence) have no spread at all."""
    from scipy.stats import binom, t

    from sepsti.core.evidence.chib import chib_replicates

    count, truth = 16, three_factor_truth()
    t_values = []
    for seed in range(count):
        result = chib_replicates(chib_log_marginal_likelihood, three_factor_model(), X_TINY, num_burn_in=100,
                                 num_samples=100, blocks="columns", method="factors", seed=seed, num_replicates=4)
        t_values.append((result.log_marginal_likelihood - truth) / result.stderr)
    for level in (0.5, 0.95):
        outside = int(np.sum(np.abs(t_values) > t.ppf(0.5 + level / 2, 3)))
        low, high = binom.ppf(0.0005, count, 1 - level), binom.ppf(0.9995, count, 1 - level)
        assert low <= outside <= high, (level, outside, np.round(t_values, 2))


def test_replicates_warn_once_counting_the_runs_carried_by_one_sample(rng):
    """The runs' own warnings are replaced by one that counts them and points at the bias the spread leaves out."""
    import warnings

    from sepsti.core.evidence.chib import chib_replicates

    X = rng.poisson(2.0, size=(20, 20))  # as above: every run's multinomial ordinate rests on one draw
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = chib_replicates(chib_poisson_nmf, X, 3, 1.0, num_burn_in=50, num_samples=100, seed=0,
                                 num_replicates=3)
    carried = sum(run.max_weight_fraction.max() > 0.5 for run in result.runs)
    assert carried >= 1
    assert [str(w.message) for w in caught] == [
        f"Chib: {carried} of 3 runs have an ordinate carried by one sample; their spread is in the standard error, "
        "but a bias they share is not: compare a longer run (docs/chib.md)"]
    assert caught[0].filename == __file__
