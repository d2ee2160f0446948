"""The numba kernels of :mod:`sepsti.hum` (imported only when a signal has hum: numba loads slowly).

A line's phasor ``exp(2πi k f0 n / rate)`` is computed exactly at every multiple of :data:`ANCHOR`
samples, as the fundamental's (its phase kept below one cycle) raised to the power ``k``, and from
there turned sample by sample by the line's step ``exp(2πi k f0 / rate)``, with a rounding error of
about 1e-13 at most; a sample's phasors depend on its index alone, not on where a block of the signal
begins. For speed (a sample's subtraction 46 → 12 ns with five lines, its measuring 35 → 11 ns): the
complex products are written out in real and imaginary parts (as complex numbers, the same kernels take
40 ns), the helpers are inlined (a call per sample that passes arrays counts their references), and a
sample's lines are summed before it is changed.
"""

import numba
import numpy as np

#: Samples between the phasors computed exactly.
ANCHOR = 4096


@numba.njit(cache=True, inline="always")
def _line_phasors(n, cycles_per_sample, harmonics, re, im):
    """``exp(2πi k f0 n / rate)`` of sample ``n`` for each line ``k`` of ``harmonics`` (increasing): ``re``, ``im``."""
    phase = 2.0 * np.pi * (n * cycles_per_sample - np.floor(n * cycles_per_sample))
    fundamental_re, fundamental_im = np.cos(phase), np.sin(phase)
    power_re, power_im = 1.0, 0.0
    line = 0
    for k in range(1, harmonics[-1] + 1):
        power_re, power_im = (power_re * fundamental_re - power_im * fundamental_im,
                              power_re * fundamental_im + power_im * fundamental_re)
        if harmonics[line] == k:
            re[line], im[line] = power_re, power_im
            line += 1


@numba.njit(cache=True, inline="always")
def _phasors(n, first, cycles_per_sample, harmonics, re, im, step_re, step_im):
    """The phasors of sample ``n`` into ``re``, ``im``: from those of ``n − 1`` unless ``n`` is the ``first``."""
    if n == first:
        _line_phasors(1, cycles_per_sample, harmonics, step_re, step_im)
        anchor = n - n % ANCHOR
        _line_phasors(anchor, cycles_per_sample, harmonics, re, im)
        turns = n - anchor
    elif n % ANCHOR == 0:
        _line_phasors(n, cycles_per_sample, harmonics, re, im)
        turns = 0
    else:
        turns = 1
    for _ in range(turns):
        for line in range(len(re)):
            re[line], im[line] = (re[line] * step_re[line] - im[line] * step_im[line],
                                  re[line] * step_im[line] + im[line] * step_re[line])


@numba.njit(cache=True)
def demodulate(samples, start, cycles_per_sample, harmonics, out):
    """Add ``Σ_n samples[n] · exp(−2πi k f0 (start + n) / rate)`` for each line ``k`` to ``out``.

    ``samples`` has shape (count, channels), ``out`` (harmonics, channels).
    """
    count, channels = samples.shape
    lines = len(harmonics)
    re, im, step_re, step_im = np.empty(lines), np.empty(lines), np.empty(lines), np.empty(lines)
    sum_re, sum_im = np.zeros((lines, channels)), np.zeros((lines, channels))
    for i in range(count):
        _phasors(start + i, start, cycles_per_sample, harmonics, re, im, step_re, step_im)
        for line in range(lines):
            for channel in range(channels):
                sum_re[line, channel] += samples[i, channel] * re[line]
                sum_im[line, channel] -= samples[i, channel] * im[line]
    for line in range(lines):
        for channel in range(channels):
            out[line, channel] += sum_re[line, channel] + 1j * sum_im[line, channel]


@numba.njit(cache=True)
def subtract_hum(out, start, cycles_per_sample, harmonics, amplitudes, silent, cell):
    """Subtract ``Re(a_k(n) exp(2πi k f0 n / rate))`` from ``out`` (samples ``start`` on, shape (count, channels)).

    ``a_k(n)`` is linear between cell centres ``(i + ½) · cell`` (constant beyond the first and last), from
    ``amplitudes`` of shape (cells, harmonics, channels); samples marked in ``silent`` (shape of ``out``) are
    left alone.
    """
    count, channels = out.shape
    last = amplitudes.shape[0] - 1
    lines = len(harmonics)
    re, im, step_re, step_im = np.empty(lines), np.empty(lines), np.empty(lines), np.empty(lines)
    # the amplitudes at the cell centre before the sample and their change to the one after it
    first_re, first_im = np.empty((lines, channels)), np.empty((lines, channels))
    change_re, change_im = np.empty((lines, channels)), np.empty((lines, channels))
    held_before, held_after = -1, -1
    for i in range(count):
        n = start + i
        _phasors(n, start, cycles_per_sample, harmonics, re, im, step_re, step_im)
        place = n / cell - 0.5
        before = int(np.floor(place))
        if before < 0:
            before, after, fraction = 0, 0, 0.0
        elif before >= last:
            before, after, fraction = last, last, 0.0
        else:
            after, fraction = before + 1, place - before
        if before != held_before or after != held_after:
            for line in range(lines):
                for channel in range(channels):
                    first_re[line, channel] = amplitudes[before, line, channel].real
                    first_im[line, channel] = amplitudes[before, line, channel].imag
                    change_re[line, channel] = amplitudes[after, line, channel].real - first_re[line, channel]
                    change_im[line, channel] = amplitudes[after, line, channel].imag - first_im[line, channel]
            held_before, held_after = before, after
        for channel in range(channels):
            if silent[i, channel]:
                continue
            hum = 0.0
            for line in range(lines):
                a_re = first_re[line, channel] + fraction * change_re[line, channel]
                a_im = first_im[line, channel] + fraction * change_im[line, channel]
                hum += a_re * re[line] - a_im * im[line]
            out[i, channel] -= hum
