"""Data for sepsti: audio reading, the NOIZEUS-style reader, clean/noisy pairs, wideband manifests and the synthetic
speech corpus.

``corpora`` never imports ``sepsti``.

Names are imported from their submodules on first use, so importing the package is cheap.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "audio": ['AudioInfo', 'audio_files', 'audio_info', 'check_aligned', 'read_audio'],
        "frostt": ['read_tns', 'write_tns'],
        "noizeus": [
            'ALL_IDS',
            'CorpusIndex',
            'Mixture',
            'TEST_IDS',
            'TRAIN_IDS',
            'clean_signals',
            'corpus_index',
            'iter_mixtures',
            'mixtures',
            'select',
            'split_ids',
        ],
        "pairs": ['Pair', 'PairPaths', 'load_pair', 'pair_index'],
        "raman": ['RamanData', 'hotspot_map', 'simulate_raman', 'voigt_spectrum'],
        "synth": ['NOISE_TYPES', 'corpus_speakers', 'synth_noise', 'synth_utterance', 'write_corpus'],
        "tensors": ['FACEBOOK_SHAPE', 'prior_rate_for_count', 'simulate_dense', 'simulate_sparse'],
        "wideband": ['EXCLUDED_FLAGS', 'HIGHPASS_HZ', 'TRAIN_RATE', 'Utterance', 'is_wideband_corpus', 'read_manifest',
                     'split_of'],
    },
)
