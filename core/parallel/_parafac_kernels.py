"""Compiled part update of the PARAFAC block sampler (:mod:`sepsti.core.parallel.parafac_blocks`).

Imported lazily: numba loads only when used.

Conventions: the chain is a :class:`sepsti.core.parallel.kernel_arguments.ParafacChainArrays`
(factors A, B, C, C-contiguous float64 ``(I, R)``, ``(J, R)``, ``(K, R)``,
pSGLD's averages, zero gradient accumulators and (B, 2) uint64 noise
streams, per factor); ``blocks`` a
:class:`sepsti.core.sparse_tensor.TensorBlocks` (some blocks of one part, global
coordinates); ``constants`` a :class:`sepsti.core.parallel.kernel_arguments.StepConstants`
(rates ordered (A, B, C)) and ``part_step`` a
:class:`sepsti.core.parallel.kernel_arguments.PartStep`.

The part update (PARAFAC'18 eq. 6, 8–9) makes one pass over each factor block:
drift (prior plus the tempered, scaled gradient, whose dense part is the
column-sum term), pSGLD's average, the noise draw and mirroring, via the shared
:func:`sepsti.core.parallel._kernels.langevin_entry`. The likelihood terms come from
the model's kernels (:mod:`sepsti.core.models._parafac_kernels`). The sparse gradient
is gathered into whole-factor accumulators that the pass reads and zeroes
again, so no array is allocated per iteration.
"""

import math

import numba
import numpy as np

from sepsti.core.models._parafac_kernels import block_terms, column_sum, nonzero_terms
from sepsti.core.parallel._kernels import draw_normal, langevin_entry
from sepsti.core.parallel.kernel_arguments import EVALUATE_AFTER_UPDATE

__all__ = ["part_update_parallel", "part_update_serial"]


@numba.njit(cache=True, nogil=True)
def _update_factor_block(F, v, grad, states, row, lo, hi, dense, rate, constants, part_step):
    """(p)SGLD update and mirroring of rows lo..hi of factor F (average ``v``) in one pass, noise from stream ``row``.

    The likelihood gradient of entry (i, r) is ``grad[i, r] − dense[r]`` (the
    non-zeros' part gathered in ``grad``, the column-sum part ``dense``);
    those ``grad`` rows are zeroed for the next part. ``rate`` is F's prior rate.

    The noise is stream ``row`` of ``states`` (:mod:`sepsti.core.parallel.noise`), held in
    registers for the whole block (:func:`sepsti.core.parallel._kernels.draw_normal`).
    """
    temperature = constants.temperature
    weight = temperature * part_step.scale
    n_s = part_step.num_entries
    step = part_step.step
    R = F.shape[1]
    noise_scale = math.sqrt(2.0 * step)
    counter, pending = states[row, 0], states[row, 1]
    for i in range(lo, hi):
        for r in range(R):
            g = grad[i, r] - dense[r]
            grad[i, r] = 0.0
            z, counter, pending = draw_normal(counter, pending)
            F[i, r], v[i, r] = langevin_entry(F[i, r], -rate + weight * g, z, temperature * g / n_s, v[i, r],
                                              step, noise_scale, constants)
    states[row, 0], states[row, 1] = counter, pending


@numba.njit(cache=True, nogil=True)
def _part_block(chain, blocks, block, constants, part_step):
    """Update the three factor blocks of ``block`` from its data; returns its log-likelihood (before or after)."""
    A, B, C = chain.A, chain.B, chain.C
    factors = (A, B, C)
    gradient = (chain.gradient_A, chain.gradient_B, chain.gradient_C)
    rates = constants.rates
    R = A.shape[1]
    ranges = blocks.ranges[block]
    keys = blocks.keys[block]
    sa = column_sum(A, ranges[0, 0], ranges[0, 1])
    sb = column_sum(B, ranges[1, 0], ranges[1, 1])
    sc = column_sum(C, ranges[2, 0], ranges[2, 1])
    want_grad = constants.temperature > 0
    total = 0.0
    for r in range(R):
        total -= sa[r] * sb[r] * sc[r]
    total = nonzero_terms(total, factors, blocks, block, gradient, want_grad)
    if want_grad:
        dense_A, dense_B, dense_C = sb * sc, sa * sc, sa * sb
    else:
        dense_A, dense_B, dense_C = np.zeros(R), np.zeros(R), np.zeros(R)
    _update_factor_block(A, chain.v_A, chain.gradient_A, chain.states_A, keys[0], ranges[0, 0], ranges[0, 1], dense_A,
                         rates[0], constants, part_step)
    _update_factor_block(B, chain.v_B, chain.gradient_B, chain.states_B, keys[1], ranges[1, 0], ranges[1, 1], dense_B,
                         rates[1], constants, part_step)
    _update_factor_block(C, chain.v_C, chain.gradient_C, chain.states_C, keys[2], ranges[2, 0], ranges[2, 1], dense_C,
                         rates[2], constants, part_step)
    if constants.evaluate == EVALUATE_AFTER_UPDATE:
        total = block_terms(factors, blocks, block, gradient, False)
    return total


@numba.njit(cache=True, nogil=True)
def part_update_serial(chain, blocks, constants, part_step, out):
    """One block-parallel (p)SGLD iteration on some blocks of a part, in turn (PARAFAC'18 eq. 6, 8-9).

    Block b updates A-block ``blocks.keys[b, 0]``, B-block ``keys[b, 1]`` and C-block ``keys[b, 2]`` from
    its own data, each factor block drawing its noise from its own stream; ``out[b]`` is the block's
    log-likelihood before the update, or after it when ``constants.evaluate`` is
    :data:`~sepsti.core.parallel.kernel_arguments.EVALUATE_AFTER_UPDATE`. The chain's gradient accumulators are
    left zero.
    """
    for block in range(blocks.starts.shape[0]):
        out[block] = _part_block(chain, blocks, block, constants, part_step)


@numba.njit(cache=True, nogil=True, parallel=True)
def part_update_parallel(chain, blocks, constants, part_step, out):
    """:func:`part_update_serial` with one thread per block (the part's blocks share no index range)."""
    for block in numba.prange(blocks.starts.shape[0]):
        out[block] = _part_block(chain, blocks, block, constants, part_step)
