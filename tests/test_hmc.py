"""HMC and the leapfrog integrator: reversibility, second-order energy error, known Gaussian posteriors."""

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.random import stream
from sepsti.core.samplers import diagnostics, hmc
from sepsti.core.samplers.driver import run_chain
from sepsti.core.samplers.integrators import IntegratorState, kinetic_energy, leapfrog
from sepsti.core.samplers.warmup import window_adaptation


def gaussian(scales, correlation=None):
    """Zero-mean Gaussian target with the given marginal scales (and 2-D correlation)."""
    scales = np.asarray(scales, dtype=float)
    cov = np.diag(scales ** 2)
    if correlation is not None:
        cov[0, 1] = cov[1, 0] = correlation * scales[0] * scales[1]
    precision = np.linalg.inv(cov)

    def logdensity_and_grad(x):
        px = precision @ x
        return -0.5 * float(x @ px), -px

    return logdensity_and_grad, np.diag(cov)


def assert_moments(draws, true_mean, true_var, *, k=4.0, min_ess=100.0):
    """Means and variances within k Monte-Carlo standard errors, after an ESS gate."""
    ess = diagnostics.effective_sample_size(draws, method="mean")
    assert ess.min() >= min_ess, f"ESS too small for a meaningful check: {ess.min():.0f}"
    flat = draws.reshape(-1, draws.shape[-1])
    z_mean = (flat.mean(0) - true_mean) / diagnostics.mcse_mean(draws)
    z_var = (flat.var(0) - true_var) / diagnostics.mcse_variance(draws)
    assert np.abs(z_mean).max() < k, f"worst mean error {np.abs(z_mean).max():.2f} MCSE"
    assert np.abs(z_var).max() < k, f"worst variance error {np.abs(z_var).max():.2f} MCSE"


def sample(kernel, target_fn, position, seed, *, num_warmup, num_draws, num_chains=2, target=0.8):
    chains = []
    for chain in range(num_chains):
        rng = stream(seed, chain)
        warm = window_adaptation(kernel, hmc.init(position, target_fn), rng, target_fn, num_steps=num_warmup,
                                 target=target)
        result = run_chain(lambda r, s, i: kernel(r, s, warm.step_size, warm.inverse_mass_matrix), warm.state, rng,
                           num_steps=num_draws)
        chains.append(result.samples)
    return np.stack(chains)


def test_leapfrog_is_reversible(rng):
    fn, _ = gaussian([0.5, 2.0, 1.0])
    inverse_mass = np.array([1.0, 3.0, 0.5])
    position = rng.standard_normal(3)
    logp, grad = fn(position)
    point = start = IntegratorState(position, rng.standard_normal(3), logp, grad)
    for _ in range(25):
        point = leapfrog(point, 0.1, fn, inverse_mass)
    point = point._replace(momentum=-point.momentum)
    for _ in range(25):
        point = leapfrog(point, 0.1, fn, inverse_mass)
    np.testing.assert_allclose(point.position, start.position, atol=1e-12)
    np.testing.assert_allclose(-point.momentum, start.momentum, atol=1e-12)


def test_leapfrog_energy_error_is_second_order(rng):
    fn, _ = gaussian([1.0, 2.0])
    position, momentum = rng.standard_normal(2), rng.standard_normal(2)
    inverse_mass = np.ones(2)

    def max_energy_error(step):
        logp, grad = fn(position)
        point = IntegratorState(position, momentum, logp, grad)
        energy0 = -logp + kinetic_energy(momentum, inverse_mass)
        errors = []
        for _ in range(int(round(2.0 / step))):
            point = leapfrog(point, step, fn, inverse_mass)
            errors.append(abs(-point.logdensity + kinetic_energy(point.momentum, inverse_mass) - energy0))
        return max(errors)

    ratio = max_energy_error(0.1) / max_energy_error(0.05)
    assert 3.5 < ratio < 4.5


def test_init_rejects_non_finite_density():
    with pytest.raises(ParameterError, match="log density"):
        hmc.init(np.zeros(2), lambda x: (np.nan, np.zeros(2)))
    with pytest.raises(ParameterError, match="num_integration_steps"):
        hmc.build_kernel(lambda x: (0.0, x), num_integration_steps=0)


def test_huge_step_is_divergent_and_rejected():
    fn, _ = gaussian([1.0, 1.0])
    kernel = hmc.build_kernel(fn, num_integration_steps=10)
    state = hmc.init(np.array([0.5, 0.5]), fn)
    new, info = kernel(np.random.default_rng(3), state, 100.0)
    assert info.is_divergent and not info.is_accepted
    np.testing.assert_array_equal(new.position, state.position)
    # the energy is the returned state's: -log p(x0) + |p|^2 / 2 with the momentum the kernel drew first (the
    # rejected proposal's energy passed before)
    momentum = np.random.default_rng(3).standard_normal(2)
    assert info.energy == pytest.approx(0.25 + 0.5 * momentum @ momentum, rel=1e-12)


def test_jittered_steps_are_uniform_on_one_to_the_number_of_steps():
    """Jittered trajectories take 1..L steps, each with probability 1/L (1..L-1, never L, passed before; with L = 1
    NumPy's ValueError)."""
    fn, _ = gaussian([1.0, 1.0])
    rng = np.random.default_rng(4)
    state = hmc.init(np.array([0.5, 0.5]), fn)
    kernel = hmc.build_kernel(fn, num_integration_steps=4, jitter_steps=True)
    counts = np.bincount([kernel(rng, state, 0.1)[1].num_integration_steps for _ in range(800)], minlength=6)
    assert counts[0] == counts[5] == 0
    # 4 binomial standard errors around 800 / 4
    assert np.all(np.abs(counts[1:5] - 200.0) < 4 * np.sqrt(800 * 0.25 * 0.75)), counts
    single = hmc.build_kernel(fn, num_integration_steps=1, jitter_steps=True)
    assert single(rng, state, 0.1)[1].num_integration_steps == 1


def test_hmc_100d_gaussian_scales_over_two_orders():
    scales = np.logspace(-1, 1, 100)
    fn, variances = gaussian(scales)
    kernel = hmc.build_kernel(fn, num_integration_steps=8, jitter_steps=True)
    draws = sample(kernel, fn, np.ones(100), 11, num_warmup=500, num_draws=1500)
    assert_moments(draws, 0.0, variances)


def test_hmc_correlated_2d_gaussian():
    fn, variances = gaussian([1.0, 2.0], correlation=0.95)
    kernel = hmc.build_kernel(fn, num_integration_steps=30, jitter_steps=True)
    draws = sample(kernel, fn, np.array([1.0, -1.0]), 12, num_warmup=500, num_draws=2000)
    assert_moments(draws, 0.0, variances)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_hmc_gaussians_over_seeds(seed):
    scales = np.logspace(-1, 1, 100)
    fn, variances = gaussian(scales)
    kernel = hmc.build_kernel(fn, num_integration_steps=8, jitter_steps=True)
    assert_moments(sample(kernel, fn, np.ones(100), seed, num_warmup=1000, num_draws=3000), 0.0, variances)
    fn, variances = gaussian([1.0, 2.0], correlation=0.95)
    kernel = hmc.build_kernel(fn, num_integration_steps=30, jitter_steps=True)
    assert_moments(sample(kernel, fn, np.array([1.0, -1.0]), seed, num_warmup=1000, num_draws=3000), 0.0, variances)


def test_bad_leapfrog_settings_are_refused():
    def standard_normal(x):
        return -0.5 * float(x @ x), -x

    with pytest.raises(ParameterError, match="num_integration_steps=2.5"):
        hmc.build_kernel(standard_normal, num_integration_steps=2.5)
    kernel = hmc.build_kernel(standard_normal, num_integration_steps=3)
    state = hmc.init(np.zeros(2), standard_normal)
    for step in (0.0, -0.1, np.nan):
        with pytest.raises(ParameterError, match="step_size="):
            kernel(np.random.default_rng(0), state, step)


def test_a_proposal_into_a_nan_log_density_is_rejected():
    """A trajectory ending where the log density is NaN (outside the support) must never be accepted."""
    def half_normal(x):
        if x[0] < 0:
            return np.nan, np.full(1, np.nan)
        return -0.5 * float(x @ x), -x
    kernel = hmc.build_kernel(half_normal, num_integration_steps=5)
    rng = np.random.default_rng(0)
    for _ in range(200):   # from 0.3 with step 0.5 many trajectories cross zero; all of those must be rejected
        new, _ = kernel(rng, hmc.init(np.array([0.3]), half_normal), 0.5)
        assert np.isfinite(new.logdensity) and new.position[0] >= 0


def test_init_refuses_a_log_density_or_gradient_of_the_wrong_shape():
    """A scalar or (1,) gradient for a 3-d target broadcast silently into wrong draws; a (3, 1) gradient or a
    1-element log density failed later with a TypeError that named neither."""
    from sepsti.core.samplers import nuts

    position = np.ones(3)
    cases = [(lambda x: (-0.5 * float(x @ x), -x[0]), r"gradient at the start has shape \(\) \(type float64\)"),
             (lambda x: (-0.5 * float(x @ x), -x[:1]), r"gradient at the start has shape \(1,\)"),
             (lambda x: (-0.5 * float(x @ x), -x[:, None]), r"gradient at the start has shape \(3, 1\)"),
             (lambda x: (-0.5 * float(x @ x), list(-x)), r"shape \(3,\) \(type list\): expected an array"),
             (lambda x: (np.array([-0.5 * x @ x]), -x), r"log density at the start has shape \(1,\)"),
             (lambda x: (-0.5 * x * x, -x), r"log density at the start has shape \(3,\)")]
    for init in (hmc.init, nuts.init):
        for fn, message in cases:
            with pytest.raises(ParameterError, match=message + ".*"):
                init(position, fn)
    # a NumPy scalar log density and a 0-d array are scalars
    for logdensity in (np.float32(-1.5), np.array(-1.5)):
        assert hmc.init(position, lambda x, value=logdensity: (value, -x)).logdensity == -1.5


def standard_normal(x):
    return -0.5 * float(x @ x), -x


def mass_matrix_users(state):
    """Every caller of a given inverse mass matrix: the HMC and NUTS kernels, the step heuristic, the momentum."""
    from sepsti.core.samplers import nuts

    hmc_kernel = hmc.build_kernel(standard_normal, num_integration_steps=3)
    nuts_kernel = nuts.build_kernel(standard_normal)
    rng = np.random.default_rng(0)
    return {"hmc": lambda m: hmc_kernel(rng, state, 0.1, m), "nuts": lambda m: nuts_kernel(rng, state, 0.1, m),
            "heuristic": lambda m: hmc.find_reasonable_step_size(rng, state, standard_normal, m),
            "momentum": lambda m: hmc.sample_momentum(rng, m)}


def test_a_dense_inverse_mass_matrix_that_is_not_symmetric_is_refused():
    """[[1, .9], [0, 1]] drew the momentum from its lower triangle and moved with the whole matrix: HMC on
    N(0, I) gave the covariance [[1.19, .41], [.41, .82]], with no error."""
    users = mass_matrix_users(hmc.init(np.zeros(2), standard_normal))
    spd = np.array([[1.0, 0.5], [0.5, 1.0]])
    # the tolerance scales with sqrt(M_ii M_jj): variances 1e-8 and 1e8, covariance 0.5, off by 1e-4 of it
    lopsided = np.array([[1e-8, 0.5 + 5e-5], [0.5, 1e8]])
    for bad in ([[1.0, 0.9], [0.0, 1.0]], 1e-12 * np.array([[1.0, 0.9], [0.0, 1.0]]),
                1e12 * np.array([[1.0, 0.5 + 1e-4], [0.5, 1.0]]), lopsided, np.array([[1.0, np.nan], [np.nan, 1.0]])):
        for name, use in users.items():
            use(spd)  # a valid matrix first, so that a cached one cannot stand in for the bad one
            with pytest.raises(ParameterError, match="symmetric positive definite"):
                use(np.array(bad))
    # rounding is no asymmetry: the inverse of a precision matrix is symmetric to about 1e-16 of its scale
    for scale in (1e-12, 1.0, 1e12):
        for use in users.values():
            use(scale * np.array([[1.0, 0.5 * (1 + 1e-12)], [0.5, 1.0]]))


@pytest.mark.parametrize("bad, message", [([1.0, -1.0], "finite positive entries"), ([1.0, 0.0], "finite positive"),
                                          ([1.0, np.nan], "finite positive"), ([np.inf, 1.0], "finite positive"),
                                          ([1.0, 1.0, 1.0], r"shape \(3,\): expected \(2,\) or \(2, 2\)"),
                                          (np.ones((2, 3)), r"shape \(2, 3\)")])
def test_a_diagonal_inverse_mass_matrix_must_be_finite_positive_and_fit_the_position(bad, message):
    # a negative or zero entry made every transition diverge; a list or a wrong length raised raw errors
    users = mass_matrix_users(hmc.init(np.zeros(2), standard_normal))
    if len(np.shape(bad)) == 1 and len(bad) == 3:
        users = {name: users[name] for name in ("hmc", "heuristic")}  # the others do not know the dimension
    for use in users.values():
        with pytest.raises(ParameterError, match=message):
            use(np.array(bad))


def test_an_inverse_mass_matrix_may_be_a_list():
    kernel = hmc.build_kernel(standard_normal, num_integration_steps=3)
    state = hmc.init(np.ones(2), standard_normal)
    for matrix in ([2.0, 0.5], [[2.0, 0.3], [0.3, 0.5]]):
        from_list = kernel(np.random.default_rng(1), state, 0.2, matrix)
        from_array = kernel(np.random.default_rng(1), state, 0.2, np.array(matrix))
        np.testing.assert_array_equal(from_list[0].position, from_array[0].position)
        assert from_list[1] == from_array[1]


def test_init_refuses_a_non_finite_gradient():
    """-x²/2 - Σ√|x| at 0: the log density is finite, the gradient NaN; the chain never moved."""
    from sepsti.core.samplers import nuts

    def cusp(x):
        with np.errstate(all="ignore"):
            return -0.5 * float(x @ x) - float(np.sum(np.sqrt(np.abs(x)))), -x - 0.5 * np.sign(x) / np.sqrt(np.abs(x))

    for init in (hmc.init, nuts.init):
        with pytest.raises(ParameterError, match=r"gradient at the start is not finite \(\[nan nan\]\)"):
            init(np.zeros(2), cusp)
        with pytest.raises(ParameterError, match="gradient at the start is not finite"):
            init(np.zeros(2), lambda x: (0.0, np.array([np.inf, 0.0])))
    assert np.all(np.isfinite(hmc.init(np.ones(2), cusp).logdensity_grad))


@pytest.mark.parametrize("threshold", [-1.0, 0.0, np.nan, np.inf, "1000"])
def test_the_divergence_threshold_must_be_positive_and_finite(threshold):
    # -1 flagged every transition divergent, accepted ones included
    with pytest.raises(ParameterError, match="divergence_threshold="):
        hmc.build_kernel(standard_normal, num_integration_steps=3, divergence_threshold=threshold)


@pytest.mark.parametrize("setting, message", [
    (dict(initial_step_size=0.0), r"^initial_step_size=0.0 must be a positive number$"),  # returned 0
    (dict(initial_step_size=np.nan), r"^initial_step_size=nan must be a positive number$"),  # returned NaN
    (dict(initial_step_size=-1.0), r"^initial_step_size=-1.0 must be a positive number$"),  # returned -4
    (dict(target=0.0), r"^target=0.0 must be a number in \(0, 1\)"),  # math domain error
    (dict(target=1.5), r"^target=1.5 must be a number in \(0, 1\)"),  # halved a hundred times, to 8e-31
    (dict(max_doublings=2.5), r"^max_doublings=2.5 must be an integer of at least 1$"),  # a TypeError
])
def test_the_initial_step_heuristic_refuses_settings_outside_their_ranges(setting, message):
    state = hmc.init(np.zeros(2), standard_normal)
    with pytest.raises(ParameterError, match=message):
        hmc.find_reasonable_step_size(np.random.default_rng(0), state, standard_normal, **setting)


@pytest.mark.parametrize("num_steps", [25.0, 2.5, 0, True])
def test_a_warm_up_refuses_a_count_that_is_not_a_positive_integer_before_any_work(num_steps):
    # 25.0 gave a raw TypeError after the initial step heuristic had run
    kernel = hmc.build_kernel(standard_normal, num_integration_steps=3)
    state = hmc.init(np.zeros(2), standard_normal)

    def target(x):
        raise AssertionError("the target was evaluated")

    with pytest.raises(ParameterError, match=f"num_steps={num_steps!r}"):
        window_adaptation(kernel, state, np.random.default_rng(0), target, num_steps=num_steps)


def test_a_matrix_is_checked_and_factorised_once_whatever_its_dtype(rng):
    # a float32 matrix was converted on every transition and the copy missed the cache: a Cholesky each time
    from unittest import mock

    def target(x):
        return -0.5 * x @ x, -x

    state, kernel = hmc.init(np.zeros(3), target), hmc.build_kernel(target, num_integration_steps=3)
    for matrix in (np.eye(3, dtype=np.float32), np.eye(3).tolist()):
        with mock.patch("numpy.linalg.cholesky", wraps=np.linalg.cholesky) as cholesky:
            for _ in range(20):
                state, _ = kernel(rng, state, 0.2, matrix)
        assert cholesky.call_count == 1


@pytest.mark.parametrize("returned, kind", [(-0.5, "a float"), ((1.0,), "a tuple"), (np.zeros(3), "a ndarray")])
def test_a_log_density_function_that_returns_no_pair_is_named(returned, kind):
    """A bare float met "cannot unpack non-iterable float object"; a list of the two is taken as a pair."""
    with pytest.raises(ParameterError, match=rf"^the log density function returned {kind}.*: expected a pair"):
        hmc.init(np.zeros(2), lambda x: returned)
    assert hmc.init(np.zeros(2), lambda x: [-0.5 * float(x @ x), -x]).logdensity == 0.0


def test_a_warm_up_without_windows_is_dual_averaging_written_out(monkeypatch):
    """Acceptance statistics given, no mass-matrix windows: the step sizes the kernel is handed and the returned
    average follow Hoffman & Gelman's Algorithm 5 with the γ, t0, κ and δ asked for, written out here; the first
    step comes from the heuristic run with the start's inverse mass matrix, which the kernel is handed throughout."""
    from types import SimpleNamespace

    import sepsti.core.samplers.warmup as warmup

    rates = 0.5 + 0.45 * np.sin(np.arange(1, 13))
    handed, heuristic = [], []

    def kernel(rng, state, step_size, inverse_mass_matrix):
        handed.append((step_size, inverse_mass_matrix.copy()))
        return state, SimpleNamespace(acceptance_rate=rates[len(handed) - 1])

    def find_reasonable_step_size(rng, state, fn, inverse_mass_matrix, **options):
        heuristic.append(inverse_mass_matrix.copy())
        return 0.3

    monkeypatch.setattr(warmup, "find_reasonable_step_size", find_reasonable_step_size)
    start = np.array([2.0, 0.5])
    warm = window_adaptation(kernel, hmc.init(np.zeros(2), standard_normal), np.random.default_rng(0),
                             standard_normal, num_steps=12, target=0.7, gamma=0.1, t0=5.0, kappa=0.6,
                             inverse_mass_matrix=start, adapt_mass_matrix=False)
    mu, error, log_step, log_average, expected = np.log(3.0), 0.0, np.log(0.3), 0.0, []
    for m, rate in enumerate(rates, start=1):
        expected.append(np.exp(log_step))
        error = (1 - 1 / (m + 5.0)) * error + (0.7 - rate) / (m + 5.0)
        log_step = mu - np.sqrt(m) / 0.1 * error
        log_average = m ** -0.6 * log_step + (1 - m ** -0.6) * log_average
    np.testing.assert_allclose([step for step, _ in handed], expected, rtol=1e-12)
    assert warm.step_size == pytest.approx(np.exp(log_average), rel=1e-12)
    np.testing.assert_array_equal(heuristic, [start])
    for _, inverse_mass_matrix in handed:
        np.testing.assert_array_equal(inverse_mass_matrix, start)
    np.testing.assert_array_equal(warm.inverse_mass_matrix, start)


@pytest.mark.parametrize("metric, shape", [("diagonal", (3,)), ("dense", (2,)), ("dense", (3, 3))])
def test_a_warm_up_refuses_an_inverse_mass_matrix_of_another_shape(metric, shape):
    import re

    state = hmc.init(np.zeros(2), standard_normal)
    needs = "(2,)" if metric == "diagonal" else "(2, 2)"
    with pytest.raises(ParameterError, match=re.escape(f"has shape {shape}; metric={metric!r} needs {needs}")):
        window_adaptation(hmc.build_kernel(standard_normal, num_integration_steps=3), state,
                          np.random.default_rng(0), standard_normal, num_steps=5, metric=metric,
                          inverse_mass_matrix=np.ones(shape))


def test_a_warm_up_counts_its_divergent_transitions_and_refuses_an_unknown_metric():
    from types import SimpleNamespace

    def kernel(rng, state, step_size, inverse_mass_matrix):
        kernel.calls += 1
        return state, SimpleNamespace(acceptance_rate=0.8, is_divergent=kernel.calls % 3 == 0)

    kernel.calls = 0
    state = hmc.init(np.zeros(2), standard_normal)
    warm = window_adaptation(kernel, state, np.random.default_rng(0), standard_normal, num_steps=10,
                             initial_step_size=0.5)
    assert warm.num_divergent == 3  # iterations 3, 6 and 9
    with pytest.raises(ParameterError, match="metric='full' must be 'diagonal' or 'dense'"):
        window_adaptation(kernel, state, np.random.default_rng(0), standard_normal, num_steps=10, metric="full")
