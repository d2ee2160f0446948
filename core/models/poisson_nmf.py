"""Poisson NMF with exponential priors (ICASSP'16 eq. 13).

Conventions
-----------
X is (n_rows, n_cols) and non-negative (real-valued magnitudes allowed);
``theta`` is a :class:`NMFTheta` with W (n_rows, rank) and H (rank, n_cols),
both non-negative. A ``subset`` is ``None`` (all of X) or a sequence of
blocks ``(row_slice, col_slice)``; sums run over the union of the blocks,
unscaled (the N/N_s scaling lives in :mod:`sepsti.core.models.subsample`).

    W_ir ~ Exp(rate_W),  H_rj ~ Exp(rate_H),
    log p(X_ij | W, H) = X_ij log (WH)_ij - (WH)_ij - lgamma(X_ij + 1).
"""

import numbers
from typing import NamedTuple

import numpy as np
from scipy.special import gammaln, xlogy

from sepsti.core.checks import positive_number
from sepsti.core.errors import ParameterError

__all__ = ["MATCHED", "NMFTheta", "PoissonNMF", "prior_rate_at", "validate_nonnegative_matrix", "validate_prior_rate"]

#: The prior rate that follows the data and the rank (:func:`prior_rate_at`).
MATCHED = "matched"


class NMFTheta(NamedTuple):
    """Position of an NMF model: W (n_rows, rank) and H (rank, n_cols)."""

    W: np.ndarray
    H: np.ndarray


def validate_nonnegative_matrix(X, name="X", dtype=None):
    """Return ``X`` as a finite, non-negative 2-d float array, or raise ParameterError."""
    X = np.asarray(X)
    if np.iscomplexobj(X):
        raise ParameterError(f"{name} is complex (an STFT?): expected its magnitudes")
    if dtype is None:
        dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
    X = X.astype(dtype, copy=False)
    if X.ndim != 2 or X.size == 0:
        raise ParameterError(f"{name} has shape {X.shape}: expected a non-empty 2-d array")
    if not np.all(np.isfinite(X)):
        raise ParameterError(f"{name} contains NaN or infinite values")
    if X.min() < 0:
        raise ParameterError(f"{name} has minimum {X.min()}: entries must be non-negative")
    return X


#: The rates whose square (the scale of the prior's curvature and of R / lambda^2) is a normal float64.
RATE_RANGE = (float(np.sqrt(np.finfo(np.float64).tiny)), float(np.sqrt(np.finfo(np.float64).max)))


def validate_prior_rate(prior_rate):
    """Return a positive float rate within :data:`RATE_RANGE`, or :data:`MATCHED`; raise ParameterError otherwise.

    A rate whose square overflows (1e200) made the reference path's moments NaN, after NumPy's warnings.
    """
    if isinstance(prior_rate, str):
        if prior_rate == MATCHED:
            return prior_rate
    elif isinstance(prior_rate, (int, float, np.integer, np.floating)) and not isinstance(prior_rate, bool):
        if np.isfinite(prior_rate) and prior_rate > 0:
            if not RATE_RANGE[0] <= prior_rate <= RATE_RANGE[1]:
                raise ParameterError(f"prior_rate={prior_rate!r}: its square is beyond float64's range; expected a "
                                     f"rate between {RATE_RANGE[0]:.2g} and {RATE_RANGE[1]:.2g}, or {MATCHED!r}")
            return float(prior_rate)
    raise ParameterError(f"prior_rate={prior_rate!r}: expected a positive number or {MATCHED!r}")


def prior_rate_at(prior_rate, data_mean, rank):
    """The rate of the Exp priors on W and H at ``rank``.

    A number is returned as it is. :data:`MATCHED` gives lambda = sqrt(R / mean(X)),
    the rate at which the prior predictive mean of every entry of W H,
    R / lambda^2, equals the data's mean: the prior sits on the data's scale
    at every rank, instead of a fixed rate whose width relative to the data
    depends on their units and charges every parameter an Occam factor for
    that mismatch (``docs/rank_selection.md``).

    Parameters
    ----------
    prior_rate : float or "matched"
    data_mean : float
        Mean of X (only used for "matched").
    rank : int
    """
    if prior_rate == MATCHED:
        return float(np.sqrt(rank / max(float(data_mean), np.finfo(np.float64).tiny)))
    return float(prior_rate)


class PoissonNMF:
    """Poisson likelihood on WH with independent exponential priors on W and H.

    Parameters
    ----------
    X : array_like, shape (n_rows, n_cols)
        Non-negative data; float32 input stays float32.
    rank : int
        Number of components R.
    rate_W, rate_H : float
        Rates of the exponential priors (mean 1/rate).

    References
    ----------
    ICASSP'16 eq. 13; Cemgil (2009), Bayesian inference in NMF models.
    """

    nonnegative = (True, True)

    def __init__(self, X, rank, *, rate_W=1.0, rate_H=1.0):
        X = validate_nonnegative_matrix(X)
        if not (isinstance(rank, numbers.Real) and float(rank).is_integer() and rank >= 1):
            raise ParameterError(f"rank={rank} must be a positive integer")
        positive_number("rate_W", rate_W), positive_number("rate_H", rate_H)
        self.X = X
        self.rank = int(rank)
        self.rate_W = float(rate_W)
        self.rate_H = float(rate_H)
        self.n_data = X.size
        self.log_factorial = gammaln(X.astype(np.float64) + 1.0)

    @property
    def dtype(self):
        return self.X.dtype

    def _blocks(self, subset):
        return ((slice(None), slice(None)),) if subset is None else subset

    def subset_size(self, subset):
        """Number of entries of X in ``subset``."""
        if subset is None:
            return self.n_data
        return sum(self.X[rows, cols].size for rows, cols in subset)

    def factors(self, theta):
        """θ's (W, H), checked against the data: W (n_rows, R) and H (R, n_cols) of one R.

        Any R is accepted, as :meth:`sepsti.core.models.poisson_parafac.PoissonParafac.factors` does.
        """
        W, H = theta
        shapes = [np.shape(W), np.shape(H)]
        n_rows, n_cols = self.X.shape
        if len(shapes[0]) != 2 or len(shapes[1]) != 2 or shapes[0][0] != n_rows or shapes[1] != (shapes[0][1], n_cols):
            raise ParameterError(f"W, H of shapes {shapes[0]}, {shapes[1]}: expected (n_rows, R), (R, n_cols) of one R "
                                 f"for data of shape {self.X.shape}")
        return W, H

    def log_likelihood(self, theta, subset=None):
        """Sum of log p(X_ij | W, H) over ``subset``."""
        W, H = self.factors(theta)
        total = 0.0
        for rows, cols in self._blocks(subset):
            rate = (W[rows] @ H[:, cols]).astype(np.float64)
            x = self.X[rows, cols].astype(np.float64)
            total += float(np.sum(xlogy(x, rate) - rate - self.log_factorial[rows, cols]))
        return total

    def log_likelihood_and_grad(self, theta, subset=None):
        """:meth:`log_likelihood` and its gradient with respect to (W, H)."""
        W, H = self.factors(theta)
        grad_W = np.zeros_like(W)
        grad_H = np.zeros_like(H)
        total = 0.0
        for rows, cols in self._blocks(subset):
            rate = W[rows] @ H[:, cols]
            x = self.X[rows, cols]
            total += float(np.sum(xlogy(x.astype(np.float64), rate) - rate - self.log_factorial[rows, cols]))
            # x = 0 contributes -rate whatever the rate, so its ratio is 0 even where rate underflows
            ratio = np.divide(x, rate, out=np.zeros_like(rate), where=x != 0) - 1.0
            grad_W[rows] += ratio @ H[:, cols].T
            grad_H[:, cols] += W[rows].T @ ratio
        return total, NMFTheta(grad_W, grad_H)

    def grad_log_likelihood(self, theta, subset=None):
        """Gradient of :meth:`log_likelihood` with respect to (W, H)."""
        return self.log_likelihood_and_grad(theta, subset)[1]

    def log_prior(self, theta):
        """log p(W) + log p(H) (exponential densities on the non-negative orthant); −inf if any entry is negative."""
        W, H = self.factors(theta)
        if np.any(W < 0) or np.any(H < 0):
            return -np.inf
        return (W.size * np.log(self.rate_W) - self.rate_W * float(W.sum())
                + H.size * np.log(self.rate_H) - self.rate_H * float(H.sum()))

    def grad_log_prior(self, theta):
        """Gradient of :meth:`log_prior`: the constants -rate_W and -rate_H."""
        W, H = theta
        return NMFTheta(np.full_like(W, -self.rate_W), np.full_like(H, -self.rate_H))

    def sample_prior(self, rng):
        """One draw of (W, H) from the prior, in the data's dtype."""
        W = rng.exponential(1.0 / self.rate_W, size=(self.X.shape[0], self.rank)).astype(self.dtype)
        H = rng.exponential(1.0 / self.rate_H, size=(self.rank, self.X.shape[1])).astype(self.dtype)
        return NMFTheta(W, H)

    @staticmethod
    def sample(rng, shape, rank, *, rate_W=1.0, rate_H=1.0):
        """Draw (W, H, X) from the generative model; X is integer-valued float64."""
        W = rng.exponential(1.0 / rate_W, size=(shape[0], rank))
        H = rng.exponential(1.0 / rate_H, size=(rank, shape[1]))
        return W, H, rng.poisson(W @ H).astype(np.float64)
