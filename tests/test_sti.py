from dataclasses import replace

import numpy as np
import pytest
from scipy.integrate import simpson, trapezoid

from sepsti.core.errors import ParameterError
from sepsti.core.evidence.sti import (LangevinSettings, TemperatureGrid, chain_summary, curvature, integrated_time,
                                      integration_weights, power_posterior_chain, power_posterior_chains,
                                      stochastic_thermodynamic_integration, temperature_grid, thermodynamic_integral,
                                      zero_variance_correction)
from sepsti.core.models.gaussian_additive import GaussianAdditiveModel, GaussianAdditiveTheta


def test_grid_counts_intervals():
    np.testing.assert_allclose(temperature_grid(5), [0, 0.2, 0.4, 0.6, 0.8, 1.0])
    np.testing.assert_allclose(temperature_grid(4, schedule="power", power=3), (np.arange(5) / 4) ** 3)
    with pytest.raises(ParameterError, match="schedule='log'"):
        temperature_grid(4, schedule="log")
    with pytest.raises(ParameterError, match="num_intervals=0"):
        temperature_grid(0)


@pytest.mark.parametrize("settings,message", [(dict(num_intervals=0), "num_intervals=0"),
                                              (dict(num_intervals=1), "num_intervals=1 must be an integer of at "
                                                                      "least 2"),
                                              (dict(num_intervals=2.5), "num_intervals=2.5"),
                                              (dict(schedule="log"), "schedule='log'"),
                                              (dict(power=0.5), "power=0.5"),
                                              (dict(schedule="uniform", power=0.5), "power=0.5"),
                                              (dict(schedule="beta", power=0.5), "power=0.5"),
                                              (dict(rule="midpoint"), "rule='midpoint'")])
def test_grid_settings_are_refused_by_name(settings, message):
    with pytest.raises(ParameterError, match=message):
        TemperatureGrid(**settings)


def test_grid_records_what_it_integrates():
    grid = TemperatureGrid(4, "uniform", power=7.0, rule="trapezoid")
    assert grid.power == 1.0 and isinstance(grid.num_intervals, int)
    np.testing.assert_allclose(grid.temperatures, np.arange(5) / 4)
    np.testing.assert_allclose(grid.weights, [0.125, 0.25, 0.25, 0.25, 0.125])


@pytest.mark.parametrize("rule,power", [("trapezoid", 1.0), ("trapezoid", 4.0), ("simpson", 1.0), ("simpson", 3.0),
                                        ("simpson", 5.0)])
def test_weights_integrate_what_they_should(rule, power):
    t = temperature_grid(8, schedule="power" if power > 1 else "uniform", power=power)
    w = integration_weights(t, rule=rule, power=power)
    assert w.sum() == pytest.approx(1.0)  # a constant integrand: exact for every rule
    if rule == "trapezoid":
        # against scipy's trapezoid rule on the grid, for integrands it is not exact for
        for f in (t ** 2, np.exp(t)):
            assert w @ f == pytest.approx(trapezoid(f, t), rel=1e-12)
    if rule == "simpson" and power <= 3:
        # f(t) = t^(1/c) gives the cubic-free integrand c u^c ... exact for c <= 3
        u = t ** (1 / power)
        assert w @ u == pytest.approx(power / (power + 1), rel=1e-9)


@pytest.mark.parametrize("num_intervals", [10, 4])
def test_simpson_on_a_power_grid_is_blind_to_the_integrands_level(num_intervals):
    # Simpson in u on (f - f(1)) dt/du, plus f(1): scipy's rule on that integrand, and a level of -1e7
    # moves the estimate by the level exactly (Simpson on f dt/du alone: 670 nats at T = 10, 26,000 at 4)
    t = temperature_grid(num_intervals, schedule="power", power=5.0)
    u = np.arange(num_intervals + 1) / num_intervals
    w = integration_weights(t, rule="simpson", power=5.0)
    f = -50.0 / (t + 1e-3)
    assert w @ f == pytest.approx(simpson((f - f[-1]) * 5 * u ** 4, x=u) + f[-1], rel=1e-12)
    assert w @ (f - 1e7) - w @ f == pytest.approx(-1e7, abs=1e-6)
    # a grid that spans less than [0, 1]: its span is what a constant integrates to
    half = np.array([0.0, 0.25, 0.5])
    assert integration_weights(half, rule="simpson") @ np.exp(half) == pytest.approx(simpson(np.exp(half), x=half),
                                                                                     rel=1e-12)


def test_beta_grid_is_dense_at_both_ends_and_its_simpson_weights_integrate():
    t = temperature_grid(16, schedule="beta", power=2.0)
    u = np.arange(17) / 16
    np.testing.assert_allclose(t, 3 * u ** 2 - 2 * u ** 3, atol=1e-12)
    w = integration_weights(t, rule="simpson", power=2.0, schedule="beta")
    assert w[0] == 0.0 and w[-1] == pytest.approx(0.0, abs=1e-12)  # dt/du = 6u(1 - u) vanishes at both ends
    assert w.sum() == pytest.approx(1.0, rel=1e-12)  # Simpson is exact on the quadratic 6u(1 - u)
    # f(t) = u(t) makes the integrand 6u^2(1 - u), a cubic: exact again; e^(3t) to its fourth-order error
    assert w @ u == pytest.approx(0.5, rel=1e-12)
    assert w @ np.exp(3 * t) == pytest.approx((np.exp(3) - 1) / 3, rel=1e-3)


def test_integrated_time_of_ar1(rng):
    rho = 0.8
    x = np.empty(200000)
    x[0] = 0
    noise = rng.standard_normal(x.size)
    for i in range(1, x.size):
        x[i] = rho * x[i - 1] + noise[i]
    assert integrated_time(x) == pytest.approx((1 + rho) / (1 - rho), rel=0.1)
    assert integrated_time(np.ones(10)) == 1.0


def test_integral_of_exact_expectations_and_error_propagation():
    t = temperature_grid(4)
    traces = [np.array([2 * ti, 2 * ti]) for ti in t]
    result = thermodynamic_integral(t, traces, tol=0)
    assert result.log_marginal_likelihood == pytest.approx(1.0)
    assert result.stderr == 0.0
    # two chains of one value each, 2 t -+ d: mean 2 t and standard error exactly d (their spread, sqrt(2) d, over
    # sqrt(2)); independent temperatures add in quadrature under the trapezoid weights 1/8, 1/4, 1/4, 1/4, 1/8
    d = np.array([0.3, 1.0, 2.0, 0.5, 4.0])
    result = thermodynamic_integral(t, [np.array([[2 * ti - di], [2 * ti + di]]) for ti, di in zip(t, d)], tol=0)
    assert result.log_marginal_likelihood == pytest.approx(1.0)
    np.testing.assert_allclose(result.mcse, d, rtol=1e-12)
    weights = np.array([1, 2, 2, 2, 1]) / 8
    assert result.stderr == pytest.approx(np.sqrt(np.sum((weights * d) ** 2)), rel=1e-12)
    with pytest.raises(ParameterError, match="traces"):
        thermodynamic_integral(t, traces[:-1])


@pytest.mark.filterwarnings("ignore:traces shorter")
def test_sti_matches_exact_evidence_on_gaussian_model(rng):
    # full-data gradients (no subsampling noise), small steps: STI must agree with the
    # closed form within its standard error plus the known quadrature error of the grid.
    _, x = GaussianAdditiveModel.sample(rng, 200, 2)
    for rank in (1, 3):
        model = GaussianAdditiveModel(x, rank)
        result = stochastic_thermodynamic_integration(
            model, model.sample_prior, grid=TemperatureGrid(12, "power", 4, "simpson"), seed=3,
            chain=LangevinSettings(num_steps=1500, num_keep=1000, sampler="psgld", step_a=1e-6, control_variate=True,
                                   evaluate="before_update"))
        exact = model.log_marginal_likelihood()
        t = result.temperatures
        quadrature = integration_weights(t, rule="simpson", power=4) @ model.expected_log_likelihood(t) - exact
        bias = result.log_marginal_likelihood - exact - quadrature
        # measured: −0.79 ± 0.33 and −1.70 ± 0.55 nats (−2.4 and −3.1 standard errors, both low: pSGLD
        # without its Γ term on full-data gradients, whose v follows the position; docs/rank_selection.md)
        assert abs(bias) < 4 * result.stderr, (rank, result.log_marginal_likelihood, exact, result.stderr)


def test_chain_summary_combines_independent_chains(rng):
    chains = rng.standard_normal((4, 5000)) + 3.0
    mean, mcse, _ = chain_summary(chains)
    assert mean == pytest.approx(chains.mean())
    within = np.sqrt(np.sum([chain_summary(c)[1] ** 2 for c in chains])) / 4
    assert mcse == pytest.approx(max(within, np.std(chains.mean(axis=1), ddof=1) / 2))
    assert within == pytest.approx(1 / np.sqrt(chains.size), rel=0.1)
    # chains stuck at different levels: their own traces look white, their means disagree
    stuck = chains + np.array([[0.0], [0.5], [-0.5], [1.0]])
    assert chain_summary(stuck)[1] == pytest.approx(np.std(stuck.mean(axis=1), ddof=1) / 2)


@pytest.mark.parametrize("rank,temperature", [(1, 0.0), (3, 1e-3), (5, 1.0)])
def test_curvature_is_the_largest_hessian_eigenvalue(rng, rank, temperature):
    _, x = GaussianAdditiveModel.sample(rng, 300, 2)
    model = GaussianAdditiveModel(x, rank)
    # -Hessian = I / sigma_theta^2 + t (N / sigma_x^2) 1 1^T
    expected = 1 / 3.0 + temperature * rank * 300 / 5.0
    positions = GaussianAdditiveTheta(rng.normal(5, 1, (2, rank)))
    value, vector = curvature(model, positions, np.full(2, temperature), return_vector=True)
    np.testing.assert_allclose(value, expected, rtol=1e-5)
    if temperature == 1.0:  # well separated from the other eigenvalues (1/3): power iteration has converged
        np.testing.assert_allclose(np.abs(vector.theta), 1 / np.sqrt(rank), rtol=1e-4)


@pytest.mark.parametrize("setting, message", [(dict(num_iterations=0), "num_iterations=0 must be an integer of "
                                                                      "at least 1"),
                                              (dict(num_iterations=-3), "num_iterations=-3"),
                                              (dict(num_iterations=2.5), "num_iterations=2.5"),
                                              (dict(relative_step=0), "relative_step=0 must be a positive number"),
                                              (dict(relative_step=np.nan), "relative_step=nan")])
def test_curvature_settings_are_refused_by_name(rng, setting, message):
    """num_iterations of 0 or below returned 0, 2.5 ran 2 iterations and relative_step=0 returned NaN."""
    _, x = GaussianAdditiveModel.sample(rng, 50, 2)
    model = GaussianAdditiveModel(x, 2)
    with pytest.raises(ParameterError, match=rf"^{message}"):
        curvature(model, GaussianAdditiveTheta(rng.normal(5, 1, (2, 2))), np.ones(2), **setting)


def test_zero_variance_correction_keeps_the_mean_and_removes_explained_variance(rng):
    feature = rng.standard_normal((20000, 1))
    trace = 2.0 + 3.0 * feature[:, 0] + 0.1 * rng.standard_normal(20000)
    corrected = zero_variance_correction(trace, feature)
    assert corrected.std() < 0.11
    assert abs(corrected.mean() - 2.0) < 4 * 0.1 / np.sqrt(20000) + 4 * 3.0 / 20000  # O(1/K) from beta


GAUSSIAN_DEFAULT = dict(grid=TemperatureGrid(24, "power", 6, "simpson"),
                        chain=LangevinSettings(num_steps=1500, num_keep=1000, subset_size=50, step_a=250.0,
                                               step_b=0.51, step_scale="curvature", control_variate="gradient",
                                               integrator="lm", zero_variance=True, evaluate="before_update"))


@pytest.mark.filterwarnings("ignore:traces shorter")
@pytest.mark.parametrize("rank", [1, 4])
def test_batched_sti_matches_exact_evidence_within_its_standard_error(rng, rank):
    # the recipe's chain settings on a smaller problem: what is left after the quadrature error of the
    # grid (computed from exact expectations) must be Monte-Carlo error
    _, x = GaussianAdditiveModel.sample(np.random.default_rng(5), 1000, 3)
    model = GaussianAdditiveModel(x, rank)
    result = stochastic_thermodynamic_integration(model, model.sample_prior, seed=1, **GAUSSIAN_DEFAULT)
    exact = model.log_marginal_likelihood()
    quadrature = integration_weights(result.temperatures, rule="simpson", power=6) @ model.expected_log_likelihood(
        result.temperatures) - exact
    assert abs(result.log_marginal_likelihood - exact - quadrature) < 4 * result.stderr, (
        result.log_marginal_likelihood, exact, result.stderr)
    assert result.stderr < 0.2
    # the same chains with Euler's noise (SGLD) are biased by far more than their error
    euler = stochastic_thermodynamic_integration(model, model.sample_prior, seed=1, grid=GAUSSIAN_DEFAULT["grid"],
                                                 chain=replace(GAUSSIAN_DEFAULT["chain"], integrator="euler"))
    assert euler.log_marginal_likelihood - exact - quadrature < -10 * euler.stderr


@pytest.mark.parametrize("setting, name", [(dict(sampler="hmc"), "sampler"), (dict(num_keep=9), "num_keep"),
                                           (dict(evaluate="sometimes"), "evaluate="),
                                           (dict(evaluate="full", evaluate_every=0), "evaluate_every"),
                                           (dict(step_scale="largest"), "step_scale"),
                                           (dict(control_variate="hessian"), "control_variate"),
                                           (dict(num_steps=4.5), "num_steps=4.5"),
                                           (dict(subset_size=0), "subset_size=0"),
                                           (dict(subset_size=2.5), "subset_size=2.5"),
                                           (dict(step_a=0.0), "step_a=0.0"), (dict(step_a=np.nan), "step_a=nan"),
                                           (dict(step_b=-0.5), "step_b=-0.5"),
                                           (dict(step_b=0.3), r"step_b=0.3 must lie in \(0.5, 1\]"),
                                           (dict(step_a=np.inf), "step_a=inf"),
                                           (dict(step_floor=0.0), "step_floor=0.0"),
                                           (dict(alpha=1.5), "alpha=1.5"), (dict(sigma=0.0), "sigma=0.0")])
def test_chain_settings_are_refused_by_name(setting, name):
    with pytest.raises(ParameterError, match=name):
        LangevinSettings(**{"num_steps": 4, "num_keep": 2, **setting})


def test_batched_options_are_checked(rng):
    _, x = GaussianAdditiveModel.sample(rng, 100, 2)
    model = GaussianAdditiveModel(x, 2)
    with pytest.raises(ParameterError, match="integrator"):
        LangevinSettings(num_steps=10, num_keep=5, integrator="verlet")
    with pytest.raises(ParameterError, match="zero_variance"):
        LangevinSettings(zero_variance=True)
    with pytest.raises(ParameterError, match="batched"):
        stochastic_thermodynamic_integration(model, model.sample_prior, warm_start=True,
                                             chain=LangevinSettings(num_steps=10, num_keep=5, integrator="lm"))
    with pytest.raises(ParameterError, match="SGLD"):
        power_posterior_chains(model, model.sample_prior(rng), rng, temperatures=[1.0],
                               chain=LangevinSettings(num_steps=10, num_keep=5, sampler="psgld"))


@pytest.mark.parametrize("temperatures, shape", [([0.5, 1.0], r"\(2,\)"), ([[0.0, 0.5, 1.0]], r"\(1, 3\)"),
                                                 (0.5, r"\(\)")])
def test_temperatures_must_be_one_per_chain(rng, temperatures, shape):
    """Another count met NumPy's broadcast error; a single number ran all chains on the subsets of one."""
    _, x = GaussianAdditiveModel.sample(rng, 100, 2)
    model = GaussianAdditiveModel(x, 2)
    with pytest.raises(ParameterError, match=rf"^temperatures of shape {shape} for starts of leading shape \(3,\): "
                                             r"expected one temperature per chain"):
        power_posterior_chains(model, GaussianAdditiveTheta(rng.normal(5, 1, (3, 2))), rng,
                               temperatures=temperatures, chain=LangevinSettings(num_steps=10, num_keep=5))


def test_an_integer_start_samples_the_reals_and_a_nan_start_is_refused(rng):
    """A start of integers gives the estimate of the same start in floats (the chains were held on the
    integers: 76 nats off); one holding NaN is refused, not returned as a NaN estimate."""
    _, x = GaussianAdditiveModel.sample(rng, 200, 2)
    model = GaussianAdditiveModel(x, 2)
    chain = LangevinSettings(num_steps=200, num_keep=100, step_a=1e-4)
    grid = TemperatureGrid(4, "power", 4, "simpson")
    results = [stochastic_thermodynamic_integration(model, lambda rng: GaussianAdditiveTheta(start), seed=2,
                                                    grid=grid, chain=chain)
               for start in (np.array([5, 5]), np.array([5.0, 5.0]))]
    assert results[0].log_marginal_likelihood == results[1].log_marginal_likelihood
    with pytest.raises(ParameterError, match="start: .* holds NaN or Inf"):
        stochastic_thermodynamic_integration(model, lambda rng: GaussianAdditiveTheta(np.array([np.nan, 5.0])),
                                             grid=grid, chain=chain)


def test_a_negative_start_of_a_non_negative_model_is_refused(rng):
    """A negative W gave a NaN log-likelihood at the start (the chains mirror the factors only as they step)."""
    from sepsti.core.models.poisson_nmf import NMFTheta, PoissonNMF

    model = PoissonNMF(PoissonNMF.sample(rng, (6, 5), 2)[2], 2)
    start = model.sample_prior(rng)
    start = NMFTheta(start.W - 2 * start.W.max(), start.H)
    chain = LangevinSettings(num_steps=5, num_keep=5, step_a=1e-3)
    with pytest.raises(ParameterError, match=r"^start: W has minimum -[0-9.e+-]+; expected non-negative values "
                                             r"\(PoissonNMF's W is non-negative\)$"):
        power_posterior_chain(model, start, rng, temperature=1.0, chain=chain)
    with pytest.raises(ParameterError, match=r"^start: W has minimum"):
        stochastic_thermodynamic_integration(model, lambda rng: start, grid=TemperatureGrid(2), chain=chain)


def test_a_start_of_another_shape_than_the_model_is_refused(rng):
    """A rank-5 start on a rank-2 Gaussian additive model ran every chain and returned a wrong estimate."""
    _, x = GaussianAdditiveModel.sample(rng, 50, 2)
    model = GaussianAdditiveModel(x, 2)
    wide = GaussianAdditiveModel(x, 5)
    chain = LangevinSettings(num_steps=5, num_keep=5, step_a=1e-3)
    with pytest.raises(ParameterError, match=r"^start: theta has shape \(5,\); GaussianAdditiveModel's theta is "
                                             r"\(2,\)$"):
        power_posterior_chain(model, wide.sample_prior(rng), rng, temperature=1.0, chain=chain)
    with pytest.raises(ParameterError, match=r"theta is \(2,\) after the axis of chains$"):
        stochastic_thermodynamic_integration(model, wide.sample_prior, grid=TemperatureGrid(2), chain=chain)
    with pytest.raises(ParameterError, match=r"^start: 2 leaves; GaussianAdditiveModel has 1$"):
        power_posterior_chain(model, (np.ones(2), np.ones(2)), rng, temperature=1.0, chain=chain)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("sampler", ["sgld", "psgld"])
def test_diverged_chains_are_an_error_not_an_estimate(rng, sampler):
    _, x = GaussianAdditiveModel.sample(rng, 200, 2)
    model = GaussianAdditiveModel(x, 2)
    with pytest.raises(ParameterError, match="the chains diverged .*lower step_a \\(now 1000\\)"):
        stochastic_thermodynamic_integration(model, model.sample_prior, grid=TemperatureGrid(4, "power", 4, "simpson"),
                                             chain=LangevinSettings(num_steps=60, num_keep=30, step_a=1e3,
                                                                    sampler=sampler))
    with pytest.raises(ParameterError, match="chains_per_temperature=2.7"):
        stochastic_thermodynamic_integration(model, model.sample_prior, chains_per_temperature=2.7,
                                             chain=LangevinSettings(num_steps=60, num_keep=30))


def test_integral_uses_the_weights_it_is_given_and_checks_their_length():
    t = temperature_grid(4, schedule="beta", power=2.0)
    traces = [np.full(3, 3 * ti ** 2) for ti in t]
    picks_middle = np.array([0.0, 0.0, 1.0, 0.0, 0.0])
    assert thermodynamic_integral(t, traces, weights=picks_middle, tol=0).log_marginal_likelihood == 0.75
    # default: the trapezoid rule in t
    assert thermodynamic_integral(t, traces, tol=0).log_marginal_likelihood == pytest.approx(
        trapezoid(3 * t ** 2, t), rel=1e-12)
    with pytest.raises(ParameterError, match="quadrature weights"):
        thermodynamic_integral(t, traces, weights=picks_middle[:-1])


def test_an_explicit_grid_is_integrated_in_t_by_the_grids_rule():
    _, x = GaussianAdditiveModel.sample(np.random.default_rng(5), 200, 2)
    model = GaussianAdditiveModel(x, 1)
    t = np.array([0.0, 0.01, 0.1, 0.4, 1.0])
    chain = LangevinSettings(num_steps=300, num_keep=200, step_a=1e-4)
    with pytest.warns(RuntimeWarning, match="traces shorter"):
        result = stochastic_thermodynamic_integration(model, model.sample_prior, temperatures=t, chain=chain, seed=2,
                                                      grid=TemperatureGrid(4, "power", 5.0, "simpson"))
    assert result.log_marginal_likelihood == pytest.approx(simpson(result.mean_log_likelihood, x=t), rel=1e-12)
    assert result.log_marginal_likelihood != pytest.approx(trapezoid(result.mean_log_likelihood, t), rel=1e-6)


@pytest.mark.filterwarnings("ignore:traces shorter")
def test_warm_start_starts_each_chain_where_the_last_one_ended():
    from sepsti.core.evidence.sti import power_posterior_chain
    from sepsti.core.random import stream

    _, x = GaussianAdditiveModel.sample(np.random.default_rng(5), 200, 2)
    model = GaussianAdditiveModel(x, 2)
    chain = LangevinSettings(num_steps=50, num_keep=10, step_a=1e-4)
    grid = TemperatureGrid(3, "uniform", rule="trapezoid")
    result = stochastic_thermodynamic_integration(model, model.sample_prior, grid=grid, chain=chain, warm_start=True,
                                                  seed=4)
    # the scheme as documented: chain i draws from stream(seed, i); the first starts from the prior, the others
    # from the last state of the chain before
    position, means = None, []
    for i, temperature in enumerate(grid.temperatures):
        rng = stream(4, i)
        position = model.sample_prior(rng) if position is None else position
        trace, run = power_posterior_chain(model, position, rng, temperature=float(temperature), chain=chain)
        position = run.state.inner.position
        means.append(trace.mean())
    np.testing.assert_allclose(result.mean_log_likelihood, means, rtol=1e-12)


def test_chain_summary_without_between_chain_spread_pools_the_within_chain_errors():
    """Chains with identical means (permutations of one sample): the pooled standard error is sqrt(sum mcse_c^2) / C."""
    rng = np.random.default_rng(0)
    base = rng.standard_normal(4000)
    chains = np.stack([rng.permutation(base) for _ in range(4)])
    _, mcse, _ = chain_summary(chains)
    within = np.sqrt(sum(chain_summary(c)[1] ** 2 for c in chains)) / len(chains)
    assert mcse == pytest.approx(within, rel=1e-10)   # deterministic identity


def test_before_update_scores_the_previous_iterate_on_the_current_subset():
    """evaluate="before_update": the kept value at step k is the estimate at theta^(k-1) on S^(k), known subsets."""
    from sepsti.core.evidence.sti import power_posterior_chain
    from sepsti.core.models.subsample import log_likelihood_estimate
    x = np.random.default_rng(5).normal(1.0, 2.0, 40)
    model = GaussianAdditiveModel(x, 2)

    def subset_fn(rng, k):
        return np.arange(k % 40, k % 40 + 5) % 40
    start = GaussianAdditiveTheta(np.array([0.3, -0.2]))
    chain = LangevinSettings(num_steps=6, num_keep=2, step_a=1e-3, evaluate="before_update")
    trace, _ = power_posterior_chain(model, start, np.random.default_rng(1), temperature=0.7, chain=chain,
                                     subset_fn=subset_fn)
    # the same seed for 5 steps reproduces theta^(5), the iterate before the last update
    _, before = power_posterior_chain(model, start, np.random.default_rng(1), temperature=0.7,
                                      chain=LangevinSettings(num_steps=5, num_keep=1, step_a=1e-3), subset_fn=subset_fn)
    expected = log_likelihood_estimate(model, before.state.inner.position, subset_fn(None, 6))
    assert trace[-1] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("model_kind, bad, message", [
    ("gaussian", lambda k: np.array([0, 40 + k]), "out of bounds"),
    ("nmf", lambda k: [(np.array([0, 6]), slice(None))], "out of bounds"),
    ("nmf", lambda k: [(np.ones(2, dtype=bool), slice(None))], "boolean index"),
    ("nmf", lambda k: np.arange(3), "cannot unpack"),
])
def test_a_callers_subset_the_model_cannot_index_is_refused_in_one_line(model_kind, bad, message):
    """A ``subset_fn`` whose subset the model cannot index, here at the third step, is refused as a
    ParameterError naming the iteration and the model (it was the model's own IndexError or TypeError)."""
    from sepsti.core.evidence.sti import power_posterior_chain
    from sepsti.core.models import PoissonNMF
    rng = np.random.default_rng(2)
    if model_kind == "gaussian":
        model, start = GaussianAdditiveModel(rng.normal(1.0, 2.0, 40), 2), GaussianAdditiveTheta(np.zeros(2))
    else:
        model = PoissonNMF(rng.poisson(2.0, (6, 5)).astype(float), 2)
        start = model.sample_prior(rng)

    def subset_fn(rng, k):
        return None if k < 3 else bad(k)
    with pytest.raises(ParameterError, match=rf"^subset_fn\(rng, 3\) returned a subset {type(model).__name__} "
                                             rf"cannot use: .*{message}"):
        power_posterior_chain(model, start, np.random.default_rng(1), temperature=0.5,
                              chain=LangevinSettings(num_steps=5, num_keep=2, step_a=1e-3), subset_fn=subset_fn)


# --------------------------------------------------------------------------------------------
# one interval, grids whose weights are not finite, a single kept value


@pytest.mark.parametrize("num_intervals, settings, match", [
    (np.nan, {}, r"^num_intervals=nan must be an integer of at least 2"),  # a bare ValueError
    (np.inf, {}, r"^num_intervals=inf must be an integer of at least 2"),  # an OverflowError
    ("4", {}, r"^num_intervals='4' must be an integer of at least 2"),  # a TypeError
    (4, dict(schedule="power", power=np.inf), r"^power=inf must be a finite number >= 1$"),  # was 0, 0, 0, 0, 1
    (4, dict(schedule="power", power="5"), r"^power='5' must be a finite number >= 1$"),  # a TypeError
])
def test_a_grid_refuses_counts_and_powers_of_the_wrong_kind(num_intervals, settings, match):
    with pytest.raises(ParameterError, match=match):
        temperature_grid(num_intervals, **settings)


@pytest.mark.parametrize("settings, match", [
    (dict(power=0.0), r"^power=0.0 must be a finite number >= 1$"),  # a ZeroDivisionError
    (dict(power=np.nan), r"^power=nan must be a finite number >= 1$"),  # NaN weights
    (dict(schedule="log"), r"^schedule='log': expected"),  # was taken as the power schedule
])
def test_simpson_weights_refuse_a_schedule_or_power_that_built_no_grid(settings, match):
    with pytest.raises(ParameterError, match=match):
        integration_weights([0.0, 0.25, 0.5, 1.0], rule="simpson", **settings)


def test_one_interval_is_refused_wherever_an_estimate_is_made():
    # with T = 1 Simpson's rule on a power or beta grid weighs t = 0 by 0: the estimate was E_1 alone
    with pytest.raises(ParameterError, match="num_intervals=1 must be an integer of at least 2"):
        temperature_grid(1, schedule="power", power=5.0)
    with pytest.raises(ParameterError, match="at least 2 intervals"):
        thermodynamic_integral([0.0, 1.0], [np.zeros(4), np.ones(4)])
    _, x = GaussianAdditiveModel.sample(np.random.default_rng(5), 50, 1)
    model = GaussianAdditiveModel(x, 1)
    with pytest.raises(ParameterError, match="at least 2 intervals"):  # before any chain runs
        stochastic_thermodynamic_integration(model, model.sample_prior, temperatures=[0.0, 1.0],
                                             chain=LangevinSettings(num_steps=10 ** 6, num_keep=10))


def test_a_grid_whose_weights_are_not_finite_is_refused_by_its_power():
    # B(c, c) underflows to 0 beyond c ~ 540: dt/du = 0/0 on the beta grid
    grid = TemperatureGrid(2, "beta", 600.0, "simpson")
    with pytest.raises(ParameterError, match=r"power=600\.0: the beta schedule's quadrature weights are not finite"
                                             r".*; lower power$"):
        grid.check()
    with pytest.raises(ParameterError, match=r"^--power 600: .*; lower --power$"):
        grid.check(option_name=lambda field: f"--{field}")
    with pytest.raises(ParameterError, match=r"power=1e\+300: the power schedule's 11 temperatures are not distinct"):
        TemperatureGrid(10, "power", 1e300, "simpson").check()
    TemperatureGrid(2, "beta", 600.0, "trapezoid").check()  # in t: finite
    TemperatureGrid(16, "beta", 2.0, "simpson").check()


def test_a_single_kept_value_has_no_standard_error():
    mean, mcse, _ = chain_summary([3.0])
    assert mean == 3.0 and np.isnan(mcse)  # was 0: unknown, not exact
    assert chain_summary([[1.0], [3.0]])[1] == pytest.approx(1.0)  # several chains: their spread
    t = temperature_grid(2)
    with pytest.warns(RuntimeWarning, match="single kept value at t = 0, 0.5, 1: the standard error cannot be "
                                            "estimated"):
        result = thermodynamic_integral(t, [np.array([v]) for v in (1.0, 2.0, 3.0)], tol=0)
    assert result.log_marginal_likelihood == 2.0 and np.isnan(result.stderr)
    # a temperature of weight 0 adds nothing to the error, known or not
    weights = np.array([0.0, 0.5, 0.5])
    result = thermodynamic_integral(t, [np.array([1.0]), np.array([2.0, 2.5]), np.array([3.0, 3.5])],
                                    weights=weights, tol=0)
    assert np.isfinite(result.stderr)


def test_a_single_kept_value_is_no_divergence(rng):
    _, x = GaussianAdditiveModel.sample(rng, 50, 1)
    model = GaussianAdditiveModel(x, 1)
    with pytest.warns(RuntimeWarning, match="the standard error cannot be estimated"):
        result = stochastic_thermodynamic_integration(model, model.sample_prior, grid=TemperatureGrid(2, "uniform"),
                                                      chain=LangevinSettings(num_steps=20, num_keep=1,
                                                                             step_a=1e-4))
    assert np.isfinite(result.log_marginal_likelihood) and np.isnan(result.stderr)


@pytest.mark.parametrize("schedule, power", [("power", 5.0), ("beta", 2.0), ("power", 1.5)])
def test_t0_weighs_nothing_on_simpson_power_and_beta_grids(schedule, power):
    # what select-rank's --exact-prior help and docs/rank_selection.md say: there the t = 0 draws feed E_0 and the
    # tempering check only (dt/du = 0 at u = 0 for c > 1)
    assert TemperatureGrid(10, schedule, power, "simpson").weights[0] == 0.0
    assert TemperatureGrid(10, schedule, power, "trapezoid").weights[0] > 0.0


def test_weights_need_an_increasing_grid_of_finite_temperatures():
    """Unsorted temperatures gave negative weights, a NaN one NaN weights, both without a word."""
    for t in ([0.0, 1.0, 0.5], [0.0, 0.5, 0.5, 1.0], [0.0, np.nan, 1.0], [0.0], [[0.0, 1.0]]):
        for rule in ("trapezoid", "simpson"):
            with pytest.raises(ParameterError, match=r"^temperatures=.*: expected an increasing grid of at least 2 "
                                                     r"finite temperatures$"):
                integration_weights(t, rule=rule)


@pytest.mark.parametrize("trace, shape", [(np.zeros(0), r"\(0,\)"), (np.zeros((2, 0)), r"\(2, 0\)"),
                                          (1.0, r"\(\)"), (np.zeros((1, 2, 3)), r"\(1, 2, 3\)")])
def test_a_trace_that_is_empty_or_not_one_is_named(trace, shape):
    """An empty trace met a ZeroDivisionError, a number per temperature an IndexError."""
    traces = [np.ones(4), trace, np.ones(4)]
    with pytest.raises(ParameterError, match=rf"^the trace at t=0.5 has shape {shape}: expected a non-empty 1-d"):
        thermodynamic_integral([0.0, 0.5, 1.0], traces)


def test_zero_variance_correction_needs_one_feature_row_per_value(rng):
    """Features of another length met NumPy's LinAlgError."""
    with pytest.raises(ParameterError, match=r"^trace of shape \(10,\) and features of shape \(9, 2\): expected"):
        zero_variance_correction(rng.standard_normal(10), rng.standard_normal((9, 2)))
    with pytest.raises(ParameterError, match=r"features of shape \(10,\): expected \(K,\) and \(K, p\)$"):
        zero_variance_correction(rng.standard_normal(10), rng.standard_normal(10))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_nan_or_inf_in_a_trace_weight_or_temperature_is_refused(bad):
    """They gave a NaN or infinite estimate without a word (only stochastic_thermodynamic_integration named
    diverged chains)."""
    t = temperature_grid(2)
    traces = [np.ones(4), np.array([1.0, bad, 1.0, 1.0]), np.ones(4)]
    with pytest.raises(ParameterError, match=r"^the trace at t=0.5 holds NaN or Inf: expected finite "):
        thermodynamic_integral(t, traces, tol=0)
    with pytest.raises(ParameterError, match=r"^weights=\[0\.25 +(nan|inf|-inf) +0\.25\]: expected finite quadrature"):
        thermodynamic_integral(t, [np.ones(4)] * 3, weights=[0.25, bad, 0.25], tol=0)
    with pytest.raises(ParameterError, match=r"^temperatures=.*: need an increasing grid from 0 to 1"):
        thermodynamic_integral([0.0, bad, 1.0], [np.ones(4)] * 3, tol=0)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_with_check_finite_off_a_diverged_trace_gives_a_non_finite_estimate(bad):
    """For a caller that names a diverged chain itself (the rank-selection engine); the finite traces' estimate
    is unchanged by the switch."""
    t = temperature_grid(2)
    finite = [np.arange(4.0), np.arange(4.0) + 2.0, np.arange(4.0) + 4.0]
    on, off = (thermodynamic_integral(t, finite, tol=0, check_finite=check) for check in (True, False))
    expected = 0.25 * 1.5 + 0.5 * 3.5 + 0.25 * 5.5  # the trapezoid rule over the three traces' means
    assert off.log_marginal_likelihood == on.log_marginal_likelihood == pytest.approx(expected)
    diverged = [finite[0], np.array([1.0, bad, 1.0, 1.0]), finite[2]]
    result = thermodynamic_integral(t, diverged, tol=0, check_finite=False)
    assert not np.isfinite(result.log_marginal_likelihood)


def test_the_mcse_of_a_short_white_trace_is_its_sample_sd_over_root_n():
    # 0, 1 and 0, 1, 2: autocorrelations (1, -1/2) and (1, 0, -1/2), so the automatic window stops at an
    # integrated time below 1, taken as 1; the MCSE is then sd (ddof=1) / sqrt(n): sqrt(1/2 / 2) and sqrt(1 / 3)
    assert chain_summary([0.0, 1.0]) == pytest.approx((0.5, 0.5, 1.0), rel=1e-12)
    assert chain_summary([0.0, 1.0, 2.0]) == pytest.approx((1.0, np.sqrt(1 / 3), 1.0), rel=1e-12)
