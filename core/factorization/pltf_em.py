"""EM (MAP-EM) for PLTF models: KL multiplicative updates written with the PLTF contraction engine.

For each free factor in turn (Yilmaz & Cemgil 2011; MLSP'12 §1.1 with the
sources integrated out),

    Z_a <- max(A_a - 1 + Z_a * Phi_a(X / Xhat), 0) / (B_a + Phi_a(1)),

where ``Phi_a(W) = sum_{not v_a} W(v0) prod_{b != a} Z_b`` comes from
:meth:`sepsti.core.models.pltf.PLTFModel.phi`. With ``map_estimate=False`` the prior is
ignored (``A = 1, B = 0``): the Lee-Seung KL updates generalised to any index
sets. Each update does not decrease the objective (log-likelihood, plus the
log-prior for MAP) for prior shapes of at least 1; below 1 the MAP is ill-posed (a
factor entry's log-prior is unbounded at 0), entries collapse to the smallest float
and the objective can fall slightly.

The plain NMF pattern ``"ik,kj->ij"`` with no mask and exponential priors
(shape 1) is handed to :func:`sepsti.core.factorization.em.poisson_nmf_em`, whose
BLAS kernels are the ones the speech application uses: one implementation of
the NMF updates, reached from both entry points. Its stopping rule is its own
(``tol`` times the KL divergence, :func:`sepsti.core.factorization.em.poisson_nmf_em`),
so at one ``tol`` the two routes stop after different numbers of iterations.

Conventions: ``X`` has the axes of the model output (non-negative, need not
be integer); ``factors`` is the tuple of all factors (fixed ones included).
"""

import warnings
from typing import NamedTuple

import numpy as np

from sepsti.core.errors import ConvergenceWarning, ParameterError
from sepsti.core.factorization.em import _rate_floor
from sepsti.core.random import validate_seed

__all__ = ["PLTFEMResult", "pltf_em", "initialize_pltf"]


class PLTFEMResult(NamedTuple):
    """Result of :func:`pltf_em`.

    Attributes
    ----------
    factors : tuple of ndarray
        All factors; fixed ones are the model's own arrays.
    objective : ndarray, shape (n_iter + 1,)
        Log-posterior (MAP) or log-likelihood (ML) at the start and after each iteration.
    n_iter : int
    """

    factors: tuple
    objective: np.ndarray
    n_iter: int


def initialize_pltf(model, X, rng=None):
    """Random positive starting factors at the data's level.

    Every free entry is ``s * u`` with ``u ~ Uniform(0.5, 1.5)`` and ``s`` chosen
    so that ``Xhat`` starts near the mean of the observed entries of ``X`` when the
    fixed factors are ones. ``rng`` is a Generator or a seed (default 0).

    Raises
    ------
    ParameterError
        A seed that is not an integer in [0, 2**32).
    """
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(validate_seed(0 if rng is None else rng))
    X = model.validate_data(X)
    observed = X if model.mask is None else X[model.mask]
    mean = float(observed.mean()) if observed.size and observed.mean() > 0 else 1.0
    num_free = len(model.free)
    latent = model.num_latent
    scale = (mean / latent) ** (1.0 / num_free)
    return tuple(model.fixed[a] if model.fixed[a] is not None else scale * rng.uniform(0.5, 1.5, model.shapes[a])
                 for a in range(model.num_factors))


def _nmf_pattern(model):
    """True when the model is ``"xk,ky->xy"`` with no mask and shape-1 priors (the NMF kernels apply)."""
    if model.num_factors != 2 or model.mask is not None:
        return False
    (w, h), out = model.factor_indices, model.output
    if len(w) != 2 or len(h) != 2 or len(out) != 2:
        return False
    if not (w[0] == out[0] and h[1] == out[1] and w[1] == h[0] and w[1] in model.latent):
        return False
    return all(np.all(model.prior_shape[a] == 1.0) for a in model.free)


def _validate_start(model, factors, X, floor):
    """Refuse starts that multiplicative updates cannot leave or that explain no count.

    The rules of :func:`sepsti.core.factorization.em.poisson_nmf_em`: free factors strictly
    positive, fixed ones possibly zero unless they hold ``Xhat`` at 0 where ``X > 0``, and not
    every observed ``Xhat`` below the floor.
    """
    for a in model.free:
        if not np.all(factors[a] > 0):
            raise ParameterError(f"factor {a} ({model.factor_indices[a]!r}) must be finite and strictly positive to "
                                 "start multiplicative updates (a zero stays zero)")
    counted = X > 0  # unobserved entries are 0
    if not counted.any():
        return
    xhat = model.xhat(factors)
    largest = float(xhat.max() if model.mask is None else xhat[model.mask].max())
    if largest < floor:
        raise ParameterError(f"factors: a negligible start, Xhat is at most {largest:.3g}, below the least rate "
                             f"{floor:.3g}; start at the data's level (initialize_pltf)")
    if any(np.any(model.fixed[a] == 0) for a in range(model.num_factors) if model.fixed[a] is not None):
        support = model.xhat(tuple((z > 0).astype(float) for z in factors))
        if np.any((support == 0) & counted):
            raise ParameterError("factors: zeros of the fixed factors hold Xhat at 0 where X > 0, a count no fit "
                                 "can explain")


def _objective(model, factors, X, map_estimate):
    value = model.log_likelihood(factors, X)
    return value + model.log_prior(factors) if map_estimate else value


def pltf_em(model, X, factors=None, *, map_estimate=True, max_iter=200, tol=1e-4, seed=0, progress=False):
    """Fit a PLTF model by (MAP-)EM.

    Parameters
    ----------
    model : sepsti.core.models.pltf.PLTFModel
    X : array_like
        Non-negative data, shape ``model.output_shape``.
    factors : tuple of ndarray, optional
        Starting factors (free or all); default :func:`initialize_pltf` with ``seed``. Free ones
        strictly positive; fixed ones may hold zeros where they leave no count unexplained.
    map_estimate : bool
        Use the model's Gamma priors (MAP); False gives maximum likelihood.
    max_iter : int
        Iteration cap; one iteration updates every free factor once.
    tol : float
        Stop when the objective rises by less than ``tol * |objective|``; 0 runs ``max_iter`` iterations.
    seed : int
        Seed of the default initialisation, in [0, 2**32).
    progress : bool
        Progress bar on stderr.

    Returns
    -------
    PLTFEMResult

    Raises
    ------
    ParameterError
        Invalid data, factors or settings (a negative or float seed, a map_estimate that is not a bool among
        them); a start refused as by
        :func:`sepsti.core.factorization.em.poisson_nmf_em` (a zero in a free factor, ``Xhat``
        below the rates' floor everywhere, ``Xhat`` held at 0 where ``X > 0``).

    Warns
    -----
    ConvergenceWarning
        ``tol > 0`` and ``max_iter`` reached first.
    """
    X = model.validate_data(X)
    if not isinstance(map_estimate, (bool, np.bool_)):  # "no" fitted the MAP estimate
        raise ParameterError(f"map_estimate={map_estimate!r}: expected True or False")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 0:
        raise ParameterError(f"max_iter={max_iter!r} must be a non-negative integer")
    if not (np.isscalar(tol) and np.isfinite(tol) and tol >= 0):
        raise ParameterError(f"tol={tol!r} must be a finite number >= 0")
    factors = initialize_pltf(model, X, seed) if factors is None else model.validate_factors(factors)
    factors = tuple(np.array(z, dtype=float) if model.fixed[a] is None else model.fixed[a]
                    for a, z in enumerate(factors))
    floor = _rate_floor(X)
    _validate_start(model, factors, X, floor)
    if _nmf_pattern(model):
        return _nmf_em(model, X, factors, map_estimate, max_iter, tol, progress)

    from sepsti.core.progress import progress_bar

    tiny = np.finfo(float).tiny
    history = [_objective(model, factors, X, map_estimate)]
    factors = list(factors)
    n_iter = 0
    with progress_bar(max_iter, desc="PLTF EM", enabled=progress) as bar:
        for n_iter in range(1, max_iter + 1):
            for a in model.free:
                xhat = np.maximum(model.xhat(factors), floor)
                if model.mask is None:
                    ratio = X / xhat
                else:
                    ratio = np.divide(X, xhat, out=np.zeros_like(xhat), where=model.mask)
                numerator = factors[a] * model.phi(factors, a, ratio)
                denominator = model.phi(factors, a)
                if map_estimate:
                    numerator = np.maximum(numerator + model.prior_shape[a] - 1.0, 0.0)
                    denominator = denominator + model.prior_rate[a]
                factors[a] = np.maximum(numerator / np.maximum(denominator, floor), tiny)
            history.append(_objective(model, factors, X, map_estimate))
            bar.update()
            if tol > 0 and abs(history[-1] - history[-2]) <= tol * abs(history[-1]):
                break
        else:
            if tol > 0 and max_iter > 0:
                warnings.warn(f"PLTF EM stopped at max_iter={max_iter} before reaching tol={tol}",
                              ConvergenceWarning, stacklevel=2)
    return PLTFEMResult(tuple(factors), np.asarray(history), n_iter)


def _nmf_em(model, X, factors, map_estimate, max_iter, tol, progress):
    from sepsti.core.factorization.em import poisson_nmf_em

    W, H = factors
    rates = [model.prior_rate[a] if (map_estimate and a in model.free) else 0.0 for a in range(2)]
    result = poisson_nmf_em(X, W, H, update_W=0 in model.free, update_H=1 in model.free,
                            prior_rate_W=rates[0], prior_rate_H=rates[1], max_iter=max_iter, tol=tol,
                            track_log_likelihood=True, progress=progress, desc="PLTF EM")
    out = tuple(model.fixed[a] if model.fixed[a] is not None else z for a, z in enumerate((result.W, result.H)))
    # poisson_nmf_em reports log-likelihood + sum(log rate - rate z), the Gamma(1, rate) log-prior
    return PLTFEMResult(out, np.asarray(result.log_likelihood, dtype=float), int(result.n_iter))
