"""Scores of enhanced speech: BSS_EVAL v3 SDR / SIR / SAR (mir_eval), STOI (pystoi) and PESQ (pesq).

Conventions
-----------
Signals are 1-D float arrays of equal length at one sample rate. The mixture is
``noisy = clean + noise``; the references are ``[clean, noisy − clean]`` and the estimates
``[speech, noisy − speech]``, with the fixed assignment (``compute_permutation=False``: the
first estimate is scored against the first reference). BSS_EVAL figures are in dB.

With the fixed assignment the speech source's figures depend only on the references and on
the speech estimate: they are computed for that source alone, with mir_eval's own
decomposition (512-tap time-invariant distortion filters), which gives the numbers of
``mir_eval.separation.bss_eval_sources(..., compute_permutation=False)[:, 0]`` at half the
cost and without its refusal of silent estimates.

STOI (Taal et al. 2011, or the extended STOI of Jensen & Taal 2016) and PESQ (ITU-T P.862,
reported as MOS-LQO: P.862.1 in narrow band, P.862.2 in wide band) score the speech estimate
against the clean reference alone. pystoi resamples to its own 10 kHz; PESQ is computed in
wide band at 16 kHz for signals sampled at 16 kHz or more and in narrow band at 8 kHz below,
after resampling to that rate (:data:`PESQ_RATES`, :func:`pesq_mode`). Both libraries are
optional (``pip install 'sepsti[eval]'``) and imported only by the functions that call them.

The band above telephone speech is where BSS_EVAL is blind: its distortion filters absorb a
cut at 4 kHz (a clean reference low-passed there still scores 25–30 dB SDR). Two levels show
it instead: the share of the energy above :data:`HIGH_BAND_HZ` against the clean speech's
(:func:`high_band_level`), and the energy there in the frames where the clean speech's energy
lies mostly above it — fricatives (:func:`fricative_level`).

Where STOI is lost shows band by band: :func:`stoi_bands` gives its intermediate intelligibility in each
of its 15 third-octave bands (their mean is STOI), and :func:`stoi_band_levels` the estimate's level against
the clean speech's in each band, where the clean speech is strongest (speech removed shows there) and
where it is weakest (noise left shows there).

Every score of a silent clean reference or a silent estimate is undefined: NaN, with a
warning; so are a STOI with less active speech than its 30-frame (384 ms) analysis window,
a PESQ that the library refuses (shorter than 1/4 s, no utterance found) or that would overrun
its tables (longer than :data:`PESQ_MAX_SECONDS`), and a high-band level of a clean reference
with next to nothing above the cutoff (:data:`HIGH_BAND_FLOOR`).

This is the only module that touches ``mir_eval.separation`` (deprecated since mir_eval 0.8,
removed in 0.9: the dependency is pinned below 0.9 and its FutureWarning filtered here),
``pystoi`` and ``pesq``.
"""

import contextlib
import warnings

import numpy as np

from sepsti.core.checks import positive_number, real_array
from sepsti.core.errors import ParameterError

__all__ = ["bss_eval", "stoi", "stoi_bands", "stoi_band_levels", "pesq", "pesq_mode", "high_band_share",
           "high_band_level", "fricative_level", "unavailable_scores", "warnings_once", "FILTER_LENGTH", "PESQ_RATES",
           "PESQ_MAX_SECONDS", "SCORE_PACKAGES", "HIGH_BAND_HZ", "HIGH_BAND_FLOOR", "BAND_LEVEL_SHARE"]

#: Length of the distortion filters allowed by BSS_EVAL v3 (mir_eval's value).
FILTER_LENGTH = 512

#: Rate (Hz) at which each PESQ mode is computed: narrow band (P.862) and wide band (P.862.2).
PESQ_RATES = {"nb": 8000, "wb": 16000}

#: Longest signal (s) :func:`pesq` scores. The pesq library keeps at most 50 utterances in fixed tables and
#: writes past them on more (ludlows/PESQ #18): untrustworthy scores, then a segmentation fault. Speech gives
#: about one utterance per 2 s (50 from about 97 s of NOIZEUS, 122 s of LibriSpeech); docs/metrics.md.
PESQ_MAX_SECONDS = 40.0

#: Lower edge (Hz) of the band :func:`high_band_level` and :func:`fricative_level` compare: what
#: telephone-band processing removes, where /s/, /ʃ/ and /f/ have most of their energy.
HIGH_BAND_HZ = 4000.0

#: The least share of the clean speech's energy above the cutoff (−50 dB) for which :func:`high_band_level` is
#: defined: real wideband speech has 1e-4 to 0.4 (about 1 % typical), 8 kHz speech upsampled about 1e-7.
HIGH_BAND_FLOOR = 1e-5

#: Share of a band's frames, its strongest and its weakest in the clean speech, that :func:`stoi_band_levels` compares.
BAND_LEVEL_SHARE = 0.3

#: The optional package each perceptual score needs (the ``eval`` extra installs both).
SCORE_PACKAGES = {"stoi": "pystoi", "pesq": "pesq"}


def _separation():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        import mir_eval.separation as separation
    return separation


def _validate_signal(value, name, length=None):
    array = real_array(name, value)
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
        +inf (the decomposition would return ~250 dB of rounding noise), and so is its SDR when
        the mixture is noiseless. A singular projection (fewer samples than the 512-tap filter, or
        references that are not independent) gives NaN with a warning. The scores do not depend on
        the signals' common scale.

    Raises
    ------
    ParameterError
        Not 1-D, empty, unequal lengths, NaN or Inf samples, complex or non-numeric values.
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
    # at 1e-300 the Gram matrix underflowed to a singular one
    scaled = _near_one(references, speech)
    separation = _separation()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        try:
            parts = separation._bss_decomp_mtifilt(*scaled, 0, FILTER_LENGTH)
        except (np.linalg.LinAlgError, AttributeError) as error:
            # mir_eval's fallback for a singular system names np.linalg.linalg, which NumPy 2 removed
            if isinstance(error, AttributeError) and "linalg" not in str(error):
                raise
            warnings.warn("bss_eval: the signals' projection is singular (fewer samples than the "
                          f"{FILTER_LENGTH}-tap filter has, or references that are not independent); SDR/SIR/SAR "
                          "are undefined (NaN)", RuntimeWarning, stacklevel=2)
            return {"sdr": float("nan"), "sir": float("nan"), "sar": float("nan")}
        sdr, sir, sar = separation._bss_source_crit(*parts)
    if np.array_equal(speech, noisy):
        sar = np.inf
        if not np.any(noise):  # a noiseless mixture scored as it is: the clean speech itself
            sdr = np.inf
    return {"sdr": float(sdr), "sir": float(sir), "sar": float(sar)}


def _near_one(*signals):
    """The signals times one power of two that brings their largest sample near 1.

    The scores are ratios, free of the signals' common scale, but their libraries' sums underflow or overflow
    at extremes and add absolute epsilons; a power of two changes no sample's mantissa, and ``ldexp``, unlike a
    factor ``2**-e``, holds subnormal peaks too.
    """
    exponent = int(np.frexp(max(float(np.max(np.abs(signal))) for signal in signals))[1])
    return tuple(np.ldexp(signal, -exponent) for signal in signals)


def _validate_rate(sample_rate):
    from sepsti.audio import whole_rate

    rate = whole_rate(sample_rate, "sample_rate")
    if rate <= 0:
        raise ParameterError(f"sample_rate={sample_rate!r}: expected a positive number of Hz")
    return rate


def _silence(clean, speech, name):
    """The reason a score of ``speech`` against ``clean`` is undefined because of silence, or None."""
    if not np.any(clean):
        return f"{name}: the clean reference is silent"
    if not np.any(speech):
        return f"{name}: the speech estimate is silent"
    return None


@contextlib.contextmanager
def warnings_once(name):
    """Warnings raised inside the block, given once each when it ends, prefixed with ``name``.

    For several signals scored against one clean reference (the input, enhancers' outputs): a score
    that the reference leaves undefined warns once for the file, naming it, not once per signal.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for category, message in dict.fromkeys((w.category, str(w.message)) for w in caught):
        warnings.warn(f"{name}: {message}", category, stacklevel=3)


def _undefined(reason, score):
    warnings.warn(f"{reason}; {score} is undefined (NaN)", RuntimeWarning, stacklevel=3)
    return float("nan")


#: Why STOI is undefined with fewer than its 30 active frames of 12.8 ms.
_TOO_LITTLE_SPEECH = "less than 384 ms of active clean speech (30 frames)"


def _too_short_for_stoi(signal, sample_rate):
    """Whether ``signal`` lasts less than 384 ms: fewer than STOI's 30 frames whatever it holds (pystoi fails on
    less than one frame instead of saying so)."""
    return signal.size < 0.384 * sample_rate


def stoi(clean, speech, sample_rate, *, extended=False):
    """Short-time objective intelligibility of a speech estimate (pystoi).

    Parameters
    ----------
    clean : ndarray, shape (n_samples,)
        Clean speech (the reference).
    speech : ndarray, shape (n_samples,)
        The speech estimate (the noisy mixture scores the unprocessed input).
    sample_rate : int
        Rate of both signals in Hz; pystoi resamples them to 10 kHz.
    extended : bool, default False
        The extended STOI (Jensen & Taal 2016) instead of the classic one (Taal et al. 2011).

    Returns
    -------
    float
        The score, about 0 to 1 (higher is more intelligible). NaN, with a warning, for a
        silent clean reference or estimate, or when fewer than 30 frames of 25.6 ms
        (384 ms) of the clean speech lie within 40 dB of its loudest frame.

    Raises
    ------
    ParameterError
        Not 1-D, empty, unequal lengths, NaN or Inf samples, a rate that is not a positive integer.
    ImportError
        pystoi is not installed.
    """
    if not isinstance(extended, (bool, np.bool_)):  # "no" ran the extended measure
        raise ParameterError(f"extended={extended!r}: expected True or False")
    clean = _validate_signal(clean, "clean")
    speech = _validate_signal(speech, "speech", clean.size)
    sample_rate = _validate_rate(sample_rate)
    score = "ESTOI" if extended else "STOI"
    reason = _silence(clean, speech, "stoi")
    if reason is None and _too_short_for_stoi(clean, sample_rate):
        reason = f"stoi: {_TOO_LITTLE_SPEECH}"
    if reason is not None:
        return _undefined(reason, score)
    from pystoi import stoi as pystoi_stoi

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = pystoi_stoi(*_near_one(clean, speech), sample_rate, extended=extended)  # its epsilon is absolute
    # pystoi returns 1e-5 with this warning when the active speech is shorter than its window
    if any("Not enough STFT frames" in str(warning.message) for warning in caught):
        return _undefined(f"stoi: {_TOO_LITTLE_SPEECH}", score)
    return float(value)


def _third_octave_envelopes(clean, speech, sample_rate):
    """STOI's third-octave band envelopes of both signals, its silent frames removed.

    Returns
    -------
    (clean, speech) or None
        Band magnitudes of pystoi's 25.6 ms frames at 10 kHz, ndarrays of shape (15, n_frames); None with fewer
        frames than STOI's 30.
    """
    from pystoi import utils
    from pystoi.stoi import DYN_RANGE, FS, N, N_FRAME, NFFT, OBM

    if _too_short_for_stoi(clean, sample_rate):
        return None
    x = utils.resample_oct(clean, FS, sample_rate)
    y = utils.resample_oct(speech, FS, sample_rate)
    x, y = utils.remove_silent_frames(x, y, DYN_RANGE, N_FRAME, N_FRAME // 2)
    if len(range(0, len(x) - N_FRAME, N_FRAME // 2)) < N:  # the frames of pystoi's stft
        return None
    bands = [np.sqrt(OBM @ np.abs(utils.stft(z, N_FRAME, NFFT, overlap=2).T) ** 2) for z in (x, y)]
    return bands[0], bands[1]


def _band_inputs(clean, speech, sample_rate, name):
    """``(clean, speech, centres, None)`` of :func:`_third_octave_envelopes`, or ``(None, None, centres, reason)``
    where STOI is undefined."""
    clean = _validate_signal(clean, "clean")
    speech = _validate_signal(speech, "speech", clean.size)
    sample_rate = _validate_rate(sample_rate)
    from pystoi.stoi import CF

    centres = np.asarray(CF)
    reason = _silence(clean, speech, name)
    if reason is None:
        envelopes = _third_octave_envelopes(*_near_one(clean, speech), sample_rate)
        if envelopes is not None:
            return *envelopes, centres, None
        reason = f"{name}: {_TOO_LITTLE_SPEECH}"
    return None, None, centres, reason


def stoi_bands(clean, speech, sample_rate):
    """STOI's intermediate intelligibility in each of its third-octave bands (their mean is :func:`stoi`).

    Each band's value is the correlation of the clean and the estimated envelope over 384 ms,
    the estimate normalised and clipped as STOI does, averaged over the segments.

    Returns
    -------
    values : ndarray, shape (15,)
        NaN in every band, with a warning, where :func:`stoi` is undefined.
    centres : ndarray, shape (15,)
        The bands' centre frequencies, 150 Hz to 3.8 kHz.

    Raises
    ------
    ParameterError
        As :func:`stoi`.
    ImportError
        pystoi is not installed.
    """
    x, y, centres, reason = _band_inputs(clean, speech, sample_rate, "stoi_bands")
    if reason is not None:
        return np.full(centres.size, _undefined(reason, "STOI per band")), centres
    from pystoi.stoi import BETA, N

    # segments of N frames ending at every frame: (n_segments, bands, N)
    x = np.lib.stride_tricks.sliding_window_view(x, N, axis=1).transpose(1, 0, 2)
    y = np.lib.stride_tricks.sliding_window_view(y, N, axis=1).transpose(1, 0, 2)
    y = y * np.linalg.norm(x, axis=2, keepdims=True) / (np.linalg.norm(y, axis=2, keepdims=True) + np.finfo(float).eps)
    y = np.minimum(y, x * (1 + 10 ** (-BETA / 20)))
    x, y = x - x.mean(axis=2, keepdims=True), y - y.mean(axis=2, keepdims=True)
    correlation = np.sum(x * y, axis=2) / ((np.linalg.norm(x, axis=2) + np.finfo(float).eps)
                                           * (np.linalg.norm(y, axis=2) + np.finfo(float).eps))
    return correlation.mean(axis=0), centres


def stoi_band_levels(clean, speech, sample_rate, *, share=BAND_LEVEL_SHARE):
    """The estimate's level against the clean speech's in each STOI band, where the clean speech is strong and weak.

    In each third-octave band of :func:`stoi_bands`, over the clean speech's active frames: the
    estimate's mean band magnitude over the clean's, in dB, in the ``share`` of the frames where
    the clean speech is strongest in that band (below 0 dB: speech removed) and in the ``share``
    where it is weakest (above 0 dB: noise left where the talker is quiet in that band).

    Returns
    -------
    strong, weak : ndarray, shape (15,)
        NaN in every band, with a warning, where :func:`stoi` is undefined.
    centres : ndarray, shape (15,)

    Raises
    ------
    ParameterError
        As :func:`stoi`, or ``share`` outside (0, 0.5].
    ImportError
        pystoi is not installed.
    """
    if not 0 < share <= 0.5:
        raise ParameterError(f"share: expected a number in (0, 0.5], got {share!r}")
    x, y, centres, reason = _band_inputs(clean, speech, sample_rate, "stoi_band_levels")
    if reason is not None:
        missing = np.full(centres.size, _undefined(reason, "the band levels"))
        return missing, missing.copy(), centres
    count = max(1, int(round(share * x.shape[1])))
    order = np.argsort(x, axis=1)
    levels = []
    for frames in (order[:, -count:], order[:, :count]):
        ratio = (np.take_along_axis(y, frames, axis=1).sum(axis=1)
                 / np.maximum(np.take_along_axis(x, frames, axis=1).sum(axis=1), np.finfo(float).tiny))
        levels.append(20 * np.log10(np.maximum(ratio, np.finfo(float).tiny)))
    return levels[0], levels[1], centres


def pesq_mode(sample_rate):
    """The PESQ mode of audio at ``sample_rate`` Hz: ``"wb"`` from 16 kHz up, ``"nb"`` below."""
    return "wb" if _validate_rate(sample_rate) >= PESQ_RATES["wb"] else "nb"


def pesq(clean, speech, sample_rate, *, mode=None):
    """Perceptual evaluation of speech quality of a speech estimate (pesq), as MOS-LQO.

    Parameters
    ----------
    clean : ndarray, shape (n_samples,)
        Clean speech (the reference).
    speech : ndarray, shape (n_samples,)
        The speech estimate (the noisy mixture scores the unprocessed input).
    sample_rate : int
        Rate of both signals in Hz.
    mode : {"nb", "wb"}, optional
        Narrow band (P.862 with the P.862.1 mapping) at 8 kHz or wide band (P.862.2) at
        16 kHz. Default: :func:`pesq_mode` of ``sample_rate``. Both signals are resampled to
        the mode's rate (:data:`PESQ_RATES`) with :func:`sepsti.audio.resample` when
        ``sample_rate`` differs from it.

    Returns
    -------
    float
        MOS-LQO, about 1 to 4.5 (narrow band) or 4.64 (wide band); the level of the signals
        does not matter (PESQ aligns levels and delays itself). NaN, with a warning, for a
        silent clean reference or estimate, signals longer than :data:`PESQ_MAX_SECONDS`
        (not passed to the library, which would overrun its tables), or when the library
        refuses the pair (shorter than 1/4 s at the mode's rate, no utterance detected, one
        signal vanishing beside the other).

    Raises
    ------
    ParameterError
        Not 1-D, empty, unequal lengths, NaN or Inf samples, a rate that is not a positive
        integer, an unknown mode.
    ImportError
        pesq is not installed.
    """
    clean = _validate_signal(clean, "clean")
    speech = _validate_signal(speech, "speech", clean.size)
    sample_rate = _validate_rate(sample_rate)
    if mode is None:
        mode = pesq_mode(sample_rate)
    if mode not in PESQ_RATES:
        raise ParameterError(f"mode={mode!r}: expected one of {', '.join(map(repr, PESQ_RATES))}")
    reason = _silence(clean, speech, "pesq")
    if reason is None and clean.size > PESQ_MAX_SECONDS * sample_rate:
        reason = (f"pesq: {clean.size / sample_rate:.1f} s, longer than the {PESQ_MAX_SECONDS:g} s the pesq library "
                  "scores safely (it overruns its table of 50 utterances)")
    if reason is not None:
        return _undefined(reason, "PESQ")
    from pesq import PesqError
    from pesq import pesq as pesq_score

    rate = PESQ_RATES[mode]
    if sample_rate != rate:
        from sepsti.audio import resample

        clean, speech = resample(clean, sample_rate, rate), resample(speech, sample_rate, rate)
    try:
        return float(pesq_score(rate, clean, speech, mode))
    except PesqError as error:
        message = error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else str(error)
        return _undefined(f"pesq: {message}", "PESQ")
    except ValueError as error:
        # the C code turns a signal that vanishes in float32 beside the other into NaNs
        return _undefined(f"pesq: failed on these signals ({error})", "PESQ")


def high_band_share(y, sample_rate, *, cutoff=HIGH_BAND_HZ):
    """The fraction of the energy of ``y`` above ``cutoff`` Hz (0 for a silent signal)."""
    cutoff = positive_number("cutoff", cutoff)
    y = _validate_signal(y, "y")
    power = np.abs(np.fft.rfft(y)) ** 2
    total = power.sum()
    above = power[np.fft.rfftfreq(y.size, 1 / _validate_rate(sample_rate)) > cutoff].sum()
    return float(above / total) if total > 0 else 0.0


def _no_band_above(sample_rate, cutoff, name):
    """The reason a score of the band above ``cutoff`` is undefined at ``sample_rate``, or None."""
    if _validate_rate(sample_rate) <= 2 * cutoff:
        return f"{name}: at {sample_rate} Hz there is no band above {cutoff:g} Hz"
    return None


def high_band_level(clean, speech, sample_rate, *, cutoff=HIGH_BAND_HZ):
    """The share of ``speech``'s energy above ``cutoff`` Hz against the clean speech's share, in dB.

    0 dB keeps the clean speech's balance; telephone-band output is tens of dB below, noise left
    above the cutoff shows as a positive level.

    Returns
    -------
    float
        ``10 log10(share(speech) / share(clean))``; NaN, with a warning, for a rate with no band
        above ``cutoff`` (at most ``2 · cutoff``), a silent signal, a clean reference whose share
        above ``cutoff`` is below :data:`HIGH_BAND_FLOOR` (band-limited speech: the ratio would be
        one of resampling leakage), or an estimate with no energy above ``cutoff``.

    Raises
    ------
    ParameterError
        Not 1-D, empty, unequal lengths, NaN or Inf samples, a rate that is not a positive integer.
    """
    cutoff = positive_number("cutoff", cutoff)
    clean = _validate_signal(clean, "clean")
    speech = _validate_signal(speech, "speech", clean.size)
    reason = _no_band_above(sample_rate, cutoff, "high_band_level") or _silence(clean, speech, "high_band_level")
    if reason is not None:
        return _undefined(reason, "the high-band level")
    reference = high_band_share(clean, sample_rate, cutoff=cutoff)
    if reference < HIGH_BAND_FLOOR:
        return _undefined(f"high_band_level: the clean speech has {reference:.2g} of its energy above {cutoff:g} Hz, "
                          f"below the floor of {HIGH_BAND_FLOOR:g} (band-limited speech)", "the high-band level")
    estimate = high_band_share(speech, sample_rate, cutoff=cutoff)
    if estimate <= 0:
        return _undefined("high_band_level: no energy above the cutoff", "the high-band level")
    return float(10 * np.log10(estimate / reference))


def fricative_level(clean, speech, sample_rate, *, cutoff=HIGH_BAND_HZ):
    """Energy above ``cutoff`` Hz of ``speech`` against the clean speech's in its fricative frames, in dB.

    The frames are the clean speech's 32 ms frames within 40 dB of its loudest whose energy lies
    mostly (over half) above ``cutoff`` — /s/, /ʃ/, /f/ and their kind; an enhancer that deletes
    them scores far below 0 dB.

    Returns
    -------
    level : float
        ``10 log10`` of the ratio of the two energies summed over those frames; NaN, with a
        warning, when the rate has no band above ``cutoff``, a signal is silent, or the clean speech
        has no such frame.
    frames : int
        How many frames were compared.
    """
    clean = _validate_signal(clean, "clean")
    speech = _validate_signal(speech, "speech", clean.size)
    reason = _no_band_above(sample_rate, cutoff, "fricative_level") or _silence(clean, speech, "fricative_level")
    if reason is not None:
        return _undefined(reason, "the fricative level"), 0
    frame = int(0.032 * sample_rate)
    count = clean.size // frame
    if count == 0:
        return _undefined("fricative_level: shorter than one 32 ms frame", "the fricative level"), 0
    spectra = [np.abs(np.fft.rfft(z[:count * frame].reshape(count, frame), axis=1)) ** 2 for z in (clean, speech)]
    high = np.fft.rfftfreq(frame, 1 / sample_rate) > cutoff
    total = spectra[0].sum(axis=1)
    chosen = (spectra[0][:, high].sum(axis=1) > 0.5 * total) & (total > total.max() * 1e-4)
    if not chosen.any():
        return _undefined("fricative_level: the clean speech has no frame mostly above the cutoff",
                          "the fricative level"), 0
    ratio = spectra[1][chosen][:, high].sum() / max(spectra[0][chosen][:, high].sum(), 1e-30)
    return float(10 * np.log10(max(ratio, 1e-30))), int(chosen.sum())


def unavailable_scores():
    """The perceptual scores whose package cannot be imported.

    Returns
    -------
    dict
        ``{score: package}``, a subset of :data:`SCORE_PACKAGES` (empty when both are installed).
    """
    import importlib

    missing = {}
    for score, package in SCORE_PACKAGES.items():
        try:
            importlib.import_module(package)
        except ImportError:
            missing[score] = package
    return missing
