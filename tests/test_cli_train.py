"""``sepsti train``: a dictionary from a tiny synthetic corpus, options, and bad input.

The helpers here (a tiny NOIZEUS-style corpus and the CLI checks) are shared
with ``test_cli_enhance.py`` and ``test_cli_evaluate.py``.
"""

import os
import struct
from pathlib import Path

import numpy as np
import pytest
import soundfile
from click.testing import CliRunner

from sepsti.cli import cli
from sepsti.core.errors import ParameterError

# the synthetic wideband corpora here are not the distributed speaker set, whose split they would move
pytestmark = pytest.mark.filterwarnings("ignore:wideband manifest:UserWarning")

TRAIN = ("sp01", "sp02", "sp03")
TEST = ("sp21", "sp22")
NOISES = ("white", "hum")
SNRS = (0, 5)
RATE = 8000
RANK = 16


def speech_like(rng, seconds=1.6, rate=RATE):
    """Voiced segments with a gliding pitch and a few formant-like peaks, separated by pauses."""
    n = int(seconds * rate)
    t = np.arange(n) / rate
    # One synthetic "speaker": a pitch range and formant regions shared by all utterances.
    f0 = rng.uniform(110, 150) * (1 + 0.15 * np.sin(2 * np.pi * rng.uniform(0.5, 2) * t))
    phase = 2 * np.pi * np.cumsum(f0) / rate
    formants = rng.uniform([500, 1200, 2400], [700, 1400, 2600])
    y = np.zeros(n)
    for k in range(1, 25):
        harmonic = k * f0
        gain = sum(np.exp(-0.5 * ((harmonic - f) / 150.0) ** 2) for f in formants) / k ** 0.5
        y += np.where(harmonic < rate / 2, gain, 0.0) * np.sin(k * phase)
    envelope = (np.sin(2 * np.pi * rng.uniform(1.5, 3) * t) > -0.3).astype(float)
    envelope = np.convolve(envelope, np.hanning(401) / np.hanning(401).sum(), mode="same")
    y *= envelope
    return 0.3 * y / np.max(np.abs(y))


def noise_signal(kind, rng, n, rate=RATE):
    if kind == "white":
        return rng.standard_normal(n)
    t = np.arange(n) / rate
    return sum(np.sin(2 * np.pi * 60 * k * t + rng.uniform(0, 6)) / k for k in range(1, 6)) \
        + 0.1 * rng.standard_normal(n)


def make_corpus(root, seed=0, *, train=TRAIN, test=TEST, noises=NOISES, snrs=SNRS, rate=RATE):
    """Write a NOIZEUS-style corpus: clean/spNN.wav and noisy/<noise>_<snr>dB/spNN_<noise>_sn<snr>.wav."""
    rng = np.random.default_rng(seed)
    root = Path(root)
    (root / "clean").mkdir(parents=True, exist_ok=True)
    for utterance in (*train, *test):
        clean = speech_like(rng, rate=rate)
        soundfile.write(root / "clean" / f"{utterance}.wav", clean, rate, subtype="PCM_16")
        clean, _ = soundfile.read(root / "clean" / f"{utterance}.wav")
        for noise in noises:
            for snr in snrs:
                folder = root / "noisy" / f"{noise}_{snr}dB"
                folder.mkdir(parents=True, exist_ok=True)
                raw = noise_signal(noise, rng, len(clean), rate)
                raw *= np.sqrt(np.sum(clean ** 2) / np.sum(raw ** 2) / 10 ** (snr / 10))
                soundfile.write(folder / f"{utterance}_{noise}_sn{snr}.wav", clean + raw, rate, subtype="PCM_16")
    return root


def run(args):
    """Run the CLI in-process; returns click's Result (stdout and stderr apart)."""
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def assert_one_line_error(result, *fragments):
    """Exit status 2, exactly one stderr line ``Error: ...`` containing every fragment, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert "Traceback" not in result.stderr + result.stdout


def snapshot(folder):
    """Every file below ``folder`` with its bytes (to check inputs stay untouched, nothing is left)."""
    folder = Path(folder)
    return {str(path.relative_to(folder)): path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def no_temp_files(folder):
    return [path.name for path in Path(folder).rglob(".*") if path.is_file()] == []


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("corpus") / "tiny")


@pytest.fixture(scope="session")
def tiny_dictionary(tiny_corpus, tmp_path_factory):
    path = tmp_path_factory.mktemp("dictionary") / "tiny.npz"
    result = run(["train", "--corpus", tiny_corpus, "--rank", RANK, "-o", path, "--iterations", 60])
    assert result.exit_code == 0, result.stderr
    return path


# --------------------------------------------------------------------------------------------
# success


def test_train_writes_a_checked_dictionary(tiny_corpus, tiny_dictionary):
    from sepsti.dictionary import load_dictionary

    dictionary = load_dictionary(tiny_dictionary)
    assert dictionary.W.shape == (257, RANK)
    assert dictionary.files == TRAIN  # the test split is never used for training
    assert dictionary.corpus == str(tiny_corpus)
    assert 1 <= dictionary.iterations <= 60
    assert (dictionary.seed, dictionary.sample_rate, dictionary.rank) == (0, 8000, RANK)
    assert np.all(dictionary.W >= 0) and np.all(dictionary.W.sum(axis=0) > 0)
    with np.load(tiny_dictionary, allow_pickle=False) as archive:  # --dtype float64 by default (README)
        assert archive["W"].dtype == np.float64


def test_tol_zero_runs_exactly_the_iterations_and_seed_repeats(tiny_corpus, tmp_path):
    from sepsti.dictionary import load_dictionary

    for name in ("a.npz", "b.npz"):
        result = run(["train", "--corpus", tiny_corpus, "--rank", 4, "-o", tmp_path / name,
                      "--iterations", 7, "--tol", 0, "--seed", 5])
        assert result.exit_code == 0, result.stderr
        assert "wrote" in result.stdout
    a, b = load_dictionary(tmp_path / "a.npz"), load_dictionary(tmp_path / "b.npz")
    assert a.iterations == 7 and a.seed == 5
    np.testing.assert_array_equal(a.W, b.W)
    result = run(["train", "--corpus", tiny_corpus, "--rank", 4, "-o", tmp_path / "c.npz",
                  "--iterations", 7, "--tol", 0, "--seed", 6])
    assert result.exit_code == 0
    assert not np.array_equal(load_dictionary(tmp_path / "c.npz").W, a.W)
    assert no_temp_files(tmp_path)


def test_options_reach_the_trainer(tiny_corpus, tmp_path, monkeypatch):
    import sepsti.denoise
    from sepsti.features import training_matrix

    calls = []
    real = sepsti.denoise.train_dictionary

    def recorder(X, rank, **options):
        calls.append((X.shape, rank, options))
        return real(X, rank, **{**options, "max_iter": 2})

    monkeypatch.setattr(sepsti.denoise, "train_dictionary", recorder)
    result = run(["train", "--corpus", tiny_corpus, "--rank", 3, "-o", tmp_path / "d.npz",
                  "--iterations", 11, "--tol", 0.25, "--seed", 9])
    assert result.exit_code == 0, result.stderr
    from sepsti.corpora.noizeus import clean_signals

    expected_shape = training_matrix([y for _, y, _ in clean_signals(tiny_corpus, "train")]).shape
    assert calls == [(expected_shape, 3, {"max_iter": 11, "tol": 0.25, "seed": 9, "progress": True})]


def _trained_on(corpus, tmp_path, monkeypatch):
    """``sepsti train --rank 2`` on ``corpus``: the dictionary it wrote and the matrix it trained on."""
    import sepsti.denoise
    from sepsti.dictionary import load_dictionary

    matrices, real = [], sepsti.denoise.train_dictionary

    def recorder(X, rank, **options):
        matrices.append(X)
        return real(X, rank, **options)

    monkeypatch.setattr(sepsti.denoise, "train_dictionary", recorder)
    result = run(["train", "--corpus", corpus, "--rank", 2, "-o", tmp_path / "d.npz", "--iterations", 3])
    assert result.exit_code == 0, result.stderr
    (X,) = matrices
    return load_dictionary(tmp_path / "d.npz"), X


def _assert_matrix_of(X, signals):
    from sepsti.features import training_matrix

    expected = training_matrix(signals)
    assert X.shape == expected.shape
    np.testing.assert_allclose(X, expected, rtol=1e-3, atol=1e-3 * expected.max())


def test_other_sample_rate_is_resampled(tmp_path, monkeypatch):
    """16 kHz speech trains the 8 kHz dictionary on the spectra of its 8 kHz resampling."""
    from scipy.signal import resample_poly

    corpus = tmp_path / "corpus"
    (corpus / "clean").mkdir(parents=True)
    rng = np.random.default_rng(1)
    signals = [speech_like(rng, rate=16000) for _ in TRAIN]
    for utterance, y in zip(TRAIN, signals):
        soundfile.write(corpus / "clean" / f"{utterance}.wav", y, 16000, subtype="FLOAT")
    dictionary, X = _trained_on(corpus, tmp_path, monkeypatch)
    assert dictionary.sample_rate == 8000
    _assert_matrix_of(X, [resample_poly(y, 1, 2) for y in signals])


def _wideband_corpus(root, rng):
    """Seven speakers at 16 kHz (one flagged band-limited) and one at 22.05 kHz, with a manifest."""
    import json

    entries = []
    for number, speaker in enumerate(("11", "12", "13", "14", "15", "16", "17", "LJ")):
        rate = 22050 if speaker == "LJ" else 16000
        name = f"{speaker}/{speaker}-1-0000.wav"
        (root / speaker).mkdir(parents=True)
        y = speech_like(rng, rate=rate) + 0.2 * np.sin(2 * np.pi * 30 * np.arange(int(1.6 * rate)) / rate)
        soundfile.write(root / name, y, rate)
        flags = ["band_limited"] if speaker == "14" else []
        entries.append({"file": name, "rate": rate, "speaker": speaker, "duration_s": 0.8, "flags": flags})
    (root / "manifest.json").write_text(json.dumps(entries))
    return root


def test_a_train_split_is_read_from_its_train_files_only(tmp_path, rng):
    """The files a split names (whose rates are checked, and which no output may replace) are its train files:
    NOIZEUS's sp01-sp20 present, not its test files; a wideband corpus's train speakers, not its test ones, and
    its manifest."""
    from sepsti.training import train_split

    corpus = make_corpus(tmp_path / "corpus", noises=(), snrs=())
    split = train_split(corpus)
    assert [Path(path).resolve() for path in split.paths] == \
        [(tmp_path / "corpus" / "clean" / f"{utterance}.wav").resolve() for utterance in TRAIN]
    assert split.inputs() == split.paths and split.file_rates() == [RATE] * len(TRAIN)
    wide = _wideband_corpus(tmp_path / "wide", rng)
    split = train_split(wide)
    assert [Path(path).resolve() for path in split.paths] == \
        [(wide / speaker / f"{speaker}-1-0000.wav").resolve() for speaker in ("13", "15", "17")]
    assert split.inputs() == [*split.paths, Path(wide) / "manifest.json"]


def test_wideband_corpus_gives_a_16_khz_dictionary_of_its_train_speakers(tmp_path, rng):
    from sepsti.dictionary import load_dictionary

    corpus = _wideband_corpus(tmp_path / "wide", rng)
    result = run(["train", "--corpus", corpus, "--rank", 3, "-o", tmp_path / "d.npz", "--iterations", 3,
                  "--dtype", "float32"])
    assert result.exit_code == 0, result.stderr
    assert "on 3 files (513 x " in result.stdout
    dictionary = load_dictionary(tmp_path / "d.npz")
    assert dictionary.framing == (16000, 1024, 512)
    # speakers by id: 11 and 16 test, 12 validation, the others train less the flagged 14; LJ (22.05 kHz) is
    # test material
    assert dictionary.files == ("13-1-0000", "15-1-0000", "17-1-0000")
    with np.load(tmp_path / "d.npz", allow_pickle=False) as archive:
        assert archive["W"].dtype == np.float32
    result = run(["train", "--corpus", corpus, "--rank", 3, "-o", tmp_path / "e.npz", "--iterations", 3,
                  "--rate", 8000, "--context", 1])
    assert result.exit_code == 0, result.stderr
    assert "on 3 files (771 x " in result.stdout
    narrow = load_dictionary(tmp_path / "e.npz")
    assert (narrow.framing, narrow.context, narrow.W.shape) == ((8000, 512, 256), 1, (771, 3))


def test_wideband_split_and_high_pass(tmp_path, rng):
    from sepsti.corpora import wideband

    corpus = _wideband_corpus(tmp_path / "wide", rng)
    splits = wideband.split_of(wideband.read_manifest(corpus))
    assert splits == {"11": "test", "12": "validation", "13": "train", "14": "train", "15": "train",
                      "16": "test", "17": "train", "LJ": "test"}
    assert [u.speaker for u in wideband.select(corpus, "test")] == ["11", "16", "LJ"]
    assert [u.speaker for u in wideband.select(corpus, "train")] == ["13", "15", "17"]
    (_, y, rate), = [s for s in wideband.clean_signals(corpus, "test") if s[0] == "11-1-0000"]
    raw, _ = soundfile.read(corpus / "11" / "11-1-0000.wav")
    hum = lambda z: abs(np.sum(z * np.exp(-2j * np.pi * 30 * np.arange(len(z)) / rate)))  # noqa: E731
    assert hum(y) < 0.05 * hum(raw)  # the 30 Hz rumble is gone
    with pytest.raises(ParameterError, match="split='dev'"):
        wideband.select(corpus, "dev")
    (corpus / "manifest.json").write_text('[{"file": "x.wav"}]')
    with pytest.raises(ParameterError, match="entry 0 lacks"):
        wideband.read_manifest(corpus)
    (corpus / "manifest.json").write_text('[["x.wav", 16000, "1"]]')
    with pytest.raises(ParameterError, match="entry 0 is a list"):
        wideband.read_manifest(corpus)
    # a flag given as a string, not a list: refused (read letter by letter it would exclude nothing)
    (corpus / "manifest.json").write_text('[{"file": "x.wav", "rate": 16000, "speaker": "1", "flags": "clipped"}]')
    with pytest.raises(ParameterError, match="entry 0 has 'flags' \"clipped\""):
        wideband.read_manifest(corpus)
    # rates and durations out of range were taken (corpus info printed 'rates -5 Hz' and minutes of nan)
    for rate, duration in ((-5, 1.0), (0, 1.0), (16000, "NaN"), (16000, -3), (16000, "Infinity")):
        (corpus / "manifest.json").write_text(f'[{{"file": "x.wav", "rate": {rate}, "speaker": "1", '
                                              f'"duration_s": {duration}}}]')
        field, value = ("rate", rate) if rate < 1 else ("duration_s", duration)
        with pytest.raises(ParameterError, match=rf"entry 0 has '{field}' {value}; expected a (whole|finite) number"):
            wideband.read_manifest(corpus)


# --------------------------------------------------------------------------------------------
# bad input


def _corpus_with(tmp_path, bad_name, content):
    """A training corpus whose sp02 is replaced by ``content`` (bytes or a callable writing it)."""
    corpus = make_corpus(tmp_path / "corpus", train=TRAIN, test=(), noises=(), snrs=())
    target = corpus / "clean" / bad_name
    if callable(content):
        content(target)
    else:
        target.write_bytes(content)
    return corpus


def _truncated(target):
    soundfile.write(target, np.zeros(4000), RATE, subtype="PCM_16")
    target.write_bytes(target.read_bytes()[:3000])


def _float_wav(values):
    return lambda target: soundfile.write(target, values, RATE, subtype="FLOAT")


@pytest.mark.parametrize("content, fragments", [
    (b"", ("sp02.wav", "empty")),
    (b"this is not audio at all" * 10, ("sp02.wav", "not a readable audio file")),
    (_truncated, ("sp02.wav", "truncated")),
    (_float_wav(np.zeros(0)), ("sp02.wav", "zero-length")),
    (_float_wav(np.zeros(100)), ("sp02", "shorter than one frame")),
    (_float_wav(np.r_[np.zeros(600), np.nan]), ("sp02.wav", "NaN or Inf")),
    (_float_wav(np.r_[np.zeros(600), np.inf]), ("sp02.wav", "NaN or Inf")),
], ids=["empty", "not-audio", "truncated", "zero-length", "short", "nan", "inf"])
def test_bad_training_file(tmp_path, content, fragments):
    corpus = _corpus_with(tmp_path, "sp02.wav", content)
    before = snapshot(tmp_path)
    result = run(["train", "--corpus", corpus, "--rank", 2, "-o", tmp_path / "d.npz", "--iterations", 2])
    assert_one_line_error(result, *fragments)
    assert snapshot(tmp_path) == before


def claimed_rate(rate):
    """Write a 16-bit WAV of 1.6 s of speech at 8 kHz whose header claims ``rate`` Hz instead."""
    def write(target):
        soundfile.write(target, speech_like(np.random.default_rng(2)), RATE, subtype="PCM_16")
        header = bytearray(target.read_bytes())
        struct.pack_into("<II", header, 24, rate, 2 * rate)  # the fmt chunk's sample rate and byte rate
        target.write_bytes(bytes(header))
    return write


@pytest.mark.parametrize("rate, fragments", [
    (2_000_000_000, ("sp02.wav: sample rate 2000000000 Hz is outside 4000..384000 Hz",)),
    (1_999_999_999, ("sp02.wav: sample rate 1999999999 Hz is outside",)),  # was a MemoryError: a 4e10-tap filter
    (383_999, ("sp02.wav: sample rate 383999 Hz has no short ratio to 8000 Hz",)),
])
def test_unusable_sample_rate_of_a_training_file_is_refused_before_any_file_is_read(tmp_path, monkeypatch, rate,
                                                                                     fragments):
    import sepsti.corpora.noizeus

    corpus = _corpus_with(tmp_path, "sp02.wav", claimed_rate(rate))
    monkeypatch.setattr(sepsti.corpora.noizeus, "read_audio", None)  # never reached: the headers tell
    result = run(["train", "--corpus", corpus, "--rank", 2, "-o", tmp_path / "d.npz", "--iterations", 2])
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "d.npz").exists()


def test_clean_files_of_mixed_rates_train_on_their_resampling_to_the_dictionary_rate(tmp_path, monkeypatch):
    """sp02 at 16 kHz among 8 kHz files: resampled like the others, not refused."""
    from scipy.signal import resample_poly

    corpus = make_corpus(tmp_path / "corpus", train=("sp01", "sp03"), test=(), noises=(), snrs=())
    wide = speech_like(np.random.default_rng(3), rate=16000)
    soundfile.write(corpus / "clean" / "sp02.wav", wide, 16000, subtype="FLOAT")
    dictionary, X = _trained_on(corpus, tmp_path, monkeypatch)
    assert (dictionary.sample_rate, dictionary.files) == (8000, TRAIN)
    signals = [soundfile.read(corpus / "clean" / f"{utterance}.wav")[0] for utterance in TRAIN]
    signals[1] = resample_poly(wide, 1, 2)
    _assert_matrix_of(X, signals)


def test_all_zero_training_file_is_valid(tmp_path):
    corpus = _corpus_with(tmp_path, "sp02.wav", _float_wav(np.zeros(3000)))
    result = run(["train", "--corpus", corpus, "--rank", 2, "-o", tmp_path / "d.npz", "--iterations", 2])
    assert result.exit_code == 0, result.stderr


def test_silent_train_split_is_refused(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", train=TRAIN, test=(), noises=(), snrs=())
    for utterance in TRAIN:
        soundfile.write(corpus / "clean" / f"{utterance}.wav", np.zeros(8000), RATE, subtype="PCM_16")
    result = run(["train", "--corpus", corpus, "--rank", 2, "-o", tmp_path / "d.npz", "--iterations", 2])
    assert_one_line_error(result, f"the {len(TRAIN)} files of the train split are silent")
    assert not (tmp_path / "d.npz").exists()


@pytest.mark.parametrize("case", ["missing", "file", "empty", "test-only"])
def test_bad_corpus_folder(tmp_path, case):
    corpus = tmp_path / "corpus"
    if case == "file":
        corpus.write_bytes(b"x")
    elif case == "empty":
        corpus.mkdir()
        (corpus / "notes.txt").write_text("nothing here")
    elif case == "test-only":
        make_corpus(corpus, train=(), test=TEST, noises=(), snrs=())
    before = snapshot(tmp_path)
    result = run(["train", "--corpus", corpus, "--rank", 2, "-o", tmp_path / "d.npz"])
    assert_one_line_error(result, str(corpus))
    assert snapshot(tmp_path) == before


def test_bad_output(tiny_corpus, tmp_path):
    existing = tmp_path / "d.npz"
    existing.write_bytes(b"keep me")
    assert_one_line_error(run(["train", "--corpus", tiny_corpus, "--rank", 2, "-o", existing]),
                          "exists", "--overwrite")
    assert existing.read_bytes() == b"keep me"
    assert_one_line_error(run(["train", "--corpus", tiny_corpus, "--rank", 2, "-o", tmp_path / "no" / "d.npz"]),
                          "does not exist")
    assert_one_line_error(run(["train", "--corpus", tiny_corpus, "--rank", 2, "-o", existing / "d.npz"]),
                          "does not exist")
    assert_one_line_error(run(["train", "--corpus", tiny_corpus, "--rank", 2, "-o", tmp_path]), "directory")
    clean = tiny_corpus / "clean" / "sp01.wav"
    before = clean.read_bytes()
    assert_one_line_error(run(["train", "--corpus", tiny_corpus, "--rank", 2, "-o", clean, "--overwrite"]),
                          "input")
    assert clean.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["d.npz"]


def test_an_empty_output_is_refused_as_such(tiny_corpus, tmp_path, monkeypatch):
    """``-o ''`` was taken for the working folder: "Error: .: output is a directory"."""
    monkeypatch.chdir(tmp_path)
    result = run(["train", "--corpus", tiny_corpus, "--rank", 2, "-o", ""])
    assert_one_line_error(result, "'-o' / '--output': an empty path; give a file name")
    assert os.listdir(tmp_path) == []


def _warnings(result):
    return [line for line in result.stderr.splitlines() if line.startswith("Warning: ")]


def test_a_rate_above_the_files_own_warns_that_the_band_above_theirs_is_empty(tiny_corpus, tmp_path):
    """8 kHz files at --rate 16000 gave a "16 kHz" dictionary with nothing above 4 kHz, without a word; it is
    still written (a user may want it)."""
    from sepsti.dictionary import load_dictionary

    result = run(["train", "--corpus", tiny_corpus, "--rank", 2, "-o", tmp_path / "d.npz", "--iterations", 2,
                  "--rate", 16000])
    assert result.exit_code == 0, result.stderr
    assert _warnings(result) == [
        "Warning: --rate 16000: the corpus's files are at 8000 Hz, so the dictionary's band above 4000 Hz (their "
        "Nyquist frequency) is empty; train on wideband speech (recorded at 16000 Hz or more) for a dictionary of "
        "the whole band"]
    assert load_dictionary(tmp_path / "d.npz").sample_rate == 16000
    for rate in ([], ["--rate", 8000], ["--rate", 4000]):  # at or below the files' rate: no warning
        result = run(["train", "--corpus", tiny_corpus, "--rank", 2, "-o", tmp_path / "e.npz", "--iterations", 2,
                      "--overwrite", *rate])
        assert result.exit_code == 0 and _warnings(result) == [], result.stderr


def test_files_below_the_default_rate_name_the_default(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", noises=(), snrs=(), rate=4000)
    result = run(["train", "--corpus", corpus, "--rank", 2, "-o", tmp_path / "d.npz", "--iterations", 2])
    assert result.exit_code == 0, result.stderr
    assert _warnings(result)[0].startswith("Warning: the default --rate 8000: the corpus's files are at 4000 Hz, so "
                                           "the dictionary's band above 2000 Hz (their Nyquist frequency) is empty")


def test_the_smaller_side_of_a_matrix_of_stacked_frames_is_named_in_rows():
    from sepsti.commands.train import _smaller_side

    assert _smaller_side(np.zeros((771, 800)), 257, 1) == "771 rows (257 frequency bins x 3 frames)"
    assert _smaller_side(np.zeros((1285, 1300)), 257, 2) == "1285 rows (257 frequency bins x 5 frames)"
    assert _smaller_side(np.zeros((257, 300)), 257, 0) == "257 frequency bins"
    assert _smaller_side(np.zeros((771, 700)), 257, 1) == "700 training frames"


def test_files_at_several_rates_below_the_dictionary_rate_are_named_by_the_highest(tmp_path):
    """8 kHz files and one at 11.025 kHz, modelled at 16 kHz: the band above 5512.5 Hz is empty."""
    from scipy.signal import resample_poly

    corpus = make_corpus(tmp_path / "corpus", noises=(), snrs=())
    y, _ = soundfile.read(corpus / "clean" / "sp02.wav")
    soundfile.write(corpus / "clean" / "sp02.wav", resample_poly(y, 441, 320), 11025)
    result = run(["train", "--corpus", corpus, "--rank", 2, "-o", tmp_path / "d.npz", "--iterations", 2,
                  "--rate", 16000])
    assert result.exit_code == 0, result.stderr
    assert _warnings(result) == [
        "Warning: --rate 16000: the corpus's files are at most 11025 Hz, so the dictionary's band above 5512.5 Hz "
        "(their Nyquist frequency) is empty; train on wideband speech (recorded at 16000 Hz or more) for a "
        "dictionary of the whole band"]


def test_what_the_trainer_did_is_what_is_reported_and_recorded(tiny_corpus, tmp_path, monkeypatch):
    """A trainer that stopped after 2 of the 50 iterations asked for, at log-likelihoods -5 then -3, with its own
    prior rate 0.5: the file records 2 iterations and that rate, stdout the last log-likelihood; --tol 0 (run every
    iteration) reaches it; its convergence warning becomes a note and any other warning is passed on."""
    import warnings
    from types import SimpleNamespace

    import sepsti.denoise
    from sepsti.core.errors import ConvergenceWarning
    from sepsti.dictionary import load_dictionary

    calls = []

    def trainer(X, rank, *, max_iter=200, tol=1e-4, seed=0, prior_rate=0.5, progress=False):
        calls.append({"max_iter": max_iter, "tol": tol, "seed": seed})
        warnings.warn("EM stopped early", ConvergenceWarning)
        warnings.warn("a word from the trainer", UserWarning)
        return np.ones((X.shape[0], rank)), SimpleNamespace(n_iter=2, log_likelihood=np.array([-5.0, -3.0]))

    monkeypatch.setattr(sepsti.denoise, "train_dictionary", trainer)
    with pytest.warns(UserWarning, match="a word from the trainer"):
        result = run(["train", "--corpus", tiny_corpus, "--rank", 2, "-o", tmp_path / "d.NPZ", "--iterations", 50,
                      "--tol", 0, "--seed", 7])
    assert result.exit_code == 0, result.stderr
    assert calls == [{"max_iter": 50, "tol": 0.0, "seed": 7}]
    assert "2 EM iterations, log-likelihood -3: wrote" in result.stdout
    assert "note: EM stopped at --iterations 50 before the log-likelihood met --tol" in result.stderr
    dictionary = load_dictionary(tmp_path / "d.NPZ")
    assert (dictionary.iterations, dictionary.prior_rate, dictionary.seed) == (2, 0.5, 7)


@pytest.mark.parametrize("files", [3, 7])
def test_a_rank_from_the_matrix_size_on_warns_that_it_is_not_identifiable(tmp_path, files):
    """As select-rank says of its --ranks: from min(bins, frames) on a factorization fits any data. 3 files have
    fewer frames than the 257 bins, 7 more."""
    from sepsti.training import train_split

    corpus = make_corpus(tmp_path / "corpus", train=tuple(f"sp{n:02d}" for n in range(1, files + 1)), test=(),
                         noises=(), snrs=())
    frames = train_split(corpus).matrix()[0].shape[1]
    size = min(257, frames)
    what = f"{frames} training frames" if frames < 257 else "257 frequency bins"
    for rank, warned in ((size - 1, []), (size, [f"Warning: --rank {size}: not below the {what} of the 257 x "
                                                  f"{frames} training matrix, where a factorization fits any data: "
                                                  "no data identify such a rank"])):
        result = run(["train", "--corpus", corpus, "--rank", rank, "-o", tmp_path / "d.npz", "--iterations", 1,
                      "--overwrite"])
        assert result.exit_code == 0 and _warnings(result) == warned, result.stderr


def test_a_chosen_rank_from_the_matrix_size_on_is_warned_of_as_chosen(tiny_corpus, tmp_path, monkeypatch):
    """Under ``--rank auto`` the warning names the rank STI chose, not a ``--rank`` the user never gave (``--rank
    153`` passed before)."""
    from types import SimpleNamespace

    import sepsti.core.evidence.sti_nmf
    from sepsti.training import train_split

    frames = train_split(tiny_corpus).matrix()[0].shape[1]
    assert frames < 257
    monkeypatch.setattr(sepsti.core.evidence.sti_nmf, "select_rank_sti", lambda X, ranks, **options: SimpleNamespace(
        ranks=list(ranks), log_marginal_likelihood=[-2.0, -1.0], stderr=[0.1, 0.1], selected_rank=frames,
        settings={"model": {"dispersion": 1.0}}))
    result = run(["train", "--corpus", tiny_corpus, "--rank", "auto", "--ranks", f"2,{frames}", "-o",
                  tmp_path / "d.npz", "--iterations", 1])
    assert result.exit_code == 0, result.stderr
    assert _warnings(result) == [f"Warning: the chosen rank {frames}: not below the {frames} training frames of the "
                                 f"257 x {frames} training matrix, where a factorization fits any data: no data "
                                 "identify such a rank"]


def test_overwrite_replaces(tiny_corpus, tmp_path):
    existing = tmp_path / "d.npz"
    existing.write_bytes(b"old")
    result = run(["train", "--corpus", tiny_corpus, "--rank", 2, "-o", existing, "--iterations", 2, "--overwrite"])
    assert result.exit_code == 0, result.stderr
    assert existing.read_bytes()[:2] == b"PK"


@pytest.mark.slow
@pytest.mark.noizeus
def test_default_dictionary_is_what_the_documented_command_builds(noizeus_root, tmp_path):
    from sepsti.dictionary import default_dictionary_path, load_dictionary

    shipped = load_dictionary(default_dictionary_path())
    # the documented command (README, "train"): R = 128, selected by `--rank auto` with the earlier dispersion rule
    result = run(["train", "--corpus", noizeus_root, "--rank", 128, "-o", tmp_path / "d.npz"])
    assert result.exit_code == 0, result.stderr
    rebuilt = load_dictionary(tmp_path / "d.npz")
    assert (rebuilt.files, rebuilt.iterations, rebuilt.seed) == (shipped.files, shipped.iterations, shipped.seed)
    assert_rebuilt(rebuilt.W, shipped.W)


@pytest.mark.slow
@pytest.mark.parametrize("path, options", [("wideband_dictionary_path", []),
                                           ("narrowband_dictionary_path", ["--rate", 8000, "--context", 1])])
def test_enhancers_dictionaries_are_what_the_documented_commands_build(tmp_path, path, options):
    from sepsti import dictionary as dictionaries
    from sepsti.corpora.wideband import is_wideband_corpus

    data = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "wideband"
    if not is_wideband_corpus(data):
        pytest.skip("wideband corpus not found at ../shared/data/wideband")
    shipped = dictionaries.load_dictionary(getattr(dictionaries, path)())
    # the documented commands (docs/wideband.md, docs/enhance.md): R = 128 by held-out enhancement on the
    # validation speakers
    result = run(["train", "--corpus", data, "--rank", 128, "--dtype", "float32", "-o", tmp_path / "d.npz", *options])
    assert result.exit_code == 0, result.stderr
    rebuilt = dictionaries.load_dictionary(tmp_path / "d.npz")
    assert (rebuilt.files, rebuilt.iterations, rebuilt.framing, rebuilt.context) == \
        (shipped.files, shipped.iterations, shipped.framing, shipped.context)
    assert_rebuilt(rebuilt.W, shipped.W)


def assert_rebuilt(rebuilt, shipped):
    """A dictionary rebuilt by the documented command equals the shipped one up to BLAS's rounding.

    Another BLAS kernel sums in another order, and 200 multiplicative updates grow the difference: on one
    machine, OpenBLAS's Haswell and SandyBridge kernels rebuilt the NOIZEUS, 16 kHz and 8 kHz dictionaries
    2.1e-5, 6.3e-6 and 2.2e-6 apart in relative Frobenius norm (single small entries up to 0.2 % apart), each
    about as far from the shipped one; one EM iteration fewer moves the NOIZEUS dictionary by 1.7e-3.
    """
    assert np.linalg.norm(rebuilt - shipped) / np.linalg.norm(shipped) < 2e-4


def test_rank_auto_trains_at_the_rank_sti_selects(tiny_corpus, tmp_path, monkeypatch):
    import sepsti.core.evidence.sti_nmf
    from sepsti.dictionary import load_dictionary

    calls = []
    real = sepsti.core.evidence.sti_nmf.select_rank_sti

    def short_run(X, ranks, **options):
        # the real estimator on short chains
        selection = real(X, ranks, **{**options, "num_steps": 40, "num_keep": 20, "num_intervals": 4})
        calls.append((list(ranks), options["seed"], selection.selected_rank, options, selection))
        return selection

    monkeypatch.setattr(sepsti.core.evidence.sti_nmf, "select_rank_sti", short_run)
    output = tmp_path / "auto.npz"
    result = run(["train", "--corpus", tiny_corpus, "--rank", "Auto", "--ranks", "4,2,4", "-o", output,
                  "--iterations", 5, "--seed", 3])
    assert result.exit_code == 0, result.stderr
    assert len(calls) == 1 and calls[0][:2] == ([2, 4], 3)  # 'auto' in any case; each candidate once, in order
    # the speech model (docs/rank_selection.md) with the library's validated settings
    assert {key: value for key, value in calls[0][3].items() if key not in ("seed", "progress")} == \
        {"dispersion": "rayleigh", "prior_rate": "matched"}
    assert load_dictionary(output).rank == calls[0][2]
    assert f"selected rank {calls[0][2]} by STI" in result.stderr
    # and log p(X | R) of each rank (README), one line each
    selection = calls[0][4]
    assert list(selection.ranks) == [2, 4]
    for rank, value, stderr in zip(selection.ranks, selection.log_marginal_likelihood, selection.stderr):
        assert f"rank {rank:>4}: log p(X | R) = {value:.6g} ± {stderr:.2g}\n" in result.stderr


def test_rank_auto_with_context_selects_on_the_single_frame_spectra(tiny_corpus, tmp_path, monkeypatch):
    """Stacked frames would count each magnitude three times: STI sees the spectra select-rank sees."""
    import sepsti.core.evidence.sti_nmf
    from sepsti.training import train_split

    seen = []

    def record(X, ranks, **options):
        seen.append(X)
        raise KeyboardInterrupt

    monkeypatch.setattr(sepsti.core.evidence.sti_nmf, "select_rank_sti", record)
    run(["train", "--corpus", tiny_corpus, "--rank", "auto", "--ranks", "2", "--context", "1",
         "-o", tmp_path / "d.npz"])
    np.testing.assert_array_equal(seen[0], train_split(tiny_corpus).matrix()[0])


def test_rank_auto_with_context_trains_and_records_atoms_of_stacked_frames(tiny_corpus, tmp_path, monkeypatch):
    """The rank is chosen on single frames, the dictionary learned and recorded with the context asked for."""
    import sepsti.core.evidence.sti_nmf
    from sepsti.dictionary import load_dictionary

    real = sepsti.core.evidence.sti_nmf.select_rank_sti
    monkeypatch.setattr(sepsti.core.evidence.sti_nmf, "select_rank_sti", lambda X, ranks, **options: real(
        X, ranks, **{**options, "num_steps": 40, "num_keep": 20, "num_intervals": 4}))
    output = tmp_path / "auto.npz"
    result = run(["train", "--corpus", tiny_corpus, "--rank", "auto", "--ranks", "2", "--context", "1", "-o", output,
                  "--iterations", 5])
    assert result.exit_code == 0, result.stderr
    dictionary = load_dictionary(output)
    assert dictionary.rank == 2 and dictionary.context == 1
    assert dictionary.W.shape[0] == 3 * dictionary.framing.n_bins


@pytest.mark.parametrize("rank, ranks, option", [("auto", ["--ranks", "2,100000"], "--ranks 100000"),
                                                  ("100000", [], "--rank 100000")])
def test_more_atoms_than_frames_are_refused_before_any_work(tiny_corpus, tmp_path, monkeypatch, rank, ranks, option):
    import sepsti.core.evidence.sti_nmf

    monkeypatch.setattr(sepsti.core.evidence.sti_nmf, "select_rank_sti", None)  # never reached
    result = run(["train", "--corpus", tiny_corpus, "--rank", rank, *ranks, "-o", tmp_path / "d.npz"])
    assert_one_line_error(result, option, "more atoms than the", "training frames")
    assert not (tmp_path / "d.npz").exists()


def test_one_atom_more_than_the_frames_is_refused_though_below_the_bins(tiny_corpus, tmp_path, monkeypatch):
    """The bound is the training frames, also where they are fewer than the frequency bins (a rank between the two,
    trained and written, passed before)."""
    import sepsti.denoise
    from sepsti.training import train_split

    frames = train_split(tiny_corpus).matrix()[0].shape[1]
    assert frames + 1 < 257
    monkeypatch.setattr(sepsti.denoise, "train_dictionary", None)  # never reached
    result = run(["train", "--corpus", tiny_corpus, "--rank", frames + 1, "-o", tmp_path / "d.npz"])
    assert_one_line_error(result, f"--rank {frames + 1}: more atoms than the {frames} training frames")
    assert not (tmp_path / "d.npz").exists()


@pytest.mark.parametrize("rank", ["0", "many"])
def test_bad_rank(tiny_corpus, tmp_path, rank):
    result = run(["train", "--corpus", tiny_corpus, "--rank", rank, "-o", tmp_path / "d.npz"])
    assert result.exit_code == 2
    assert "expected a positive integer or 'auto'" in result.stderr
    assert not (tmp_path / "d.npz").exists()


@pytest.mark.parametrize("name", ["d.wav", "d", "d.npz.txt"])
def test_output_must_be_npz(tiny_corpus, tmp_path, name):
    assert_one_line_error(run(["train", "--corpus", tiny_corpus, "--rank", 2, "-o", tmp_path / name]),
                          name, ".npz")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("args, fragments", [
    (["--iterations", "100001"], ["'--iterations'", "1<=x<=100000"]),
    (["--iterations", "99999999999999999999"], ["'--iterations'", "1<=x<=100000"]),
    (["--tol", "nan"], ["'--tol'", "not a finite number"]),
    (["--tol", "inf"], ["'--tol'", "not a finite number"]),
    (["--rate", "3999"], ["'--rate'", "4000<=x<=48000"]),
    (["--rate", "48001"], ["'--rate'", "4000<=x<=48000"]),
])
def test_iterations_and_tol_are_refused_by_their_option_names(tmp_path, args, fragments):
    # (the folder is never looked at: the option is refused first); --rate outside the rates a dictionary is trained
    # at (features.DICTIONARY_RATES, which loading checks): a 2 kHz dictionary was written, that none could load
    result = run(["train", "--corpus", tmp_path / "nowhere", "--rank", 4, "-o", tmp_path / "d.npz", *args])
    assert_one_line_error(result, *fragments)


def test_iterations_are_documented_as_a_cap_with_a_maximum():
    text = " ".join(run(["train", "--help"]).stdout.split())
    assert "Most EM iterations: EM stops earlier once the log-" in text and "[default: 200; 1<=x<=100000]" in text


@pytest.mark.parametrize("args, fragments", [
    (["--rank", "4", "--ranks", "1,2"], ["--ranks 1,2: candidates of --rank auto, but --rank 4 fixes the rank"]),
    (["--rank", "auto", "--ranks", "1,,2"], ["--ranks '1,,2': empty item"]),
    (["--rank", "auto", "--ranks", "2,"], ["--ranks '2,': empty item"]),
    (["--rank", "auto", "--ranks", "0,2"], ["--ranks '0,2': expected positive integers"]),
])
def test_ranks_that_would_be_ignored_or_misread_are_refused(tiny_corpus, tmp_path, monkeypatch, args, fragments):
    import sepsti.training

    monkeypatch.setattr(sepsti.training, "train_split", None)  # never reached
    result = run(["train", "--corpus", tiny_corpus, "-o", tmp_path / "d.npz", *args])
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "d.npz").exists()


# --------------------------------------------------------------------------------------------
# names with a line break


def test_errors_quote_names_with_a_line_break_on_one_line(tmp_path):
    missing = tmp_path / "no\ncorpus"
    result = run(["train", "--corpus", missing, "--rank", 2, "-o", tmp_path / "d.npz"])
    assert_one_line_error(result, f"{str(missing)!r}: no such corpus folder")
    # a name below a folder given, in a message of the corpus reader
    corpus = _corpus_with(tmp_path / "my\nfiles", "sp02.wav", b"")
    result = run(["train", "--corpus", corpus, "--rank", 2, "-o", tmp_path / "d.npz"])
    assert_one_line_error(result, f"{str(corpus / 'clean' / 'sp02.wav')!r}: empty file")
    # after an option, and two names in one message
    output = tmp_path / "out\nput.txt"
    result = run(["train", "--corpus", corpus, "--rank", 2, "-o", output])
    assert_one_line_error(result, f"-o {str(output)!r}: a dictionary is an .npz archive")
    output = tmp_path / "new\nfolder" / "d.npz"
    result = run(["train", "--corpus", corpus, "--rank", 2, "-o", output])
    assert_one_line_error(result, f"{str(output)!r}: output folder {str(output.parent)!r} does not exist")
    # a name with a space too: the word holding the line break is quoted
    missing = tmp_path / "my dir\nx"
    result = run(["train", "--corpus", missing, "--rank", 2, "-o", tmp_path / "d.npz"])
    assert_one_line_error(result, f"{tmp_path}/my 'dir\\nx': no such corpus folder")


def test_names_with_a_line_or_paragraph_separator_are_quoted_and_others_left_alone():
    from sepsti.commands import shown

    assert shown("a\u2028b.wav") == "'a\\u2028b.wav'" and shown("a\u2029b.wav") == "'a\\u2029b.wav'"
    assert shown("my dir/café.wav") == "my dir/café.wav"
    # another control character than a line break: a carriage return (which would overwrite the line on a terminal),
    # a tab, a terminal's escape (the name printed as it is passed before)
    assert shown("a\rb.wav") == "'a\\rb.wav'" and shown("a\tb.wav") == "'a\\tb.wav'"
    assert shown("\x1b[2Jb.wav") == "'\\x1b[2Jb.wav'"


def test_os_and_internal_errors_quote_names_with_a_line_break_on_one_line(tmp_path, monkeypatch):
    import sepsti.training

    name = str(tmp_path / "a\nb.wav")

    def failing(error):
        def train_split(corpus, rate):
            raise error
        return train_split

    monkeypatch.setattr(sepsti.training, "train_split", failing(PermissionError(13, "Permission denied", name)))
    result = run(["train", "--corpus", tmp_path, "--rank", 2, "-o", tmp_path / "d.npz"])
    assert_one_line_error(result, f"{name!r}: Permission denied")
    monkeypatch.setattr(sepsti.training, "train_split", failing(OSError(28, "No space left on device")))
    result = run(["train", "--corpus", tmp_path, "--rank", 2, "-o", tmp_path / "d.npz"])
    assert_one_line_error(result, "Error: file: No space left on device")  # an error naming no file
    monkeypatch.setattr(sepsti.training, "train_split", failing(RuntimeError(f"cannot map {name}")))
    result = run(["train", "--corpus", tmp_path, "--rank", 2, "-o", tmp_path / "d.npz"])
    assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr == f"Error: internal failure: RuntimeError: cannot map {name!r}\n"
    # a name in parentheses, before a colon: the quotes within them
    monkeypatch.setattr(sepsti.training, "train_split", failing(RuntimeError(f"cannot map ({name}): gone")))
    result = run(["train", "--corpus", tmp_path, "--rank", 2, "-o", tmp_path / "d.npz"])
    assert result.stderr == f"Error: internal failure: RuntimeError: cannot map ({name!r}): gone\n"


def test_warnings_quote_names_with_a_line_break_on_one_line(tiny_corpus, tmp_path):
    """A warning raised while a command runs (here by the trainer) prints as ``Warning: <what>`` on one line, a word
    holding a line break quoted as in errors (the name printed as it is, over two lines, passed before). A process of
    its own: pytest records warnings rather than printing them."""
    import subprocess
    import sys

    name = str(tmp_path / "a\nb.wav")
    script = ("import sys, warnings\n"
              "import sepsti.denoise\n"
              "real = sepsti.denoise.train_dictionary\n"
              "def trainer(X, rank, **options):\n"
              "    warnings.warn(f'cannot map {sys.argv[1]} fully', UserWarning)\n"
              "    return real(X, rank, **options)\n"
              "sepsti.denoise.train_dictionary = trainer\n"
              "from sepsti.cli import cli\n"
              "cli.main(sys.argv[2:], prog_name='sepsti')\n")
    result = subprocess.run([sys.executable, "-c", script, name, "train", "--corpus", str(tiny_corpus), "--rank", "2",
                             "-o", str(tmp_path / "d.npz"), "--iterations", "2", "--tol", "0"],
                            capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr
    assert result.stderr == f"Warning: cannot map {name!r} fully\n"


def test_sepsti_debug_lets_an_internal_failure_through_with_its_traceback(tmp_path, monkeypatch):
    import sepsti.training

    def train_split(corpus, rate):
        raise RuntimeError("cannot map")

    monkeypatch.setattr(sepsti.training, "train_split", train_split)
    monkeypatch.setenv("SEPSTI_DEBUG", "1")
    result = run(["train", "--corpus", tmp_path, "--rank", 2, "-o", tmp_path / "d.npz"])
    assert result.exit_code == 1 and isinstance(result.exception, RuntimeError), result.exception
    assert str(result.exception) == "cannot map" and "Error: " not in result.stderr


_LONG_RUNS = {  # a command that draws bars, and what its bar starts with
    "train": (["train", "--rank", 3, "--iterations", 5, "-o", "{out}/d.npz"], "train R=3:"),
    "evaluate": (["evaluate", "--dictionary", "{dictionary}", "--iterations", 2, "--noise", "white", "--snr", 0],
                 "evaluate:"),
    "select-rank": (["select-rank", "--preset", "blocks", "--ranks", "2,3", "--temperatures", 2, "--samples", 12,
                     "--keep", 6, "--blocks", 2, "--replicates", 2], "STI (12 chains):"),
}


@pytest.mark.parametrize("command", sorted(_LONG_RUNS))
@pytest.mark.parametrize("option, environment, drawn", [("--progress", "0", True), ("--no-progress", "1", False),
                                                        (None, "1", True)])
def test_every_long_command_draws_its_bars_as_asked(tiny_corpus, tiny_dictionary, tmp_path, monkeypatch, command,
                                                    option, environment, drawn):
    """select-rank had --quiet, enhance and corpus synth --progress/--no-progress, train and evaluate neither."""
    monkeypatch.setenv("SEPSTI_PROGRESS", environment)
    args, bar = _LONG_RUNS[command]
    args = [str(arg).format(out=tmp_path, dictionary=tiny_dictionary) for arg in args]
    result = run([*args, "--corpus", tiny_corpus, *([option] if option else [])])
    assert result.exit_code == 0, result.stderr
    assert (bar in result.stderr) == drawn, result.stderr


@pytest.mark.parametrize("args, named", [
    (["enhance", "{d}/a.wav", "-o", "{d}/selfloop.wav"], "{d}/selfloop.wav"),
    (["enhance", "{d}/a.wav", "-o", "{d}/loop/x.wav"], "{d}/loop/x.wav"),
    (["enhance", "{d}/a.wav", "-o", "{d}/z.wav", "--dictionary", "{d}/loop"], "{d}/loop"),
    (["enhance", "{d}/a.wav", "-o", "{d}/z.wav", "--noise-sample", "{d}/l1"], "{d}/l1"),
    (["enhance", "{d}/l1", "-o", "{d}/z.wav"], "{d}/l1"),
    (["train", "--corpus", "{corpus}", "--rank", 2, "-o", "{d}/loop/x.npz"], "{d}/loop/x.npz"),
    (["evaluate", "--clean", "{d}/loop", "--noisy", "{d}/l1"], "{d}/loop"),
])
def test_a_loop_of_symbolic_links_is_named_in_one_line(tmp_path, tiny_corpus, args, named):
    """pathlib's RuntimeError 'Symlink loop from ...' ended as 'internal failure', exit 1; an input that is a
    loop was 'no such file'."""
    (tmp_path / "a.wav").write_bytes((tiny_corpus / "clean" / "sp21.wav").read_bytes())
    for link, target in (("loop", "loop"), ("selfloop.wav", "selfloop.wav"), ("l1", "l2"), ("l2", "l1")):
        (tmp_path / link).symlink_to(target)
    result = run([str(arg).format(d=tmp_path, corpus=tiny_corpus) for arg in args])
    assert_one_line_error(result, f"{named.format(d=tmp_path)}: a loop of symbolic links")


def test_a_broken_link_as_input_is_named_so(tmp_path, tiny_corpus):
    (tmp_path / "gone.wav").symlink_to("nowhere.wav")
    assert_one_line_error(run(["enhance", tmp_path / "gone.wav", "-o", tmp_path / "out.wav"]),
                          f"{tmp_path}/gone.wav: a broken symbolic link")
    assert_one_line_error(run(["enhance", tiny_corpus / "clean" / "sp21.wav", "-o", tmp_path / "out.wav",
                               "--dictionary", tmp_path / "gone.wav"]),
                          f"dictionary {tmp_path}/gone.wav: a broken symbolic link")


@pytest.mark.parametrize("args", [["train", "--rank", 2, "-o", "d.npz"], ["select-rank"]])
def test_the_corpus_comes_from_the_environment_when_not_given(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEPSTI_NOIZEUS", raising=False)
    assert_one_line_error(run(args), "Missing option '--corpus'")
    monkeypatch.setenv("SEPSTI_NOIZEUS", str(tmp_path / "elsewhere"))
    assert_one_line_error(run(args), f"{tmp_path / 'elsewhere'}: no such corpus folder")


@pytest.mark.parametrize("args, named, noun", [
    (["corpus", "info", ""], "'DIRECTORY'", "folder"),
    (["train", "--corpus", "", "--rank", 2, "-o", "x.npz"], "'--corpus'", "folder"),
    (["select-rank", "--corpus", ""], "'--corpus'", "folder"),
    (["evaluate", "--corpus", ""], "'--corpus'", "folder"),
    (["evaluate", "--clean", "", "--noisy", "n"], "'--clean'", "folder"),
    (["evaluate", "--clean", "c", "--noisy", ""], "'--noisy'", "folder"),
    (["evaluate", "--corpus", "c", "--dictionary", ""], "'--dictionary'", "file"),
    (["enhance", ""], "'IN...'", "file"),
    (["enhance", "a.wav", "--dictionary", ""], "'--dictionary'", "file"),
    (["enhance", "a.wav", "--noise-sample", ""], "'--noise-sample'", "file"),
])
def test_an_empty_input_path_is_refused_as_such(tiny_corpus, tmp_path, monkeypatch, args, named, noun):
    """An empty path named the working folder: from inside a corpus, `--corpus "$UNSET"` trained on it; a file
    option said '.: is a directory'."""
    monkeypatch.chdir(tiny_corpus)
    assert_one_line_error(run(args), f"{named}: an empty path; give a {noun} name")


def test_an_input_below_a_loop_of_links_is_named_so(tmp_path):
    """lexists is false below a loop (its folder cannot be resolved): 'no such file' was said."""
    (tmp_path / "loop").symlink_to("loop")
    assert_one_line_error(run(["enhance", tmp_path / "loop" / "x.wav", "-o", tmp_path / "out.wav"]),
                          f"{tmp_path}/loop/x.wav: a loop of symbolic links")
