"""Deterministic random streams.

Every stream is derived from ``SeedSequence([seed, *keys])`` (for example
``(seed, chain_id, block_id)``), so results do not depend on how work is
spread over threads or MPI processes.
"""

import numpy as np

__all__ = ["stream", "streams"]


def stream(seed, *keys):
    """Return the generator for ``(seed, *keys)``.

    Parameters
    ----------
    seed : int
        The user's seed (non-negative).
    *keys : int
        Identifiers of the stream, e.g. chain and block ids.

    Returns
    -------
    numpy.random.Generator
    """
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), *map(int, keys)])))


def streams(seed, count, *keys):
    """Return ``count`` generators, the i-th being ``stream(seed, *keys, i)``."""
    return [stream(seed, *keys, i) for i in range(count)]
