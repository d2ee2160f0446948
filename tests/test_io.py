"""``sepsti.core.io``: atomic outputs that never replace a file they were not allowed to, and their temporaries."""

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.io import TEMPORARY_MARKER, atomic_path, remove_stale_temporaries

ROOT = Path(__file__).resolve().parents[1]


def test_success_publishes_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "out.txt"
    with atomic_path(target, overwrite=False) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".out.txt" + TEMPORARY_MARKER) and tmp.suffix == ".txt"
        tmp.write_text("new")
    assert target.read_text() == "new"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_overwrite_true_replaces(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with atomic_path(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new"


@pytest.mark.parametrize("links", [True, False])
def test_a_file_that_appears_meanwhile_is_not_replaced(tmp_path, monkeypatch, links):
    if not links:  # a file system without hard links: the exclusive-create fallback
        def no_link(source, destination):
            raise OSError(errno.EPERM, "Operation not permitted")

        monkeypatch.setattr(os, "link", no_link)
    target = tmp_path / "out.txt"
    with pytest.raises(ParameterError, match="created by another program.*--overwrite"):
        with atomic_path(target, overwrite=False) as tmp:
            tmp.write_text("ours")
            target.write_text("theirs")  # another process wins the race
    assert target.read_text() == "theirs"
    assert os.listdir(tmp_path) == ["out.txt"]
    other = tmp_path / "other.txt"
    with atomic_path(other, overwrite=False) as tmp:
        tmp.write_text("ours")
    assert other.read_text() == "ours" and sorted(os.listdir(tmp_path)) == ["other.txt", "out.txt"]


def test_failure_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic_path(tmp_path / "out.txt") as tmp:
            tmp.write_text("half")
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def _dead_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_stale_temporaries_of_killed_writers_are_removed(tmp_path):
    target = tmp_path / "out.wav"
    stale = tmp_path / f".out.wav{TEMPORARY_MARKER}{_dead_pid()}.abc123.wav"
    alive = tmp_path / f".out.wav{TEMPORARY_MARKER}{os.getppid()}.def456.wav"
    other_target = tmp_path / f".other.wav{TEMPORARY_MARKER}{_dead_pid()}.x.wav"
    users = [tmp_path / ".out.wav.swp", tmp_path / f".out.wav{TEMPORARY_MARKER}notapid.wav"]
    for path in (stale, alive, other_target, *users):
        path.write_bytes(b"x")
    assert remove_stale_temporaries(target) == [stale]
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        path.name for path in (alive, other_target, *users))


def test_kill_9_leaves_a_recognisable_temporary_that_the_next_writer_removes(tmp_path):
    target = tmp_path / "out.txt"
    script = ("import os, signal, sys\n"
              "from sepsti.core.io import atomic_path\n"
              "with atomic_path(sys.argv[1], overwrite=False) as tmp:\n"
              "    tmp.write_text('half')\n"
              "    os.kill(os.getpid(), signal.SIGKILL)\n")
    result = subprocess.run([sys.executable, "-c", script, str(target)], cwd=ROOT, capture_output=True)
    assert result.returncode == -9, result.stderr
    left = os.listdir(tmp_path)
    assert len(left) == 1 and left[0].startswith(".out.txt" + TEMPORARY_MARKER), left
    with atomic_path(target, overwrite=False) as tmp:
        tmp.write_text("whole")
    assert os.listdir(tmp_path) == ["out.txt"] and target.read_text() == "whole"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_folder_that_refuses_new_files_is_named_before_any_work(tmp_path):
    """/proc admits writing by its mode (to root) but creates no files: one line naming the target, not a
    temporary file's path, at the check and at the write."""
    from sepsti.core.io import check_output_path

    with pytest.raises(ParameterError, match=r"^/proc/out.wav: (cannot create files in /proc \(|output folder /proc "
                                             r"is not writable)"):  # the latter where /proc's mode says so
        check_output_path("/proc/out.wav")
    with pytest.raises(ParameterError, match=r"^/proc/out.wav: cannot create files in /proc \("):
        with atomic_path("/proc/out.wav"):
            pass
    assert check_output_path(tmp_path / "out.wav") == tmp_path / "out.wav"
    assert os.listdir(tmp_path) == []


def test_a_writer_failing_on_the_temporary_file_is_reported_against_the_output(tmp_path):
    """A full disk met while writing (no file name in the error, or the temporary's): one line naming the
    output; nothing is left."""
    target = tmp_path / "out.json"
    for filename in (None, "temporary"):
        with pytest.raises(ParameterError, match=r"out.json: cannot write it \(No space left on device\)$"):
            with atomic_path(target) as tmp:
                tmp.write_text("partial")
                raise OSError(errno.ENOSPC, "No space left on device", *([str(tmp)] if filename else []))
    # an error about another file is that file's
    with pytest.raises(FileNotFoundError, match="elsewhere"):
        with atomic_path(target):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(tmp_path / "elsewhere"))
    assert os.listdir(tmp_path) == []


def test_a_broken_symbolic_link_is_an_existing_output(tmp_path):
    from sepsti.core.io import check_output_path

    target = tmp_path / "out.wav"
    target.symlink_to(tmp_path / "missing.wav")
    with pytest.raises(ParameterError, match="broken symbolic link; pass --overwrite"):
        check_output_path(target)
    assert check_output_path(target, overwrite=True) == target
    with atomic_path(target) as tmp:
        tmp.write_text("new")
    assert not target.is_symlink() and target.read_text() == "new"


def test_every_name_the_file_system_admits_can_be_written(tmp_path):
    from sepsti.core.io import check_output_path

    for name in ("x" * 240 + ".wav", "é" * 120 + ".wav"):  # 244 characters; 244 bytes in UTF-8
        target = tmp_path / name
        check_output_path(target)
        with atomic_path(target, overwrite=False) as tmp:
            assert len(os.fsencode(tmp.name)) <= 255 and TEMPORARY_MARKER in tmp.name
            tmp.write_text("new")
        assert target.read_text() == "new"
    assert len(os.listdir(tmp_path)) == 2


def test_an_input_named_like_the_outputs_temporary_is_refused_not_removed(tmp_path):
    from sepsti.core.io import check_output_path

    target = tmp_path / "out.wav"
    source = tmp_path / f".out.wav{TEMPORARY_MARKER}999999.abcd1234.wav"  # a dead writer's name, a user's file
    source.write_text("the user's")
    with pytest.raises(ParameterError, match="named like a temporary file of the output"):
        check_output_path(target, inputs=[source])
    check_output_path(tmp_path / "other.wav", inputs=[source])
    assert source.read_text() == "the user's"


def test_json_safe_turns_numpy_tuples_and_non_finite_numbers_into_json():
    import json

    import numpy as np

    from sepsti.core.io import json_safe

    value = {"a": np.array([1.0, np.inf, np.nan]), "b": (np.float32("nan"), np.float32(2.5), -np.inf),
             "c": [{"d": np.int64(3), "e": np.bool_(True)}], np.int64(4): Path("x") / "y", "f": None}
    converted = json_safe(value)
    assert converted == {"a": [1.0, None, None], "b": [None, 2.5, None], "c": [{"d": 3, "e": True}], 4: "x/y",
                         "f": None}
    assert type(converted["c"][0]["d"]) is int and type(converted["c"][0]["e"]) is bool
    json.dumps(converted, allow_nan=False)
    with pytest.raises(TypeError, match="not JSON serialisable: object"):
        json_safe({"g": object()})
