"""Block-parallel tempered SGLD / pSGLD chains for sparse Poisson PARAFAC, one compiled pass per part.

Conventions: data is a :class:`sepsti.core.parallel.tensor_blocks.TensorBlockIndex`
of a sparse tensor (cut by the same :class:`sepsti.core.parallel.schedule.BlockSchedule`
rule as NMF's matrices); the position is :class:`sepsti.core.models.poisson_parafac.ParafacFactors`
(A, B, C) and pSGLD's running average v has the same shapes, so v is
partitioned with its factor blocks. Iteration l uses part (l − 1) mod B²;
block b of the part updates A-block b, B-block (b + u) mod B and C-block
(b + v) mod B from its own data only (PARAFAC'18 §III), with the gradient
scaled by t N/N_s (N_s the part's entries) and the update rule of
:mod:`sepsti.core.samplers.psgld` / :mod:`sepsti.core.samplers.sgld`, then mirroring.

What the chain records (``evaluate``): ``before_update``/``after_update``
score the position before/after iteration l's update on the part that drove
it, times N/N_s (PARAFAC'18 eq. 7); ``full`` scores the position after the
update on *all* the data every m-th kept iteration (counted back from the
last): Σ x̂ from the factor column sums, the x log x̂ terms in one pass over the
non-zeros, per slab of A-blocks. Parts visited in cyclic order make the part
estimates biased as well as noisy: the part scored at iteration l is the one
the chain last fitted B² − 1 iterations ago, with every other part pulling
the position away from it since. On a 10⁶-non-zero Facebook-shaped tensor
(B = 12, R = 5, t = 1) the part estimate had a standard deviation of 1.8·10⁵
(the data's part-to-part spread) against 6.4·10² for the full log-likelihood,
and a mean 3.7·10⁴ below it.

Each factor block draws its noise from its own stream
(:mod:`sepsti.core.parallel.noise`, seeded from ``stream(seed, *chain, 1 + m B + b)``
for mode m), so the samples do not depend on threads, or on which process
holds a block. The step size is (a/l)^b during burn-in, then fixed
(:func:`sepsti.core.samplers.step_size.step_sizes`).

Distributed (PARAFAC'18 Fig. 1): with an MPI communicator of P processes,
process p keeps A-blocks ``[lo, hi)`` (:func:`sepsti.core.parallel.tensor_blocks.owned_blocks`)
and the data blocks whose first index range is one of them; at part
``u B + v`` it holds B-blocks ``(b + u) mod B`` and C-blocks ``(b + v) mod B``
for its b. After each part it passes the C-block of its first A-block (and,
when v wraps, that B-block) with its pSGLD average and its noise stream to
process p − 1 and receives the next one from p + 1. Every block meets the same
arithmetic and the same stream as in one process, so the samples and the
log-likelihood trace are those of the one-process sampler, bit for bit. For
``evaluate="full"`` the processes gather the B- and C-blocks they hold, each
scores its own slab and the slab values are summed in the same order as in
one process.
"""

from typing import NamedTuple

import numpy as np

from sepsti.core.errors import ParameterError
from sepsti.core.models.poisson_parafac import ParafacFactors
from sepsti.core.parallel.kernel_arguments import ParafacChainArrays, PartStep, StepConstants, check_block_settings
from sepsti.core.parallel.tensor_blocks import owned_blocks, slab_index
from sepsti.core.random import stream
from sepsti.core.samplers.psgld import UNSET
from sepsti.core.samplers.step_size import step_sizes
from sepsti.core.sparse_tensor import TensorBlocks

__all__ = ["ParafacBlockState", "init_block_state", "num_evaluations", "parafac_part_update",
           "run_parafac_block_chain", "slab_log_likelihoods"]

#: The ``evaluate`` modes of a PARAFAC chain: the kernel's two, and the chain's own full-data scoring.
EVALUATE_MODES = ("before_update", "after_update", "full")


class ParafacBlockState(NamedTuple):
    """Position, pSGLD's v (unused by SGLD) and one noise stream per factor block.

    Attributes
    ----------
    position : ParafacFactors
    v : ParafacFactors
    streams : tuple of 3 ndarray of uint64, each shape (B, 2)
        Noise stream states of the B blocks of A, B and C.
    gradient : tuple of 3 ndarray
        Zero work arrays of the factors' shapes, where the compiled update
        gathers the non-zeros' gradient (and which it leaves zero).
    """

    position: tuple
    v: tuple
    streams: tuple
    gradient: tuple = None


def init_block_state(theta, *, seed, chain, num_blocks):
    """State at ``theta`` (copied) with v unset (:data:`sepsti.core.samplers.psgld.UNSET`) and the noise streams.

    ``chain`` is a tuple of integers identifying the chain, e.g. (rank, temperature index).
    """
    chain = tuple(int(c) for c in np.atleast_1d(chain))
    streams = []
    for mode in range(3):
        states = np.zeros((num_blocks, 2), dtype=np.uint64)
        for b in range(num_blocks):
            states[b, 0] = stream(seed, *chain, 1 + mode * num_blocks + b).integers(0, 2 ** 63, dtype=np.int64)
        streams.append(states)
    position = ParafacFactors(*(np.array(f, dtype=np.float64, order="C", copy=True) for f in theta))
    return ParafacBlockState(position, ParafacFactors(*(np.full_like(f, UNSET) for f in position)), tuple(streams),
                             tuple(np.zeros_like(f) for f in position))


def num_evaluations(num_keep, evaluate, evaluate_every):
    """Length of a chain's trace: ``num_keep``, or ceil(num_keep / m) for ``evaluate="full"``."""
    return -(-int(num_keep) // int(evaluate_every)) if evaluate == "full" else int(num_keep)


def slab_log_likelihoods(index, position, lo=0, hi=None):
    """Log-likelihood of the data in each slab of A-blocks ``lo..hi``: all (j, k), i in A-block a.

    Σ x̂ over a slab is Σ_r (Σ_i a_ir)(Σ_j b_jr)(Σ_k c_kr) with i over the
    A-block's range and j, k over everything; the x log x̂ − lgamma(x + 1) terms
    run over the slab's non-zeros (one contiguous run of the sorted index, also
    in a process's :func:`sepsti.core.parallel.tensor_blocks.slab_index`). Their sum
    is the full log-likelihood.

    Returns
    -------
    ndarray, shape (hi − lo,)
    """
    from sepsti.core.models import _parafac_kernels as kernels

    hi = index.num_blocks if hi is None else hi
    slabs = np.arange(lo, hi, dtype=np.int64)
    per_first = index.num_blocks ** 2
    ranges = np.zeros((slabs.size, 3, 2), dtype=np.int64)
    ranges[:, 0, 0] = index.edges[0][slabs]
    ranges[:, 0, 1] = index.edges[0][slabs + 1]
    ranges[:, 1, 1] = index.shape[1]
    ranges[:, 2, 1] = index.shape[2]
    # a slab is B² blocks in one box: keyed by its A-block, whole in the other modes
    keys = np.zeros((slabs.size, 3), dtype=np.int64)
    keys[:, 0] = slabs
    slab_blocks = TensorBlocks(keys, ranges, index.offsets[slabs * per_first], index.offsets[(slabs + 1) * per_first],
                               index.coords, index.values)
    placeholder = np.zeros((1, 1))
    return kernels.sparse_serial(ParafacFactors(*position), slab_blocks,
                                 ParafacFactors(placeholder, placeholder, placeholder), False)


def parafac_part_update(index, state, part, settings, *, step_size, temperature, prior_rates, parallel=False):
    """One iteration on ``part`` (in place); returns (N/N_s) × the part's log-likelihood.

    ``settings`` (:class:`sepsti.core.evidence.sti.LangevinSettings`) gives the sampler, alpha,
    sigma and what is scored: the position before the update (``evaluate="before_update"``, also
    for ``"full"``, which the chain scores itself) or after it (``"after_update"``), on the part's
    entries.
    """
    check_block_settings(settings, EVALUATE_MODES)
    constants = _constants(settings, temperature, prior_rates)
    _check_index(index)
    _check_state(index, state)
    return _update_part(_part_kernel(parallel), _chain_arrays(state), index.part(part), constants, _size(index),
                        float(step_size))


def _constants(settings, temperature, prior_rates):
    """:meth:`StepConstants.of`, with one prior rate per factor."""
    constants = StepConstants.of(settings, temperature=temperature, prior_rates=prior_rates)
    if constants.rates.shape != (3,):
        raise ParameterError(f"prior_rates={prior_rates!r}: expected 3 rates, one per factor (A, B, C)")
    return constants


def _check_index(index):
    """Raise ParameterError unless ``index`` holds a sparse tensor's non-zeros (the compiled update reads them)."""
    if index.coords is None:
        raise ParameterError("index: the compiled block chain needs the block index of a SparseTensor")


def _check_factors(index, factors, name, rank=None):
    """Raise ParameterError unless ``factors`` are three float64 matrices with the index's rows and one rank
    (``rank`` if given); return the rank."""
    factors = () if factors is None else tuple(factors)
    if len(factors) != 3:
        raise ParameterError(f"{name} has {len(factors)} factors; expected 3 (A, B, C)")
    if rank is None:
        rank = np.shape(factors[0])[1] if np.ndim(factors[0]) == 2 else 0
    for mode, factor in enumerate(factors):
        expected = (index.shape[mode], rank)
        if np.shape(factor) != expected or rank < 1 or np.asarray(factor).dtype != np.float64:
            raise ParameterError(f"{name}[{mode}] has shape {np.shape(factor)} and dtype {np.asarray(factor).dtype}; "
                                 f"expected {expected} float64 for a tensor of shape {index.shape}")
    return rank


def _check_state(index, state):
    """Raise ParameterError unless ``state`` fits ``index`` (the compiled update checks no bounds)."""
    rank = _check_factors(index, state.position, "state.position")
    _check_factors(index, state.v, "state.v", rank)
    _check_factors(index, state.gradient, "state.gradient", rank)
    B = index.num_blocks
    streams = tuple(state.streams)
    if len(streams) != 3 or any(s.dtype != np.uint64 or s.ndim != 2 or s.shape[0] < B or s.shape[1] != 2
                                for s in streams):
        raise ParameterError(f"state.streams has shapes {[np.shape(s) for s in streams]}; expected 3 uint64 noise "
                             f"streams of shape (>= {B}, 2) for num_blocks={B} (init_block_state's num_blocks)")


def _part_kernel(parallel):
    """The compiled part update: blocks in numba threads or in turn."""
    from sepsti.core.parallel import _parafac_kernels as kernels

    return kernels.part_update_parallel if parallel else kernels.part_update_serial


def _size(index):
    """N, the tensor's number of entries (a Python int: no overflow)."""
    return index.shape[0] * index.shape[1] * index.shape[2]


def _update_part(kernel, chain_arrays, blocks, constants, n_data, step):
    """One compiled update on ``blocks``; returns (N/N_s) × their log-likelihood (N_s: the part's entries)."""
    n_s = blocks.num_entries
    out = np.empty(blocks.keys.shape[0])
    kernel(chain_arrays, blocks, constants, PartStep(step, n_data / n_s, float(n_s)), out)
    return n_data / n_s * float(out.sum())


def _chain_arrays(state):
    """The kernels' flat view of ``state`` (the same arrays, no copies)."""
    return ParafacChainArrays(*state.position, *state.v, *state.gradient, *state.streams)


def run_parafac_block_chain(index, theta, settings, *, prior_rates, seed, chain, temperature, parallel=False,
                            comm=None):
    """Run one tempered chain and return the kept log-likelihood estimates and the final state.

    Parameters
    ----------
    index : TensorBlockIndex
        Block index of a sparse tensor.
    theta : ParafacFactors
        Starting point.
    settings : LangevinSettings
        Sampler, iterations kept and in all, step rule, alpha, sigma, ``evaluate``
        (``before_update``, ``after_update`` or ``full``, see the module docstring) and
        ``evaluate_every`` (m for ``full``: the full log-likelihood at iterations num_steps,
        num_steps − m, … after the burn-in); see :class:`sepsti.core.evidence.sti.LangevinSettings`.
    prior_rates : sequence of 3 floats
    seed : int
    chain : tuple of int
        Chain identity for the noise streams.
    temperature : float
    parallel : bool
        One numba thread per block of a part.
    comm : MPI communicator, optional
        Spread the chain's blocks over the processes (Fig. 1 scheme, see the
        module docstring); every process must call, and every process returns
        the same trace and final state as a one-process run.

    Returns
    -------
    trace : ndarray, shape (num_keep,), or (ceil(num_keep / m),) for ``evaluate="full"``
    state : ParafacBlockState
    """
    _check_index(index)
    check_block_settings(settings, EVALUATE_MODES)
    theta = tuple(np.asarray(f, dtype=np.float64) for f in theta)
    _check_factors(index, theta, "theta")
    num_steps, num_keep, evaluate = settings.num_steps, settings.num_keep, settings.evaluate
    burn_in = num_steps - num_keep
    every = settings.evaluate_every if evaluate == "full" else 1
    steps = step_sizes(settings.step_a, settings.step_b, num_steps=num_steps, num_decay_steps=max(burn_in, 1))
    constants = _constants(settings, temperature, prior_rates)
    if comm is not None and comm.Get_size() > 1:
        return _run_distributed(index, theta, comm, steps=steps, num_keep=num_keep, constants=constants, seed=seed,
                                chain=chain, evaluate=evaluate, every=every, parallel=parallel)
    state = init_block_state(theta, seed=seed, chain=chain, num_blocks=index.num_blocks)
    trace = np.empty(num_evaluations(num_keep, evaluate, every))
    # what parafac_part_update builds at every call, built once
    kernel, chain_arrays = _part_kernel(parallel), _chain_arrays(state)
    parts = [index.part(p) for p in range(index.num_parts)]
    for iteration in range(1, num_steps + 1):
        value = _update_part(kernel, chain_arrays, parts[(iteration - 1) % len(parts)], constants, _size(index),
                             float(steps[iteration - 1]))
        if iteration <= burn_in or (num_steps - iteration) % every:
            continue
        if evaluate == "full":
            value = float(np.sum(slab_log_likelihoods(index, state.position)))
        trace[trace.size - 1 - (num_steps - iteration) // every] = value
    return trace, state


def _pack(state, index, mode, block):
    lo, hi = int(index.edges[mode][block]), int(index.edges[mode][block + 1])
    return (mode, block, state.position[mode][lo:hi].copy(), state.v[mode][lo:hi].copy(),
            state.streams[mode][block].copy())


def _unpack(state, index, pieces):
    for mode, block, values, average, stream_state in pieces:
        lo, hi = int(index.edges[mode][block]), int(index.edges[mode][block + 1])
        state.position[mode][lo:hi] = values
        state.v[mode][lo:hi] = average
        state.streams[mode][block] = stream_state


def _block_buffer(state, index, mode, block):
    """Values, v and the noise stream of one factor block in one float64 buffer (the stream's bits viewed)."""
    lo, hi = int(index.edges[mode][block]), int(index.edges[mode][block + 1])
    return np.concatenate([state.position[mode][lo:hi].ravel(), state.v[mode][lo:hi].ravel(),
                           state.streams[mode][block].view(np.float64)])


def _buffer_size(state, index, mode, block):
    return 2 * int(index.edges[mode][block + 1] - index.edges[mode][block]) * state.position[mode].shape[1] + 2


def _load_buffer(state, index, mode, block, buffer):
    lo, hi = int(index.edges[mode][block]), int(index.edges[mode][block + 1])
    n = (hi - lo) * state.position[mode].shape[1]
    state.position[mode][lo:hi] = buffer[:n].reshape(hi - lo, -1)
    state.v[mode][lo:hi] = buffer[n:2 * n].reshape(hi - lo, -1)
    state.streams[mode][block] = buffer[2 * n:].view(np.uint64)


def _run_distributed(index, theta, comm, *, steps, num_keep, constants, seed, chain, evaluate, every, parallel):
    """The block chain with A-blocks spread over ``comm``'s processes (module docstring, Fig. 1).

    Within a part the process updates its first block, starts passing that
    block's C-block (and B-block) to process p − 1, updates its other blocks
    while the message travels, then takes in the block from p + 1, which only
    the next part uses: one part of slack against a neighbour's delay.
    """
    from sepsti.core.parallel.mpi import ring_exchange_start, wait_all

    size, process = comm.Get_size(), comm.Get_rank()
    num_blocks = index.num_blocks
    lo, hi = owned_blocks(num_blocks, process, size)
    local = slab_index(index, lo, hi)
    state = init_block_state(theta, seed=seed, chain=chain, num_blocks=num_blocks)
    n_data = _size(index)
    part_sizes = [index.part(q).num_entries for q in range(index.num_parts)]
    kernel = _part_kernel(parallel)
    chain_arrays = _chain_arrays(state)
    full = evaluate == "full"
    num_steps = len(steps)
    burn_in = num_steps - num_keep
    kept = np.empty((num_evaluations(num_keep, evaluate, every), hi - lo))
    out = np.empty(hi - lo)

    def update(blocks, n_s, step, out):
        kernel(chain_arrays, blocks, constants, PartStep(step, n_data / n_s, float(n_s)), out)

    for iteration in range(1, num_steps + 1):
        q = (iteration - 1) % index.num_parts
        u, v = divmod(q, num_blocks)
        keys = index.schedule.part_groups(q)[lo:hi]
        n_s = part_sizes[q]
        step = float(steps[iteration - 1])
        update(local.blocks(keys[:1]), n_s, step, out[:1])
        # the next part needs C-blocks shifted by one (and B-blocks when v wraps)
        moves = [(2, 0, (lo + v) % num_blocks, (hi + v) % num_blocks)]
        if v == num_blocks - 1:
            moves.append((1, 1, (lo + u) % num_blocks, (hi + u) % num_blocks))
        requests, incoming = [], []
        for mode, tag, give, take in moves:
            buffer = np.empty(_buffer_size(state, index, mode, take))
            requests += ring_exchange_start(comm, _block_buffer(state, index, mode, give), buffer, tag=tag)
            incoming.append((mode, take, buffer))
        if hi - lo > 1:
            update(local.blocks(keys[1:]), n_s, step, out[1:])
        wait_all(requests)
        for mode, take, buffer in incoming:
            _load_buffer(state, index, mode, take, buffer)
        if iteration <= burn_in or (num_steps - iteration) % every:
            continue
        row = kept.shape[0] - 1 - (num_steps - iteration) // every
        if full:
            # every process holds current B- and C-blocks for the next part; gather them all
            u, v = divmod(iteration % index.num_parts, num_blocks)
            held = [_pack(state, index, 1, (b + u) % num_blocks)[:3] for b in range(lo, hi)]
            held += [_pack(state, index, 2, (b + v) % num_blocks)[:3] for b in range(lo, hi)]
            for pieces in comm.allgather(held):
                for mode, block, values in pieces:
                    state.position[mode][int(index.edges[mode][block]):int(index.edges[mode][block + 1])] = values
            kept[row] = slab_log_likelihoods(local, state.position, lo, hi)
        else:
            kept[row] = out
    # assemble the final state and the per-block log-likelihoods on every process
    u, v = divmod(num_steps % index.num_parts, num_blocks)
    mine = [_pack(state, index, 0, b) for b in range(lo, hi)]
    mine += [_pack(state, index, 1, (b + u) % num_blocks) for b in range(lo, hi)]
    mine += [_pack(state, index, 2, (b + v) % num_blocks) for b in range(lo, hi)]
    for pieces in comm.allgather(mine):
        _unpack(state, index, pieces)
    per_block = np.concatenate(comm.allgather(kept), axis=1)
    trace = np.empty(per_block.shape[0])
    for row in range(trace.size):
        total = float(np.ascontiguousarray(per_block[row]).sum())
        # full: the slabs' sum, as in one process; otherwise the part's, scaled as in parafac_part_update
        trace[row] = total if full else n_data / part_sizes[(burn_in + row) % index.num_parts] * total
    return trace, state
