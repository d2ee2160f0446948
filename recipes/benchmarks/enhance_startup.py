"""Whole-process time of ``sepsti enhance`` against a whole-process noisereduce run.

Both read the same 3-second 8 kHz file, denoise it and write the result, each
in a fresh Python process (start-up and imports included, as a user sees it).
Each is run once to warm caches (file system, numba's on-disk cache), then
``--repeats`` times alternating; the medians and their ratio are printed and
written to ``DIR/enhance_startup.json`` and ``.png``. ``sepsti enhance`` runs
its per-file EM with one BLAS thread unless told otherwise; noisereduce is
timed as it comes and with one BLAS thread, and the ratio uses its faster time.

The input is a synthetic speech-like signal (harmonics with a gliding pitch and
syllable-like envelope) plus white noise at 5 dB SNR, or ``--input FILE``.

Run: ``python recipes/benchmarks/enhance_startup.py [--quick] [--out DIR] [--input FILE]``; noisereduce is
the ``bench`` extra (``pip install -e '.[bench]'``), without which the run is refused before any work.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import ROOT, positive_int, recipe_parser, require_packages, run_recipe, write_results  # noqa: E402

NAME = "enhance_startup"

NOISEREDUCE = ("import sys, soundfile, noisereduce\n"
               "y, sr = soundfile.read(sys.argv[1])\n"
               "soundfile.write(sys.argv[2], noisereduce.reduce_noise(y=y, sr=sr), sr)\n")


def make_input(path, seed):
    import numpy as np
    import soundfile

    rate, n = 8000, 3 * 8000
    rng = np.random.default_rng(seed)
    t = np.arange(n) / rate
    f0 = 140 * (1 + 0.2 * np.sin(2 * np.pi * 0.7 * t))
    phase = 2 * np.pi * np.cumsum(f0) / rate
    speech = sum(np.sin(k * phase) / k for k in range(1, 20))
    speech *= (np.sin(2 * np.pi * 2.5 * t) > -0.2)
    speech *= 0.3 / np.max(np.abs(speech))
    noise = rng.standard_normal(n)
    noise *= np.sqrt(np.sum(speech ** 2) / np.sum(noise ** 2) / 10 ** 0.5)
    soundfile.write(path, speech + noise, rate, subtype="PCM_16")


def sepsti_command():
    """The installed console script if there is one, else ``python -m sepsti`` from the checkout."""
    script = Path(sys.executable).with_name("sepsti")
    if script.exists():
        return [str(script)], dict(os.environ)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return [sys.executable, "-m", "sepsti"], env


def timed(command, env):
    start = time.perf_counter()
    completed = subprocess.run(command, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if completed.returncode != 0:
        raise SystemExit(f"failed ({completed.returncode}): {' '.join(command)}\n{completed.stderr}")
    return elapsed


def main(argv=None):
    parser = recipe_parser(f"benchmarks/{NAME}", __doc__.splitlines()[0], plot=True)
    parser.add_argument("--repeats", type=positive_int, default=None, help="timed runs of each (default 9, quick 3)")
    parser.add_argument("--input", type=Path, default=None, help="input file (default: synthetic 3 s at 8 kHz)")
    args = parser.parse_args(argv)
    if args.input is not None and not args.input.is_file():
        parser.error(f"--input {args.input}: no such file")
    require_packages({"the timed peer": "noisereduce"}, "bench")
    repeats = (3 if args.quick else 9) if args.repeats is None else args.repeats

    load_before = os.getloadavg()[0]
    folder = Path(tempfile.mkdtemp(prefix="enhance_startup."))
    try:
        source = args.input or folder / "noisy.wav"
        if args.input is None:
            make_input(source, args.seed)
        prefix, env = sepsti_command()
        ours = [*prefix, "enhance", str(source), "-o", str(folder / "sepsti.wav"), "--overwrite"]
        peer = [sys.executable, "-c", NOISEREDUCE, str(source), str(folder / "noisereduce.wav")]
        # sepsti enhance uses one BLAS thread by default; the peer is timed both as it comes
        # and with one BLAS thread, and compared in its faster configuration.
        peer_env = {**env, "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        runs = {"sepsti": (ours, env), "noisereduce": (peer, env), "noisereduce, 1 BLAS thread": (peer, peer_env)}
        for command, environment in runs.values():
            timed(command, environment)
        times = {name: [] for name in runs}
        for _ in range(repeats):
            for name, (command, environment) in runs.items():
                times[name].append(timed(command, environment))
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    median = {name: statistics.median(values) for name, values in times.items()}
    peer_best = min(median["noisereduce"], median["noisereduce, 1 BLAS thread"])
    ratio = median["sepsti"] / peer_best
    for name in runs:
        print(f"{name + ' (whole process):':<44} median {median[name]:.3f} s over {repeats} runs")
    print(f"ratio sepsti / noisereduce (its faster configuration): {ratio:.2f} "
          f"({'faster' if ratio < 1 else 'slower'})")
    load = (load_before, os.getloadavg()[0])
    print(f"1-minute load average before / after: {load[0]:.1f} / {load[1]:.1f} on {os.cpu_count()} CPUs")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5, 3))
    names = list(times)
    axis.boxplot([times[name] for name in names])
    axis.set_xticks(range(1, len(names) + 1), [name.replace(", ", "\n") for name in names])
    axis.set_ylabel("seconds, whole process")
    axis.set_title(f"3 s at 8 kHz: ratio {ratio:.2f}")
    figure.tight_layout()
    write_results(args, {
        "seconds": times, "median": median, "ratio": ratio, "repeats": repeats,
        "load_average": load, "cpus": os.cpu_count(),
        "command": " ".join(ours[:-4] + ["enhance", "IN", "-o", "OUT", "--overwrite"]),
        "input": str(args.input) if args.input else "synthetic 3 s, 8 kHz, white noise at 5 dB",
    }, figure)


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
