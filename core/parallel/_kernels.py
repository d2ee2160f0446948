"""Compiled kernels of :mod:`core.parallel.noise` and :mod:`core.parallel.blocks`.

Imported only inside the functions that run them, so that importing
``core`` (and starting the CLI) does not load numba.
"""

import numba
import numpy as np

from core.parallel.noise import _R, FN, KN, WN

__all__ = ["fill_normal_kernel", "normal", "langevin_entry", "nmf_part_kernel", "nmf_part_kernel_serial"]

_FLAG = np.uint64(1) << np.uint64(63)
_LOW = np.uint64(0xFFFFFFFF)


@numba.njit(cache=True, inline="always")
def splitmix(states, i):
    z = states[i, 0] + np.uint64(0x9E3779B97F4A7C15)
    states[i, 0] = z
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, inline="always")
def next32(states, i):
    pending = states[i, 1]
    if pending & _FLAG:
        states[i, 1] = np.uint64(0)
        return np.uint32(pending & _LOW)
    z = splitmix(states, i)
    states[i, 1] = (z >> np.uint64(32)) | _FLAG
    return np.uint32(z & _LOW)


@numba.njit(cache=True, inline="always")
def uniform(states, i):
    return ((splitmix(states, i) >> np.uint64(11)) + np.uint64(1)) * (1.0 / 9007199254740993.0)


@numba.njit(cache=True)
def normal_slow(states, i, hz, iz):
    while True:
        x = hz * WN[iz]
        if iz == 0:
            while True:
                x = -np.log(uniform(states, i)) / _R
                y = -np.log(uniform(states, i))
                if y + y >= x * x:
                    break
            return _R + x if hz > 0 else -_R - x
        if FN[iz] + uniform(states, i) * (FN[iz - 1] - FN[iz]) < np.exp(-0.5 * x * x):
            return x
        u = next32(states, i)
        iz = np.int64(u & np.uint32(127))
        hz = np.int64(np.int32(u) >> np.int32(7))
        if abs(hz) < KN[iz]:
            return hz * WN[iz]


@numba.njit(cache=True, inline="always")
def normal(states, i):
    u = next32(states, i)
    iz = np.int64(u & np.uint32(127))
    hz = np.int64(np.int32(u) >> np.int32(7))
    if abs(hz) < KN[iz]:
        return hz * WN[iz]
    return normal_slow(states, i, hz, iz)


@numba.njit(cache=True)
def fill_normal_kernel(states, i, out):
    flat = out.reshape(-1)
    for k in range(flat.size):
        flat[k] = normal(states, i)


@numba.njit(cache=True, fastmath=False)
def block_loglik(Xb, WH):
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
def _block_update(b, X, W, H, v_W, v_H, row_edges, col_edges, columns, states_W, states_H, step, temperature,
                  scale, rate_W, rate_H, preconditioned, alpha, sigma, n_s, evaluate):
    """Update W's row group b and H's column group ``columns[b]`` from block (b, columns[b]).

    Returns the block's log-likelihood term (0 when ``evaluate`` is 0).
    """
    rank = W.shape[1]
    c = columns[b]
    r0, r1 = row_edges[b], row_edges[b + 1]
    c0, c1 = col_edges[c], col_edges[c + 1]
    Xb = X[r0:r1, c0:c1]
    Wb = np.ascontiguousarray(W[r0:r1])
    Hb = np.ascontiguousarray(H[:, c0:c1])
    WH = Wb @ Hb
    total = 0.0
    if evaluate == 1:
        total = block_loglik(Xb, WH)
    if temperature > 0:
        ratio = np.empty_like(WH)
        for i in range(WH.shape[0]):
            for j in range(WH.shape[1]):
                x = Xb[i, j]
                ratio[i, j] = (x / WH[i, j] if x != 0 else 0.0) - 1.0
        grad_W = ratio @ np.ascontiguousarray(Hb.T)
        grad_H = np.ascontiguousarray(Wb.T) @ ratio
    else:
        grad_W = np.zeros_like(Wb)
        grad_H = np.zeros_like(Hb)
    likelihood_weight = temperature * scale
    noise_scale = np.sqrt(2.0 * step)
    for i in range(r1 - r0):
        for r in range(rank):
            z = normal(states_W, b)
            W[r0 + i, r], v_W[r0 + i, r] = langevin_entry(
                Wb[i, r], -rate_W + likelihood_weight * grad_W[i, r], z, temperature * grad_W[i, r] / n_s,
                v_W[r0 + i, r], step, noise_scale, preconditioned, alpha, sigma)
    for r in range(rank):
        for j in range(c1 - c0):
            z = normal(states_H, c)
            H[r, c0 + j], v_H[r, c0 + j] = langevin_entry(
                Hb[r, j], -rate_H + likelihood_weight * grad_H[r, j], z, temperature * grad_H[r, j] / n_s,
                v_H[r, c0 + j], step, noise_scale, preconditioned, alpha, sigma)
    if evaluate == 2:
        WH = np.ascontiguousarray(W[r0:r1]) @ np.ascontiguousarray(H[:, c0:c1])
        total = block_loglik(Xb, WH)
    return total


@numba.njit(cache=True, parallel=True)
def nmf_part_kernel(X, W, H, v_W, v_H, row_edges, col_edges, columns, states_W, states_H, step, temperature, scale,
                    rate_W, rate_H, preconditioned, alpha, sigma, n_s, evaluate, out):
    for b in numba.prange(row_edges.size - 1):
        out[b] = _block_update(b, X, W, H, v_W, v_H, row_edges, col_edges, columns, states_W, states_H, step,
                               temperature, scale, rate_W, rate_H, preconditioned, alpha, sigma, n_s, evaluate)


# the same loop with range: on small parts a parallel region costs more than it saves
@numba.njit(cache=True)
def nmf_part_kernel_serial(X, W, H, v_W, v_H, row_edges, col_edges, columns, states_W, states_H, step, temperature,
                           scale, rate_W, rate_H, preconditioned, alpha, sigma, n_s, evaluate, out):
    for b in range(row_edges.size - 1):
        out[b] = _block_update(b, X, W, H, v_W, v_H, row_edges, col_edges, columns, states_W, states_H, step,
                               temperature, scale, rate_W, rate_H, preconditioned, alpha, sigma, n_s, evaluate)
