"""``sepsti corpus synth`` and ``sepsti corpus info`` through the real CLI."""

import json

import pytest
from click.testing import CliRunner

from sepsti.cli import cli
from sepsti.commands.corpus import parse_utterances
from sepsti.core.errors import ParameterError

try:
    RUNNER = CliRunner(mix_stderr=False)
except TypeError:  # click >= 8.2 always keeps stderr apart
    RUNNER = CliRunner()


def _run(*args):
    return RUNNER.invoke(cli, ["corpus", *map(str, args)])


def _one_error_line(result):
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli") / "corpus"
    result = _run("synth", root, "--seed", 3, "--utterances", "sp01-sp02,21", "--noise", "white, car",  # ' car': car
                  "--snr", "0,5", "--no-progress")
    assert result.exit_code == 0, result.output + result.stderr
    return root, result


def test_synth_writes_what_was_asked(made):
    root, result = made
    assert "wrote 15 files" in result.stdout and "seed 3" in result.stdout
    assert sorted(p.name for p in (root / "clean").iterdir()) == ["sp01.wav", "sp02.wav", "sp21.wav"]
    assert sorted(p.name for p in (root / "noisy").iterdir()) == ["car_0dB", "car_5dB", "white_0dB", "white_5dB"]
    assert (root / "noisy" / "car_5dB" / "sp21_car_sn5.wav").is_file()


def test_info_describes_the_corpus(made):
    root, _ = made
    result = _run("info", root)
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert "clean files: 3 (sp01-sp02, sp21)" in text
    assert "noises: car, white" in text and "snrs (dB): 0, 5" in text
    assert "train split: 2 of 20 clean files (missing sp03-sp20)" in text
    table = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.startswith(("car", "white"))}
    assert table == {"car": ["3", "3"], "white": ["3", "3"]}
    assert "training matrix (train split, 2 files): 257 x" in text


def test_synth_refuses_a_non_empty_folder(made):
    root, _ = made
    before = sorted(path.name for path in root.rglob("*"))
    line = _one_error_line(_run("synth", root, "--utterances", 1, "--noise", "white", "--snr", 0))
    assert "not empty; pass --overwrite" in line
    assert sorted(path.name for path in root.rglob("*")) == before


def test_overwrite_replaces(tmp_path):
    root = tmp_path / "c"
    assert _run("synth", root, "--utterances", 1, "--noise", "white", "--snr", 0, "--no-progress").exit_code == 0
    result = _run("synth", root, "--utterances", "sp21", "--noise", "pink", "--snr", "-5", "--overwrite",
                  "--no-progress")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.endswith("/c: 1 utterance, noises pink, SNRs -5 dB, seed 0\n"), result.stdout
    assert {path.name for path in root.rglob("*.wav")} == {"sp21.wav", "sp21_pink_sn-5.wav"}


@pytest.mark.parametrize("args, why", [
    (["--noise", "airport"], "noise 'airport': unknown noise type"),
    (["--snr", "loud"], "--snr 'loud': expected comma-separated integers"),
    (["--snr", "5,2.5"], "--snr '5,2.5': expected comma-separated integers"),  # not 2 dB
    (["--utterances", "sp5-sp2"], "runs backwards"),
    (["--utterances", "x"], "--utterances x"),
    (["--utterances", "0"], "--utterances 0: expected a count in 1..30"),
    (["--utterances", "sp31"], "sp31 not in sp01..sp30"),
])
def test_synth_bad_options(tmp_path, args, why):
    line = _one_error_line(_run("synth", tmp_path / "c", *args))
    assert why in line
    assert not (tmp_path / "c").exists()


def test_synth_seed_must_lie_from_0_to_2_to_the_32_less_1(tmp_path):
    result = _run("synth", tmp_path / "c", "--seed", -1)
    assert result.exit_code == 2 and "-1" in result.stderr
    result = _run("synth", tmp_path / "c", "--seed", 2 ** 32)
    assert "'--seed': 4294967296 is not in the range 0<=x<=4294967295" in _one_error_line(result)


def test_synth_into_an_empty_path_is_refused(tmp_path, monkeypatch):
    # '' was the working folder
    monkeypatch.chdir(tmp_path)
    assert "an empty path; give a folder name" in _one_error_line(_run("synth", ""))
    assert list(tmp_path.iterdir()) == []


def test_synth_into_a_file(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    assert "not a folder" in _one_error_line(_run("synth", path))


@pytest.mark.parametrize("make, why", [
    (lambda root: root.mkdir(), "no NOIZEUS-style files found"),
    (lambda root: None, "no such corpus folder"),
])
def test_info_bad_folders(tmp_path, make, why):
    root = tmp_path / "c"
    make(root)
    assert why in _one_error_line(_run("info", root))


def test_parse_utterances():
    assert parse_utterances("30") == 30
    assert parse_utterances("sp01-sp03, 21") == ["sp01", "sp02", "sp03", "sp21"]
    assert parse_utterances("sp04-SP04,7-8") == ["sp04", "sp07", "sp08"]  # a range of one id
    assert parse_utterances(" 30 ") == 30  # a count, not the id sp30
    with pytest.raises(ParameterError, match="range 5-3 runs backwards"):
        parse_utterances("5-3")


@pytest.mark.parametrize("text, why", [
    # the range was spelt out first: 3.3 GB after 15 s, and a 10 MB line naming sp31 to sp999999
    ("sp01-sp99999999", "sp99999999 not in sp01..sp30"), ("sp29-sp31", "sp31 not in sp01..sp30"),
    ("sp00-sp03", "sp00 not in sp01..sp30"), ("31", "expected a count in 1..30"),
])
def test_utterances_outside_the_corpus_are_refused_before_a_range_is_spelt_out(tmp_path, text, why):
    line = _one_error_line(_run("synth", tmp_path / "c", "--utterances", text))
    assert line == f"Error: --utterances {text}: {why}" + (" or ids like sp01-sp04,sp21" if "count" in why else "")
    assert not (tmp_path / "c").exists()


def test_utterances_up_to_the_last_id_are_taken():
    """sp30 is the corpus's last id: a range ending there, and sp30 alone, are taken (refused as outside
    sp01..sp30 passed before), and so is a count of all 30."""
    assert parse_utterances("sp29-sp30") == ["sp29", "sp30"]
    assert parse_utterances("30-30") == ["sp30"]
    assert parse_utterances("sp01-sp30") == [f"sp{number:02d}" for number in range(1, 31)]


@pytest.mark.noizeus
def test_info_on_real_noizeus(noizeus_root):
    result = _run("info", noizeus_root)
    assert result.exit_code == 0, result.stderr
    assert "noises: babble, car, street, train" in result.stdout
    assert "training matrix (train split, 20 files): 257 x 1661" in result.stdout


def test_overwrite_leaves_a_foreign_corpus_alone(tmp_path):
    root = tmp_path / "noizeus"
    (root / "clean").mkdir(parents=True)
    (root / "clean" / "sp01.wav").write_bytes(b"real")
    (root / "clean" / "notes.txt").write_text("mine")
    line = _one_error_line(_run("synth", root, "--utterances", 1, "--noise", "white", "--snr", 0, "--overwrite",
                                "--no-progress"))
    assert "not a corpus written by `sepsti corpus synth`" in line
    assert sorted(path.name for path in root.rglob("*")) == ["clean", "notes.txt", "sp01.wav"]


def test_info_flags_noisy_files_it_cannot_pair(tmp_path):
    import numpy as np
    import soundfile

    root = tmp_path / "c"
    (root / "clean").mkdir(parents=True)
    (root / "noisy").mkdir()
    soundfile.write(root / "clean" / "sp01.wav", np.zeros(8000), 8000, subtype="PCM_16")
    soundfile.write(root / "noisy" / "sp01_car_sn5.wav", np.zeros(8000), 8000, subtype="PCM_16")   # fine
    soundfile.write(root / "noisy" / "sp01_car_sn0.wav", np.zeros(7990), 8000, subtype="PCM_16")   # shorter
    soundfile.write(root / "noisy" / "sp01_car_sn10.wav", np.zeros(16000), 16000, subtype="PCM_16")  # rate only
    for utterance in ("sp02", "sp03", "sp04", "sp05"):  # no clean
        soundfile.write(root / "noisy" / f"{utterance}_car_sn5.wav", np.zeros(8000), 8000, subtype="PCM_16")
    result = _run("info", root)
    assert result.exit_code == 0, result.stderr
    warnings = result.stderr.strip().splitlines()
    assert warnings == [
        "Warning: 4 noisy file(s) without a clean file: sp02_car_sn5.wav, sp03_car_sn5.wav, sp04_car_sn5.wav and "
        "1 more",
        "Warning: 1 noisy file(s) whose length differs from their clean file's: sp01_car_sn0.wav "
        "(7990 vs 8000 samples)",
        "Warning: 1 noisy file(s) whose sample rate differs from their clean file's: sp01_car_sn10.wav "
        "(16000 vs 8000 Hz)"], warnings
    fine = tmp_path / "fine"
    assert _run("synth", fine, "--utterances", 1, "--noise", "white", "--snr", 0, "--no-progress").exit_code == 0
    assert _run("info", fine).stderr == ""


@pytest.mark.parametrize("args, environment, drawn", [
    (["corpus", "synth", "--progress"], "0", True),  # an option on the command line wins over the environment
    (["--progress", "corpus", "synth"], "0", True),
    (["corpus", "synth", "--no-progress"], "1", False),
    (["corpus", "synth"], "1", True),
    (["corpus", "synth"], "0", False),
])
def test_progress_on_request_whatever_the_environment_says(tmp_path, monkeypatch, args, environment, drawn):
    monkeypatch.setenv("SEPSTI_PROGRESS", environment)
    result = RUNNER.invoke(cli, [*args, str(tmp_path / "c"), "--utterances", "1", "--noise", "white", "--snr", "0"])
    assert result.exit_code == 0, result.stderr
    assert ("synthesising corpus:" in result.stderr) == drawn, result.stderr


def test_output_into_a_closed_pipe_ends_quietly(made):
    """``sepsti corpus info D | head -1``: no error line, the status of SIGPIPE (141)."""
    import os
    import subprocess
    import sys

    reader, writer = os.pipe()
    os.close(reader)  # the reader has left before the first line
    try:
        result = subprocess.run([sys.executable, "-m", "sepsti", "corpus", "info", str(made[0])], stdout=writer,
                                stderr=subprocess.PIPE, text=True)
    finally:
        os.close(writer)
    assert (result.returncode, result.stderr) == (141, "")


@pytest.mark.parametrize("args, why", [
    (["--snr", "0,,5"], "--snr '0,,5': empty item; give a comma-separated list like 0,5,10,15"),
    (["--noise", "white,"], "--noise 'white,': empty item; give a comma-separated list like car,babble"),
    (["--utterances", "sp01,,sp02"], "--utterances 'sp01,,sp02': empty item"),
])
def test_synth_refuses_an_empty_list_item_as_evaluate_does(tmp_path, args, why):
    assert why in _one_error_line(_run("synth", tmp_path / "c", *args))
    assert not (tmp_path / "c").exists()


def test_synth_onto_a_full_disk_names_the_file_and_leaves_nothing(tmp_path, monkeypatch):
    from test_synth import _failing_writer

    _failing_writer(monkeypatch, fail_at=3)
    root = tmp_path / "c"
    line = _one_error_line(_run("synth", root, "--utterances", "2", "--noise", "white", "--snr", "0,5",
                                "--no-progress"))
    assert line == f"Error: {root}/noisy/white_5dB/sp01_white_sn5.wav: cannot write it (No space left on device)"
    assert not root.exists()  # no synth.json, no empty folders


def _train_file(root, name, rate, seconds=1.0):
    import numpy as np
    import soundfile

    t = np.arange(int(seconds * rate)) / rate
    soundfile.write(root / "clean" / name, 0.3 * np.sin(2 * np.pi * 440 * t), rate, subtype="PCM_16")


def test_info_names_an_unusable_train_file_once_and_gives_the_matrix_of_the_others(tmp_path):
    root = tmp_path / "c"
    (root / "clean").mkdir(parents=True)
    (root / "noisy" / "car_5dB").mkdir(parents=True)
    for name in ("sp01.wav", "sp02.wav", "sp03.wav"):
        _train_file(root, name, 8000)
    (root / "clean" / "sp02.wav").write_bytes((root / "clean" / "sp02.wav").read_bytes()[:100])  # truncated
    for name in ("sp01_car_sn5.wav", "sp02_car_sn5.wav"):
        (root / "noisy" / "car_5dB" / name).write_bytes((root / "clean" / "sp01.wav").read_bytes())
    result = _run("info", root)
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == [f"Warning: 1 unusable file(s): {root / 'clean' / 'sp02.wav'}: truncated "
                                          "WAV file (15944 bytes of audio data missing)"]
    assert "training matrix (train split, 2 files, 1 unusable left out): 257 x 66" in result.stdout


def test_info_names_a_train_file_at_a_rate_refused_as_unusable_and_not_as_unpaired(tmp_path):
    """Its header reads, but no resampling takes 2 kHz: named once, as unusable, not again beside its mixture."""
    import numpy as np
    import soundfile

    root = tmp_path / "c"
    (root / "clean").mkdir(parents=True)
    (root / "noisy" / "car_5dB").mkdir(parents=True)
    _train_file(root, "sp01.wav", 2000)
    soundfile.write(root / "noisy" / "car_5dB" / "sp01_car_sn5.wav", np.zeros(8000), 8000, subtype="PCM_16")
    result = _run("info", root)
    assert result.exit_code == 0, result.stderr
    assert [line[:28] for line in result.stderr.splitlines()] == ["Warning: 1 unusable file(s):"]
    assert "sp01.wav: sample rate 2000 Hz is outside 4000..384000 Hz" in result.stderr
    assert "training matrix: none (the 1 clean files of the train split are unusable)" in result.stdout


def test_info_gives_the_matrix_of_a_train_split_at_several_rates_as_train_resamples_it(tmp_path):
    from sepsti.audio import resample
    from sepsti.corpora.audio import read_audio
    from sepsti.features import training_matrix

    root = tmp_path / "c"
    (root / "clean").mkdir(parents=True)
    _train_file(root, "sp01.wav", 44100)
    _train_file(root, "sp02.wav", 8000, seconds=2.0)
    result = _run("info", root)
    assert result.exit_code == 0, result.stderr
    signals = [resample(*read_audio(root / "clean" / name), 8000) for name in ("sp01.wav", "sp02.wav")]
    shape = training_matrix(signals).shape
    assert f"training matrix (train split, 2 files): {shape[0]} x {shape[1]}" in result.stdout


def test_info_describes_a_wideband_corpus_by_its_splits(tmp_path, rng):
    """A wideband folder was refused ('no NOIZEUS-style files found') though train and select-rank read it."""
    from test_cli_train import _wideband_corpus

    corpus = _wideband_corpus(tmp_path / "wide", rng)
    (corpus / "17" / "17-1-0000.wav").rename(corpus / "moved.wav")
    with pytest.warns(UserWarning, match="wideband manifest: its 7 LibriSpeech speakers") as caught:
        result = _run("info", corpus)
    assert len(caught) == 1  # not once more for the matrix
    assert result.exit_code == 2 and result.stderr.endswith("17-1-0000.wav: no such file\n")  # a train file
    assert result.stderr.startswith("Warning: 1 file(s) listed in manifest.json not found: ")
    (corpus / "moved.wav").rename(corpus / "17" / "17-1-0000.wav")
    manifest = json.loads((corpus / "manifest.json").read_text())
    manifest[2]["flags"] = ["lf_rumble_below_100hz"]  # speaker 13, train: an advisory flag leaves no file out
    (corpus / "manifest.json").write_text(json.dumps(manifest))
    with pytest.warns(UserWarning, match="wideband manifest") as caught:
        result = _run("info", corpus)
    assert len(caught) == 1 and result.exit_code == 0 and result.stderr == "", result.stderr
    rows = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()[2:5]}
    # speakers by id, as train splits them: 11, 16 and LJ test, 12 validation, 13-15 and 17 train (14 flagged)
    assert rows == {"train": ["4", "4", "0.1", "1"], "validation": ["1", "1", "0.0", "0"],
                    "test": ["3", "3", "0.0", "0"]}
    assert "8 files, 8 speakers, rates 16000 Hz, 22050 Hz" in result.stdout
    assert "flags: band_limited 1 (left out), lf_rumble_below_100hz 1; every file is high-passed at 80 Hz" \
        in result.stdout
    assert "training matrix (train split, 3 files, at 16000 Hz): 513 x " in result.stdout
    # a rate the manifest misstates moves the speaker out of the train split, which is said
    manifest = json.loads((corpus / "manifest.json").read_text())
    manifest[4]["rate"] = 44100
    (corpus / "manifest.json").write_text(json.dumps(manifest))
    with pytest.warns(UserWarning, match="wideband manifest"):
        result = _run("info", corpus)
    assert result.stderr == (f"Warning: 1 file(s) whose rate manifest.json misstates: {corpus}/15/15-1-0000.wav "
                             "(44100 Hz stated, 16000 Hz in the file)\n")
    assert "training matrix (train split, 2 files, at 16000 Hz)" in result.stdout
    # a second file of validation speaker 12, and two test files that cannot be read (each error named alone)
    manifest[4]["rate"] = 16000
    (corpus / "12" / "12-1-0001.wav").write_bytes((corpus / "12" / "12-1-0000.wav").read_bytes())
    manifest.append({**manifest[1], "file": "12/12-1-0001.wav"})
    (corpus / "manifest.json").write_text(json.dumps(manifest))
    for speaker in ("11", "16"):
        (corpus / speaker / f"{speaker}-1-0000.wav").write_bytes(b"not audio")
    with pytest.warns(UserWarning, match="wideband manifest"):
        result = _run("info", corpus)
    rows = {line.split()[0]: line.split()[1:3] for line in result.stdout.splitlines()[2:5]}
    assert rows == {"train": ["4", "4"], "validation": ["1", "2"], "test": ["3", "3"]}
    assert result.stderr.startswith(f"Warning: 2 file(s) unreadable: {corpus}/11/11-1-0000.wav") \
        and result.stderr.endswith(" and 1 more\n"), result.stderr


def test_info_quotes_a_missing_file_whose_name_holds_a_line_break(tmp_path, rng):
    """The warning of files the manifest lists but the folder lacks stays one line (the name printed as it is, over
    two lines, passed before)."""
    from test_cli_train import _wideband_corpus

    corpus = _wideband_corpus(tmp_path / "wide", rng)
    manifest = json.loads((corpus / "manifest.json").read_text())
    manifest.append({**manifest[0], "file": "11/gone\nby.wav"})  # a test speaker's: the train split reads as before
    (corpus / "manifest.json").write_text(json.dumps(manifest))
    with pytest.warns(UserWarning, match="wideband manifest"):
        result = _run("info", corpus)
    assert result.exit_code == 0, result.stderr
    missing = corpus / "11" / "gone\nby.wav"
    assert result.stderr == f"Warning: 1 file(s) listed in manifest.json not found: {str(missing)!r}\n"


def test_corpus_without_a_subcommand_shows_its_help():
    result = _run()
    assert result.stderr.startswith("Usage: ") and "Error" not in result.stderr, result.stderr
    assert [line.split()[0] for line in result.stderr.split("Commands:\n")[1].splitlines()] == ["info", "synth"]


@pytest.mark.parametrize("args", [["--help"], ["synth", "--help"], ["info", "-h"]])
def test_corpus_and_its_subcommands_show_their_help_and_exit_0(args):
    """The help of the group and of each subcommand: on stdout, exit status 0, no error line (the subcommand's help
    ended by 'Error: internal failure: Exit: 0', status 1, passed before)."""
    result = _run(*args)
    assert (result.exit_code, result.stderr) == (0, ""), (result.exit_code, result.stderr)
    assert result.stdout.startswith("Usage: ") and "Options:" in result.stdout, result.stdout


def test_the_commands_are_listed_in_alphabetical_order():
    result = RUNNER.invoke(cli, ["--help"])
    assert result.exit_code == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.split("Commands:\n")[1].splitlines()] == [
        "corpus", "enhance", "evaluate", "select-rank", "train"]


def test_a_command_runs_outside_the_main_thread(made):
    """As in a worker thread of another program, where no signal handler can be installed: SIGTERM is left alone."""
    import threading

    results = []
    thread = threading.Thread(target=lambda: results.append(_run("info", made[0])))
    thread.start()
    thread.join()
    assert (results[0].exit_code, results[0].stderr) == (0, "")
    assert results[0].stdout == _run("info", made[0]).stdout
