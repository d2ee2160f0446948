"""What the recipes that alter the wideband mixtures share: options, cases enhanced in one pass, stretches scored.

Such a recipe (``enhance_near_silence.py``, ``enhance_noise_switch.py``) takes the mixtures of
``enhance_wideband.py``, writes altered copies of each as its cases, has ``sepsti enhance`` (of a
checkout) enhance every case, and scores stretches of the output by SDR against the clean speech.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np

from _common import ROOT, checkout_package, recipe_parser


def stretch_parser(name, description):
    """A recipe's parser with the options of the mixtures and of the checkout that enhances them."""
    parser = recipe_parser(name, description, output=lambda args: f"{name}_{args.label}")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "wideband")
    parser.add_argument("--split", default="validation", choices=("validation", "test"))
    parser.add_argument("--files", type=int, default=12, help="16 kHz utterances")
    parser.add_argument("--noise", default="car,pink,white")
    parser.add_argument("--snr", type=int, default=5)
    parser.add_argument("--label", default="sepsti", help="name of this run in the results")
    parser.add_argument("--sepsti", type=Path, default=ROOT, help="checkout whose sepsti enhances")
    return parser


def wideband_mixtures(args, folder):
    """The 8 s mixtures of ``enhance_wideband.py`` that ``args`` asks for, written below ``folder``.

    Returns
    -------
    list of (path, clean, rate, noise, snr, utterance)
    """
    if not (args.data / "manifest.json").is_file():
        raise SystemExit(f"{args.data}: no wideband corpus (manifest.json) there")
    from enhance_wideband import make_mixtures

    return make_mixtures(args.data, args.split, folder, files=2 if args.quick else args.files,
                         noises=args.noise.split(","), snrs=[args.snr], seconds=8.0, rate48=0, seed=args.seed)


def long_enough(mixtures, shortest_seconds, why):
    """The mixtures of at least ``shortest_seconds``; says how many were left out and ``why``."""
    kept = [mixture for mixture in mixtures if len(mixture[1]) >= shortest_seconds * mixture[2]]
    if len(kept) < len(mixtures):
        print(f"left out {len(mixtures) - len(kept)} of {len(mixtures)} mixtures shorter than "
              f"{shortest_seconds:.2f} s ({why})")
    if not kept:
        raise SystemExit(f"no mixture of {shortest_seconds:.2f} s or more ({why})")
    return kept


def enhance_cases(checkout, paths, outputs):
    """``sepsti enhance`` of ``checkout`` on each case's files (``paths``: case → files), into ``outputs / case``."""
    with checkout_package(checkout) as (env, cwd):
        for case, files in paths.items():
            subprocess.run([sys.executable, "-m", "sepsti", "enhance", *[str(p.resolve()) for p in files],
                            "--out-dir", str((outputs / case).resolve()), "--overwrite"],
                           env={**env, "OPENBLAS_NUM_THREADS": "1"}, cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def stretch_sdr(clean, noisy, output, start, stop):
    """SDR (dB) of ``output`` against ``clean`` over samples ``start:stop``."""
    from sepsti.metrics import bss_eval

    return bss_eval(clean[start:stop], noisy[start:stop], output[start:stop])["sdr"]


def score_stretches(row, case, clean, signal, output, ranges):
    """Add to ``row`` the SDR of ``output`` and of the input ``signal`` over each stretch of ``ranges``
    (name → sample range), as ``{case}_{name}`` and ``{case}_{name}_input``."""
    for name, (start, stop) in ranges.items():
        row[f"{case}_{name}"] = stretch_sdr(clean, signal, output, start, stop)
        row[f"{case}_{name}_input"] = stretch_sdr(clean, signal, signal, start, stop)


def summarize(rows, cases, stretches):
    """Mean of every score of ``rows`` over the files; prints a line per case. Returns the means by key."""
    summary = {key: float(np.mean([r[key] for r in rows])) for key in rows[0] if key.startswith(cases)}
    width = max(len(case) for case in cases)
    for case in cases:
        print(f"{case:>{width}}: " + ", ".join(f"{name} {summary[f'{case}_{name}']:.2f} dB "
                                               f"(input {summary[f'{case}_{name}_input']:.2f})" for name in stretches))
    return summary
