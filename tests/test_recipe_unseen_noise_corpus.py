"""``recipes/benchmarks/unseen_noise_corpus.py``: the samples its mixtures clip, file by file."""

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes" / "benchmarks"))

import unseen_noise_corpus  # noqa: E402


def test_clipped_samples_are_counted_per_file_and_recorded(tmp_path, rng, monkeypatch, capsys):
    """A crowd of four clicks: scaled to 0 and 5 dB below a quiet sentence they run beyond full scale (2.1 and 1.2
    times it), at 10 and 15 dB they do not; the other noises stay far below it."""
    import sepsti.corpora.noizeus as noizeus
    import sepsti.corpora.wideband as wideband

    t = np.arange(16000) / 8000
    sentence = 0.05 * np.sin(2 * np.pi * 300 * t)
    monkeypatch.setattr(noizeus, "clean_signals", lambda corpus, split: [("sp21", sentence, 8000)])
    monkeypatch.setattr(wideband, "is_wideband_corpus", lambda folder: True)
    monkeypatch.setattr(wideband, "clean_signals", lambda folder, split: [])

    def make_noise(kind, pool, n, rng):
        if kind != "crowd":
            return rng.standard_normal(n)
        clicks = np.zeros(n)
        clicks[[1000, 5000, 9000, 13000]] = [1.0, -1.0, 1.0, -1.0]
        return clicks

    monkeypatch.setattr(unseen_noise_corpus, "make_noise", make_noise)
    unseen_noise_corpus.main(["--noizeus", str(tmp_path), "--wideband", str(tmp_path), "--out", str(tmp_path / "out")])
    clipped = json.loads((tmp_path / "out" / "unseen_noise_corpus.json").read_text())["clipped"]
    expected = {f"sp21_{kind}_sn{snr}.wav": 4 if kind == "crowd" and snr <= 5 else 0
                for kind in unseen_noise_corpus.TALKERS for snr in unseen_noise_corpus.SNRS}
    assert clipped == expected
    printed = [line for line in capsys.readouterr().out.splitlines() if "full scale" in line]
    assert printed == [f"sp21_crowd_sn{snr}.wav: 4 samples beyond full scale, clipped" for snr in (0, 5)]
