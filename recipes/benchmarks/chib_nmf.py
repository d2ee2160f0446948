"""Chib's method for Poisson NMF in the ICASSP'16 §4.1.2 setting, and SADA's memory against block Gibbs.

Speed. X (100 × 75) ~ Poisson(W H) with W, H ~ Exponential(λ = 5) at true rank
5; Chib's log p(X | R) for R = 1..10 with the paper's run lengths: 9000 Gibbs
sweeps of which 7000 burn-in (N = 2000 kept), then M = 5000 sweeps for the
reduced run. Default estimator: the factor decomposition (``method="factors"``)
at the posterior mean of the kept draws (``point="mean"``), whose H ordinate
given W~ is a product over the 75 columns (each averaged separately over the
reduced run); ``--method sources`` runs MLSP'12 eq. 28, whose source ordinate
is carried by one sample at every rank >= 2 here. The ranks are spread over
two worker processes (one BLAS thread each) on this 2-core machine. The peer
is the figure the paper reports for its C/GSL/BLAS/OpenMPI implementation,
835 s on a 2.5 GHz quad-core laptop (the code is not available to run here);
the ratio is that figure over our wall time, given for the full run only: ``--quick`` runs ranks 1..3,
which the paper's figure does not time (``speedup`` null).

Memory. The Model III problem of ``recipes/pltf_hierarchical_audio.py`` at a
size where memory is measurable: X (1025 × 1000) from "fi,ik,kt->ft" with a
fixed 4-template Z1, K = 3 chords (|V| = 12 |V0|). Each sampler runs 3 sweeps
in a fresh subprocess that loads X from disk, warms the compiled loops on a
tiny problem and validates the start state; reported: the growth of peak RSS
(``ru_maxrss``) while the sampler builds its tables and runs, and the peak of
the NumPy allocations over the same span (``tracemalloc``). Samplers: SADA;
block Gibbs keeping the sources (``keep_sources=True``, the |V| source tensor
of Alg. 1); block Gibbs with the sources folded into the statistics (the
default). ``--quick``: 1025 × 250, too small for the RSS growth to compare (the ratio of peak RSS
growths, ``sada_over_block_rss``, is given for the full run only, and where block Gibbs's growth is
measurable at all).

Usage: ``python recipes/benchmarks/chib_nmf.py [--quick] [--out DIR] [--seed S]``.
JSON keys: ``ranks``, ``chib``, ``chib_run_stderr`` (the one run's own error: it
misses what depends on the run's point, by 2-3 times above the data's rank, so
it is no error bar of the estimate -- docs/chib.md; the benchmark times the
paper's one run per rank, the paper recipes run several), ``seconds_per_rank``,
``max_weight_fraction`` (per rank, the largest single-sample share in any
ordinate's mean: near 1, the estimate rests on one sample),
``ordinate_max_weight_fraction`` (the same per ordinate), ``wall_seconds``,
``paper_seconds``, ``speedup``, ``memory`` (per sampler:
``peak_rss_growth_mb``, ``tracemalloc_peak_mb``, ``seconds_per_sweep``),
``sada_over_block_rss``, ``sada_over_block_numpy``, ``settings``.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from _common import ROOT, recipe_parser, run_recipe, write_results  # noqa: E402

NAME = "chib_nmf"
SHAPE = (100, 75)
PRIOR_RATE = 5.0
TRUE_RANK = 5
PAPER_SECONDS = 835.0
NUM_BURN_IN, NUM_SAMPLES, NUM_REDUCED = 7000, 2000, 5000


def simulate(seed):
    from sepsti.core.random import stream

    rng = stream(seed, 0)
    W = rng.exponential(1.0 / PRIOR_RATE, (SHAPE[0], TRUE_RANK))
    H = rng.exponential(1.0 / PRIOR_RATE, (TRUE_RANK, SHAPE[1]))
    return rng.poisson(W @ H)


def chib_for_rank(args):
    X, rank, seed, method = args
    from sepsti.core.evidence.chib import chib_poisson_nmf

    warnings.filterwarnings("ignore", message="Chib ordinate")  # the weights are reported instead
    start = time.perf_counter()
    options = dict(method="factors", point="mean") if method == "factors" else dict(method="sources")
    result = chib_poisson_nmf(X, rank, PRIOR_RATE, num_burn_in=NUM_BURN_IN, num_samples=NUM_SAMPLES,
                              num_reduced=NUM_REDUCED, seed=seed, **options)
    return (rank, result.log_marginal_likelihood, result.stderr, time.perf_counter() - start,
            float(result.max_weight_fraction.max()), [float(f) for f in result.max_weight_fraction],
            list(result.ordinate_names))


def _single_thread_env():
    env = dict(os.environ)
    for key in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[key] = "1"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


MEMORY_CHILD = r'''
import gc, json, resource, sys, time, tracemalloc
import numpy as np
from sepsti.core.models.pltf import pltf_model
from sepsti.core.samplers import gibbs, sada

sampler, path = sys.argv[1], sys.argv[2]
data = np.load(path)
X, Z1, Z2, Z3 = data["X"], data["Z1"], data["Z2"], data["Z3"]
module = sada if sampler == "sada" else gibbs
options = {"keep_sources": True} if sampler == "block_sources" else {}

def make(X, Z1):
    return pltf_model("fi,ik,kt->ft", dict(k=Z2.shape[1], t=X.shape[1]), prior_shape=1.0,
                      prior_rate=[None, 1.0, 1e-2], fixed={0: Z1})

# compile (or load) the loops on a tiny problem before the baseline
tiny = make(X[:6, :5], Z1[:6])
rng = np.random.default_rng(0)
kernel = module.build_kernel(tiny, X[:6, :5], **options)
kernel(rng, module.init(tiny, X[:6, :5], (Z1[:6], Z2, Z3[:, :5])))
del data, tiny, kernel
model = make(X, Z1)
state = module.init(model, X, (Z1, Z2, Z3))
gc.collect()
# from here on: the sampler's tables and its sweeps, beyond the data, the model and the start
baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
kernel = module.build_kernel(model, X, **options)
start = time.perf_counter()
for _ in range(3):
    state, info = kernel(rng, state)
seconds = (time.perf_counter() - start) / 3
peak_traced = tracemalloc.get_traced_memory()[1]
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"peak_rss_growth_mb": (peak - baseline) / 1024.0, "tracemalloc_peak_mb": peak_traced / 2**20,
                  "seconds_per_sweep": seconds, "log_likelihood": float(info.log_likelihood)}))
'''


def memory_problem(num_frames, seed, path):
    from sepsti.core.models.pltf import pltf_model
    from sepsti.core.random import stream

    rng = stream(seed, 5)
    num_bins, num_templates, num_chords = 1025, 4, 3
    Z1 = rng.gamma(0.3, 1.0, (num_bins, num_templates))
    Z1 /= Z1.sum(axis=0, keepdims=True)
    model = pltf_model("fi,ik,kt->ft", dict(k=num_chords, t=num_frames), prior_shape=1.0,
                       prior_rate=[None, 1.0, 1e-2], fixed={0: Z1})
    truth = model.sample_prior(rng)
    X = model.sample_data(rng, truth)
    start = model.sample_prior(stream(seed, 6))
    np.savez(path, X=X, Z1=Z1, Z2=start[1], Z3=start[2])
    return X.shape, int(X.sum())


def measure_memory(path, sampler):
    completed = subprocess.run([sys.executable, "-c", MEMORY_CHILD, sampler, str(path)], capture_output=True,
                               text=True, env=_single_thread_env(), check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"memory run of {sampler} failed:\n{completed.stderr}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main():
    parser = recipe_parser(f"benchmarks/{NAME}", __doc__.splitlines()[0], plot=True)
    parser.add_argument("--skip-memory", action="store_true", help="only the Chib timing")
    parser.add_argument("--skip-chib", action="store_true", help="only the memory comparison")
    parser.add_argument("--method", choices=("factors", "sources"), default="factors",
                        help="Chib decomposition: factor ordinates at the posterior mean, the H ordinate as a product "
                             "over columns (default), or MLSP'12 eq. 28")
    args = parser.parse_args()
    ranks = list(range(1, 4)) if args.quick else list(range(1, 11))
    results = {"settings": {"shape": SHAPE, "prior_rate": PRIOR_RATE, "true_rank": TRUE_RANK,
                            "num_burn_in": NUM_BURN_IN, "num_samples": NUM_SAMPLES, "num_reduced": NUM_REDUCED,
                            "method": args.method, "workers": 2, "seed": args.seed,
                            "load_average_at_start": os.getloadavg()}}
    if not args.skip_chib:
        X = simulate(args.seed)
        os.environ.update({k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
        chib_for_rank((X[:4, :4], 1, 0, args.method))  # compile the loops once before the clock starts
        start = time.perf_counter()
        # largest ranks first, so the two workers finish together
        with ProcessPoolExecutor(max_workers=2) as pool:
            rows = list(pool.map(chib_for_rank, [(X, r, args.seed, args.method) for r in sorted(ranks, reverse=True)]))
        wall = time.perf_counter() - start
        rows.sort()
        results.update({"ranks": ranks, "chib": [r[1] for r in rows], "chib_run_stderr": [r[2] for r in rows],
                        "seconds_per_rank": [r[3] for r in rows], "max_weight_fraction": [r[4] for r in rows],
                        "ordinate_max_weight_fraction": [dict(zip(r[6], r[5])) for r in rows],
                        "wall_seconds": wall, "paper_seconds": PAPER_SECONDS,
                        "speedup": None if args.quick else PAPER_SECONDS / wall, "total_count": int(X.sum())})
        print(f"{'R':>3s} {'log p(X | R)':>14s} {'run s.e.':>8s} {'seconds':>8s} {'max weight':>10s}")
        for rank, value, error, seconds, weight, weights, names in rows:
            print(f"{rank:3d} {value:14.2f} {error:8.2f} {seconds:8.1f} {weight:10.2f}  "
                  + " ".join(f"{n}:{w:.2f}" for n, w in zip(names, weights)))
        paper = ("(--quick: the paper's 835 s are for 10 ranks, no ratio)" if args.quick else
                 f"paper's C {PAPER_SECONDS:.0f} s (4-core laptop): ratio {PAPER_SECONDS / wall:.1f}x")
        print(f"Chib for {len(ranks)} ranks: ours {wall:.1f} s wall (2 processes), {paper}; load average at start "
              f"{results['settings']['load_average_at_start'][0]:.1f}")
    if not args.skip_memory:
        num_frames = 250 if args.quick else 1000
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "model3.npz"
            shape, total = memory_problem(num_frames, args.seed, path)
            memory = {name: measure_memory(path, name) for name in ("sada", "block_sources", "block")}
        results["memory"] = memory
        results["memory_problem"] = {"shape": list(shape), "num_templates": 4, "num_chords": 3, "total_count": total}
        block_growth = memory["block_sources"]["peak_rss_growth_mb"]
        results["sada_over_block_rss"] = (None if args.quick or block_growth <= 0
                                          else memory["sada"]["peak_rss_growth_mb"] / block_growth)
        results["sada_over_block_numpy"] = (memory["sada"]["tracemalloc_peak_mb"]
                                            / memory["block_sources"]["tracemalloc_peak_mb"])
        print(f"\nModel III, X {shape[0]} x {shape[1]}, |V| = 12 |V0|: peak RSS growth over 3 sweeps / "
              "NumPy peak / seconds per sweep")
        for name, entry in memory.items():
            print(f"  {name:14s} {entry['peak_rss_growth_mb']:8.1f} MB {entry['tracemalloc_peak_mb']:8.1f} MB "
                  f"{entry['seconds_per_sweep']:7.2f} s")
        rss = ("the peak RSS growth not compared (too small at this size)" if results["sada_over_block_rss"] is None
               else f"{results['sada_over_block_rss']:.3f} of the peak RSS growth")
        print(f"SADA / block (sources kept, Alg. 1): {rss}, {results['sada_over_block_numpy']:.3f} of the NumPy peak")
    write_results(args, results, figure(results))


def figure(results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    if "ranks" in results:
        axes[0].plot(results["ranks"], results["chib"], "o-", label="one run per rank")
        axes[0].axvline(results["settings"]["true_rank"], color="k", ls=":", label="true R")
        axes[0].set_xlabel("rank R")
        axes[0].set_ylabel("log p(X | R) (Chib)")
        axes[0].set_title(f"{len(results['ranks'])} ranks: {results['wall_seconds']:.0f} s here; paper (C): "
                          f"{PAPER_SECONDS:.0f} s for 10")
        axes[0].legend()
    if "memory" in results:
        names = list(results["memory"])
        axes[1].bar(names, [results["memory"][n]["peak_rss_growth_mb"] for n in names])
        axes[1].set_ylabel("peak RSS growth (MB)")
        axes[1].set_title("Model III, 3 sweeps")
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
