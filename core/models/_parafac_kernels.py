"""numba kernels of :mod:`sepsti.core.models.poisson_parafac`: the Poisson log-likelihood and its gradient on blocks.

Imported lazily: numba loads only when used.

Conventions: ``factors`` is :class:`sepsti.core.models.poisson_parafac.ParafacFactors`
(A, B, C), C-contiguous float64 ``(I, R)``, ``(J, R)``, ``(K, R)``;
``blocks`` is a :class:`sepsti.core.sparse_tensor.TensorBlocks` whose ``coords``
(nnz, 3) int64 global 0-based coordinates are sorted by block and
``values`` (nnz,) float64: block ``b`` owns rows ``starts[b]:stops[b]`` and
the index ranges ``ranges[b]`` (3, 2) ``[lo, hi)``. Gradients are *added*
to ``gradient`` (three arrays of the factors' shapes). Kernels check
nothing (the model validates). The block-parallel sampler's part update
(:mod:`sepsti.core.parallel._parafac_kernels`) builds on :func:`column_sum`,
:func:`nonzero_terms` and :func:`block_terms`.
"""

import math

import numba
import numpy as np

__all__ = ["block_terms", "column_sum", "entries", "nonzero_terms", "sparse_parallel", "sparse_serial"]


@numba.njit(cache=True, nogil=True)
def column_sum(F, lo, hi):
    """Σ_i F[i, r] over rows lo..hi, shape (R,)."""
    out = np.zeros(F.shape[1])
    for i in range(lo, hi):
        for r in range(F.shape[1]):
            out[r] += F[i, r]
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def nonzero_terms(total, factors, blocks, block, gradient, want_grad):
    """``total`` plus Σ x log x̂ − lgamma(x + 1) over the non-zeros of block ``block``; with ``want_grad``
    their gradient terms x / x̂ ∂x̂ added to ``gradient``."""
    A, B, C = factors
    gA, gB, gC = gradient
    coords, values = blocks.coords, blocks.values
    R = A.shape[1]
    for n in range(blocks.starts[block], blocks.stops[block]):
        i = coords[n, 0]
        j = coords[n, 1]
        k = coords[n, 2]
        x = values[n]
        if x == 0.0:  # a stored zero: x log x̂ and lgamma(1) vanish, as on the dense path
            continue
        xhat = 0.0
        for r in range(R):
            xhat += A[i, r] * B[j, r] * C[k, r]
        total += x * math.log(xhat)  # −inf where x̂ = 0, as on the dense path
        if x != 1.0:  # most counts of sparse data are 1, whose lgamma(2) is 0
            total -= math.lgamma(x + 1.0)
        if want_grad:
            w = x / xhat if xhat > 0.0 else math.inf
            for r in range(R):
                a = A[i, r]
                b = B[j, r]
                c = C[k, r]
                gA[i, r] += w * b * c
                gB[j, r] += w * a * c
                gC[k, r] += w * a * b
    return total


@numba.njit(cache=True, nogil=True)
def block_terms(factors, blocks, block, gradient, want_grad):
    """Log-likelihood of one sparse block: x log x̂ − lgamma(x + 1) over its non-zeros, minus
    Σ_r (Σ_i a_ir)(Σ_j b_jr)(Σ_k c_kr) over its ranges; with ``want_grad`` its gradient added to ``gradient``."""
    A, B, C = factors
    gA, gB, gC = gradient
    R = A.shape[1]
    ranges = blocks.ranges[block]
    i0, i1 = ranges[0, 0], ranges[0, 1]
    j0, j1 = ranges[1, 0], ranges[1, 1]
    k0, k1 = ranges[2, 0], ranges[2, 1]
    sa = column_sum(A, i0, i1)
    sb = column_sum(B, j0, j1)
    sc = column_sum(C, k0, k1)
    total = 0.0
    for r in range(R):
        total -= sa[r] * sb[r] * sc[r]
    total = nonzero_terms(total, factors, blocks, block, gradient, want_grad)
    if want_grad:
        bc = sb * sc
        ac = sa * sc
        ab = sa * sb
        for i in range(i0, i1):
            for r in range(R):
                gA[i, r] -= bc[r]
        for j in range(j0, j1):
            for r in range(R):
                gB[j, r] -= ac[r]
        for k in range(k0, k1):
            for r in range(R):
                gC[k, r] -= ab[r]
    return total


@numba.njit(cache=True, nogil=True)
def sparse_serial(factors, blocks, gradient, want_grad):
    """:func:`block_terms` of each block in turn; returns the per-block log-likelihoods."""
    out = np.empty(blocks.starts.shape[0])
    for block in range(blocks.starts.shape[0]):
        out[block] = block_terms(factors, blocks, block, gradient, want_grad)
    return out


@numba.njit(cache=True, nogil=True, parallel=True)
def sparse_parallel(factors, blocks, gradient, want_grad):
    """:func:`sparse_serial` with one thread per block; the blocks must share no index range."""
    # Blocks of one part share no index range in any mode, so each thread
    # writes gradient rows no other thread touches.
    out = np.empty(blocks.starts.shape[0])
    for block in numba.prange(blocks.starts.shape[0]):
        out[block] = block_terms(factors, blocks, block, gradient, want_grad)
    return out


@numba.njit(cache=True, nogil=True)
def entries(factors, indices, x, gradient, want_grad):
    """Full Poisson terms x log x̂ − x̂ − lgamma(x + 1) over explicit entries ``indices`` = (i, j, k)
    (repeats allowed)."""
    A, B, C = factors
    gA, gB, gC = gradient
    ii, jj, kk = indices
    R = A.shape[1]
    total = 0.0
    for n in range(ii.shape[0]):
        i = ii[n]
        j = jj[n]
        k = kk[n]
        xhat = 0.0
        for r in range(R):
            xhat += A[i, r] * B[j, r] * C[k, r]
        total -= xhat
        if x[n] > 0.0:
            total += x[n] * math.log(xhat) - math.lgamma(x[n] + 1.0)
            w = x[n] / xhat - 1.0 if xhat > 0.0 else math.inf
        else:
            w = -1.0
        if want_grad:
            for r in range(R):
                a = A[i, r]
                b = B[j, r]
                c = C[k, r]
                gA[i, r] += w * b * c
                gB[j, r] += w * a * c
                gC[k, r] += w * a * b
    return total
