"""The efficient No-U-Turn Sampler, iterative, with multinomial sampling in the tree.

Conventions: the position is a flat float array of shape ``(dim,)``; the
target is ``logdensity_and_grad_fn(position) -> (logdensity, gradient)``; the
mass matrix is passed as its inverse: shape ``(dim,)`` (diagonal) or
``(dim, dim)`` (dense). NUTS reuses
HMC's state (:class:`sepsti.core.samplers.hmc.HMCState`) and ``init``.

The trajectory doubles, in a random direction each time, until the
generalised U-turn criterion ``ρ · M⁻¹p± ≤ 0`` holds for the whole tree or for
any balanced sub-tree of the last doubling, until the energy error exceeds
Δ_max (a divergence), or until ``max_tree_depth`` doublings. Wherever two
sub-trees merge (within a doubling and at the doubling itself), the criterion
is also checked across the join, as Stan does since 2.21: over the first
sub-tree with the second one's first leaf, and over the second with the first
one's last leaf. Without these checks a U-turn across a join goes unseen and,
at some step sizes, trees run on for several more doublings (on a standard
normal in 50 dimensions at ε = 0.4, 20 times the leaves). States are drawn
from the trajectory in proportion to exp(−H) (multinomial sampling): uniformly
within each new sub-tree and, at each doubling, biased towards the new
sub-tree as in Hoffman & Gelman's Algorithm 6 (their transition kernel eq. 17).

References
----------
Hoffman & Gelman, "The No-U-Turn Sampler", JMLR 15 (2014), Algorithms 3 and 6;
Betancourt, "A Conceptual Introduction to Hamiltonian Monte Carlo" (2017), for
the multinomial variant and the generalised criterion; stan-dev/stan issue 2799
(Stan 2.21) for the checks across merged sub-trees.
"""

import math
from typing import NamedTuple

import numpy as np

from sepsti.core.checks import integer_at_least, positive_number
from sepsti.core.samplers.hmc import HMCState, _inverse_mass, _momentum, init
from sepsti.core.samplers.integrators import velocity

__all__ = ["NUTSInfo", "init", "build_kernel"]


class NUTSInfo(NamedTuple):
    """Diagnostics of one NUTS transition.

    ``acceptance_rate`` is the mean of min(1, exp(−ΔH)) over the states of the
    last doubling (paper eq. 12), the statistic dual averaging drives to δ.
    """

    acceptance_rate: float
    is_divergent: bool
    is_turning: bool
    energy: float
    step_size: float
    tree_depth: int
    num_integration_steps: int


class _Leaf(NamedTuple):
    """A point of the trajectory with the products by M⁻¹ it needs, so each leaf costs one M⁻¹ product."""

    position: np.ndarray
    momentum: np.ndarray
    logdensity: float
    logdensity_grad: np.ndarray
    velocity: np.ndarray        # M⁻¹ p
    inverse_mass_grad: np.ndarray   # M⁻¹ ∇log p


class _Subtree(NamedTuple):
    first: _Leaf                # the leaf next to the start
    edge: _Leaf                 # the leaf furthest from the start
    proposal: _Leaf             # a leaf drawn in proportion to exp(-H)
    log_weight: float           # log sum of exp(H0 - H) over the leaves
    momentum_sum: np.ndarray    # ρ, the sum of the leaves' momenta
    acceptance_sum: float
    num_leaves: int
    is_divergent: bool
    is_turning: bool


def _logaddexp(a, b):
    if a < b:
        a, b = b, a
    if b == -math.inf:
        return a
    return a + math.log1p(math.exp(b - a))


def _is_turning(velocity_left, velocity_right, momentum_sum):
    """Generalised U-turn criterion (the mass-matrix form of paper eq. 8–9)."""
    return float(np.dot(velocity_left, momentum_sum)) <= 0.0 or float(np.dot(velocity_right, momentum_sum)) <= 0.0


def _merge_is_turning(first_begin, first_end, first_sum, second_begin, second_end, second_sum):
    """U-turn of two adjacent sub-trees merged, in the order they were built (leaves with their momentum sums).

    The whole tree, then across the join: the first sub-tree with the second one's
    first leaf, and the second with the first one's last leaf.
    """
    return (_is_turning(first_begin.velocity, second_end.velocity, first_sum + second_sum)
            or _is_turning(first_begin.velocity, second_begin.velocity, first_sum + second_begin.momentum)
            or _is_turning(first_end.velocity, second_end.velocity, second_sum + first_end.momentum))


def _trailing_ones(n):
    count = 0
    while n & 1:
        n >>= 1
        count += 1
    return count


def _subtree_ending_here_turns(checkpoints, n, last, momentum_sum):
    """Whether a balanced sub-tree ending at the odd leaf ``n`` (``last``, the sum ``momentum_sum``) turns.

    Checkpoint ``top`` starts the two-leaf sub-tree ending there, each lower one a sub-tree twice the
    size, whose right half starts at the checkpoint above it.
    """
    top = bin(n >> 1).count("1")
    for i in range(top, top - _trailing_ones(n), -1):
        begin, _, sum_before = checkpoints[i]
        if i == top:  # two leaves: the checks across the join are the whole sub-tree's
            turns = _is_turning(begin.velocity, last.velocity, momentum_sum - sum_before)
        else:
            second_begin, first_end, middle = checkpoints[i + 1]
            turns = _merge_is_turning(begin, first_end, middle - sum_before, second_begin, last, momentum_sum - middle)
        if turns:
            return True
    return False


def _leapfrog(leaf, step_size, logdensity_and_grad_fn, inverse_mass_matrix):
    # The leapfrog of sepsti.core.samplers.integrators, carrying M⁻¹p and M⁻¹∇log p: the half-step velocity is
    # M⁻¹p + ε/2 M⁻¹∇log p, so only the new gradient needs a product by M⁻¹ (one instead of two for a
    # dense metric, whose product costs dim² and dominates a cheap gradient).
    half = 0.5 * step_size
    momentum = leaf.momentum + half * leaf.logdensity_grad
    half_velocity = leaf.velocity + half * leaf.inverse_mass_grad
    position = leaf.position + step_size * half_velocity
    logdensity, grad = logdensity_and_grad_fn(position)
    inverse_mass_grad = velocity(grad, inverse_mass_matrix)
    return _Leaf(position, momentum + half * grad, float(logdensity), grad, half_velocity + half * inverse_mass_grad,
                 inverse_mass_grad)


def build_kernel(logdensity_and_grad_fn, *, max_tree_depth=10, divergence_threshold=1000.0):
    """Build a NUTS transition kernel.

    Parameters
    ----------
    logdensity_and_grad_fn : callable
        ``position -> (logdensity, gradient)``.
    max_tree_depth : int
        Maximum number of doublings (at most 2**max_tree_depth − 1 leapfrog steps), an integer of at least 1.
    divergence_threshold : float
        Δ_max: a leaf whose energy exceeds the initial one by more is divergent
        (paper eq. 10).

    Returns
    -------
    callable
        ``kernel(rng, state, step_size, inverse_mass_matrix=None) -> (HMCState, NUTSInfo)``; it raises
        ParameterError on a step size that is not positive and finite, or an inverse mass matrix that
        :func:`sepsti.core.samplers.hmc.sample_momentum` refuses.

    Raises
    ------
    ParameterError
        On a ``max_tree_depth`` or ``divergence_threshold`` outside the ranges above.
    """
    max_tree_depth = integer_at_least("max_tree_depth", max_tree_depth, 1)
    divergence_threshold = positive_number("divergence_threshold", divergence_threshold)

    def build_subtree(rng, start, signed_step, depth, energy0, inverse_mass_matrix):
        # Iterative rather than recursive: leaves are produced in time order and,
        # after each odd leaf, the balanced sub-trees that end there are checked
        # for a U-turn against checkpoints stored at their first leaf (the same
        # checks the recursive Algorithm 3 makes, with O(depth) memory). A
        # checkpoint keeps the leaf before its first one too: a sub-tree's right
        # half starts at the next level's checkpoint, and that leaf ends its left half.
        dim = start.position.shape[0]
        checkpoints = [None] * depth  # (first leaf, the leaf before it, momentum sum before it)
        momentum_sum = np.zeros(dim)
        point = start
        first = proposal = None
        log_weight = -math.inf
        acceptance_sum = 0.0
        for n in range(2 ** depth):
            previous = point
            point = _leapfrog(point, signed_step, logdensity_and_grad_fn, inverse_mass_matrix)
            if n == 0:
                first = point
            delta = -point.logdensity + 0.5 * float(np.dot(point.momentum, point.velocity)) - energy0
            if not delta <= divergence_threshold:  # also catches NaN
                return _Subtree(first, point, proposal, log_weight, momentum_sum, acceptance_sum, n + 1, True, False)
            acceptance_sum += 1.0 if delta <= 0 else math.exp(-delta)
            new_log_weight = _logaddexp(log_weight, -delta)
            if proposal is None or math.log(rng.random()) < -delta - new_log_weight:
                proposal = point
            log_weight = new_log_weight
            if depth > 0 and n % 2 == 0:
                checkpoints[bin(n >> 1).count("1")] = (point, previous, momentum_sum)
            momentum_sum = momentum_sum + point.momentum
            if depth > 0 and n % 2 == 1 and _subtree_ending_here_turns(checkpoints, n, point, momentum_sum):
                return _Subtree(first, point, proposal, log_weight, momentum_sum, acceptance_sum, n + 1, False, True)
        return _Subtree(first, point, proposal, log_weight, momentum_sum, acceptance_sum, 2 ** depth, False, False)

    def kernel(rng, state, step_size, inverse_mass_matrix=None):
        positive_number("step_size", step_size)
        inverse_mass_matrix, factor = _inverse_mass(inverse_mass_matrix, state.position)
        momentum = _momentum(rng, inverse_mass_matrix, factor)
        start_velocity = velocity(momentum, inverse_mass_matrix)
        energy0 = -state.logdensity + 0.5 * float(np.dot(momentum, start_velocity))
        start = _Leaf(state.position, momentum, state.logdensity, state.logdensity_grad, start_velocity,
                      velocity(state.logdensity_grad, inverse_mass_matrix))
        left = right = start
        proposal, proposal_energy = start, energy0
        log_weight = 0.0
        momentum_sum = momentum.copy()
        num_steps = 0
        depth = 0
        is_divergent = is_turning = False
        acceptance_rate = 0.0
        while depth < max_tree_depth:
            direction = 1 if rng.random() < 0.5 else -1
            subtree = build_subtree(rng, right if direction > 0 else left, direction * step_size, depth,
                                    energy0, inverse_mass_matrix)
            num_steps += subtree.num_leaves
            depth += 1
            acceptance_rate = subtree.acceptance_sum / subtree.num_leaves
            if subtree.is_divergent or subtree.is_turning:
                # The unfinished doubling is discarded (paper appendix C).
                is_divergent, is_turning = subtree.is_divergent, subtree.is_turning
                break
            # the tree so far, from its far end to the end the new sub-tree grew from, then the sub-tree
            near, far = (right, left) if direction > 0 else (left, right)
            if direction > 0:
                right = subtree.edge
            else:
                left = subtree.edge
            if math.log(rng.random()) < subtree.log_weight - log_weight:
                proposal = subtree.proposal
                proposal_energy = None
            log_weight = _logaddexp(log_weight, subtree.log_weight)
            is_turning = _merge_is_turning(far, near, momentum_sum, subtree.first, subtree.edge, subtree.momentum_sum)
            momentum_sum = momentum_sum + subtree.momentum_sum
            if is_turning:
                break
        if proposal_energy is None:
            proposal_energy = -proposal.logdensity + 0.5 * float(np.dot(proposal.momentum, proposal.velocity))
        new_state = HMCState(proposal.position, proposal.logdensity, proposal.logdensity_grad)
        return new_state, NUTSInfo(float(acceptance_rate), is_divergent, is_turning, float(proposal_energy),
                                   float(step_size), depth, num_steps)

    return kernel
