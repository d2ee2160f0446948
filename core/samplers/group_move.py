"""Metropolis moves along a one-parameter group acting on the position (scale moves), to interleave with HMC/NUTS.

Conventions: the position is a flat float array of shape ``(dim,)`` and the
state is HMC's (:class:`sepsti.core.samplers.hmc.HMCState`: position, log density,
gradient), so a move composes with a NUTS transition. ``transform_fn(position,
log_scales) -> (new_position, log_jacobian)`` applies the group element
``exp(log_scales)`` (shape ``(num_groups,)``, one commuting scale per group)
and returns ``log |det ∂new/∂position|``.

For each group g a proposal u ~ N(0, s_g²) (symmetric, as u ↦ −u is the
inverse element and du is the Haar measure of the scale group) moves the
position to T_u(θ), accepted with probability
min(1, π(T_u θ) |det ∂T_u θ/∂θ| / π(θ)); the move leaves π invariant whatever
the group, so it changes nothing in the model. It helps where the target has a
long curved ridge along the group's orbits, such as the D/H scale trade-off of
matrix factorisations, which a leapfrog trajectory with a step set by the
stiffest direction crosses only slowly.

References
----------
Liu & Sabatti, "Generalised Gibbs sampler and multigrid Monte Carlo for
Bayesian computation", Biometrika 87 (2000); Liu & Wu, "Parameter expansion
for data augmentation", JASA 94 (1999).
"""

import math
from typing import NamedTuple

import numpy as np

from sepsti.core.errors import ParameterError
from sepsti.core.samplers.hmc import HMCState

__all__ = ["GroupMoveInfo", "build_kernel", "adapt_log_proposal_std"]


class GroupMoveInfo(NamedTuple):
    """Diagnostics of one sweep of moves: per group, the mean of min(1, α) and the number accepted."""

    acceptance_rate: np.ndarray
    num_accepted: np.ndarray
    num_evaluations: int


def build_kernel(transform_fn, logdensity_and_grad_fn, *, num_groups, num_moves=1):
    """Build a kernel making ``num_moves`` sweeps of one scale move per group.

    Parameters
    ----------
    transform_fn : callable
        ``(position, log_scales) -> (new_position, log_jacobian)``; a
        non-finite new position is a rejected proposal.
    logdensity_and_grad_fn : callable
        ``position -> (logdensity, gradient)``.
    num_groups : int
        Length of ``log_scales``.
    num_moves : int
        Sweeps per call.

    Returns
    -------
    callable
        ``kernel(rng, state, log_proposal_std) -> (HMCState, GroupMoveInfo)`` with
        ``log_proposal_std`` of shape ``(num_groups,)`` (log of s_g).
    """
    if int(num_groups) < 1 or int(num_moves) < 1:
        raise ParameterError(f"num_groups={num_groups} and num_moves={num_moves} must be positive integers")
    num_groups, num_moves = int(num_groups), int(num_moves)

    def kernel(rng, state, log_proposal_std):
        scales = np.exp(np.asarray(log_proposal_std, dtype=float))
        acceptance = np.zeros(num_groups)
        accepted = np.zeros(num_groups, dtype=int)
        evaluations = 0
        for _ in range(num_moves):
            for group in range(num_groups):
                log_scales = np.zeros(num_groups)
                log_scales[group] = scales[group] * rng.standard_normal()
                position, log_jacobian = transform_fn(state.position, log_scales)
                log_ratio = -math.inf
                if np.all(np.isfinite(position)) and math.isfinite(log_jacobian):
                    logdensity, grad = logdensity_and_grad_fn(position)
                    evaluations += 1
                    log_ratio = float(logdensity) + log_jacobian - state.logdensity
                    if not math.isfinite(log_ratio):
                        log_ratio = -math.inf
                acceptance[group] += 1.0 if log_ratio >= 0 else math.exp(log_ratio)
                if log_ratio >= 0 or math.log(rng.random()) < log_ratio:
                    state = HMCState(position, float(logdensity), np.asarray(grad, dtype=float))
                    accepted[group] += 1
        return state, GroupMoveInfo(acceptance / num_moves, accepted, evaluations)

    return kernel


def adapt_log_proposal_std(log_proposal_std, acceptance_rate, iteration, *, target=0.44, decay=0.6):
    """Robbins–Monro step on log s_g towards the acceptance ``target`` (0.44: one-dimensional random walk).

    The gain 1/iteration**decay vanishes, as adaptation must; use during warm-up only.
    """
    return np.asarray(log_proposal_std, dtype=float) + (np.asarray(acceptance_rate) - target) / iteration ** decay
