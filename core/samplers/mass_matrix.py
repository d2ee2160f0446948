"""Diagonal and dense mass-matrix estimation in warm-up windows.

The inverse mass matrix is the diagonal of the posterior covariance (or the
whole covariance, for a dense metric), estimated by Welford's running
(co)variance over the draws of one window and shrunk towards 1e-3 · I
(Stan's regularisation). Windows follow Stan's schedule:
a fast initial buffer (step size only), slow windows that double in length,
and a fast final buffer. Positions are flat arrays of shape ``(dim,)``.
"""

from typing import NamedTuple

import numpy as np

from sepsti.core.checks import integer_at_least
from sepsti.core.errors import ParameterError

__all__ = ["WelfordState", "welford_variance", "welford_covariance", "warmup_schedule", "LowRankTransform",
           "numerical_precision", "low_rank_preconditioner", "reparametrize"]


class WelfordState(NamedTuple):
    """Running count, mean and sum of squared deviations."""

    count: int
    mean: np.ndarray
    m2: np.ndarray


def welford_variance(*, regularize=True):
    """Return ``(init, update, final)`` for a running diagonal variance.

    Parameters
    ----------
    regularize : bool
        Shrink as ``n/(n+5) var + 1e-3 · 5/(n+5)`` so short windows stay well
        conditioned.

    Returns
    -------
    init : callable
        ``init(dim) -> WelfordState``.
    update : callable
        ``update(state, position) -> WelfordState``.
    final : callable
        ``final(state) -> ndarray, shape (dim,)``, the inverse mass matrix.
    """

    def init(dim):
        return WelfordState(0, np.zeros(dim), np.zeros(dim))

    def update(state, position):
        count = state.count + 1
        delta = position - state.mean
        mean = state.mean + delta / count
        return WelfordState(count, mean, state.m2 + delta * (position - mean))

    def final(state):
        if state.count < 2:
            return np.ones_like(state.mean)
        variance = state.m2 / (state.count - 1)
        if regularize:
            n = state.count
            variance = (n / (n + 5.0)) * variance + 1e-3 * (5.0 / (n + 5.0))
        return variance

    return init, update, final


def welford_covariance(*, regularize=True):
    """Return ``(init, update, final)`` for a running dense covariance (a dense metric).

    Parameters
    ----------
    regularize : bool
        Shrink as ``n/(n+5) Σ + 1e-3 · 5/(n+5) I`` (Stan's dense regularisation).

    Returns
    -------
    init : callable
        ``init(dim) -> WelfordState`` (``m2`` of shape (dim, dim)).
    update : callable
        ``update(state, position) -> WelfordState``.
    final : callable
        ``final(state) -> ndarray, shape (dim, dim)``, the inverse mass matrix (symmetric).
    """

    def init(dim):
        return WelfordState(0, np.zeros(dim), np.zeros((dim, dim)))

    def update(state, position):
        count = state.count + 1
        delta = position - state.mean
        mean = state.mean + delta / count
        return WelfordState(count, mean, state.m2 + np.outer(position - mean, delta))

    def final(state):
        dim = state.mean.shape[0]
        if state.count < 2:
            return np.eye(dim)
        covariance = state.m2 / (state.count - 1)
        covariance = 0.5 * (covariance + covariance.T)
        if regularize:
            n = state.count
            covariance = (n / (n + 5.0)) * covariance
            covariance[np.diag_indices(dim)] += 1e-3 * (5.0 / (n + 5.0))
        return covariance

    return init, update, final


def warmup_schedule(num_steps, *, initial_buffer=75, first_window=25, final_buffer=50):
    """Return, for each warm-up iteration, whether it feeds the mass matrix and whether a window ends.

    The windows are Stan's (``windowed_adaptation``): the first has
    ``first_window`` draws; each later one doubles, and one after which the next
    would not fit is stretched to the final buffer.

    Parameters
    ----------
    num_steps : int
        Warm-up iterations; below 20, no window.
    initial_buffer, first_window, final_buffer : int
        Stan's defaults; when they do not fit, 15 % / 75 % / 10 % of ``num_steps``.

    Returns
    -------
    is_slow : ndarray of bool, shape (num_steps,)
        The iteration's draw enters the variance estimate.
    is_window_end : ndarray of bool, shape (num_steps,)
        The mass matrix is updated after this iteration.

    Raises
    ------
    ParameterError
        If a count is not an integer (2.0 included), ``num_steps`` or a buffer is
        negative, or ``first_window`` is below 1.
    """
    num_steps = integer_at_least("num_steps", num_steps, 0)
    initial_buffer = integer_at_least("initial_buffer", initial_buffer, 0)
    first_window = integer_at_least("first_window", first_window, 1)
    final_buffer = integer_at_least("final_buffer", final_buffer, 0)
    is_slow = np.zeros(num_steps, dtype=bool)
    is_window_end = np.zeros(num_steps, dtype=bool)
    if num_steps < 20:
        return is_slow, is_window_end
    if initial_buffer + first_window + final_buffer > num_steps:
        initial_buffer = int(0.15 * num_steps)
        final_buffer = int(0.1 * num_steps)
        first_window = num_steps - initial_buffer - final_buffer
    end_slow = num_steps - final_buffer
    start, stop, size = initial_buffer, initial_buffer + first_window, first_window
    while True:
        is_slow[start:stop] = True
        is_window_end[stop - 1] = True
        if stop == end_slow:
            return is_slow, is_window_end
        start, size = stop, 2 * size
        stop = start + size
        if stop + 2 * size > end_slow:  # the window after this one would not fit: stretch this one
            stop = end_slow


class LowRankTransform(NamedTuple):
    """θ = center + A u with A = I + V diag(factors) Vᵀ (V orthonormal, shape (dim, rank)); A is symmetric."""

    center: np.ndarray
    basis: np.ndarray
    factors: np.ndarray


def numerical_precision(logdensity_and_grad_fn, position, *, step=1e-5):
    """−Hessian of the log density by central differences of the gradient (2 · dim gradient calls), symmetrised."""
    position = np.asarray(position, dtype=float)
    dim = position.shape[0]
    hessian = np.empty((dim, dim))
    for i in range(dim):
        offset = np.zeros(dim)
        offset[i] = step
        hessian[i] = (logdensity_and_grad_fn(position + offset)[1] - logdensity_and_grad_fn(position - offset)[1])
    hessian /= 2.0 * step
    return -0.5 * (hessian + hessian.T)


def low_rank_preconditioner(precision, center, *, rank, floor=1.0):
    """Whitening of the ``rank`` stiffest directions of a precision matrix (e.g. the Laplace one at the MAP).

    Directions with precision eigenvalue λ ≥ floor among the top ``rank`` are
    rescaled by 1/√λ; every other direction is left as is, so the transform
    costs two (dim × rank) products per gradient. A diagonal mass matrix
    adapted on the transformed variables then handles what remains.

    Parameters
    ----------
    precision : ndarray, shape (dim, dim)
        Symmetric; negative eigenvalues are ignored.
    center : ndarray, shape (dim,)
    rank : int
    floor : float
        Eigenvalues below this are left untouched.

    Returns
    -------
    LowRankTransform
    """
    if not 0 < int(rank) <= precision.shape[0]:
        raise ParameterError(f"rank={rank} must lie in 1..{precision.shape[0]}")
    eigenvalues, eigenvectors = np.linalg.eigh(precision)
    keep = np.argsort(eigenvalues)[::-1][:int(rank)]
    keep = keep[eigenvalues[keep] >= floor]
    factors = 1.0 / np.sqrt(eigenvalues[keep]) - 1.0
    return LowRankTransform(np.asarray(center, dtype=float), np.ascontiguousarray(eigenvectors[:, keep]), factors)


def reparametrize(logdensity_and_grad_fn, transform):
    """The target on u where θ = center + A u (the Jacobian is constant, so log densities differ by a constant).

    Returns
    -------
    logdensity_and_grad_u : callable
        ``u -> (log p(θ(u)), A ∇ log p(θ(u)))``.
    to_position : callable
        Maps u of shape (..., dim) to θ.
    """
    center, basis, factors = transform
    basis_t = np.ascontiguousarray(basis.T)

    def apply(u):
        return u + ((u @ basis) * factors) @ basis_t

    def logdensity_and_grad_u(u):
        logdensity, grad = logdensity_and_grad_fn(center + apply(u))
        return logdensity, apply(grad)

    return logdensity_and_grad_u, lambda u: center + apply(np.asarray(u, dtype=float))
