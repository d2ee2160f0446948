"""``recipes/benchmarks/unseen_noise_corpus.py``: the samples its mixtures clip, file by file, and what
``--overwrite`` replaces."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes" / "benchmarks"))

import unseen_noise_corpus  # noqa: E402

from sepsti.core.errors import ParameterError  # noqa: E402


def _one_sentence_and_clicks(monkeypatch):
    """One quiet sentence (sp21) and no wideband talkers; the crowd four clicks, the other noises white."""
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


def test_clipped_samples_are_counted_per_file_and_recorded(tmp_path, monkeypatch, capsys):
    """A crowd of four clicks: scaled to 0 and 5 dB below a quiet sentence they run beyond full scale (2.1 and 1.2
    times it), at 10 and 15 dB they do not; the other noises stay far below it."""
    _one_sentence_and_clicks(monkeypatch)
    unseen_noise_corpus.main(["--noizeus", str(tmp_path), "--wideband", str(tmp_path), "--out", str(tmp_path / "out")])
    clipped = json.loads((tmp_path / "out" / "unseen_noise_corpus.json").read_text())["clipped"]
    expected = {f"sp21_{kind}_sn{snr}.wav": 4 if kind == "crowd" and snr <= 5 else 0
                for kind in unseen_noise_corpus.TALKERS for snr in unseen_noise_corpus.SNRS}
    assert clipped == expected
    printed = [line for line in capsys.readouterr().out.splitlines() if "full scale" in line]
    assert printed == [f"sp21_crowd_sn{snr}.wav: 4 samples beyond full scale, clipped" for snr in (0, 5)]


def test_overwrite_replaces_the_corpus_of_an_earlier_run_and_nothing_else(tmp_path, monkeypatch):
    """``--overwrite`` never took effect (``OUT/corpus exists``): a corpus of other settings is refused without it
    and replaced with it; one holding a file the recipe did not write is refused, the file kept."""
    _one_sentence_and_clicks(monkeypatch)
    out = tmp_path / "out"
    options = ["--noizeus", str(tmp_path), "--wideband", str(tmp_path), "--out", str(out)]
    unseen_noise_corpus.main(options)
    (out / "unseen_noise_corpus.json").unlink()  # the folder's own check, not the results'
    with pytest.raises(ParameterError, match=r"corpus: holds the files of a run with other settings \(seed 0 there, "
                                             r"1 now\)"):
        unseen_noise_corpus.main([*options, "--seed", "1"])
    before = (out / "corpus" / "noisy" / "hall_0dB" / "sp21_hall_sn0.wav").read_bytes()
    unseen_noise_corpus.main([*options, "--seed", "1", "--overwrite"])
    assert (out / "corpus" / "noisy" / "hall_0dB" / "sp21_hall_sn0.wav").read_bytes() != before
    (out / "corpus" / "notes.txt").write_text("mine\n")
    with pytest.raises(ParameterError, match=r"corpus: holds files its run did not write \(1, e.g. notes.txt\)"):
        unseen_noise_corpus.main([*options, "--seed", "2", "--overwrite"])
    assert (out / "corpus" / "notes.txt").read_text() == "mine\n" and (out / "corpus" / "clean" / "sp21.wav").exists()
