import warnings

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.evidence.parafac_rank import PRESETS, prior_trace, select_parafac_rank
from sepsti.core.evidence.rank_selection import resolve_settings
from sepsti.core.models.poisson_parafac import PoissonParafac
from sepsti.core.random import stream
from sepsti.core.sparse_tensor import from_dense
from sepsti.corpora.tensors import simulate_dense

FAST = dict(preset="blocks", num_intervals=2, num_steps=40, num_keep=20, num_replicates=2, progress=False)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short traces: MCSE warnings
        yield


@pytest.fixture
def small(rng):
    X, _ = simulate_dense((6, 7, 8), 2, prior_rate=0.6, rng=rng)
    return X


def test_result_shapes_and_selection(small):
    result = select_parafac_rank(small, [3, 1, 2], prior_rate=0.6, subset_size=50, **FAST)
    assert result.ranks == [1, 2, 3]
    assert result.log_marginal_likelihood.shape == (3,) and np.all(np.isfinite(result.log_marginal_likelihood))
    assert np.all(result.stderr > 0) and result.replicates.shape == (3, 2)
    assert len(result.per_temperature) == 3 and result.per_temperature[0].temperatures.size == 3
    assert result.settings["chain"]["subset_size"] == 50
    assert result.selected_rank == result.ranks[int(np.argmax(result.log_marginal_likelihood))]


def test_chains_that_diverged_are_recorded_as_not_finite():
    # large SGLD steps: R = 1's chains diverge (NaN) while R = 4's stay finite; all_finite was always True
    X = stream(1, 2).poisson(2.0, (5, 4, 3)).astype(float)
    with pytest.warns(Warning, match="not finite for R=1"):
        result = select_parafac_rank(X, [1, 4], preset="blocks", sampler="sgld", step_a=0.01, num_steps=50,
                                     num_keep=10, num_intervals=2, num_replicates=2)
    assert np.isnan(result.log_marginal_likelihood[0]) and np.isfinite(result.log_marginal_likelihood[1])
    assert result.all_finite is False


def test_same_seed_same_estimates(small):
    a = select_parafac_rank(small, [1, 2], prior_rate=0.6, sampler="sgld", subset_size=50, seed=3, **FAST)
    b = select_parafac_rank(small, [1, 2], prior_rate=0.6, sampler="sgld", subset_size=50, seed=3, **FAST)
    np.testing.assert_array_equal(a.log_marginal_likelihood, b.log_marginal_likelihood)


def test_sparse_blocks_match_dense_blocks(small):
    # the same parts in the same order: the chains agree up to the kernels' rounding
    dense = select_parafac_rank(small, [2], prior_rate=0.6, num_blocks=2, **FAST)
    sparse = select_parafac_rank(from_dense(small), [2], prior_rate=0.6, num_blocks=2, engine="generic", **FAST)
    np.testing.assert_allclose(sparse.log_marginal_likelihood, dense.log_marginal_likelihood, rtol=1e-8)


def test_compiled_engine_runs_on_sparse_blocks(small):
    sparse = from_dense(small)
    a = select_parafac_rank(sparse, [1, 2], prior_rate=0.6, num_blocks=2, **FAST)
    b = select_parafac_rank(sparse, [1, 2], prior_rate=0.6, num_blocks=2, **FAST)
    assert a.settings["engine"] == "compiled"
    assert np.all(np.isfinite(a.log_marginal_likelihood))
    np.testing.assert_array_equal(a.log_marginal_likelihood, b.log_marginal_likelihood)


def test_checkpoint_resumes_and_refuses_other_settings(small, tmp_path):
    first = select_parafac_rank(small, [1, 2], prior_rate=0.6, subset_size=50, checkpoint=tmp_path, **FAST)
    assert len(list(tmp_path.glob("R*-t*-r*.npz"))) == 2 * 3 * 2
    # remove one chain: the rerun recomputes it and reloads the others, with identical results
    (tmp_path / "R2-t1-r0.npz").unlink()
    second = select_parafac_rank(small, [1, 2], prior_rate=0.6, subset_size=50, checkpoint=tmp_path, **FAST)
    np.testing.assert_array_equal(first.log_marginal_likelihood, second.log_marginal_likelihood)
    with pytest.raises(ParameterError, match="other data or settings.*model"):
        select_parafac_rank(small, [1, 2], prior_rate=0.7, subset_size=50, checkpoint=tmp_path, **FAST)


def test_exact_prior_trace_matches_prior_expectation(small):
    # E_prior[log p(X | θ)] by direct Monte Carlo outside the model (exponential factors, scipy's Poisson
    # log-pmf of their PARAFAC rates), against the t = 0 trace on full data
    from scipy.stats import poisson

    model = PoissonParafac(small, 2, prior_rate=0.6)
    trace = prior_trace(model, stream(1), num_keep=400, subset_fn=lambda rng, it: None)
    rng = np.random.default_rng(2)

    def log_likelihood_of_a_prior_draw():
        A, B, C = (rng.exponential(1 / 0.6, size=(n, 2)) for n in small.shape)
        return poisson.logpmf(small, np.einsum("ir,jr,kr->ijk", A, B, C)).sum()

    reference = np.array([log_likelihood_of_a_prior_draw() for _ in range(4000)])
    se = np.sqrt(trace.var() / trace.size + reference.var() / reference.size)
    assert abs(trace.mean() - reference.mean()) < 4 * se


def test_block_scheme_scores_on_all_data_every_b_iterations(small):
    # the default "full" evaluation with blocks scores every m = B kept iterations: ceil(20 / 2) = 10 full
    # log-likelihoods per chain; num_keep = 20 exact prior draws at t = 0 unless prior_draws says otherwise
    sparse = from_dense(small)
    result = select_parafac_rank(sparse, [2], prior_rate=0.6, num_blocks=2, **FAST)
    chain = result.settings["chain"]
    assert chain["evaluate"] == "full" and chain["evaluate_every"] == 2 and chain["exact_prior"]
    assert result.per_temperature[0].num_keep == 10  # the shortest trace
    # t = 0: the full-data log-likelihoods of replicate r's 20 prior draws from stream(seed, R, 0, r)
    model = PoissonParafac(small, 2, prior_rate=0.6)
    draws = [model.log_likelihood(model.sample_prior(rng)) for rng in (stream(0, 2, 0, r) for r in range(2))
             for _ in range(20)]
    assert result.per_temperature[0].mean_log_likelihood[0] == pytest.approx(np.mean(draws), rel=1e-10)
    fewer = select_parafac_rank(sparse, [2], prior_rate=0.6, num_blocks=2, prior_draws=4, **FAST)
    assert fewer.per_temperature[0].num_keep == 4
    np.testing.assert_array_equal(fewer.per_temperature[0].mean_log_likelihood[1:],
                                  result.per_temperature[0].mean_log_likelihood[1:])
    parts = select_parafac_rank(sparse, [2], prior_rate=0.6, num_blocks=2, evaluate="before_update", **FAST)
    assert parts.settings["chain"]["evaluate_every"] == 1 and parts.per_temperature[0].num_keep == 20


def test_generic_full_evaluation_scores_on_all_data(small):
    # generic engine, dense blocks: the t = 1 chain's last value is the full log-likelihood of its last sample
    from sepsti.core.evidence.sti import LangevinSettings, power_posterior_chain
    from sepsti.core.evidence.parafac_rank import part_schedule
    from sepsti.core.parallel.tensor_blocks import build_block_index

    model = PoissonParafac(small, 2, prior_rate=0.6)
    kwargs = dict(temperature=1.0, subset_fn=part_schedule(build_block_index(small, 2)))
    settings = dict(num_steps=40, num_keep=20, sampler="psgld", step_a=1e-4)
    trace, full = power_posterior_chain(model, model.sample_prior(stream(4)), stream(5),
                                        chain=LangevinSettings(evaluate="full", evaluate_every=3, **settings), **kwargs)
    assert trace.shape == (7,)
    assert trace[-1] == pytest.approx(model.log_likelihood(full.state.inner.position), rel=1e-12)
    _, parts = power_posterior_chain(model, model.sample_prior(stream(4)), stream(5),
                                     chain=LangevinSettings(evaluate="before_update", **settings), **kwargs)
    for got, want in zip(full.state.inner.position, parts.state.inner.position):
        np.testing.assert_array_equal(got, want)



def test_per_temperature_lengths_run_each_chain_as_its_own_setting(small):
    # chain i of a per-temperature run is the chain of a scalar run with that length and step
    sparse = from_dense(small)
    settings = dict(FAST, num_intervals=2, num_blocks=2, prior_rate=0.6, schedule="uniform", rule="trapezoid")
    mixed = select_parafac_rank(sparse, [2], **dict(settings, num_steps=[40, 40, 60], step_a=[1e-6, 1e-6, 2e-6]))
    short = select_parafac_rank(sparse, [2], **dict(settings, num_steps=40, step_a=1e-6))
    long = select_parafac_rank(sparse, [2], **dict(settings, num_steps=60, step_a=2e-6))
    means = [r.per_temperature[0].mean_log_likelihood for r in (mixed, short, long)]
    np.testing.assert_array_equal(means[0][:2], means[1][:2])
    assert means[0][2] == means[2][2] and means[0][2] != means[1][2]
    assert mixed.settings["chain"]["num_steps"] == [40, 40, 60] and short.settings["chain"]["num_steps"] == 40
    assert mixed.settings["chain"]["step_a"] == [1e-6, 1e-6, 2e-6] and short.settings["chain"]["step_a"] == 1e-6
    # t = 0 takes exact prior draws: its length is not used, even when shorter than num_keep
    same = select_parafac_rank(sparse, [2], **dict(settings, num_steps=[10, 40, 60], step_a=[1e-6, 1e-6, 2e-6]))
    np.testing.assert_array_equal(same.log_marginal_likelihood, mixed.log_marginal_likelihood)

def rank_one_log_evidence(X, rate):
    """Exact log p(X | R = 1) of Poisson PARAFAC with Exp(rate) factors a, b, c.

    a integrates out given b, c (Gamma conjugacy), and the directions of b and c on their simplices
    (Dirichlet integrals), leaving an integral over u = log sum(b), v = log sum(c) of exp(g(u, v)); here by
    the trapezoid rule on a grid along the principal axes of its peak, exponentially accurate for a smooth
    integrand that has fallen by far more than 40 at the grid's edges (checked).
    """
    from scipy import optimize
    from scipy.special import gammaln, logsumexp

    I, J, K = X.shape
    total = X.sum()

    def g(u, v):
        return ((total + J) * u + (total + K) * v - rate * (np.exp(u) + np.exp(v))
                - (total + I) * np.logaddexp(np.log(rate), u + v))

    mode = optimize.minimize(lambda p: -g(*p), np.zeros(2), method="Nelder-Mead",
                             options=dict(xatol=1e-10, fatol=1e-12, maxiter=10_000)).x
    step = 1e-4
    hessian = np.array([[g(*(mode + a + b)) - g(*(mode + a - b)) - g(*(mode - a + b)) + g(*(mode - a - b))
                         for b in np.eye(2) * step] for a in np.eye(2) * step]) / (4 * step ** 2)
    curvature, axes = np.linalg.eigh(-hessian)
    scales = axes / np.sqrt(curvature)  # columns: the principal axes, one standard deviation long
    t = np.linspace(-16.0, 16.0, 321)
    T1, T2 = np.meshgrid(t, t, indexing="ij")
    G = g(mode[0] + scales[0, 0] * T1 + scales[0, 1] * T2, mode[1] + scales[1, 0] * T1 + scales[1, 1] * T2)
    assert max(G[0].max(), G[-1].max(), G[:, 0].max(), G[:, -1].max()) < G.max() - 40
    log_integral = logsumexp(G) + 2 * np.log(t[1] - t[0]) + np.log(abs(np.linalg.det(scales)))
    margins = sum(gammaln(X.sum(axis=other) + 1).sum() for other in ((1, 2), (0, 2), (0, 1)))
    return float((I + J + K) * np.log(rate) + margins
                 - gammaln(X + 1).sum() - gammaln(total + J) - gammaln(total + K) + log_integral)


def test_rank_one_parafac_evidence_matches_monte_carlo_over_the_prior():
    # the closed form above against sum over prior draws of p(X | a, b, c) (importance sampling from the prior)
    from scipy.special import gammaln, logsumexp

    rng = np.random.default_rng(0)
    X, rate = rng.poisson(1.0, (2, 2, 2)).astype(float), 0.8
    A, B, C = (rng.exponential(1 / rate, (400_000, 2)) for _ in range(3))
    rates = np.einsum("ni,nj,nk->nijk", A, B, C)
    log_terms = (X * np.log(rates) - rates).sum(axis=(1, 2, 3)) - gammaln(X + 1).sum()
    estimate = logsumexp(log_terms) - np.log(log_terms.size)
    stderr = np.exp(log_terms - estimate).std(ddof=1) / np.sqrt(log_terms.size)
    assert abs(rank_one_log_evidence(X, rate) - estimate) < 4 * stderr


def test_default_preset_recovers_the_exact_rank_one_evidence():
    # the reference path (the default) at R = 1 on 10 x 8 x 6 counts (920 in all) against the closed form,
    # within 4 of its standard errors (measured over seeds: -0.015 ... +0.017 from it, se 0.02-0.04)
    rng = np.random.default_rng(7)
    A, B, C = (rng.exponential(1.0, (n, 1)) for n in (10, 8, 6))
    X = rng.poisson(3 * np.einsum("ir,jr,kr->ijk", A, B, C)).astype(float)
    result = select_parafac_rank(X, [1], prior_rate=1.0, seed=0)
    exact = rank_one_log_evidence(X, 1.0)
    assert result.stderr[0] < 0.1
    assert abs(result.log_marginal_likelihood[0] - exact) < 4 * result.stderr[0], \
        (result.log_marginal_likelihood[0], exact, result.stderr[0])


@pytest.mark.parametrize("preset", ["reference", "blocks"])
def test_empty_data_are_refused_by_name(preset):
    # a dense tensor with an empty axis ran into a ZeroDivisionError (entries per subset, the mode's level)
    for shape in ((0, 3, 3), (3, 3, 0)):
        with pytest.raises(ParameterError, match=rf"^data has shape \({shape[0]}, 3, {shape[2]}\)"):
            select_parafac_rank(np.ones(shape), [1], preset=preset, prior_rate=0.6)


@pytest.mark.parametrize("kwargs, match", [
    (dict(sparse=True), "num_blocks is required"),
    (dict(num_blocks=2, subset_size=10), "not both"),
    (dict(sampler="hmc"), "sampler"),
    (dict(init="zero"), "init"),
    (dict(ranks=[0]), "ranks"),
    (dict(ranks=[1.5]), r"ranks\[0\]=1.5 must be an integer"),
    (dict(subset_size=10_000), "subset_size"),
    (dict(engine="fast"), "engine"),
    (dict(engine="compiled", subset_size=10), "compiled"),
    (dict(distributed=True, subset_size=10), "distributed=True needs the compiled engine"),
    (dict(evaluate="often"), "evaluate="),
    (dict(evaluate="full", evaluate_every=1.5), "evaluate_every"),
    (dict(prior_draws=0), "prior_draws"),
    (dict(num_steps=[40, 40]), "one per temperature"),
    (dict(num_steps=[40, 40, 40.5]), "positive integers"),
    (dict(step_a=[1e-6, 0.0, 1e-6]), "step_a=0.0 must be positive"),
    (dict(num_steps=[40, 10, 40]), "num_keep=20 must lie in"),
])
def test_invalid_settings(small, kwargs, match):
    kwargs = dict(kwargs)
    data = from_dense(small) if kwargs.pop("sparse", False) else small
    ranks = kwargs.pop("ranks", [1])
    with pytest.raises(ParameterError, match=match):
        select_parafac_rank(data, ranks, **dict(FAST, **kwargs))


def test_a_checkpoint_refuses_sparse_data_with_the_same_entries_but_other_counts(small, tmp_path):
    sparse = from_dense(small)
    select_parafac_rank(sparse, [1], prior_rate=0.6, num_blocks=2, checkpoint=tmp_path, **FAST)
    doubled = from_dense(2 * small)  # the same non-zero coordinates
    with pytest.raises(ParameterError, match="other data or settings.*data"):
        select_parafac_rank(doubled, [1], prior_rate=0.6, num_blocks=2, checkpoint=tmp_path, **FAST)


def test_full_evaluations_of_a_keep_count_not_a_multiple_of_their_spacing_resume_from_a_checkpoint(small, tmp_path):
    # 19 kept iterations scored every B = 2: iterations 19, 17, ..., 1 from the end, ceil(19 / 2) = 10 values
    options = {**FAST, "num_keep": 19}
    first = select_parafac_rank(from_dense(small), [1], prior_rate=0.6, num_blocks=2, checkpoint=tmp_path, **options)
    assert [piece.num_keep for piece in first.per_temperature] == [10]
    again = select_parafac_rank(from_dense(small), [1], prior_rate=0.6, num_blocks=2, checkpoint=tmp_path, **options)
    np.testing.assert_array_equal(again.log_marginal_likelihood, first.log_marginal_likelihood)


@pytest.mark.parametrize("name, grid, chain, replicates", [
    ("blocks", (10, "power", 5.0, "simpson"),
     dict(sampler="psgld", sigma=1e-5, step_a=1e-8, num_steps=3000, num_keep=500, evaluate="full", init="prior",
          exact_prior=True), 4),
    ("paper", (5, "uniform", 1.0, "trapezoid"),
     dict(sampler="psgld", step_a=1e-8, num_steps=3000, num_keep=500, evaluate="before_update", exact_prior=True), 1),
])
def test_presets_are_those_of_the_documented_table(name, grid, chain, replicates):
    # docs/rank_selection.md's table of presets (SPL'18 for `paper`: a = 1e-7 passed before)
    preset = PRESETS[name]
    assert (preset.grid.num_intervals, preset.grid.schedule, preset.grid.power, preset.grid.rule) == grid
    assert {field: getattr(preset.chain, field) for field in chain} == chain
    assert preset.num_replicates == replicates


def test_iteration_l_uses_part_l_minus_one_modulo_b_squared(small):
    # PARAFAC'18's cyclic order from iteration 1 (part l mod B^2 passed before)
    from sepsti.core.evidence.parafac_rank import part_schedule
    from sepsti.core.parallel.tensor_blocks import build_block_index

    index = build_block_index(small, 2)
    schedule = part_schedule(index)
    for iteration, part in ((1, 0), (2, 1), (4, 3), (5, 0), (11, 2)):
        np.testing.assert_array_equal(schedule(None, iteration).keys, index.part(part).keys)


def test_prior_draw_k_is_scored_on_the_subset_of_iteration_k():
    # draws are numbered from 1 like the chains' iterations, so that part_schedule gives draw k part (k - 1) mod B^2
    # (numbered from 0 passed before)
    iterations = []
    model = PoissonParafac(np.ones((2, 3, 4)), 1, prior_rate=1.0)
    prior_trace(model, stream(0), num_keep=5, subset_fn=lambda rng, iteration: iterations.append(iteration))
    assert iterations == [1, 2, 3, 4, 5]


def test_the_seed_reaches_the_chains(small):
    # t = 0's draws are those of stream(seed, R, 0, r) at seed 3 (every run at seed 0 passed before)
    sparse = from_dense(small)
    result = select_parafac_rank(sparse, [2], prior_rate=0.6, num_blocks=2, seed=3, **FAST)
    model = PoissonParafac(small, 2, prior_rate=0.6)
    draws = [model.log_likelihood(model.sample_prior(rng)) for rng in (stream(3, 2, 0, r) for r in range(2))
             for _ in range(20)]
    assert result.per_temperature[0].mean_log_likelihood[0] == pytest.approx(np.mean(draws), rel=1e-10)


@pytest.mark.parametrize("sparse, init", [(True, "prior"), (False, "prior"), (False, "map")],
                         ids=["compiled", "generic", "generic from MAP"])
def test_a_chain_runs_from_its_own_prior_draw_on_its_own_streams_at_its_temperature(small, sparse, init):
    """Chain (R, i, r) starts from a prior draw of stream(seed, R, i, r), or that draw after init_iterations MAP
    sweeps; the compiled engine's noise comes from the streams of (R, i, r), the generic engine's from that stream
    itself, at t_i (replicate 0's noise for every replicate, one MAP sweep, or the generic chains at t = 1, passed
    before)."""
    from sepsti.core.factorization.parafac_map import poisson_parafac_map
    from sepsti.core.evidence.parafac_rank import ParafacChains, full_data
    from sepsti.core.evidence.rank_selection import ChainTask
    from sepsti.core.evidence.sti import power_posterior_chain
    from sepsti.core.parallel.parafac_blocks import run_parafac_block_chain
    from sepsti.core.parallel.tensor_blocks import build_block_index

    blocks = {"num_blocks": 2} if sparse else {}
    _, chain, _ = resolve_settings(PRESETS, "blocks", num_steps=30, num_keep=10, step_a=1e-4, init=init,
                                   init_iterations=5, **blocks)
    chains = ParafacChains(from_dense(small) if sparse else small, chain, prior_rate=0.6)
    model = PoissonParafac(small, 2, prior_rate=0.6)
    for replicate in (0, 1):
        got = chains.run(ChainTask(2, 1, replicate, 0.5), seed=4, progress=None).trace
        rng = stream(4, 2, 1, replicate)
        start = model.sample_prior(rng)
        if init == "map":
            start = poisson_parafac_map(model, start, max_iter=5, record=False).theta
        if sparse:
            want, _ = run_parafac_block_chain(build_block_index(from_dense(small), 2), start, chain.at(1),
                                              prior_rates=model.prior_rates, seed=4, chain=(2, 1, replicate),
                                              temperature=0.5)
        else:
            want, _ = power_posterior_chain(model, start, rng, temperature=0.5, chain=chain.at(1), subset_fn=full_data)
        np.testing.assert_array_equal(got, want)


def test_a_subset_of_every_entry_is_accepted(small):
    # subset_size may be as large as the data (at it, refused passed before)
    result = select_parafac_rank(small, [1], prior_rate=0.6, subset_size=small.size, **FAST)
    assert result.settings["chain"]["subset_size"] == small.size


def test_entry_subsets_draw_from_every_entry(small):
    # 60 subsets of 336 of the 336 entries, drawn with replacement, reach the first and the last (each missed with
    # probability e^-60; index 0 left out passed before)
    from sepsti.core.evidence.parafac_rank import ParafacChains

    _, chain, _ = resolve_settings(PRESETS, "blocks", subset_size=small.size)
    subset_fn = ParafacChains(small, chain, prior_rate=0.6).subset_fn
    rng = stream(2)
    drawn = np.concatenate([subset_fn(rng, iteration) for iteration in range(1, 61)])
    assert drawn.min() == 0 and drawn.max() == small.size - 1


def test_a_checkpoint_refuses_sparse_data_with_the_same_entries_in_a_larger_tensor(small, tmp_path):
    from sepsti.core.sparse_tensor import SparseTensor

    sparse = from_dense(small)
    select_parafac_rank(sparse, [1], prior_rate=0.6, num_blocks=2, checkpoint=tmp_path, **FAST)
    larger = SparseTensor(sparse.coords, sparse.values, (6, 7, 9))  # one more slice, empty
    with pytest.raises(ParameterError, match="other data or settings.*data"):
        select_parafac_rank(larger, [1], prior_rate=0.6, num_blocks=2, checkpoint=tmp_path, **FAST)
