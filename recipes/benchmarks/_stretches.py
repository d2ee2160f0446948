"""What the recipes that alter the wideband mixtures share: options, cases enhanced in one pass, stretches scored.

Such a recipe (``enhance_near_silence.py``, ``enhance_noise_switch.py``) takes the mixtures of
``enhance_wideband.py``, writes altered copies of each as its cases, has ``sepsti enhance`` (of a
checkout) enhance every case, and scores stretches of the output by SDR against the clean speech.
"""

import subprocess
import sys

import numpy as np

from _common import ROOT, checkout_folder, checkout_package, recipe_parser
from enhance_wideband import add_mixture_options, make_mixtures

from sepsti.core.errors import ParameterError


def stretch_parser(name, description):
    """A recipe's parser with the options of the mixtures and of the checkout that enhances them."""
    parser = recipe_parser(f"benchmarks/{name}", description, output=lambda args: f"{name}_{args.label}",
                           output_help=f"{name}_LABEL",
                           writes=f"the mixtures and their altered copies in DIR/{name}_SPLIT, the enhanced files in "
                                  f"DIR/{name}_SPLIT/LABEL")
    add_mixture_options(parser, split="validation", files=12, noises="car,pink,white")
    parser.add_argument("--snr", type=int, default=5, help="SNR in dB (default 5)")
    parser.add_argument("--label", default="sepsti", help="name of this run in the results")
    parser.add_argument("--sepsti", type=checkout_folder, default=ROOT, help="checkout whose sepsti enhances")
    return parser


def wideband_mixtures(args, folder):
    """The 8 s mixtures of ``enhance_wideband.py`` that ``args`` asks for, written below ``folder``.

    Returns
    -------
    list of (path, clean, rate, noise, snr, utterance)
    """
    return make_mixtures(args.data, args.split, folder, files=2 if args.quick else args.files, noises=args.noise,
                         snrs=[args.snr], seconds=8.0, rate48=0, seed=args.seed, overwrite=args.overwrite)


def long_enough(mixtures, shortest_seconds, why):
    """The mixtures of at least ``shortest_seconds``; says how many were left out and ``why``."""
    kept = [mixture for mixture in mixtures if len(mixture[1]) >= shortest_seconds * mixture[2]]
    if len(kept) < len(mixtures):
        print(f"left out {len(mixtures) - len(kept)} of {len(mixtures)} mixtures shorter than "
              f"{shortest_seconds:.2f} s ({why})")
    if not kept:
        raise ParameterError(f"no mixture of {shortest_seconds:.2f} s or more ({why})")
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
