"""Atomic file output: write to a temporary file beside the target, then rename."""

import contextlib
import math
import os
import tempfile
from pathlib import Path

from core.errors import ParameterError

__all__ = ["atomic_path", "check_output_path", "json_safe"]


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
        If the path is an input, a directory, exists without ``overwrite`` or
        its folder does not exist or is not writable.
    """
    path = Path(path)
    for other in inputs:
        other = Path(other)
        same = path.resolve() == other.resolve() or (
            path.exists() and other.exists() and os.path.samefile(path, other))
        if same:
            raise ParameterError(f"{path}: output is also an input; choose another output path")
    if path.is_dir():
        raise ParameterError(f"{path}: output is a directory")
    if path.exists() and not overwrite:
        raise ParameterError(f"{path}: output exists; pass --overwrite to replace it")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ParameterError(f"{path}: output folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ParameterError(f"{path}: output folder {folder} is not writable")
    return path


@contextlib.contextmanager
def atomic_path(path, *, suffix=None):
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    On any exception the temporary file is removed and ``path`` is untouched.

    Parameters
    ----------
    path : str or Path
        The final file.
    suffix : str, optional
        Suffix of the temporary file (defaults to the final file's, so that
        writers that choose a format by extension keep working).
    """
    path = Path(path)
    suffix = path.suffix if suffix is None else suffix
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent if str(path.parent) else ".")
    os.close(fd)
    # mkstemp creates owner-only files; give the output the permissions a plain open() would.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def json_safe(value):
    """``value`` with NaN and infinities (in nested dicts and lists) replaced by None: JSON has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_safe(item) for item in value]
    return value
