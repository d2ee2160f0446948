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
Without Gamma the chain is exact only while v does not follow the position
(subsampling noise dominating it); with full-data gradients it samples about
pi / G, biased low in STI by 2-4 standard errors on the Gaussian model
(docs/rank_selection.md, "Choices where the papers are silent or ambiguous").

Start of the average (the paper is silent; our choice): the first update
sets v_1 = g_bar_1 * g_bar_1, later ones use the running average above.
Li et al. (2016) start at v_0 = 0, so v_1 = (1 - alpha) g_bar_1^2 and, with
alpha = 0.99, G is about 10 / |g_bar|: the first steps are ~10x too large
and throw chains far off the factors' scale. An entry of v that has seen no
gradient yet holds ``UNSET`` (-1, a value a mean of squares never takes);
:func:`init` fills v with it, and every pSGLD implementation (this kernel,
the NMF block kernels of :mod:`sepsti.core.parallel`, the PARAFAC block kernels)
applies the same rule entry by entry, so block and distributed paths stay
equal to this one. At t = 0 the first update sets v = 0.

References
----------
Li, Chen, Carlson & Carin (2016); PARAFAC'18 eq. 8-9.
"""

from typing import Any, NamedTuple

import numpy as np

from sepsti.core.checks import number_within, positive_number, positive_numbers
from sepsti.core.models.subsample import tempered_gradient
from sepsti.core.samplers.langevin import float_position, langevin_step

__all__ = ["PSGLDState", "PSGLDInfo", "UNSET", "init", "build_kernel", "preconditioner", "update_average"]

UNSET = -1.0
"""Value of an entry of ``v`` that has seen no gradient yet."""


class PSGLDState(NamedTuple):
    """Position and the preconditioner's squared-gradient average ``v``."""

    position: Any
    v: Any


class PSGLDInfo(NamedTuple):
    """Diagnostics of one step."""

    step_size: float
    is_divergent: bool


def init(position):
    """Initial state: every entry of ``v`` is ``UNSET``; integer leaves become float64 (:func:`float_position`)."""
    position = float_position(position)
    return PSGLDState(position, type(position)(*(np.full_like(x, UNSET) for x in position)))


def update_average(v, g_bar, alpha):
    """One update of an array of v: g_bar^2 where v is ``UNSET``, else alpha v + (1 - alpha) g_bar^2."""
    square = g_bar * g_bar
    return np.where(v < 0, square, alpha * v + (1.0 - alpha) * square)


def preconditioner(v, sigma):
    """G = 1 / (sigma + sqrt(v)), leaf by leaf (PARAFAC'18 eq. 9); ``UNSET`` entries count as v = 0."""
    return type(v)(*(1.0 / (sigma + np.sqrt(np.maximum(leaf, 0.0))) for leaf in v))


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
        -> (PSGLDState, PSGLDInfo)``; ``step_size`` is a positive finite
        number or one per chain, else ParameterError.
    """
    alpha, sigma = number_within("alpha", alpha, 0.0, 1.0), positive_number("sigma", sigma)

    def kernel(rng, state, model, step_size, subset, temperature=1.0):
        positive_numbers("step_size", step_size)
        flags = nonnegative if nonnegative is not None else getattr(model, "nonnegative", None)
        gradient, mean = tempered_gradient(model, state.position, subset, temperature)
        if mean is None:
            mean = type(state.v)(*(np.zeros_like(leaf) for leaf in state.v))
        v = type(state.v)(*(update_average(leaf, g, alpha) for leaf, g in zip(state.v, mean)))
        G = preconditioner(v, sigma)
        position = langevin_step(rng, state.position, gradient, step_size, preconditioner=G, nonnegative=flags)
        finite = all(bool(np.all(np.isfinite(leaf))) for leaf in position)
        return PSGLDState(position, v), PSGLDInfo(step_size, not finite)

    return kernel
