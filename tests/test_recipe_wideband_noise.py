"""``enhance_wideband.py --noise-dir``: excerpts of noise recordings, at the mixture's rate."""

import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes" / "benchmarks"))

from enhance_wideband import _noise, _readable  # noqa: E402


def _tone(path, frequency, seconds, rate, channels=1):
    t = np.arange(int(seconds * rate)) / rate
    y = 0.5 * np.sin(2 * np.pi * frequency * t)
    soundfile.write(path, np.repeat(y[:, None], channels, axis=1) if channels > 1 else y, rate)


def _peak_hz(y, rate):
    spectrum = np.abs(np.fft.rfft(y * np.hanning(len(y))))
    return np.fft.rfftfreq(len(y), 1 / rate)[np.argmax(spectrum)]


def test_an_excerpt_is_resampled_to_the_mixture_rate(tmp_path):
    """A 1 kHz tone recorded at 44.1 kHz in stereo comes out at 16 kHz, 1 kHz, unit RMS, the length asked."""
    _tone(tmp_path / "tone.ogg", 1000.0, 3.0, 44100, channels=2)
    y = _noise("recorded", 16000, 16000, np.random.default_rng(0), [], [tmp_path / "tone.ogg"])
    assert y.shape == (16000,)
    assert abs(np.std(y) - 1.0) < 1e-9
    assert abs(_peak_hz(y, 16000) - 1000.0) < 2.0


def test_a_short_recording_is_repeated_and_each_mixture_draws_its_own(tmp_path):
    """0.2 s of tone fills 1 s; of two recordings, both are drawn over several mixtures."""
    _tone(tmp_path / "low.wav", 500.0, 0.2, 16000)
    _tone(tmp_path / "high.wav", 3000.0, 0.2, 16000)
    recordings = sorted(tmp_path.glob("*.wav"))
    peaks = set()
    for seed in range(8):
        y = _noise("recorded", 16000, 16000, np.random.default_rng(seed), [], recordings)
        assert np.std(y[-1600:]) > 0.9  # the last 0.1 s is tone at the full level, not zeros
        peaks.add(round(_peak_hz(y, 16000)))
    assert peaks == {500, 3000}


def test_only_audio_files_are_recordings(tmp_path):
    _tone(tmp_path / "tone.flac", 440.0, 0.5, 16000)
    (tmp_path / "README.txt").write_text("not audio")
    assert _readable(tmp_path / "tone.flac")
    assert not _readable(tmp_path / "README.txt")


def test_silence_in_a_recording_is_never_the_noise(tmp_path):
    """A track whose first second is silent: an excerpt from there (43 % of the starts) is drawn again.

    A recording that is all silence is an error.
    """
    t = np.arange(16000) / 16000
    soundfile.write(tmp_path / "tail.wav", np.concatenate([np.zeros(16000), 0.3 * np.sin(2e3 * np.pi * t)]), 16000)
    for seed in range(20):
        y = _noise("recorded", 4000, 16000, np.random.default_rng(seed), [], [tmp_path / "tail.wav"])
        assert np.isfinite(y).all() and abs(np.std(y) - 1.0) < 1e-9
    soundfile.write(tmp_path / "silence.wav", np.zeros(16000), 16000)
    with pytest.raises(SystemExit, match="quieter than"):
        _noise("recorded", 4000, 16000, np.random.default_rng(0), [], [tmp_path / "silence.wav"])
