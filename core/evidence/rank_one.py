"""Exact log marginal likelihood of rank-1 Poisson NMF with exponential priors.

With X ~ Poisson(w h^T), w_i, h_j ~ Exp(rate), the w_i integrate out in
closed form given h (Gamma conjugacy), and h = S pi with S = sum(h) and pi
on the simplex leaves a Dirichlet integral and one integral over S:

    p(X) = rate^(I+J) prod_i n_i! prod_j m_j! / (prod_ij x_ij! Gamma(M + J))
           * int_0^inf S^(M+J-1) exp(-rate S) (rate + S)^-(M+I) dS

(n, m the row and column sums of X, M their total), computed here by
quadrature in log S. A reference for evidence estimators: any estimate at
R = 1 can be checked against it to quadrature accuracy.
"""

import numpy as np

from sepsti.core.checks import positive_number
from sepsti.core.models.poisson_nmf import validate_nonnegative_matrix

__all__ = ["rank_one_log_evidence"]


def rank_one_log_evidence(X, rate):
    """log p(X | R = 1) of Poisson NMF with Exp(``rate``) priors on both factors.

    Parameters
    ----------
    X : array_like, shape (I, J)
        Non-negative data (the Poisson density with the lgamma(x + 1) normaliser).
    rate : float
        Rate of the exponential priors on w and h: finite and positive.

    Returns
    -------
    float
    """
    from scipy import integrate, optimize
    from scipy.special import gammaln

    X = validate_nonnegative_matrix(X).astype(np.float64)
    rate = positive_number("rate", rate)
    rows, columns = X.shape
    total = X.sum()

    def log_integrand(log_s):  # the S integral in u = log S (Jacobian S)
        return (total + columns) * log_s - rate * np.exp(log_s) - (total + rows) * np.logaddexp(np.log(rate), log_s)

    with np.errstate(over="ignore"):  # the bracket search may try u beyond 709 (a mode near -log rate)
        mode = optimize.minimize_scalar(lambda u: -log_integrand(u), bracket=(-5.0, 5.0)).x
    peak = log_integrand(mode)

    log_denominator = np.logaddexp(np.log(rate), mode)

    def drop(u):  # log_integrand(u) - peak without cancellation between terms of size ~M
        change = np.exp(mode) * np.expm1(u - mode)
        ratio = change / (rate + np.exp(mode))  # (rate + e^u) / (rate + e^mode) - 1
        # log1p is exact near the mode; far below it, with rate << e^mode, rate + e^mode rounds to e^mode and
        # log1p(-1) would be -inf: there the difference of the logarithms themselves
        log_ratio = np.log1p(ratio) if ratio > -0.5 else np.logaddexp(np.log(rate), u) - log_denominator
        return (total + columns) * (u - mode) - rate * change - (total + rows) * log_ratio

    # log-concave in u: integrate between the points where it has fallen by 60 below its peak
    ends = []
    for direction in (-1.0, 1.0):
        step = 1e-3
        while drop(mode + direction * step) > -60.0:
            step *= 2.0
        ends.append(optimize.brentq(lambda u: drop(u) + 60.0, mode, mode + direction * step))
    value, _ = integrate.quad(lambda u: np.exp(drop(u)), ends[0], ends[1], points=[mode], limit=200)
    return float((rows + columns) * np.log(rate) + gammaln(X.sum(axis=1) + 1.0).sum()
                 + gammaln(X.sum(axis=0) + 1.0).sum() - gammaln(X + 1.0).sum() - gammaln(total + columns)
                 + peak + np.log(value))
