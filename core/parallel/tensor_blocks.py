"""B × B × B blocks of a three-way tensor and the B² parts of the block-parallel scheme.

Conventions: mode ``m`` of size ``n_m`` is cut into ``B`` contiguous index
ranges ``[bounds[m][b], bounds[m][b + 1])`` with ``bounds[m][b] = b n_m // B``
(sizes differ by at most one). Block ``(b1, b2, b3)`` is the product of range
``b1`` of mode 0, ``b2`` of mode 1 and ``b3`` of mode 2.

Part ``p = u B + v`` (``u, v`` in ``0..B-1``) is the B blocks
``{(b, (b + u) mod B, (b + v) mod B) : b = 0..B-1}``: its blocks share no index
range in any mode, so the factor blocks they touch can be updated in parallel
without conflict, and the B² parts cover every block exactly once
(PARAFAC'18 §III, Fig. 1). Block ``b`` of every part uses row group ``b`` of
the first factor, which is why, with MPI, each process keeps its blocks of A
while blocks of B and C travel between parts.

For a sparse tensor the index is built once: the non-zeros are sorted by
block, so the non-zeros of block ``key`` are rows ``offsets[key]`` to
``offsets[key + 1]`` of ``coords``/``values`` (global 0-based coordinates).
"""

from typing import NamedTuple

import numpy as np

from core.errors import ParameterError
from core.sparse_tensor import SparseTensor

__all__ = ["TensorBlockIndex", "TensorBlocks", "block_bounds", "build_block_index", "part_keys",
           "block_key", "num_parts", "slab_index", "owned_blocks"]


class TensorBlocks(NamedTuple):
    """A set of blocks, typically one part or one block, with what kernels need.

    Attributes
    ----------
    keys : ndarray of int64, shape (n, 3)
        Block coordinates ``(b1, b2, b3)``.
    ranges : ndarray of int64, shape (n, 3, 2)
        ``[lo, hi)`` index range of each block in each mode.
    starts, stops : ndarray of int64, shape (n,)
        Rows of the index's sorted ``coords``/``values`` holding each block's non-zeros
        (both zero for a dense index).
    coords : ndarray of int64, shape (nnz, 3) or None
        The index's sorted coordinates (shared, not copied).
    values : ndarray of float64, shape (nnz,) or None
        The index's sorted values (shared, not copied).
    """

    keys: np.ndarray
    ranges: np.ndarray
    starts: np.ndarray
    stops: np.ndarray
    coords: object
    values: object

    @property
    def num_entries(self):
        """Number of tensor entries (zeros included) in the blocks: N_s of the subsample."""
        extents = self.ranges[:, :, 1] - self.ranges[:, :, 0]
        return int(sum(int(a) * int(b) * int(c) for a, b, c in extents))

    @property
    def nnz(self):
        """Number of stored non-zeros in the blocks."""
        return int(np.sum(self.stops - self.starts))


class TensorBlockIndex(NamedTuple):
    """The block structure of a tensor, built once.

    Attributes
    ----------
    shape : tuple of int
        Shape ``(I, J, K)`` of the tensor.
    num_blocks : int
        B, the number of index ranges per mode.
    bounds : tuple of 3 ndarray of int64, each shape (B + 1,)
        Range boundaries per mode.
    coords, values : ndarray or None
        Non-zeros sorted by block key (None for a dense tensor).
    offsets : ndarray of int64, shape (B**3 + 1,)
        Start row of each block's non-zeros (all zero for a dense tensor).
    """

    shape: tuple
    num_blocks: int
    bounds: tuple
    coords: object
    values: object
    offsets: np.ndarray

    @property
    def num_parts(self):
        """B², the number of parts."""
        return self.num_blocks ** 2

    def blocks(self, keys):
        """Return the :class:`TensorBlocks` of the given block keys, shape (n, 3)."""
        keys = np.asarray(keys, dtype=np.int64).reshape(-1, 3)
        ranges = np.empty((keys.shape[0], 3, 2), dtype=np.int64)
        for mode in range(3):
            ranges[:, mode, 0] = self.bounds[mode][keys[:, mode]]
            ranges[:, mode, 1] = self.bounds[mode][keys[:, mode] + 1]
        flat = block_key(keys, self.num_blocks)
        return TensorBlocks(keys, ranges, self.offsets[flat], self.offsets[flat + 1], self.coords, self.values)

    def part(self, p):
        """Return the :class:`TensorBlocks` of part ``p`` (0 ≤ p < B²)."""
        return self.blocks(part_keys(p, self.num_blocks))

    def block(self, b1, b2, b3):
        """Return the :class:`TensorBlocks` holding the single block ``(b1, b2, b3)``."""
        return self.blocks([[b1, b2, b3]])


def num_parts(num_blocks):
    """B², the number of parts of a B × B × B blocking."""
    return int(num_blocks) ** 2


def block_bounds(size, num_blocks):
    """Return the ``B + 1`` boundaries ``b size // B`` of one mode.

    Raises
    ------
    ParameterError
        If ``num_blocks`` is not in ``1..size``.
    """
    size, num_blocks = int(size), int(num_blocks)
    if num_blocks < 1 or num_blocks > size:
        raise ParameterError(f"num_blocks={num_blocks} must be between 1 and the mode size {size}")
    return (np.arange(num_blocks + 1, dtype=np.int64) * size) // num_blocks


def block_key(keys, num_blocks):
    """Flat key ``(b1 B + b2) B + b3`` of block coordinates, shape (n, 3) → (n,)."""
    keys = np.asarray(keys, dtype=np.int64)
    return (keys[..., 0] * num_blocks + keys[..., 1]) * num_blocks + keys[..., 2]


def part_keys(p, num_blocks):
    """Block coordinates of part ``p = u B + v``: ``(b, (b + u) mod B, (b + v) mod B)``, shape (B, 3)."""
    num_blocks = int(num_blocks)
    if not 0 <= p < num_blocks ** 2:
        raise ParameterError(f"part={p} must be in 0..{num_blocks ** 2 - 1} for num_blocks={num_blocks}")
    u, v = divmod(int(p), num_blocks)
    b = np.arange(num_blocks, dtype=np.int64)
    return np.stack([b, (b + u) % num_blocks, (b + v) % num_blocks], axis=1)


def build_block_index(tensor, num_blocks):
    """Build the block index of a tensor once.

    Parameters
    ----------
    tensor : SparseTensor or ndarray, shape (I, J, K)
        A sparse tensor (its non-zeros are sorted by block) or a dense array
        (only the ranges are recorded; kernels slice the array).
    num_blocks : int
        B, index ranges per mode (1 ≤ B ≤ min(I, J, K)).

    Returns
    -------
    TensorBlockIndex
    """
    shape = tuple(int(n) for n in tensor.shape)
    if len(shape) != 3:
        raise ParameterError(f"tensor has shape {shape}; the block scheme is for three-way tensors")
    bounds = tuple(block_bounds(n, num_blocks) for n in shape)
    if not isinstance(tensor, SparseTensor):
        return TensorBlockIndex(shape, int(num_blocks), bounds, None, None,
                                np.zeros(num_blocks ** 3 + 1, dtype=np.int64))
    coords = np.asarray(tensor.coords, dtype=np.int64)
    block = np.empty((coords.shape[0], 3), dtype=np.int64)
    for mode in range(3):
        block[:, mode] = np.searchsorted(bounds[mode], coords[:, mode], side="right") - 1
    flat = block_key(block, num_blocks)
    del block
    order = np.argsort(flat, kind="stable")
    counts = np.bincount(flat, minlength=num_blocks ** 3)
    offsets = np.zeros(num_blocks ** 3 + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return TensorBlockIndex(shape, int(num_blocks), bounds, np.ascontiguousarray(coords[order]),
                            np.ascontiguousarray(np.asarray(tensor.values, dtype=np.float64)[order]), offsets)


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
