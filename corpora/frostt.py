"""Reading and writing FROSTT ``.tns`` sparse tensor files.

Format: one stored entry per line, ``i_1 i_2 ... i_N value``, whitespace
separated, coordinates 1-based. ``#`` starts a comment (to the end of the
line); blank lines are ignored. Files ending in ``.gz`` are read and written
through gzip. Text is UTF-8; a leading byte order mark is skipped. The format
has no header: :func:`write_tns` records the shape in a comment on the first
line, ``# shape: I J K``, which :func:`read_tns` takes as the default shape
(FROSTT readers that skip ``#`` lines read such a file as any other).

Conventions: the result is a :class:`sepsti.core.sparse_tensor.SparseTensor` with
0-based int64 ``coords`` of shape (nnz, N) and float64 ``values``. The file is
read in chunks of lines, each converted to arrays at once, so memory holds
the arrays and one chunk of text, never the whole file as Python objects.
"""

import gzip
import itertools
import re
import warnings
import zlib
from pathlib import Path

import numpy as np

from sepsti.core.errors import ParameterError
from sepsti.core.io import atomic_path, existing_path
from sepsti.core.sparse_tensor import coalesce, validate_sparse_tensor

__all__ = ["read_tns", "write_tns"]

_CHUNK_LINES = 1 << 18
#: The first line :func:`write_tns` writes: the shape, as a comment.
_SHAPE_LINE = re.compile(r"#\s*shape:((?:\s+[1-9][0-9]*)+)\s*")


def _open_text(path, mode):
    path = Path(path)
    encoding = "utf-8-sig" if mode == "r" else "utf-8"  # skip a byte order mark when reading, write none
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding=encoding)
    return open(path, mode, encoding=encoding)


def read_tns(path, *, shape=None, counts=True, chunk_lines=_CHUNK_LINES):
    """Read a FROSTT ``.tns`` file.

    Parameters
    ----------
    path : str or Path
        The file (``.gz`` is decompressed on the fly).
    shape : tuple of int, optional
        Shape of the tensor. Default: the shape on the file's first line, ``# shape: I J K``
        (:func:`write_tns`), else the largest coordinate in each mode.
        Its length fixes the number of modes; otherwise the first data line does.
    counts : bool
        Require non-negative values (count models such as Poisson PARAFAC).
        NaN and infinite values are always rejected.
    chunk_lines : int
        Lines converted at once.

    Returns
    -------
    SparseTensor
        Duplicate coordinates are summed (with a warning counting the lines that repeat an earlier
        coordinate) and zero values dropped.

    Raises
    ------
    ParameterError
        On a ``path`` that is not a path, a malformed line (the message names the file and line number), on
        coordinates beyond ``shape``, when the file is missing (or a broken symbolic link),
        holds no entries, is not UTF-8 text, is a corrupt gzip file or is a directory.
    OSError
        If the file exists but cannot be read (no permission, say).
    """
    path = existing_path("path", path)
    ndim = None
    if shape is not None:
        shape = tuple(int(n) for n in shape)
        if not shape or any(n < 1 for n in shape):
            raise ParameterError(f"shape={shape} must be a non-empty tuple of positive sizes")
        ndim = len(shape)
    if int(chunk_lines) < 1:
        raise ParameterError(f"chunk_lines={chunk_lines} must be a positive integer")
    coord_chunks, value_chunks = [], []
    line_offset = 0
    whose = "the given shape"
    try:
        with _open_text(path, "r") as handle:
            while True:
                lines = list(itertools.islice(handle, int(chunk_lines)))
                if not lines:
                    break
                if shape is None and line_offset == 0:
                    recorded = _SHAPE_LINE.fullmatch(lines[0].rstrip("\r\n"))
                    if recorded:
                        shape = tuple(int(n) for n in recorded.group(1).split())
                        ndim = len(shape)
                        whose = "the shape of its header line"
                result = _parse_chunk(path, lines, line_offset, ndim, shape, counts, whose)
                line_offset += len(lines)
                if result is None:
                    continue
                coords, values = result
                ndim = coords.shape[1]
                coord_chunks.append(coords)
                value_chunks.append(values)
    except UnicodeDecodeError as error:
        raise ParameterError(f"{path}: not UTF-8 text (undecodable byte 0x{error.object[error.start]:02x}); "
                             "a .tns file holds lines 'i_1 ... i_N value'") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise ParameterError(f"{path}: not a valid gzip file ({error})") from None
    except IsADirectoryError:
        raise ParameterError(f"{path}: is a directory, not a .tns file") from None
    if not coord_chunks:
        raise ParameterError(f"{path}: no entries found (only blank or comment lines)")
    coords = np.concatenate(coord_chunks)
    values = np.concatenate(value_chunks)
    del coord_chunks, value_chunks
    if shape is None:
        shape = tuple(int(n) + 1 for n in coords.max(axis=0))
    tensor = coalesce(coords, values, shape)
    # coalesce drops zero values, and sums that cancel: as many entries as lines means every coordinate is new
    if tensor.nnz < coords.shape[0]:
        repeats = coords.shape[0] - coalesce(coords, np.ones(coords.shape[0]), shape).nnz
        if repeats:
            warnings.warn(f"{path}: {repeats} lines repeat an earlier coordinate; their values were summed",
                          UserWarning, stacklevel=2)
    return tensor


def _parse_chunk(path, lines, line_offset, ndim, shape, counts, whose):
    """Convert one chunk of lines to (coords, values) or None if it has no data lines."""
    numbers, tokens = [], []
    for n, line in enumerate(lines, start=line_offset + 1):
        fields = line.split("#", 1)[0].split()
        if fields:
            numbers.append(n)
            tokens.append(fields)
    if not tokens:
        return None
    if ndim is None:
        ndim = len(tokens[0]) - 1
        if ndim < 1:
            raise ParameterError(f"{path}:{numbers[0]}: a line needs at least one index and a value, "
                                 f"found {len(tokens[0])} column")
    widths = np.fromiter((len(t) for t in tokens), dtype=np.int64, count=len(tokens))
    bad = np.flatnonzero(widths != ndim + 1)
    if bad.size:
        first = bad[0]
        raise ParameterError(f"{path}:{numbers[first]}: expected {ndim + 1} columns ({ndim} indices and a "
                             f"value), found {widths[first]}")
    table = np.array(list(itertools.chain.from_iterable(tokens))).reshape(len(tokens), ndim + 1)
    try:
        coords = table[:, :ndim].astype(np.int64)
    except (ValueError, OverflowError):
        coords = None
    if coords is None:
        for n, fields in zip(numbers, tokens):
            for column, token in enumerate(fields[:ndim], start=1):
                try:
                    int(token)
                except ValueError:
                    raise ParameterError(f"{path}:{n}: index '{token}' in column {column} is not an "
                                         "integer") from None
        raise ParameterError(f"{path}: an index does not fit in a 64-bit integer")  # pragma: no cover
    try:
        values = table[:, ndim].astype(np.float64)
    except ValueError:
        for n, fields in zip(numbers, tokens):
            try:
                float(fields[ndim])
            except ValueError:
                raise ParameterError(f"{path}:{n}: value '{fields[ndim]}' is not a number") from None
        raise  # pragma: no cover
    low = coords < 1
    if low.any():
        row, column = np.argwhere(low)[0]
        raise ParameterError(f"{path}:{numbers[row]}: index {coords[row, column]} in column {column + 1} "
                             "is below 1 (FROSTT coordinates are 1-based)")
    if shape is not None:
        high = coords > np.asarray(shape)
        if high.any():
            row, column = np.argwhere(high)[0]
            raise ParameterError(f"{path}:{numbers[row]}: index {coords[row, column]} in column {column + 1} "
                                 f"exceeds {whose} {shape}")
    bad = np.flatnonzero(~np.isfinite(values) | ((values < 0) if counts else False))
    if bad.size:
        row = bad[0]
        what = "is not finite" if not np.isfinite(values[row]) else "is negative; counts must be >= 0"
        raise ParameterError(f"{path}:{numbers[row]}: value '{tokens[row][ndim]}' {what}")
    coords -= 1
    return coords, values


def write_tns(path, tensor, *, comment=None, overwrite=False):
    """Write a SparseTensor as a FROSTT ``.tns`` file (1-based coordinates), atomically.

    The first line is the shape, as a comment (``# shape: I J K``), which :func:`read_tns` reads back:
    a tensor whose last slices are empty keeps its shape.

    Parameters
    ----------
    path : str or Path
    tensor : SparseTensor
        Valid (:func:`sepsti.core.sparse_tensor.validate_sparse_tensor`), with at least one stored entry.
    comment : str, optional
        Written as ``#`` lines after the shape.
    overwrite : bool
        Replace an existing file.

    Raises
    ------
    ParameterError
        An existing file without ``overwrite``; a tensor that is not valid (coordinates outside its shape,
        values that are not finite, ...) or has no stored entry (a ``.tns`` file without one is not read).
    """
    path = Path(path)
    tensor = validate_sparse_tensor(tensor)
    if not tensor.nnz:
        raise ParameterError("tensor: no stored entries; a .tns file holds at least one")
    if path.exists() and not overwrite:
        raise ParameterError(f"{path}: output exists; pass overwrite=True to replace it")
    coords = tensor.coords + 1
    values = tensor.values
    # integers print as such only where float64 holds them exactly
    integral = bool(np.all(np.abs(values) < 2 ** 53) and np.all(values == np.round(values)))
    with atomic_path(path) as tmp:
        with _open_text(tmp, "w") as handle:
            handle.write(f"# shape: {' '.join(str(n) for n in tensor.shape)}\n")
            if comment:
                for line in str(comment).splitlines():
                    handle.write(f"# {line}\n")
            step = _CHUNK_LINES
            for start in range(0, values.shape[0], step):
                block = coords[start:start + step]
                vals = values[start:start + step]
                columns = [block[:, m].astype(str) for m in range(block.shape[1])]
                columns.append(vals.astype(np.int64).astype(str) if integral else np.char.mod("%.17g", vals))
                handle.write("\n".join(" ".join(row) for row in zip(*columns)) + "\n")
    return path
