"""Compiled kernels of :mod:`core.parallel.noise` and :mod:`core.parallel.blocks`.

Imported only inside the functions that run them, so that importing
``core`` (and starting the CLI) does not load numba.

Layout: the NMF kernels take ``W`` (n_rows, R) and ``Ht`` = H transposed
(n_cols, R), both C-contiguous, so that every factor block is a contiguous
run of rows and the three products of a block (W_b H_b, ratio H_b^T,
W_b^T ratio) go to BLAS without copies. Noise streams are read into
registers once per factor block (:func:`draw_normal` carries the
splitmix64 counter and the buffered half-draw), which makes a normal about
six times cheaper than going through the state array at every draw.
"""

import math

import numba
import numpy as np

from core.parallel.noise import _R, FN, KN, WN

__all__ = [
    "block_loglik",
    "draw_normal",
    "fill_normal_kernel",
    "langevin_entry",
    "nmf_chain_kernel",
    "nmf_prior_kernel",
]

_FLAG = np.uint64(1) << np.uint64(63)
_LOW = np.uint64(0xFFFFFFFF)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, inline="always")
def _mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, inline="always")
def _uniform(counter):
    counter = counter + _GOLDEN
    return ((_mix(counter) >> np.uint64(11)) + np.uint64(1)) * (1.0 / 9007199254740993.0), counter


@numba.njit(cache=True)
def _normal_slow(counter, pending, hz, iz):
    """The ziggurat's wedge and tail cases (about 1.5 % of draws); returns (z, counter, pending)."""
    while True:
        x = hz * WN[iz]
        if iz == 0:
            while True:
                u, counter = _uniform(counter)
                x = -np.log(u) / _R
                u, counter = _uniform(counter)
                y = -np.log(u)
                if y + y >= x * x:
                    break
            return (_R + x if hz > 0 else -_R - x), counter, pending
        u, counter = _uniform(counter)
        if FN[iz] + u * (FN[iz - 1] - FN[iz]) < np.exp(-0.5 * x * x):
            return x, counter, pending
        iz, hz, counter, pending = _ziggurat_box(counter, pending)
        if abs(hz) < KN[iz]:
            return hz * WN[iz], counter, pending


@numba.njit(cache=True, inline="always")
def _ziggurat_box(counter, pending):
    """32 fresh bits (half of a splitmix64 output, the other half kept pending) as the ziggurat's (iz, hz)."""
    if pending & _FLAG:
        bits = np.uint32(pending & _LOW)
        pending = np.uint64(0)
    else:
        counter = counter + _GOLDEN
        z = _mix(counter)
        pending = (z >> np.uint64(32)) | _FLAG
        bits = np.uint32(z & _LOW)
    return np.int64(bits & np.uint32(127)), np.int64(np.int32(bits) >> np.int32(7)), counter, pending


@numba.njit(cache=True, inline="always")
def draw_normal(counter, pending):
    """One standard normal from a stream held in registers; returns (z, counter, pending)."""
    iz, hz, counter, pending = _ziggurat_box(counter, pending)
    if abs(hz) < KN[iz]:
        return hz * WN[iz], counter, pending
    return _normal_slow(counter, pending, hz, iz)


@numba.njit(cache=True)
def fill_normal_kernel(states, i, out):
    flat = out.reshape(-1)
    counter, pending = states[i, 0], states[i, 1]
    for k in range(flat.size):
        flat[k], counter, pending = draw_normal(counter, pending)
    states[i, 0], states[i, 1] = counter, pending


@numba.njit(cache=True, inline="always")
def langevin_entry(x, g, z, mean, v, step, noise_scale, preconditioned, alpha, sigma):
    """One coordinate of the (p)SGLD step with mirroring; returns (new value, new v).

    ``g`` is the drift (log-prior plus tempered, scaled likelihood gradient), ``z``
    a standard normal draw, ``mean`` the tempered mean likelihood gradient feeding
    pSGLD's squared-gradient average ``v`` (which starts at the first ``mean**2``:
    a negative ``v`` marks it unset).
    """
    if preconditioned:
        v = mean * mean if v < 0.0 else alpha * v + (1.0 - alpha) * mean * mean
        G = 1.0 / (sigma + np.sqrt(v))
        return abs(x + step * G * g + noise_scale * np.sqrt(G) * z), v
    return abs(x + step * g + noise_scale * z), v


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
def _update_rows(F, V, lo, hi, G, has_gradient, states, row, Z, step, noise_scale, rate, weight, mean_weight,
                 preconditioned, alpha, sigma, track):
    """(p)SGLD update of F[lo:hi] with drift -rate + weight * G and noise from stream ``row``.

    Entries are visited (and their normals drawn) row by row of F: for H,
    stored transposed, that is column by column of H. ``Z`` is scratch of
    at least (hi - lo) x rank entries. Returns (smallest new entry, whether
    any is not finite); the smallest entry only when ``track`` (else inf).
    """
    rank = F.shape[1]
    n = (hi - lo) * rank
    noise = Z[:n]
    _fill_stream(noise, states, row)
    flat = F[lo:hi].reshape(n)
    if not preconditioned:
        _sgld_run(flat, G.reshape(G.size), noise, has_gradient, step, noise_scale, rate, weight)
        if not _sum(flat) < np.inf:
            return np.nan, True
        return (_finite_minimum(flat) if track else np.inf), False
    low = np.inf
    bad = False
    averages = V[lo:hi].reshape(n)
    gradient = G.reshape(G.size)
    for k in range(n):
        g = gradient[k] if has_gradient else 0.0
        x, averages[k] = langevin_entry(flat[k], -rate + weight * g, noise[k], mean_weight * g, averages[k], step,
                                        noise_scale, True, alpha, sigma)
        flat[k] = x
        low = min(low, x)
        bad = bad or not (x < np.inf)
    return low, bad


@numba.njit(cache=True)
def _block_update(b, X, W, Ht, v_W, v_Ht, row_edges, col_edges, columns, states_W, states_H, step, temperature,
                  scale, rate_W, rate_H, preconditioned, alpha, sigma, n_s, evaluate, out, low, bad, scratch):
    """Update W's row group b and H's column group ``columns[b]`` from block (b, columns[b]).

    Writes the block's log-likelihood term to ``out[b]`` (0 when ``evaluate``
    is 0), the smallest new factor entry to ``low[b]`` and whether any is not
    finite to ``bad[b]``.
    """
    c = columns[b]
    r0, r1 = row_edges[b], row_edges[b + 1]
    c0, c1 = col_edges[c], col_edges[c + 1]
    Xb = X[r0:r1, c0:c1]
    Wb = W[r0:r1]
    Hb = Ht[c0:c1]
    total = 0.0
    has_gradient = temperature > 0
    if has_gradient or evaluate == 1:
        WH = Wb @ Hb.T
        if evaluate == 1:
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
    noise_scale = math.sqrt(2.0 * step)
    Z = scratch[b]
    weight = temperature * scale
    mean_weight = temperature / n_s
    low_W, bad_W = _update_rows(W, v_W, r0, r1, grad_W, has_gradient, states_W, b, Z, step, noise_scale, rate_W,
                                weight, mean_weight, preconditioned, alpha, sigma, evaluate != 0)
    low_H, bad_H = _update_rows(Ht, v_Ht, c0, c1, grad_Ht, has_gradient, states_H, c, Z, step, noise_scale, rate_H,
                                weight, mean_weight, preconditioned, alpha, sigma, evaluate != 0)
    if evaluate == 2:
        total = block_loglik(Xb, Wb @ Hb.T)
    out[b] = total
    low[b] = min(low_W, low_H) if not (bad_W or bad_H) else np.nan
    bad[b] = bad_W or bad_H


@numba.njit(cache=True, parallel=True)
def _part_parallel(X, W, Ht, v_W, v_Ht, row_edges, col_edges, columns, states_W, states_H, step, temperature, scale,
                   rate_W, rate_H, preconditioned, alpha, sigma, n_s, evaluate, out, low, bad, scratch):
    for b in numba.prange(row_edges.size - 1):
        _block_update(b, X, W, Ht, v_W, v_Ht, row_edges, col_edges, columns, states_W, states_H, step, temperature,
                      scale, rate_W, rate_H, preconditioned, alpha, sigma, n_s, evaluate, out, low, bad, scratch)


@numba.njit(cache=True)
def _part_serial(X, W, Ht, v_W, v_Ht, row_edges, col_edges, columns, states_W, states_H, step, temperature, scale,
                 rate_W, rate_H, preconditioned, alpha, sigma, n_s, evaluate, out, low, bad, scratch):
    for b in range(row_edges.size - 1):
        _block_update(b, X, W, Ht, v_W, v_Ht, row_edges, col_edges, columns, states_W, states_H, step, temperature,
                      scale, rate_W, rate_H, preconditioned, alpha, sigma, n_s, evaluate, out, low, bad, scratch)


@numba.njit(cache=True)
def _scratch(row_edges, col_edges, rank):
    """Noise scratch, one row per block: room for the largest row or column group's factor block."""
    largest = max(np.max(np.diff(row_edges)), np.max(np.diff(col_edges)))
    return np.empty((row_edges.size - 1, largest * rank))


@numba.njit(cache=True, inline="always")
def _record(iteration, burn_in, code, scale, out, low, bad, log_factorial, columns, trace, status):
    """Store a kept iteration: the scaled log-likelihood and the running min / non-finite flag."""
    if code != 0:
        terms = 0.0
        for b in range(out.size):
            terms += log_factorial[b, columns[b]]
        trace[iteration - burn_in - 1] = scale * (out.sum() - terms)
    else:
        trace[iteration - burn_in - 1] = np.nan
    for b in range(out.size):
        if bad[b]:
            status[1] = 1.0
        else:
            status[0] = min(status[0], low[b])


# The chain loop runs a whole stretch of iterations per call.
@numba.njit(cache=True, nogil=True)
def nmf_chain_kernel(X, W, Ht, v_W, v_Ht, row_edges, col_edges, part_columns, part_sizes, size, states_W, states_H,
                     steps, first, burn_in, temperature, rate_W, rate_H, preconditioned, alpha, sigma, evaluate,
                     log_factorial, trace, status, parallel):
    """Iterations first .. first + len(steps) - 1 (from 1) of a block chain.

    Iteration k uses part p = (k - 1) mod P of ``part_columns`` (P, b) (the
    column group of each of the b row groups of ``row_edges``), with
    N_s = ``part_sizes[p]`` entries of the N = ``size`` of the whole data
    (a process of the block-distributed sampler holds only some row
    groups), and step ``steps[k - first]``. Kept iterations (k > ``burn_in``)
    write ``trace[k - burn_in - 1]`` (N/N_s x the held blocks'
    log-likelihood, ``log_factorial`` (b, B) rows of the held groups) and
    update ``status`` = [smallest kept factor entry, 1 if any kept entry
    was not finite]. ``parallel`` runs the b blocks of a part in a prange;
    without it (a process with one thread, or small parts) they run one after
    the other and no parallel region is entered.
    """
    num_blocks = row_edges.size - 1
    out = np.zeros(num_blocks)
    low = np.empty(num_blocks)
    bad = np.zeros(num_blocks, dtype=np.bool_)
    scratch = _scratch(row_edges, col_edges, W.shape[1])
    for k in range(steps.size):
        iteration = first + k
        p = (iteration - 1) % part_columns.shape[0]
        columns = part_columns[p]
        n_s = part_sizes[p]
        code = evaluate if iteration > burn_in else 0
        if parallel:
            _part_parallel(X, W, Ht, v_W, v_Ht, row_edges, col_edges, columns, states_W, states_H, steps[k],
                           temperature, size / n_s, rate_W, rate_H, preconditioned, alpha, sigma, float(n_s), code,
                           out, low, bad, scratch)
        else:
            _part_serial(X, W, Ht, v_W, v_Ht, row_edges, col_edges, columns, states_W, states_H, steps[k],
                         temperature, size / n_s, rate_W, rate_H, preconditioned, alpha, sigma, float(n_s), code,
                         out, low, bad, scratch)
        if iteration > burn_in:
            _record(iteration, burn_in, code, size / n_s, out, low, bad, log_factorial, columns, trace, status)


@numba.njit(cache=True, inline="always")
def _fill_exponential(F, lo, hi, states, row, rate):
    """F[lo:hi] <- Exponential(rate) draws (-log u / rate), row by row, from stream ``row``."""
    counter = states[row, 0]
    for i in range(lo, hi):
        for r in range(F.shape[1]):
            u, counter = _uniform(counter)
            F[i, r] = -np.log(u) / rate
    states[row, 0] = counter


@numba.njit(cache=True, nogil=True)
def nmf_prior_kernel(X, W, Ht, row_edges, col_edges, part_columns, part_sizes, size, states_W, states_H, first,
                     burn_in, count, rate_W, rate_H, log_factorial, trace):
    """Exact t = 0 "chain": ``count`` independent prior draws of (W, H), scored like kept SGLD samples.

    Draw k (iteration ``first + k``) fills W's row group g from stream
    ``states_W[g]`` and H's column group g from ``states_H[g]`` with
    Exponential(rate) entries, then writes N/N_s x the log-likelihood of
    part (iteration - 1) mod P to ``trace[iteration - burn_in - 1]``.
    """
    num_blocks = row_edges.size - 1
    out = np.zeros(num_blocks)
    for k in range(count):
        iteration = first + k
        p = (iteration - 1) % part_columns.shape[0]
        columns = part_columns[p]
        for g in range(num_blocks):
            _fill_exponential(W, row_edges[g], row_edges[g + 1], states_W, g, rate_W)
        for g in range(col_edges.size - 1):
            _fill_exponential(Ht, col_edges[g], col_edges[g + 1], states_H, g, rate_H)
        for b in range(num_blocks):
            c = columns[b]
            Wb = W[row_edges[b]:row_edges[b + 1]]
            Hb = Ht[col_edges[c]:col_edges[c + 1]]
            out[b] = block_loglik(X[row_edges[b]:row_edges[b + 1], col_edges[c]:col_edges[c + 1]], Wb @ Hb.T)
        terms = 0.0
        for b in range(num_blocks):
            terms += log_factorial[b, columns[b]]
        trace[iteration - burn_in - 1] = size / part_sizes[p] * (out.sum() - terms)
