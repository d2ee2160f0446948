"""Block Gibbs sampler for PLTF models (MLSP'12 Alg. 1).

One sweep draws every source ``S(v0, :)`` from its multinomial full
conditional (eq. 10), then each free factor from its Gamma full conditional
(eqs. 11-13) with the most recent values of the others. The sources are not
stored as a ``|V|``-sized tensor by default: a compiled loop computes the
intensities of one observed entry at a time and adds the drawn counts straight
into the per-factor statistics ``sum_{not v_a} S(v)``, which is all the factor
updates and Chib's method need. ``build_kernel(..., keep_sources=True)`` also
keeps ``S`` itself, shape ``(n_entries, n_latent)`` over the observed non-zero
entries (|V| memory, as Alg. 1 does).

Conventions: ``X`` holds integer counts with the axes of the model's output;
``factors`` is the tuple of all factors (fixed ones included) in spec order;
statistics are per factor, fixed factors included (they enter ``log p(S | Z)``).
"""

import math
from typing import NamedTuple

import numpy as np
from scipy.special import gammaln, xlogy

from sepsti.core.checks import integers_at_least
from sepsti.core.errors import ParameterError

__all__ = ["GibbsState", "GibbsInfo", "init", "build_kernel", "draw_sources", "draw_factor",
           "log_joint", "source_log_prob"]


class GibbsState(NamedTuple):
    """State of the block Gibbs chain.

    Attributes
    ----------
    factors : tuple of ndarray
        All factors (fixed ones included).
    source_stats : tuple of ndarray
        Per factor, ``sum_{not v_a} S(v)`` of the last source draw (zeros
        before the first sweep).
    log_source_factorial : float
        ``sum_v log S(v)!`` of the last source draw.
    log_likelihood : float
        ``log p(X | Z)`` at ``factors``.
    logdensity : float
        ``log p(S, Z, X)`` at the last sources and ``factors`` (before the
        first sweep: ``log p(X | Z) + log p(Z)``).
    sources : ndarray or None
        The last source draw, shape ``(n_entries, n_latent)``, when the kernel keeps sources.
    """

    factors: tuple
    source_stats: tuple
    log_source_factorial: float
    log_likelihood: float
    logdensity: float
    sources: object = None


class GibbsInfo(NamedTuple):
    """Per-sweep diagnostics: ``log p(X | Z)`` and ``log p(S, Z, X)``."""

    log_likelihood: float
    log_joint: float


def _draw_sources_impl(rng, layout, flat, stats, sources, keep, log_factorials):
    counts, obs_offsets, lat_offsets, starts = layout.counts, layout.obs_offsets, layout.lat_offsets, layout.starts
    num_factors, num_latent = lat_offsets.shape
    cumulative = np.empty(num_latent)
    local = np.zeros(num_latent, dtype=np.int64)
    log_factorial = 0.0
    for n in range(counts.shape[0]):
        x = counts[n]
        total = 0.0
        for u in range(num_latent):
            p = 1.0
            for a in range(num_factors):
                p *= flat[starts[a] + obs_offsets[a, n] + lat_offsets[a, u]]
            total += p
            cumulative[u] = total
        if x <= num_latent:
            # Few counts: one categorical draw per unit is cheaper than a chain of binomials.
            for _ in range(x):
                target = rng.random() * total
                u = 0
                while u < num_latent - 1 and cumulative[u] <= target:
                    u += 1
                local[u] += 1
        else:
            remaining = x
            mass = total
            previous = 0.0
            for u in range(num_latent):
                p = cumulative[u] - previous
                previous = cumulative[u]
                if u == num_latent - 1 or p >= mass:
                    s = remaining
                elif p <= 0.0:
                    s = 0
                else:
                    s = rng.binomial(remaining, p / mass)
                mass -= p
                remaining -= s
                local[u] = s
                if remaining == 0:
                    break
        for u in range(num_latent):
            s = local[u]
            if s > 0:
                local[u] = 0
                log_factorial += log_factorials[s] if s < log_factorials.shape[0] else math.lgamma(s + 1.0)
                for a in range(num_factors):
                    stats[starts[a] + obs_offsets[a, n] + lat_offsets[a, u]] += s
                if keep:
                    sources[n, u] = s
    return log_factorial


_COMPILED = {}
_TABLES = {}
#: Longest table of log s! (8 MB); larger sources take lgamma on the spot (a count of 3e7 would need 240 MB).
_LONGEST_TABLE = 2 ** 20


def _log_factorials(layout):
    """log s! for s = 0 .. max count (a source never exceeds its entry's count), at most
    :data:`_LONGEST_TABLE` long, cached per layout."""
    key = id(layout.counts)
    table = _TABLES.get(key)
    if table is None or table[0] is not layout.counts:
        top = min(int(layout.counts.max()) if layout.counts.size else 0, _LONGEST_TABLE - 1)
        table = (layout.counts, gammaln(np.arange(top + 1) + 1.0))
        _TABLES.clear()
        _TABLES[key] = table
    return table[1]


def _compiled(name):
    """Compile a hot loop on first use (numba is imported lazily; the cache lives on disk)."""
    if name not in _COMPILED:
        import numba

        _COMPILED[name] = numba.njit(cache=True)(globals()[name + "_impl"])
    return _COMPILED[name]


def draw_sources(rng, model, layout, factors, *, sources=None):
    """Draw all sources from their multinomial full conditionals (MLSP'12 eq. 10).

    Parameters
    ----------
    rng : numpy.random.Generator
    model : sepsti.core.models.pltf.PLTFModel
    layout : sepsti.core.models.pltf.SourceLayout
        From ``model.source_layout(X)``.
    factors : tuple of ndarray
        All factors.
    sources : ndarray of int64, shape (n_entries, n_latent), optional
        Zeros, filled with the draw.

    Returns
    -------
    stats : tuple of ndarray
        Per factor, ``sum_{not v_a} S(v)``.
    log_factorial : float
        ``sum_v log S(v)!``.
    """
    flat = np.concatenate([np.ravel(z) for z in factors]).astype(float, copy=False)
    flat_stats = np.zeros(flat.size)
    keep = sources is not None
    buffer = sources if keep else np.zeros((1, 1), dtype=np.int64)
    log_factorial = _compiled("_draw_sources")(rng, layout, flat, flat_stats, buffer, keep, _log_factorials(layout))
    stats = tuple(flat_stats[layout.starts[a]:layout.starts[a + 1]].reshape(model.shapes[a])
                  for a in range(model.num_factors))
    return stats, float(log_factorial)


def draw_factor(rng, model, factors, alpha, stats):
    """Draw factor ``alpha`` from its Gamma full conditional (MLSP'12 eqs. 11-13)."""
    shape = model.prior_shape[alpha] + stats
    rate = model.prior_rate[alpha] + model.phi(factors, alpha)
    return rng.gamma(shape, 1.0 / rate)


def _observed_sum(model, xhat):
    return float(np.sum(xhat) if model.mask is None else np.sum(xhat[model.mask]))


def log_joint(model, factors, source_stats, log_source_factorial, xhat=None):
    """``log p(S, Z, X) = log p(S | Z) + log p(Z)`` from the per-factor source statistics.

    ``log p(S | Z) = sum_a <Sigma_a, log Z_a> - sum_obs Xhat - sum_v log S(v)!``
    (X is a function of S, so ``p(X | S) = 1``).
    """
    if xhat is None:
        xhat = model.xhat(factors)
    value = -log_source_factorial - _observed_sum(model, xhat)
    for stats, z in zip(source_stats, factors):
        value += float(np.sum(xlogy(stats, z)))
    return value + model.log_prior(factors)


def source_log_prob(model, factors, source_stats, log_source_factorial, log_factorial_X, X, xhat=None):
    """``log p(S | Z, X)``: the product of multinomials of MLSP'12 eq. 10, from statistics of S.

    ``log_factorial_X`` is ``sum_obs log X(v0)!``.
    """
    if xhat is None:
        xhat = model.xhat(factors)
    value = log_factorial_X - log_source_factorial
    for stats, z in zip(source_stats, factors):
        value += float(np.sum(xlogy(stats, z)))
    observed = xhat if model.mask is None else xhat[model.mask]
    counts = X if model.mask is None else X[model.mask]
    with np.errstate(divide="ignore"):
        value -= float(np.sum(xlogy(counts, observed)))
    return value


def init(model, X, factors=None, *, rng=None):
    """Initial state: given factors, or a draw from the prior (MLSP'12 Alg. 1, first line).

    Parameters
    ----------
    model : sepsti.core.models.pltf.PLTFModel
    X : array_like
        Integer counts, shape ``model.output_shape``.
    factors : tuple of ndarray, optional
        Free or all factors; drawn from the prior with ``rng`` when omitted.
    rng : numpy.random.Generator, optional

    Returns
    -------
    GibbsState

    Raises
    ------
    ParameterError
        If ``X`` is not counts of the model's shape, or a positive count has zero intensity.
    """
    X, factors, log_likelihood = model.chain_start(X, factors, rng)
    stats = tuple(np.zeros(shape) for shape in model.shapes)
    return GibbsState(factors, stats, 0.0, log_likelihood, log_likelihood + model.log_prior(factors))


def build_kernel(model, X, *, clamped_sources=None, clamped_factors=(), keep_sources=False, track_density=True):
    """Return one sweep ``kernel(rng, state, iteration=None) -> (state, info)``.

    Parameters
    ----------
    model : sepsti.core.models.pltf.PLTFModel
    X : array_like
        Integer counts.
    clamped_sources : tuple, optional
        ``(source_stats, log_source_factorial)`` to hold the sources at (the
        reduced runs of Chib's method): the sweep then only updates factors.
    clamped_factors : sequence of int
        Free factors held at their current value.
    keep_sources : bool
        Store each source draw in ``state.sources`` (|V| memory, as in Alg. 1).
    track_density : bool
        Compute ``log p(X | Z)`` and ``log p(S, Z, X)`` after each sweep (NaN
        when False: the reduced runs of Chib's method do not need them).

    Returns
    -------
    callable
        Usable directly as ``step_fn`` of :func:`sepsti.core.samplers.driver.run_chain`.
    """
    X = model.validate_data(X, integer=True)
    layout = model.source_layout(X)
    observed = X if model.mask is None else X[model.mask]
    log_factorial_X = float(np.sum(gammaln(observed + 1.0)))
    clamped = set(integers_at_least("clamped_factors", clamped_factors, 0))  # int() took 1.5 as 1
    unknown = clamped - set(model.free)
    if unknown:
        raise ParameterError(f"clamped_factors={sorted(unknown)} are not free factors {model.free}")
    updated = tuple(a for a in model.free if a not in clamped)

    def kernel(rng, state, iteration=None):
        factors = list(state.factors)
        sources = None
        if clamped_sources is None:
            if keep_sources:
                sources = np.zeros((layout.counts.size, max(model.num_latent, 1)), dtype=np.int64)
            stats, log_factorial = draw_sources(rng, model, layout, factors, sources=sources)
        else:
            stats, log_factorial = clamped_sources
        for a in updated:
            factors[a] = draw_factor(rng, model, factors, a, stats[a])
        factors = tuple(factors)
        if track_density:
            xhat = model.xhat(factors)
            # the Poisson log-likelihood from the non-zero entries only (log X! is a constant)
            with np.errstate(divide="ignore"):
                log_rates = np.log(np.ravel(xhat)[layout.entries])
            log_likelihood = float(np.dot(layout.counts, log_rates)) - _observed_sum(model, xhat) - log_factorial_X
            joint = log_joint(model, factors, stats, log_factorial, xhat)
        else:
            log_likelihood = joint = float("nan")
        return (GibbsState(factors, stats, log_factorial, log_likelihood, joint, sources),
                GibbsInfo(log_likelihood, joint))

    kernel.layout = layout
    return kernel
