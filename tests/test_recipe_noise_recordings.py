"""Noise recordings in the benchmarks (``enhance_wideband.py --noise-dir``, ``mix_pairs.py``)."""

import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes" / "benchmarks"))

from _recordings import excerpt  # noqa: E402
from mix_pairs import noise_types  # noqa: E402

from sepsti.core.errors import ParameterError  # noqa: E402

# the synthetic wideband corpora here are not the distributed speaker set, whose split they would move
pytestmark = pytest.mark.filterwarnings("ignore:wideband manifest:UserWarning")


def _tone(path, frequency, seconds, rate, channels=1):
    t = np.arange(int(seconds * rate)) / rate
    y = 0.5 * np.sin(2 * np.pi * frequency * t)
    soundfile.write(path, np.repeat(y[:, None], channels, axis=1) if channels > 1 else y, rate)


def _peak_hz(y, rate):
    spectrum = np.abs(np.fft.rfft(y * np.hanning(len(y))))
    return np.fft.rfftfreq(len(y), 1 / rate)[np.argmax(spectrum)]


def test_an_excerpt_is_resampled_to_the_mixture_rate(tmp_path):
    """A 1 kHz tone recorded at 44.1 kHz in stereo comes out at 16 kHz, 1 kHz, at its own level, the length asked."""
    _tone(tmp_path / "tone.ogg", 1000.0, 3.0, 44100, channels=2)
    y = excerpt([tmp_path / "tone.ogg"], 16000, 16000, np.random.default_rng(0))
    assert y.shape == (16000,)
    assert abs(np.std(y) - 0.5 / np.sqrt(2)) < 0.01  # the tone's own level
    assert abs(_peak_hz(y, 16000) - 1000.0) < 2.0


def test_a_short_recording_is_repeated_and_each_mixture_draws_its_own(tmp_path):
    """0.2 s of tone fills 1 s; of two recordings, both are drawn over several mixtures."""
    _tone(tmp_path / "low.wav", 500.0, 0.2, 16000)
    _tone(tmp_path / "high.wav", 3000.0, 0.2, 16000)
    recordings = sorted(tmp_path.glob("*.wav"))
    peaks = set()
    for seed in range(8):
        y = excerpt(recordings, 16000, 16000, np.random.default_rng(seed))
        assert np.std(y[-1600:]) > 0.3  # the last 0.1 s is tone at its level (0.35), not zeros
        peaks.add(round(_peak_hz(y, 16000)))
    assert peaks == {500, 3000}


def test_only_audio_files_are_recordings(tmp_path):
    """Audio files at any depth, in name order; a text file is not one."""
    from sepsti.corpora.audio import audio_files

    (tmp_path / "b").mkdir()
    _tone(tmp_path / "b" / "tone.flac", 440.0, 0.5, 16000)
    _tone(tmp_path / "a.wav", 440.0, 0.5, 16000)
    (tmp_path / "README.txt").write_text("not audio")
    assert audio_files(tmp_path) == [tmp_path / "a.wav", tmp_path / "b" / "tone.flac"]


def test_noise_types_by_name(tmp_path):
    """``--noise NAME=DIR`` draws from DIR's recordings at the rate asked; bad names and empty folders are refused."""
    _tone(tmp_path / "hum.wav", 100.0, 2.0, 8000)
    types = noise_types([f"hum={tmp_path}"], None)
    y = types["hum"](16000, 16000, np.random.default_rng(0))
    assert y.shape == (16000,) and abs(_peak_hz(y, 16000) - 100.0) < 2.0
    for spec in ("Hum=" + str(tmp_path), "hum", f"hum_2={tmp_path}"):
        with pytest.raises(ParameterError, match="NAME=DIR"):
            noise_types([spec], None)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ParameterError, match="no audio file"):
        noise_types([f"none={tmp_path / 'empty'}"], None)


def test_silence_in_a_recording_is_never_the_noise(tmp_path):
    """A track whose first second is silent: an excerpt from there (43 % of the starts) is drawn again.

    A recording that is all silence is an error.
    """
    t = np.arange(16000) / 16000
    soundfile.write(tmp_path / "tail.wav", np.concatenate([np.zeros(16000), 0.3 * np.sin(2e3 * np.pi * t)]), 16000)
    for seed in range(20):
        y = excerpt([tmp_path / "tail.wav"], 4000, 16000, np.random.default_rng(seed))
        assert np.isfinite(y).all() and np.std(y) > 0.01
    soundfile.write(tmp_path / "silence.wav", np.zeros(16000), 16000)
    with pytest.raises(ParameterError, match="quieter than"):
        excerpt([tmp_path / "silence.wav"], 4000, 16000, np.random.default_rng(0))


def test_noizeus_noise_is_the_mixtures_noise(noizeus_root):
    """``--noizeus``: each type's noise is noisy − clean of its highest-SNR test mixtures, end to end."""
    from sepsti.corpora.noizeus import mixtures

    noises = noise_types([], noizeus_root)
    chosen = list(mixtures(noizeus_root, noises=["car"], snrs=[15]))
    if not chosen:
        pytest.skip("the NOIZEUS folder has no car mixtures at 15 dB")
    expected = np.concatenate([m.noisy - m.clean for m in chosen])
    y = noises["car"](len(expected), chosen[0].sample_rate, np.random.default_rng(0))
    # an excerpt of the noise put end to end with itself: the same samples, circularly shifted
    shift = np.argmax(np.abs(np.fft.irfft(np.fft.rfft(y) * np.conj(np.fft.rfft(expected)))))
    assert np.allclose(np.roll(expected, shift), y, atol=1e-12)


def test_a_name_taken_twice_is_refused(tmp_path, noizeus_root):
    _tone(tmp_path / "hum.wav", 100.0, 2.0, 8000)
    with pytest.raises(ParameterError, match="has a noise type of that name"):
        noise_types([f"car={tmp_path}"], noizeus_root)


def test_two_microphone_recordings_are_what_enhance_channels_says(tmp_path, rng):
    """The right channel: the left's speech 0.3 ms later and 2 dB down, plus its own draw of the noise at the
    left noise's power; the left channel at the SNR in its name; each channel also written alone."""
    from enhance_channels import make_recordings
    from test_cli_train import _wideband_corpus

    from sepsti.corpora import wideband

    corpus = _wideband_corpus(tmp_path / "wide", rng)
    split = next(s for s in ("test", "validation") if any(
        u[2] == wideband.TRAIN_RATE for u in wideband.clean_signals(corpus, s)))
    recordings = make_recordings(corpus, split, tmp_path / "out", files=1, noises=["white"], snrs=[5],
                                 seconds=8.0, delay=0.3125, level=2.0, seed=0)
    (name, clean, kind, snr, _), = recordings
    assert (kind, snr) == ("white", 5) and clean.shape[1] == 2
    np.testing.assert_allclose(clean[5:, 1], 10 ** (-2 / 20) * clean[:-5, 0])  # 5 samples at 16 kHz
    stereo, rate = soundfile.read(tmp_path / "out" / "stereo" / name)
    assert rate == 16000 and stereo.shape == clean.shape
    noise = stereo - clean
    assert abs(10 * np.log10(np.sum(clean[:, 0] ** 2) / np.sum(noise[:, 0] ** 2)) - 5) < 0.01
    assert abs(np.std(noise[:, 1]) / np.std(noise[:, 0]) - 1) < 0.01
    assert abs(np.corrcoef(noise.T)[0, 1]) < 0.05  # independent draws
    for side, channel in (("left", 0), ("right", 1)):
        np.testing.assert_array_equal(soundfile.read(tmp_path / "out" / side / name)[0], stereo[:, channel])


def test_wideband_mixtures_of_other_settings_are_refused_unless_overwrite(tmp_path, rng):
    """``enhance_wideband.py`` (and the recipes that alter its mixtures) keep them in ``OUT/noisy_<split>`` and
    ``OUT/clean_<split>``: a run with another ``--seed`` (and another ``--label``) rewrote them silently. The same
    settings share them; others are refused, and replace them with ``--overwrite``."""
    from enhance_wideband import make_mixtures
    from test_cli_train import _wideband_corpus

    corpus = _wideband_corpus(tmp_path / "wide", rng)
    noisy, clean = tmp_path / "out" / "noisy_test", tmp_path / "out" / "clean_test"

    def held(folders):
        # the samples, rate and format, not the bytes: libsndfile stamps a float file's PEAK chunk with the second
        # it was written in
        def content(path):
            with soundfile.SoundFile(path) as audio:
                return audio.read().tobytes(), audio.samplerate, audio.subtype
        return {(folder.name, path.name): content(path) for folder in folders for path in folder.glob("*.wav")}

    def mix(seed, overwrite=False):
        make_mixtures(corpus, "test", noisy, clean_folder=clean, files=1, noises=["white"], snrs=[5], seconds=1.0,
                      rate48=0, seed=seed, overwrite=overwrite)
        return held((noisy, clean))

    first = mix(0)
    assert mix(0) == first and len(first) == 2
    with pytest.raises(ParameterError, match=r"noisy_test: holds the files of a run with other settings \(seed 0 "
                                             r"there, 1 now\); pass --overwrite"):
        mix(1)
    assert held((noisy,)).items() <= first.items()
    replaced = mix(1, overwrite=True)
    assert replaced.keys() == first.keys() and replaced != first
