"""Speech enhancement across a stretch of near-silence (a muted microphone, an edit) inside a noisy recording.

Each wideband mixture of ``enhance_wideband.py`` (LibriSpeech utterances of the split at 16 kHz,
by default car, pink and white noise at 5 dB) is enhanced three times by ``sepsti enhance`` (the
checkout given by ``--sepsti``, default this one): as it is, and with ``--gap`` seconds inserted at
its middle, once of exact zeros (digital silence) and once of white noise at ``--gap-dbfs``
(near-silence). The clean reference gets zeros there. Scored by :func:`sepsti.metrics.bss_eval`
(SDR) over three stretches of the speech: the last second before the gap, the first second after
it, and the rest after it, each against the same stretch of the output without the gap; utterances
shorter than 3 s (under a second before the gap, or half a second of rest after it) are left out.
Prints the means and writes ``OUT/enhance_near_silence_LABEL.json``.

Usage::

    python recipes/benchmarks/enhance_near_silence.py [--split validation] [--noise car,pink,white] [--snr 5] \\
        [--gap 2] [--gap-dbfs -90] [--sepsti CHECKOUT] [--label sepsti] [--out DIR]
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from _common import positive_float, run_recipe, write_results  # noqa: E402
from _stretches import (enhance_cases, long_enough, score_stretches, stretch_parser, summarize,  # noqa: E402
                        wideband_mixtures)

NAME = "enhance_near_silence"
CASES = ("no_gap", "zeros", "near_silence")
STRETCHES = ("before", "first_second_after", "rest_after")
#: Shortest mixture scored (s): a second before its middle, a second and a half after it.
SHORTEST_SECONDS = 3.0


def stretches(length, rate, middle, gap):
    """Sample ranges of :data:`STRETCHES` in a signal of ``length`` whose ``gap`` samples start at ``middle``."""
    after = middle + gap
    return {"before": (middle - rate, middle), "first_second_after": (after, after + rate),
            "rest_after": (after + rate, length)}


def main():
    parser = stretch_parser(NAME, __doc__.splitlines()[0])
    parser.add_argument("--gap", type=positive_float, default=2.0, help="seconds inserted (default 2)")
    parser.add_argument("--gap-dbfs", type=float, default=-90.0, help="level of the near-silence (white noise)")
    args = parser.parse_args()
    import soundfile

    folder = args.out / f"{NAME}_{args.split}"
    mixtures = long_enough(wideband_mixtures(args, folder / "noisy"), SHORTEST_SECONDS,
                           "too little speech on either side of the gap")
    rng = np.random.default_rng(args.seed)
    signals, paths = [], {case: [] for case in CASES}  # per mixture, each case's (clean, noisy) signals
    for path, clean, rate, *_ in mixtures:
        noisy, _ = soundfile.read(path)
        middle, gap = len(noisy) // 2, int(args.gap * rate)
        quiet = rng.standard_normal(gap) * 10 ** (args.gap_dbfs / 20)
        silence = np.zeros(gap)
        cases = {"no_gap": (clean, noisy)}
        for case, fill in (("zeros", silence), ("near_silence", quiet)):
            cases[case] = (np.concatenate([clean[:middle], silence, clean[middle:]]),
                           np.concatenate([noisy[:middle], fill, noisy[middle:]]))
            target = folder / case / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            soundfile.write(target, cases[case][1], rate, subtype="FLOAT")
            paths[case].append(target)
        paths["no_gap"].append(Path(path))
        signals.append(cases)
    outputs = folder / args.label
    enhance_cases(args.sepsti, paths, outputs)
    rows = []
    for (path, _, rate, kind, snr, utterance), cases in zip(mixtures, signals):
        row = {"file": path.name, "noise": kind, "snr": snr, "utterance": utterance}
        for case, (reference, signal) in cases.items():
            output, _ = soundfile.read(outputs / case / path.name)
            gap = 0 if case == "no_gap" else int(args.gap * rate)
            score_stretches(row, case, reference, signal, output,
                            stretches(len(signal), rate, (len(signal) - gap) // 2, gap))
        rows.append(row)
    summary = summarize(rows, CASES, STRETCHES)
    write_results(args, {
        "split": args.split, "label": args.label, "checkout": str(args.sepsti.resolve()), "gap_seconds": args.gap,
        "gap_dbfs": args.gap_dbfs, "load_average": os.getloadavg(), "results": rows, "summary": summary})


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
