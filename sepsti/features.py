"""STFT features of the speech pipeline, and the amplitude scale of the Poisson models.

Conventions
-----------
Signals are float arrays in [-1, 1) at :data:`SAMPLE_RATE`. Spectrograms are
``(n_bins, n_frames)`` with ``n_bins = N_FFT // 2 + 1 = 257``: a 512-point
Hamming window, hop 256 (50 % overlap), frames centred (librosa
``center=True``, zero padding). Each signal is first zero-padded at the end to
a multiple of the hop, so that every sample is covered by two full frames;
with this framing the clean training files sp01–sp20 of NOIZEUS give a
257 × 1661 matrix, the size the ICASSP'16 paper reports.

Magnitudes are scaled by :data:`AMPLITUDE_SCALE` (int16 full scale): the
Poisson models and the prior rate λ = 4e-4 of the paper are defined on that
scale.
"""

import numpy as np

__all__ = ["SAMPLE_RATE", "N_FFT", "HOP_LENGTH", "WINDOW", "AMPLITUDE_SCALE",
           "stft", "istft", "magnitude", "training_matrix"]

SAMPLE_RATE = 8000
N_FFT = 512
HOP_LENGTH = 256
WINDOW = "hamming"
AMPLITUDE_SCALE = 32768.0


def _pad_to_hop(y):
    remainder = len(y) % HOP_LENGTH
    return y if remainder == 0 else np.pad(y, (0, HOP_LENGTH - remainder))


def stft(y):
    """Complex STFT of a signal, on the amplitude scale.

    Parameters
    ----------
    y : ndarray, shape (n_samples,)
        Signal in [-1, 1).

    Returns
    -------
    ndarray of complex, shape (257, n_frames)
        ``n_frames = ceil(n_samples / 256) + 1``.
    """
    import librosa

    y = _pad_to_hop(np.asarray(y, dtype=np.float64))
    return librosa.stft(y * AMPLITUDE_SCALE, n_fft=N_FFT, hop_length=HOP_LENGTH, window=WINDOW,
                        center=True, pad_mode="constant")


def istft(spectrogram, length):
    """Inverse of :func:`stft`: a signal of ``length`` samples in [-1, 1) units.

    Parameters
    ----------
    spectrogram : ndarray of complex, shape (257, n_frames)
    length : int
        Number of samples of the original signal.

    Returns
    -------
    ndarray, shape (length,)
    """
    import librosa

    padded = int(np.ceil(length / HOP_LENGTH) * HOP_LENGTH)
    y = librosa.istft(spectrogram, n_fft=N_FFT, hop_length=HOP_LENGTH, window=WINDOW, center=True,
                      length=padded)
    return y[:length] / AMPLITUDE_SCALE


def magnitude(y):
    """STFT magnitude of a signal on the amplitude scale, shape (257, n_frames)."""
    return np.abs(stft(y))


def training_matrix(signals):
    """Concatenate the magnitudes of several signals along the frame axis.

    Parameters
    ----------
    signals : iterable of ndarray
        Signals in [-1, 1).

    Returns
    -------
    ndarray, shape (257, total_frames)
    """
    return np.concatenate([magnitude(y) for y in signals], axis=1)
