"""Seeded streams (``sepsti.core.random``): keys checked, and the one way two key tuples share a stream."""

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.random import KEY_LIMIT, stream


@pytest.mark.parametrize("words, message", [((1.9,), r"seed=1\.9 must"), ((True,), "seed=True must"),
                                            ((1, 2.0), r"stream keys \[2\.0\]"), ((-1,), "seed=-1 must"),
                                            ((KEY_LIMIT,), "seed=4294967296 must"),
                                            ((0, 7, KEY_LIMIT), r"stream keys \[7, 4294967296\]")])
def test_seeds_and_keys_must_be_integers_in_range(words, message):
    """The seed, which the user chose, is named alone; the keys, which the library chose, apart."""
    with pytest.raises(ParameterError, match=message):
        stream(*words)


def test_a_bad_seed_is_named_as_the_seed_in_a_public_function():
    from sepsti.corpora import simulate_raman

    with pytest.raises(ParameterError, match=r"^seed=-1 must be an integer in \[0, 2\*\*32\)$"):
        simulate_raman(1, seed=-1)


def test_trailing_zero_keys_share_a_stream_as_documented():
    """SeedSequence pads to four words: (s, c) and (s, c, 0) are one stream (the module docstring); any
    other key differs."""
    def first(*words):
        return stream(*words).integers(0, 2 ** 63, 4)

    np.testing.assert_array_equal(first(5, 2), first(5, 2, 0))
    for other in ((5, 3), (5, 2, 1), (6, 2), (5, 0, 2), (5, 2, 0, 0, 0)):
        assert not np.array_equal(first(5, 2), first(*other)), other


def test_the_i_th_of_streams_is_the_key_tuple_ending_in_i_written_out():
    from sepsti.core.random import streams

    for i, generator in enumerate(streams(5, 3, 7, 2)):
        written = np.random.Generator(np.random.PCG64(np.random.SeedSequence([5, 7, 2, i])))
        np.testing.assert_array_equal(generator.integers(0, 2 ** 63, 4), written.integers(0, 2 ** 63, 4))
    assert streams(5, 0) == []


def test_a_numpy_seed_comes_back_as_a_python_int():
    """As JSON summaries write it: json.dumps refuses a numpy.int64."""
    import json

    from sepsti.core.random import validate_seed

    for seed in (np.int64(3), np.uint32(3), 3):
        assert type(validate_seed(seed)) is int and json.dumps(validate_seed(seed)) == "3"
