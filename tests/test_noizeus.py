"""sepsti.corpora.noizeus: finding, pairing and loading NOIZEUS-style files; errors that name what is missing."""

import numpy as np
import pytest
import soundfile

from sepsti.core.errors import ParameterError
from sepsti.corpora import noizeus
from sepsti.corpora.noizeus import (TEST_IDS, TRAIN_IDS, clean_signals, corpus_index, iter_mixtures, mixtures,
                             select)

IDS = ("sp01", "sp02", "sp21", "sp22")
NOISES = ("babble", "car")
SNRS = (0, 5)


def _int16(path, samples, sample_rate=8000):
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(str(path), np.asarray(samples, dtype=np.int16), sample_rate, subtype="PCM_16")


def _make_corpus(root, layout, rng, ids=IDS, noises=NOISES, snrs=SNRS):
    """Clean and noisy files of random int16 samples; returns {(id, noise, snr): noise samples}."""
    truth = {}
    for utterance in ids:
        length = int(rng.integers(900, 1100))
        clean = rng.integers(-8000, 8000, length)
        _int16(root / "clean" / f"{utterance}.wav", clean)
        for noise in noises:
            for snr in snrs:
                noise_samples = rng.integers(-4000, 4000, length) // (1 + snr)
                name = f"{utterance}_{noise}_sn{snr}.wav"
                # The original distribution nests folders, copies are flat.
                folder = root / f"{noise}_{snr}dB" / f"{snr}dB" if layout == "nested" else root
                _int16(folder / name, clean + noise_samples)
                truth[utterance, noise, snr] = noise_samples
    return truth


@pytest.fixture(params=["flat", "nested"])
def corpus(request, tmp_path, rng):
    root = tmp_path / "corpus"
    truth = _make_corpus(root, request.param, rng)
    return root, truth


def test_index_finds_files_in_any_layout(corpus):
    root, _ = corpus
    index = corpus_index(root)
    assert index.ids == list(IDS)
    assert index.noises == list(NOISES)
    assert index.snrs == list(SNRS)
    assert len(index.noisy) == len(IDS) * len(NOISES) * len(SNRS)
    text = index.describe()
    assert "noises: babble, car" in text and "train split: 2 of 20" in text and "missing sp03-sp20" in text


def test_hidden_folders_are_passed_over(corpus, rng):
    root, _ = corpus
    # a trash folder holding an older copy of a file: neither a duplicate nor a mixture of its own
    _int16(root / ".Trash-1000" / "sp21.wav", rng.integers(-8000, 8000, 1000))
    _int16(root / ".cache" / "sp23_car_sn5.wav", rng.integers(-8000, 8000, 1000))
    index = corpus_index(root)
    assert index.ids == list(IDS) and len(index.noisy) == len(IDS) * len(NOISES) * len(SNRS)


def test_mixtures_pair_files_and_derive_the_noise_exactly(corpus):
    root, truth = corpus
    loaded = mixtures(root)  # default: test split, every noise and SNR
    assert [(m.utterance, m.noise, m.snr) for m in loaded] == sorted(
        key for key in truth if key[0] in TEST_IDS)
    for mixture in loaded:
        assert mixture.sample_rate == 8000
        assert mixture.clean.shape == mixture.noisy.shape == mixture.noise_signal.shape
        np.testing.assert_array_equal(mixture.noise_signal * 32768, truth[mixture.utterance, mixture.noise,
                                                                          mixture.snr])
        assert mixture.path.name == f"{mixture.utterance}_{mixture.noise}_sn{mixture.snr}.wav"


def test_filters_by_split_noise_and_snr(corpus):
    root, _ = corpus
    keys = select(root, split="train", noises="car", snrs=[5])
    assert keys == [("sp01", "car", 5), ("sp02", "car", 5)]
    assert select(root, split=["sp21"], noises=["BABBLE"], snrs=0) == [("sp21", "babble", 0)]
    assert len(select(root, split="all")) == 16


def test_clean_signals_of_the_default_train_split(corpus):
    root, _ = corpus
    signals = clean_signals(root)
    assert [utterance for utterance, _, _ in signals] == ["sp01", "sp02"]
    assert all(sample_rate == 8000 and y.dtype == np.float64 for _, y, sample_rate in signals)


def test_clean_signals_keep_each_files_own_rate(tmp_path, rng):
    """Rates may differ from file to file: what a consumer needs at one rate it resamples (the training matrix)."""
    root = tmp_path / "c"
    _int16(root / "clean" / "sp01.wav", rng.integers(-8000, 8000, 1000))
    _int16(root / "clean" / "sp02.wav", rng.integers(-8000, 8000, 2000), sample_rate=16000)
    assert [(utterance, len(y), rate) for utterance, y, rate in clean_signals(root)] == [("sp01", 1000, 8000),
                                                                                          ("sp02", 2000, 16000)]


def test_paper_split():
    assert TRAIN_IDS == tuple(f"sp{n:02d}" for n in range(1, 21))
    assert TEST_IDS == tuple(f"sp{n:02d}" for n in range(21, 31))


def test_utterance_id_takes_the_sentence_numbers_1_to_30():
    """0 gave 'sp00', 31 'sp31' and 2.7 'sp02'."""
    assert noizeus.utterance_id(1) == "sp01" and noizeus.utterance_id(np.int64(30)) == "sp30"
    for number in (0, 31, -1, 2.7, 3.0, "21", True, None):
        with pytest.raises(ParameterError, match=rf"^number={number!r} must be an integer in 1\.\.30$"):
            noizeus.utterance_id(number)


def test_unknown_noise_names_what_exists(corpus):
    root, _ = corpus
    with pytest.raises(ParameterError, match=r"no noisy files for noise 'airport'; found: babble, car"):
        mixtures(root, noises=["airport"])
    with pytest.raises(ParameterError, match=r"no noisy files at SNR -5 dB; found: 0, 5 dB"):
        mixtures(root, snrs=[-5])


def test_snrs_are_whole_db(corpus):
    """5.5 selected the 5 dB files, 4.9 was refused as 'SNR 4 dB', True was 1 dB."""
    root, _ = corpus
    for snrs in ([5.5], [4.9], [True], ["5"], [float("inf")]):
        with pytest.raises(ParameterError, match=r"^snrs=.*: expected a list of snrs in whole dB$"):
            select(root, snrs=snrs)
    assert select(root, snrs=[5.0]) == select(root, snrs=5)


def test_iter_mixtures_checks_the_selection_before_loading(corpus):
    root, _ = corpus
    with pytest.raises(ParameterError, match="airport"):
        iter_mixtures(root, noises="airport")  # raises without iterating
    first = next(iter_mixtures(root))
    assert (first.utterance, first.noise, first.snr) == ("sp21", "babble", 0)


@pytest.mark.parametrize("make, why", [
    (lambda root: root.mkdir(), "no NOIZEUS-style files found"),
    (lambda root: (root.mkdir(), (root / "notes.txt").write_text("x")), "no NOIZEUS-style files found"),
    (lambda root: None, "no such corpus folder"),
    (lambda root: root.write_text("x"), "not a folder"),
])
def test_unusable_corpus_folders(tmp_path, make, why):
    root = tmp_path / "corpus"
    make(root)
    with pytest.raises(ParameterError, match=why):
        corpus_index(root)


def test_noisy_file_without_clean_file(tmp_path, rng):
    root = tmp_path / "c"
    _make_corpus(root, "flat", rng)
    (root / "clean" / "sp22.wav").unlink()
    with pytest.raises(ParameterError, match=r"sp22_babble_sn0.wav: no clean file sp22.wav"):
        mixtures(root)
    assert len(mixtures(root, split=["sp21"])) == 4


def test_split_without_clean_files(tmp_path, rng):
    root = tmp_path / "c"
    _make_corpus(root, "flat", rng, ids=("sp21",))
    with pytest.raises(ParameterError, match=r"no clean files for the 'train' split \(sp01-sp20\); found clean: sp21"):
        clean_signals(root)
    with pytest.raises(ParameterError, match=r"no noisy files for the 'train' split"):
        mixtures(root, split="train")


def test_length_mismatch_names_the_file(tmp_path, rng):
    root = tmp_path / "c"
    _make_corpus(root, "flat", rng, ids=("sp21",), noises=("car",), snrs=(5,))
    _int16(root / "sp21_car_sn5.wav", np.zeros(10))
    with pytest.raises(ParameterError, match=r"sp21_car_sn5.wav: 10 samples but its clean file .*sp21.wav has"):
        mixtures(root)


def test_a_stereo_clean_file_needs_a_stereo_noisy_file(tmp_path, rng):
    """A stereo clean file was downmixed beside a mono noisy one and scored without a word; pairs refused it."""
    clean = rng.uniform(-0.3, 0.3, (400, 2))
    soundfile.write(tmp_path / "sp21.wav", clean, 8000)
    soundfile.write(tmp_path / "sp21_car_sn5.wav", clean[:, 0], 8000)
    with pytest.raises(ParameterError, match=r"sp21_car_sn5\.wav: has 1 channels but its clean file .*sp21\.wav "
                                             r"has 2; a pair's files must have as many channels, or the clean"):
        mixtures(tmp_path)
    noisy = clean + rng.uniform(-0.1, 0.1, (400, 2))
    soundfile.write(tmp_path / "sp21_car_sn5.wav", noisy, 8000, subtype="FLOAT")
    [mixture] = mixtures(tmp_path)
    np.testing.assert_allclose(mixture.noisy, noisy.mean(axis=1), atol=1e-7)
    np.testing.assert_allclose(mixture.clean, clean.mean(axis=1), atol=1e-4)
    soundfile.write(tmp_path / "sp21.wav", clean[:, 0], 8000)  # a mono clean file is each channel's reference
    assert mixtures(tmp_path)[0].clean.ndim == 1


def test_sample_rate_mismatch_names_the_file(tmp_path, rng):
    root = tmp_path / "c"
    _make_corpus(root, "flat", rng, ids=("sp21",), noises=("car",), snrs=(5,))
    clean = soundfile.read(str(root / "clean" / "sp21.wav"), dtype="int16")[0]
    _int16(root / "sp21_car_sn5.wav", clean, sample_rate=16000)
    with pytest.raises(ParameterError, match=r"sp21_car_sn5.wav: sample rate 16000 Hz differs from 8000 Hz"):
        mixtures(root)


def test_corrupt_member_file_names_the_file(tmp_path, rng):
    root = tmp_path / "c"
    _make_corpus(root, "flat", rng, ids=("sp21",), noises=("car",), snrs=(5,))
    (root / "sp21_car_sn5.wav").write_bytes(b"garbage")
    with pytest.raises(ParameterError, match=r"sp21_car_sn5.wav: not a readable audio file"):
        mixtures(root)


def test_a_corpus_that_is_not_a_path_is_refused_by_name():
    """None met a TypeError inside pathlib."""
    with pytest.raises(ParameterError, match=r"^root=None must be a path \(a str or os\.PathLike\)$"):
        corpus_index(None)
    for read in (clean_signals, select, mixtures, iter_mixtures):
        with pytest.raises(ParameterError, match=r"^corpus=None must be a path \(a str or os\.PathLike\)$"):
            read(None)


def test_duplicate_names_with_different_content_are_refused(tmp_path, rng):
    root = tmp_path / "c"
    _make_corpus(root, "flat", rng, ids=("sp21",), noises=("car",), snrs=(5,))
    (root / "copy").mkdir()
    (root / "copy" / "sp21.wav").write_bytes((root / "clean" / "sp21.wav").read_bytes())
    assert corpus_index(root).clean["sp21"] == root / "clean" / "sp21.wav"  # identical copy: harmless
    _int16(root / "copy" / "sp21.wav", np.zeros(10))
    with pytest.raises(ParameterError, match="same name as .* but different content"):
        corpus_index(root)


def test_bad_split_name():
    with pytest.raises(ParameterError, match="split='dev'"):
        noizeus.split_ids("dev")
    assert noizeus.split_ids([21, "SP22", "sp3"]) == ["sp21", "sp22", "sp03"]


@pytest.mark.noizeus
def test_real_corpus_layout_and_training_matrix(noizeus_root):
    from sepsti.features import training_matrix

    index = corpus_index(noizeus_root)
    assert index.ids == [f"sp{n:02d}" for n in range(1, 31)]
    keys = select(index)  # test split, every noise and SNR
    assert len(keys) == 10 * 4 * 4
    assert {key[0] for key in keys} == set(TEST_IDS)
    assert index.noises == ["babble", "car", "street", "train"] and index.snrs == [0, 5, 10, 15]
    signals = clean_signals(index)
    assert len(signals) == 20
    assert training_matrix([y for _, y, _ in signals]).shape == (257, 1661)


@pytest.mark.noizeus
def test_real_mixtures_are_aligned(noizeus_root):
    for mixture in mixtures(noizeus_root, split=["sp21", "sp30"], noises="car"):
        # Aligned: the clean speech matches the noisy file best at lag 0 (within +-25 ms).
        lags = np.arange(-200, 201)
        match = [np.dot(mixture.clean[max(0, -lag):len(mixture.clean) - max(0, lag)],
                        mixture.noisy[max(0, lag):len(mixture.noisy) - max(0, -lag)]) for lag in lags]
        assert lags[np.argmax(match)] == 0, mixture.path
        energy_ratio = 10 * np.log10(np.sum(mixture.clean ** 2) / np.sum(mixture.noise_signal ** 2))
        # Labels use active speech level (P.56); the plain energy ratio is within a dB or two.
        assert abs(energy_ratio - mixture.snr) < 2.0, (mixture.path, energy_ratio)


def test_names_are_read_as_the_layout_spells_them(tmp_path, rng):
    """Hand-written names and the keys they must give: a negative SNR (corpus synth writes down to -20 dB), a noise
    name holding underscores, and names in capitals (copies from case-insensitive file systems) all count."""
    root = tmp_path / "c"
    for name in ("SP03.WAV", "sp03_White_sn-5.wav", "sp03_car_interior_sn10.wav", "Sp03_BABBLE_SN0.Wav"):
        _int16(root / name, rng.integers(-8000, 8000, 100))
    index = corpus_index(root)
    assert index.clean == {"sp03": root / "SP03.WAV"}
    assert index.noisy == {("sp03", "white", -5): root / "sp03_White_sn-5.wav",
                           ("sp03", "car_interior", 10): root / "sp03_car_interior_sn10.wav",
                           ("sp03", "babble", 0): root / "Sp03_BABBLE_SN0.Wav"}
    assert select(root, split=["sp03"], noises=["white"], snrs=[-5]) == [("sp03", "white", -5)]


def test_duplicates_of_one_size_and_time_are_compared_by_content(tmp_path):
    """Two different files of one name, size and modification time (as a copy that keeps times, then an edit that
    keeps the size, leaves them) are still refused: their bytes are compared, not their stat signatures."""
    import os

    root = tmp_path / "c"
    _int16(root / "a" / "sp21.wav", np.arange(100))
    _int16(root / "b" / "sp21.wav", np.arange(100)[::-1])
    for path in (root / "a" / "sp21.wav", root / "b" / "sp21.wav"):
        os.utime(path, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    assert (root / "a" / "sp21.wav").stat().st_size == (root / "b" / "sp21.wav").stat().st_size
    with pytest.raises(ParameterError, match="same name as .* but different content"):
        corpus_index(root)


def test_folders_behind_symbolic_links_are_searched(tmp_path, rng):
    """The root is searched with symbolic links followed: clean files in a folder linked from the root count."""
    elsewhere = tmp_path / "elsewhere"
    _int16(elsewhere / "sp21.wav", rng.integers(-8000, 8000, 100))
    root = tmp_path / "c"
    _int16(root / "sp21_car_sn5.wav", rng.integers(-8000, 8000, 100))
    (root / "clean").symlink_to(elsewhere, target_is_directory=True)
    assert corpus_index(root).clean == {"sp21": root / "clean" / "sp21.wav"}


def test_links_back_up_the_tree_end_the_search(tmp_path, rng):
    """Two links to '..' in one folder made the search walk 2^40 folders: corpus info, train and evaluate hung."""
    root = tmp_path / "c"
    _int16(root / "clean" / "sp21.wav", rng.integers(-8000, 8000, 100))
    _int16(root / "noisy" / "sp21_car_sn5.wav", rng.integers(-8000, 8000, 100))
    for name in ("up", "parent"):
        (root / "noisy" / name).symlink_to("..", target_is_directory=True)
    index = corpus_index(root)
    assert index.clean == {"sp21": root / "clean" / "sp21.wav"}
    assert index.noisy == {("sp21", "car", 5): root / "noisy" / "sp21_car_sn5.wav"}


def test_a_corpus_of_noisy_files_alone_is_indexed_and_described(tmp_path, rng):
    """Noisy files without clean ones are a corpus still (corpus info describes it; mixtures need the clean ones):
    its clean files are 'none', its noisy ones named as they are, not as the clean ones."""
    root = tmp_path / "c"
    for utterance in ("sp21", "sp22", "sp25"):
        _int16(root / f"{utterance}_car_sn5.wav", rng.integers(-8000, 8000, 100))
    index = corpus_index(root)
    assert index.clean == {} and len(index.noisy) == 3
    lines = index.describe().splitlines()
    assert lines[1:3] == ["clean files: 0 (none)", "noisy files: 3 (sp21-sp22, sp25)"]
    _int16(root / "sp21.wav", rng.integers(-8000, 8000, 100))
    assert corpus_index(root).describe().splitlines()[1:3] == ["clean files: 1 (sp21)",
                                                               "noisy files: 3 (sp21-sp22, sp25)"]


def test_split_names_in_any_case_and_an_empty_list_of_ids():
    """'Test' and 'ALL' are the named splits; an empty list of ids is refused as such."""
    assert noizeus.split_ids("Test") == list(TEST_IDS) and noizeus.split_ids("ALL") == list(noizeus.ALL_IDS)
    with pytest.raises(ParameterError, match="^split: no utterance ids given$"):
        noizeus.split_ids([])


def test_written_names_are_read_back_as_their_keys(tmp_path, rng):
    """clean_name and noisy_name (what corpus synth writes) give the keys they were made from, a negative SNR
    included; a split given as ids is named as 'the asked split' in errors."""
    root = tmp_path / "c"
    keys = [("sp04", "white", -5), ("sp04", "car", 0), ("sp04", "car", 15)]
    _int16(root / noizeus.clean_name("sp04"), rng.integers(-8000, 8000, 100))
    for key in keys:
        _int16(root / noizeus.noisy_name(*key), rng.integers(-8000, 8000, 100))
    index = corpus_index(root)
    assert index.clean == {"sp04": root / "sp04.wav"} and sorted(index.noisy) == sorted(keys)
    with pytest.raises(ParameterError, match=r"no clean files for the asked split \(sp05\); found clean: sp04$"):
        clean_signals(root, split=["sp05"])
