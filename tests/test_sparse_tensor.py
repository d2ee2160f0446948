"""sepsti.core.sparse_tensor: what validate_sparse_tensor and coalesce accept, refused by name otherwise."""

import warnings

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.sparse_tensor import SparseTensor, coalesce, from_dense, to_dense, validate_sparse_tensor

COORDS = [[0, 1, 2], [2, 0, 1]]


@pytest.mark.parametrize("coords, values, shape, match", [
    ([[1.7, 0.2, 0.9]], [1.0], (3, 3, 3), r"coords\[0\] = \[1.7, 0.2, 0.9\]: coordinates must be integers"),
    ([[np.nan, 0, 0]], [1.0], (3, 3, 3), r"coords\[0\] = \[nan, 0.0, 0.0\]: coordinates must be integers"),
    (np.array([[True, False, True]]), [1.0], (3, 3, 3), "coords must be integers; got dtype bool"),
    (np.array([["1", "0", "1"]]), [1.0], (3, 3, 3), "coords must be integers; got dtype <U1"),
    ([[2, 0, 0]], [1.0], (2.9, 3, 3), r"shape=\(2.9, 3, 3\): expected a non-empty tuple of positive integer"),
    ([[1, 0, 0]], [1.0], (True, 3, 3), r"shape=\(True, 3, 3\)"),
    ([[1, 0, 0]], [1.0], ("3", 3, 3), r"shape=\('3', 3, 3\)"),
    ([[0, 0, 0]], [1 + 5j], (3, 3, 3), "values must be real numbers; got dtype complex128"),
    ([[0, 0, 0]], ["2.5"], (3, 3, 3), "values must be real numbers; got dtype <U3"),
], ids=["fractional", "NaN coordinate", "bool coordinates", "string coordinates", "fractional size",
        "bool size", "string size", "complex value", "string value"])
def test_coordinates_and_sizes_must_be_integers_and_values_real(coords, values, shape, match):
    tensor = SparseTensor(np.array(coords), np.array(values), shape)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning on the way to the error
        with pytest.raises(ParameterError, match=f"^tensor: {match}"):
            validate_sparse_tensor(tensor)
        with pytest.raises(ParameterError, match=f"^{match}"):
            coalesce(np.array(coords), np.array(values), shape)


def test_integral_floats_are_the_integers_they_equal():
    exact = validate_sparse_tensor(SparseTensor(np.array(COORDS), np.array([1.0, 2.0]), (3, 3, 3)))
    floats = validate_sparse_tensor(SparseTensor(np.array(COORDS, dtype=float), np.array([1, 2]),
                                                 (3.0, np.float64(3), np.int32(3))))
    assert floats.shape == exact.shape and all(type(n) is int for n in floats.shape)
    np.testing.assert_array_equal(floats.coords, exact.coords)
    assert floats.coords.dtype == np.int64 and floats.values.dtype == np.float64
    merged = coalesce(np.array(COORDS + COORDS, dtype=float), [1.0, 2.0, 3.0, 4.0], (3.0, 3, 3))
    np.testing.assert_array_equal(to_dense(merged), to_dense(coalesce(COORDS, [4.0, 6.0], (3, 3, 3))))
    with pytest.raises(ParameterError, match=r"coords\[0\] = \[1e\+19, 0.0, 0.0\]: outside the shape"):
        coalesce([[1e19, 0.0, 0.0]], [1.0], (3, 3, 3))  # integral, but beyond int64


def test_coalesce_takes_one_row_per_entry_only():
    # pydata/sparse's (ndim, nnz) layout was reshaped into other entries: [[0, 1, 2], [0, 1, 2], ...] read as rows
    transposed = np.array([[0, 1, 2, 0], [0, 1, 2, 1], [0, 1, 2, 2]])
    with pytest.raises(ParameterError, match=r"^coords has shape \(3, 4\); expected \(nnz, 3\)"):
        coalesce(transposed, [10.0, 20.0, 30.0, 40.0], (3, 3, 3))
    with pytest.raises(ParameterError, match=r"^coords has shape \(6,\); expected \(nnz, 3\)"):
        coalesce([0, 1, 2, 2, 0, 1], [1.0, 2.0], (3, 3, 3))
    tensor = coalesce(transposed.T, [10.0, 20.0, 30.0, 40.0], (3, 3, 3))
    assert tensor.coords.tolist() == [[0, 0, 0], [0, 1, 2], [1, 1, 1], [2, 2, 2]]
    assert tensor.values.tolist() == [10.0, 40.0, 20.0, 30.0]


@pytest.mark.parametrize("coords, values, shape, match", [
    ([[0, 0]], [np.nan], (2, 2), "^values contain NaN or infinity"),
    ([[0, 0], [0, 0]], [np.inf, -np.inf], (2, 2), "^values contain NaN or infinity"),
    ([[0, 0], [0, 0]], [1e308, 1e308], (2, 2), "^values: the sum at a repeated coordinate overflows float64"),
    (np.zeros((0, 2)), [], (-1, 2), r"^shape=\(-1, 2\): expected a non-empty tuple of positive integer sizes"),
    (np.zeros((0, 2)), [], (0, 2), r"^shape=\(0, 2\)"),
    (np.zeros((0, 0)), [], (), r"^shape=\(\)"),
    ([[0, 0], [1, 1]], [1.0], (2, 2), r"^values has shape \(1,\); expected \(2,\)"),
    ([[0, 0]], [1.0], (2 ** 64, 2), r"^shape=\(18446744073709551616, 2\): .*\(below 2\*\*63\)"),
    ([[0, 3]], [1.0], (2, 2), r"^coords\[0\] = \[0, 3\]: outside the shape \(2, 2\) \(index out of range in mode 1\)"),
], ids=["NaN", "inf - inf", "overflowing sum", "negative size", "zero size", "no modes", "values too few",
        "size 2**64", "out of range"])
def test_coalesce_checks_what_validate_sparse_tensor_checks(coords, values, shape, match):
    with pytest.raises(ParameterError, match=match):
        coalesce(coords, values, shape)
    if "sum" not in match:  # a tensor holds distinct coordinates: nothing is summed
        with pytest.raises(ParameterError, match=f"^tensor: {match[1:]}"):
            validate_sparse_tensor(SparseTensor(np.array(coords), np.array(values), shape))



@pytest.mark.parametrize("coords, values, match", [
    ([[-1, 0, 0]], [1.0], r"coords\[0\] = \[-1, 0, 0\]: outside the shape"),  # was written at [2, 0, 0]
    ([[3, 0, 0]], [1.0], r"coords\[0\] = \[3, 0, 0\]: outside the shape"),  # was an IndexError
    ([[0, 0, 0], [0, 0, 0]], [1.0, 2.0], "duplicate coordinates"),  # was 2.0 at [0, 0, 0], not 3.0
])
def test_to_dense_refuses_what_validate_sparse_tensor_refuses(coords, values, match):
    with pytest.raises(ParameterError, match=f"^tensor: {match}"):
        to_dense(SparseTensor(np.array(coords), np.array(values), (3, 3, 3)))


@pytest.mark.parametrize("array, match", [
    (np.ones((2, 2, 2), complex), r"^array: complex values \(complex128\); expected real numbers$"),
    (np.full((2, 2, 2), "1"), r"^array: expected real numbers, got values of type <U1$"),
])
def test_from_dense_refuses_values_that_are_not_real_numbers(array, match):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning on the way to the error
        with pytest.raises(ParameterError, match=match):
            from_dense(array)


def test_nonnegative_refuses_any_negative_value_and_accepts_zero():
    """Counts: -0.5 is refused and a stored 0.0 accepted (a check that let values down to -1 through passed
    before)."""
    coords = np.array([[0, 0, 0], [1, 2, 0], [2, 1, 1]])
    with pytest.raises(ParameterError, match=r"^tensor: values must be non-negative counts; smallest is -0.5$"):
        validate_sparse_tensor(SparseTensor(coords, np.array([3.0, -0.5, 1.0]), (3, 3, 2)), nonnegative=True)
    tensor = validate_sparse_tensor(SparseTensor(coords, np.array([3.0, 0.0, 1.0]), (3, 3, 2)), nonnegative=True)
    np.testing.assert_array_equal(tensor.values, [3.0, 0.0, 1.0])
    validate_sparse_tensor(SparseTensor(coords, np.array([3.0, -0.5, 1.0]), (3, 3, 2)))  # any real value otherwise
