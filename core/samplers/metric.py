"""Metrics (inverse mass matrices) for HMC and NUTS, and the choice of one from pilot runs.

Conventions: positions are flat float arrays of shape ``(dim,)``; a metric is
given by its inverse mass matrix M⁻¹, shape ``(dim,)`` (diagonal) or
``(dim, dim)`` (dense). A metric *name* is one of three kinds, optionally
followed by ``+moves`` (Metropolis moves along a scale group after each NUTS
transition, :mod:`sepsti.core.samplers.group_move`):

- ``"diagonal"``: the windowed marginal variance of warm-up draws (Stan);
- ``"dense"``: the regularised covariance of warm-up draws;
- ``"precision"``: the inverse of a caller-supplied precision matrix at the
  chain's current state, e.g. the Gauss–Newton precision I + σ⁻² JᵀJ of a
  least-squares model (:meth:`sepsti.core.models.NMFGPP.gauss_newton_precision`).

Which one mixes best depends on the posterior, not on the model: a stiff
likelihood makes the curvature-based metric win by orders of magnitude, a
weak one makes a metric frozen at one state worse than the diagonal. So the
choice is made from what short pilot runs measure: each candidate runs a
few dual-averaging iterations and then a few draws on every chain, and the
smallest bulk ESS over the parameters, the log density and the caller's
summaries (e.g. the scale directions of a factorisation), pooled over
chains, is divided by the work spent (gradient evaluations, a scale-move
density evaluation counting as one). The cheapest kind within a factor
``margin`` of the best is kept, because a short pilot's ESS is noisy and a
diagonal metric is cheaper and estimated from fewer draws than a dense one;
of that kind, the variant with scale moves when it too is within the margin:
the moves' cost is in the work already and small beside a tree's, while
leaving them out when the scale direction is the slow one costs orders of
magnitude (docs/nuts.md, stiff regime), a difference pilots too short to see
that direction cannot resolve.
"""

from typing import Callable, NamedTuple, Optional

import numpy as np

from sepsti.core.errors import ParameterError

__all__ = ["METRIC_KINDS", "TargetStructure", "AutoMetricSettings", "PilotResult", "MetricChoice",
           "split_name", "validate_metric", "candidate_metrics", "choose_metric", "pilot_result"]

METRIC_KINDS = ("diagonal", "dense", "precision")
_MOVES = "+moves"


class TargetStructure(NamedTuple):
    """What a model can tell the sampler beyond its log density; every field is optional.

    Attributes
    ----------
    precision_fn : callable, optional
        ``position -> ndarray (dim, dim)``, symmetric positive definite (the
        ``"precision"`` metric is its inverse at the chain's state).
    transform_fn : callable, optional
        ``(position, log_scales) -> (new_position, log_jacobian)``: a scale
        group acting on the position (the ``+moves`` metrics).
    num_groups : int
        Length of ``log_scales``.
    summary_fn : callable, optional
        ``position -> ndarray (k,)``: quantities whose ESS also counts when a
        metric is chosen and in the diagnostics (e.g. log scales of components).
    """

    precision_fn: Optional[Callable] = None
    transform_fn: Optional[Callable] = None
    num_groups: int = 0
    summary_fn: Optional[Callable] = None


class AutoMetricSettings(NamedTuple):
    """How ``metric="auto"`` chooses, and how every metric's warm-up is split.

    Attributes
    ----------
    explore_fraction : float
        Share of the warm-up spent first with an adapted diagonal metric
        (reaching the typical set; its draws give the diagonal and dense estimates).
    explore_max_tree_depth : int
        Tree-depth cap during that first part only (its draws are never kept).
    num_pilot_adapt, num_pilot_draws : int
        Per candidate and chain: dual-averaging iterations, then draws at the
        adapted step whose ESS is measured. These come on top of the warm-up.
    margin : float
        The cheapest kind whose ESS per unit of work is within this factor of the best is kept, with
        its scale moves if they are within it too (a pilot's smallest ESS over 2 × 75 draws is uncertain
        by tens of per cent).
    dense_cost : float
        Work of one product by a dense M⁻¹ (one per leaf), in gradient
        evaluations; 0 counts gradients only. The ratio of its time to a
        gradient's makes the choice one of ESS per second.
    num_move_sweeps : int
        Sweeps of scale moves after each NUTS transition in ``+moves`` metrics.
    min_dense_draws_per_dim : float
        ``"dense"`` is a candidate only with at least this many draws per
        dimension from the second half of the exploration (the half that has
        left the start behind and estimates the covariance); fewer than one per
        dimension leave the covariance rank-deficient, and not many more noisy.
    """

    explore_fraction: float = 0.3
    explore_max_tree_depth: int = 8
    num_pilot_adapt: int = 50
    num_pilot_draws: int = 75
    margin: float = 2.0
    dense_cost: float = 0.0
    num_move_sweeps: int = 5
    min_dense_draws_per_dim: float = 2.0


class PilotResult(NamedTuple):
    """One candidate's pilot, pooled over chains."""

    metric: str
    min_ess: float
    worst: str               # which quantity had the smallest ESS
    work: float              # gradient evaluations (+ dense products × dense_cost) over the pilot draws
    ess_per_work: float
    step_size: float         # mean over chains
    mean_tree_depth: float
    num_divergent: int


class MetricChoice(NamedTuple):
    """The metric used for sampling and why, with the target δ its step size was adapted to."""

    metric: str
    reason: str
    pilots: tuple            # of PilotResult, empty for a fixed metric
    skipped: tuple           # (metric, reason) of candidates not tried
    target: float = 0.8      # δ after the warm-up's divergence checks
    checks: tuple = ()       # per target δ tried: (δ, divergences in its adaptation at or below the adapted
                             # step, divergences in its check, check transitions), over all chains


def split_name(name):
    """``"precision+moves"`` → ``("precision", True)``."""
    if name.endswith(_MOVES):
        return name[:-len(_MOVES)], True
    return name, False


def validate_metric(metric, structure):
    """Return ``metric`` if it is ``"auto"`` or a usable kind (with ``+moves``), else raise ParameterError."""
    if metric == "auto":
        return metric
    kind, moves = split_name(str(metric))
    names = [k + s for k in METRIC_KINDS for s in ("", _MOVES)]
    if kind not in METRIC_KINDS:
        raise ParameterError(f"metric={metric!r}: expected 'auto' or one of {names}")
    if kind == "precision" and structure.precision_fn is None:
        raise ParameterError(f"metric={metric!r} needs structure.precision_fn (a position -> precision matrix)")
    if moves and (structure.transform_fn is None or int(structure.num_groups) < 1):
        raise ParameterError(f"metric={metric!r} needs structure.transform_fn and num_groups >= 1")
    return metric


def candidate_metrics(structure, *, dim, num_explore_draws, settings):
    """The candidates ``auto`` tries, cheapest first, and those left out with the reason.

    ``num_explore_draws`` counts the draws the dense estimate is made from: the
    exploration's second half.

    Returns
    -------
    candidates : list of str
    skipped : list of (str, str)
    """
    kinds, skipped = ["diagonal"], []
    if num_explore_draws >= settings.min_dense_draws_per_dim * dim:
        kinds.append("dense")
    else:
        skipped.append(("dense", f"{num_explore_draws} draws in the second half of the exploration for dim {dim}: "
                                 f"fewer than min_dense_draws_per_dim={settings.min_dense_draws_per_dim:g} per "
                                 "dimension"))
    if structure.precision_fn is not None:
        kinds.append("precision")
    candidates = []
    for kind in kinds:
        candidates.append(kind)
        if structure.transform_fn is not None and int(structure.num_groups) >= 1:
            candidates.append(kind + _MOVES)
    return candidates, skipped


def choose_metric(pilots, *, margin):
    """Pick from pilot results: the cheapest kind within ``margin`` of the best ESS per work, with moves if within too.

    Candidates whose measured pilot draws diverged are passed over unless all did.

    Parameters
    ----------
    pilots : sequence of PilotResult, cheapest first
    margin : float

    Returns
    -------
    str, str
        The metric and a one-line reason.
    """
    if not pilots:
        raise ParameterError("choose_metric needs at least one pilot result")
    pool = [p for p in pilots if p.num_divergent == 0] or list(pilots)
    best = max(pool, key=lambda p: p.ess_per_work)
    within = [p for p in pool if p.ess_per_work * margin >= best.ess_per_work]
    kind = split_name(within[0].metric)[0]
    of_kind = [p for p in within if split_name(p.metric)[0] == kind]
    chosen = next((p for p in of_kind if split_name(p.metric)[1]), of_kind[0])
    table = ", ".join(f"{p.metric} {1e3 * p.ess_per_work:.3g}" for p in pilots)
    reason = (f"min ESS per 1000 gradients in the pilots: {table}; {kind} is the cheapest kind within {margin:g}x "
              f"of the best ({best.metric})")
    if split_name(chosen.metric)[1]:
        reason += ", taken with its scale moves (within the margin too)"
    dropped = [p.metric for p in pilots if p not in pool]
    if dropped:
        reason += f"; passed over for divergences: {', '.join(dropped)}"
    return chosen.metric, reason


def pilot_result(metric, draws, labels, work, step_sizes, tree_depths, num_divergent):
    """Pool one candidate's pilot draws over chains into a :class:`PilotResult`.

    Parameters
    ----------
    metric : str
    draws : ndarray, shape (num_chains, num_draws, num_quantities)
    labels : sequence of str, length num_quantities
    work : float
    step_sizes, tree_depths : array_like
    num_divergent : int
    """
    from sepsti.core.samplers.diagnostics import effective_sample_size

    ess = effective_sample_size(draws)
    worst = int(np.argmin(ess))
    return PilotResult(metric, float(ess[worst]), labels[worst], float(work), float(ess[worst] / max(work, 1.0)),
                       float(np.mean(step_sizes)), float(np.mean(tree_depths)), int(num_divergent))
