"""Mains hum: the enhancer with its hum stage, without it, and on the same recordings without the hum.

The NOIZEUS-style corpus's test mixtures at 5 and 15 dB (and, with ``--wideband DIR``, LibriSpeech
validation utterances at 16 kHz in the wideband benchmark's car noise and babble at 5 and 10 dB, at
most 8 s) get a hum added, of one of two kinds:

- ``hum50``: 50 Hz ± 0.1 Hz and its first seven multiples, the k-th at 1 / k, the whole 0.5 times the
  speech's RMS in amplitude at the fundamental (7 dB below the speech);
- ``buzz60``: 60 Hz ± 0.1 Hz and sixteen multiples at 0.21 / k of the speech's RMS (a rectifier's buzz),
  its frequency wandering by ±0.03 Hz over 20 s.

Each recording is enhanced as ``sepsti enhance`` does (:func:`sepsti.commands.evaluate.enhance_signal`)
with the hum stage (:mod:`sepsti.hum`), without it (``MIN_LINES`` set beyond ``LOW_HARMONICS``, so that
no hum is ever found), and the same recording without its hum with the stage; SDR (BSS_EVAL, references
the clean speech and the rest of the recording) and STOI against the clean speech, means per set, SNR
and kind.

Usage::

    python recipes/benchmarks/enhance_hum.py [--corpus DIR] [--wideband ../shared/data/wideband] [--out DIR]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from _common import non_negative_int, noizeus_corpus, recipe_parser, run_recipe, write_results  # noqa: E402
from enhance_wideband import LEVEL_DB, noise_of_kind, wideband_folder  # noqa: E402

NAME = "enhance_hum"
KINDS = ("hum50", "buzz60")
METHODS = ("input", "without the stage", "with the stage", "no hum")


def make_hum(kind, n, rate, level, rng):
    """``n`` samples of a hum of ``kind`` at ``rate``, ``level`` the speech's RMS."""
    t = np.arange(n) / rate
    if kind == "hum50":
        fundamental, multiples, scale, wander = 50.0 + rng.uniform(-0.1, 0.1), range(1, 8), 0.5, 0.0
    else:
        fundamental, multiples, scale, wander = 60.0 + rng.uniform(-0.1, 0.1), range(1, 17), 0.21, 0.03
    phase = 2 * np.pi * np.cumsum(fundamental + wander * np.sin(2 * np.pi * t / 20 + rng.uniform(0, 6))) / rate
    return level * scale * sum(np.sin(k * phase + rng.uniform(0, 6)) / k for k in multiples)


def score_recording(clean, noisy, rate, kind, seed):
    """SDR and STOI of every method on one recording with a hum of ``kind``."""
    import sepsti.hum
    from sepsti.bandwidth import dictionary_path_for_rate
    from sepsti.commands.evaluate import enhance_signal
    from sepsti.dictionary import load_dictionary
    from sepsti.metrics import bss_eval, stoi

    dictionary = load_dictionary(dictionary_path_for_rate(rate))
    hummed = noisy + make_hum(kind, len(noisy), rate, np.std(clean), np.random.default_rng(seed))
    shipped = sepsti.hum.MIN_LINES
    try:
        sepsti.hum.MIN_LINES = sepsti.hum.LOW_HARMONICS + 1
        without = enhance_signal(hummed, rate, dictionary)
    finally:
        sepsti.hum.MIN_LINES = shipped
    outputs = {"input": (hummed, hummed), "without the stage": (hummed, without),
               "with the stage": (hummed, enhance_signal(hummed, rate, dictionary)),
               "no hum": (noisy, enhance_signal(noisy, rate, dictionary))}
    return {method: {"sdr": bss_eval(clean, mixture, output)["sdr"], "stoi": stoi(clean, output, rate)}
            for method, (mixture, output) in outputs.items()}


def recordings(corpus, wideband, quick):
    """``(set, snr, name, clean, noisy, rate)`` of the NOIZEUS test mixtures and the wideband utterances."""
    from sepsti.corpora.noizeus import mixtures

    for mixture in mixtures(corpus, snrs=[5, 15]):
        if not quick or mixture.utterance in ("sp21", "sp22"):
            name = f"{mixture.utterance}_{mixture.noise}"
            yield "noizeus", int(mixture.snr), name, mixture.clean, mixture.noisy, mixture.sample_rate
    if wideband is None:
        return
    from _recordings import at_level, snr_gain

    from sepsti.audio import resample
    from sepsti.corpora import wideband as corpus_reader

    libri = [s for s in corpus_reader.clean_signals(wideband, "validation") if s[2] == corpus_reader.TRAIN_RATE]
    for number, (utterance, y, rate) in enumerate(libri[:2 if quick else 12]):
        clean = resample(y, rate, 16000)[:8 * 16000]
        clean = at_level(clean, LEVEL_DB)
        pool = [s for s in libri if s[0] != utterance]
        for k, kind in enumerate(("car", "babble")):
            noise = noise_of_kind(kind, len(clean), 16000, np.random.default_rng([number, k]), pool)
            for snr in (5, 10):
                scaled = noise * snr_gain(clean, noise, snr)
                yield "wideband", snr, f"{utterance}_{kind}", clean, clean + scaled, 16000


def main():
    parser = recipe_parser(f"benchmarks/{NAME}", __doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None,
                        help="NOIZEUS-style corpus (default: $SEPSTI_NOIZEUS or ../shared/data/noizeus)")
    parser.add_argument("--wideband", type=wideband_folder, default=None,
                        help="a wideband corpus: adds 16 kHz recordings")
    parser.add_argument("--jobs", type=non_negative_int, default=0, help="worker processes (0: one per core)")
    args = parser.parse_args()
    corpus = noizeus_corpus(args.corpus)
    from sepsti.workers import Workers, resolve_jobs

    items = [(*item, kind, seed) for seed, (item, kind) in enumerate(
        (item, kind) for item in recordings(corpus, args.wideband, args.quick) for kind in KINDS)]
    rows = []
    with Workers(resolve_jobs(args.jobs)) as pool:
        tasks = ((clean, noisy, rate, kind, seed) for _, _, _, clean, noisy, rate, kind, seed in items)
        for (group, snr, name, *_, kind, _), scores in zip(items, pool.map(score_recording, tasks)):
            rows.append({"set": group, "snr": snr, "recording": name, "kind": kind, **scores})
    summary = {}
    print(f"{'set':<9}{'SNR':>4} {'hum':<7}" + "".join(f"{m:>20}" for m in METHODS) + "   (SDR dB / STOI)")
    for group, snr, kind in sorted({(r["set"], r["snr"], r["kind"]) for r in rows}):
        chosen = [r for r in rows if (r["set"], r["snr"], r["kind"]) == (group, snr, kind)]
        means = {m: {k: float(np.mean([r[m][k] for r in chosen])) for k in ("sdr", "stoi")} for m in METHODS}
        summary[f"{group} {snr} {kind}"] = {"count": len(chosen), **means}
        print(f"{group:<9}{snr:>4} {kind:<7}" + "".join(f"{means[m]['sdr']:11.2f} / {means[m]['stoi']:.3f}"
                                                      for m in METHODS))
    write_results(args, {"corpus": str(corpus), "wideband": None if args.wideband is None else
                                   str(args.wideband), "results": rows, "summary": summary})


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
