"""Wideband enhancement: SDR (full band and at 8 kHz), STOI, PESQ-wb and the band above 4 kHz.

Noisy material is made from held-out speakers of a wideband corpus (``sepsti.corpora.wideband``:
the ``validation`` split to choose settings, the ``test`` split to report), since no wideband
noise recordings are provided:

- 16 kHz: LibriSpeech utterances of the split (high-passed at 80 Hz, at most ``--seconds`` long,
  set to −27 dBFS RMS) mixed at 0/5/10 dB with four noises made here: ``white``, ``pink``
  (1/f power over the whole band), ``babble`` (five other speakers of the same split, summed)
  and ``car`` (the synthetic corpus's car noise, ``sepsti.corpora.synth.synth_noise``, which is
  telephone band, resampled); and, when asked (``--noise ...,music,dishes``), ``music``: three-note
  chords of harmonic tones (a new chord every 0.25–0.8 s, partials up to 7 kHz) over a decaying noise
  beat twice a second, and ``dishes``: clatter, as if from a kitchen sink — clinks (a few damped
  partials between 1.5 and 7 kHz, 10–60 ms decay, with a click) at random, about four a second, over
  running water (noise rising with frequency, 20 dB below the clinks' level); and, with ``--noise-dir
  DIR``, ``recorded``: for each mixture an excerpt, from a random start, of one of the audio files
  below ``DIR`` (channels averaged; an excerpt quieter than −60 dBFS is drawn again), so that
  recordings of real noise can be scored the same way;
- 48 kHz (``--rate48 N``): LJ Speech utterances (22.05 kHz, speech up to 11 kHz) resampled to
  48 kHz and mixed with white, pink and babble noise generated at 48 kHz.

Every noisy file is written as 16-bit PCM and enhanced by ``python -m sepsti enhance`` in one
process (the checkout given by ``--sepsti``, default this one, so that an earlier commit's
telephone-band path can be measured the same way). Scores, against the clean reference:
BSS_EVAL SDR at the file's rate and after resampling all three signals to 8 kHz
(``sepsti.metrics.bss_eval``), STOI and PESQ wide band (``sepsti.metrics``), the share of energy
above 4 kHz of the output against the clean speech (dB), and the same in *fricative-dominated*
frames: 32 ms frames of the clean speech within 40 dB of its loudest frame whose energy lies
mostly (> 50 %) above 4 kHz. With the input scored, the SDR and STOI gains over it per rate and
SNR follow, each with its 95 % interval over the utterances (an utterance is mixed with every noise).

The noisy files go to ``OUT/noisy_<split>`` and their clean references, under the same names, to
``OUT/clean_<split>``: the peers are scored on the same mixtures by ``enhance_vs_peers.py --clean
OUT/clean_<split> --noisy OUT/noisy_<split>``. The folders record the settings that made them
(``.recipe.json``): runs with other labels and the same settings share them; a run with other settings
(``--seed``, ``--seconds``, ``--noise-dir``, ...) is refused there unless ``--overwrite``, which replaces them.

Recordings unlike the corpora: ``--channel`` colours speech and noise alike (``bright``: +6 dB per
octave; ``muffled``: low-passed at 1.5 kHz; ``telephone``: 300–3400 Hz; ``thin``: high-passed at
400 Hz), and ``--rt60 S`` reverberates the speech in a synthetic room before the noise is added
(:func:`reverberate`); the reference is then the speech as it reaches the microphone, so the scores
measure noise removal, not dereverberation.

Usage::

    python recipes/benchmarks/enhance_wideband.py --data ../shared/data/wideband --split test \\
        [--label after] [--sepsti CHECKOUT] [--dictionary D.npz] [--files 12] [--snr 0,5,10] \\
        [--noise white,pink,babble,car] [--noise-dir DIR] [--rate48 4] [--seconds 8] [--channel flat] [--rt60 0] \\
        [--out results/wideband]
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from _common import (DEFAULT_WIDEBAND, ROOT, checkout_folder, checkout_package, choice_list,  # noqa: E402
                     claim_folders, integer_list, lead_text, non_negative_float, non_negative_int, paired_lead,
                     positive_float, positive_int, recipe_parser, run_recipe, write_results)
from _recordings import at_level, excerpt, looped_window, snr_gain  # noqa: E402

from sepsti.core.errors import ParameterError  # noqa: E402

NAME = "enhance_wideband"
LEVEL_DB = -27.0
BABBLE_TALKERS = 5
#: The noises made here (``--noise``); ``recorded`` comes with ``--noise-dir``.
NOISES = ("white", "pink", "babble", "car", "music", "dishes")


def wideband_folder(text):
    """``argparse`` type of ``--data``: a wideband corpus (``sepsti.corpora.wideband``: its ``manifest.json``)."""
    from sepsti.corpora import wideband

    if not wideband.is_wideband_corpus(text):
        raise argparse.ArgumentTypeError(f"{text!r}: no wideband corpus (manifest.json) there")
    return Path(text)


def add_mixture_options(parser, *, split, files, noises, recorded=False):
    """Add the options of the wideband mixtures, which the recipes that alter or reuse them share (``recorded``:
    ``--noise ''`` allowed, the noise recordings of ``--noise-dir`` alone)."""
    parser.add_argument("--data", type=wideband_folder, default=str(DEFAULT_WIDEBAND),
                        help="wideband corpus (default: ../shared/data/wideband)")
    parser.add_argument("--split", default=split, choices=("validation", "test"),
                        help=f"its held-out speakers: validation to choose settings, test to report (default {split})")
    parser.add_argument("--files", type=positive_int, default=files, help=f"16 kHz utterances (default {files})")
    parser.add_argument("--noise", type=choice_list(NOISES, empty=recorded), default=noises,
                        help=f"noises made here, comma-separated, of {', '.join(NOISES)} (default {noises})")


def noise_of_kind(kind, n, rate, rng, babble_pool, recordings=()):
    """``n`` samples of a noise type at ``rate`` with unit RMS.

    Babble is drawn from the ``babble_pool`` speakers; the kind ``recorded`` is an excerpt of one of
    ``recordings`` (noise files, :func:`_recordings.excerpt`).
    """
    from sepsti.audio import resample
    from sepsti.corpora.synth import SAMPLE_RATE, clatter, synth_noise

    if kind == "recorded":
        y = excerpt(recordings, n, rate, rng)
    elif kind == "white":
        y = rng.standard_normal(n)
    elif kind == "pink":
        spectrum = rng.standard_normal(n // 2 + 1) + 1j * rng.standard_normal(n // 2 + 1)
        spectrum /= np.sqrt(np.maximum(np.fft.rfftfreq(n, 1 / rate), 20.0))
        y = np.fft.irfft(spectrum, n)
    elif kind == "babble":
        y = np.zeros(n)
        for talker in rng.choice(len(babble_pool), BABBLE_TALKERS, replace=False):
            voice = resample(babble_pool[talker][1], babble_pool[talker][2], rate)
            y += looped_window(voice, n, rng) / max(np.std(voice), 1e-12)
    elif kind == "music":
        y = _music(n, rate, rng)
    elif kind == "dishes":
        y = clatter(n, rate, rng)
    elif kind == "car":
        y = resample(synth_noise("car", -(-n * SAMPLE_RATE // rate) + 1, rng), SAMPLE_RATE, rate, length=n)
    else:
        raise ValueError(f"unknown noise {kind!r}")
    return y / max(np.std(y), 1e-12)


def _music(n, rate, rng):
    """``n`` samples of synthetic music: chords of harmonic tones with a decaying noise beat."""
    y, start = np.zeros(n), 0
    while start < n:
        t = np.arange(min(int(rng.uniform(0.25, 0.8) * rate), n - start)) / rate
        root = 110.0 * 2 ** (rng.integers(0, 24) / 12)
        for step in (0, 4, 7):  # a major triad
            pitch = root * 2 ** (step / 12)
            partials = [k for k in range(1, 12) if k * pitch < 7000.0]
            tone = sum(np.sin(2 * np.pi * k * pitch * t) / k ** 1.5 for k in partials)
            y[start:start + len(t)] += tone * np.exp(-2 * t)
        start += len(t)
    beat = np.zeros(n)
    for onset in range(0, n, rate // 2):
        m = min(n - onset, rate // 10)
        beat[onset:onset + m] = rng.standard_normal(m) * np.exp(-np.arange(m) / (rate / 80))
    return y / np.std(y) + 0.5 * beat / max(np.std(beat), 1e-12)


#: Microphone or line colourings (``--channel``), applied to speech and noise alike: (order, edges, kind)
#: of a Butterworth filter, or a first-order pre-emphasis for ``bright``.
CHANNELS = {"flat": None, "bright": "pre-emphasis", "muffled": (2, 1500.0, "lowpass"),
            "telephone": (4, (300.0, 3400.0), "bandpass"), "thin": (2, 400.0, "highpass")}


def colour(y, rate, channel):
    """``y`` through the channel ``channel`` (:data:`CHANNELS`)."""
    from scipy import signal

    design = CHANNELS[channel]
    if design is None:
        return y
    if design == "pre-emphasis":
        return signal.lfilter([1.0, -0.9], [1.0], y)
    order, edges, kind = design
    return signal.sosfilt(signal.butter(order, edges, btype=kind, fs=rate, output="sos"), y)


def reverberate(y, rate, rt60, rng):
    """``y`` in a synthetic room: a direct path and a tail of Gaussian noise decaying by 60 dB in ``rt60`` s.

    The tail starts 2.5 ms after the direct path and holds as much energy as it (a direct-to-reverberant
    ratio of 0 dB: a talker a few metres from the microphone); the output has the length of ``y``.
    """
    from scipy import signal

    from sepsti.corpora.synth import room_tail

    if rt60 <= 0:
        return y
    tail = room_tail(rng, rt60, rate)
    tail[:int(0.0025 * rate)] = 0.0
    response = tail / np.sqrt(np.sum(tail ** 2))
    response[0] = 1.0
    return signal.fftconvolve(y, response)[:len(y)]


def _name(utterance, rate, kind, snr):
    return f"{utterance}_{rate // 1000}k_{kind}_sn{snr}.wav"


def make_mixtures(data, split, folder, *, files, noises, snrs, seconds, rate48, seed, channel="flat", rt60=0.0,
                  clean_folder=None, recordings=(), overwrite=False):
    """Write the noisy files; return [(path, clean, rate, noise, snr, utterance)].

    The clean speech is reverberated (``rt60``) and then both it and the noise go through ``channel``;
    the returned clean speech is the reference as it reaches the microphone. With ``clean_folder``, each
    mixture's reference is written there too, under the noisy file's name (32-bit float: the reference
    scored here), so that the two folders are pairs for ``sepsti evaluate --clean --noisy``. The noise
    ``recorded`` draws its excerpts from ``recordings`` (audio files).

    The folders record these settings (:func:`_common.claim_folders`): runs with the same settings share
    them (the same settings make the same files); mixtures of other settings there, which would enter a
    peers' run on the folder, are refused unless ``overwrite``, which replaces them
    (:class:`ParameterError`).
    """
    import soundfile

    from sepsti.audio import resample
    from sepsti.corpora import wideband

    signals = wideband.clean_signals(data, split)
    libri = [s for s in signals if s[2] == wideband.TRAIN_RATE]
    others = [s for s in signals if s[2] != wideband.TRAIN_RATE]
    sets = [(16000, libri[:files], noises)]
    if rate48:
        sets.append((48000, others[:rate48], [n for n in noises if n != "car"]))
    names = [_name(utterance, rate, kind, snr) for rate, chosen, kinds in sets for utterance, _, _ in chosen
             for kind in kinds for snr in snrs]
    settings = {"data": str(Path(data).resolve()), "split": split, "files": files, "noises": list(noises),
                "snrs": list(snrs), "seconds": seconds, "rate48": rate48, "seed": seed, "channel": channel,
                "rt60": rt60, "recordings": [str(Path(path).resolve()) for path in recordings]}
    claim_folders({place: names for place in (folder, clean_folder) if place is not None}, settings,
                  overwrite=overwrite)
    mixtures = []
    for rate, chosen, kinds in sets:
        for number, (utterance, y, source_rate) in enumerate(chosen):
            clean = resample(y, source_rate, rate)[:int(seconds * rate)]
            room = np.random.default_rng([seed, rate, number, len(kinds)])  # a stream no noise uses
            clean = colour(reverberate(clean, rate, rt60, room), rate, channel)
            clean = at_level(clean, LEVEL_DB)
            pool = [s for s in libri if s[0] != utterance]
            for k, kind in enumerate(kinds):
                rng = np.random.default_rng([seed, rate, number, k])
                noise = colour(noise_of_kind(kind, len(clean), rate, rng, pool, recordings), rate, channel)
                for snr in snrs:
                    scaled = noise * snr_gain(clean, noise, snr)
                    path = folder / _name(utterance, rate, kind, snr)
                    soundfile.write(path, np.clip(clean + scaled, -1, 1), rate, subtype="PCM_16")
                    if clean_folder is not None:
                        soundfile.write(clean_folder / path.name, clean, rate, subtype="FLOAT")
                    mixtures.append((path, clean, rate, kind, snr, utterance))
    return mixtures


def score(clean, signal, noisy, rate):
    """Every score of ``signal`` (the output, or ``noisy`` itself) against ``clean``, as a dict."""
    from sepsti import metrics
    from sepsti.audio import resample

    full = metrics.bss_eval(clean, noisy, signal)["sdr"]
    narrow = [resample(z, rate, 8000) for z in (clean, noisy, signal)]
    fricative, frames = metrics.fricative_level(clean, signal, rate)
    return {"sdr": full, "sdr_8k": metrics.bss_eval(*narrow)["sdr"], "stoi": metrics.stoi(clean, signal, rate),
            "pesq_wb": metrics.pesq(clean, signal, rate, mode="wb"),
            "share_above_4k": metrics.high_band_share(signal, rate),
            "clean_share_above_4k": metrics.high_band_share(clean, rate),
            "fricative_db": fricative, "fricative_frames": frames}


def condition_of(args):
    """The suffix of the folders and results of a coloured or reverberant run ('' for a flat, dry one)."""
    return "" if (args.channel, args.rt60) == ("flat", 0.0) else f"_{args.channel}_rt{args.rt60:g}"


def main():
    parser = recipe_parser(f"benchmarks/{NAME}", __doc__.splitlines()[0],
                           output=lambda args: f"{NAME}_{args.label}_{args.split}{condition_of(args)}",
                           output_help=f"{NAME}_LABEL_SPLIT[_CHANNEL_rtRT60]",
                           writes="the mixtures in DIR/noisy_SPLIT[_CHANNEL_rtRT60], their clean references in "
                                  "DIR/clean_SPLIT[...] and the enhanced files in DIR/LABEL_SPLIT[...]")
    add_mixture_options(parser, split="test", files=12, noises="white,pink,babble,car", recorded=True)
    parser.add_argument("--label", default="sepsti", help="name of this run in the results")
    parser.add_argument("--sepsti", type=checkout_folder, default=ROOT, help="checkout whose sepsti enhances")
    parser.add_argument("--dictionary", type=Path, default=None, help="passed to enhance --dictionary")
    parser.add_argument("--rate48", type=non_negative_int, default=4, help="48 kHz utterances (LJ Speech)")
    parser.add_argument("--snr", type=integer_list, default=[0, 5, 10], help="SNRs in dB, comma-separated")
    parser.add_argument("--seconds", type=positive_float, default=8.0, help="longest clean utterance used")
    parser.add_argument("--no-input", action="store_true", help="do not score the unprocessed input")
    parser.add_argument("--channel", default="flat", choices=sorted(CHANNELS),
                        help="colouring of speech and noise alike (a microphone or a line)")
    parser.add_argument("--noise-dir", type=Path, default=None,
                        help="noise recordings (any audio file below it): adds the noise 'recorded', an excerpt "
                             "of one of them, chosen at random, per mixture")
    parser.add_argument("--rt60", type=non_negative_float, default=0.0,
                        help="reverberate the speech in a synthetic room of this RT60 (s) before the noise")
    args = parser.parse_args()
    if not args.noise and args.noise_dir is None:
        parser.error("--noise: give at least one noise (or --noise-dir)")
    if args.label in ("clean", "noisy", "input"):  # the folders and the row of the references and the input
        parser.error(f"--label {args.label}: a name this recipe uses itself; choose another")
    import soundfile

    from sepsti.corpora.audio import audio_files
    from sepsti.metrics import warnings_once

    noises = list(args.noise)
    recordings = []
    if args.noise_dir is not None:
        recordings = audio_files(args.noise_dir)
        if not recordings:
            raise ParameterError(f"--noise-dir {args.noise_dir}: no audio file below it")
        noises.append("recorded")
    snrs = args.snr
    files = 3 if args.quick else args.files
    condition = condition_of(args)
    noisy_folder = args.out / f"noisy_{args.split}{condition}"
    clean_folder = args.out / f"clean_{args.split}{condition}"
    mixtures = make_mixtures(args.data, args.split, noisy_folder, files=files, noises=noises, snrs=snrs,
                             seconds=args.seconds, rate48=0 if args.quick else args.rate48, seed=args.seed,
                             channel=args.channel, rt60=args.rt60, clean_folder=clean_folder, recordings=recordings,
                             overwrite=args.overwrite)
    enhanced = args.out / f"{args.label}_{args.split}{condition}"
    command = [sys.executable, "-m", "sepsti", "enhance", *[str(m[0].resolve()) for m in mixtures], "--out-dir",
               str(enhanced.resolve()), "--overwrite"]
    if args.dictionary is not None:
        command += ["--dictionary", str(args.dictionary.resolve())]
    with checkout_package(args.sepsti) as (env, cwd):
        start = time.perf_counter()
        subprocess.run(command, env={**env, "OPENBLAS_NUM_THREADS": "1"}, cwd=cwd, check=True,
                       stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
    audio_seconds = sum(len(m[1]) / m[2] for m in mixtures)
    rows = []
    for path, clean, rate, kind, snr, utterance in mixtures:
        noisy, _ = soundfile.read(path)
        output, _ = soundfile.read(enhanced / path.name)
        row = {"file": path.name, "rate": rate, "noise": kind, "snr": snr, "utterance": utterance}
        with warnings_once(path.name):  # an utterance without fricative frames warns once, not per signal
            row[args.label] = score(clean, output, noisy, rate)
            if not args.no_input:
                row["input"] = score(clean, noisy, noisy, rate)
        rows.append(row)
        print(path.name, {k: round(v, 3) for k, v in row[args.label].items()}, flush=True)
    summary = summarize(rows, [args.label] + ([] if args.no_input else ["input"]))
    print_summary(summary)
    lead = None if args.no_input else lead_over_input(rows, args.label)
    if lead is not None:
        print_lead(lead)
    write_results(args, {
        "split": args.split, "label": args.label, "channel": args.channel, "rt60": args.rt60,
        "checkout": str(args.sepsti.resolve()),
        "dictionary": None if args.dictionary is None else str(args.dictionary), "enhance_seconds": seconds,
        "audio_seconds": audio_seconds, "load_average": os.getloadavg(), "results": rows, "summary": summary,
        "lead_over_input": lead})


def summarize(rows, methods):
    """Means per method, rate and SNR (energy shares as the mean share in dB against the clean's)."""
    summary = {}
    for method in methods:
        for rate in sorted({r["rate"] for r in rows}):
            for snr in sorted({r["snr"] for r in rows}) + ["all"]:
                chosen = [r for r in rows if r["rate"] == rate and (snr == "all" or r["snr"] == snr)]
                values = {key: float(np.nanmean([r[method][key] for r in chosen]))
                          for key in ("sdr", "sdr_8k", "stoi", "pesq_wb", "fricative_db")}
                share = np.mean([r[method]["share_above_4k"] for r in chosen])
                clean_share = np.mean([r[method]["clean_share_above_4k"] for r in chosen])
                values["share_above_4k"] = float(share)
                values["clean_share_above_4k"] = float(clean_share)
                values["above_4k_db"] = float(10 * np.log10(max(share, 1e-30) / clean_share))
                summary[f"{method} {rate} {snr}"] = values
    return summary


def lead_over_input(rows, label):
    """SDR and STOI gains over the input per rate and SNR, 95 % intervals over the utterances.

    An utterance is mixed with every noise (:func:`sepsti.comparison.paired_difference`).
    """
    lead = {}
    for rate in sorted({r["rate"] for r in rows}):
        for snr in sorted({r["snr"] for r in rows}):
            chosen = [r for r in rows if r["rate"] == rate and r["snr"] == snr]
            lead[f"{rate} {snr}"] = {key: paired_lead([r[label][key] for r in chosen],
                                                      [r["input"][key] for r in chosen],
                                                      [r["utterance"] for r in chosen])
                                     for key in ("sdr", "stoi")}
    return lead


def print_lead(lead):
    print("\ngain over the input: mean [95 % interval over the utterances], files ahead")
    for key, cells in lead.items():
        print(f"{key:<14}" + "  ".join(f"{name.upper()} {lead_text(c, 3)}" for name, c in cells.items()))


def print_summary(summary):
    print(f"{'method rate snr':<22}{'SDR':>7}{'SDR8k':>7}{'STOI':>7}{'PESQwb':>7}{'>4k %':>8}{'clean %':>8}"
          f"{'>4k dB':>8}{'fric dB':>8}")
    for key, v in summary.items():
        print(f"{key:<22}{v['sdr']:7.2f}{v['sdr_8k']:7.2f}{v['stoi']:7.3f}{v['pesq_wb']:7.2f}"
              f"{100 * v['share_above_4k']:8.3f}{100 * v['clean_share_above_4k']:8.3f}{v['above_4k_db']:8.2f}"
              f"{v['fricative_db']:8.2f}")


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
