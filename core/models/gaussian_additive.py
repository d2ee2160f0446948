"""The Gaussian additive model of ICASSP'16 §4.1.1, with its exact evidence.

Conventions
-----------
``theta`` is a :class:`GaussianAdditiveTheta` holding ``theta`` of shape
``(rank,)``; the data ``x`` has shape ``(n_data,)``. A ``subset`` is ``None``
(all data) or an integer index array into ``x``. Likelihood sums are over the
subset, unscaled: the N/N_s scaling lives in :mod:`sepsti.core.models.subsample`.

The model is *batched*: every method also takes ``theta`` of shape
``(chains, rank)`` with a ``subset`` of shape ``(chains, N_s)`` (or ``None``),
and then returns one value (or gradient row) per chain, so that many chains
run in lockstep as array operations.

    theta_r ~ N(mu, sigma_theta^2),   x_n | theta ~ N(sum_r theta_r, sigma_x^2).

Only the sum of ``theta`` is identified by the data.
"""

from typing import NamedTuple

import numpy as np

from sepsti.core.checks import finite_number, integer_at_least, positive_number, real_array
from sepsti.core.errors import ParameterError
from sepsti.core.models.subsample import index_subset

__all__ = ["GaussianAdditiveTheta", "GaussianAdditiveModel"]

_LOG_2PI = np.log(2.0 * np.pi)


class GaussianAdditiveTheta(NamedTuple):
    """Position of the Gaussian additive model: ``theta`` of shape (rank,)."""

    theta: np.ndarray


class GaussianAdditiveModel:
    """x_n ~ N(sum(theta), sigma_x^2) with i.i.d. N(mu, sigma_theta^2) components.

    Parameters
    ----------
    x : array_like, shape (n_data,)
        Observations.
    rank : int
        Number of latent components R.
    mu : float
        Prior mean of each component.
    sigma2_theta : float
        Prior variance of each component.
    sigma2_x : float
        Observation noise variance.

    Raises
    ------
    ParameterError
        On observations that are not a non-empty finite real 1-d array, a rank that is not a positive
        integer, a mean that is not finite or a variance that is not positive and finite.

    References
    ----------
    ICASSP'16 eq. 12.
    """

    nonnegative = (False,)
    batched = True

    def __init__(self, x, rank, *, mu=5.0, sigma2_theta=3.0, sigma2_x=5.0):
        x = real_array("x", x)  # complex values were cast to their real part, strings read as numbers
        if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
            raise ParameterError(f"x has shape {x.shape}: expected a non-empty finite 1-d array")
        for name, value in (("sigma2_theta", sigma2_theta), ("sigma2_x", sigma2_x)):
            positive_number(name, value)
        self.x = x
        self.rank = integer_at_least("rank", rank, 1)  # NaN and inf met a bare ValueError or OverflowError
        self.mu = finite_number("mu", mu)
        self.sigma2_theta = float(sigma2_theta)
        self.sigma2_x = float(sigma2_x)
        self.n_data = x.size

    @staticmethod
    def sample(rng, n_data, rank, *, mu=5.0, sigma2_theta=3.0, sigma2_x=5.0):
        """Draw ``(theta, x)`` from the generative model."""
        theta = mu + np.sqrt(sigma2_theta) * rng.standard_normal(rank)
        x = theta.sum() + np.sqrt(sigma2_x) * rng.standard_normal(n_data)
        return theta, x

    def subset_size(self, subset):
        """Number of observations in ``subset``."""
        return self.n_data if subset is None else np.shape(index_subset(subset))[-1]

    def _residual(self, theta, subset):
        x = self.x if subset is None else self.x[index_subset(subset)]
        return x - theta.theta.sum(axis=-1)[..., None]

    def _value(self, residual):
        n = residual.shape[-1]
        return -0.5 * (n * (_LOG_2PI + np.log(self.sigma2_x)) + np.einsum("...n,...n->...", residual, residual)
                       / self.sigma2_x)

    def _gradient(self, theta, residual):
        g = residual.sum(axis=-1) / self.sigma2_x
        return GaussianAdditiveTheta(np.broadcast_to(np.asarray(g)[..., None], theta.theta.shape).copy())

    def log_likelihood(self, theta, subset=None):
        """Sum of log p(x_n | theta) over ``subset`` (one value per chain when batched)."""
        return self._value(self._residual(theta, subset))

    def grad_log_likelihood(self, theta, subset=None):
        """Gradient of :meth:`log_likelihood` with respect to ``theta``."""
        return self._gradient(theta, self._residual(theta, subset))

    def log_likelihood_and_grad(self, theta, subset=None):
        """Both :meth:`log_likelihood` and its gradient, from one residual."""
        residual = self._residual(theta, subset)
        return self._value(residual), self._gradient(theta, residual)

    def log_prior(self, theta):
        """log p(theta)."""
        d = theta.theta - self.mu
        return -0.5 * (self.rank * (_LOG_2PI + np.log(self.sigma2_theta)) + (d * d).sum(axis=-1) / self.sigma2_theta)

    def grad_log_prior(self, theta):
        """Gradient of :meth:`log_prior`."""
        return GaussianAdditiveTheta(-(theta.theta - self.mu) / self.sigma2_theta)

    def sample_prior(self, rng):
        """One draw from the prior."""
        return GaussianAdditiveTheta(self.mu + np.sqrt(self.sigma2_theta) * rng.standard_normal(self.rank))

    def log_marginal_likelihood(self):
        """Exact log p(x) in O(N).

        x ~ N(R mu 1, sigma_x^2 I + R sigma_theta^2 1 1^T): the determinant by
        the matrix determinant lemma, the quadratic form by Sherman-Morrison.
        """
        n, a, s2 = self.n_data, self.rank * self.sigma2_theta, self.sigma2_x
        d = self.x - self.rank * self.mu
        log_det = n * np.log(s2) + np.log1p(n * a / s2)
        total = d.sum()
        quad = (d @ d - a * total * total / (s2 + n * a)) / s2
        return -0.5 * (n * _LOG_2PI + log_det + quad)

    def expected_log_likelihood(self, temperature):
        """Exact E[log p(x | theta)] under the power posterior p(theta) p(x | theta)^t.

        The sum s = sum(theta) is Gaussian under every power posterior, so the
        thermodynamic integrand is available in closed form; used to separate
        the quadrature error of a temperature grid from Monte-Carlo error.
        """
        t = np.asarray(temperature, dtype=np.float64)
        n, a, s2 = self.n_data, self.rank * self.sigma2_theta, self.sigma2_x
        precision = 1.0 / a + t * n / s2
        mean = (self.rank * self.mu / a + t * self.x.sum() / s2) / precision
        variance = 1.0 / precision
        xbar = self.x.mean()
        sq = ((self.x - xbar) ** 2).sum() + n * ((mean - xbar) ** 2 + variance)
        return -0.5 * (n * (_LOG_2PI + np.log(s2)) + sq / s2)
