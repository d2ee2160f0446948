"""Deterministic random streams.

Every stream is derived from ``SeedSequence([seed, *keys])`` (for example
``(seed, chain_id, block_id)``), so results do not depend on how work is
spread over threads or MPI processes.

``SeedSequence`` pads what it is given with zero words up to four, so key
tuples that differ only by trailing zeros within four words in all share a
stream: ``stream(s, c)`` is ``stream(s, c, 0)``. Each purpose in the library
takes a fixed number of keys (a chain's, a block's, the shared work's
``SHARED_KEY``), so its streams do not meet this way; a caller mixing key
lengths for one purpose should do the same. (Mixing the length into the words
would change every seeded result.)
"""

import numbers

import numpy as np

from sepsti.core.errors import ParameterError

__all__ = ["KEY_LIMIT", "stream", "streams", "validate_seed"]

#: Seeds and keys lie below this: ``SeedSequence`` splits a larger integer into 32-bit words, lowest
#: first, so ``(seed, 2**32)`` would be the stream ``(seed, 0, 1)``.
KEY_LIMIT = 2 ** 32


def stream(seed, *keys):
    """Return the generator for ``(seed, *keys)``.

    Parameters
    ----------
    seed : int
        The user's seed, in [0, :data:`KEY_LIMIT`).
    *keys : int
        Identifiers of the stream, e.g. chain and block ids, each in [0, :data:`KEY_LIMIT`).

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    ParameterError
        A seed or key outside [0, :data:`KEY_LIMIT`): it would share its stream with another key tuple.
    """
    seed = validate_seed(seed)
    if not all(_is_word(key) for key in keys):
        raise ParameterError(f"stream keys {list(keys)}: each must be an integer in [0, 2**32)")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, *map(int, keys)])))


def validate_seed(seed):
    """``seed`` as an int, an integer in [0, :data:`KEY_LIMIT`) (not a bool, not a float), else ParameterError."""
    if not _is_word(seed):
        raise ParameterError(f"seed={seed!r} must be an integer in [0, 2**32)")
    return int(seed)


def _is_word(value):
    """An integer (not a bool, not a float such as 1.9, which would be taken as 1) in [0, KEY_LIMIT)."""
    return (not isinstance(value, (bool, np.bool_)) and isinstance(value, numbers.Integral)
            and 0 <= value < KEY_LIMIT)


def streams(seed, count, *keys):
    """Return ``count`` generators, the i-th being ``stream(seed, *keys, i)``."""
    return [stream(seed, *keys, i) for i in range(count)]
