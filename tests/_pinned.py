"""Pinned results of short chains, compared so that a build's last-bit rounding does not count.

A change in the arithmetic, the argument plumbing or the noise streams of a compiled kernel moves a
short chain's trace and state far beyond rounding; another numpy, BLAS or LLVM rounds some sums in
the last bit (seen: 1.4e-14 relative after 30 steps). So floating-point results are compared to
:data:`RTOL` and the noise streams' integer states exactly.
"""
import hashlib

import numpy as np

#: Relative tolerance of pinned floating-point values: 70 times the largest drift seen between builds.
RTOL = 1e-12


def fingerprint(arrays):
    """Two position-sensitive sums per floating-point array and one digest of the integer arrays."""
    sums, digest = [], hashlib.sha256()
    for array in arrays:
        array = np.ascontiguousarray(array)
        if np.issubdtype(array.dtype, np.floating):
            flat = array.ravel().astype(np.float64)
            sums += [float(flat.sum()), float(flat @ np.arange(1, flat.size + 1))]
        else:
            digest.update(array.tobytes())
    return sums, digest.hexdigest()[:16]


def assert_pinned(trace, arrays, pinned_trace, pinned_sums, pinned_digest, label):
    """Check a trace (hex strings pinned) and arrays (:func:`fingerprint` pinned)."""
    np.testing.assert_allclose(trace, [float.fromhex(value) for value in pinned_trace], rtol=RTOL, err_msg=label)
    sums, digest = fingerprint(arrays)
    np.testing.assert_allclose(sums, pinned_sums, rtol=RTOL, err_msg=label)
    assert digest == pinned_digest, label
