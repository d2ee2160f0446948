"""SADA sampler for PLTF models: space alternating data augmentation (MLSP'12 Alg. 2).

For each free factor ``Z_a`` and each setting ``l`` of its latent indices
(``V_a`` minus ``V0``), the slice of sources ``S_a(l, v0)`` is drawn from its
*marginal*, a binomial ``Bi(X(v0), Lambda_l(v0) / Xhat(v0))`` (eqs. 15-18), and
then the elements ``Z_a(l, .)`` from their Gamma conditional given that slice.
The other sources are integrated out: the remaining components of ``X(v0)``
have intensity ``Xhat - Lambda_l``, which does not involve ``Z_a(l, .)``, so
this is a valid partially collapsed Gibbs move.

Memory: one compiled loop per factor computes each entry's slice intensity
from the factors on the fly (the entry's multi-index is recovered from its
flat position), draws the binomial and adds it into the Gamma statistics; a
second pass updates ``Xhat`` with the change of ``Z_a(l, .)``. Besides ``X``
the sampler holds ``Xhat`` (|V0|) and factor-sized arrays: no slice, intensity
or source tensor is ever stored. ``Xhat`` is recomputed from scratch at the
start of every sweep so rounding cannot drift.

Conventions as in :mod:`sepsti.core.samplers.gibbs`: integer ``X`` shaped like the
model output; ``factors`` is the tuple of all factors.
"""

from typing import NamedTuple

import numpy as np


__all__ = ["SADAState", "SADAInfo", "init", "build_kernel"]


class SADAState(NamedTuple):
    """State of the SADA chain: the factors, ``log p(X | Z)`` and ``log p(X | Z) + log p(Z)``."""

    factors: tuple
    log_likelihood: float
    logdensity: float


class SADAInfo(NamedTuple):
    """Per-sweep diagnostics."""

    log_likelihood: float
    log_joint: float


class _Counts(NamedTuple):
    """The counts of ``X``, flat, and which of them are observed."""

    counts: np.ndarray    # (|V0|,) int64
    observed: np.ndarray  # (|V0|,) bool; a placeholder of one entry without a mask
    has_mask: bool


class _Layout(NamedTuple):
    """Where each factor's elements sit in the flat vector of all factors."""

    starts: np.ndarray       # (num_factors + 1,): start of each factor (last entry: total size)
    out_shape: np.ndarray    # (num_axes,): the shape of ``X``
    obs_strides: np.ndarray  # (num_factors, num_axes): a factor's stride along each output axis
    lat_offsets: np.ndarray  # (num_factors, num_latent): a factor's offset at each latent configuration


class _Plan(NamedTuple):
    """The slices of one free factor, ``Z_alpha``, drawn in turn."""

    alpha: int
    slice_configs: np.ndarray   # (num_slices, configs per slice): latent configurations u of each slice
    slice_elements: np.ndarray  # (num_slices, elements per slice): flat indices within Z_alpha


class _GammaUpdate(NamedTuple):
    """The Gamma conditional of one factor's elements and its work arrays, all of the factor's size."""

    shape_prior: np.ndarray
    rate: np.ndarray
    stats: np.ndarray   # the sources' statistics, filled slice by slice
    change: np.ndarray  # new minus old value of each element, for the update of ``Xhat``


def _sada_factor_impl(rng, data, layout, plan, gamma, xhat, flat):
    counts, observed, has_mask = data.counts, data.observed, data.has_mask
    starts, out_shape = layout.starts, layout.out_shape
    obs_strides, lat_offsets = layout.obs_strides, layout.lat_offsets
    alpha, slice_configs, slice_elements = plan.alpha, plan.slice_configs, plan.slice_elements
    shape_prior, rate, stats, change = gamma.shape_prior, gamma.rate, gamma.stats, gamma.change
    num_factors = starts.size - 1
    num_axes = out_shape.size
    offsets = np.zeros(num_factors, dtype=np.int64)
    base = starts[alpha]
    for sl in range(slice_configs.shape[0]):
        configs = slice_configs[sl]
        own_latent = lat_offsets[alpha, configs[0]]
        for m in slice_elements[sl]:
            stats[m] = 0.0
        for sweep_pass in range(2):
            for e in range(counts.size):
                x = counts[e]
                if x <= 0 or (has_mask and not observed[e]):
                    continue
                remaining = e
                for b in range(num_factors):
                    offsets[b] = 0
                for axis in range(num_axes - 1, -1, -1):
                    coordinate = remaining % out_shape[axis]
                    remaining //= out_shape[axis]
                    for b in range(num_factors):
                        offsets[b] += coordinate * obs_strides[b, axis]
                psi = 0.0
                for u in configs:
                    p = 1.0
                    for b in range(num_factors):
                        if b != alpha:
                            p *= flat[starts[b] + offsets[b] + lat_offsets[b, u]]
                    psi += p
                own = offsets[alpha] + own_latent
                if sweep_pass == 0:
                    # the slice's binomial (MLSP'12 Alg. 2), straight into the Gamma statistics
                    total = xhat[e]
                    prob = psi * flat[base + own] / total if total > 0.0 else 0.0
                    if prob >= 1.0:
                        stats[own] += x
                    elif prob > 0.0:
                        stats[own] += rng.binomial(x, prob)
                else:
                    xhat[e] += psi * change[own]
            if sweep_pass == 0:
                for m in slice_elements[sl]:
                    new = rng.standard_gamma(shape_prior[m] + stats[m]) / rate[m]
                    change[m] = new - flat[base + m]
                    flat[base + m] = new


def _log_likelihood_impl(data, xhat):
    # one pass, no |V0|-sized temporaries: sum over observed entries of x log xhat - xhat (log x! is a constant)
    counts, observed, has_mask = data.counts, data.observed, data.has_mask
    value = 0.0
    for e in range(counts.size):
        if has_mask and not observed[e]:
            continue
        x = counts[e]
        value -= xhat[e]
        if x > 0:
            value += x * np.log(xhat[e])
    return value


_COMPILED = {}


def _compiled(name):
    if name not in _COMPILED:
        import numba

        _COMPILED[name] = numba.njit(cache=True)(globals()[name + "_impl"])
    return _COMPILED[name]


def _layout(model):
    """Strides of every factor along the output axes and offsets of every latent configuration."""
    out_position = {c: i for i, c in enumerate(model.output)}
    latent_shape = tuple(model.dims[c] for c in model.latent)
    num_latent = max(model.num_latent, 1)
    latent_coords = np.unravel_index(np.arange(num_latent), latent_shape) if model.latent else ()
    latent_of = dict(zip(model.latent, latent_coords))
    obs_strides = np.zeros((model.num_factors, len(model.output)), dtype=np.int64)
    lat_offsets = np.zeros((model.num_factors, num_latent), dtype=np.int64)
    for a, (indices, shape) in enumerate(zip(model.factor_indices, model.shapes)):
        strides = np.cumprod((shape[1:] + (1,))[::-1])[::-1]
        for c, stride in zip(indices, strides):
            if c in out_position:
                obs_strides[a, out_position[c]] = stride
            else:
                lat_offsets[a] += stride * latent_of[c]
    return obs_strides, lat_offsets, latent_of


def _plan(model, alpha, latent_of):
    indices = model.factor_indices[alpha]
    own_latent = [c for c in indices if c in model.latent]
    own_shape = tuple(model.dims[c] for c in own_latent)
    num_latent = max(model.num_latent, 1)
    if own_latent:
        slice_of_config = np.ravel_multi_index(tuple(latent_of[c] for c in own_latent), own_shape)
    else:
        slice_of_config = np.zeros(num_latent, dtype=np.int64)
    num_slices = int(np.prod(own_shape, dtype=np.int64))
    configs = np.stack([np.flatnonzero(slice_of_config == s) for s in range(num_slices)]).astype(np.int64)
    grid = np.indices(model.shapes[alpha]).reshape(len(indices), -1)
    if own_latent:
        element_slice = np.ravel_multi_index(tuple(grid[indices.index(c)] for c in own_latent), own_shape)
    else:
        element_slice = np.zeros(grid.shape[1], dtype=np.int64)
    elements = np.stack([np.flatnonzero(element_slice == s) for s in range(num_slices)]).astype(np.int64)
    return _Plan(alpha, configs, elements)


def init(model, X, factors=None, *, rng=None):
    """Initial state from given factors or a prior draw (MLSP'12 Alg. 2, first line)."""
    X, factors, log_likelihood = model.chain_start(X, factors, rng)
    return SADAState(factors, log_likelihood, log_likelihood + model.log_prior(factors))


def build_kernel(model, X):
    """Return one SADA sweep ``kernel(rng, state, iteration=None) -> (state, info)``.

    Parameters
    ----------
    model : sepsti.core.models.pltf.PLTFModel
    X : array_like
        Integer counts.

    Returns
    -------
    callable
        Usable directly as ``step_fn`` of :func:`sepsti.core.samplers.driver.run_chain`.
    """
    X = model.validate_data(X, integer=True)
    counts = np.ascontiguousarray(X.ravel())
    has_mask = model.mask is not None
    observed = np.ascontiguousarray(model.mask.ravel()) if has_mask else np.zeros(1, dtype=bool)
    data = _Counts(counts, observed, has_mask)
    obs_strides, lat_offsets, latent_of = _layout(model)
    plans = [_plan(model, a, latent_of) for a in model.free]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in model.shapes]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    layout = _Layout(starts, np.asarray(model.output_shape, dtype=np.int64), obs_strides, lat_offsets)
    update = _compiled("_sada_factor")
    log_likelihood_of = _compiled("_log_likelihood")
    from scipy.special import gammaln

    # sum over observed entries of log x!, once: a table of log x! up to the largest count would take 8 GB at 1e9
    log_factorial = float(np.sum(gammaln((counts[observed] if has_mask else counts) + 1.0)))

    def kernel(rng, state, iteration=None):
        factors = list(state.factors)
        # einsum returns a fresh array: take it as is rather than holding a second |V0| copy
        xhat = np.require(model.xhat(factors), dtype=float, requirements=["C", "W", "O"]).ravel()
        flat = np.concatenate([np.ravel(z) for z in factors]).astype(float)
        for plan in plans:
            a = plan.alpha
            gamma = _GammaUpdate(shape_prior=np.ascontiguousarray(model.prior_shape[a].ravel()),
                                 rate=np.ascontiguousarray((model.prior_rate[a] + model.phi(factors, a)).ravel()),
                                 stats=np.zeros(sizes[a]), change=np.zeros(sizes[a]))
            update(rng, data, layout, plan, gamma, xhat, flat)
            factors[a] = flat[starts[a]:starts[a + 1]].reshape(model.shapes[a]).copy()
        factors = tuple(factors)
        del xhat, flat
        xhat = np.require(model.xhat(factors), dtype=float, requirements=["C"]).ravel()
        log_likelihood = float(log_likelihood_of(data, xhat)) - log_factorial
        joint = log_likelihood + model.log_prior(factors)
        return SADAState(factors, log_likelihood, joint), SADAInfo(log_likelihood, joint)

    return kernel
