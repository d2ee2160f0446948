"""Regenerate ``tests/data/bss_eval_pinned.npz``: BSS_EVAL v3 scores pinned on three small cases.

Each case is a 1-second, 8 kHz triple (clean, noisy, speech estimate) stored as int16: a
synthetic utterance (``sepsti.corpora.synth``), a synthetic noise at 0, 5 or 10 dB, and an estimate
that keeps a filtered copy of the clean speech, part of the noise and a little artifact. The
scores are those of mir_eval's public ``bss_eval_sources`` (references ``[clean, noisy − clean]``,
estimates ``[speech, noisy − speech]``, no permutation), row 0. ``tests/test_metrics.py`` checks
that :func:`sepsti.metrics.bss_eval` gives them, so a move away from ``mir_eval.separation``
(removed in mir_eval 0.9) can be checked against the numbers of the implementation it replaces.

Run from the repository root: ``python tests/generate_bss_eval_data.py`` (needs mir_eval < 0.9).
"""

import json
import warnings
from pathlib import Path

import numpy as np

from sepsti.core.random import stream
from sepsti.corpora.synth import corpus_speakers, mix, synth_noise, synth_utterance

OUT = Path(__file__).resolve().parent / "data" / "bss_eval_pinned.npz"
CASES = (("white", 0), ("babble", 5), ("car", 10))
RATE = 8000


def _int16(x):
    return np.clip(np.round(x * 32768.0), -32768, 32767).astype(np.int16)


def main():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from mir_eval.separation import bss_eval_sources

    speaker = corpus_speakers(0)[4]
    arrays, scores = {}, []
    for number, (noise_type, snr) in enumerate(CASES):
        clean = synth_utterance(stream(0, 50, number), speaker)[:RATE]
        clean = 0.1 * clean / np.sqrt(np.mean(clean ** 2))
        noise = mix(clean, synth_noise(noise_type, RATE, stream(0, 51, number)), snr)
        artifact = 0.01 * stream(0, 52, number).standard_normal(RATE)
        speech = np.convolve(clean, [0.9, 0.05, -0.02])[:RATE] + 0.3 * noise + artifact
        clean, noisy, speech = _int16(clean), _int16(clean + noise), _int16(speech)
        arrays[f"case{number}"] = np.stack([clean, noisy, speech])
        c, n, s = (x / 32768.0 for x in (clean, noisy, speech))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            sdr, sir, sar, _ = bss_eval_sources(np.stack([c, n - c]), np.stack([s, n - s]),
                                                compute_permutation=False)
        scores.append({"noise": noise_type, "snr": snr, "sdr": float(sdr[0]), "sir": float(sir[0]),
                       "sar": float(sar[0])})
    OUT.parent.mkdir(exist_ok=True)
    np.savez_compressed(OUT, scores=np.array(json.dumps(scores)), **arrays)
    print(json.dumps(scores, indent=2))


if __name__ == "__main__":
    main()
