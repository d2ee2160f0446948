"""Compiled kernels of the NMF block chain (:mod:`sepsti.core.parallel.blocks`,
:mod:`sepsti.core.parallel.distributed`).

Imported only inside the functions that run them, so that importing
``core`` (and starting the CLI) does not load numba.

Layout: the kernels take ``W`` (n_rows, R) and ``Ht`` = H transposed
(n_cols, R), both C-contiguous, so that every factor block is a contiguous
run of rows and the three products of a block (W_b H_b, ratio H_b^T,
W_b^T ratio) go to BLAS without copies. Arguments travel in the groups of
:mod:`sepsti.core.parallel.kernel_arguments`: the data ``X``, the block layout
(:class:`~sepsti.core.parallel.kernel_arguments.NMFBlockLayout`), the chain's arrays
(:class:`~sepsti.core.parallel.kernel_arguments.NMFChainArrays`, rates ordered
(W, H)) and the step constants
(:class:`~sepsti.core.parallel.kernel_arguments.StepConstants`).
"""

import math
from typing import NamedTuple

import numba
import numpy as np

from sepsti.core.parallel._kernels import draw_normal, langevin_entry, uniform
from sepsti.core.parallel.kernel_arguments import EVALUATE_AFTER_UPDATE, EVALUATE_BEFORE_UPDATE, EVALUATE_NONE, PartStep

__all__ = ["block_loglik", "nmf_chain_kernel", "nmf_prior_kernel"]


class _PartWork(NamedTuple):
    """Per-block results of a part update, and the blocks' noise scratch.

    ``out[b]`` is block b's log-likelihood term, ``low[b]`` its smallest new
    factor entry, ``bad[b]`` whether any new entry is not finite; ``scratch[b]``
    holds block b's normals.
    """

    out: np.ndarray
    low: np.ndarray
    bad: np.ndarray
    scratch: np.ndarray


@numba.njit(cache=True)
def block_loglik(Xb, WH):
    """sum x log(wh) - wh over a block, accumulated in float64 (x = 0 contributes -wh)."""
    total = 0.0
    for i in range(WH.shape[0]):
        for j in range(WH.shape[1]):
            x = Xb[i, j]
            wh = WH[i, j]
            if x != 0:
                total += x * np.log(wh)
            total -= wh
    return total


@numba.njit(cache=True, inline="always")
def _ratio_in_place(Xb, WH):
    """WH <- x / wh - 1 (0 - 1 where x = 0): the Poisson likelihood's gradient factor."""
    for i in range(WH.shape[0]):
        for j in range(WH.shape[1]):
            x = Xb[i, j]
            WH[i, j] = (x / WH[i, j] if x != 0 else 0.0) - 1.0


@numba.njit(cache=True, inline="always")
def _fill_stream(Z, states, row):
    """Fill the 1-d float64 ``Z`` with normals from stream ``row``, held in registers meanwhile."""
    counter, pending = states[row, 0], states[row, 1]
    for k in range(Z.size):
        Z[k], counter, pending = draw_normal(counter, pending)
    states[row, 0], states[row, 1] = counter, pending


@numba.njit(cache=True)
def _sgld_run(F, G, Z, has_gradient, step, noise_scale, rate, weight):
    """F <- |F + step (-rate + weight G) + noise_scale Z| over 1-d runs (an elementwise loop that vectorises).

    No fast-math here: with contraction or reassociation the vectorised body
    and the scalar remainder round differently, and which entries fall in
    which depends on the arrays' alignment -- results would change from run
    to run.
    """
    if has_gradient:
        for k in range(F.size):
            F[k] = abs(F[k] + step * (-rate + weight * G[k]) + noise_scale * Z[k])
    else:
        for k in range(F.size):
            F[k] = abs(F[k] - step * rate + noise_scale * Z[k])


@numba.njit(cache=True, fastmath={"reassoc"})
def _sum(F):
    """Sum of a 1-d run, in any order: NaN or inf as soon as one entry is (a finiteness check)."""
    total = 0.0
    for k in range(F.size):
        total += F[k]
    return total


@numba.njit(cache=True)
def _finite_minimum(F):
    """Smallest entry of a 1-d run of finite, non-negative floats.

    Their bit patterns, read as signed integers, order like the values; an
    integer minimum vectorises where a float one (NaN rules) does not
    (0.05 against 1.1 ns per entry).
    """
    if F.size == 0:
        return np.inf
    if F.itemsize == 4:
        bits = F.view(np.int32)
        low = bits[0]
        for k in range(bits.size):
            low = bits[k] if bits[k] < low else low
        return np.float64(np.array([low]).view(np.float32)[0])
    wide = F.view(np.int64)
    least = wide[0]
    for k in range(wide.size):
        least = wide[k] if wide[k] < least else least
    return np.float64(np.array([least]).view(np.float64)[0])


@numba.njit(cache=True, inline="always")
def _update_rows(F, V, states, row, lo, hi, G, rate, constants, part_step, Z, track):
    """(p)SGLD update of F[lo:hi] with drift -rate + t N/N_s G and noise from stream ``row``.

    Entries are visited (and their normals drawn) row by row of F: for H,
    stored transposed, that is column by column of H. ``G`` is empty at
    t = 0. ``Z`` is scratch of at least (hi - lo) x rank entries. Returns
    (smallest new entry, whether any is not finite); the smallest entry only
    when ``track`` (else inf).
    """
    rank = F.shape[1]
    n = (hi - lo) * rank
    has_gradient = constants.temperature > 0
    step = part_step.step
    noise_scale = math.sqrt(2.0 * step)
    weight = constants.temperature * part_step.scale
    noise = Z[:n]
    _fill_stream(noise, states, row)
    flat = F[lo:hi].reshape(n)
    if not constants.preconditioned:
        _sgld_run(flat, G.reshape(G.size), noise, has_gradient, step, noise_scale, rate, weight)
        if not _sum(flat) < np.inf:
            return np.nan, True
        return (_finite_minimum(flat) if track else np.inf), False
    mean_weight = constants.temperature / part_step.num_entries
    low = np.inf
    bad = False
    averages = V[lo:hi].reshape(n)
    gradient = G.reshape(G.size)
    for k in range(n):
        g = gradient[k] if has_gradient else 0.0
        x, averages[k] = langevin_entry(flat[k], -rate + weight * g, noise[k], mean_weight * g, averages[k], step,
                                        noise_scale, constants)
        flat[k] = x
        stored = np.float64(flat[k])  # a float32 factor overflows here, not in x
        low = min(low, stored)
        bad = bad or not (stored < np.inf)
    return low, bad


@numba.njit(cache=True)
def _block_update(b, X, layout, chain, constants, columns, part_step, evaluate, work):
    """Update W's row group b and H's column group ``columns[b]`` from block (b, columns[b]).

    Writes the block's log-likelihood term to ``work.out[b]`` (0 when
    ``evaluate`` is :data:`EVALUATE_NONE`), the smallest new factor entry to
    ``work.low[b]`` and whether any is not finite to ``work.bad[b]``.
    """
    c = columns[b]
    r0, r1 = layout.row_edges[b], layout.row_edges[b + 1]
    c0, c1 = layout.col_edges[c], layout.col_edges[c + 1]
    W, Ht = chain.W, chain.Ht
    Xb = X[r0:r1, c0:c1]
    Wb = W[r0:r1]
    Hb = Ht[c0:c1]
    total = 0.0
    has_gradient = constants.temperature > 0
    if has_gradient or evaluate == EVALUATE_BEFORE_UPDATE:
        WH = Wb @ Hb.T
        if evaluate == EVALUATE_BEFORE_UPDATE:
            total = block_loglik(Xb, WH)
        if has_gradient:
            _ratio_in_place(Xb, WH)
            grad_W = WH @ Hb
            grad_Ht = WH.T @ Wb
        else:
            grad_W = np.empty((0, 0), dtype=W.dtype)
            grad_Ht = np.empty((0, 0), dtype=W.dtype)
    else:
        grad_W = np.empty((0, 0), dtype=W.dtype)
        grad_Ht = np.empty((0, 0), dtype=W.dtype)
    Z = work.scratch[b]
    track = evaluate != EVALUATE_NONE
    low_W, bad_W = _update_rows(W, chain.v_W, chain.states_W, b, r0, r1, grad_W, constants.rates[0], constants,
                                part_step, Z, track)
    low_H, bad_H = _update_rows(Ht, chain.v_Ht, chain.states_H, c, c0, c1, grad_Ht, constants.rates[1], constants,
                                part_step, Z, track)
    if evaluate == EVALUATE_AFTER_UPDATE:
        total = block_loglik(Xb, Wb @ Hb.T)
    work.out[b] = total
    work.low[b] = min(low_W, low_H) if not (bad_W or bad_H) else np.nan
    work.bad[b] = bad_W or bad_H


@numba.njit(cache=True, parallel=True)
def _part_parallel(X, layout, chain, constants, columns, part_step, evaluate, work):
    for b in numba.prange(layout.row_edges.size - 1):
        _block_update(b, X, layout, chain, constants, columns, part_step, evaluate, work)


@numba.njit(cache=True)
def _part_serial(X, layout, chain, constants, columns, part_step, evaluate, work):
    for b in range(layout.row_edges.size - 1):
        _block_update(b, X, layout, chain, constants, columns, part_step, evaluate, work)


@numba.njit(cache=True)
def _scratch(layout, rank):
    """Noise scratch, one row per block: room for the largest row or column group's factor block."""
    largest = max(np.max(np.diff(layout.row_edges)), np.max(np.diff(layout.col_edges)))
    return np.empty((layout.row_edges.size - 1, largest * rank))


@numba.njit(cache=True, inline="always")
def _record(row, evaluate, scale, work, layout, columns, trace, status):
    """Store a kept iteration in ``trace[row]``: the scaled log-likelihood; update the running min / non-finite flag."""
    if evaluate != EVALUATE_NONE:
        terms = 0.0
        for b in range(work.out.size):
            terms += layout.log_factorial[b, columns[b]]
        trace[row] = scale * (work.out.sum() - terms)
    else:
        trace[row] = np.nan
    for b in range(work.out.size):
        if work.bad[b]:
            status[1] = 1.0
        else:
            status[0] = min(status[0], work.low[b])


# The chain loop runs a whole stretch of iterations per call.
@numba.njit(cache=True, nogil=True)
def nmf_chain_kernel(X, layout, chain, constants, steps, first, burn_in, trace, status, parallel):
    """Iterations first .. first + len(steps) - 1 (from 1) of a block chain.

    Iteration k uses part p = (k - 1) mod P of ``layout.part_columns`` (P, b)
    (the column group of each of the b row groups of ``layout.row_edges``),
    with N_s = ``layout.part_sizes[p]`` entries of the N = ``layout.size`` of
    the whole data (a process of the block-distributed sampler holds only
    some row groups), and step ``steps[k - first]``. Kept iterations
    (k > ``burn_in``) write ``trace[k - burn_in - 1]`` (N/N_s x the held
    blocks' log-likelihood, in ``constants.evaluate`` mode) and update
    ``status`` = [smallest kept factor entry, 1 if any kept entry was not
    finite]. ``parallel`` runs the b blocks of a part in a prange; without
    it (a process with one thread, or small parts) they run one after the
    other and no parallel region is entered.
    """
    num_blocks = layout.row_edges.size - 1
    work = _PartWork(np.zeros(num_blocks), np.empty(num_blocks), np.zeros(num_blocks, dtype=np.bool_),
                     _scratch(layout, chain.W.shape[1]))
    for k in range(steps.size):
        iteration = first + k
        p = (iteration - 1) % layout.part_columns.shape[0]
        columns = layout.part_columns[p]
        n_s = layout.part_sizes[p]
        part_step = PartStep(steps[k], layout.size / n_s, n_s)
        evaluate = constants.evaluate if iteration > burn_in else EVALUATE_NONE
        if parallel:
            _part_parallel(X, layout, chain, constants, columns, part_step, evaluate, work)
        else:
            _part_serial(X, layout, chain, constants, columns, part_step, evaluate, work)
        if iteration > burn_in:
            _record(iteration - burn_in - 1, evaluate, part_step.scale, work, layout, columns, trace, status)


@numba.njit(cache=True, inline="always")
def _fill_exponential(F, lo, hi, states, row, rate):
    """F[lo:hi] <- Exponential(rate) draws (-log u / rate), row by row, from stream ``row``."""
    counter = states[row, 0]
    for i in range(lo, hi):
        for r in range(F.shape[1]):
            u, counter = uniform(counter)
            F[i, r] = -np.log(u) / rate
    states[row, 0] = counter


@numba.njit(cache=True)
def _track_draw(F, status):
    """status <- [smallest entry so far, 1 if any entry so far was not finite], with the entries of F."""
    for value in F.reshape(F.size):
        if np.isfinite(value):
            status[0] = min(status[0], value)
        else:
            status[1] = 1.0


@numba.njit(cache=True, nogil=True)
def nmf_prior_kernel(X, layout, chain, rates, first, burn_in, count, trace, status):
    """Exact t = 0 "chain": ``count`` independent prior draws of (W, H), scored like kept SGLD samples.

    Draw k (iteration ``first + k``) fills W's row group g from stream
    ``chain.states_W[g]`` and H's column group g from ``chain.states_H[g]``
    with Exponential(``rates`` = (rate_W, rate_H)) entries, then writes N/N_s
    x the log-likelihood of part (iteration - 1) mod P to
    ``trace[iteration - burn_in - 1]`` and updates ``status`` = [smallest
    entry of the draws, 1 if any entry was not finite].
    """
    row_edges, col_edges = layout.row_edges, layout.col_edges
    W, Ht = chain.W, chain.Ht
    num_blocks = row_edges.size - 1
    out = np.zeros(num_blocks)
    for k in range(count):
        iteration = first + k
        p = (iteration - 1) % layout.part_columns.shape[0]
        columns = layout.part_columns[p]
        for g in range(num_blocks):
            _fill_exponential(W, row_edges[g], row_edges[g + 1], chain.states_W, g, rates[0])
        for g in range(col_edges.size - 1):
            _fill_exponential(Ht, col_edges[g], col_edges[g + 1], chain.states_H, g, rates[1])
        _track_draw(W, status)
        _track_draw(Ht, status)
        for b in range(num_blocks):
            c = columns[b]
            Wb = W[row_edges[b]:row_edges[b + 1]]
            Hb = Ht[col_edges[c]:col_edges[c + 1]]
            out[b] = block_loglik(X[row_edges[b]:row_edges[b + 1], col_edges[c]:col_edges[c + 1]], Wb @ Hb.T)
        terms = 0.0
        for b in range(num_blocks):
            terms += layout.log_factorial[b, columns[b]]
        trace[iteration - burn_in - 1] = layout.size / layout.part_sizes[p] * (out.sum() - terms)
