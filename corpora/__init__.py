"""Data for sepsti: audio reading, the NOIZEUS-style reader and the synthetic speech corpus.

``corpora`` never imports ``sepsti``.
"""

from corpora.frostt import read_tns, write_tns
from corpora.tensors import FACEBOOK_SHAPE, prior_rate_for_count, simulate_dense, simulate_sparse
from corpora.audio import AudioInfo, audio_info, read_audio
from corpora.noizeus import (ALL_IDS, TEST_IDS, TRAIN_IDS, CorpusIndex, Mixture, clean_signals,
                             corpus_index, iter_mixtures, mixtures, select, split_ids)
from corpora.synth import NOISE_TYPES, corpus_speakers, synth_noise, synth_utterance, write_corpus

__all__ = ["AudioInfo", "audio_info", "read_audio",
           "ALL_IDS", "TRAIN_IDS", "TEST_IDS", "CorpusIndex", "Mixture", "corpus_index", "split_ids",
           "clean_signals", "select", "mixtures", "iter_mixtures",
           "NOISE_TYPES", "corpus_speakers", "synth_noise", "synth_utterance", "write_corpus"]
__all__ += ["read_tns", "write_tns", "FACEBOOK_SHAPE", "prior_rate_for_count", "simulate_dense", "simulate_sparse"]

from corpora.raman import RamanData, hotspot_map, simulate_raman, voigt_spectrum  # noqa: E402

__all__ += ["RamanData", "hotspot_map", "simulate_raman", "voigt_spectrum"]
