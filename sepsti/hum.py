"""Mains hum: found as spectral lines at multiples of 50 or 60 Hz, and subtracted as sinusoids.

Hum from the mains is stationary, so the noise model holds it; but the mask then attenuates every
bin it dominates, and takes the voice's own low harmonics with it (docs/enhance.md, "Mains hum").
Sinusoids can instead be taken out exactly:

- **Found** (:func:`find_hum`): the least, over the signal's segments (Hann windows of
  :data:`SEGMENT_SECONDS`, half overlapping; 0.125 Hz apart), of their power spectra — a line there
  was held through the whole signal — is searched for a fundamental within :data:`MAINS_TOLERANCE_HZ`
  of 50 or 60 Hz, in steps of 0.01 Hz, whose multiples up to :data:`HIGHEST_HZ` stand out as lines:
  the largest power within a bin of ``k · f0`` at least :data:`LINE_DB` above the median of the ±4 Hz
  around it. Hum needs :data:`MIN_LINES` of them among the first :data:`LOW_HARMONICS` multiples,
  the fundamental or its double among them; every line found up to :data:`HIGHEST_HZ` is then
  subtracted. Speech and most noises have no line that narrow held for seconds; music holds notes,
  but seldom one at 50, 60, 100 or 120 Hz through a whole recording. Segments that are digital silence
  (below) for half their length or more in every channel are left out (exact zeros have no lines, and
  would make the least zero at every frequency); if that leaves none, the one of most sound is searched.
- **Subtracted** (:func:`measure_hum`, :func:`without_hum`): each line's complex amplitude is measured every
  :data:`CELL_SECONDS` (the signal times ``exp(-2πi k f0 t)``, averaged over the cell, then over the
  :data:`AVERAGE_CELLS` cells around it: a 1 s average that rejects whatever is more than a hertz from
  the line, and follows the slow drift of the mains' frequency and phase), interpolated between cell
  centres and subtracted as ``Re(a_k(t) exp(2πi k f0 t))``; the fundamental is first refined from the
  lines' turning from cell to cell. Lines too weak to pass :data:`LINE_DB` are left alone, and so is
  digital silence: a channel's runs of exact zeros of :data:`SILENCE_SECONDS` or more (the noise model
  skips them as such) are neither measured (a cell's amplitude is its other samples') nor changed. The
  measuring and the subtraction
  (the latter made in every pass of the enhancer over the signal) are numba kernels
  (:mod:`sepsti.hum_kernels`), imported only when a signal has hum.

Signals are float arrays ``(n,)`` or ``(n, channels)`` given block by block (the enhancer's
``blocks()``); every channel gets its own amplitudes. Memory does not depend on the signal's length
beyond the amplitudes themselves (per channel, 4 complex numbers per line per second).
"""

from typing import NamedTuple

import numpy as np

from sepsti.audio import check_layout

__all__ = ["MAINS_HZ", "MAINS_TOLERANCE_HZ", "HIGHEST_HZ", "LINE_DB", "MIN_LINES", "LOW_HARMONICS",
           "SEGMENT_SECONDS", "SHORTEST_SECONDS", "CELL_SECONDS", "AVERAGE_CELLS", "SILENCE_SECONDS", "Hum", "find_hum",
           "measure_hum",
           "without_hum", "hum_free"]

#: Mains frequencies (Hz) and how far the fundamental may lie from them.
MAINS_HZ = (50.0, 60.0)
MAINS_TOLERANCE_HZ = 0.2
#: Highest multiple looked for (Hz): hum's harmonics above it are weak and speech's are strong.
HIGHEST_HZ = 1000.0
#: A line: its peak this far above the median power of the ±4 Hz around it (dB).
LINE_DB = 12.0
#: Hum: this many lines among the first :data:`LOW_HARMONICS` multiples of one fundamental, the
#: fundamental or its double among them (where hum has its power).
MIN_LINES = 2
LOW_HARMONICS = 6
#: Welch segment length (s): 0.125 Hz between frequencies; shorter signals are one segment.
SEGMENT_SECONDS = 8.0
#: The shortest signal searched (s).
SHORTEST_SECONDS = 2.0
#: Amplitudes are measured per cell of this length (s) and averaged over this many cells, centred (the
#: cells at either end of the span with half weight).
CELL_SECONDS = 0.25
AVERAGE_CELLS = 4
#: Digital silence: a run of exact zeros this long (s) or longer, per channel.
SILENCE_SECONDS = 0.01
_SURROUNDING_HZ = 4.0


class Hum(NamedTuple):
    """Hum found in a signal.

    Attributes
    ----------
    frequency : float
        The fundamental (Hz).
    harmonics : ndarray of int
        The multiples of it that are lines.
    sample_rate : int
    amplitudes : ndarray of complex, shape (n_cells, n_harmonics[, channels]), or None
        Each line's complex amplitude per cell (None until measured, :func:`measure_hum`).
    silences : tuple of (ndarray, ndarray), or None
        Per channel, the first and one-past-last samples of its runs of digital silence
        (:data:`SILENCE_SECONDS` or more of exact zeros): left so.
    """

    frequency: float
    harmonics: np.ndarray
    sample_rate: int
    amplitudes: np.ndarray = None
    silences: tuple = None


class _ZeroRuns:
    """A signal's runs of exact zeros of ``shortest`` samples or more per channel, fed block by block."""

    def __init__(self, shortest):
        self.shortest, self.position, self.open, self.runs = shortest, 0, None, None

    def add(self, block):
        if not len(block):
            return
        zero = (block == 0).reshape(len(block), -1)
        if self.open is None:
            self.open = np.full(zero.shape[1], -1, dtype=np.int64)  # where a channel's unfinished run began
            self.runs = [[] for _ in range(zero.shape[1])]
        padded = np.zeros((len(block) + 1, zero.shape[1]), dtype=np.int8)
        padded[1:] = zero
        for channel in range(zero.shape[1]):
            changes = np.flatnonzero(np.diff(padded[:, channel])) + self.position
            starts, ends = list(changes[0::2]), list(changes[1::2])  # a run still going at the end has no end
            if self.open[channel] >= 0:
                if starts and starts[0] == self.position:
                    starts[0] = self.open[channel]  # the unfinished run goes on
                else:  # it ended with the last block
                    starts.insert(0, self.open[channel])
                    ends.insert(0, self.position)
            self.open[channel] = starts.pop() if len(starts) > len(ends) else -1
            self.runs[channel] += [(a, b) for a, b in zip(starts, ends) if b - a >= self.shortest]
        self.position += len(block)

    def finish(self):
        """Per channel, the runs' first and one-past-last samples."""
        if self.open is None:
            return ()
        for channel, start in enumerate(self.open):
            if start >= 0 and self.position - start >= self.shortest:
                self.runs[channel].append((start, self.position))
        return tuple(tuple(np.array(side, dtype=np.int64).reshape(-1) for side in zip(*runs)) if runs
                     else (np.zeros(0, np.int64), np.zeros(0, np.int64)) for runs in self.runs)


def _silent_samples(silences, bounds):
    """Per channel, how many samples of its runs ``silences`` lie before each of ``bounds``: (bounds, channels)."""
    counts = np.zeros((len(bounds), len(silences)), dtype=np.int64)
    for channel, (starts, ends) in enumerate(silences):
        if len(starts):
            earlier = np.concatenate([[0], np.cumsum(ends - starts)])  # samples in the runs before run j
            last = np.searchsorted(starts, bounds, side="left") - 1  # the last run starting before the bound
            inside = np.minimum(bounds, ends[np.maximum(last, 0)]) - starts[np.maximum(last, 0)]
            counts[:, channel] = np.where(last >= 0, earlier[np.maximum(last, 0)] + inside, 0)
    return counts


def _silent_mask(silences, first, count):
    """Which samples ``first .. first + count - 1`` of each channel lie in its runs ``silences``: (count, channels)."""
    mask = np.zeros((count, len(silences)), dtype=np.bool_)
    for channel, (starts, ends) in enumerate(silences):
        for j in range(np.searchsorted(ends, first, side="right"), np.searchsorted(starts, first + count)):
            mask[max(starts[j] - first, 0):min(ends[j] - first, count), channel] = True
    return mask


def _welch(blocks, sample_rate):
    """The least over the segments of their power spectra (summed over channels) up to just above
    :data:`HIGHEST_HZ`, and its frequencies: a line there held through the whole signal; (None, None) for
    a signal too short, or of too little sound, to search.

    Segments that are digital silence for half their length or more in every channel are left out; if
    that leaves none, the one of most sound (the shorter last one included) is searched, where that sound
    lasts :data:`SHORTEST_SECONDS` or more.
    """
    length = int(SEGMENT_SECONDS * sample_rate)
    top = int(np.ceil((HIGHEST_HZ + 2 * _SURROUNDING_HZ) * length / sample_rate)) + 1
    shortest = max(1, int(round(SILENCE_SECONDS * sample_rate)))
    least, count, held, seen = np.full(top, np.inf), 0, None, 0
    most, loudest = 0, None  # of the segments left out, the one of most sound, and its sound
    window = np.hanning(length)

    def add(segment):
        taper = window if len(segment) == length else np.hanning(len(segment))
        windowed = segment * taper.reshape(-1, *[1] * (segment.ndim - 1))
        spectrum = np.fft.rfft(windowed, n=length, axis=0)[:top]
        return np.sum(np.abs(spectrum.reshape(top, -1)) ** 2, axis=1)

    def sound(segment):
        """The samples of ``segment`` outside digital silence, in its channel of most."""
        runs = _ZeroRuns(shortest)
        runs.add(segment)
        silent = [int(np.sum(ends - starts)) for starts, ends in runs.finish()]
        return len(segment) - min(silent, default=len(segment))

    for block in blocks:
        block = np.asarray(block, dtype=np.float64)
        check_layout(block.shape, name="hum search")
        held = block if held is None else np.concatenate([held, block])
        seen += len(block)
        while len(held) >= length:
            heard = sound(held[:length])
            if 2 * heard > length:
                least = np.minimum(least, add(held[:length]))
                count += 1
            elif heard > most:
                most, loudest = heard, held[:length]
            held = held[length // 2:]
    if held is None:
        return None, None
    check_layout(held.shape, seen, name="hum search")
    if count == 0:  # a signal shorter than a segment is one; or none was searched
        heard = sound(held)
        if heard > most:
            most, loudest = heard, held
        if most < SHORTEST_SECONDS * sample_rate:
            return None, None
        least = add(loudest)
    return least, np.arange(top) * sample_rate / length


def _prominences(power, frequencies, fundamentals):
    """Each candidate fundamental's lines: peak over the surrounding median (dB), shape (candidates, harmonics)."""
    step = frequencies[1]
    half = int(round(_SURROUNDING_HZ / step))
    harmonics = np.arange(1, int(HIGHEST_HZ // min(fundamentals)) + 1)
    centres = np.rint(np.outer(fundamentals, harmonics) / step).astype(int)
    valid = (centres + half < len(power)) & (np.outer(fundamentals, harmonics) <= HIGHEST_HZ)
    centres = np.minimum(centres, len(power) - half - 1)
    peaks = np.max(np.stack([power[centres + shift] for shift in (-1, 0, 1)]), axis=0)
    windows = np.lib.stride_tricks.sliding_window_view(power, 2 * half + 1)  # window i is centred on i + half
    medians = np.median(windows[np.maximum(centres - half, 0)], axis=-1)
    tiny = np.finfo(np.float64).tiny
    prominence = 10 * np.log10(np.maximum(peaks, tiny) / np.maximum(medians, tiny))
    return np.where(valid, prominence, -np.inf), harmonics


def find_hum(blocks, sample_rate):
    """Mains hum in a signal, or None (module docstring).

    Parameters
    ----------
    blocks : iterable of ndarray
        The signal's consecutive pieces, ``(n,)`` or ``(n, channels)``.
    sample_rate : int

    Returns
    -------
    Hum or None
        The fundamental and its lines (amplitudes not yet measured); None for a signal without hum or
        shorter than :data:`SHORTEST_SECONDS`.

    Raises
    ------
    ParameterError
        For pieces that are clearly channels first (:func:`sepsti.audio.check_layout`).
    """
    power, frequencies = _welch(blocks, sample_rate)
    if power is None or not np.any(power):
        return None
    fundamentals = np.concatenate([np.arange(mains - MAINS_TOLERANCE_HZ, mains + MAINS_TOLERANCE_HZ + 1e-9, 0.01)
                                   for mains in MAINS_HZ])
    prominence, harmonics = _prominences(power, frequencies, fundamentals)
    lines = prominence >= LINE_DB
    low = lines[:, :LOW_HARMONICS]
    hum_like = (np.count_nonzero(low, axis=1) >= MIN_LINES) & np.any(low[:, :2], axis=1)
    if not np.any(hum_like):
        return None
    # the strongest of the candidates that look like hum (a stronger one that does not, e.g. a steady
    # 150 Hz buzz on the 50 Hz grid, does not hide a 60 Hz hum)
    best = int(np.argmax(np.where(hum_like, np.sum(np.where(lines, prominence, 0.0), axis=1), -np.inf)))
    return Hum(float(fundamentals[best]), harmonics[lines[best]], int(sample_rate))


def hum_free(blocks, sample_rate):
    """A signal's pieces with its hum subtracted, as ``blocks`` gives them: found, measured, subtracted.

    Parameters
    ----------
    blocks : callable
        ``blocks()`` returns a new iterator over the signal's consecutive pieces (called twice more
        than the result is, where the signal has hum).
    sample_rate : int

    Returns
    -------
    callable
        Like ``blocks``; ``blocks`` itself for a signal without hum.
    """
    hum = find_hum(blocks(), sample_rate)
    if hum is None:
        return blocks
    hum = measure_hum(blocks(), hum)
    return lambda: without_hum(blocks(), hum)


def measure_hum(blocks, hum):
    """``hum`` with each line's complex amplitude per cell (:attr:`Hum.amplitudes`), from one pass over the signal.

    Parameters
    ----------
    blocks : iterable of ndarray
        The signal's consecutive pieces, ``(n,)`` or ``(n, channels)``.
    hum : Hum
        From :func:`find_hum` on the same signal.

    Returns
    -------
    Hum
    """
    from sepsti.hum_kernels import demodulate

    cell = max(1, int(round(CELL_SECONDS * hum.sample_rate)))
    harmonics = np.asarray(hum.harmonics, dtype=np.int64)
    sums, position, held = [], 0, None
    zero_runs = _ZeroRuns(max(1, int(round(SILENCE_SECONDS * hum.sample_rate))))

    def add(samples):
        total = np.zeros((len(harmonics), *samples.shape[1:]), dtype=complex)
        demodulate(samples.reshape(len(samples), -1), position, hum.frequency / hum.sample_rate, harmonics,
                   total.reshape(len(harmonics), -1))
        sums.append(total)

    for block in blocks:
        block = np.asarray(block, dtype=np.float64)
        zero_runs.add(block)
        held = block if held is None else np.concatenate([held, block])
        while len(held) >= cell:
            add(held[:cell])
            position += cell
            held = held[cell:]
    if held is not None and len(held):
        add(held)
    silences = zero_runs.finish()
    # each cell's samples outside the silences, per channel, shaped as its amplitudes
    bounds = np.minimum(np.arange(len(sums) + 1) * cell, zero_runs.position)
    counts = (np.diff(bounds)[:, None] - np.diff(_silent_samples(silences, bounds), axis=0)).astype(float)
    counts = counts.reshape(len(sums), 1, *sums[0].shape[1:]) if sums else counts
    amplitudes = 2 * np.asarray(sums) / np.maximum(counts, 1)
    # the fundamental to a few thousandths of a hertz: each line turns by 2π k δ per second when the true
    # fundamental is f0 + δ; the turn per cell, weighted by each line's power and its multiple squared
    turns = np.sum(amplitudes[1:] * np.conj(amplitudes[:-1]), axis=0).reshape(len(hum.harmonics), -1).sum(axis=1)
    if len(amplitudes) > 1 and np.any(turns):
        weights = np.abs(turns) * hum.harmonics ** 2
        offsets = np.angle(turns) / (2 * np.pi * hum.harmonics * cell / hum.sample_rate)
        offset = float(np.sum(weights * offsets) / np.sum(weights))
        centres = (np.arange(len(amplitudes)) + 0.5) * cell / hum.sample_rate
        amplitudes = amplitudes * np.exp(-2j * np.pi * offset * np.outer(centres, hum.harmonics)).reshape(
            *amplitudes.shape[:2], *[1] * (amplitudes.ndim - 2))
        hum = hum._replace(frequency=hum.frequency + offset)
    sums = amplitudes * counts
    kernel = np.r_[0.5, np.ones(AVERAGE_CELLS - 1), 0.5]  # AVERAGE_CELLS cells' span, centred on the cell
    smoothed = np.apply_along_axis(lambda x: np.convolve(x, kernel, mode="same"), 0, sums)
    weights = np.apply_along_axis(lambda x: np.convolve(x, kernel, mode="same"), 0, counts)
    return hum._replace(amplitudes=smoothed / np.maximum(weights, 1e-300), silences=silences)


def without_hum(blocks, hum):
    """The signal with its hum subtracted, block by block.

    Parameters
    ----------
    blocks : iterable of ndarray
        The signal's consecutive pieces.
    hum : Hum
        Measured on the same signal (:func:`measure_hum`).

    Yields
    ------
    ndarray
        The pieces, each line's sinusoid subtracted.
    """
    from sepsti.hum_kernels import subtract_hum

    cell = max(1, int(round(CELL_SECONDS * hum.sample_rate)))
    amplitudes = np.ascontiguousarray(hum.amplitudes.reshape(*hum.amplitudes.shape[:2], -1))
    harmonics = np.asarray(hum.harmonics, dtype=np.int64)
    position = 0
    for block in blocks:
        out = np.array(block, dtype=np.float64)
        subtract_hum(out.reshape(len(out), -1), position, hum.frequency / hum.sample_rate, harmonics, amplitudes,
                     _silent_mask(hum.silences, position, len(out)), cell)
        yield out
        position += len(out)
