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

from sepsti.core.checks import real_array
from sepsti.core.errors import ParameterError

__all__ = ["SparseTensor", "TensorBlocks", "coalesce", "from_dense", "to_dense", "validate_sparse_tensor"]

_INT64_MAX = 2 ** 63 - 1


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
        On a shape that is not positive integer sizes, coordinates that are not integers, inconsistent
        shapes, out-of-range or duplicate coordinates, or values that are not finite real numbers.
    """
    if not isinstance(tensor, SparseTensor):
        raise ParameterError(f"{name}: expected a SparseTensor, got {type(tensor).__name__}")
    coords, values, shape = _checked_parts(tensor.coords, tensor.values, tensor.shape, f"{name}: ")
    if nonnegative and values.size and values.min() < 0:
        raise ParameterError(f"{name}: values must be non-negative counts; smallest is {values.min()}")
    key = _row_major_key(coords, shape)
    if key.size > 1:
        ordered = np.sort(key)
        if np.any(ordered[1:] == ordered[:-1]):
            raise ParameterError(f"{name}: duplicate coordinates; use coalesce() to sum duplicates")
    return SparseTensor(coords, values, shape)


def _is_integral(n):
    """Whether ``n`` is an integer, or a float equal to one (a bool is neither)."""
    if isinstance(n, (bool, np.bool_)):
        return False
    if isinstance(n, (int, np.integer)):
        return True
    return isinstance(n, (float, np.floating)) and math.isfinite(n) and float(n).is_integer()


def _checked_parts(coords, values, shape, prefix):
    """``(coords, values, shape)`` as int64, float64 and a tuple of int, or ParameterError.

    Every check but the one for duplicates: :func:`validate_sparse_tensor` adds it, :func:`coalesce`
    sums them. ``prefix`` starts every message.
    """
    try:
        sizes = list(shape)
    except TypeError:
        sizes = []
    if not sizes or not all(_is_integral(n) and 1 <= n <= _INT64_MAX for n in sizes):
        raise ParameterError(f"{prefix}shape={shape!r}: expected a non-empty tuple of positive integer sizes "
                             f"(below 2**63)")
    shape = tuple(int(n) for n in sizes)
    given = np.asarray(coords)
    if given.ndim != 2 or given.shape[1] != len(shape):
        raise ParameterError(f"{prefix}coords has shape {given.shape}; expected (nnz, {len(shape)})")
    if given.dtype.kind == "f":
        fractional = ~(np.isfinite(given) & (given == np.trunc(given)))
        if fractional.any():
            row = int(np.argmax(fractional.any(axis=1)))
            raise ParameterError(f"{prefix}coords[{row}] = {given[row].tolist()}: coordinates must be integers")
        # integral floats beyond int64 are outside every shape: -1 marks them so
        coords = np.ascontiguousarray(np.where(np.abs(given) < 2.0 ** 63, given, -1), dtype=np.int64)
    elif given.dtype.kind in "iu":
        coords = np.ascontiguousarray(given, dtype=np.int64)  # uint64 beyond int64 wraps negative: outside
    else:
        raise ParameterError(f"{prefix}coords must be integers; got dtype {given.dtype}")
    values = np.asarray(values)
    if values.dtype.kind not in "biuf":
        raise ParameterError(f"{prefix}values must be real numbers; got dtype {values.dtype}")
    values = np.ascontiguousarray(values, dtype=np.float64)
    if values.shape != (coords.shape[0],):
        raise ParameterError(f"{prefix}values has shape {values.shape}; expected ({coords.shape[0]},)")
    if coords.size and ((coords.min(axis=0) < 0).any() or (coords.max(axis=0) >= shape).any()):
        outside = (coords < 0) | (coords >= np.array(shape, dtype=np.int64))
        row = int(np.argmax(outside.any(axis=1)))
        mode = int(np.argmax(outside[row]))
        raise ParameterError(f"{prefix}coords[{row}] = {given[row].tolist()}: outside the shape {shape} "
                             f"(index out of range in mode {mode})")
    if not np.all(np.isfinite(values)):
        raise ParameterError(f"{prefix}values contain NaN or infinity")
    return coords, values, shape


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
        One row per entry (floats only if integral).
    values : array_like of real numbers, shape (n,)
    shape : tuple of int

    Returns
    -------
    SparseTensor
        Entries sorted in row-major order.

    Raises
    ------
    ParameterError
        As :func:`validate_sparse_tensor`, duplicates aside; and if summing overflows.
    """
    coords, values, shape = _checked_parts(coords, values, shape, "")
    unique, inverse = np.unique(_row_major_key(coords, shape), return_inverse=True)
    summed = np.bincount(inverse, weights=values, minlength=unique.size)
    if not np.all(np.isfinite(summed)):
        raise ParameterError("values: the sum at a repeated coordinate overflows float64")
    keep = summed != 0
    if _linear_index_fits(shape):
        distinct = np.stack(np.unravel_index(unique[keep], shape), axis=1).astype(np.int64)
    else:  # the keys are ranks: take each distinct coordinate from a row holding it
        rows = np.empty(unique.size, dtype=np.intp)
        rows[inverse] = np.arange(inverse.size)
        distinct = coords[rows[keep]]
    return SparseTensor(distinct, summed[keep], shape)


def from_dense(array):
    """Return the non-zero entries of a dense array as a SparseTensor (row-major order).

    Raises
    ------
    ParameterError
        On values that are not real numbers (complex values were cast to their real part, strings read as numbers).
    """
    array = real_array("array", array)
    coords = np.argwhere(array != 0).astype(np.int64)
    return SparseTensor(np.ascontiguousarray(coords), array[tuple(coords.T)], tuple(array.shape))


def to_dense(tensor):
    """Return the dense array of a SparseTensor (small tensors only).

    Raises
    ------
    ParameterError
        As :func:`validate_sparse_tensor` (a negative coordinate was written at the far end of its mode, a
        duplicate kept its last value only).
    """
    tensor = validate_sparse_tensor(tensor)
    out = np.zeros(tensor.shape, dtype=np.float64)
    out[tuple(np.asarray(tensor.coords).T)] = tensor.values
    return out
