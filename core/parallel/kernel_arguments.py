"""What the compiled block kernels take: named groups of arrays and constants, and the evaluate modes.

The kernels (:mod:`sepsti.core.parallel._nmf_kernels`, :mod:`sepsti.core.parallel._parafac_kernels`)
are compiled by numba, which accepts named tuples of arrays and scalars as
arguments and reads their fields at no cost. Grouping what travels together
keeps the kernels' signatures short and the call sites free of long
positional lists. This module imports no numba, so the samplers can build
the groups without loading it.

Every group is flat (arrays and scalars, no nested tuples): a numba
``prange`` hands its loop body the fields of a tuple argument one by one,
but only one level deep.

Conventions
-----------
Arrays are C-contiguous. NMF's H is passed transposed (``Ht``, shape
(n_cols, rank)), so a column group of H is a contiguous run of rows. Noise
stream states are (groups, 2) uint64 arrays of :mod:`sepsti.core.parallel.noise`.
Evaluate modes are the integer constants below; the chain settings' ``evaluate``
spells the two that kept iterations record by name (:data:`EVALUATE_CODES`).
"""

from typing import NamedTuple

import numpy as np

from sepsti.core.checks import number_within
from sepsti.core.errors import ParameterError

__all__ = ["EVALUATE_AFTER_UPDATE", "EVALUATE_BEFORE_UPDATE", "EVALUATE_CODES", "EVALUATE_NONE", "NMFBlockLayout",
           "NMFChainArrays", "ParafacChainArrays", "PartStep", "StepConstants", "check_block_settings"]

#: Record no log-likelihood (burn-in iterations).
EVALUATE_NONE = 0
#: Record the part's log-likelihood at the position before the update (a by-product of the gradient).
EVALUATE_BEFORE_UPDATE = 1
#: Record it at the updated position (ICASSP'16 eq. 9; one more pass over the part).
EVALUATE_AFTER_UPDATE = 2

#: The evaluate modes of kept iterations by the names of the chain settings' ``evaluate``.
EVALUATE_CODES = {"before_update": EVALUATE_BEFORE_UPDATE, "after_update": EVALUATE_AFTER_UPDATE}

#: Settings of the generic chains that the block chains leave to the blocks or do not implement,
#: with the values that leave them off: the parts are the subsets, the step is (a/k)^b, the
#: integrator Euler-Maruyama and the trace the kernels' own.
_OFF_IN_BLOCK_CHAINS = {"subset_size": (None,), "step_floor": (None,), "step_scale": (None,),
                        "integrator": ("euler",), "control_variate": (False, None), "zero_variance": (False,)}


def check_block_settings(settings, evaluate_modes):
    """Raise ParameterError unless the block chains carry out ``settings`` as given.

    Parameters
    ----------
    settings : LangevinSettings
        :class:`sepsti.core.evidence.sti.LangevinSettings`; what the block chains do not
        implement is refused by name rather than ignored.
    evaluate_modes : tuple of str
        The ``evaluate`` values the calling chain records.
    """
    if settings.evaluate not in evaluate_modes:
        raise ParameterError(f"evaluate={settings.evaluate!r}: the block chain records "
                             f"{' or '.join(repr(mode) for mode in evaluate_modes)}")
    unsupported = [f"{name}={getattr(settings, name)!r}" for name, off in _OFF_IN_BLOCK_CHAINS.items()
                   if getattr(settings, name) not in off]
    if unsupported:
        raise ParameterError(f"{', '.join(unsupported)}: not available in the block chains (their parts are the "
                             "subsets, their step is (a/k)^b)")


class StepConstants(NamedTuple):
    """What stays fixed along a chain: the tempered (p)SGLD step's settings.

    Attributes
    ----------
    temperature : float
        t of the power posterior; at t = 0 no likelihood gradient is computed.
    rates : ndarray of float64, shape (num_factors,)
        Exponential prior rates, one per factor (W, H or A, B, C).
    preconditioned : bool
        pSGLD (True) or SGLD.
    alpha, sigma : float
        pSGLD's averaging weight and regulariser.
    evaluate : int
        The evaluate mode of kept iterations (``EVALUATE_*``).
    """

    temperature: float
    rates: np.ndarray
    preconditioned: bool
    alpha: float
    sigma: float
    evaluate: int

    @classmethod
    def of(cls, settings, *, temperature, prior_rates):
        """The constants of a chain run with ``settings`` (its sampler, alpha, sigma and evaluate).

        ``evaluate="full"`` records the before-update value, a by-product of the gradient: the
        chain scores its states on all the data itself. Raises ParameterError unless the
        temperature is in [0, 1].
        """
        temperature = number_within("temperature", temperature, 0.0, 1.0)
        evaluate = "before_update" if settings.evaluate == "full" else settings.evaluate
        return cls(temperature, np.ascontiguousarray(prior_rates, dtype=np.float64),
                   settings.sampler == "psgld", float(settings.alpha), float(settings.sigma), EVALUATE_CODES[evaluate])


class PartStep(NamedTuple):
    """What changes from one iteration to the next: the step size and the part's subsample scaling.

    Attributes
    ----------
    step : float
        Step size of the iteration.
    scale : float
        N / N_s of the iteration's part.
    num_entries : float
        N_s, the part's number of data entries (zeros included).
    """

    step: float
    scale: float
    num_entries: float


class NMFBlockLayout(NamedTuple):
    """How an NMF data matrix is cut into blocks and parts (from :class:`sepsti.core.parallel.schedule.BlockSchedule`).

    Attributes
    ----------
    row_edges : ndarray of int64, shape (b + 1,)
        Row groups held: group g is rows ``row_edges[g]:row_edges[g + 1]`` of the data passed
        (b = B in one process; a process of the distributed sampler holds fewer).
    col_edges : ndarray of int64, shape (B + 1,)
        Column groups.
    part_columns : ndarray of int64, shape (num_parts, b)
        The column group paired with each held row group in each part.
    part_sizes : ndarray of float64, shape (num_parts,)
        N_s of each part (over the whole data, held or not).
    size : float
        N, the number of entries of the whole data.
    log_factorial : ndarray of float64, shape (b, B)
        Sum of lgamma(x + 1) over each held block.
    """

    row_edges: np.ndarray
    col_edges: np.ndarray
    part_columns: np.ndarray
    part_sizes: np.ndarray
    size: float
    log_factorial: np.ndarray


class NMFChainArrays(NamedTuple):
    """The arrays an NMF block chain updates in place.

    Attributes
    ----------
    W : ndarray, shape (n_rows, rank)
    Ht : ndarray, shape (n_cols, rank)
        H transposed.
    v_W, v_Ht : ndarray
        pSGLD's squared-gradient averages, shaped like W and Ht.
    states_W, states_H : ndarray of uint64, shape (groups, 2)
        Noise streams of W's row groups and H's column groups.
    """

    W: np.ndarray
    Ht: np.ndarray
    v_W: np.ndarray
    v_Ht: np.ndarray
    states_W: np.ndarray
    states_H: np.ndarray


class ParafacChainArrays(NamedTuple):
    """The arrays a PARAFAC block chain updates in place (the fields of a ``ParafacBlockState``, flat).

    Attributes
    ----------
    A, B, C : ndarray of float64, shapes (I, R), (J, R), (K, R)
    v_A, v_B, v_C : ndarray of float64
        pSGLD's squared-gradient averages, shaped like the factors.
    gradient_A, gradient_B, gradient_C : ndarray of float64
        Zero accumulators of the factors' shapes for the non-zeros' gradient (left zero).
    states_A, states_B, states_C : ndarray of uint64, shape (B, 2)
        Noise streams of each factor's groups.
    """

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    v_A: np.ndarray
    v_B: np.ndarray
    v_C: np.ndarray
    gradient_A: np.ndarray
    gradient_B: np.ndarray
    gradient_C: np.ndarray
    states_A: np.ndarray
    states_B: np.ndarray
    states_C: np.ndarray
