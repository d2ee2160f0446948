"""Short pieces of continuous speech: is the enhanced piece worse than the input?

Pieces of several lengths are cut from the middle of the speech of each test mixture of a
NOIZEUS-style corpus (sp21–sp30, every noise type and SNR): the centre of the span where the clean
speech's 100 ms energy exceeds a tenth of its peak, so a piece holds speech throughout and no
pause. Each piece is enhanced by :func:`sepsti.denoise.denoise` with the shipped 8 kHz dictionary
and scored by :func:`sepsti.metrics.bss_eval` against the cut clean speech; the whole mixtures are
scored too. With ``--no-limit`` the shortest-file limit (:data:`sepsti.denoise.SHORTEST_SECONDS`)
is lifted, which measures what the limit guards against; without it, pieces below the limit
come back unchanged (gain 0).

Prints the SDR gain over the input per length (mean, pieces worse than the input, worst, mean
at the highest SNR) and writes ``OUT/enhance_short_pieces.json``.

Usage::

    python recipes/benchmarks/enhance_short_pieces.py [--corpus DIR] [--lengths 0.65,1,1.5,2] [--no-limit] [--out DIR]
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from _common import default_corpus, recipe_parser, write_results  # noqa: E402

NAME = "enhance_short_pieces"


def speech_centre(clean, rate):
    """Middle sample of the span where the clean speech's 100 ms energy exceeds a tenth of its peak."""
    energy = np.convolve(clean ** 2, np.ones(int(0.1 * rate)), "same")
    active = np.flatnonzero(energy > 0.1 * energy.max())
    return (active[0] + active[-1]) // 2


def main(argv=None):
    parser = recipe_parser(NAME, __doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None,
                        help="NOIZEUS-style folder (default: ../shared/data/noizeus)")
    parser.add_argument("--lengths", default="0.65,0.8,1,1.25,1.5,2", help="piece lengths in seconds")
    parser.add_argument("--no-limit", action="store_true", help="enhance pieces below the shortest-file limit too")
    args = parser.parse_args(argv)

    import sepsti.denoise
    from sepsti.corpora.noizeus import corpus_index, mixtures
    from sepsti.dictionary import default_dictionary_path, load_dictionary
    from sepsti.metrics import bss_eval

    corpus = args.corpus or default_corpus()
    if corpus is None:
        raise SystemExit("no corpus: pass --corpus DIR (a NOIZEUS-style folder)")
    if args.no_limit:
        sepsti.denoise.SHORTEST_SECONDS = 0.0
    lengths = [float(value) for value in args.lengths.split(",")]
    dictionary = load_dictionary(default_dictionary_path())
    rate = dictionary.sample_rate
    rows = []
    for mixture in mixtures(corpus_index(corpus), split="test"):
        centre = speech_centre(mixture.clean, rate)
        for length in [*lengths, None]:
            if length is None:
                part = slice(None)
            else:
                start = max(0, centre - int(length * rate) // 2)
                part = slice(start, start + int(length * rate))
            clean, noisy = mixture.clean[part], mixture.noisy[part]
            speech = sepsti.denoise.denoise(noisy, dictionary.W, seed=args.seed, framing=dictionary.framing)
            rows.append({"id": mixture.utterance, "noise": mixture.noise, "snr": mixture.snr, "seconds": length,
                         "input": bss_eval(clean, noisy, noisy)["sdr"], "sdr": bss_eval(clean, noisy, speech)["sdr"]})
    summary = []
    top = max(row["snr"] for row in rows)
    for length in [*lengths, None]:
        gain = np.array([row["sdr"] - row["input"] for row in rows if row["seconds"] == length])
        at_top = np.array([row["sdr"] - row["input"] for row in rows if row["seconds"] == length and row["snr"] == top])
        summary.append({"seconds": length, "n": len(gain), "mean_gain": gain.mean(), "worse": int(np.sum(gain < 0)),
                        "worst": gain.min(), f"mean_gain_at_{top}_db": at_top.mean()})
        print(f"{'whole' if length is None else f'{length:.2f} s':>8}: mean gain {gain.mean():+.2f} dB, "
              f"{int(np.sum(gain < 0))} of {len(gain)} worse than the input, worst {gain.min():+.2f} dB, "
              f"mean at {top} dB {at_top.mean():+.2f} dB")
    write_results(args.out, NAME, {"corpus": str(corpus), "limit_lifted": args.no_limit,
                                   "shortest_seconds": sepsti.denoise.SHORTEST_SECONDS, "seed": args.seed,
                                   "summary": summary, "results": rows})


if __name__ == "__main__":
    main()
