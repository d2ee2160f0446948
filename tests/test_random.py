"""Seeded streams (``sepsti.core.random``): keys checked, and the one way two key tuples share a stream."""

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.random import KEY_LIMIT, stream


@pytest.mark.parametrize("words", [(1.9,), (True,), (1, 2.0), (-1,), (KEY_LIMIT,), (0, KEY_LIMIT)])
def test_seeds_and_keys_must_be_integers_in_range(words):
    with pytest.raises(ParameterError, match="seed and stream keys"):
        stream(*words)


def test_trailing_zero_keys_share_a_stream_as_documented():
    """SeedSequence pads to four words: (s, c) and (s, c, 0) are one stream (the module docstring); any
    other key differs."""
    def first(*words):
        return stream(*words).integers(0, 2 ** 63, 4)

    np.testing.assert_array_equal(first(5, 2), first(5, 2, 0))
    for other in ((5, 3), (5, 2, 1), (6, 2), (5, 0, 2), (5, 2, 0, 0, 0)):
        assert not np.array_equal(first(5, 2), first(*other)), other
