"""Audio input and output for the application, on top of :func:`sepsti.corpora.audio.read_audio`.

Conventions
-----------
Signals are 1-D float64 arrays in [-1, 1) units, or ``(n, channels)`` where a
file's channels are kept. Reading (validation of the file, mono downmix) is
:func:`sepsti.corpora.audio.read_audio`; this module adds
resampling to the dictionary's rate and back (``scipy.signal.resample_poly``
with the exact rational ratio of the two rates), the check that a signal holds
at least one STFT frame, and atomic writing (the input's sample format where the
output's format holds it, else 16-bit PCM for ``.wav`` and for other extensions
the subtype libsndfile associates with them; a format that cannot hold the rate or the
channels is refused before anything is written).

Long files are handled in blocks: :class:`Resampler` resamples a signal pushed
block by block with the result of ``resample_poly`` on the whole signal (to
rounding), :func:`inspect_input` checks a file and :func:`input_blocks` reads it
at the processing rate without holding it, and :func:`open_output` writes an
output block by block to a temporary file that is renamed at the end.

The resampler's filter and sums are ``resample_poly``'s, computed in NumPy (tested against SciPy:
the same sums in the same order, bit-identical where NumPy's ``exp`` rounds as libm's, a few
roundings apart on CPUs with AVX-512, whose vectorised ``exp`` moves the Kaiser window's last bits):
importing SciPy's signal package takes 0.6–1.7 s on the machines measured, longer than enhancing a
3 s file.
"""

import contextlib
import numbers
import os
import shutil
from math import gcd
from pathlib import Path
from typing import NamedTuple

import numpy as np

from sepsti.core.checks import integer_at_least
from sepsti.core.errors import ParameterError

__all__ = ["Recording", "AudioInput", "Resampler", "MIN_SAMPLE_RATE", "MAX_SAMPLE_RATE", "MAX_RATIO_TERM", "MAX_PEAK",
           "MAX_CHANNELS", "FEW_CHANNELS", "load_audio", "resample", "check_layout", "validate_frames",
           "validate_sample_rate", "whole_rate", "inspect_input", "input_blocks", "output_format", "open_output",
           "write_audio"]

#: Input rates accepted for enhancement (Hz). Below 4 kHz a file holds no speech band worth
#: enhancing; above 384 kHz no audio interface records. Bounding the rate bounds the
#: resampling factor, i.e. how much work a small file can ask for.
MIN_SAMPLE_RATE = 4000
MAX_SAMPLE_RATE = 384000
#: Largest term of the reduced ratio target/orig: the polyphase filter has 20 × that many taps.
MAX_RATIO_TERM = 50000
#: Samples per block when files are read or resampled in pieces.
BLOCK_SAMPLES = 1 << 16
#: The largest sample accepted (float files; 180 dB above full scale): the squared magnitudes of
#: larger ones leave the range of the float32 the enhancer computes in.
MAX_PEAK = 1e9
#: The most channels a signal may have: libsndfile's limit, so no file has more.
MAX_CHANNELS = 1024
#: The most channels a signal shorter than its channel count may have (a few samples of 7.1 sound, say); above
#: it, fewer samples than channels reads as a (channels, n) array given the wrong way round.
FEW_CHANNELS = 8

# Extensions whose libsndfile format name differs from the upper-cased extension.
_FORMAT_ALIASES = {"AIF": "AIFF", "OGA": "OGG", "OPUS": "OGG", "SND": "AU"}
# Input sample formats an output keeps where its format holds them: samples, not codecs (libsndfile
# claims WAV holds MP3 and ADPCM streams, but cannot write them there).
_SAMPLE_FORMATS = frozenset({"PCM_S8", "PCM_U8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE", "ULAW", "ALAW"})
# What libsndfile 1.2 writes but does not read back as written (tried at 4-384 kHz, 1-1024 channels, odd lengths).
# Formats left out: SD2 keeps its header in a resource fork the file loses; SDS loses samples (all of a file of
# one packet or less, 40 16-bit samples; the last of 22529); XI holds no rate (every file reads as 44100 Hz).
_NOT_WRITTEN = {"SD2": "its header goes to a resource fork, which the file loses",
                "SDS": "libsndfile drops samples from them",
                "XI": "it holds no sample rate: every file reads as 44100 Hz",
                "RAW": "headerless samples: the rate, channels and sample format are lost, and it cannot be read "
                       "back without them"}
# Sample formats not kept in some formats: AIFF and VOC files of one byte per sample read back a sample more at
# an odd length (VOC's 8-bit ones also hold the rate coarsely), PAF's 24-bit ones another length (22528 samples
# of 22529, 20 of 11). These get 16-bit samples, which hold 8-bit, μ-law and A-law ones exactly.
_NOT_KEPT = {"AIFF": {"PCM_S8", "PCM_U8", "ULAW", "ALAW"}, "VOC": {"PCM_U8", "ULAW", "ALAW"}, "PAF": {"PCM_24"}}
# The most channels of formats that hold fewer than libsndfile's MAX_CHANNELS.
_MAX_CHANNELS = {"AVR": 2, "FLAC": 8, "HTK": 1, "IRCAM": 256, "MP3": 2, "MPC2K": 2, "OGG": 255, "SVX": 1, "VOC": 2,
                 "WVE": 1}
_MP3_RATES = (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000)
_OPUS_RATES = (8000, 12000, 16000, 24000, 48000)


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


class Resampler:
    """Resample a signal given block by block, as ``scipy.signal.resample_poly`` does the whole.

    The ratio is ``target_sr / orig_sr`` reduced to ``up / down``; the filter is
    ``resample_poly``'s (Kaiser window β = 5, ``20 · max(up, down) + 1`` taps, zero padding
    at both ends). An output sample depends on a bounded stretch of input, so only that
    stretch is kept between blocks; the samples returned, concatenated, equal
    ``resample_poly`` on the whole signal to rounding. Blocks are ``(n,)``, or ``(n, channels)``
    for several channels resampled alike (every block of one signal the same way).

    Parameters
    ----------
    orig_sr, target_sr : int
        Rates in Hz (whole numbers; a float such as 16000.0 is taken as the int).
    num_samples : int
        Length of the whole input (the output has ``ceil(num_samples · up / down)`` samples).

    Raises
    ------
    ParameterError
        A rate that is not a positive whole number, or blocks that are clearly channels first
        (:func:`check_layout`).
    """

    def __init__(self, orig_sr, target_sr, num_samples):
        orig_sr, target_sr = whole_rate(orig_sr, "orig_sr"), whole_rate(target_sr, "target_sr")
        if orig_sr <= 0 or target_sr <= 0:
            raise ParameterError(f"sample rate: {orig_sr} -> {target_sr} Hz; rates must be positive")
        common = gcd(orig_sr, target_sr)
        self.up, self.down = target_sr // common, orig_sr // common
        self.num_samples = int(num_samples)
        total = self.num_samples * self.up
        self.num_output = total // self.down + bool(total % self.down)
        self._identity = self.up == self.down == 1
        self._next = 0          # next output sample to produce
        self._received = 0      # input samples pushed so far
        self._start = 0         # index of the first input sample kept in the buffer
        self._buffer = np.zeros(0)
        self._channels = ()     # the blocks' shape after their first axis
        if not self._identity:
            max_rate = max(self.up, self.down)
            half_len = 10 * max_rate
            h = _lowpass(2 * half_len + 1, 1.0 / max_rate) * self.up
            pre_pad = self.down - half_len % self.down
            self._remove = (half_len + pre_pad) // self.down
            self._filter = np.concatenate([np.zeros(pre_pad), h])

    def _first_input(self, output):
        """Index of the first input sample that output sample ``output`` depends on (>= 0)."""
        m = output + self._remove
        return max(0, -(-(m * self.down - len(self._filter) + 1) // self.up))

    def push(self, block):
        """Add input samples; return the output samples they complete."""
        block = np.asarray(block, dtype=np.float64)
        check_layout(block.shape, self.num_samples, name="resampler")
        self._channels = block.shape[1:]
        if self._received + len(block) > self.num_samples:
            raise ParameterError(f"resampler: more than the announced {self.num_samples} samples pushed")
        self._received += len(block)
        if self._identity:
            self._next += len(block)
            return block.copy()
        self._buffer = np.concatenate([self._buffer, block]) if len(self._buffer) else block
        if self._received == self.num_samples:
            stop = self.num_output
        else:  # outputs whose inputs have all arrived
            m = -(-self._received * self.up // self.down) - 1
            stop = min(self.num_output, m + 1 - self._remove)
        return self._produce(stop)

    def _produce(self, stop):
        if stop <= self._next:
            return np.zeros((0, *self._channels))
        # a stretch that starts at a multiple of ``down`` keeps every output's phase,
        # so each output is the same sum of the same products as on the whole signal.
        first = self._first_input(self._next) // self.down * self.down
        first = max(first, self._start)
        offset = first * self.up // self.down - self._remove
        out = _polyphase(self._filter, self._buffer[first - self._start:], self.up, self.down,
                         self._next - offset, stop - offset)
        if len(out) < stop - self._next:  # past the end of the signal: zeros, as resample_poly's padding
            out = np.pad(out, [(0, stop - self._next - len(out))] + [(0, 0)] * len(self._channels))
        self._next = stop
        keep = min(self._first_input(stop) // self.down * self.down, self._received)
        if keep > self._start:
            self._buffer = self._buffer[keep - self._start:]
            self._start = keep
        return out

    def finish(self):
        """Return the remaining output samples; every input sample must have been pushed."""
        if self._received != self.num_samples:
            raise ParameterError(f"resampler: {self._received} of {self.num_samples} samples pushed")
        if self._identity:
            return np.zeros((0, *self._channels))
        return self._produce(self.num_output)


def _lowpass(num_taps, cutoff, beta=5.0):
    """``scipy.signal.firwin(num_taps, cutoff, window=("kaiser", beta))``: a windowed sinc of gain 1 at 0 Hz."""
    m = np.arange(num_taps) - 0.5 * (num_taps - 1)
    h = cutoff * np.sinc(cutoff * m) * np.kaiser(num_taps, beta)
    return h / np.sum(h)


def _polyphase(h, x, up, down, start, stop):
    """Outputs ``start:stop`` of ``scipy.signal.upfirdn(h, x, up, down, axis=0)`` (fewer past its end).

    Output n is ``Σ_j h[p + j·up] x[b − j]`` with ``n·down = b·up + p``; the outputs every ``up``-th
    share the phase p, and their b step by ``down``, so each phase is one product of strided windows
    of ``x`` with its taps.
    """
    stop = min(stop, ((len(x) - 1) * up + len(h) - 1) // down + 1)
    out = np.empty((max(stop - start, 0), *x.shape[1:]))
    taps = -(-len(h) // up)
    phases = np.concatenate([h, np.zeros(taps * up - len(h))]).reshape(taps, up).T[:, ::-1]
    padded = np.pad(x, [(taps - 1, taps)] + [(0, 0)] * (x.ndim - 1))
    windows = np.lib.stride_tricks.sliding_window_view(padded, taps, axis=0)  # row b ends at x[b]
    # the taps reversed (a negative stride) keep NumPy's matmul off BLAS, in its plain loop that sums the
    # products oldest input first, as upfirdn does: a contiguous copy would change the last bits
    for first in range(start, min(start + up, stop)):
        b, p = divmod(first * down, up)
        out[first - start::up] = windows[b::down][:len(range(first, stop, up))] @ phases[p]
    return out


def resample(y, orig_sr, target_sr, *, length=None):
    """Resample by the exact rational ratio ``target_sr / orig_sr`` (polyphase filter).

    Parameters
    ----------
    y : ndarray, shape (n,) or (n, channels)
    orig_sr, target_sr : int
        Rates in Hz.
    length : int, optional
        Trim or zero-pad the result to this many samples (for the way back,
        so that an output has its input's length exactly).

    Returns
    -------
    ndarray, shape (m,) or (m, channels)
        ``m`` is ``length``, or ``ceil(n * target_sr / orig_sr)``.

    Raises
    ------
    ParameterError
        As :class:`Resampler`: a rate that is not a positive whole number, or ``y`` clearly channels first; a
        ``length`` that is not an integer of at least 0.
    """
    y = np.asarray(y, dtype=np.float64)
    if length is not None:  # a negative one cut samples off the end
        length = integer_at_least("length", length, 0)
    resampler = Resampler(orig_sr, target_sr, len(y))
    out = np.concatenate([resampler.push(y), resampler.finish()])
    if length is not None:
        out = out[:length] if len(out) >= length else np.pad(out, [(0, length - len(out))] + [(0, 0)] * (out.ndim - 1))
    return out


def check_layout(shape, length=None, *, name="signal"):
    """Refuse a signal that is not ``(n,)`` or ``(n, channels)``, or is clearly channels first.

    Parameters
    ----------
    shape : tuple of int
        The signal's, or one block's of it.
    length : int, optional
        The whole signal's samples, when known: a signal of more channels than samples is refused.
    name : str
        How to name the signal in the message.

    Raises
    ------
    ParameterError
        More than two axes, more than :data:`MAX_CHANNELS` channels, or more than :data:`FEW_CHANNELS`
        channels and more channels than ``length``.
    """
    shape = tuple(shape)
    if len(shape) not in (1, 2):
        raise ParameterError(f"{name}: shape {shape}; expected (samples,) or (samples, channels)")
    channels = shape[1] if len(shape) == 2 else 1
    if channels > MAX_CHANNELS or (length is not None and 0 < length < channels and channels > FEW_CHANNELS):
        raise ParameterError(f"{name}: shape {shape} reads as {channels} channels of {shape[0]} samples (at most "
                             f"{MAX_CHANNELS}, and above {FEW_CHANNELS} no more than samples); signals are "
                             "(samples, channels): transpose it")


def whole_rate(rate, name):
    """``rate`` as an int: a whole number of Hz (an integral float such as 16000.0, or a 0-d array, too), not a bool
    or a string."""
    if isinstance(rate, np.ndarray) and rate.ndim == 0:
        rate = rate.item()
    whole = isinstance(rate, numbers.Integral) or isinstance(rate, numbers.Real) and float(rate).is_integer()
    if isinstance(rate, (bool, np.bool_)) or not whole:
        raise ParameterError(f"{name}: sample rate {rate!r} is not a whole number of Hz")
    return int(rate)


def validate_sample_rate(sample_rate, target_sr, *, name="audio"):
    """Refuse rates that would make resampling to ``target_sr`` unreasonably costly.

    Parameters
    ----------
    sample_rate : int
        A file's rate (Hz): a whole number (an integral float such as 16000.0 is taken as the int).
    target_sr : int
        The processing rate.
    name : str
        How to name the file in the message.

    Returns
    -------
    int

    Raises
    ------
    ParameterError
        Not a whole number of Hz (a bool or a string is not one), outside [:data:`MIN_SAMPLE_RATE`,
        :data:`MAX_SAMPLE_RATE`], or a ratio whose reduced terms exceed :data:`MAX_RATIO_TERM`
        (a filter of millions of taps).
    """
    sample_rate = whole_rate(sample_rate, name)
    if not MIN_SAMPLE_RATE <= sample_rate <= MAX_SAMPLE_RATE:
        raise ParameterError(f"{name}: sample rate {sample_rate} Hz is outside "
                             f"{MIN_SAMPLE_RATE}..{MAX_SAMPLE_RATE} Hz; "
                             "check the file's header or convert it to a standard rate")
    target_sr = whole_rate(target_sr, "target_sr")
    common = gcd(sample_rate, target_sr)
    if max(sample_rate, target_sr) // common > MAX_RATIO_TERM:
        raise ParameterError(f"{name}: sample rate {sample_rate} Hz has no short ratio to {target_sr} Hz "
                             f"({target_sr // common}/{sample_rate // common}); convert the file to a "
                             "standard rate such as 8000, 16000, 44100 or 48000 Hz first")
    return sample_rate


def validate_frames(y, sample_rate, *, name="audio", n_fft=None):
    """Require at least one full STFT frame (``n_fft`` samples).

    Parameters
    ----------
    y : ndarray, shape (n,)
        Signal at the processing rate ``sample_rate``.
    sample_rate : int
    name : str
        How to name the signal in the message (usually its path).
    n_fft : int, optional
        The frame length; default that of the rate's framing (64 ms,
        :func:`sepsti.features.framing_for_rate`).

    Returns
    -------
    ndarray
        ``y`` itself.

    Raises
    ------
    ParameterError
        If ``sample_rate`` is not a whole number of Hz, or ``len(y) < n_fft``.
    """
    sample_rate = whole_rate(sample_rate, name)
    if n_fft is None:
        from sepsti.features import framing_for_rate

        n_fft = framing_for_rate(sample_rate).n_fft
    if len(y) < n_fft:
        need_ms = 1000.0 * n_fft / sample_rate
        have_ms = 1000.0 * len(y) / sample_rate
        raise ParameterError(f"{name}: audio shorter than one frame ({have_ms:.1f} ms; at least "
                             f"{need_ms:.0f} ms = {n_fft} samples at {sample_rate} Hz are needed)")
    return y


def load_audio(path, *, sample_rate, n_fft=None):
    """Read a sound file, downmix it to mono and resample it to ``sample_rate``.

    Parameters
    ----------
    path : str or Path
        Anything libsndfile reads.
    sample_rate : int
        Processing rate (the dictionary's).
    n_fft : int, optional
        The processing frame length: a shorter file is refused (:func:`validate_frames`; default
        that of the rate's framing).

    Returns
    -------
    Recording

    Raises
    ------
    ParameterError
        If the file is missing, a directory, empty, not audio, truncated,
        holds no samples or non-finite ones, is shorter than one frame, or has
        a rate outside what :func:`validate_sample_rate` accepts.
    """
    from sepsti.corpora.audio import audio_info, read_audio

    validate_sample_rate(audio_info(path).sample_rate, sample_rate, name=str(path))
    y, file_rate = read_audio(path)
    _check_peak(float(np.max(np.abs(y), initial=0.0)), path)
    samples = validate_frames(resample(y, file_rate, sample_rate), sample_rate, name=str(path), n_fft=n_fft)
    return Recording(samples, int(file_rate), len(y))


def _check_peak(peak, path):
    if peak > MAX_PEAK:
        raise ParameterError(f"{path}: samples reach {peak:.3g}, far beyond full scale (1.0); scale the file "
                             f"to its real level first")


class AudioInput(NamedTuple):
    """A checked input file: what processing it block by block needs to know.

    Attributes
    ----------
    path : Path
    sample_rate : int
        The file's rate (Hz).
    length : int
        The file's samples (per channel).
    num_samples : int
        Samples at the processing rate.
    peak : float
        Largest absolute sample of any channel (above 1.0 only in float files).
    channels : int
        The file's channels.
    subtype : str
        Its sample format as :mod:`soundfile` names it (``"PCM_16"``, ``"FLOAT"``, ...).
    power : float
        Mean square of its samples, over every channel.
    """

    path: Path
    sample_rate: int
    length: int
    num_samples: int
    peak: float
    channels: int
    subtype: str
    power: float


def inspect_input(path, *, sample_rate, n_fft=None):
    """Check an input file completely, reading it block by block.

    Parameters
    ----------
    path : str or Path
    sample_rate : int
        The processing rate.
    n_fft : int, optional
        The processing frame length: a shorter file is refused (:func:`validate_frames`). Without
        it, any file with samples passes.

    Returns
    -------
    AudioInput

    Raises
    ------
    ParameterError
        Everything :func:`load_audio` refuses (but a file shorter than a frame when ``n_fft`` is
        not given), found without holding the file in memory.
    """
    from sepsti.corpora.audio import audio_info, read_audio_blocks

    path = Path(path)
    info = audio_info(path)
    validate_sample_rate(info.sample_rate, sample_rate, name=str(path))
    peak = energy = 0.0
    for block in read_audio_blocks(path, block_size=BLOCK_SAMPLES, downmix=False):
        peak = max(peak, float(np.max(np.abs(block))))
        energy += float(np.vdot(block, block))
    _check_peak(peak, path)
    num_samples = Resampler(info.sample_rate, sample_rate, info.num_samples).num_output
    if n_fft is not None:
        validate_frames(np.broadcast_to(0.0, (num_samples,)), sample_rate, name=str(path), n_fft=n_fft)
    return AudioInput(path, info.sample_rate, info.num_samples, num_samples, peak, info.channels, info.subtype,
                      energy / max(1, info.num_samples * info.channels))


def input_blocks(audio, *, sample_rate, downmix=True):
    """A checked input at the processing rate, block by block.

    Parameters
    ----------
    audio : AudioInput
    sample_rate : int
        The processing rate.
    downmix : bool
        The mono downmix (True), or each channel of a multichannel file.

    Yields
    ------
    ndarray, shape (n,), or (n, channels) for a multichannel file without ``downmix``
        Concatenated: :func:`load_audio`'s samples (with ``downmix``), to rounding.
    """
    from sepsti.corpora.audio import read_audio_blocks

    resampler = Resampler(audio.sample_rate, sample_rate, audio.length)
    for block in read_audio_blocks(audio.path, block_size=BLOCK_SAMPLES, downmix=downmix):
        out = resampler.push(block)
        if len(out):
            yield out
    out = resampler.finish()
    if len(out):
        yield out


def output_format(path, like=None, *, sample_rate=None, channels=1):
    """The libsndfile format and subtype an output path gets from its extension, checked against the signal.

    The subtype ``like`` (the input's sample format) where it is one of PCM, float or companded
    samples and the format holds it: a 24-bit or floating-point input stays so. Otherwise ``.wav``
    (and other PCM containers) get 16-bit PCM, other formats their libsndfile default subtype.

    Parameters
    ----------
    path : str or Path
    like : str, optional
        A subtype as :mod:`soundfile` spells it (``"PCM_24"``, ``"FLOAT"``, ...).
    sample_rate : int, optional
        The output's rate (Hz); None checks the extension alone.
    channels : int

    Returns
    -------
    (str, str)
        Format and subtype names as :mod:`soundfile` spells them.

    Raises
    ------
    ParameterError
        If the extension is not a format libsndfile can write and read back (SD2, SDS and XI are not), or
        the format cannot hold the rate or the channels: libsndfile would refuse them after the work, write
        another rate, or crash (Vorbis above 192 kHz).
    """
    import soundfile

    path = Path(path)
    extension = path.suffix[1:].upper()
    fmt = _FORMAT_ALIASES.get(extension, extension)
    formats = soundfile.available_formats()
    if not extension or fmt not in formats:
        raise ParameterError(f"{path}: cannot write audio with extension {path.suffix or '(none)'!r}; "
                             "use .wav, .flac, .ogg or another extension libsndfile knows")
    if fmt in _NOT_WRITTEN:
        raise ParameterError(f"{path}: cannot write {path.suffix!r} files ({_NOT_WRITTEN[fmt]}); use .wav, .flac "
                             "or another extension")
    if extension == "OPUS":
        subtype = "OPUS"
    elif like in _SAMPLE_FORMATS - _NOT_KEPT.get(fmt, set()) and soundfile.check_format(fmt, like):
        subtype = like
    elif soundfile.check_format(fmt, "PCM_16"):
        subtype = "PCM_16"
    else:
        subtype = soundfile.default_subtype(fmt)
    if subtype is None or not soundfile.check_format(fmt, subtype):
        raise ParameterError(f"{path}: libsndfile cannot write {fmt} files here; use .wav")
    if int(channels) > _MAX_CHANNELS.get(fmt, int(channels)):
        raise ParameterError(f"{path}: a {path.suffix!r} file cannot hold {channels} channels ({fmt} files hold at "
                             f"most {_MAX_CHANNELS[fmt]}); use .wav")
    if sample_rate is not None and int(sample_rate) > 0:
        refused = _rate_refused(fmt, subtype, int(sample_rate))
        if refused:
            raise ParameterError(f"{path}: a {path.suffix!r} file cannot hold {int(sample_rate)} Hz ({refused}); "
                                 "use .wav")
    return fmt, subtype


def _rate_refused(fmt, subtype, rate):
    """Why libsndfile 1.2 cannot write ``rate`` Hz into a file of that format and subtype, or None if it can."""
    if subtype == "OPUS" and rate not in _OPUS_RATES:
        return f"Opus holds {', '.join(map(str, _OPUS_RATES))} Hz"
    if fmt == "MP3" and rate not in _MP3_RATES:
        return f"MP3 holds {', '.join(map(str, _MP3_RATES))} Hz"
    if subtype == "VORBIS" and rate > 192000:  # libvorbis crashes (SIGSEGV) from about 220 kHz
        return "Vorbis holds at most 192000 Hz"
    if fmt == "FLAC" and rate > 65535 and rate % 10:
        return "FLAC holds rates above 65535 Hz in steps of 10 Hz; libFLAC cannot read others back"
    if fmt == "WVE" and rate != 8000:
        return "WVE files are 8000 Hz"
    if fmt in ("MPC2K", "SVX") and rate > 65535:
        return f"{fmt} holds at most 65535 Hz"
    read = 10 ** 7 // max(10 ** 7 // rate, 1)  # an HTK file's rate: its sample period in whole 100 ns
    if fmt == "HTK" and read != rate:
        return f"HTK holds the sample period in steps of 100 ns: the file would say {read} Hz"
    return None


class _Output:
    """Sink of :func:`open_output`: ``write(block)``; counts samples clipped to full scale, refuses non-finite ones."""

    def __init__(self, handle, clip, path):
        self._handle = handle
        self._clip = clip
        self._path = path
        self.written = 0
        self.clipped = 0

    def write(self, block):
        block = np.asarray(block, dtype=np.float64)
        if not np.all(np.isfinite(block)):
            # integer formats would take NaN for full scale, float ones keep it: neither is a sound
            bad = int(np.count_nonzero(~np.isfinite(block)))
            raise ParameterError(f"{self._path}: {bad} sample(s) to write are NaN or Inf (in the block from sample "
                                 f"{self.written}); the output is not written")
        if self._clip:
            # libsndfile wraps out-of-range values around on mu-law and A-law (saturating PCM): clipped here for all,
            # and counted
            outside = np.abs(block) > 1.0
            if outside.any():
                self.clipped += int(np.count_nonzero(outside))
                block = np.clip(block, -1.0, 1.0)
        self._handle.write(block)
        self.written += len(block)


@contextlib.contextmanager
def open_output(path, sample_rate, *, overwrite=False, channels=1, like=None):
    """Write a signal block by block, atomically (temporary file beside ``path``, then rename).

    Parameters
    ----------
    path : str or Path
        Output file; the format follows the extension (see :func:`output_format`).
    sample_rate : int
    overwrite : bool
        True: replace a file at ``path``. False (the default): refuse one at the rename, as one that appeared
        there meanwhile (:func:`sepsti.core.io.atomic_path`; check beforehand with
        :func:`sepsti.core.io.refuse_existing` or :func:`sepsti.core.io.check_output_path`).
    channels : int
        Blocks are ``(n,)`` for 1, ``(n, channels)`` for more.
    like : str, optional
        The subtype to keep where the format holds it (:func:`output_format`).

    Yields
    ------
    object
        With ``write(block)`` (signal in [-1, 1); integer formats clip it to that range; NaN or Inf
        raises ParameterError and nothing is published), and the counts ``written`` (samples per
        channel) and ``clipped`` (samples beyond full scale).

    Raises
    ------
    ParameterError
        If ``path`` is a directory (:func:`sepsti.core.io.atomic_path`), exists at the rename and ``overwrite`` is
        False, the format cannot hold the signal (:func:`output_format`), a sample is NaN or Inf, or writing fails.
    """
    import soundfile

    from sepsti.core.io import atomic_path

    fmt, subtype = output_format(path, like, sample_rate=sample_rate, channels=channels)
    clip = subtype.startswith("PCM") or subtype in ("ULAW", "ALAW")
    with atomic_path(path, overwrite=overwrite) as tmp:
        try:
            with soundfile.SoundFile(os.fsencode(tmp), "w", samplerate=int(sample_rate), channels=int(channels),
                                     subtype=subtype, format=fmt) as handle:
                if handle.samplerate != int(sample_rate):
                    raise ParameterError(f"{path}: libsndfile writes {fmt} files at {handle.samplerate} Hz, not "
                                         f"{int(sample_rate)} Hz; use .wav")
                yield _Output(handle, clip, path)
        except soundfile.LibsndfileError as error:
            # libsndfile reports a failed write ("System error.") without its cause; a full disk is the usual one
            free = shutil.disk_usage(Path(tmp).parent).free
            raise ParameterError(f"{path}: cannot write it (libsndfile: {error.error_string}"
                                 f"{'; the disk is full' if free < 2 ** 20 else ''})") from None


def write_audio(path, y, sample_rate, *, overwrite=False):
    """Write a mono signal atomically (temporary file beside ``path``, then rename).

    Parameters
    ----------
    path : str or Path
        Output file; the format follows the extension (see :func:`output_format`).
    y : ndarray, shape (n,)
        Signal in [-1, 1); integer formats clip it to that range.
    sample_rate : int
    overwrite : bool
        True: replace a file at ``path``; by default one is refused before anything is written, and one that
        appears meanwhile at the rename (:func:`open_output`).

    Returns
    -------
    int
        Number of samples clipped to full scale.

    Raises
    ------
    ParameterError
        As :func:`open_output`.
    """
    from sepsti.core.io import refuse_existing

    if not overwrite:
        refuse_existing(path)
    with open_output(path, sample_rate, overwrite=overwrite) as output:
        output.write(y)
    return output.clipped
