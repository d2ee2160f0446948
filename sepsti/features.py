"""STFT features of the speech pipeline, and the amplitude scale of the Poisson models.

Conventions
-----------
Signals are float arrays in [-1, 1) at a framing's ``sample_rate``. Spectrograms are
``(n_bins, n_frames)`` with ``n_bins = n_fft // 2 + 1``: a periodic Hamming window of
``n_fft`` points, frames centred (librosa ``center=True``, zero padding), a hop
that divides ``n_fft``: half of it (50 % overlap) for a dictionary's training
frames, a quarter (75 % overlap, :func:`enhancement_framing`) when a signal is
enhanced. Each signal is first zero-padded at the end to a multiple of the hop,
so that every sample is covered by ``n_fft / hop`` full frames.

The framing is a property of the speech dictionary (:class:`Framing`, stored in
its file): :data:`NARROWBAND` is the 8 kHz one of the NOIZEUS dictionary (512
points, hop 256; the clean training files sp01–sp20 give a 257 × 1661 matrix,
the size the ICASSP'16 paper reports), and :func:`framing_for_rate` scales it
to another rate with the same durations (64 ms windows, 32 ms hop: 1024 points,
hop 512 at 16 kHz). Every function takes ``framing=`` and defaults to
:data:`NARROWBAND`; :data:`SAMPLE_RATE`, :data:`N_FFT`, :data:`HOP_LENGTH` and
:data:`N_BINS` are its values.

The transform is plain NumPy (``numpy.fft``) and matches ``librosa.stft`` /
``librosa.istft`` with the same settings to rounding error (tested); it avoids
importing librosa, which alone takes about a second, so that ``sepsti
enhance`` starts fast.

:func:`stft_chunks` and :class:`OverlapAdd` compute the same transforms on a
signal given block by block (frames in chunks of a fixed count), with the
same values as :func:`stft` / :func:`istft` on the whole signal, so long
signals never need to be held at once; they also take several channels at once
(``(n, channels)`` signals, ``(n_bins, n_frames, channels)`` spectrograms), whose
one magnitude for the models is :func:`channel_magnitude`.

Magnitudes are scaled by :data:`AMPLITUDE_SCALE` (int16 full scale): the
Poisson models and the prior rate λ = 4e-4 of the paper are defined on that
scale.
"""

from typing import NamedTuple

import numpy as np

from sepsti.core.checks import integer_at_least
from sepsti.core.errors import ParameterError

__all__ = ["Framing", "NARROWBAND", "DICTIONARY_RATES", "framing_for_rate", "validate_framing",
           "enhancement_framing", "SAMPLE_RATE", "N_FFT", "HOP_LENGTH", "WINDOW", "AMPLITUDE_SCALE", "SILENT_MAGNITUDE",
           "N_BINS",
           "window", "stft", "istft", "stft_chunks", "OverlapAdd", "num_frames", "magnitude", "channel_magnitude",
           "LEVEL_BAND_HZ", "LOUDEST_SHARE", "DIFFERENT_SOURCES_DB", "channel_level_spread", "in_context",
           "training_matrix"]


#: The rates (Hz) a dictionary may be trained at (``sepsti train --rate``) and the enhancer models.
DICTIONARY_RATES = (4000, 48000)


class Framing(NamedTuple):
    """The STFT of a speech dictionary: rate, window length and hop.

    Attributes
    ----------
    sample_rate : int
        Rate of the signals (Hz).
    n_fft : int
        Window length in samples (even).
    hop_length : int
        Hop in samples, a divisor of ``n_fft``: ``n_fft // 2`` for a dictionary's training frames,
        ``n_fft // 4`` when enhancing (:func:`enhancement_framing`).
    """

    sample_rate: int
    n_fft: int
    hop_length: int

    @property
    def n_bins(self):
        """Frequency bins, ``n_fft // 2 + 1``."""
        return self.n_fft // 2 + 1

    def frames(self, seconds):
        """Hops in ``seconds``, rounded, at least one."""
        return max(1, int(round(seconds * self.sample_rate / self.hop_length)))


#: The 8 kHz framing of the NOIZEUS dictionary and of the ICASSP'16 paper.
NARROWBAND = Framing(8000, 512, 256)
SAMPLE_RATE = NARROWBAND.sample_rate
N_FFT = NARROWBAND.n_fft
HOP_LENGTH = NARROWBAND.hop_length
N_BINS = NARROWBAND.n_bins
WINDOW = "hamming"
AMPLITUDE_SCALE = 32768.0
#: Magnitude below which an STFT bin counts as digital silence: on the :data:`AMPLITUDE_SCALE`,
#: a thousandth of one 16-bit quantisation step. Frames and bins of exact zeros (padding, muted
#: stretches) carry no information about the noise, and the noise estimators skip them.
SILENT_MAGNITUDE = 1e-3


def validate_framing(sample_rate, n_fft, hop_length, *, name="framing"):
    """Check an STFT framing and return it as a :class:`Framing`.

    Parameters
    ----------
    sample_rate, n_fft, hop_length : int
    name : str
        How to name the owner (a dictionary file) in messages.

    Returns
    -------
    Framing

    Raises
    ------
    ParameterError
        A non-positive value, a rate outside :data:`DICTIONARY_RATES`, an odd ``n_fft``, or a hop
        other than ``n_fft / 2``: a dictionary's frames come every half window (its noise model is
        learned on them, and the enhancer's frames, :func:`enhancement_framing`, are derived from them).
    """
    for field, value in (("sample_rate", sample_rate), ("n_fft", n_fft), ("hop_length", hop_length)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ParameterError(f"{name}: {field}={value!r} must be a positive integer")
    if not DICTIONARY_RATES[0] <= sample_rate <= DICTIONARY_RATES[1]:
        raise ParameterError(f"{name}: sample_rate={sample_rate}: expected {DICTIONARY_RATES[0]}.."
                             f"{DICTIONARY_RATES[1]} Hz (the rates a dictionary is trained at)")
    if n_fft < 4 or n_fft % 2 or hop_length * 2 != n_fft:
        raise ParameterError(f"{name}: n_fft={n_fft}, hop_length={hop_length}: expected an even n_fft and "
                             "hop_length = n_fft / 2 (50 % overlap)")
    return Framing(int(sample_rate), int(n_fft), int(hop_length))


def framing_for_rate(sample_rate):
    """The framing of :data:`NARROWBAND` scaled to ``sample_rate``: 64 ms windows, 32 ms hop.

    The hop is ``round(0.032 · sample_rate)`` samples (256 at 8 kHz, 512 at 16 kHz, 706 at
    22.05 kHz) and ``n_fft`` twice that.

    Raises
    ------
    ParameterError
        A rate below 1 kHz (windows of fewer than 64 samples).
    """
    if isinstance(sample_rate, (bool, np.bool_)) or not isinstance(sample_rate, (int, np.integer)) \
            or sample_rate < 1000:
        raise ParameterError(f"sample_rate={sample_rate!r}: expected an integer rate of at least 1000 Hz")
    hop = int(round(sample_rate * NARROWBAND.hop_length / NARROWBAND.sample_rate))
    return Framing(int(sample_rate), 2 * hop, hop)


def enhancement_framing(framing):
    """``framing`` with the hop the enhancer uses: a quarter of the window (75 % overlap).

    A dictionary's atoms are spectra of single windows, so they do not depend on the hop; with
    frames twice as dense as the dictionary's training frames, each bin's estimate is made twice
    as often and the overlap-add averages four estimates instead of two (on NOIZEUS +0.2 to
    +0.3 dB SDR at every SNR for the same EM work, docs/enhance.md). A window that four does not
    divide keeps the hop of half a window.

    Parameters
    ----------
    framing : Framing
        A dictionary's framing (:attr:`sepsti.dictionary.Dictionary.framing`).

    Returns
    -------
    Framing
    """
    parts = 4 if framing.n_fft % 4 == 0 else 2
    return Framing(framing.sample_rate, framing.n_fft, framing.n_fft // parts)


def window(framing=NARROWBAND):
    """The analysis and synthesis window: periodic Hamming of ``framing.n_fft`` points.

    Same values as ``scipy.signal.get_window("hamming", n_fft, fftbins=True)``.
    """
    n = np.arange(framing.n_fft)
    return 0.54 - 0.46 * np.cos(2.0 * np.pi * n / framing.n_fft)


def _pad_to_hop(y, hop_length=HOP_LENGTH):
    remainder = len(y) % hop_length
    return y if remainder == 0 else np.pad(y, (0, hop_length - remainder))


def stft(y, *, framing=NARROWBAND):
    """Complex STFT of a signal, on the amplitude scale.

    Parameters
    ----------
    y : ndarray, shape (n_samples,)
        Signal in [-1, 1) at ``framing.sample_rate``.
    framing : Framing

    Returns
    -------
    ndarray of complex128, shape (n_bins, n_frames)
        ``n_frames = ceil(n_samples / hop_length) + 1`` (257 bins at 8 kHz).

    Raises
    ------
    ParameterError
        If ``y`` is not 1-D (several channels: :func:`stft_chunks`).
    """
    n_fft, hop = framing.n_fft, framing.hop_length
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1:
        raise ParameterError(f"stft: y has shape {y.shape}; expected one channel, (samples,) (several channels: "
                             "stft_chunks)")
    y = _pad_to_hop(y, hop)
    padded = np.pad(y * AMPLITUDE_SCALE, n_fft // 2)
    frames = np.lib.stride_tricks.sliding_window_view(padded, n_fft)[::hop]
    return np.fft.rfft(frames * window(framing), axis=1).T


def _overlap_add(frames, hop_length):
    """Sum frames (n_frames, n_fft) placed every ``hop_length`` samples."""
    n_frames, n_fft = frames.shape
    chunks = n_fft // hop_length
    blocks = np.zeros((n_frames + chunks - 1, hop_length))
    for c in range(chunks):
        blocks[c:c + n_frames] += frames[:, c * hop_length:(c + 1) * hop_length]
    return blocks.reshape(-1)


def istft(spectrogram, length, *, framing=NARROWBAND):
    """Inverse of :func:`stft`: a signal of ``length`` samples in [-1, 1) units.

    Overlap-add of the windowed inverse frames, divided by the summed squared
    window (the least-squares inverse, as ``librosa.istft``).

    Parameters
    ----------
    spectrogram : ndarray of complex, shape (n_bins, n_frames)
    length : int
        Number of samples of the original signal.
    framing : Framing

    Returns
    -------
    ndarray, shape (length,)

    Raises
    ------
    ParameterError
        If ``spectrogram`` is not 2-D of ``framing``'s bins, or ``length`` is not an integer of at least 0.
    """
    spectrogram = np.asarray(spectrogram)
    if spectrogram.ndim != 2 or spectrogram.shape[0] != framing.n_bins:  # irfft cut or padded the frames
        raise ParameterError(f"istft: spectrogram has shape {spectrogram.shape}; expected ({framing.n_bins}, "
                             f"n_frames) for n_fft={framing.n_fft}")
    length = integer_at_least("length", length, 0)  # a negative one cut samples off the end
    win = window(framing)
    frames = np.fft.irfft(spectrogram.T, n=framing.n_fft, axis=1) * win
    y = _overlap_add(frames, framing.hop_length)
    envelope = _overlap_add(np.broadcast_to(win ** 2, frames.shape), framing.hop_length)
    nonzero = envelope > np.finfo(envelope.dtype).tiny
    y[nonzero] /= envelope[nonzero]
    y = y[framing.n_fft // 2:]
    if len(y) < length:
        y = np.pad(y, (0, length - len(y)))
    return y[:length] / AMPLITUDE_SCALE


def num_frames(num_samples, *, framing=NARROWBAND):
    """Number of STFT frames of a signal of ``num_samples`` samples: ``ceil(n / hop_length) + 1``."""
    return -(-int(num_samples) // framing.hop_length) + 1


def _frames_spectrum(padded, count, framing):
    n_fft, hop = framing.n_fft, framing.hop_length
    frames = np.lib.stride_tricks.sliding_window_view(padded[:(count - 1) * hop + n_fft], n_fft, axis=0)[::hop]
    return np.moveaxis(np.fft.rfft(frames * window(framing), axis=-1), -1, 0)


def stft_chunks(blocks, chunk_frames, *, framing=NARROWBAND):
    """:func:`stft` of a signal given block by block, in chunks of frames.

    Parameters
    ----------
    blocks : iterable of ndarray
        The signal's consecutive pieces, in [-1, 1) (any sizes): shape ``(n,)``, or ``(n, channels)``
        for several channels framed alike.
    chunk_frames : int
        Frames per chunk; every chunk but the last has exactly this many.
    framing : Framing

    Yields
    ------
    ndarray of complex128, shape (n_bins, m), or (n_bins, m, channels)
        Consecutive columns of ``stft(np.concatenate(blocks))`` (of each channel's), same values.
    """
    chunk_frames = int(chunk_frames)
    n_fft, hop = framing.n_fft, framing.hop_length
    pending = None  # the centring pad, then scaled samples not yet fully framed
    total = 0
    for block in blocks:
        block = np.asarray(block, dtype=np.float64)
        if pending is None:
            pending = np.zeros((n_fft // 2, *block.shape[1:]))
        total += len(block)
        pending = np.concatenate([pending, block * AMPLITUDE_SCALE])
        while len(pending) >= (chunk_frames - 1) * hop + n_fft:
            yield _frames_spectrum(pending, chunk_frames, framing)
            pending = pending[chunk_frames * hop:]
    if pending is None:
        pending = np.zeros(n_fft // 2)
    pending = np.concatenate([pending, np.zeros(((-total) % hop + n_fft // 2, *pending.shape[1:]))])
    remaining = (len(pending) - n_fft) // hop + 1
    while remaining > 0:
        count = min(chunk_frames, remaining)
        yield _frames_spectrum(pending, count, framing)
        pending = pending[count * hop:]
        remaining -= count


class OverlapAdd:
    """:func:`istft` of a spectrogram given in chunks of frames, producing samples as they complete.

    ``push`` each chunk in order, then ``finish(length)``; the samples returned, concatenated
    and cut to ``length``, are ``istft(whole_spectrogram, length)`` with the same values. Chunks
    of shape ``(n_bins, m, channels)`` (:func:`stft_chunks` of several channels) give samples of
    shape ``(n, channels)``.

    Parameters
    ----------
    framing : Framing
    """

    def __init__(self, framing=NARROWBAND):
        win = window(framing)
        hop = framing.hop_length
        self._framing = framing
        self._window = win
        self._parts = framing.n_fft // hop  # blocks of one hop in a frame
        self._squared = (win ** 2).reshape(self._parts, hop)
        # the blocks some frame still has to reach: summed windowed frames and summed squared windows
        self._sums = np.zeros((self._parts - 1, hop))
        self._weights = np.zeros((self._parts - 1, hop))
        self._skip = framing.n_fft // 2 // hop  # blocks in the centring pad
        self._produced = 0
        self._channels = None  # the chunks' shape after their first two axes, known at the first push

    def push(self, spectrogram):
        """Add frames (complex, shape (n_bins, m[, channels])); return the samples they complete, in [-1, 1) units."""
        hop, parts = self._framing.hop_length, self._parts
        spectrogram = np.asarray(spectrogram)
        if self._channels is None:
            self._channels = spectrogram.shape[2:]
            self._sums = np.zeros((parts - 1, hop, *self._channels))
        frames = np.fft.irfft(np.moveaxis(spectrogram, 0, -1), n=self._framing.n_fft, axis=-1) * self._window
        count = len(frames)
        if count == 0:
            return np.zeros((0, *self._channels))
        sums, weights = np.zeros((count + parts - 1, hop, *self._channels)), np.zeros((count + parts - 1, hop))
        sums[:parts - 1] = self._sums
        weights[:parts - 1] = self._weights
        blocks = np.moveaxis(frames, -1, 1).reshape(count, parts, hop, *self._channels)
        for part in range(parts):
            sums[part:part + count] += blocks[:, part]
            weights[part:part + count] += self._squared[part]
        self._sums, self._weights = sums[count:], weights[count:]
        return self._release(sums[:count], weights[:count])

    def _release(self, sums, weights):
        skipped = min(self._skip, len(sums))
        self._skip -= skipped
        sums, weights = sums[skipped:], weights[skipped:].reshape(-1, weights.shape[1], *[1] * (sums.ndim - 2))
        # divided by the summed squared window where frames reach, as istft does
        out = np.divide(sums, weights, out=sums.copy(), where=weights > np.finfo(weights.dtype).tiny)
        out = out.reshape(-1, *sums.shape[2:]) / AMPLITUDE_SCALE
        self._produced += len(out)
        return out

    def finish(self, length):
        """The samples the last frames reach, then zeros to ``length`` (istft's padding); cut the rest yourself."""
        channels = self._sums.shape[2:]
        rest = self._release(self._sums, self._weights)
        hop = self._framing.hop_length
        self._sums, self._weights = np.zeros((0, hop, *channels)), np.zeros((0, hop))
        return np.concatenate([rest, np.zeros((max(0, int(length) - self._produced), *channels))])


def magnitude(y, *, framing=NARROWBAND):
    """STFT magnitude of a signal on the amplitude scale, shape (n_bins, n_frames)."""
    return np.abs(stft(y, framing=framing))


def channel_magnitude(S):
    """The magnitude of a spectrogram, of one channel or the root mean square over several.

    The power mean of the channels, not the magnitude of their sum: it is each channel's own
    level where the channels hold the same sound or independent noises, and channels in
    opposite phase do not cancel.

    Parameters
    ----------
    S : ndarray of complex, shape (n_bins, n_frames) or (n_bins, n_frames, channels)

    Returns
    -------
    ndarray, shape (n_bins, n_frames)
    """
    if S.ndim == 2:
        return np.abs(S)
    return np.sqrt(np.mean(S.real ** 2 + S.imag ** 2, axis=-1))


#: Band (Hz) and share of the loudest frames over which :func:`channel_level_spread` compares channels.
LEVEL_BAND_HZ = (100.0, 4000.0)
LOUDEST_SHARE = 0.3
#: A larger spread (dB) says the channels hold different sources (docs/enhance.md, "Channels": one talker
#: on two microphones 0.1–1.3 dB in white noise from −5 to 30 dB SNR, two talkers a channel each 6.4 dB and
#: more even when each leaks into the other's channel 6 dB down).
DIFFERENT_SOURCES_DB = 6.0


def channel_level_spread(spectra, framing):
    """How much the level difference between a signal's channels varies where it is loud, in dB.

    Each frame's power in :data:`LEVEL_BAND_HZ` per channel; over the :data:`LOUDEST_SHARE` of the
    frames loudest in any channel, the range from the 10th to the 90th percentile of each pair of
    channels' level difference; the largest over the pairs. Channels of one scene (microphones on the
    same talker) keep their level difference as the sound comes and goes; channels of different talkers
    (a lavalier microphone each) swing from one to the other as they take turns.

    Parameters
    ----------
    spectra : iterable of ndarray of complex, shape (n_bins, m, channels)
        The signal's STFT in chunks (:func:`stft_chunks`).
    framing : Framing

    Returns
    -------
    float
        0 for identical channels; infinite where a channel is silent in loud frames of another.
    """
    frequencies = np.arange(framing.n_bins) * framing.sample_rate / framing.n_fft
    band = (frequencies >= LEVEL_BAND_HZ[0]) & (frequencies <= LEVEL_BAND_HZ[1])
    power = np.concatenate([np.sum(S.real[band] ** 2 + S.imag[band] ** 2, axis=0) for S in spectra])
    loudest = power.max(axis=1)
    if not np.any(loudest):
        return 0.0
    power = power[(loudest > 0) & (loudest >= np.quantile(loudest, 1.0 - LOUDEST_SHARE))]
    with np.errstate(divide="ignore"):
        level = 10.0 * np.log10(power)
    spread = 0.0
    for first in range(power.shape[1]):
        for second in range(first + 1, power.shape[1]):
            difference = level[:, first] - level[:, second]
            if not np.all(np.isfinite(difference)):
                return np.inf
            low, high = np.quantile(difference, [0.1, 0.9])
            spread = max(spread, float(high - low))
    return spread


def in_context(M, context):
    """Each frame stacked with its ``context`` neighbours on each side, frame by frame.

    Parameters
    ----------
    M : ndarray, shape (n_bins, m + 2 * context)
        ``m`` consecutive frames with ``context`` frames before the first and after the last.
    context : int

    Returns
    -------
    ndarray, shape (n_bins * (2 * context + 1), m)
        Column ``j`` holds frames ``j .. j + 2 * context`` of ``M``, the first one in the first rows.
    """
    context = integer_at_least("context", context, 0)  # -1 met a bare 'need at least one array to concatenate'
    m = M.shape[1] - 2 * context
    return M if context == 0 else np.concatenate([M[:, k:k + m] for k in range(2 * context + 1)], axis=0)


def training_matrix(signals, *, framing=NARROWBAND, context=0):
    """Concatenate the magnitudes of several signals along the frame axis.

    Parameters
    ----------
    signals : iterable of ndarray
        Signals in [-1, 1) at ``framing.sample_rate``.
    framing : Framing
    context : int
        Frames on each side of each training frame, at the enhancer's hop
        (:func:`enhancement_framing`), stacked with it (:func:`in_context`; a signal's first and
        last frames stand for its missing neighbours). The centre frames are ``framing``'s
        either way.

    Returns
    -------
    ndarray, shape (n_bins * (2 * context + 1), total_frames)
    """
    if integer_at_least("context", context, 0) == 0:
        return _frames_of(signals, [magnitude(y, framing=framing) for y in signals])
    dense = enhancement_framing(framing)
    step = framing.hop_length // dense.hop_length
    stacked = []
    for y in signals:
        M = magnitude(_pad_to_hop(y, framing.hop_length), framing=dense)  # centres on framing's frames
        M = np.pad(M, ((0, 0), (context, context)), mode="edge")
        stacked.append(in_context(M, context)[:, ::step])
    return _frames_of(signals, stacked)


def _frames_of(signals, parts):
    """The matrices of ``parts`` side by side, unless ``signals`` held none (NumPy's 'need at least one array')."""
    if not parts:
        raise ParameterError(f"training_matrix: signals ({type(signals).__name__}) holds no signal")
    return np.concatenate(parts, axis=1)
