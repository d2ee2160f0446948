"""NUTS: known Gaussian posteriors, a peer sampler (emcee), simulation-based calibration, tree limits, the U-turn
criterion against a recursive tree."""

import numpy as np
import pytest
from scipy import stats

from sepsti.core.errors import ParameterError
from sepsti.core.random import stream
from sepsti.core.samplers import diagnostics, hmc, nuts
from sepsti.core.samplers.driver import run_chain
from sepsti.core.samplers.warmup import window_adaptation

from test_hmc import assert_moments, gaussian, sample


def test_nuts_100d_gaussian_scales_over_two_orders():
    scales = np.logspace(-1, 1, 100)
    fn, variances = gaussian(scales)
    draws = sample(nuts.build_kernel(fn), fn, np.ones(100), 21, num_warmup=500, num_draws=1000)
    assert_moments(draws, 0.0, variances)
    assert diagnostics.split_rhat(draws).max() < 1.05


def test_nuts_strongly_correlated_2d_gaussian():
    fn, variances = gaussian([1.0, 3.0], correlation=0.99)
    draws = sample(nuts.build_kernel(fn), fn, np.array([2.0, -2.0]), 22, num_warmup=500, num_draws=2000)
    assert_moments(draws, 0.0, variances)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_nuts_gaussians_over_seeds(seed):
    scales = np.logspace(-1, 1, 100)
    fn, variances = gaussian(scales)
    assert_moments(sample(nuts.build_kernel(fn), fn, np.ones(100), seed, num_warmup=1000, num_draws=2000),
                   0.0, variances)
    fn, variances = gaussian([1.0, 3.0], correlation=0.99)
    assert_moments(sample(nuts.build_kernel(fn), fn, np.array([2.0, -2.0]), seed, num_warmup=1000,
                          num_draws=4000), 0.0, variances)


def test_max_tree_depth_caps_the_trajectory(rng):
    fn, _ = gaussian([1.0, 1.0])
    kernel = nuts.build_kernel(fn, max_tree_depth=3)
    state = hmc.init(np.array([0.1, 0.2]), fn)
    for _ in range(20):
        state, info = kernel(rng, state, 1e-3)  # far too small a step to U-turn
        assert info.tree_depth == 3 and info.num_integration_steps == 7 and not info.is_turning


def test_divergence_is_flagged_and_the_state_stays_finite(rng):
    fn, _ = gaussian([1.0, 1.0])
    kernel = nuts.build_kernel(fn)
    state = hmc.init(np.array([0.1, 0.2]), fn)
    new, info = kernel(rng, state, 100.0)
    assert info.is_divergent
    np.testing.assert_array_equal(new.position, state.position)  # the divergent first leaf is never a proposal


def test_a_one_leaf_tree_reports_the_leafs_acceptance_and_energy_worked_out_by_hand():
    """max_tree_depth=1 on N(0, 1): one leapfrog step, whose energy error ΔH is worked out here from where the chain
    moved; the acceptance rate is min(1, exp(-ΔH)) and the energy the moved state's (exp(-2 ΔH), and the start's
    energy reported for the moved state, passed before)."""
    def fn(x):
        return -0.5 * float(x @ x), -x

    kernel = nuts.build_kernel(fn, max_tree_depth=1)
    x0, step = 0.8, 1.2
    state = nuts.init(np.array([x0]), fn)
    errors = []
    for seed in range(40):
        new, info = kernel(np.random.default_rng(seed), state, step)
        x1 = float(new.position[0])
        if x1 == x0:
            continue
        # x1 = x0 + s (p - s x0 / 2) with s = ±step; p1 = p - s (x0 + x1) / 2 (its sign does not matter)
        signed_momentum = (x1 - x0 + 0.5 * step ** 2 * x0) / step  # s p / step
        p1 = signed_momentum - 0.5 * step * (x0 + x1)
        delta = 0.5 * (x1 ** 2 + p1 ** 2) - 0.5 * (x0 ** 2 + signed_momentum ** 2)
        errors.append(delta)
        assert info.tree_depth == 1 and info.num_integration_steps == 1
        assert info.acceptance_rate == pytest.approx(min(1.0, np.exp(-delta)), rel=1e-9)
        assert info.energy == pytest.approx(0.5 * (x1 ** 2 + p1 ** 2), rel=1e-9)
    assert len(errors) > 20 and max(errors) > 0.05  # moves with an energy error to weigh


def test_acceptance_rate_is_the_mean_over_the_leaves_built_when_a_doubling_stops_early():
    """log p(x) = -x: leapfrog conserves energy exactly under a constant force, so every leaf's acceptance is 1 and so
    is their mean, also when a U-turn stops a doubling part way (dividing by the doubling's full size passed
    before)."""
    def fn(x):
        return -float(x.sum()), -np.ones_like(x)

    kernel = nuts.build_kernel(fn)
    state = nuts.init(np.array([0.0]), fn)
    stopped_early = 0
    for seed in range(30):
        _, info = kernel(np.random.default_rng(seed), state, 0.3)
        assert info.is_turning
        assert info.acceptance_rate == pytest.approx(1.0, abs=1e-12)
        stopped_early += info.num_integration_steps < 2 ** info.tree_depth - 1
    assert stopped_early >= 5


def test_doubling_directions_are_fair_and_the_new_subtree_is_favoured():
    """A flat target with max_tree_depth=1: the chain moves by step * direction * p, with p the momentum the kernel
    draws first from its generator. Forward and backward are equally likely, within 4 binomial standard errors (a
    bias to forward passed before), and the one leaf, of the start's weight, is always taken (the uniform progressive
    draw, taking it half the time, passed before)."""
    def fn(x):
        return 0.0, np.zeros_like(x)

    kernel = nuts.build_kernel(fn, max_tree_depth=1)
    state = nuts.init(np.array([0.0]), fn)
    n = 1000
    forward = 0
    for seed in range(n):
        new, _ = kernel(np.random.default_rng(seed), state, 0.5)
        momentum = np.random.default_rng(seed).standard_normal(1)
        direction = new.position[0] / (0.5 * momentum[0])
        assert abs(abs(direction) - 1.0) < 1e-12
        forward += direction > 0
    assert abs(forward - n / 2) < 4 * np.sqrt(n * 0.25)


def logistic_posterior(seed):
    """Posterior of a 3-coefficient logistic regression (N(0, 2²) prior): non-Gaussian, no closed form."""
    rng = stream(seed, 99)
    features = np.column_stack([np.ones(40), rng.standard_normal((40, 2))])
    labels = (rng.uniform(size=40) < 1 / (1 + np.exp(-features @ np.array([0.5, 1.5, -1.0])))).astype(float)

    def logdensity_and_grad(beta):
        logits = features @ beta
        logp = labels @ logits - np.logaddexp(0, logits).sum() - 0.125 * beta @ beta
        return float(logp), features.T @ (labels - 1 / (1 + np.exp(-logits))) - 0.25 * beta

    return logdensity_and_grad


def test_nuts_agrees_with_emcee_on_logistic_regression():
    emcee = pytest.importorskip("emcee")
    fn = logistic_posterior(5)
    draws = sample(nuts.build_kernel(fn), fn, np.zeros(3), 31, num_warmup=500, num_draws=2000)
    flat = draws.reshape(-1, 3)

    walkers = 24
    ensemble = emcee.EnsembleSampler(walkers, 3, lambda b: fn(b)[0])
    ensemble.random_state = np.random.RandomState(7).get_state()  # emcee draws from a legacy RandomState
    ensemble.run_mcmc(stream(7, 1).normal(0, 0.1, (walkers, 3)), 4000)
    chain = ensemble.get_chain(discard=1000)                  # (steps, walkers, 3)
    tau = ensemble.get_autocorr_time(discard=1000, tol=50)
    peer = chain.reshape(-1, 3)
    peer_ess = peer.shape[0] / tau
    centred = peer - peer.mean(0)
    tau_sq = emcee.autocorr.integrated_time((centred ** 2).reshape(chain.shape), tol=0)

    se_mean = np.sqrt(diagnostics.mcse_mean(draws) ** 2 + peer.var(0) / peer_ess)
    se_var = np.sqrt(diagnostics.mcse_variance(draws) ** 2 + (centred ** 2).var(0) * tau_sq / peer.shape[0])
    z_mean = (flat.mean(0) - peer.mean(0)) / se_mean
    z_var = (flat.var(0) - peer.var(0)) / se_var
    assert np.abs(z_mean).max() < 4, z_mean
    assert np.abs(z_var).max() < 4, z_var


def simulation_based_calibration(num_replications, num_draws, seed, *, thin=2):
    """Ranks of the true parameter among posterior draws in a conjugate normal model.

    θ ~ N(0, diag(1, 4)), y_i ~ N(θ, I) for 3 observations. NUTS starts far
    from the truth, adapts, then keeps ``num_draws`` draws thinned by ``thin``.
    """
    prior_sd = np.array([1.0, 2.0])
    ranks = []
    for rep in range(num_replications):
        rng = stream(seed, rep)
        theta = prior_sd * rng.standard_normal(2)
        data = theta + rng.standard_normal((3, 2))
        total = data.sum(0)

        def fn(x, total=total):
            return (-0.5 * np.sum((x / prior_sd) ** 2) - 0.5 * np.sum((data - x) ** 2),
                    -x / prior_sd ** 2 + total - 3 * x)

        kernel = nuts.build_kernel(fn)
        warm = window_adaptation(kernel, hmc.init(np.array([3.0, -3.0]), fn), rng, fn, num_steps=150,
                                 adapt_mass_matrix=False)
        result = run_chain(lambda r, s, i: kernel(r, s, warm.step_size), warm.state, rng,
                           num_steps=num_draws * thin, thin=thin)
        ranks.append((result.samples < theta).sum(0))
    return np.array(ranks)


def assert_uniform_ranks(ranks, num_draws, *, bins=10, alpha=1e-3):
    for j in range(ranks.shape[1]):
        counts = np.bincount(ranks[:, j] * bins // (num_draws + 1), minlength=bins)
        p_value = stats.chisquare(counts).pvalue
        assert p_value > alpha, f"parameter {j}: rank histogram {counts} (p = {p_value:.2g})"


def test_simulation_based_calibration_fast():
    assert_uniform_ranks(simulation_based_calibration(100, 99, 41), 99)


@pytest.mark.slow
def test_simulation_based_calibration_long():
    assert_uniform_ranks(simulation_based_calibration(1000, 99, 42), 99)


def test_low_rank_preconditioner_whitens_a_gaussian(rng):
    from sepsti.core.samplers.mass_matrix import low_rank_preconditioner, numerical_precision, reparametrize

    fn, _ = gaussian([0.01, 3.0], correlation=0.9)
    center = np.array([0.0, 0.0])
    precision = numerical_precision(fn, center)
    transform = low_rank_preconditioner(precision, center, rank=2, floor=0.0)
    fn_u, to_position = reparametrize(fn, transform)
    u = rng.standard_normal(2)
    logp_u, grad_u = fn_u(u)
    np.testing.assert_allclose(grad_u, -u, rtol=1e-6, atol=1e-8)  # u is standard normal
    assert logp_u == pytest.approx(-0.5 * u @ u, rel=1e-6)
    assert to_position(u).shape == (2,) and to_position(np.zeros((5, 2))).shape == (5, 2)


def test_low_rank_preconditioner_rescales_the_stiffest_directions_at_or_above_the_floor():
    """Precision diag(0.5, 4, 0.25) (eigenvalues exact): rank 1 rescales the stiffest direction only, by 1/2; rank 2
    with floor 0.5 also the one whose eigenvalue equals the floor, by 1/sqrt(0.5) (the least stiff directions, and
    an eigenvalue equal to the floor left out, passed before)."""
    from sepsti.core.samplers.mass_matrix import low_rank_preconditioner, reparametrize

    precision = np.diag([0.5, 4.0, 0.25])
    center = np.array([1.0, -2.0, 0.5])
    for rank, scales in ((1, [1.0, 0.5, 1.0]), (2, [np.sqrt(2.0), 0.5, 1.0]), (3, [np.sqrt(2.0), 0.5, 1.0])):
        transform = low_rank_preconditioner(precision, center, rank=rank, floor=0.5)
        _, to_position = reparametrize(lambda x: (0.0, np.zeros_like(x)), transform)
        # θ = center + A u, so the columns of A are the images of the unit vectors
        np.testing.assert_allclose(to_position(np.eye(3)) - center, np.diag(scales), atol=1e-12)


def dense_gaussian(covariance):
    precision = np.linalg.inv(covariance)

    def logdensity_and_grad(x):
        px = precision @ x
        return -0.5 * float(x @ px), -px

    return logdensity_and_grad


def sample_dense(target_fn, position, seed, *, num_warmup, num_draws, num_chains=2):
    kernel = nuts.build_kernel(target_fn)
    chains, steps = [], []
    for chain in range(num_chains):
        rng = stream(seed, chain)
        warm = window_adaptation(kernel, hmc.init(position, target_fn), rng, target_fn, num_steps=num_warmup,
                                 metric="dense")
        assert warm.inverse_mass_matrix.shape == (position.size, position.size)
        result = run_chain(lambda r, s, i, warm=warm: kernel(r, s, warm.step_size, warm.inverse_mass_matrix),
                           warm.state, rng, num_steps=num_draws)
        chains.append(result.samples)
        steps.append(warm.step_size)
    return np.stack(chains), np.array(steps)


def test_welford_covariance_is_the_regularised_sample_covariance(rng):
    from sepsti.core.samplers.mass_matrix import welford_covariance

    init, update, final = welford_covariance()
    draws = rng.standard_normal((40, 3)) @ np.array([[1.0, 0.5, 0.0], [0.0, 2.0, 0.3], [0.0, 0.0, 0.1]])
    state = init(3)
    for x in draws:
        state = update(state, x)
    expected = (40 / 45) * np.cov(draws, rowvar=False) + 1e-3 * (5 / 45) * np.eye(3)
    np.testing.assert_allclose(final(state), expected, rtol=1e-12, atol=1e-14)


def test_dense_momentum_has_covariance_m_and_matching_kinetic_energy():
    from sepsti.core.samplers.integrators import kinetic_energy

    inverse_mass = np.array([[2.0, 0.9, 0.1], [0.9, 1.0, -0.3], [0.1, -0.3, 0.5]])
    factor = np.linalg.cholesky(inverse_mass)
    momentum = hmc.sample_momentum(stream(3, 0), inverse_mass)
    z = stream(3, 0).standard_normal(3)
    np.testing.assert_allclose(factor.T @ momentum, z, rtol=1e-12)  # p = L^-T z, so Cov p = (L L^T)^-1 = M
    assert kinetic_energy(momentum, inverse_mass) == pytest.approx(0.5 * z @ z, rel=1e-12)
    with pytest.raises(ValueError):
        hmc.sample_momentum(stream(3, 0), -inverse_mass)


def test_nuts_dense_metric_on_strongly_correlated_2d_gaussian():
    fn, variances = gaussian([1.0, 3.0], correlation=0.99)
    draws, _ = sample_dense(fn, np.array([2.0, -2.0]), 23, num_warmup=500, num_draws=1000)
    assert_moments(draws, 0.0, variances)



def test_nuts_dense_metric_on_50d_gaussian_with_random_dense_covariance():
    rng = stream(24, 99)
    rotation, _ = np.linalg.qr(rng.standard_normal((50, 50)))
    covariance = (rotation * np.logspace(-2, 1, 50)) @ rotation.T   # eigenvalues 0.01..10, dense
    fn = dense_gaussian(covariance)
    draws, steps = sample_dense(fn, np.ones(50), 24, num_warmup=500, num_draws=500)
    assert_moments(draws, 0.0, np.diag(covariance))
    kernel = nuts.build_kernel(fn)
    diagonal = window_adaptation(kernel, hmc.init(np.ones(50), fn), stream(24, 0), fn, num_steps=500)
    # Whitened, the target is isotropic: the step is set by the dimension, not by the 1000:1 eigenvalue spread.
    assert steps.min() > 3 * diagonal.step_size


def test_one_nuts_transition_from_exact_draws_preserves_the_target():
    """Start at iid draws of N(0, diag(1, 9)); after one transition (step 1.3) the draws must still be that Gaussian."""
    scales = np.array([1.0, 3.0])

    def fn(x):
        return -0.5 * float(np.sum((x / scales) ** 2)), -x / scales ** 2
    kernel = nuts.build_kernel(fn)
    rng = stream(7, 0)
    n = 8000
    out = np.empty((n, 2))
    for i in range(n):
        state, _ = kernel(rng, nuts.init(scales * rng.standard_normal(2), fn), 1.3)
        out[i] = state.position
    z = out / scales
    # the outputs are iid N(0, 1) per coordinate: standard errors of E z, E z^2, E z^4 are
    # 1/sqrt(n), sqrt(2/n), sqrt(96/n); all six must lie within 4 standard errors
    zs = np.concatenate([z.mean(0) * np.sqrt(n), (np.mean(z ** 2, 0) - 1) / np.sqrt(2 / n),
                         (np.mean(z ** 4, 0) - 3) / np.sqrt(96 / n)])
    assert np.abs(zs).max() < 4, zs


def test_one_nuts_transition_with_an_inverse_mass_preserves_a_skewed_target():
    """x0 = log of a Gamma(1.5) variable (skewed), x1 ~ N(0, 9), inverse mass diag(0.5, 4): exact draws stay exact."""
    a = 1.5

    def fn(x):
        e = np.exp(x[0])
        return float(a * x[0] - e - x[1] ** 2 / 18.0), np.array([a - e, -x[1] / 9.0])
    kernel = nuts.build_kernel(fn)
    inv_mass = np.array([0.5, 4.0])
    rng = stream(8, 0)
    n = 8000
    ref = stats.loggamma(a)
    start = np.column_stack([ref.rvs(n, random_state=1), 3 * rng.standard_normal(n)])
    out = np.empty((n, 2))
    for i in range(n):
        state, _ = kernel(rng, nuts.init(start[i], fn), 1.0, inv_mass)
        out[i] = state.position
    # KS against the exact marginals (a false alarm has probability 1e-4 per test)
    assert stats.kstest(out[:, 0], ref.cdf).pvalue > 1e-4
    assert stats.kstest(out[:, 1] / 3, "norm").pvalue > 1e-4
    # closed-form central moments of log Gamma(a): each within 4 Monte-Carlo standard errors (sample sd / sqrt(n))
    m, v = ref.mean(), ref.var()
    third = float(ref.stats(moments="s")) * v ** 1.5
    c = out[:, 0] - m
    for values, exact in [(c, 0.0), (c ** 2, v), (c ** 3, third)]:
        assert abs(values.mean() - exact) < 4 * values.std() / np.sqrt(n), (values.mean(), exact)


def recursive_tree_leaves(logdensity_and_grad_fn, position, momentum, step_size, forwards, inverse_mass_matrix=None,
                          *, max_tree_depth=10, divergence_threshold=1000.0):
    """Leaves of a recursive NUTS tree with Stan's U-turn checks, merged sub-trees' joins included.

    The doublings go forwards where ``forwards`` (an iterable of bools) says so. The inverse mass matrix is diagonal
    (shape ``(dim,)``, the identity by default) or dense; the checks take the leaves' velocities M⁻¹p against sums of
    momenta. A sub-tree that turns, or whose last leaf's energy exceeds the initial one by more than
    ``divergence_threshold``, ends the tree with its leaves counted.
    """
    if inverse_mass_matrix is None:
        inverse_mass_matrix = np.ones_like(position)

    def sharp(p):
        return inverse_mass_matrix @ p if inverse_mass_matrix.ndim == 2 else inverse_mass_matrix * p

    def energy(x, p):
        return -logdensity_and_grad_fn(x)[0] + 0.5 * float(p @ sharp(p))

    energy0 = energy(position, momentum)
    count = 0

    def leapfrog(x, p, step):
        nonlocal count
        count += 1
        p = p + 0.5 * step * logdensity_and_grad_fn(x)[1]
        x = x + step * sharp(p)
        return x, p + 0.5 * step * logdensity_and_grad_fn(x)[1]

    def turns(begin, end, rho):  # leaves as (momentum, velocity)
        return begin[1] @ rho <= 0 or end[1] @ rho <= 0

    def merged_turns(first, second):  # each (sum, first leaf, last leaf), in the order built
        (rho1, begin1, end1), (rho2, begin2, end2) = first, second
        return (turns(begin1, end2, rho1 + rho2) or turns(begin1, begin2, rho1 + begin2[0])
                or turns(end1, end2, rho2 + end1[0]))

    def build(x, p, depth, step):  # -> (x, p, (sum, first leaf, last leaf)), or None once a sub-tree ended the tree
        if depth == 0:
            x, p = leapfrog(x, p, step)
            if not energy(x, p) - energy0 <= divergence_threshold:
                return None
            leaf = (p, sharp(p))
            return x, p, (p, leaf, leaf)
        inner = build(x, p, depth - 1, step)
        if inner is None:
            return None
        x, p, first = inner
        outer = build(x, p, depth - 1, step)
        if outer is None or merged_turns(first, outer[2]):
            return None
        return outer[0], outer[1], (first[0] + outer[2][0], first[1], outer[2][2])

    ends = {True: (position, momentum), False: (position, momentum)}  # the forward and the backward end
    start = (momentum, sharp(momentum))
    tree = (momentum, start, start)  # in time order: sum, first leaf, last leaf
    for depth, forward in zip(range(max_tree_depth), forwards):
        grown = build(*ends[forward], depth, step_size if forward else -step_size)
        if grown is None:
            break
        ends[forward] = grown[:2]
        rho, begin, end = grown[2]
        if forward:
            turned = merged_turns(tree, (rho, begin, end))
            tree = (tree[0] + rho, tree[1], end)
        else:  # built backwards in time: its last leaf is the tree's new first
            turned = merged_turns((rho, end, begin), tree)
            tree = (tree[0] + rho, end, tree[2])
        if turned:
            break
    return count


class ConstantUniform:
    """A generator whose uniform draws are all ``u`` (every doubling forwards for u < 1/2) and whose momentum is set."""

    def __init__(self, u, momentum):
        self.u, self.momentum = u, momentum

    def random(self):
        return self.u

    def standard_normal(self, shape):
        return self.momentum.reshape(shape)


class ScriptedUniform:
    """A generator whose uniform draws are ``uniforms``, in order, and whose standard normal draw is ``normal``."""

    def __init__(self, uniforms, normal):
        self.uniforms, self.normal = iter(uniforms), normal

    def random(self):
        return next(self.uniforms)

    def standard_normal(self, shape):
        return self.normal.reshape(shape)


def test_tree_lengths_match_a_recursive_tree_with_the_checks_across_merged_subtrees():
    # Stan's checks across the joins of merged sub-trees (stan-dev/stan#2799), on both directions' trees
    def standard_normal(x):
        return -0.5 * float(x @ x), -x

    kernel = nuts.build_kernel(standard_normal)
    rng = stream(51, 0)
    for dim, step in ((2, 0.9), (10, 0.4), (50, 0.4), (50, 0.25), (50, 1.1), (200, 0.4)):
        for _ in range(15):
            position, momentum = rng.standard_normal(dim), rng.standard_normal(dim)
            for u, forward in ((0.25, True), (0.75, False)):
                _, info = kernel(ConstantUniform(u, momentum), hmc.init(position, standard_normal), step)
                expected = recursive_tree_leaves(standard_normal, position, momentum, step, [forward] * 10)
                assert info.num_integration_steps == expected, (dim, step, forward)


def test_tree_lengths_match_a_recursive_tree_with_non_identity_metrics_and_mixed_directions():
    # On a correlated target with metrics that differ from the identity, M⁻¹p ≠ p at every leaf: the checks must
    # take velocities against sums of momenta, the sums across a join included. Directions are random per doubling.
    covariance = np.array([[1.0, 2.85], [2.85, 9.0]])  # sds 1 and 3, correlation 0.95
    precision = np.linalg.inv(covariance)

    def correlated(x):
        grad = -(precision @ x)
        return 0.5 * float(x @ grad), grad

    kernel = nuts.build_kernel(correlated)
    rng = stream(53, 0)
    metrics = {"dense": np.array([[2.0, 1.2], [1.2, 4.0]]), "dense, the covariance": covariance,
               "diagonal": np.array([1.0, 9.0])}
    for name, inverse_mass_matrix in metrics.items():
        # steps as fractions of the leapfrog's stability limit 2 / sqrt(largest eigenvalue of M⁻¹Σ⁻¹)
        dense = inverse_mass_matrix if inverse_mass_matrix.ndim == 2 else np.diag(inverse_mass_matrix)
        limit = 2 / np.sqrt(np.linalg.eigvals(dense @ precision).real.max())
        for step in limit * np.array([0.1, 0.3, 0.6, 0.9]):
            for _ in range(100):
                position = rng.multivariate_normal(np.zeros(2), covariance)
                normal = rng.standard_normal(2)
                forwards = rng.random(10) < 0.5
                # per doubling the kernel draws its direction, one uniform per leaf after the sub-tree's first and
                # one to accept the sub-tree's proposal: 2**depth + 1 draws
                uniforms = []
                for depth, forward in enumerate(forwards):
                    uniforms += [0.25 if forward else 0.75, *rng.random(2 ** depth)]
                momentum = hmc.sample_momentum(ScriptedUniform([], normal), inverse_mass_matrix)
                _, info = kernel(ScriptedUniform(uniforms, normal), hmc.init(position, correlated), step,
                                 inverse_mass_matrix)
                expected = recursive_tree_leaves(correlated, position, momentum, step, forwards, inverse_mass_matrix)
                assert info.num_integration_steps == expected, (name, step, forwards.astype(int))


def test_mean_tree_length_on_a_standard_normal_matches_stans_criterion():
    """N(0, I_50) at step 0.4 from exact draws: 13 leaves per transition with Stan's criterion (253 without the
    checks across merged sub-trees), and the draws stay standard normal."""
    def standard_normal(x):
        return -0.5 * float(x @ x), -x

    dim, step, n = 50, 0.4, 400
    kernel = nuts.build_kernel(standard_normal)
    rng, reference_rng = stream(52, 0), stream(52, 1)
    leaves, reference_leaves, draws = [], [], []
    for _ in range(n):
        position = rng.standard_normal(dim)
        state, info = kernel(rng, hmc.init(position, standard_normal), step)
        leaves.append(info.num_integration_steps)
        draws.append(state.position)
        reference_leaves.append(recursive_tree_leaves(standard_normal, position, reference_rng.standard_normal(dim),
                                                      step, reference_rng.uniform(size=10) < 0.5))
    mean, reference_mean = np.mean(leaves), np.mean(reference_leaves)
    assert 10 < mean < 17 and 10 < reference_mean < 17, (mean, reference_mean)
    # the same distribution of lengths: means within 4 standard errors of their difference
    assert abs(mean - reference_mean) < 4 * np.sqrt((np.var(leaves) + np.var(reference_leaves)) / n)
    z = np.array(draws)  # one transition from exact draws keeps them exact: E z = 0, E z² = 1 per coordinate
    assert abs(z.mean()) < 4 / np.sqrt(z.size) and abs(np.mean(z ** 2) - 1) < 4 * np.sqrt(2 / z.size)


@pytest.mark.parametrize("setting, message", [
    ({"divergence_threshold": -1.0}, "divergence_threshold=-1.0"),
    ({"divergence_threshold": np.nan}, "divergence_threshold=nan"),
    ({"max_tree_depth": 2.5}, r"^max_tree_depth=2.5 must be an integer of at least 1$"),  # was a depth of 2
    ({"max_tree_depth": "3"}, r"^max_tree_depth='3' must be an integer"),  # was a depth of 3
    ({"max_tree_depth": np.nan}, r"^max_tree_depth=nan must be an integer"),  # was a bare ValueError
    ({"max_tree_depth": np.inf}, r"^max_tree_depth=inf must be an integer"),  # was an OverflowError
])
def test_bad_kernel_settings_are_refused(setting, message):
    with pytest.raises(ParameterError, match=message):
        nuts.build_kernel(lambda x: (-0.5 * x @ x, -x), **setting)


@pytest.mark.parametrize("step_size", [0.0, -0.1, np.nan, np.inf, "0.1"])
def test_a_step_size_that_is_not_positive_and_finite_is_refused(rng, step_size):
    # 0 ran 1023 leapfrog steps that never moved, a negative one ran as its absolute value, NaN and inf
    # diverged at every transition, a string met a TypeError
    def target(x):
        return -0.5 * x @ x, -x

    kernel = nuts.build_kernel(target)
    with pytest.raises(ParameterError, match=r"^step_size=.* must be a positive number$"):
        kernel(rng, hmc.init(np.zeros(2), target), step_size)


@pytest.mark.parametrize("matrix", [np.ones(3), np.eye(3), [1.0, -1.0], np.array([[1.0, 0.9], [0.0, 1.0]])])
def test_an_inverse_mass_matrix_that_does_not_fit_is_refused(rng, matrix):
    # a (3,) or (3, 3) matrix for a 2-d target gave a raw broadcast ValueError; a negative or lopsided one ran
    def target(x):
        return -0.5 * x @ x, -x

    kernel = nuts.build_kernel(target)
    with pytest.raises(ParameterError, match="inverse mass matrix"):
        kernel(rng, hmc.init(np.zeros(2), target), 0.3, matrix)
