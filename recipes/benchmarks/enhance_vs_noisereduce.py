"""Speech enhancement: sepsti against noisereduce (stationary and non-stationary), same files, same run.

Every noisy test file (sp21–sp30 by default) of the corpus is enhanced by ``sepsti.denoise``
with the speech dictionary (the shipped rank-128 one by default) and by ``noisereduce``
with its default settings, stationary and non-stationary. All are scored by BSS_EVAL
(:func:`sepsti.metrics.bss_eval`, fixed assignment) against the clean file, as is the
unprocessed input. The table gives mean SDR / SIR / SAR per SNR for each method, the
differences of SDR, and mean SDR per noise type and SNR; the JSON has every file's scores and
the enhancement times.

Usage::

    python recipes/benchmarks/enhance_vs_noisereduce.py [--corpus DIR] [--noise a,b] [--snr 0,5]
        [--dictionary PATH] [--quick] [--out DIR]

``--quick`` scores sp21–sp23 only.
"""

import os
import sys
import time
from pathlib import Path

# per-file EM on a few hundred frames gains nothing from a second BLAS thread, and spinning
# BLAS threads slow everything down on busy cores
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from _common import default_corpus, recipe_parser, write_results  # noqa: E402

NAME = "enhance_vs_noisereduce"
METHODS = ("input", "sepsti", "noisereduce_stationary", "noisereduce_nonstationary")


def _split(text, convert):
    return None if text is None else [convert(item) for item in text.split(",") if item]


def iter_mixtures(corpus, utterances, noises, snrs):
    """(utterance, noise, snr, clean, noisy) for the selected files of the corpus."""
    try:
        from sepsti.corpora.noizeus import iter_mixtures as corpus_mixtures

        for mixture in corpus_mixtures(corpus, utterances, noises, snrs):
            yield mixture.utterance, mixture.noise, mixture.snr, mixture.clean, mixture.noisy
        return
    except ImportError:
        pass
    import re

    import soundfile

    clean = {p.stem: p for p in Path(corpus).rglob("sp[0-9][0-9].wav")}
    pattern = re.compile(r"^(sp\d+)_(.+)_sn(-?\d+)$")
    found = []
    for path in Path(corpus).rglob("sp*_*_sn*.wav"):
        match = pattern.match(path.stem)
        if match and match[1] in utterances and match[1] in clean:
            noise, snr = match[2], int(match[3])
            if (noises is None or noise in noises) and (snrs is None or snr in snrs):
                found.append((match[1], noise, snr, path))
    for utterance, noise, snr, path in sorted(found):
        yield utterance, noise, snr, soundfile.read(clean[utterance])[0], soundfile.read(path)[0]


def main(argv=None):
    parser = recipe_parser(NAME, __doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None, help="NOIZEUS-style folder (default: ../shared/data/noizeus)")
    parser.add_argument("--noise", default=None, help="noise types, comma-separated (default: all found)")
    parser.add_argument("--snr", default=None, help="SNRs in dB, comma-separated (default: all found)")
    parser.add_argument("--dictionary", type=Path, default=None, help="speech dictionary .npz (default: shipped)")
    args = parser.parse_args(argv)

    import noisereduce

    from sepsti.denoise import denoise
    from sepsti.dictionary import default_dictionary_path, load_dictionary
    from sepsti.features import SAMPLE_RATE
    from sepsti.metrics import bss_eval

    corpus = args.corpus or default_corpus()
    if corpus is None:
        raise SystemExit("no corpus: pass --corpus DIR (a NOIZEUS-style folder, e.g. from `sepsti corpus synth`)")
    dictionary = load_dictionary(args.dictionary or default_dictionary_path())
    utterances = [f"sp{i:02d}" for i in (range(21, 24) if args.quick else range(21, 31))]
    enhancers = {
        "sepsti": lambda y: denoise(y, dictionary.W, seed=args.seed),
        "noisereduce_stationary": lambda y: noisereduce.reduce_noise(y=y, sr=SAMPLE_RATE, stationary=True),
        "noisereduce_nonstationary": lambda y: noisereduce.reduce_noise(y=y, sr=SAMPLE_RATE, stationary=False),
    }
    rows = []
    seconds = {name: 0.0 for name in enhancers}
    for utterance, noise, snr, clean, noisy in iter_mixtures(corpus, utterances, _split(args.noise, str),
                                                             _split(args.snr, int)):
        row = {"file": utterance, "noise": noise, "snr": snr, "input": bss_eval(clean, noisy, noisy)}
        for name, enhance in enhancers.items():
            start = time.perf_counter()
            estimate = enhance(noisy)
            seconds[name] += time.perf_counter() - start
            row[name] = bss_eval(clean, noisy, estimate)
        rows.append(row)
        print(f"{utterance} {noise:>10s} {snr:3d} dB  SDR input {row['input']['sdr']:6.2f}  "
              f"sepsti {row['sepsti']['sdr']:6.2f}  nr-stat {row['noisereduce_stationary']['sdr']:6.2f}  "
              f"nr-nonstat {row['noisereduce_nonstationary']['sdr']:6.2f}", file=sys.stderr)
    if not rows:
        raise SystemExit(f"{corpus}: no noisy test files match the selection")

    def mean(method, key, **where):
        values = [r[method][key] for r in rows if all(r[k] == v for k, v in where.items())]
        values = [v for v in values if not np.isnan(v)]  # the input's SAR is +inf: its mean is too
        return float(np.mean(values)) if values else float("nan")

    snrs = sorted({r["snr"] for r in rows})
    noises = sorted({r["noise"] for r in rows})
    summary = {}
    print(f"\n{len(rows)} mixtures, {len(noises)} noise types ({', '.join(noises)}), corpus {corpus}")
    print(f"dictionary: rank {dictionary.rank} ({args.dictionary or 'shipped default'})\n")
    header = f"{'method':36s} " + "".join(f"{s:>8d} dB" for s in snrs) + "      all"
    for key in ("sdr", "sir", "sar"):
        print(f"mean {key.upper()} (dB)")
        print(header)
        for method in METHODS:
            values = [mean(method, key, snr=s) for s in snrs] + [mean(method, key)]
            summary.setdefault(method, {})[key] = dict(zip([str(s) for s in snrs] + ["all"], values))
            print(f"{method:36s} " + "".join(f"{v:11.2f}" for v in values))
        print()
    print("SDR differences (dB)")
    print(header)
    differences = {}
    for other in ("input", "noisereduce_stationary", "noisereduce_nonstationary"):
        values = [mean("sepsti", "sdr", snr=s) - mean(other, "sdr", snr=s) for s in snrs]
        values.append(mean("sepsti", "sdr") - mean(other, "sdr"))
        differences[f"sepsti - {other}"] = dict(zip([str(s) for s in snrs] + ["all"], values))
        print(f"{'sepsti - ' + other:36s} " + "".join(f"{v:+11.2f}" for v in values))
    print("\nmean SDR per noise type (dB): sepsti [input / nr-stationary / nr-non-stationary]")
    per_noise = {}
    for noise in noises:
        cells = []
        for s in snrs:
            values = {m: mean(m, "sdr", noise=noise, snr=s) for m in METHODS}
            per_noise.setdefault(noise, {})[str(s)] = values
            cells.append(f"{values['sepsti']:6.2f} [{values['input']:5.2f}/{values['noisereduce_stationary']:5.2f}/"
                         f"{values['noisereduce_nonstationary']:5.2f}]")
        print(f"{noise:>10s}  " + "  ".join(cells))
    timing = {name: seconds[name] / len(rows) for name in seconds}
    print("\nseconds per file: " + ", ".join(f"{name} {value:.3f}" for name, value in timing.items()))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    for method in METHODS:
        axis.plot(snrs, [summary[method]["sdr"][str(s)] for s in snrs], marker="o", label=method)
    axis.set_xlabel("input SNR (dB)")
    axis.set_ylabel("mean SDR (dB)")
    axis.set_title(f"{len(rows)} mixtures, {', '.join(noises)}")
    axis.grid(alpha=0.3)
    axis.legend()
    results = {"corpus": str(corpus), "dictionary": str(args.dictionary or default_dictionary_path()),
               "rank": dictionary.rank, "seed": args.seed, "summary": summary, "differences": differences,
               "per_noise": per_noise, "seconds_per_file": timing, "results": rows}
    write_results(args.out, NAME, results, figure)


if __name__ == "__main__":
    main()
