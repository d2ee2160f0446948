"""sepsti.corpora.pairs: which clean file a noisy file is paired with, and the layouts refused."""

import os

import numpy as np
import pytest
import soundfile

from sepsti.core.errors import ParameterError
from sepsti.corpora.pairs import load_pair, pair_index


def _wav(path, seed=0):
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(path, np.random.default_rng(seed).uniform(-0.1, 0.1, 800), 8000)
    return path


def _pairs(clean, noisy):
    """``(name, clean path, noisy path)`` below the two folders."""
    return [(p.name, p.clean.relative_to(clean).as_posix(), p.noisy.relative_to(noisy).as_posix())
            for p in pair_index(clean, noisy)]


def test_a_folder_inside_the_other_is_refused(tmp_path):
    # the noisy folder inside the clean one: each noisy file was found below both and paired with itself
    for name in ("p1", "p2"):
        _wav(tmp_path / "clean" / f"{name}.wav")
    _wav(tmp_path / "clean" / "noisy" / "p1_n.wav")
    with pytest.raises(ParameterError, match=r"/clean/noisy: inside the clean folder .*/clean; pass two folders"):
        pair_index(tmp_path / "clean", tmp_path / "clean" / "noisy")
    with pytest.raises(ParameterError, match=r"/clean/noisy: inside the noisy folder .*/clean; pass two folders"):
        pair_index(tmp_path / "clean" / "noisy", tmp_path / "clean")
    os.symlink(tmp_path / "clean", tmp_path / "link")  # inside once resolved
    with pytest.raises(ParameterError, match="inside the clean folder"):
        pair_index(tmp_path / "clean", tmp_path / "link" / "noisy")
    with pytest.raises(ParameterError, match="the clean and noisy folders are the same"):
        pair_index(tmp_path / "clean", tmp_path / "link")
    _wav(tmp_path / "clean2" / "p1.wav", seed=1)  # beside it, its name starting alike: fine
    assert _pairs(tmp_path / "clean", tmp_path / "clean2") == [("p1", "p1.wav", "p1.wav")]


@pytest.mark.parametrize("link", [os.symlink, os.link], ids=["symbolic link", "hard link"])
def test_a_noisy_file_that_is_its_clean_file_is_refused(tmp_path, link):
    clean = _wav(tmp_path / "clean" / "x.wav")
    (tmp_path / "noisy").mkdir()
    link(clean, tmp_path / "noisy" / "x.wav")  # load_pair gave a noise of zero energy
    with pytest.raises(ParameterError, match=r"noisy/x.wav: the same file as its clean file .*clean/x.wav"):
        pair_index(tmp_path / "clean", tmp_path / "noisy")
    (tmp_path / "noisy" / "x.wav").unlink()
    _wav(tmp_path / "noisy" / "x.wav", seed=1)
    (pair,) = pair_index(tmp_path / "clean", tmp_path / "noisy")
    assert np.sum((load_pair(pair).noisy - load_pair(pair).clean) ** 2) > 0


def test_a_pair_is_in_agreeing_subfolders(tmp_path):
    # agreeing: the same subfolder, one file directly in its folder, or the shorter path ending the longer
    for name in ("flat", "same", "nested", "deeper"):
        _wav(tmp_path / "clean" / {"flat": "", "same": "spkA", "nested": "", "deeper": "spkB"}[name] / f"{name}.wav")
    for name, folder in (("flat", ""), ("same", "spkA"), ("nested", "babble_0dB/0dB"), ("deeper", "snr5/spkB")):
        _wav(tmp_path / "noisy" / folder / f"{name}.wav", seed=1)
    assert _pairs(tmp_path / "clean", tmp_path / "noisy") == [
        ("deeper", "spkB/deeper.wav", "snr5/spkB/deeper.wav"), ("flat", "flat.wav", "flat.wav"),
        ("nested", "nested.wav", "babble_0dB/0dB/nested.wav"), ("same", "spkA/same.wav", "spkA/same.wav")]
    # one speaker's 001 was paired with another's
    _wav(tmp_path / "clean" / "spkA" / "001.wav")
    _wav(tmp_path / "noisy" / "spkB" / "001.wav", seed=1)
    with pytest.raises(ParameterError, match=r"noisy/spkB/001.wav: its clean file is .*clean/spkA/001.wav, in "
                                             r"another subfolder; a pair's subfolders must agree"):
        pair_index(tmp_path / "clean", tmp_path / "noisy")
    # a name in two subfolders of one folder stays refused, naming both files
    _wav(tmp_path / "clean" / "spkB" / "001.wav", seed=2)
    with pytest.raises(ParameterError, match=r"clean/spkB/001.wav: same name as .*clean/spkA/001.wav"):
        pair_index(tmp_path / "clean", tmp_path / "noisy")


def test_a_pair_keeps_its_channels_and_must_have_as_many_in_both_files(tmp_path):
    """Multichannel files are read channel by channel (they were downmixed: opposite channels gave silence); a pair
    whose files differ in channels is refused, naming the noisy file."""
    rng = np.random.default_rng(3)
    clean = rng.uniform(-0.1, 0.1, (800, 2)) * [1, -1]
    noisy = clean + rng.uniform(-0.01, 0.01, (800, 2))
    for kind, y in (("clean", clean), ("noisy", noisy)):
        (tmp_path / kind).mkdir()
        soundfile.write(tmp_path / kind / "p.wav", y, 8000, subtype="DOUBLE")
    (pair,) = pair_index(tmp_path / "clean", tmp_path / "noisy")
    loaded = load_pair(pair)
    assert loaded.clean.shape == loaded.noisy.shape == (800, 2)
    np.testing.assert_array_equal(loaded.clean, clean)
    np.testing.assert_array_equal(loaded.noisy, noisy)
    soundfile.write(tmp_path / "clean" / "p.wav", clean[:, 0], 8000, subtype="DOUBLE")
    assert load_pair(pair).clean.shape == (800,)  # a mono clean file is every channel's reference
    soundfile.write(tmp_path / "noisy" / "p.wav", noisy[:, [0, 1, 1]], 8000, subtype="DOUBLE")
    soundfile.write(tmp_path / "clean" / "p.wav", clean, 8000, subtype="DOUBLE")
    with pytest.raises(ParameterError, match=r"noisy/p.wav: has 3 channels but its clean file .*clean/p.wav has 2; "
                                             r"a pair's files must have as many channels, or the clean file one"):
        load_pair(pair)
    mono = _wav(tmp_path / "mono" / "clean" / "m.wav")  # mono files stay (n_samples,)
    _wav(tmp_path / "mono" / "noisy" / "m.wav", seed=1)
    (pair,) = pair_index(mono.parent, tmp_path / "mono" / "noisy")
    assert load_pair(pair).clean.shape == load_pair(pair).noisy.shape == (800,)


def test_a_folder_that_is_not_a_path_is_refused_by_name(tmp_path):
    """None met a TypeError inside pathlib."""
    with pytest.raises(ParameterError, match=r"^clean_root=None must be a path \(a str or os\.PathLike\)$"):
        pair_index(None, tmp_path)
    with pytest.raises(ParameterError, match=r"^noisy_root=None must be a path \(a str or os\.PathLike\)$"):
        pair_index(tmp_path, None)


@pytest.mark.parametrize("rate, length, fragment", [
    (16000, 800, r"sample rate 16000 Hz differs from 8000 Hz of its clean file .*clean/p\.wav"),
    (8000, 799, r"799 samples but its clean file .*clean/p\.wav has 800; files must be sample-aligned")])
def test_a_pair_of_another_rate_or_length_is_refused_naming_the_noisy_file(tmp_path, rate, length, fragment):
    """The noise of a pair is noisy - clean: files a sample apart, or at two rates, give no noise of the mixture."""
    _wav(tmp_path / "clean" / "p.wav")
    (tmp_path / "noisy").mkdir()
    soundfile.write(tmp_path / "noisy" / "p.wav", np.zeros(length), rate)
    (pair,) = pair_index(tmp_path / "clean", tmp_path / "noisy")
    with pytest.raises(ParameterError, match=r"noisy/p\.wav: " + fragment):
        load_pair(pair)


def test_a_noisy_folder_without_audio_or_with_a_file_without_its_clean_one_is_refused(tmp_path):
    _wav(tmp_path / "clean" / "a.wav")
    (tmp_path / "noisy").mkdir()
    (tmp_path / "noisy" / "notes.txt").write_text("not audio")
    with pytest.raises(ParameterError, match=r"noisy: no audio files found below the noisy folder"):
        pair_index(tmp_path / "clean", tmp_path / "noisy")
    for name in ("a", "b", "c"):
        _wav(tmp_path / "noisy" / f"{name}.wav", seed=1)
    with pytest.raises(ParameterError, match=r"noisy/b\.wav: no clean file named b\.\* below .*clean \(and 1 more\)$"):
        pair_index(tmp_path / "clean", tmp_path / "noisy")


def test_the_first_unpaired_name_is_named_alone_and_in_name_order(tmp_path):
    """One noisy file without its clean one is named with nothing more; of several, the first by name, wherever its
    subfolder puts it among the paths."""
    _wav(tmp_path / "clean" / "c.wav")
    _wav(tmp_path / "noisy" / "c.wav", seed=1)
    _wav(tmp_path / "noisy" / "b.wav", seed=1)
    with pytest.raises(ParameterError, match=r"noisy/b\.wav: no clean file named b\.\* below .*clean$"):
        pair_index(tmp_path / "clean", tmp_path / "noisy")
    _wav(tmp_path / "noisy" / "z" / "a.wav", seed=1)  # after noisy/b.wav among the paths, before it by name
    with pytest.raises(ParameterError, match=r"noisy/z/a\.wav: no clean file named a\.\* below .*clean "
                                             r"\(and 1 more\)$"):
        pair_index(tmp_path / "clean", tmp_path / "noisy")


@pytest.mark.parametrize("missing", ["clean", "noisy"])
def test_a_missing_folder_is_named_as_clean_or_noisy(tmp_path, missing):
    for kind in ("clean", "noisy"):
        if kind != missing:
            _wav(tmp_path / kind / "p.wav")
    with pytest.raises(ParameterError, match=rf"/{missing}: no such {missing} folder$"):
        pair_index(tmp_path / "clean", tmp_path / "noisy")
