"""Peak memory of ``sepsti enhance`` against the length of the file.

A long noisy file is built by concatenating the mixtures of a synthetic corpus
(``sepsti.corpora.synth``: sp01-sp30 in babble at 5 dB, 8 kHz, 16-bit) until it is
``--minutes`` long, written block by block; then ``sepsti enhance`` runs on it
in a fresh process and its peak resident set size (``ru_maxrss`` of that child,
from ``os.wait4``), wall time and CPU time are recorded. ``--rate`` writes the
long file at another rate (resampled), to include the resampling on the way in
and out; ``--hum hum50`` (or ``buzz60``) adds a mains hum through the whole file, as
``enhance_hum.py`` makes it (its level set by the mixtures' RMS). With ``--sepsti
PATH`` the ``sepsti`` package found at PATH (a checkout, e.g. an older commit
unpacked with ``git archive``) is measured instead of this one.

Run: ``python recipes/benchmarks/enhance_memory.py [--minutes 1,10,60] [--rate 8000] [--hum KIND]
[--quick] [--out DIR]``; it writes ``DIR/enhance_memory_8000hz_1-10-60min.json`` (the rate, the
lengths and the hum name the results, so that runs that vary them share a folder).
"""

import concurrent.futures
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import (ROOT, checkout_folder, checkout_package, positive_int, positive_list, recipe_parser,  # noqa: E402
                     run_recipe, write_results)

NAME = "enhance_memory"


def make_long_file(path, minutes, rate, seed, hum=None):
    """Concatenate synthetic mixtures into a ``minutes``-long 16-bit file at ``rate`` Hz, with a hum of kind ``hum``."""
    import numpy as np
    import soundfile

    from sepsti.corpora.noizeus import mixtures
    from sepsti.corpora.synth import write_corpus
    from sepsti.audio import resample

    with tempfile.TemporaryDirectory() as folder:
        write_corpus(Path(folder) / "corpus", seed=seed, noises=["babble"], snrs=[5])
        pieces = [resample(mixture.noisy, 8000, rate) for mixture in mixtures(Path(folder) / "corpus", split="all")]
    total = int(minutes * 60 * rate)
    if hum is not None:
        from enhance_hum import make_hum

        hum = make_hum(hum, total, rate, np.sqrt(np.mean(np.concatenate(pieces) ** 2)), np.random.default_rng(seed))
    written = 0
    with soundfile.SoundFile(path, "w", samplerate=rate, channels=1, subtype="PCM_16") as handle:
        while written < total:
            for piece in pieces:
                piece = piece[:total - written]
                if hum is not None:
                    piece = piece + hum[written:written + len(piece)]
                handle.write(np.clip(piece, -1, 1))
                written += len(piece)
                if written >= total:
                    break
    return written


def measure(command, env, cwd):
    """Run ``command`` in ``cwd``; return (peak RSS in MB, wall seconds, CPU seconds)."""
    import subprocess

    start = time.perf_counter()
    # cwd: ``python -m`` puts it first on sys.path, ahead of PYTHONPATH
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    error = process.stderr.read().decode(errors="replace").strip()
    process.stderr.close()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, command))} failed ({process.returncode}): {error}")
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, kB on Linux
    return usage.ru_maxrss * scale / 2 ** 20, wall, usage.ru_utime + usage.ru_stime


def lengths(args):
    """The lengths (minutes) of a run's files: ``--minutes``, or 1 and 10 with ``--quick``."""
    return [1.0, 10.0] if args.quick else args.minutes


def results_name(args):
    """The name of a run's results: the rate, the lengths and the hum, which the runs compared in one folder vary."""
    return (f"{NAME}_{args.rate}hz_{'-'.join(f'{length:g}' for length in lengths(args))}min"
            + ("" if args.hum is None else f"_{args.hum}"))


def main():
    parser = recipe_parser(f"benchmarks/{NAME}", __doc__.splitlines()[0], output=results_name,
                           output_help=f"{NAME}_RATEhz_MINUTES[-MINUTES...]min[_HUM]")
    parser.add_argument("--minutes", type=positive_list, default=[1.0, 10.0, 60.0],
                        help="file lengths in minutes, comma-separated (default 1,10,60)")
    parser.add_argument("--rate", type=positive_int, default=8000, help="sample rate of the long file (Hz)")
    parser.add_argument("--sepsti", type=checkout_folder, default=ROOT, help="checkout whose sepsti is measured")
    parser.add_argument("--hum", choices=("hum50", "buzz60"), default=None,
                        help="add a mains hum of this kind (enhance_hum.py) through the whole file")
    args = parser.parse_args()
    minutes = lengths(args)
    rows = []
    with tempfile.TemporaryDirectory() as folder, checkout_package(args.sepsti) as (env, cwd):
        for length in minutes:
            source = Path(folder) / f"long_{length:g}min.wav"
            # made in a process of its own: a child forked from a large parent starts with the parent's peak
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
                samples = pool.submit(make_long_file, source, length, args.rate, args.seed, args.hum).result()
            target = Path(folder) / "out.wav"
            command = [sys.executable, "-m", "sepsti", "enhance", str(source), "-o", str(target), "--overwrite"]
            peak, wall, cpu = measure(command, env, cwd)
            rows.append({"minutes": length, "rate": args.rate, "hum": args.hum, "samples": samples,
                         "peak_rss_mb": round(peak, 1),
                         "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1)})
            print(f"{length:g} min at {args.rate} Hz: peak RSS {peak:.0f} MB, {wall:.0f} s wall, {cpu:.0f} s CPU",
                  flush=True)
    write_results(args, {"sepsti": str(args.sepsti.resolve()), "runs": rows,
                                               "load_average": os.getloadavg()})


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
