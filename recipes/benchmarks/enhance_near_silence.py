"""Speech enhancement across a stretch of near-silence (a muted microphone, an edit) inside a noisy recording.

Each wideband mixture of ``enhance_wideband.py`` (LibriSpeech utterances of the split at 16 kHz,
by default car, pink and white noise at 5 dB) is enhanced three times by ``sepsti enhance`` (the
checkout given by ``--sepsti``, default this one): as it is, and with ``--gap`` seconds inserted at
its middle, once of exact zeros (digital silence) and once of white noise at ``--gap-dbfs``
(near-silence). The clean reference gets zeros there. Scored by :func:`sepsti.metrics.bss_eval`
(SDR) over three stretches of the speech: the last second before the gap, the first second after
it, and the rest after it, each against the same stretch of the output without the gap. Prints
the means and writes ``OUT/enhance_near_silence_LABEL.json``.

Usage::

    python recipes/benchmarks/enhance_near_silence.py [--split validation] [--noise car,pink,white] [--snr 5] \\
        [--gap 2] [--gap-dbfs -90] [--sepsti CHECKOUT] [--label sepsti] [--out DIR]
"""

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from _common import ROOT, checkout_package, recipe_parser, write_results  # noqa: E402

NAME = "enhance_near_silence"
#: The stretches scored: (name, start and stop in seconds from the gap's start in the signal without it).
STRETCHES = (("before", -1.0, 0.0), ("first_second_after", 0.0, 1.0), ("rest_after", 1.0, None))


def with_gap(signal, rate, seconds, fill):
    """``signal`` with ``fill`` (``seconds`` long) inserted at its middle; also returns where it starts."""
    middle = len(signal) // 2
    return np.concatenate([signal[:middle], fill[:int(seconds * rate)], signal[middle:]]), middle


def stretch_sdr(clean, noisy, output, start, stop):
    from sepsti.metrics import bss_eval

    return bss_eval(clean[start:stop], noisy[start:stop], output[start:stop])["sdr"]


def main():
    parser = recipe_parser(NAME, __doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "wideband")
    parser.add_argument("--split", default="validation", choices=("validation", "test"))
    parser.add_argument("--files", type=int, default=12, help="16 kHz utterances")
    parser.add_argument("--noise", default="car,pink,white")
    parser.add_argument("--snr", type=int, default=5)
    parser.add_argument("--gap", type=float, default=2.0, help="seconds inserted")
    parser.add_argument("--gap-dbfs", type=float, default=-90.0, help="level of the near-silence (white noise)")
    parser.add_argument("--label", default="sepsti", help="name of this run in the results")
    parser.add_argument("--sepsti", type=Path, default=ROOT, help="checkout whose sepsti enhances")
    args = parser.parse_args()
    if not (args.data / "manifest.json").is_file():
        raise SystemExit(f"{args.data}: no wideband corpus (manifest.json) there")
    import soundfile

    from enhance_wideband import make_mixtures

    folder = args.out / f"{NAME}_{args.split}"
    mixtures = make_mixtures(args.data, args.split, folder / "noisy", files=2 if args.quick else args.files,
                             noises=args.noise.split(","), snrs=[args.snr], seconds=8.0, rate48=0, seed=args.seed)
    rng = np.random.default_rng(args.seed)
    cases = {"no_gap": [], "zeros": [], "near_silence": []}
    for path, clean, rate, *_ in mixtures:
        noisy, _ = soundfile.read(path)
        quiet = rng.standard_normal(int(args.gap * rate)) * 10 ** (args.gap_dbfs / 20)
        for case, fill in (("zeros", np.zeros_like(quiet)), ("near_silence", quiet)):
            gapped, _ = with_gap(noisy, rate, args.gap, fill)
            target = folder / case / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            soundfile.write(target, gapped, rate, subtype="FLOAT")
            cases[case].append(target)
        cases["no_gap"].append(Path(path))
    outputs = folder / args.label
    with checkout_package(args.sepsti) as (env, cwd):
        for case, paths in cases.items():
            subprocess.run([sys.executable, "-m", "sepsti", "enhance", *[str(p.resolve()) for p in paths],
                            "--out-dir", str((outputs / case).resolve()), "--overwrite"],
                           env={**env, "OPENBLAS_NUM_THREADS": "1"}, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    rows = []
    for path, clean, rate, kind, snr, utterance in mixtures:
        noisy, _ = soundfile.read(path)
        row = {"file": path.name, "noise": kind, "snr": snr, "utterance": utterance}
        for case in cases:
            output, _ = soundfile.read(outputs / case / path.name)
            if case == "no_gap":
                signal, reference, start, shift = noisy, clean, len(noisy) // 2, 0
            else:
                signal, _ = soundfile.read(folder / case / path.name)
                reference, start = with_gap(clean, rate, args.gap, np.zeros(int(args.gap * rate)))
                shift = int(args.gap * rate)
            for name, first, last in STRETCHES:
                lo = start + shift * (first >= 0) + int(first * rate)
                hi = len(signal) if last is None else start + shift * (first >= 0) + int(last * rate)
                row[f"{case}_{name}"] = stretch_sdr(reference, signal, output, lo, hi)
                row[f"{case}_{name}_input"] = stretch_sdr(reference, signal, signal, lo, hi)
        rows.append(row)
    summary = {key: float(np.mean([r[key] for r in rows])) for key in rows[0] if key.startswith(tuple(cases))}
    for case in cases:
        print(f"{case:>13}: " + ", ".join(f"{name} {summary[f'{case}_{name}']:.2f} dB "
                                          f"(input {summary[f'{case}_{name}_input']:.2f})" for name, *_ in STRETCHES))
    write_results(args.out, f"{NAME}_{args.label}", {
        "split": args.split, "label": args.label, "checkout": str(args.sepsti.resolve()), "gap_seconds": args.gap,
        "gap_dbfs": args.gap_dbfs, "load_average": os.getloadavg(), "results": rows, "summary": summary})


if __name__ == "__main__":
    main()
