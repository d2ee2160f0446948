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
