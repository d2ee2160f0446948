"""``recipes/train_mask_atoms.py``: a reduced run on the NOIZEUS copy writes a dictionary whose mask atoms the
enhancer loads, and results that say which update and factor were kept."""

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))

import train_mask_atoms  # noqa: E402


def test_a_quick_run_writes_a_dictionary_with_mask_atoms_and_its_choices(noizeus_root, tmp_path, capsys):
    from sepsti.dictionary import load_dictionary, narrowband_dictionary_path

    train_mask_atoms.main(["--quick", "--corpus", str(noizeus_root), "--out", str(tmp_path)])
    written = load_dictionary(tmp_path / "narrowband_dictionary.npz")
    shipped = load_dictionary(narrowband_dictionary_path())
    np.testing.assert_array_equal(written.W, shipped.W)  # the dictionary itself as it was
    results = json.loads((tmp_path / "train_mask_atoms.json").read_text())
    assert (results["fit_mixtures"], results["held_out_mixtures"]) == (8, 4)  # sp01, sp02 / sp16 in four noises
    history = results["history"]
    assert [row["update"] for row in history] == list(range(6))
    best = max(history, key=lambda row: row["held_out_snr_db"])
    assert results["update_kept"] == best["update"]
    scores = results["held_out_sdr_db_by_factor"]
    assert set(scores) == {"0.5", "0.8"} and scores[str(results["factor_kept"])] == max(scores.values())
    centre = written.W[257:514]
    inside = ~np.all(written.mask_atoms == centre, axis=1)
    low, high = results["band_hz"]
    frequencies = np.arange(257) * 8000 / 512
    np.testing.assert_array_equal(np.flatnonzero(inside), np.flatnonzero((frequencies >= low) & (frequencies <= high)))
    assert (tmp_path / "train_mask_atoms.png").stat().st_size > 0
    assert "wrote" in capsys.readouterr().out
