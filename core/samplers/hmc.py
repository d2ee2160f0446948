"""Hamiltonian Monte Carlo with a leapfrog integrator and a diagonal or dense mass matrix.

Conventions: the position is a flat float array of shape ``(dim,)``; the
target is ``logdensity_and_grad_fn(position) -> (logdensity, gradient)``; the
mass matrix is passed as its inverse: shape ``(dim,)`` for a diagonal metric
(finite positive entries, default ones), ``(dim, dim)`` for a dense one
(symmetric positive definite). Each thread checks the last matrix it was
given once and caches its Cholesky factor: do not modify a matrix in place
once it was passed.

References
----------
Neal, "MCMC using Hamiltonian dynamics" (2011); Hoffman & Gelman, "The No-U-Turn
Sampler", JMLR 15 (2014), Algorithm 4 (initial step size).
"""

import math
import threading
from typing import NamedTuple

import numpy as np
from scipy.linalg import solve_triangular

from sepsti.core.checks import integer_at_least, is_number, positive_number, scalar
from sepsti.core.errors import ParameterError
from sepsti.core.samplers.integrators import IntegratorState, kinetic_energy, leapfrog

__all__ = ["HMCState", "HMCInfo", "init", "build_kernel", "sample_momentum", "find_reasonable_step_size"]


class HMCState(NamedTuple):
    """Position with its cached log density and gradient (shared by HMC and NUTS)."""

    position: np.ndarray
    logdensity: float
    logdensity_grad: np.ndarray


class HMCInfo(NamedTuple):
    """Diagnostics of one HMC transition.

    ``acceptance_rate`` is min(1, exp(-ΔH)); ``energy`` is the Hamiltonian of
    the returned state; ``tree_depth`` is 0 (no tree) and kept for a uniform
    shape with NUTS.
    """

    acceptance_rate: float
    is_accepted: bool
    is_divergent: bool
    energy: float
    step_size: float
    tree_depth: int
    num_integration_steps: int


def init(position, logdensity_and_grad_fn):
    """Return the initial state at ``position``.

    Raises
    ------
    ParameterError
        If the position is not a finite 1-D array, the log density there is not
        a finite scalar or the gradient not a finite array of the position's
        shape (the kernels would fail later with an obscure error, broadcast a
        wrong gradient silently, or stay stuck where the gradient is NaN).
    """
    position = np.asarray(position, dtype=float)
    if position.ndim != 1 or not np.all(np.isfinite(position)):
        raise ParameterError(f"position must be a finite 1-D array, got shape {position.shape}")
    values = logdensity_and_grad_fn(position)
    if not (isinstance(values, (tuple, list)) and len(values) == 2):  # a bare float met "cannot unpack"
        raise ParameterError(f"the log density function returned a {type(values).__name__}"
                             f"{'' if isinstance(values, (tuple, list)) else f' ({values!r:.40})'}: expected a pair "
                             "(log density, gradient)")
    logdensity, grad = values
    if np.ndim(logdensity) != 0:
        raise ParameterError(f"the log density at the start has shape {np.shape(logdensity)} (type "
                             f"{type(logdensity).__name__}): expected a scalar")
    if getattr(grad, "shape", None) != position.shape:  # a list has no shape, and no arithmetic of arrays
        raise ParameterError(f"the gradient at the start has shape {np.shape(grad)} (type {type(grad).__name__}): "
                             f"expected an array of the position's shape {position.shape}")
    if not np.isfinite(logdensity):
        raise ParameterError(f"initial log density is {logdensity}: start where the density is finite")
    if not np.all(np.isfinite(grad)):
        raise ParameterError(f"the gradient at the start is not finite ({np.array2string(grad, threshold=8)}): "
                             "start where the log density is differentiable")
    return HMCState(position, float(logdensity), np.asarray(grad, dtype=float))


# One cache per thread: chains run in threads each have their own matrix, and must never read another's factor.
_CHECKED = threading.local()

# Largest |M⁻¹ᵢⱼ − M⁻¹ⱼᵢ| accepted, relative to √(M⁻¹ᵢᵢ M⁻¹ⱼⱼ): the rounding of inverting a precision matrix of
# condition number up to about 1e11, far below a wrong matrix (a triangular one differs by O(1)).
_SYMMETRY_RTOL = 1e-6


def _checked(inverse_mass_matrix):
    """M⁻¹ as a checked float array and its lower Cholesky factor L (M⁻¹ = L Lᵀ), None for a diagonal.

    The last matrix given is remembered, the caller's own object (kernels reuse one per phase): passed again,
    a check costs one identity test, whatever its dtype.
    """
    if getattr(_CHECKED, "source", None) is inverse_mass_matrix:
        return _CHECKED.matrix, _CHECKED.factor
    matrix = np.asarray(inverse_mass_matrix, dtype=float)
    if matrix.ndim == 1:
        if not (matrix.size and matrix.min() > 0 and matrix.max() < np.inf):  # NaN fails both
            raise ParameterError(f"a diagonal inverse mass matrix must have finite positive entries, got "
                                 f"{np.array2string(matrix, threshold=8)}")
        factor = None
    elif matrix.ndim == 2 and matrix.shape[0] == matrix.shape[1]:
        scale = np.sqrt(np.abs(np.diag(matrix)))
        asymmetric = np.abs(matrix - matrix.T) > _SYMMETRY_RTOL * np.outer(scale, scale)
        if not np.all(np.isfinite(matrix)) or asymmetric.any():
            raise ParameterError("a dense inverse mass matrix must be symmetric positive definite (and finite); "
                                 "symmetrise an estimate with 0.5 * (m + m.T)")
        try:
            factor = np.linalg.cholesky(matrix)
        except np.linalg.LinAlgError as error:
            raise ParameterError("a dense inverse mass matrix must be symmetric positive definite") from error
    else:
        raise ParameterError(f"the inverse mass matrix has shape {matrix.shape}: expected (dim,) or (dim, dim)")
    _CHECKED.source, _CHECKED.matrix, _CHECKED.factor = inverse_mass_matrix, matrix, factor
    return matrix, factor


def _inverse_mass(inverse_mass_matrix, position):
    """M⁻¹ for ``position`` as a checked float array (ones if None) and its Cholesky factor (None if diagonal)."""
    if inverse_mass_matrix is None:
        return np.ones_like(position), None
    matrix, factor = _checked(inverse_mass_matrix)
    dim = position.shape[0]
    if matrix.shape not in ((dim,), (dim, dim)):
        raise ParameterError(f"the inverse mass matrix has shape {matrix.shape}: expected ({dim},) or ({dim}, {dim})")
    return matrix, factor


def _momentum(rng, inverse_mass_matrix, factor):
    """p ~ N(0, M) given M⁻¹ and its lower Cholesky factor (None for a diagonal M⁻¹)."""
    if factor is not None:
        z = rng.standard_normal(inverse_mass_matrix.shape[0])
        return solve_triangular(factor, z, lower=True, trans="T")
    return rng.standard_normal(inverse_mass_matrix.shape) / np.sqrt(inverse_mass_matrix)


def sample_momentum(rng, inverse_mass_matrix):
    """Draw p ~ N(0, M) for M = (inverse_mass_matrix)⁻¹, diagonal (shape (dim,)) or dense (shape (dim, dim)).

    Dense: with M⁻¹ = L Lᵀ, p = L⁻ᵀ z has covariance (L Lᵀ)⁻¹ = M.

    Raises
    ------
    ParameterError
        Unless the diagonal has finite positive entries, or the dense matrix is
        finite, symmetric (|M⁻¹ᵢⱼ − M⁻¹ⱼᵢ| ≤ 1e-6 √(M⁻¹ᵢᵢ M⁻¹ⱼⱼ)) and positive definite.
    """
    return _momentum(rng, *_checked(inverse_mass_matrix))


def build_kernel(logdensity_and_grad_fn, *, num_integration_steps, divergence_threshold=1000.0,
                 jitter_steps=False):
    """Build an HMC transition kernel.

    Parameters
    ----------
    logdensity_and_grad_fn : callable
        ``position -> (logdensity, gradient)``.
    num_integration_steps : int
        Leapfrog steps L per proposal (the maximum when ``jitter_steps``).
    divergence_threshold : float
        A proposal whose energy rises by more than this (Δ_max, positive and finite) is divergent.
    jitter_steps : bool
        Draw L uniformly from 1..num_integration_steps at each transition,
        which avoids periodic trajectories on near-Gaussian targets.

    Returns
    -------
    callable
        ``kernel(rng, state, step_size, inverse_mass_matrix=None) -> (HMCState, HMCInfo)``; it raises
        ParameterError on a step size or an inverse mass matrix that :func:`sample_momentum` refuses.
    """
    num_integration_steps = integer_at_least("num_integration_steps", num_integration_steps, 1)
    divergence_threshold = positive_number("divergence_threshold", divergence_threshold)

    def kernel(rng, state, step_size, inverse_mass_matrix=None):
        positive_number("step_size", step_size)
        inverse_mass_matrix, factor = _inverse_mass(inverse_mass_matrix, state.position)
        momentum = _momentum(rng, inverse_mass_matrix, factor)
        energy0 = -state.logdensity + kinetic_energy(momentum, inverse_mass_matrix)
        num_steps = int(rng.integers(1, num_integration_steps + 1)) if jitter_steps else num_integration_steps
        point = IntegratorState(state.position, momentum, state.logdensity, state.logdensity_grad)
        for _ in range(num_steps):
            point = leapfrog(point, step_size, logdensity_and_grad_fn, inverse_mass_matrix)
        energy = -point.logdensity + kinetic_energy(point.momentum, inverse_mass_matrix)
        delta = energy - energy0
        if not np.isfinite(delta):
            delta = np.inf
        is_divergent = bool(delta > divergence_threshold)
        acceptance = math.exp(-delta) if delta > 0 else 1.0
        # Momentum flip is implicit: the kinetic energy is symmetric and momentum is resampled.
        is_accepted = bool(np.log(rng.uniform()) < -delta)
        if is_accepted:
            state = HMCState(point.position, point.logdensity, point.logdensity_grad)
        else:
            energy = energy0
        return state, HMCInfo(acceptance, is_accepted, is_divergent, float(energy), float(step_size), 0, num_steps)

    return kernel


def find_reasonable_step_size(rng, state, logdensity_and_grad_fn, inverse_mass_matrix=None, *,
                              initial_step_size=1.0, target=0.5, max_doublings=100):
    """Initial step size heuristic (Hoffman & Gelman Algorithm 4; paper appendix E).

    Doubles or halves the step until the one-step acceptance ratio
    ``p(θ*, r*) / p(θ, r)`` crosses ``target`` (1/2).

    Parameters
    ----------
    rng : numpy.random.Generator
    state : HMCState
    logdensity_and_grad_fn : callable
    inverse_mass_matrix : ndarray, shape (dim,) or (dim, dim), optional
    initial_step_size : float
        Positive and finite.
    target : float
        In (0, 1).
    max_doublings : int
        Safety cap on the number of doublings or halvings, at least 1.

    Returns
    -------
    float

    Raises
    ------
    ParameterError
        On settings outside the ranges above, or an inverse mass matrix that :func:`sample_momentum` refuses.
    """
    step_size = positive_number("initial_step_size", initial_step_size)
    if not (is_number(target) and 0.0 < scalar(target) < 1.0):
        raise ParameterError(f"target={target!r} must be a number in (0, 1), the acceptance ratio to cross")
    max_doublings = integer_at_least("max_doublings", max_doublings, 1)
    inverse_mass_matrix, factor = _inverse_mass(inverse_mass_matrix, state.position)
    momentum = _momentum(rng, inverse_mass_matrix, factor)
    energy0 = -state.logdensity + kinetic_energy(momentum, inverse_mass_matrix)
    start = IntegratorState(state.position, momentum, state.logdensity, state.logdensity_grad)
    log_target = math.log(scalar(target))

    def log_ratio(step_size):
        point = leapfrog(start, step_size, logdensity_and_grad_fn, inverse_mass_matrix)
        value = energy0 - (-point.logdensity + kinetic_energy(point.momentum, inverse_mass_matrix))
        return value if np.isfinite(value) else -np.inf

    direction = 1 if log_ratio(step_size) > log_target else -1
    for _ in range(max_doublings):
        candidate = step_size * (2.0 ** direction)
        above = log_ratio(candidate) > log_target
        if (direction == 1 and not above) or (direction == -1 and above):
            # As in Algorithm 4: the first step whose ratio crosses the target.
            return candidate
        step_size = candidate
    return step_size
