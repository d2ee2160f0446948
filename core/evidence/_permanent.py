"""The compiled permanent of :func:`sepsti.core.evidence.reference_path.log_permanent`.

Imported only inside that function, so that importing ``core`` does not load numba.
"""

import math

import numba
import numpy as np

__all__ = ["log_permanent_kernel"]


@numba.njit(cache=True, inline="always")
def _log_add(a, b):
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    if a < b:
        a, b = b, a
    return a + math.log1p(math.exp(b - a))


@numba.njit(cache=True, nogil=True)  # chains run on worker threads
def log_permanent_kernel(L):
    """(log permanent of exp(L), P(pi(k) = j)) by forward and backward sums over the bit sets of columns.

    forward[k, S]: log sum over assignments of rows 0 .. k - 1 to the columns S (|S| = k);
    backward[k, S]: log sum over assignments of rows k .. R - 1 to the columns not in S.
    """
    size = L.shape[0]
    full = 1 << size
    count = np.zeros(full, dtype=np.int64)
    for subset in range(1, full):
        count[subset] = count[subset >> 1] + (subset & 1)
    forward = np.full((size + 1, full), -np.inf)
    forward[0, 0] = 0.0
    for k in range(size):
        for subset in range(full):
            if count[subset] != k:
                continue
            for j in range(size):
                if not (subset >> j) & 1:
                    target = subset | (1 << j)
                    forward[k + 1, target] = _log_add(forward[k + 1, target], forward[k, subset] + L[k, j])
    backward = np.full((size + 1, full), -np.inf)
    backward[size, full - 1] = 0.0
    log_share = np.full((size, size), -np.inf)
    for k in range(size - 1, -1, -1):
        for subset in range(full):
            if count[subset] != k:
                continue
            for j in range(size):
                if not (subset >> j) & 1:
                    through = L[k, j] + backward[k + 1, subset | (1 << j)]
                    backward[k, subset] = _log_add(backward[k, subset], through)
                    log_share[k, j] = _log_add(log_share[k, j], forward[k, subset] + through)
    total = forward[size, full - 1]
    return total, np.exp(log_share - total)
