"""sepsti.corpora.wideband: the files a manifest may list, and the split defined on the distributed corpus."""

import collections
import hashlib
import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.corpora import wideband

SHIPPED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "wideband"


def _corpus(root, speakers, extra=()):
    """A manifest of one (empty) file per 16 kHz speaker, plus ``extra`` entries; nothing is read."""
    entries = []
    for speaker in speakers:
        name = f"{speaker}/{speaker}-1-0000.flac"
        (root / speaker).mkdir(parents=True)
        (root / name).touch()
        entries.append({"file": name, "rate": 16000, "speaker": speaker, "flags": []})
    (root / "manifest.json").write_text(json.dumps(entries + list(extra)))
    return root


def test_a_file_listed_twice_or_outside_the_folder_is_refused(tmp_path):
    root = _corpus(tmp_path / "wide", ["11", "12", "13"])
    os.symlink(root / "11", root / "alias")  # a folder linked inside: its files are the folder's own
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.flac").touch()
    os.symlink(tmp_path / "elsewhere", root / "more")
    accepted = [{"file": "more/x.flac", "rate": 16000, "speaker": "14", "flags": []}]
    _corpus(tmp_path / "ok", ["11", "12", "13"], accepted)
    os.symlink(tmp_path / "elsewhere", tmp_path / "ok" / "more")
    assert [u.path for u in wideband.read_manifest(tmp_path / "ok")][-1] == tmp_path / "ok" / "more" / "x.flac"
    cases = [("11/11-1-0000.flac", "lists the file of entry 0 again"),  # under a second speaker: train and test
             ("alias/11-1-0000.flac", "lists the file of entry 0 again"),
             ("./12/../12/12-1-0000.flac", "has 'file' \"./12/../12/12-1-0000.flac\"; expected a path inside"),
             ("/etc/hostname", "has 'file' \"/etc/hostname\"; expected a path inside"),
             ("../elsewhere/x.flac", "has 'file' \"../elsewhere/x.flac\"; expected a path inside"),
             ("", "has 'file' \"\"; expected a non-empty path"),
             (None, "has 'file' null; expected a non-empty path"),
             (7, "has 'file' 7; expected a non-empty path")]
    for file, message in cases:
        entries = json.loads((root / "manifest.json").read_text())[:3]
        (root / "manifest.json").write_text(json.dumps(entries + [{"file": file, "rate": 16000, "speaker": "99"}]))
        with pytest.raises(ParameterError, match=f"manifest.json: entry 3 .*{message}"):
            wideband.read_manifest(root)


def test_a_rate_that_is_not_a_whole_number_of_hz_is_refused(tmp_path):
    root = _corpus(tmp_path / "wide", ["11"])
    entries = json.loads((root / "manifest.json").read_text())
    for rate, shown in ((float("inf"), "Infinity"), (1e400, "Infinity"), (16000.5, "16000.5"), (True, "true"),
                        (None, "null"), ("abc", '"abc"'), (0, "0"), (-16000, "-16000")):
        entries[0]["rate"] = rate
        (root / "manifest.json").write_text(json.dumps(entries))  # Infinity, as Python's json writes it
        with pytest.raises(ParameterError, match=f"manifest.json: entry 0 has 'rate' {shown}; expected a whole "
                                                 "number of Hz, at least 1$"):
            wideband.read_manifest(root)
    entries[0]["rate"] = 16000.0
    (root / "manifest.json").write_text(json.dumps(entries))
    assert wideband.read_manifest(root)[0].rate == 16000


def test_a_manifest_of_other_speakers_warns_that_its_split_is_not_the_shipped_dictionarys(tmp_path, monkeypatch):
    speakers = ["11", "12", "13", "15", "16", "17"]
    root = _corpus(tmp_path / "wide", speakers)
    with pytest.warns(UserWarning, match=r"^wideband manifest: its 6 LibriSpeech speakers are not the distributed "
                                         r"corpus's 201, .* do not score that dictionary on its 'test' split$"):
        splits = wideband.split_of(wideband.read_manifest(root))
    assert splits == {"11": "test", "12": "validation", "13": "train", "15": "train", "16": "train", "17": "test"}
    with pytest.warns(UserWarning, match="not the distributed corpus's"):
        assert [u.speaker for u in wideband.select(root, "test")] == ["11", "17"]
    # the same speakers as the distributed ones (here: these six): no warning, the same split
    digest = hashlib.sha256("\n".join(speakers).encode()).hexdigest()
    monkeypatch.setattr(wideband, "DISTRIBUTED_SPEAKERS_SHA256", digest)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert wideband.split_of(wideband.read_manifest(root)) == splits


@pytest.mark.skipif(not wideband.is_wideband_corpus(SHIPPED), reason="wideband corpus not found at ../shared/data")
def test_the_distributed_corpus_reads_as_documented_and_quietly():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        utterances = wideband.read_manifest(SHIPPED)
        splits = wideband.split_of(utterances)
        chosen = {split: wideband.select(SHIPPED, split) for split in wideband.SPLITS}
    assert len(utterances) == 233
    libri = {u.speaker for u in utterances if u.rate == wideband.TRAIN_RATE}
    assert collections.Counter(splits[s] for s in libri) == {"train": 140, "validation": 20, "test": 41}
    assert splits["LJ"] == "test"
    counts = {split: collections.Counter(u.rate for u in chosen[split]) for split in wideband.SPLITS}
    assert counts == {"train": {16000: 108}, "validation": {16000: 19}, "test": {16000: 34, 22050: 32}}
    # one more speaker moves others between splits: warned
    extra = wideband.Utterance(utterances[0].path, "100", wideband.TRAIN_RATE, 1.0, ())
    with pytest.warns(UserWarning, match="its 202 LibriSpeech speakers are not the distributed corpus's 201"):
        wideband.split_of(utterances + [extra])


def test_a_folder_that_is_not_a_path_is_refused_by_name():
    """None met a TypeError inside pathlib."""
    for read in (wideband.is_wideband_corpus, wideband.read_manifest, wideband.select, wideband.clean_signals):
        with pytest.raises(ParameterError, match=r"^folder=None must be a path \(a str or os\.PathLike\)$"):
            read(None)


def _speaker_files(root, entries, rng):
    """Write each entry's file (``signal`` given, or 0.1 s of noise at the entry's rate) and the manifest."""
    import soundfile

    for entry in entries:
        path = root / entry["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        y = entry.pop("signal", None)
        y = rng.uniform(-0.1, 0.1, entry["rate"] // 10) if y is None else y
        soundfile.write(path, y, entry.pop("file_rate", entry["rate"]), subtype="DOUBLE")
    (root / "manifest.json").write_text(json.dumps(entries))
    return root


@pytest.mark.filterwarnings("ignore:wideband manifest")
def test_splits_exclusions_and_the_high_pass_of_a_small_manifest(tmp_path, rng):
    """Written out by hand from the module's conventions, without the distributed corpus: speakers sorted by number
    (9 before 10 before 100), test at positions 0 and 5, validation at 1; the other rate's speaker in test; a flag of
    EXCLUDED_FLAGS leaves a file out, an advisory one does not; and what clean_signals returns is high-passed by a
    2nd-order Butterworth run both ways, whose power gain is 1 / (1 + (tan(pi fc / fs) / tan(pi f / fs)) ** 4)."""
    import numpy as np

    rate, fc = 16000, wideband.HIGHPASS_HZ
    t = np.arange(2 * rate) / rate
    frequencies = np.array([20.0, 80.0, 1000.0])
    tones = np.sum([0.1 * np.sin(2 * np.pi * f * t) for f in frequencies], axis=0)
    speakers = ["100", "9", "13", "10", "12", "11"]
    entries = [{"file": f"{s}/{s}-0.wav", "rate": rate, "speaker": s, "flags": []} for s in speakers]
    entries[1]["signal"] = tones  # speaker 9's
    entries += [{"file": "11/11-1.wav", "rate": rate, "speaker": "11", "flags": ["clipped"]},
                {"file": "12/12-1.wav", "rate": rate, "speaker": "12", "flags": ["lf_rumble_below_100hz"]},
                {"file": "LJ/LJ-0.wav", "rate": 22050, "speaker": "LJ", "flags": []}]
    root = _speaker_files(tmp_path / "wide", entries, rng)
    assert wideband.split_of(wideband.read_manifest(root)) == {
        "9": "test", "10": "validation", "11": "train", "12": "train", "13": "train", "100": "test", "LJ": "test"}
    assert [u.path.name for u in wideband.select(root, "train")] == ["13-0.wav", "12-0.wav", "11-0.wav",
                                                                     "12-1.wav"]
    signals = wideband.clean_signals(root, "test")
    assert [(name, rate) for name, _, rate in signals] == [("100-0", 16000), ("9-0", 16000), ("LJ-0", 22050)]
    # each tone's amplitude, fitted over the middle second (the filter's transients last milliseconds)
    y = signals[1][1]
    middle = slice(rate // 2, 3 * rate // 2)
    basis = np.concatenate([np.stack([np.sin(2 * np.pi * f * t), np.cos(2 * np.pi * f * t)], axis=1)
                            for f in frequencies], axis=1)[middle]
    coefficients = np.linalg.lstsq(basis, y[middle], rcond=None)[0].reshape(3, 2)
    gains = np.hypot(coefficients[:, 0], coefficients[:, 1]) / 0.1
    expected = 1 / (1 + (np.tan(np.pi * fc / rate) / np.tan(np.pi * frequencies / rate)) ** 4)
    np.testing.assert_allclose(gains, expected, rtol=1e-4)  # 0.0039, 0.5, 0.99996



@pytest.mark.filterwarnings("ignore:wideband manifest")
def test_a_file_at_another_rate_than_its_manifest_says_is_refused(tmp_path, rng):
    entries = [{"file": "9/9-0.wav", "rate": 16000, "speaker": "9", "file_rate": 8000}]
    root = _speaker_files(tmp_path / "wide", entries, rng)
    with pytest.raises(ParameterError, match=r"9-0\.wav: sample rate 8000 Hz, the manifest says 16000 Hz"):
        wideband.clean_signals(root, "test")


@pytest.mark.parametrize("manifest, message", [
    ({"file": "a.flac", "rate": 16000, "speaker": "1"}, "expected a list of entries, got dict"),
    (["a.flac"], "entry 0 is a str; each entry is an object with 'file', 'rate' and 'speaker'"),
    ([{"file": "a.flac", "rate": 16000, "speaker": "1", "flags": "clipped"}],
     "entry 0 has 'flags' \"clipped\"; expected a list of names"),
    ([{"file": "a.flac", "rate": 16000, "speaker": "1", "flags": ["clipped", None]}],
     r"entry 0 has 'flags' \[\"clipped\", null\]; expected a list of names"),
    ([{"file": "a.flac", "rate": 16000, "speaker": "1", "duration_s": -1.0}],
     r"entry 0 has 'duration_s' -1\.0; expected a finite number of seconds, at least 0$"),
    ([{"file": "a.flac", "rate": 16000, "speaker": "1", "duration_s": float("inf")}],
     "entry 0 has 'duration_s' Infinity; expected"),
    ([{"file": "a.flac", "rate": 16000, "speaker": "1", "duration_s": None}], "entry 0 has 'duration_s' null"),
    ([{"file": "a.flac", "rate": 16000, "speaker": None}], "entry 0 has 'speaker' null; expected a name$"),
    ([{"file": "a.flac", "rate": 16000, "speaker": ""}], "entry 0 has 'speaker' \"\"; expected a name$"),
    ([{"file": "a.flac", "speaker": "1"}], "entry 0 lacks 'rate'; each entry needs 'file', 'rate' and 'speaker'$"),
])
def test_a_manifest_of_garbled_entries_is_refused(tmp_path, manifest, message):
    """A flag given as one string was read letter by letter (a 'clipped' file kept); a negative or an infinite
    duration, an object or a list of names for the entries are each refused by the entry's number. A null
    duration or rate gave Python's exception text in place of the field's name, a null speaker or file was read
    as the name 'None'."""
    root = tmp_path / "wide"
    root.mkdir()
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ParameterError, match=f"manifest.json: {message}"):
        wideband.read_manifest(root)


def test_an_unknown_split_or_one_without_usable_files_is_refused(tmp_path):
    """Six speakers: 11 and 17 in test, 12 in validation; with 12's only file clipped, validation has nothing
    usable."""
    root = _corpus(tmp_path / "wide", ["11", "12", "13", "15", "16", "17"])
    entries = json.loads((root / "manifest.json").read_text())
    entries[1]["flags"] = ["clipped"]
    (root / "manifest.json").write_text(json.dumps(entries))
    with pytest.raises(ParameterError, match=r"^split='dev': expected one of train, validation, test$"):
        wideband.select(root, "dev")
    with pytest.warns(UserWarning, match="not the distributed corpus's"):
        with pytest.raises(ParameterError, match=r"wide: no usable files in the validation split$"):
            wideband.select(root, "validation")


@pytest.mark.parametrize("length", [16, 50, 1000])
def test_the_high_pass_is_scipys_butterworth_run_both_ways_from_16_samples(rng, length):
    """Signals of 16 samples and more, past sosfiltfilt's padding of 9, are filtered as scipy filters them."""
    from scipy.signal import butter, sosfiltfilt

    y = rng.standard_normal(length)
    expected = sosfiltfilt(butter(2, wideband.HIGHPASS_HZ, btype="highpass", fs=16000, output="sos"), y)
    np.testing.assert_allclose(wideband.highpass(y, 16000), expected, rtol=0, atol=1e-12)
