"""Speech enhancement of a noise that switches on and off (a vacuum cleaner, a blender, a passing train).

Each wideband mixture of ``enhance_wideband.py`` (LibriSpeech utterances of the split at 16 kHz,
by default car, pink and white noise at 5 dB, 8 s) is enhanced twice by ``sepsti enhance`` (the
checkout given by ``--sepsti``, default this one): as it is, the noise throughout, and with the
noise ``--drop-db`` lower outside the middle three eighths of the file, so that it switches on at
3/8 and off at 6/8. Scored by :func:`sepsti.metrics.bss_eval` (SDR) over the first and the last
second of the noise's burst and over the whole file, each against the same stretch with the noise
throughout. Utterances shorter than 16/3 s (a burst under 2 s, whose first and last second would
overlap) are left out. Prints the means and writes ``OUT/enhance_noise_switch_LABEL.json``.

Usage::

    python recipes/benchmarks/enhance_noise_switch.py [--split validation] [--noise car,pink,white] [--snr 5] \\
        [--drop-db 30] [--sepsti CHECKOUT] [--label sepsti] [--out DIR]
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from _common import non_negative_float, run_recipe, write_results  # noqa: E402
from _stretches import (enhance_cases, long_enough, score_stretches, stretch_parser, summarize,  # noqa: E402
                        wideband_mixtures)

NAME = "enhance_noise_switch"
CASES = ("throughout", "switched")
STRETCHES = ("first_second", "last_second", "whole")
#: Shortest burst scored (s), three eighths of the mixture: its first and last second apart.
SHORTEST_BURST_SECONDS = 2.0


def burst(length):
    """Sample range ``(on, off)`` of the noise's burst in a signal of ``length``: its middle three eighths."""
    return 3 * length // 8, 6 * length // 8


def stretches(length, rate):
    """Sample ranges of :data:`STRETCHES` in a signal of ``length``."""
    on, off = burst(length)
    return {"first_second": (on, on + rate), "last_second": (off - rate, off), "whole": (0, length)}


def main():
    parser = stretch_parser(NAME, __doc__.splitlines()[0])
    parser.add_argument("--drop-db", type=non_negative_float, default=30.0,
                        help="how far the noise falls outside its burst (dB, default 30)")
    args = parser.parse_args()
    import soundfile

    folder = args.out / f"{NAME}_{args.split}"
    mixtures = wideband_mixtures(args, folder / "throughout")
    mixtures = long_enough(mixtures, SHORTEST_BURST_SECONDS * 8 / 3, f"a burst under {SHORTEST_BURST_SECONDS:g} s")
    paths = {case: [] for case in CASES}
    for path, clean, rate, *_ in mixtures:
        noisy, _ = soundfile.read(path)
        on, off = burst(len(noisy))
        gain = np.full(len(noisy), 10.0 ** (-args.drop_db / 20.0))
        gain[on:off] = 1.0
        target = folder / "switched" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(target, clean + gain * (noisy - clean), rate, subtype="FLOAT")
        paths["throughout"].append(Path(path))
        paths["switched"].append(target)
    outputs = folder / args.label
    enhance_cases(args.sepsti, paths, outputs)
    rows = []
    for (path, clean, rate, kind, snr, utterance), *inputs in zip(mixtures, *paths.values()):
        row = {"file": path.name, "noise": kind, "snr": snr, "utterance": utterance}
        for case, noisy_path in zip(CASES, inputs):
            signal, _ = soundfile.read(noisy_path)
            output, _ = soundfile.read(outputs / case / path.name)
            score_stretches(row, case, clean, signal, output, stretches(len(signal), rate))
        rows.append(row)
    summary = summarize(rows, CASES, STRETCHES)
    write_results(args, {
        "split": args.split, "label": args.label, "checkout": str(args.sepsti.resolve()), "drop_db": args.drop_db,
        "load_average": os.getloadavg(), "results": rows, "summary": summary})


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
