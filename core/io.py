"""Atomic file output: write to a temporary file beside the target, then rename.

Temporary files are hidden and recognisable (``.<name>.sepsti-tmp.<host>.<pid>.<random><suffix>``, ``<host>``
a digest of the host name and PID namespace), so that one left by a killed process can be told from the user's
files and removed by the next writer of the same target on the same host (a live writer on another host that
shares the folder is never taken for a dead one). A name too long to carry that much more is shortened in it
(its start and a digest of the whole), and a suffix longer than a file-name extension is left out, so that
every name the file system admits can be written.

The published file has the permission bits (and, where allowed, the group) of the file it replaces, else those
a plain ``open()`` gives; it reaches the disk before its rename, and the rename after. An output that is a
symbolic link to a file is written through: the link's final target is replaced, the link kept.
"""

import contextlib
import errno
import hashlib
import math
import os
import stat
import tempfile
from pathlib import Path

from sepsti.core.errors import ParameterError

__all__ = ["TEMPORARY_MARKER", "atomic_path", "refuse_existing", "check_output_path", "check_not_an_input",
           "existing_path", "input_path", "why_missing", "json_safe", "remove_stale_temporaries"]


def check_output_path(path, *, overwrite=False, inputs=()):
    """Validate an output path before any work is done.

    Parameters
    ----------
    path : str or Path
        Where the output will go.
    overwrite : bool
        Whether an existing file may be replaced.
    inputs : iterable of str or Path
        Input files; the output may never be one of them.

    Returns
    -------
    Path
        The output path.

    Raises
    ------
    ParameterError
        If the path is an input, a directory, a device, pipe or socket, exists (a broken symbolic link included) without
        ``overwrite``, its folder does not exist or is not writable, or an input is named like one of
        its temporary files (which a later writer would take for a killed writer's and remove). For a
        symbolic link to a file, the folder and temporary files are those of the link's final target.
    """
    path = Path(path)
    check_not_an_input(path, inputs)
    destination = _destination(path)
    _refuse_directory(path)
    _refuse_special_file(path)
    if os.path.lexists(path) and not overwrite:
        what = "exists" if path.exists() else "exists as a broken symbolic link"
        raise ParameterError(f"{path}: output {what}; pass --overwrite to replace it")
    folder = destination.parent
    if not folder.is_dir():
        raise ParameterError(f"{path}: output folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ParameterError(f"{path}: output folder {folder} is not writable")
    try:  # a folder that admits writing may still refuse new files (/proc, a read-only mount, a full disk)
        with tempfile.TemporaryFile(dir=folder, prefix=_temporary_prefix(destination)):
            pass
    except OSError as error:
        raise _cannot_create(path, folder, error) from None
    return path


def input_path(name, value):
    """``value`` as a Path: a str or an os.PathLike, the path a reader was given.

    Raises
    ------
    ParameterError
        Anything else (None, bytes, a number), named by ``name``.
    """
    if not isinstance(value, (str, os.PathLike)):
        raise ParameterError(f"{name}={value!r} must be a path (a str or os.PathLike)")
    return Path(value)


def existing_path(name, value):
    """``value`` as a Path (:func:`input_path`) to something that exists.

    Raises
    ------
    ParameterError
        As :func:`input_path`; or the path and :func:`why_missing` it cannot be read.
    """
    path = input_path(name, value)
    if not path.exists():
        raise ParameterError(f"{path}: {why_missing(path)}")
    return path


def why_missing(path):
    """Why an input ``path`` that does not exist cannot be read: "no such file", "a broken symbolic link" or
    "a loop of symbolic links"."""
    try:
        os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:  # the path itself or a folder on it
            return "a loop of symbolic links"
    return "a broken symbolic link" if os.path.lexists(path) else "no such file"


def check_not_an_input(path, inputs):
    """Refuse an output ``path`` that is one of ``inputs`` (by name, through a link, or as the same file), or
    whose temporary files an input is named like (:func:`check_output_path`, whose first check this is).

    Raises
    ------
    ParameterError
    """
    path = Path(path)
    destination = _destination(path)
    for other in inputs:
        other = Path(other)
        same = path.resolve() == other.resolve() or (
            path.exists() and other.exists() and os.path.samefile(path, other))
        if same:
            raise ParameterError(f"{path}: output is also an input; choose another output path")
        if other.name.startswith(_temporary_prefix(destination)) and \
                other.parent.resolve() == destination.parent.resolve():
            raise ParameterError(f"{other}: named like a temporary file of the output {path}; rename it or choose "
                                 "another output path")


def _refuse_directory(path):
    if path.is_dir():
        raise ParameterError(f"{path}: output is a directory")


def _refuse_special_file(path):
    """Refuse a device, pipe or socket (``/dev/stdout``, ``/dev/null``): an output is renamed into place."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode):
        raise ParameterError(f"{path}: output is not a regular file (a device, pipe or socket); outputs are written "
                             "whole and renamed into place, so name a file")


def _destination(path):
    """The file a write to ``path`` replaces: a symbolic link's final target if that exists, else ``path``."""
    if path.is_symlink() and path.exists():
        return Path(os.path.realpath(path))
    return path


def _cannot_create(path, folder, error):
    return ParameterError(f"{path}: cannot create files in {folder} ({error.strerror or error})")


#: Marker in the names of this package's temporary files: ``.<name>.sepsti-tmp.<host>.<pid>.<random><suffix>``.
TEMPORARY_MARKER = ".sepsti-tmp."


#: Longest output name (in bytes) kept whole in its temporary files' names; NAME_MAX is 255 on common file systems.
_LONGEST_NAME_KEPT = 160

#: Longest suffix (in bytes) a temporary file's name carries from its output's (an extension: .wav, .json).
_LONGEST_SUFFIX_KEPT = 16


def _host_tag():
    """The ``<host>`` of temporary names: a digest of the host name and the PID namespace (where a pid means one
    process)."""
    namespace = ""
    with contextlib.suppress(OSError):
        namespace = os.readlink("/proc/self/ns/pid")
    return hashlib.sha256(f"{os.uname().nodename}/{namespace}".encode()).hexdigest()[:8]


_HOST = _host_tag()


def _temporary_prefix(path):
    name = path.name
    if len(os.fsencode(name)) > _LONGEST_NAME_KEPT:
        digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:16]
        while len(os.fsencode(name)) > _LONGEST_NAME_KEPT - 17:
            name = name[:-1]
        name = f"{name}~{digest}"
    return f".{name}{TEMPORARY_MARKER}"


def _process_is_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def remove_stale_temporaries(path):
    """Remove temporary files left beside ``path`` by writers of ours that were killed.

    Only files named like this module's temporaries for this very target by a writer on this host
    (``.<name>.sepsti-tmp.<host>.<pid>.*``), owned by the current user, whose process ``<pid>`` no
    longer runs are removed; anything else is left alone.

    Parameters
    ----------
    path : str or Path
        The final file whose stale temporaries are cleaned up.

    Returns
    -------
    list of Path
        The files removed.
    """
    path = Path(path)
    prefix = _temporary_prefix(path)
    removed = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        fields = entry.name[len(prefix):].split(".")  # <host>, <pid>, <random>, the suffix's
        if len(fields) < 3 or fields[0] != _HOST or not fields[1].isdigit():
            continue
        pid = int(fields[1])
        if pid == os.getpid() or _process_is_alive(pid):
            continue
        try:
            if not entry.is_file(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            os.unlink(entry.path)
        except OSError:
            continue
        removed.append(Path(entry.path))
    return removed


def refuse_existing(path):
    """Raise :class:`ParameterError` if a file (a broken symbolic link included) is at ``path``: what a writer that
    was not asked to replace one checks before any work (a folder there is left to :func:`atomic_path`)."""
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ParameterError(f"{path}: output exists; it was left as it is (overwrite=True, or --overwrite, "
                             "replaces it)")


def _appeared(path):
    return ParameterError(f"{path}: output was created by another program while this command ran; it was left "
                          "as it is (pass --overwrite to replace it)")


def _publish_new(tmp, path):
    """Give ``tmp`` the name ``path`` only if no file has that name (never replaces one)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise _appeared(path) from None
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.EACCES, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV,
                               errno.EMLINK, errno.ENOSYS):
            raise
        # No hard links here (some network and FAT file systems): claim the name with an
        # exclusive create, then move the finished file onto the placeholder.
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            raise _appeared(path) from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def _umask_in_proc():
    """The umask Linux reports in /proc (read without setting it: threads may be creating files), or None."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return None


def _umask_at_import():
    """Where /proc does not report it, the umask read by setting it, at import (before a program starts threads)."""
    if _umask_in_proc() is not None:
        return None
    umask = os.umask(0o077)
    os.umask(umask)
    return umask


_UMASK_AT_IMPORT = _umask_at_import()


def _umask():
    """The process's umask, read without setting it."""
    umask = _umask_in_proc()
    return _UMASK_AT_IMPORT if umask is None else umask


def _finish(tmp, destination, replacing):
    """Give ``tmp`` the permission bits and group of ``destination`` when it replaces one (else a new file's) and
    write it to disk."""
    descriptor = os.open(tmp, os.O_RDONLY)
    try:
        old = None
        if replacing:
            with contextlib.suppress(FileNotFoundError):
                old = os.stat(destination)
        if old is None:
            os.fchmod(descriptor, 0o666 & ~_umask())  # mkstemp's are owner-only: a plain open()'s permissions
        else:
            with contextlib.suppress(OSError):  # a group the user is not in
                os.fchown(descriptor, -1, old.st_gid)
            os.fchmod(descriptor, old.st_mode & 0o7777)  # after the group: a change of owner clears set-id bits
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _sync_folder(folder):
    """Write ``folder``'s entries to disk (a rename is durable only then); file systems that refuse are let be."""
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


@contextlib.contextmanager
def atomic_path(path, *, suffix=None, overwrite=True):
    """Yield a temporary path beside ``path``; give it the name ``path`` on success.

    On any exception the temporary file is removed and ``path`` is untouched.
    The temporary file is named ``.<name>.sepsti-tmp.<host>.<pid>.<random><suffix>``;
    stale ones of killed writers for the same target are removed first
    (:func:`remove_stale_temporaries`). The finished file is written to disk, renamed,
    and the rename written to disk. A replaced file's permission bits and group are kept.

    Parameters
    ----------
    path : str or Path
        The final file. With ``overwrite``, a symbolic link to a file is written through: its
        final target is replaced and the link kept.
    suffix : str, optional
        Suffix of the temporary file (defaults to the final file's, so that writers that choose
        a format by extension keep working; one longer than 16 bytes is left out).
    overwrite : bool
        True: the finished file replaces ``path`` if it exists (``os.replace``).
        False: the last step refuses to replace a file, including one created
        by someone else while the caller was working (hard link, or an
        exclusive create where links are not available).

    Raises
    ------
    ParameterError
        If ``path`` is a directory, a device, pipe or socket (or a link to one), before anything is yielded; with
        ``overwrite=False``, if ``path`` exists when the result is published.
    """
    path = Path(path)
    _refuse_directory(path)
    _refuse_special_file(path)  # renamed over as root, /dev/null would become a regular file
    if suffix is None:
        suffix = path.suffix if len(os.fsencode(path.suffix)) <= _LONGEST_SUFFIX_KEPT else ""
    destination = _destination(path) if overwrite else path
    remove_stale_temporaries(destination)
    folder = destination.parent
    tmp = None
    try:
        # created within the cleanup's reach: a SIGTERM raised between mkstemp's creating the file and a try
        # block after it (a test kills as soon as the file appears) left it behind
        tmp = _create_temporary(path, folder, f"{_temporary_prefix(destination)}{_HOST}.{os.getpid()}.", suffix)
        try:
            yield Path(tmp)
            _finish(tmp, destination, replacing=overwrite)
        except OSError as error:
            if error.filename is not None and Path(error.filename) != Path(tmp):
                raise
            # a writer's failure on the temporary file (a full disk, say) is reported against the output
            raise ParameterError(f"{path}: cannot write it ({error.strerror or error})") from None
        if overwrite:
            os.replace(tmp, destination)
        else:
            _publish_new(tmp, destination)
    except BaseException:
        if tmp is not None:
            _remove(tmp)
        raise
    _sync_folder(folder)


def _create_temporary(path, folder, prefix, suffix):
    """Create an empty file ``folder/<prefix><random><suffix>`` and return its name; a signal's exception
    between the file's creation and the return removes it here (the caller removes it after)."""
    import secrets

    for _ in range(100):
        candidate = os.path.join(folder, f"{prefix}{secrets.token_hex(4)}{suffix}")
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        except OSError as error:
            raise _cannot_create(path, folder, error) from None
        except BaseException:  # the name is this process's (its pid, 32 random bits): the file is its own
            _remove(candidate)
            raise
        try:
            os.close(fd)
        except BaseException:
            _remove(candidate)
            raise
        return candidate
    raise _cannot_create(path, folder, FileExistsError("no unused temporary name in 100 tries"))


def _remove(name):
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name)


def json_safe(value):
    """``value`` as JSON's types: numpy scalars and arrays, tuples and paths as builtins, recursively.

    NaN and infinities (JSON has no such numbers) become None, written as ``null``, wherever they are
    (numpy arrays and scalars included); any numpy float (``np.longdouble`` too) becomes a float. Mapping
    keys become the strings JSON writes for them (``4`` as ``"4"``, ``True`` as ``"true"``, a path as its text).

    Raises
    ------
    TypeError
        For a value or key of any other type (one JSON cannot hold).
    ParameterError
        If two keys of a mapping become the same string (``1`` and ``"1"``).
    """
    import numpy as np

    if isinstance(value, np.ndarray):
        value = value.tolist()
    value = _builtin_scalar(value, np)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int)):  # bool is an int
        return value
    if isinstance(value, dict):
        converted, keys = {}, {}
        for key, item in value.items():
            text = _json_key(_builtin_scalar(key, np))
            if text in converted:
                raise ParameterError(f"keys {keys[text]!r} and {key!r} are both {text!r} in JSON")
            converted[text], keys[text] = json_safe(item), key
        return converted
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _builtin_scalar(value, np):
    """A numpy scalar as a builtin (``item()`` gives ``np.longdouble`` back, so floats go through ``float``)."""
    if isinstance(value, np.floating):
        return float(value)
    return value.item() if isinstance(value, np.generic) else value


def _json_key(key):
    """A builtin mapping key as the string JSON writes for it."""
    import json

    if isinstance(key, str):
        return key
    if isinstance(key, os.PathLike):
        return os.fspath(key)
    if key is None or isinstance(key, (int, float)):
        return json.dumps(key)
    raise TypeError(f"not JSON serialisable: {type(key).__name__}")
