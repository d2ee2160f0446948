"""Stochastic Thermodynamic Integration (STI): log evidence from power posteriors.

Conventions
-----------
``num_intervals`` T counts the *intervals* of the temperature grid, which
therefore has T + 1 temperatures 0 = t_0 < ... < t_T = 1 (ICASSP'16 eq. 7 and
the bias bound's Delta t = 1/T). One chain per temperature samples
p(theta) p(x | theta)^t; after each kept update, the new sample's
log-likelihood is estimated on the subsample that drove the update, times
N/N_s (eq. 9). The per-temperature means are combined by the trapezoid rule.

Chains are independent, so the standard error of the estimate is
sqrt(sum_i w_i^2 mcse_i^2) with trapezoid weights w_i and per-chain Monte
Carlo standard errors from the integrated autocorrelation time.

References
----------
ICASSP'16 eq. 6-10; PARAFAC'18 eq. 5-9; Friel & Pettitt (2008) for the
power schedule t_i = (i/T)^c.
"""

import warnings
from typing import NamedTuple

import numpy as np

from core.errors import ParameterError
from core.models.subsample import log_likelihood_estimate
from core.random import stream
from core.samplers import psgld as _psgld
from core.samplers import sgld as _sgld
from core.samplers.driver import run_chain
from core.samplers.step_size import step_sizes

__all__ = ["STIResult", "TemperedState", "temperature_grid", "trapezoid_weights", "integration_weights",
           "integrated_time", "chain_summary", "thermodynamic_integral", "power_posterior_chain",
           "stochastic_thermodynamic_integration", "random_subsets"]


class STIResult(NamedTuple):
    """What STI returns for one model.

    Attributes
    ----------
    log_evidence : float
        Trapezoid estimate of log p(x).
    stderr : float
        Its Monte-Carlo standard error.
    temperatures : ndarray, shape (T + 1,)
    mean_log_likelihood : ndarray, shape (T + 1,)
        Estimates of E_t[log p(x | theta)].
    mcse : ndarray, shape (T + 1,)
        Their Monte-Carlo standard errors.
    integrated_time : ndarray, shape (T + 1,)
        Integrated autocorrelation time of each chain's trace.
    num_keep : int
        Kept samples per temperature.
    """

    log_evidence: float
    stderr: float
    temperatures: np.ndarray
    mean_log_likelihood: np.ndarray
    mcse: np.ndarray
    integrated_time: np.ndarray
    num_keep: int


class TemperedState(NamedTuple):
    """A sampler's state and the log-likelihood estimate of its position (NaN when not evaluated)."""

    inner: object
    log_likelihood: float


def temperature_grid(num_intervals, *, schedule="uniform", power=5.0):
    """The T + 1 temperatures 0 = t_0 < ... < t_T = 1.

    Parameters
    ----------
    num_intervals : int
        T, the number of intervals.
    schedule : {"uniform", "power"}
        ``uniform``: t_i = i/T (ICASSP'16). ``power``: t_i = (i/T)^c, which
        puts temperatures where E_t[log p(x|theta)] changes fastest, near 0.
    power : float
        c of the power schedule.

    Returns
    -------
    ndarray, shape (T + 1,)
    """
    if int(num_intervals) != num_intervals or num_intervals < 1:
        raise ParameterError(f"num_intervals={num_intervals} must be a positive integer (T counts intervals)")
    grid = np.arange(int(num_intervals) + 1) / int(num_intervals)
    if schedule == "uniform":
        return grid
    if schedule == "power":
        if not power >= 1:
            raise ParameterError(f"power={power} must be >= 1")
        return grid ** float(power)
    raise ParameterError(f"schedule={schedule!r}: expected 'uniform' or 'power'")


def trapezoid_weights(temperatures):
    """Weights w with sum_i w_i f(t_i) = the trapezoid rule over ``temperatures``."""
    t = np.asarray(temperatures, dtype=np.float64)
    dt = np.diff(t)
    w = np.zeros_like(t)
    w[:-1] += dt / 2
    w[1:] += dt / 2
    return w


def integration_weights(temperatures, *, rule="trapezoid", power=1.0):
    """Quadrature weights w over the grid, so that log p(x) ~ sum_i w_i E_{t_i}[log p(x | theta)].

    Parameters
    ----------
    temperatures : array_like, shape (T + 1,)
    rule : {"trapezoid", "simpson"}
        ``trapezoid``: ICASSP'16 eq. 7, in t. ``simpson``: Simpson's rule in
        the grid variable u = t^(1/c), on the integrand c u^(c-1) E_t[...]
        which is smooth where E_t changes fastest; its weight at t = 0 is 0
        for c > 1.
    power : float
        c, the exponent the grid was built with (1 for a uniform grid).
    """
    t = np.asarray(temperatures, dtype=np.float64)
    if rule == "trapezoid":
        return trapezoid_weights(t)
    if rule == "simpson":
        from scipy.integrate import simpson

        u = t ** (1.0 / power)
        basis = np.eye(t.size)
        weights_u = np.array([simpson(row, x=u) for row in basis])
        return weights_u * power * u ** (power - 1.0)
    raise ParameterError(f"rule={rule!r}: expected 'trapezoid' or 'simpson'")


def integrated_time(x, *, c=5.0):
    """Integrated autocorrelation time of a 1-d trace (Sokal's automatic window).

    Returns 1 for a constant trace. Follows emcee's ``integrated_time``
    (FFT autocorrelation, smallest window M with M >= c tau(M)).
    """
    x = np.asarray(x, dtype=np.float64)
    n = x.size
    centred = x - x.mean()
    if n < 2 or not np.any(centred):
        return 1.0
    size = 1 << (2 * n - 1).bit_length()
    spectrum = np.fft.rfft(centred, n=size)
    acf = np.fft.irfft(spectrum * np.conjugate(spectrum))[:n]
    acf /= acf[0]
    taus = 2.0 * np.cumsum(acf) - 1.0
    window = np.arange(n) >= c * taus
    m = int(np.argmax(window)) if np.any(window) else n - 1
    return float(max(taus[m], 1.0))


def chain_summary(trace):
    """Mean, Monte-Carlo standard error and integrated time of one trace."""
    trace = np.asarray(trace, dtype=np.float64)
    tau = integrated_time(trace)
    variance = trace.var(ddof=1) if trace.size > 1 else 0.0
    return float(trace.mean()), float(np.sqrt(variance * tau / trace.size)), tau


def thermodynamic_integral(temperatures, traces, *, rule="trapezoid", power=1.0, tol=50.0):
    """Combine per-temperature log-likelihood traces into an :class:`STIResult`.

    Parameters
    ----------
    temperatures : array_like, shape (T + 1,)
        Increasing, from 0 to 1.
    traces : sequence of array_like
        The kept log-likelihood estimates of each temperature's chain.
    rule, power : see :func:`integration_weights`
    tol : float
        Warn (RuntimeWarning) when a trace is shorter than ``tol`` times its
        integrated time, as emcee does: its MCSE is then unreliable.
    """
    t = np.asarray(temperatures, dtype=np.float64)
    if t.ndim != 1 or t.size < 2 or t[0] != 0.0 or t[-1] != 1.0 or np.any(np.diff(t) <= 0):
        raise ParameterError(f"temperatures={t}: need an increasing grid from 0 to 1")
    if len(traces) != t.size:
        raise ParameterError(f"got {len(traces)} traces for {t.size} temperatures")
    summaries = [chain_summary(trace) for trace in traces]
    means, mcses, taus = (np.array(column) for column in zip(*summaries))
    short = [f"t={ti:.3g} (tau={tau:.0f})" for ti, tau, trace in zip(t, taus, traces) if len(trace) < tol * tau]
    if short:
        warnings.warn(f"traces shorter than {tol:g} integrated times at {', '.join(short)}: "
                      "their standard errors are unreliable; run longer chains", RuntimeWarning, stacklevel=2)
    weights = integration_weights(t, rule=rule, power=power)
    return STIResult(float(weights @ means), float(np.sqrt(np.sum((weights * mcses) ** 2))), t, means, mcses, taus,
                     int(min(len(trace) for trace in traces)))


def random_subsets(model, subset_size):
    """``subset_fn(rng, iteration)`` drawing ``subset_size`` indices with replacement."""
    n = model.n_data
    return lambda rng, iteration: rng.integers(0, n, size=subset_size)


def power_posterior_chain(model, position, rng, *, temperature, num_steps, num_keep, subset_fn, sampler="sgld",
                          step_a=1e-8, step_b=0.51, alpha=0.99, sigma=1e-5, control_variate=False,
                          evaluate="after_update", step_floor=None, progress=False, desc=None):
    """Run one chain on p(theta) p(x | theta)^t and return the kept log-likelihood estimates.

    The step size decays as (a/k)^b over the ``num_steps - num_keep`` burn-in
    iterations and is fixed afterwards. After each kept update, the new
    position's log-likelihood is estimated on the subsample that drove the
    update (:func:`core.models.subsample.log_likelihood_estimate`); with
    ``control_variate`` the last burn-in position is the reference, its
    full-data log-likelihood computed once.

    ``evaluate="after_update"`` is ICASSP'16 eq. 9 verbatim: theta^(k) on
    S^(k). Since theta^(k) has just moved towards S^(k), that estimate is
    biased upwards by O(eps). ``evaluate="before_update"`` scores
    theta^(k-1) on S^(k) instead -- the same subsample, a sample independent
    of it, hence unbiased -- and the gradient pass computes it anyway.

    ``step_floor`` t_min, when given, divides the step sizes by
    max(t, t_min): the likelihood's curvature scales with t, so the step
    that is stable and accurate at t = 1 is needlessly small -- and mixes
    in hundreds of iterations -- where the prior dominates.

    Returns
    -------
    trace : ndarray, shape (num_keep,)
    result : ChainResult
        The driver's output (``samples`` is the trace; ``state`` the last state).
    """
    if not 1 <= num_keep <= num_steps:
        raise ParameterError(f"num_keep={num_keep} must lie in [1, num_steps={num_steps}]")
    burn_in = num_steps - num_keep
    if sampler == "sgld":
        module, kernel = _sgld, _sgld.build_kernel()
    elif sampler == "psgld":
        module, kernel = _psgld, _psgld.build_kernel(alpha=alpha, sigma=sigma)
    else:
        raise ParameterError(f"sampler={sampler!r}: expected 'sgld' or 'psgld'")
    if evaluate not in ("after_update", "before_update"):
        raise ParameterError(f"evaluate={evaluate!r}: expected 'after_update' or 'before_update'")
    steps = step_sizes(step_a, step_b, num_steps=num_steps, num_decay_steps=max(burn_in, 1))
    if step_floor is not None:
        steps = steps / max(float(temperature), float(step_floor))
    reference = []
    after = evaluate == "after_update"

    def step_fn(chain_rng, state, iteration):
        subset = subset_fn(chain_rng, iteration)
        if control_variate and iteration == burn_in + 1:
            reference.append((state.inner.position, model.log_likelihood(state.inner.position, None)))
        value = np.nan
        if iteration > burn_in and not after:
            value = log_likelihood_estimate(model, state.inner.position, subset,
                                            reference=reference[0] if reference else None)
        inner, info = kernel(chain_rng, state.inner, model, steps[iteration - 1], subset, temperature)
        if iteration > burn_in and after:
            value = log_likelihood_estimate(model, inner.position, subset,
                                            reference=reference[0] if reference else None)
        return TemperedState(inner, value), info

    result = run_chain(step_fn, TemperedState(module.init(position), np.nan), rng, num_steps=num_steps,
                       burn_in=burn_in, transform=lambda s: s.log_likelihood, progress=progress, desc=desc)
    return np.asarray(result.samples, dtype=np.float64), result


def stochastic_thermodynamic_integration(model, init_fn, *, num_intervals=10, schedule="uniform", power=5.0,
                                         temperatures=None, num_steps=3000, num_keep=2000, subset_size=None,
                                         subset_fn=None, sampler="sgld", step_a=1e-8, step_b=0.51, alpha=0.99,
                                         sigma=1e-5, rule="trapezoid", control_variate=False,
                                         evaluate="after_update", warm_start=False, step_floor=None, seed=0,
                                         progress=False):
    """Estimate log p(x) of ``model`` by STI.

    Parameters
    ----------
    model : model object
        See :mod:`core.models`.
    init_fn : callable
        ``init_fn(rng) -> position`` for each chain (e.g. ``model.sample_prior``).
    num_intervals, schedule, power : see :func:`temperature_grid`
    temperatures : array_like, optional
        An explicit grid, overriding the three above.
    num_steps, num_keep : int
        Iterations per temperature and how many of the last are kept.
    subset_size : int, optional
        N_s for random subsets drawn with replacement (default: all data).
    subset_fn : callable, optional
        ``subset_fn(rng, iteration) -> subset``, overriding ``subset_size``.
    sampler : {"sgld", "psgld"}
    step_a, step_b : float
        Step-size schedule (a/k)^b during burn-in.
    alpha, sigma : float
        pSGLD preconditioner settings.
    rule : {"trapezoid", "simpson"}
        Quadrature over the grid (:func:`integration_weights`).
    control_variate : bool
        Use the difference estimator of the log-likelihood (see
        :func:`power_posterior_chain`).
    evaluate : {"after_update", "before_update"}
        Which sample the subsample scores (see :func:`power_posterior_chain`).
    step_floor : float, optional
        Divide each chain's steps by max(t, step_floor) (see
        :func:`power_posterior_chain`).
    warm_start : bool
        Start the chain at t_i from the last sample of the chain at t_{i-1}
        (Friel & Pettitt's sequential scheme): neighbouring power posteriors
        overlap, so burn-in only has to bridge one step of the grid. Chains
        then run one after the other.
    seed : int
        Chain i uses ``core.random.stream(seed, i)``.
    progress : bool
        Progress bar per chain on stderr.

    Returns
    -------
    STIResult
    """
    grid = temperature_grid(num_intervals, schedule=schedule, power=power) if temperatures is None else (
        np.asarray(temperatures, dtype=np.float64))
    if subset_fn is None:
        subset_fn = (lambda rng, iteration: None) if subset_size is None else random_subsets(model, int(subset_size))
    traces = []
    previous = None
    for i, t in enumerate(grid):
        rng = stream(seed, i)
        start = init_fn(rng) if previous is None or not warm_start else previous
        trace, chain = power_posterior_chain(model, start, rng, temperature=float(t), num_steps=num_steps,
                                         num_keep=num_keep, subset_fn=subset_fn, sampler=sampler, step_a=step_a,
                                         step_b=step_b, alpha=alpha, sigma=sigma, control_variate=control_variate,
                                         evaluate=evaluate, step_floor=step_floor, progress=progress,
                                         desc=f"t={t:.3g}")
        previous = chain.state.inner.position
        traces.append(trace)
    grid_power = power if (temperatures is None and schedule == "power") else 1.0
    return thermodynamic_integral(grid, traces, rule=rule, power=grid_power)

