"""Leapfrog (velocity Verlet) integrator for Hamiltonian dynamics.

Conventions: positions and momenta are flat float arrays of shape ``(dim,)``;
the mass matrix is given by its inverse ``inverse_mass_matrix``: shape
``(dim,)`` for a diagonal metric (its diagonal), ``(dim, dim)`` for a dense one
(symmetric positive definite). The velocity is ``M⁻¹ p`` and the kinetic
energy ``0.5 * p @ M⁻¹ p``.
``logdensity_and_grad_fn(position) -> (logdensity, gradient)`` is the target.
"""

from typing import NamedTuple

import numpy as np

__all__ = ["IntegratorState", "leapfrog", "kinetic_energy", "velocity"]


class IntegratorState(NamedTuple):
    """A point of phase space with its cached log density and gradient."""

    position: np.ndarray
    momentum: np.ndarray
    logdensity: float
    logdensity_grad: np.ndarray


def velocity(momentum, inverse_mass_matrix):
    """Return ``M⁻¹ p`` for a diagonal (shape ``(dim,)``) or dense (``(dim, dim)``) inverse mass matrix."""
    if inverse_mass_matrix.ndim == 2:
        return inverse_mass_matrix @ momentum
    return inverse_mass_matrix * momentum


def kinetic_energy(momentum, inverse_mass_matrix):
    """Return ``0.5 * p^T M^{-1} p`` for a diagonal or dense inverse mass matrix."""
    return 0.5 * float(np.dot(momentum, velocity(momentum, inverse_mass_matrix)))


def leapfrog(state, step_size, logdensity_and_grad_fn, inverse_mass_matrix):
    """Take one leapfrog step (paper eq. 3a–3c, with the sign for a log density).

    Parameters
    ----------
    state : IntegratorState
        Current point; its cached gradient is reused, so each step costs one
        evaluation of ``logdensity_and_grad_fn``.
    step_size : float
        Signed step: negative integrates backwards in time.
    logdensity_and_grad_fn : callable
        ``position -> (logdensity, gradient)``.
    inverse_mass_matrix : ndarray, shape (dim,) or (dim, dim)
        Diagonal of M^{-1}, or M^{-1} itself.

    Returns
    -------
    IntegratorState
    """
    half = 0.5 * step_size
    momentum = state.momentum + half * state.logdensity_grad
    position = state.position + step_size * velocity(momentum, inverse_mass_matrix)
    logdensity, grad = logdensity_and_grad_fn(position)
    momentum = momentum + half * grad
    return IntegratorState(position, momentum, float(logdensity), grad)
