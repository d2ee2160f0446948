"""SADA sampler for PLTF models: space alternating data augmentation (MLSP'12 Alg. 2).

For each free factor ``Z_a`` and each setting ``l`` of its latent indices
(``V_a`` minus ``V0``), the slice of sources ``S_a(l, v0)`` is drawn from its
*marginal*, a binomial ``Bi(X(v0), Lambda_l(v0) / Xhat(v0))`` (eqs. 15-18), and
then the elements ``Z_a(l, .)`` from their Gamma conditional given that slice.
The other sources are integrated out: the remaining components of ``X(v0)``
have intensity ``Xhat - Lambda_l``, which does not involve ``Z_a(l, .)``, so
this is a valid partially collapsed Gibbs move. Only ``|V0|``-sized arrays are
held (the slice, its intensity, ``Xhat``), never the ``|V|``-sized source tensor
of the block sampler. ``Xhat`` is updated in place after each slice and
recomputed from scratch at the start of every sweep so rounding cannot drift.

Conventions as in :mod:`core.samplers.gibbs`: integer ``X`` shaped like the
model output; ``factors`` is the tuple of all factors.
"""

from typing import NamedTuple

import numpy as np

from core.errors import ParameterError

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


def _binomial_slice_impl(rng, entries, counts, intensity, xhat, out):
    for n in range(entries.shape[0]):
        e = entries[n]
        total = xhat[e]
        p = intensity[e] / total if total > 0.0 else 0.0
        if p >= 1.0:
            out[e] = counts[n]
        elif p > 0.0:
            out[e] = rng.binomial(counts[n], p)
        else:
            out[e] = 0.0


_COMPILED = {}


def _binomial_slice():
    if "binomial" not in _COMPILED:
        import numba

        _COMPILED["binomial"] = numba.njit(cache=True)(_binomial_slice_impl)
    return _COMPILED["binomial"]


class _SlicePlan(NamedTuple):
    alpha: int
    latent: str            # latent indices of factor alpha
    observed: str          # observed indices of factor alpha
    permutation: tuple     # axes of Z_alpha to (latent..., observed...)
    inverse: tuple
    latent_shape: tuple
    others: tuple          # (position, index string after slicing, letters fixed)
    to_output: tuple       # axes order taking Z_a(l, .) to the output's order of its indices
    output_shape: tuple    # shape of Z_a(l, .) broadcast against the output (1 where absent)
    summed_axes: tuple     # output axes a slice is summed over to reach Z_a(l, .)
    from_output: tuple     # axes order from the output's order back to Z_a's observed order


def _plan(model, alpha):
    indices = model.factor_indices[alpha]
    latent = "".join(c for c in indices if c in model.latent)
    observed = "".join(c for c in indices if c not in model.latent)
    order = latent + observed
    permutation = tuple(indices.index(c) for c in order)
    inverse = tuple(int(i) for i in np.argsort(permutation))
    others = []
    for b, other in enumerate(model.factor_indices):
        if b == alpha:
            continue
        fixed_letters = tuple(c for c in other if c in latent)
        remaining = "".join(c for c in other if c not in latent)
        others.append((b, remaining, fixed_letters))
    in_output_order = "".join(c for c in model.output if c in observed)
    to_output = tuple(observed.index(c) for c in in_output_order)
    output_shape = tuple(model.dims[c] if c in observed else 1 for c in model.output)
    summed_axes = tuple(i for i, c in enumerate(model.output) if c not in observed)
    from_output = tuple(in_output_order.index(c) for c in observed)
    return _SlicePlan(alpha, latent, observed, permutation, inverse, tuple(model.dims[c] for c in latent),
                      tuple(others), to_output, output_shape, summed_axes, from_output)


def _slice_intensity_without(model, plan, factors, setting):
    """``Psi_l(v0) = sum_{latent not in V_a} prod_{b != a} Z_b`` with Z_a's latent indices fixed at ``l``."""
    value_of = dict(zip(plan.latent, setting))
    indices, arrays = [], []
    for b, remaining, fixed_letters in plan.others:
        z = factors[b]
        if fixed_letters:
            selector = tuple(value_of[c] if c in value_of else slice(None) for c in model.factor_indices[b])
            z = z[selector]
        indices.append(remaining)
        arrays.append(z)
    if not indices:
        return np.ones(model.output_shape)
    return model.engine(indices, arrays, model.output)


def init(model, X, factors=None, *, rng=None):
    """Initial state from given factors or a prior draw (MLSP'12 Alg. 2, first line)."""
    X = model.validate_data(X, integer=True)
    if factors is None:
        if rng is None:
            raise ParameterError("init needs factors or an rng to draw them from the prior")
        factors = model.sample_prior(rng)
    factors = model.validate_factors(factors)
    log_likelihood = model.log_likelihood(factors, X)
    if not np.isfinite(log_likelihood):
        raise ParameterError("the initial factors give zero intensity where X > 0: start from positive factors")
    return SADAState(factors, log_likelihood, log_likelihood + model.log_prior(factors))


def build_kernel(model, X):
    """Return one SADA sweep ``kernel(rng, state, iteration=None) -> (state, info)``.

    Parameters
    ----------
    model : core.models.pltf.PLTFModel
    X : array_like
        Integer counts.

    Returns
    -------
    callable
        Usable directly as ``step_fn`` of :func:`core.samplers.driver.run_chain`.
    """
    X = model.validate_data(X, integer=True)
    observed = X > 0 if model.mask is None else (X > 0) & model.mask
    entries = np.flatnonzero(observed).astype(np.int64)
    counts = X.ravel()[entries].astype(np.int64)
    plans = [_plan(model, a) for a in model.free]
    draw = _binomial_slice()

    def kernel(rng, state, iteration=None):
        factors = list(state.factors)
        xhat = np.array(model.xhat(factors), dtype=float).ravel()
        slice_sources = np.zeros(xhat.size)
        for plan in plans:
            a = plan.alpha
            rate = model.prior_rate[a] + model.phi(factors, a)
            shape_prior = model.prior_shape[a]
            z = np.array(np.transpose(factors[a], plan.permutation))
            rate = np.transpose(rate, plan.permutation)
            shape_prior = np.transpose(shape_prior, plan.permutation)
            for setting in np.ndindex(*plan.latent_shape):
                psi = np.asarray(_slice_intensity_without(model, plan, factors, setting), dtype=float)
                old = np.asarray(z[setting])
                # Z_a(l, .) broadcast over the output indices it does not carry
                intensity = (psi * np.transpose(old, plan.to_output).reshape(plan.output_shape)).ravel()
                draw(rng, entries, counts, intensity, xhat, slice_sources)
                totals = slice_sources.reshape(model.output_shape).sum(axis=plan.summed_axes)
                totals = np.transpose(totals, plan.from_output)
                new = rng.gamma(shape_prior[setting] + totals, 1.0 / rate[setting])
                z[setting] = new
                change = np.transpose(np.asarray(new) - old, plan.to_output).reshape(plan.output_shape)
                xhat += (psi * change).ravel()
            factors[a] = np.ascontiguousarray(np.transpose(z, plan.inverse))
        factors = tuple(factors)
        log_likelihood = model.log_likelihood(factors, X)
        joint = log_likelihood + model.log_prior(factors)
        return SADAState(factors, log_likelihood, joint), SADAInfo(log_likelihood, joint)

    return kernel
