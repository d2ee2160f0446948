"""Convergence diagnostics over chains: effective sample size, split-R̂, Monte-Carlo standard errors.

Conventions: ``draws`` has shape ``(num_chains, num_draws, *param_shape)``
(ArviZ's order); a 1-D array is one chain of a scalar and a 2-D array
``(num_chains, num_draws)``. Results have shape ``param_shape``.

The estimators follow Vehtari, Gelman, Simpson, Carpenter & Bürkner,
"Rank-normalization, folding, and localization: an improved R̂" (2021):
split chains, Geyer's initial monotone sequence, rank normalisation for the
bulk ESS and the rank R̂ (the same definitions as ArviZ's ``ess`` and ``rhat``).
"""

import numpy as np
from scipy import stats

from sepsti.core.errors import ParameterError

__all__ = ["effective_sample_size", "split_rhat", "mcse_mean", "mcse_variance", "to_inference_data"]


def _as_chains(draws):
    draws = np.asarray(draws, dtype=float)
    if draws.ndim == 1:
        draws = draws[None, :]
    if draws.ndim < 2 or draws.shape[1] < 4 or draws.size == 0:  # no chain, or no parameter: a reshape error
        raise ParameterError(f"draws of shape {draws.shape}: expected (num_chains >= 1, num_draws >= 4, ...), "
                             "none empty")
    param_shape = draws.shape[2:]
    return draws.reshape(draws.shape[0], draws.shape[1], -1), param_shape


def _split(draws):
    half = draws.shape[1] // 2
    return np.concatenate([draws[:, :half], draws[:, -half:]], axis=0)


def _z_scale(draws):
    # Rank-normalise each parameter over all chains and draws jointly.
    chains, num, params = draws.shape
    flat = draws.reshape(chains * num, params)
    ranks = stats.rankdata(flat, method="average", axis=0)
    z = stats.norm.ppf((ranks - 0.375) / (flat.shape[0] + 0.25))
    return z.reshape(chains, num, params)


def _autocovariance(draws):
    num = draws.shape[1]
    centred = draws - draws.mean(axis=1, keepdims=True)
    size = 1 << (2 * num - 1).bit_length()
    spectrum = np.fft.rfft(centred, n=size, axis=1)
    return np.fft.irfft(spectrum * np.conjugate(spectrum), n=size, axis=1)[:, :num] / num


def _ess(draws):
    """ESS of each column of ``draws`` (num_chains, num_draws, num_params), no splitting."""
    num_chains, num_draws, num_params = draws.shape
    acov = _autocovariance(draws).mean(axis=0)  # (num_draws, num_params), averaged over chains
    mean_var = acov[0] * num_draws / (num_draws - 1.0)
    var_plus = mean_var * (num_draws - 1.0) / num_draws
    if num_chains > 1:
        var_plus = var_plus + np.var(draws.mean(axis=1), axis=0, ddof=1)
    total = num_chains * num_draws
    result = np.empty(num_params)
    spread = draws.max(axis=(0, 1)) - draws.min(axis=(0, 1))
    for j in range(num_params):
        if not np.isfinite(spread[j]):  # a NaN or infinite draw (see effective_sample_size)
            result[j] = np.nan
            continue
        if spread[j] < np.finfo(float).resolution:
            result[j] = total
            continue
        rho = 1.0 - (mean_var[j] - acov[:, j]) / var_plus[j]
        kept = np.zeros(num_draws)
        kept[0], kept[1] = 1.0, rho[1]
        even, odd = 1.0, rho[1]
        t = 1
        # Geyer's initial positive sequence ...
        while t < num_draws - 3 and even + odd > 0.0:
            even, odd = rho[t + 1], rho[t + 2]
            if even + odd >= 0:
                kept[t + 1], kept[t + 2] = even, odd
            t += 2
        max_t = t - 2
        if even > 0:
            kept[max_t + 1] = even
        # ... made monotone.
        t = 1
        while t <= max_t - 2:
            if kept[t + 1] + kept[t + 2] > kept[t - 1] + kept[t]:
                kept[t + 1] = kept[t + 2] = 0.5 * (kept[t - 1] + kept[t])
            t += 2
        tau = -1.0 + 2.0 * kept[:max_t + 1].sum() + kept[max_t + 1:max_t + 2].sum()
        result[j] = total / max(tau, 1.0 / np.log10(total))
    return result


def effective_sample_size(draws, *, method="bulk"):
    """Effective sample size of each parameter.

    Parameters
    ----------
    draws : array_like, shape (num_chains, num_draws, *param_shape)
    method : {"bulk", "tail", "mean"}
        "bulk": on rank-normalised split chains (robust, ArviZ's default);
        "tail": the smaller ESS of the indicators of the 5 % and 95 % quantiles
        (the ESS of the tails, Vehtari et al. section 4.3; ArviZ's ``method="tail"``);
        "mean": on the raw split chains, the ESS that sets the MCSE of the mean.

    Returns
    -------
    ndarray, shape param_shape
        NaN for a parameter with a NaN or infinite draw (as ArviZ).
    """
    draws, param_shape = _as_chains(draws)
    if method == "bulk":
        values = _ess(_z_scale(_split(draws)))
    elif method == "tail":
        flat = draws.reshape(-1, draws.shape[2])
        low, high = np.quantile(flat, [0.05, 0.95], axis=0)
        values = np.minimum(_ess(_split((draws <= low).astype(float))), _ess(_split((draws <= high).astype(float))))
    elif method == "mean":
        values = _ess(_split(draws))
    else:
        raise ParameterError(f"method={method!r}: expected 'bulk', 'tail' or 'mean'")
    values[~np.all(np.isfinite(draws), axis=(0, 1))] = np.nan
    return values.reshape(param_shape)


def _rhat(draws):
    num = draws.shape[1]
    between = num * np.var(draws.mean(axis=1), axis=0, ddof=1)
    within = np.var(draws, axis=1, ddof=1).mean(axis=0)
    return np.sqrt((between / within + num - 1.0) / num)


def split_rhat(draws, *, method="rank"):
    """Split-R̂ of each parameter (needs at least two chains).

    Parameters
    ----------
    draws : array_like, shape (num_chains, num_draws, *param_shape)
    method : {"rank", "split"}
        "rank": max of the rank-normalised and the folded R̂ (Vehtari et al.);
        "split": the classic split-R̂ on raw draws.

    Returns
    -------
    ndarray, shape param_shape
    """
    draws, param_shape = _as_chains(draws)
    if draws.shape[0] < 2:
        raise ParameterError(f"split_rhat needs at least 2 chains, got {draws.shape[0]}")
    split = _split(draws)
    if method == "rank":
        folded = np.abs(split - np.median(split.reshape(-1, split.shape[2]), axis=0))
        values = np.maximum(_rhat(_z_scale(split)), _rhat(_z_scale(folded)))
    elif method == "split":
        values = _rhat(split)
    else:
        raise ParameterError(f"method={method!r}: expected 'rank' or 'split'")
    return values.reshape(param_shape)


def mcse_mean(draws):
    """Monte-Carlo standard error of the posterior mean: sd / sqrt(ESS_mean)."""
    chains, param_shape = _as_chains(draws)
    sd = chains.reshape(-1, chains.shape[2]).std(axis=0, ddof=1)
    return (sd / np.sqrt(_ess(_split(chains)))).reshape(param_shape)


def mcse_variance(draws):
    """Monte-Carlo standard error of the posterior variance (the MCSE of the mean of squared deviations)."""
    chains, param_shape = _as_chains(draws)
    centred = chains - chains.reshape(-1, chains.shape[2]).mean(axis=0)
    return mcse_mean(centred ** 2).reshape(param_shape)


def to_inference_data(draws, *, sample_stats=None):
    """Convert draws to an ArviZ ``InferenceData``.

    Parameters
    ----------
    draws : dict of str to ndarray, each of shape (num_chains, num_draws, ...)
        Posterior variables.
    sample_stats : dict of str to ndarray, shape (num_chains, num_draws), optional
        Per-draw sampler diagnostics (e.g. ``tree_depth``, ``diverging``).

    Returns
    -------
    arviz.InferenceData

    Raises
    ------
    ImportError
        When ArviZ is not installed (``pip install arviz``).
    """
    try:
        import arviz
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("to_inference_data needs ArviZ: pip install arviz") from error
    return arviz.from_dict(posterior={k: np.asarray(v) for k, v in draws.items()},
                           sample_stats=None if sample_stats is None else
                           {k: np.asarray(v) for k, v in sample_stats.items()})
