"""The clean train split of a corpus, as the matrix a speech dictionary and its rank are learned on.

The corpus is a NOIZEUS-style folder (train split sp01–sp20, modelled at 8 kHz) or a wideband
folder described by a ``manifest.json`` (:mod:`sepsti.corpora.wideband`: its train speakers,
flagged files left out, high-passed at 80 Hz, modelled at 16 kHz). Each clean file is resampled to
the rate and framed with the STFT scaled to it (:func:`sepsti.features.framing_for_rate`: 64 ms
windows, 32 ms hop); ``sepsti train`` and ``sepsti select-rank`` read it through here.
"""

from typing import Callable, NamedTuple

import numpy as np

__all__ = ["TrainSplit", "train_split"]


class TrainSplit(NamedTuple):
    """A corpus's clean train split, before any of it is read.

    Attributes
    ----------
    corpus : path
        The corpus folder (named in messages).
    paths : list of Path
        The clean files.
    framing : sepsti.features.Framing
        The STFT at the rate the split is modelled at.
    load : callable
        ``load()`` yields ``(utterance, samples, sample_rate)`` per file, at the file's own rate.
    """

    corpus: object
    paths: list
    framing: object
    load: Callable

    def inputs(self):
        """Every file the split is read from, which no output may replace: the clean files, and a wideband
        corpus's manifest."""
        from pathlib import Path

        from sepsti.corpora import wideband

        manifest = [Path(self.corpus) / wideband.MANIFEST] if wideband.is_wideband_corpus(self.corpus) else []
        return [*self.paths, *manifest]

    def file_rates(self):
        """The files' own rates (Hz), from their headers, in the order of ``paths``."""
        from sepsti.corpora.audio import audio_info

        return [audio_info(path).sample_rate for path in self.paths]

    def matrix(self, *, context=0, frames=None):
        """The STFT magnitudes of the split's files, concatenated (int16 scale).

        Parameters
        ----------
        context : int
            Frames on each side of a training frame stacked with it (:func:`sepsti.features.training_matrix`).
        frames : int, optional
            Keep this many frames spread evenly over the matrix (the first and the last kept, the first
            alone when it is 1; all of them if it has no more): a matrix too large to sample whole,
            modelled on a part of its frames.

        Returns
        -------
        X : ndarray, shape (n_bins · (2 · context + 1), n_frames)
        utterances : list of str
            The files it was made of, in order.

        Raises
        ------
        ParameterError
            ``frames`` not a positive integer or ``context`` not a non-negative one, a file whose rate
            :func:`sepsti.audio.validate_sample_rate` refuses (all found before any file is read), an
            unreadable or too short file, or a silent split.
        """
        from sepsti import features
        from sepsti.audio import resample, validate_frames, validate_sample_rate
        from sepsti.core.checks import integer_at_least

        integer_at_least("context", context, 0)  # before any file is read, not after all of them
        if frames is not None:
            integer_at_least("frames", frames, 1)

        rate, n_fft = self.framing.sample_rate, self.framing.n_fft
        for path, file_rate in zip(self.paths, self.file_rates()):  # every header before any file is read
            validate_sample_rate(file_rate, rate, name=str(path))
        signals, utterances = [], []
        for utterance, y, sample_rate in self.load():
            y = resample(y, sample_rate, rate)
            signals.append(validate_frames(y, rate, name=f"{self.corpus}: {utterance}", n_fft=n_fft))
            utterances.append(utterance)
        X = features.training_matrix(signals, framing=self.framing, context=context)
        if not np.any(X):
            from sepsti.core.errors import ParameterError

            raise ParameterError(f"{self.corpus}: the {len(utterances)} files of the train split are silent "
                                 f"(every sample 0): nothing to learn")
        if frames is not None and frames < X.shape[1]:
            X = X[:, np.unique(np.linspace(0, X.shape[1] - 1, frames).round().astype(np.int64))]
        return X, utterances


def train_split(corpus, rate=None):
    """The clean train split of ``corpus``, modelled at ``rate`` Hz (default 16 kHz for wideband folders, else 8 kHz).

    Returns
    -------
    TrainSplit
    """
    import functools

    from sepsti import features
    from sepsti.corpora import wideband

    if wideband.is_wideband_corpus(corpus):
        paths = [utterance.path for utterance in wideband.select(corpus, "train")]
        rate = wideband.TRAIN_RATE if rate is None else rate
        load = functools.partial(wideband.clean_signals, corpus, "train")
    else:
        from sepsti.corpora.noizeus import TRAIN_IDS, clean_signals, corpus_index

        index = corpus_index(corpus)
        paths = [index.clean[utterance] for utterance in TRAIN_IDS if utterance in index.clean]
        rate = features.SAMPLE_RATE if rate is None else rate
        load = functools.partial(clean_signals, index, split="train")
    return TrainSplit(corpus, paths, features.framing_for_rate(rate), load)
