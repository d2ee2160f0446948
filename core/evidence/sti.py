"""Stochastic Thermodynamic Integration (STI): log evidence from power posteriors.

Conventions
-----------
``num_intervals`` T counts the *intervals* of the temperature grid, which
therefore has T + 1 temperatures 0 = t_0 < ... < t_T = 1 (ICASSP'16 eq. 7 and
the bias bound's Delta t = 1/T). One chain per temperature samples
p(theta) p(x | theta)^t; after each kept update, the new sample's
log-likelihood is estimated on the subsample that drove the update, times
N/N_s (eq. 9). The per-temperature means are combined with quadrature
weights w_i (:func:`integration_weights`): the trapezoid rule in t, or
Simpson's rule in the variable u the grid was built on (:class:`TemperatureGrid`).
T is at least 2: with one interval Simpson's rule on a power or beta grid
weighs t = 0 by 0 and the estimate is E_1[log p(x | theta)] alone.

Chains are independent, so the standard error of the estimate is
sqrt(sum_i w_i^2 se_i^2). With one chain per temperature se_i is its Monte
Carlo standard error from the integrated autocorrelation time (NaN from a
single kept value); several chains per temperature are averaged and se_i is
the larger of their combined MCSEs and the spread of their means
(:func:`chain_summary`). The rank-selection engine floors the result by the
spread of its replicates' own estimates (:mod:`sepsti.core.evidence.rank_selection`).

Batched models (``model.batched``, e.g. the Gaussian additive model) run all
chains -- every temperature, several chains each -- in lockstep as array
operations (:func:`power_posterior_chains`): traces are arrays of shape
``(chains, kept)``.

Bias sources and their cures (settings of :class:`TemperatureGrid` and
:class:`LangevinSettings`, measured on the Gaussian additive model, see
``recipes/sti_gaussian.py``): the temperature grid (the uniform grid misses
the fast change of E_t[log p(x|theta)] near t = 0 by hundreds to tens of
thousands of nats; a power grid with Simpson's rule in u = t^(1/c) does
not); the subsampling noise of the gradient, which inflates the chain's
variance by O(eps N^2 / N_s) and biases E_t[log p] downwards (cured by the
control-variate gradient, ``control_variate="gradient"``); the Euler
discretisation, O(eps) (cured to O(eps^2), exactly for Gaussian targets, by
the Leimkuhler-Matthews integrator, ``integrator="lm"``); and the subsample
log-likelihood estimate of eq. 9 at theta^(k), which has moved towards
S^(k) (``evaluate="before_update"`` scores theta^(k-1) instead).

References
----------
ICASSP'16 eq. 6-10; PARAFAC'18 eq. 5-9; Friel & Pettitt (2008) for the
power schedule t_i = (i/T)^c.
"""

import warnings
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np

from sepsti.core.checks import integer_at_least, is_number, number_within, positive_number
from sepsti.core.errors import ParameterError
from sepsti.core.models.subsample import (log_likelihood_estimate, make_reference, tempered_gradient, tree_add_scaled,
                                   tree_vdot)
from sepsti.core.random import stream
from sepsti.core.samplers import psgld as _psgld
from sepsti.core.samplers import sgld as _sgld
from sepsti.core.samplers.driver import run_chain
from sepsti.core.samplers.langevin import langevin_step
from sepsti.core.samplers.step_size import step_sizes, validate_step_schedule

__all__ = ["STIResult", "TemperedState", "TemperatureGrid", "LangevinSettings", "temperature_grid",
           "trapezoid_weights", "integration_weights", "integrated_time", "chain_summary", "thermodynamic_integral",
           "power_posterior_chain", "power_posterior_chains", "curvature", "zero_variance_correction",
           "stochastic_thermodynamic_integration", "random_subsets"]


class STIResult(NamedTuple):
    """What STI returns for one model.

    Attributes
    ----------
    log_marginal_likelihood : float
        Estimate of log p(x): the grid's quadrature of the expectations below.
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

    log_marginal_likelihood: float
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
        T, the number of intervals, at least 2.
    schedule : {"uniform", "power", "beta"}
        ``uniform``: t_i = i/T (ICASSP'16). ``power``: t_i = (i/T)^c, which
        puts temperatures where E_t[log p(x|theta)] changes fastest, near 0.
        ``beta``: t_i = I_(i/T)(c, c), the regularised incomplete beta function
        (c = 2: 3u^2 - 2u^3), dense near both ends, for paths whose integrand
        is also steep near t = 1 (:mod:`sepsti.core.evidence.reference_path`).
    power : float
        c of the power or beta schedule, a finite number >= 1.

    Returns
    -------
    ndarray, shape (T + 1,)

    Raises
    ------
    ParameterError
        On settings outside the ranges above.
    """
    _check_grid(num_intervals, schedule, power)
    grid = np.arange(int(num_intervals) + 1) / int(num_intervals)
    if schedule == "uniform":
        return grid
    if schedule == "power":
        return grid ** float(power)
    from scipy.special import betainc

    return betainc(float(power), float(power), grid)


def _check_grid(num_intervals, schedule, power):
    # NaN, inf and strings met int()'s ValueError, OverflowError or TypeError
    if not (is_number(num_intervals) and np.isfinite(num_intervals) and float(num_intervals).is_integer()
            and num_intervals >= 2):
        raise ParameterError(f"num_intervals={num_intervals!r} must be an integer of at least 2 (T counts "
                             "intervals: with one, Simpson's rule on a power or beta grid weighs t = 0 by 0)")
    _check_schedule(schedule, power)


def _check_schedule(schedule, power):
    if schedule not in ("uniform", "power", "beta"):
        raise ParameterError(f"schedule={schedule!r}: expected 'uniform', 'power' or 'beta'")
    if not (is_number(power) and np.isfinite(power) and power >= 1):  # inf gave the grid 0, ..., 0, 1
        raise ParameterError(f"power={power!r} must be a finite number >= 1")


def trapezoid_weights(temperatures):
    """Weights w with sum_i w_i f(t_i) = the trapezoid rule over ``temperatures``."""
    t = np.asarray(temperatures, dtype=np.float64)
    dt = np.diff(t)
    w = np.zeros_like(t)
    w[:-1] += dt / 2
    w[1:] += dt / 2
    return w


def integration_weights(temperatures, *, rule="trapezoid", power=1.0, schedule="power"):
    """Quadrature weights w over the grid, so that log p(x) ~ sum_i w_i E_{t_i}[log p(x | theta)].

    Parameters
    ----------
    temperatures : array_like, shape (T + 1,)
    rule : {"trapezoid", "simpson"}
        ``trapezoid``: ICASSP'16 eq. 7, in t. ``simpson``: Simpson's rule in
        the grid variable u (t = u^c, or t = I_u(c, c) for the beta schedule),
        on the integrand (dt/du) (E_t[...] - E_1[...]), which is smooth where
        E_t changes fastest, plus E_1[...] times the grid's span (t_T - t_0),
        so the last point's weight is what the rest leaves of the span, and
        the others' are 0 where dt/du is (t = 0 for c > 1). Taking out the
        last value makes the rule exact for a constant of any size: Simpson's
        rule integrates dt/du = c u^(c-1) exactly only up to c = 4 with an even
        T (at c = 5 and T = 10 its weights sum to 1 + 6.7e-5, which would put
        a log-likelihood of level -1e7 670 nats off).
    power : float
        c, the exponent the grid was built with (1 for a uniform grid).
    schedule : {"power", "uniform", "beta"}
        How the grid was built (``uniform`` is the power schedule with c = 1).

    Raises
    ------
    ParameterError
        On temperatures that are not an increasing finite grid, an unknown rule, or (Simpson) an unknown
        schedule or a ``power`` that is not a finite number >= 1.
    """
    t = np.asarray(temperatures, dtype=np.float64)
    if t.ndim != 1 or t.size < 2 or not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
        # unsorted temperatures gave negative weights, a NaN one NaN weights
        raise ParameterError(f"temperatures={t}: expected an increasing grid of at least 2 finite temperatures")
    if rule == "trapezoid":
        return trapezoid_weights(t)
    if rule == "simpson":
        _check_schedule(schedule, power)  # power 0 met a ZeroDivisionError, an unknown schedule was taken as power
        from scipy.integrate import simpson
        from scipy.special import beta, betaincinv

        if schedule == "beta":
            u = betaincinv(power, power, t)
            slope = (u * (1.0 - u)) ** (power - 1.0) / beta(power, power)
        else:
            c = 1.0 if schedule == "uniform" else power
            u = t ** (1.0 / c)
            slope = c * u ** (c - 1.0)
        basis = np.eye(t.size)
        weights = np.array([simpson(row, x=u) for row in basis]) * slope
        weights[-1] += (t[-1] - t[0]) - weights.sum()  # the last value, integrated exactly over the span
        return weights
    raise ParameterError(f"rule={rule!r}: expected 'trapezoid' or 'simpson'")


@dataclass(frozen=True)
class TemperatureGrid:
    """The temperature grid and the quadrature over it.

    Parameters
    ----------
    num_intervals : int
        T; the grid has T + 1 temperatures from 0 to 1.
    schedule : {"power", "uniform", "beta"}
        t_i = (i/T)^c, i/T or I_(i/T)(c, c) (see :func:`temperature_grid`).
    power : float
        c of the power or beta schedule (recorded as 1 for the uniform one).
    rule : {"simpson", "trapezoid"}
        Quadrature (Simpson works in the grid variable u = i/T).
    """

    num_intervals: int = 10
    schedule: str = "power"
    power: float = 5.0
    rule: str = "simpson"

    def __post_init__(self):
        _check_grid(self.num_intervals, self.schedule, self.power)
        if self.rule not in ("simpson", "trapezoid"):
            raise ParameterError(f"rule={self.rule!r}: expected 'simpson' or 'trapezoid'")
        object.__setattr__(self, "num_intervals", int(self.num_intervals))
        object.__setattr__(self, "power", float(self.power) if self.schedule != "uniform" else 1.0)

    @property
    def temperatures(self):
        """ndarray, shape (T + 1,): the grid."""
        return temperature_grid(self.num_intervals, schedule=self.schedule, power=self.power)

    @property
    def weights(self):
        """ndarray, shape (T + 1,): quadrature weights of E_t[log p] on the grid."""
        return integration_weights(self.temperatures, rule=self.rule, power=self.power, schedule=self.schedule)

    def check(self, *, option_name=None):
        """Raise ParameterError unless the temperatures are distinct in floating point and the weights finite.

        Both fail for a ``power`` far too large; it is named ``power=value``, or ``option_name("power")``
        (a command line's option).
        """
        label = "power" if option_name is None else option_name("power")
        named = f"power={self.power!r}" if option_name is None else f"{label} {self.power:g}"
        t = self.temperatures
        if not np.all(np.diff(t) > 0):
            i = int(np.argmin(np.diff(t) > 0))
            raise ParameterError(f"{named}: the {self.schedule} schedule's {t.size} temperatures are not distinct "
                                 f"in floating point (t_{i} = t_{i + 1} = {t[i]:.3g}); lower {label}")
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            finite = np.all(np.isfinite(self.weights))
        if not finite:
            raise ParameterError(f"{named}: the {self.schedule} schedule's quadrature weights are not finite "
                                 f"(its dt/du under- or overflows); lower {label}")

    def as_dict(self):
        return {**asdict(self), "temperatures": self.temperatures.tolist()}


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
    """Mean, Monte-Carlo standard error and integrated time of one trace.

    A 2-d ``trace`` holds several independent chains of equal length (one per
    row): the mean is their average, the integrated time the mean of theirs,
    and the MCSE the larger of their combined MCSEs and the spread of their
    means, std / sqrt(chains) -- chains that drift more slowly than their
    own traces reveal (a slow component under white estimator noise) still
    disagree with each other. The MCSE of a single value is NaN (unknown);
    the spread of several chains' single values still gives theirs.
    """
    trace = np.asarray(trace, dtype=np.float64)
    if trace.ndim == 2:
        if trace.shape[0] == 1:
            return chain_summary(trace[0])
        means, mcses, taus = (np.array(column) for column in zip(*(chain_summary(row) for row in trace)))
        within = np.sqrt(np.sum(mcses ** 2)) / means.size
        between = means.std(ddof=1) / np.sqrt(means.size)
        return float(means.mean()), float(np.fmax(within, between)), float(taus.mean())
    tau = integrated_time(trace)
    variance = trace.var(ddof=1) if trace.size > 1 else np.nan
    return float(trace.mean()), float(np.sqrt(variance * tau / trace.size)), tau


def thermodynamic_integral(temperatures, traces, *, weights=None, tol=50.0, check_finite=True):
    """Combine per-temperature log-likelihood traces into an :class:`STIResult`.

    Parameters
    ----------
    temperatures : array_like, shape (T + 1,)
        Increasing, from 0 to 1.
    traces : sequence of array_like
        The kept log-likelihood estimates of each temperature's chain, or of
        its chains (2-d, one row per chain).
    weights : array_like, shape (T + 1,), optional
        Quadrature weights over the grid (:func:`integration_weights` for the
        rule and schedule the grid was built with); default the trapezoid rule.
    tol : float
        Warn (RuntimeWarning) when a trace is shorter than ``tol`` times its
        integrated time, as emcee does: its MCSE is then unreliable.
    check_finite : bool
        Refuse traces that hold NaN or Inf (default). With False they pass, and the estimate is then not
        finite: for a caller that names a diverged chain itself.

    The standard error is NaN, with a RuntimeWarning, when a temperature of non-zero weight has a single
    kept value from a single chain.

    Raises
    ------
    ParameterError
        Temperatures that are not an increasing grid from 0 to 1, a trace per temperature that is missing,
        empty or not 1-d or 2-d, weights of another length, or a NaN or Inf in a weight or (with
        ``check_finite``) in a trace (the estimate would be NaN or Inf).
    """
    t = _increasing_grid(temperatures)
    if len(traces) != t.size:
        raise ParameterError(f"got {len(traces)} traces for {t.size} temperatures")
    for ti, trace in zip(t, traces):  # an empty one met a ZeroDivisionError, a number an IndexError
        if np.ndim(trace) not in (1, 2) or np.size(trace) == 0:
            raise ParameterError(f"the trace at t={ti:.3g} has shape {np.shape(trace)}: expected a non-empty 1-d "
                                 "trace, or a 2-d one of one row per chain")
        if check_finite and not np.all(np.isfinite(trace)):
            raise ParameterError(f"the trace at t={ti:.3g} holds NaN or Inf: expected finite log-likelihoods "
                                 "(a diverged chain's?)")
    weights = trapezoid_weights(t) if weights is None else np.asarray(weights, dtype=np.float64)
    if weights.shape != t.shape:
        raise ParameterError(f"got {weights.size} quadrature weights for {t.size} temperatures")
    if not np.all(np.isfinite(weights)):
        raise ParameterError(f"weights={weights}: expected finite quadrature weights")
    return _integral(t, traces, weights, tol)


def _integral(t, traces, weights, tol=50.0):
    """:func:`thermodynamic_integral` of checked temperatures and weights and of traces of the right shapes,
    which may hold NaN or Inf (a diverged chain's): the estimate is then not finite, for the caller to name."""
    summaries = [chain_summary(trace) for trace in traces]
    means, mcses, taus = (np.array(column) for column in zip(*summaries))
    lengths = [np.shape(trace)[-1] for trace in traces]
    short = [f"t={ti:.3g} (tau={tau:.0f})" for ti, tau, n in zip(t, taus, lengths) if n < tol * tau]
    if short:
        warnings.warn(f"traces shorter than {tol:g} integrated times at {', '.join(short)}: "
                      "their standard errors are unreliable; run longer chains", RuntimeWarning, stacklevel=3)
    lone = [f"{ti:.3g}" for ti, w, trace in zip(t, weights, traces) if w != 0 and np.size(trace) == 1]
    if lone:
        warnings.warn(f"a single kept value at t = {', '.join(lone)}: the standard error cannot be estimated "
                      "(NaN); keep more values or run more chains", RuntimeWarning, stacklevel=3)
    stderr = float(np.sqrt(np.sum(np.where(weights == 0, 0.0, weights * mcses) ** 2)))
    return STIResult(float(weights @ means), stderr, t, means, mcses, taus, int(min(lengths)))


def _increasing_grid(temperatures):
    """``temperatures`` as an array, unless they are not an increasing grid from 0 to 1 of at least 2 intervals."""
    t = np.asarray(temperatures, dtype=np.float64)
    if t.ndim != 1 or t.size < 3 or t[0] != 0.0 or t[-1] != 1.0 or not np.all(np.diff(t) > 0):  # NaN fails
        raise ParameterError(f"temperatures={t}: need an increasing grid from 0 to 1 of at least 2 intervals")
    return t


def random_subsets(model, subset_size):
    """``subset_fn(rng, iteration)`` drawing ``subset_size`` indices with replacement."""
    n = model.n_data
    return lambda rng, iteration: rng.integers(0, n, size=subset_size)


@dataclass(frozen=True)
class LangevinSettings:
    """How each power-posterior chain runs. The defaults are ICASSP'16's (SGLD, eq. 9, no control variates).

    Parameters
    ----------
    sampler : {"sgld", "psgld"}
    num_steps, num_keep : int
        Iterations per chain and how many of the last are kept.
    subset_size : int, optional
        N_s of the random subsets, drawn with replacement (default: all data).
    step_a, step_b : float
        Step (a/k)^b during the burn-in, fixed after: a finite and positive, b in (0.5, 1]
        (:func:`sepsti.core.samplers.step_size.polynomial_decay`).
    step_floor : float, optional
        Divide the steps of the chain at t by max(t, step_floor) (see :func:`power_posterior_chain`).
    step_scale : {None, "curvature"}
        Batched models: ``curvature`` makes a and b dimensionless, the step of the chain at t
        min((a/k)^b, 1) / lambda_t with lambda_t the largest curvature of its target at its start
        (:func:`curvature`), so eps * lambda is the same for every temperature and model size.
    alpha, sigma : float
        pSGLD preconditioner settings.
    integrator : {"euler", "lm"}
        Batched models: Euler-Maruyama (SGLD) or Leimkuhler-Matthews noise
        (:mod:`sepsti.core.samplers.langevin`).
    control_variate : {False, True, "likelihood", "gradient"}
        ``likelihood`` (or True): the kept log-likelihoods use the difference estimator against the
        last burn-in sample, its full-data log-likelihood computed once. ``gradient`` (batched models):
        the kept updates also use the control-variate gradient around it (SGLD-CV) and the
        log-likelihood its first-order estimator (:func:`sepsti.core.models.subsample.log_likelihood_estimate`).
    evaluate : {"after_update", "before_update", "full"}
        Which sample the kept log-likelihood scores, on which data (see :func:`power_posterior_chain`;
        ``full``: one chain at a time only).
    evaluate_every : int
        With ``full``: every m-th kept iteration.
    zero_variance : bool
        Batched models, ``before_update``: a zero-variance control variate on each chain's kept trace
        (see :func:`power_posterior_chains`).
    """

    sampler: str = "sgld"
    num_steps: int = 3000
    num_keep: int = 2000
    subset_size: object = None
    step_a: float = 1e-8
    step_b: float = 0.51
    step_floor: object = None
    step_scale: object = None
    alpha: float = 0.99
    sigma: float = 1e-5
    integrator: str = "euler"
    control_variate: object = False
    evaluate: str = "after_update"
    evaluate_every: int = 1
    zero_variance: bool = False

    def __post_init__(self):
        if self.sampler not in ("sgld", "psgld"):
            raise ParameterError(f"sampler={self.sampler!r}: expected 'sgld' or 'psgld'")
        for name in ("num_steps", "num_keep"):
            object.__setattr__(self, name, integer_at_least(name, getattr(self, name), 1))
        if self.subset_size is not None:
            object.__setattr__(self, "subset_size", integer_at_least("subset_size", self.subset_size, 1))
        step_a, step_b = validate_step_schedule(self.step_a, self.step_b)  # not only once a chain starts
        object.__setattr__(self, "step_a", step_a)
        object.__setattr__(self, "step_b", step_b)
        if self.step_floor is not None:
            object.__setattr__(self, "step_floor", positive_number("step_floor", self.step_floor))
        object.__setattr__(self, "alpha", number_within("alpha", self.alpha, 0.0, 1.0))
        object.__setattr__(self, "sigma", positive_number("sigma", self.sigma))
        if not 1 <= self.num_keep <= self.num_steps:
            raise ParameterError(f"num_keep={self.num_keep} must lie in [1, num_steps={self.num_steps}]")
        if self.step_scale not in (None, "curvature"):
            raise ParameterError(f"step_scale={self.step_scale!r}: expected None or 'curvature'")
        if self.integrator not in ("euler", "lm"):
            raise ParameterError(f"integrator={self.integrator!r}: expected 'euler' or 'lm'")
        if self.control_variate is True:
            object.__setattr__(self, "control_variate", "likelihood")
        if self.control_variate not in (False, None, "likelihood", "gradient"):
            raise ParameterError(f"control_variate={self.control_variate!r}: expected False, 'likelihood' or "
                                 "'gradient'")
        if self.evaluate not in ("after_update", "before_update", "full"):
            raise ParameterError(f"evaluate={self.evaluate!r}: expected 'after_update', 'before_update' or 'full'")
        object.__setattr__(self, "evaluate_every", integer_at_least("evaluate_every", self.evaluate_every, 1))
        if self.zero_variance and self.evaluate != "before_update":
            raise ParameterError("zero_variance needs evaluate='before_update'")


def _float_start(model, position, *, chain_axis=False):
    """A chain's start with every leaf in floating point (integers become float64), checked finite and, where
    the model's ``nonnegative`` flags say so, non-negative; where the model draws from its prior, each leaf of
    that draw's shape (after a leading axis of chains with ``chain_axis``).

    Raises
    ------
    ParameterError
        A leaf holding NaN or Inf, a negative entry of a leaf the model holds non-negative, or a leaf of
        another shape than the model's parameters (a start of another rank ran and gave a wrong estimate).
    """
    flags = getattr(model, "nonnegative", None)
    expected = None
    if hasattr(model, "sample_prior"):
        expected = [np.shape(leaf) for leaf in model.sample_prior(np.random.default_rng(0))]
        if len(position) != len(expected):
            raise ParameterError(f"start: {len(position)} leaves; {type(model).__name__} has {len(expected)}")
    leaves = []
    for index, (name, leaf) in enumerate(zip(getattr(position, "_fields", range(len(position))), position)):
        leaf = np.asarray(leaf)
        if expected is not None and leaf.shape[int(chain_axis):] != expected[index]:
            raise ParameterError(f"start: {name} has shape {leaf.shape}; {type(model).__name__}'s {name} is "
                                 f"{expected[index]}" + (" after the axis of chains" if chain_axis else ""))
        leaf = leaf if np.issubdtype(leaf.dtype, np.floating) else leaf.astype(np.float64)
        if not np.all(np.isfinite(leaf)):
            raise ParameterError(f"start: {name} holds NaN or Inf; start the chains where the model is defined")
        if flags is not None and flags[index] and leaf.size and leaf.min() < 0:
            raise ParameterError(f"start: {name} has minimum {leaf.min():g}; expected non-negative values "
                                 f"({type(model).__name__}'s {name} is non-negative)")
        leaves.append(leaf)
    return type(position)(*leaves)


def power_posterior_chain(model, position, rng, *, temperature, chain, subset_fn=None, progress=False, desc=None):
    """Run one chain on p(theta) p(x | theta)^t and return the kept log-likelihood estimates.

    The step size decays as (a/k)^b over the ``num_steps - num_keep`` burn-in
    iterations and is fixed afterwards. After each kept update, the new
    position's log-likelihood is estimated on the subsample that drove the
    update (:func:`sepsti.core.models.subsample.log_likelihood_estimate`); with
    ``control_variate`` the last burn-in position is the reference, its
    full-data log-likelihood computed once.

    ``evaluate="after_update"`` is ICASSP'16 eq. 9 verbatim: theta^(k) on
    S^(k). Since theta^(k) has just moved towards S^(k), that estimate is
    biased upwards by O(eps). ``evaluate="before_update"`` scores
    theta^(k-1) on S^(k) instead -- the same subsample, a sample independent
    of it, hence unbiased -- and the gradient pass computes it anyway.
    ``evaluate="full"`` scores theta^(k) on all the data at the kept
    iterations k = num_steps, num_steps - m, ... (m = ``evaluate_every``):
    no subsampling noise and no dependence between the sample and the
    subsample it is scored on (which cyclic subsamples, such as block parts
    visited in order, create), at one full pass per evaluation; the trace
    then has ceil(num_keep / m) entries.

    ``step_floor`` t_min, when given, divides the step sizes by
    max(t, t_min): the likelihood's curvature scales with t, so the step
    that is stable and accurate at t = 1 is needlessly small -- and mixes
    in hundreds of iterations -- where the prior dominates.

    Parameters
    ----------
    model : model object
    position : NamedTuple of ndarray
        The start.
    rng : numpy.random.Generator
    temperature : float
    chain : LangevinSettings
        Without the settings of chains in lockstep (:func:`power_posterior_chains`).
    subset_fn : callable, optional
        ``subset_fn(rng, iteration) -> subset``; default: random subsets of ``chain.subset_size``. A subset
        the model cannot index is refused as a ParameterError naming the iteration.
    progress : bool
    desc : str, optional

    Returns
    -------
    trace : ndarray, shape (num_keep,)
    result : ChainResult
        The driver's output (``samples`` is the trace; ``state`` the last state).
    """
    if chain.control_variate == "gradient" or chain.integrator != "euler" or chain.step_scale is not None or (
            chain.zero_variance):
        raise ParameterError("control_variate='gradient', integrator, step_scale and zero_variance need SGLD on a "
                             "batched model without warm_start or subset_fn (the chains run in lockstep)")
    position = _float_start(model, position)
    num_steps, num_keep, evaluate = chain.num_steps, chain.num_keep, chain.evaluate
    burn_in = num_steps - num_keep
    if chain.sampler == "sgld":
        module, kernel = _sgld, _sgld.build_kernel()
    else:
        module, kernel = _psgld, _psgld.build_kernel(alpha=chain.alpha, sigma=chain.sigma)
    callers_subsets = subset_fn is not None
    if subset_fn is None:
        subset_fn = ((lambda rng, iteration: None) if chain.subset_size is None
                     else random_subsets(model, int(chain.subset_size)))
    full = evaluate == "full"
    steps = step_sizes(chain.step_a, chain.step_b, num_steps=num_steps, num_decay_steps=max(burn_in, 1))
    if chain.step_floor is not None:
        steps = steps / max(float(temperature), float(chain.step_floor))
    reference = []
    after = evaluate == "after_update"

    def step_fn(chain_rng, state, iteration):
        subset = subset_fn(chain_rng, iteration)
        try:
            return advance(chain_rng, state, iteration, subset)
        except ParameterError:
            raise
        except (IndexError, TypeError, ValueError) as error:  # a caller's subset the model cannot index
            if not callers_subsets:
                raise
            raise ParameterError(f"subset_fn(rng, {iteration}) returned a subset {type(model).__name__} cannot use: "
                                 f"{error}") from None

    def advance(chain_rng, state, iteration, subset):
        if chain.control_variate and iteration == burn_in + 1:
            reference.append((state.inner.position, model.log_likelihood(state.inner.position, None)))
        value = np.nan
        if iteration > burn_in and not after and not full:
            value = log_likelihood_estimate(model, state.inner.position, subset,
                                            reference=reference[0] if reference else None)
        inner, info = kernel(chain_rng, state.inner, model, steps[iteration - 1], subset, temperature)
        if iteration > burn_in and full and (num_steps - iteration) % chain.evaluate_every == 0:
            value = model.log_likelihood(inner.position, None)
        if iteration > burn_in and after:
            value = log_likelihood_estimate(model, inner.position, subset,
                                            reference=reference[0] if reference else None)
        return TemperedState(inner, value), info

    result = run_chain(step_fn, TemperedState(module.init(position), np.nan), rng, num_steps=num_steps,
                       burn_in=burn_in, transform=lambda s: s.log_likelihood, progress=progress, desc=desc)
    trace = np.asarray(result.samples, dtype=np.float64)
    if full:
        trace = trace[(num_keep - 1 - np.arange(num_keep)) % chain.evaluate_every == 0]
    return trace, result


def curvature(model, position, temperature, *, num_iterations=20, rng=None, relative_step=1e-4,
              return_vector=False):
    """Largest eigenvalue of -Hessian of log p(theta) + t log p(x | theta) at ``position``, per chain.

    Power iteration on Hessian-vector products from full-data gradient
    differences, so only gradients are needed; for a batched model
    ``position`` and ``temperature`` carry a leading chain axis and the result
    has one entry per chain. Exact for quadratic log densities.

    Returns
    -------
    value : float or ndarray, shape (chains,)
    vector : NamedTuple of ndarray, only with ``return_vector``
        The unit eigenvector (per chain), the stiffest direction.

    Raises
    ------
    ParameterError
        A ``num_iterations`` that is not an integer of at least 1, or a ``relative_step`` (of the gradient
        differences, times 1 + |position|) that is not a positive number.
    """
    num_iterations = integer_at_least("num_iterations", num_iterations, 1)
    relative_step = positive_number("relative_step", relative_step)
    rng = np.random.default_rng(0) if rng is None else rng
    batch_ndim = np.ndim(temperature)

    def norm(tree):
        return np.sqrt(tree_vdot(tree, tree, batch_ndim))

    def gradient(theta):
        g, _ = tempered_gradient(model, theta, None, temperature)
        return g

    from sepsti.core.samplers.langevin import per_chain

    base = gradient(position)
    size = norm(position)
    v = type(position)(*(rng.standard_normal(np.shape(leaf)) for leaf in position))
    value = np.zeros(np.shape(temperature))
    for _ in range(num_iterations):
        length = norm(v)
        v = type(v)(*(leaf / per_chain(length, leaf) for leaf in v))
        h = relative_step * (1.0 + size)
        moved = gradient(tree_add_scaled(position, v, h))
        hv = type(v)(*(-(a - b) / per_chain(h, a) for a, b in zip(moved, base)))
        value = norm(hv)
        v = hv
    if return_vector:
        return value, type(v)(*(leaf / per_chain(value, leaf) for leaf in v))
    return value


def zero_variance_correction(trace, features):
    """``trace - features @ beta`` with beta from least squares on the chain's own samples.

    ``trace`` has shape (K,), ``features`` (K, p) with mean zero under the
    target; the corrected trace has the same expectation (up to O(1/K) from
    estimating beta) and, when the features explain the trace, far less
    variance. Its autocorrelation still gives the MCSE.
    """
    trace = np.asarray(trace, dtype=np.float64)
    features = np.asarray(features, dtype=np.float64)
    if trace.ndim != 1 or features.ndim != 2 or features.shape[0] != trace.size:  # NumPy's LinAlgError otherwise
        raise ParameterError(f"trace of shape {trace.shape} and features of shape {features.shape}: expected (K,) "
                             "and (K, p)")
    centred = features - features.mean(axis=0)
    scale = centred.std(axis=0)
    usable = scale > 0
    if not np.any(usable) or trace.size <= 2 * usable.sum():
        return trace
    design = centred[:, usable] / scale[usable]
    beta, *_ = np.linalg.lstsq(design, trace - trace.mean(), rcond=None)
    return trace - (features[:, usable] / scale[usable]) @ beta


class _ChainsState(NamedTuple):
    position: object
    noise: object
    log_likelihood: object
    features: object


def power_posterior_chains(model, positions, rng, *, temperatures, chain, progress=False, desc=None):
    """Run C chains of a batched model in lockstep, chain c on p(theta) p(x | theta)^(t_c).

    Each iteration draws a subsample of ``subset_size`` indices (with
    replacement; ``None``: all data) per chain and takes one SGLD step
    (ICASSP'16 eq. 10) with step (a/k)^b during the burn-in, fixed after.
    The kept log-likelihood estimates follow ``evaluate`` (see
    :func:`power_posterior_chain`).

    ``zero_variance`` corrects each chain's kept trace
    (:func:`zero_variance_correction`) with the step's own gradient estimate
    at theta^(k-1), projected on the chain's stiffest direction v (from
    :func:`curvature` at its start). E[v . g] = 0 at stationarity of the
    Euler and Leimkuhler-Matthews steps for any step size (the chain's
    mean does not move), and the stiffest direction is the one that mixes
    fastest, so the in-chain mean of the feature is close to zero too;
    slow directions are left out on purpose, since a feature that has not
    mixed biases the correction. It removes the part of the
    log-likelihood linear in that direction -- at the temperatures where
    the posterior moves from the prior to the data, most of the variance.

    Parameters
    ----------
    model : batched model
        ``model.batched`` must be true (see :mod:`sepsti.core.models.subsample`).
    positions : NamedTuple of ndarray
        Starts, leaves of shape (C, ...).
    rng : numpy.random.Generator
        One stream for all chains' subsets and noise.
    temperatures : array_like, shape (C,)
    chain : LangevinSettings
        SGLD, ``evaluate`` before or after the update; ``zero_variance`` needs a model without
        mirrored leaves.
    progress : bool
    desc : str, optional

    Returns
    -------
    traces : ndarray, shape (C, num_keep)
    state : the final state (``position`` with leaves (C, ...))

    Raises
    ------
    ParameterError
        A model that is not batched, settings the lockstep chains do not run, starts holding NaN or Inf (or
        negative where the model is non-negative, or of another shape than its parameters), or temperatures that
        are not one per chain.
    """
    if not getattr(model, "batched", False):
        raise ParameterError(f"{type(model).__name__} is not batched: use power_posterior_chain per chain")
    if chain.sampler != "sgld":
        raise ParameterError(f"sampler={chain.sampler!r}: chains in lockstep run SGLD")
    if chain.evaluate not in ("after_update", "before_update"):
        raise ParameterError(f"evaluate={chain.evaluate!r}: expected 'after_update' or 'before_update'")
    if chain.zero_variance and any(getattr(model, "nonnegative", None) or ()):
        raise ParameterError("zero_variance needs a model without mirrored leaves")
    control_variate, zero_variance = chain.control_variate, chain.zero_variance
    t = np.asarray(temperatures, dtype=np.float64)
    num_chains = t.size
    positions = _float_start(model, positions, chain_axis=True)
    leading = sorted({leaf.shape[:1] for leaf in positions})
    if leading != [t.shape]:  # NumPy's broadcast error at the first step
        raise ParameterError(f"temperatures of shape {t.shape} for starts of leading shape "
                             f"{', '.join(map(str, leading))}: expected one temperature per chain, (C,) for (C, ...)")
    burn_in = chain.num_steps - chain.num_keep
    base = step_sizes(chain.step_a, chain.step_b, num_steps=chain.num_steps, num_decay_steps=max(burn_in, 1))
    stiffness, direction = (curvature(model, positions, t, rng=rng, return_vector=True)
                            if chain.step_scale == "curvature" or zero_variance else (None, None))
    if chain.step_scale == "curvature":
        base = np.minimum(base, 1.0)
        divisor = stiffness
        if not np.all(np.isfinite(divisor)) or np.any(divisor <= 0):
            raise ParameterError(f"curvature estimates {divisor}: not finite and positive at the starts")
    elif chain.step_floor is not None:
        divisor = np.maximum(t, float(chain.step_floor))
    else:
        divisor = np.ones_like(t)
    n = model.n_data

    def draw():
        return None if chain.subset_size is None else rng.integers(0, n, size=(num_chains, int(chain.subset_size)))

    def normals(position):
        return type(position)(*(rng.standard_normal(np.shape(leaf)) for leaf in position))

    reference = []
    after = chain.evaluate == "after_update"
    lm = chain.integrator == "lm"

    def step_fn(chain_rng, state, iteration):
        subset = draw()
        kept = iteration > burn_in
        if control_variate and iteration == burn_in + 1:
            reference.append(make_reference(model, state.position, with_gradient=control_variate == "gradient"))
        ref = reference[0] if reference else None
        gradient_ref = ref if control_variate == "gradient" else None
        features = None
        if kept and not after:
            gradient, _, value = tempered_gradient(model, state.position, subset, t, with_likelihood=True,
                                                   reference=ref)
            if zero_variance:
                features = tree_vdot(direction, gradient, 1)
        else:
            gradient, _ = tempered_gradient(model, state.position, subset, t, reference=gradient_ref)
            value = None
        fresh = normals(state.position)
        noise = type(fresh)(*((a + b) / 2.0 for a, b in zip(state.noise, fresh))) if lm else fresh
        position = langevin_step(chain_rng, state.position, gradient, base[iteration - 1] / divisor, noise=noise,
                                 nonnegative=getattr(model, "nonnegative", None))
        if kept and after:
            value = log_likelihood_estimate(model, position, subset, reference=ref)
        return _ChainsState(position, fresh, value, features), None

    start = _ChainsState(positions, normals(positions), None, None)
    result = run_chain(step_fn, start, rng, num_steps=chain.num_steps, burn_in=burn_in,
                       transform=(lambda s: (s.log_likelihood, s.features)) if zero_variance else (
                           lambda s: s.log_likelihood), progress=progress, desc=desc)
    if not zero_variance:
        return np.asarray(result.samples, dtype=np.float64).T, result.state
    values, features = result.samples
    traces = np.stack([zero_variance_correction(values[:, c], features[:, c, None]) for c in range(num_chains)])
    return traces, result.state


def stochastic_thermodynamic_integration(model, init_fn, *, grid=TemperatureGrid(schedule="uniform", rule="trapezoid"),
                                         chain=LangevinSettings(), temperatures=None, subset_fn=None,
                                         chains_per_temperature=1, warm_start=False, seed=0, progress=False):
    """Estimate log p(x) of ``model`` by STI.

    Batched models with SGLD, no ``subset_fn`` and no ``warm_start`` run all chains in lockstep
    (:func:`power_posterior_chains`); otherwise one chain per temperature runs after the other
    (:func:`power_posterior_chain`).

    Parameters
    ----------
    model : model object
        See :mod:`sepsti.core.models`.
    init_fn : callable
        ``init_fn(rng) -> position`` for each chain (e.g. ``model.sample_prior``).
    grid : TemperatureGrid
        Default: ICASSP'16's, T = 10 uniform intervals and the trapezoid rule (not
        ``TemperatureGrid()``'s own defaults, which are the rank-selection engine's power grid).
    chain : LangevinSettings
        How each chain runs (default: ICASSP'16's settings).
    temperatures : array_like, optional
        An explicit grid, overriding ``grid``'s; ``grid.rule`` integrates over it in t.
    subset_fn : callable, optional
        ``subset_fn(rng, iteration) -> subset``, overriding ``chain.subset_size``.
    chains_per_temperature : int
        Batched models: independent chains per temperature, averaged.
    warm_start : bool
        Start the chain at t_i from the last sample of the chain at t_{i-1}
        (Friel & Pettitt's sequential scheme): neighbouring power posteriors
        overlap, so burn-in only has to bridge one step of the grid. Chains
        then run one after the other.
    seed : int
        Chain i uses ``sepsti.core.random.stream(seed, i)``.
    progress : bool
        Progress bar per chain on stderr.

    Returns
    -------
    STIResult
    """
    if temperatures is None:
        grid.check()
        temperatures, weights = grid.temperatures, grid.weights
    else:  # Simpson works in the variable a grid was built on: an explicit one is taken as it is (in t)
        temperatures = _increasing_grid(temperatures)
        weights = integration_weights(temperatures, rule=grid.rule)
    if getattr(model, "batched", False) and not warm_start and subset_fn is None and chain.sampler == "sgld":
        copies = integer_at_least("chains_per_temperature", chains_per_temperature, 1)
        t = np.repeat(temperatures, copies)
        starts = [init_fn(stream(seed, c)) for c in range(t.size)]
        positions = type(starts[0])(*(np.stack(leaves) for leaves in zip(*starts)))
        traces, _ = power_posterior_chains(model, positions, stream(seed, 10 ** 6), temperatures=t, chain=chain,
                                           progress=progress, desc=f"STI ({t.size} chains)")
        traces = list(traces.reshape(temperatures.size, copies, -1))
        return _finite(_integral(temperatures, traces, weights), traces, chain)
    if chains_per_temperature != 1:
        raise ParameterError("chains_per_temperature needs SGLD on a batched model without warm_start or subset_fn "
                             "(the chains run in lockstep)")
    traces = []
    previous = None
    for i, t in enumerate(temperatures):
        rng = stream(seed, i)
        start = init_fn(rng) if previous is None or not warm_start else previous
        trace, result = power_posterior_chain(model, start, rng, temperature=float(t), chain=chain,
                                              subset_fn=subset_fn, progress=progress, desc=f"t={t:.3g}")
        previous = result.state.inner.position
        traces.append(trace)
    return _finite(_integral(temperatures, traces, weights), traces, chain)


def _finite(result, traces, chain):
    """``result``, unless a chain diverged: its log-likelihoods, or the estimate or its error, not finite.

    (An error that cannot be estimated, NaN from single kept values, is not a divergence.)
    """
    diverged = [f"{t:.3g}" for t, trace in zip(result.temperatures, traces) if not np.all(np.isfinite(trace))]
    unknown = np.isnan(result.stderr) and any(np.size(trace) == 1 for trace in traces)
    if diverged or not np.isfinite(result.log_marginal_likelihood) or not (np.isfinite(result.stderr) or unknown):
        where = f"at t = {', '.join(diverged)}" if diverged else "(their log-likelihoods overflow)"
        raise ParameterError(f"the chains diverged {where}: lower step_a (now {chain.step_a:g})"
                             + (" or raise sigma" if chain.sampler == "psgld" else ""))
    return result
