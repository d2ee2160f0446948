"""Mains hum (``sepsti.hum``): found at its frequency, subtracted as sinusoids, nothing found where there is none."""

import numpy as np
import pytest

from sepsti.hum import find_hum, measure_hum, without_hum
from test_cli_train import speech_like
from test_denoise import toy_dictionary  # noqa: F401


def _hum(n, rate, frequency, harmonics, level, rng):
    t = np.arange(n) / rate
    return level * sum(np.sin(2 * np.pi * frequency * k * t + rng.uniform(0, 6)) / k for k in harmonics)


def _pieces(y, size):
    return [y[i:i + size] for i in range(0, len(y), size)]


def _speech(rng, seconds, rate):
    return np.concatenate([speech_like(rng, seconds=1.6, rate=rate) for _ in range(int(seconds / 1.6) + 1)])[
        :int(seconds * rate)]


# 50.18 Hz: the mains may lie up to MAINS_TOLERANCE_HZ (0.2 Hz) from 50 or 60 Hz; its fifth harmonic is 0.9 Hz
# from 250 Hz, and all five are found
@pytest.mark.parametrize("rate, frequency, seconds", [(8000, 50.07, 6), (16000, 59.93, 6), (8000, 50.18, 8)])
def test_hum_is_found_at_its_frequency_and_subtracted(rng, rate, frequency, seconds):
    """Five harmonics under white noise: the fundamental to 0.005 Hz, and the hum 30 dB down; the noise stays."""
    n = seconds * rate
    background = 0.01 * rng.standard_normal(n)
    hum = _hum(n, rate, frequency, range(1, 6), 0.05, rng)
    y = background + hum
    found = find_hum(_pieces(y, 3001), rate)
    assert found is not None and list(found.harmonics) == [1, 2, 3, 4, 5]
    measured = measure_hum(_pieces(y, 3001), found)
    assert abs(measured.frequency - frequency) < 0.005
    out = np.concatenate(list(without_hum(_pieces(y, 2777), measured)))
    left = out - background
    assert 10 * np.log10(np.sum(left ** 2) / np.sum(hum ** 2)) < -30
    # pieces of any size give the same signal
    np.testing.assert_allclose(np.concatenate(list(without_hum([y], measured))), out, rtol=0, atol=1e-12)


def test_speech_keeps_its_own_harmonics(rng):
    """Speech-like sound with a 50 Hz hum 10 dB below it: what is subtracted is the hum, not the voice."""
    rate = 8000
    speech = _speech(rng, 8, rate)
    hum = _hum(len(speech), rate, 50.0, range(1, 8), 0.3 * np.std(speech), rng)
    measured = measure_hum([speech + hum], find_hum([speech + hum], rate))
    out = np.concatenate(list(without_hum([speech + hum], measured)))
    before = 10 * np.log10(np.sum(hum ** 2) / np.sum(speech ** 2))
    after = 10 * np.log10(np.sum((out - speech) ** 2) / np.sum(speech ** 2))
    assert after < before - 12, (before, after)


@pytest.mark.parametrize("kind", ["white", "speech", "tone", "one line", "off mains"])
def test_nothing_is_found_without_hum(rng, kind):
    rate, n = 8000, 8 * 8000
    t = np.arange(n) / rate
    y = {"white": lambda: rng.standard_normal(n),
         "speech": lambda: _speech(rng, 8, rate),
         "tone": lambda: np.sin(2 * np.pi * 440 * t) + 0.01 * rng.standard_normal(n),
         "one line": lambda: np.sin(2 * np.pi * 50 * t) + 0.01 * rng.standard_normal(n),
         "off mains": lambda: _hum(n, rate, 55.0, range(1, 6), 1.0, rng) + 0.01 * rng.standard_normal(n)}[kind]()
    assert find_hum(_pieces(y, 4096), rate) is None


def test_short_signals_are_not_searched(rng):
    """Hum is searched for from SHORTEST_SECONDS (2 s) on: a sample less is left alone, that length found."""
    y = _hum(16000, 8000, 50.0, range(1, 6), 1.0, rng)
    assert find_hum([y[:15999]], 8000) is None
    assert find_hum([y], 8000) is not None


def test_channels_get_their_own_amplitudes_and_silence_stays_silent(rng):
    """Two channels with the hum at other levels and phases: each as alone; stretches of exact zeros stay so,
    in one channel only and off the cells' grid; a few zeros in a row are samples like any other."""
    rate, n = 8000, 6 * 8000
    background = 0.01 * rng.standard_normal((n, 2))
    left, right = _hum(n, rate, 50.0, range(1, 5), 0.05, rng), _hum(n, rate, 50.0, range(1, 5), 0.02, rng)
    y = background + np.stack([left, right], axis=1)
    silences = {0: slice(int(2.1 * rate), int(3.1 * rate)), 1: slice(int(2.6 * rate), int(4.37 * rate) + 3)}
    for channel, silence in silences.items():
        y[silence, channel] = 0.0
    few = slice(int(1.7 * rate), int(1.7 * rate) + 40)  # 5 ms: not silence
    y[few, 0] = 0.0
    silences[2] = slice(4960, 5080)  # 15 ms across the measuring blocks' end at 5000 (40 + 80 samples)
    y[silences[2], 0] = 0.0
    measured = measure_hum(_pieces(y, 5000), find_hum(_pieces(y, 5000), rate))
    for size in (5000, 1999):
        out = np.concatenate(list(without_hum(_pieces(y, size), measured)))
        for key, silence in silences.items():
            assert not np.any(out[silence, key % 2]), key
        assert np.all(out[few, 0] != 0.0)
    for channel, hum in enumerate((left, right)):
        away = np.r_[0:int(1.5 * rate), int(5 * rate):n]  # away from the silences' edges
        left_over = out[away, channel] - background[away, channel]
        assert 10 * np.log10(np.sum(left_over ** 2) / np.sum(hum[away] ** 2)) < -25


def test_amplitudes_are_the_average_centred_on_each_cell():
    """A line whose amplitude rises linearly: each inner cell's measured amplitude is the one at its centre
    (an average over cells not centred on it would lag by a fraction of the rise)."""
    rate, n = 8000, 8 * 8000
    t = np.arange(n) / rate
    level = 0.02 + 0.01 * t  # 0.02 .. 0.1
    y = level * np.sin(2 * np.pi * 50 * t) + 0.3 * level * np.sin(2 * np.pi * 100 * t)
    measured = measure_hum([y], find_hum([y], rate))
    centres = (np.arange(len(measured.amplitudes)) + 0.5) * 0.25
    inner = slice(3, -3)
    np.testing.assert_allclose(np.abs(measured.amplitudes[inner, 0]), 0.02 + 0.01 * centres[inner], rtol=2e-3)


def test_a_stronger_candidate_that_is_not_hum_does_not_hide_hum(rng):
    """A steady 150 Hz drone puts lines on the 50 Hz grid (3, 6, 9, ...) stronger than a 60 Hz hum's but
    misses the fundamental and its double: the hum is found all the same."""
    rate, n = 8000, 8 * 8000
    y = (0.01 * rng.standard_normal(n) + _hum(n, rate, 60.0, range(1, 4), 0.05, rng)
         + _hum(n, rate, 150.0, range(1, 7), 0.2, rng))
    found = find_hum([y], rate)
    assert found is not None and abs(found.frequency - 60.0) < 0.05 and {1, 2, 3} <= set(found.harmonics)


def test_the_enhancer_subtracts_hum_before_the_model(rng, toy_dictionary):
    """Enhanced, a recording with hum comes out as the same recording without it nearly would."""
    from sepsti.denoise import denoise

    rate = 8000
    speech = _speech(rng, 6, rate)
    noise = 0.05 * np.std(speech) * rng.standard_normal(len(speech))
    hum = _hum(len(speech), rate, 60.0, range(1, 6), 0.5 * np.std(speech), rng)
    plain = denoise(speech + noise, toy_dictionary)
    with_hum = denoise(speech + noise + hum, toy_dictionary)
    assert 10 * np.log10(np.sum((with_hum - plain) ** 2) / np.sum(hum ** 2)) < -20


def test_a_noise_sample_with_hum_gives_the_model_of_the_sample_without_it(rng, tmp_path):
    """``enhance --noise-sample``: the sample's own hum is subtracted before its noise model is learned."""
    import soundfile

    from test_cli_train import run, tiny_corpus, tiny_dictionary  # noqa: F401

    rate = 8000
    speech = _speech(rng, 6, rate)
    noise = 0.1 * np.std(speech) * rng.standard_normal((2, len(speech)))
    hum = [_hum(len(speech), rate, 50.0, range(1, 6), 0.5 * np.std(speech), rng) for _ in range(2)]
    soundfile.write(tmp_path / "in.wav", speech + noise[0] + hum[0], rate, subtype="FLOAT")
    soundfile.write(tmp_path / "hum.wav", noise[1] + hum[1], rate, subtype="FLOAT")
    soundfile.write(tmp_path / "plain.wav", noise[1], rate, subtype="FLOAT")
    outputs = []
    for sample in ("hum", "plain"):
        result = run(["enhance", tmp_path / "in.wav", "-o", tmp_path / f"out_{sample}.wav", "--noise-sample",
                      tmp_path / f"{sample}.wav"])
        assert result.exit_code == 0, result.stderr
        outputs.append(soundfile.read(tmp_path / f"out_{sample}.wav")[0])
    # the same output as with the sample without hum (learned with the sample's hum, 42 dB below its hum)
    assert 10 * np.log10(np.sum((outputs[0] - outputs[1]) ** 2) / np.sum(hum[0] ** 2)) < -60


def test_kernels_match_the_sinusoids_they_stand_for(rng):
    """The numba kernels against NumPy: lines of a fundamental at 50.013 Hz over 3.3 s (phasors turned between
    exact ones every 4096 samples), amplitudes linear between cell centres, a silent cell left alone; blocks
    starting anywhere give the same samples."""
    from sepsti.hum_kernels import demodulate, subtract_hum

    rate, cell, n = 8000, 2000, 26400
    cycles, harmonics = 50.013 / rate, np.array([1, 2, 5, 13])
    amplitudes = rng.standard_normal((14, 4, 2)) + 1j * rng.standard_normal((14, 4, 2))
    silent = np.zeros((n, 2), dtype=bool)
    silent[6 * cell:7 * cell, 1] = True
    silent[100:105] = True
    samples = np.arange(n)
    phasors = np.exp(2j * np.pi * cycles * np.outer(samples, harmonics))  # (n, lines)
    place = np.clip(samples / cell - 0.5, 0, 13)
    before = np.minimum(np.floor(place).astype(int), 12)
    linear = amplitudes[before] + (place - before)[:, None, None] * (amplitudes[before + 1] - amplitudes[before])
    expected = -np.einsum("nl,nlc->nc", phasors, linear).real
    expected[silent] = 0.0
    whole = None
    for starts in ([0], [0, 4095, 4097, 9000, 20000], [0, 1, 8192, 8193, 26399]):
        out = np.zeros((n, 2))
        for first, last in zip(starts, [*starts[1:], n]):
            subtract_hum(out[first:last], first, cycles, harmonics, amplitudes, silent[first:last], cell)
        np.testing.assert_allclose(out, expected, rtol=0, atol=1e-10)
        if whole is None:
            whole = out
        np.testing.assert_array_equal(out, whole)  # to the last bit: a sample's phasors depend on its index alone
    signal = rng.standard_normal((n, 2))
    total = np.zeros((4, 2), dtype=complex)
    for first, last in ((0, 5000), (5000, 13001), (13001, n)):
        demodulate(signal[first:last], first, cycles, harmonics, total)
    np.testing.assert_allclose(total, np.conj(phasors).T @ signal, rtol=1e-10, atol=1e-9)


def test_hum_is_removed_in_the_cells_next_to_digital_silence(rng):
    """A cell partly in a run of exact zeros is measured on its other samples only: the hum is removed as
    well in the cells that straddle the silence's edges as elsewhere (the hum is known exactly)."""
    rate, n, cell = 8000, 6 * 8000, 2000
    background = 0.001 * rng.standard_normal(n)
    hum = _hum(n, rate, 50.0, range(1, 5), 0.05, rng)
    y = background + hum
    silence = slice(int(2.1 * rate), int(3.1 * rate))  # cells 8 and 12 are 60 % and 40 % silent
    y[silence] = 0.0
    background[silence] = 0.0
    measured = measure_hum([y], find_hum([y], rate))
    out = np.concatenate(list(without_hum(_pieces(y, 3001), measured)))
    assert not np.any(out[silence])
    for first in (8 * cell, 12 * cell):
        kept = np.r_[first:silence.start] if first < silence.start else np.r_[silence.stop:first + cell]
        left_over = out[kept] - background[kept]
        assert 10 * np.log10(np.sum(left_over ** 2) / np.sum(hum[kept] ** 2)) < -25, first


def test_lines_a_little_above_the_line_threshold_are_found(rng):
    """Lines LINE_DB + 1.5 dB above their surroundings are found. One 8 s segment (0.125 Hz bins) of eight
    channels of white noise: each bin's power, summed over the channels, is a Gamma(8) variable with mean
    8 · σ² Σw² (Σw² = 3L/8 for a Hann window of L samples), so the ±4 Hz median is that scale times
    Gamma(8)'s median; a line of amplitude A on a bin puts 8 · (A L / 4)² in it. A is chosen so the ratio is
    13.5 dB (the channels keep the peak and the median within about a decibel of it)."""
    from scipy.stats import gamma

    rate, channels, sigma, prominence = 8000, 8, 0.01, 13.5
    n = 8 * rate
    amplitude = np.sqrt(10 ** (prominence / 10) * sigma ** 2 * 3 * n / 8 * gamma(channels).median()
                        / (channels * (n / 4) ** 2))
    t = np.arange(n)[:, None] / rate
    y = sigma * rng.standard_normal((n, channels)) + amplitude * sum(
        np.sin(2 * np.pi * 50.0 * k * t + rng.uniform(0, 6, channels)) for k in range(1, 6))
    found = find_hum(_pieces(y, 4096), rate)
    assert found is not None and abs(found.frequency - 50.0) < 0.05 and list(found.harmonics) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("where", ["before", "after", "within"])
def test_hum_beside_long_digital_silence_is_found_and_removed_as_without_it(rng, where):
    """10 s of exact zeros (a segment and more of them) before, after or within 8 s with hum: segments that are
    mostly digital silence are left out of the search, so the hum is found as in the same signal without the
    zeros, and removed as well; the zeros stay zeros."""
    rate = 8000
    n = 8 * rate
    background = 0.01 * rng.standard_normal(n)
    hum = _hum(n, rate, 50.0, range(1, 6), 0.05, rng)
    y = background + hum
    zeros, half = np.zeros(10 * rate), n // 2
    padded, kept = {"before": (np.r_[zeros, y], np.r_[len(zeros):len(zeros) + n]),
                    "after": (np.r_[y, zeros], np.r_[0:n]),
                    "within": (np.r_[y[:half], zeros, y[half:]],
                               np.r_[0:half, half + len(zeros):n + len(zeros)])}[where]
    plain, found = find_hum(_pieces(y, 4096), rate), find_hum(_pieces(padded, 4096), rate)
    assert found is not None and list(found.harmonics) == list(plain.harmonics) == [1, 2, 3, 4, 5]
    measured = measure_hum(_pieces(padded, 4096), found)
    assert abs(measured.frequency - 50.0) < 0.005
    out = np.concatenate(list(without_hum(_pieces(padded, 4096), measured)))
    assert not np.any(np.delete(out, kept))
    left = out[kept] - background
    assert 10 * np.log10(np.sum(left ** 2) / np.sum(hum ** 2)) < -30


def test_sound_shorter_than_the_shortest_searched_is_not_searched_beside_silence(rng):
    """Beside 10 s of exact zeros, 1.9 s with hum is too little sound to search, as it is alone."""
    rate = 8000
    y = 0.01 * rng.standard_normal(19 * rate // 10) + _hum(19 * rate // 10, rate, 50.0, range(1, 6), 0.05, rng)
    assert find_hum([y], rate) is None
    assert find_hum([np.r_[np.zeros(10 * rate), y]], rate) is None
    assert find_hum([np.r_[np.zeros(10 * rate), y, y]], rate) is not None


@pytest.mark.parametrize("shape", [(2, 48000), (3, 5000)])
def test_pieces_given_channels_first_are_refused(rng, shape):
    """(channels, n) read as (n, channels) would be thousands of channels of a few samples: refused, not searched."""
    from sepsti.core.errors import ParameterError

    y = rng.standard_normal(shape)
    with pytest.raises(ParameterError, match=rf"hum search: shape \({shape[0]}, {shape[1]}\) reads as {shape[1]} "
                                             rf"channels of {shape[0]} samples .* transpose it"):
        find_hum([y], 8000)
    assert find_hum([y.T], 8000) is None  # white noise, the right way round


def test_a_line_s_amplitude_rejects_a_sinusoid_two_hertz_away():
    """The amplitudes are averaged over AVERAGE_CELLS cells of 0.25 s with the end cells at half weight: a 1 s box
    smoothed by a cell, whose response to a component δ Hz from the line is sinc(δ · 1 s) · sinc(δ · 0.25 s), zero at
    every whole hertz. A 52 Hz tone beside a 50 Hz line (and the lines' images at -50 and -52 Hz, 100 and 102 Hz
    away) leaves the line's inner amplitudes at exactly -0.1i, that of 0.1 sin(2π 50 t). With 33 cells (an odd
    number) the tone's turn of π per cell cancels from the fundamental's refinement, which stays at 50 Hz. (A box
    of five whole cells, 1.25 s, lets sinc(2.5) = 0.127 of the tone through: 0.0064.)"""
    from sepsti.hum import Hum

    rate = 8000
    t = np.arange(33 * rate // 4) / rate
    for phase in (0.0, 1.0):
        y = 0.1 * np.sin(2 * np.pi * 50 * t) + 0.05 * np.sin(2 * np.pi * 52 * t + phase)
        measured = measure_hum(_pieces(y, 3001), Hum(50.0, np.array([1]), rate))
        assert measured.frequency == pytest.approx(50.0, abs=1e-9)
        # the cells whose average lies within the signal: rounding alone
        np.testing.assert_allclose(measured.amplitudes[2:-2, 0], -0.1j, rtol=0, atol=1e-9)


@pytest.mark.parametrize("mains", [50.0, 60.0])
def test_hum_without_its_fundamental_is_found_from_its_double(rng, mains):
    """A loudspeaker too small for 50 or 60 Hz leaves the hum's double and the multiples above it; the rule is
    MIN_LINES lines among the first LOW_HARMONICS, the fundamental *or its double* among them: lines at 2, 3, 4 f0
    are hum, found at f0 with those multiples."""
    rate, n = 8000, 8 * 8000
    y = 0.01 * rng.standard_normal(n) + _hum(n, rate, mains, range(2, 5), 0.05, rng)
    found = find_hum(_pieces(y, 4096), rate)
    assert found is not None and abs(found.frequency - mains) < 0.05 and list(found.harmonics) == [2, 3, 4]


def test_lines_are_found_up_to_highest_hz(rng):
    """22 equal lines of a 50 Hz hum: the multiples up to HIGHEST_HZ (1 kHz, the 20th) are its lines, and none
    above."""
    from sepsti.hum import HIGHEST_HZ

    rate, n = 8000, 8 * 8000
    t = np.arange(n) / rate
    y = 0.01 * rng.standard_normal(n) + 0.02 * sum(np.sin(2 * np.pi * 50.0 * k * t + rng.uniform(0, 6))
                                                   for k in range(1, 23))
    found = find_hum(_pieces(y, 4096), rate)
    assert HIGHEST_HZ == 1000.0
    assert found is not None and list(found.harmonics) == list(range(1, 21))


@pytest.mark.parametrize("harmonics, found", [((2, 6), True), ((2, 7), False)])
def test_hum_needs_two_lines_among_its_first_six_multiples(rng, harmonics, found):
    """MIN_LINES (2) lines among the first LOW_HARMONICS (6) multiples, the double among them: 100 and 300 Hz are a
    50 Hz hum's lines 2 and 6, found as such; 100 and 350 Hz have one line among the six, no hum (nor on 60 Hz)."""
    rate, n = 8000, 8 * 8000
    y = 0.01 * rng.standard_normal(n) + _hum(n, rate, 50.0, harmonics, 0.05, rng)
    result = find_hum(_pieces(y, 4096), rate)
    if found:
        assert result is not None and abs(result.frequency - 50.0) < 0.05 and list(result.harmonics) == [2, 6]
    else:
        assert result is None


def test_a_line_held_for_part_of_the_signal_is_not_hum(rng):
    """12 s with a weak 50 Hz hum throughout, a strong 60 Hz one from 1.5 to 4 s only (the first 8 s segment alone
    finds it), and 2 s of exact zeros across both 8 s segments (0-8 s and 4-12 s, half overlapping): each segment
    is mostly sound, so both are searched, and the least of their spectra holds the 50 Hz lines alone."""
    rate, n = 8000, 12 * 8000
    y = 0.01 * rng.standard_normal(n) + _hum(n, rate, 50.0, range(1, 5), 0.03, rng)
    y[int(1.5 * rate):4 * rate] += _hum(int(2.5 * rate), rate, 60.0, range(1, 5), 1.0, rng)
    y[int(5.5 * rate):int(7.5 * rate)] = 0.0
    assert abs(find_hum([y[:8 * rate]], rate).frequency - 60.0) < 0.05
    found = find_hum(_pieces(y, 4096), rate)
    assert found is not None and abs(found.frequency - 50.0) < 0.05


def test_a_run_of_zeros_as_long_as_silence_seconds_is_silence(rng):
    """SILENCE_SECONDS (10 ms, 80 samples at 8 kHz) of exact zeros or more is digital silence, left so: a run of
    80 within the signal and one of 80 at its end stay zeros; a run of 79 is samples like any other."""
    rate, n = 8000, 6 * 8000
    y = 0.01 * rng.standard_normal(n) + _hum(n, rate, 50.0, range(1, 5), 0.05, rng)
    runs = {"within": slice(20000, 20080), "end": slice(n - 80, n)}
    shorter = slice(30000, 30079)
    for run in (*runs.values(), shorter):
        y[run] = 0.0
    measured = measure_hum(_pieces(y, 3001), find_hum(_pieces(y, 3001), rate))
    out = np.concatenate(list(without_hum(_pieces(y, 3001), measured)))
    for where, run in runs.items():
        assert not np.any(out[run]), where
    assert np.all(out[shorter] != 0.0)


def test_hum_on_one_channel_beside_a_dead_one_is_found(rng):
    """A segment is left out only when it is digital silence in every channel: a stereo recording whose second
    channel is all zeros is searched on its first, and its hum found; the dead channel stays zeros."""
    rate, n = 8000, 8 * 8000
    y = np.zeros((n, 2))
    y[:, 0] = 0.01 * rng.standard_normal(n) + _hum(n, rate, 50.0, range(1, 5), 0.05, rng)
    found = find_hum(_pieces(y, 4096), rate)
    assert found is not None and abs(found.frequency - 50.0) < 0.05 and list(found.harmonics) == [1, 2, 3, 4]
    out = np.concatenate(list(without_hum(_pieces(y, 4096), measure_hum(_pieces(y, 4096), found))))
    assert not np.any(out[:, 1])
