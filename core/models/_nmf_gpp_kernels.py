"""numba kernels of :mod:`sepsti.core.models.nmf_gpp` (imported lazily: numba loads only when used).

Conventions: float64, C-contiguous. A lower Cholesky factor C ``(n, n)`` is
passed as its packed rows (:func:`pack_rows`); both C v and Cᵀ v read them. Fields are stored one
component per row: ``delta_t`` ``(M, K)`` (the transpose of theta's
``delta``), ``eta`` ``(M, L)``; ``X`` is ``(K, L)``. Kernels check nothing
(the model validates).

The exponential-to-Gaussian link calls SciPy's compiled ``erfcx`` and
``log_ndtr`` (``scipy.special.cython_special``) through symbols registered
with LLVM, so the kernels stay cacheable.
"""

import math
from typing import NamedTuple

import numba
import numpy as np
from llvmlite import binding
from numba import types
from numba.extending import get_cython_function_address

__all__ = ["GPFactor", "pack_rows", "tril_matvec", "tril_rmatvec", "tril_solve", "link", "logdensity_and_grad",
           "logdensity_and_grad_flat"]

binding.add_symbol("sepsti_nmf_gpp_erfcx",
                   get_cython_function_address("scipy.special.cython_special", "__pyx_fuse_1erfcx"))
binding.add_symbol("sepsti_nmf_gpp_log_ndtr",
                   get_cython_function_address("scipy.special.cython_special", "__pyx_fuse_1log_ndtr"))
_erfcx = types.ExternalFunction("sepsti_nmf_gpp_erfcx", types.float64(types.float64))
_log_ndtr = types.ExternalFunction("sepsti_nmf_gpp_log_ndtr", types.float64(types.float64))

# Reassociation lets the dot products vectorise; no finite-math assumptions (the link meets ±inf).
_FAST = {"reassoc", "contract", "nsz"}


class GPFactor(NamedTuple):
    """One factor's prior as the kernels read it: its GP's Cholesky factor and its link (eq. 22–23).

    Attributes
    ----------
    packed : ndarray
        :func:`pack_rows` of the lower Cholesky factor.
    inv_sqrt2_sigma : ndarray
        1/(√2 σ) per entry along the field's last axis (σ the GP's marginal standard deviations).
    inv_rate : float
        1/λ.
    slope_scale : ndarray
        √(2/π)/(λσ) per entry along the last axis.
    """

    packed: np.ndarray
    inv_sqrt2_sigma: np.ndarray
    inv_rate: float
    slope_scale: np.ndarray


def pack_rows(chol):
    """Rows of the lower triangle of ``chol``, concatenated: row i holds chol[i, :i+1] (length n(n+1)/2).

    Half the memory of the square factor, read contiguously by both products:
    the factor of D (625² entries) then stays in a core's L2 cache between them.
    """
    rows, cols = np.tril_indices(chol.shape[0])
    return np.ascontiguousarray(chol[rows, cols])


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _matvec_pair(packed, a, b, out_a, out_b):
    start = 0
    for i in range(a.shape[0]):
        row = packed[start:start + i + 1]
        total_a = 0.0
        total_b = 0.0
        for j in range(i + 1):
            c = row[j]
            total_a += c * a[j]
            total_b += c * b[j]
        out_a[i] = total_a
        out_b[i] = total_b
        start += i + 1


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _rmatvec_pair(packed, a, b, out_a, out_b):
    out_a[:] = 0.0
    out_b[:] = 0.0
    start = 0
    for i in range(a.shape[0]):
        row = packed[start:start + i + 1]
        coef_a = a[i]
        coef_b = b[i]
        for j in range(i + 1):
            c = row[j]
            out_a[j] += c * coef_a
            out_b[j] += c * coef_b
        start += i + 1


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _matvec_one(packed, a, out_a):
    start = 0
    for i in range(a.shape[0]):
        row = packed[start:start + i + 1]
        total = 0.0
        for j in range(i + 1):
            total += row[j] * a[j]
        out_a[i] = total
        start += i + 1


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _rmatvec_one(packed, a, out_a):
    out_a[:] = 0.0
    start = 0
    for i in range(a.shape[0]):
        row = packed[start:start + i + 1]
        coef = a[i]
        for j in range(i + 1):
            out_a[j] += row[j] * coef
        start += i + 1


@numba.njit(cache=True, nogil=True)
def tril_matvec(packed, values, out):
    """out[m] = C @ values[m] for every row m; ``packed`` = :func:`pack_rows` (C).

    Components go in pairs, so one pass over the factor serves two of them.
    """
    num_components = values.shape[0]
    for m in range(0, num_components - 1, 2):
        _matvec_pair(packed, values[m], values[m + 1], out[m], out[m + 1])
    if num_components % 2:
        _matvec_one(packed, values[num_components - 1], out[num_components - 1])


@numba.njit(cache=True, nogil=True)
def tril_rmatvec(packed, values, out):
    """out[m] = C.T @ values[m] for every row m, from the same packed rows (row-wise axpy)."""
    num_components = values.shape[0]
    for m in range(0, num_components - 1, 2):
        _rmatvec_pair(packed, values[m], values[m + 1], out[m], out[m + 1])
    if num_components % 2:
        _rmatvec_one(packed, values[num_components - 1], out[num_components - 1])


@numba.njit(cache=True, nogil=True)
def tril_solve(packed, values, out):
    """out[m] = C⁻¹ values[m] for every row m by forward substitution over the packed rows."""
    for m in range(values.shape[0]):
        v = values[m]
        o = out[m]
        start = 0
        for i in range(v.shape[0]):
            row = packed[start:start + i + 1]
            total = v[i]
            for j in range(i):
                total -= row[j] * o[j]
            o[i] = total / row[i]
            start += i + 1


@numba.njit(cache=True, nogil=True)
def link(field, factor, value, slope):
    """Eq. 22–23 elementwise along the last axis: value = −log Φ(−z)/λ, slope = √(2/π)/(λσ erfcx(z/√2)),
    z = f/σ, with the constants of ``factor`` (a :class:`GPFactor`).

    One ``erfcx`` call gives both for x = z/√2 ≥ −1 (log Φ(−z) = log(erfcx(x)/2) − x², no cancellation
    there); below, ``log_ndtr`` keeps the value exact as it tends to 0.
    """
    inv_sqrt2_sigma, inv_rate, slope_scale = factor.inv_sqrt2_sigma, factor.inv_rate, factor.slope_scale
    for m in range(field.shape[0]):
        for i in range(field.shape[1]):
            x = field[m, i] * inv_sqrt2_sigma[i]
            w = _erfcx(x)
            if x >= -1.0:
                log_tail = math.log(0.5 * w) - x * x
            else:
                log_tail = _log_ndtr(-math.sqrt(2.0) * x)
            value[m, i] = -log_tail * inv_rate
            slope[m, i] = slope_scale[i] / w


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _residual_terms(D_t, H, X, grad_D_t, grad_H):
    """Σ (D H − X)², and (D H − X) Hᵀ, Dᵀ (D H − X) written (transposed for D) into the grad arrays."""
    num_components, num_rows = D_t.shape
    num_cols = H.shape[1]
    residual = np.empty(num_cols)
    grad_H[:] = 0.0
    total = 0.0
    for i in range(num_rows):
        for l in range(num_cols):
            residual[l] = -X[i, l]
        for m in range(num_components):
            coef = D_t[m, i]
            h = H[m]
            for l in range(num_cols):
                residual[l] += coef * h[l]
        for l in range(num_cols):
            total += residual[l] * residual[l]
        for m in range(num_components):
            h = H[m]
            g = grad_H[m]
            coef = D_t[m, i]
            acc = 0.0
            for l in range(num_cols):
                acc += residual[l] * h[l]
                g[l] += coef * residual[l]
            grad_D_t[m, i] = acc
    return total


@numba.njit(cache=True, nogil=True)
def logdensity_and_grad(delta_t, eta, X, inv_var, factor_d, factor_h, grad_delta_t, grad_eta):
    """Eq. 19 and its gradient (eq. 20–21); the gradient goes into ``grad_delta_t`` (M, K), ``grad_eta`` (M, L).

    ``factor_d``, ``factor_h``: the :class:`GPFactor` of D and of H; ``inv_var`` = 1/σ_N².
    """
    num_components, num_rows = delta_t.shape
    num_cols = eta.shape[1]
    d = np.empty((num_components, num_rows))
    h = np.empty((num_components, num_cols))
    tril_matvec(factor_d.packed, delta_t, d)
    tril_matvec(factor_h.packed, eta, h)
    D_t = np.empty_like(d)
    slope_d = np.empty_like(d)
    H = np.empty_like(h)
    slope_h = np.empty_like(h)
    link(d, factor_d, D_t, slope_d)
    link(h, factor_h, H, slope_h)
    back_d = np.empty_like(d)
    back_h = np.empty_like(h)
    squared_error = _residual_terms(D_t, H, X, back_d, back_h)
    # Chain rule through the link, then through the Cholesky factors (eq. 20–21).
    for m in range(num_components):
        for i in range(num_rows):
            back_d[m, i] *= -inv_var * slope_d[m, i]
        for l in range(num_cols):
            back_h[m, l] *= -inv_var * slope_h[m, l]
    tril_rmatvec(factor_d.packed, back_d, grad_delta_t)
    tril_rmatvec(factor_h.packed, back_h, grad_eta)
    prior = 0.0
    for m in range(num_components):
        for i in range(num_rows):
            prior += delta_t[m, i] * delta_t[m, i]
            grad_delta_t[m, i] -= delta_t[m, i]
        for l in range(num_cols):
            prior += eta[m, l] * eta[m, l]
            grad_eta[m, l] -= eta[m, l]
    return -0.5 * (inv_var * squared_error + prior)


@numba.njit(cache=True, nogil=True)
def logdensity_and_grad_flat(theta, num_components, X, inv_var, factor_d, factor_h, grad):
    """:func:`logdensity_and_grad` on the model's flat θ (δ (K, M) row-major, then η (M, L)), gradient into ``grad``.

    The transposes of δ and of its gradient happen here, so a caller makes one call per evaluation.
    """
    num_rows, num_cols = X.shape
    num_d = num_rows * num_components
    delta_t = np.empty((num_components, num_rows))
    for i in range(num_rows):
        for m in range(num_components):
            delta_t[m, i] = theta[i * num_components + m]
    eta = theta[num_d:].reshape(num_components, num_cols)
    grad_delta_t = np.empty((num_components, num_rows))
    logp = logdensity_and_grad(delta_t, eta, X, inv_var, factor_d, factor_h, grad_delta_t,
                               grad[num_d:].reshape(num_components, num_cols))
    for i in range(num_rows):
        for m in range(num_components):
            grad[i * num_components + m] = grad_delta_t[m, i]
    return logp
