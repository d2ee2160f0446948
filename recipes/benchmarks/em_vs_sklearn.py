"""EM for Poisson NMF against scikit-learn's KL multiplicative updates, same input, same run.

Both factorize the 257 × 1661 NOIZEUS training matrix (clean sp01–sp20 through
:func:`sepsti.features.training_matrix`; a synthetic Gamma matrix of that shape when the corpus
is absent) at rank R = 256 from the same starting factors, for the same number of iterations
(``tol=0`` for both; scikit-learn's ``n_iter_`` is checked), each in float64 and in float32
(scikit-learn computes in the dtype of its input, as we do). The headline is the application's
configuration (``sepsti train`` runs EM in float32 with the default threads) against
scikit-learn as a user calls it on the same matrix (float64, as ``training_matrix`` returns it,
default threads). Every pair is printed with its ratio, under the default threads and with
BLAS limited to one thread (threadpoolctl); the thread counts are printed: scikit-learn uses
multi-threaded BLAS, ours splits the columns into blocks run by worker threads, each with
single-threaded BLAS. The time of the four matrix products of an alternating iteration alone,
with the setting's BLAS threads, is printed for reference (the floor of an implementation
that parallelises only the products). Runs alternate (ours and scikit-learn in both dtypes, repeated)
and the median time per iteration is reported, with the load average before and after.
Final objectives (Poisson log-likelihood of the results, in float64) must agree between ours
and scikit-learn in the same dtype.

Usage: ``python recipes/benchmarks/em_vs_sklearn.py [--quick] [--out DIR] [--corpus DIR]``
"""

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from _common import default_corpus, positive_int, recipe_parser, run_recipe, write_results  # noqa: E402

NAME = "em_vs_sklearn"
RANK = 256


def training_matrix(corpus, seed):
    """The clean sp01–sp20 magnitudes at 8 kHz (as `sepsti train` reads them), or a synthetic matrix that shape."""
    if corpus is not None:
        from sepsti.training import train_split

        return train_split(corpus, 8000).matrix()[0], f"NOIZEUS clean sp01-sp20 at 8 kHz ({corpus})"
    rng = np.random.default_rng(seed)
    return rng.gamma(0.5, 1500.0, (257, 1661)), "synthetic Gamma(0.5, 1500) matrix (NOIZEUS not found)"


def run_ours(X, W, H, num_iter):
    from sepsti.core.factorization import poisson_nmf_em

    start = time.perf_counter()
    result = poisson_nmf_em(X, W, H, max_iter=num_iter, tol=0)
    return time.perf_counter() - start, result.W, result.H


def run_sklearn(X, W, H, num_iter):
    from sklearn.decomposition import NMF

    model = NMF(W.shape[1], init="custom", beta_loss="kullback-leibler", solver="mu",
                max_iter=num_iter, tol=0)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        W_out = model.fit_transform(X, W=W.copy(), H=H.copy())
    elapsed = time.perf_counter() - start
    if model.n_iter_ != num_iter:
        raise RuntimeError(f"scikit-learn ran {model.n_iter_} iterations, not {num_iter}")
    if W_out.dtype != X.dtype:
        raise RuntimeError(f"scikit-learn computed in {W_out.dtype}, not {X.dtype}")
    return elapsed, W_out, model.components_


def products_only(X, W, H, num_iter):
    """Time of the four matrix products one alternating iteration cannot avoid."""
    P = np.empty(X.shape, dtype=X.dtype)
    start = time.perf_counter()
    for _ in range(num_iter):
        np.dot(W, H, out=P)
        P @ H.T
        np.dot(W, H, out=P)
        W.T @ P
    return time.perf_counter() - start


def thread_counts(X, W, H):
    """(BLAS threads, our worker threads) in the current threadpoolctl setting."""
    from threadpoolctl import threadpool_info

    from sepsti.core.factorization import poisson_nmf_em

    blas = max([info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"],
               default=1)
    return blas, poisson_nmf_em(X, W, H, max_iter=1, tol=0, track_log_likelihood=False).num_threads


RUNS = (("ours", "float64"), ("ours", "float32"), ("sklearn", "float64"), ("sklearn", "float32"))


def measure(inputs, num_iter, repeats):
    """Median seconds per iteration and the last result of every (who, dtype), alternating."""
    times = {key: [] for key in RUNS}
    floors = {dtype: [] for dtype in inputs}
    fits = {}
    for _ in range(repeats):
        for dtype, (X, W, H) in inputs.items():
            floors[dtype].append(products_only(X, W, H, num_iter) / num_iter)
        for who, dtype in RUNS:
            run = run_ours if who == "ours" else run_sklearn
            elapsed, W_out, H_out = run(*inputs[dtype], num_iter)
            times[who, dtype].append(elapsed / num_iter)
            fits[who, dtype] = (W_out, H_out)
    return ({key: float(np.median(value)) for key, value in times.items()},
            {key: float(np.median(value)) for key, value in floors.items()}, fits)


def load_average():
    import os

    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def main(argv=None):
    parser = recipe_parser(f"benchmarks/{NAME}", __doc__.splitlines()[0], plot=True)
    parser.add_argument("--corpus", type=Path, default=None,
                        help="NOIZEUS folder (default: $SEPSTI_NOIZEUS or ../shared/data/noizeus, else a synthetic "
                             "matrix)")
    parser.add_argument("--iterations", type=positive_int, default=None,
                        help="iterations per run (default 100, quick 20)")
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_limits

    from sepsti.core.factorization import initialize_nmf, poisson_log_likelihood

    corpus = args.corpus or default_corpus()
    X, source = training_matrix(corpus, args.seed)
    X = np.asarray(X, dtype=np.float64)
    num_iter = (20 if args.quick else 100) if args.iterations is None else args.iterations
    repeats = 3 if args.quick else 7
    W0, H0 = initialize_nmf(X, RANK, args.seed)
    inputs = {dtype: tuple(a.astype(dtype) for a in (X, W0, H0)) for dtype in ("float64", "float32")}
    print(f"X: {X.shape[0]} x {X.shape[1]} ({source}), rank {RANK}, {num_iter} iterations, "
          f"median of {repeats} alternating runs; same starting factors (rounded to float32 for float32)")
    # warm-up: page in both code paths and the BLAS threads
    for arrays in inputs.values():
        run_ours(*arrays, 2)
        run_sklearn(*arrays, 2)

    results = {"shape": list(X.shape), "source": source, "rank": RANK, "iterations": num_iter,
               "repeats": repeats, "settings": {}}
    for label, threads in (("default threads", None), ("1 BLAS thread", 1)):
        load_before = load_average()
        with threadpool_limits(limits=threads):
            blas_threads, workers = thread_counts(*inputs["float64"])
            times, floors, fits = measure(inputs, num_iter, repeats)
        load_after = load_average()
        ll = {key: poisson_log_likelihood(X, *fit) for key, fit in fits.items()}
        ours_threads = "1 BLAS thread each" if workers > 1 else f"{blas_threads} BLAS thread(s)"
        print(f"\n{label} (load average {load_before:.1f} before, {load_after:.1f} after): "
              f"scikit-learn {blas_threads} BLAS thread(s); ours {workers} worker thread(s), {ours_threads}")
        for dtype in inputs:
            ours, theirs = times["ours", dtype], times["sklearn", dtype]
            print(f"  {dtype}: ours {ours * 1e3:7.2f} ms/iter   scikit-learn {theirs * 1e3:7.2f} ms/iter   "
                  f"ratio {theirs / ours:5.2f}x   (4 matrix products alone, {blas_threads} BLAS thread(s): "
                  f"{floors[dtype] * 1e3:.2f} ms)")
        for who in ("ours", "sklearn"):
            print(f"  {who} float64 / float32 time: {times[who, 'float64'] / times[who, 'float32']:.2f}x")
        headline = times["sklearn", "float64"] / times["ours", "float32"]
        note = "   <- headline (application vs. scikit-learn on the float64 matrix)" if threads is None else ""
        print(f"  ours float32 against scikit-learn float64: {headline:.2f}x{note}")
        setting = {"blas_threads": blas_threads, "our_worker_threads": workers,
                   "load_average": [load_before, load_after],
                   "ms_per_iter": {f"{who} {dtype}": value * 1e3 for (who, dtype), value in times.items()},
                   "products_only_ms_per_iter": {dtype: value * 1e3 for dtype, value in floors.items()},
                   "speedup_same_dtype": {dtype: times["sklearn", dtype] / times["ours", dtype]
                                          for dtype in inputs},
                   "speedup_ours_float32_vs_sklearn_float64": headline,
                   "log_likelihood": {f"{who} {dtype}": value for (who, dtype), value in ll.items()}}
        for dtype, tolerance in (("float64", 1e-6), ("float32", 1e-4)):
            relative = abs(ll["ours", dtype] - ll["sklearn", dtype]) / abs(ll["sklearn", dtype])
            print(f"  {dtype} final log-lik ours {ll['ours', dtype]:.8e} sklearn {ll['sklearn', dtype]:.8e} "
                  f"(rel. diff {relative:.1e})")
            setting[f"relative_difference_{dtype}"] = relative
            if relative > tolerance:
                raise SystemExit(f"{dtype}: final objectives disagree: relative difference {relative:.2e}")
        results["settings"][label] = setting
    results["headline_speedup"] = results["settings"]["default threads"]["speedup_ours_float32_vs_sklearn_float64"]
    print(f"\nheadline: {results['headline_speedup']:.2f}x")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.2))
    labels = list(results["settings"])
    positions = np.arange(len(labels))
    for offset, (who, dtype) in zip((-0.3, -0.1, 0.1, 0.3), RUNS):
        heights = [results["settings"][k]["ms_per_iter"][f"{who} {dtype}"] for k in labels]
        name = "sepsti EM" if who == "ours" else "scikit-learn KL-MU"
        axis.bar(positions + offset, heights, 0.2, label=f"{name} {dtype}")
    axis.set_xticks(positions, labels)
    axis.set_ylabel("ms per iteration")
    axis.set_title(f"Poisson NMF, {X.shape[0]}x{X.shape[1]}, R={RANK}")
    axis.legend(fontsize=7)
    write_results(args, results, figure)


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
