"""``sepsti.core.io``: atomic outputs that never replace a file they were not allowed to, and their temporaries."""

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.io import TEMPORARY_MARKER, atomic_path, refuse_existing, remove_stale_temporaries

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


def test_refuse_existing_names_a_file_or_a_broken_link_and_passes_the_rest(tmp_path):
    """What the library's writers check before any work unless asked to replace: a file, or a broken symbolic link,
    is refused; a free name passes, and so does a folder, which atomic_path refuses as one."""
    existing, broken = tmp_path / "out.txt", tmp_path / "link.txt"
    existing.write_text("old")
    broken.symlink_to(tmp_path / "missing.txt")
    for target in (existing, broken):
        with pytest.raises(ParameterError, match=f"{target.name}: output exists; it was left as it is"):
            refuse_existing(target)
    refuse_existing(tmp_path / "free.txt")
    refuse_existing(tmp_path)
    assert existing.read_text() == "old" and sorted(os.listdir(tmp_path)) == ["link.txt", "out.txt"]


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


def test_stale_temporaries_of_killed_writers_on_this_host_are_removed(tmp_path):
    """A process id means something on this host (and PID namespace) only: another's writer may be alive."""
    from sepsti.core.io import _HOST

    target = tmp_path / "out.wav"
    dead = _dead_pid()
    with atomic_path(target) as tmp:
        assert tmp.name.startswith(f".out.wav{TEMPORARY_MARKER}{_HOST}.{os.getpid()}.")
    stale = tmp_path / f".out.wav{TEMPORARY_MARKER}{_HOST}.{dead}.abc123.wav"
    alive = tmp_path / f".out.wav{TEMPORARY_MARKER}{_HOST}.{os.getppid()}.def456.wav"
    other_host = tmp_path / f".out.wav{TEMPORARY_MARKER}0123abcd.{dead}.ghi789.wav"
    other_target = tmp_path / f".other.wav{TEMPORARY_MARKER}{_HOST}.{dead}.x.wav"
    users = [tmp_path / ".out.wav.swp", tmp_path / f".out.wav{TEMPORARY_MARKER}notapid.wav",
             tmp_path / f".out.wav{TEMPORARY_MARKER}{dead}.jkl012.wav", tmp_path / f".out.wav{TEMPORARY_MARKER}{_HOST}"]
    for path in (stale, alive, other_host, other_target, *users):
        path.write_bytes(b"x")
    assert remove_stale_temporaries(target) == [stale]
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        path.name for path in (target, alive, other_host, other_target, *users))


def test_the_host_tag_tells_pid_namespaces_of_one_host_name_apart(monkeypatch):
    """Containers of one host name sharing a folder, their pids in namespaces of their own, had one tag: a live
    writer in one was taken for a dead one by the other."""
    from sepsti.core.io import _host_tag

    tags = set()
    for namespace in ("pid:[4026531836]", "pid:[4026532290]"):
        monkeypatch.setattr(os, "readlink", lambda path, namespace=namespace: namespace)
        tags.add(_host_tag())
    assert len(tags) == 2 and all(len(tag) == 8 for tag in tags)


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


def test_a_long_name_is_cut_to_160_bytes_in_its_temporaries(tmp_path):
    """The start of the name and a digest of the whole, 160 bytes together: a cut one byte short passed before."""
    import hashlib

    from sepsti.core.io import _temporary_prefix

    for name, kept in (("x" * 240 + ".wav", "x" * 143), ("é" * 120 + ".wav", "é" * 71)):  # 143 and 142 bytes
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        assert _temporary_prefix(tmp_path / name) == f".{kept}~{digest}{TEMPORARY_MARKER}"
    assert _temporary_prefix(tmp_path / ("y" * 160)) == f".{'y' * 160}{TEMPORARY_MARKER}"  # 160 bytes: kept whole


def _dead_writers_temporary(tmp_path):
    from sepsti.core.io import _HOST

    return tmp_path / f".out.wav{TEMPORARY_MARKER}{_HOST}.{_dead_pid()}.abc123.wav"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="gives a file away: needs root")
def test_a_temporary_of_another_user_is_left_alone(tmp_path):
    """Another user's file named like a dead writer's temporary was removed."""
    theirs = _dead_writers_temporary(tmp_path)
    theirs.write_bytes(b"x")
    os.chown(theirs, os.getuid() + 1, -1)
    assert remove_stale_temporaries(tmp_path / "out.wav") == []
    assert theirs.exists()


def test_a_link_or_a_name_without_its_random_part_is_left_alone(tmp_path):
    """A symbolic link named like a dead writer's temporary (to a user's file), and such a name cut after the
    pid, were removed."""
    from sepsti.core.io import _HOST

    theirs = tmp_path / "theirs.wav"
    theirs.write_bytes(b"x")
    link = _dead_writers_temporary(tmp_path)
    link.symlink_to(theirs)
    cut = tmp_path / f".out.wav{TEMPORARY_MARKER}{_HOST}.{_dead_pid()}"
    cut.write_bytes(b"x")
    assert remove_stale_temporaries(tmp_path / "out.wav") == []
    assert link.is_symlink() and cut.exists()


def test_a_temporary_of_a_process_not_ours_to_signal_is_left_alone(tmp_path, monkeypatch):
    """A process that may not be signalled (another user's) exists: its writer was taken for a dead one."""
    stale = _dead_writers_temporary(tmp_path)
    stale.write_bytes(b"x")

    def kill(pid, signal):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "kill", kill)
    assert remove_stale_temporaries(tmp_path / "out.wav") == []
    assert stale.exists()


def test_an_input_named_like_the_outputs_temporary_is_refused_not_removed(tmp_path):
    from sepsti.core.io import check_output_path

    target = tmp_path / "out.wav"
    source = tmp_path / f".out.wav{TEMPORARY_MARKER}999999.abcd1234.wav"  # a dead writer's name, a user's file
    source.write_text("the user's")
    with pytest.raises(ParameterError, match="named like a temporary file of the output"):
        check_output_path(target, inputs=[source])
    check_output_path(tmp_path / "other.wav", inputs=[source])
    # in another folder it is no temporary of this output
    elsewhere = tmp_path / "inputs"
    elsewhere.mkdir()
    moved = source.rename(elsewhere / source.name)
    assert check_output_path(target, inputs=[moved]) == target
    assert moved.read_text() == "the user's"


def test_json_safe_turns_numpy_tuples_and_non_finite_numbers_into_json():
    import json

    import numpy as np

    from sepsti.core.io import json_safe

    value = {"a": np.array([1.0, np.inf, np.nan]), "b": (np.float32("nan"), np.float32(2.5), -np.inf),
             "c": [{"d": np.int64(3), "e": np.bool_(True)}], np.int64(4): Path("x") / "y", "f": None}
    converted = json_safe(value)
    assert converted == {"a": [1.0, None, None], "b": [None, 2.5, None], "c": [{"d": 3, "e": True}], "4": "x/y",
                         "f": None}
    assert type(converted["c"][0]["d"]) is int and type(converted["c"][0]["e"]) is bool
    json.dumps(converted, allow_nan=False)
    with pytest.raises(TypeError, match="not JSON serialisable: object"):
        json_safe({"g": object()})


def test_json_safe_keys_become_json_strings_and_may_not_collide():
    """Keys as JSON writes them (a path as its text); two that would be the same key are refused, not both written
    (JSON readers keep one of them); any numpy float is a float."""
    import json

    import numpy as np

    from sepsti.core.io import json_safe

    value = {Path("x") / "y": 1, 2: np.longdouble(0.5), np.int64(3): [np.longdouble(1.5)], True: None, None: 0,
             1.5: "a", float("inf"): "b"}
    converted = json_safe(value)
    assert converted == {"x/y": 1, "2": 0.5, "3": [1.5], "true": None, "null": 0, "1.5": "a", "Infinity": "b"}
    assert type(converted["2"]) is float and type(converted["3"][0]) is float
    assert json.loads(json.dumps(converted, allow_nan=False)) == converted
    for colliding in ({1: "a", "1": "b"}, {"x": {Path("y"): 1, "y": 2}}, {np.float64(1.5): 0, "1.5": 1}):
        with pytest.raises(ParameterError, match=r"^keys .* and .* are both '(1|y|1\.5)' in JSON$"):
            json_safe(colliding)
    with pytest.raises(TypeError, match="not JSON serialisable: tuple"):
        json_safe({(1, 2): 0})


@pytest.fixture
def umask():
    """Set the process's umask for a test (``umask(0o027)``), restored after."""
    previous = os.umask(0o022)
    yield os.umask
    os.umask(previous)


def test_the_umask_is_read_never_set(tmp_path, umask, monkeypatch):
    """Setting it to read it would give files other threads create meanwhile its value (0: world-writable)."""
    import sepsti.core.io

    umask(0o027)

    def no_umask(mask):
        raise AssertionError("the umask was set")

    monkeypatch.setattr(os, "umask", no_umask)
    with atomic_path(tmp_path / "new.json") as tmp:
        tmp.write_text("x")
    assert (tmp_path / "new.json").stat().st_mode & 0o7777 == 0o640
    # where /proc does not say, the umask read at import
    monkeypatch.setattr(sepsti.core.io, "_umask_in_proc", lambda: None)
    monkeypatch.setattr(sepsti.core.io, "_UMASK_AT_IMPORT", 0o077)
    with atomic_path(tmp_path / "other.json") as tmp:
        tmp.write_text("x")
    assert (tmp_path / "other.json").stat().st_mode & 0o7777 == 0o600


def test_a_replaced_file_keeps_its_permission_bits_and_group(tmp_path, umask):
    umask(0o022)
    for mode in (0o600, 0o755, 0o444, 0o2750):
        target = tmp_path / f"out{mode:o}"
        target.write_text("old")
        target.chmod(mode)
        with atomic_path(target) as tmp:
            tmp.write_text("new")
        assert target.read_text() == "new" and target.stat().st_mode & 0o7777 == mode, oct(target.stat().st_mode)
    with atomic_path(tmp_path / "new") as tmp:  # a new file: as open() makes it
        tmp.write_text("new")
    assert (tmp_path / "new").stat().st_mode & 0o7777 == 0o644
    other = 4242 if os.getuid() == 0 else next((group for group in os.getgroups() if group != os.getegid()), None)
    if other is None:
        pytest.skip("no group to give the old file")
    target = tmp_path / "grouped"
    target.write_text("old")
    os.chown(target, -1, other)
    with atomic_path(target) as tmp:
        tmp.write_text("new")
    assert target.stat().st_gid == other


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names descriptors by Linux's /proc")
@pytest.mark.parametrize("overwrite", [True, False])
def test_the_file_reaches_the_disk_before_its_rename_and_the_rename_after(tmp_path, monkeypatch, overwrite):
    """Else a crash can leave an empty file in the place of the old one. A folder that refuses fsync is let be."""
    events = []
    fsync, replace, link = os.fsync, os.replace, os.link

    def recorded_fsync(descriptor):
        name = os.readlink(f"/proc/self/fd/{descriptor}")
        events.append(("fsync", name))
        if os.path.isdir(name):
            raise OSError(errno.EINVAL, "Invalid argument")
        fsync(descriptor)

    monkeypatch.setattr(os, "fsync", recorded_fsync)
    monkeypatch.setattr(os, "replace", lambda *args: events.append(("rename",)) or replace(*args))
    monkeypatch.setattr(os, "link", lambda *args: events.append(("rename",)) or link(*args))
    target = tmp_path / "out.json"
    with atomic_path(target, overwrite=overwrite) as tmp:
        tmp.write_text("new")
    assert events == [("fsync", os.path.realpath(tmp)), ("rename",), ("fsync", os.path.realpath(tmp_path))]
    assert target.read_text() == "new" and os.listdir(tmp_path) == ["out.json"]


def test_a_symbolic_link_is_written_through(tmp_path):
    """Its final target is replaced (atomically, from a temporary beside it) and the link kept; the checks
    are those of the target: not an input, its folder writable."""
    from sepsti.core.io import check_output_path

    (tmp_path / "data").mkdir()
    real = tmp_path / "data" / "real.json"
    real.write_text("old")
    real.chmod(0o640)
    (tmp_path / "middle.json").symlink_to(real)
    link = tmp_path / "link.json"
    link.symlink_to("middle.json")
    assert check_output_path(link, overwrite=True) == link
    with pytest.raises(ParameterError, match="link.json: output is also an input"):
        check_output_path(link, overwrite=True, inputs=[real])
    source = tmp_path / "data" / f".real.json{TEMPORARY_MARKER}x.1.abc.json"
    with pytest.raises(ParameterError, match="named like a temporary file of the output .*link.json"):
        check_output_path(link, overwrite=True, inputs=[source])
    with atomic_path(link) as tmp:
        assert tmp.parent == real.parent and tmp.name.startswith(".real.json" + TEMPORARY_MARKER)
        tmp.write_text("new")
    assert link.is_symlink() and os.readlink(link) == "middle.json" and (tmp_path / "middle.json").is_symlink()
    assert real.read_text() == "new" and real.stat().st_mode & 0o7777 == 0o640
    assert sorted(os.listdir(tmp_path / "data")) == ["real.json"]
    if Path("/proc/version").is_file():  # a file in a folder that refuses new ones
        (tmp_path / "proc.txt").symlink_to("/proc/version")
        with pytest.raises(ParameterError, match=r"proc.txt: (cannot create files in /proc|output folder /proc is)"):
            check_output_path(tmp_path / "proc.txt", overwrite=True)


def test_a_long_extension_is_not_carried_into_the_temporary_name(tmp_path):
    """'a.' + 250 letters is a name the file system admits; a short extension is still carried (formats)."""
    from sepsti.core.io import check_output_path

    for name, suffix in (("a." + "b" * 250, None), ("c" * 240 + ".json", ".json"), ("d." + "e" * 15, ".e" + "e" * 14)):
        target = tmp_path / name
        check_output_path(target)
        with atomic_path(target, overwrite=False) as tmp:
            carried = tmp.name.split(TEMPORARY_MARKER)[1]  # <host>.<pid>.<random><suffix>
            assert len(os.fsencode(tmp.name)) <= 255 and carried.count(".") == 2 + bool(suffix)
            assert carried.endswith(suffix or "")
            tmp.write_text("new")
        assert target.read_text() == "new"
    assert len(os.listdir(tmp_path)) == 3


@pytest.mark.parametrize("overwrite", [True, False])
@pytest.mark.parametrize("link", [False, True])
def test_a_folder_at_the_output_is_refused_before_the_work(tmp_path, overwrite, link):
    """Not a raw IsADirectoryError at the rename (or, without overwrite, a file said to have appeared meanwhile):
    refused on entry, before the caller writes anything, and no temporary file is made."""
    (tmp_path / "folder").mkdir()
    target = tmp_path / "out.json"
    if link:
        target.symlink_to("folder")
    else:
        target = tmp_path / "folder"
    with pytest.raises(ParameterError, match=f"{target.name}: output is a directory"):
        with atomic_path(target, overwrite=overwrite):
            pytest.fail("the work was started")
    assert sorted(os.listdir(tmp_path)) == sorted({"folder", target.name}) and os.listdir(tmp_path / "folder") == []


@pytest.mark.parametrize("special", ["fifo", "/dev/null", "link to /dev/null"])
def test_a_device_or_pipe_at_the_output_is_refused_as_such(tmp_path, special):
    """`-o /dev/stdout` into a pipe said "cannot create files in /proc/<pid>/fd", `/dev/null` that it existed (and
    with --overwrite that it had no extension): an output is renamed into place, which a device cannot take."""
    from sepsti.core.io import check_output_path

    target = Path("/dev/null") if special == "/dev/null" else tmp_path / "out.wav"
    if special == "fifo":
        os.mkfifo(target)
    elif special.startswith("link"):
        target.symlink_to("/dev/null")
    for overwrite in (False, True):
        with pytest.raises(ParameterError, match="output is not a regular file"):
            check_output_path(target, overwrite=overwrite)
        with pytest.raises(ParameterError, match="output is not a regular file"):
            with atomic_path(target, overwrite=overwrite):
                pytest.fail("the work was started")
    assert Path("/dev/null").is_char_device()


def test_an_interrupt_as_the_temporary_file_is_created_leaves_nothing(tmp_path, monkeypatch):
    """A SIGTERM's exception between the file's creation and the block that removes it left the file behind
    (workers stopped as soon as their files appeared, under load: 2 runs in 8)."""
    real_close = os.close

    def interrupted(fd):
        real_close(fd)
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "close", interrupted)
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(tmp_path / "out.wav"):
            pass
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_a_temporary_name_in_use_is_passed_over(tmp_path, monkeypatch):
    """One name tried, an existing file (32 random bits that came out the same) ended the write."""
    import secrets

    from sepsti.core.io import _HOST

    taken = tmp_path / f".out.wav{TEMPORARY_MARKER}{_HOST}.{os.getpid()}.aaaaaaaa.wav"  # this live process's
    taken.write_text("another write of ours")
    tokens = iter(["aaaaaaaa", "aaaaaaaa", "bbbbbbbb"])
    monkeypatch.setattr(secrets, "token_hex", lambda size: next(tokens))
    with atomic_path(tmp_path / "out.wav") as tmp:
        assert tmp.name == f".out.wav{TEMPORARY_MARKER}{_HOST}.{os.getpid()}.bbbbbbbb.wav"
        tmp.write_text("new")
    assert taken.read_text() == "another write of ours" and (tmp_path / "out.wav").read_text() == "new"
    monkeypatch.setattr(secrets, "token_hex", lambda size: "aaaaaaaa")
    with pytest.raises(ParameterError, match=r"no unused temporary name in 100 tries"):
        with atomic_path(tmp_path / "out.wav"):
            pass


def test_a_hard_link_to_an_input_is_refused_as_the_output(tmp_path):
    """The same file under another name (a hard link) was taken for a new output, replacing the input it reads."""
    from sepsti.core.io import check_output_path

    source = tmp_path / "in.wav"
    source.write_text("the user's")
    os.link(source, tmp_path / "out.wav")
    with pytest.raises(ParameterError, match="out.wav: output is also an input"):
        check_output_path(tmp_path / "out.wav", overwrite=True, inputs=[source])
    assert check_output_path(tmp_path / "other.wav", inputs=[source]) == tmp_path / "other.wav"


def test_an_interrupt_during_the_work_leaves_nothing(tmp_path):
    """Any exception, a KeyboardInterrupt or a SystemExit included, removes the temporary file."""
    target = tmp_path / "out.txt"
    target.write_text("old")
    for interrupt in (KeyboardInterrupt, SystemExit):
        with pytest.raises(interrupt):
            with atomic_path(target) as tmp:
                tmp.write_text("half")
                raise interrupt
    assert os.listdir(tmp_path) == ["out.txt"] and target.read_text() == "old"


def test_the_stale_temporaries_of_a_symbolic_links_target_are_removed(tmp_path):
    """A link is written through, its temporaries made beside its final target: a killed writer's there were left."""
    (tmp_path / "data").mkdir()
    real = tmp_path / "data" / "out.wav"
    real.write_text("old")
    link = tmp_path / "link.wav"
    link.symlink_to(real)
    stale = _dead_writers_temporary(tmp_path / "data")
    stale.write_bytes(b"x")
    with atomic_path(link) as tmp:
        tmp.write_text("new")
    assert link.is_symlink() and real.read_text() == "new"
    assert os.listdir(tmp_path / "data") == ["out.wav"]


def test_a_folder_at_the_output_is_refused_by_the_check_even_with_overwrite(tmp_path):
    """With overwrite, a folder named as the output passed the check, the work done before the write failed."""
    from sepsti.core.io import check_output_path

    (tmp_path / "folder").mkdir()
    for overwrite in (False, True):
        with pytest.raises(ParameterError, match="folder: output is a directory$"):
            check_output_path(tmp_path / "folder", overwrite=overwrite)


def test_a_missing_input_is_told_apart_from_a_broken_link_and_a_loop(tmp_path):
    from sepsti.core.io import existing_path, why_missing

    (tmp_path / "gone.wav").symlink_to(tmp_path / "absent.wav")
    (tmp_path / "a.wav").symlink_to("b.wav")
    (tmp_path / "b.wav").symlink_to("a.wav")
    (tmp_path / "loop").symlink_to("loop")
    for name, why in (("absent.wav", "no such file"), ("gone.wav", "a broken symbolic link"),
                      ("a.wav", "a loop of symbolic links"), ("loop/x.wav", "a loop of symbolic links")):
        assert why_missing(tmp_path / name) == why
        with pytest.raises(ParameterError, match=f"^{tmp_path / name}: {why}$"):
            existing_path("path", tmp_path / name)
    (tmp_path / "here.wav").write_bytes(b"x")
    assert existing_path("path", str(tmp_path / "here.wav")) == tmp_path / "here.wav"
