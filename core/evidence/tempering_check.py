"""A necessary condition on thermodynamic-integration output: E_t[log p(x | θ)] rises with t.

The derivative of E_t[log p(x | θ)] in t is the variance of log p(x | θ) under
the power posterior p_t, so the expectations of chains that sample their
power posteriors never decrease from one temperature to the next. A
decrease larger than Monte-Carlo error shows chains that have not reached
their power posteriors (too few iterations or too small steps for the
distance from their start), and then the estimate is not a log marginal
likelihood whatever its standard error says.

Arrays are indexed by temperature, t_0 = 0 < ... < t_T = 1.
"""

import numpy as np

from sepsti.core.errors import ParameterError

__all__ = ["largest_decrease"]


def largest_decrease(mean_log_likelihood, mcse):
    """The largest fall of E_t[log p] between neighbouring temperatures, in joint standard errors.

    Parameters
    ----------
    mean_log_likelihood : array_like, shape (T + 1,)
        Finite estimates of E_t[log p(x | θ)] on an increasing temperature grid (diverged chains have no
        expectations to compare: the engine reports them by their non-finite estimate instead).
    mcse : array_like, shape (T + 1,)
        Their Monte-Carlo standard errors: finite, not negative.

    Returns
    -------
    float
        max over i of (E_{t_i} − E_{t_{i+1}}) / sqrt(se_i² + se_{i+1}²); negative when the
        expectations rise everywhere. Values above about 3 mean the chains did not equilibrate.
    """
    mean = np.asarray(mean_log_likelihood, dtype=np.float64)
    se = np.asarray(mcse, dtype=np.float64)
    if mean.shape != se.shape or mean.ndim != 1 or mean.size < 2:
        raise ParameterError(f"expected two equal 1-D arrays of at least 2 temperatures, got {mean.shape}, {se.shape}")
    bad = np.flatnonzero(~np.isfinite(mean))
    if bad.size:
        raise ParameterError(f"mean_log_likelihood is {mean[bad].tolist()} at temperature indices {bad.tolist()}: "
                             "expected finite values")
    bad = np.flatnonzero(~(np.isfinite(se) & (se >= 0)))
    if bad.size:
        raise ParameterError(f"mcse is {se[bad].tolist()} at temperature indices {bad.tolist()}: expected finite "
                             "values of at least 0")
    joint = np.sqrt(se[:-1] ** 2 + se[1:] ** 2)
    drop = mean[:-1] - mean[1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.where(joint > 0, drop / joint, np.where(drop > 0, np.inf, -np.inf))
    return float(np.max(scaled))
