"""Separation quality of enhanced speech: BSS_EVAL v3 SDR / SIR / SAR (mir_eval).

Conventions
-----------
Signals are 1-D float arrays of equal length at one sample rate. The mixture is
``noisy = clean + noise``; the references are ``[clean, noisy − clean]`` and the estimates
``[speech, noisy − speech]``, with the fixed assignment (``compute_permutation=False``: the
first estimate is scored against the first reference). Figures are in dB.

With the fixed assignment the speech source's figures depend only on the references and on
the speech estimate: they are computed for that source alone, with mir_eval's own
decomposition (512-tap time-invariant distortion filters), which gives the numbers of
``mir_eval.separation.bss_eval_sources(..., compute_permutation=False)[:, 0]`` at half the
cost and without its refusal of silent estimates.

This is the only module that touches ``mir_eval.separation`` (deprecated since mir_eval 0.8,
removed in 0.9: the dependency is pinned below 0.9 and its FutureWarning filtered here).
"""

import warnings

import numpy as np

from core.errors import ParameterError

__all__ = ["bss_eval", "FILTER_LENGTH"]

#: Length of the distortion filters allowed by BSS_EVAL v3 (mir_eval's value).
FILTER_LENGTH = 512


def _separation():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        import mir_eval.separation as separation
    return separation


def _validate_signal(value, name, length=None):
    array = np.asarray(value, dtype=np.float64)
    if array.ndim != 1:
        raise ParameterError(f"{name}: expected a 1-D signal, got shape {array.shape}")
    if array.size == 0:
        raise ParameterError(f"{name}: the signal is empty")
    if length is not None and array.size != length:
        raise ParameterError(f"{name}: length {array.size} differs from the clean signal's {length}; "
                             "signals must be sample-aligned and of equal length")
    if not np.all(np.isfinite(array)):
        raise ParameterError(f"{name}: contains NaN or Inf samples")
    return array


def bss_eval(clean, noisy, speech):
    """SDR, SIR and SAR of a speech estimate, BSS_EVAL v3 with the fixed assignment.

    Parameters
    ----------
    clean : ndarray, shape (n_samples,)
        Clean speech (first reference).
    noisy : ndarray, shape (n_samples,)
        The mixture; ``noisy − clean`` is the second reference.
    speech : ndarray, shape (n_samples,)
        The speech estimate (``noisy`` itself scores the unprocessed input).

    Returns
    -------
    dict
        ``{"sdr": float, "sir": float, "sar": float}`` in dB for the speech source.
        A silent speech estimate or a silent clean signal leaves the ratios undefined (0/0):
        all three are NaN, with a warning. A silent noise reference (``noisy == clean``)
        is left out of the decomposition, so SIR is +inf. The unprocessed mixture as the
        estimate (``speech`` equal to ``noisy``) has no artifacts by construction: its SAR is
        +inf (the decomposition would return ~250 dB of rounding noise).

    Raises
    ------
    ParameterError
        Not 1-D, empty, unequal lengths, NaN or Inf samples.
    """
    clean = _validate_signal(clean, "clean")
    noisy = _validate_signal(noisy, "noisy", clean.size)
    speech = _validate_signal(speech, "speech", clean.size)
    if not np.any(clean):
        warnings.warn("bss_eval: the clean reference is silent; SDR/SIR/SAR are undefined (NaN)",
                      RuntimeWarning, stacklevel=2)
        return {"sdr": float("nan"), "sir": float("nan"), "sar": float("nan")}
    if not np.any(speech):
        warnings.warn("bss_eval: the speech estimate is silent; SDR/SIR/SAR are undefined (NaN)",
                      RuntimeWarning, stacklevel=2)
        return {"sdr": float("nan"), "sir": float("nan"), "sar": float("nan")}
    noise = noisy - clean
    references = np.stack([clean, noise]) if np.any(noise) else clean[None, :]
    separation = _separation()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        parts = separation._bss_decomp_mtifilt(references, speech, 0, FILTER_LENGTH)
        sdr, sir, sar = separation._bss_source_crit(*parts)
    if np.array_equal(speech, noisy):
        sar = np.inf
    return {"sdr": float(sdr), "sir": float(sir), "sar": float(sar)}
