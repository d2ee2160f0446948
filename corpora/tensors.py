"""Tensors drawn from Poisson PARAFAC with exponential priors at a known rank.

Conventions: factors are :class:`sepsti.core.models.poisson_parafac.ParafacFactors`
``(A, B, C)`` with shapes ``(I, R)``, ``(J, R)``, ``(K, R)`` drawn from
Exp(λ); the data is x_ijk ~ Poisson(Σ_r a_ir b_jr c_kr) (PARAFAC'18 eq. 11).
The dense simulator returns an ``(I, J, K)`` float64 array of counts; the
sparse one a :class:`sepsti.core.sparse_tensor.SparseTensor` and never forms the
dense tensor.

Sparse sampling uses the superposition property of the Poisson: component r
contributes N_r ~ Poisson((Σ_i a_ir)(Σ_j b_jr)(Σ_k c_kr)) events, each at an
index drawn independently per mode with probabilities a_ir / Σ_i a_ir,
b_jr / Σ_j b_jr and c_kr / Σ_k c_kr; the counts are the events per entry.
Cost and memory are linear in the total count, not in I J K; events are told apart
by their row-major linear index, or past 2**63 entries by their rank among the
distinct coordinates (:func:`sepsti.core.sparse_tensor.coalesce`).
"""

import math

import numpy as np

from sepsti.core.checks import integer_at_least, positive_number
from sepsti.core.errors import ParameterError
from sepsti.core.models.poisson_parafac import ParafacFactors, reconstruct
from sepsti.core.sparse_tensor import SparseTensor, coalesce

__all__ = ["FACEBOOK_SHAPE", "simulate_dense", "simulate_sparse", "prior_rate_for_count"]

#: Shape of the Facebook wall-posts tensor (user × user × day) used in PARAFAC'18 Fig. 2c.
FACEBOOK_SHAPE = (42390, 39986, 1506)


def _shape_and_rank(shape, rank):
    shape = tuple(int(n) for n in shape)
    if len(shape) != 3 or any(n < 1 for n in shape):
        raise ParameterError(f"shape={shape} must be three positive sizes")
    return shape, integer_at_least("rank", rank, 1)


def _validate(shape, rank, prior_rate):
    shape, rank = _shape_and_rank(shape, rank)
    rates = np.broadcast_to(np.asarray(prior_rate, dtype=np.float64), (3,)).copy()
    if not np.all(np.isfinite(rates)) or np.any(rates <= 0):
        raise ParameterError(f"prior_rate={prior_rate} must be positive (one value or three)")
    return shape, rank, rates


def _draw_factors(rng, shape, rank, rates):
    return ParafacFactors(*(rng.exponential(1.0 / rate, size=(n, rank)) for n, rate in zip(shape, rates)))


def simulate_dense(shape, rank, *, prior_rate, rng):
    """Draw factors and a dense count tensor from Poisson PARAFAC.

    Parameters
    ----------
    shape : tuple of 3 int
        (I, J, K).
    rank : int
        True rank R.
    prior_rate : float or sequence of 3 floats
        λ of the exponential priors (mean 1/λ).
    rng : numpy.random.Generator

    Returns
    -------
    X : ndarray of float64, shape (I, J, K)
    theta : ParafacFactors
    """
    shape, rank, rates = _validate(shape, rank, prior_rate)
    theta = _draw_factors(rng, shape, rank, rates)
    return rng.poisson(reconstruct(theta)).astype(np.float64), theta


def prior_rate_for_count(shape, rank, expected_count):
    """λ (equal for the three factors) giving E[Σ x] = I J K R / λ³ = ``expected_count``.

    Raises
    ------
    ParameterError
        A shape that is not three positive sizes, a rank that is not a positive integer, an ``expected_count``
        that is not a positive number.
    """
    shape, rank = _shape_and_rank(shape, rank)
    expected_count = positive_number("expected_count", expected_count)
    size = float(np.prod(np.asarray(shape, dtype=np.float64)))
    return float((size * rank / expected_count) ** (1.0 / 3.0))


def simulate_sparse(shape, rank, *, prior_rate, rng, max_count=50_000_000):
    """Draw factors and a sparse count tensor from Poisson PARAFAC without densifying.

    Parameters
    ----------
    shape : tuple of 3 int
        (I, J, K), e.g. :data:`FACEBOOK_SHAPE`.
    rank : int
        True rank R.
    prior_rate : float or sequence of 3 floats
        λ of the exponential priors. :func:`prior_rate_for_count` gives the λ
        for a target number of events.
    rng : numpy.random.Generator
    max_count : int
        Refuse to draw more events than this (memory guard: about 40 bytes per event).

    Returns
    -------
    X : SparseTensor
        Distinct coordinates in row-major order, counts as float64.
    theta : ParafacFactors
    """
    shape, rank, rates = _validate(shape, rank, prior_rate)
    theta = _draw_factors(rng, shape, rank, rates)
    sums = [factor.sum(axis=0) for factor in theta]
    totals = sums[0] * sums[1] * sums[2]
    if totals.sum() > max_count:
        raise ParameterError(
            f"the expected total count {totals.sum():.3g} exceeds max_count={max_count}; "
            f"raise prior_rate (λ={prior_rate_for_count(shape, rank, max_count / 2):.3g} gives about "
            f"{max_count / 2:.3g}) or max_count")
    events = rng.poisson(totals)
    drawn = np.empty((int(events.sum()), 3), dtype=np.int64)
    start = 0
    for r in range(rank):
        n = int(events[r])
        for mode, factor in enumerate(theta):
            cdf = np.cumsum(factor[:, r])
            draws = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
            np.minimum(draws, shape[mode] - 1, out=draws)  # guards u * total rounding onto the last edge
            drawn[start:start + n, mode] = draws
        start += n
    if math.prod(shape) > np.iinfo(np.int64).max:  # no int64 linear index: coalesce ranks the coordinates
        return coalesce(drawn, np.ones(len(drawn)), shape), theta
    unique, counts = np.unique(np.ravel_multi_index(tuple(drawn.T), shape), return_counts=True)
    del drawn
    coords = np.stack(np.unravel_index(unique, shape), axis=1).astype(np.int64)
    return SparseTensor(coords, counts.astype(np.float64), shape), theta
