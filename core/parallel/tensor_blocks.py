"""B × B × B blocks of a three-way tensor and the B² parts of the block-parallel PARAFAC scheme.

Conventions: the tensor is cut by a :class:`sepsti.core.parallel.schedule.BlockSchedule`,
the rule the NMF block samplers use for matrices: mode ``m`` of size ``n_m``
into ``B`` contiguous groups of ``numpy.array_split`` sizes (the first
``n_m mod B`` one longer), group ``g`` being ``[edges[m][g], edges[m][g + 1])``.
Block ``(b1, b2, b3)`` is the product of group ``b1`` of mode 0, ``b2`` of
mode 1 and ``b3`` of mode 2.

Part ``p``, written in base B as ``p = u B + v``, is the schedule's part
``{(b, (b + u) mod B, (b + v) mod B) : b = 0..B-1}``: its blocks share no index
range in any mode, so the factor blocks they touch can be updated in parallel
without conflict, and the B² parts cover every block exactly once
(PARAFAC'18 §III, Fig. 1). Block ``b`` of every part uses group ``b`` of
the first factor, which is why, with MPI, each process keeps its blocks of A
while blocks of B and C travel between parts.

For a sparse tensor the index is built once: the non-zeros are sorted by
block, so the non-zeros of block ``key`` are rows ``offsets[key]`` to
``offsets[key + 1]`` of ``coords``/``values`` (global 0-based coordinates).
Sets of blocks are handed out as :class:`sepsti.core.sparse_tensor.TensorBlocks`,
the subset type of :class:`sepsti.core.models.poisson_parafac.PoissonParafac`: the
model reads blocks without knowing how they were cut.
"""

from typing import NamedTuple

import numpy as np

from sepsti.core.errors import ParameterError
from sepsti.core.parallel.schedule import BlockSchedule
from sepsti.core.sparse_tensor import SparseTensor, TensorBlocks, validate_sparse_tensor

__all__ = ["TensorBlockIndex", "block_key", "build_block_index", "owned_blocks", "slab_index"]


class TensorBlockIndex(NamedTuple):
    """The block structure of a tensor, built once.

    Attributes
    ----------
    schedule : BlockSchedule
        The groups of each mode and the parts.
    coords, values : ndarray or None
        Non-zeros sorted by block key (None for a dense tensor).
    offsets : ndarray of int64, shape (B**3 + 1,)
        Start row of each block's non-zeros (all zero for a dense tensor).
    """

    schedule: BlockSchedule
    coords: object
    values: object
    offsets: np.ndarray

    @property
    def shape(self):
        """Shape ``(I, J, K)`` of the tensor."""
        return self.schedule.shape

    @property
    def num_blocks(self):
        """B, the number of groups per mode."""
        return self.schedule.num_blocks

    @property
    def edges(self):
        """The schedule's group edges: one int64 array of B + 1 entries per mode."""
        return self.schedule.edges

    @property
    def num_parts(self):
        """B², the number of parts."""
        return self.schedule.num_parts

    def blocks(self, keys):
        """Return the :class:`TensorBlocks` of the given block keys, shape (n, 3)."""
        keys = np.asarray(keys, dtype=np.int64).reshape(-1, 3)
        ranges = np.empty((keys.shape[0], 3, 2), dtype=np.int64)
        for mode in range(3):
            ranges[:, mode, 0] = self.edges[mode][keys[:, mode]]
            ranges[:, mode, 1] = self.edges[mode][keys[:, mode] + 1]
        flat = block_key(keys, self.num_blocks)
        return TensorBlocks(keys, ranges, self.offsets[flat], self.offsets[flat + 1], self.coords, self.values)

    def part(self, p):
        """Return the :class:`TensorBlocks` of part ``p`` (0 ≤ p < B²)."""
        return self.blocks(self.schedule.part_groups(p))

    def block(self, b1, b2, b3):
        """Return the :class:`TensorBlocks` holding the single block ``(b1, b2, b3)``."""
        return self.blocks([[b1, b2, b3]])


def block_key(keys, num_blocks):
    """Flat key ``(b1 B + b2) B + b3`` of block coordinates, shape (n, 3) → (n,)."""
    keys = np.asarray(keys, dtype=np.int64)
    return (keys[..., 0] * num_blocks + keys[..., 1]) * num_blocks + keys[..., 2]


def build_block_index(tensor, num_blocks):
    """Build the block index of a tensor once.

    Parameters
    ----------
    tensor : SparseTensor or ndarray, shape (I, J, K)
        A sparse tensor (its non-zeros are sorted by block) or a dense array
        (only the ranges are recorded; kernels slice the array).
    num_blocks : int
        B, groups per mode (1 ≤ B ≤ min(I, J, K)).

    Returns
    -------
    TensorBlockIndex

    Raises
    ------
    ParameterError
        If the tensor is not three-way, ``num_blocks`` is not in 1..min(I, J, K), or a sparse tensor
        has coordinates out of range or repeated, or values that are not finite non-negative counts
        (:func:`sepsti.core.sparse_tensor.validate_sparse_tensor`).
    """
    shape = tuple(int(n) for n in tensor.shape)
    if len(shape) != 3:
        raise ParameterError(f"tensor has shape {shape}; the block scheme is for three-way tensors")
    schedule = BlockSchedule(shape, num_blocks)
    num_blocks = schedule.num_blocks
    if not isinstance(tensor, SparseTensor):
        return TensorBlockIndex(schedule, None, None, np.zeros(num_blocks ** 3 + 1, dtype=np.int64))
    tensor = validate_sparse_tensor(tensor, nonnegative=True)
    coords = tensor.coords
    block = np.empty((coords.shape[0], 3), dtype=np.int64)
    for mode in range(3):
        block[:, mode] = np.searchsorted(schedule.edges[mode], coords[:, mode], side="right") - 1
    flat = block_key(block, num_blocks)
    del block
    order = np.argsort(flat, kind="stable")
    counts = np.bincount(flat, minlength=num_blocks ** 3)
    offsets = np.zeros(num_blocks ** 3 + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return TensorBlockIndex(schedule, np.ascontiguousarray(coords[order]),
                            np.ascontiguousarray(tensor.values[order]), offsets)


def owned_blocks(num_blocks, process, num_processes):
    """A-blocks ``[lo, hi)`` of process ``process`` of ``num_processes``: contiguous, sizes differ by at most one.

    Raises
    ------
    ParameterError
        If there are more processes than blocks.
    """
    num_blocks, num_processes = int(num_blocks), int(num_processes)
    if num_processes > num_blocks:
        raise ParameterError(f"{num_processes} processes need num_blocks >= {num_processes} (got {num_blocks}): "
                             "each process keeps at least one block of the first factor")
    return process * num_blocks // num_processes, (process + 1) * num_blocks // num_processes


def slab_index(index, lo, hi):
    """The index restricted to the blocks whose first-mode key is in ``[lo, hi)`` (a process's data).

    The non-zeros of those blocks are one contiguous run of the sorted
    ``coords`` (the first key is the most significant), which is copied so the
    full arrays can be freed; every other block becomes empty. Coordinates stay
    global.
    """
    if index.coords is None:
        return index
    per_first = index.num_blocks ** 2
    first, last = int(index.offsets[lo * per_first]), int(index.offsets[hi * per_first])
    offsets = np.clip(index.offsets - first, 0, last - first)
    return index._replace(coords=np.array(index.coords[first:last]), values=np.array(index.values[first:last]),
                          offsets=offsets)
