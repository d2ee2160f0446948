"""MAP estimate of Poisson PARAFAC with exponential priors by multiplicative (EM) updates.

Conventions: as :mod:`sepsti.core.models.poisson_parafac` — data dense ``(I, J, K)``
or sparse, factors :class:`ParafacFactors` ``(A, B, C)`` non-negative.

The update of A (B and C alike, one factor at a time) is the EM / KL
multiplicative rule with the exponential prior in the denominator::

    a_ir ← a_ir · Σ_jk (x_ijk / x̂_ijk) b_jr c_kr / ((Σ_j b_jr)(Σ_k c_kr) + λ_a)

which never decreases the log posterior. The numerator is the positive part of
the model's likelihood gradient, so sparse data is handled by the same
block kernels (nothing is densified).
"""

from typing import NamedTuple

import numpy as np

from sepsti.core.checks import integer_at_least
from sepsti.core.errors import ParameterError
from sepsti.core.models.poisson_parafac import ParafacFactors

__all__ = ["ParafacMAPResult", "poisson_parafac_map"]


class ParafacMAPResult(NamedTuple):
    """Result of :func:`poisson_parafac_map`.

    Attributes
    ----------
    theta : ParafacFactors
    log_posterior : ndarray
        Log-likelihood plus log-prior after each iteration.
    n_iter : int
    """

    theta: ParafacFactors
    log_posterior: np.ndarray
    n_iter: int


def poisson_parafac_map(model, theta, *, max_iter=100, record=True):
    """Run ``max_iter`` multiplicative MAP updates from ``theta`` (not modified).

    Parameters
    ----------
    model : sepsti.core.models.poisson_parafac.PoissonParafac
    theta : ParafacFactors
        Positive starting factors.
    max_iter : int
        Sweeps (each updates A, then B, then C), at least 0.
    record : bool
        Compute the log posterior after each sweep (one more likelihood pass).

    Returns
    -------
    ParafacMAPResult
    """
    max_iter = integer_at_least("max_iter", max_iter, 0)
    factors = [f.copy() for f in model.factors(theta)]
    if not all(np.all(np.isfinite(f) & (f > 0)) for f in factors):
        raise ParameterError("theta must be finite and strictly positive to start multiplicative updates")
    tiny = np.finfo(np.float64).tiny
    history = []
    for _ in range(max_iter):
        for mode in range(3):
            current = ParafacFactors(*factors)
            grad = model.grad_log_likelihood(current)[mode]
            others = [factors[m].sum(axis=0) for m in range(3) if m != mode]
            negative = others[0] * others[1]
            positive = np.maximum(grad + negative, 0.0)
            factors[mode] *= positive / (negative + model.prior_rates[mode])
            np.maximum(factors[mode], tiny, out=factors[mode])
        if record:
            current = ParafacFactors(*factors)
            history.append(model.log_likelihood(current) + model.log_prior(current))
    return ParafacMAPResult(ParafacFactors(*factors), np.asarray(history), max_iter)
