"""Validation of STI rank selection: estimates against known truths, coverage of their error bars, selections.

Cases (each one or several data draws, ``seed`` = the draw):

* ``gaussian``: the Gaussian additive model (ICASSP'16 Fig. 1) at R_m = 2 and 5,
  exact evidence in closed form (``recipes/sti_gaussian.py``'s settings).
* ``nmf_rank1_icassp``: Poisson NMF at R = 1 on ICASSP'16-shaped counts
  (100 x 75, W, H ~ Exp(5), true R in {1, 3, 6}), exact evidence
  (:func:`sepsti.core.evidence.rank_one.rank_one_log_evidence`), ``select_rank_sti``
  with the preset under test (``--preset``; block presets with 5 x 5 blocks,
  as the paper's synthetic experiment).
* ``nmf_rank1_speech``: Poisson NMF at R = 1 on a 257 x 1661 matrix with
  speech-like magnitudes: Poisson counts around a rank-1 EM fit of the
  NOIZEUS training matrix (or of the synthetic corpus when NOIZEUS is
  absent), lambda = 4e-4, exact evidence.
* ``nmf_rank1_square``: Poisson NMF at R = 1 on square matrices of Poisson(3)
  counts (5 x 5 to 40 x 40) under lambda = 4e-4, the library's default rate:
  the factors' row counts equal and the prior weak, the scale ridge is flat
  between two exponential walls (``docs/rank_selection.md``), exact evidence.
* ``nmf_full_rank``: Poisson NMF at R = min(I, J) = 2 on 8 x 2 to 20 x 2 counts (lambda = 0.5 and 0.2) and
  at R = 3 on 12 x 3 counts (lambda = 1.5), where many W Q, Q^-1 H keep the fit, against its value with W
  integrated out exactly and H by importance sampling
  (:func:`sepsti.core.evidence.small_counts.small_counts_log_evidence`, its standard error entering z), and
  without ``--quick`` AIS from the prior beside it (``ais``), which runs low there.
* ``nmf_icassp``: Poisson NMF at R = 2 .. 8 on ICASSP'16-shaped counts
  (true R = 3) against annealed importance sampling along the same path,
  annealed long (:func:`sepsti.core.evidence.reference_path.annealed_importance_bound`,
  truth_kind "reference": its log mean weight, whose standard error enters z).
* ``parafac_spl18``: Poisson PARAFAC on SPL'18's 10 x 15 x 20 counts (true
  R = 2, lambda = 3) against annealed importance sampling as for
  ``nmf_icassp``, with Chib's method beside it (``method="factors"``; four
  independent runs, ``chib_replicates``; ``chib``), which at R = 3 falls
  below AIS's lower bound (docs/chib.md).

``coverage`` pools the cases with an exact truth: the rms of z = (estimate -
truth) / stderr and the share within 2 standard errors. ``selections``: data
drawn from the model at speech scale (W of an EM dictionary of the training
matrix at the true rank, H its activations) and the rank the default
settings select among candidates around it (``--quick``: R/2, R, 2R; else 16 ... 256).

    python recipes/sti_validation.py [--quick] [--out DIR] [--seed S] [--true-ranks 32,128] [--skip-selections]
        [--ais-runs 3]

``--quick`` keeps every kind of case with fewer draws and ranks.
"""

import time
import warnings

import numpy as np

from _common import (CHIB_RUNS, chib_runs, default_corpus, positive_int, rank_list, recipe_parser, run_recipe,
                     write_results)

from sepsti.core.evidence.rank_one import rank_one_log_evidence
from sepsti.core.evidence.sti_nmf import PRESETS, select_rank_sti
from sepsti.core.random import stream

NAME = "sti_validation"
ICASSP_RATE = 5.0
SPEECH_RATE = 4e-4
SPL18_RATE = 3.0
#: nmf_full_rank's data: (rows, columns = R, lambda, draws) with --quick and without
QUICK_FULL_RANK_DRAWS = [(8, 2, 0.5, 3), (12, 3, 1.5, 1)]
FULL_RANK_DRAWS = [(8, 2, 0.5, 6), (8, 2, 0.2, 3), (10, 2, 0.5, 2), (20, 2, 0.5, 2), (12, 3, 1.5, 4)]
#: Data draws (seeds --seed, --seed + 1, ...) of the most drawn case, nmf_rank1_icassp: --quick and full
QUICK_RANK1_DRAWS, RANK1_DRAWS = 15, 30


def case(name, model, shape, rank, truth, truth_kind, estimate, stderr, seconds, seed, truth_stderr=0.0, **extra):
    """One row of ``cases``; z divides by the estimate's and the truth's standard errors combined."""
    scale = float(np.hypot(stderr, truth_stderr))
    z = (estimate - truth) / scale if scale > 0 else float("inf")
    print(f"{name:>18} {model:>15} R={rank:<3} seed={seed:<3} truth {truth:14.2f} ({truth_kind}) "
          f"estimate {estimate:14.2f} ± {stderr:9.2f}  z {z:+6.2f}  {seconds:6.1f} s", flush=True)
    return {"name": name, "model": model, "shape": list(shape), "rank": int(rank), "seed": int(seed),
            "truth": float(truth), "truth_kind": truth_kind, "estimate": float(estimate), "stderr": float(stderr),
            "truth_stderr": float(truth_stderr), "z": float(z), "seconds": float(seconds), **extra}


def gaussian_cases(seeds, ranks):
    from sepsti.core.models.gaussian_additive import GaussianAdditiveModel
    from sti_gaussian import DEFAULT, PRIOR
    from sepsti.core.evidence.sti import stochastic_thermodynamic_integration

    rows = []
    for seed in seeds:
        _, x = GaussianAdditiveModel.sample(stream(seed, 1000), 5000, 5, **PRIOR)
        for rank in ranks:
            model = GaussianAdditiveModel(x, rank, **PRIOR)
            start = time.perf_counter()
            result = stochastic_thermodynamic_integration(model, model.sample_prior, seed=seed, **DEFAULT)
            rows.append(case("gaussian", "gaussian_additive", x.shape, rank, model.log_marginal_likelihood(), "exact",
                             result.log_marginal_likelihood, result.stderr, time.perf_counter() - start, seed))
    return rows


def icassp_data(seed, true_rank):
    from sepsti.core.models.poisson_nmf import PoissonNMF

    return PoissonNMF.sample(stream(seed, 2000), (100, 75), true_rank, rate_W=ICASSP_RATE, rate_H=ICASSP_RATE)[2]


def nmf_estimate(X, ranks, rate, seed, preset, **overrides):
    if PRESETS[preset].chain.num_blocks is None:
        overrides.pop("num_blocks", None)  # full-data chains
    start = time.perf_counter()
    selection = select_rank_sti(X, ranks, prior_rate=rate, seed=seed, preset=preset, **overrides)
    return selection, time.perf_counter() - start


def nmf_rank1_icassp_cases(seeds, preset):
    rows = []
    for seed in seeds:
        true_rank = (1, 3, 6)[seed % 3]
        X = icassp_data(seed, true_rank)
        selection, seconds = nmf_estimate(X, [1], ICASSP_RATE, seed, preset, num_blocks=5)
        rows.append(case("nmf_rank1_icassp", "poisson_nmf", X.shape, 1, rank_one_log_evidence(X, ICASSP_RATE),
                         "exact", selection.log_marginal_likelihood[0], selection.stderr[0], seconds, seed,
                         true_rank=true_rank, replicates=selection.replicates[0].tolist()))
    return rows


def nmf_rank1_square_cases(seeds, sizes, preset):
    rows = []
    for seed in seeds:
        for size in sizes:
            X = stream(seed, 3000, size).poisson(3, (size, size)).astype(float)
            selection, seconds = nmf_estimate(X, [1], SPEECH_RATE, seed, preset, num_blocks=1)
            rows.append(case("nmf_rank1_square", "poisson_nmf", X.shape, 1, rank_one_log_evidence(X, SPEECH_RATE),
                             "exact", selection.log_marginal_likelihood[0], selection.stderr[0], seconds, seed,
                             replicates=selection.replicates[0].tolist()))
    return rows


def speech_matrix():
    """The NOIZEUS training matrix (257 x 1661), or the synthetic corpus's when NOIZEUS is absent."""
    import tempfile

    from sepsti.training import train_split

    corpus = default_corpus()
    if corpus is not None:
        return train_split(corpus).matrix()[0].astype(np.float64), "noizeus"
    from sepsti.corpora.synth import write_corpus

    with tempfile.TemporaryDirectory() as folder:
        write_corpus(folder, seed=0)
        return train_split(folder).matrix()[0].astype(np.float64), "synthetic"


def em_factors(X, rank, seed, iterations=200):
    from sepsti.core.factorization.em import poisson_nmf_em
    from sepsti.core.parallel.blocks import initial_factors

    W, H = initial_factors(X, rank, stream(seed, 3000, rank))
    fit = poisson_nmf_em(X, W, H, prior_rate_W=SPEECH_RATE, prior_rate_H=SPEECH_RATE, max_iter=iterations, tol=0)
    return fit.W, fit.H


def nmf_rank1_speech_cases(seeds, X0, preset):
    W, H = em_factors(X0, 1, 0)
    rows = []
    for seed in seeds:
        X = stream(seed, 4000).poisson(W @ H).astype(np.float32)
        selection, seconds = nmf_estimate(X, [1], SPEECH_RATE, seed, preset)
        rows.append(case("nmf_rank1_speech", "poisson_nmf", X.shape, 1, rank_one_log_evidence(X, SPEECH_RATE),
                         "exact", selection.log_marginal_likelihood[0], selection.stderr[0], seconds, seed,
                         replicates=selection.replicates[0].tolist(),
                         largest_decrease_se=float(selection.largest_decrease[0])))
    return rows


def ais_cases(name, model_name, density, shape, ranks, selection, seconds, seed, num_temperatures, num_runs,
              beside=lambda rank: {}):
    """One row per rank against annealed importance sampling (its log mean weight) with ``beside(rank)``'s
    entries added."""
    from sepsti.core.evidence.reference_path import annealed_importance_bound

    rows = []
    for index, rank in enumerate(ranks):
        start = time.perf_counter()
        ais = annealed_importance_bound(density, rank, num_temperatures=num_temperatures, num_runs=num_runs,
                                        seed=seed)
        extra = beside(rank)
        rows.append(case(name, model_name, shape, rank, ais["log_mean_weight"], "reference",
                         selection.log_marginal_likelihood[index], selection.stderr[index],
                         seconds / len(ranks), seed, truth_stderr=ais["stderr"], ais=ais,
                         reference_seconds=time.perf_counter() - start, **extra))
    return rows


def full_rank_data(first_seed, draws):
    """``(seed, rank, rate, X)`` of I x J counts, R = min(I, J) = J, for each ``(rows, columns, rate, count)`` of
    ``draws``, seeds from ``first_seed``."""
    from sepsti.core.models.poisson_nmf import PoissonNMF

    for num_rows, rank, rate, count in draws:
        for seed in range(first_seed, first_seed + count):
            yield seed, rank, rate, PoissonNMF.sample(stream(seed, 77), (num_rows, rank), rank, rate_W=rate,
                                                      rate_H=rate)[2]


def nmf_full_rank_cases(first_seed, draws, preset, num_temperatures=None, num_runs=4):
    """``preset``'s estimate at R = min(I, J) on :func:`full_rank_data` against the exact value, with AIS beside
    it at ``num_temperatures`` (none: without)."""
    from sepsti.core.evidence.reference_path import NMFLogDensity, annealed_importance_bound
    from sepsti.core.evidence.small_counts import small_counts_log_evidence

    rows = []
    for seed, rank, rate, X in full_rank_data(first_seed, draws):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=f"rank {rank} = min")  # the rank the case is about
            selection, seconds = nmf_estimate(X, [rank], rate, seed, preset, num_blocks=1)
        start = time.perf_counter()
        exact = small_counts_log_evidence(X, rank, rate, seed=seed)
        extra = {"prior_rate": rate, "counts": int(X.sum()), "reference_seconds": time.perf_counter() - start}
        if num_temperatures is not None:
            extra["ais"] = annealed_importance_bound(NMFLogDensity(X, rate), rank, num_runs=num_runs,
                                                     num_temperatures=num_temperatures, seed=seed)
        rows.append(case("nmf_full_rank", "poisson_nmf", X.shape, rank, exact.log_evidence, "exact",
                         selection.log_marginal_likelihood[0], selection.stderr[0], seconds, seed,
                         truth_stderr=exact.stderr, **extra))
    return rows


def nmf_reference_cases(seed, ranks, num_temperatures, num_runs, preset):
    from sepsti.core.evidence.reference_path import NMFLogDensity

    X = icassp_data(seed, 3)
    selection, seconds = nmf_estimate(X, ranks, ICASSP_RATE, seed, preset, num_blocks=5)
    return ais_cases("nmf_icassp", "poisson_nmf", NMFLogDensity(X, ICASSP_RATE), X.shape, ranks, selection, seconds,
                     seed, num_temperatures, num_runs)


def parafac_cases(seed, ranks, num_temperatures, num_runs, chib_samples):
    from sepsti.core.evidence.chib import chib_log_marginal_likelihood
    from sepsti.core.evidence.parafac_rank import select_parafac_rank
    from sepsti.core.evidence.reference_path import ParafacLogDensity
    from sepsti.core.models.pltf import pltf_model
    from sepsti.corpora.tensors import simulate_dense

    shape = (10, 15, 20)
    X, _ = simulate_dense(shape, 2, prior_rate=SPL18_RATE, rng=stream(seed, 5000))
    start = time.perf_counter()
    selection = select_parafac_rank(X, ranks, prior_rate=SPL18_RATE, seed=seed)
    seconds = time.perf_counter() - start

    def chib(rank):  # beside AIS, not the reference: its runs share a bias that their spread does not hold
        model = pltf_model("ir,jr,kr->ijk", dict(i=shape[0], j=shape[1], k=shape[2], r=int(rank)), prior_shape=1.0,
                           prior_rate=SPL18_RATE)
        runs = chib_runs(chib_log_marginal_likelihood, model, X.astype(np.int64), num_runs=CHIB_RUNS,
                         num_burn_in=chib_samples // 2, num_samples=chib_samples, method="factors", point="mean",
                         seed=seed)
        return {"chib": {"log_marginal_likelihood": runs["value"], "stderr": runs["stderr"], "runs": runs["runs"]}}

    return ais_cases("parafac_spl18", "poisson_parafac", ParafacLogDensity(X, SPL18_RATE), shape, ranks, selection,
                     seconds, seed, num_temperatures, num_runs, beside=chib)


def selection_cases(X0, true_ranks, candidates_of, seed, preset):
    rows = []
    for true_rank in true_ranks:
        W, H = em_factors(X0, true_rank, seed, iterations=100)
        X = stream(seed, 6000, true_rank).poisson(W @ H).astype(np.float32)
        ranks = candidates_of(true_rank)
        selection, seconds = nmf_estimate(X, ranks, SPEECH_RATE, seed, preset, progress=True)
        rows.append({"name": f"speech_true_{true_rank}", "true_rank": int(true_rank), "ranks": ranks,
                     "log_marginal_likelihood": selection.log_marginal_likelihood.tolist(),
                     "stderr": selection.stderr.tolist(), "selected_rank": int(selection.selected_rank),
                     "largest_decrease_se": selection.largest_decrease.tolist(), "seconds": seconds})
        print(f"selection: true R = {true_rank}, candidates {ranks}: selected {selection.selected_rank} "
              f"({seconds:.0f} s)", flush=True)
    return rows


def coverage(cases):
    z = np.array([c["z"] for c in cases if c["truth_kind"] == "exact"])
    return {"n": int(z.size), "rms_z": float(np.sqrt(np.mean(z ** 2))) if z.size else None,
            "share_within_2se": float(np.mean(np.abs(z) < 2)) if z.size else None,
            "mean_z": float(np.mean(z)) if z.size else None}


def main():
    parser = recipe_parser(NAME, __doc__.splitlines()[0], plot=True, seed_offset=RANK1_DRAWS - 1)
    parser.add_argument("--skip-selections", action="store_true", help="leave out the speech-scale selections")
    parser.add_argument("--true-ranks", type=rank_list, default=None,
                        help="true ranks of the speech-scale selections, comma-separated (default: 32 with --quick, "
                             "else 32,128)")
    parser.add_argument("--ais-runs", type=positive_int, default=3,
                        help="annealed importance sampling runs of each nmf_icassp and parafac_spl18 reference "
                             "(default: 3)")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="reference",
                        help="the select_rank_sti preset under test (default: the library's default)")
    args = parser.parse_args()
    quick = args.quick
    true_ranks = args.true_ranks or ([32] if quick else [32, 128])
    if quick and not args.skip_selections and min(true_ranks) < 2:
        parser.error("--true-ranks: at least 2 with --quick (the candidates are R/2, R and 2R)")
    warnings.simplefilter("ignore", RuntimeWarning)
    started = time.perf_counter()
    X0, source = speech_matrix()
    cases = []
    cases += gaussian_cases(range(args.seed, args.seed + (3 if quick else 6)), [2, 5])
    cases += nmf_rank1_icassp_cases(range(args.seed, args.seed + (QUICK_RANK1_DRAWS if quick else RANK1_DRAWS)),
                                     args.preset)
    cases += nmf_rank1_square_cases(range(args.seed, args.seed + (1 if quick else 3)), [5, 10, 20, 40], args.preset)
    cases += nmf_rank1_speech_cases(range(args.seed, args.seed + (1 if quick else 4)), X0, args.preset)
    cases += nmf_full_rank_cases(args.seed, QUICK_FULL_RANK_DRAWS if quick else FULL_RANK_DRAWS, args.preset,
                                 num_temperatures=None if quick else 30_000)
    cases += nmf_reference_cases(args.seed, [2, 4] if quick else list(range(2, 9)), 30_000 if quick else 100_000,
                                 args.ais_runs, args.preset)
    cases += parafac_cases(args.seed, [2] if quick else [1, 2, 3, 4], 30_000 if quick else 100_000, args.ais_runs,
                           400 if quick else 2000)
    selections = []
    if not args.skip_selections:
        candidates_of = (lambda r: [r // 2, r, 2 * r]) if quick else (lambda r: [16, 32, 64, 128, 256])
        selections = selection_cases(X0, true_ranks, candidates_of, args.seed, args.preset)
    preset = PRESETS[args.preset]
    out = {"cases": cases, "coverage": coverage(cases), "selections": selections,
           "settings": {"nmf_preset": {"name": args.preset, "grid": preset.grid.as_dict(),
                                       "chain": preset.chain.as_dict(),
                                       "num_replicates": preset.num_replicates},
                        "speech_matrix": source, "quick": quick, "seed": args.seed, "ais_runs": args.ais_runs},
           "seconds": time.perf_counter() - started}
    within = [abs(c["z"]) < 3 for c in cases]
    print(f"{sum(within)} of {len(cases)} cases within 3 standard errors; coverage {out['coverage']}")
    for entry in selections:
        print(f"{entry['name']}: selected {entry['selected_rank']} (true {entry['true_rank']})")
    write_results(args, out, figure(out))


def figure(out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = out["cases"]
    names = sorted({c["name"] for c in cases})
    selections = out["selections"]
    fig, axes = plt.subplots(1, 2 if selections else 1, figsize=(10 if selections else 5.5, 3.8), squeeze=False)
    left = axes[0, 0]
    for k, name in enumerate(names):
        z = [c["z"] for c in cases if c["name"] == name]
        left.scatter(np.clip(z, -10, 10), np.full(len(z), k) + np.linspace(-0.2, 0.2, len(z)), s=12, zorder=3)
    left.axvspan(-2, 2, color="0.9", zorder=0)
    left.set_yticks(range(len(names)), names)
    left.set_xlabel("z = (estimate − truth) / stderr  (clipped at ±10)")
    if not selections:  # --skip-selections
        fig.tight_layout()
        return fig
    right = axes[0, 1]
    for entry in selections:
        values = np.asarray(entry["log_marginal_likelihood"])
        right.errorbar(entry["ranks"], values - values.max(), yerr=2 * np.asarray(entry["stderr"]), marker="o",
                       capsize=3, label=f"true R = {entry['true_rank']}")
    right.set_xscale("log", base=2)
    right.set_yscale("symlog", linthresh=10.0)
    right.set_xlabel("rank R")
    right.set_ylabel("log p(X | R) − max  (±2 se; symlog)")
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    run_recipe(main, NAME)
