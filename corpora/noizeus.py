"""NOIZEUS-style corpus reader: clean utterances, noisy mixtures and their noise.

Layout
------
Clean files are named ``spNN.wav`` and noisy files ``spNN_<noise>_sn<snr>.wav``
(for example ``sp21_babble_sn5.wav``). They are found by name anywhere below
the root, so both the original nested distribution (``babble_0dB/0dB/...``)
and flat copies work. Files are sample-aligned: the noise of a mixture is
``noisy - clean``.

Conventions
-----------
Utterance ids are strings ``"sp01"`` ... ``"sp30"``; SNRs are integers in dB;
signals are float64 arrays ``(n_samples,)`` as returned by
:func:`sepsti.corpora.audio.read_audio`. The default split is the paper's
speaker-independent one (ICASSP'16 §4.2): train sp01–sp20, test sp21–sp30.

Finding files (:func:`corpus_index`) reads no audio; signals are loaded by
:func:`clean_signals` and :func:`mixtures`. Every problem is a
:class:`sepsti.core.errors.ParameterError` naming the file or what was asked and
what exists.
"""

import filecmp
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np

from sepsti.core.checks import integer_within, is_number
from sepsti.core.errors import ParameterError
from sepsti.core.io import input_path
from sepsti.corpora.audio import check_aligned, check_channels, read_audio, visible_files

__all__ = ["TRAIN_IDS", "TEST_IDS", "ALL_IDS", "SYNTH_MARKER", "Mixture", "CorpusIndex", "corpus_index", "split_ids",
           "clean_signals", "select", "mixtures", "iter_mixtures", "utterance_id", "clean_name", "noisy_name"]

ALL_IDS = tuple(f"sp{number:02d}" for number in range(1, 31))
TRAIN_IDS = ALL_IDS[:20]
TEST_IDS = ALL_IDS[20:]

#: The settings file ``sepsti corpus synth`` writes first in a corpus it makes (:mod:`sepsti.corpora.synth`).
SYNTH_MARKER = "synth.json"

_CLEAN = re.compile(r"^sp(\d+)\.wav$", re.IGNORECASE)
_NOISY = re.compile(r"^sp(\d+)_(.+)_sn(-?\d+)\.wav$", re.IGNORECASE)


class Mixture(NamedTuple):
    """One noisy file with its clean reference and the noise derived from them.

    ``utterance`` is the id (``"sp21"``), ``noise`` the noise type, ``snr`` the
    SNR label in dB; ``clean``, ``noisy`` and ``noise_signal = noisy - clean``
    are float64 arrays of the same length; ``path`` is the noisy file.
    """

    utterance: str
    noise: str
    snr: int
    clean: np.ndarray
    noisy: np.ndarray
    noise_signal: np.ndarray
    sample_rate: int
    path: Path


class CorpusIndex(NamedTuple):
    """The files found below a corpus root (no audio is read).

    ``clean`` maps utterance id to path; ``noisy`` maps ``(id, noise, snr)`` to path.
    """

    root: Path
    clean: dict
    noisy: dict

    @property
    def ids(self):
        """Sorted ids of the utterances with a clean file."""
        return sorted(self.clean)

    @property
    def noises(self):
        """Sorted noise types of the noisy files."""
        return sorted({noise for _, noise, _ in self.noisy})

    @property
    def snrs(self):
        """Sorted SNRs (dB) of the noisy files."""
        return sorted({snr for _, _, snr in self.noisy})

    def describe(self):
        """A short multi-line summary of what was found."""
        noisy_ids = sorted({utterance for utterance, _, _ in self.noisy})
        lines = [f"corpus: {self.root}",
                 f"clean files: {len(self.clean)} ({_ranges(self.ids)})",
                 f"noisy files: {len(self.noisy)} ({_ranges(noisy_ids)})",
                 f"noises: {', '.join(self.noises) or '-'}",
                 f"snrs (dB): {', '.join(map(str, self.snrs)) or '-'}"]
        for name, ids in (("train", TRAIN_IDS), ("test", TEST_IDS)):
            have = [utterance for utterance in ids if utterance in self.clean]
            missing = [utterance for utterance in ids if utterance not in self.clean]
            line = f"{name} split: {len(have)} of {len(ids)} clean files"
            lines.append(line + (f" (missing {_ranges(missing)})" if missing else ""))
        return "\n".join(lines)


def utterance_id(number):
    """The id of NOIZEUS sentence ``number`` (1 -> ``"sp01"``).

    Raises
    ------
    ParameterError
        A ``number`` that is not an integer in 1..30.
    """
    return ALL_IDS[integer_within("number", number, 1, len(ALL_IDS)) - 1]


def _id(digits):
    """The id of any number, unchecked: a file name's or a user's id's digits (``"3"`` -> ``"sp03"``)."""
    return f"sp{int(digits):02d}"


def clean_name(utterance):
    """File name of a clean utterance: ``sp21.wav``."""
    return f"{utterance}.wav"


def noisy_name(utterance, noise, snr):
    """File name of a mixture: ``sp21_babble_sn5.wav``."""
    return f"{utterance}_{noise}_sn{int(snr)}.wav"


def _ranges(ids):
    """Compact list of ids: sp01-sp20, sp23."""
    numbers = sorted(int(utterance[2:]) for utterance in ids)
    parts, start = [], None
    for index, number in enumerate(numbers):
        if start is None:
            start = number
        if index + 1 == len(numbers) or numbers[index + 1] != number + 1:
            parts.append(_id(start) if start == number else f"{_id(start)}-{_id(number)}")
            start = None
    return ", ".join(parts) if parts else "none"


def _add(table, key, path):
    if key in table:
        # Identical copies (a corpus unpacked twice, say) are harmless; different files are ambiguous.
        if not filecmp.cmp(table[key], path, shallow=False):
            raise ParameterError(f"{path}: same name as {table[key]} but different content; "
                                 f"keep one copy of each file below the corpus root")
        return
    table[key] = path


def corpus_index(root):
    """Find the clean and noisy files below ``root`` by their names.

    Parameters
    ----------
    root : str or Path
        The corpus folder, searched recursively (symbolic links followed).

    Returns
    -------
    CorpusIndex

    Raises
    ------
    ParameterError
        If ``root`` is not a path or not a folder, holds no NOIZEUS-style file, or holds two
        files with the same name.
    """
    root = input_path("root", root)
    if not root.exists():
        raise ParameterError(f"{root}: no such corpus folder")
    if not root.is_dir():
        raise ParameterError(f"{root}: not a folder; pass the corpus folder")
    clean, noisy = {}, {}
    for path in visible_files(root):
        match = _CLEAN.match(path.name)
        if match:
            _add(clean, _id(match[1]), path)
            continue
        match = _NOISY.match(path.name)
        if match:
            _add(noisy, (_id(match[1]), match[2].lower(), int(match[3])), path)
    if not clean and not noisy:
        raise ParameterError(f"{root}: no NOIZEUS-style files found (expected clean spNN.wav and noisy "
                             f"spNN_<noise>_sn<snr>.wav anywhere below it)")
    _warn_if_unfinished(root)
    return CorpusIndex(root, clean, noisy)


def _warn_if_unfinished(root):
    """Warn of a synthetic corpus whose writing stopped before its end (its settings say it is not complete)."""
    import json
    import warnings

    try:
        settings = json.loads((root / SYNTH_MARKER).read_text())
    except (OSError, ValueError):
        return
    if isinstance(settings, dict) and settings.get("complete") is False:
        warnings.warn(f"{root}: a synthetic corpus whose writing was interrupted ({SYNTH_MARKER} says it is not "
                      "complete): only the files written before are here; rerun `sepsti corpus synth` with "
                      "--overwrite to finish it", UserWarning, stacklevel=3)


def _as_index(corpus):
    return corpus if isinstance(corpus, CorpusIndex) else corpus_index(input_path("corpus", corpus))


def split_ids(split):
    """Utterance ids of a split.

    Parameters
    ----------
    split : {"train", "test", "all"} or iterable of str
        A named split, or explicit ids (``"sp21"``).

    Returns
    -------
    list of str
    """
    if isinstance(split, str):
        named = {"train": TRAIN_IDS, "test": TEST_IDS, "all": ALL_IDS}
        if split.lower() not in named:
            raise ParameterError(f"split={split!r}: expected 'train', 'test', 'all' or a list of ids like 'sp21'")
        return list(named[split.lower()])
    ids = []
    for utterance in split:
        match = re.fullmatch(r"(?:sp)?(\d+)", str(utterance).strip(), re.IGNORECASE)
        if match is None:
            raise ParameterError(f"utterance {utterance!r}: expected an id like 'sp21'")
        ids.append(_id(match[1]))
    if not ids:
        raise ParameterError("split: no utterance ids given")
    return ids


def _split_label(split):
    return repr(split) if isinstance(split, str) else "asked"


def clean_signals(corpus, split="train"):
    """Load the clean utterances of a split.

    Parameters
    ----------
    corpus : str, Path or CorpusIndex
    split : {"train", "test", "all"} or iterable of str

    Returns
    -------
    list of (str, ndarray, int)
        ``(id, y, sample_rate)`` in id order, for every id of the split with a
        clean file, each at its file's own rate (rates may differ from file to file).

    Raises
    ------
    ParameterError
        If no clean file of the split exists, or if files are unreadable.
    """
    index = _as_index(corpus)
    wanted = split_ids(split)
    present = [utterance for utterance in wanted if utterance in index.clean]
    if not present:
        raise ParameterError(f"{index.root}: no clean files for the {_split_label(split)} split "
                             f"({_ranges(wanted)}); found clean: {_ranges(index.ids)}")
    return [(utterance, *read_audio(index.clean[utterance])) for utterance in present]


def _whole_db(value):
    """An SNR of the file names: a whole number of dB (5.5 was read as 5, True as 1)."""
    if not is_number(value) or not np.isfinite(value) or value != int(value):
        raise ValueError(value)
    return int(value)


def _as_set(values, name, convert):
    if values is None:
        return None
    if isinstance(values, (str, int)):
        values = [values]
    try:
        return {convert(value) for value in values}
    except (TypeError, ValueError):
        raise ParameterError(f"{name}={values!r}: expected a list of {name}"
                             f"{' in whole dB' if name == 'snrs' else ''}") from None


def select(corpus, split="test", noises=None, snrs=None):
    """The ``(id, noise, snr)`` keys of the noisy files matching a selection, sorted.

    Parameters are those of :func:`mixtures`; nothing is loaded. Missing clean
    files of the selected mixtures are an error.
    """
    index = _as_index(corpus)
    wanted = split_ids(split)
    noise_set = _as_set(noises, "noises", lambda value: str(value).strip().lower())
    snr_set = _as_set(snrs, "snrs", _whole_db)
    if not index.noisy:
        raise ParameterError(f"{index.root}: no noisy files (spNN_<noise>_sn<snr>.wav) found")
    if noise_set is not None:
        unknown = sorted(noise_set - set(index.noises))
        if unknown:
            raise ParameterError(f"{index.root}: no noisy files for noise {', '.join(map(repr, unknown))}; "
                                 f"found: {', '.join(index.noises)}")
    if snr_set is not None:
        unknown = sorted(snr_set - set(index.snrs))
        if unknown:
            raise ParameterError(f"{index.root}: no noisy files at SNR {', '.join(map(str, unknown))} dB; "
                                 f"found: {', '.join(map(str, index.snrs))} dB")
    wanted_set = set(wanted)
    keys = sorted(key for key in index.noisy
                  if key[0] in wanted_set
                  and (noise_set is None or key[1] in noise_set)
                  and (snr_set is None or key[2] in snr_set))
    if not keys:
        noisy_ids = sorted({utterance for utterance, _, _ in index.noisy})
        raise ParameterError(f"{index.root}: no noisy files for the {_split_label(split)} split "
                             f"({_ranges(wanted)}) with the noises and SNRs asked; "
                             f"found noisy: {_ranges(noisy_ids)}")
    orphans = sorted({key[0] for key in keys if key[0] not in index.clean})
    if orphans:
        example = index.noisy[next(key for key in keys if key[0] == orphans[0])]
        raise ParameterError(f"{example}: no clean file {clean_name(orphans[0])} below {index.root} "
                             f"(clean files missing for {_ranges(orphans)})")
    return keys


def iter_mixtures(corpus, split="test", noises=None, snrs=None):
    """Like :func:`mixtures`, loading one mixture at a time.

    The selection is checked before the first item is produced; file errors
    surface when the file is reached.
    """
    index = _as_index(corpus)
    keys = select(index, split, noises, snrs)
    return _load(index, keys)


def _load(index, keys):
    """The mixtures, each file downmixed once its channels are checked as a pair's are."""
    cache = {}
    for utterance, noise, snr in keys:
        if utterance not in cache:
            clean, clean_rate = read_audio(index.clean[utterance], downmix=False)
            cache = {utterance: (clean, clean_rate, _downmix(clean))}
        clean, clean_rate, clean_mono = cache[utterance]
        path = index.noisy[utterance, noise, snr]
        noisy, noisy_rate = read_audio(path, downmix=False)
        check_aligned(path, noisy, noisy_rate, index.clean[utterance], clean, clean_rate)
        check_channels(path, noisy, index.clean[utterance], clean)
        noisy = _downmix(noisy)
        yield Mixture(utterance, noise, snr, clean_mono, noisy, noisy - clean_mono, noisy_rate, path)


def _downmix(y):
    """A signal's channels averaged, as :func:`sepsti.corpora.audio.read_audio` downmixes (mono as it is)."""
    return y.mean(axis=1) if y.ndim == 2 else y


def mixtures(corpus, split="test", noises=None, snrs=None):
    """Load the noisy files of a split with their clean references.

    Parameters
    ----------
    corpus : str, Path or CorpusIndex
    split : {"train", "test", "all"} or iterable of str
    noises : str or iterable of str, optional
        Noise types to keep (all when None).
    snrs : int or iterable of int, optional
        SNRs in dB to keep (all when None).

    Returns
    -------
    list of Mixture
        Sorted by id, noise and SNR.

    Raises
    ------
    ParameterError
        If nothing matches (the message names what was asked and what exists),
        a noisy file has no clean file, a file is unreadable, or a noisy file's
        sample rate or length differs from its clean file's, or its number of channels from a
        multichannel clean file's. Multichannel files are downmixed by the mean.
    """
    return list(iter_mixtures(corpus, split, noises, snrs))
