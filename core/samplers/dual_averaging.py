"""Dual-averaging adaptation of the log step size (Hoffman & Gelman 2014, Algorithm 5).

The adaptation has the ``(init, update, final)`` form over a small state and
works on the log step size:

    log ε_{m+1} = μ − √m / γ · H̄_m,      H̄_m = (1 − 1/(m+t0)) H̄_{m−1} + (δ − α_m)/(m+t0),
    log ε̄_{m+1} = m^{−κ} log ε_{m+1} + (1 − m^{−κ}) log ε̄_m,

with μ = log(10 ε_0), γ = 0.05, t0 = 10, κ = 0.75 (the paper's values) and
target acceptance statistic δ.
"""

import math
from typing import NamedTuple

from sepsti.core.errors import ParameterError

__all__ = ["DualAveragingState", "dual_averaging"]


class DualAveragingState(NamedTuple):
    """log ε (used while adapting), log ε̄ (the final value), H̄, m and μ."""

    log_step_size: float
    log_step_size_avg: float
    error_avg: float
    step: int
    mu: float


def dual_averaging(*, target=0.8, gamma=0.05, t0=10.0, kappa=0.75):
    """Return ``(init, update, final)`` for dual-averaging step-size adaptation.

    Parameters
    ----------
    target : float
        Target mean acceptance statistic δ in (0, 1).
    gamma, t0, kappa : float
        Shrinkage scale γ > 0, stabiliser t0 ≥ 0 (both finite) and averaging
        exponent κ ∈ (0.5, 1].

    Returns
    -------
    init : callable
        ``init(step_size) -> DualAveragingState`` with μ = log(10 · step_size).
    update : callable
        ``update(state, acceptance_rate) -> DualAveragingState``.
    final : callable
        ``final(state) -> float``, the averaged step size exp(log ε̄).
    """
    if not 0.0 < target < 1.0:
        raise ParameterError(f"target={target} must lie in (0, 1)")
    if not 0.5 < kappa <= 1.0:
        raise ParameterError(f"kappa={kappa} must lie in (0.5, 1]")
    if not (0.0 < gamma < math.inf and 0.0 <= t0 < math.inf):  # NaN fails both
        raise ParameterError(f"gamma={gamma} must be positive and t0={t0} non-negative, both finite")

    def init(step_size):
        if not step_size > 0:
            raise ParameterError(f"step_size={step_size} must be positive")
        log_step = math.log(step_size)
        return DualAveragingState(log_step, 0.0, 0.0, 0, math.log(10.0) + log_step)

    def update(state, acceptance_rate):
        step = state.step + 1
        if not math.isfinite(acceptance_rate):
            acceptance_rate = 0.0
        weight = 1.0 / (step + t0)
        error_avg = (1.0 - weight) * state.error_avg + weight * (target - acceptance_rate)
        log_step = state.mu - math.sqrt(step) / gamma * error_avg
        eta = step ** (-kappa)
        log_step_avg = eta * log_step + (1.0 - eta) * state.log_step_size_avg
        return DualAveragingState(log_step, log_step_avg, error_avg, step, state.mu)

    def final(state):
        return math.exp(state.log_step_size_avg if state.step > 0 else state.log_step_size)

    return init, update, final
