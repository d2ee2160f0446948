"""The peer benchmark (``recipes/benchmarks/enhance_vs_peers.py``) on pairs that stopped it or that it misread: a
noise label on some pairs only, one sentence (no interval), a pair of 200 samples, a multichannel pair."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile

from sepsti.core.errors import ParameterError
from test_cli_train import speech_like

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes" / "benchmarks"))

import enhance_vs_peers  # noqa: E402

RATE = 8000


def _write(folder, name, clean, noisy):
    for kind, y in (("clean", clean), ("noisy", noisy)):
        (folder / kind).mkdir(exist_ok=True)
        soundfile.write(folder / kind / f"{name}.wav", y, RATE, subtype="FLOAT")


def _run(folder, *options):
    enhance_vs_peers.main(["--clean", str(folder / "clean"), "--noisy", str(folder / "noisy"), "--methods", "sepsti",
                           "--out", str(folder / "out"), *options])
    return json.loads((folder / "out" / "enhance_vs_peers.json").read_text())


def test_pairs_labelled_with_a_noise_in_part_and_one_sentence(tmp_path, rng, capsys):
    """An optional noise group leaves one pair without a noise (a KeyError after all the work): it is left out of
    the per-noise means. One sentence is one replicate: its leads print without an interval (was [+nan, +nan])."""
    speech = speech_like(rng, seconds=2.0, rate=RATE)
    for name, snr in (("sp21_car_sn0", 0), ("sp21_car_sn5", 5), ("sp21_sn10", 10)):
        noise = rng.standard_normal(speech.size)
        _write(tmp_path, name, speech, speech + noise * np.std(speech) * 10 ** (-snr / 20))
    results = _run(tmp_path, "--names", r"(?P<sentence>sp\d+)(?:_(?P<noise>[a-z]+))?_sn(?P<snr>\d+)")
    assert [row.get("noise") for row in results["results"]] == ["car", "car", None]
    cells = results["per_noise"]["car"]
    assert np.isfinite(cells["0"]["input"]["sdr"]) and np.isfinite(cells["5"]["input"]["sdr"])
    assert cells["10"]["input"]["sdr"] is None  # no car pair at 10 dB (NaN, null in the JSON)
    lead = results["lead"]["input"]["sdr"]
    assert all(cell["low"] is None for cell in lead.values())
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("over input")]
    assert len(lines) == 2 and not any("nan" in line for line in lines), lines
    sdr = " ".join(f"{lead[str(snr)]['mean']:+.2f} 1/1" for snr in (0, 5, 10))
    assert " ".join(lines[0].split()[2:]) == sdr


def test_a_pair_of_200_samples_is_scored_without_an_error(tmp_path, rng):
    """pystoi failed on less than one of its frames: STOI is now undefined there, as for too little speech."""
    speech = speech_like(rng, seconds=1.0, rate=RATE)[4000:4200]
    _write(tmp_path, "t", speech, speech + 0.01 * rng.standard_normal(speech.size))
    with pytest.warns(RuntimeWarning, match="less than 384 ms of active clean speech"):
        results = _run(tmp_path, "--bands")
    (row,) = results["results"]
    assert row["input"]["stoi"] is None and row["sepsti"]["stoi"] is None
    assert all(value is None for value in row["bands"]["input"]["stoi"])


def test_a_multichannel_pair_is_refused_before_any_work(tmp_path, rng):
    """The peers enhance one channel: a multichannel pair is refused (it was scored as its downmix), naming it."""
    speech = speech_like(rng, seconds=1.0, rate=RATE)
    _write(tmp_path, "a", speech, speech + 0.01 * rng.standard_normal(speech.size))
    clean = np.stack([speech, -speech], axis=1)
    _write(tmp_path, "b", clean, clean + 0.01 * rng.standard_normal(clean.shape))
    with pytest.raises(ParameterError, match=r"noisy/b.wav: 2 channels; the peers enhance mono files"):
        _run(tmp_path)
    assert not (tmp_path / "out").exists()
