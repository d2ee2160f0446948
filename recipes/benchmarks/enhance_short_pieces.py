"""Pieces of continuous speech: is the enhanced piece worse than the input?

Pieces of several lengths are cut from the middle of the speech of each test mixture of a
NOIZEUS-style corpus (sp21–sp30, every noise type and SNR): the centre of the span where the clean
speech's 100 ms energy exceeds a tenth of its peak, so a piece holds speech throughout and no
pause. With ``--continuous`` the pieces are longer than a sentence: the test sentences with their
pauses of more than 100 ms removed (50 ms energy below 1 % of the sentence's peak), put back to
back (18 s), eight pieces per length spread over it, each mixed with the same length of a noise
type's ``noisy − clean`` parts at each SNR of the corpus. With ``--wideband DIR`` the pieces are cut
instead from the test speakers' utterances of a wideband corpus (:mod:`sepsti.corpora.wideband`: the first
:data:`WIDEBAND_FILES` at 16 kHz, and the first :data:`WIDEBAND_48K` at another rate resampled to 48 kHz),
each utterance's pauses removed with ``--continuous``, and mixed at 0, 5, 10 and 15 dB with the white,
pink, babble and (at 16 kHz) car noise of ``enhance_wideband.py``. Each piece is enhanced as ``sepsti
enhance`` would (:func:`sepsti.commands.evaluate.enhance_signal`) with the shipped dictionary for its rate
(or ``--dictionary``) and scored by :func:`sepsti.metrics.bss_eval` against the cut clean speech; the whole
NOIZEUS mixtures are scored too. ``--seed`` seeds the enhancer and, with ``--wideband``, the noises
(drawn in turn for the lengths given: the same ``--lengths`` and ``--seed`` give the same pieces).
With ``--no-limit`` the shortest-file limit (:data:`sepsti.noise_model.SHORTEST_SECONDS`) is lifted,
which measures what the limit guards against; without it, pieces below the limit come back
unchanged (gain 0).

Prints the SDR gain over the input per length (mean, pieces worse than the input, worst, mean
per SNR) and the mean STOI change per SNR (:func:`sepsti.metrics.stoi`), and writes
``OUT/enhance_short_pieces.json`` (``enhance_short_pieces_wideband.json`` with ``--wideband``). ``--quick``:
the first two lengths, and the sentences of the first :data:`QUICK_SENTENCES` test utterances only (with
``--wideband``, as many utterances at each rate).

Usage::

    python recipes/benchmarks/enhance_short_pieces.py [--corpus DIR | --wideband DIR] [--lengths 0.65,1,1.5,2]
        [--no-limit] [--continuous] [--dictionary D.npz] [--quick] [--out DIR]
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from _common import noizeus_corpus, positive_list, recipe_parser, run_recipe, write_results  # noqa: E402
from _recordings import snr_gain  # noqa: E402
from enhance_wideband import noise_of_kind, wideband_folder  # noqa: E402

NAME = "enhance_short_pieces"
#: Test utterances whose mixtures a ``--quick`` run cuts.
QUICK_SENTENCES = 2
#: ``--wideband``: test utterances at 16 kHz, and at another rate (taken to 48 kHz), that pieces are cut from.
WIDEBAND_FILES = 12
WIDEBAND_48K = 4
#: ``--wideband``: the noises (car at 16 kHz only, as in ``enhance_wideband.py``) and SNRs (dB).
WIDEBAND_NOISES = ("white", "pink", "babble", "car")
WIDEBAND_SNRS = (0, 5, 10, 15)


def speech_centre(clean, rate):
    """Middle sample of the span where the clean speech's 100 ms energy exceeds a tenth of its peak."""
    energy = np.convolve(clean ** 2, np.ones(int(0.1 * rate)), "same")
    active = np.flatnonzero(energy > 0.1 * energy.max())
    return (active[0] + active[-1]) // 2


def without_pauses(clean, rate):
    """``clean`` from its first to its last active sample, pauses over 100 ms removed."""
    energy = np.convolve(clean ** 2, np.ones(int(0.05 * rate)), "same")
    active = energy > 0.01 * energy.max()
    first, last = np.flatnonzero(active)[[0, -1]]
    clean, active = clean[first:last], active[first:last]
    runs = np.split(np.arange(len(clean)), np.flatnonzero(np.diff(active.astype(int))) + 1)
    return np.concatenate([clean[run] for run in runs if active[run[0]] or len(run) <= int(0.1 * rate)])


def chosen_mixtures(index, quick):
    """The test mixtures, of the first :data:`QUICK_SENTENCES` utterances only if ``quick``."""
    from sepsti.corpora.noizeus import mixtures

    test = mixtures(index, split="test")
    kept = sorted({m.utterance for m in test})[:QUICK_SENTENCES] if quick else {m.utterance for m in test}
    return [m for m in test if m.utterance in kept]


def sentence_pieces(index, lengths, rate, quick):
    """``(id, noise, snr, seconds, clean, noisy)`` cut around each test mixture's speech centre, whole ones as
    ``seconds=None``."""
    for mixture in chosen_mixtures(index, quick):
        centre = speech_centre(mixture.clean, rate)
        for length in [*lengths, None]:
            start = 0 if length is None else max(0, centre - int(length * rate) // 2)
            stop = len(mixture.clean) if length is None else start + int(length * rate)
            yield (mixture.utterance, mixture.noise, mixture.snr, length, mixture.clean[start:stop],
                   mixture.noisy[start:stop])


def continuous_pieces(index, lengths, rate, quick):
    """``(id, noise, snr, seconds, clean, noisy)`` of the test sentences put back to back without their pauses."""
    from sepsti.corpora.noizeus import mixtures

    test = chosen_mixtures(index, quick)
    first = test[0].noise, test[0].snr
    speech = np.concatenate([without_pauses(m.clean, rate) for m in test if (m.noise, m.snr) == first])
    snrs = sorted({m.snr for m in test})
    for noise in sorted({m.noise for m in test}):
        noise_signal = np.concatenate([m.noise_signal for m in mixtures(index, split="all", noises=[noise],
                                                                         snrs=[first[1]])])
        for length in lengths:
            n = int(length * rate)
            for piece, start in enumerate(np.linspace(0, len(speech) - n, 8).astype(int)):
                clean = speech[start:start + n]
                offset = piece * n % (len(noise_signal) - n)
                raw = noise_signal[offset:offset + n]
                for snr in snrs:
                    scaled = raw * np.sqrt(np.mean(clean ** 2) / np.mean(raw ** 2) / 10 ** (snr / 10))
                    yield f"continuous:{piece}", noise, snr, length, clean, clean + scaled


def wideband_pieces(folder, lengths, continuous, quick, seed):
    """``(id, noise, snr, seconds, clean, noisy, rate)`` cut around the speech centre of wideband test utterances
    (without their pauses if ``continuous``)."""
    from sepsti.audio import resample
    from sepsti.corpora import wideband

    signals = wideband.clean_signals(folder, "test")
    libri = [s for s in signals if s[2] == wideband.TRAIN_RATE]
    others = [s for s in signals if s[2] != wideband.TRAIN_RATE]
    counts = (QUICK_SENTENCES, QUICK_SENTENCES) if quick else (WIDEBAND_FILES, WIDEBAND_48K)
    chosen = ([(utterance, y, wideband.TRAIN_RATE) for utterance, y, _ in libri[:counts[0]]]
              + [(utterance, resample(y, rate, 48000), 48000) for utterance, y, rate in others[:counts[1]]])
    for number, (utterance, y, rate) in enumerate(chosen):
        pool = [s for s in libri if s[0] != utterance]  # babble of other talkers
        speech = without_pauses(y, rate) if continuous else y
        centre = speech_centre(speech, rate)
        for k, kind in enumerate(n for n in WIDEBAND_NOISES if rate == wideband.TRAIN_RATE or n != "car"):
            rng = np.random.default_rng([seed, rate, number, k])
            for length in lengths:
                n = int(length * rate)
                start = max(0, centre - n // 2)
                clean = speech[start:start + n]
                noise = noise_of_kind(kind, len(clean), rate, rng, pool)
                for snr in WIDEBAND_SNRS:
                    yield utterance, kind, snr, length, clean, clean + noise * snr_gain(clean, noise, snr), rate


def main(argv=None):
    parser = recipe_parser(f"benchmarks/{NAME}", __doc__.splitlines()[0],
                           output=lambda args: NAME + ("_wideband" if args.wideband else ""),
                           output_help=f"{NAME}[_wideband]")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--corpus", type=Path, default=None,
                        help="NOIZEUS-style folder (default: $SEPSTI_NOIZEUS or ../shared/data/noizeus)")
    source.add_argument("--wideband", type=wideband_folder, default=None,
                        help="wideband corpus whose test speakers' utterances the pieces are cut from instead")
    parser.add_argument("--lengths", type=positive_list, default=[0.65, 0.8, 1.0, 1.25, 1.5, 2.0],
                        help="piece lengths in seconds, comma-separated (default 0.65,0.8,1,1.25,1.5,2)")
    parser.add_argument("--no-limit", action="store_true", help="enhance pieces below the shortest-file limit too")
    parser.add_argument("--continuous", action="store_true",
                        help="pieces of the test sentences put back to back without their pauses")
    parser.add_argument("--dictionary", type=Path, default=None,
                        help="speech dictionary (default: the shipped one for the pieces' rate)")
    args = parser.parse_args(argv)

    import sepsti.noise_model
    from sepsti.bandwidth import dictionary_path_for_rate
    from sepsti.commands.evaluate import enhance_signal
    from sepsti.corpora.noizeus import corpus_index
    from sepsti.dictionary import load_dictionary
    from sepsti.metrics import bss_eval, stoi

    if args.no_limit:
        sepsti.noise_model.SHORTEST_SECONDS = 0.0
    lengths = args.lengths[:2] if args.quick else args.lengths
    if args.wideband is None:
        corpus = noizeus_corpus(args.corpus)
        pieces = continuous_pieces if args.continuous else sentence_pieces
        pieces = ((*piece, 8000) for piece in pieces(corpus_index(corpus), lengths, 8000, args.quick))
    else:
        corpus = args.wideband
        pieces = wideband_pieces(args.wideband, lengths, args.continuous, args.quick, args.seed)
    paths, dictionaries = {}, {}
    rows = []
    for name, noise, snr, length, clean, noisy, rate in pieces:
        if rate not in dictionaries:
            paths[rate] = args.dictionary or dictionary_path_for_rate(rate)
            dictionaries[rate] = load_dictionary(paths[rate])
        speech = enhance_signal(noisy, rate, dictionaries[rate], seed=args.seed)
        rows.append({"id": name, "rate": rate, "noise": noise, "snr": snr, "seconds": length,
                     "input": bss_eval(clean, noisy, noisy)["sdr"], "sdr": bss_eval(clean, noisy, speech)["sdr"],
                     "stoi_input": stoi(clean, noisy, rate), "stoi": stoi(clean, speech, rate)})
    summary = []
    snrs = sorted({row["snr"] for row in rows})
    rates = sorted({row["rate"] for row in rows})
    whole = [None] if args.wideband is None and not args.continuous else []

    def mean_by_snr(chosen, score, reference):
        return {snr: float(np.mean([row[score] - row[reference] for row in chosen if row["snr"] == snr]))
                for snr in snrs}

    for rate in rates:
        for length in [*lengths, *whole]:
            chosen = [row for row in rows if row["rate"] == rate and row["seconds"] == length]
            gain = np.array([row["sdr"] - row["input"] for row in chosen])
            by_snr, stoi_by_snr = mean_by_snr(chosen, "sdr", "input"), mean_by_snr(chosen, "stoi", "stoi_input")
            summary.append({"rate": rate, "seconds": length, "n": len(gain), "mean_gain": gain.mean(),
                            "worse": int(np.sum(gain < 0)), "worst": gain.min(), "mean_gain_by_snr": by_snr,
                            "mean_stoi_change_by_snr": stoi_by_snr})
            label = "whole" if length is None else f"{length:.2f} s"
            print((f"{rate} Hz " if len(rates) > 1 else "") + f"{label:>8}: mean gain {gain.mean():+.2f} dB, "
                  f"{int(np.sum(gain < 0))} of {len(gain)} worse than the input, worst {gain.min():+.2f} dB; by SNR "
                  + ", ".join(f"{snr} dB {value:+.2f}" for snr, value in by_snr.items())
                  + "; STOI change " + ", ".join(f"{value:+.3f}" for value in stoi_by_snr.values()))
    write_results(args, {"corpus": str(corpus), "dictionaries": {str(rate): str(path) for rate, path in paths.items()},
                         "limit_lifted": args.no_limit, "continuous": args.continuous,
                         "shortest_seconds": sepsti.noise_model.SHORTEST_SECONDS, "seed": args.seed,
                         "summary": summary, "results": rows})


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
