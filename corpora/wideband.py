"""Wideband clean-speech folders described by a ``manifest.json`` (LibriSpeech, LJ Speech).

Layout
------
A folder holds audio files anywhere below it and a ``manifest.json``: a list of entries
``{"file", "rate", "duration_s", "speaker", "gender", "flags", ...}`` with ``file`` relative to
the folder and ``flags`` advisory quality notes (``lf_rumble_below_100hz``,
``low_dynamic_range(noisy?)``, ``band_limited``, ``clipped``).

Conventions
-----------
Signals are float64 arrays ``(n_samples,)`` as :func:`sepsti.corpora.audio.read_audio`
returns them. The split is by speaker, so no speaker is in two splits: the speakers of the
corpus rate (:data:`TRAIN_RATE`, LibriSpeech) sorted by id, position ``i``: ``test`` when
``i % 5 == 0``, ``validation`` when ``i % 10 == 1`` (for choices such as the rank), ``train``
otherwise. Speakers at another rate (LJ Speech, 22.05 kHz, one reader) are test material
only. Files carrying one of :data:`EXCLUDED_FLAGS` are left out of every split, and
:func:`clean_signals` high-passes what it returns at :data:`HIGHPASS_HZ` (why: docs/wideband.md).
A manifest names each file once, by a path inside the folder (a symbolic link inside may point
elsewhere).

The split is defined on the corpus as distributed: 201 LibriSpeech speakers, 140 ``train``,
20 ``validation``, 41 ``test``, and LJ Speech in ``test`` (usable files: 108, 19, 34 + 32).
Positions move when a speaker is added or removed (adding one moves 97 of the 202), so a
manifest with other LibriSpeech speakers splits them differently from the split the shipped
16 kHz dictionary was trained on: its ``test`` split can hold that dictionary's training
speakers and must not score it.
:func:`split_of` warns when the speakers are not the distributed ones
(:data:`DISTRIBUTED_SPEAKERS_SHA256`).
"""

import hashlib
import json
import math
import warnings
from pathlib import Path, PurePath
from typing import NamedTuple

from sepsti.core.errors import ParameterError
from sepsti.core.io import input_path
from sepsti.corpora.audio import read_audio

__all__ = ["MANIFEST", "TRAIN_RATE", "EXCLUDED_FLAGS", "HIGHPASS_HZ", "SPLITS", "DISTRIBUTED_SPEAKERS_SHA256",
           "Utterance", "is_wideband_corpus", "read_manifest", "split_of", "select", "clean_signals", "highpass"]

MANIFEST = "manifest.json"
#: The rate of the training speakers (LibriSpeech).
TRAIN_RATE = 16000
#: Files left out: noisy-looking (5–95 % frame-energy range 26 dB median against 42 dB, three
#: times the share above 4 kHz: hiss a speech dictionary must not learn), one speaker whose
#: band stops at 6.75 kHz, one clipped file.
EXCLUDED_FLAGS = ("low_dynamic_range(noisy?)", "band_limited", "clipped")
#: High-pass corner (Hz): removes the low-frequency rumble some recordings carry below 100 Hz
#: (up to 99 % of a file's energy); voiced speech starts above it.
HIGHPASS_HZ = 80.0
SPLITS = ("train", "validation", "test")
#: SHA-256 of the distributed corpus's 201 LibriSpeech speaker ids in the split's order, one a line
#: (UTF-8, no final newline): the speakers whose split the shipped 16 kHz dictionary was trained on.
DISTRIBUTED_SPEAKERS_SHA256 = "031a5e4b3631c2c1822a8808f98ef41d291616e1f4d5864274a348fbaba0da1a"


class Utterance(NamedTuple):
    """One manifest entry.

    Attributes
    ----------
    path : Path
    speaker : str
    rate : int
        Sample rate (Hz) the manifest states.
    duration : float
        Seconds.
    flags : tuple of str
    """

    path: Path
    speaker: str
    rate: int
    duration: float
    flags: tuple


def is_wideband_corpus(folder):
    """Whether ``folder`` is a manifest-described wideband corpus (ParameterError if it is not a path)."""
    return (input_path("folder", folder) / MANIFEST).is_file()


def read_manifest(folder):
    """Read and check ``folder/manifest.json``.

    Returns
    -------
    list of Utterance
        In manifest order.

    Raises
    ------
    ParameterError
        A ``folder`` that is not a path, a missing or unparsable manifest, an entry without ``file``, ``rate``,
        ``speaker``, a field of another kind (``null``, a number for a path), a rate below 1 Hz or not a whole
        number of Hz (``16000.5``, ``true``, ``Infinity``), a duration that is negative or not finite, a
        ``file`` that is not a path inside the folder, or a file listed twice; the message names the field.
    """
    folder = input_path("folder", folder)
    path = folder / MANIFEST
    if not path.is_file():
        raise ParameterError(f"{folder}: no {MANIFEST} (a wideband corpus lists its files there)")
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ParameterError(f"{path}: not a readable manifest ({error})") from None
    if not isinstance(entries, list):
        raise ParameterError(f"{path}: expected a list of entries, got {type(entries).__name__}")
    utterances, listed = [], {}
    for number, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ParameterError(f"{path}: entry {number} is a {type(entry).__name__}; each entry is an object "
                                 "with 'file', 'rate' and 'speaker'")
        utterances.append(Utterance(folder / _field(path, number, entry, "file"),
                                    _field(path, number, entry, "speaker"), _field(path, number, entry, "rate"),
                                    _field(path, number, entry, "duration_s"), _field(path, number, entry, "flags")))
        name = PurePath(entry["file"])
        if not name.parts or name.is_absolute() or ".." in name.parts:
            raise ParameterError(f"{path}: entry {number} has 'file' {json.dumps(entry['file'])}; expected a path "
                                 f"inside {folder}, relative to it")
        real = utterances[-1].path.resolve()
        if real in listed:
            raise ParameterError(f"{path}: entry {number} ({entry['file']}) lists the file of entry {listed[real]} "
                                 "again; list each file once")
        listed[real] = number
    return utterances


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _text(value):
    return value if isinstance(value, str) and value else None


def _speaker(value):
    return str(value) if _text(value) or isinstance(value, int) and not isinstance(value, bool) else None


def _whole_hz(value):
    return int(value) if _is_number(value) and value == int(value) and value >= 1 else None


def _seconds(value):
    return float(value) if _is_number(value) and value >= 0 else None


def _names(value):
    return tuple(value) if isinstance(value, list) and all(map(_text, value)) else None


#: Each entry field: (required, what it must be, its reader: the value, or None for one it refuses).
_FIELDS = {"file": (True, "a non-empty path", _text), "speaker": (True, "a name", _speaker),
           "rate": (True, "a whole number of Hz, at least 1", _whole_hz),
           "duration_s": (False, "a finite number of seconds, at least 0", _seconds),
           "flags": (False, "a list of names", _names)}
_ABSENT = {"duration_s": 0.0, "flags": ()}


def _field(path, number, entry, name):
    """One field of manifest entry ``number``, checked; a one-line error naming the field otherwise."""
    required, expected, read = _FIELDS[name]
    if name not in entry:
        if required:
            raise ParameterError(f"{path}: entry {number} lacks {name!r}; each entry needs 'file', 'rate' and "
                                 "'speaker'")
        return _ABSENT[name]
    value = read(entry[name])
    if value is None:
        raise ParameterError(f"{path}: entry {number} has {name!r} {json.dumps(entry[name])}; expected {expected}")
    return value


def split_of(utterances):
    """The split of every speaker (see the module conventions).

    Returns
    -------
    dict of str to str
        Speaker id to ``"train"``, ``"validation"`` or ``"test"``.

    Warns
    -----
    UserWarning
        When the :data:`TRAIN_RATE` speakers are not the distributed corpus's: the splits are not
        those the shipped 16 kHz dictionary was trained on.
    """
    corpus_speakers = sorted({u.speaker for u in utterances if u.rate == TRAIN_RATE},
                             key=lambda s: (not s.isdigit(), int(s) if s.isdigit() else 0, s))
    if hashlib.sha256("\n".join(corpus_speakers).encode()).hexdigest() != DISTRIBUTED_SPEAKERS_SHA256:
        warnings.warn(f"wideband manifest: its {len(corpus_speakers)} LibriSpeech speakers are not the distributed "
                      "corpus's 201, so its splits are not those the shipped 16 kHz dictionary was trained on; do "
                      "not score that dictionary on its 'test' split", UserWarning, stacklevel=2)
    splits = {}
    for position, speaker in enumerate(corpus_speakers):
        splits[speaker] = "test" if position % 5 == 0 else "validation" if position % 10 == 1 else "train"
    for u in utterances:
        splits.setdefault(u.speaker, "test")
    return splits


def select(folder, split="train"):
    """The usable utterances of a split: no excluded flag, in manifest order.

    Parameters
    ----------
    folder : str or Path
    split : {"train", "validation", "test"}

    Returns
    -------
    list of Utterance

    Raises
    ------
    ParameterError
        An unknown split, or a split with no usable file.
    """
    if split not in SPLITS:
        raise ParameterError(f"split={split!r}: expected one of {', '.join(SPLITS)}")
    utterances = read_manifest(folder)
    splits = split_of(utterances)
    chosen = [u for u in utterances if splits[u.speaker] == split and not set(u.flags) & set(EXCLUDED_FLAGS)]
    if not chosen:
        raise ParameterError(f"{folder}: no usable files in the {split} split")
    return chosen


def highpass(y, sample_rate):
    """High-pass at :data:`HIGHPASS_HZ`: a 2nd-order Butterworth run forward and backward (zero phase)."""
    from scipy.signal import butter, sosfiltfilt

    sos = butter(2, HIGHPASS_HZ, btype="highpass", fs=sample_rate, output="sos")
    return sosfiltfilt(sos, y) if len(y) > 15 else y


def clean_signals(folder, split="train"):
    """Load the clean utterances of a split, high-passed at :data:`HIGHPASS_HZ`.

    Returns
    -------
    list of (str, ndarray, int)
        ``(id, y, sample_rate)``, the id being the file name without extension.

    Raises
    ------
    ParameterError
        As :func:`select`, and a file whose rate differs from the manifest's.
    """
    signals = []
    for utterance in select(folder, split):
        y, sample_rate = read_audio(utterance.path)
        if sample_rate != utterance.rate:
            raise ParameterError(f"{utterance.path}: sample rate {sample_rate} Hz, the manifest says "
                                 f"{utterance.rate} Hz")
        signals.append((utterance.path.stem, highpass(y, sample_rate), sample_rate))
    return signals
