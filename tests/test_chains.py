"""sample_nuts: the automatic metric on Gaussians of known covariance, parallel = sequential, known moments,
the divergence check of the warm-up."""

import numpy as np
import pytest
from scipy.special import gamma

from sepsti.core.errors import ParameterError
from sepsti.core.random import stream
from sepsti.core.samplers.chains import NUTSSettings, sample_nuts
from sepsti.core.samplers.metric import AutoMetricSettings, PilotResult, TargetStructure, choose_metric

from test_hmc import assert_moments


def dense_gaussian(covariance):
    precision = np.linalg.inv(covariance)

    def logdensity_and_grad(x):
        px = precision @ x
        return -0.5 * float(x @ px), -px

    return logdensity_and_grad, precision


def rotated(eigenvalues, seed):
    rotation, _ = np.linalg.qr(stream(seed, 9).standard_normal((len(eigenvalues), len(eigenvalues))))
    return (rotation * eigenvalues) @ rotation.T


COVARIANCES = {
    # Independent coordinates of similar scale: a dense metric can only add estimation noise.
    "independent": np.diag(np.linspace(0.5, 2.0, 10) ** 2),
    # Independent, variances over eight orders of magnitude: the diagonal whitens it.
    "badly scaled": np.diag(np.logspace(-2, 2, 10) ** 2),
    # Rotated, eigenvalues 1e-2..1e2 with no coordinate alignment: only a dense metric whitens it.
    "correlated": rotated(np.logspace(-1, 1, 10) ** 2, 3),
}
EXPECTED = {"independent": "diagonal", "badly scaled": "diagonal", "correlated": "dense"}


@pytest.mark.parametrize("name", sorted(COVARIANCES))
def test_auto_metric_picks_the_kind_that_whitens_the_gaussian(name):
    covariance = COVARIANCES[name]
    fn, _ = dense_gaussian(covariance)
    result = sample_nuts(fn, np.ones(10), num_warmup=400, num_draws=400, num_chains=2, seed=5, num_workers=1,
                         auto=AutoMetricSettings(num_pilot_draws=150))
    assert result.metric.metric == EXPECTED[name], result.metric.reason
    assert [p.metric for p in result.metric.pilots] == ["diagonal", "dense"]
    # The pilots measured what the covariance implies: the work per independent draw of NUTS grows with the
    # square root of the condition number a metric leaves, so the dense pilot's gain over the diagonal one is
    # about √κ of the covariance scaled to unit variances (measured 0.47 / 1.01 / 101.6 against 1 / 1 / 103.3;
    # a factor of 3 either way allows for 150 pilot draws and trees that grow in powers of two).
    diagonal, dense = (p.ess_per_work for p in result.metric.pilots)
    scale = np.sqrt(np.diag(covariance))
    eigenvalues = np.linalg.eigvalsh(covariance / np.outer(scale, scale))
    expected_gain = np.sqrt(eigenvalues.max() / eigenvalues.min())
    assert expected_gain / 3 < dense / diagonal < 3 * expected_gain, (dense / diagonal, expected_gain)
    assert result.diagnostics.num_divergent == 0
    assert_moments(result.draws, 0.0, np.diag(covariance))


def test_auto_metric_takes_the_precision_of_a_correlated_gaussian_and_its_moves():
    covariance = COVARIANCES["correlated"]
    fn, precision = dense_gaussian(covariance)

    def scale_all(x, log_scales):  # x -> c x: a group action with Jacobian c^dim
        return np.exp(log_scales[0]) * x, x.size * float(log_scales[0])

    structure = TargetStructure(precision_fn=lambda x: precision, transform_fn=scale_all, num_groups=1,
                                summary_fn=lambda x: np.array([x @ precision @ x]))
    result = sample_nuts(fn, np.ones(10), num_warmup=300, num_draws=400, num_chains=2, seed=6, num_workers=1,
                         structure=structure, auto=AutoMetricSettings(num_pilot_adapt=30, num_pilot_draws=60))
    names = [p.metric for p in result.metric.pilots]
    assert names == ["diagonal", "diagonal+moves", "dense", "dense+moves", "precision", "precision+moves"]
    assert result.metric.metric.startswith(("dense", "precision")), result.metric.reason
    assert result.summaries.shape == (2, 400, 1)
    assert_moments(result.draws, 0.0, np.diag(covariance))


def test_chains_in_parallel_give_the_draws_of_chains_in_sequence():
    fn, _ = dense_gaussian(rotated(np.linspace(0.5, 2.0, 10) ** 2, 4))
    options = dict(num_warmup=60, num_draws=20, num_chains=3, seed=8,
                   auto=AutoMetricSettings(num_pilot_adapt=20, num_pilot_draws=20))
    sequential = sample_nuts(fn, np.ones(10), num_workers=1, **options)
    processes = sample_nuts(fn, np.ones(10), num_workers=2, executor="process", **options)
    threads = sample_nuts(fn, np.ones(10), num_workers=3, executor="thread", **options)
    for other in (processes, threads):
        np.testing.assert_array_equal(other.draws, sequential.draws)
        np.testing.assert_array_equal(other.logdensity, sequential.logdensity)
        assert other.metric.metric == sequential.metric.metric
    # Distinct chains: each has its own stream.
    assert not np.array_equal(sequential.draws[0], sequential.draws[1])


def test_fixed_metric_and_diagnostics():
    from sepsti.core.samplers.diagnostics import effective_sample_size

    fn, _ = dense_gaussian(COVARIANCES["badly scaled"])
    calls = []

    def counted(theta):
        calls.append(1)
        return fn(theta)

    result = sample_nuts(counted, np.ones(10), num_warmup=300, num_draws=300, num_chains=2, metric="diagonal",
                         seed=9, num_workers=1)
    assert result.metric.metric == "diagonal" and result.metric.pilots == ()
    assert result.draws.shape == (2, 300, 10) and result.logdensity.shape == (2, 300)
    chain = result.chains[0]
    assert chain.inverse_mass_matrix.shape == (10,) and chain.info.tree_depth.shape == (300,)
    # the counted work is the density's calls, but for each chain's start and first step size search
    # (measured: 35 calls in all)
    counted_work = sum(c.num_gradients + c.num_warmup_gradients for c in result.chains)
    assert 0 <= len(calls) - counted_work <= 100, (len(calls), counted_work)
    diagnostics = result.diagnostics
    ess = np.append(effective_sample_size(result.draws), effective_sample_size(result.logdensity))
    assert diagnostics.min_bulk_ess == pytest.approx(ess.min(), rel=1e-12) and diagnostics.min_bulk_ess > 100
    assert diagnostics.max_rhat < 1.05 and diagnostics.num_divergent == 0
    # A Gaussian does not diverge: one check, at the caller's target, which every chain keeps.
    assert result.metric.checks == ((0.8, 0, 0, 60),) and result.metric.target == 0.8
    assert [c.target for c in result.chains] == [0.8, 0.8]


def quartic(x):
    """exp(-sum x^4 / 4): the curvature 3 x^2 grows in the tails, so a step fit to the bulk diverges out there."""
    return -0.25 * float(np.sum(x ** 4)), -x ** 3


def test_divergent_check_raises_the_target_until_the_divergences_are_gone():
    # At delta = 0.5 the adapted step exceeds the leapfrog's stability limit 2 / sqrt(3 x^2) in the tails.
    options = dict(num_warmup=500, num_draws=500, num_chains=2, metric="diagonal", seed=0, num_workers=1)
    fixed = sample_nuts(quartic, np.full(10, 0.1), settings=NUTSSettings(target=0.5, raised_targets=()), **options)
    assert fixed.diagnostics.num_divergent >= 10 and fixed.metric.target == 0.5
    raised = sample_nuts(quartic, np.full(10, 0.1), settings=NUTSSettings(target=0.5, raised_targets=(0.8, 0.9, 0.95)),
                         **options)
    checks = raised.metric.checks
    # The first check saw what the fixed run then met in its draws; the target rose until a check passed.
    assert checks[0][0] == 0.5 and checks[0][1] + checks[0][2] > 0
    assert checks[-1][1] + checks[-1][2] == 0 and raised.metric.target == checks[-1][0] > 0.5
    # The first target that passed got one more raise as a margin (where the ladder had one).
    first_pass = next(i for i, check in enumerate(checks) if check[1] + check[2] == 0)
    assert len(checks) == min(first_pass + 2, 4)
    assert ("as a margin" in raised.metric.reason) == (first_pass < 3)
    assert "target raised" in raised.metric.reason
    assert [c.target for c in raised.chains] == [raised.metric.target] * 2
    assert max(c.step_size for c in raised.chains) < min(c.step_size for c in fixed.chains)
    assert raised.diagnostics.num_divergent == 0
    # E x^2 = 2 Gamma(3/4) / Gamma(1/4) under exp(-x^4 / 4).
    assert_moments(raised.draws, 0.0, 2 * gamma(0.75) / gamma(0.25))


def test_inference_data_on_request():
    pytest.importorskip("arviz")
    fn, _ = dense_gaussian(np.eye(3))
    result = sample_nuts(fn, np.zeros(3), num_warmup=40, num_draws=20, num_chains=2, metric="diagonal", seed=1,
                         num_workers=1)
    data = result.to_inference_data()
    assert data.posterior["theta"].shape == (2, 20, 3)
    assert data.sample_stats["diverging"].shape == (2, 20)


def test_choose_metric_prefers_the_cheaper_within_the_margin_and_skips_divergent():
    def pilot(name, efficiency, divergent=0):
        return PilotResult(name, 10.0, "theta[0]", 100.0, efficiency, 0.1, 3.0, divergent)

    assert choose_metric([pilot("diagonal", 1.0), pilot("dense", 1.9)], margin=2.0)[0] == "diagonal"
    assert choose_metric([pilot("diagonal", 1.0), pilot("dense", 2.1)], margin=2.0)[0] == "dense"
    assert choose_metric([pilot("diagonal", 1.0), pilot("dense", 5.0, divergent=3)], margin=2.0)[0] == "diagonal"
    # Of the kind kept, the variant with scale moves when it is within the margin as well.
    assert choose_metric([pilot("diagonal", 1.0), pilot("diagonal+moves", 0.6)], margin=2.0)[0] == "diagonal+moves"
    assert choose_metric([pilot("diagonal", 1.0), pilot("diagonal+moves", 0.4)], margin=2.0)[0] == "diagonal"
    chosen, reason = choose_metric([pilot("diagonal", 0.1), pilot("diagonal+moves", 0.1), pilot("precision", 1.0),
                                    pilot("precision+moves", 0.8)], margin=2.0)
    assert chosen == "precision+moves" and "scale moves" in reason


def test_bad_input_is_refused():
    fn, _ = dense_gaussian(np.eye(2))
    with pytest.raises(ParameterError, match="metric='precision' needs structure.precision_fn"):
        sample_nuts(fn, np.zeros(2), num_warmup=50, num_draws=10, metric="precision")
    with pytest.raises(ParameterError, match="metric='cholesky'"):
        sample_nuts(fn, np.zeros(2), num_warmup=50, num_draws=10, metric="cholesky")
    with pytest.raises(ParameterError, match="x0 has shape"):
        sample_nuts(fn, np.zeros((3, 2)), num_warmup=50, num_draws=10, num_chains=2)
    with pytest.raises(ParameterError, match="num_warmup"):
        sample_nuts(fn, np.zeros(2), num_warmup=5, num_draws=10)
    with pytest.raises(ParameterError, match="must rise"):
        sample_nuts(fn, np.zeros(2), num_warmup=50, num_draws=10, settings=NUTSSettings(raised_targets=(0.95, 0.9)))
    with pytest.raises(ParameterError, match="check_fraction"):
        sample_nuts(fn, np.zeros(2), num_warmup=50, num_draws=10, settings=NUTSSettings(check_fraction=0.6))
    # each refused by name before any transition
    for options, name in ((dict(x0=1.0), "x0 has shape"), (dict(num_warmup=100.0), "num_warmup=100.0"),
                          (dict(num_draws=50.0), "num_draws=50.0"), (dict(seed=None), "seed=None"),
                          (dict(seed=1.5), "seed=1.5"),
                          (dict(settings=NUTSSettings(divergence_threshold=np.nan)), "divergence_threshold"),
                          (dict(settings=NUTSSettings(divergence_threshold=-1.0)), "divergence_threshold"),
                          (dict(settings=NUTSSettings(max_tree_depth=0)), "max_tree_depth"),
                          (dict(auto=AutoMetricSettings(num_pilot_draws=3)), "num_pilot_draws"),
                          (dict(auto=AutoMetricSettings(num_pilot_adapt=0)), "num_pilot_adapt")):
        arguments = {"x0": np.zeros(2), "num_warmup": 50, "num_draws": 10, **options}
        with pytest.raises(ParameterError, match=name):
            sample_nuts(fn, arguments.pop("x0"), **arguments)
    singular = TargetStructure(precision_fn=lambda x: np.zeros((2, 2)))
    with pytest.raises(ParameterError, match="precision_fn returned a singular matrix"):
        sample_nuts(fn, np.zeros(2), num_warmup=50, num_draws=10, metric="precision", structure=singular,
                    num_workers=1)


def test_auto_warm_up_counts_the_gradients_of_every_pilot():
    """Each chain's warm-up gradients include the pilots of the candidates not chosen, as its warm-up time does:
    the sum over chains is nearly every evaluation of the target (before, the pilots not chosen were left out)."""
    fn, _ = dense_gaussian(np.diag([1.0, 4.0, 9.0]))
    calls = []

    def counted(x):
        calls.append(1)
        return fn(x)

    structure = TargetStructure(precision_fn=lambda x: np.diag([1, 1 / 4, 1 / 9]))
    result = sample_nuts(counted, np.ones(3), num_warmup=200, num_draws=100, num_chains=2, seed=1, num_workers=1,
                         executor="thread", structure=structure,
                         auto=AutoMetricSettings(num_pilot_adapt=30, num_pilot_draws=40))
    assert len(result.metric.pilots) > 2
    counted_by_chains = sum(info.num_warmup_gradients + info.num_gradients for info in result.chains)
    # uncounted: each chain's start and the step-size search opening each warm-up phase (40 of 6641 here)
    assert counted_by_chains <= len(calls) <= 1.02 * counted_by_chains
