"""``recipes/benchmarks/mix_pairs.py``: what it writes, and the samples it clips, file by file."""

import json
import sys
from pathlib import Path

import numpy as np
import soundfile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes" / "benchmarks"))

import mix_pairs  # noqa: E402


def test_clipped_samples_are_counted_per_file_and_recorded(tmp_path, rng, monkeypatch, capsys):
    """White noise 20 dB above a −26 dBFS tone runs beyond full scale in some samples: their count is printed
    and recorded for that file; 20 dB below it, nothing is clipped. The files are as before (np.clip)."""
    (tmp_path / "speech").mkdir()
    (tmp_path / "hiss").mkdir()
    t = np.arange(3 * 8000) / 8000
    soundfile.write(tmp_path / "speech" / "tone.wav", 0.5 * np.sin(2 * np.pi * 440 * t), 8000, subtype="FLOAT")
    soundfile.write(tmp_path / "hiss" / "hiss.wav", 0.1 * rng.standard_normal(4 * 8000), 8000, subtype="FLOAT")
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["recipes/benchmarks/mix_pairs.py", "--speech", str(tmp_path / "speech"),
                                      "--noise", f"hiss={tmp_path / 'hiss'}", "--snr=-20,20", "--out", str(out)])
    mix_pairs.main()
    clipped = json.loads((out / "mix_pairs.json").read_text())["clipped"]
    assert set(clipped) == {"tone_hiss_sn-20.wav", "tone_hiss_sn20.wav"} and clipped["tone_hiss_sn20.wav"] == 0
    loud, _ = soundfile.read(out / "noisy" / "tone_hiss_sn-20.wav")
    # 16-bit PCM holds the clipped samples at full scale, and a sample there by chance is unlikely
    assert clipped["tone_hiss_sn-20.wav"] == np.sum(np.abs(loud) >= 32767 / 32768) > 100
    printed = [line for line in capsys.readouterr().out.splitlines() if "full scale" in line]
    assert printed == [f"tone_hiss_sn-20.wav: {clipped['tone_hiss_sn-20.wav']} samples beyond full scale, clipped"]
