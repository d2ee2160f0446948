"""Chib's standard errors against the spread of independent runs.

Cases (``--case``):

- ``readme`` (the default): the README's PLTF example, X (10 × 5 × 8) ~ Poisson(sum_r Z1(i,r) Z2(j,r)
  Z3(k,r)) at rank 3 with every factor entry drawn from Gamma(1, 1) (``numpy.random.default_rng(0)``; 1056
  counts), Chib's method as the README runs it (``method="factors"``, ``blocks="columns"``, 2000 burn-in
  sweeps, 3000 kept, 3000 per reduced run);
- ``spl18``: SPL'18's 10 × 15 × 20 counts at rank 2, λ = 3, as ``sti_validation.py`` draws them (seed 0),
  with its Chib reference's settings (``method="factors"``, ``point="mean"``, 1000 + 2000 sweeps).

``--rank R`` fits another rank than the data's; ``--samples N`` keeps N sweeps and runs N per reduced run.
The runs are repeated through :func:`sepsti.core.evidence.chib.chib_replicates` at seeds ``--seed`` ..
``--seed + groups - 1``, four independent runs each (``--quick``: four groups). The exact evidence is not
known here, but a standard error must match the spread of independent estimates; two are compared with it:

- each run's own standard error (its ordinates' means at its point) against the spread of the runs;
- each group's (the spread of its four runs over 2) against the spread of the groups.

Run: ``python recipes/chib_validation.py [--quick] [--out DIR] [--seed S] [--case C] [--rank R] [--groups G]
[--samples N]``; it writes ``chib_validation_<case>_r<R>[_n<N>]`` (N only when given).
JSON keys: ``runs`` (per run: ``seed``, ``replicate``, ``log_marginal_likelihood``, ``stderr``,
``max_weight_fraction``), ``groups`` (per group: ``seed``, ``log_marginal_likelihood``, ``stderr``),
``summary`` (``runs`` and ``groups``, each: ``spread``, ``stderr_rms``, ``spread_over_stderr`` and its 95 %
interval ``spread_over_stderr_95``; ``mean_of_runs``, ``mean_of_runs_stderr``, ``runs_carried_by_one_sample``),
``settings``, ``seconds``.
"""

import time
import warnings
from typing import NamedTuple

import numpy as np

from _common import number_type, positive_int, recipe_parser, run_recipe, write_results

NAME = "chib_validation"
REPLICATES = 4
MAX_GROUPS = 64
group_count = number_type(int, lambda value: 2 <= value <= MAX_GROUPS, f"an integer from 2 to {MAX_GROUPS}")
sample_count = number_type(int, lambda value: value >= 4, "an integer of at least 4")


def readme_data():
    """The counts of the README's PLTF example (10 × 5 × 8, rank 3, Gamma(1, 1))."""
    from sepsti.core.models.pltf import pltf_model

    model = pltf_model("ir,jr,kr->ijk", dict(i=10, j=5, k=8, r=3), prior_shape=1.0, prior_rate=1.0)
    rng = np.random.default_rng(0)
    return model.sample_data(rng, model.sample_prior(rng))


def spl18_data():
    """SPL'18's counts as ``sti_validation.py`` draws them at seed 0 (10 × 15 × 20, rank 2, λ = 3)."""
    from sepsti.core.random import stream
    from sepsti.corpora.tensors import simulate_dense

    return simulate_dense((10, 15, 20), 2, prior_rate=3.0, rng=stream(0, 5000))[0].astype(np.int64)


class Case(NamedTuple):
    data: object        # () -> counts
    rank: int           # the data's
    prior_rate: float   # of the exponential priors, in the data and the model
    chib: dict          # Chib's settings


CASES = {"readme": Case(readme_data, 3, 1.0, dict(num_burn_in=2000, num_samples=3000, method="factors",
                                                  blocks="columns")),
         "spl18": Case(spl18_data, 2, 3.0, dict(num_burn_in=1000, num_samples=2000, method="factors", point="mean"))}


def results_name(args):
    rank = args.rank or CASES[args.case].rank
    return f"{NAME}_{args.case}_r{rank}" + (f"_n{args.samples}" if args.samples else "")


def spread_check(rows):
    """The spread (ddof 1) of independent estimates against the root mean square of their standard errors, and
    the ratio's 95 % interval (the spread's chi-square law; the errors' own scatter left out)."""
    from scipy.stats import chi2

    values = np.array([row["log_marginal_likelihood"] for row in rows])
    spread = float(values.std(ddof=1))
    rms = float(np.sqrt(np.mean(np.square([row["stderr"] for row in rows]))))
    interval = [spread / rms * np.sqrt((len(values) - 1) / chi2.ppf(q, len(values) - 1)) for q in (0.975, 0.025)]
    return {"spread": spread, "stderr_rms": rms, "spread_over_stderr": spread / rms,
            "spread_over_stderr_95": [float(x) for x in interval]}


def main():
    parser = recipe_parser(NAME, __doc__.splitlines()[0], output=results_name,
                           output_help="chib_validation_CASE_rR[_nN]", plot=True, seed_offset=MAX_GROUPS - 1)
    parser.add_argument("--case", choices=sorted(CASES), default="readme",
                        help="data and Chib's settings: the README's example or SPL'18's counts (default readme)")
    parser.add_argument("--rank", type=positive_int, default=None, metavar="R",
                        help="rank of the model fitted (default: the data's, 3 for readme, 2 for spl18)")
    parser.add_argument("--groups", type=group_count, default=None, metavar="G",
                        help=f"groups of {REPLICATES} independent Chib runs, 2 to {MAX_GROUPS} (default 8; --quick 4)")
    parser.add_argument("--samples", type=sample_count, default=None, metavar="N",
                        help="sweeps each Chib run keeps, and each of its reduced runs (default: the case's)")
    args = parser.parse_args()
    from sepsti.core.evidence.chib import MAX_WEIGHT_WARNING, chib_log_marginal_likelihood, chib_replicates
    from sepsti.core.models.pltf import pltf_model

    case = CASES[args.case]
    rank = args.rank or case.rank
    X = case.data()
    model = pltf_model("ir,jr,kr->ijk", dict(zip("ijk", X.shape), r=rank), prior_shape=1.0,
                       prior_rate=case.prior_rate)
    chib = dict(case.chib, **({"num_samples": args.samples} if args.samples else {}))
    groups = args.groups or (4 if args.quick else 8)
    start = time.perf_counter()
    runs, group_rows = [], []
    for group in range(groups):
        seed = args.seed + group
        with warnings.catch_warnings():  # the runs carried by one sample are counted in the summary instead
            warnings.filterwarnings("ignore", message=r"Chib: \d+ of \d+ runs")
            result = chib_replicates(chib_log_marginal_likelihood, model, X, seed=seed, num_replicates=REPLICATES,
                                     **chib)
        for replicate, run in enumerate(result.runs):
            runs.append({"seed": seed, "replicate": replicate, "log_marginal_likelihood": run.log_marginal_likelihood,
                         "stderr": run.stderr, "max_weight_fraction": float(run.max_weight_fraction.max())})
        group_rows.append({"seed": seed, "log_marginal_likelihood": result.log_marginal_likelihood,
                           "stderr": result.stderr})
        print(f"seed {seed}: runs " + ", ".join(f"{run.log_marginal_likelihood:.2f} +- {run.stderr:.2f}"
                                                for run in result.runs)
              + f"; together {result.log_marginal_likelihood:.2f} +- {result.stderr:.2f}", flush=True)
    values = np.array([run["log_marginal_likelihood"] for run in runs])
    summary = {"runs": spread_check(runs), "groups": spread_check(group_rows), "mean_of_runs": float(values.mean()),
               "mean_of_runs_stderr": float(values.std(ddof=1) / np.sqrt(len(values))),
               "runs_carried_by_one_sample": sum(run["max_weight_fraction"] > MAX_WEIGHT_WARNING for run in runs)}
    print()
    for name, label in (("runs", f"{len(runs)} runs"), ("groups", f"{groups} groups of {REPLICATES}")):
        check = summary[name]
        print(f"{label}: spread {check['spread']:.2f} against their standard errors {check['stderr_rms']:.2f} (rms): "
              f"ratio {check['spread_over_stderr']:.2f} [{check['spread_over_stderr_95'][0]:.2f}, "
              f"{check['spread_over_stderr_95'][1]:.2f}]")
    print(f"mean of the runs {summary['mean_of_runs']:.2f} +- {summary['mean_of_runs_stderr']:.2f}; "
          f"{summary['runs_carried_by_one_sample']} of {len(runs)} runs have an ordinate carried by one sample")
    results = {"runs": runs, "groups": group_rows, "summary": summary,
               "settings": {"case": args.case, "spec": "ir,jr,kr->ijk", "shape": list(X.shape), "rank": rank,
                            "data_rank": case.rank, "prior": f"Gamma(1, {case.prior_rate:g})", "chib": chib,
                            "replicates": REPLICATES, "groups": groups, "seed": args.seed},
               "seconds": time.perf_counter() - start}
    write_results(args, results, figure(results))


def figure(results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    ax.axhline(results["summary"]["mean_of_runs"], color="k", lw=1, label="mean of the runs")
    runs = results["runs"]
    ax.errorbar(np.arange(len(runs)), [run["log_marginal_likelihood"] for run in runs],
                yerr=[2 * run["stderr"] for run in runs], fmt="o", ms=3, color="tab:blue", capsize=2,
                label="one run ± 2 of its own s.e.")
    centres = np.arange(len(results["groups"])) * REPLICATES + (REPLICATES - 1) / 2
    ax.errorbar(centres, [row["log_marginal_likelihood"] for row in results["groups"]],
                yerr=[2 * row["stderr"] for row in results["groups"]], fmt="s", color="tab:red", capsize=4,
                label=f"{REPLICATES} runs ± 2 s.e. of their spread")
    ax.set_xlabel("run")
    ax.set_ylabel("log p(X)")
    settings = results["settings"]
    ax.set_title(f"Chib's method, {settings['case']} counts at R = {settings['rank']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    run_recipe(main, NAME)
