"""Rank selection for Poisson NMF by STI: the NMF chain factory of :mod:`sepsti.core.evidence.rank_selection`.

Conventions
-----------
X is (n_rows, n_cols), non-negative; W (n_rows, R) and H (R, n_cols) carry
exponential priors of rate lambda. Each chain is a block-parallel (p)SGLD
chain (:func:`sepsti.core.parallel.blocks.run_block_chain`) on the power posterior;
its random start comes from ``stream(seed, R, i, r)``, its EM start (shared by
the chains of replicate r of rank R) from ``stream(seed, R, SHARED_KEY, r)``,
the noise of W's block b from ``stream(seed, R, i, r, b)`` and of H's from
``stream(seed, R, i, r, B + b)`` (:func:`sepsti.core.parallel.blocks.init_state`).

Presets (:data:`PRESETS`): ``reference`` (the default) runs the path from
a log-space Gaussian reference with full-data MALA chains
(:mod:`sepsti.core.evidence.reference_path`), validated against closed forms from
small counts to speech scale (``recipes/sti_validation.py``,
``docs/rank_selection.md``); ``blocks`` is block-parallel pSGLD on the
prior-to-posterior path, low by several nats even on small counts (7.65 +- 1.65 at rank 1 on 100 x 75
counts, beyond its own standard errors) and by millions at speech scale; ``paper`` reproduces ICASSP'16 §4.2
(speech: T = 5 uniform, K = 1250 keeping 500, 8 x 8 blocks, a = 5e-7,
b = 0.51, lambda = 4e-4) and is off by orders of magnitude where the truth
is known.
"""

import numpy as np

from sepsti.core.checks import distinct_ranks, is_number, scalar
from sepsti.core.errors import ParameterError
from sepsti.core.evidence.rank_selection import (SHARED_KEY, ChainRecord, ChainSettings, Preset, TemperatureGrid,
                                                 balance, data_digest, resolve_settings, select_rank)
from sepsti.core.evidence.reference_path import REFERENCE_PRESET
from sepsti.core.evidence.sti import LangevinSettings
from sepsti.core.models.poisson_nmf import prior_rate_at, validate_nonnegative_matrix, validate_prior_rate
from sepsti.core.random import stream

__all__ = ["NMFChains", "PRESETS", "RAYLEIGH_VARIANCE_RATIO", "em_start", "rayleigh_dispersion", "select_rank_sti",
           "smallest_dispersion", "validate_identifiable_ranks", "warm_up"]

#: Named settings of :func:`select_rank_sti`.
PRESETS = {
    "reference": REFERENCE_PRESET,
    "blocks": Preset(TemperatureGrid(10, "power", 5.0, "simpson"),
                     ChainSettings(sampler="psgld", num_steps=10_000, num_keep=2_000, step_a=1e-7, step_b=0.51,
                                   alpha=0.99, sigma=0.1, num_blocks=8, evaluate="before_update", init="random"),
                     4),
    "paper": Preset(TemperatureGrid(5, "uniform", 1.0, "trapezoid"),
                    ChainSettings(sampler="sgld", num_steps=1250, num_keep=500, step_a=5e-7, step_b=0.51,
                                  sigma=1e-5, num_blocks=8, evaluate="after_update", init="em",
                                  init_iterations=100),
                    1),
}


#: How the warnings name the block-parallel samplers.
_SAMPLER_NAMES = {"psgld": "pSGLD", "sgld": "SGLD"}


#: The largest total of the modelled data X / dispersion, 2**53: beyond it float64 does not tell a count from the
#: next. The estimates lose their precision long before they stop being finite: on 12 x 10 counts totalling 742
#: the reference preset's standard error is 0.06 at dispersion 1, 0.66 at 1e-10, 489 at 1e-15, 2e7 at 1e-20 and
#: infinite from 1e-25 on.
_LARGEST_TOTAL = 2.0 ** 53


def validate_identifiable_ranks(ranks, shape, *, sampler):
    """Warn of ranks the data cannot identify; returns ``ranks``.

    At R = min(n_rows, n_cols) W H can already equal any matrix, so larger
    ranks describe nothing more (their evidence only measures the prior);
    from R (n_rows + n_cols) > n_rows n_cols on the model has more parameters
    than the data have entries. At R = min(n_rows, n_cols) itself many
    directions keep the fit; the reference path's estimate there is checked
    on small counts only (docs/rank_selection.md), where the block-parallel
    chains miss by as much as at rank 1.

    Parameters
    ----------
    ranks : sequence of int
    shape : tuple of int
        ``(n_rows, n_cols)`` of the data.
    sampler : {"mala", "psgld", "sgld"}
        The chains run (:class:`ChainSettings`): what the warning at R = min(n_rows, n_cols) says.
    """
    import warnings

    rows, cols = shape
    beyond = [r for r in ranks if r > min(rows, cols)]
    full = [r for r in ranks if r == min(rows, cols)]
    crowded = [r for r in ranks if r * (rows + cols) > rows * cols and r not in beyond + full]
    if full:
        ridge = (f"rank {full[0]} = min{tuple(shape)}: beyond the scalings, W -> WQ, H -> Q^-1 H leaves the fit "
                 "unchanged for many Q")
        checked = ("the reference path's estimate there is checked against the exact value on small counts only "
                   "(8 x 2 to 20 x 2 at rank 2, 12 x 3 at rank 3), within its standard errors (docs/rank_selection.md)")
        if sampler == "mala":
            message = f"{ridge}; {checked}"
        else:
            message = (f"{ridge}; on 8 x 2 and 10 x 2 counts the block-parallel {_SAMPLER_NAMES[sampler]} chains miss "
                       f"the exact value there by as much as at rank 1, and {checked}")
        warnings.warn(message, UserWarning, stacklevel=3)
    if beyond:
        warnings.warn(f"ranks {beyond} exceed min{tuple(shape)} = {min(rows, cols)}, where a factorization already "
                      f"fits any {rows} x {cols} matrix: the data cannot identify them", UserWarning, stacklevel=3)
    if crowded:
        warnings.warn(f"ranks {crowded} have more parameters (R x {rows + cols}) than the data have entries "
                      f"({rows * cols})", UserWarning, stacklevel=3)
    return ranks


def smallest_dispersion(X):
    """The smallest dispersion ``X`` may be divided by: sum(X) / 2**53.

    Divided by it, X totals 2**53 counts, beyond which float64 does not tell a count from the next.

    Returns
    -------
    float
    """
    return float(np.sum(X, dtype=np.float64)) / _LARGEST_TOTAL


def em_start(X, rank, rng, *, prior_rate, iterations, threads=None):
    """A chain start: ``iterations`` MAP-EM iterations from a random start drawn from ``rng``.

    The result does not depend on ``threads`` (EM worker threads, each with one BLAS thread).
    """
    from sepsti.core.factorization.em import poisson_nmf_em
    from sepsti.core.blas import single_threaded_blas
    from sepsti.core.parallel.blocks import initial_factors

    W0, H0 = initial_factors(X, rank, rng)
    if iterations == 0:
        return W0, H0
    with single_threaded_blas():
        fit = poisson_nmf_em(X, W0, H0, prior_rate_W=prior_rate, prior_rate_H=prior_rate, max_iter=int(iterations),
                             tol=0, threads=threads)
    return np.ascontiguousarray(fit.W, dtype=X.dtype), np.ascontiguousarray(fit.H, dtype=X.dtype)


#: Var / mean^2 of the magnitude of a circular complex Gaussian (Rayleigh): 4 / pi - 1.
RAYLEIGH_VARIANCE_RATIO = 4.0 / np.pi - 1.0


def rayleigh_dispersion(X):
    """The dispersion of STFT magnitudes that owe their spread to the STFT alone: (4/pi - 1) mean(X).

    The magnitude of a complex Gaussian STFT coefficient with mean magnitude
    mu varies with variance (4/pi - 1) mu^2 (a Rayleigh variable). Pearson's
    dispersion sum((x - mu)^2 / mu) / N of a model whose means mu are right
    then has expectation (4/pi - 1) mean(mu) = (4/pi - 1) mean(X): the
    quasi-Poisson dispersion of the data's own noise, with no lack of fit
    counted in and no factorization, rank, start or iteration count
    involved; it scales with the data, so X / dispersion does not change
    when the audio is scaled (``docs/rank_selection.md``).

    Returns
    -------
    float
    """
    return float(RAYLEIGH_VARIANCE_RATIO * np.mean(X, dtype=np.float64))


class NMFChains:
    """Block-parallel (p)SGLD chains of Poisson NMF for :func:`sepsti.core.evidence.rank_selection.select_rank`.

    (``sampler="mala"`` selects :class:`sepsti.core.evidence.reference_path.ReferencePathChains` instead.)

    Parameters
    ----------
    X : ndarray, shape (n_rows, n_cols)
        The data as modelled (already divided by any dispersion).
    chain : ChainSettings
    prior_rate : float or "matched"
        See :func:`sepsti.core.models.poisson_nmf.prior_rate_at`.
    model_settings : dict
        Recorded beside the chain settings (e.g. the dispersion).
    """

    collective = False

    def __init__(self, X, chain, *, prior_rate, model_settings):
        if chain.subset_size is not None or chain.num_blocks is None:
            raise ParameterError("Poisson NMF chains use the block schedule: give num_blocks, not subset_size")
        if chain.num_blocks > min(X.shape):
            raise ParameterError(f"num_blocks={chain.num_blocks} must lie in [1, {min(X.shape)}] for X of "
                                 f"shape {X.shape}")
        if chain.evaluate == "full":
            raise ParameterError("evaluate='full' is not available for NMF chains: use 'before_update' or "
                                 "'after_update'")
        if chain.init not in ("random", "em"):
            raise ParameterError(f"init={chain.init!r}: expected 'random' or 'em'")
        self.X = X
        self.chain = chain
        self.prior_rate = validate_prior_rate(prior_rate)
        self.data_mean = float(np.mean(X, dtype=np.float64))
        self.settings = {"model": {"name": "poisson_nmf", "prior_rate": self.prior_rate, **model_settings},
                         "chain": chain.as_dict(), "dtype": X.dtype.name, "shape": list(X.shape)}
        self.data_digest = data_digest([X])
        self._starts = {}

    def rate_at(self, rank):
        """The rate of the Exp priors on W and H at ``rank``."""
        return prior_rate_at(self.prior_rate, self.data_mean, rank)

    def _is_prior_draw(self, task):
        return self.chain.exact_prior and task.temperature == 0.0

    def trace_length(self, task):
        if self._is_prior_draw(task):
            return int(self.chain.prior_draws or self.chain.num_keep)
        return int(self.chain.num_keep)

    def units(self, task):
        return self.chain.steps_at(task.index)

    def cost(self, task):
        """Relative run time: about linear in R plus a fixed part per entry; a t = 0 chain computes no gradient."""
        return (task.rank + 16.0) * self.units(task) * (1.0 if task.temperature > 0 else 0.6)

    def prepare(self, tasks, *, seed, comm, threads):
        """Compile the kernels (on this thread), then the EM starts of the (rank, replicate) pairs still to run,
        each computed once, spread over the processes."""
        from sepsti.core.parallel.mpi import root_first

        root_first(comm, lambda: warm_up((self.X.dtype,)))
        if self.chain.init != "em":
            return
        needed = sorted({(task.rank, task.replicate) for task in tasks if not self._is_prior_draw(task)})
        process, size = (0, 1) if comm is None else (comm.Get_rank(), comm.Get_size())
        owners = balance([rank + 16.0 for rank, _ in needed], size)
        starts = {}
        for (rank, replicate), owner in zip(needed, owners):
            if owner == process:
                starts[rank, replicate] = em_start(self.X, rank, stream(seed, rank, SHARED_KEY, replicate),
                                                   prior_rate=self.rate_at(rank),
                                                   iterations=self.chain.init_iterations, threads=threads)
        if comm is not None and size > 1:
            for part in comm.allgather(starts):
                starts.update(part)
        self._starts = starts

    def run(self, task, *, seed, progress):
        from sepsti.core.parallel.blocks import init_state, initial_factors, run_block_chain, run_prior_chain

        chain = self.chain
        if chain.init == "em" and not self._is_prior_draw(task):
            W, H = self._starts[task.rank, task.replicate]
        else:
            W, H = initial_factors(self.X, task.rank, stream(seed, *task.key))
        state = init_state(W, H, seed=seed, chain=task.key, num_blocks=chain.num_blocks)
        steps = chain.steps_at(task.index)
        rate = self.rate_at(task.rank)
        if self._is_prior_draw(task):
            # the draws are scored on the parts of the last iterations of a chain of at least their number
            draws = self.trace_length(task)
            result = run_prior_chain(self.X, state, num_steps=max(steps, draws), num_keep=draws,
                                     num_blocks=chain.num_blocks, rate_W=rate, rate_H=rate)
        else:
            result = run_block_chain(self.X, state, chain.at(task.index), temperature=task.temperature,
                                     num_blocks=chain.num_blocks, rate_W=rate, rate_H=rate, progress=progress,
                                     threads=1)
        return ChainRecord(result.trace, result.seconds, result.cpu_seconds, result.seconds_kernel, result.min_kept,
                           result.all_finite)


def select_rank_sti(X, ranks, *, preset="reference", grid=None, chain=None, num_replicates=None, prior_rate=4e-4,
                    dispersion=1.0, seed=0, checkpoint=None, comm=None, threads=None, progress=False, **overrides):
    """Estimate log p(X | R) of Poisson NMF for every rank by STI and select the largest.

    Parameters
    ----------
    X : array_like, shape (n_rows, n_cols)
        Non-negative data (float32 input runs in float32; log-likelihoods are summed in float64).
    ranks : sequence of int
    preset : {"reference", "blocks", "paper"}
        Settings from :data:`PRESETS`; ``grid``, ``chain`` and ``num_replicates`` replace its parts.
    grid : TemperatureGrid, optional
    chain : ChainSettings, optional
    num_replicates : int, optional
        Independent chains per (rank, temperature).
    prior_rate : float or "matched"
        lambda of the exponential priors on W and H; ``"matched"`` puts the prior on the scale of
        the modelled data at every rank (:func:`sepsti.core.models.poisson_nmf.prior_rate_at`). A number
        must have a square within float64's normal range (:func:`sepsti.core.models.poisson_nmf.validate_prior_rate`).
    dispersion : float or "rayleigh"
        Model X / dispersion (quasi-Poisson): the estimates are log p(X / dispersion | R). At least
        sum(X) / 2**53, so that X / dispersion totals at most 2**53 counts (beyond, float64 does not
        tell a count from the next).
        ``"rayleigh"`` (for STFT magnitudes): :func:`rayleigh_dispersion`, which depends on
        nothing but the data and scales with them. The value used is
        ``settings["model"]["dispersion"]``.
    seed : int
    checkpoint, comm, threads, progress
        See :func:`sepsti.core.evidence.rank_selection.select_rank`.
    **overrides
        Single fields of the grid or chain settings, e.g. ``num_steps=5000``
        (:func:`sepsti.core.evidence.rank_selection.resolve_settings`).

    Returns
    -------
    sepsti.core.evidence.rank_selection.RankSelection
    """
    X = validate_nonnegative_matrix(X)
    if not np.any(X):
        raise ParameterError(f"X ({X.shape[0]} x {X.shape[1]}) is all zero (digital silence?): nothing to select a "
                             "rank on")
    ranks = distinct_ranks(ranks)
    grid, chain, num_replicates = resolve_settings(PRESETS, preset, grid=grid, chain=chain,
                                                   num_replicates=num_replicates, **overrides)
    validate_identifiable_ranks(ranks, X.shape, sampler=chain.sampler)
    prior_rate = validate_prior_rate(prior_rate)
    if isinstance(dispersion, str) and dispersion == "rayleigh":
        dispersion = rayleigh_dispersion(X)
    elif not is_number(dispersion) or not (np.isfinite(scalar(dispersion)) and scalar(dispersion) > 0):
        raise ParameterError(f"dispersion={dispersion!r}: expected 'rayleigh' or a positive number")
    else:
        dispersion = float(scalar(dispersion))
    least = smallest_dispersion(X)
    if dispersion < least:
        raise ParameterError(f"dispersion={dispersion!r}: X sums to {least * _LARGEST_TOTAL:.3g}, so X / dispersion "
                             f"would exceed 2**53 counts; expected dispersion >= {least:.3g}")
    if dispersion != 1.0:
        with np.errstate(over="ignore", under="ignore"):  # a dispersion beyond the dtype's range: refused below
            X = (X / dispersion).astype(X.dtype)
        if not np.any(X):
            raise ParameterError(f"dispersion={dispersion!r}: X / dispersion rounds to zero in {X.dtype.name}; "
                                 "expected a smaller dispersion")
    model_settings = {"dispersion": float(dispersion)}
    if chain.sampler == "mala":
        from sepsti.core.evidence.reference_path import NMFLogDensity, ReferencePathChains

        factory = ReferencePathChains(NMFLogDensity(X, prior_rate), chain, data_digest=data_digest([X]),
                                      settings={"prior_rate": prior_rate, **model_settings,
                                                "shape": list(X.shape)})
    else:
        factory = NMFChains(X, chain, prior_rate=prior_rate, model_settings=model_settings)
    return select_rank(factory, ranks, grid=grid, num_replicates=num_replicates, seed=seed, checkpoint=checkpoint,
                       comm=comm, threads=threads, progress=progress)


def warm_up(dtypes=(np.float64, np.float32)):
    """Compile (or load from numba's cache) the NMF block chains' kernels for ``dtypes``, outside any timed region.

    Also imports the kernel module on the calling thread: worker threads that
    first import it concurrently can deadlock on the import lock.
    """
    from sepsti.core.parallel.blocks import init_state, initial_factors, run_block_chain, run_prior_chain

    rng = np.random.default_rng(0)
    for dtype in np.atleast_1d(dtypes):
        X = rng.poisson(3.0, size=(6, 6)).astype(dtype)
        for sampler in ("sgld", "psgld"):
            state = init_state(*initial_factors(X, 2, rng), seed=0, chain=0, num_blocks=2)
            settings = LangevinSettings(sampler=sampler, num_steps=2, num_keep=1, step_a=1e-3)
            run_block_chain(X, state, settings, temperature=1.0, num_blocks=2, threads=1)
        run_prior_chain(X, init_state(*initial_factors(X, 2, rng), seed=0, chain=0, num_blocks=2), num_steps=1,
                        num_keep=1, num_blocks=2)
