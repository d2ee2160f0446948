"""Clean and noisy recordings paired by file name: the layout of VoiceBank-DEMAND and its kind.

Layout
------
Two folders: one of clean speech and one of the same recordings with noise, each noisy file
named as its clean file up to the extension (``clean/p232_001.wav`` and ``noisy/p232_001.wav``,
or ``.flac`` beside ``.wav``). Files are found anywhere below each folder (symbolic links
followed); names starting with a dot and extensions libsndfile does not read are passed over.
A name is one file below each folder, and the subfolders holding a pair's files must agree: the
shorter path below its folder ends the longer (``spkA/001.wav`` pairs with ``spkA/001.wav`` or
``snr5/spkA/001.wav``, and a file directly in its folder with any), so ``spkA/001.wav`` never
pairs with ``spkB/001.wav``. Neither folder may be inside the other, and a pair's files may not
be one file (a link). A pair's files must have the same rate, length and channels (sample-aligned: the
noise is ``noisy - clean``); the rate and the channels may differ from pair to pair.

Finding pairs (:func:`pair_index`) reads no audio; :func:`load_pair` reads one pair. Every
problem is a :class:`sepsti.core.errors.ParameterError` naming the file.
"""

import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from sepsti.core.errors import ParameterError
from sepsti.core.io import input_path
from sepsti.corpora.audio import audio_files, check_aligned, check_channels, read_audio

__all__ = ["Pair", "PairPaths", "pair_index", "load_pair"]


class PairPaths(NamedTuple):
    """Where one pair's files are: ``name`` is the shared file name without its extension."""

    name: str
    clean: Path
    noisy: Path


class Pair(NamedTuple):
    """One noisy recording with its clean reference, float64 arrays of the same shape: ``(n_samples,)``, or
    ``(n_samples, channels)`` for multichannel files (their channels kept)."""

    name: str
    clean: np.ndarray
    noisy: np.ndarray
    sample_rate: int
    path: Path  # the noisy file


def _audio_files(root, label):
    """``{name without extension: path}`` of the audio files below ``root``."""
    root = Path(root)
    if not root.exists():
        raise ParameterError(f"{root}: no such {label} folder")
    if not root.is_dir():
        raise ParameterError(f"{root}: not a folder; pass the folder of the {label} recordings")
    files = {}
    for path in audio_files(root):
        if path.stem in files:
            raise ParameterError(f"{path}: same name as {files[path.stem]}; a name must be one recording "
                                 f"below the {label} folder")
        files[path.stem] = path
    return files


def pair_index(clean_root, noisy_root):
    """Pair every noisy recording with the clean one of the same name.

    Parameters
    ----------
    clean_root, noisy_root : str or Path
        The two folders (searched recursively).

    Returns
    -------
    list of PairPaths
        Sorted by name.

    Raises
    ------
    ParameterError
        If a folder is not a path, is missing or not a folder, the two are the same folder or one is inside the other,
        two files below one folder share a name, the noisy folder holds no audio, a noisy file has no
        clean file, or a pair's files are in subfolders that disagree or are one file.
    """
    clean_path = input_path("clean_root", clean_root).resolve()
    noisy_path = input_path("noisy_root", noisy_root).resolve()
    if clean_path == noisy_path:
        raise ParameterError(f"{noisy_root}: the clean and noisy folders are the same; pass two folders")
    if clean_path in noisy_path.parents:
        raise ParameterError(f"{noisy_root}: inside the clean folder {clean_root}; pass two folders, neither "
                             "inside the other")
    if noisy_path in clean_path.parents:
        raise ParameterError(f"{clean_root}: inside the noisy folder {noisy_root}; pass two folders, neither "
                             "inside the other")
    clean, noisy = _audio_files(clean_root, "clean"), _audio_files(noisy_root, "noisy")
    if not noisy:
        raise ParameterError(f"{noisy_root}: no audio files found below the noisy folder")
    unmatched = sorted(name for name in noisy if name not in clean)
    if unmatched:
        more = f" (and {len(unmatched) - 1} more)" if len(unmatched) > 1 else ""
        raise ParameterError(f"{noisy[unmatched[0]]}: no clean file named {unmatched[0]}.* below {clean_root}{more}")
    pairs = [PairPaths(name, clean[name], noisy[name]) for name in sorted(noisy)]
    for pair in pairs:
        clean_folders = pair.clean.relative_to(clean_root).parent.parts
        noisy_folders = pair.noisy.relative_to(noisy_root).parent.parts
        shorter = min(len(clean_folders), len(noisy_folders))
        if clean_folders[len(clean_folders) - shorter:] != noisy_folders[len(noisy_folders) - shorter:]:
            raise ParameterError(f"{pair.noisy}: its clean file is {pair.clean}, in another subfolder; a pair's "
                                 "subfolders must agree (the shorter path ending the longer)")
        if os.path.samefile(pair.clean, pair.noisy):
            raise ParameterError(f"{pair.noisy}: the same file as its clean file {pair.clean} (a link?); "
                                 "the noise would be zero")
    return pairs


def load_pair(paths):
    """Read one pair and check that its files are sample-aligned.

    Parameters
    ----------
    paths : PairPaths

    Returns
    -------
    Pair

    Raises
    ------
    ParameterError
        If a file is unreadable (:func:`sepsti.corpora.audio.read_audio`), or the noisy file's rate or
        length differs from the clean file's, or its number of channels from a multichannel clean file's (a
        mono clean file is every channel's reference).
    """
    clean, clean_rate = read_audio(paths.clean, downmix=False)
    noisy, noisy_rate = read_audio(paths.noisy, downmix=False)
    check_aligned(paths.noisy, noisy, noisy_rate, paths.clean, clean, clean_rate)
    check_channels(paths.noisy, noisy, paths.clean, clean)
    return Pair(paths.name, clean, noisy, noisy_rate, paths.noisy)
