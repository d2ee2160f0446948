"""Stochastic gradient Langevin dynamics on (tempered) power posteriors.

Conventions
-----------
A kernel moves a :class:`SGLDState` with one :func:`sepsti.core.samplers.langevin.langevin_step`
driven by the gradient of log p(theta) + t (N/N_s) sum_{n in S} log p(x_n | theta)
(:func:`sepsti.core.models.subsample.tempered_gradient`). Estimating the evidence
from the samples is the business of :mod:`sepsti.core.evidence.sti`.

References
----------
Welling & Teh (2011); ICASSP'16 eq. 10; PARAFAC'18 eq. 6.
"""

from typing import Any, NamedTuple

import numpy as np

from sepsti.core.checks import positive_numbers
from sepsti.core.models.subsample import tempered_gradient
from sepsti.core.samplers.langevin import float_position, langevin_step

__all__ = ["SGLDState", "SGLDInfo", "init", "build_kernel"]


class SGLDState(NamedTuple):
    """The position (SGLD carries nothing else)."""

    position: Any


class SGLDInfo(NamedTuple):
    """Diagnostics of one step (not carried to the next)."""

    step_size: float
    is_divergent: bool


def init(position):
    """Initial state at ``position`` (integer leaves become float64: see :func:`float_position`)."""
    return SGLDState(float_position(position))


def _is_finite(position):
    return all(bool(np.all(np.isfinite(leaf))) for leaf in position)


def build_kernel(*, nonnegative=None):
    """Return the SGLD kernel.

    Parameters
    ----------
    nonnegative : tuple of bool, optional
        Leaves to mirror after each step (default: the model's ``nonnegative``).

    Returns
    -------
    kernel : callable
        ``kernel(rng, state, model, step_size, subset, temperature=1.0)
        -> (SGLDState, SGLDInfo)``; ``step_size`` is a positive finite number
        or one per chain, else ParameterError.
    """
    def kernel(rng, state, model, step_size, subset, temperature=1.0):
        positive_numbers("step_size", step_size)
        flags = nonnegative if nonnegative is not None else getattr(model, "nonnegative", None)
        gradient, _ = tempered_gradient(model, state.position, subset, temperature)
        position = langevin_step(rng, state.position, gradient, step_size, nonnegative=flags)
        return SGLDState(position), SGLDInfo(step_size, not _is_finite(position))

    return kernel
