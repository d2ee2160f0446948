"""ICASSP'16 Fig. 3: STI on Poisson NMF data drawn at two true ranks, beside Chib's estimate.

Data: W, H ~ Exp(5), X ~ Poisson(WH), I = 100, J = 75, for two true R. For
R_m = 1..10 the log marginal likelihood is estimated by STI with
block-parallel SGLD (5 x 5 blocks, K = 10000 keeping the last 2000, a = 1e-5,
b = 0.51, step fixed after burn-in) and by Chib's method from the Gibbs
output of ``core.evidence.chib`` (9000 Gibbs samples, 7000 burn-in, 5000
reduced runs).

Temperature grid: ``--schedule paper`` is ICASSP'16's, T = 5 intervals on a
uniform grid with the trapezoid rule and eq. 9 (theta^(k) on S^(k));
``--schedule power`` (default) is T = 10 intervals on t_i = (i/T)^5 with
Simpson's rule in u = t^(1/5) and theta^(k-1) scored on S^(k) (see README:
the uniform grid cannot resolve E_t[log p] near t = 0). ``--quick``: R_m
in 1..6, K = 2000 keeping 500, Chib 1500 + 500 + 500.
"""

import time
import warnings

import numpy as np

from _common import recipe_parser, write_results

from core.evidence.sti_nmf import select_rank_sti
from core.models.poisson_nmf import PoissonNMF
from core.random import stream

NAME = "sti_nmf_synthetic"
SCHEDULES = {
    "paper": dict(num_intervals=5, schedule="uniform", power=1.0, rule="trapezoid", evaluate="after_update"),
    "power": dict(num_intervals=10, schedule="power", power=5.0, rule="simpson", evaluate="before_update"),
}


def main():
    parser = recipe_parser(NAME, __doc__.splitlines()[0])
    parser.add_argument("--schedule", choices=sorted(SCHEDULES), default="power")
    parser.add_argument("--true-ranks", default="3,6")
    args = parser.parse_args()
    true_ranks = [int(r) for r in args.true_ranks.split(",")]
    ranks = list(range(1, 7)) if args.quick else list(range(1, 11))
    num_steps, num_keep = (2000, 500) if args.quick else (10000, 2000)
    chib_counts = (1500, 500, 500) if args.quick else (7000, 2000, 5000)
    rate = 5.0
    grid = SCHEDULES[args.schedule]
    from core.evidence.chib import chib_poisson_nmf

    out = {"true_R": true_ranks, "ranks": ranks, "sti": [], "stderr": [], "chib": [], "chib_stderr": [],
           "chib_max_weight_fraction": [], "seconds_sti": [], "seconds_chib": [],
           "settings": {"I": 100, "J": 75, "rate": rate, "num_steps": num_steps, "num_keep": num_keep,
                        "num_blocks": 5, "step_a": 1e-5, "step_b": 0.51, "sampler": "sgld", **grid,
                        "chib_burn_in_samples_reduced": chib_counts, "T_counts": "intervals"}}
    for index, true_rank in enumerate(true_ranks):
        _, _, X = PoissonNMF.sample(stream(args.seed, 2000 + index), (100, 75), true_rank, rate_W=rate, rate_H=rate)
        start = time.perf_counter()
        selection = select_rank_sti(X, ranks, num_steps=num_steps, num_keep=num_keep, num_blocks=5, sampler="sgld",
                                    step_a=1e-5, step_b=0.51, prior_rate=rate, seed=args.seed, progress=True, **grid)
        out["seconds_sti"].append(time.perf_counter() - start)
        out["sti"].append([r.log_evidence for r in selection.results])
        out["stderr"].append([r.stderr for r in selection.results])
        start = time.perf_counter()
        values, errors, shares = [], [], []
        for rank in ranks:
            with warnings.catch_warnings():
                # the weight concentration it warns about is recorded in the JSON instead
                warnings.simplefilter("ignore")
                result = chib_poisson_nmf(X.astype(np.int64), rank, rate, num_burn_in=chib_counts[0],
                                          num_samples=chib_counts[1], num_reduced=chib_counts[2],
                                          method="factors", point="mean", seed=args.seed + rank)
            values.append(float(result.log_marginal_likelihood))
            errors.append(float(result.stderr))
            shares.append(float(np.max(result.max_weight_fraction)))
        out["chib"].append(values)
        out["chib_stderr"].append(errors)
        out["chib_max_weight_fraction"].append(shares)
        out["seconds_chib"].append(time.perf_counter() - start)
        print(f"true R = {true_rank}: STI argmax {ranks[int(np.argmax(out['sti'][-1]))]}, "
              f"Chib argmax {ranks[int(np.argmax(out['chib'][-1]))]}; "
              f"STI {out['seconds_sti'][-1]:.0f} s, Chib {out['seconds_chib'][-1]:.0f} s")
        for rank, sti, se, chib, chib_se, share in zip(ranks, out["sti"][-1], out["stderr"][-1], values, errors,
                                                       shares):
            print(f"  R={rank:>2}  STI {sti:10.1f} ± {se:5.1f}   Chib {chib:10.1f} ± {chib_se:5.1f} "
                  f"(largest single-sample share {share:.2f})")
    write_results(args.out, NAME, out, figure(out))


def figure(out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(out["true_R"]), figsize=(4.2 * len(out["true_R"]), 3.6), squeeze=False)
    for index, (ax, true_rank) in enumerate(zip(axes[0], out["true_R"])):
        ax.errorbar(out["ranks"], out["sti"][index], yerr=2 * np.asarray(out["stderr"][index]), fmt="o-", ms=4,
                    label="STI")
        ax.plot(out["ranks"], out["chib"][index], "s--", ms=4, label="Chib")
        ax.axvline(true_rank, color="grey", ls=":")
        ax.set_title(f"true R = {true_rank}")
        ax.set_xlabel("R")
    axes[0][0].set_ylabel("log p(X | R)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    main()
