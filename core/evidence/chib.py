"""Chib's marginal likelihood estimate from the Gibbs output of a PLTF model (MLSP'12 eqs. 19-28).

At a high-density point ``(S~, Z~)`` of the main run,

    log p(X) = log p(S~, Z~, X) - log p(Z~_1 | Z~_2:K, S~) - log p(S~ | X)
               - sum_{a=2..K} log p(Z~_a | Z~_a+1:K, S~)

where the first ordinate is an exact Gamma density, ``p(S~ | X)`` is the mean
of the multinomial full conditional over the main run's samples (eq. 23), and
each remaining ordinate is the mean of a Gamma full conditional over a reduced
run that clamps ``S~`` and ``Z~_a+1:K`` (eqs. 25-26). Means are taken in log
space with log-sum-exp, each divided by its own number of samples (eq. 28
writes this normaliser as ``log (K-1)MN``). ``Z_1 .. Z_K`` are the model's free
factors in spec order; fixed factors are constants of every term.

The Monte-Carlo standard error adds, over the estimated ordinates, the
delta-method variance of ``log mean w``, ``(MCSE(mean w) / mean w)^2``, with the
MCSE from the effective sample size of ``w`` (autocorrelation-aware).

Conventions: ``X`` is an integer count array shaped like the model output.
"""

from typing import NamedTuple

import numpy as np
from scipy.special import gammaln, logsumexp

from core.errors import ParameterError
from core.models.pltf import gamma_log_pdf, pltf_model
from core.random import stream
from core.samplers import gibbs
from core.samplers.diagnostics import mcse_mean
from core.samplers.driver import run_chain

__all__ = ["ChibResult", "chib_log_marginal_likelihood", "chib_poisson_nmf", "log_mean_exp"]


class ChibResult(NamedTuple):
    """Chib's estimate and the pieces it sums.

    Attributes
    ----------
    log_marginal_likelihood : float
        ``log p(X)``.
    stderr : float
        Monte-Carlo standard error of the estimate.
    log_joint : float
        ``log p(S~, Z~, X)`` at the chosen point.
    log_source_ordinate : float
        Estimate of ``log p(S~ | X)`` (eq. 23).
    log_factor_ordinates : ndarray, shape (K,)
        ``log p(Z~_a | Z~_a+1:K, S~)`` for the free factors in order; the first is exact (eq. 21).
    ordinate_stderr : ndarray, shape (K + 1,)
        MCSE of the source ordinate then of each factor ordinate (0 for the exact one).
    factor_order : tuple of int
        Positions of the free factors, the order ``Z_1 .. Z_K`` of eq. 20.
    point : tuple of ndarray
        ``Z~`` (all factors).
    source_log_probs : ndarray, shape (N,)
        ``log p(S~ | Z^(i), X)`` over the main run.
    reduced_log_ordinates : list of ndarray
        For ``a = 2..K``, ``log p(Z~_a | Z^(m)_1:a-1, Z~_a+1:K, S~)`` over its reduced run.
    log_likelihood_trace : ndarray, shape (burn-in + N,)
        ``log p(X | Z)`` of every sweep of the main run.
    """

    log_marginal_likelihood: float
    stderr: float
    log_joint: float
    log_source_ordinate: float
    log_factor_ordinates: np.ndarray
    ordinate_stderr: np.ndarray
    factor_order: tuple
    point: tuple
    source_log_probs: np.ndarray
    reduced_log_ordinates: list
    log_likelihood_trace: np.ndarray


def log_mean_exp(log_values):
    """``log mean exp(log_values)`` and its MCSE (delta method, autocorrelation-corrected)."""
    log_values = np.asarray(log_values, dtype=float)
    n = log_values.size
    estimate = float(logsumexp(log_values) - np.log(n))
    if n < 4 or not np.isfinite(estimate):
        return estimate, float("inf") if n < 4 else float("nan")
    weights = np.exp(log_values - log_values.max())
    if np.all(weights == weights[0]):
        return estimate, 0.0
    return estimate, float(mcse_mean(weights) / weights.mean())


def _validate_counts(name, value, minimum):
    if not isinstance(value, (int, np.integer)) or value < minimum:
        raise ParameterError(f"{name}={value!r} must be an integer >= {minimum}")
    return int(value)


def chib_log_marginal_likelihood(model, X, *, num_burn_in, num_samples, num_reduced=None, seed=0,
                                 factors=None, progress=False):
    """Estimate ``log p(X)`` under a PLTF model by Chib's method (MLSP'12 eqs. 19-28).

    Parameters
    ----------
    model : core.models.pltf.PLTFModel
    X : array_like
        Integer counts, shape ``model.output_shape``.
    num_burn_in : int
        Gibbs sweeps discarded before the ``num_samples`` kept ones.
    num_samples : int
        Kept sweeps N of the main run (the source ordinate averages over them).
    num_reduced : int, optional
        Sweeps M of each reduced run (default ``num_samples``).
    seed : int
        Streams ``stream(seed, 0)`` (main run) and ``stream(seed, a)`` (reduced run a).
    factors : tuple of ndarray, optional
        Starting factors (default: a draw from the prior).
    progress : bool
        Progress bars on stderr.

    Returns
    -------
    ChibResult

    Raises
    ------
    ParameterError
        On invalid counts or data.

    References
    ----------
    S. Chib, "Marginal likelihood from the Gibbs output", JASA 1995. MLSP'12 eqs. 19-28.
    """
    num_burn_in = _validate_counts("num_burn_in", num_burn_in, 0)
    num_samples = _validate_counts("num_samples", num_samples, 4)
    num_reduced = num_samples if num_reduced is None else _validate_counts("num_reduced", num_reduced, 4)
    X = model.validate_data(X, integer=True)
    order = model.free
    rng = stream(seed, 0)
    state = gibbs.init(model, X, factors, rng=rng)
    kernel = gibbs.build_kernel(model, X)

    best = {"logdensity": -np.inf}

    def keep(s):
        # The point of eq. 19 is the highest-density (S, Z) seen after burn-in.
        if s.logdensity > best["logdensity"]:
            best.update(logdensity=s.logdensity, factors=s.factors, stats=s.source_stats,
                        log_factorial=s.log_source_factorial)
        return tuple(s.factors[a] for a in order)

    result = run_chain(kernel, state, rng, num_steps=num_burn_in + num_samples, burn_in=num_burn_in,
                       transform=keep, progress=progress, desc="Chib: Gibbs")
    point, stats, log_factorial = best["factors"], best["stats"], best["log_factorial"]
    log_joint = gibbs.log_joint(model, point, stats, log_factorial)

    # eq. 23: p(S~ | X) ~ mean_i p(S~ | Z^(i), X)
    log_factorial_X = float(np.sum(gammaln(X[model.mask] + 1.0) if model.mask is not None else gammaln(X + 1.0)))
    source_log_probs = np.empty(num_samples)
    current = list(point)
    for i in range(num_samples):
        for j, a in enumerate(order):
            current[a] = result.samples[j][i]
        source_log_probs[i] = gibbs.source_log_prob(model, current, stats, log_factorial, log_factorial_X, X)
    log_source, se_source = log_mean_exp(source_log_probs)

    def ordinate(factors, a):
        shape = model.prior_shape[a] + stats[a]
        rate = model.prior_rate[a] + model.phi(factors, a)
        return float(np.sum(gamma_log_pdf(point[a], shape, rate)))

    # eq. 21: the first factor's ordinate is an exact full conditional
    log_ordinates = [ordinate(point, order[0])]
    ordinate_se = [se_source, 0.0]
    reduced = []
    # eqs. 24-26: for a = K..2, clamp S~ and Z~_a+1:K, sample Z_1:a, average p(Z~_a | Z_1:a-1, ...)
    for j in range(len(order) - 1, 0, -1):
        a = order[j]
        run_rng = stream(seed, j)
        reduced_kernel = gibbs.build_kernel(model, X, clamped_sources=(stats, log_factorial),
                                            clamped_factors=order[j + 1:])
        run_state = gibbs.GibbsState(point, stats, log_factorial, 0.0, 0.0)
        values = np.empty(num_reduced)
        for m in range(num_reduced):
            run_state, _ = reduced_kernel(run_rng, run_state)
            values[m] = ordinate(run_state.factors, a)
        reduced.insert(0, values)
        estimate, se = log_mean_exp(values)
        log_ordinates.insert(1, estimate)
        ordinate_se.insert(2, se)
    log_ordinates = np.asarray(log_ordinates)
    ordinate_se = np.asarray(ordinate_se)
    value = log_joint - log_source - float(np.sum(log_ordinates))
    return ChibResult(float(value), float(np.sqrt(np.sum(ordinate_se ** 2))), float(log_joint), float(log_source),
                      log_ordinates, ordinate_se, order, point, source_log_probs, reduced,
                      np.asarray(result.info.log_likelihood))


def chib_poisson_nmf(X, rank, prior_rate, *, num_burn_in, num_samples, num_reduced=None, seed=0, progress=False):
    """Chib's ``log p(X | rank)`` for Poisson NMF with exponential priors (ICASSP'16 §4.1.2, eq. 13).

    ``W_ik ~ Exp(prior_rate)``, ``H_kj ~ Exp(prior_rate)``, ``X_ij ~ Poisson((WH)_ij)``.

    Parameters
    ----------
    X : array_like of int, shape (I, J)
    rank : int
    prior_rate : float or (float, float)
        Rate of the exponential priors (one for both, or ``(rate_W, rate_H)``).
    num_burn_in, num_samples, num_reduced, seed, progress
        As in :func:`chib_log_marginal_likelihood` (the paper: 7000, 2000, 5000).

    Returns
    -------
    ChibResult
        Factors are ordered ``(W, H)``.
    """
    X = np.asarray(X)
    if X.ndim != 2:
        raise ParameterError(f"X must be a matrix, got shape {X.shape}")
    rank = _validate_counts("rank", rank, 1)
    rates = (prior_rate, prior_rate) if np.isscalar(prior_rate) else tuple(prior_rate)
    model = pltf_model("ik,kj->ij", dict(i=X.shape[0], k=rank, j=X.shape[1]), prior_shape=1.0, prior_rate=rates)
    return chib_log_marginal_likelihood(model, X, num_burn_in=num_burn_in, num_samples=num_samples,
                                        num_reduced=num_reduced, seed=seed, progress=progress)
