import numpy as np
import pytest
from scipy.stats import kstest

from sepsti.core.errors import ParameterError
from sepsti.core.evidence.sti import integrated_time
from sepsti.core.models.gaussian_additive import GaussianAdditiveModel, GaussianAdditiveTheta
from sepsti.core.models.poisson_nmf import NMFTheta, PoissonNMF
from sepsti.core.samplers import psgld, sgld


def _run(kernel, state, model, rng, num_steps, step_size, temperature, subset=None):
    for _ in range(num_steps):
        state, info = kernel(rng, state, model, step_size, subset, temperature)
    return state


def test_zero_temperature_samples_the_exponential_prior_with_mirroring(rng):
    # 300 x 4 + 4 x 250 independent coordinates under a reflected Langevin diffusion on Exp(rate), run for
    # 50 time units, three times the slowest relaxation time (about 4 / rate² = 16 for H): final positions
    # are i.i.d. draws, up to the Euler bias of steps 0.01 (rate² × step at most 0.04)
    model = PoissonNMF(rng.poisson(3.0, (300, 250)).astype(float), 4, rate_W=2.0, rate_H=0.5)
    start = NMFTheta(np.full((300, 4), 0.5), np.full((4, 250), 2.0))
    state = _run(sgld.build_kernel(), sgld.init(start), model, rng, 5000, 1e-2, 0.0)
    assert state.position.W.min() >= 0 and state.position.H.min() >= 0
    assert kstest(state.position.W.ravel(), "expon", args=(0, 1 / 2.0)).pvalue > 1e-3
    assert kstest(state.position.H.ravel(), "expon", args=(0, 1 / 0.5)).pvalue > 1e-3
    assert abs(state.position.H.mean() - 2.0) < 4 * 2.0 / np.sqrt(state.position.H.size)


def test_small_step_sgld_recovers_gaussian_posterior(rng):
    _, x = GaussianAdditiveModel.sample(rng, 20, 1)
    model = GaussianAdditiveModel(x, 1)
    precision = 1 / 3.0 + 20 / 5.0
    mean = (5.0 / 3.0 + x.sum() / 5.0) / precision
    kernel = sgld.build_kernel()
    state = sgld.init(GaussianAdditiveTheta(np.array([mean])))
    step = 0.02
    trace = np.empty(40000)
    for k in range(trace.size):
        state, _ = kernel(rng, state, model, step, None, 1.0)
        trace[k] = state.position.theta[0]
    tau = integrated_time(trace)
    ess = trace.size / tau
    assert ess > 1000, f"ESS {ess:.0f} too small for the test"
    se = trace.std(ddof=1) / np.sqrt(ess)
    assert abs(trace.mean() - mean) < 4 * se
    # Euler-Maruyama's stationary variance is 1 / (P (1 - step P / 2)); MC error ~ sqrt(2/ess)
    assert abs(trace.var() * precision * (1 - step * precision / 2) - 1) < 4 * np.sqrt(2 / ess)


def test_same_seed_same_chain(rng):
    model = PoissonNMF(rng.poisson(3.0, (6, 5)).astype(float), 2)
    start = model.sample_prior(rng)
    runs = [_run(sgld.build_kernel(), sgld.init(start), model, np.random.default_rng(7), 50, 1e-3, 1.0)
            for _ in range(2)]
    np.testing.assert_array_equal(runs[0].position.W, runs[1].position.W)


BAD_STEPS = [-1e-3, 0.0, np.nan, np.inf, np.array([1e-3, -1e-3]), np.array([1e-3, np.nan]), np.array([]), "0.1",
             True, None]


@pytest.mark.parametrize("sampler", [sgld, psgld], ids=["sgld", "psgld"])
@pytest.mark.parametrize("step", BAD_STEPS)
def test_a_step_that_is_not_positive_and_finite_is_refused(rng, sampler, step):
    # -1e-3 and NaN turned the position into NaN, flagged only as is_divergent
    model = GaussianAdditiveModel(GaussianAdditiveModel.sample(rng, 10, 2)[1], 2)
    with pytest.raises(ParameterError, match="step_size="):
        sampler.build_kernel()(rng, sampler.init(GaussianAdditiveTheta(np.ones(2))), model, step, None, 1.0)


@pytest.mark.parametrize("sampler", [sgld, psgld], ids=["sgld", "psgld"])
@pytest.mark.parametrize("temperature", [-1.0, 2.0, np.nan, "1", True, np.array([0.5, 1.5]), np.array([])])
def test_a_temperature_outside_zero_to_one_is_refused(rng, sampler, temperature):
    # -1 sampled an improper target and 2 another one, silently; NaN only set is_divergent
    model = GaussianAdditiveModel(GaussianAdditiveModel.sample(rng, 10, 2)[1], 2)
    with pytest.raises(ParameterError, match="temperature=.* must lie in \\[0, 1\\]"):
        sampler.build_kernel()(rng, sampler.init(GaussianAdditiveTheta(np.ones(2))), model, 1e-3, None, temperature)
    for fine in (0, 1, 0.5, np.float32(0.25)):
        sampler.build_kernel()(rng, sampler.init(GaussianAdditiveTheta(np.ones(2))), model, 1e-3, None, fine)


def test_steps_per_chain_and_integer_positions_are_accepted(rng):
    model = GaussianAdditiveModel(GaussianAdditiveModel.sample(rng, 10, 2)[1], 2)
    kernel = sgld.build_kernel()
    for step in (1e-3, np.float32(1e-3), 1, np.array([1e-3, 2e-3])):
        state, info = kernel(rng, sgld.init(GaussianAdditiveTheta(np.ones(2))), model, step, None, 1.0)
        assert not info.is_divergent
    # an integer start raised a raw TypeError from the noise draw: it becomes float64, a float32 one stays
    state = sgld.init(GaussianAdditiveTheta(np.array([2, 3])))
    assert state.position.theta.dtype == np.float64
    assert np.all(np.isfinite(kernel(rng, state, model, 1e-3, None, 1.0)[0].position.theta))
    assert sgld.init(GaussianAdditiveTheta(np.ones(2, np.float32))).position.theta.dtype == np.float32
    with pytest.raises(ParameterError, match="position leaf theta has dtype <U1"):
        sgld.init(GaussianAdditiveTheta(np.array(["a"])))


@pytest.mark.parametrize("sampler", [sgld, psgld], ids=["sgld", "psgld"])
def test_a_step_per_chain_of_the_wrong_length_is_named(rng, sampler):
    # three steps for two chains met NumPy's "operands could not be broadcast together"
    model = GaussianAdditiveModel(GaussianAdditiveModel.sample(rng, 10, 2)[1], 2)
    kernel, state = sampler.build_kernel(), sampler.init(GaussianAdditiveTheta(np.ones(2)))
    with pytest.raises(ParameterError, match=r"step_size: \(3,\) per-chain values do not match .* shape \(2,\)"):
        kernel(rng, state, model, np.array([1e-3, 2e-3, 3e-3]), None, 1.0)


@pytest.mark.parametrize("sampler", [sgld, psgld], ids=["sgld", "psgld"])
def test_every_call_checks_its_step(rng, sampler):
    # a step array changed in place after a valid call is refused (an identity cache let -1 and NaN through)
    model = GaussianAdditiveModel(GaussianAdditiveModel.sample(rng, 10, 2)[1], 2)
    kernel, state = sampler.build_kernel(), sampler.init(GaussianAdditiveTheta(np.ones(2)))
    steps = np.array([1e-3, 2e-3])
    state, _ = kernel(rng, state, model, steps, None, 1.0)
    for bad in (-1.0, np.nan):
        steps[1] = bad
        with pytest.raises(ParameterError, match="step_size="):
            kernel(rng, state, model, steps, None, 1.0)

@pytest.mark.parametrize("sampler", [sgld, psgld], ids=["sgld", "psgld"])
@pytest.mark.parametrize("flags", [True, (True, False), ()])
def test_mirroring_flags_must_name_every_leaf(rng, sampler, flags):
    """True met a TypeError and a tuple of the wrong length an IndexError, or mirrored the wrong leaves."""
    model = GaussianAdditiveModel(GaussianAdditiveModel.sample(rng, 10, 2)[1], 2)
    with pytest.raises(ParameterError, match=r"^nonnegative=.*: expected one flag per leaf of the position \(theta\)"):
        sampler.build_kernel(nonnegative=flags)(rng, sampler.init(GaussianAdditiveTheta(np.ones(2))), model, 1e-3,
                                                None, 1.0)


class _StiffPrior:
    """Prior gradient -1e300 x on the first coordinate and 0 on the second: a step of 1e10 overflows the first only."""

    def grad_log_prior(self, theta):
        return GaussianAdditiveTheta(np.array([-1e300, 0.0]) * theta.theta)


@pytest.mark.parametrize("sampler", [sgld, psgld])
def test_a_step_that_overflows_one_entry_is_divergent(rng, sampler):
    """The finite start, or the one entry still finite, made the step look sound before."""
    state = sampler.init(GaussianAdditiveTheta(np.array([1.0, 1.0])))
    with np.errstate(over="ignore", invalid="ignore"):
        new, info = sampler.build_kernel()(rng, state, _StiffPrior(), 1e10, None, 0.0)
    assert not np.isfinite(new.position.theta[0]) and np.isfinite(new.position.theta[1])
    assert info.is_divergent
