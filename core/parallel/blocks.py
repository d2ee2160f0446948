"""Block-parallel SGLD / pSGLD for Poisson NMF: the B blocks of a part in parallel.

Conventions
-----------
X is (n_rows, n_cols), W (n_rows, rank), H (rank, n_cols), all of one float
dtype (float64, or float32 with float64 accumulation of log-likelihoods).
Iteration k uses part (k - 1) mod B of a :class:`sepsti.core.parallel.schedule.BlockSchedule`;
block b of the part updates W's row group b and H's column group
(b + k - 1) mod B from data block (b, (b + k - 1) mod B) only, with gradients scaled
by N/N_s (N_s = entries in the part) and the likelihood term tempered by t.
Every factor block draws its noise from its own stream
(:mod:`sepsti.core.parallel.noise`): W row group g from state ``W`` g (row by row),
H column group g from state ``H`` g (column by column), seeded from
(seed, chain, g) and (seed, chain, B + g).

A chain runs as one compiled loop over stretches of iterations
(:data:`PROGRESS_STRIDE`), on W and on H stored column-major (``H.T``
C-contiguous, as :func:`init_state` makes it), so that each block's three
products go to BLAS without copies. The B block updates of a part run in a
numba ``prange`` when several threads are allowed and the part is large
(:data:`PARALLEL_THRESHOLD`), else one after the other; rank selection
instead runs whole chains concurrently, one per thread or process.

The per-part log-likelihood is returned scaled by N/N_s: of the sample
before the update (``evaluate="before_update"``, free) or after it
(ICASSP'16 eq. 9, ``"after_update"``, one more product per block).

References
----------
ICASSP'16 §4.1.2; PARAFAC'18 §III-IV, eq. 6, 8-9.
"""

import time
from typing import NamedTuple

import numpy as np
from scipy.special import gammaln

from sepsti.core.checks import positive_number
from sepsti.core.errors import ParameterError
from sepsti.core.blas import single_threaded_blas
from sepsti.core.parallel.kernel_arguments import NMFBlockLayout, NMFChainArrays, StepConstants, check_block_settings
from sepsti.core.parallel.noise import fill_normal, seed_states
from sepsti.core.parallel.schedule import BlockSchedule
from sepsti.core.samplers.psgld import UNSET, update_average
from sepsti.core.samplers.step_size import step_sizes

__all__ = ["BlockChainResult", "NMFBlockState", "block_layout", "block_log_factorials", "dense_part_update",
           "init_state", "initial_factors", "part_update", "run_block_chain", "run_prior_chain"]

#: What an NMF block chain can record (``evaluate``).
EVALUATE_MODES = ("before_update", "after_update")

# parts with fewer (entries x rank) than this run their blocks serially (measured: on the
# 257 x 1661 speech matrix with 8 x 8 blocks, threads pay off from R = 256; on a busy machine a
# parallel region per iteration costs far more than it saves)
PARALLEL_THRESHOLD = 10_000_000

# iterations per call of the compiled chain loop (between progress updates)
PROGRESS_STRIDE = 25


class NMFBlockState(NamedTuple):
    """Everything a block chain carries: factors, pSGLD averages and the noise streams."""

    W: np.ndarray
    H: np.ndarray
    v_W: np.ndarray
    v_H: np.ndarray
    states_W: np.ndarray
    states_H: np.ndarray


class BlockChainResult(NamedTuple):
    """Output of :func:`run_block_chain`.

    Attributes
    ----------
    trace : ndarray, shape (num_keep,)
        Scaled log-likelihood estimates of the kept iterations.
    state : NMFBlockState
        The final state.
    min_kept : float
        Smallest entry of W or H over all kept samples (>= 0 by mirroring).
    all_finite : bool
        Whether every kept sample was finite.
    seconds : float
        Wall time of the chain.
    seconds_kernel : float
        Time spent inside the compiled part updates.
    cpu_seconds : float
        CPU time of the thread that ran the chain (unlike wall time, not
        inflated by other jobs on a busy machine).
    """

    trace: np.ndarray
    state: NMFBlockState
    min_kept: float
    all_finite: bool
    seconds: float
    seconds_kernel: float
    cpu_seconds: float = float("nan")


def initial_factors(X, rank, rng, dtype=None):
    """Random start on the data's scale: W, H ~ U(0.5, 1.5) * sqrt(mean(X) / rank).

    Starting from prior draws is hopeless with flat priors (lambda = 4e-4 puts
    WH around 1e9 on speech magnitudes): the first steps would overshoot by
    orders of magnitude. ``dtype`` defaults to X's when X is floating, else float64.
    """
    if dtype is None:
        dtype = X.dtype if np.issubdtype(X.dtype, np.floating) else np.float64
    level = np.sqrt(max(float(X.mean()), np.finfo(np.float64).tiny) / rank)
    W = (level * rng.uniform(0.5, 1.5, size=(X.shape[0], rank))).astype(dtype)
    H = (level * rng.uniform(0.5, 1.5, size=(rank, X.shape[1]))).astype(dtype)
    return W, H


def init_state(W, H, *, seed, chain, num_blocks):
    """A block state at (W, H) with the streams of ``chain`` (copies W and H).

    H and its pSGLD average are stored column-major (``H.T`` C-contiguous): the
    compiled kernels work on H transposed, where a column group is a
    contiguous run of rows.
    """
    W = np.array(W, copy=True, order="C")
    H = np.array(H, copy=True, order="F")
    return NMFBlockState(W, H, np.full_like(W, UNSET), np.full_like(H, UNSET, order="F"),
                         seed_states(seed, chain, range(num_blocks)),
                         seed_states(seed, chain, range(num_blocks, 2 * num_blocks)))


def part_update(X, state, schedule, part, settings, *, step_size, temperature, rate_W, rate_H, log_factorial_blocks,
                threads=None):
    """One block-parallel update of ``state`` (in place) on ``part``; returns the scaled log-likelihood.

    Parameters
    ----------
    X : ndarray, shape (n_rows, n_cols)
    state : NMFBlockState
        Updated in place.
    schedule : BlockSchedule
    part : int
    settings : LangevinSettings
        Its sampler, alpha, sigma and evaluate (:class:`sepsti.core.evidence.sti.LangevinSettings`).
    step_size, temperature : float
    rate_W, rate_H : float
        Exponential prior rates.
    log_factorial_blocks : ndarray, shape (B, B)
        Sum of lgamma(X + 1) over each block.
    threads : int, optional
        Run the part's blocks in numba threads when more than one (default:
        numba's thread count) and the part is large enough.

    Returns
    -------
    float
        (N/N_s) x the part's log-likelihood.
    """
    check_block_settings(settings, EVALUATE_MODES)
    constants = StepConstants.of(settings, temperature=temperature, prior_rates=(rate_W, rate_H))
    if schedule.shape != X.shape:
        raise ParameterError(f"schedule is for shape {schedule.shape}; X has shape {X.shape}")
    _check_state(X, state, schedule.num_blocks)
    B = schedule.num_blocks
    if np.shape(log_factorial_blocks) != (B, B):
        raise ParameterError(f"log_factorial_blocks has shape {np.shape(log_factorial_blocks)}; expected ({B}, {B})")
    # a one-part layout: the part is iteration 1's, kept (no burn-in)
    layout = NMFBlockLayout(schedule.edges[0], schedule.edges[1],
                            np.ascontiguousarray(schedule.part_groups(part)[:, 1]).reshape(1, -1),
                            np.array([float(schedule.part_size(part))]), float(X.size), log_factorial_blocks)
    trace = np.empty(1)
    status = np.array([np.inf, 0.0])
    _run_kernel(X, state, layout, constants, np.array([float(step_size)]), 1, 0, trace, status,
                parallel=_use_threads(X, state.W.shape[1], schedule, threads))
    return float(trace[0])


def block_layout(X, schedule):
    """The :class:`sepsti.core.parallel.kernel_arguments.NMFBlockLayout` of ``X`` cut by ``schedule``
    (all row groups)."""
    part_columns = np.ascontiguousarray(np.stack([schedule.part_groups(p)[:, 1] for p in range(schedule.num_parts)]))
    part_sizes = np.array([float(schedule.part_size(p)) for p in range(schedule.num_parts)])
    return NMFBlockLayout(schedule.edges[0], schedule.edges[1], part_columns, part_sizes, float(X.size),
                          block_log_factorials(X, schedule))


def _check_factors(X, W, H, prefix=""):
    """Raise ParameterError unless W (n_rows, rank) and H (rank, n_cols) fit ``X`` in one float dtype.

    ``prefix`` goes before the names in the message (``"state."``).
    """
    if X.ndim != 2 or X.dtype.kind not in "iuf":
        raise ParameterError(f"X has shape {X.shape} and dtype {X.dtype}; expected a matrix of counts")
    if W.ndim != 2 or W.shape[0] != X.shape[0] or W.shape[1] < 1 or W.dtype not in (np.float32, np.float64):
        raise ParameterError(f"{prefix}W has shape {W.shape} and dtype {W.dtype}; expected ({X.shape[0]}, rank) "
                             f"float32 or float64 for X of shape {X.shape}")
    if H.shape != (W.shape[1], X.shape[1]) or H.dtype != W.dtype:
        raise ParameterError(f"{prefix}H has shape {H.shape} and dtype {H.dtype}; expected "
                             f"{(W.shape[1], X.shape[1])} {W.dtype} for X of shape {X.shape} and {prefix}W of "
                             f"shape {W.shape}")


def _check_chain_inputs(X, rate_W, rate_H):
    """Raise ParameterError unless ``X`` holds finite non-negative counts and the prior rates are positive."""
    positive_number("rate_W", rate_W)
    positive_number("rate_H", rate_H)
    if not np.all(np.isfinite(X)) or X.min(initial=0) < 0:
        raise ParameterError("X must hold finite non-negative counts (it has NaN, infinite or negative entries)")


def _check_state(X, state, num_blocks):
    """Raise ParameterError unless ``state`` fits ``X`` and ``num_blocks`` (the kernels check no bounds)."""
    _check_factors(X, state.W, state.H, "state.")
    for name, like in (("v_W", state.W), ("v_H", state.H)):
        average = getattr(state, name)
        if average.shape != like.shape or average.dtype != like.dtype:
            raise ParameterError(f"state.{name} has shape {average.shape} and dtype {average.dtype}; expected "
                                 f"{like.shape} {like.dtype}, as its factor")
    for name in ("states_W", "states_H"):
        streams = getattr(state, name)
        if streams.dtype != np.uint64 or streams.ndim != 2 or streams.shape[0] < num_blocks or streams.shape[1] != 2:
            raise ParameterError(f"state.{name} has shape {streams.shape} and dtype {streams.dtype}; expected uint64 "
                                 f"noise streams of shape (>= {num_blocks}, 2) for num_blocks={num_blocks} "
                                 "(init_state's num_blocks)")


def _chain_arrays(state):
    """The kernels' view of ``state`` and the copies to store back once they have run.

    The kernels take W, H.T, v_W and v_H.T C-contiguous: views when laid out as
    :func:`init_state` lays them out, else copies, each written back on its own.

    Returns
    -------
    chain : NMFChainArrays
    copies : list of (target, copy)
        For each copy, the array of ``state`` (or its transpose) to store it in.
    """
    targets = (state.W, state.H.T, state.v_W, state.v_H.T)
    arrays = [M if M.flags.c_contiguous else np.ascontiguousarray(M) for M in targets]
    copies = [(target, array) for target, array in zip(targets, arrays) if array is not target]
    return NMFChainArrays(*arrays, state.states_W, state.states_H), copies


def _run_kernel(X, state, layout, constants, steps, first, burn_in, trace, status, *, parallel):
    """Run iterations ``first .. first + len(steps) - 1`` of the compiled chain loop on ``state`` (in place).

    ``parallel``: whether the blocks of a part run in numba threads (:func:`_use_threads`).
    """
    from sepsti.core.parallel._nmf_kernels import nmf_chain_kernel

    chain, copies = _chain_arrays(state)
    nmf_chain_kernel(X, layout, chain, constants, steps, int(first), int(burn_in), trace, status, bool(parallel))
    for target, array in copies:
        target[...] = array


def _use_threads(X, rank, schedule, threads):
    """Whether to run a part's blocks in numba threads: several threads and a part worth it."""
    import numba

    threads = numba.get_num_threads() if threads is None else int(threads)
    return threads > 1 and X.size * rank / schedule.num_blocks >= PARALLEL_THRESHOLD


def dense_part_update(X, state, schedule, part, settings, *, step_size, temperature, rate_W, rate_H):
    """Reference for :func:`part_update`: whole-matrix NumPy through the generic model and Langevin step.

    Uses :class:`sepsti.core.models.poisson_nmf.PoissonNMF`, the subsample helper and
    :func:`sepsti.core.samplers.langevin.langevin_step` with the same noise streams,
    so it must agree with the compiled path up to rounding. Returns the new
    state (the input is not modified) and the scaled log-likelihood.
    """
    from sepsti.core.models.poisson_nmf import NMFTheta, PoissonNMF
    from sepsti.core.models.subsample import log_likelihood_estimate, tempered_gradient
    from sepsti.core.samplers.langevin import langevin_step

    model = PoissonNMF(X, state.W.shape[1], rate_W=rate_W, rate_H=rate_H)
    blocks = schedule.part_blocks(part)
    theta = NMFTheta(state.W.copy(), state.H.copy())
    states_W, states_H = state.states_W.copy(), state.states_H.copy()
    noise_W = np.empty_like(theta.W)
    noise_H = np.empty_like(theta.H)
    for b, (rows, cols) in zip(schedule.part_groups(part), blocks):
        noise_W[rows] = fill_normal(states_W, b[0], np.empty((rows.stop - rows.start, theta.W.shape[1]),
                                                               dtype=theta.W.dtype))
        noise_H[:, cols] = _fill_h(states_H, b[1], theta.H.shape[0], cols.stop - cols.start, theta.H.dtype)
    check_block_settings(settings, EVALUATE_MODES)
    value = np.nan
    if settings.evaluate == "before_update":
        value = log_likelihood_estimate(model, theta, blocks)
    gradient, mean = tempered_gradient(model, theta, blocks, temperature)
    v_W, v_H = state.v_W.copy(), state.v_H.copy()
    preconditioner = None
    if settings.sampler == "psgld":
        mean_W, mean_H = (0.0, 0.0) if mean is None else mean
        v_W = update_average(v_W, mean_W, settings.alpha).astype(v_W.dtype, copy=False)
        v_H = update_average(v_H, mean_H, settings.alpha).astype(v_H.dtype, copy=False)
        preconditioner = NMFTheta(1.0 / (settings.sigma + np.sqrt(v_W)), 1.0 / (settings.sigma + np.sqrt(v_H)))
    new = langevin_step(None, theta, gradient, step_size, preconditioner=preconditioner, nonnegative=(True, True),
                        noise=NMFTheta(noise_W, noise_H))
    if settings.evaluate == "after_update":
        value = log_likelihood_estimate(model, new, blocks)
    return NMFBlockState(new.W, new.H, v_W, v_H, states_W, states_H), value


def _fill_h(states, index, rank, width, dtype):
    # column by column of H (row by row of H transposed, as the kernels store it)
    return fill_normal(states, index, np.empty((width, rank), dtype=dtype)).T


def run_block_chain(X, state, settings, *, temperature, num_blocks=8, rate_W=4e-4, rate_H=4e-4, progress=None,
                    threads=None):
    """Run one block-parallel chain on the power posterior at ``temperature``.

    Parameters
    ----------
    X : ndarray, shape (n_rows, n_cols)
    state : NMFBlockState
        Start (see :func:`init_state`); updated in place.
    settings : LangevinSettings
        Sampler, iterations and how many of the last are kept (burn-in = the rest; the step
        (a/k)^b decays during burn-in and is then fixed), alpha, sigma and ``evaluate``
        (``before_update`` or ``after_update``); see :class:`sepsti.core.evidence.sti.LangevinSettings`.
    temperature : float
    num_blocks : int
        B.
    rate_W, rate_H : float
        Exponential prior rates.
    progress : callable, optional
        Called with the number of iterations done, every
        :data:`PROGRESS_STRIDE` iterations (the loop runs compiled in between).
    threads : int, optional
        Run each part's blocks in numba threads when more than one (default:
        numba's thread count) and the part is large enough; 1 runs serially.

    Returns
    -------
    BlockChainResult
    """
    check_block_settings(settings, EVALUATE_MODES)
    constants = StepConstants.of(settings, temperature=temperature, prior_rates=(rate_W, rate_H))
    num_steps, num_keep = settings.num_steps, settings.num_keep
    schedule = BlockSchedule(X.shape, num_blocks)
    _check_state(X, state, schedule.num_blocks)
    _check_chain_inputs(X, rate_W, rate_H)
    layout = block_layout(X, schedule)
    parallel = _use_threads(X, state.W.shape[1], schedule, threads)
    burn_in = num_steps - num_keep
    steps = step_sizes(settings.step_a, settings.step_b, num_steps=num_steps, num_decay_steps=max(burn_in, 1))
    trace = np.empty(num_keep)
    status = np.array([np.inf, 0.0])
    kernel_seconds = 0.0
    start, cpu_start = time.perf_counter(), time.thread_time()
    with single_threaded_blas():
        for first in range(1, num_steps + 1, PROGRESS_STRIDE):
            stop = min(first + PROGRESS_STRIDE, num_steps + 1)
            tick = time.perf_counter()
            _run_kernel(X, state, layout, constants, steps[first - 1:stop - 1], first, burn_in, trace, status,
                        parallel=parallel)
            kernel_seconds += time.perf_counter() - tick
            if progress is not None:
                progress(stop - first)
    finite = status[1] == 0 and bool(np.all(np.isfinite(trace)))
    return BlockChainResult(trace, state, float(status[0]) if finite else np.nan, bool(finite),
                            time.perf_counter() - start, kernel_seconds, time.thread_time() - cpu_start)


def run_prior_chain(X, state, *, num_steps, num_keep, num_blocks=8, rate_W=4e-4, rate_H=4e-4):
    """The exact t = 0 "chain": ``num_keep`` independent prior draws instead of SGLD on the prior.

    Draw k is scored like the k-th kept sample of :func:`run_block_chain`
    (same part, N/N_s x its log-likelihood); draws come from the state's
    streams (W row group g from ``states_W[g]``, H column group g from
    ``states_H[g]``). The start in ``state`` is irrelevant and overwritten
    with the last draw; ``min_kept`` and ``all_finite`` cover every draw.

    Returns
    -------
    BlockChainResult
    """
    from sepsti.core.parallel._nmf_kernels import nmf_prior_kernel

    if not 1 <= num_keep <= num_steps:
        raise ParameterError(f"num_keep={num_keep} must lie in [1, num_steps={num_steps}]")
    schedule = BlockSchedule(X.shape, num_blocks)
    _check_state(X, state, schedule.num_blocks)
    _check_chain_inputs(X, rate_W, rate_H)
    layout = block_layout(X, schedule)
    burn_in = num_steps - num_keep
    trace = np.empty(num_keep)
    status = np.array([np.inf, 0.0])
    chain, copies = _chain_arrays(state)
    start, cpu_start = time.perf_counter(), time.thread_time()
    with single_threaded_blas():
        nmf_prior_kernel(X, layout, chain, np.array([rate_W, rate_H], dtype=np.float64), burn_in + 1, burn_in,
                         num_keep, trace, status)
    for target, array in copies:
        target[...] = array
    seconds = time.perf_counter() - start
    finite = status[1] == 0 and bool(np.all(np.isfinite(trace)))
    return BlockChainResult(trace, state, float(status[0]) if finite else np.nan, bool(finite), seconds, seconds,
                            time.thread_time() - cpu_start)


def block_log_factorials(X, schedule):
    """ndarray (B, B): sum of lgamma(X + 1) over each block."""
    B = schedule.num_blocks
    table = gammaln(X.astype(np.float64) + 1.0)
    out = np.empty((B, B))
    for i in range(B):
        for j in range(B):
            out[i, j] = table[schedule.group_slice(0, i), schedule.group_slice(1, j)].sum()
    return out
