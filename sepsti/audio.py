"""Audio input and output for the application, on top of :func:`corpora.audio.read_audio`.

Conventions
-----------
Signals are 1-D float64 arrays in [-1, 1) units. Reading (validation of the
file, mono downmix) is :func:`corpora.audio.read_audio`; this module adds
resampling to the dictionary's rate and back (``scipy.signal.resample_poly``
with the exact rational ratio of the two rates), the check that a signal holds
at least one STFT frame, and atomic writing (16-bit PCM for ``.wav``; for
other extensions the format libsndfile associates with them).

Only NumPy is imported at module level: SciPy's signal package (≈0.6 s to
import) is loaded only when a file's rate differs from the dictionary's.
"""

from math import gcd
from pathlib import Path
from typing import NamedTuple

import numpy as np

from core.errors import ParameterError

__all__ = ["Recording", "load_audio", "resample", "validate_frames", "output_format", "write_audio"]

# Extensions whose libsndfile format name differs from the upper-cased extension.
_FORMAT_ALIASES = {"AIF": "AIFF", "OGA": "OGG", "OPUS": "OGG", "SND": "AU"}


class Recording(NamedTuple):
    """A signal resampled for processing, and what is needed to give it back.

    Attributes
    ----------
    samples : ndarray, shape (n,)
        Mono signal at the processing rate.
    sample_rate : int
        The file's own rate (Hz).
    length : int
        The file's own number of samples (per channel).
    """

    samples: np.ndarray
    sample_rate: int
    length: int


def resample(y, orig_sr, target_sr, *, length=None):
    """Resample by the exact rational ratio ``target_sr / orig_sr`` (polyphase filter).

    Parameters
    ----------
    y : ndarray, shape (n,)
    orig_sr, target_sr : int
        Rates in Hz.
    length : int, optional
        Trim or zero-pad the result to this many samples (for the way back,
        so that an output has its input's length exactly).

    Returns
    -------
    ndarray, shape (length,) or (ceil(n * target_sr / orig_sr),)
    """
    orig_sr, target_sr = int(orig_sr), int(target_sr)
    if orig_sr <= 0 or target_sr <= 0:
        raise ParameterError(f"sample rate: {orig_sr} -> {target_sr} Hz; rates must be positive")
    y = np.asarray(y, dtype=np.float64)
    if orig_sr != target_sr and len(y):
        from scipy.signal import resample_poly

        common = gcd(orig_sr, target_sr)
        y = resample_poly(y, target_sr // common, orig_sr // common)
    if length is not None:
        y = y[:length] if len(y) >= length else np.pad(y, (0, length - len(y)))
    return y


def validate_frames(y, sample_rate, *, name="audio"):
    """Require at least one full STFT frame (:data:`sepsti.features.N_FFT` samples).

    Parameters
    ----------
    y : ndarray, shape (n,)
        Signal at the processing rate ``sample_rate``.
    sample_rate : int
    name : str
        How to name the signal in the message (usually its path).

    Returns
    -------
    ndarray
        ``y`` itself.

    Raises
    ------
    ParameterError
        If ``len(y) < N_FFT``.
    """
    from sepsti.features import N_FFT

    if len(y) < N_FFT:
        need_ms = 1000.0 * N_FFT / sample_rate
        have_ms = 1000.0 * len(y) / sample_rate
        raise ParameterError(f"{name}: audio shorter than one frame ({have_ms:.1f} ms; at least "
                             f"{need_ms:.0f} ms = {N_FFT} samples at {sample_rate} Hz are needed)")
    return y


def load_audio(path, *, sample_rate):
    """Read a sound file, downmix it to mono and resample it to ``sample_rate``.

    Parameters
    ----------
    path : str or Path
        Anything libsndfile reads.
    sample_rate : int
        Processing rate (the dictionary's).

    Returns
    -------
    Recording

    Raises
    ------
    ParameterError
        If the file is missing, a directory, empty, not audio, truncated,
        holds no samples or non-finite ones, or is shorter than one frame.
    """
    from corpora.audio import read_audio

    y, file_rate = read_audio(path)
    samples = validate_frames(resample(y, file_rate, sample_rate), sample_rate, name=str(path))
    return Recording(samples, int(file_rate), len(y))


def output_format(path):
    """The libsndfile format and subtype an output path gets from its extension.

    ``.wav`` (and other PCM containers) get 16-bit PCM; other formats their
    libsndfile default subtype.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    (str, str)
        Format and subtype names as :mod:`soundfile` spells them.

    Raises
    ------
    ParameterError
        If the extension is not a format libsndfile can write.
    """
    import soundfile

    path = Path(path)
    extension = path.suffix[1:].upper()
    fmt = _FORMAT_ALIASES.get(extension, extension)
    formats = soundfile.available_formats()
    if not extension or fmt not in formats:
        raise ParameterError(f"{path}: cannot write audio with extension {path.suffix or '(none)'!r}; "
                             "use .wav, .flac, .ogg or another extension libsndfile knows")
    if extension == "OPUS":
        subtype = "OPUS"
    elif soundfile.check_format(fmt, "PCM_16"):
        subtype = "PCM_16"
    else:
        subtype = soundfile.default_subtype(fmt)
    if subtype is None or not soundfile.check_format(fmt, subtype):
        raise ParameterError(f"{path}: libsndfile cannot write {fmt} files here; use .wav")
    return fmt, subtype


def write_audio(path, y, sample_rate):
    """Write a mono signal atomically (temporary file beside ``path``, then rename).

    Parameters
    ----------
    path : str or Path
        Output file; the format follows the extension (see :func:`output_format`).
    y : ndarray, shape (n,)
        Signal in [-1, 1); integer formats clip it to that range.
    sample_rate : int
    """
    import soundfile

    from core.io import atomic_path

    fmt, subtype = output_format(path)
    y = np.asarray(y, dtype=np.float64)
    if subtype.startswith("PCM") or subtype in ("ULAW", "ALAW"):
        # libsndfile wraps rather than saturates out-of-range values on integer formats.
        y = np.clip(y, -1.0, 1.0)
    with atomic_path(path) as tmp:
        soundfile.write(tmp, y, int(sample_rate), subtype=subtype, format=fmt)
