import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.parallel.schedule import BlockSchedule


@pytest.mark.parametrize("shape,num_blocks", [((257, 1661), 8), ((10, 7), 3), ((6, 8, 9), 3)])
def test_parts_tile_the_array_without_sharing_groups(shape, num_blocks):
    schedule = BlockSchedule(shape, num_blocks)
    assert schedule.num_parts == num_blocks ** (len(shape) - 1)
    cover = np.zeros(shape, dtype=int)
    for part in range(schedule.num_parts):
        groups = schedule.part_groups(part)
        for mode in range(len(shape)):
            assert sorted(groups[:, mode]) == list(range(num_blocks))  # each group once per mode
        for block in schedule.part_blocks(part):
            cover[block] += 1
        assert schedule.part_size(part) == sum(cover[b].size for b in schedule.part_blocks(part))
    assert np.all(cover == 1)


def test_matrix_part_k_pairs_row_group_b_with_column_group_b_plus_k():
    schedule = BlockSchedule((20, 30), 4)
    np.testing.assert_array_equal(schedule.part_groups(1), [[0, 1], [1, 2], [2, 3], [3, 0]])
    assert [schedule.part_index(k) for k in range(1, 7)] == [0, 1, 2, 3, 0, 1]


def test_validation():
    with pytest.raises(ParameterError, match="num_blocks=9"):
        BlockSchedule((8, 100), 9)


def test_part_size_is_exact_beyond_int64():
    # 2 blocks of 2**39 x 2**39 entries: 2**79, which int64 products wrapped to 0
    size = BlockSchedule((2 ** 40, 2 ** 40), 2).part_size(0)
    assert size == 2 ** 79 and isinstance(size, int)


@pytest.mark.parametrize("size,num_blocks", [(10, 3), (11, 4), (257, 8), (9, 3)])
def test_groups_have_the_sizes_of_numpy_array_split(size, num_blocks):
    """The first size mod B groups are the longer ones; the last ones being longer passed before."""
    schedule = BlockSchedule((size, size + 1), num_blocks)
    for mode, n in enumerate(schedule.shape):
        expected = [len(chunk) for chunk in np.array_split(np.arange(n), num_blocks)]
        sizes = [schedule.group_slice(mode, g).stop - schedule.group_slice(mode, g).start for g in range(num_blocks)]
        assert sizes == expected
        assert schedule.group_slice(mode, 0).start == 0 and schedule.group_slice(mode, num_blocks - 1).stop == n


def test_tensor_part_p_has_offsets_written_in_base_b_most_significant_first():
    """Part p = 3 k_1 + k_2 pairs group b with (b + k_1, b + k_2); k_1 and k_2 swapped passed before."""
    schedule = BlockSchedule((6, 8, 9), 3)
    assert schedule.offsets(1) == (0, 1) and schedule.offsets(5) == (1, 2)
    np.testing.assert_array_equal(schedule.part_groups(1), [[0, 0, 1], [1, 1, 2], [2, 2, 0]])
    np.testing.assert_array_equal(schedule.part_groups(5), [[0, 1, 2], [1, 2, 0], [2, 0, 1]])
