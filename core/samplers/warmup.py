"""Warm-up of HMC and NUTS: dual-averaging step size and windowed diagonal or dense mass matrix.

Works with any kernel of the form ``kernel(rng, state, step_size,
inverse_mass_matrix) -> (state, info)`` whose info has ``acceptance_rate``
(HMC and NUTS here). Positions are flat arrays of shape ``(dim,)``.
"""

import math
from typing import Any, NamedTuple

import numpy as np

from sepsti.core.checks import integer_at_least
from sepsti.core.errors import ParameterError
from sepsti.core.samplers.driver import run_chain
from sepsti.core.samplers.dual_averaging import DualAveragingState, dual_averaging
from sepsti.core.samplers.hmc import find_reasonable_step_size
from sepsti.core.samplers.mass_matrix import WelfordState, warmup_schedule, welford_covariance, welford_variance

__all__ = ["WarmupState", "WarmupResult", "window_adaptation"]


class WarmupState(NamedTuple):
    """The chain's state with the adaptation state beside it."""

    chain: Any
    step_size: DualAveragingState
    variance: WelfordState
    inverse_mass_matrix: np.ndarray


class WarmupResult(NamedTuple):
    """Adapted parameters, the state to start sampling from and the warm-up diagnostics."""

    state: Any
    step_size: float
    inverse_mass_matrix: np.ndarray
    info: Any
    num_divergent: int
    positions: Any = None


def window_adaptation(kernel, state, rng, logdensity_and_grad_fn, *, num_steps, target=0.8,
                      adapt_mass_matrix=True, metric="diagonal", inverse_mass_matrix=None, initial_step_size=None,
                      gamma=0.05, t0=10.0, kappa=0.75, keep_positions=False, progress=False, desc="warm-up"):
    """Run ``num_steps`` warm-up iterations adapting the step size and the (diagonal or dense) mass matrix.

    The step size follows dual averaging (Hoffman & Gelman Algorithm 5) towards
    the target acceptance statistic; it is restarted, from Algorithm 4's
    heuristic, each time a mass-matrix window closes (Stan's scheme). The
    returned step size is the dual-averaging average exp(log ε̄).

    Parameters
    ----------
    kernel : callable
        ``kernel(rng, state, step_size, inverse_mass_matrix) -> (state, info)``.
    state : HMCState
        Starting state.
    rng : numpy.random.Generator
    logdensity_and_grad_fn : callable
        The target, for the initial-step heuristic.
    num_steps : int
        Warm-up iterations, at least 1 (an integer: 2.0 is refused).
    target : float
        Target acceptance statistic δ.
    adapt_mass_matrix : bool
        Adapt the mass matrix in windows (else it stays at its start).
    metric : {"diagonal", "dense"}
        Diagonal: M⁻¹ is the windowed marginal variance, shape (dim,). Dense:
        M⁻¹ is the windowed covariance, shape (dim, dim), regularised as
        ``n/(n+5) Σ + 1e-3 · 5/(n+5) I`` (Stan); it needs windows of well over
        ``dim`` draws to be estimated.
    inverse_mass_matrix : ndarray, optional
        Start value (shape (dim,) or (dim, dim) to match ``metric``), e.g. the
        inverse of a Laplace precision; default the identity.
    initial_step_size : float, optional
        Skip the heuristic and start dual averaging here.
    gamma, t0, kappa : float
        Dual-averaging parameters.
    keep_positions : bool
        Return every warm-up position in ``positions`` (shape (num_steps, dim)), e.g. to estimate
        another metric from them; otherwise ``positions`` is None.
    progress : bool
    desc : str

    Returns
    -------
    WarmupResult

    Raises
    ------
    ParameterError
        On a bad count, metric, inverse mass matrix or dual-averaging parameter.
    """
    num_steps = integer_at_least("num_steps", num_steps, 1)
    da_init, da_update, da_final = dual_averaging(target=target, gamma=gamma, t0=t0, kappa=kappa)
    if metric not in ("diagonal", "dense"):
        raise ParameterError(f"metric={metric!r} must be 'diagonal' or 'dense'")
    dense = metric == "dense"
    var_init, var_update, var_final = welford_covariance() if dense else welford_variance()
    dim = state.position.shape[0]
    shape = (dim, dim) if dense else (dim,)
    if inverse_mass_matrix is None:
        inverse_mass_matrix = np.eye(dim) if dense else np.ones(dim)
    inverse_mass_matrix = np.array(inverse_mass_matrix, dtype=float)
    if inverse_mass_matrix.shape != shape:
        raise ParameterError(f"inverse_mass_matrix has shape {inverse_mass_matrix.shape}; metric={metric!r} "
                             f"needs {shape}")
    if initial_step_size is None:
        initial_step_size = find_reasonable_step_size(rng, state, logdensity_and_grad_fn, inverse_mass_matrix)
    is_slow, is_window_end = warmup_schedule(num_steps)
    if not adapt_mass_matrix:
        is_slow[:] = False
        is_window_end[:] = False

    def step(rng, warm, iteration):
        chain, info = kernel(rng, warm.chain, math.exp(warm.step_size.log_step_size), warm.inverse_mass_matrix)
        step_state = da_update(warm.step_size, info.acceptance_rate)
        variance, inverse_mass = warm.variance, warm.inverse_mass_matrix
        if is_slow[iteration - 1]:
            variance = var_update(variance, chain.position)
        if is_window_end[iteration - 1]:
            inverse_mass = var_final(variance)
            variance = var_init(dim)
            restart = find_reasonable_step_size(rng, chain, logdensity_and_grad_fn, inverse_mass,
                                                initial_step_size=da_final(step_state))
            step_state = da_init(restart)
        return WarmupState(chain, step_state, variance, inverse_mass), info

    start = WarmupState(state, da_init(initial_step_size), var_init(dim), inverse_mass_matrix)
    transform = (lambda warm: warm.chain.position) if keep_positions else (lambda warm: warm.chain.logdensity)
    result = run_chain(step, start, rng, num_steps=num_steps, transform=transform, progress=progress, desc=desc)
    final = result.state
    return WarmupResult(final.chain, da_final(final.step_size), final.inverse_mass_matrix, result.info,
                        result.num_divergent, result.samples if keep_positions else None)
