"""Probabilistic latent tensor factorization (PLTF) written as einsum index sets.

A model is a contraction such as ``"ik,kj->ij"`` (NMF), ``"ir,jr,kr->ijk"``
(PARAFAC) or ``"fi,ik,kt->ft"`` (a hierarchical NMF): each operand is a factor
``Z_a`` over its index set ``V_a``, the output names the observed indices ``V0``
and every other index is latent (MLSP'12 eq. 2). The generative model is

    Z_a(v_a) ~ Gamma(A_a(v_a), B_a(v_a))     (shape, rate)
    Lambda(v) = prod_a Z_a(v_a)              (intensity, over all indices V)
    S(v) ~ Poisson(Lambda(v)),   X(v0) = sum_{latent} S(v)
    X(v0) ~ Poisson(Xhat(v0)),   Xhat(v0) = sum_{latent} Lambda(v)

Any factor may be fixed (a trained dictionary, the delta tensor of a
convolution). An optional boolean ``mask`` over ``V0`` marks observed entries;
unobserved entries contribute nothing to the likelihood or the statistics.

Conventions: factor ``a`` is an ndarray whose axes follow its index string;
``X`` and ``Xhat`` have the axes of the output string. Every quantity the
samplers, EM and Chib need (``Xhat``, the intensity, the per-factor
statistics ``Phi_a(v_a) = sum_{not v_a} W(v0) prod_{a' != a} Z_a'(v_a')``)
comes from one contraction engine, :class:`Contraction`, which plans each
einsum once with :func:`numpy.einsum_path` and reuses the plan.

References
----------
U. Simsekli, A. T. Cemgil, "Markov chain Monte Carlo inference for
probabilistic latent tensor factorization", MLSP 2012, eqs. 2-18.
"""

from typing import NamedTuple

import numpy as np
from scipy.special import gammaln, xlogy

from sepsti.core.checks import integer_at_least, real_array
from sepsti.core.errors import ParameterError

__all__ = ["Contraction", "PLTFModel", "SourceLayout", "pltf_model", "gamma_log_pdf", "parse_spec"]


def parse_spec(spec):
    """Split an einsum-style spec ``"ik,kj->ij"`` into factor index strings and the output string.

    Raises
    ------
    ParameterError
        If the spec is malformed, repeats an index inside one operand, or
        names an output index that no factor carries.
    """
    if not isinstance(spec, str) or spec.count("->") != 1:
        raise ParameterError(f"spec={spec!r} must be an einsum string with one '->', e.g. 'ik,kj->ij'")
    left, output = (part.replace(" ", "") for part in spec.split("->"))
    factors = tuple(left.split(","))
    for indices in factors + (output,):
        if not all(c.isalpha() and c.isascii() for c in indices):
            raise ParameterError(f"spec={spec!r}: indices must be ASCII letters, got {indices!r}")
        if len(set(indices)) != len(indices):
            raise ParameterError(f"spec={spec!r}: index repeated within {indices!r}")
    if any(len(f) == 0 for f in factors):
        raise ParameterError(f"spec={spec!r}: every factor needs at least one index")
    missing = set(output) - set("".join(factors))
    if missing:
        raise ParameterError(f"spec={spec!r}: output indices {sorted(missing)} appear in no factor")
    return factors, output


def gamma_log_pdf(z, shape, rate):
    """Elementwise log Gamma(z; shape, rate) density (MLSP'12 eq. 4); -inf at z <= 0 when shape > 1."""
    z = np.asarray(z, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = xlogy(shape - 1.0, z) - rate * z + shape * np.log(rate) - gammaln(shape)
    return np.where(z < 0, -np.inf, out)


class Contraction:
    """Einsum contractions with plans computed once per (operands, output) signature.

    Parameters
    ----------
    dims : dict
        Size of every index letter.
    """

    def __init__(self, dims):
        self.dims = dict(dims)
        self._plans = {}

    def __call__(self, operand_indices, arrays, output):
        """Contract ``arrays`` (with index strings ``operand_indices``) to ``output``.

        Output indices carried by no operand are broadcast (the result is
        constant along them); summed indices carried by no operand multiply
        the result by their size, as the sum over an implicit ones tensor would.
        """
        if not arrays:
            raise ParameterError("nothing to contract")
        key = (tuple(operand_indices), output, tuple(a.shape for a in arrays))
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan(list(operand_indices), arrays, output)
            self._plans[key] = plan
        steps, final, broadcast_shape, needs_broadcast = plan
        work = list(arrays)
        for positions, subscripts in steps:
            taken = [work[p] for p in positions]
            for p in sorted(positions, reverse=True):
                del work[p]
            work.append(np.einsum(subscripts, *taken))
        result = np.einsum(final, work[0]) if final else work[0]
        if needs_broadcast:
            result = np.broadcast_to(np.reshape(result, broadcast_shape), tuple(self.dims[c] for c in output))
        return result

    def _plan(self, indices, arrays, output):
        # The pairwise order comes from np.einsum_path once; executing the pairs with the C einsum
        # avoids re-planning on every call, which dominates for the small tensors of a Gibbs sweep.
        present = set("".join(indices))
        inner = "".join(c for c in output if c in present)
        steps = []
        if len(arrays) > 1:
            path = np.einsum_path(",".join(indices) + "->" + inner, *arrays, optimize="optimal")[0][1:]
            for positions in path:
                taken = [indices[p] for p in positions]
                rest = [c for p, c in enumerate(indices) if p not in positions]
                needed = set("".join(rest)) | set(inner)
                result = "".join(c for c in dict.fromkeys("".join(taken)) if c in needed)
                if not rest and set(result) == set(inner):
                    result = inner  # the last step writes the output's axis order: no transposed view
                steps.append((tuple(positions), ",".join(taken) + "->" + result))
                indices = rest + [result]
        final = f"{indices[0]}->{inner}" if indices[0] != inner else None
        broadcast_shape = tuple(self.dims[c] if c in present else 1 for c in output)
        return steps, final, broadcast_shape, inner != output


class SourceLayout(NamedTuple):
    """Flat addresses of every factor element at each (observed entry, latent configuration).

    The intensity of source ``(n, u)`` is ``prod_a flat[starts[a] + obs_offsets[a, n] + lat_offsets[a, u]]``
    where ``flat`` concatenates the raveled factors; this lets a compiled
    loop draw the sources and add them into the per-factor statistics without
    ever forming the ``|V|``-sized intensity tensor.

    Attributes
    ----------
    entries : ndarray of int64, shape (n_entries,)
        Raveled positions in ``X`` of the observed entries with ``X > 0``.
    counts : ndarray of int64, shape (n_entries,)
        Their counts.
    obs_offsets : ndarray of int64, shape (n_factors, n_entries)
    lat_offsets : ndarray of int64, shape (n_factors, n_latent)
    starts : ndarray of int64, shape (n_factors + 1,)
        Start of each factor in the flat parameter vector (last entry: total size).
    """

    entries: np.ndarray
    counts: np.ndarray
    obs_offsets: np.ndarray
    lat_offsets: np.ndarray
    starts: np.ndarray


class PLTFModel:
    """A PLTF model: index sets, sizes, Gamma priors and fixed factors. Build it with :func:`pltf_model`.

    Attributes
    ----------
    spec : str
    factor_indices : tuple of str
        Index string of each factor.
    output : str
        Observed indices ``V0``.
    latent : str
        Latent indices ``V - V0`` in order of first appearance.
    dims : dict
        Size of each index.
    shapes : tuple of tuple
        Shape of each factor.
    prior_shape, prior_rate : tuple of ndarray or None
        Gamma shape and rate of each free factor, broadcast to its shape (None for fixed factors).
    fixed : tuple of ndarray or None
        The value of each fixed factor (None for free factors).
    free : tuple of int
        Positions of the free factors.
    mask : ndarray of bool or None
        Observed entries of ``X`` (None: all observed).
    engine : Contraction
    """

    def __init__(self, spec, factor_indices, output, dims, prior_shape, prior_rate, fixed, mask):
        self.spec = spec
        self.factor_indices = factor_indices
        self.output = output
        everything = "".join(factor_indices)
        self.latent = "".join(dict.fromkeys(c for c in everything if c not in output))
        self.dims = dims
        self.shapes = tuple(tuple(dims[c] for c in f) for f in factor_indices)
        self.output_shape = tuple(dims[c] for c in output)
        self.prior_shape = prior_shape
        self.prior_rate = prior_rate
        self.fixed = fixed
        self.free = tuple(a for a, value in enumerate(fixed) if value is None)
        self.mask = mask
        self.engine = Contraction(dims)
        # constant part of each free factor's Gamma log density, and whether the z-power term vanishes
        self._prior_constant = {a: float(np.sum(prior_shape[a] * np.log(prior_rate[a]) - gammaln(prior_shape[a])))
                                for a in self.free}
        self._prior_exponential = {a: bool(np.all(prior_shape[a] == 1.0)) for a in self.free}

    @property
    def num_factors(self):
        return len(self.factor_indices)

    @property
    def num_latent(self):
        """Number of latent configurations per observed entry, ``|V - V0|``."""
        return int(np.prod([self.dims[c] for c in self.latent], dtype=np.int64))

    def __repr__(self):
        sizes = ", ".join(f"{c}={n}" for c, n in self.dims.items())
        fixed = [self.factor_indices[a] for a in range(self.num_factors) if a not in self.free]
        return f"PLTFModel({self.spec!r}, {sizes}" + (f", fixed={fixed}" if fixed else "") + ")"

    # ----------------------------------------------------------------- factors
    def complete(self, free_factors):
        """Return the full tuple of factors from the free ones (fixed factors filled in)."""
        free_factors = tuple(free_factors)
        if len(free_factors) == self.num_factors:
            return tuple(self.fixed[a] if self.fixed[a] is not None else free_factors[a]
                         for a in range(self.num_factors))
        if len(free_factors) != len(self.free):
            raise ParameterError(f"got {len(free_factors)} factors, expected {len(self.free)} free "
                                 f"or {self.num_factors} in all")
        it = iter(free_factors)
        return tuple(self.fixed[a] if self.fixed[a] is not None else next(it) for a in range(self.num_factors))

    def sample_prior(self, rng):
        """Draw every free factor from its Gamma prior; returns the full tuple of factors."""
        return tuple(self.fixed[a] if self.fixed[a] is not None
                     else rng.gamma(self.prior_shape[a], 1.0 / self.prior_rate[a])
                     for a in range(self.num_factors))

    def validate_factors(self, factors):
        """Check shapes and non-negativity of a full tuple of factors; returns it as float arrays."""
        factors = self.complete(factors)
        out = []
        for a, (z, shape) in enumerate(zip(factors, self.shapes)):
            z = np.asarray(z, dtype=float)
            if z.shape != shape:
                raise ParameterError(f"factor {a} ({self.factor_indices[a]!r}) has shape {z.shape}, expected {shape}")
            if not np.all(np.isfinite(z)) or np.any(z < 0):
                raise ParameterError(f"factor {a} ({self.factor_indices[a]!r}) must be finite and non-negative")
            out.append(z)
        return tuple(out)

    def validate_data(self, X, *, integer=False):
        """Check the shape and the observed values of ``X``; with ``integer=True`` require counts (for the samplers).

        Entries outside the mask may hold anything (NaN for missing values) and come back as 0.
        Integer input comes back as int64 without a copy when it already is and the mask leaves
        nothing out.

        Raises
        ------
        ParameterError
            On a shape other than ``output_shape``, values that are not real numbers (complex, strings),
            negative or non-finite observed values, or, with ``integer``, counts that are not integers
            or exceed int64.
        """
        X = real_array("X", X, keep_dtype=True)  # complex values were cast to their real part, strings a TypeError
        if X.shape != self.output_shape:
            raise ParameterError(f"X has shape {X.shape}, expected {self.output_shape} for output {self.output!r}")
        if self.mask is not None and not self.mask.all():
            X = np.where(self.mask, X, 0)
        if np.issubdtype(X.dtype, np.integer) or X.dtype == bool:
            if X.size and X.min() < 0:
                raise ParameterError("X must be finite and non-negative")
            if integer and X.size and X.max() > np.iinfo(np.int64).max:
                raise ParameterError(f"X has a count of {X.max()}, beyond the int64 counts of the Gibbs samplers")
            return np.asarray(X, dtype=np.int64) if integer else X.astype(float)
        if not np.all(np.isfinite(X)) or np.any(X < 0):
            raise ParameterError("X must be finite and non-negative")
        if integer:
            if not np.array_equal(X, np.round(X)):
                raise ParameterError("X must hold integer counts for the Gibbs samplers: round it (np.rint) first")
            if X.size and X.max() >= 2.0 ** 63:  # the least float beyond int64
                raise ParameterError(f"X has a count of {X.max():g}, beyond the int64 counts of the Gibbs samplers")
            return X.astype(np.int64)
        return X.astype(float)

    def chain_start(self, X, factors=None, rng=None):
        """Validated counts, starting factors (given, or a prior draw) and their log-likelihood.

        Raises
        ------
        ParameterError
            If neither ``factors`` nor ``rng`` is given, ``rng`` is not a Generator, or a positive count has
            zero intensity.
        """
        X = self.validate_data(X, integer=True)
        if factors is None:
            if rng is None:
                raise ParameterError("init needs factors or an rng to draw them from the prior")
            if not isinstance(rng, np.random.Generator):  # a seed met an AttributeError
                raise ParameterError(f"rng={rng!r}: expected a numpy.random.Generator "
                                     "(sepsti.core.random.stream(seed))")
            factors = self.sample_prior(rng)
        factors = self.validate_factors(factors)
        log_likelihood = self.log_likelihood(factors, X)
        if not np.isfinite(log_likelihood):
            raise ParameterError("the initial factors give zero intensity where X > 0: start from positive factors")
        return X, factors, log_likelihood

    # ------------------------------------------------------------ contractions
    def xhat(self, factors):
        """Model output ``Xhat(v0) = sum_latent prod_a Z_a(v_a)``, shape ``output_shape``."""
        return self.engine(self.factor_indices, factors, self.output)

    def intensity(self, factors):
        """Full intensity tensor ``Lambda(v)`` over ``output + latent`` indices (|V| memory: small models only)."""
        return self.engine(self.factor_indices, factors, self.output + self.latent)

    def phi(self, factors, alpha, weight=None):
        """``sum_{v not in V_alpha} W(v0) prod_{a != alpha} Z_a(v_a)``, shape of factor ``alpha``.

        With ``weight=None`` the weight is the mask (or one everywhere). This is
        the Gamma rate statistic (MLSP'12 eq. 13) and, with ``weight = X / Xhat``,
        the EM numerator divided by ``Z_alpha``.
        """
        if weight is None:
            weight = self.mask
        indices = [self.factor_indices[a] for a in range(self.num_factors) if a != alpha]
        arrays = [factors[a] for a in range(self.num_factors) if a != alpha]
        if weight is not None:
            indices.append(self.output)
            arrays.append(np.asarray(weight, dtype=float))
        target = self.factor_indices[alpha]
        present = set("".join(indices)) | set(target)
        scale = 1.0
        for c in self.dims:
            if c not in present and c in set("".join(self.factor_indices)) | set(self.output):
                scale *= self.dims[c]
        if not indices:
            return np.full(self.shapes[alpha], scale)
        result = self.engine(indices, arrays, target)
        return result * scale if scale != 1.0 else np.array(result)

    # ------------------------------------------------------------- densities
    def log_likelihood(self, factors, X, xhat=None):
        """Poisson log-likelihood ``sum xlogy(X, Xhat) - Xhat - gammaln(X + 1)`` over observed entries."""
        if xhat is None:
            xhat = self.xhat(factors)
        with np.errstate(divide="ignore"):
            terms = xlogy(X, xhat) - xhat - gammaln(np.asarray(X, dtype=float) + 1.0)
        if self.mask is not None:
            terms = terms[self.mask]
        return float(np.sum(terms))

    def log_prior(self, factors):
        """Sum of the Gamma log densities of the free factors."""
        value = 0.0
        for a in self.free:
            z = factors[a]
            if np.any(z < 0):
                return -np.inf
            value += self._prior_constant[a] - float(np.vdot(self.prior_rate[a], z))
            if not self._prior_exponential[a]:
                with np.errstate(divide="ignore"):
                    value += float(np.sum(xlogy(self.prior_shape[a] - 1.0, z)))
        return value

    def sample_data(self, rng, factors):
        """Draw ``X ~ Poisson(Xhat)`` (int64, unobserved entries set to 0)."""
        X = rng.poisson(self.xhat(factors)).astype(np.int64)
        if self.mask is not None:
            X[~self.mask] = 0
        return X

    # ----------------------------------------------------------- compiled access
    def source_layout(self, X):
        """Flat addresses for compiled loops over the observed, non-zero entries of ``X``.

        Returns
        -------
        SourceLayout
        """
        X = np.asarray(X)
        observed = X > 0 if self.mask is None else (X > 0) & self.mask
        entries = np.flatnonzero(observed).astype(np.int64)
        coords = np.unravel_index(entries, self.output_shape)
        coord_of = dict(zip(self.output, coords))
        latent_shape = tuple(self.dims[c] for c in self.latent)
        latent_coords = np.unravel_index(np.arange(self.num_latent), latent_shape) if self.latent else ()
        latent_of = dict(zip(self.latent, latent_coords))
        sizes = [int(np.prod(s, dtype=np.int64)) for s in self.shapes]
        starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        obs = np.zeros((self.num_factors, entries.size), dtype=np.int64)
        lat = np.zeros((self.num_factors, max(self.num_latent, 1)), dtype=np.int64)
        for a, (indices, shape) in enumerate(zip(self.factor_indices, self.shapes)):
            strides = np.cumprod((shape[1:] + (1,))[::-1])[::-1]
            for c, stride in zip(indices, strides):
                if c in coord_of:
                    obs[a] += stride * coord_of[c]
                else:
                    lat[a] += stride * latent_of[c]
        return SourceLayout(entries, np.asarray(X).ravel()[entries].astype(np.int64), obs, lat, starts)


def _broadcast_prior(value, name, shapes, free):
    """Per-factor prior arrays from a scalar, or a sequence of per-factor scalars or arrays."""
    if np.isscalar(value) or (isinstance(value, np.ndarray) and value.ndim == 0):
        value = [value] * len(shapes)
    if isinstance(value, dict):
        value = [value.get(a) for a in range(len(shapes))]
    value = list(value)
    if len(value) != len(shapes):
        raise ParameterError(f"{name} has {len(value)} entries, expected one per factor ({len(shapes)})")
    out = []
    for a, (v, shape) in enumerate(zip(value, shapes)):
        if a not in free:
            out.append(None)
            continue
        if v is None:
            raise ParameterError(f"{name} of free factor {a} is missing")
        try:
            arr = np.array(np.broadcast_to(np.asarray(v, dtype=float), shape))
        except ValueError:
            raise ParameterError(f"{name} of factor {a} has shape {np.shape(v)}, "
                                 f"not broadcastable to {shape}") from None
        if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
            raise ParameterError(f"{name} of factor {a} must be finite and positive")
        out.append(arr)
    return tuple(out)


def pltf_model(spec, dims=None, *, prior_shape=1.0, prior_rate=1.0, fixed=None, mask=None):
    """Build a PLTF model from an einsum-style spec.

    Parameters
    ----------
    spec : str
        Factor index strings and the observed indices, e.g. ``"ik,kj->ij"``,
        ``"ir,jr,kr->ijk"``, ``"r,d,dtr->t"`` (convolution through a fixed delta tensor).
    dims : dict, optional
        Size of each index, a positive integer; sizes of indices carried by fixed factors or the
        mask may be omitted.
    prior_shape, prior_rate : float or sequence
        Gamma shape ``A`` and rate ``B``: one scalar for all free factors, or
        one entry per factor (scalar or array broadcastable to the factor's
        shape; ignored for fixed factors). Exponential priors are ``prior_shape=1``.
    fixed : dict, optional
        ``{factor position: array}`` of factors held fixed.
    mask : array of bool, optional
        Observed entries, shape of the output.

    Returns
    -------
    PLTFModel

    Raises
    ------
    ParameterError
        On a malformed spec, unknown, inconsistent or non-integer sizes, or invalid priors.
    """
    factor_indices, output = parse_spec(spec)
    # 2.5 and "2" were truncated or parsed by int(), NaN met a bare ValueError
    dims = {} if dims is None else {str(k): integer_at_least(f"dims[{k!r}]", v, 1) for k, v in dict(dims).items()}
    fixed = {} if fixed is None else dict(fixed)
    fixed_list = [None] * len(factor_indices)
    for a, value in fixed.items():
        if not (isinstance(a, (int, np.integer)) and 0 <= a < len(factor_indices)):
            raise ParameterError(f"fixed has key {a!r}; keys must be factor positions 0..{len(factor_indices) - 1}")
        value = np.asarray(value, dtype=float)
        if value.ndim != len(factor_indices[a]):
            raise ParameterError(f"fixed factor {a} has {value.ndim} axes, its indices {factor_indices[a]!r} need "
                                 f"{len(factor_indices[a])}")
        if not np.all(np.isfinite(value)) or np.any(value < 0):
            raise ParameterError(f"fixed factor {a} must be finite and non-negative")
        for c, n in zip(factor_indices[a], value.shape):
            if dims.setdefault(c, n) != n:
                raise ParameterError(f"index {c!r} has size {dims[c]} but fixed factor {a} gives {n}")
        fixed_list[a] = value
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.ndim != len(output):
            raise ParameterError(f"mask has {mask.ndim} axes, output {output!r} needs {len(output)}")
        for c, n in zip(output, mask.shape):
            if dims.setdefault(c, n) != n:
                raise ParameterError(f"index {c!r} has size {dims[c]} but the mask gives {n}")
    everything = "".join(factor_indices)
    missing = [c for c in dict.fromkeys(everything) if c not in dims]
    if missing:
        raise ParameterError(f"dims lacks the size of indices {missing} (spec {spec!r})")
    bad = [c for c in dims if c not in everything]
    if bad:
        raise ParameterError(f"dims names indices {bad} that are not in spec {spec!r}")
    if any(n < 1 for n in dims.values()):  # an empty fixed factor or mask
        raise ParameterError(f"dims={dims}: every size must be a positive integer")
    shapes = tuple(tuple(dims[c] for c in f) for f in factor_indices)
    free = tuple(a for a in range(len(factor_indices)) if fixed_list[a] is None)
    if not free:
        raise ParameterError("every factor is fixed: nothing to infer")
    shape_arrays = _broadcast_prior(prior_shape, "prior_shape", shapes, free)
    rate_arrays = _broadcast_prior(prior_rate, "prior_rate", shapes, free)
    ordered = {c: dims[c] for c in dict.fromkeys(everything)}
    return PLTFModel(spec, factor_indices, output, ordered, shape_arrays, rate_arrays, tuple(fixed_list), mask)
