"""Rank selection by Stochastic Thermodynamic Integration: the one engine every model plugs into.

Conventions
-----------
For every candidate rank R, every temperature t_i of a :class:`TemperatureGrid`
(T intervals, T + 1 temperatures) and every replicate r = 0 .. n - 1 one
chain runs on the power posterior p(theta | R) p(X | theta, R)^t_i; it
returns the log-likelihood estimates of its kept iterations. The chains
are independent, so the engine owns everything around them:

* **the plan**: the (R, i, r) chains (:func:`chain_plan`);
* **the seed rule**: chain (R, i, r) draws from ``stream(seed, R, i, r)``
  and the noise of its factor blocks, if it has any, from
  ``stream(seed, R, i, r, k)`` with one key k per block (the factory's
  numbering); shared work of replicate r of rank R (an EM start) from
  ``stream(seed, R, SHARED_KEY, r)``. Nothing depends on where or in which
  order a chain runs;
* **the checkpoint**: a folder with ``settings.json`` (the settings, data
  digest included) and one ``R<R>-t<i>-r<r>.npz`` per finished chain; a
  folder written under other settings is refused, and a truncated, corrupt
  or edited chain file is named in the error;
* **load balancing**: chains go longest first (the model's cost estimate)
  to the least loaded MPI process (:func:`balance`), and run on that
  process's worker threads; Ctrl-C stops them between iterations, keeping
  the finished chains in the checkpoint;
* **the gather and the result**: every process returns the same
  :class:`RankSelection`.

Standard errors: E_t[log p] of each temperature is averaged over the
replicates, and its standard error is the larger of the replicates' spread
and the within-chain MCSE (:func:`sepsti.core.evidence.sti.chain_summary`);
block-subsampled chains hide a slow drift under their estimator noise, so
their own MCSE understates the error several-fold (``docs/rank_selection.md``).
The tempering check (:mod:`sepsti.core.evidence.tempering_check`) uses the same
errors.

A model plugs in through a *chain factory* with

* ``settings`` -- a JSON-able dict of the model and chain settings,
* ``data_digest`` -- a string identifying the data,
* ``trace_length(task)`` -- the length of the trace the chain returns,
* ``cost(task)`` -- a relative run time (for load balancing),
* ``prepare(tasks, *, seed, comm, threads)`` -- shared work before the chains (every process calls it),
* ``run(task, *, seed, progress)`` -- the chain itself, returning a
  :class:`ChainRecord`; ``progress(n)`` is called every few iterations
  (and raises to stop the chain when the run is interrupted); units not reported by then are counted
  once the chain has returned and been saved, so a chain that reports none runs to its end and is kept,
* ``units(task)`` -- progress units of the chain,
* ``collective`` -- True when every chain runs on all MPI processes at once,
* optionally ``start_groups(num_replicates)`` -- a label per replicate, equal for replicates whose
  chains start alike: the halves check runs within each group (replicates started on either side
  of the target drift in opposite directions, and their mean would hide both).

:mod:`sepsti.core.evidence.sti_nmf` (Poisson NMF) and :mod:`sepsti.core.evidence.parafac_rank`
(Poisson PARAFAC) are the two factories shipped.
"""

import hashlib
import json
import threading
import time
import warnings
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from sepsti.core.checks import distinct_ranks, integer_at_least, is_number, scalar
from sepsti.core.errors import ConvergenceWarning, ParameterError
from sepsti.core.evidence.sti import LangevinSettings, TemperatureGrid, thermodynamic_integral
from sepsti.core.evidence.tempering_check import largest_decrease
from sepsti.core.io import atomic_path
from sepsti.core.random import KEY_LIMIT

__all__ = [
    "ChainRecord",
    "ChainSettings",
    "ChainTask",
    "Preset",
    "RankSelection",
    "SHARED_KEY",
    "TemperatureGrid",
    "balance",
    "chain_plan",
    "data_digest",
    "half_drift",
    "per_temperature",
    "resolve_settings",
    "select_rank",
    "to_json",
]

#: Stream key of work shared by the chains of one (rank, replicate), e.g. their EM start: one 32-bit word
#: that no temperature index reaches (2**32, as it was, is read as the two keys (0, 1): the noise of block
#: r of chain (R, 0, 1)).
SHARED_KEY = 2 ** 32 - 1

#: A chain's E_t[log p] may fall below its neighbour's by this many joint standard errors
#: before the result is flagged as not equilibrated.
TEMPERING_LIMIT = 3.0

#: The estimate from the second halves of the kept iterations may differ from the first halves' by
#: this many standard errors before the chains are flagged as still drifting.
DRIFT_LIMIT = 3.0


@dataclass(frozen=True)
class ChainSettings:
    """How each chain runs: sampler, length, step rule, blocks, what it records and where it starts.

    Parameters
    ----------
    sampler : {"psgld", "sgld", "mala"}
        Block-parallel SGLD (ICASSP'16), its preconditioned variant (PARAFAC'18 eq. 8-9), or
        Metropolis-adjusted Langevin on full data (:mod:`sepsti.core.evidence.reference_path`).
    num_steps : int or tuple of int
        Iterations per chain, or one value per temperature (t = 0 first).
    num_keep : int
        Last iterations kept for the averages (burn-in: the rest).
    step_a : float or tuple of float
        a of the step (a/k)^b during burn-in, then fixed; or one per temperature.
    step_b : float
        b of the step rule, in (0.5, 1].
    alpha, sigma : float
        pSGLD's squared-gradient decay and the floor added to its square root.
    num_blocks : int or None
        B of the B x B (x B) block schedule; None for random entry subsets (``subset_size``).
    subset_size : int or None
        N_s of random entry subsets (dense PARAFAC data only).
    evaluate : str
        What a kept iteration records: ``before_update`` (theta^(k-1) on S^(k)),
        ``after_update`` (theta^(k) on S^(k), ICASSP'16 eq. 9) or ``full`` (all the data).
    evaluate_every : int
        With ``full``: every m-th kept iteration.
    init : str
        Chain start (the model's options, e.g. ``random``/``em`` or ``prior``/``map``).
    init_iterations : int
        EM or MAP iterations of the start (for the reference path's mode: accelerated EM sweeps).
    exact_prior : bool
        At t = 0, independent prior draws instead of a chain.
    prior_draws : int or None
        Their number (default ``num_keep``).
    """

    sampler: str = "psgld"
    num_steps: object = 10_000
    num_keep: int = 2_000
    step_a: object = 1e-7
    step_b: float = 0.51
    alpha: float = 0.99
    sigma: float = 0.1
    num_blocks: object = 8
    subset_size: object = None
    evaluate: str = "before_update"
    evaluate_every: int = 1
    init: str = "random"
    init_iterations: int = 100
    exact_prior: bool = False
    prior_draws: object = None

    def __post_init__(self):
        from sepsti.core.samplers.step_size import validate_step_schedule

        if self.sampler not in ("psgld", "sgld", "mala"):
            raise ParameterError(f"sampler={self.sampler!r}: expected 'psgld', 'sgld' or 'mala'")
        for name in ("num_steps", "step_a"):
            value = getattr(self, name)
            if isinstance(value, (list, tuple, np.ndarray)):  # one value per temperature, or one for all
                value = tuple(np.asarray(value).tolist())
                object.__setattr__(self, name, value[0] if len(value) == 1 else value)
        if any(int(k) != k or k < 1 for k in _values(self.num_steps)):
            raise ParameterError(f"num_steps={self.num_steps!r}: expected positive integers")
        if int(self.num_keep) != self.num_keep or self.num_keep < 1:
            raise ParameterError(f"num_keep={self.num_keep} must be a positive integer")
        for a in _values(self.step_a):
            validate_step_schedule(a, self.step_b)
        alpha, sigma = scalar(self.alpha), scalar(self.sigma)
        if not (is_number(alpha) and is_number(sigma)) or not (0.0 <= alpha <= 1.0 and 0 < sigma < np.inf):
            raise ParameterError(f"alpha={self.alpha}, sigma={self.sigma}: expected alpha in [0, 1], "
                                 "a finite sigma > 0")
        for name in ("num_blocks", "subset_size", "prior_draws"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, (bool, np.bool_)) or int(value) != value or value < 1):
                raise ParameterError(f"{name}={value} must be a positive integer")
        if self.num_blocks is not None and self.subset_size is not None:
            raise ParameterError("give num_blocks (block parts) or subset_size (random entries), not both")
        if self.evaluate not in ("before_update", "after_update", "full"):
            raise ParameterError(f"evaluate={self.evaluate!r}: expected 'before_update', 'after_update' or 'full'")
        if int(self.evaluate_every) != self.evaluate_every or self.evaluate_every < 1:
            raise ParameterError(f"evaluate_every={self.evaluate_every} must be a positive integer")
        if int(self.init_iterations) != self.init_iterations or self.init_iterations < 0:
            raise ParameterError(f"init_iterations={self.init_iterations} must be a non-negative integer")

    def steps_at(self, index):
        """Iterations of the chain at temperature ``index``."""
        return int(_at(self.num_steps, index))

    def step_a_at(self, index):
        """a of the step rule at temperature ``index``."""
        return float(_at(self.step_a, index))

    def at(self, index):
        """:class:`sepsti.core.evidence.sti.LangevinSettings` of the (p)SGLD chain at temperature ``index``."""
        return LangevinSettings(sampler=self.sampler, num_steps=self.steps_at(index), num_keep=int(self.num_keep),
                                step_a=self.step_a_at(index), step_b=self.step_b, alpha=self.alpha, sigma=self.sigma,
                                evaluate=self.evaluate, evaluate_every=int(self.evaluate_every))

    def check_grid(self, grid):
        """Raise unless per-temperature values match ``grid`` and every chain keeps at most its length."""
        count = grid.num_intervals + 1
        for name in ("num_steps", "step_a"):
            value = getattr(self, name)
            if isinstance(value, tuple) and len(value) != count:
                raise ParameterError(f"{name}={list(value)}: expected one value or {count}, one per temperature")
        first = 1 if self.exact_prior else 0
        shortest = min(self.steps_at(i) for i in range(first, count))
        if self.num_keep > shortest:
            raise ParameterError(f"num_keep={self.num_keep} must lie in [1, num_steps={shortest}]")

    def as_dict(self):
        out = asdict(self)
        for name in ("num_steps", "step_a"):
            if isinstance(out[name], tuple):
                out[name] = list(out[name])
        return out


def _values(value):
    return value if isinstance(value, tuple) else (value,)


def _at(value, index):
    return value[index] if isinstance(value, tuple) else value


class Preset(NamedTuple):
    """A named set of settings: grid, chains and replicates."""

    grid: TemperatureGrid
    chain: ChainSettings
    num_replicates: int


class ChainTask(NamedTuple):
    """One chain of the plan: rank, temperature index, replicate, temperature."""

    rank: int
    index: int
    replicate: int
    temperature: float

    @property
    def key(self):
        """The chain's identity, (rank, temperature index, replicate): its stream keys."""
        return (self.rank, self.index, self.replicate)

    @property
    def file_name(self):
        return f"R{self.rank}-t{self.index}-r{self.replicate}.npz"


class ChainRecord(NamedTuple):
    """What a chain leaves: its trace and how it went.

    Attributes
    ----------
    trace : ndarray, shape (L,)
        Log-likelihood estimates of the kept iterations.
    seconds, cpu_seconds, kernel_seconds : float
        Wall time, CPU time of the thread that ran it, time in compiled kernels.
    min_kept : float
        Smallest factor entry over the kept samples (NaN if not tracked).
    all_finite : bool
        Whether the chain stayed finite: every draw of the NMF block chains, the log-likelihood trace of the
        others.
    """

    trace: np.ndarray
    seconds: float
    cpu_seconds: float = float("nan")
    kernel_seconds: float = 0.0
    min_kept: float = float("nan")
    all_finite: bool = True


class RankSelection(NamedTuple):
    """The result of :func:`select_rank`.

    Attributes
    ----------
    ranks : list of int
    log_marginal_likelihood : ndarray, shape (n_ranks,)
        STI estimate of log p(X | R): the replicates' mean.
    stderr : ndarray, shape (n_ranks,)
        Its standard error: per temperature the replicates' spread or the within-chain MCSE, the
        larger, combined over the quadrature; at least the spread of the replicates' own estimates
        (a replicate's chains share its start, so their errors can be correlated over temperatures).
    selected_rank : int
        The rank of the largest finite estimate.
    replicates : ndarray, shape (n_ranks, n_replicates)
        The estimate of each replicate alone.
    per_temperature : list of sepsti.core.evidence.sti.STIResult
        Per rank: E_t[log p] per temperature with its standard error.
    largest_decrease : ndarray, shape (n_ranks,)
        Tempering check per rank, in joint standard errors (above 3: not equilibrated); infinite where
        neighbouring temperatures have standard errors of 0 (frozen chains, one replicate); NaN for a rank whose
        chains diverged (its estimate is not finite, and named by a warning). The JSON writes both as null, as
        every non-finite number: beside a finite estimate null is an infinite value, beside null a divergence.
    drift : ndarray, shape (n_ranks,)
        Stationarity check per rank: the estimate from the kept iterations' second halves minus the
        one from their first halves, in standard errors of that difference (beyond ±3: still drifting);
        within each group of replicates started alike, the largest in size.
    min_kept : float
        Smallest factor entry kept by any chain.
    all_finite : bool
    settings : dict
        Grid, chain and model settings (JSON); also the checkpoint's fingerprint.
    timing : dict
        Wall and CPU seconds (total, chain starts, per rank) and the share in compiled kernels.
    """

    ranks: list
    log_marginal_likelihood: np.ndarray
    stderr: np.ndarray
    selected_rank: int
    replicates: np.ndarray
    per_temperature: list
    largest_decrease: np.ndarray
    drift: np.ndarray
    min_kept: float
    all_finite: bool
    settings: dict
    timing: dict


class Interrupted(KeyboardInterrupt):
    """Raised inside a chain's progress callback to stop it when the run is interrupted."""


def resolve_settings(presets, preset, *, grid=None, chain=None, num_replicates=None, **overrides):
    """The settings of a run: ``presets[preset]`` with parts replaced and single fields overridden.

    Parameters
    ----------
    presets : dict of str to Preset
    preset : str
    grid : TemperatureGrid, optional
    chain : ChainSettings, optional
    num_replicates : int, optional
    **overrides
        Fields of :class:`TemperatureGrid` or :class:`ChainSettings` by name, e.g.
        ``num_steps=3000`` or ``schedule="uniform"``.

    Returns
    -------
    Preset
    """
    from dataclasses import fields, replace

    if preset not in presets:
        raise ParameterError(f"preset={preset!r}: expected one of {', '.join(presets)}")
    base = presets[preset]
    grid = base.grid if grid is None else grid
    chain = base.chain if chain is None else chain
    grid_names = {f.name for f in fields(TemperatureGrid)}
    chain_names = {f.name for f in fields(ChainSettings)}
    unknown = sorted(set(overrides) - grid_names - chain_names)
    if unknown:
        raise ParameterError(f"unknown setting(s) {', '.join(unknown)}: expected fields of TemperatureGrid "
                             f"({', '.join(sorted(grid_names))}) or ChainSettings ({', '.join(sorted(chain_names))})")
    grid = replace(grid, **{k: v for k, v in overrides.items() if k in grid_names})
    chain = replace(chain, **{k: v for k, v in overrides.items() if k in chain_names})
    num_replicates = base.num_replicates if num_replicates is None else num_replicates
    chain.check_grid(grid)
    return Preset(grid, chain, num_replicates)


def chain_plan(ranks, grid, num_replicates):
    """Every chain of a run, rank-major, then temperature, then replicate."""
    return [ChainTask(int(rank), i, r, float(t)) for rank in ranks for i, t in enumerate(grid.temperatures)
            for r in range(int(num_replicates))]


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


class _Checkpoint:
    """A folder of finished chains under one set of settings."""

    def __init__(self, folder, settings):
        self.folder = Path(folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise ParameterError(f"{self.folder}: checkpoint is not a folder; give a new or empty folder") from None
        except OSError as error:  # a file on the way to it, a read-only file system
            raise ParameterError(f"{self.folder}: cannot create the checkpoint folder "
                                 f"({error.strerror or error})") from None
        self.digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:32]
        manifest = self.folder / "settings.json"
        if manifest.exists():
            try:
                saved = json.loads(manifest.read_text())
                if not isinstance(saved, dict):
                    raise ValueError(f"a JSON {type(saved).__name__}, not an object")
            except (OSError, ValueError) as error:
                raise ParameterError(f"{manifest}: unreadable checkpoint manifest ({error}); "
                                     "use another checkpoint folder or delete it") from None
            if {"ranks", "num_replicates"} & set(saved):  # its chains lack the (R, i, r) they were saved under
                raise ParameterError(f"{self.folder}: checkpoint of an earlier version of sepsti (its manifest "
                                     "holds the rank list); use another checkpoint folder or delete it")
            if saved != settings:
                changed = sorted(k for k in set(saved) | set(settings) if saved.get(k) != settings.get(k))
                raise ParameterError(f"{self.folder}: checkpoint written for other data or settings "
                                     f"({', '.join(map(str, changed))}); use another checkpoint folder or delete it")
        else:
            with atomic_path(manifest) as tmp:
                tmp.write_text(json.dumps(settings, indent=1, sort_keys=True) + "\n")

    def path(self, task):
        return self.folder / task.file_name

    def load(self, task, length):
        """The record of ``task``, or None when it has not finished yet."""
        path = self.path(task)
        if not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                fields = {name: data[name] for name in data.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
            raise ParameterError(f"{path}: truncated or corrupt checkpoint file ({type(error).__name__}); "
                                 "delete it and rerun to recompute that chain") from None
        try:
            trace = np.asarray(fields["trace"], dtype=np.float64)
            record = ChainRecord(trace, float(fields["seconds"]), float(fields["cpu_seconds"]),
                                 float(fields["kernel_seconds"]), float(fields["min_kept"]),
                                 bool(fields["all_finite"]))
            digest, checksum = str(fields["settings_digest"]), str(fields["trace_digest"])
            key = tuple(int(part) for part in np.atleast_1d(fields["key"]))
        except (KeyError, TypeError, ValueError) as error:
            raise ParameterError(f"{path}: not a chain file of this program (missing or bad {error}); "
                                 "delete it and rerun to recompute that chain") from None
        if digest != self.digest:
            raise ParameterError(f"{path}: chain written for other data or settings; "
                                 "use another checkpoint folder or delete it")
        if key != tuple(task.key):
            raise ParameterError(f"{path}: the chain of (R, i, r) = {key}, not {tuple(task.key)}; "
                                 "delete the file and rerun to recompute that chain")
        if trace.shape != (length,) or checksum != _trace_digest(trace):
            raise ParameterError(f"{path}: the chain's trace was altered ({trace.size} values, expected {length}); "
                                 "delete the file and rerun to recompute that chain")
        return record

    def save(self, task, record):
        with atomic_path(self.path(task)) as tmp, open(tmp, "wb") as handle:
            np.savez(handle, settings_digest=self.digest, trace_digest=_trace_digest(record.trace),
                     key=np.array(task.key), **record._asdict())


def data_digest(arrays):
    """A digest of the data arrays: shapes, dtypes and bytes (the checkpoint's fingerprint of the data)."""
    digest = hashlib.sha256()
    for array in arrays:
        array = np.ascontiguousarray(array)
        digest.update(str((array.shape, array.dtype.str)).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()[:32]


def _trace_digest(trace):
    return hashlib.sha256(np.ascontiguousarray(trace, dtype=np.float64).tobytes()).hexdigest()[:32]


def _thread_count(threads):
    if threads is not None:
        return int(threads)
    import numba

    return numba.get_num_threads()


def select_rank(factory, ranks, *, grid, num_replicates=4, seed=0, checkpoint=None, comm=None, threads=None,
                progress=False):
    """Estimate log p(X | R) for every rank with ``factory``'s chains and select the largest.

    Parameters
    ----------
    factory : chain factory
        See the module docstring.
    ranks : sequence of int
    grid : TemperatureGrid
    num_replicates : int
        Independent chains per (rank, temperature); their spread gives the standard errors.
    seed : int
        In [0, 2**32).
    checkpoint : str or Path, optional
        Folder of finished chains; a rerun with the same settings resumes.
    comm : MPI communicator, optional
        Spread the chains over its processes; every process returns the result.
    threads : int, optional
        Chains run concurrently on this process (default: numba's thread count,
        1 under ``comm`` with several processes).
    progress : bool
        Progress bar on stderr (process 0).

    Returns
    -------
    RankSelection

    Raises
    ------
    ParameterError
        Bad settings (checked before a checkpoint is written: among them a grid whose weights are not finite,
        and chains that keep a single value with one replicate, which leave the standard error unknown), or a
        checkpoint folder or file that does not belong to this run.
    KeyboardInterrupt
        On Ctrl-C, after the running chains stopped (finished chains stay in the checkpoint).
    """
    from sepsti.core.blas import single_threaded_blas
    from sepsti.core.progress import progress_bar

    started = time.perf_counter()
    ranks = distinct_ranks(ranks)
    num_replicates = integer_at_least("num_replicates", num_replicates, 1)  # True was taken as 1
    seed = integer_at_least("seed", seed, 0)
    if seed >= KEY_LIMIT:
        raise ParameterError(f"seed={seed} must lie in [0, 2**32)")
    if threads is not None:  # 0 and -1 ran the chains one at a time, 2.5 as 2, "2" as 2
        threads = integer_at_least("threads", threads, 1)
    grid.check()
    tasks = chain_plan(ranks, grid, num_replicates)
    if num_replicates == 1 and any(factory.trace_length(task) < 2 for task in tasks):
        raise ParameterError("num_replicates=1 with chains that keep a single value (num_keep, prior_draws, or "
                             "num_keep / evaluate_every evaluations): the standard errors cannot be estimated; "
                             "keep at least 2 values per chain or run at least 2 replicates")
    # the shared work's stream key among them: a checkpoint of the former key (2**32) is refused, not mixed
    settings = {"ranks": ranks, "grid": grid.as_dict(), "num_replicates": int(num_replicates), "seed": seed,
                "shared_key": SHARED_KEY, **factory.settings, "data": factory.data_digest}
    settings = json.loads(json.dumps(settings))  # the form it takes in JSON and in the checkpoint
    # a chain depends on (seed, R, i, r) and the settings, not on the other candidates or the replicate count
    chain_settings = {key: value for key, value in settings.items() if key not in ("ranks", "num_replicates")}
    store = _Checkpoint(checkpoint, chain_settings) if checkpoint is not None else None
    process, size = (0, 1) if comm is None else (comm.Get_rank(), comm.Get_size())
    collective = bool(getattr(factory, "collective", False)) and size > 1
    if threads is None and size > 1:
        threads = 1
    records = {} if store is None else _finished_chains(store, tasks, factory, comm)
    todo = [task for task in tasks if task.key not in records]
    if collective:
        mine = todo
    else:
        owners = balance([factory.cost(task) for task in todo], size)
        mine = [task for task, owner in zip(todo, owners) if owner == process]
    mine.sort(key=lambda task: (-factory.cost(task), task.key))
    tick = time.perf_counter()
    # one BLAS thread throughout, set and restored by this thread: the work runs on worker threads, and the
    # limit is the process's, which workers setting and restoring it in turn left at one after the run
    with single_threaded_blas():
        factory.prepare(todo, seed=seed, comm=comm, threads=_thread_count(threads))
        seconds_start = time.perf_counter() - tick
        writer = store is not None and (not collective or process == 0)
        with progress_bar(sum(factory.units(task) for task in mine), desc=f"STI ({len(tasks)} chains)",
                          enabled=progress and process == 0) as bar:
            finished = _run_chains(factory, mine, seed=seed, threads=_thread_count(threads), bar=bar,
                                   save=store.save if writer else None)
    if comm is not None and not collective:
        for part in comm.allgather(finished):
            records.update(part)
    else:
        records.update(finished)
    with warnings.catch_warnings():
        if process != 0:  # the same result on every process: process 0 alone says what is wrong with it
            warnings.simplefilter("ignore", ConvergenceWarning)
        groups = getattr(factory, "start_groups", lambda count: [0] * count)(int(num_replicates))
        return _combine(ranks, grid, int(num_replicates), tasks, records, settings,
                        {"seconds": time.perf_counter() - started, "start_seconds": seconds_start,
                         "processes": size}, groups)


def _finished_chains(store, tasks, factory, comm):
    """The checkpoint's finished chains, {key: record}, read by process 0 alone and sent to the others.

    One reading for all: a process that read it later could see chains the others have saved meanwhile,
    and the processes would split the rest differently. An error in reading it is raised on every process.
    """
    from sepsti.core.parallel.mpi import from_root

    return from_root(comm, lambda: {task.key: record for task in tasks
                                    if (record := store.load(task, factory.trace_length(task))) is not None})


def _run_chains(factory, tasks, *, seed, threads, bar, save):
    """Run ``tasks`` on ``threads`` worker threads (longest first); returns {key: record}."""
    stop = threading.Event()
    lock = threading.Lock()

    def advance(count):
        if stop.is_set():
            raise Interrupted
        with lock:
            bar.update(count)

    def run(task):
        reported = []

        def progress(count):  # within the chain: Ctrl-C stops it here
            advance(count)
            reported.append(count)

        record = factory.run(task, seed=seed, progress=progress)
        if save is not None:  # a finished chain is kept, whatever happens meanwhile
            save(task, record)
        with lock:
            bar.update(factory.units(task) - sum(reported))
        return record

    if threads <= 1 or len(tasks) <= 1:
        return {task.key: run(task) for task in tasks}
    from concurrent.futures import ThreadPoolExecutor

    from sepsti.core.processes import results

    pool = ThreadPoolExecutor(max_workers=min(threads, len(tasks)))
    futures = [pool.submit(run, task) for task in tasks]
    try:
        records = results(futures)
    except BaseException:
        stop.set()
        for future in futures:
            future.cancel()
        pool.shutdown(wait=True)
        raise
    pool.shutdown(wait=True)
    return {task.key: record for task, record in zip(tasks, records)}


def per_temperature(records, tasks, grid, num_replicates):
    """Traces of one rank as a list over temperatures of (replicates, L) arrays."""
    by_index = {}
    for task in tasks:
        by_index.setdefault(task.index, []).append(records[task.key].trace)
    return [np.stack(by_index[i]) for i in range(grid.num_intervals + 1)]


def half_drift(traces, grid):
    """The thermodynamic integral of (second half - first half) of each kept trace, in its standard errors.

    Parameters
    ----------
    traces : list of ndarray, each (replicates, L)
        Per temperature, as :func:`per_temperature` gives them.
    grid : TemperatureGrid

    Returns
    -------
    float
        0 when the traces are too short to halve.
    """
    from sepsti.core.evidence.sti import chain_summary

    differences, errors = [], []
    for trace in traces:
        half = trace.shape[1] // 2
        if half < 2:
            return 0.0
        first, second = trace[:, :half], trace[:, trace.shape[1] - half:]
        change = second.mean(axis=1) - first.mean(axis=1)
        if change.size > 1:
            error = change.std(ddof=1) / np.sqrt(change.size)
        else:
            error = np.hypot(chain_summary(first[0])[1], chain_summary(second[0])[1])
        differences.append(change.mean())
        errors.append(error)
    weights = grid.weights
    total = float(weights @ np.array(differences))
    error = float(np.sqrt(np.sum((weights * np.array(errors)) ** 2)))
    return total / error if error > 0 else (0.0 if total == 0 else float(np.sign(total)) * np.inf)


def _combine(ranks, grid, num_replicates, tasks, records, settings, timing, groups):
    temperatures, weights = grid.temperatures, grid.weights
    estimates, stderrs, replicate_values, pieces, falls, drifts = [], [], [], [], [], []
    seconds, cpu, stuck = [], [], []
    for rank in ranks:
        mine = [task for task in tasks if task.rank == rank]
        traces = per_temperature(records, mine, grid, num_replicates)
        stuck.append(sum(int(np.sum(np.ptp(trace, axis=1) == 0)) for trace in traces if trace.shape[1] > 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            # a diverged chain's NaN passes, to be named by _selected
            result = thermodynamic_integral(temperatures, traces, weights=weights, check_finite=False)
            replicate_values.append([thermodynamic_integral(temperatures, [t[r] for t in traces], weights=weights,
                                                            check_finite=False).log_marginal_likelihood
                                     for r in range(num_replicates)])
        # a replicate's chains may share work (e.g. a mode), so their errors can be correlated over the
        # temperatures: the spread of the replicates' own estimates bounds the standard error from below
        spread = float(np.std(replicate_values[-1], ddof=1) / np.sqrt(num_replicates)) if num_replicates > 1 else 0.0
        result = result._replace(stderr=max(result.stderr, spread))
        pieces.append(result)
        estimates.append(result.log_marginal_likelihood)
        stderrs.append(result.stderr)
        # diverged chains (a non-finite E_t) have no tempering check: their estimate is not finite either,
        # which _selected names
        finite = np.all(np.isfinite(result.mean_log_likelihood)) and np.all(np.isfinite(result.mcse))
        falls.append(largest_decrease(result.mean_log_likelihood, result.mcse) if finite else np.nan)
        drifts.append(max((half_drift([trace[np.asarray(groups) == group] for trace in traces], grid)
                           for group in sorted(set(groups))), key=abs))
        seconds.append(float(sum(records[task.key].seconds for task in mine)))
        cpu.append(float(sum(records[task.key].cpu_seconds for task in mine)))
    chain_seconds = sum(record.seconds for record in records.values())
    kernel_seconds = sum(record.kernel_seconds for record in records.values())
    timing = {**timing, "chain_seconds_per_rank": seconds, "chain_cpu_seconds_per_rank": cpu,
              "kernel_share": float(kernel_seconds / chain_seconds) if chain_seconds > 0 else 0.0}
    _warn_unequilibrated(ranks, falls)
    _warn_drifting(ranks, drifts)
    _warn_stuck(ranks, stuck, (grid.num_intervals + 1) * num_replicates)
    estimates = np.array(estimates)
    kept = [record.min_kept for record in records.values() if np.isfinite(record.min_kept)]
    return RankSelection(ranks, estimates, np.array(stderrs), _selected(ranks, estimates),
                         np.array(replicate_values), pieces, np.array(falls), np.array(drifts),
                         float(min(kept)) if kept else np.nan,
                         all(record.all_finite for record in records.values()), settings, timing)


def _selected(ranks, estimates):
    """The rank of the largest finite estimate; a non-finite one (diverged chains) is named and passed over."""
    finite = np.isfinite(estimates)
    if not finite.any():
        values = ", ".join(f"R={rank}: {value}" for rank, value in zip(ranks, estimates))
        raise ParameterError(f"no rank has a finite estimate ({values}): the chains diverged; take smaller steps or "
                             "check the data")
    if not finite.all():
        bad = ", ".join(f"R={rank} ({value})" for rank, value, ok in zip(ranks, estimates, finite) if not ok)
        warnings.warn(f"STI estimates not finite for {bad} (the chains diverged): the selection is among the "
                      "other ranks", ConvergenceWarning, stacklevel=3)
    return ranks[int(np.argmax(np.where(finite, estimates, -np.inf)))]


def _warn_unequilibrated(ranks, falls):
    bad = [f"R={rank} ({fall:.0f} se)" for rank, fall in zip(ranks, falls) if fall > TEMPERING_LIMIT]
    if bad:
        warnings.warn(f"STI chains did not reach their power posteriors: E_t[log p(X|theta)] falls as t rises "
                      f"for {', '.join(bad)}; the estimates are not log marginal likelihoods (run longer "
                      "chains or take larger steps)", ConvergenceWarning, stacklevel=3)


def _warn_drifting(ranks, drifts):
    bad = [f"R={rank} ({drift:+.0f} se)" for rank, drift in zip(ranks, drifts) if abs(drift) > DRIFT_LIMIT]
    if bad:
        warnings.warn(f"STI chains are still drifting: the second halves of the kept iterations give another "
                      f"estimate than the first halves for {', '.join(bad)}; run longer chains",
                      ConvergenceWarning, stacklevel=3)


def _warn_stuck(ranks, stuck, chains):
    """Name the ranks with chains whose kept values never changed: a Metropolis chain that refused every
    proposal (started where every proposal overshoots) samples nothing."""
    bad = [f"R={rank} ({count} of {chains} chains)" for rank, count in zip(ranks, stuck) if count]
    if bad:
        warnings.warn(f"STI chains stuck: every kept iteration refused its move for {', '.join(bad)}; the "
                      "estimates are not log marginal likelihoods (a chain started where every proposal is refused; "
                      "run longer chains)", ConvergenceWarning, stacklevel=3)


def to_json(selection, **extra):
    """The JSON document of a :class:`RankSelection` (``extra`` goes into ``settings``).

    Everything but ``seconds`` and ``timing`` is a function of the data and the
    settings: identical for any number of processes or threads and after a resume.
    """
    from sepsti.core.io import json_safe

    def by_rank(values):
        return {str(rank): np.asarray(value).tolist() for rank, value in zip(selection.ranks, values)}

    pieces = selection.per_temperature
    return json_safe({
        "ranks": list(selection.ranks),
        "log_marginal_likelihood": selection.log_marginal_likelihood.tolist(),
        "stderr": selection.stderr.tolist(),
        "selected_rank": int(selection.selected_rank),
        "replicates": by_rank(selection.replicates),
        "seconds": float(selection.timing["seconds"]),
        "settings": {**selection.settings, **extra},
        "per_temperature": {
            "temperatures": pieces[0].temperatures.tolist(),
            "mean_log_likelihood": by_rank(p.mean_log_likelihood for p in pieces),
            "stderr": by_rank(p.mcse for p in pieces),
            "integrated_time": by_rank(p.integrated_time for p in pieces),
            # E_t[log p] must rise with t; a fall of more than ~3 joint standard errors means
            # the chains did not reach their power posteriors
            "largest_decrease_se": dict(zip(map(str, selection.ranks), selection.largest_decrease.tolist())),
        },
        # the estimate from the kept iterations' second halves minus their first halves', in standard errors
        "drift_se": dict(zip(map(str, selection.ranks), selection.drift.tolist())),
        "min_kept_factor": selection.min_kept,
        "all_finite": selection.all_finite,
        "timing": {k: v for k, v in selection.timing.items() if k != "seconds"},
    })
