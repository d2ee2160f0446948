"""``sepsti evaluate`` on multichannel pairs: enhanced as ``sepsti enhance`` enhances the file, channels kept, each
channel scored against the clean file's matching one, the file's score their mean."""

import json
import warnings

import numpy as np
import pytest
import soundfile

from test_cli_train import assert_one_line_error, run, speech_like

RATE = 8000


def _write_pair(root, clean, noisy, name="p"):
    for kind, y in (("clean", clean), ("noisy", noisy)):
        (root / kind).mkdir(parents=True, exist_ok=True)
        soundfile.write(root / kind / f"{name}.wav", y, RATE, subtype="FLOAT")
    return root / "clean", root / "noisy"


def _opposite_channels(rng, seconds=2.0):
    """Clean speech and its opposite in two channels (their downmix is silence), each in noise of its own."""
    speech = speech_like(rng, seconds=seconds, rate=RATE)
    clean = np.stack([speech, -speech], axis=1)
    noise = np.stack([0.03 * rng.standard_normal(speech.size), 0.02 * rng.standard_normal(speech.size)], axis=1)
    return clean, clean + noise


def _channel_mean(clean, noisy, speech):
    """BSS_EVAL, STOI and PESQ of each channel on its own, averaged over the channels."""
    from sepsti.metrics import bss_eval, pesq, stoi

    scores = []
    for channel in range(clean.shape[1]):
        c, y, s = clean[:, channel], noisy[:, channel], speech[:, channel]
        scores.append({**bss_eval(c, y, s), "stoi": stoi(c, s, RATE), "pesq": pesq(c, s, RATE)})
    return {metric: np.mean([channel[metric] for channel in scores]) for metric in scores[0]}


def test_a_stereo_pair_is_enhanced_as_enhance_does_and_scored_channel_by_channel(tmp_path, rng):
    """Channels of opposite polarity: the mono downmix evaluate scored was silence (every score undefined); now the
    input's scores are the means of each channel's, and the output is what `sepsti enhance` writes for the file."""
    clean, noisy = _opposite_channels(rng)
    clean_root, noisy_root = _write_pair(tmp_path, clean, noisy)
    result = run(["evaluate", "--clean", clean_root, "--noisy", noisy_root, "--iterations", 5,
                  "--json", tmp_path / "s.json"])
    assert result.exit_code == 0, result.stderr
    (row,) = json.loads((tmp_path / "s.json").read_text())["results"]
    enhanced = run(["enhance", noisy_root / "p.wav", "-o", tmp_path / "out.wav", "--iterations", 5])
    assert enhanced.exit_code == 0, enhanced.stderr
    clean, noisy = (soundfile.read(root / "p.wav")[0] for root in (clean_root, noisy_root))  # as stored: float32
    output, rate = soundfile.read(tmp_path / "out.wav")
    assert rate == RATE and output.shape == noisy.shape
    expected = _channel_mean(clean, noisy, noisy)
    for metric in ("sdr", "sir", "stoi", "pesq"):
        assert row["input"][metric] == pytest.approx(expected[metric], abs=1e-9), metric
    assert row["input"]["sar"] is None  # infinite in each channel
    expected = _channel_mean(clean, noisy, output)  # enhance's file holds float32: a hair from evaluate's float64
    for metric, tolerance in (("sdr", 1e-3), ("sir", 1e-3), ("sar", 1e-3), ("stoi", 1e-4), ("pesq", 1e-3)):
        assert row["enhanced"][metric] == pytest.approx(expected[metric], abs=tolerance), metric
    assert row["enhanced"]["sdr"] > row["input"]["sdr"] + 3


def test_scores_of_channels_are_their_mean_and_warnings_name_the_channel(rng):
    """A second channel whose clean speech is silent leaves the file's scores undefined, and says which channel."""
    from sepsti.commands.evaluate import score_signals
    from sepsti.corpora.pairs import Pair

    speech = speech_like(rng, seconds=1.0, rate=RATE)
    clean = np.stack([speech, np.zeros_like(speech)], axis=1)
    noisy = clean + 0.01 * rng.standard_normal(clean.shape)
    pair = Pair("p", clean, noisy, RATE, "noisy/p.wav")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scores = score_signals(pair, {"input": noisy}, ("sdr", "stoi"))["input"]
    assert np.isnan(scores["sdr"]) and np.isnan(scores["stoi"])
    assert sorted(str(w.message) for w in caught) == [
        "noisy/p.wav: channel 2: bss_eval: the clean reference is silent; SDR/SIR/SAR are undefined (NaN)",
        "noisy/p.wav: channel 2: stoi: the clean reference is silent; ESTOI is undefined (NaN)",
        "noisy/p.wav: channel 2: stoi: the clean reference is silent; STOI is undefined (NaN)"]
    alike = Pair("p", np.stack([speech, speech], axis=1), np.stack([noisy[:, 0]] * 2, axis=1), RATE, "p.wav")
    both = score_signals(alike, {"input": alike.noisy}, ("sdr", "stoi"))["input"]
    one = score_signals(Pair("p", speech, noisy[:, 0], RATE, "p.wav"), {"input": noisy[:, 0]}, ("sdr", "stoi"))
    assert both == one["input"]


def test_a_pair_whose_files_differ_in_channels_is_refused_before_any_work(tmp_path, rng):
    clean, noisy = _opposite_channels(rng, seconds=1.0)
    clean_root, noisy_root = _write_pair(tmp_path, clean[:, 0], noisy)
    result = run(["evaluate", "--clean", clean_root, "--noisy", noisy_root, "--json", tmp_path / "s.json"])
    assert_one_line_error(result, str(noisy_root / "p.wav"), "has 2 channels but its clean file",
                          "has 1; a pair's files must have as many channels")
    assert not (tmp_path / "s.json").exists()
