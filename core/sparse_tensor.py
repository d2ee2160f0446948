"""Sparse tensors in coordinate (COO) form.

Conventions: a tensor of shape ``(I, J, K, ...)`` with ``nnz`` stored entries
is ``coords`` (int64, shape ``(nnz, ndim)``, 0-based) and ``values`` (float64,
shape ``(nnz,)``). Stored entries are distinct coordinates; every other entry
is zero. Nothing in this module densifies a tensor unless asked to
(``to_dense``, meant for small tensors and tests).

Blocks: a :class:`TensorBlocks` is a set of boxes of a three-way tensor
(an index range per mode) together with, for sparse data, where each box's
non-zeros sit in a copy of ``coords``/``values`` sorted by box. It is the
data subset that tensor models sum over (:mod:`sepsti.core.models.poisson_parafac`),
so it lives here, beside the tensor, below the models. How a tensor is cut
into blocks and which blocks form a part of the block-parallel scheme is
that scheme's business (:mod:`sepsti.core.parallel.tensor_blocks`, which builds
the sorted copy once).
"""

import math
from typing import NamedTuple

import numpy as np

from sepsti.core.errors import ParameterError

__all__ = ["SparseTensor", "TensorBlocks", "coalesce", "from_dense", "to_dense", "validate_sparse_tensor"]


class SparseTensor(NamedTuple):
    """A sparse tensor in coordinate form.

    Attributes
    ----------
    coords : ndarray of int64, shape (nnz, ndim)
        0-based coordinates of the stored entries.
    values : ndarray of float64, shape (nnz,)
        Their values.
    shape : tuple of int
        Shape of the full tensor.
    """

    coords: np.ndarray
    values: np.ndarray
    shape: tuple

    @property
    def nnz(self):
        """Number of stored entries."""
        return int(self.values.shape[0])

    @property
    def ndim(self):
        """Number of modes."""
        return len(self.shape)

    @property
    def size(self):
        """Number of entries of the full tensor (Python int, no overflow)."""
        size = 1
        for n in self.shape:
            size *= int(n)
        return size


class TensorBlocks(NamedTuple):
    """A set of blocks of a three-way tensor, typically one part or one block, with what kernels need.

    Attributes
    ----------
    keys : ndarray of int64, shape (n, 3)
        Block coordinates ``(b1, b2, b3)`` (the group of each mode).
    ranges : ndarray of int64, shape (n, 3, 2)
        ``[lo, hi)`` index range of each block in each mode.
    starts, stops : ndarray of int64, shape (n,)
        Rows of the sorted ``coords``/``values`` holding each block's non-zeros
        (both zero for dense data).
    coords : ndarray of int64, shape (nnz, 3) or None
        Non-zero coordinates (global, 0-based) sorted by block; shared, not copied.
    values : ndarray of float64, shape (nnz,) or None
        Their values.
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


def validate_sparse_tensor(tensor, *, nonnegative=False, name="tensor"):
    """Check a sparse tensor and return it with canonical dtypes.

    Parameters
    ----------
    tensor : SparseTensor
    nonnegative : bool
        Require finite non-negative values (count models).
    name : str
        Name used in messages.

    Returns
    -------
    SparseTensor

    Raises
    ------
    ParameterError
        On inconsistent shapes, out-of-range or duplicate coordinates, or bad values.
    """
    if not isinstance(tensor, SparseTensor):
        raise ParameterError(f"{name}: expected a SparseTensor, got {type(tensor).__name__}")
    shape = tuple(int(n) for n in tensor.shape)
    if not shape or any(n < 1 for n in shape):
        raise ParameterError(f"{name}: shape={tensor.shape} must be a non-empty tuple of positive sizes")
    coords = np.ascontiguousarray(tensor.coords, dtype=np.int64)
    values = np.ascontiguousarray(tensor.values, dtype=np.float64)
    if coords.ndim != 2 or coords.shape[1] != len(shape):
        raise ParameterError(f"{name}: coords has shape {coords.shape}; expected (nnz, {len(shape)})")
    if values.shape != (coords.shape[0],):
        raise ParameterError(f"{name}: values has shape {values.shape}; expected ({coords.shape[0]},)")
    if coords.size and ((coords.min(axis=0) < 0).any() or (coords.max(axis=0) >= shape).any()):
        raise ParameterError(f"{name}: coordinates out of range for shape {shape}")
    if not np.all(np.isfinite(values)):
        raise ParameterError(f"{name}: values contain NaN or infinity")
    if nonnegative and values.size and values.min() < 0:
        raise ParameterError(f"{name}: values must be non-negative counts; smallest is {values.min()}")
    key = _row_major_key(coords, shape)
    if key.size > 1:
        ordered = np.sort(key)
        if np.any(ordered[1:] == ordered[:-1]):
            raise ParameterError(f"{name}: duplicate coordinates; use coalesce() to sum duplicates")
    return SparseTensor(coords, values, shape)


def _linear_index_fits(shape):
    """Whether every row-major linear index of ``shape`` fits in int64."""
    return math.prod(shape) <= 2 ** 63 - 1


def _row_major_key(coords, shape):
    """An int64 key per coordinate that sorts and compares as the coordinates do in row-major order.

    The linear index when it fits; beyond (FROSTT's nell-1 and delicious-4d have more than 2**63
    entries) the rank of the coordinate among the distinct ones.
    """
    if _linear_index_fits(shape):
        linear = np.zeros(coords.shape[0], dtype=np.int64)
        for mode, n in enumerate(shape):
            linear *= n
            linear += coords[:, mode]
        return linear
    order = np.lexsort(coords.T[::-1])
    ordered = coords[order]
    new = np.ones(coords.shape[0], dtype=bool)
    new[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    key = np.empty(coords.shape[0], dtype=np.int64)
    key[order] = np.cumsum(new) - 1
    return key


def coalesce(coords, values, shape):
    """Sum duplicate coordinates and drop zeros.

    Parameters
    ----------
    coords : array_like of int, shape (n, ndim)
    values : array_like, shape (n,)
    shape : tuple of int

    Returns
    -------
    SparseTensor
        Entries sorted in row-major order.
    """
    shape = tuple(int(n) for n in shape)
    coords = np.asarray(coords, dtype=np.int64).reshape(-1, len(shape))
    values = np.asarray(values, dtype=np.float64)
    outside = (coords < 0) | (coords >= np.array(shape, dtype=np.int64))
    if outside.any():
        row = int(np.argmax(outside.any(axis=1)))
        raise ParameterError(f"coords[{row}] = {coords[row].tolist()}: outside the shape {shape}")
    unique, inverse = np.unique(_row_major_key(coords, shape), return_inverse=True)
    summed = np.bincount(inverse, weights=values, minlength=unique.size)
    keep = summed != 0
    if _linear_index_fits(shape):
        distinct = np.stack(np.unravel_index(unique[keep], shape), axis=1).astype(np.int64)
    else:  # the keys are ranks: take each distinct coordinate from a row holding it
        rows = np.empty(unique.size, dtype=np.intp)
        rows[inverse] = np.arange(inverse.size)
        distinct = coords[rows[keep]]
    return SparseTensor(distinct, summed[keep], shape)


def from_dense(array):
    """Return the non-zero entries of a dense array as a SparseTensor (row-major order)."""
    array = np.asarray(array, dtype=np.float64)
    coords = np.argwhere(array != 0).astype(np.int64)
    return SparseTensor(np.ascontiguousarray(coords), array[tuple(coords.T)], tuple(array.shape))


def to_dense(tensor):
    """Return the dense array of a SparseTensor (small tensors only)."""
    out = np.zeros(tensor.shape, dtype=np.float64)
    out[tuple(np.asarray(tensor.coords).T)] = tensor.values
    return out
