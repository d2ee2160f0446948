"""EM for Poisson NMF against scikit-learn's KL multiplicative updates, same input, same run.

Both factorize the 257 × 1661 NOIZEUS training matrix (clean sp01–sp20 through
:func:`sepsti.features.training_matrix`; a synthetic Gamma matrix of that shape when the corpus
is absent) at rank R = 256 from the same starting factors, for the same number of iterations
(``tol=0`` for ours; ``tol=0`` for scikit-learn, whose ``n_iter_`` is checked). The time of
the four matrix products of an alternating iteration alone is printed as the floor that no
implementation of these updates in the same dtype and BLAS can go below. Runs alternate
(ours, sklearn, ours, ...) and the median time per iteration is reported, under the default
BLAS threads and with BLAS limited to one thread (threadpoolctl). The final objectives (Poisson
log-likelihood of both results) must agree.

Usage: ``python recipes/benchmarks/em_vs_sklearn.py [--quick] [--out DIR] [--corpus DIR]``
"""

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from _common import recipe_parser, write_results  # noqa: E402

NAME = "em_vs_sklearn"
RANK = 256


def _default_corpus():
    import os

    for candidate in (os.environ.get("SEPSTI_NOIZEUS"),
                      Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "noizeus"):
        if candidate and Path(candidate, "clean").is_dir():
            return Path(candidate).resolve()
    return None


def training_matrix(corpus, seed):
    """The clean sp01–sp20 magnitudes, or a synthetic matrix of the same shape."""
    from sepsti import features

    if corpus is not None:
        try:
            from corpora.noizeus import clean_signals

            signals = [y for _, y, _ in clean_signals(corpus, "train")]
        except ImportError:
            import soundfile

            paths = sorted(Path(corpus).rglob("sp[0-9][0-9].wav"))
            signals = [soundfile.read(p)[0] for p in paths if 1 <= int(p.stem[2:]) <= 20]
        return features.training_matrix(signals), f"NOIZEUS clean sp01-sp20 ({corpus})"
    rng = np.random.default_rng(seed)
    return rng.gamma(0.5, 1500.0, (257, 1661)), "synthetic Gamma(0.5, 1500) matrix (NOIZEUS not found)"


def run_ours(X, W, H, num_iter):
    from core.factorization import poisson_nmf_em

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
    return elapsed, W_out, model.components_


def products_only(X, W, H, num_iter):
    """Time of the four matrix products one alternating iteration cannot avoid (a floor)."""
    P = np.empty(X.shape, dtype=X.dtype)
    start = time.perf_counter()
    for _ in range(num_iter):
        np.dot(W, H, out=P)
        P @ H.T
        np.dot(W, H, out=P)
        W.T @ P
    return time.perf_counter() - start


def measure(X, W, H, num_iter, repeats):
    ours, theirs, floor = [], [], []
    for _ in range(repeats):
        floor.append(products_only(X, W, H, num_iter) / num_iter)
        t, W_ours, H_ours = run_ours(X, W, H, num_iter)
        ours.append(t / num_iter)
        t, W_sk, H_sk = run_sklearn(X, W, H, num_iter)
        theirs.append(t / num_iter)
    return (float(np.median(ours)), float(np.median(theirs)), float(np.median(floor)), (W_ours, H_ours),
            (W_sk, H_sk))


def main(argv=None):
    parser = recipe_parser(NAME, __doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None, help="NOIZEUS folder (default: ../shared/data/noizeus)")
    parser.add_argument("--iterations", type=int, default=None, help="iterations per run (default 100, quick 20)")
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_limits

    from core.factorization import initialize_nmf, poisson_log_likelihood

    corpus = args.corpus or _default_corpus()
    X, source = training_matrix(corpus, args.seed)
    num_iter = args.iterations or (20 if args.quick else 100)
    repeats = 3 if args.quick else 5
    W0, H0 = initialize_nmf(X, RANK, args.seed)
    print(f"X: {X.shape[0]} x {X.shape[1]} ({source}), rank {RANK}, {num_iter} iterations, "
          f"median of {repeats} alternating runs")
    # warm-up: page in both code paths and the BLAS threads
    run_ours(X, W0, H0, 2)
    run_sklearn(X, W0, H0, 2)

    results = {"shape": list(X.shape), "source": source, "rank": RANK, "iterations": num_iter,
               "repeats": repeats, "settings": {}}
    for label, threads in (("default threads", None), ("1 BLAS thread", 1)):
        with threadpool_limits(limits=threads):
            ours, theirs, floor, fit_ours, fit_sk = measure(X, W0, H0, num_iter, repeats)
        ll_ours = poisson_log_likelihood(X, *fit_ours)
        ll_sk = poisson_log_likelihood(X, *fit_sk)
        relative = abs(ll_ours - ll_sk) / abs(ll_sk)
        print(f"{label:16s} ours {ours * 1e3:7.2f} ms/iter   scikit-learn {theirs * 1e3:7.2f} ms/iter   "
              f"ratio {theirs / ours:5.2f}x   (4 matrix products alone: {floor * 1e3:.2f} ms)\n"
              f"{'':16s} final log-lik ours {ll_ours:.8e} sklearn {ll_sk:.8e} "
              f"(rel. diff {relative:.1e})")
        results["settings"][label] = {"ours_ms_per_iter": ours * 1e3, "sklearn_ms_per_iter": theirs * 1e3,
                                      "speedup": theirs / ours, "products_only_ms_per_iter": floor * 1e3,
                                      "log_likelihood_ours": ll_ours,
                                      "log_likelihood_sklearn": ll_sk, "relative_difference": relative}
        if relative > 1e-6:
            raise SystemExit(f"final objectives disagree: relative difference {relative:.2e}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5, 3))
    labels = list(results["settings"])
    positions = np.arange(len(labels))
    axis.bar(positions - 0.2, [results["settings"][k]["ours_ms_per_iter"] for k in labels], 0.4, label="sepsti EM")
    axis.bar(positions + 0.2, [results["settings"][k]["sklearn_ms_per_iter"] for k in labels], 0.4,
             label="scikit-learn KL-MU")
    axis.set_xticks(positions, labels)
    axis.set_ylabel("ms per iteration")
    axis.set_title(f"Poisson NMF, {X.shape[0]}x{X.shape[1]}, R={RANK}")
    axis.legend()
    write_results(args.out, NAME, results, figure)


if __name__ == "__main__":
    main()
