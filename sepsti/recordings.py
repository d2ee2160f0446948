"""What ``sepsti evaluate`` and the peer benchmark enhance and score, and with which speech dictionary.

The recordings are the test mixtures of a NOIZEUS-style corpus (:mod:`sepsti.corpora.noizeus`), or
noisy files paired by name with clean ones (:mod:`sepsti.corpora.pairs`), whose names may carry the
sentence, noise and SNR labels a corpus has (``names``). Each is enhanced with the dictionary
``sepsti enhance`` picks for its rate (:func:`sepsti.bandwidth.dictionary_path_for_rate`) unless one
is given.
"""

from pathlib import Path
from typing import Callable, NamedTuple

__all__ = ["Recordings", "NAME_GROUPS", "find_recordings", "Dictionaries"]


class Recordings(NamedTuple):
    """What is scored: the items, how one is read, and what names its result row."""

    items: list
    load: Callable       # item -> a recording with ``clean``, ``noisy``, ``sample_rate``, ``path``
    label: Callable      # recording -> the fields that name its row
    inputs: list         # every file read: no output may be one of them
    corpus: object       # the JSON summary's "corpus"
    title: str           # the plot's title, before the counts
    noun: str            # what one item is ("mixtures", "pairs")
    replicates: str      # the intervals' replicates


#: The named groups a ``names`` pattern of :func:`find_recordings` may hold.
NAME_GROUPS = ("sentence", "noise", "snr")


def find_recordings(corpus=None, clean=None, noisy=None, noises=None, snrs=None, names=None):
    """The test mixtures of a NOIZEUS-style ``corpus``, or the ``noisy`` files paired by name with ``clean`` ones.

    Parameters
    ----------
    corpus : str or Path, optional
        A NOIZEUS-style folder (:mod:`sepsti.corpora.noizeus`); its test split, loaded.
    clean, noisy : str or Path, optional
        Two folders of recordings paired by name (:mod:`sepsti.corpora.pairs`), instead of ``corpus``;
        each pair is read when ``load`` is called.
    noises, snrs : list, optional
        Noise types and SNRs to keep (``corpus`` only).
    names : str, optional
        Pairs only: a regular expression that every pair's name (the file name without its extension)
        matches whole, with named groups among :data:`NAME_GROUPS`: ``sentence`` (mixtures of one
        sentence are one replicate of the intervals), ``noise`` and ``snr`` (an integer, dB) label the
        rows as a corpus's are, so that the scores are given per SNR.

    Returns
    -------
    Recordings

    Raises
    ------
    ParameterError
        Neither or both of ``corpus`` and the pair of folders, one folder of the pair, ``noises`` or
        ``snrs`` with pairs, ``names`` with a corpus, a ``names`` pattern that is not a regular
        expression, has other groups or fails to match a name, and what the readers refuse.
    """
    from sepsti.core.errors import ParameterError

    paired = clean is not None or noisy is not None
    if paired == (corpus is not None) or (clean is None) != (noisy is None):
        raise ParameterError("give --corpus (a NOIZEUS-style corpus), or --clean and --noisy (two folders of "
                             "recordings paired by name)")
    if paired:
        if noises is not None or snrs is not None:
            raise ParameterError("--noise and --snr select from a --corpus's mixtures; pairs carry no such labels "
                                 "(--names reads them from the file names)")
        from sepsti.corpora.pairs import load_pair, pair_index

        pattern = None if names is None else _names_pattern(names)
        paths = pair_index(clean, noisy)
        labels = {pair.name: _name_labels(pair, pattern) for pair in paths}
        return Recordings(paths, load_pair, lambda pair: labels[pair.name],
                          [path for pair in paths for path in (pair.clean, pair.noisy)],
                          {"clean": str(Path(clean)), "noisy": str(Path(noisy))},
                          Path(noisy).resolve().name, "pairs",
                          "sentences" if pattern is not None and "sentence" in pattern.groupindex else "files")
    if names is not None:
        raise ParameterError("--names reads labels from the names of --clean/--noisy pairs; a --corpus has its own")
    from sepsti.corpora.noizeus import corpus_index, mixtures

    index = corpus_index(corpus)
    return Recordings(mixtures(index, split="test", noises=noises, snrs=snrs), lambda mixture: mixture,
                      lambda mixture: {"file": mixture.utterance, "noise": mixture.noise, "snr": int(mixture.snr)},
                      [*index.clean.values(), *index.noisy.values()], str(Path(corpus)),
                      Path(corpus).resolve().name, "mixtures", "sentences")


def _names_pattern(names):
    """``--names`` compiled, its groups checked."""
    import re

    from sepsti.core.errors import ParameterError

    try:
        pattern = re.compile(names)
    except re.error as error:
        raise ParameterError(f"--names {names!r}: not a regular expression ({error})") from None
    unknown = sorted(set(pattern.groupindex) - set(NAME_GROUPS))
    if unknown:
        raise ParameterError(f"--names: unknown group {unknown[0]!r}; use (?P<sentence>...), (?P<noise>...), "
                             "(?P<snr>...)")
    return pattern


def _name_labels(pair, pattern):
    """The row labels of a pair: its name, or what ``pattern`` reads from it."""
    from sepsti.core.errors import ParameterError

    if pattern is None:
        return {"file": pair.name}
    match = pattern.fullmatch(pair.name)
    if match is None:
        raise ParameterError(f"{pair.noisy}: its name {pair.name!r} does not match --names {pattern.pattern!r}")
    parts = match.groupdict()
    labels = {"file": parts.get("sentence") or pair.name}
    if labels["file"] != pair.name:
        labels["name"] = pair.name
    if parts.get("noise"):
        labels["noise"] = parts["noise"].lower()
    if "snr" in pattern.groupindex and parts["snr"] is None:
        raise ParameterError(f"{pair.noisy}: --names {pattern.pattern!r} reads no SNR from its name {pair.name!r}; "
                             "the table groups by SNR, so every name must give one")
    if parts.get("snr") is not None:
        try:
            labels["snr"] = int(parts["snr"])
        except ValueError:
            raise ParameterError(f"{pair.noisy}: --names reads the SNR {parts['snr']!r}, not an integer") from None
    return labels


class Dictionaries:
    """The speech dictionary for each recording: ``path`` for all, or the one ``enhance`` picks for its rate.

    ``used`` maps each path loaded to its :class:`sepsti.dictionary.Dictionary`; a given ``path`` is
    loaded (and checked) at once.
    """

    def __init__(self, path=None):
        self.path = None if path is None else Path(path)
        self.used = {}
        if self.path is not None:
            self.for_rate(None)

    def for_rate(self, sample_rate):
        """The dictionary for a recording at ``sample_rate`` Hz, loaded once."""
        from sepsti.bandwidth import dictionary_path_for_rate
        from sepsti.dictionary import load_dictionary

        path = self.path if self.path is not None else dictionary_path_for_rate(sample_rate)
        if path not in self.used:
            self.used[path] = load_dictionary(path)
        return self.used[path]

    def describe(self):
        """``[{"path", "sample_rate", "rank"}]`` of the dictionaries used, for a JSON summary."""
        return [{"path": str(path), "sample_rate": used.sample_rate, "rank": used.rank}
                for path, used in self.used.items()]
