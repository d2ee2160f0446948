"""ICASSP'16 Fig. 3: STI on Poisson NMF data drawn at two true ranks, beside Chib's estimate.

Data: W, H ~ Exp(5), X ~ Poisson(WH), I = 100, J = 75, for two true R
(``--true-ranks``, default 3,6). For R_m = 1..10 the log marginal likelihood
is estimated by STI (``--settings``, below) and by Chib's method from the
Gibbs output of ``sepsti.core.evidence.chib`` (9000 Gibbs samples, 7000
burn-in, 5000 reduced runs; ``--chib-runs`` (4) independent runs per rank,
whose spread is the standard error: docs/chib.md). The paper's STI ran block-parallel SGLD (5 x 5
blocks, K = 10000 keeping the last 2000, a = 1e-5, b = 0.51, step fixed after
burn-in): ``--settings paper``.

Settings (``--settings``):

* ``default``: ``select_rank_sti``'s default, the reference path
  (:mod:`sepsti.core.evidence.reference_path`: full-data MALA from a log-space
  Gaussian reference to the posterior), with its preset's grid and chain
  lengths (``--quick`` does not shorten them).
* ``blocks``: preconditioned block SGLD (pSGLD, alpha = 0.99, sigma = 0.1),
  a = 1e-7, b = 0.51, T = 10 intervals on t_i = (i/T)^5 with Simpson's rule in
  u = t^(1/5), theta^(k-1) scored on S^(k), chains started at random on the
  data's scale; K = 10000 keeping 2000.
* ``paper``: ICASSP'16's -- block SGLD, a = 1e-5, b = 0.51, T = 5 intervals
  on a uniform grid with the trapezoid rule, eq. 9 (theta^(k) on S^(k)),
  chains started from a 100-iteration MAP-EM fit.

Why not the paper's step: on these data (90 % zeros, mean count 0.12) the
log-likelihood gradient of an entry of W or H holds X_ij / W_i, which is huge
where a factor entry is small; with (a/k)^b = 2.8e-3 at k = 1 and the block
scaling N/N_s = 5, eps x curvature reaches ~80 for the small entries of the
EM start, the update overshoots, mirroring turns the overshoot into a large
positive entry, and the chain runs away (rank 1, true R = 3: entries of W and
H near 400, E_1[log p] ~ -2e6 where the truth is -2517). Plain SGLD with
steps small enough to be stable does not mix at low t in 10,000 iterations
and is biased by O(eps) at t = 1. pSGLD scales each coordinate's step by
1 / (sigma + sqrt(v)), which bounds the drift of the singular coordinates;
sigma = 0.1 (not 1e-5) caps the preconditioner where the likelihood gradient
vanishes (t -> 0), so that prior-dominated chains do not take steps far larger
than the prior's scale (1/lambda = 0.2).

Where the truth is known: at R = 1 the evidence reduces to one integral
(:func:`sepsti.core.evidence.rank_one.rank_one_log_evidence`): ``exact_rank1``.
Standard errors: the block chains' own MCSE (integrated time of the kept
trace) understates the error several-fold here -- the block-subsample noise
of each log-likelihood estimate hides the slow drift of the chain, so the
Sokal window closes at tau ~ 1, while independent chains at one temperature
disagree by ~25 nats at t ~ 0.17 (R = 3). So every (rank, temperature) runs
``--replicates`` independent chains and the standard errors come from their
spread (``sti_replicates``: each replicate's estimate).

``--nuts-reference`` adds, at each true R, thermodynamic integration with
full-data NUTS chains on log W, log H (600 warm-up + 1200 draws per
temperature, the ``default`` grid): an independent estimate for a rank where
neither the conjugate rank-1 sampler nor a closed form exists (it agrees with
``exact_rank1`` at R = 1 to 0.2 nats).
``--quick``: R_m in 1..6, 3 replicates, Chib 1500 burn-in + 500 samples +
500 reduced runs; the ``blocks`` and ``paper`` chains K = 5000 keeping 1000.

The JSON's ``settings`` hold what ran: ``sti`` the settings of each true R's
selection (grid, chains, replicates, seed, data digest), ``seed``, ``quick``
and, with ``--nuts-reference``, ``nuts_reference``.
"""

import time
import warnings

import numpy as np

from _common import add_chib_runs, chib_runs, positive_int, rank_list, recipe_parser, run_recipe, write_results

from sepsti.core.evidence.rank_one import rank_one_log_evidence
from sepsti.core.evidence.sti import integration_weights, thermodynamic_integral
from sepsti.core.evidence.sti_nmf import select_rank_sti
from sepsti.core.models.poisson_nmf import PoissonNMF
from sepsti.core.random import stream

NAME = "sti_nmf_synthetic"
RANKS, QUICK_RANKS = list(range(1, 11)), list(range(1, 7))
#: TI with full-data NUTS of ``--nuts-reference``: the ``default`` grid, 600 warm-up + 1200 draws per temperature
NUTS_REFERENCE = dict(num_intervals=10, power=5.0, num_warmup=600, num_samples=1200)
#: ``select_rank_sti`` presets, with this experiment's blocks and the paper's step for these counts
SETTINGS = {
    "default": dict(preset="reference"),
    "blocks": dict(preset="blocks", num_blocks=5),
    "paper": dict(preset="paper", num_blocks=5, step_a=1e-5),
}


def nuts_reference(X, rank, rate, *, num_intervals=10, power=5.0, num_warmup=600, num_samples=1200, seed=0):
    """log p(X | R) by thermodynamic integration with full-data NUTS at each temperature.

    The chains run on (log W, log H) with the Jacobian, so no mirroring is
    involved. Returns the estimate and its Monte-Carlo standard error.
    """
    from scipy.special import gammaln

    from sepsti.core.evidence.sti import temperature_grid
    from sepsti.core.samplers import hmc, nuts
    from sepsti.core.samplers.warmup import window_adaptation

    X = np.asarray(X, dtype=np.float64)
    n_rows, n_cols = X.shape
    log_factorial = gammaln(X + 1.0).sum()

    def factors(p):
        return np.exp(p[:n_rows * rank]).reshape(n_rows, rank), np.exp(p[n_rows * rank:]).reshape(rank, n_cols)

    def log_likelihood(p):
        W, H = factors(p)
        L = W @ H
        return float(np.sum(X * np.log(L)) - L.sum() - log_factorial)

    def target(t):
        def logdensity_and_grad(p):
            W, H = factors(p)
            L = W @ H
            Q = X / L - 1.0
            value = (t * (np.sum(X * np.log(L)) - L.sum() - log_factorial) + np.sum(p) - rate * (W.sum() + H.sum())
                     + p.size * np.log(rate))
            return value, np.concatenate([(W * (t * Q @ H.T - rate) + 1.0).ravel(),
                                          (H * (t * W.T @ Q - rate) + 1.0).ravel()])
        return logdensity_and_grad

    grid = temperature_grid(num_intervals, schedule="power", power=power)
    traces = []
    for i, t in enumerate(grid):
        rng = stream(seed, 4000 + rank, i)
        fn = target(float(t))
        kernel = nuts.build_kernel(fn, max_tree_depth=8)
        start = np.log(rng.exponential(1.0 / rate, size=(n_rows + n_cols) * rank) + 1e-3)
        warm = window_adaptation(kernel, hmc.init(start, fn), rng, fn, num_steps=num_warmup)
        state, values = warm.state, np.empty(num_samples)
        for k in range(num_samples):
            state, _ = kernel(rng, state, warm.step_size, warm.inverse_mass_matrix)
            values[k] = log_likelihood(state.position)
        traces.append(values)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = thermodynamic_integral(grid, traces, weights=integration_weights(grid, rule="simpson", power=power))
    return result.log_marginal_likelihood, result.stderr


def main():
    # Chib's runs use seed --seed + R_m
    parser = recipe_parser(NAME, __doc__.splitlines()[0], plot=True, seed_offset=max(RANKS))
    parser.add_argument("--settings", choices=sorted(SETTINGS), default="default",
                        help="STI settings: the reference path (default), preconditioned block SGLD, or the paper's")
    parser.add_argument("--replicates", type=positive_int, default=None,
                        help="independent chains per (rank, temperature); the standard errors come from their "
                             "spread (default: 4, --quick 3)")
    parser.add_argument("--nuts-reference", action="store_true",
                        help="also estimate log p(X | true R) by TI with full-data NUTS (minutes per rank)")
    parser.add_argument("--true-ranks", type=rank_list, default=[3, 6],
                        help="ranks of the simulated data, comma-separated (default 3,6)")
    add_chib_runs(parser)
    args = parser.parse_args()
    if args.replicates is None:
        args.replicates = 3 if args.quick else 4
    true_ranks = args.true_ranks
    ranks = QUICK_RANKS if args.quick else RANKS
    if args.nuts_reference and not set(true_ranks) <= set(ranks):
        parser.error(f"--nuts-reference compares at the true ranks: --true-ranks must lie in {ranks[0]}..{ranks[-1]}"
                     f"{' with --quick' if args.quick else ''}")
    num_steps, num_keep = (5000, 1000) if args.quick else (10000, 2000)
    chib_counts = (1500, 500, 500) if args.quick else (7000, 2000, 5000)
    rate = 5.0
    settings = SETTINGS[args.settings]
    from sepsti.core.evidence.chib import chib_poisson_nmf

    out = {"true_R": true_ranks, "ranks": ranks, "sti": [], "stderr": [], "chib": [], "chib_stderr": [],
           "chib_runs": [], "chib_max_weight_fraction": [], "exact_rank1": [], "seconds_sti": [],
           "seconds_chib": [], "sti_replicates": [], "replicates": args.replicates,
           "settings": {"I": 100, "J": 75, "rate": rate, "name": args.settings, "seed": args.seed, "quick": args.quick,
                        "chib_burn_in_samples_reduced": chib_counts, "chib_runs": args.chib_runs,
                        "T_counts": "intervals", "sti": [],
                        **({"nuts_reference": NUTS_REFERENCE} if args.nuts_reference else {})}}
    for index, true_rank in enumerate(true_ranks):
        _, _, X = PoissonNMF.sample(stream(args.seed, 2000 + index), (100, 75), true_rank, rate_W=rate, rate_H=rate)
        start = time.perf_counter()
        lengths = {} if settings["preset"] == "reference" else {"num_steps": num_steps, "num_keep": num_keep}
        selection = select_rank_sti(X, ranks, prior_rate=rate, num_replicates=args.replicates, seed=args.seed,
                                    progress=True, **lengths, **settings)
        out["seconds_sti"].append(time.perf_counter() - start)
        out["settings"]["sti"].append(selection.settings)
        out["sti"].append(selection.log_marginal_likelihood.tolist())
        out["stderr"].append(selection.stderr.tolist())
        out["sti_replicates"].append(selection.replicates.T.tolist())
        start = time.perf_counter()
        rows = [chib_runs(chib_poisson_nmf, X.astype(np.int64), rank, rate, num_runs=args.chib_runs,
                          num_burn_in=chib_counts[0], num_samples=chib_counts[1], num_reduced=chib_counts[2],
                          method="factors", point="mean", seed=args.seed + rank) for rank in ranks]
        values, errors, shares = ([row[key] for row in rows] for key in ("value", "stderr", "max_weight_fraction"))
        out["chib"].append(values)
        out["chib_stderr"].append(errors)
        out["chib_runs"].append([row["runs"] for row in rows])
        out["chib_max_weight_fraction"].append(shares)
        out["seconds_chib"].append(time.perf_counter() - start)
        exact = rank_one_log_evidence(X, rate)
        out["exact_rank1"].append(exact)
        if args.nuts_reference:
            start = time.perf_counter()
            value, error = nuts_reference(X, true_rank, rate, seed=args.seed, **NUTS_REFERENCE)
            out.setdefault("nuts_true_rank", []).append(value)
            out.setdefault("nuts_true_rank_stderr", []).append(error)
            out.setdefault("seconds_nuts", []).append(time.perf_counter() - start)
            position = ranks.index(true_rank)
            print(f"R = {true_rank} (true): NUTS-TI {value:.1f} ± {error:.1f}; STI − NUTS "
                  f"{out['sti'][-1][position] - value:+.1f}, Chib − NUTS {values[position] - value:+.1f}")
        print(f"true R = {true_rank}: STI argmax {ranks[int(np.argmax(out['sti'][-1]))]}, "
              f"Chib argmax {ranks[int(np.argmax(out['chib'][-1]))]}; "
              f"STI {out['seconds_sti'][-1]:.0f} s, Chib {out['seconds_chib'][-1]:.0f} s; "
              f"R = 1: exact {exact:.1f}, STI − exact {out['sti'][-1][0] - exact:+.1f}, "
              f"Chib − exact {values[0] - exact:+.1f}")
        for rank, sti, se, chib, chib_se, share in zip(ranks, out["sti"][-1], out["stderr"][-1], values, errors,
                                                       shares):
            print(f"  R={rank:>2}  STI {sti:10.1f} ± {se:5.1f}   Chib {chib:10.1f} ± {chib_se:5.1f} "
                  f"(largest single-sample share {share:.2f})")
    write_results(args, out, figure(out))


def figure(out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(out["true_R"]), figsize=(4.2 * len(out["true_R"]), 3.6), squeeze=False)
    for index, (ax, true_rank) in enumerate(zip(axes[0], out["true_R"])):
        ax.errorbar(out["ranks"], out["sti"][index], yerr=2 * np.asarray(out["stderr"][index]), fmt="o-", ms=4,
                    label="STI")
        ax.errorbar(out["ranks"], out["chib"][index], yerr=2 * np.asarray(out["chib_stderr"][index]), fmt="s--",
                    ms=4, label="Chib")
        ax.plot([out["ranks"][0]], [out["exact_rank1"][index]], "k*", ms=9, label="exact (R = 1)")
        if "nuts_true_rank" in out:
            ax.plot([true_rank], [out["nuts_true_rank"][index]], "kD", ms=6, label="NUTS-TI")
        ax.axvline(true_rank, color="grey", ls=":")
        ax.set_title(f"true R = {true_rank}")
        ax.set_xlabel("R")
    axes[0][0].set_ylabel("log p(X | R)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    run_recipe(main, NAME)
