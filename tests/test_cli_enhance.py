"""``sepsti enhance``: outputs, rates and lengths, options reaching the core, and bad input."""

import os
from pathlib import Path

import numpy as np
import pytest
import soundfile

from test_cli_train import (RATE, assert_one_line_error, no_temp_files, run, snapshot,  # noqa: F401
                            tiny_corpus, tiny_dictionary)


def _snr(reference, estimate):
    return 10 * np.log10(np.sum(reference ** 2) / np.sum((reference - estimate) ** 2))


@pytest.fixture
def workdir(tmp_path, tiny_corpus):
    """A folder with one noisy and one clean file copied from the tiny corpus."""
    source = tiny_corpus / "noisy" / "white_0dB" / "sp21_white_sn0.wav"
    (tmp_path / "noisy.wav").write_bytes(source.read_bytes())
    (tmp_path / "clean.wav").write_bytes((tiny_corpus / "clean" / "sp21.wav").read_bytes())
    return tmp_path


def _enhance(tiny_dictionary, *args):
    return run(["enhance", *args, "--dictionary", tiny_dictionary])


# --------------------------------------------------------------------------------------------
# success


def test_enhance_one_file(workdir, tiny_dictionary):
    before = (workdir / "noisy.wav").read_bytes()
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "out.wav")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""  # no progress bar for one file
    assert (workdir / "noisy.wav").read_bytes() == before
    info = soundfile.info(workdir / "out.wav")
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    clean, _ = soundfile.read(workdir / "clean.wav")
    assert (info.samplerate, info.frames, info.subtype, info.channels) == (RATE, len(noisy), "PCM_16", 1)
    enhanced, _ = soundfile.read(workdir / "out.wav")
    # The file holds the enhancer's output for the file's samples and the chosen dictionary, to 16-bit
    # rounding (how good that output is belongs to the enhancer's own tests and benchmark).
    from sepsti.denoise import denoise
    from sepsti.dictionary import load_dictionary

    expected = denoise(noisy, load_dictionary(tiny_dictionary).W)
    np.testing.assert_allclose(enhanced, np.clip(expected, -1, 1), rtol=0, atol=1.01 / 32768)
    assert np.sum(enhanced ** 2) < np.sum(noisy ** 2)
    assert _snr(clean, enhanced) > _snr(clean, noisy), (_snr(clean, enhanced), _snr(clean, noisy))
    assert no_temp_files(workdir)


def test_other_rate_and_stereo_come_back_at_the_input_rate_and_length(workdir, tiny_dictionary):
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    from sepsti.audio import resample

    at_22k = resample(noisy, RATE, 22050)[:-7]  # a length that is no exact multiple of the ratio
    stereo = np.stack([at_22k, 0.5 * at_22k], axis=1)
    soundfile.write(workdir / "stereo.flac", stereo, 22050)
    result = _enhance(tiny_dictionary, workdir / "stereo.flac", "-o", workdir / "out.flac")
    assert result.exit_code == 0, result.stderr
    info = soundfile.info(workdir / "out.flac")
    assert (info.samplerate, info.frames, info.channels, info.format) == (22050, len(at_22k), 1, "FLAC")


def test_all_zero_input_gives_all_zero_output(workdir, tiny_dictionary):
    soundfile.write(workdir / "zeros.wav", np.zeros(3000), RATE, subtype="PCM_16")
    result = _enhance(tiny_dictionary, workdir / "zeros.wav", "-o", workdir / "out.wav")
    assert result.exit_code == 0, result.stderr
    out, _ = soundfile.read(workdir / "out.wav")
    assert len(out) == 3000 and not np.any(out)


def test_several_files_into_a_new_folder_keep_names(workdir, tiny_corpus, tiny_dictionary):
    inputs = sorted((tiny_corpus / "noisy" / "hum_5dB").glob("*.wav"))
    before = snapshot(tiny_corpus)
    result = _enhance(tiny_dictionary, *inputs, "--out-dir", workdir / "new" / "out")
    assert result.exit_code == 0, result.stderr
    assert sorted(os.listdir(workdir / "new" / "out")) == sorted(path.name for path in inputs)
    assert result.stdout.count("wrote") == len(inputs)
    assert "enhance:" in result.stderr and f"/{len(inputs)} " in result.stderr  # progress bar
    assert snapshot(tiny_corpus) == before
    for path in inputs:
        assert soundfile.info(workdir / "new" / "out" / path.name).frames == soundfile.info(path).frames


def test_options_reach_the_enhancer(workdir, tiny_dictionary, monkeypatch):
    import sepsti.denoise
    from sepsti.dictionary import load_dictionary

    calls = []

    def recorder(y, W, **options):
        calls.append((len(y), W.shape, options))
        return 0.5 * y

    monkeypatch.setattr(sepsti.denoise, "denoise", recorder)
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "out.wav",
                      "--noise-rank", 3, "--iterations", 17, "--seed", 4)
    assert result.exit_code == 0, result.stderr
    n = soundfile.info(workdir / "noisy.wav").frames
    assert calls == [(n, load_dictionary(tiny_dictionary).W.shape, {"noise_rank": 3, "max_iter": 17, "seed": 4})]
    out, _ = soundfile.read(workdir / "out.wav")
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    np.testing.assert_allclose(out, 0.5 * noisy, atol=1 / 32768)


def test_seed_gives_the_same_output(workdir, tiny_dictionary):
    for name in ("a.wav", "b.wav"):
        assert _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / name, "--seed", 2).exit_code == 0
    assert (workdir / "a.wav").read_bytes() == (workdir / "b.wav").read_bytes()


def test_overwrite_replaces(workdir, tiny_dictionary):
    (workdir / "out.wav").write_bytes(b"old")
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "out.wav", "--overwrite")
    assert result.exit_code == 0, result.stderr
    assert soundfile.info(workdir / "out.wav").frames > 0


def test_default_dictionary_is_used(workdir, monkeypatch, tiny_dictionary):
    import sepsti.dictionary

    monkeypatch.setattr(sepsti.dictionary, "default_dictionary_path", lambda: Path(tiny_dictionary))
    result = run(["enhance", workdir / "noisy.wav", "-o", workdir / "out.wav"])
    assert result.exit_code == 0, result.stderr


# --------------------------------------------------------------------------------------------
# bad input: exit 2, one line, nothing written, inputs untouched


def _write_bad(folder, kind):
    path = folder / f"bad_{kind}.wav"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "not-audio":
        path.write_bytes(b"RIFF? no, just text pretending to be a file\n" * 20)
    elif kind == "truncated":
        soundfile.write(path, np.zeros(4000), RATE, subtype="PCM_16")
        path.write_bytes(path.read_bytes()[:2000])
    elif kind == "zero-length":
        soundfile.write(path, np.zeros(0), RATE, subtype="PCM_16")
    elif kind == "short":
        soundfile.write(path, np.full(400, 0.1), RATE, subtype="PCM_16")
    elif kind == "nan":
        soundfile.write(path, np.r_[np.zeros(1000), np.nan], RATE, subtype="FLOAT")
    elif kind == "inf":
        soundfile.write(path, np.r_[np.zeros(1000), -np.inf], RATE, subtype="DOUBLE")
    elif kind == "directory":
        path.mkdir()
    return path


BAD_INPUTS = {
    "missing": "no such file", "directory": "is a directory", "empty": "empty file",
    "not-audio": "not a readable audio file", "truncated": "truncated", "zero-length": "zero-length",
    "short": "shorter than one frame", "nan": "NaN or Inf", "inf": "NaN or Inf",
}


@pytest.mark.parametrize("kind", BAD_INPUTS)
def test_bad_input_file(workdir, tiny_dictionary, kind):
    bad = _write_bad(workdir, kind) if kind != "missing" else workdir / "missing.wav"
    before = snapshot(workdir)
    result = _enhance(tiny_dictionary, bad, "-o", workdir / "out.wav")
    assert_one_line_error(result, bad.name, BAD_INPUTS[kind])
    assert snapshot(workdir) == before


@pytest.mark.parametrize("kind", ["truncated", "nan"])
def test_a_bad_third_file_stops_everything_before_any_output(workdir, tiny_corpus, tiny_dictionary, kind):
    good = sorted((tiny_corpus / "noisy" / "white_5dB").glob("*.wav"))[:2]
    bad = _write_bad(workdir, kind)
    before = snapshot(workdir)
    result = _enhance(tiny_dictionary, *good, bad, "--out-dir", workdir / "out")
    assert_one_line_error(result, bad.name)
    assert snapshot(workdir) == before
    assert not (workdir / "out").exists()
    (workdir / "existing").mkdir()
    result = _enhance(tiny_dictionary, *good, bad, "--out-dir", workdir / "existing")
    assert_one_line_error(result, bad.name)
    assert os.listdir(workdir / "existing") == []


def test_bad_outputs(workdir, tiny_dictionary):
    noisy = workdir / "noisy.wav"
    (workdir / "exists.wav").write_bytes(b"keep")
    cases = [
        (["-o", workdir / "exists.wav"], ("exists.wav", "--overwrite")),
        (["-o", noisy, "--overwrite"], ("also an input",)),
        (["-o", workdir / "nofolder" / "o.wav"], ("does not exist",)),
        (["-o", workdir / "clean.wav" / "o.wav"], ("does not exist",)),  # folder is a file: unwritable
        (["-o", workdir], ("directory",)),
        (["-o", workdir / "o.xyz"], ("o.xyz", "extension")),
        (["--out-dir", workdir / "clean.wav"], ("not a directory",)),
        (["--out-dir", workdir], ("also an input",)),  # writes noisy.wav onto itself
        ([], ("-o OUT", "--out-dir")),
        (["-o", workdir / "a.wav", "--out-dir", workdir / "d"], ("exactly one",)),
    ]
    for options, fragments in cases:
        before = snapshot(workdir)
        assert_one_line_error(_enhance(tiny_dictionary, noisy, *options), *fragments)
        assert snapshot(workdir) == before, options


def test_two_inputs_need_out_dir_and_distinct_names(workdir, tiny_corpus, tiny_dictionary):
    a = tiny_corpus / "noisy" / "white_0dB" / "sp21_white_sn0.wav"
    (workdir / "sub").mkdir()
    (workdir / "sub" / "noisy.wav").write_bytes(a.read_bytes())
    before = snapshot(workdir)
    assert_one_line_error(_enhance(tiny_dictionary, a, workdir / "noisy.wav", "-o", workdir / "o.wav"),
                          "2 inputs", "--out-dir")
    assert_one_line_error(_enhance(tiny_dictionary, workdir / "noisy.wav", workdir / "sub" / "noisy.wav",
                                   "--out-dir", workdir / "out"), "both be written")
    assert snapshot(workdir) == before


def test_bad_dictionary(workdir, tiny_dictionary):
    from sepsti.dictionary import load_dictionary, save_dictionary

    good = load_dictionary(tiny_dictionary)
    (workdir / "corrupt.npz").write_bytes(tiny_dictionary.read_bytes()[:300])
    (workdir / "text.npz").write_bytes(b"not a dictionary")
    np.savez(workdir / "bins.npz", **{**_arrays(good), "W": np.ones((129, good.rank)), "n_fft": np.int64(256)})
    np.savez(workdir / "rate.npz", **{**_arrays(good), "sample_rate": np.int64(16000)})
    np.savez(workdir / "negative.npz", **{**_arrays(good), "W": -good.W})
    save_dictionary(workdir / "fine.npz", good)
    cases = {"corrupt.npz": "not a readable dictionary", "text.npz": "not a dictionary file",
             "bins.npz": "n_fft", "rate.npz": "'sample_rate'=16000", "negative.npz": "negative",
             "missing.npz": "no such file"}
    for name, fragment in cases.items():
        before = snapshot(workdir)
        result = run(["enhance", workdir / "noisy.wav", "-o", workdir / "out.wav", "--dictionary", workdir / name])
        assert_one_line_error(result, name, fragment)
        assert snapshot(workdir) == before
    result = run(["enhance", workdir / "noisy.wav", "-o", workdir / "fine.npz", "--dictionary", workdir / "fine.npz",
                  "--overwrite"])
    assert_one_line_error(result, "fine.npz")


def _arrays(dictionary):
    return {"W": dictionary.W, "rank": np.int64(dictionary.rank), "sample_rate": np.int64(dictionary.sample_rate),
            "n_fft": np.int64(dictionary.n_fft), "hop_length": np.int64(dictionary.hop_length),
            "window": np.str_(dictionary.window), "scale": np.float64(dictionary.scale),
            "prior_rate": np.float64(dictionary.prior_rate), "corpus": np.str_(dictionary.corpus),
            "files": np.array(dictionary.files), "iterations": np.int64(dictionary.iterations),
            "seed": np.int64(dictionary.seed), "version": np.str_(dictionary.version)}
