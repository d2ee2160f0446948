"""Speech enhancement when the noise changes halfway: the tracked noise model against one global model.

The clean test sentences of a NOIZEUS-style corpus (sp21–sp30) are put back to back, without
added pauses, into one recording of about 28 s. Its first half is mixed with one noise and its
second half with another (the noise parts ``noisy − clean`` of the corpus's 0 dB files of that
type, concatenated), each half at its own SNR. Each recording is enhanced twice with the same
dictionary, prior scale and seed:

- ``tracked``: ``sepsti.denoise.denoise`` as ``sepsti enhance`` runs it (a noise model per
  segment, learned on the frames quietest relative to the minimum-statistics floor);
- ``global``: one noise dictionary and floor for the whole recording, learned
  (``sepsti.noise_model.learn_noise``) on its quietest 20 % of frames by total magnitude — the noise
  dictionary before tracking (``denoise(..., noise=...)``, so the noise predicted frame by frame,
  :mod:`sepsti.noise_power`, is there in both).

Both and the input are scored by :func:`sepsti.metrics.bss_eval` (SDR), :func:`sepsti.metrics.stoi`
and :func:`sepsti.metrics.pesq` against the clean recording. Prints one line per case and writes
``OUT/enhance_noise_change.json``. ``--quick``: the first :data:`QUICK_SENTENCES` sentences (about 8 s) and
the first two cases.

Usage::

    python recipes/benchmarks/enhance_noise_change.py [--corpus DIR] [--quick] [--out DIR]
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from _common import noizeus_corpus, recipe_parser, run_recipe, write_results  # noqa: E402

NAME = "enhance_noise_change"
#: (first noise, its SNR), (second noise, its SNR): same level, a noise that gets louder, one that gets quieter.
CASES = ((("car", 5), ("babble", 5)), (("train", 5), ("street", 5)), (("car", 15), ("babble", 0)),
         (("street", 10), ("train", 0)), (("babble", 0), ("car", 15)))
#: Test sentences put back to back in a ``--quick`` run.
QUICK_SENTENCES = 3


def main(argv=None):
    parser = recipe_parser(f"benchmarks/{NAME}", __doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None,
                        help="NOIZEUS-style folder (default: $SEPSTI_NOIZEUS or ../shared/data/noizeus)")
    args = parser.parse_args(argv)

    from sepsti import features
    from sepsti.corpora.noizeus import corpus_index, mixtures
    from sepsti.denoise import denoise
    from sepsti.noise_model import NOISE_FRACTION, learn_noise
    from sepsti.dictionary import load_dictionary, narrowband_dictionary_path
    from sepsti.metrics import bss_eval, pesq, stoi

    corpus = noizeus_corpus(args.corpus)
    dictionary = load_dictionary(narrowband_dictionary_path())
    rate = dictionary.sample_rate
    index = corpus_index(corpus)
    first_noise = CASES[0][0][0]
    sentences = mixtures(index, split="test", noises=[first_noise], snrs=[0])
    clean = np.concatenate([m.clean for m in (sentences[:QUICK_SENTENCES] if args.quick else sentences)])

    def noise_of(kind):
        return np.concatenate([m.noise_signal for m in mixtures(index, split="test", noises=[kind], snrs=[0])])

    rows = []
    for (first, snr_first), (second, snr_second) in (CASES[:2] if args.quick else CASES):
        half = len(clean) // 2
        noise = np.concatenate([noise_of(first)[:half], noise_of(second)[:len(clean) - half]])
        for part, snr in ((slice(0, half), snr_first), (slice(half, None), snr_second)):
            noise[part] *= np.sqrt(np.mean(clean[part] ** 2) / np.mean(noise[part] ** 2) / 10 ** (snr / 10))
        noisy = clean + noise
        V = features.magnitude(noisy)
        quietest = np.sort(np.argsort(V.sum(axis=0), kind="stable")[:int(np.ceil(NOISE_FRACTION * V.shape[1]))])
        one_model = learn_noise(lambda: iter((V[:, quietest],)), 5, seed=args.seed)
        learned = {"mask_atoms": dictionary.mask_atoms, "band_gains": dictionary.band_gains}
        estimates = {"input": noisy,
                     "global": denoise(noisy, dictionary.W, noise=one_model, seed=args.seed, **learned),
                     "tracked": denoise(noisy, dictionary.W, seed=args.seed, **learned)}
        row = {"first": [first, snr_first], "second": [second, snr_second], "seconds": len(clean) / rate}
        for name, estimate in estimates.items():
            row[name] = {"sdr": bss_eval(clean, noisy, estimate)["sdr"], "stoi": stoi(clean, estimate, rate),
                         "pesq": pesq(clean, estimate, rate)}
        rows.append(row)
        print(f"{first} {snr_first} dB -> {second} {snr_second} dB: " + "  ".join(
            f"{name} {row[name]['sdr']:.2f} dB / {row[name]['stoi']:.3f} / {row[name]['pesq']:.2f}"
            for name in estimates))
    write_results(args, {"corpus": str(corpus), "rank": dictionary.rank, "seed": args.seed,
                                   "load_average": os.getloadavg(), "results": rows})


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
