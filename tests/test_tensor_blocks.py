import itertools

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.parallel.schedule import BlockSchedule
from sepsti.core.parallel.tensor_blocks import build_block_index, owned_blocks, slab_index
from sepsti.core.sparse_tensor import SparseTensor, from_dense


@pytest.mark.parametrize("num_blocks", [1, 2, 3, 5, 12])
def test_parts_share_no_index_and_cover_every_block_once(num_blocks):
    index = build_block_index(np.zeros((12, 13, 14)), num_blocks)
    assert index.num_parts == num_blocks ** 2
    seen = np.zeros((num_blocks,) * 3, dtype=int)
    for p in range(index.num_parts):
        keys = index.part(p).keys
        assert keys.shape == (num_blocks, 3)
        for mode in range(3):
            assert np.unique(keys[:, mode]).size == num_blocks
        for key in keys:
            seen[tuple(key)] += 1
    assert np.all(seen == 1)


@pytest.mark.parametrize("shape, num_blocks", [((7, 9, 11), 3), ((12, 12, 13), 4), ((5, 6, 5), 5)])
def test_part_entries_are_disjoint_and_cover_the_tensor(rng, shape, num_blocks):
    X = rng.poisson(0.3, size=shape).astype(float)
    index = build_block_index(from_dense(X), num_blocks)
    cover = np.zeros(shape, dtype=int)
    nonzeros = np.zeros(shape, dtype=int)
    for p in range(index.num_parts):
        part = index.part(p)
        for mode in range(3):
            touched = np.concatenate([np.arange(lo, hi) for lo, hi in part.ranges[:, mode]])
            assert np.unique(touched).size == touched.size, "a part touches one index twice"
        for (i0, i1), (j0, j1), (k0, k1) in part.ranges:
            cover[i0:i1, j0:j1, k0:k1] += 1
        for start, stop, rng_ in zip(part.starts, part.stops, part.ranges):
            coords = index.coords[start:stop]
            assert np.all((coords >= rng_[:, 0]) & (coords < rng_[:, 1]))
            nonzeros[tuple(coords.T)] += 1
        assert part.num_entries == sum(
            (i1 - i0) * (j1 - j0) * (k1 - k0) for (i0, i1), (j0, j1), (k0, k1) in part.ranges)
    assert np.all(cover == 1)
    np.testing.assert_array_equal(nonzeros, (X != 0).astype(int))
    values = np.zeros(shape)
    values[tuple(index.coords.T)] = index.values
    np.testing.assert_array_equal(values, X)


def test_groups_and_parts_are_those_of_the_block_schedule():
    # one rule for matrices and tensors: numpy.array_split sizes, part u B + v = offsets (u, v)
    index = build_block_index(np.zeros((42390, 7, 10)), 4)
    schedule = BlockSchedule((42390, 7, 10), 4)
    for mode in range(3):
        np.testing.assert_array_equal(index.edges[mode], schedule.edges[mode])
        np.testing.assert_array_equal(np.diff(index.edges[mode]),
                                      [len(g) for g in np.array_split(np.arange(index.shape[mode]), 4)])
    b = np.arange(4)
    for (u, v), p in zip(itertools.product(range(4), repeat=2), range(index.num_parts)):
        part = index.part(p)
        # part p = u B + v in base B: the blocks (b, (b + u) mod B, (b + v) mod B), b = 0..B-1
        np.testing.assert_array_equal(part.keys, np.stack([b, (b + u) % 4, (b + v) % 4], axis=1))
        np.testing.assert_array_equal(part.keys, schedule.part_groups(p))
        assert [tuple(slice(lo, hi) for lo, hi in box) for box in part.ranges] == list(schedule.part_blocks(p))
        assert part.num_entries == schedule.part_size(p)


def test_single_block_lookup(rng):
    X = rng.poisson(0.5, size=(6, 6, 6)).astype(float)
    index = build_block_index(from_dense(X), 2)
    for key in itertools.product(range(2), repeat=3):
        blocks = index.block(*key)
        (i0, i1), (j0, j1), (k0, k1) = blocks.ranges[0]
        assert blocks.nnz == np.count_nonzero(X[i0:i1, j0:j1, k0:k1])


def test_dense_index_has_ranges_only():
    index = build_block_index(np.zeros((4, 5, 6)), 2)
    assert index.coords is None
    # part 3 of B = 2 is blocks (0, 1, 1) and (1, 0, 0): 2 * 3 * 3 + 2 * 2 * 3 entries
    assert index.part(3).num_entries == 30
    assert index.part(3).nnz == 0


def test_invalid_arguments():
    with pytest.raises(ParameterError, match="num_blocks"):
        build_block_index(np.zeros((3, 4, 5)), 4)
    with pytest.raises(ParameterError, match="three-way"):
        build_block_index(SparseTensor(np.zeros((0, 2), dtype=np.int64), np.zeros(0), (3, 3)), 1)
    with pytest.raises(ParameterError, match=r"^tensor has shape \(3, 3, 3, 3\); the block scheme is for three-way"):
        build_block_index(np.zeros((3, 3, 3, 3)), 1)  # four modes accepted before
    with pytest.raises(ParameterError, match="part=9"):
        build_block_index(np.zeros((3, 4, 5)), 3).part(9)


def test_a_whole_number_of_blocks_given_as_a_float_is_taken_as_an_integer(rng):
    """3.0 blocks, which the schedule accepts, failed in numpy with a float count of keys."""
    X = from_dense(rng.poisson(0.5, size=(6, 7, 8)).astype(float))
    for tensor in (X, np.zeros((6, 7, 8))):
        index, expected = build_block_index(tensor, 3.0), build_block_index(tensor, 3)
        np.testing.assert_array_equal(index.offsets, expected.offsets)
        assert index.offsets.dtype == np.int64 and index.part(4).keys.tolist() == expected.part(4).keys.tolist()


@pytest.mark.parametrize("num_blocks, num_processes", [(5, 2), (12, 5), (4, 4), (3, 1)])
def test_owned_blocks_split_the_first_mode_contiguously(num_blocks, num_processes):
    shares = [owned_blocks(num_blocks, p, num_processes) for p in range(num_processes)]
    assert shares[0][0] == 0 and shares[-1][1] == num_blocks
    assert all(a[1] == b[0] for a, b in zip(shares, shares[1:]))
    sizes = [hi - lo for lo, hi in shares]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


def test_more_processes_than_blocks_is_an_error():
    with pytest.raises(ParameterError, match="num_blocks >= 3"):
        owned_blocks(2, 0, 3)


def test_slab_index_keeps_exactly_the_blocks_of_its_first_mode_range(rng):
    X = rng.poisson(0.4, size=(8, 9, 10)).astype(float)
    index = build_block_index(from_dense(X), 4)
    slab = slab_index(index, 1, 3)
    for key in itertools.product(range(4), repeat=3):
        full, part = index.block(*key), slab.block(*key)
        if 1 <= key[0] < 3:
            np.testing.assert_array_equal(part.coords[part.starts[0]:part.stops[0]],
                                          full.coords[full.starts[0]:full.stops[0]])
            np.testing.assert_array_equal(part.values[part.starts[0]:part.stops[0]],
                                          full.values[full.starts[0]:full.stops[0]])
        else:
            assert part.nnz == 0
    assert slab.coords.shape[0] == sum(index.block(*k).nnz for k in itertools.product(range(1, 3), range(4),
                                                                                       range(4)))


@pytest.mark.parametrize("coords, values, message", [
    ([[0, 0, 0], [1, 2, 6], [5, 5, 5]], [1.0, 2.0, 3.0], "out of range"),  # k = K was filed in block 0
    ([[0, 0, 0], [-1, 2, 3], [5, 5, 5]], [1.0, 2.0, 3.0], "out of range"),
    ([[0, 0, 0], [0, 0, 0], [5, 5, 5]], [1.0, 2.0, 3.0], "duplicate"),  # counted twice
    ([[0, 0, 0], [1, 2, 3], [5, 5, 5]], [1.0, -2.0, 3.0], "non-negative"),
    ([[0, 0, 0], [1, 2, 3], [5, 5, 5]], [1.0, np.nan, 3.0], "NaN")],
    ids=["k = K", "i = -1", "duplicate", "negative value", "NaN value"])
def test_sparse_tensor_that_is_not_counts_at_distinct_coordinates_is_refused(coords, values, message):
    tensor = SparseTensor(np.array(coords), np.array(values), (6, 6, 6))
    with pytest.raises(ParameterError, match=f"^tensor: .*{message}"):
        build_block_index(tensor, 3)


def test_non_zeros_are_sorted_by_the_key_b1_b2_b3_and_keep_their_order_within_a_block(rng):
    """Keys (b1 B + b3) B + b2, and an unstable sort that shuffled each block's non-zeros, passed before."""
    from sepsti.core.parallel.tensor_blocks import block_key

    X = rng.poisson(1.5, size=(9, 10, 11)).astype(float)
    tensor = from_dense(X)
    index = build_block_index(tensor, 3)
    assert block_key([[1, 2, 0], [2, 0, 1]], 3).tolist() == [(1 * 3 + 2) * 3 + 0, (2 * 3 + 0) * 3 + 1]
    # each coordinate's block, from the array_split groups, and the row order written out
    groups = [np.concatenate([np.full(len(g), b) for b, g in enumerate(np.array_split(np.arange(n), 3))])
              for n in X.shape]
    key = [(groups[0][i] * 3 + groups[1][j]) * 3 + groups[2][k] for i, j, k in tensor.coords]
    rows = sorted(range(tensor.nnz), key=lambda row: (key[row], row))
    np.testing.assert_array_equal(index.coords, tensor.coords[rows])
    np.testing.assert_array_equal(index.values, tensor.values[rows])
    np.testing.assert_array_equal(index.offsets, np.searchsorted(np.sort(key), np.arange(28)))
