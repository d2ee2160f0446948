"""MAP estimation of NMF-GPP by L-BFGS on the latent (δ, η).

Conventions: the model is :class:`sepsti.core.models.nmf_gpp.NMFGPP`; ``theta`` is
its flat latent vector (δ then η); the returned factors ``D`` (K, M) and
``H`` (M, L) are non-negative. This is the direct optimisation of eq. 19 that
Schmidt & Laurberg use and the NUTS paper starts its sampler from.
"""

import numbers
from typing import NamedTuple
import warnings

import numpy as np
from scipy import optimize

from sepsti.core.checks import integer_at_least, real_array
from sepsti.core.errors import ConvergenceWarning, ParameterError
from sepsti.core.blas import single_threaded_blas
from sepsti.core.random import stream

__all__ = ["MAPResult", "initialize_nmf_gpp", "map_nmf_gpp"]


class MAPResult(NamedTuple):
    """The MAP estimate.

    Attributes
    ----------
    theta : ndarray, shape (dim,)
    D : ndarray, shape (K, M)
    H : ndarray, shape (M, L)
    log_posterior : float
        Unnormalised log posterior (eq. 19) at ``theta``.
    n_iter : int
        L-BFGS iterations of the best start.
    converged : bool
    history : list of float
        Final log posterior of every start.
    """

    theta: np.ndarray
    D: np.ndarray
    H: np.ndarray
    log_posterior: float
    n_iter: int
    converged: bool
    history: list


def initialize_nmf_gpp(model, rng, *, method="nmf", num_iter=200):
    """A starting θ.

    Parameters
    ----------
    model : NMFGPP
    rng : numpy.random.Generator
    method : {"nmf", "prior"}
        "nmf": least-squares NMF (Lee–Seung multiplicative updates from a
        random start) of max(X, 0), mapped to θ through the link;
        "prior": a draw of θ ~ N(0, I) scaled by 0.1.
    num_iter : int
        Multiplicative updates for "nmf", at least 0.

    Returns
    -------
    ndarray, shape (dim,)

    Raises
    ------
    ParameterError
        On an unknown method, a negative or non-integer ``num_iter``, or an ``rng`` that is not a Generator.
    """
    num_iter = integer_at_least("num_iter", num_iter, 0)  # -1 ran no update, 2.5 met a TypeError
    if not isinstance(rng, np.random.Generator):  # a seed met an AttributeError
        raise ParameterError(f"rng={rng!r}: expected a numpy.random.Generator (sepsti.core.random.stream(seed))")
    if method == "prior":
        return 0.1 * rng.standard_normal(model.dim)
    if method != "nmf":
        raise ParameterError(f"method={method!r}: expected 'nmf' or 'prior'")
    X = np.maximum(model.X, 0.0)
    num = model.num_components
    tiny = np.finfo(float).eps
    W = rng.uniform(0.1, 1.0, (X.shape[0], num)) * np.sqrt(X.mean() / num)
    H = rng.uniform(0.1, 1.0, (num, X.shape[1])) * np.sqrt(X.mean() / num)
    for _ in range(num_iter):
        H *= (W.T @ X) / np.maximum(W.T @ W @ H, tiny)
        W *= (X @ H.T) / np.maximum(W @ (H @ H.T), tiny)
    # Balance the scale between the factors (the likelihood does not see it; the priors do).
    scale = np.sqrt(np.maximum(H.max(axis=1), tiny) / np.maximum(W.max(axis=0), tiny))
    return model.latent_from_factors(W * scale, H / scale[:, None], floor=1e-3)


def map_nmf_gpp(model, *, theta0=None, seed=0, num_starts=3, init="nmf", max_iter=5000, tol=1e-10):
    """Maximise the NMF-GPP log posterior over (δ, η) with L-BFGS-B (unbounded).

    Parameters
    ----------
    model : NMFGPP
    theta0 : ndarray, shape (dim,), optional
        A single finite start; otherwise ``num_starts`` starts from :func:`initialize_nmf_gpp`.
    seed : int
    num_starts : int
        At least 1 (ignored with ``theta0``).
    init : {"nmf", "prior"}
    max_iter : int
        L-BFGS iterations per start, at least 1.
    tol : float
        Relative tolerance on the objective (scipy's ``ftol``), finite and >= 0.

    Returns
    -------
    MAPResult

    Raises
    ------
    ParameterError
        Invalid settings, a ``theta0`` that is not finite; when every start ends at a log posterior that is
        not finite (a start that does is passed over).

    Warns
    -----
    ConvergenceWarning
        When the best start stopped at ``max_iter``.
    """
    num_starts = integer_at_least("num_starts", num_starts, 1)
    max_iter = integer_at_least("max_iter", max_iter, 1)
    if isinstance(tol, (bool, np.bool_)) or not isinstance(tol, numbers.Real) or not (np.isfinite(tol) and tol >= 0):
        raise ParameterError(f"tol={tol!r} must be a finite number >= 0")
    if theta0 is not None:
        theta0 = real_array("theta0", theta0)
        if not np.all(np.isfinite(theta0)):  # an infinite entry met a ZeroDivisionError in the compiled pass
            raise ParameterError("theta0 holds NaN or infinite values: start where the log posterior is finite")
        starts = [theta0]
    else:
        starts = [initialize_nmf_gpp(model, stream(seed, 3, i), method=init) for i in range(num_starts)]

    def objective(theta):
        logp, grad = model.logdensity_and_grad(theta)
        return -logp, -grad

    best, history = None, []
    # the NMF-GPP products are matrix-vector sized: extra BLAS threads only add synchronisation, which costs
    # 10-60x on a loaded machine (L-BFGS-B's own small BLAS calls suffer most)
    with single_threaded_blas():
        for start in starts:
            result = optimize.minimize(objective, start, jac=True, method="L-BFGS-B",
                                       options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-8, "maxcor": 20})
            history.append(float(-result.fun))
            if np.isfinite(result.fun) and (best is None or result.fun < best.fun):
                best = result
    if best is None:
        raise ParameterError(f"every start ({len(starts)}) ended at a log posterior that is not finite "
                             f"({history[0]}); check the model's data and hyperparameters")
    D, H = model.factors(best.x)
    converged = bool(best.status == 0)
    if best.nit >= max_iter:
        warnings.warn(f"L-BFGS stopped at max_iter={max_iter} (log posterior {-best.fun:.6g}); raise max_iter",
                      ConvergenceWarning, stacklevel=2)
    return MAPResult(best.x, D, H, float(-best.fun), int(best.nit), converged, history)
