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
  but seldom one at 50, 60, 100 or 120 Hz through a whole recording.
- **Subtracted** (:func:`measure_hum`, :func:`without_hum`): each line's complex amplitude is measured every
  :data:`CELL_SECONDS` (the signal times ``exp(-2πi k f0 t)``, averaged over the cell, then over the
  :data:`AVERAGE_CELLS` cells around it: a 1 s average that rejects whatever is more than a hertz from
  the line, and follows the slow drift of the mains' frequency and phase), interpolated between cell
  centres and subtracted as ``Re(a_k(t) exp(2πi k f0 t))``; the fundamental is first refined from the
  lines' turning from cell to cell. Lines too weak to pass :data:`LINE_DB` are left alone, and so are
  cells of digital silence (the noise model skips them as such). The measuring and the subtraction
  (the latter made in every pass of the enhancer over the signal) are numba kernels
  (:mod:`sepsti.hum_kernels`), imported only when a signal has hum.

Signals are float arrays ``(n,)`` or ``(n, channels)`` given block by block (the enhancer's
``blocks()``); every channel gets its own amplitudes. Memory does not depend on the signal's length
beyond the amplitudes themselves (per channel, 4 complex numbers per line per second).
"""

from typing import NamedTuple

import numpy as np

__all__ = ["MAINS_HZ", "MAINS_TOLERANCE_HZ", "HIGHEST_HZ", "LINE_DB", "MIN_LINES", "LOW_HARMONICS",
           "SEGMENT_SECONDS", "SHORTEST_SECONDS", "CELL_SECONDS", "AVERAGE_CELLS", "Hum", "find_hum", "measure_hum",
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
#: Amplitudes are measured per cell of this length (s) and averaged over this many cells.
CELL_SECONDS = 0.25
AVERAGE_CELLS = 4
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
    silent : ndarray of bool, shape (n_cells,), or None
        Cells of digital silence (every sample exactly 0): left so.
    """

    frequency: float
    harmonics: np.ndarray
    sample_rate: int
    amplitudes: np.ndarray = None
    silent: np.ndarray = None


def _welch(blocks, sample_rate):
    """The least over the segments of their power spectra (summed over channels) up to just above
    :data:`HIGHEST_HZ`, and its frequencies: a line there held through the whole signal."""
    length = int(SEGMENT_SECONDS * sample_rate)
    top = int(np.ceil((HIGHEST_HZ + 2 * _SURROUNDING_HZ) * length / sample_rate)) + 1
    least, count, held, seen = np.full(top, np.inf), 0, None, 0
    window = np.hanning(length)

    def add(segment):
        taper = window if len(segment) == length else np.hanning(len(segment))
        windowed = segment * taper.reshape(-1, *[1] * (segment.ndim - 1))
        spectrum = np.fft.rfft(windowed, n=length, axis=0)[:top]
        return np.sum(np.abs(spectrum.reshape(top, -1)) ** 2, axis=1)

    for block in blocks:
        block = np.asarray(block, dtype=np.float64)
        held = block if held is None else np.concatenate([held, block])
        seen += len(block)
        while len(held) >= length:
            least = np.minimum(least, add(held[:length]))
            count += 1
            held = held[length // 2:]
    if count == 0:
        if seen < SHORTEST_SECONDS * sample_rate:
            return None, None
        least = add(held)
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
    """
    power, frequencies = _welch(blocks, sample_rate)
    if power is None or not np.any(power):
        return None
    fundamentals = np.concatenate([np.arange(mains - MAINS_TOLERANCE_HZ, mains + MAINS_TOLERANCE_HZ + 1e-9, 0.01)
                                   for mains in MAINS_HZ])
    prominence, harmonics = _prominences(power, frequencies, fundamentals)
    lines = prominence >= LINE_DB
    score = np.sum(np.where(lines, prominence, 0.0), axis=1)
    best = int(np.argmax(score))
    low = lines[best, :LOW_HARMONICS]
    if np.count_nonzero(low) < MIN_LINES or not np.any(low[:2]):
        return None
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
    sums, silent, position, held = [], [], 0, None

    def add(samples):
        total = np.zeros((len(harmonics), *samples.shape[1:]), dtype=complex)
        demodulate(samples.reshape(len(samples), -1), position, hum.frequency / hum.sample_rate, harmonics,
                   total.reshape(len(harmonics), -1))
        sums.append(total / len(samples))
        silent.append(not np.any(samples))

    for block in blocks:
        block = np.asarray(block, dtype=np.float64)
        held = block if held is None else np.concatenate([held, block])
        while len(held) >= cell:
            add(held[:cell])
            position += cell
            held = held[cell:]
    if held is not None and len(held):
        add(held)
    amplitudes = 2 * np.asarray(sums)
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
    kernel = np.ones(AVERAGE_CELLS)
    smoothed = np.apply_along_axis(lambda x: np.convolve(x, kernel, mode="same"), 0, amplitudes)
    counts = np.convolve(np.ones(len(amplitudes)), kernel, mode="same")
    return hum._replace(amplitudes=smoothed / counts.reshape(-1, *[1] * (amplitudes.ndim - 1)),
                        silent=np.asarray(silent))


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
                     hum.silent, cell)
        yield out
        position += len(out)
