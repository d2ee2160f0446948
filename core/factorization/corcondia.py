"""Core consistency diagnostic (CORCONDIA) for choosing a PARAFAC rank.

Conventions: ``X`` is a dense three-way array ``(I, J, K)``. For each rank R a
least-squares CP model is fitted with TensorLy (best of several random
starts); with the CP factors (weights absorbed into the first) fixed, the
least-squares Tucker core is ``G = X ×₁ A⁺ ×₂ B⁺ ×₃ C⁺`` and the consistency is

    CC = 100 (1 − Σ_pqr (g_pqr − t_pqr)² / R),

with ``T`` the R × R × R superdiagonal identity (Bro & Kiers 2003). A
consistency near 100 says the CP structure is appropriate; it drops (often
below zero) when R exceeds the rank the data supports. This is the classical
heuristic the Bayesian evidence (:mod:`sepsti.core.evidence`) is compared with.

TensorLy is an optional dependency, imported inside the functions. A best fit that stopped at
``max_iter`` before its error changed by less than ``tol`` is reported: ``converged`` in the
result, and a :class:`sepsti.core.errors.ConvergenceWarning` (its consistency is unreliable).

References
----------
R. Bro and H. A. L. Kiers, "A new efficient method for determining the number
of components in PARAFAC models", J. Chemometrics 17(5), 2003.
"""

import warnings
from typing import NamedTuple

import numpy as np

from sepsti.core.checks import distinct_ranks, finite_number, integer_at_least, real_array
from sepsti.core.errors import ConvergenceWarning, ParameterError
from sepsti.core.random import validate_seed

__all__ = ["CorcondiaResult", "core_consistency", "corcondia"]


class CorcondiaResult(NamedTuple):
    """Core consistency per rank.

    Attributes
    ----------
    ranks : ndarray of int
    consistency : ndarray of float
        CC in percent for each rank.
    relative_error : ndarray of float
        ‖X − X̂‖ / ‖X‖ of the best CP fit at each rank.
    selected_rank : int
        The largest rank whose consistency is at least ``threshold`` (the
        usual reading of the diagnostic); the smallest rank tried when none is.
    converged : ndarray of bool
        Whether the best fit at each rank met ``tol`` within ``max_iter`` iterations.
    """

    ranks: np.ndarray
    consistency: np.ndarray
    relative_error: np.ndarray
    selected_rank: int
    converged: np.ndarray


def _validate_tensor(X):
    X = real_array("X", X)  # complex values were cast to their real part, strings read as numbers
    if X.ndim != 3 or X.size == 0:
        raise ParameterError(f"X has shape {X.shape}: expected a non-empty three-way array")
    if not np.all(np.isfinite(X)):
        raise ParameterError("X contains NaN or infinite values")
    return X


def core_consistency(X, factors):
    """Core consistency (percent) of CP factors ``(A, B, C)`` for the dense tensor ``X``.

    Parameters
    ----------
    X : ndarray, shape (I, J, K)
    factors : sequence of 3 ndarray, shapes (I, R), (J, R), (K, R)
        CP factors with any component weights absorbed.

    Returns
    -------
    float
    """
    X = _validate_tensor(X)
    factors = [np.asarray(f, dtype=np.float64) for f in factors]
    rank = factors[0].shape[1] if factors and factors[0].ndim == 2 else None
    if [f.shape for f in factors] != [(n, rank) for n in X.shape]:  # two factors met an unpacking ValueError
        raise ParameterError(f"factors of shapes {[f.shape for f in factors]}: expected (I, R), (J, R), (K, R) "
                             f"of one R for data of shape {X.shape}")
    A, B, C = factors
    core = np.einsum("ijk,pi,qj,rk->pqr", X, np.linalg.pinv(A), np.linalg.pinv(B), np.linalg.pinv(C),
                     optimize=True)
    target = np.zeros((rank,) * 3)
    target[np.arange(rank), np.arange(rank), np.arange(rank)] = 1.0
    return float(100.0 * (1.0 - np.sum((core - target) ** 2) / rank))


def corcondia(X, ranks, *, num_starts=5, max_iter=1000, tol=1e-10, seed=0, threshold=90.0):
    """Fit CP models at each rank and return their core consistency.

    Parameters
    ----------
    X : ndarray, shape (I, J, K)
        Dense data.
    ranks : iterable of int
        Ranks to try.
    num_starts : int
        Random starts per rank, at least 1; the fit with the lowest error is kept.
    max_iter : int
        ALS iterations per start, at least 1.
    tol : float
        ALS tolerance on the relative change of the error, finite and >= 0.
    seed : int
        Start ``s`` of rank ``R`` uses ``random_state = SeedSequence([seed, R, s])``; in [0, 2**32).
    threshold : float
        Consistency (percent) that counts as "appropriate" for the selection, a finite number.

    Returns
    -------
    CorcondiaResult

    Raises
    ------
    ParameterError
        On data that are not a finite real three-way array or are all zeros, ranks that are not distinct
        positive integers, or settings outside the ranges above (``max_iter`` of 0 fitted nothing).

    Warns
    -----
    ConvergenceWarning
        Once, naming the ranks whose best fit stopped at ``max_iter`` before meeting ``tol``.
    """
    import tensorly as tl
    from tensorly.decomposition import parafac

    X = _validate_tensor(X)
    ranks = np.asarray(distinct_ranks(ranks), dtype=np.int64)
    if not np.any(X):
        raise ParameterError("X is all zeros: no CP model to fit")
    num_starts = integer_at_least("num_starts", num_starts, 1)
    max_iter = integer_at_least("max_iter", max_iter, 1)
    if not finite_number("tol", tol) >= 0:
        raise ParameterError(f"tol={tol!r} must be a finite number >= 0")
    seed = validate_seed(seed)
    threshold = finite_number("threshold", threshold)
    norm = np.linalg.norm(X)
    consistency, errors, converged = [], [], []
    tensor = tl.tensor(X)
    for rank in ranks:
        best = None
        for start in range(num_starts):
            state = np.random.RandomState(np.random.SeedSequence([seed, int(rank), start]).generate_state(1))
            cp, trace = parafac(tensor, rank=int(rank), init="random", n_iter_max=max_iter, tol=tol,
                                random_state=state, normalize_factors=False, return_errors=True)
            weights, (A, B, C) = cp
            A = np.asarray(A) * np.asarray(weights)[None, :]
            factors = (A, np.asarray(B), np.asarray(C))
            error = np.linalg.norm(X - np.einsum("ir,jr,kr->ijk", *factors)) / norm
            if best is None or error < best[0]:
                # TensorLy stops early exactly when the error changed by less than tol
                best = (error, factors, len(trace) >= 2 and abs(trace[-2] - trace[-1]) < tol)
        errors.append(best[0])
        consistency.append(core_consistency(X, best[1]))
        converged.append(best[2])
    consistency, converged = np.asarray(consistency), np.asarray(converged, dtype=bool)
    if not converged.all():
        stopped = ranks[~converged]
        warnings.warn(f"corcondia: the best fit at rank{'s' * (stopped.size > 1)} {', '.join(map(str, stopped))} "
                      f"stopped at max_iter={max_iter} before its error changed by less than tol={tol:g}; its "
                      "consistency is unreliable: raise max_iter", ConvergenceWarning, stacklevel=2)
    good = ranks[consistency >= threshold]
    selected = int(good.max()) if good.size else int(ranks.min())
    return CorcondiaResult(ranks, consistency, np.asarray(errors), selected, converged)
