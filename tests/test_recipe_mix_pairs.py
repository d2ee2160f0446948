"""``recipes/benchmarks/mix_pairs.py``: what it writes, the samples it clips, file by file, and what ``--overwrite``
replaces."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes" / "benchmarks"))

import mix_pairs  # noqa: E402

from sepsti.core.errors import ParameterError  # noqa: E402


def _tone_and_hiss(folder, rng):
    """A 3 s tone at 8 kHz as the speech and white noise as the noise type ``hiss``: their options."""
    (folder / "speech").mkdir()
    (folder / "hiss").mkdir()
    t = np.arange(3 * 8000) / 8000
    soundfile.write(folder / "speech" / "tone.wav", 0.5 * np.sin(2 * np.pi * 440 * t), 8000, subtype="FLOAT")
    soundfile.write(folder / "hiss" / "hiss.wav", 0.1 * rng.standard_normal(4 * 8000), 8000, subtype="FLOAT")
    return ["--speech", folder / "speech", "--noise", f"hiss={folder / 'hiss'}"]


def _mix(monkeypatch, *options):
    monkeypatch.setattr(sys, "argv", ["recipes/benchmarks/mix_pairs.py", *map(str, options)])
    mix_pairs.main()


def test_clipped_samples_are_counted_per_file_and_recorded(tmp_path, rng, monkeypatch, capsys):
    """White noise 20 dB above a −26 dBFS tone runs beyond full scale in some samples: their count is printed
    and recorded for that file; 20 dB below it, nothing is clipped. The files are as before (np.clip)."""
    out = tmp_path / "out"
    _mix(monkeypatch, *_tone_and_hiss(tmp_path, rng), "--snr=-20,20", "--out", out)
    clipped = json.loads((out / "mix_pairs.json").read_text())["clipped"]
    assert set(clipped) == {"tone_hiss_sn-20.wav", "tone_hiss_sn20.wav"} and clipped["tone_hiss_sn20.wav"] == 0
    loud, _ = soundfile.read(out / "noisy" / "tone_hiss_sn-20.wav")
    # 16-bit PCM holds the clipped samples at full scale, and a sample there by chance is unlikely
    assert clipped["tone_hiss_sn-20.wav"] == np.sum(np.abs(loud) >= 32767 / 32768) > 100
    printed = [line for line in capsys.readouterr().out.splitlines() if "full scale" in line]
    assert printed == [f"tone_hiss_sn-20.wav: {clipped['tone_hiss_sn-20.wav']} samples beyond full scale, clipped"]


def test_overwrite_replaces_the_pairs_of_an_earlier_run_and_nothing_else(tmp_path, rng, monkeypatch):
    """``--overwrite`` never took effect (``OUT/noisy exists; give another --out``): pairs of other settings are
    refused without it and replaced with it; a folder holding a file the recipe did not write is refused, the
    file kept."""
    inputs, out = _tone_and_hiss(tmp_path, rng), tmp_path / "out"
    _mix(monkeypatch, *inputs, "--snr", "0,5", "--out", out)
    (out / "mix_pairs.json").unlink()  # the folders' own check, not the results'
    with pytest.raises(ParameterError, match=r"clean: holds the files of a run with other settings \(snrs \[0, 5\] "
                                             r"there, \[10\] now\)"):
        _mix(monkeypatch, *inputs, "--snr", "10", "--out", out)
    _mix(monkeypatch, *inputs, "--snr", "10", "--out", out, "--overwrite")
    for kind in ("clean", "noisy"):
        assert sorted(path.name for path in (out / kind).iterdir()) == [".recipe.json", "tone_hiss_sn10.wav"]
    (out / "noisy" / "mine.wav").write_bytes(b"")
    with pytest.raises(ParameterError, match=r"noisy: holds files its run did not write \(1, e.g. mine.wav\)"):
        _mix(monkeypatch, *inputs, "--snr", "15", "--out", out, "--overwrite")
    assert (out / "noisy" / "mine.wav").exists() and (out / "clean" / "tone_hiss_sn10.wav").exists()
