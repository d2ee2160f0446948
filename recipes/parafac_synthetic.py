"""PARAFAC'18 Fig. 2a/2b: log marginal likelihood per rank on a small synthetic tensor.

Data: X (10 × 15 × 20) drawn from Poisson PARAFAC with exponential priors of
rate λ = 3 at a known true rank (``--true-rank``, default 2). For R = 1..11:
STI with SGLD and with pSGLD (T = 10 intervals, uniform grid t_i = i/10,
N_s = IJK/25 entries drawn with replacement per iteration, α = 0.99,
σ = 1e−5, step (a/l)^b with a = 1e−8, b = 0.51 during burn-in then fixed),
L = 2000 and L = 4000 iterations per temperature keeping the last 500; and
Chib's method from Gibbs output (800 kept sweeps after 400 burn-in), ``--chib-runs``
(4) independent runs per rank whose spread is the standard error (docs/chib.md).

Settings chosen where the paper is silent: T counts intervals (11 chains per
rank); t = 0 uses 500 independent prior draws (the power posterior at t = 0
is the prior); each chain starts from a prior draw; each kept iteration
scores the sample *before* the update on the update's subsample (unbiased;
eq. 7 read literally scores the sample after it, which is biased upwards);
the trapezoid rule in t.

With ``--data-seeds N`` (default 5) STI-SGLD and STI-pSGLD (L = 2000) and Chib
are repeated on N − 1 further data draws: each draw records the three
selected ranks and the mean absolute gap of each STI estimate to Chib's.

Run: ``python recipes/parafac_synthetic.py [--quick] [--out DIR] [--seed S] [--chib-runs N]``.
JSON keys: ``true_R``, ``ranks``, ``sti_sgld``, ``sti_psgld`` (each by L),
``chib`` (``log_marginal_likelihood``, ``stderr``, ``runs``: each run's estimate,
``max_weight_fraction``, ``selected_rank``), ``data_seeds``, ``checks``,
``settings``, ``seconds``.
"""

import time
import warnings

import numpy as np

from _common import add_chib_runs, chib_runs, positive_int, recipe_parser, run_recipe, write_results

from sepsti.core.evidence.chib import chib_log_marginal_likelihood
from sepsti.core.evidence.parafac_rank import select_parafac_rank
from sepsti.core.models.pltf import pltf_model
from sepsti.core.random import KEY_LIMIT, stream
from sepsti.corpora.tensors import simulate_dense

NAME = "parafac_synthetic"
SHAPE = (10, 15, 20)
PRIOR_RATE = 3.0


def chib_per_rank(X, ranks, *, num_samples, num_burn_in, seed, num_runs):
    dims = dict(zip("ijk", X.shape))
    rows = [chib_runs(chib_log_marginal_likelihood,
                      pltf_model("ir,jr,kr->ijk", dict(dims, r=int(rank)), prior_shape=1.0, prior_rate=PRIOR_RATE),
                      X.astype(np.int64), num_runs=num_runs, num_burn_in=num_burn_in, num_samples=num_samples,
                      method="factors", seed=seed) for rank in ranks]
    values = np.array([row["value"] for row in rows])
    return {"log_marginal_likelihood": values, "stderr": np.array([row["stderr"] for row in rows]),
            "runs": [row["runs"] for row in rows], "max_weight_fraction": [row["max_weight_fraction"] for row in rows],
            "selected_rank": int(ranks[int(np.argmax(values))])}


def sti_per_rank(X, ranks, *, sampler, num_steps, settings, seed):
    result = select_parafac_rank(X, ranks, preset="paper", prior_rate=PRIOR_RATE, sampler=sampler,
                                 num_steps=num_steps, seed=seed, progress=True, **settings)
    return {"log_marginal_likelihood": result.log_marginal_likelihood, "stderr": result.stderr,
            "selected_rank": result.selected_rank, "seconds": result.timing["seconds"],
            "settings": {k: v for k, v in result.settings.items() if k != "data"}}


def draw_summary(seed, sgld, psgld, chib):
    """Selected ranks of one data draw and the mean absolute gap of each STI estimate to Chib's."""
    reference = np.asarray(chib["log_marginal_likelihood"])
    summary = {"seed": seed, "sti_sgld": sgld["selected_rank"], "sti_psgld": psgld["selected_rank"],
               "chib": chib["selected_rank"]}
    for key, entry in (("sgld", sgld), ("psgld", psgld)):
        summary[f"gap_{key}"] = float(np.mean(np.abs(np.asarray(entry["log_marginal_likelihood"]) - reference)))
        summary[f"sti_{key}_log_marginal_likelihood"] = entry["log_marginal_likelihood"]
    summary["chib_log_marginal_likelihood"] = reference
    return summary


def main():
    parser = recipe_parser(NAME, __doc__.splitlines()[0], plot=True)
    parser.add_argument("--true-rank", type=int, default=2, help="rank of the simulated data (default 2)")
    parser.add_argument("--data-seeds", type=positive_int, default=5,
                        help="data draws for the selection check (default 5)")
    add_chib_runs(parser)
    args = parser.parse_args()
    data_seeds = 1 if args.quick else args.data_seeds
    if args.seed + data_seeds - 1 >= KEY_LIMIT:
        parser.error(f"--seed {args.seed}: with --data-seeds {data_seeds}, the last draw's seed "
                     f"{args.seed + data_seeds - 1} is not below 2**32")
    started = time.perf_counter()
    warnings.simplefilter("ignore", RuntimeWarning)  # short-trace MCSE warnings: the stderr is reported anyway

    ranks = np.arange(1, 7) if args.quick else np.arange(1, 12)
    lengths = (1000, 2000) if args.quick else (2000, 4000)
    chib_samples = 400 if args.quick else 800
    n_entries = int(np.prod(SHAPE))
    settings = dict(num_intervals=10, num_keep=500, subset_size=n_entries // 25, step_a=1e-8, step_b=0.51,
                    alpha=0.99, sigma=1e-5)

    X, _ = simulate_dense(SHAPE, args.true_rank, prior_rate=PRIOR_RATE, rng=stream(args.seed, 0))
    results = {"true_R": args.true_rank, "ranks": ranks, "shape": SHAPE, "prior_rate": PRIOR_RATE,
               "total_count": float(X.sum()), "sti_sgld": {}, "sti_psgld": {}}
    for length in lengths:
        for sampler in ("sgld", "psgld"):
            print(f"STI-{sampler.upper()} L={length}", flush=True)
            results[f"sti_{sampler}"][str(length)] = sti_per_rank(X, ranks, sampler=sampler, num_steps=length,
                                                                 settings=settings, seed=args.seed)
    print("Chib", flush=True)
    results["chib"] = chib_per_rank(X, ranks, num_samples=chib_samples, num_burn_in=chib_samples // 2,
                                    seed=args.seed, num_runs=args.chib_runs)

    # the selection check on further data draws: STI-SGLD and STI-pSGLD at the shorter L, and Chib
    short = str(lengths[0])
    draws = [draw_summary(args.seed, results["sti_sgld"][short], results["sti_psgld"][short], results["chib"])]
    for extra in range(1, data_seeds):
        seed = args.seed + extra
        print(f"data seed {seed}", flush=True)
        X_extra, _ = simulate_dense(SHAPE, args.true_rank, prior_rate=PRIOR_RATE, rng=stream(seed, 0))
        sgld, psgld = (sti_per_rank(X_extra, ranks, sampler=sampler, num_steps=lengths[0], settings=settings,
                                    seed=seed) for sampler in ("sgld", "psgld"))
        chib = chib_per_rank(X_extra, ranks, num_samples=chib_samples, num_burn_in=chib_samples // 2, seed=seed,
                             num_runs=args.chib_runs)
        draws.append(draw_summary(seed, sgld, psgld, chib))
        print(f"  selected: SGLD {draws[-1]['sti_sgld']}, PSGLD {draws[-1]['sti_psgld']}, Chib {draws[-1]['chib']}; "
              f"mean |gap to Chib|: SGLD {draws[-1]['gap_sgld']:.1f}, PSGLD {draws[-1]['gap_psgld']:.1f}", flush=True)
    results["data_seeds"] = draws

    chib = results["chib"]["log_marginal_likelihood"]
    gaps = {sampler: {length: float(np.mean(np.abs(
        np.asarray(results[f"sti_{sampler}"][length]["log_marginal_likelihood"]) - chib)))
        for length in results[f"sti_{sampler}"]} for sampler in ("sgld", "psgld")}
    results["checks"] = {
        "psgld_selects_true_rank": results["sti_psgld"][short]["selected_rank"] == args.true_rank,
        "psgld_agrees_with_chib": results["sti_psgld"][short]["selected_rank"] == results["chib"]["selected_rank"],
        "psgld_true_rank_draws": sum(d["sti_psgld"] == args.true_rank for d in draws),
        "chib_true_rank_draws": sum(d["chib"] == args.true_rank for d in draws),
        "num_draws": len(draws),
        "mean_abs_gap_to_chib": gaps,
        "psgld_closer_than_sgld_at_short_L": gaps["psgld"][short] < gaps["sgld"][short],
        "psgld_closer_than_sgld_draws": sum(d["gap_psgld"] < d["gap_sgld"] for d in draws),
    }
    results["settings"] = dict(results["sti_psgld"][short].pop("settings"), lengths=list(lengths),
                               chib_samples=chib_samples, chib_burn_in=chib_samples // 2,
                               chib_runs=args.chib_runs, quick=args.quick)
    for sampler in ("sgld", "psgld"):
        for entry in results[f"sti_{sampler}"].values():
            entry.pop("settings", None)
    results["seconds"] = time.perf_counter() - started

    print(f"{'R':>3} " + " ".join(f"{'SGLD L=' + L:>13} {'PSGLD L=' + L:>13}" for L in map(str, lengths))
          + f" {'Chib':>10}")
    for n, rank in enumerate(ranks):
        row = " ".join(f"{results['sti_sgld'][str(L)]['log_marginal_likelihood'][n]:13.1f} "
                       f"{results['sti_psgld'][str(L)]['log_marginal_likelihood'][n]:13.1f}" for L in lengths)
        print(f"{rank:3d} {row} {chib[n]:10.1f}")
    print(f"L={short}: {'seed':>4} {'SGLD':>4} {'PSGLD':>5} {'Chib':>4} {'|SGLD-Chib|':>11} {'|PSGLD-Chib|':>12}")
    for d in draws:
        print(f"{'':7} {d['seed']:4d} {d['sti_sgld']:4d} {d['sti_psgld']:5d} {d['chib']:4d} "
              f"{d['gap_sgld']:11.1f} {d['gap_psgld']:12.1f}")
    print("checks:", results["checks"])
    write_results(args, results, figure(results, lengths))


def figure(results, lengths):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(lengths), figsize=(5 * len(lengths), 3.8), sharey=True)
    ranks = np.asarray(results["ranks"])
    for ax, length in zip(np.atleast_1d(axes), lengths):
        for key, label, marker in (("sti_sgld", "STI-SGLD", "o"), ("sti_psgld", "STI-PSGLD", "s")):
            entry = results[key][str(length)]
            ax.errorbar(ranks, entry["log_marginal_likelihood"], yerr=entry["stderr"], marker=marker,
                        label=label, capsize=2)
        ax.errorbar(ranks, results["chib"]["log_marginal_likelihood"], yerr=results["chib"]["stderr"],
                    marker="^", label="Chib", capsize=2)
        ax.axvline(results["true_R"], color="grey", linestyle=":", label="true R")
        ax.set_title(f"L = {length} (last 500 kept)")
        ax.set_xlabel("rank R")
    np.atleast_1d(axes)[0].set_ylabel("log p(X | R)")
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    run_recipe(main, NAME)
