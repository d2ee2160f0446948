"""Two microphones: both channels enhanced with one mask, against each channel enhanced alone.

``sepsti enhance --channels joint`` models a file's channels together, by the power mean of their
magnitudes (``sepsti.features.channel_magnitude``), and gives each the same gains; ``--channels
separate`` (here: the file split, each channel enhanced as a mono file) enhances each alone; the
default, ``auto``, picks one of the two per file. This recipe measures the three on
two-microphone recordings made from held-out speakers of a wideband corpus at 16 kHz: the left
channel is the utterance (as ``enhance_wideband.py`` prepares it, at −27 dBFS) plus a noise, the
right one the utterance ``--delay`` ms later and ``--level`` dB quieter (a second microphone farther
from the talker) plus an independent draw of the same noise type at the same power (diffuse noise,
as in a room or a street), at 0/5/10 dB. With ``--second-talker`` the right channel holds another
speaker's utterance instead (two lavalier microphones, one talker each), and ``--crosstalk DB`` adds
each talker to the other's channel that far down. Each channel is scored against its own clean speech
(BSS_EVAL SDR and STOI, ``sepsti.metrics``); the means over both channels are given per SNR, with
the lead of the shared mask over the channels alone and its 95 % interval over the utterances (each
mixed with every noise).

Usage::

    python recipes/benchmarks/enhance_channels.py --data ../shared/data/wideband --split test \\
        [--files 12] [--noise white,pink,babble,car] [--snr 0,5,10] [--delay 0.3] [--level 2] \\
        [--second-talker [--crosstalk DB]] [--out results/channels]
"""

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from _common import (ROOT, checkout_package, integer_list, non_negative_float, positive_float,  # noqa: E402
                     recipe_parser, run_recipe, write_results)
from _recordings import at_level, snr_gain  # noqa: E402
from enhance_wideband import LEVEL_DB, add_mixture_options, noise_of_kind  # noqa: E402

NAME = "enhance_channels"
RATE = 16000
METHODS = ("input", "one mask", "each alone", "auto")


def make_recordings(data, split, folder, *, files, noises, snrs, seconds, delay, level, seed, second_talker=False,
                    crosstalk=None):
    """Write the two-channel files and each channel alone; return [(name, clean (n, 2), noise, snr, utterance)]."""
    import soundfile

    from sepsti.audio import resample
    from sepsti.corpora import wideband

    libri = [s for s in wideband.clean_signals(data, split) if s[2] == wideband.TRAIN_RATE]
    shift = int(round(delay * RATE / 1000))
    for sub in ("stereo", "left", "right"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    recordings = []
    for number, (utterance, y, source_rate) in enumerate(libri[:files]):
        near = resample(y, source_rate, RATE)[:int(seconds * RATE)]
        near = at_level(near, LEVEL_DB)
        if second_talker:  # another speaker's utterance (the list holds one per speaker), as long as the first
            other = libri[files + number]
            far = at_level(resample(other[1], other[2], RATE)[:len(near)], LEVEL_DB)
            far = np.concatenate([far, np.zeros(len(near) - len(far))])
            leak = 0.0 if crosstalk is None else 10 ** (crosstalk / 20)
            near, far = near + leak * far, far + leak * near
        else:
            far = 10 ** (-level / 20) * np.concatenate([np.zeros(shift), near[:len(near) - shift]])
        clean = np.stack([near, far], axis=1)
        pool = [s for s in libri if s[0] != utterance]
        for k, kind in enumerate(noises):
            rng = np.random.default_rng([seed, number, k])
            noise = np.stack([noise_of_kind(kind, len(near), RATE, rng, pool) for _ in range(2)], axis=1)
            for snr in snrs:
                scaled = noise * snr_gain(near, noise[:, 0], snr)
                noisy = np.clip(clean + scaled, -1, 1)
                name = f"{utterance}_{kind}_sn{snr}.wav"
                soundfile.write(folder / "stereo" / name, noisy, RATE, subtype="PCM_16")
                soundfile.write(folder / "left" / name, noisy[:, 0], RATE, subtype="PCM_16")
                soundfile.write(folder / "right" / name, noisy[:, 1], RATE, subtype="PCM_16")
                recordings.append((name, clean, kind, snr, utterance))
    return recordings


def enhance(inputs, out_dir, *options):
    """``sepsti enhance`` of this checkout on the files, one process."""
    command = [sys.executable, "-m", "sepsti", "enhance", *[str(path.resolve()) for path in inputs], "--out-dir",
               str(out_dir.resolve()), "--overwrite", "--no-progress", *options]
    with checkout_package(ROOT) as (env, cwd):
        subprocess.run(command, env={**env, "OPENBLAS_NUM_THREADS": "1"}, cwd=cwd, check=True,
                       stdout=subprocess.DEVNULL)


def label_of(args):
    """The name of a run's folder and results: its split, and whether the right channel is another talker (and how
    far down each talker is in the other's channel)."""
    if not args.second_talker:
        return args.split
    return f"{args.split}_two_talkers" + ("" if args.crosstalk is None else f"_crosstalk{args.crosstalk:g}")


def main():
    parser = recipe_parser(f"benchmarks/{NAME}", __doc__.splitlines()[0],
                           output=lambda args: f"{NAME}_{label_of(args)}",
                           output_help=f"{NAME}_SPLIT[_two_talkers[_crosstalkDB]]",
                           writes="the recordings and the enhanced files in DIR/channels_SPLIT[_two_talkers[...]]")
    add_mixture_options(parser, split="test", files=12, noises="white,pink,babble,car")
    parser.add_argument("--snr", type=integer_list, default=[0, 5, 10], help="SNRs in dB, comma-separated")
    parser.add_argument("--seconds", type=positive_float, default=8.0, help="longest clean utterance used")
    parser.add_argument("--delay", type=non_negative_float, default=0.3, help="the right channel's delay (ms)")
    parser.add_argument("--level", type=float, default=2.0, help="the right channel's speech, dB below the left's")
    parser.add_argument("--second-talker", action="store_true",
                        help="the right channel holds another speaker (then --delay and --level do not apply)")
    parser.add_argument("--crosstalk", type=float, default=None,
                        help="with --second-talker: each talker in the other's channel, this many dB (e.g. -15)")
    args = parser.parse_args()
    if args.crosstalk is not None and not args.second_talker:
        parser.error("--crosstalk: only with --second-talker")
    import soundfile

    from sepsti.comparison import paired_difference
    from sepsti.metrics import bss_eval, stoi

    label = label_of(args)
    folder = args.out / f"channels_{label}"
    recordings = make_recordings(args.data, args.split, folder, files=2 if args.quick else args.files,
                                 noises=args.noise, snrs=args.snr,
                                 seconds=args.seconds, delay=args.delay, level=args.level, seed=args.seed,
                                 second_talker=args.second_talker, crosstalk=args.crosstalk)
    for sub in ("left", "right"):
        enhance([folder / sub / r[0] for r in recordings], folder / f"{sub}_enhanced")
    enhance([folder / "stereo" / r[0] for r in recordings], folder / "stereo_enhanced", "--channels", "joint")
    enhance([folder / "stereo" / r[0] for r in recordings], folder / "auto_enhanced")  # the default
    rows = []
    for name, clean, kind, snr, utterance in recordings:
        noisy = soundfile.read(folder / "stereo" / name)[0]
        outputs = {"input": noisy, "one mask": soundfile.read(folder / "stereo_enhanced" / name)[0],
                   "each alone": np.stack([soundfile.read(folder / f"{side}_enhanced" / name)[0]
                                           for side in ("left", "right")], axis=1),
                   "auto": soundfile.read(folder / "auto_enhanced" / name)[0]}
        row = {"file": name, "noise": kind, "snr": snr, "utterance": utterance,
               "auto_separate": bool(np.array_equal(outputs["auto"], outputs["each alone"]))}
        for method, output in outputs.items():
            scores = [(bss_eval(clean[:, c], noisy[:, c], output[:, c])["sdr"], stoi(clean[:, c], output[:, c], RATE))
                      for c in range(2)]
            row[method] = dict(zip(("sdr", "stoi"), np.mean(scores, axis=0).tolist()))
        rows.append(row)
    summary = {}
    print(f"{'SNR':>4}  " + "  ".join(f"{m:>16}" for m in METHODS) + "   one mask − each alone (SDR dB, STOI)")
    for snr in sorted({r["snr"] for r in rows}):
        chosen = [r for r in rows if r["snr"] == snr]
        means = {m: {k: float(np.mean([r[m][k] for r in chosen])) for k in ("sdr", "stoi")} for m in METHODS}
        lead = {k: paired_difference([r["one mask"][k] for r in chosen], [r["each alone"][k] for r in chosen],
                                     [r["utterance"] for r in chosen])._asdict() for k in ("sdr", "stoi")}
        summary[str(snr)] = {"means": means, "lead": lead,
                             "auto_separate": sum(r["auto_separate"] for r in chosen), "files": len(chosen)}
        print(f"{snr:>4}  " + "  ".join(f"{means[m]['sdr']:7.2f} / {means[m]['stoi']:.3f}" for m in METHODS) + "   "
              + ", ".join(f"{c['mean']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}]" for c in lead.values())
              + f"; auto separate on {sum(r['auto_separate'] for r in chosen)} of {len(chosen)}")
    write_results(args, {
        "split": args.split, "delay_ms": args.delay, "level_db": args.level, "second_talker": args.second_talker,
        "crosstalk_db": args.crosstalk, "seed": args.seed,
        "results": rows, "summary": summary})


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
