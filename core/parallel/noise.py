"""Fast Gaussian noise streams for compiled block updates.

Conventions
-----------
A stream is one ``uint64`` counter state (splitmix64), seeded from
``sepsti.core.random.stream(seed, chain, block)``. Each factor block owns one state,
so the noise it receives depends only on (seed, chain, block, iteration) --
not on threads, processes, or which process holds the block. Normals come
from Marsaglia & Tsang's 128-layer ziggurat (tables in
:mod:`sepsti.core.parallel.ziggurat`, compiled draws in :mod:`sepsti.core.parallel._kernels`).
Each 64-bit draw yields two normals: each 32-bit half gives a 7-bit layer
index and, from its other 25 bits, a signed 24-bit abscissa (the resolution
of float32); a stream keeps the unused half of its last draw, so sequences
do not depend on how they are split into calls.
"""

import numpy as np

from sepsti.core.random import stream

__all__ = ["fill_normal", "seed_states", "standard_normal"]


def seed_states(seed, chain, blocks):
    """Stream states, shape (len(blocks), 2) uint64, from ``sepsti.core.random.stream(seed, *chain, block)``.

    ``chain`` is an integer or a tuple of integers (e.g. rank, temperature index, replicate).

    Column 0 is the splitmix64 counter, column 1 the buffered half of the last
    64-bit draw (bit 63 set when one is pending).
    """
    keys = tuple(int(c) for c in np.atleast_1d(chain))
    states = np.zeros((len(blocks), 2), dtype=np.uint64)
    for row, b in enumerate(blocks):
        states[row, 0] = stream(seed, *keys, int(b)).integers(0, 2 ** 63, dtype=np.int64)
    return states


def fill_normal(states, index, out):
    """Fill contiguous ``out`` with standard normals from ``states[index]`` (advancing it)."""
    from sepsti.core.parallel._kernels import fill_normal_kernel

    fill_normal_kernel(states, index, out)
    return out


def standard_normal(state, size, dtype=np.float64):
    """``size`` standard normals from one state row (copied) and the advanced state."""
    states = np.array([state], dtype=np.uint64).reshape(1, 2)
    return fill_normal(states, 0, np.empty(size, dtype=dtype)), states[0].copy()
