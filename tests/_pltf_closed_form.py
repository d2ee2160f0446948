"""Exact evidence and posterior means of a tiny PLTF model, by enumerating the sources.

The model is ``"k,kj->j"`` with two latent components: ``X(j) = sum_k w_k H_kj``,
``w_k ~ Gamma(a_w[k], b_w[k])`` (or fixed), ``H_kj ~ Gamma(a_h, b_h)``. Given the
sources ``S(j, k)`` the factors are independent per component k, ``H`` integrates
out in closed form and ``w_k`` by a trapezoid rule on ``log w`` (exponentially
accurate for this smooth, decaying integrand), so ``p(X) = sum_S prod_k p(S_k)``.
"""

import itertools

import numpy as np
from scipy.special import gammaln, logsumexp

__all__ = ["TinyModel", "three_factor_log_evidence"]


class TinyModel:
    """Exact quantities for ``X(j) = sum_k w_k H_kj`` with ``K = 2`` components."""

    def __init__(self, x, a_w, b_w, a_h, b_h, w_fixed=None):
        self.x = np.asarray(x, dtype=np.int64)
        self.a_w, self.b_w = np.asarray(a_w, float), np.asarray(b_w, float)
        self.a_h, self.b_h, self.w_fixed = float(a_h), float(b_h), w_fixed
        self.y = np.linspace(-25.0, 12.0, 6001)
        self.splits = np.array(list(itertools.product(*[np.arange(v + 1) for v in self.x])), dtype=np.int64)
        parts = [self._component(self.splits, 0), self._component(self.x[None, :] - self.splits, 1)]
        self.log_weights = parts[0][0] + parts[1][0]
        self.log_evidence = float(logsumexp(self.log_weights))
        post = np.exp(self.log_weights - self.log_evidence)
        self.posterior_w = np.array([post @ parts[k][1] for k in range(2)])
        sources = [self.splits, self.x[None, :] - self.splits]
        self.posterior_H = np.array([post @ ((self.a_h + sources[k]) / (self.b_h + parts[k][1])[:, None])
                                     if w_fixed is not None else
                                     post @ self._h_mean(sources[k], k) for k in range(2)])

    def _log_integrand(self, s, k):
        w = np.exp(self.y)
        log_prior = self.a_w[k] * np.log(self.b_w[k]) - gammaln(self.a_w[k]) + self.a_w[k] * self.y - self.b_w[k] * w
        return (log_prior[None, :] + s.sum(1)[:, None] * self.y[None, :]
                - np.sum((self.a_h + s)[:, :, None] * np.log(self.b_h + w)[None, None, :], axis=1))

    def _component(self, s, k):
        """log p(S_k = s) and E[w_k | S_k = s] for each row of s."""
        const = np.sum(gammaln(self.a_h + s) - gammaln(self.a_h) - gammaln(s + 1) + self.a_h * np.log(self.b_h), axis=1)
        if self.w_fixed is not None:
            wk = self.w_fixed[k]
            log_p = const + s.sum(1) * np.log(wk) - np.sum((self.a_h + s) * np.log(self.b_h + wk), axis=1)
            return log_p, np.full(len(s), wk)
        g = self._log_integrand(s, k)
        dy = self.y[1] - self.y[0]
        log_norm = logsumexp(g, axis=1)
        mean_w = np.exp(logsumexp(g + self.y[None, :], axis=1) - log_norm)
        return const + log_norm + np.log(dy), mean_w

    def _h_mean(self, s, k):
        """E[H_kj | S_k = s] = E[(a_h + s_j) / (b_h + w_k) | S_k]."""
        g = self._log_integrand(s, k)
        w = np.exp(self.y)
        inv = np.exp(logsumexp(g - np.log(self.b_h + w)[None, :], axis=1) - logsumexp(g, axis=1))
        return (self.a_h + s) * inv[:, None]


def three_factor_log_evidence(x, a_1, b_1, a_2, b_2, a_h, b_h):
    """Exact log p(X) of ``"k,k,kj->j"`` with two components: ``X(j) = sum_k u_k v_k H_kj``.

    ``u_k ~ Gamma(a_1[k], b_1[k])``, ``v_k ~ Gamma(a_2[k], b_2[k])``, ``H_kj ~ Gamma(a_h, b_h)``. Given
    the sources only the product ``w_k = u_k v_k`` matters; the density of ``log w_k`` is the
    convolution of the two log-Gamma densities, computed on a uniform grid.
    """
    x = np.asarray(x, dtype=np.int64)
    y = np.linspace(-25.0, 12.0, 4001)
    dy = y[1] - y[0]
    splits = np.array(list(itertools.product(*[np.arange(v + 1) for v in x])), dtype=np.int64)

    def log_density_of_log_gamma(a, b):
        return a * np.log(b) - gammaln(a) + a * y - b * np.exp(y)

    def component(s, k):
        p1 = np.exp(log_density_of_log_gamma(a_1[k], b_1[k]))
        p2 = np.exp(log_density_of_log_gamma(a_2[k], b_2[k]))
        density = np.convolve(p1, p2) * dy                      # density of log w on 2 y[0] + i dy
        grid = 2 * y[0] + dy * np.arange(density.size)
        keep = density > 0
        log_prior, grid = np.log(density[keep]), grid[keep]
        const = np.sum(gammaln(a_h + s) - gammaln(a_h) - gammaln(s + 1) + a_h * np.log(b_h), axis=1)
        g = (log_prior[None, :] + s.sum(1)[:, None] * grid[None, :]
             - np.sum((a_h + s)[:, :, None] * np.log(b_h + np.exp(grid))[None, None, :], axis=1))
        return const + logsumexp(g, axis=1) + np.log(dy)

    return float(logsumexp(component(splits, 0) + component(x[None, :] - splits, 1)))
