"""numba kernels of :mod:`core.models.poisson_parafac` and :mod:`core.parallel.parafac_blocks`.

Imported lazily: numba loads only when used.

Conventions: factors ``A, B, C`` are C-contiguous float64 ``(I, R)``, ``(J, R)``,
``(K, R)``; ``coords`` (nnz, 3) int64 global 0-based coordinates sorted by
block, ``values`` (nnz,) float64; block ``b`` owns rows ``starts[b]:stops[b]``
and the index ranges ``ranges[b]`` (3, 2) ``[lo, hi)``. Gradients are
*added* to ``gA, gB, gC``. Kernels check nothing (the model validates).

The part update (PARAFAC'18 eq. 6, 8–9) makes one pass over each factor block:
drift (prior plus the tempered, scaled gradient, whose dense part is the
column-sum term), pSGLD's average, the noise draw and mirroring, via the shared
:func:`core.parallel._kernels.langevin_entry`. The sparse gradient is gathered
into whole-factor accumulators that the pass reads and zeroes again, so no
array is allocated per iteration.
"""

import math

import numba
import numpy as np

from core.parallel._kernels import draw_normal, langevin_entry

__all__ = ["block_terms", "sparse_serial", "sparse_parallel", "entries", "part_update_serial",
           "part_update_parallel"]


@numba.njit(cache=True, nogil=True)
def _column_sum(F, lo, hi):
    out = np.zeros(F.shape[1])
    for i in range(lo, hi):
        for r in range(F.shape[1]):
            out[r] += F[i, r]
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def _nonzero_terms(total, A, B, C, coords, values, start, stop, gA, gB, gC, want_grad, oi, oj, ok):
    """``total`` plus Σ x log x̂ − lgamma(x + 1) over non-zeros start..stop; their gradient terms
    added to gA, gB, gC (rows offset by oi, oj, ok)."""
    R = A.shape[1]
    for n in range(start, stop):
        i = coords[n, 0]
        j = coords[n, 1]
        k = coords[n, 2]
        x = values[n]
        xhat = 0.0
        for r in range(R):
            xhat += A[i, r] * B[j, r] * C[k, r]
        total += x * math.log(xhat)
        if x != 1.0:  # most counts of sparse data are 1, whose lgamma(2) is 0
            total -= math.lgamma(x + 1.0)
        if want_grad:
            w = x / xhat
            for r in range(R):
                a = A[i, r]
                b = B[j, r]
                c = C[k, r]
                gA[i - oi, r] += w * b * c
                gB[j - oj, r] += w * a * c
                gC[k - ok, r] += w * a * b
    return total


@numba.njit(cache=True, nogil=True)
def block_terms(A, B, C, coords, values, start, stop, ranges, gA, gB, gC, want_grad, local):
    """Log-likelihood of one sparse block: x log x̂ − lgamma(x + 1) over its non-zeros,
    minus Σ_r (Σ_i a_ir)(Σ_j b_jr)(Σ_k c_kr) over its ranges; gradients likewise, added to the
    whole-factor arrays gA, gB, gC or, with ``local``, to block-local ones (rows offset by the ranges)."""
    R = A.shape[1]
    i0, i1 = ranges[0, 0], ranges[0, 1]
    j0, j1 = ranges[1, 0], ranges[1, 1]
    k0, k1 = ranges[2, 0], ranges[2, 1]
    oi, oj, ok = (i0, j0, k0) if local else (0, 0, 0)
    sa = _column_sum(A, i0, i1)
    sb = _column_sum(B, j0, j1)
    sc = _column_sum(C, k0, k1)
    total = 0.0
    for r in range(R):
        total -= sa[r] * sb[r] * sc[r]
    total = _nonzero_terms(total, A, B, C, coords, values, start, stop, gA, gB, gC, want_grad, oi, oj, ok)
    if want_grad:
        bc = sb * sc
        ac = sa * sc
        ab = sa * sb
        for i in range(i0, i1):
            for r in range(R):
                gA[i - oi, r] -= bc[r]
        for j in range(j0, j1):
            for r in range(R):
                gB[j - oj, r] -= ac[r]
        for k in range(k0, k1):
            for r in range(R):
                gC[k - ok, r] -= ab[r]
    return total


@numba.njit(cache=True, nogil=True)
def sparse_serial(A, B, C, coords, values, starts, stops, ranges, gA, gB, gC, want_grad):
    """:func:`block_terms` of each block in turn; returns the per-block log-likelihoods."""
    out = np.empty(starts.shape[0])
    for blk in range(starts.shape[0]):
        out[blk] = block_terms(A, B, C, coords, values, starts[blk], stops[blk], ranges[blk],
                               gA, gB, gC, want_grad, False)
    return out


@numba.njit(cache=True, nogil=True, parallel=True)
def sparse_parallel(A, B, C, coords, values, starts, stops, ranges, gA, gB, gC, want_grad):
    """:func:`sparse_serial` with one thread per block; the blocks must share no index range."""
    # Blocks of one part share no index range in any mode, so each thread
    # writes gradient rows no other thread touches.
    out = np.empty(starts.shape[0])
    for blk in numba.prange(starts.shape[0]):
        out[blk] = block_terms(A, B, C, coords, values, starts[blk], stops[blk], ranges[blk],
                               gA, gB, gC, want_grad, False)
    return out


@numba.njit(cache=True, nogil=True)
def entries(A, B, C, ii, jj, kk, x, gA, gB, gC, want_grad):
    """Full Poisson terms x log x̂ − x̂ − lgamma(x + 1) over explicit entries (repeats allowed)."""
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
            w = x[n] / xhat - 1.0
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


@numba.njit(cache=True, nogil=True)
def _update_factor_block(F, v, grad, lo, hi, dense, states, row, rate, weight, temperature, n_s, step,
                         preconditioned, alpha, sigma):
    """(p)SGLD update and mirroring of rows lo..hi of F in one pass, noise from stream ``row``.

    The likelihood gradient of entry (i, r) is ``grad[i, r] − dense[r]`` (the
    non-zeros' part gathered in ``grad``, the column-sum part ``dense``);
    ``grad`` rows are zeroed for the next part.

    The noise is stream ``row`` of :mod:`core.parallel.noise`, held in
    registers for the whole block (:func:`core.parallel._kernels.draw_normal`).
    """
    R = F.shape[1]
    noise_scale = math.sqrt(2.0 * step)
    counter, pending = states[row, 0], states[row, 1]
    for i in range(lo, hi):
        for r in range(R):
            g = grad[i, r] - dense[r]
            grad[i, r] = 0.0
            z, counter, pending = draw_normal(counter, pending)
            F[i, r], v[i, r] = langevin_entry(F[i, r], -rate + weight * g, z, temperature * g / n_s, v[i, r],
                                              step, noise_scale, preconditioned, alpha, sigma)
    states[row, 0], states[row, 1] = counter, pending


@numba.njit(cache=True, nogil=True)
def _part_block(A, B, C, vA, vB, vC, gA, gB, gC, coords, values, starts, stops, ranges, keys, states_A, states_B,
                states_C, blk, step, temperature, scale, rates, preconditioned, alpha, sigma, n_s, evaluate):
    R = A.shape[1]
    rg = ranges[blk]
    sa = _column_sum(A, rg[0, 0], rg[0, 1])
    sb = _column_sum(B, rg[1, 0], rg[1, 1])
    sc = _column_sum(C, rg[2, 0], rg[2, 1])
    want_grad = temperature > 0
    total = 0.0
    for r in range(R):
        total -= sa[r] * sb[r] * sc[r]
    total = _nonzero_terms(total, A, B, C, coords, values, starts[blk], stops[blk], gA, gB, gC, want_grad, 0, 0, 0)
    if want_grad:
        dense_A, dense_B, dense_C = sb * sc, sa * sc, sa * sb
    else:
        dense_A, dense_B, dense_C = np.zeros(R), np.zeros(R), np.zeros(R)
    weight = temperature * scale
    _update_factor_block(A, vA, gA, rg[0, 0], rg[0, 1], dense_A, states_A, keys[blk, 0], rates[0], weight,
                         temperature, n_s, step, preconditioned, alpha, sigma)
    _update_factor_block(B, vB, gB, rg[1, 0], rg[1, 1], dense_B, states_B, keys[blk, 1], rates[1], weight,
                         temperature, n_s, step, preconditioned, alpha, sigma)
    _update_factor_block(C, vC, gC, rg[2, 0], rg[2, 1], dense_C, states_C, keys[blk, 2], rates[2], weight,
                         temperature, n_s, step, preconditioned, alpha, sigma)
    if evaluate == 2:
        total = block_terms(A, B, C, coords, values, starts[blk], stops[blk], rg, gA, gB, gC, False, False)
    return total


@numba.njit(cache=True, nogil=True)
def part_update_serial(A, B, C, vA, vB, vC, gA, gB, gC, coords, values, starts, stops, ranges, keys, states_A,
                       states_B, states_C, step, temperature, scale, rates, preconditioned, alpha, sigma, n_s,
                       evaluate, out):
    """One block-parallel (p)SGLD iteration on some blocks of a part, in turn (PARAFAC'18 eq. 6, 8-9).

    Block b updates A-block keys[b, 0], B-block keys[b, 1] and C-block keys[b, 2] from its own data, each
    factor block drawing its noise from its own stream; ``out[b]`` is the block's log-likelihood before
    (``evaluate == 1``) or after (``evaluate == 2``) the update. ``gA, gB, gC`` are zero accumulators of
    the factors' shapes, left zero.
    """
    for blk in range(starts.shape[0]):
        out[blk] = _part_block(A, B, C, vA, vB, vC, gA, gB, gC, coords, values, starts, stops, ranges, keys,
                               states_A, states_B, states_C, blk, step, temperature, scale, rates, preconditioned,
                               alpha, sigma, n_s, evaluate)


@numba.njit(cache=True, nogil=True, parallel=True)
def part_update_parallel(A, B, C, vA, vB, vC, gA, gB, gC, coords, values, starts, stops, ranges, keys, states_A,
                         states_B, states_C, step, temperature, scale, rates, preconditioned, alpha, sigma, n_s,
                         evaluate, out):
    """:func:`part_update_serial` with one thread per block (the part's blocks share no index range)."""
    for blk in numba.prange(starts.shape[0]):
        out[blk] = _part_block(A, B, C, vA, vB, vC, gA, gB, gC, coords, values, starts, stops, ranges, keys,
                               states_A, states_B, states_C, blk, step, temperature, scale, rates, preconditioned,
                               alpha, sigma, n_s, evaluate)
