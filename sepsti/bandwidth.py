"""Which dictionary fits an input's rate, and the band above the dictionary's.

Conventions
-----------
Signals are float64 in [-1, 1) at the input's own rate ``sample_rate`` unless said otherwise; the
dictionary's rate is its framing's (:class:`sepsti.features.Framing`), the *processing rate*.
Speech and noise magnitudes are ``(n_bins, n_frames)`` at the processing rate.

The enhancer models the band up to half the processing rate. An input recorded at a higher
rate also has an *upper band*: the input minus its own round trip through the processing rate
(``resample_poly`` down and up, the filter the enhanced band goes through), so that the two
bands add up to the input exactly. The model says nothing about the upper band directly;
what it does know is how much of the top modelled band is speech in each frame. The upper
band is therefore enhanced with that frame's gain ``Σ S / Σ (S + N)`` over the top of the
modelled band (:data:`TOP_BAND`, 4–7.6 kHz for the 16 kHz dictionary, 2–3.8 kHz for the 8 kHz
one; at least :data:`sepsti.denoise.MASK_FLOOR`, like every modelled bin, through
:func:`sepsti.denoise.speech_mask`), interpolated linearly between frame centres: fricatives
(speech in the top band) keep their upper band, noise-only frames lose it as the top band's noise
does. Where a dictionary's learned correction of the band gains (:mod:`sepsti.band_gains`) lowers
the top band, the gain is lowered alike: times the corrected mask's mean over the top band over
the mask's, both weighted by the mixture's magnitudes (a raising is not carried upward: the band
above holds more of a flat noise than the top band does). Nothing is removed without the model
saying so.
"""

import numpy as np

from sepsti import features
from sepsti.denoise import MASK_FLOOR, speech_mask

__all__ = ["NARROWBAND_RATE", "TOP_BAND", "dictionary_path_for_rate", "has_upper_band", "UpperBand"]

#: Inputs at this rate and below are enhanced with the 8 kHz dictionary (whose band they fill),
#: higher ones with the 16 kHz one, upsampled to it when below 16 kHz: at 11.025 kHz that beats
#: the 8 kHz dictionary with the band above 4 kHz carried upward on every score (docs/wideband.md).
NARROWBAND_RATE = 8000
#: The part of the modelled band whose speech share is carried upward, as fractions of half
#: the processing rate. The lower edge takes in the whole fricative region the dictionary sees;
#: the upper edge stays below the resampling filter's transition band.
TOP_BAND = (0.5, 0.95)


def dictionary_path_for_rate(sample_rate):
    """The shipped dictionary for an input rate: 8 kHz up to :data:`NARROWBAND_RATE`, else 16 kHz.

    Parameters
    ----------
    sample_rate : int
        The input file's rate (Hz).

    Returns
    -------
    Path
    """
    from sepsti.dictionary import narrowband_dictionary_path, wideband_dictionary_path

    return narrowband_dictionary_path() if int(sample_rate) <= NARROWBAND_RATE else wideband_dictionary_path()


def has_upper_band(sample_rate, framing):
    """Whether an input at ``sample_rate`` has a band above what ``framing``'s dictionary models."""
    return int(sample_rate) > framing.sample_rate


class UpperBand:
    """The upper band of an input, enhanced with the speech share of the top modelled band.

    Feed it the enhancer's speech and noise magnitudes with :meth:`add_mask` (the ``mask_fn`` of
    :func:`sepsti.denoise.denoise_blocks`), any band-gain correction with :meth:`add_correction`
    (its ``correction_fn``), and pass each piece of the enhanced, re-upsampled signal through
    :meth:`apply`, in order. The gains a piece needs are known by then: the
    overlap-add has released a sample only once the frames around it are done.

    Parameters
    ----------
    blocks : callable
        ``blocks()`` returns an iterator over the input's consecutive pieces at ``sample_rate``
        (called once): ``(n,)``, or ``(n, channels)`` for several channels, each given the same gains.
    sample_rate : int
        The input's rate, above ``framing.sample_rate``.
    length : int
        The input's number of samples.
    framing : sepsti.features.Framing
        The dictionary's STFT; the gains come one per frame of the enhancer's
        (:func:`sepsti.features.enhancement_framing`).
    """

    def __init__(self, blocks, sample_rate, length, framing):
        from sepsti.audio import Resampler

        self._rate, self._length = int(sample_rate), int(length)
        self._framing = features.enhancement_framing(framing)  # the frames the enhancer's gains come in
        frequencies = np.arange(framing.n_bins) / framing.n_fft
        self._top = (frequencies >= TOP_BAND[0] / 2) & (frequencies <= TOP_BAND[1] / 2)
        self._gains = []  # per frame, pieces joined when read
        self._corrected = 0  # frames whose gains a correction has reached
        self._down = Resampler(self._rate, framing.sample_rate, self._length)
        self._up = Resampler(framing.sample_rate, self._rate, self._down.num_output)
        self._upper = self._upper_blocks(blocks)
        self._buffer = None
        self._next = 0

    def add_mask(self, speech, noise, floor=MASK_FLOOR):
        """Record the gains of frames (speech and noise magnitudes, shape (n_bins, m), in order), at least ``floor``."""
        share = speech_mask(speech[self._top].sum(axis=0), noise[self._top].sum(axis=0), floor)
        self._gains.append(share.astype(np.float64))  # corrections multiply them in place, in double precision

    def add_correction(self, mask, corrected, magnitude):
        """Lower the gains of the next frames recorded as far as a correction lowered their top band (mask before and
        after it and the mixture's magnitudes, shape (n_bins, m), in order): times ``min(Σ M' |Y| / Σ M |Y|, 1)``
        over the top band."""
        weights = magnitude[self._top]
        before = (mask[self._top] * weights).sum(axis=0)
        after = (corrected[self._top] * weights).sum(axis=0)
        stop = self._corrected + len(before)
        _joined(self._gains)[self._corrected:stop] *= np.minimum(
            np.divide(after, before, out=np.ones_like(before), where=before > 0), 1.0)
        self._corrected = stop

    def _upper_blocks(self, blocks):
        """The input minus its round trip through the processing rate, block by block."""
        held = low = None
        for block in blocks():
            held = block if held is None else np.concatenate([held, block])
            back = self._up.push(self._down.push(block))
            low = back if low is None else np.concatenate([low, back])
            count = min(len(held), len(low))
            yield held[:count] - low[:count]
            held, low = held[count:], low[count:]
        low = np.concatenate([low, self._up.push(self._down.finish()), self._up.finish()])[:len(held)]
        yield held - low

    def _take(self, count):
        while self._buffer is None or len(self._buffer) < count:
            block = next(self._upper, None)
            if block is None:  # past the input's end (the way back may round up): no upper band
                missing = count - len(self._buffer)
                self._buffer = np.pad(self._buffer, [(0, missing)] + [(0, 0)] * (self._buffer.ndim - 1))
                break
            self._buffer = block if self._buffer is None else np.concatenate([self._buffer, block])
        out, self._buffer = self._buffer[:count], self._buffer[count:]
        return out

    def apply(self, piece):
        """Add the enhanced upper band to the next samples of the enhanced signal (at ``sample_rate``)."""
        piece = np.asarray(piece, dtype=np.float64)
        if len(piece) == 0:
            return piece
        if not self._gains:  # all-zero input: the enhancer computed no frames and the band is silent
            return piece
        gains = _joined(self._gains)  # with band gains, the frames of the samples asked for are corrected by now
        # frame j is centred on processing sample j·hop, i.e. input sample j·hop·rate / processing rate
        centres = np.arange(len(gains)) * (self._framing.hop_length * self._rate / self._framing.sample_rate)
        where = np.arange(self._next, self._next + len(piece))
        self._next += len(piece)
        gain = np.interp(where, centres, gains).reshape(-1, *[1] * (piece.ndim - 1))  # one per sample
        return piece + gain * self._take(len(piece))


def _joined(parts):
    """The arrays of the list ``parts`` as one array, which the list then holds alone."""
    if len(parts) > 1:
        parts[:] = [np.concatenate(parts)]
    return parts[0]
