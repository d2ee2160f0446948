"""Reading audio files, validated at the entrance.

Conventions
-----------
Signals are 1-D float64 arrays (``n_samples,``). Integer formats (16-bit PCM
and the like) come back in [-1, 1) (soundfile's scaling: int16 / 32768);
floating-point files come back as stored. Multichannel files are downmixed to
mono by the mean over channels, unless the reader is asked to keep them
(``downmix=False``: ``(n_samples, channels)``). Every problem with a file is reported as
:class:`sepsti.core.errors.ParameterError` with a one-line message ``<path>: <why>``.

File names go to libsndfile as bytes (``os.fsencode``), so names that are not
valid UTF-8 (read from the command line as surrogate escapes) work too. While libsndfile reads, the process's
standard error (file descriptor 2) goes to the null device: its MP3 decoder (libmpg123) prints its own diagnostics
of a corrupt stream there, and the reader's one line says what went wrong.
"""

import contextlib
import os
import struct
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

from sepsti.core.checks import integer_at_least
from sepsti.core.errors import ParameterError
from sepsti.core.io import existing_path, input_path

__all__ = ["AudioInfo", "audio_info", "audio_files", "visible_files", "read_audio", "read_audio_blocks",
           "check_aligned", "check_channels"]


class AudioInfo(NamedTuple):
    """What a file's header says, without reading its samples."""

    sample_rate: int
    num_samples: int
    channels: int
    format: str
    subtype: str

    @property
    def duration(self):
        """Length in seconds."""
        return self.num_samples / self.sample_rate


@contextlib.contextmanager
def _decoders_quiet():
    """File descriptor 2 sent to the null device for the block, then restored."""
    try:
        sys.stderr.flush()  # what Python has written goes out first
    except (AttributeError, OSError, ValueError):
        pass
    try:
        saved = os.dup(2)
    except OSError:  # no standard error to quiet
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def _check_file(path):
    path = existing_path("path", path)
    if path.is_dir():
        raise ParameterError(f"{path}: is a directory, expected an audio file")
    if not path.is_file():
        raise ParameterError(f"{path}: not a regular file")
    if path.stat().st_size == 0:
        raise ParameterError(f"{path}: empty file (0 bytes)")
    return path


def _describe(error):
    # libsndfile's messages start with "Error opening '<path>': "; keep only the reason.
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if text.startswith("Error opening") and "': " in text:
        text = text.split("': ", 1)[1]
    return text


def _wav_data_shortfall(path):
    """Bytes missing from a RIFF/WAVE file's data chunk (0 when complete or not a WAV file).

    libsndfile silently reads a truncated WAV up to where the bytes stop, so the
    declared size of the ``data`` chunk is compared with what the file holds.
    """
    size = path.stat().st_size
    with open(path, "rb") as handle:
        header = handle.read(12)
        if len(header) < 12 or header[:4] not in (b"RIFF", b"RIFX") or header[8:12] != b"WAVE":
            return 0
        order = "<" if header[:4] == b"RIFF" else ">"
        position = 12
        while position + 8 <= size:
            handle.seek(position)
            chunk_id, chunk_size = struct.unpack(order + "4sI", handle.read(8))
            if chunk_id == b"data":
                # size unknown: streamed or RF64-style writers, or SoX writing to a pipe (its MS_UNSPEC)
                if chunk_size in (0xFFFFFFFF, 0x7FFFF000):
                    return 0
                return max(0, chunk_size - (size - position - 8))
            position += 8 + chunk_size + (chunk_size & 1)
    return 0


def audio_info(path):
    """Read a file's header.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    AudioInfo

    Raises
    ------
    ParameterError
        If the file is missing, a directory, empty, not audio or truncated.
    """
    import soundfile

    path = _check_file(path)
    try:
        with _decoders_quiet():
            info = soundfile.info(os.fsencode(path))
    except (RuntimeError, soundfile.SoundFileError, TypeError) as error:
        raise ParameterError(f"{path}: not a readable audio file ({_describe(error)})") from None
    missing = _wav_data_shortfall(path)
    if missing:
        raise ParameterError(f"{path}: truncated WAV file ({missing} bytes of audio data missing)")
    return AudioInfo(int(info.samplerate), int(info.frames), int(info.channels), info.format, info.subtype)


def read_audio(path, *, downmix=True):
    """Read an audio file as a float64 signal, mono unless asked to keep the channels.

    Parameters
    ----------
    path : str or Path
        Any format soundfile reads (WAV, FLAC, OGG, ...).
    downmix : bool
        Multichannel files downmixed by the mean (True), or each channel kept.

    Returns
    -------
    y : ndarray, shape (n_samples,), or (n_samples, channels) for a multichannel file read without ``downmix``
        float64; integer formats in [-1, 1).
        All-zero audio is valid and returned as it is.
    sample_rate : int

    Raises
    ------
    ParameterError
        ``<path>: <why>`` for a missing file, a directory, an empty file, bytes
        that are not audio, a truncated or corrupt file, zero-length audio, and
        NaN or Inf samples.
    """
    import soundfile

    info = audio_info(path)
    path = Path(path)
    try:
        with _decoders_quiet():
            data, sample_rate = soundfile.read(os.fsencode(path), dtype="float64", always_2d=True)
    except (RuntimeError, soundfile.SoundFileError, TypeError, ValueError) as error:
        raise ParameterError(f"{path}: corrupt audio file ({_describe(error)})") from None
    if data.shape[0] != info.num_samples:
        raise ParameterError(f"{path}: corrupt audio file (header says {info.num_samples} samples, "
                             f"{data.shape[0]} could be read)")
    if data.shape[0] == 0:
        raise ParameterError(f"{path}: zero-length audio (no samples)")
    y = data[:, 0] if data.shape[1] == 1 else data.mean(axis=1) if downmix else data
    if not np.all(np.isfinite(y)):
        bad = int(np.count_nonzero(~np.isfinite(y)))
        raise ParameterError(f"{path}: {bad} sample(s) are NaN or Inf")
    return np.ascontiguousarray(y), int(sample_rate)


def read_audio_blocks(path, *, block_size=1 << 16, downmix=True):
    """Read an audio file block by block as a float64 signal (memory independent of its length).

    The blocks, concatenated, are what :func:`read_audio` returns (with ``downmix``); the same
    checks are made (the finite-sample check and the sample count as the blocks are read).

    Parameters
    ----------
    path : str or Path
    block_size : int
        Samples (per channel) per block, at least 1; the last block may be shorter.
    downmix : bool
        Multichannel files downmixed by the mean (True), or each channel kept.

    Yields
    ------
    ndarray, shape (n,), or (n, channels) for a multichannel file read without ``downmix``
        float64, integer formats in [-1, 1).

    Raises
    ------
    ParameterError
        As :func:`read_audio`, raised when the bad part is reached; a ``block_size`` that is not a positive integer.
    """
    import soundfile

    block_size = integer_at_least("block_size", block_size, 1)
    info = audio_info(path)
    path = Path(path)
    count = 0
    try:
        with _decoders_quiet():
            handle = soundfile.SoundFile(os.fsencode(path))
        with handle:
            while True:
                try:
                    with _decoders_quiet():  # not held over the yield below
                        data = handle.read(block_size, dtype="float64", always_2d=True)
                except (RuntimeError, soundfile.SoundFileError, TypeError, ValueError) as error:
                    raise ParameterError(f"{path}: corrupt audio file ({_describe(error)})") from None
                if data.shape[0] == 0:
                    break
                y = data[:, 0] if data.shape[1] == 1 else data.mean(axis=1) if downmix else data
                if not np.all(np.isfinite(y)):
                    bad = int(np.count_nonzero(~np.isfinite(y)))
                    raise ParameterError(f"{path}: {bad} sample(s) are NaN or Inf (in the block from sample "
                                         f"{count})")
                count += data.shape[0]
                yield np.ascontiguousarray(y)
    except (RuntimeError, soundfile.SoundFileError) as error:
        raise ParameterError(f"{path}: corrupt audio file ({_describe(error)})") from None
    if count != info.num_samples:
        raise ParameterError(f"{path}: corrupt audio file (header says {info.num_samples} samples, "
                             f"{count} could be read)")
    if count == 0:
        raise ParameterError(f"{path}: zero-length audio (no samples)")


#: The file extensions of libsndfile's formats (its format names are not all extensions: AIFF is also
#: ``.aif``, OGG holds Vorbis and Opus; headerless RAW and MATLAB files are not taken for audio).
_FORMAT_EXTENSIONS = {"AIFF": (".aif", ".aifc", ".aiff"), "AU": (".au", ".snd"), "AVR": (".avr",),
                      "CAF": (".caf",), "FLAC": (".flac",), "HTK": (".htk",), "IRCAM": (".sf",),
                      "MP3": (".mp3",), "NIST": (".nist", ".sph"), "OGG": (".oga", ".ogg", ".opus"),
                      "PAF": (".paf",), "PVF": (".pvf",), "RF64": (".rf64",), "SD2": (".sd2",), "SDS": (".sds",),
                      "SVX": (".8svx", ".svx"), "VOC": (".voc",), "W64": (".w64",), "WAV": (".wav",),
                      "WAVEX": (".wav",), "WVE": (".wve",), "XI": (".xi",)}


def audio_files(root):
    """The audio files below a folder, in the order of :func:`visible_files`.

    A file is audio when its extension is one of the formats' this libsndfile reads
    (:data:`_FORMAT_EXTENSIONS`); names starting with a dot, files or folders, are passed over.
    No file is opened.

    Parameters
    ----------
    root : str or Path

    Returns
    -------
    list of Path

    Raises
    ------
    ParameterError
        A ``root`` that is not a path.
    """
    import soundfile

    root = input_path("root", root)
    extensions = {extension for name in soundfile.available_formats() for extension in _FORMAT_EXTENSIONS.get(name, ())}
    return [path for path in visible_files(root) if path.suffix.lower() in extensions]


def visible_files(root):
    """The files below ``root`` in sorted order, following links to folders, each folder once.

    Names starting with a dot (a trash, a cache, the temporary files of atomic writes) are passed
    over. A folder reached a second time (a link back up the tree, two links to one folder) is not
    entered again, so a link loop ends the walk instead of repeating it.

    Parameters
    ----------
    root : Path

    Yields
    ------
    Path
    """
    entered = set()
    for folder, subfolders, names in os.walk(root, followlinks=True):
        status = os.stat(folder)
        if (status.st_dev, status.st_ino) in entered:
            subfolders[:] = []
            continue
        entered.add((status.st_dev, status.st_ino))
        subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
        yield from (Path(folder) / name for name in sorted(names) if not name.startswith("."))


def check_channels(noisy_path, noisy, clean_path, clean):
    """Check that a noisy file has its multichannel clean file's channels (a mono clean file fits any).

    Raises
    ------
    ParameterError
        ``<noisy_path>: ...`` naming the clean file, if the clean file has several channels and the noisy
        file another number.
    """
    channels = [1 if y.ndim == 1 else y.shape[1] for y in (noisy, clean)]
    if channels[1] > 1 and channels[0] != channels[1]:
        raise ParameterError(f"{noisy_path}: has {channels[0]} channels but its clean file {clean_path} has "
                             f"{channels[1]}; a pair's files must have as many channels, or the clean file one")


def check_aligned(noisy_path, noisy, noisy_rate, clean_path, clean, clean_rate):
    """Check that a noisy file and its clean reference are sample-aligned: one rate, one length.

    Raises
    ------
    ParameterError
        ``<noisy_path>: ...`` naming the clean file, if the rates or the lengths differ.
    """
    if noisy_rate != clean_rate:
        raise ParameterError(f"{noisy_path}: sample rate {noisy_rate} Hz differs from {clean_rate} Hz "
                             f"of its clean file {clean_path}")
    if len(noisy) != len(clean):
        raise ParameterError(f"{noisy_path}: {len(noisy)} samples but its clean file {clean_path} has "
                             f"{len(clean)}; files must be sample-aligned")
