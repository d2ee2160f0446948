"""Preconditioned SGLD (RMSprop-style diagonal preconditioner) on power posteriors.

Conventions
-----------
State carries ``v``, a NamedTuple shaped like the position: the running
average of squared mean likelihood gradients. Each step first updates

    v <- alpha v + (1 - alpha) g_bar * g_bar,   g_bar = (t / N_s) sum_{n in S} grad log p(x_n | theta),

then takes the Langevin step with G = 1 / (sigma + sqrt(v)) (PARAFAC'18
eq. 8-9; the order -- update v with the current gradient, then step -- is
that of Li et al. 2016, Alg. 1). The Gamma(theta) drift correction is
omitted, as in the paper. At t = 0, g_bar = 0 and G tends to 1/sigma.

References
----------
Li, Chen, Carlson & Carin (2016); PARAFAC'18 eq. 8-9.
"""

from typing import Any, NamedTuple

import numpy as np

from core.models.subsample import tempered_gradient
from core.samplers.langevin import langevin_step

__all__ = ["PSGLDState", "PSGLDInfo", "init", "build_kernel", "preconditioner"]


class PSGLDState(NamedTuple):
    """Position and the preconditioner's squared-gradient average ``v``."""

    position: Any
    v: Any


class PSGLDInfo(NamedTuple):
    """Diagnostics of one step."""

    step_size: float
    is_divergent: bool


def init(position):
    """Initial state: ``v`` = 0."""
    return PSGLDState(position, type(position)(*(np.zeros_like(x) for x in position)))


def preconditioner(v, sigma):
    """G = 1 / (sigma + sqrt(v)), leaf by leaf (PARAFAC'18 eq. 9)."""
    return type(v)(*(1.0 / (sigma + np.sqrt(leaf)) for leaf in v))


def build_kernel(*, alpha=0.99, sigma=1e-5, nonnegative=None):
    """Return the pSGLD kernel.

    Parameters
    ----------
    alpha : float
        Decay of the squared-gradient average, in [0, 1].
    sigma : float
        Positive floor added to sqrt(v).
    nonnegative : tuple of bool, optional
        Leaves to mirror (default: the model's ``nonnegative``).

    Returns
    -------
    kernel : callable
        ``kernel(rng, state, model, step_size, subset, temperature=1.0)
        -> (PSGLDState, PSGLDInfo)``.
    """

    def kernel(rng, state, model, step_size, subset, temperature=1.0):
        flags = nonnegative if nonnegative is not None else getattr(model, "nonnegative", None)
        gradient, mean = tempered_gradient(model, state.position, subset, temperature)
        if mean is None:
            v = type(state.v)(*(alpha * leaf for leaf in state.v))
        else:
            v = type(state.v)(*(alpha * leaf + (1.0 - alpha) * g * g for leaf, g in zip(state.v, mean)))
        G = preconditioner(v, sigma)
        position = langevin_step(rng, state.position, gradient, step_size, preconditioner=G, nonnegative=flags)
        finite = all(bool(np.all(np.isfinite(leaf))) for leaf in position)
        return PSGLDState(position, v), PSGLDInfo(step_size, not finite)

    return kernel
