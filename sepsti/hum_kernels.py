"""The numba kernels of :mod:`sepsti.hum` (imported only when a signal has hum: numba loads slowly).

A line's phasor ``exp(2πi k f0 n / rate)`` is the fundamental's (its phase kept below one cycle, so
exact for any ``n``) raised to the power ``k``: one complex product per multiple and sample.
"""

import numba
import numpy as np


@numba.njit(cache=True)
def _line_phasors(n, cycles_per_sample, harmonics, out):
    """``exp(2πi k f0 n / rate)`` of sample ``n`` for each line ``k`` of ``harmonics`` (increasing), into ``out``."""
    phase = n * cycles_per_sample
    fundamental = np.exp(2j * np.pi * (phase - np.floor(phase)))
    power = 1.0 + 0.0j
    line = 0
    for k in range(1, harmonics[-1] + 1):
        power *= fundamental
        if harmonics[line] == k:
            out[line] = power
            line += 1


@numba.njit(cache=True)
def demodulate(samples, start, cycles_per_sample, harmonics, out):
    """Add ``Σ_n samples[n] · exp(−2πi k f0 (start + n) / rate)`` for each line ``k`` to ``out``.

    ``samples`` has shape (count, channels), ``out`` (harmonics, channels).
    """
    count, channels = samples.shape
    phasors = np.empty(len(harmonics), dtype=np.complex128)
    for i in range(count):
        _line_phasors(start + i, cycles_per_sample, harmonics, phasors)
        for line in range(len(harmonics)):
            for channel in range(channels):
                out[line, channel] += samples[i, channel] * np.conj(phasors[line])


@numba.njit(cache=True)
def subtract_hum(out, start, cycles_per_sample, harmonics, amplitudes, silent, cell):
    """Subtract ``Re(a_k(n) exp(2πi k f0 n / rate))`` from ``out`` (samples ``start`` on, shape (count, channels)).

    ``a_k(n)`` is linear between cell centres ``(i + ½) · cell`` (constant beyond the first and last), from
    ``amplitudes`` of shape (cells, harmonics, channels); samples of cells marked ``silent`` are left alone.
    """
    count, channels = out.shape
    last = amplitudes.shape[0] - 1
    phasors = np.empty(len(harmonics), dtype=np.complex128)
    for i in range(count):
        n = start + i
        if silent[min(n // cell, last)]:
            continue
        place = n / cell - 0.5
        before = int(np.floor(place))
        if before < 0:
            before, after, fraction = 0, 0, 0.0
        elif before >= last:
            before, after, fraction = last, last, 0.0
        else:
            after, fraction = before + 1, place - before
        _line_phasors(n, cycles_per_sample, harmonics, phasors)
        for line in range(len(harmonics)):
            for channel in range(channels):
                first = amplitudes[before, line, channel]
                amplitude = first + fraction * (amplitudes[after, line, channel] - first)
                out[i, channel] -= (amplitude * phasors[line]).real
