"""ICASSP'16 Fig. 1: STI against the exact log marginal likelihood of the Gaussian additive model.

For several true R, data are drawn with mu = 5, sigma_theta^2 = 3, sigma_x^2 = 5,
N = 5000; for every candidate R_m the evidence is estimated by STI and
compared with the closed form (O(N), matrix determinant lemma).

Two STI configurations run on the same data:

* ``sti`` (the default of this project): SGLD, T = 20 intervals on the power
  grid t_i = (i/T)^5, Simpson's rule in u = t^(1/5), a = 1e-7 with the
  steps of the chain at t divided by max(t, 1e-5), chains warm-started from
  the previous temperature, the log-likelihood of theta^(k-1) scored on the
  subsample S^(k) with a control variate at the last burn-in sample.
* ``sti_paper``: the paper's settings verbatim -- SGLD, T = 10 intervals on a
  uniform grid, trapezoid rule, eq. 9 (theta^(k) on S^(k)), a = 1e-8.

Both: N_s = 250 (with replacement), K = 3000 with the first 1000 as burn-in,
b = 0.51, step fixed after burn-in. T counts intervals (T + 1 temperatures).
``quadrature_error`` is the error the grid alone makes with exact
expectations, so that Monte-Carlo and discretisation error can be told apart.
"""

import time

import numpy as np

from _common import recipe_parser, write_results

from core.evidence.sti import integration_weights, stochastic_thermodynamic_integration
from core.models.gaussian_additive import GaussianAdditiveModel
from core.random import stream

NAME = "sti_gaussian"
PRIOR = dict(mu=5.0, sigma2_theta=3.0, sigma2_x=5.0)
DEFAULT = dict(num_intervals=20, schedule="power", power=5.0, rule="simpson", sampler="sgld", step_a=1e-7,
               step_b=0.51, control_variate=True, evaluate="before_update", step_floor=1e-5, warm_start=True)
PAPER = dict(num_intervals=10, schedule="uniform", power=1.0, rule="trapezoid", sampler="sgld", step_a=1e-8,
             step_b=0.51, control_variate=False, evaluate="after_update")


def estimate(model, settings, *, num_steps, num_keep, subset_size, seed):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        start = time.perf_counter()
        result = stochastic_thermodynamic_integration(model, model.sample_prior, num_steps=num_steps,
                                                      num_keep=num_keep, subset_size=subset_size, seed=seed,
                                                      **settings)
    seconds = time.perf_counter() - start
    t = result.temperatures
    weights = integration_weights(t, rule=settings["rule"], power=settings["power"] if settings["schedule"] == "power"
                                  else 1.0)
    quadrature = float(weights @ model.expected_log_likelihood(t) - model.log_marginal_likelihood())
    return result, seconds, quadrature


def main():
    parser = recipe_parser(NAME, __doc__.splitlines()[0])
    args = parser.parse_args()
    true_ranks = [2, 5] if args.quick else [2, 5, 8]
    ranks = list(range(1, 8)) if args.quick else list(range(1, 11))
    num_steps, num_keep, n_data, subset_size = 3000, 2000, 5000, 250
    out = {"true_R": true_ranks, "ranks": ranks, "sti": [], "stderr": [], "exact": [], "sti_paper": [],
           "stderr_paper": [], "quadrature_error": [], "quadrature_error_paper": [], "seconds_per_rank": [],
           "seconds_per_rank_paper": [],
           "settings": {"default": DEFAULT, "paper": PAPER, "N": n_data, "N_s": subset_size, "K": num_steps,
                        "keep": num_keep, **PRIOR, "T_counts": "intervals"}}
    print(f"{'true R':>6} {'R_m':>4} {'exact':>12} {'STI':>12} {'err':>7} {'se':>5} {'quad':>6} {'s':>5} "
          f"{'paper':>12} {'err':>9} {'se':>7}")
    for index, true_rank in enumerate(true_ranks):
        _, x = GaussianAdditiveModel.sample(stream(args.seed, 1000 + index), n_data, true_rank, **PRIOR)
        rows = {k: [] for k in ("sti", "stderr", "exact", "sti_paper", "stderr_paper", "quadrature_error",
                                "quadrature_error_paper", "seconds_per_rank", "seconds_per_rank_paper")}
        for rank in ranks:
            model = GaussianAdditiveModel(x, rank, **PRIOR)
            exact = model.log_marginal_likelihood()
            ours, seconds, quad = estimate(model, DEFAULT, num_steps=num_steps, num_keep=num_keep,
                                           subset_size=subset_size, seed=args.seed + 17 * rank)
            paper, seconds_paper, quad_paper = estimate(model, PAPER, num_steps=num_steps, num_keep=num_keep,
                                                        subset_size=subset_size, seed=args.seed + 17 * rank)
            for key, value in (("sti", ours.log_evidence), ("stderr", ours.stderr), ("exact", exact),
                               ("sti_paper", paper.log_evidence), ("stderr_paper", paper.stderr),
                               ("quadrature_error", quad), ("quadrature_error_paper", quad_paper),
                               ("seconds_per_rank", seconds), ("seconds_per_rank_paper", seconds_paper)):
                rows[key].append(float(value))
            print(f"{true_rank:>6} {rank:>4} {exact:12.2f} {ours.log_evidence:12.2f} {ours.log_evidence - exact:7.2f} "
                  f"{ours.stderr:5.2f} {quad:6.2f} {seconds:5.1f} {paper.log_evidence:12.2f} "
                  f"{paper.log_evidence - exact:9.1f} {paper.stderr:7.1f}", flush=True)
        for key, value in rows.items():
            out[key].append(value)
    sti = np.array(out["sti"])
    exact = np.array(out["exact"])
    out["argmax_agrees"] = [bool(np.argmax(s) == np.argmax(e)) for s, e in zip(sti, exact)]
    out["max_abs_error"] = float(np.max(np.abs(sti - exact)))
    out["max_abs_error_paper"] = float(np.max(np.abs(np.array(out["sti_paper"]) - exact)))
    print(f"argmax agrees: {out['argmax_agrees']}; max |STI - exact| = {out['max_abs_error']:.2f} nats "
          f"(paper settings: {out['max_abs_error_paper']:.1f})")
    write_results(args.out, NAME, out, figure(out))


def figure(out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(out["true_R"]), figsize=(4.2 * len(out["true_R"]), 3.6), squeeze=False)
    for ax, true_rank, sti, se, exact, paper in zip(axes[0], out["true_R"], out["sti"], out["stderr"], out["exact"],
                                                   out["sti_paper"]):
        ax.plot(out["ranks"], exact, "k-", label="exact")
        ax.errorbar(out["ranks"], sti, yerr=2 * np.asarray(se), fmt="o", ms=4, label="STI (power grid)")
        ax.plot(out["ranks"], paper, "x", color="tab:red", label="STI, paper settings")
        ax.axvline(true_rank, color="grey", ls=":")
        low, high = min(exact), max(exact)
        ax.set_ylim(low - 0.3 * (high - low) - 5, high + 0.15 * (high - low) + 5)
        ax.set_title(f"true R = {true_rank}")
        ax.set_xlabel("R")
    axes[0][0].set_ylabel("log p(x | R)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    main()
