"""``sepsti evaluate`` on multichannel pairs: enhanced as ``sepsti enhance`` enhances the file, channels kept, each
channel scored against the clean file's matching one (or its only one), the file's score their mean."""

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


def _two_talkers(rng, seconds=2.0):
    """Two talkers, one in each channel, each in noise of its own."""
    speech = np.stack([speech_like(rng, seconds=seconds, rate=RATE) for _ in range(2)], axis=1)
    noise = np.stack([0.03 * rng.standard_normal(len(speech)), 0.02 * rng.standard_normal(len(speech))], axis=1)
    return speech, speech + noise


def _channel_mean(clean, noisy, speech):
    """BSS_EVAL, STOI and PESQ of each channel on its own, averaged over the channels."""
    from sepsti.metrics import bss_eval, pesq, stoi

    scores = []
    for channel in range(clean.shape[1]):
        c, y, s = clean[:, channel], noisy[:, channel], speech[:, channel]
        scores.append({**bss_eval(c, y, s), "stoi": stoi(c, s, RATE), "pesq": pesq(c, s, RATE)})
    return {metric: np.mean([channel[metric] for channel in scores]) for metric in scores[0]}


def test_a_stereo_pair_is_enhanced_as_enhance_does_and_scored_channel_by_channel(tmp_path, rng):
    """Two talkers: evaluate scored their mono downmix against the clean downmix; now the input's scores are the
    means of each channel's against its own talker, and the output is what `sepsti enhance` writes for the file."""
    clean, noisy = _two_talkers(rng)
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


def test_a_stereo_pair_too_short_to_enhance_is_said_to_be_scored_unchanged(tmp_path, rng):
    """One second is too short to learn the noise from: one line naming the file says why, and the output's scores
    are the input's."""
    clean, noisy = _two_talkers(rng, seconds=1.0)
    clean_root, noisy_root = _write_pair(tmp_path, clean, noisy)
    result = run(["evaluate", "--clean", clean_root, "--noisy", noisy_root, "--iterations", 3,
                  "--json", tmp_path / "s.json"])
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "scored unchanged" in line]
    assert len(lines) == 1 and lines[0].startswith(f"Warning: {noisy_root / 'p.wav'}: too short"), result.stderr
    (row,) = json.loads((tmp_path / "s.json").read_text())["results"]
    assert row["enhanced"].keys() == row["input"].keys()
    for metric, value in row["input"].items():  # the input's SAR is infinite: null
        assert row["enhanced"][metric] == (None if value is None else pytest.approx(value, rel=1e-9)), metric


def test_scores_of_channels_are_their_mean_where_defined_and_warnings_name_the_channel(rng):
    """A second channel whose clean speech is silent leaves the file with the first channel's scores, and says which
    channel has none (the file had no score at all)."""
    from sepsti.commands.evaluate import score_signals
    from sepsti.corpora.pairs import Pair

    clean, noisy = _two_talkers(rng, seconds=1.0)
    clean[:, 1] = 0.0
    pair = Pair("p", clean, noisy, RATE, "noisy/p.wav")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scores = score_signals(pair, {"input": noisy}, ("sdr", "stoi"))["input"]
    first = score_signals(Pair("p", clean[:, 0], noisy[:, 0], RATE, "p.wav"), {"input": noisy[:, 0]}, ("sdr", "stoi"))
    assert scores == first["input"] and np.isfinite(scores["sdr"])
    assert sorted(str(w.message) for w in caught) == [
        "noisy/p.wav: channel 2: bss_eval: the clean reference is silent; SDR/SIR/SAR are undefined (NaN)",
        "noisy/p.wav: channel 2: stoi: the clean reference is silent; ESTOI is undefined (NaN)",
        "noisy/p.wav: channel 2: stoi: the clean reference is silent; STOI is undefined (NaN)"]


def test_a_mono_clean_file_is_every_channels_reference(rng):
    from sepsti.commands.evaluate import score_signals
    from sepsti.corpora.pairs import Pair

    clean, noisy = _two_talkers(rng, seconds=1.0)
    noisy = clean[:, :1] + (noisy - clean)  # the first talker in both channels, in two noises
    both = score_signals(Pair("p", clean[:, 0], noisy, RATE, "p.wav"), {"input": noisy}, ("sdr", "stoi"))["input"]
    each = [score_signals(Pair("p", clean[:, 0], noisy[:, c], RATE, "p.wav"), {"input": noisy[:, c]},
                          ("sdr", "stoi"))["input"] for c in range(2)]
    assert each[1]["sdr"] > each[0]["sdr"] + 1  # the second noise is weaker
    for metric in ("sdr", "stoi"):
        assert both[metric] == pytest.approx((each[0][metric] + each[1][metric]) / 2, rel=1e-12)


def test_a_pair_whose_files_differ_in_channels_is_refused_before_any_work(tmp_path, rng):
    clean, noisy = _two_talkers(rng, seconds=1.0)
    clean_root, noisy_root = _write_pair(tmp_path, clean, noisy[:, :1] * [[1, 1, 1]])
    result = run(["evaluate", "--clean", clean_root, "--noisy", noisy_root, "--json", tmp_path / "s.json"])
    assert_one_line_error(result, str(noisy_root / "p.wav"), "has 3 channels but its clean file",
                          "has 2; a pair's files must have as many channels, or the clean file one")
    assert not (tmp_path / "s.json").exists()
