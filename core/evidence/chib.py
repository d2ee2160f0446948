"""Chib's marginal likelihood estimate from the Gibbs output of a PLTF model.

Two decompositions of ``log p(X) = log p(X, point) - log p(point | X)`` are offered.

``method="sources"`` (MLSP'12 eqs. 19-28). At a high-density point ``(S~, Z~)``
of the main run,

    log p(X) = log p(S~, Z~, X) - log p(Z~_1 | Z~_2:K, S~) - log p(S~ | X)
               - sum_{a=2..K} log p(Z~_a | Z~_a+1:K, S~)

where the first ordinate is an exact Gamma density, ``p(S~ | X)`` is the mean
of the multinomial full conditional over the main run (eq. 23), and each other
ordinate is the mean of a Gamma full conditional over a reduced run that clamps
``S~`` and ``Z~_a+1:K`` (eqs. 25-26).

``method="factors"`` (Chib 1995 with the sources as latent data). At a
high-density ``Z~``,

    log p(X) = log p(X | Z~) + log p(Z~) - sum_{a=1..K} log p(Z~_a | Z~_1:a-1, X),

each ordinate the mean of ``p(Z~_a | S, Z_a+1:K, Z~_1:a-1)`` over a run that
clamps ``Z~_1:a-1`` and samples the sources and ``Z_a:K`` (the main run for
``a = 1``). The sources are averaged over instead of being held at one draw,
so no ordinate is a density over the huge discrete space of ``S``: this is
the estimator to use once ``X`` holds more than a few dozen counts, where the
mean of ``p(S~ | Z, X)`` is carried by the one sample next to ``S~`` and eq. 23
is off by tens to hundreds of nats.

Variance control for "factors": ``point="mean"`` takes ``Z~`` as the posterior
mean of the kept draws (a draw of the chain towers over the other terms of its
own ordinate); an ordinate whose run leaves only its block's factor free is a
product over the output indices of the block (those slices never share an
observed entry, so they are independent) and is estimated as the product of
the slices' means; ``blocks="columns"`` splits each factor into the slices of
its rank index, the first factor's slices averaged over the permutations of
the exchangeable components (Neal 1999; Berkhof, van Mechelen and Gelman 2003).

Means are taken in log space with log-sum-exp, each divided by its own number
of samples (eq. 28 writes this normaliser as ``log (K-1)MN``). ``Z_1 .. Z_K``
are the model's free factors in spec order; fixed factors are constants. The
Monte-Carlo standard error adds over the estimated ordinates the delta-method
variance of ``log mean w``, ``(MCSE(mean w) / mean w)^2``, with the MCSE from
the effective sample size of ``w``; when one sample carries the mean it is
itself unreliable (the ``max_weight_fraction`` of each ordinate shows it).
That error is the run's at its point; :func:`chib_replicates` runs the
estimator several times independently, each run choosing its own point, and
takes the error from their spread (docs/chib.md: on the README's PARAFAC
example the runs spread twice as widely as their own errors say).

Conventions: ``X`` is an integer count array shaped like the model output.
"""

import warnings
from typing import NamedTuple

import numpy as np
from scipy.special import gammaln, logsumexp

from sepsti.core.checks import integer_at_least, integers_at_least, real_array
from sepsti.core.errors import ParameterError
from sepsti.core.models.pltf import gamma_log_pdf, pltf_model
from sepsti.core.random import stream
from sepsti.core.samplers import gibbs
from sepsti.core.samplers.diagnostics import mcse_mean
from sepsti.core.samplers.driver import run_chain

__all__ = ["ChibReplicates", "ChibResult", "chib_log_marginal_likelihood", "chib_poisson_nmf", "chib_replicates",
           "log_mean_exp"]

METHODS = ("sources", "factors")
BLOCKS = ("factors", "columns")
POINTS = ("draw", "mean")
# above this share of one sample in an ordinate's mean, the mean (and its delta-method MCSE) rests on one draw
MAX_WEIGHT_WARNING = 0.5


class ChibResult(NamedTuple):
    """Chib's estimate and the pieces it sums.

    Attributes
    ----------
    log_marginal_likelihood : float
        ``log p(X)``.
    stderr : float
        Monte-Carlo standard error of the ordinates' means at this run's point. It leaves out what depends on
        the point: where an ordinate's terms are heavy-tailed it understates the error (twofold on the
        README's PARAFAC example); :func:`chib_replicates` gives one from independent runs (docs/chib.md).
    method : str
        ``"sources"`` or ``"factors"``.
    log_joint : float
        ``log p(S~, Z~, X)`` ("sources") or ``log p(X | Z~) + log p(Z~)`` ("factors").
    ordinate_names : tuple of str
        ``"S"`` and the factors' index strings, in the order of ``log_ordinates``.
    log_ordinates : ndarray
        The subtracted log ordinates: ("sources") ``log p(S~ | X)``, then
        ``log p(Z~_a | Z~_a+1:K, S~)`` for ``a = 1..K`` (the first exact);
        ("factors") ``log p(Z~_a | Z~_1:a-1, X)`` for ``a = 1..K``.
    ordinate_stderr : ndarray
        MCSE of each ordinate (0 for an exact one).
    max_weight_fraction : ndarray
        Largest share of one sample in each ordinate's mean (1/n is ideal, near 1 is unreliable).
    ordinate_samples : list of ndarray or None
        The log values averaged for each ordinate (None for an exact one); shape ``(n, slices)`` for an
        ordinate that factorises over the output indices of its block (the product of the slices' means).
    factor_order : tuple of int
        Positions of the free factors ``Z_1 .. Z_K``.
    point : tuple of ndarray
        ``Z~`` (all factors).
    log_likelihood_trace : ndarray
        ``log p(X | Z)`` of every sweep of the main run.
    """

    log_marginal_likelihood: float
    stderr: float
    method: str
    log_joint: float
    ordinate_names: tuple
    log_ordinates: np.ndarray
    ordinate_stderr: np.ndarray
    max_weight_fraction: np.ndarray
    ordinate_samples: list
    factor_order: tuple
    point: tuple
    log_likelihood_trace: np.ndarray


def log_mean_exp(log_values):
    """``log mean exp(log_values)`` and its MCSE (delta method, autocorrelation-aware)."""
    log_values = np.asarray(log_values, dtype=float)
    n = log_values.size
    if n == 0:  # (nan, inf) with a RuntimeWarning
        raise ParameterError("log_values is empty: no mean to take")
    estimate = float(logsumexp(log_values) - np.log(n))
    if n < 4 or not np.isfinite(estimate):
        return estimate, float("inf") if n < 4 else float("nan")
    weights = np.exp(log_values - log_values.max())
    if np.all(weights == weights[0]):
        return estimate, 0.0
    return estimate, float(mcse_mean(weights) / weights.mean())


def _log_mean_exp_slices(log_values):
    """``log_mean_exp`` of a run, or for a run of shape (M, slices) of independent slices the sum over slices."""
    if log_values.ndim == 1:
        return log_mean_exp(log_values)
    parts = [log_mean_exp(column) for column in log_values.T]
    return float(sum(e for e, _ in parts)), float(np.sqrt(sum(se ** 2 for _, se in parts)))


def _max_fraction(log_values):
    if log_values is None:
        return 0.0
    return float(np.max(np.exp(np.max(log_values, axis=0) - logsumexp(log_values, axis=0))))


def _validate_counts(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ParameterError(f"{name}={value!r} must be an integer >= {minimum}")
    return int(value)


def chib_log_marginal_likelihood(model, X, *, num_burn_in, num_samples, num_reduced=None, method="sources",
                                 order=None, seed=0, replicate=0, factors=None, blocks="factors", point="draw",
                                 progress=False):
    """Estimate ``log p(X)`` under a PLTF model by Chib's method.

    Parameters
    ----------
    model : sepsti.core.models.pltf.PLTFModel
    X : array_like
        Integer counts, shape ``model.output_shape``.
    num_burn_in : int
        Gibbs sweeps discarded before the ``num_samples`` kept ones.
    num_samples : int
        Kept sweeps N of the main run.
    num_reduced : int, optional
        Sweeps M of each reduced run (default ``num_samples``).
    method : {"sources", "factors"}
        The decomposition (see the module docstring): MLSP'12 eq. 28, or the
        ordinates of the factors with the sources averaged over.
    order : sequence of int, optional
        The free factors' positions in the order ``Z_1 .. Z_K`` of the
        decomposition (default: spec order). Any order is valid; the
        estimator's variance is usually lowest with the smallest factor
        first for "factors" (its ordinate averages over the whole posterior).
    seed : int
        Streams ``stream(seed, 0)`` (main run) and ``stream(seed, a)`` (reduced run a).
    replicate : int
        An independent run at the same seed: replicate r > 0 draws from ``stream(seed, a, r)`` instead
        (:func:`chib_replicates` runs several).
    factors : tuple of ndarray, optional
        Starting factors (default: a draw from the prior).
    blocks : {"factors", "columns"}
        With ``method="factors"``, the blocks whose ordinates are multiplied:
        whole factors, or each factor split into its slices along its rank
        index (the first latent index it shares with another free factor), one
        reduced run of ``num_reduced`` sweeps per slice after the first. Each
        ordinate is then the density of one column, so the conditional is never
        much narrower than the marginal in more than a few directions (the
        rescaling ridge of each component), and one sample no longer carries
        the mean; the cost is ``(number of slices - 1) * num_reduced`` sweeps.
    point : {"draw", "mean"}
        ``Z~`` for ``method="factors"``: the kept draw of highest ``log p(X | Z) + log p(Z)``, or the
        posterior mean of the kept draws. A draw of the chain was itself drawn from one of the averaged
        conditionals, so that sample's term towers over the others once the conditional is much narrower
        than the posterior; the mean is no sample's draw. ``method="sources"`` always uses a draw.
    progress : bool
        Progress bars on stderr.

    Returns
    -------
    ChibResult

    Raises
    ------
    ParameterError
        On invalid counts, method or data, or an ``order`` that is not a permutation of the free factors'
        positions (a float such as 1.5 among them).

    Warns
    -----
    UserWarning
        When one sample carries more than half of an ordinate's mean.

    References
    ----------
    S. Chib, "Marginal likelihood from the Gibbs output", JASA 90 (1995). MLSP'12 eqs. 19-28.
    """
    num_burn_in = _validate_counts("num_burn_in", num_burn_in, 0)
    num_samples = _validate_counts("num_samples", num_samples, 4)
    num_reduced = num_samples if num_reduced is None else _validate_counts("num_reduced", num_reduced, 4)
    if method not in METHODS:
        raise ParameterError(f"method={method!r}: expected one of {METHODS}")
    if blocks not in BLOCKS:
        raise ParameterError(f"blocks={blocks!r}: expected one of {BLOCKS}")
    if point not in POINTS:
        raise ParameterError(f"point={point!r}: expected one of {POINTS}")
    if point != "draw" and method != "factors":
        raise ParameterError(f"point={point!r} needs method='factors'")
    if blocks != "factors" and method != "factors":
        raise ParameterError(f"blocks={blocks!r} needs method='factors'")
    X = model.validate_data(X, integer=True)
    if order is None:
        order = model.free
    else:
        order = integers_at_least("order", order, 0)  # int() took 1.5 as 1
        if sorted(order) != sorted(model.free):
            raise ParameterError(f"order={order} must be a permutation of the free factors {model.free}")
    replicate = integer_at_least("replicate", replicate, 0)

    def rng_for(key):
        return stream(seed, key) if replicate == 0 else stream(seed, key, replicate)

    rng = rng_for(0)
    state = gibbs.init(model, X, factors, rng=rng)
    kernel = gibbs.build_kernel(model, X)
    first = order[0]
    best = {"score": -np.inf}

    def keep(s):
        # The point is the highest-density sample after burn-in: of (S, Z) for eq. 19, of Z for "factors".
        score = s.logdensity if method == "sources" else s.log_likelihood + model.log_prior(s.factors)
        if score > best["score"]:
            best.update(score=score, factors=s.factors, stats=s.source_stats, log_factorial=s.log_source_factorial)
        if point == "mean":
            best["sum"] = [z.copy() for z in s.factors] if "sum" not in best else [
                total + z for total, z in zip(best["sum"], s.factors)]
        if method == "sources":
            return tuple(s.factors[a] for a in order)
        # what the first ordinate needs: the Gamma shape and rate of Z_1 at this sample
        return (model.prior_shape[first] + s.source_stats[first], model.prior_rate[first] + model.phi(s.factors, first))

    result = run_chain(kernel, state, rng, num_steps=num_burn_in + num_samples, burn_in=num_burn_in,
                       transform=keep, progress=progress, desc=f"Chib ({method}): Gibbs")
    mean_point = point == "mean"
    point = best["factors"]
    if mean_point:
        point = tuple(point[a] if a not in model.free else total / num_samples for a, total in enumerate(best["sum"]))
    names = tuple(model.factor_indices[a] for a in order)
    if method == "sources":
        log_joint, values = _sources(model, X, order, point, best["stats"], best["log_factorial"], result.samples,
                                     num_samples, num_reduced, rng_for, progress)
        names = ("S",) + names
    else:
        log_joint = model.log_likelihood(point, X) + model.log_prior(point)
        block_list = _blocks(model, order, blocks)
        a, where = block_list[0]
        exchangeable = _exchangeable(model, block_list)
        first_values = np.array([_block_log_pdf(model, point, block_list, 0, shape, rate, exchangeable)
                                 for shape, rate in zip(*result.samples)])
        values = [first_values] + _block_runs(model, X, block_list, point, num_reduced, rng_for, exchangeable)
        if blocks != "factors":
            names = tuple(model.factor_indices[a] + _slice_name(where) for a, where in block_list)
    estimates, errors = zip(*[(v, 0.0) if np.isscalar(v) else _log_mean_exp_slices(v) for v in values])
    log_ordinates = np.asarray(estimates, dtype=float)
    ordinate_se = np.asarray(errors, dtype=float)
    samples = [None if np.isscalar(v) else v for v in values]
    value = log_joint - float(np.sum(log_ordinates))
    fractions = np.array([_max_fraction(v) for v in samples])
    if np.any(fractions > MAX_WEIGHT_WARNING):
        worst = int(np.argmax(fractions))
        warnings.warn(f"Chib ordinate {names[worst]!r} is carried by one sample (share {fractions[worst]:.2f} of the "
                      "mean): the estimate and its standard error rest on one draw"
                      + ("; use method='factors'" if method == "sources" else
                         "; chib_replicates gives an error from independent runs (docs/chib.md)"),
                      UserWarning, stacklevel=2)
    return ChibResult(float(value), float(np.sqrt(np.sum(ordinate_se ** 2))), method, float(log_joint), names,
                      log_ordinates, ordinate_se, fractions, samples, order,
                      point, np.asarray(result.info.log_likelihood))


def _gamma_ordinate(model, factors, point, a, stats):
    shape = model.prior_shape[a] + stats
    rate = model.prior_rate[a] + model.phi(factors, a)
    return float(np.sum(gamma_log_pdf(point[a], shape, rate)))


def _sources(model, X, order, point, stats, log_factorial, samples, num_samples, num_reduced, rng_for, progress):
    """MLSP'12 eqs. 21-26: exact first ordinate, S ordinate over the main run, clamped reduced runs."""
    log_joint = gibbs.log_joint(model, point, stats, log_factorial)
    observed = X[model.mask] if model.mask is not None else X
    log_factorial_X = float(np.sum(gammaln(observed + 1.0)))
    source_values = np.empty(num_samples)
    current = list(point)
    for i in range(num_samples):
        for j, a in enumerate(order):
            current[a] = samples[j][i]
        source_values[i] = gibbs.source_log_prob(model, current, stats, log_factorial, log_factorial_X, X)
    values = [source_values, _gamma_ordinate(model, point, point, order[0], stats[order[0]])]
    reduced = []
    for j in range(len(order) - 1, 0, -1):
        a = order[j]
        run_rng = rng_for(j)
        kernel = gibbs.build_kernel(model, X, clamped_sources=(stats, log_factorial), clamped_factors=order[j + 1:],
                                    track_density=False)
        state = gibbs.GibbsState(point, stats, log_factorial, 0.0, 0.0)
        run = np.empty(num_reduced)
        for m in range(num_reduced):
            state, _ = kernel(run_rng, state)
            run[m] = _gamma_ordinate(model, state.factors, point, a, stats[a])
        reduced.insert(0, run)
    return log_joint, values + reduced


def _blocks(model, order, blocks):
    """The ordinate blocks ``(factor, index)`` in order: whole factors, or slices along each rank index."""
    if blocks == "factors":
        return [(a, (...,)) for a in order]
    result = []
    for a in order:
        indices = model.factor_indices[a]
        shared = [c for c in indices if c in model.latent
                  and any(c in model.factor_indices[b] for b in model.free if b != a)]
        if not shared:
            result.append((a, (...,)))
            continue
        axis = indices.index(shared[0])
        for r in range(model.shapes[a][axis]):
            result.append((a, (slice(None),) * axis + (r, Ellipsis)))
    return result


def _slice_name(where):
    return "" if where == (...,) else f"[{where[-2]}]"


def _exchangeable(model, block_list):
    """Whether the components of the first factor's slices are exchangeable a priori (label symmetry).

    True when the first factor is split along an index that every factor carrying it shares as a free
    factor with priors constant along it: the posterior is then invariant under permuting the components.
    """
    a, where = block_list[0]
    if where == (...,):
        return False
    c = model.factor_indices[a][len(where) - 2]
    for b, indices in enumerate(model.factor_indices):
        if c not in indices:
            continue
        if b not in model.free:
            return False
        axis = indices.index(c)
        for param in (model.prior_shape[b], model.prior_rate[b]):
            full = np.broadcast_to(param, model.shapes[b])
            if not np.all(full == np.take(full, [0], axis=axis)):
                return False
    return True


def _block_log_pdf(model, point, block_list, j, shape, rate, exchangeable):
    """``log p(point[block_j] | S, rest)`` from the Gamma parameters of its factor.

    With ``exchangeable`` and block j a slice of the first factor, the components not clamped before
    block j (slices j, j+1, ... of that factor) are exchangeable under the run's target, so the density
    is averaged over them (Rao-Blackwellisation over the permutations): the mean is then right whether
    or not the chain switches labels, instead of R!/(R-j)! too high when it stays in one labelling.
    """
    a, where = block_list[j]
    full = point[a].shape
    shape, rate = np.broadcast_to(shape, full), np.broadcast_to(rate, full)
    if not exchangeable or a != block_list[0][0]:
        values = gamma_log_pdf(point[a][where], shape[where], rate[where])
        if not _factorizes(model, block_list, j):
            return float(np.sum(values))
        # one value per output slice: shape (slices,), each an independent ordinate
        indices = _block_indices(model, a, where)
        keep = tuple(d for d, c in enumerate(indices) if c in model.output)
        moved = np.moveaxis(values, keep, tuple(range(len(keep))))
        return np.sum(moved.reshape(int(np.prod([values.shape[d] for d in keep])), -1), axis=1)
    axis = len(where) - 2
    others = np.arange(j, full[axis])
    target = np.expand_dims(point[a][where], axis)
    values = np.sum(gamma_log_pdf(target, np.take(shape, others, axis=axis), np.take(rate, others, axis=axis)),
                    axis=tuple(d for d in range(len(full)) if d != axis))
    return float(logsumexp(values) - np.log(others.size))


def _block_indices(model, a, where):
    indices = model.factor_indices[a]
    return indices if where == (...,) else indices[:len(where) - 2] + indices[len(where) - 1:]


def _factorizes(model, block_list, j):
    """Whether block j's ordinate is a product over the output indices of its entries.

    When every other free factor is clamped (blocks 1..j-1 cover them), the entries of factor a with
    different values of an output index never share an observed entry, so the run's target factorises
    over those slices: the ordinate is then the product of per-slice means of one run (each an ordinate
    of a few dimensions) rather than the mean of their product.
    """
    a = block_list[j][0]
    if not any(c in model.output for c in _block_indices(model, a, block_list[j][1])):
        return False
    others = [b for b in model.free if b != a]
    clamped = block_list[:j]
    return all(_num_blocks(clamped, b) == _num_blocks(block_list, b) for b in others)


def _block_runs(model, X, block_list, point, num_reduced, rng_for, exchangeable):
    """Ordinates j = 2..B: clamp blocks 1..j-1 at the point, sample S and the rest, average p(block_j | rest)."""
    layout = model.source_layout(X)
    runs = []
    for j in range(1, len(block_list)):
        clamped = block_list[:j]
        whole = {a for a in model.free if _num_blocks(clamped, a) == _num_blocks(block_list, a)}
        partial = [(b, w) for b, w in clamped if b not in whole]
        updated = [a for a in model.free if a not in whole]
        a, where = block_list[j]
        rng = rng_for(j)
        factors = list(point)
        run = []
        for m in range(num_reduced):
            stats, _ = gibbs.draw_sources(rng, model, layout, factors)
            for b in updated:
                factors[b] = gibbs.draw_factor(rng, model, factors, b, stats[b])
                for c, w in partial:
                    if c == b:
                        factors[b][w] = point[b][w]
            # the rate of Z_a does not involve Z_a: the state gives p(block_j | S, everything else)
            run.append(_block_log_pdf(model, point, block_list, j, model.prior_shape[a] + stats[a],
                                      model.prior_rate[a] + model.phi(factors, a), exchangeable))
        runs.append(np.array(run))
    return runs


def _num_blocks(block_list, a):
    return sum(b == a for b, _ in block_list)


def chib_poisson_nmf(X, rank, prior_rate, *, num_burn_in, num_samples, num_reduced=None, method="sources", seed=0,
                     replicate=0, progress=False, blocks="factors", point="draw"):
    """Chib's ``log p(X | rank)`` for Poisson NMF with exponential priors (ICASSP'16 §4.1.2, eq. 13).

    ``W_ik ~ Exp(prior_rate)``, ``H_kj ~ Exp(prior_rate)``, ``X_ij ~ Poisson((WH)_ij)``.

    Parameters
    ----------
    X : array_like of int, shape (I, J)
    rank : int
    prior_rate : float or (float, float)
        Rate of the exponential priors (one for both, or ``(rate_W, rate_H)``).
    num_burn_in, num_samples, num_reduced, method, seed, replicate, progress, blocks, point
        As in :func:`chib_log_marginal_likelihood` (ICASSP'16: 7000, 2000, 5000).

    Returns
    -------
    ChibResult
        Factors are ordered ``(W, H)``.
    """
    X = real_array("X", X)
    if X.ndim != 2:
        raise ParameterError(f"X must be a matrix, got shape {X.shape}")
    rank = _validate_counts("rank", rank, 1)
    rates = (prior_rate, prior_rate) if np.ndim(prior_rate) == 0 else tuple(prior_rate)
    model = pltf_model("ik,kj->ij", dict(i=X.shape[0], k=rank, j=X.shape[1]), prior_shape=1.0, prior_rate=rates)
    return chib_log_marginal_likelihood(model, X, num_burn_in=num_burn_in, num_samples=num_samples,
                                        num_reduced=num_reduced, method=method, seed=seed, replicate=replicate,
                                        progress=progress, blocks=blocks, point=point)


class ChibReplicates(NamedTuple):
    """Chib's estimate from independent runs, with the standard error of their spread.

    Attributes
    ----------
    log_marginal_likelihood : float
        The mean of the runs' estimates of ``log p(X)``.
    stderr : float
        Their standard deviation (ddof 1) over the square root of their number.
    estimates : ndarray
        Each run's ``log p(X)``.
    runs : tuple of ChibResult
        Each run, with its own point, ordinates and within-run standard error.
    """

    log_marginal_likelihood: float
    stderr: float
    estimates: np.ndarray
    runs: tuple


def chib_replicates(estimator, *args, num_replicates=4, **settings):
    """Run a Chib estimator ``num_replicates`` times independently and combine the runs.

    A run's own standard error (``ChibResult.stderr``) is that of its ordinates' means at its point; the
    spread of runs that each choose their own point also holds what depends on the point, which that
    error leaves out where an ordinate's terms are heavy-tailed (docs/chib.md).

    Parameters
    ----------
    estimator : callable
        :func:`chib_log_marginal_likelihood` or :func:`chib_poisson_nmf`.
    *args, **settings
        Its arguments, ``seed`` among them; run r is called with ``replicate=r`` (run 0 is the plain call).
    num_replicates : int
        At least 2.

    Returns
    -------
    ChibReplicates

    Warns
    -----
    UserWarning
        Once, counting the runs in which one sample carries more than half of an ordinate's mean.

    Examples
    --------
    >>> chib_replicates(chib_poisson_nmf, X, 3, 1.0, num_burn_in=500, num_samples=1000,
    ...                 method="factors")  # doctest: +SKIP
    """
    num_replicates = integer_at_least("num_replicates", num_replicates, 2)
    if "replicate" in settings:
        raise ParameterError("replicate: set by chib_replicates for each run; give seed instead")
    with warnings.catch_warnings():  # a run carried by one sample is counted below: its spread is in the error
        warnings.filterwarnings("ignore", message="Chib ordinate")
        runs = tuple(estimator(*args, replicate=r, **settings) for r in range(num_replicates))
    carried = sum(run.max_weight_fraction.max() > MAX_WEIGHT_WARNING for run in runs)
    if carried:
        warnings.warn(f"Chib: {carried} of {num_replicates} runs have an ordinate carried by one sample; their spread "
                      "is in the standard error, but a bias they share is not: compare a longer run (docs/chib.md)",
                      UserWarning, stacklevel=2)
    estimates = np.array([run.log_marginal_likelihood for run in runs])
    return ChibReplicates(float(estimates.mean()), float(estimates.std(ddof=1) / np.sqrt(num_replicates)),
                          estimates, runs)
