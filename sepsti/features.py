"""STFT features of the speech pipeline, and the amplitude scale of the Poisson models.

Conventions
-----------
Signals are float arrays in [-1, 1) at :data:`SAMPLE_RATE`. Spectrograms are
``(n_bins, n_frames)`` with ``n_bins = N_FFT // 2 + 1 = 257``: a 512-point
periodic Hamming window, hop 256 (50 % overlap), frames centred (librosa
``center=True``, zero padding). Each signal is first zero-padded at the end to
a multiple of the hop, so that every sample is covered by two full frames;
with this framing the clean training files sp01–sp20 of NOIZEUS give a
257 × 1661 matrix, the size the ICASSP'16 paper reports.

The transform is plain NumPy (``numpy.fft``) and matches ``librosa.stft`` /
``librosa.istft`` with the same settings to rounding error (tested); it avoids
importing librosa, which alone takes about a second, so that ``sepsti
enhance`` starts fast.

:func:`stft_chunks` and :class:`OverlapAdd` compute the same transforms on a
signal given block by block (frames in chunks of a fixed count), with the
same values as :func:`stft` / :func:`istft` on the whole signal, so long
signals never need to be held at once.

Magnitudes are scaled by :data:`AMPLITUDE_SCALE` (int16 full scale): the
Poisson models and the prior rate λ = 4e-4 of the paper are defined on that
scale.
"""

import numpy as np

__all__ = ["SAMPLE_RATE", "N_FFT", "HOP_LENGTH", "WINDOW", "AMPLITUDE_SCALE", "N_BINS",
           "window", "stft", "istft", "stft_chunks", "OverlapAdd", "num_frames", "magnitude", "training_matrix"]

SAMPLE_RATE = 8000
N_FFT = 512
HOP_LENGTH = 256
WINDOW = "hamming"
AMPLITUDE_SCALE = 32768.0
N_BINS = N_FFT // 2 + 1


def window():
    """The analysis and synthesis window: periodic Hamming of :data:`N_FFT` points.

    Same values as ``scipy.signal.get_window("hamming", N_FFT, fftbins=True)``.
    """
    n = np.arange(N_FFT)
    return 0.54 - 0.46 * np.cos(2.0 * np.pi * n / N_FFT)


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
    ndarray of complex128, shape (257, n_frames)
        ``n_frames = ceil(n_samples / 256) + 1``.
    """
    y = _pad_to_hop(np.asarray(y, dtype=np.float64))
    padded = np.pad(y * AMPLITUDE_SCALE, N_FFT // 2)
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP_LENGTH]
    return np.fft.rfft(frames * window(), axis=1).T


def _overlap_add(frames):
    """Sum frames (n_frames, N_FFT) placed every HOP_LENGTH samples."""
    n_frames = frames.shape[0]
    chunks = N_FFT // HOP_LENGTH
    blocks = np.zeros((n_frames + chunks - 1, HOP_LENGTH))
    for c in range(chunks):
        blocks[c:c + n_frames] += frames[:, c * HOP_LENGTH:(c + 1) * HOP_LENGTH]
    return blocks.reshape(-1)


def istft(spectrogram, length):
    """Inverse of :func:`stft`: a signal of ``length`` samples in [-1, 1) units.

    Overlap-add of the windowed inverse frames, divided by the summed squared
    window (the least-squares inverse, as ``librosa.istft``).

    Parameters
    ----------
    spectrogram : ndarray of complex, shape (257, n_frames)
    length : int
        Number of samples of the original signal.

    Returns
    -------
    ndarray, shape (length,)
    """
    spectrogram = np.asarray(spectrogram)
    win = window()
    frames = np.fft.irfft(spectrogram.T, n=N_FFT, axis=1) * win
    y = _overlap_add(frames)
    envelope = _overlap_add(np.broadcast_to(win ** 2, frames.shape))
    nonzero = envelope > np.finfo(envelope.dtype).tiny
    y[nonzero] /= envelope[nonzero]
    y = y[N_FFT // 2:]
    if len(y) < length:
        y = np.pad(y, (0, length - len(y)))
    return y[:length] / AMPLITUDE_SCALE


def num_frames(num_samples):
    """Number of STFT frames of a signal of ``num_samples`` samples: ``ceil(n / 256) + 1``."""
    return -(-int(num_samples) // HOP_LENGTH) + 1


def _frames_spectrum(padded, count):
    frames = np.lib.stride_tricks.sliding_window_view(padded[:(count - 1) * HOP_LENGTH + N_FFT], N_FFT)[::HOP_LENGTH]
    return np.fft.rfft(frames * window(), axis=1).T


def stft_chunks(blocks, chunk_frames):
    """:func:`stft` of a signal given block by block, in chunks of frames.

    Parameters
    ----------
    blocks : iterable of ndarray
        The signal's consecutive pieces, in [-1, 1) (any sizes).
    chunk_frames : int
        Frames per chunk; every chunk but the last has exactly this many.

    Yields
    ------
    ndarray of complex128, shape (257, m)
        Consecutive columns of ``stft(np.concatenate(blocks))``, same values.
    """
    chunk_frames = int(chunk_frames)
    pending = np.zeros(N_FFT // 2)  # the centring pad, then scaled samples not yet fully framed
    total = 0
    for block in blocks:
        block = np.asarray(block, dtype=np.float64)
        total += len(block)
        pending = np.concatenate([pending, block * AMPLITUDE_SCALE])
        while len(pending) >= (chunk_frames - 1) * HOP_LENGTH + N_FFT:
            yield _frames_spectrum(pending, chunk_frames)
            pending = pending[chunk_frames * HOP_LENGTH:]
    pending = np.concatenate([pending, np.zeros((-total) % HOP_LENGTH + N_FFT // 2)])
    remaining = (len(pending) - N_FFT) // HOP_LENGTH + 1
    while remaining > 0:
        count = min(chunk_frames, remaining)
        yield _frames_spectrum(pending, count)
        pending = pending[count * HOP_LENGTH:]
        remaining -= count


class OverlapAdd:
    """:func:`istft` of a spectrogram given in chunks of frames, producing samples as they complete.

    ``push`` each chunk in order, then ``finish(length)``; the samples returned, concatenated
    and cut to ``length``, are ``istft(whole_spectrogram, length)`` with the same values.
    """

    def __init__(self):
        win = window()
        self._window = win
        squared = win ** 2
        # the summed squared window where two frames overlap, as istft computes it
        self._envelope = (np.zeros(HOP_LENGTH) + squared[:HOP_LENGTH]) + squared[HOP_LENGTH:]
        self._tail = None
        self._produced = 0

    def push(self, spectrogram):
        """Add frames (complex, shape (257, m)); return the samples they complete, in [-1, 1) units."""
        frames = np.fft.irfft(np.asarray(spectrogram).T, n=N_FFT, axis=1) * self._window
        if len(frames) == 0:
            return np.zeros(0)
        firsts = frames[:, :HOP_LENGTH]
        seconds = frames[:-1, HOP_LENGTH:]
        if self._tail is None:  # the first frame's first half lies in the centring pad
            firsts = firsts[1:]
        else:
            seconds = np.concatenate([self._tail[None, :], seconds])
        self._tail = frames[-1, HOP_LENGTH:].copy()
        out = ((firsts + seconds) / self._envelope).reshape(-1) / AMPLITUDE_SCALE
        self._produced += len(out)
        return out

    def finish(self, length):
        """Zeros that pad the samples produced to ``length`` (istft's padding); cut the rest yourself."""
        return np.zeros(max(0, int(length) - self._produced))


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
