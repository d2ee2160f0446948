"""Atomic file output: write to a temporary file beside the target, then rename.

Temporary files are hidden and recognisable (``.<name>.sepsti-tmp.<pid>.<random><suffix>``), so
that one left by a killed process can be told from the user's files and removed by the next
writer of the same target. A name too long to carry that much more is shortened in it (its start
and a digest of the whole), so that every name the file system admits can be written.
"""

import contextlib
import errno
import hashlib
import math
import os
import tempfile
from pathlib import Path

from sepsti.core.errors import ParameterError

__all__ = ["TEMPORARY_MARKER", "atomic_path", "check_output_path", "json_safe", "remove_stale_temporaries"]


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
        If the path is an input, a directory, exists (a broken symbolic link included) without
        ``overwrite``, its folder does not exist or is not writable, or an input is named like one of
        its temporary files (which a later writer would take for a killed writer's and remove).
    """
    path = Path(path)
    for other in inputs:
        other = Path(other)
        same = path.resolve() == other.resolve() or (
            path.exists() and other.exists() and os.path.samefile(path, other))
        if same:
            raise ParameterError(f"{path}: output is also an input; choose another output path")
        if other.name.startswith(_temporary_prefix(path)) and other.parent.resolve() == path.parent.resolve():
            raise ParameterError(f"{other}: named like a temporary file of the output {path}; rename it or choose "
                                 "another output path")
    if path.is_dir():
        raise ParameterError(f"{path}: output is a directory")
    if os.path.lexists(path) and not overwrite:
        what = "exists" if path.exists() else "exists as a broken symbolic link"
        raise ParameterError(f"{path}: output {what}; pass --overwrite to replace it")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ParameterError(f"{path}: output folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ParameterError(f"{path}: output folder {folder} is not writable")
    try:  # a folder that admits writing may still refuse new files (/proc, a read-only mount, a full disk)
        with tempfile.TemporaryFile(dir=folder, prefix=_temporary_prefix(path)):
            pass
    except OSError as error:
        raise _cannot_create(path, folder, error) from None
    return path


def _cannot_create(path, folder, error):
    return ParameterError(f"{path}: cannot create files in {folder} ({error.strerror or error})")


#: Marker in the names of this package's temporary files: ``.<name>.sepsti-tmp.<pid>.<random><suffix>``.
TEMPORARY_MARKER = ".sepsti-tmp."


#: Longest output name (in bytes) kept whole in its temporary files' names; NAME_MAX is 255 on common file systems.
_LONGEST_NAME_KEPT = 160


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

    Only files named like this module's temporaries for this very target
    (``.<name>.sepsti-tmp.<pid>.*``), owned by the current user, whose process
    ``<pid>`` no longer runs are removed; anything else is left alone.

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
    folder = path.parent if str(path.parent) else Path(".")
    prefix = _temporary_prefix(path)
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        pid_text = entry.name[len(prefix):].split(".", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _process_is_alive(int(pid_text)):
            continue
        try:
            if not entry.is_file(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            os.unlink(entry.path)
        except OSError:
            continue
        removed.append(Path(entry.path))
    return removed


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


@contextlib.contextmanager
def atomic_path(path, *, suffix=None, overwrite=True):
    """Yield a temporary path beside ``path``; give it the name ``path`` on success.

    On any exception the temporary file is removed and ``path`` is untouched.
    The temporary file is named ``.<name>.sepsti-tmp.<pid>.<random><suffix>``;
    stale ones of killed writers for the same target are removed first
    (:func:`remove_stale_temporaries`).

    Parameters
    ----------
    path : str or Path
        The final file.
    suffix : str, optional
        Suffix of the temporary file (defaults to the final file's, so that
        writers that choose a format by extension keep working).
    overwrite : bool
        True: the finished file replaces ``path`` if it exists (``os.replace``).
        False: the last step refuses to replace a file, including one created
        by someone else while the caller was working (hard link, or an
        exclusive create where links are not available).

    Raises
    ------
    ParameterError
        With ``overwrite=False``, if ``path`` exists when the result is published.
    """
    path = Path(path)
    suffix = path.suffix if suffix is None else suffix
    remove_stale_temporaries(path)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{_temporary_prefix(path)}{os.getpid()}.", suffix=suffix, dir=folder)
    except OSError as error:
        raise _cannot_create(path, folder, error) from None
    os.close(fd)
    # mkstemp creates owner-only files; give the output the permissions a plain open() would.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        try:
            yield Path(tmp)
        except OSError as error:
            if error.filename is not None and Path(error.filename) != Path(tmp):
                raise
            # a writer's failure on the temporary file (a full disk, say) is reported against the output
            raise ParameterError(f"{path}: cannot write it ({error.strerror or error})") from None
        if overwrite:
            os.replace(tmp, path)
        else:
            _publish_new(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def json_safe(value):
    """``value`` as JSON's types: numpy scalars and arrays, tuples and paths as builtins, recursively.

    NaN and infinities (JSON has no such numbers) become None, written as ``null``, wherever they are
    (numpy arrays and scalars included). Mapping keys that are numpy scalars become builtins.

    Raises
    ------
    TypeError
        For a value of any other type (one JSON cannot hold).
    """
    import numpy as np

    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int)):  # bool is an int
        return value
    if isinstance(value, dict):
        return {key.item() if isinstance(key, np.generic) else key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
