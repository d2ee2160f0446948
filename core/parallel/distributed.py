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
kernel as in :mod:`core.parallel.blocks`, with the same noise streams, so the
samples are those of the single-process block sampler.

The communicator is passed in (see :func:`core.parallel.mpi.world`); this
module does not import mpi4py.
"""

import time

import numpy as np

from core.errors import ParameterError
from core.parallel.blocks import BlockChainResult, NMFBlockState, block_log_factorials, single_threaded_blas
from core.parallel.noise import seed_states
from core.parallel.schedule import BlockSchedule
from core.samplers.psgld import UNSET
from core.samplers.step_size import step_sizes

__all__ = ["run_distributed_block_chain"]

_EVALUATE = {"none": 0, "before_update": 1, "after_update": 2}


def run_distributed_block_chain(X, W, H, comm, *, seed, chain, temperature, num_steps, num_keep, num_blocks=8,
                                sampler="sgld", step_a=5e-7, step_b=0.51, rate_W=4e-4, rate_H=4e-4, alpha=0.99,
                                sigma=1e-5, evaluate="after_update"):
    """Run one block chain with rows of X and W spread over the processes of ``comm``.

    Parameters
    ----------
    X : ndarray, shape (n_rows, n_cols)
        The full data on every process (only the own rows are used; a real
        deployment would read just those).
    W, H : ndarray
        The start (same on every process).
    comm : MPI communicator
    seed, chain : int
        Streams as in :func:`core.parallel.blocks.init_state`.
    Other parameters : as in :func:`core.parallel.blocks.run_block_chain`.

    Returns
    -------
    BlockChainResult or None
        On process 0, the trace and the assembled final state; None elsewhere.
    """
    from core.parallel._kernels import nmf_part_kernel_serial

    size, rank_here = comm.Get_size(), comm.Get_rank()
    if num_blocks % size:
        raise ParameterError(f"num_blocks={num_blocks} must be a multiple of the {size} processes")
    if not 1 <= num_keep <= num_steps:
        raise ParameterError(f"num_keep={num_keep} must lie in [1, num_steps={num_steps}]")
    schedule = BlockSchedule(X.shape, num_blocks)
    per = num_blocks // size
    groups = np.arange(rank_here * per, (rank_here + 1) * per)
    rows = slice(int(schedule.edges[0][groups[0]]), int(schedule.edges[0][groups[-1] + 1]))
    X_local = np.ascontiguousarray(X[rows])
    row_edges = np.ascontiguousarray(schedule.edges[0][groups[0]:groups[-1] + 2] - schedule.edges[0][groups[0]])
    col_edges = schedule.edges[1]
    W_local = np.array(W[rows], copy=True, order="C")
    v_W = np.full_like(W_local, UNSET)
    H_work = np.array(H, copy=True, order="C")  # only the held column groups are current
    v_H = np.full_like(H_work, UNSET)
    states_W = seed_states(seed, chain, range(num_blocks))[groups]
    states_H = seed_states(seed, chain, range(num_blocks, 2 * num_blocks))
    log_factorial = block_log_factorials(X, schedule)
    burn_in = num_steps - num_keep
    steps = step_sizes(step_a, step_b, num_steps=num_steps, num_decay_steps=max(burn_in, 1))
    trace = np.empty(num_keep)
    out = np.zeros(per)
    min_kept, finite = np.inf, True
    kernel_seconds = 0.0
    start = time.perf_counter()
    previous, following = (rank_here - 1) % size, (rank_here + 1) % size
    with single_threaded_blas():
        for iteration in range(1, num_steps + 1):
            keep = iteration > burn_in
            part = schedule.part_index(iteration)
            columns = np.ascontiguousarray((groups + part) % num_blocks)
            n_s = schedule.part_size(part)
            scale = X.size / n_s
            code = _EVALUATE[evaluate] if keep else 0
            tick = time.perf_counter()
            nmf_part_kernel_serial(X_local, W_local, H_work, v_W, v_H, row_edges, col_edges, columns, states_W,
                                   states_H, float(steps[iteration - 1]), float(temperature), float(scale),
                                   float(rate_W), float(rate_H), sampler == "psgld", float(alpha), float(sigma),
                                   float(n_s), code, out)
            kernel_seconds += time.perf_counter() - tick
            if keep:
                local = float(out.sum() - log_factorial[groups, columns].sum()) if code else np.nan
                total = comm.reduce(local, root=0)
                if rank_here == 0:
                    trace[iteration - burn_in - 1] = scale * total
                low = min(float(W_local.min()), float(H_work[:, _held(col_edges, columns)].min()))
                min_kept = min(min_kept, low)
                finite = finite and np.isfinite(local) and bool(np.all(np.isfinite(W_local)))
            # pass the first held H group back along the ring, take the next one from the front
            give = int(columns[0])
            take = int((groups[-1] + 1 + part) % num_blocks)
            if size > 1:
                cols = slice(int(col_edges[give]), int(col_edges[give + 1]))
                received = comm.sendrecv((give, H_work[:, cols].copy(), v_H[:, cols].copy(), states_H[give].copy()),
                                         dest=previous, source=following)
                index, block, average, state = received
                assert index == take
                cols = slice(int(col_edges[take]), int(col_edges[take + 1]))
                H_work[:, cols] = block
                v_H[:, cols] = average
                states_H[take] = state
    seconds = time.perf_counter() - start
    min_kept = comm.allreduce(min_kept, op=_min_op())
    finite = comm.allreduce(bool(finite), op=_and_op())
    W_parts = comm.gather(W_local, root=0)
    held = _final_groups(groups, num_steps, num_blocks)
    H_parts = comm.gather([(g, H_work[:, int(col_edges[g]):int(col_edges[g + 1])], v_H[:, int(col_edges[g]):
                                                                                   int(col_edges[g + 1])],
                            states_H[g]) for g in held], root=0)
    v_W_parts = comm.gather(v_W, root=0)
    W_state_parts = comm.gather(states_W, root=0)
    if rank_here != 0:
        return None
    H_final = np.empty_like(H_work)
    v_H_final = np.empty_like(v_H)
    states_H_final = np.empty_like(states_H)
    for part_list in H_parts:
        for g, block, average, state in part_list:
            H_final[:, int(col_edges[g]):int(col_edges[g + 1])] = block
            v_H_final[:, int(col_edges[g]):int(col_edges[g + 1])] = average
            states_H_final[g] = state
    state = NMFBlockState(np.concatenate(W_parts), H_final, np.concatenate(v_W_parts), v_H_final,
                          np.concatenate(W_state_parts), states_H_final)
    return BlockChainResult(trace, state, float(min_kept), bool(finite), seconds, kernel_seconds)


def _held(col_edges, columns):
    return np.concatenate([np.arange(col_edges[c], col_edges[c + 1]) for c in columns])


def _final_groups(groups, num_steps, num_blocks):
    """H column groups held after ``num_steps`` iterations (each shifts the window by one)."""
    return (groups + num_steps) % num_blocks


def _min_op():
    from core.parallel.mpi import reduction

    return reduction("min")


def _and_op():
    from core.parallel.mpi import reduction

    return reduction("land")
