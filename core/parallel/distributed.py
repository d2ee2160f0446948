"""Block-distributed SGLD / pSGLD for Poisson NMF: data too big for one machine.

Conventions
-----------
With P processes and B blocks (B a multiple of P), process p owns the row
groups p*m .. (p+1)*m - 1 (m = B/P): those rows of X and of W never move.
At part q, row group b needs H's column group (b + q) mod B, so between
iterations every process passes the H column group of its first row group
-- with its pSGLD average and its noise stream -- to process p - 1 and
receives the next one from process p + 1: the groups travel ring-wise, one
per process per iteration. The update of each block is the same compiled
kernel as in :mod:`sepsti.core.parallel.blocks`, with the same noise streams, so the
samples are those of the single-process block sampler.

The communicator is passed in (see :func:`sepsti.core.parallel.mpi.world`); this
module does not import mpi4py.
"""

import time

import numpy as np

from sepsti.core.errors import ParameterError
from sepsti.core.blas import single_threaded_blas
from sepsti.core.parallel.blocks import (
    EVALUATE_MODES,
    BlockChainResult,
    NMFBlockState,
    _check_factors,
    block_log_factorials,
)
from sepsti.core.parallel.kernel_arguments import (
    EVALUATE_NONE,
    NMFBlockLayout,
    NMFChainArrays,
    StepConstants,
    check_block_settings,
)
from sepsti.core.parallel.noise import seed_states
from sepsti.core.parallel.schedule import BlockSchedule
from sepsti.core.samplers.psgld import UNSET
from sepsti.core.samplers.step_size import step_sizes

__all__ = ["run_distributed_block_chain"]


def run_distributed_block_chain(X, W, H, comm, settings, *, seed, chain, temperature, num_blocks=8, rate_W=4e-4,
                                rate_H=4e-4):
    """Run one block chain with rows of X and W spread over the processes of ``comm``.

    Parameters
    ----------
    X : ndarray, shape (n_rows, n_cols)
        The full data on every process (only the own rows are used; a real
        deployment would read just those).
    W, H : ndarray
        The start (same on every process).
    comm : MPI communicator
    settings : LangevinSettings
        As in :func:`sepsti.core.parallel.blocks.run_block_chain`.
    seed, chain : int
        Streams as in :func:`sepsti.core.parallel.blocks.init_state`.
    Other parameters : as in :func:`sepsti.core.parallel.blocks.run_block_chain`.

    Returns
    -------
    BlockChainResult or None
        On process 0, the trace and the assembled final state (``cpu_seconds`` of process 0); None elsewhere.
    """
    from sepsti.core.parallel._nmf_kernels import nmf_chain_kernel

    size, rank_here = comm.Get_size(), comm.Get_rank()
    if num_blocks % size:
        raise ParameterError(f"num_blocks={num_blocks} must be a multiple of the {size} processes")
    check_block_settings(settings, EVALUATE_MODES)
    kept_constants = StepConstants.of(settings, temperature=temperature, prior_rates=(rate_W, rate_H))
    _check_factors(X, np.asarray(W), np.asarray(H))
    num_steps, num_keep = settings.num_steps, settings.num_keep
    schedule = BlockSchedule(X.shape, num_blocks)
    per = num_blocks // size
    groups = np.arange(rank_here * per, (rank_here + 1) * per)
    rows = slice(int(schedule.edges[0][groups[0]]), int(schedule.edges[0][groups[-1] + 1]))
    X_local = np.ascontiguousarray(X[rows])
    row_edges = np.ascontiguousarray(schedule.edges[0][groups[0]:groups[-1] + 2] - schedule.edges[0][groups[0]])
    col_edges = schedule.edges[1]
    W_local = np.array(W[rows], copy=True, order="C")
    v_W = np.full_like(W_local, UNSET)
    # H is worked on transposed (column groups as row runs), as the compiled kernel wants it;
    # only the held column groups are current
    Ht = np.array(np.asarray(H).T, copy=True, order="C")
    v_Ht = np.full_like(Ht, UNSET)
    states_W = seed_states(seed, chain, range(num_blocks))[groups]
    states_H = seed_states(seed, chain, range(num_blocks, 2 * num_blocks))
    log_factorial = block_log_factorials(X, schedule)
    burn_in = num_steps - num_keep
    steps = step_sizes(settings.step_a, settings.step_b, num_steps=num_steps, num_decay_steps=max(burn_in, 1))
    trace = np.empty(num_keep)
    local_value = np.empty(1)
    status = np.array([np.inf, 0.0])
    part_columns = np.ascontiguousarray(np.stack([(groups + p) % num_blocks for p in range(schedule.num_parts)]))
    part_sizes = np.array([float(schedule.part_size(p)) for p in range(schedule.num_parts)])
    log_factorial_held = np.ascontiguousarray(log_factorial[groups])
    chain_arrays = NMFChainArrays(W_local, Ht, v_W, v_Ht, states_W, states_H)
    burn_in_constants = kept_constants._replace(evaluate=EVALUATE_NONE)
    kernel_seconds = 0.0
    start, cpu_start = time.perf_counter(), time.thread_time()
    previous, following = (rank_here - 1) % size, (rank_here + 1) % size
    with single_threaded_blas():
        for iteration in range(1, num_steps + 1):
            keep = iteration > burn_in
            part = schedule.part_index(iteration)
            columns = part_columns[part]
            # one iteration (number 1 of a one-part layout: kept, and scaled with the global N / N_s)
            layout = NMFBlockLayout(row_edges, col_edges, part_columns[part:part + 1], part_sizes[part:part + 1],
                                    float(X.size), log_factorial_held)
            tick = time.perf_counter()
            nmf_chain_kernel(X_local, layout, chain_arrays, kept_constants if keep else burn_in_constants,
                             steps[iteration - 1:iteration], 1, 0, local_value,
                             status if keep else np.array([np.inf, 0.0]), False)
            kernel_seconds += time.perf_counter() - tick
            if keep:
                total = comm.reduce(float(local_value[0]), root=0)
                if rank_here == 0:
                    trace[iteration - burn_in - 1] = total
            # pass the first held H group back along the ring, take the next one from the front
            give = int(columns[0])
            take = int((groups[-1] + 1 + part) % num_blocks)
            if size > 1:
                cols = slice(int(col_edges[give]), int(col_edges[give + 1]))
                received = comm.sendrecv((give, Ht[cols].copy(), v_Ht[cols].copy(), states_H[give].copy()),
                                         dest=previous, source=following)
                index, block, average, state = received
                assert index == take
                cols = slice(int(col_edges[take]), int(col_edges[take + 1]))
                Ht[cols] = block
                v_Ht[cols] = average
                states_H[take] = state
    seconds, cpu_seconds = time.perf_counter() - start, time.thread_time() - cpu_start
    min_kept = comm.allreduce(float(status[0]), op=_min_op())
    finite = comm.allreduce(bool(status[1] == 0), op=_and_op())
    W_parts = comm.gather(W_local, root=0)
    held = _final_groups(groups, num_steps, num_blocks)
    H_parts = comm.gather([(g, Ht[int(col_edges[g]):int(col_edges[g + 1])].T,
                            v_Ht[int(col_edges[g]):int(col_edges[g + 1])].T, states_H[g]) for g in held], root=0)
    v_W_parts = comm.gather(v_W, root=0)
    W_state_parts = comm.gather(states_W, root=0)
    if rank_here != 0:
        return None
    H_final = np.empty_like(Ht.T, order="F")
    v_H_final = np.empty_like(v_Ht.T, order="F")
    states_H_final = np.empty_like(states_H)
    for part_list in H_parts:
        for g, block, average, state in part_list:
            H_final[:, int(col_edges[g]):int(col_edges[g + 1])] = block
            v_H_final[:, int(col_edges[g]):int(col_edges[g + 1])] = average
            states_H_final[g] = state
    state = NMFBlockState(np.concatenate(W_parts), H_final, np.concatenate(v_W_parts), v_H_final,
                          np.concatenate(W_state_parts), states_H_final)
    # as run_block_chain: a non-finite log-likelihood fails the chain too, and a failed chain has no minimum
    finite = bool(finite) and bool(np.all(np.isfinite(trace)))
    return BlockChainResult(trace, state, float(min_kept) if finite else np.nan, finite, seconds, kernel_seconds,
                            cpu_seconds)


def _final_groups(groups, num_steps, num_blocks):
    """H column groups held after ``num_steps`` iterations (each shifts the window by one)."""
    return (groups + num_steps) % num_blocks


def _min_op():
    from sepsti.core.parallel.mpi import reduction

    return reduction("min")


def _and_op():
    from sepsti.core.parallel.mpi import reduction

    return reduction("land")
