"""Rank selection for Poisson NMF by STI with block-parallel chains.

Conventions
-----------
X is (n_rows, n_cols), non-negative. For every rank R and every temperature
t_i of the grid (T intervals, T + 1 temperatures) one chain runs
:func:`core.parallel.blocks.run_block_chain`; chain ids are
``rank_index * (T + 1) + i``, its start comes from
``core.random.stream(seed, chain)`` and its noise from
``(seed, chain, block)``. Chains are independent, so they can be spread over
MPI processes (:mod:`core.parallel.mpi`) and resumed from a checkpoint folder
holding one file per finished chain.

References
----------
ICASSP'16 §4.2 (speech: R in {32..512}, T = 5, K = 1250 keeping 500, 8 x 8
blocks, a = 5e-7, b = 0.51, lambda = 4e-4).
"""

import hashlib
import json
import time
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np

from core.errors import ConvergenceWarning, ParameterError
from core.evidence.sti import temperature_grid, thermodynamic_integral
from core.evidence.tempering_check import largest_decrease
from core.io import atomic_path
from core.models.poisson_nmf import validate_nonnegative_matrix
from core.random import stream

__all__ = [
    "ChainTask",
    "RankSelection",
    "balance",
    "chain_cost",
    "chain_plan",
    "em_cost",
    "em_start",
    "pearson_dispersion",
    "select_rank_sti",
    "settings_fingerprint",
]


class ChainTask(NamedTuple):
    """One (rank, temperature) chain."""

    chain: int
    rank: int
    index: int
    temperature: float


class RankSelection(NamedTuple):
    """What :func:`select_rank_sti` returns on process 0.

    Attributes
    ----------
    ranks : list of int
    results : list of STIResult
        One per rank.
    selected_rank : int
        The rank of largest estimated log evidence.
    seconds : float
        Wall time.
    seconds_per_rank : list of float
        Sum of chain wall times per rank (across processes).
    kernel_share : float
        Fraction of chain time spent in the compiled likelihood/gradient/update kernels.
    min_kept : float
        Smallest factor entry over every kept sample of every chain.
    all_finite : bool
        Whether every kept sample of every chain was finite.
    settings : dict
    seconds_start : float
        Wall time of the chain starts (the EM phase, spread over the processes).
    cpu_seconds_per_rank : list of float
        Sum of the chains' CPU times per rank (not inflated by other jobs).
    """

    ranks: list
    results: list
    selected_rank: int
    seconds: float
    seconds_per_rank: list
    kernel_share: float
    min_kept: float
    all_finite: bool
    settings: dict
    seconds_start: float = 0.0
    cpu_seconds_per_rank: list = None


def chain_plan(ranks, temperatures):
    """The chains, in id order."""
    return [ChainTask(r_index * len(temperatures) + i, int(rank), i, float(t))
            for r_index, rank in enumerate(ranks) for i, t in enumerate(temperatures)]


def settings_fingerprint(X, settings):
    """A hash of the data and the settings: a checkpoint is only reused under the same ones."""
    digest = hashlib.sha256()
    digest.update(json.dumps(settings, sort_keys=True).encode())
    digest.update(str((X.shape, X.dtype.str)).encode())
    digest.update(np.ascontiguousarray(X).tobytes())
    return digest.hexdigest()[:32]


def _checkpoint_file(folder, task):
    return Path(folder) / f"chain-{task.chain:05d}-R{task.rank}-t{task.index}.npz"


def _load_checkpoint(path, fingerprint):
    with np.load(path) as data:
        if str(data["fingerprint"]) != fingerprint:
            raise ParameterError(f"{path}: checkpoint written for other data or settings; "
                                 "use another --checkpoint folder or delete it")
        return {"trace": data["trace"].copy(), "min_kept": float(data["min_kept"]),
                "all_finite": bool(data["all_finite"]), "seconds": float(data["seconds"]),
                "seconds_kernel": float(data["seconds_kernel"]),
                "cpu_seconds": float(data["cpu_seconds"]) if "cpu_seconds" in data else float("nan")}


def chain_cost(task):
    """Relative run time of a chain: about linear in R (products and noise) plus a fixed part per entry.

    A t = 0 chain computes no gradient (measured: about 0.6 of a tempered one).
    """
    return (task.rank + 16.0) * (1.0 if task.temperature > 0 else 0.6)


def em_cost(rank):
    """Relative run time of a rank's EM start."""
    return rank + 16.0


def balance(costs, num_processes):
    """Process of each job: longest first to the least loaded (ties: lowest job, then lowest process).

    Deterministic; where a job runs never changes its result.
    """
    load = [0.0] * int(num_processes)
    owners = [0] * len(costs)
    for job in sorted(range(len(costs)), key=lambda j: (-costs[j], j)):
        owner = min(range(len(load)), key=lambda p: (load[p], p))
        owners[job] = owner
        load[owner] += costs[job]
    return owners


def _thread_count(threads):
    if threads is not None:
        return int(threads)
    import numba

    return numba.get_num_threads()


def em_start(X, rank, *, seed, prior_rate, iterations, threads=None):
    """The rank's chain start: ``iterations`` MAP-EM iterations from ``initial_factors`` on ``stream(seed, 10**6 + rank)``.

    The result does not depend on ``threads`` (EM worker threads, each with one BLAS thread).
    """
    from core.factorization.em import poisson_nmf_em
    from core.parallel.blocks import initial_factors, single_threaded_blas

    W0, H0 = initial_factors(X, rank, stream(seed, 10 ** 6 + rank))
    with single_threaded_blas():
        fit = poisson_nmf_em(X, W0, H0, prior_rate_W=prior_rate, prior_rate_H=prior_rate, max_iter=int(iterations),
                             tol=0, threads=threads)
    return np.ascontiguousarray(fit.W, dtype=X.dtype), np.ascontiguousarray(fit.H, dtype=X.dtype)


def pearson_dispersion(X, rank, *, seed=0, prior_rate=4e-4, iterations=100, threads=None):
    """Pearson dispersion of a Poisson NMF fit: sum((X - WH)^2 / WH) / N at the rank's EM start.

    Poisson data give about 1. STFT magnitudes on the int16 scale give hundreds
    to thousands at small ranks (their spread grows like their mean, not like its
    square root); quasi-likelihood practice (QAIC) estimates the dispersion at the
    largest model compared and divides the data by it, so that the Poisson
    likelihood weighs the fit no more than the data's own noise warrants.

    Parameters
    ----------
    X : ndarray, shape (n_rows, n_cols)
        Non-negative data.
    rank : int
        Rank of the fit (the largest candidate).
    seed, prior_rate, iterations, threads
        As for :func:`em_start` (the same fit as that rank's chain start).

    Returns
    -------
    float
    """
    W, H = em_start(X, rank, seed=seed, prior_rate=prior_rate, iterations=iterations, threads=threads)
    fit = np.maximum(W.astype(np.float64) @ H.astype(np.float64), np.finfo(np.float64).tiny)
    return float(np.sum((X - fit) ** 2 / fit) / X.size)


def select_rank_sti(X, ranks, *, num_intervals=5, schedule="uniform", power=5.0, rule="trapezoid", num_steps=1250,
                    num_keep=500, num_blocks=8, sampler="sgld", step_a=5e-7, step_b=0.51, prior_rate=4e-4,
                    alpha=0.99, sigma=1e-5, evaluate="after_update", init="em", init_iterations=100, dispersion=1.0,
                    seed=0, exact_prior=False, checkpoint=None, comm=None, threads=None, progress=False):
    """Estimate log p(X | R) for every rank by STI and pick the largest.

    Parameters
    ----------
    X : array_like, shape (n_rows, n_cols)
        Non-negative data (float32 input runs in float32).
    ranks : sequence of int
    num_intervals, schedule, power, rule : see :func:`core.evidence.sti.temperature_grid`
        and :func:`core.evidence.sti.integration_weights`.
    num_steps, num_keep : int
        Iterations per chain and how many of the last are kept.
    num_blocks : int
        B of the B x B block schedule.
    sampler : {"sgld", "psgld"}
        Block-parallel SGLD (ICASSP'16's "PSGLD" = parallel SGLD) or its
        preconditioned variant (PARAFAC'18).
    step_a, step_b : float
        Step schedule (a/k)^b during burn-in, then fixed.
    prior_rate : float
        lambda of the exponential priors on W and H.
    alpha, sigma : float
        Preconditioner settings (``psgld``).
    evaluate : {"after_update", "before_update"}
        See :func:`core.evidence.sti.power_posterior_chain`.
    init : {"random", "em"}
        Chain start: ``random`` draws W, H ~ U(0.5, 1.5) sqrt(mean(X)/R)
        (from ``stream(seed, chain)``); ``em`` refines the rank's random start
        (from ``stream(seed, rank)``) by ``init_iterations`` MAP-EM iterations
        (:func:`core.factorization.em.poisson_nmf_em`), shared by the rank's
        chains, so that chains near t = 1 start close to the posterior mode.
    init_iterations : int
        EM iterations of ``init="em"``.
    dispersion : float or "auto"
        Model X / dispersion (quasi-Poisson); the estimates are log p(X / dispersion | R).
        ``"auto"``: :func:`pearson_dispersion` at the largest rank's EM start
        (``init_iterations`` iterations). The value used is ``settings["dispersion"]``.
    seed : int
    exact_prior : bool
        At t = 0 use ``num_keep`` independent prior draws
        (:func:`core.parallel.blocks.run_prior_chain`) instead of an SGLD
        chain. Off by default: with the paper's speech settings (a = 5e-7,
        lambda = 4e-4) the SGLD chain at t = 0 barely leaves its start, so its
        E_0[log p(X|theta)] is that of the start, while the prior's is about
        -N R / lambda^2 (~ -1e13 and below on speech); on a uniform grid the
        trapezoid then weighs that value by 1/(2T) and the estimate is
        dominated by it.
    checkpoint : str or Path, optional
        Folder keeping one file per finished chain; existing files with the
        same data and settings are reused.
    comm : MPI communicator, optional
        Spread chains over its processes (see :func:`core.parallel.mpi.world`):
        chains go longest first to the least loaded process (:func:`balance`
        with :func:`chain_cost`), the EM starts likewise, each computed once
        and shared.
    threads : int, optional
        Worker threads of this process: chains run concurrently, one per
        thread, each serial inside (EM starts use them over column blocks).
        Default: numba's thread count without ``comm``, 1 with it (one process
        per core).
    progress : bool
        Progress bar on stderr (process 0 only).

    Returns
    -------
    RankSelection or None
        None on MPI processes other than 0.
    """
    from core.parallel.blocks import (
        init_state,
        initial_factors,
        run_block_chain,
        run_prior_chain,
        single_threaded_blas,
    )
    from core.progress import progress_bar

    X = validate_nonnegative_matrix(X)
    ranks = [int(r) for r in ranks]
    if not ranks or min(ranks) < 1 or len(set(ranks)) != len(ranks):
        raise ParameterError(f"ranks={ranks}: expected distinct positive integers")
    if not 1 <= num_keep <= num_steps:
        raise ParameterError(f"keep={num_keep} must lie in [1, samples={num_steps}]")
    if num_blocks < 1 or num_blocks > min(X.shape):
        raise ParameterError(f"blocks={num_blocks} must lie in [1, {min(X.shape)}] for X of shape {X.shape}")
    if sampler not in ("sgld", "psgld"):
        raise ParameterError(f"sampler={sampler!r}: expected 'sgld' or 'psgld'")
    if not prior_rate > 0:
        raise ParameterError(f"prior_rate={prior_rate} must be positive")
    if isinstance(dispersion, str) and dispersion == "auto":
        dispersion = pearson_dispersion(X, max(ranks), seed=seed, prior_rate=prior_rate, iterations=init_iterations,
                                        threads=1 if comm is not None else _thread_count(threads))
    elif isinstance(dispersion, str) or not (np.isfinite(dispersion) and dispersion > 0):
        raise ParameterError(f"dispersion={dispersion!r}: expected 'auto' or a positive number")
    if dispersion != 1.0:
        X = (X / dispersion).astype(X.dtype)
    temperatures = temperature_grid(num_intervals, schedule=schedule, power=power)
    settings = {"ranks": ranks, "num_intervals": int(num_intervals), "schedule": schedule,
                "power": float(power) if schedule == "power" else 1.0, "rule": rule,
                "temperatures": temperatures.tolist(), "num_steps": int(num_steps), "num_keep": int(num_keep),
                "num_blocks": int(num_blocks), "sampler": sampler, "step_a": float(step_a), "step_b": float(step_b),
                "prior_rate": float(prior_rate), "alpha": float(alpha), "sigma": float(sigma),
                "evaluate": evaluate, "seed": int(seed), "dtype": X.dtype.name, "shape": list(X.shape),
                "init": init, "init_iterations": int(init_iterations) if init == "em" else 0,
                "exact_prior": bool(exact_prior), "dispersion": float(dispersion)}
    if init not in ("random", "em"):
        raise ParameterError(f"init={init!r}: expected 'random' or 'em'")
    fingerprint = settings_fingerprint(X, settings)
    if checkpoint is not None:
        Path(checkpoint).mkdir(parents=True, exist_ok=True)
    tasks = chain_plan(ranks, temperatures)
    size = 1 if comm is None else comm.Get_size()
    rank_here = 0 if comm is None else comm.Get_rank()
    if threads is None and comm is not None:
        threads = 1
    paths = {task.chain: _checkpoint_file(checkpoint, task) if checkpoint is not None else None for task in tasks}
    done = {task.chain for task in tasks if paths[task.chain] is not None and paths[task.chain].exists()}
    owners = balance([chain_cost(task) for task in tasks], size)
    mine = sorted((task for task, owner in zip(tasks, owners) if owner == rank_here),
                  key=lambda task: (-chain_cost(task), task.chain))
    start = time.perf_counter()
    starts = {}
    if init == "em":
        # the EM starts of the ranks that still have chains to run, each computed once, spread over the processes
        needed = sorted({task.rank for task in tasks if task.chain not in done})
        em_owners = balance([em_cost(rank) for rank in needed], size)
        for rank, owner in zip(needed, em_owners):
            if owner == rank_here:
                starts[rank] = em_start(X, rank, seed=seed, prior_rate=prior_rate, iterations=init_iterations,
                                        threads=_thread_count(threads))
        if comm is not None:
            for part in comm.allgather(starts):
                starts.update(part)

    seconds_start = time.perf_counter() - start

    def start_of(task):
        if init == "random":
            return initial_factors(X, task.rank, stream(seed, task.chain))
        return starts[task.rank]

    def run(task, bar):
        path = paths[task.chain]
        if path is not None and path.exists():
            bar.update(num_steps)
            return _load_checkpoint(path, fingerprint)
        W, H = start_of(task)
        state = init_state(W, H, seed=seed, chain=task.chain, num_blocks=num_blocks)
        if exact_prior and task.temperature == 0.0:
            result = run_prior_chain(X, state, num_steps=num_steps, num_keep=num_keep, num_blocks=num_blocks,
                                     rate_W=prior_rate, rate_H=prior_rate)
            bar.update(num_steps)
        else:
            result = run_block_chain(X, state, temperature=task.temperature, num_steps=num_steps,
                                     num_keep=num_keep, num_blocks=num_blocks, sampler=sampler, step_a=step_a,
                                     step_b=step_b, rate_W=prior_rate, rate_H=prior_rate, alpha=alpha, sigma=sigma,
                                     evaluate=evaluate, progress=bar.update, threads=1)
        record = {"trace": result.trace, "min_kept": result.min_kept, "all_finite": result.all_finite,
                  "seconds": result.seconds, "seconds_kernel": result.seconds_kernel,
                  "cpu_seconds": result.cpu_seconds}
        if path is not None:
            with atomic_path(path) as tmp, open(tmp, "wb") as handle:
                np.savez(handle, fingerprint=fingerprint, **record)
        return record

    # chains, longest first, on this process's worker threads (one chain per thread: the compiled
    # chain loop releases the GIL), each chain serial inside
    workers = min(_thread_count(threads), max(len(mine), 1))
    with progress_bar(len(mine) * num_steps, desc=f"STI ({len(tasks)} chains)",
                      enabled=progress and rank_here == 0) as bar, single_threaded_blas():
        if workers == 1:
            records = {task.chain: run(task, bar) for task in mine}
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=workers) as pool:
                futures = {task.chain: pool.submit(run, task, bar) for task in mine}
                records = {chain: future.result() for chain, future in futures.items()}
    if comm is not None:
        gathered = comm.gather(records, root=0)
        if rank_here != 0:
            return None
        for part in gathered:
            records.update(part)
    records = [records[task.chain] for task in tasks]
    results = []
    per_rank_seconds = []
    per_rank_cpu = []
    count = len(temperatures)
    for r_index in range(len(ranks)):
        chunk = records[r_index * count:(r_index + 1) * count]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            results.append(thermodynamic_integral(temperatures, [c["trace"] for c in chunk], rule=rule,
                                                  power=settings["power"]))
        per_rank_seconds.append(float(sum(c["seconds"] for c in chunk)))
        per_rank_cpu.append(float(sum(c["cpu_seconds"] for c in chunk)))
    total = sum(c["seconds"] for c in records)
    kernel = sum(c["seconds_kernel"] for c in records)
    _warn_unequilibrated(ranks, results)
    best = int(np.argmax([r.log_evidence for r in results]))
    return RankSelection(ranks, results, ranks[best], time.perf_counter() - start, per_rank_seconds,
                         float(kernel / total) if total > 0 else 0.0,
                         float(min(c["min_kept"] for c in records)), all(c["all_finite"] for c in records), settings,
                         seconds_start, per_rank_cpu)


def _warn_unequilibrated(ranks, results, limit=3.0):
    """Warn when E_t[log p] falls with t by more than ``limit`` joint standard errors."""
    falls = {rank: largest_decrease(r.mean_log_likelihood, r.mcse) for rank, r in zip(ranks, results)}
    bad = [f"R={rank} ({fall:.0f} se)" for rank, fall in falls.items() if fall > limit]
    if bad:
        warnings.warn(f"STI chains did not reach their power posteriors: E_t[log p(X|theta)] falls as t rises "
                      f"for {', '.join(bad)}; the estimates are not log marginal likelihoods (run longer "
                      "chains or take larger steps)", ConvergenceWarning, stacklevel=3)
