"""Fast Gaussian noise streams for compiled block updates.

Conventions
-----------
A stream is one ``uint64`` counter state (splitmix64), seeded from
``core.random.stream(seed, chain, block)``. Each factor block owns one state,
so the noise it receives depends only on (seed, chain, block, iteration) --
not on threads, processes, or which process holds the block. Normals come
from Marsaglia & Tsang's 128-layer ziggurat. Each 64-bit draw yields two
normals: each 32-bit half gives a 7-bit layer index and, from its other 25
bits, a signed 24-bit abscissa (the resolution of float32); a stream keeps
the unused half of its last draw, so sequences do not depend on how they
are split into calls.
"""

import numpy as np

from core.random import stream

__all__ = ["fill_normal", "seed_states", "standard_normal"]

_M1 = 16777216.0  # 2^24: signed 25-bit abscissae
_R = 3.442619855899


def _tables():
    kn = np.zeros(128, dtype=np.int64)
    wn = np.zeros(128)
    fn = np.zeros(128)
    dn = tn = _R
    vn = 9.91256303526217e-3
    q = vn / np.exp(-0.5 * dn * dn)
    kn[0] = int((dn / q) * _M1)
    kn[1] = 0
    wn[0] = q / _M1
    wn[127] = dn / _M1
    fn[0] = 1.0
    fn[127] = np.exp(-0.5 * dn * dn)
    for i in range(126, 0, -1):
        dn = np.sqrt(-2.0 * np.log(vn / dn + np.exp(-0.5 * dn * dn)))
        kn[i + 1] = int((dn / tn) * _M1)
        tn = dn
        fn[i] = np.exp(-0.5 * dn * dn)
        wn[i] = dn / _M1
    return kn, wn, fn


KN, WN, FN = _tables()


def seed_states(seed, chain, blocks):
    """Stream states, shape (len(blocks), 2) uint64, from ``core.random.stream(seed, *chain, block)``.

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
    from core.parallel._kernels import fill_normal_kernel

    fill_normal_kernel(states, index, out)
    return out


def standard_normal(state, size, dtype=np.float64):
    """``size`` standard normals from one state row (copied) and the advanced state."""
    states = np.array([state], dtype=np.uint64).reshape(1, 2)
    return fill_normal(states, 0, np.empty(size, dtype=dtype)), states[0].copy()
