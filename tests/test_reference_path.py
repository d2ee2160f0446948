import itertools
import math
import warnings

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.evidence.rank_one import rank_one_log_evidence
from sepsti.core.evidence.reference_path import (LabelMixedReference, LogSpaceReference, NMFLogDensity,
                                                 annealed_importance_bound, ascend, log_permanent, log_space_mode,
                                                 reference_at_mode, ridge_basis, ridge_moments)
from sepsti.core.evidence.sti_nmf import select_rank_sti
from sepsti.core.models.poisson_nmf import PoissonNMF
from sepsti.core.random import stream


@pytest.fixture(params=[2, 3], ids=["two factors", "three factors"])
def reference(rng, request):
    shapes = [(3, 2), (4, 2), (2, 2)][:request.param]
    return LogSpaceReference(tuple(rng.normal(size=s) for s in shapes),
                             tuple(rng.uniform(1, 5, size=s) for s in shapes),
                             random_ridge_precision(rng, 2, request.param, 0.2, 3.0))


def random_ridge_precision(rng, rank, count, low, high):
    """A positive definite (rank, count - 1, count - 1) precision in the ridge basis."""
    K = ridge_basis(count)
    return np.einsum("fa,rf,fb->rab", K, rng.uniform(low, high, size=(rank, count)), K)


def flat(arrays):
    return np.concatenate([a.ravel() for a in arrays])


def dense_covariance(q):
    """The covariance written out: conditional D^-1 off the ridges, the shifts' K P^-1 K^T along them.

    Built independently of the class but for the basis K in which P is given: the ridge of component r is
    spanned by column-r indicators G of each factor, restricted to sum(gamma) = 0;
    Sigma = D^-1 - E (E^T D E)^-1 E^T + G K P^-1 K^T G^T, E = G K' for any basis K' of the ridge.
    """
    D = flat(q.precisions)
    count = len(q.means)
    covariance = np.diag(1.0 / D)
    for r in range(q.ridge_precision.shape[0]):
        G = np.zeros((D.size, count))
        offset = 0
        for f, m in enumerate(q.means):
            block = np.zeros(m.shape)
            block[:, r] = 1.0
            G[offset:offset + m.size, f] = block.ravel()
            offset += m.size
        K = np.linalg.svd(np.eye(count) - 1.0 / count)[0][:, :count - 1]
        E = G @ K
        M = E.T @ (D[:, None] * E)
        shifts = q.basis @ np.linalg.inv(q.ridge_precision[r]) @ q.basis.T
        covariance += G @ shifts @ G.T - E @ np.linalg.inv(M) @ E.T
    return covariance


def test_reference_density_gradient_and_products_match_the_dense_gaussian(reference, rng):
    from scipy.stats import multivariate_normal

    q = reference
    covariance = dense_covariance(q)
    point = [rng.normal(size=m.shape) for m in q.means]
    assert q.log_density(point) == pytest.approx(
        multivariate_normal(flat(q.means), covariance).logpdf(flat(point)), rel=1e-12)
    np.testing.assert_allclose(flat(q.grad_log_density(point)),
                               -np.linalg.solve(covariance, flat(point) - flat(q.means)), rtol=1e-9)
    np.testing.assert_allclose(flat(q.times_covariance(point)), covariance @ flat(point), rtol=1e-9)


def test_reference_draws_have_its_covariance(reference):
    # 40,000 draws: each covariance entry within 5 of its Monte-Carlo standard errors
    q = reference
    draws = np.array([flat(q.sample(stream(3, n))) for n in range(40_000)])
    covariance = dense_covariance(q)
    se = np.sqrt((covariance ** 2 + np.outer(np.diag(covariance), np.diag(covariance))) / len(draws))
    assert np.all(np.abs(np.cov(draws.T) - covariance) < 5 * se)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
def test_log_permanent_is_the_sum_over_permutations_with_each_assignments_probability(size, rng):
    from scipy.special import logsumexp

    L = 3.0 * rng.normal(size=(size, size))
    permutations = [list(p) for p in itertools.permutations(range(size))]
    terms = np.array([L[np.arange(size), p].sum() for p in permutations])
    share = np.zeros((size, size))
    for term, p in zip(terms, permutations):
        share[np.arange(size), p] += np.exp(term - logsumexp(terms))
    total, got = log_permanent(L)
    assert total == pytest.approx(logsumexp(terms), abs=1e-12)
    np.testing.assert_allclose(got, share, atol=1e-12)


def test_log_permanent_holds_terms_thousands_of_nats_apart():
    total, share = log_permanent(np.array([[0.0, -2000.0], [-2000.0, -1e4]]))
    assert total == pytest.approx(-4000.0, abs=1e-9)
    np.testing.assert_allclose(share, [[0.0, 1.0], [1.0, 0.0]], atol=1e-300)


@pytest.mark.parametrize("count", [2, 3], ids=["two factors", "three factors"])
def test_label_mixed_reference_is_q_averaged_over_the_labellings_with_its_gradient(count, rng):
    shapes = [(4, 3), (3, 3), (5, 3)][:count]
    q = LogSpaceReference(tuple(rng.normal(size=s) for s in shapes), tuple(rng.uniform(1, 5, size=s) for s in shapes),
                          random_ridge_precision(rng, 3, count, 0.2, 3.0))
    mixed = LabelMixedReference(q)
    point = [m + 0.7 * rng.normal(size=m.shape) for m in q.means]
    permutations = [list(p) for p in itertools.permutations(range(3))]
    from scipy.special import logsumexp

    expected = logsumexp([q.log_density([F[:, p] for F in point]) for p in permutations]) - math.log(6)
    value, gradient = mixed.log_density_and_grad(point)
    assert value == pytest.approx(expected, abs=1e-10)
    assert mixed.log_density(point) == pytest.approx(expected, abs=1e-10)
    assert mixed.log_density([F[:, [2, 0, 1]] for F in point]) == pytest.approx(expected, abs=1e-10)
    numeric = []
    for f, F in enumerate(point):
        for index in np.ndindex(F.shape):
            moved = [[G.copy() for G in point] for _ in range(2)]
            moved[0][f][index] += 1e-6
            moved[1][f][index] -= 1e-6
            numeric.append((mixed.log_density(moved[0]) - mixed.log_density(moved[1])) / 2e-6)
    np.testing.assert_allclose(flat(gradient), numeric, atol=1e-6)
    # the best labelling of a point shuffled away from q's: the one of largest q
    shuffled = [F[:, [1, 2, 0]] for F in q.sample(rng)]
    best = max(permutations, key=lambda p: q.log_density([F[:, p] for F in shuffled]))
    for got, want in zip(q.relabelled(shuffled), [F[:, best] for F in shuffled]):
        np.testing.assert_array_equal(got, want)
    # components whose q is the same (as those left at the prior) tie: the point keeps its labelling
    twin = LogSpaceReference(tuple(m[:, [0, 0, 1]] for m in q.means), tuple(d[:, [0, 0, 1]] for d in q.precisions),
                             q.ridge_precision[[0, 0, 1]])
    point = [F[:, [1, 0, 2]] for F in twin.sample(rng)]
    for got, want in zip(twin.relabelled(point), point):
        np.testing.assert_array_equal(got, want)


def test_mode_keeps_entries_positive_and_q_is_proper(rng):
    X = PoissonNMF.sample(rng, (20, 15), 2, rate_W=5.0, rate_H=5.0)[2]
    W, H = log_space_mode(X, 3, rng, prior_rate=5.0, iterations=200)
    assert np.all(W > 0) and np.all(H > 0)
    q = reference_at_mode((W, H.T), (H.sum(axis=1), W.sum(axis=0)), (5.0, 5.0))
    assert all(np.all(d > 0) for d in q.precisions) and np.all(np.linalg.eigvalsh(q.ridge_precision) > 0)
    assert np.isfinite(q.log_density(q.sample(rng)))


def test_ascend_accelerates_a_slow_ascent_map():
    # a linear map contracting by 0.95 and 0.5 towards (1, 1) on the objective -|x - 1|^2
    calls = []

    def step(x):
        calls.append(1)
        return [1.0 + np.array([0.95, 0.5]) * (x[0] - 1.0)]

    def objective(x):
        return -float(np.sum((x[0] - 1.0) ** 2))

    start = [np.array([-3.0, 5.0])]
    plain = start
    for _ in range(30):
        plain = step(plain)
    assert np.max(np.abs(plain[0] - 1.0)) > 0.8  # 4 * 0.95^30
    calls.clear()
    x = ascend(step, objective, start, 30)
    assert len(calls) == 30 and np.max(np.abs(x[0] - 1.0)) < 1e-3


def test_accelerated_mode_search_climbs_higher_than_plain_em_in_as_many_sweeps():
    X = PoissonNMF.sample(stream(5, 1), (60, 40), 3, rate_W=1.0, rate_H=1.0)[2]
    density = NMFLogDensity(X, 1.0)
    rng = stream(5, 2)
    W = np.sqrt(X.mean() / 3) * rng.uniform(0.5, 1.5, size=(60, 3))
    H = np.sqrt(X.mean() / 3) * rng.uniform(0.5, 1.5, size=(3, 40))
    for _ in range(60):
        W = (W * ((X / (W @ H)) @ H.T) + 1.0) / (H.sum(axis=1)[None, :] + 1.0)
        H = (H * (W.T @ (X / (W @ H))) + 1.0) / (W.sum(axis=0)[:, None] + 1.0)
    accelerated, _ = density.mode(3, stream(5, 2), 60)
    assert density([np.log(F) for F in accelerated])[0] > density([np.log(W), np.log(H.T)])[0] + 1.0


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


@pytest.mark.filterwarnings("ignore:traces shorter")
@pytest.mark.parametrize("prior_rate", [1e10, 1e30, 1e150])
def test_reference_path_holds_under_a_prior_that_dwarfs_the_data(prior_rate):
    # the prior's curvature rounds the data's away along the ridges (A = P^-1 - M^-1 ~ 0): inverting A failed
    # with LinAlgError from 1e10 on; short chains, still within 4 of their standard errors of the closed form
    X = stream(3).poisson(3, (8, 6)).astype(float)
    result = select_rank_sti(X, [1], prior_rate=prior_rate, num_intervals=2, num_steps=40, num_keep=20)
    exact = rank_one_log_evidence(X, prior_rate)
    assert abs(result.log_marginal_likelihood[0] - exact) < 4 * result.stderr[0], (result.log_marginal_likelihood,
                                                                                   exact, result.stderr)


def test_annealed_importance_bound_lies_below_the_exact_evidence_and_tightens_with_annealing():
    # E[log w] <= log p(X | 1); with more temperatures the bound closes in on the closed form
    X = PoissonNMF.sample(stream(5, 2000), (40, 30), 1, rate_W=2.0, rate_H=2.0)[2]
    exact = rank_one_log_evidence(X, 2.0)
    density = NMFLogDensity(X, 2.0)
    short = annealed_importance_bound(density, 1, num_temperatures=20, num_runs=6, seed=1)
    long = annealed_importance_bound(density, 1, num_temperatures=400, num_runs=6, seed=1)
    for result in (short, long):
        assert result["lower_bound"] < exact + 3 * result["stderr"], (result, exact)
        assert len(result["log_weights"]) == 6
        # the standard error of the mean of the six log weights (their standard deviation passed before)
        log_weights = np.asarray(result["log_weights"])
        assert result["lower_bound"] == pytest.approx(log_weights.mean(), rel=1e-12)
        assert result["stderr"] == pytest.approx(log_weights.std(ddof=1) / np.sqrt(6), rel=1e-12)
    # tighter (measured: 0.93 ± 0.47 nats closer; without the moves between temperatures the two are equal)
    assert long["lower_bound"] > short["lower_bound"], (short, long)
    # the log of the mean weight estimates log p(X | 1) itself, with the delta method's standard error
    weights = np.exp(np.asarray(long["log_weights"]) - np.max(long["log_weights"]))
    se = weights.std(ddof=1) / weights.mean() / np.sqrt(weights.size)
    assert abs(long["log_mean_weight"] - exact) < 4 * se, (long, exact, se)


def test_reference_path_adds_nothing_to_its_integral_at_any_rank_and_refuses_blocks(rng):
    """q is mixed over the labellings at every rank above 1 -- exactly up to LABEL_MIXING_MAX_RANK, over those that
    leave q the same above it -- so the estimate is the integral of the traces (log R! added, passed before)."""
    from sepsti.core.evidence.rank_selection import TemperatureGrid
    from sepsti.core.evidence.reference_path import LABEL_MIXING_MAX_RANK

    above = LABEL_MIXING_MAX_RANK + 1
    X = PoissonNMF.sample(rng, (above + 3, above + 2), 2, rate_W=5.0, rate_H=5.0)[2]
    settings = dict(preset="reference", prior_rate=5.0, num_intervals=2, num_steps=20, num_keep=10,
                    num_replicates=2, prior_draws=10, init_iterations=30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = select_rank_sti(X, [2, above], **settings)
    weights = TemperatureGrid(2, "beta", 2.0, "simpson").weights  # the preset's schedule at T = 2
    for index in range(2):
        assert result.log_marginal_likelihood[index] == pytest.approx(
            weights @ result.per_temperature[index].mean_log_likelihood, rel=1e-12)
    with pytest.raises(ParameterError, match="full-data"):
        select_rank_sti(X, [2], **{**settings, "num_blocks": 2})


def test_above_the_exact_rank_q_is_mixed_over_the_labellings_that_leave_it_the_same():
    """Twelve components, five with the same q and seven far apart: log q + log 5! - log 12! is the exact mixture
    (the permanent) at a draw of q; a tie class left out, or log R! alone, is log 5! = 4.8 nats off."""
    from sepsti.core.evidence.reference_path import LABEL_MIXING_MAX_RANK, same_q_classes

    assert LABEL_MIXING_MAX_RANK < 12
    rng = np.random.default_rng(3)
    columns = [0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7]
    means = tuple(6.0 * rng.normal(size=(n, 8))[:, columns] for n in (6, 5))
    precisions = tuple(rng.uniform(2.0, 4.0, size=(n, 8))[:, columns] for n in (6, 5))
    q = LogSpaceReference(means, precisions, random_ridge_precision(rng, 8, 2, 0.5, 2.0)[columns])
    sizes, least_apart = same_q_classes(q)
    assert sorted(sizes) == [1] * 7 + [5] and least_apart > 10.0
    mixed = LabelMixedReference(q)
    for _ in range(3):
        point = q.sample(rng)
        exact = q._log_norm - math.lgamma(13) + log_permanent(-0.5 * q.costs(point)[0])[0]
        value, gradient = mixed.log_density_and_grad(point)
        assert value == pytest.approx(exact, abs=1e-6)
        assert mixed.log_density(point) == pytest.approx(exact, abs=1e-6)
        np.testing.assert_allclose(flat(gradient), flat(q.grad_log_density(point)), rtol=1e-12)


@pytest.mark.parametrize("gap, warned", [(0.0, False), (0.005, True), (1.0, False)],
                         ids=["the same", "nearly the same", "far apart"])
def test_components_whose_labellings_overlap_in_part_are_warned_of_above_the_exact_rank(gap, warned):
    """Above LABEL_MIXING_MAX_RANK the mixture leaves out labellings that do not leave q the same; where two
    components are neither the same nor apart (a swap costing q under LABELLINGS_APART_NATS) that is said."""
    from sepsti.core.errors import ConvergenceWarning
    from sepsti.core.evidence.rank_selection import ChainTask
    from sepsti.core.evidence.reference_path import LABEL_MIXING_MAX_RANK, REFERENCE_PRESET, ReferencePathChains

    rank = LABEL_MIXING_MAX_RANK + 1
    rng = np.random.default_rng(4)

    class Density:
        name = "stub"

        def rates_at(self, rank):
            return 1.0, 1.0

        def mode(self, rank, stream, iterations):
            factors = [np.exp(rng.normal(0.0, 2.0, size=(n, rank))) for n in (30, 25)]
            for F in factors:
                F[:, 1] = F[:, 0] * np.exp(gap)
            return factors, (factors[1].sum(axis=0), factors[0].sum(axis=0))

    factory = ReferencePathChains(Density(), REFERENCE_PRESET.chain, settings={}, data_digest="x")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        factory.prepare([ChainTask(rank, 1, 0, 0.5)], seed=0, comm=None, threads=1)
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(messages) == warned and all(m.startswith(f"R={rank}: q has components") for m in messages)
    assert factory._references[rank, 0][0].classes.count(2) == (gap == 0.0)


def test_parafac_reference_path_agrees_with_chib_at_rank_one():
    # SPL'18-shaped counts (10 x 15 x 20, lambda = 3, true R = 2) at R = 1, where the posterior is unimodal:
    # Chib's method with the factor ordinates (3000 Gibbs sweeps) against the reference path
    from sepsti.core.evidence.chib import chib_log_marginal_likelihood
    from sepsti.core.evidence.parafac_rank import select_parafac_rank
    from sepsti.core.models.pltf import pltf_model
    from sepsti.corpora.tensors import simulate_dense

    X, _ = simulate_dense((10, 15, 20), 2, prior_rate=3.0, rng=stream(0, 5000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = select_parafac_rank(X, [1], prior_rate=3.0, seed=1, num_intervals=8, num_replicates=3)
        model = pltf_model("ir,jr,kr->ijk", dict(i=10, j=15, k=20, r=1), prior_shape=1.0, prior_rate=3.0)
        chib = chib_log_marginal_likelihood(model, X.astype(np.int64), num_burn_in=1000, num_samples=2000,
                                            method="factors", point="mean", seed=0)
    joint = np.hypot(ours.stderr[0], chib.stderr)
    assert abs(ours.log_marginal_likelihood[0] - chib.log_marginal_likelihood) < 4 * joint + 0.1, \
        (ours.log_marginal_likelihood[0], chib.log_marginal_likelihood, joint)


def test_reference_path_does_not_depend_on_threads(rng):
    X = PoissonNMF.sample(rng, (14, 11), 2, rate_W=5.0, rate_H=5.0)[2]
    settings = dict(prior_rate=5.0, num_intervals=2, num_steps=20, num_keep=10, num_replicates=2, prior_draws=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        one = select_rank_sti(X, [1, 2], threads=1, **settings)
        two = select_rank_sti(X, [1, 2], threads=2, **settings)
    np.testing.assert_array_equal(one.replicates, two.replicates)


def test_nmf_log_density_is_the_model_with_its_gradient_and_threads_do_not_share_its_workspace():
    from concurrent.futures import ThreadPoolExecutor

    from scipy.stats import poisson

    X = PoissonNMF.sample(stream(6, 1), (20, 15), 2, rate_W=1.0, rate_H=1.0)[2]
    density = NMFLogDensity(X, 1.5)
    rng = stream(6, 2)
    points = [[rng.normal(size=(20, 2)), rng.normal(size=(15, 2))] for _ in range(8)]
    U, V = points[0]
    # Exp(1.5) priors on W = e^U and H^T = e^V, with the Jacobian e^u of each entry
    expected = (poisson.logpmf(X, np.exp(U) @ np.exp(V).T).sum()
                + sum(np.sum(np.log(1.5) + u - 1.5 * np.exp(u)) for u in (U, V)))
    value, gradients = density(points[0])
    assert value == pytest.approx(expected, rel=1e-12)
    for factor, index in ((0, (3, 1)), (1, (7, 0))):
        shifted = [u.copy() for u in points[0]]
        shifted[factor][index] += 1e-6
        assert (density(shifted)[0] - value) / 1e-6 == pytest.approx(gradients[factor][index], rel=1e-4, abs=1e-4)
    serial = [density(p) for p in points]
    with ThreadPoolExecutor(max_workers=4) as pool:
        threaded = list(pool.map(density, points * 4))
    for (v, g), (v2, g2) in zip(serial * 4, threaded):
        assert v == v2 and all(np.array_equal(a, b) for a, b in zip(g, g2))


def test_parafac_reference_path_scores_every_rank_with_its_one_model():
    # one PoissonParafac serves every rank's factors on the reference path: its checks take any R
    from sepsti.core.evidence.parafac_rank import select_parafac_rank

    X = np.random.default_rng(0).poisson(1.0, (5, 6, 7)).astype(float)
    result = select_parafac_rank(X, [1, 2], num_intervals=2, num_steps=20, num_keep=10, num_replicates=2)
    assert np.all(np.isfinite(result.log_marginal_likelihood))


def _gaussian_target_and_reference(sizes=(3, 2), width=1.0):
    """A LogSpaceReference q and a normalised diagonal Gaussian target p, with E_b[log p - log q] in closed form.

    Along the geometric path q^(1-b) p^b the tempered density is Gaussian with precision (1-b) S^-1 + b P.
    ``width`` scales the target's standard deviations.
    """
    rng = np.random.default_rng(1)
    shapes = [(n, 1) for n in sizes]
    q = LogSpaceReference(tuple(rng.normal(size=s) for s in shapes), tuple(rng.uniform(1, 5, size=s) for s in shapes),
                          random_ridge_precision(rng, 1, 2, 0.5, 2.0))
    S = dense_covariance(q)
    Si = np.linalg.inv(S)
    mq = flat(q.means)
    k = mq.size
    mp = mq + rng.normal(0, 0.7, k)
    dp = rng.uniform(0.5, 3.0, k) / width ** 2
    P = np.diag(dp)

    class Density:
        name = "gauss"

        def __call__(self, logs):
            x = flat(logs)
            z = x - mp
            value = float(-0.5 * (k * np.log(2 * np.pi) - np.sum(np.log(dp)) + z @ (dp * z)))
            return value, [part.reshape(-1, 1) for part in np.split(-dp * z, [sizes[0]])]

    def expected(b):
        Sb = np.linalg.inv((1 - b) * Si + b * P)
        mu = Sb @ ((1 - b) * Si @ mq + b * P @ mp)

        def e_log_normal(m, prec):
            d = mu - m
            return -0.5 * (k * np.log(2 * np.pi) - np.linalg.slogdet(prec)[1] + np.trace(prec @ Sb) + d @ prec @ d)
        return e_log_normal(mp, P) - e_log_normal(mq, Si)
    return q, Density(), expected


@pytest.mark.parametrize("b", [0.3, 0.8])
def test_reference_path_tempered_chains_match_the_closed_form_gaussian_integrand(b):
    from dataclasses import replace
    from sepsti.core.evidence.reference_path import REFERENCE_PRESET, ReferencePathChains
    from sepsti.core.evidence.sti import chain_summary
    q, density, expected = _gaussian_target_and_reference()
    chain = replace(REFERENCE_PRESET.chain, num_steps=1000, num_keep=700)
    factory = ReferencePathChains(density, chain, settings={}, data_digest="x")
    traces = np.array([factory._mala(q, None, b, np.random.default_rng(100 + c), lambda n: None, chain.num_steps)
                       for c in range(6)])
    mean, se, _ = chain_summary(traces)
    # tolerance: 4 Monte-Carlo standard errors (autocorrelation-aware, pooled over the 6 chains)
    assert abs(mean - expected(b)) < 4 * se


def _label_symmetric_gaussian(separation):
    """A normalised target the same in every labelling of three components, and a q near one of them.

    p(F1, F2) = (1/3!) sum_pi N((F1, F2)_pi; mu, diag(1 / dp)), two factors of 2 x 3: log p(X | R) = 0 exactly.
    Component k's mean is a common one plus ``separation`` times k, so small separations make the labellings
    overlap and large ones keep them apart.
    """
    from scipy.special import logsumexp

    rng = np.random.default_rng(5)
    common = [rng.normal(size=(2, 1)) for _ in range(2)]
    mu = [c + separation * np.arange(3)[None, :] for c in common]
    dp = [rng.uniform(1.0, 3.0, size=(2, 3)) for _ in range(2)]
    permutations = [list(p) for p in itertools.permutations(range(3))]
    constant = -0.5 * sum(np.sum(np.log(2 * np.pi / d)) for d in dp) - math.log(6)

    class Density:
        name = "gauss"

        def __call__(self, logs):
            terms, gradients = [], []
            for p in permutations:
                inverse = np.argsort(p)
                z = [F[:, p] - m for F, m in zip(logs, mu)]
                terms.append(constant - 0.5 * sum(np.sum(d * v ** 2) for d, v in zip(dp, z)))
                gradients.append([(-d * v)[:, inverse] for d, v in zip(dp, z)])
            weights = np.exp(np.array(terms) - logsumexp(terms))
            return float(logsumexp(terms)), [sum(w * g[f] for w, g in zip(weights, gradients)) for f in range(2)]

    q = LogSpaceReference(tuple(m + rng.normal(0.0, 0.3, size=m.shape) for m in mu),
                          tuple(d * rng.uniform(0.6, 1.6, size=d.shape) for d in dp),
                          random_ridge_precision(rng, 3, 2, 1.0, 3.0))
    return q, Density()


@pytest.mark.parametrize("separation", [0.3, 8.0], ids=["labellings overlap", "labellings apart"])
def test_reference_path_measures_every_labelling_of_a_target_that_is_the_same_in_each(separation):
    """The whole path on a closed form: log p(X | R) = 0 whether the labellings overlap or not. q alone with log R!
    added gives +log 3! where they overlap; q alone with nothing added -log 3! where they are apart."""
    from dataclasses import replace

    from sepsti.core.evidence.rank_selection import ChainTask
    from sepsti.core.evidence.reference_path import REFERENCE_PRESET, LabelMixedReference, ReferencePathChains

    from sepsti.core.evidence.sti import TemperatureGrid

    q, density = _label_symmetric_gaussian(separation)
    chain = replace(REFERENCE_PRESET.chain, num_steps=150, num_keep=75, prior_draws=300)
    factory = ReferencePathChains(density, chain, settings={}, data_digest="x")
    grid = TemperatureGrid(8, "beta", 2.0, "simpson")  # the preset's at half its temperatures
    estimates = []
    for replicate in range(8):
        factory._references[3, replicate] = (LabelMixedReference(q), None)
        means = [factory.run(ChainTask(3, i, replicate, float(b)), seed=11, progress=lambda n: None).trace.mean()
                 for i, b in enumerate(grid.temperatures)]
        estimates.append(grid.weights @ means)
    # the replicates are independent: their spread's standard error (t with 7 df; 4 of them is P < 0.006)
    se = np.std(estimates, ddof=1) / np.sqrt(8)
    assert abs(np.mean(estimates)) < 4 * se, (np.mean(estimates), se)
    assert se < 0.2  # small enough to tell 0 from +-log 3! = 1.79


def test_chains_from_q_and_from_a_chain_at_b1_err_on_either_side_of_an_unsettled_value():
    """Short chains on a target three times wider than q: started from q they sit low, started from the end of a
    chain at b = 1 high, each by more than 4 of its standard errors -- so replicates started both ways have a
    spread that holds the shortfall, where replicates started one way agree on a wrong value."""
    from dataclasses import replace
    from sepsti.core.evidence.reference_path import REFERENCE_PRESET, ReferencePathChains, settled_state
    q, density, expected = _gaussian_target_and_reference(sizes=(50, 50), width=3.0)
    factory = ReferencePathChains(density, replace(REFERENCE_PRESET.chain, num_steps=60, num_keep=30), settings={},
                                  data_digest="x")
    start = settled_state(density, q, 1.0, np.random.default_rng(7), 2000)
    b = 0.9
    low, high = (np.array([factory._mala(q, where, b, np.random.default_rng(seed + c), lambda n: None, 60).mean()
                           for c in range(8)]) for where, seed in ((None, 100), (start, 200)))
    # between-chain standard errors of the two means (independent chains)
    assert low.mean() + 4 * low.std(ddof=1) / np.sqrt(8) < expected(b) < high.mean() - 4 * high.std(ddof=1) / np.sqrt(8)


def test_odd_replicates_start_from_the_end_of_a_chain_at_b1(rng):
    from sepsti.core.evidence.rank_selection import SHARED_KEY, ChainTask
    from sepsti.core.evidence.reference_path import (PILOT_LENGTH, REFERENCE_PRESET, NMFLogDensity,
                                                     ReferencePathChains, settled_state)
    from sepsti.core.random import stream
    from dataclasses import replace
    density = NMFLogDensity(rng.poisson(3.0, (6, 5)).astype(float), 0.05)
    chain = replace(REFERENCE_PRESET.chain, num_steps=20, num_keep=10, init_iterations=50)
    factory = ReferencePathChains(density, chain, settings={}, data_digest="x")
    factory.prepare([ChainTask(2, 3, r, 0.5) for r in range(3)], seed=4, comm=None, threads=1)
    assert [factory._references[2, r][1] is None for r in range(3)] == [True, False, True]
    q, start = factory._references[2, 1]
    pilot = settled_state(density, q.reference, 1.0, stream(4, 2, SHARED_KEY, 2, 1), PILOT_LENGTH * 20)
    expected = q.reference.relabelled(pilot)  # in q's labelling
    for got, want in zip(start, expected):
        np.testing.assert_array_equal(got, want)
    assert factory.settings["starts"]["odd_replicates"] == f"the end of a {PILOT_LENGTH * 20}-iteration chain at b = 1"


def test_reference_at_mode_keeps_each_entrys_expected_count_along_the_ridge(rng):
    """q is centred on the mode moved along each component's ridge, where W H and each entry's expected count F e
    stay as they were: an entry's precision is that count plus the prior's curvature rate F at q's centre (the
    exposures left at the mode's, so the counts moved with F, passed before)."""
    F1, F2 = rng.uniform(0.2, 3.0, (5, 2)), rng.uniform(0.2, 3.0, (4, 2))
    exposures, rates = (F2.sum(axis=0), F1.sum(axis=0)), (0.3, 0.7)
    q = reference_at_mode((F1, F2), exposures, rates)
    G1, G2 = np.exp(q.means[0]), np.exp(q.means[1])
    assert np.abs(G1 / F1 - 1).max() > 0.01  # q's centre is away from the mode
    np.testing.assert_allclose(G1 @ G2.T, F1 @ F2.T, rtol=1e-12)
    for F, e, rate, G, precision in zip((F1, F2), exposures, rates, (G1, G2), q.precisions):
        np.testing.assert_allclose(precision, F * e + rate * G, rtol=1e-12)


def test_reference_path_exact_draws_at_b0_match_the_closed_form_integrand():
    from dataclasses import replace
    from sepsti.core.evidence.rank_selection import ChainTask
    from sepsti.core.evidence.reference_path import REFERENCE_PRESET, ReferencePathChains
    q, density, expected = _gaussian_target_and_reference()
    chain = replace(REFERENCE_PRESET.chain, num_steps=300, num_keep=150, prior_draws=4000)
    factory = ReferencePathChains(density, chain, settings={}, data_digest="x")
    factory._references[(1, 0)] = (q, None)
    trace = factory.run(ChainTask(1, 0, 0, 0.0), seed=3, progress=lambda n: None).trace
    assert trace.size == 4000  # prior_draws exact draws, not num_keep (150 passed before)
    # even replicates start from q, odd ones from a chain at b = 1: two groups for the halves check (one group of
    # all replicates passed before)
    assert factory.start_groups(5) == [0, 1, 0, 1, 0]
    # b = 0 uses iid draws of q: standard error of the mean is sd / sqrt(n); tolerance 4 standard errors
    assert abs(trace.mean() - expected(0.0)) < 4 * trace.std(ddof=1) / np.sqrt(trace.size)


@pytest.mark.parametrize("precision", [1.0, 400.0], ids=["start step too short", "start step too long"])
def test_mala_step_adapts_to_the_target_acceptance_on_a_gaussian(precision):
    """After burn-in, MALA on a Gaussian target accepts TARGET_ACCEPTANCE of its proposals (across-chain mean)."""
    from dataclasses import replace

    from sepsti.core.evidence.reference_path import REFERENCE_PRESET, TARGET_ACCEPTANCE, ReferencePathChains

    q, _, _ = _gaussian_target_and_reference()

    class ShiftedGaussian:
        """log N(m + 0.3, S / precision) up to a constant, for q = N(m, S): isotropic in q's metric."""

        name = "gauss"

        def __call__(self, logs):
            shifted = [u - 0.3 for u in logs]
            return precision * q.log_density(shifted), [precision * g for g in q.grad_log_density(shifted)]

    chain = replace(REFERENCE_PRESET.chain, num_steps=600, num_keep=300)
    factory = ReferencePathChains(ShiftedGaussian(), chain, settings={}, data_digest="x")
    # a kept value repeats exactly when, and only when, the proposal was rejected (the integrand is continuous)
    rates = np.array([np.mean(np.diff(factory._mala(q, None, 1.0, np.random.default_rng(300 + c), lambda n: None,
                                                     chain.num_steps)) != 0) for c in range(8)])
    # tolerance: 4 standard errors of the mean over the 8 chains (each chain's step ends somewhere else)
    assert abs(rates.mean() - TARGET_ACCEPTANCE) < 4 * rates.std(ddof=1) / np.sqrt(rates.size), rates


@pytest.mark.parametrize("shape", [(5, 5), (10, 10)])
def test_square_matrices_under_a_weak_prior_recover_the_closed_form(shape):
    """With q's ridge at the prior's curvature at the mode, 13.5 / 9.1 times too flat here, a 5 x 5 matrix gave
    -1.25e11 +- 1.25e11 (chains started on the ridge's exponential walls refused every move) against a closed
    form of -117.70, and a 10 x 10 one -332.81 +- 0.07 against -333.15 (z = +5)."""
    from sepsti.core.errors import ConvergenceWarning

    X = np.random.default_rng(1).poisson(3, shape).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        result = select_rank_sti(X, [1], prior_rate=4e-4)
    exact = rank_one_log_evidence(X, 4e-4)
    assert abs(result.log_marginal_likelihood[0] - exact) < 4 * result.stderr[0], (result.log_marginal_likelihood,
                                                                                   exact, result.stderr)


def _ridge_moments(sizes, curvatures):
    """Mean and covariance of the sum-zero shifts gamma under exp(sum_f n_f gamma_f - c_f e^gamma_f), by adaptive
    quadrature in the coordinates gamma_1, ..., gamma_(F-1) (gamma_F = -their sum) around a Nelder-Mead peak."""
    from scipy import integrate
    from scipy.optimize import minimize

    def log_density(*free):
        gamma = np.append(free, -np.sum(free))
        return float(gamma @ sizes - np.exp(gamma) @ curvatures)

    top = minimize(lambda free: -log_density(*free), np.zeros(len(sizes) - 1), method="Nelder-Mead",
                   options=dict(xatol=1e-10, fatol=1e-12))
    peak = -top.fun
    bounds = [(-30.0, 30.0)] * (len(sizes) - 1)

    def moment(function):
        if len(bounds) == 1:
            return integrate.quad(lambda a: function(a) * np.exp(log_density(a) - peak), *bounds[0],
                                  points=[top.x[0]], limit=200)[0]
        return integrate.dblquad(lambda b, a: function(a, b) * np.exp(log_density(a, b) - peak), *bounds[0],
                                 *bounds[1], epsabs=1e-11)[0]

    d = len(bounds)
    mass = moment(lambda *a: 1.0)
    mean = np.array([moment(lambda *a, i=i: a[i]) for i in range(d)]) / mass
    second = np.array([[moment(lambda *a, i=i, j=j: a[i] * a[j]) for j in range(d)] for i in range(d)]) / mass
    free = second - np.outer(mean, mean)
    full = np.vstack([np.eye(d), -np.ones(d)])  # gamma = full @ free coordinates
    return full @ mean, full @ free @ full.T


@pytest.mark.parametrize("sizes, curvatures", [
    ([5, 5], [0.0068, 0.0068]),           # a 5 x 5 matrix at lambda = 4e-4: flat between two walls
    ([5, 5], [1e-8, 1e-8]),               # walls 1000 times narrower than the peak's curvature says (a grid of
                                          # that curvature's deviations held the density in one point: singular)
    ([20, 21], [0.5, 1.5]),
    ([100, 75], [30.0, 5.0]),             # many rows more in one factor: nearly the Laplace approximation
    ([10, 15, 20], [0.01, 5.01, 10.01]),  # PARAFAC's three factors: a ridge of two dimensions
    ([257, 1661], [7.34, 48.4]),          # a speech-scale EM mode, not the ridge's: its peak is at gamma_W = -3.37
])
def test_ridge_moments_are_the_exact_priors_along_the_ridge(sizes, curvatures):
    sizes, curvatures = np.array(sizes, float), np.array(curvatures)
    means, precisions = ridge_moments(sizes, curvatures[None, :])
    K = ridge_basis(sizes.size)
    mean, covariance = K @ means[0], K @ np.linalg.inv(precisions[0]) @ K.T
    exact_mean, exact_covariance = _ridge_moments(sizes, curvatures)
    scale = np.sqrt(np.abs(covariance).max())
    np.testing.assert_allclose(mean, exact_mean, atol=1e-6 * scale)
    np.testing.assert_allclose(covariance, exact_covariance, rtol=1e-5, atol=1e-9 * scale ** 2)
    laplace = np.linalg.inv(K.T @ np.diag(curvatures) @ K)
    ratio = np.linalg.eigvalsh(laplace).max() / np.linalg.eigvalsh(np.linalg.inv(precisions[0])).max()
    assert ratio > 5 if sizes[0] == sizes[1] == 5 else ratio > 0.9, ratio


def test_each_replicates_q_is_the_one_at_the_mode_of_its_own_stream_and_rank():
    """(rank, replicate)'s q is reference_at_mode at the mode from stream(seed, R, SHARED_KEY, r) after
    init_iterations sweeps, with the prior rates of that rank (replicate 0's mode for every replicate, the
    preset's 2000 sweeps, or the rank-1 matched rate passed before)."""
    from dataclasses import replace

    from sepsti.core.evidence.rank_selection import SHARED_KEY, ChainTask
    from sepsti.core.evidence.reference_path import REFERENCE_PRESET, ReferencePathChains

    density = NMFLogDensity(stream(8, 1).poisson(3.0, (7, 6)).astype(float), "matched")
    chain = replace(REFERENCE_PRESET.chain, num_steps=20, num_keep=10, init_iterations=30)
    factory = ReferencePathChains(density, chain, settings={}, data_digest="x")
    factory.prepare([ChainTask(2, 1, r, 0.5) for r in (0, 2)], seed=5, comm=None, threads=1)
    for replicate in (0, 2):
        factors, exposures = density.mode(2, stream(5, 2, SHARED_KEY, replicate), 30)
        expected = reference_at_mode(factors, exposures, (np.sqrt(2 / density.data_mean),) * 2)
        q = factory._references[2, replicate][0].reference  # mixed over the labellings at rank 2
        for got, want in zip(q.means + q.precisions, expected.means + expected.precisions):
            np.testing.assert_allclose(got, want, rtol=1e-12)


def test_the_pilot_chain_is_four_times_the_longest_chain():
    # docs/rank_selection.md: the odd replicates start from the end of a chain at b = 1 four times the chain length;
    # with lengths per temperature, the longest (the shortest passed before)
    from dataclasses import replace

    from sepsti.core.evidence.reference_path import REFERENCE_PRESET, ReferencePathChains

    chain = replace(REFERENCE_PRESET.chain, num_steps=(20, 50, 30), num_keep=10)
    factory = ReferencePathChains(NMFLogDensity(np.ones((3, 2)), 1.0), chain, settings={}, data_digest="x")
    assert factory.pilot_length == 200
    assert factory.settings["starts"]["odd_replicates"] == "the end of a 200-iteration chain at b = 1"


def test_the_mala_step_adapts_during_burn_in_only_and_the_pilots_over_its_first_half(monkeypatch):
    """The step is adapted during burn-in, then fixed (no adaptation bias in the kept iterations); the pilot
    chain's over its first half (adapting through the kept iterations, or the pilot's throughout, passed before)."""
    from dataclasses import replace

    import sepsti.core.evidence.reference_path as module
    from sepsti.core.evidence.reference_path import REFERENCE_PRESET, ReferencePathChains, settled_state

    steps = []
    move = module.mala_move

    def recording(density, q, b, logs, current, step, rng):
        steps.append(step)
        return move(density, q, b, logs, current, step, rng)

    monkeypatch.setattr(module, "mala_move", recording)
    q, density, _ = _gaussian_target_and_reference()
    factory = ReferencePathChains(density, replace(REFERENCE_PRESET.chain, num_steps=60, num_keep=20), settings={},
                                  data_digest="x")
    factory._mala(q, None, 0.5, np.random.default_rng(1), lambda n: None, 60)
    assert len(set(steps[:41])) == 41 and len(set(steps[40:])) == 1, steps
    steps.clear()
    settled_state(density, q, 1.0, np.random.default_rng(2), 30)
    assert len(set(steps[:16])) == 16 and len(set(steps[15:])) == 1, steps


def test_a_chain_runs_on_its_own_stream_from_its_replicates_start():
    """Chain (R, i, r) draws its noise from stream(seed, R, i, r) (docs/rank_selection.md, seeds): replicates that
    share q are independent (stream(seed, R, i) for every replicate passed before)."""
    from dataclasses import replace

    from sepsti.core.evidence.rank_selection import ChainTask
    from sepsti.core.evidence.reference_path import REFERENCE_PRESET, ReferencePathChains

    q, density, _ = _gaussian_target_and_reference()
    chain = replace(REFERENCE_PRESET.chain, num_steps=40, num_keep=20)
    factory = ReferencePathChains(density, chain, settings={}, data_digest="x")
    factory._references.update({(1, 0): (q, None), (1, 2): (q, None)})
    for replicate in (0, 2):
        got = factory.run(ChainTask(1, 1, replicate, 0.5), seed=6, progress=lambda n: None).trace
        want = factory._mala(q, None, 0.5, stream(6, 1, 1, replicate), lambda n: None, 40)
        np.testing.assert_array_equal(got, want)


def test_without_exact_draws_b0_runs_a_mala_chain_on_q():
    # exact_prior=False: at b = 0 a MALA chain like the others, num_keep values of it (exact draws of q passed before)
    from dataclasses import replace

    from sepsti.core.evidence.rank_selection import ChainTask
    from sepsti.core.evidence.reference_path import REFERENCE_PRESET, ReferencePathChains

    q, density, _ = _gaussian_target_and_reference()
    chain = replace(REFERENCE_PRESET.chain, num_steps=40, num_keep=20, exact_prior=False)
    factory = ReferencePathChains(density, chain, settings={}, data_digest="x")
    factory._references[1, 0] = (q, None)
    got = factory.run(ChainTask(1, 0, 0, 0.0), seed=6, progress=lambda n: None).trace
    np.testing.assert_array_equal(got, factory._mala(q, None, 0.0, stream(6, 1, 0, 0), lambda n: None, 40))


def test_reference_at_mode_centres_each_ridge_on_the_priors_mean_there(rng):
    """q's shift of each component along its ridge from the mode is the mean of the exact prior along it, with
    c_f = lambda_f times factor f's column sums (by quadrature here; the column sums without lambda, or the shift
    the other way, passed before)."""
    F1, F2 = rng.uniform(0.2, 3.0, (5, 2)), rng.uniform(0.2, 3.0, (4, 2))
    rates = (0.3, 0.7)
    q = reference_at_mode((F1, F2), (F2.sum(axis=0), F1.sum(axis=0)), rates)
    shifts = np.stack([q.means[0][0] - np.log(F1[0]), q.means[1][0] - np.log(F2[0])], axis=1)  # (R, 2)
    for r in range(2):
        exact_mean, exact_covariance = _ridge_moments(np.array([5.0, 4.0]),
                                                      np.array([rates[0] * F1[:, r].sum(), rates[1] * F2[:, r].sum()]))
        np.testing.assert_allclose(shifts[r], exact_mean, atol=1e-6)
        K = ridge_basis(2)
        np.testing.assert_allclose(K @ np.linalg.inv(q.ridge_precision[r]) @ K.T, exact_covariance, rtol=1e-5)


def test_matched_rate_of_the_log_density_is_that_of_the_rank_scored():
    # under the matched prior W and H^T of rank R carry Exp(sqrt(R / mean(X))) priors (the rank-1 rate passed before)
    from scipy.stats import poisson

    X = stream(6, 3).poisson(2.0, (6, 5)).astype(float)
    U, V = stream(6, 4).normal(size=(6, 3)), stream(6, 5).normal(size=(5, 3))
    rate = np.sqrt(3 / X.mean())
    expected = (poisson.logpmf(X, np.exp(U) @ np.exp(V).T).sum()
                + sum(np.sum(np.log(rate) + u - rate * np.exp(u)) for u in (U, V)))
    assert NMFLogDensity(X, "matched")([U, V])[0] == pytest.approx(expected, rel=1e-12)


def test_nmf_mode_is_stationary_in_log_space_and_its_exposures_are_the_count_derivatives():
    """density.mode is where the gradient of log p(log W, log H | X) vanishes (the Jacobian's pseudo-count dropped,
    or H's prior rate 1, passed before), and the exposures are d(sum W H)/d(entry) (W's and H's swapped passed
    before)."""
    X = PoissonNMF.sample(stream(7, 1), (12, 10), 2, rate_W=1.0, rate_H=1.0)[2]
    density = NMFLogDensity(X, 0.5)
    (W, Ht), exposures = density.mode(2, stream(7, 2), 3000)
    gradients = density([np.log(W), np.log(Ht)])[1]
    assert max(np.abs(g).max() for g in gradients) < 1e-6, gradients
    for f in range(2):
        for r in range(2):  # the expected total is linear in each entry: one more unit of the entry adds its exposure
            moved = [W.copy(), Ht.copy()]
            moved[f][0, r] += 1.0
            assert exposures[f][r] == pytest.approx((moved[0] @ moved[1].T).sum() - (W @ Ht.T).sum(), rel=1e-9)


def test_parafac_log_density_mode_and_exposures():
    """log p(A, B, C) + log p(X | A, B, C) in log space with its gradient; the mode a stationary point of it under
    three different rates; the exposures d(sum of the rates)/d(entry) (the gradient in the factors instead of their
    logs, the mode under A's rate for every factor, or the exposures of another factor, passed before)."""
    from scipy.stats import poisson

    from sepsti.core.evidence.reference_path import ParafacLogDensity

    X = stream(9, 1).poisson(2.0, (5, 4, 3)).astype(float)
    rates = (0.5, 1.0, 2.0)
    density = ParafacLogDensity(X, rates)
    logs = [stream(9, 2 + f).normal(size=(n, 2)) for f, n in enumerate(X.shape)]
    A, B, C = (np.exp(u) for u in logs)
    expected = (poisson.logpmf(X, np.einsum("ir,jr,kr->ijk", A, B, C)).sum()
                + sum(np.sum(np.log(rate) + u - rate * np.exp(u)) for u, rate in zip(logs, rates)))
    value, gradients = density(logs)
    assert value == pytest.approx(expected, rel=1e-12)
    for f, index in ((0, (3, 1)), (1, (2, 0)), (2, (1, 1))):
        shifted = [u.copy() for u in logs]
        shifted[f][index] += 1e-6
        assert (density(shifted)[0] - value) / 1e-6 == pytest.approx(gradients[f][index], rel=1e-4, abs=1e-4)
    factors, exposures = density.mode(2, stream(9, 5), 3000)
    assert max(np.abs(g).max() for g in density([np.log(F) for F in factors])[1]) < 1e-6
    for f in range(3):
        for r in range(2):  # the expected total is linear in each entry: one more unit of the entry adds its exposure
            moved = [F.copy() for F in factors]
            moved[f][0, r] += 1.0
            assert exposures[f][r] == pytest.approx(
                np.einsum("ir,jr,kr->", *moved) - np.einsum("ir,jr,kr->", *factors), rel=1e-9)
