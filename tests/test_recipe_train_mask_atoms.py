"""``recipes/train_mask_atoms.py``: a reduced run on the NOIZEUS copy writes a dictionary whose mask atoms the
enhancer loads, and results that say which update and factor were kept; the dictionary it learns them for is
the shipped one or the caller's, which is never replaced."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))

import train_mask_atoms  # noqa: E402


def test_a_quick_run_writes_the_callers_dictionary_with_mask_atoms_and_its_choices(noizeus_root, tmp_path, capsys):
    from sepsti.dictionary import load_dictionary, narrowband_dictionary_path, save_dictionary

    shipped = load_dictionary(narrowband_dictionary_path())
    mine = tmp_path / "mine.npz"  # a dictionary of the caller's, stored in float64, without mask atoms
    save_dictionary(mine, shipped._replace(mask_atoms=None), dtype=np.float64)
    before = mine.read_bytes()
    train_mask_atoms.main(["--quick", "--corpus", str(noizeus_root), "--dictionary", str(mine),
                           "--out", str(tmp_path / "out")])
    assert mine.read_bytes() == before
    written = load_dictionary(tmp_path / "out" / "mine.npz")
    with np.load(tmp_path / "out" / "mine.npz") as stored:
        assert stored["W"].dtype == stored["mask_atoms"].dtype == np.float64  # stored as the caller's was
    np.testing.assert_array_equal(written.W, shipped.W)  # the dictionary itself as it was
    results = json.loads((tmp_path / "out" / "train_mask_atoms.json").read_text())
    assert results["speech_dictionary"] == str(mine)
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
    assert (tmp_path / "out" / "train_mask_atoms.png").stat().st_size > 0
    assert "wrote" in capsys.readouterr().out


def _refusal(noizeus_root, *options):
    from sepsti.core.errors import ParameterError

    with pytest.raises(ParameterError) as refused:
        train_mask_atoms.main(["--corpus", str(noizeus_root), *map(str, options)])
    return str(refused.value)


def test_a_dictionary_at_another_rate_is_refused_before_any_work(noizeus_root, tmp_path):
    from sepsti.dictionary import wideband_dictionary_path

    message = _refusal(noizeus_root, "--dictionary", wideband_dictionary_path(), "--out", tmp_path / "out")
    assert message == (f"dictionary {wideband_dictionary_path()}: at 16000 Hz, the corpus's files at 8000 Hz; pass "
                       f"--dictionary with one at the corpus's rate")
    assert not (tmp_path / "out").exists()


def test_the_input_dictionary_is_never_the_output(noizeus_root, tmp_path):
    from sepsti.dictionary import load_dictionary, narrowband_dictionary_path, save_dictionary

    mine = tmp_path / "narrowband_dictionary.npz"
    save_dictionary(mine, load_dictionary(narrowband_dictionary_path()))
    before = mine.read_bytes()
    message = _refusal(noizeus_root, "--dictionary", mine, "--out", tmp_path, "--overwrite")
    assert message == f"{mine}: output is also an input; choose another output path"
    assert mine.read_bytes() == before


def test_the_shipped_dictionary_is_written_under_its_own_name_and_not_over_an_earlier_one(noizeus_root, tmp_path):
    earlier = tmp_path / "narrowband_dictionary.npz"
    earlier.write_bytes(b"an earlier run's")
    message = _refusal(noizeus_root, "--out", tmp_path)
    assert message == f"{earlier}: output exists; pass --overwrite to replace it"
    assert earlier.read_bytes() == b"an earlier run's"
