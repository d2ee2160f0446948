"""Speed of NUTS on NMF-GPP (Experiment 1, beta = 10): gradient evaluations and effective samples per second.

Figures, all on the same input in the same run:

1. log density + gradient per second, ours (``NMFGPP.logdensity_and_grad``:
   one compiled pass, packed lower-triangular Cholesky products, link from
   one ``erfcx`` per entry, fused residual sweep) against two NumPy
   references of the same model:
   - *before*: ``NMFGPP.logdensity_and_grad_numpy``, the previous
     implementation (per-component Cholesky products as BLAS matmuls on the
     square factors, link with SciPy ufuncs ``log_ndtr``/``erfcx``);
   - *literal*: a transcription of the paper's appendix F (vec ordering,
     Cholesky factors of the full Kronecker covariances I_M ⊗ K, eq. 22–23
     with ``erf``/``exp`` written out), the form of the authors' NumPy code.
   All three agree to rounding; the script checks it before timing. Then the
   CPU time of a NUTS leaf (diagonal and dense metric) split into the gradient
   and the rest (leapfrog, U-turn checks, multinomial draw).
2. NUTS from the MAP, run by ``raman_nuts.run_one`` (``sepsti.core.samplers.sample_nuts``,
   ``--chains`` chains in parallel), for both regimes of ``raman_nuts.REGIMES``
   (stiff: sigma_N = 0.05; weak and faint: sigma_N = 5, signal x5 and x2) and each metric of ``--metrics``
   (the fixed ones and ``auto``) side by side: smallest and median bulk ESS
   over all parameters, the log density and the scale coordinates, the
   smallest tail ESS, split-R-hat, divergences, min ESS per second of
   sampling wall time and of warm-up + sampling, gradient evaluations, the
   metric ``auto`` chose, and one line per pilot. ``--one-chain`` adds an
   ``auto`` run with one chain for the speed-up of two chains over one.
   Min ESS per 1000 gradient evaluations (scale-move evaluations included;
   a dense M^-1 product is not a gradient and shows only in ESS/s) does not
   depend on the machine's load; ESS/s does. Min ESS per CPU second of the
   slowest chain is the wall-clock figure with a core per chain, nearly free of
   the load too. Each row also gives the target acceptance statistic the
   warm-up's divergence check settled on, the quantity with the largest R-hat
   and the mean log posterior of the draws with its Monte-Carlo standard
   error. A Markdown table of every row, the agreement of the mean log
   posterior between metrics (largest difference over its combined MCSE) and
   the speed-up close the output.
3. ``--rhat-null``: for each run, the largest split-R-hat that stationary
   chains would show with the run's measured ESS of every quantity (bulk ESS
   for the rank R-hat, ESS of the folded draws for the folded one; AR(1)
   chains of those ESS), and the chance that it stays below 1.01 with the
   run's draws and with 2x and 4x as many: whether an R-hat above 1.01 says
   the chains disagree or only that the draws are too few.

No peer NUTS library (BlackJAX, PyMC) is installed here, so the NUTS figure
has no peer column. Timings are wall-clock on one thread; on a shared machine
note the load average printed beside them.

Writes ``DIR/nuts_nmf_gpp_<regimes>[_<metrics>].json`` (``DIR/nuts_nmf_gpp_gradient.json`` with
``--gradient-only``): the gradient rates, the leaf costs, every run's row and the settings; ``--json
PATH`` writes the rows alone to PATH too.
"""

import os
import time

import numpy as np
from scipy import linalg
from scipy.special import erf

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import choice_list, positive_int, recipe_parser, run_recipe, write_json, write_results  # noqa: E402

from sepsti.core.factorization.map import map_nmf_gpp  # noqa: E402
from sepsti.core.blas import single_threaded_blas  # noqa: E402
from sepsti.core.models.nmf_gpp import NMFGPP, exponential_kernel_2d, squared_exponential_kernel  # noqa: E402
from sepsti.core.random import stream  # noqa: E402
from sepsti.corpora.raman import simulate_raman  # noqa: E402
from raman_nuts import METRICS, REGIMES, add_chain_options, chain_lengths, run_one, warmup_count  # noqa: E402

NAME = "nuts_nmf_gpp"
#: ``--metrics``'s default: the fixed metrics but ``dense``, and ``auto``.
DEFAULT_METRICS = ("diagonal", "diagonal+moves", "gauss-newton", "gauss-newton+moves", "auto")


class ReferenceNMFGPP:
    """The paper's formulas as written: vec(D), vec(H), full Kronecker covariances, literal eq. 22–23."""

    def __init__(self, X, num_components, plate_shape, beta, noise_std, jitter=1e-6):
        self.X, self.M, self.sigma_n = X, num_components, noise_std
        K, L = X.shape
        cov_d = np.kron(np.eye(num_components), exponential_kernel_2d(plate_shape, beta))
        cov_h = np.kron(np.eye(num_components), squared_exponential_kernel(L, beta))
        cov_d += jitter * np.eye(cov_d.shape[0])
        cov_h += jitter * np.eye(cov_h.shape[0])
        self.C_d = linalg.cholesky(cov_d, lower=False)  # upper: cov = C^T C, d = C^T delta
        self.C_h = linalg.cholesky(cov_h, lower=False)
        self.s_d = np.sqrt(np.diag(cov_d))
        self.s_h = np.sqrt(np.diag(cov_h))

    @staticmethod
    def link(x, s):
        return -np.log(0.5 - 0.5 * erf(x / (np.sqrt(2) * s)))

    @staticmethod
    def link_prime(x, s):
        return np.exp(ReferenceNMFGPP.link(x, s) - x ** 2 / (2 * s ** 2)) / (np.sqrt(2 * np.pi) * s)

    def logdensity_and_grad(self, theta):
        K, L = self.X.shape
        delta, eta = theta[:K * self.M], theta[K * self.M:]
        d, h = self.C_d.T @ delta, self.C_h.T @ eta
        # vec over components: D[:, m] = d[m K:(m+1) K], H[m] = h[m L:(m+1) L]
        D = self.link(d, self.s_d).reshape(self.M, K).T
        H = self.link(h, self.s_h).reshape(self.M, L)
        R = D @ H - self.X
        logp = -0.5 * (np.sum(R ** 2) / self.sigma_n ** 2 + delta @ delta + eta @ eta)
        g_h = -(D.T @ R).ravel() / self.sigma_n ** 2 * self.link_prime(h, self.s_h)
        g_d = -(R @ H.T).T.ravel() / self.sigma_n ** 2 * self.link_prime(d, self.s_d)
        grad_delta = self.C_d @ g_d - delta
        grad_eta = self.C_h @ g_h - eta
        return logp, np.concatenate([grad_delta, grad_eta])

    def to_reference(self, theta, K):
        """Our layout (delta (K, M) row-major) → vec layout (component-major)."""
        delta = theta[:K * self.M].reshape(K, self.M).T.ravel()
        return np.concatenate([delta, theta[K * self.M:]])

    def from_reference(self, theta, K):
        """vec layout → our layout."""
        delta = theta[:K * self.M].reshape(self.M, K).T.ravel()
        return np.concatenate([delta, theta[K * self.M:]])


def rate(fn, theta, seconds):
    """Evaluations per second of wall time and per second of this process's CPU time (less load-sensitive)."""
    count, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds:
        fn(theta)
        count += 1
    return count / (time.perf_counter() - start), count / max(time.process_time() - cpu_start, 1e-9)


def load():
    return os.getloadavg()[0]


def gradient_rates(seed, quick):
    """Print log density + gradient evaluations per second: ours, the NumPy path, the literal appendix F.

    Returns them by clock (``wall``, ``cpu``) and implementation, medians over three interleaved rounds."""
    data = simulate_raman(1, seed=seed)
    model = NMFGPP(data.X, num_components=2, plate_shape=data.plate_shape, beta=10.0, noise_std=data.noise_std)
    reference = ReferenceNMFGPP(data.X, 2, data.plate_shape, 10.0, data.noise_std)
    K = data.X.shape[0]
    with single_threaded_blas():
        estimate = map_nmf_gpp(model, num_starts=1, seed=seed)
        theta = estimate.theta
        # Compare away from the mode, where the gradient is not a difference of near-equal terms.
        probe = theta + 0.1 * stream(seed, 5).standard_normal(theta.shape)
        ours_logp, ours_grad = model.logdensity_and_grad(probe)
        before_logp, before_grad = model.logdensity_and_grad_numpy(probe)
        ref_logp, ref_grad = reference.logdensity_and_grad(reference.to_reference(probe, K))
        for logp, grad in ((before_logp, before_grad), (ref_logp, reference.from_reference(ref_grad, K))):
            assert np.isclose(ours_logp, logp, rtol=1e-8), (ours_logp, logp)
            assert np.allclose(ours_grad, grad, rtol=1e-5, atol=1e-6 * np.abs(grad).max())
        seconds = 1.0 if quick else 3.0
        ref_theta = reference.to_reference(theta, K)
        # Interleave the measurements so that a change of machine load hits all three alike.
        rates = {"ours": [], "before": [], "literal": []}
        loads = [load()]
        for _ in range(3):
            rates["ours"].append(rate(model.logdensity_and_grad, theta, seconds / 3))
            rates["before"].append(rate(model.logdensity_and_grad_numpy, theta, seconds / 3))
            rates["literal"].append(rate(reference.logdensity_and_grad, ref_theta, seconds / 3))
        loads.append(load())
        medians = {}
        for clock, column in (("wall", 0), ("CPU", 1)):
            ours, before, literal = (float(np.median([r[column] for r in rates[k]]))
                                     for k in ("ours", "before", "literal"))
            medians[clock.lower()] = {"ours": ours, "before": before, "literal": literal, "load": loads}
            print(f"log density + gradient (dim {model.dim}), evaluations per {clock} second: ours {ours:.0f} "
                  f"({1e6 / ours:.0f} us), before (NumPy) {before:.0f} ({1e6 / before:.0f} us), literal appendix F "
                  f"{literal:.0f}; ratio ours/before {ours / before:.2f}, ours/literal {ours / literal:.2f} "
                  f"[load average {loads[0]:.2f} -> {loads[1]:.2f}]", flush=True)
    return medians


def rhat_null(draws, seed, *, factors=(1, 2, 4), repeats=10):
    """The largest rank R-hat of stationary chains with the measured ESS of each quantity, at more draws.

    ``draws`` has shape (num_chains, num_draws, k). Each quantity is replaced by
    AR(1) chains whose ESS is its bulk ESS (for the rank-normalised R-hat) and
    the ESS of its folded draws |x - median| (for the folded R-hat), times
    ``factor`` for ``factor`` times the draws. Returns, per factor, the median
    of the largest R-hat over the quantities and the share of repeats in which
    it stayed below 1.01; and the measured figures behind it: the bulk and
    folded ESS of the quantity with the largest R-hat, and the smallest and
    median folded ESS over all quantities.
    """
    from sepsti.core.samplers.diagnostics import effective_sample_size, split_rhat

    num_chains, num_draws, _ = draws.shape
    bulk = effective_sample_size(draws)
    folded = effective_sample_size(np.abs(draws - np.median(draws.reshape(-1, draws.shape[2]), axis=0)))
    rng = stream(seed, 11)

    def largest(ess, length):
        total = num_chains * length
        phi = (total - np.clip(ess, 10, 3 * total)) / (total + np.clip(ess, 10, 3 * total))  # AR(1) of that ESS
        chains = np.empty((num_chains, length, len(ess)))
        chains[:, 0] = rng.standard_normal((num_chains, len(ess)))
        noise = rng.standard_normal((num_chains, length, len(ess))) * np.sqrt(1 - phi ** 2)
        for t in range(1, length):
            chains[:, t] = phi * chains[:, t - 1] + noise[:, t]
        return split_rhat(chains, method="split")  # Gaussian chains: the rank transform changes nothing

    worst = int(np.nanargmax(split_rhat(draws)))
    measured = (float(bulk[worst]), float(folded[worst]), float(folded.min()), float(np.median(folded)))
    out = {}
    for factor in factors:
        length = factor * num_draws
        maxima = [max(largest(factor * bulk, length).max(), largest(factor * folded, length).max())
                  for _ in range(repeats)]
        out[factor] = (float(np.median(maxima)), float(np.mean(np.array(maxima) < 1.01)))
    return out, measured


def print_table(rows):
    """Every run side by side as a Markdown table, then the speed-up of the two-chain ``auto`` run over one chain."""
    print("\n| regime | metric | chains | warm-up + draws | chosen | delta | min / median bulk ESS | min tail ESS "
          "| max R-hat (quantity) | divergences | gradients (sampling) | min ESS per 1000 gradients "
          "| min ESS/s sampling | with warm-up | min ESS per CPU s of the slowest chain, sampling | with warm-up "
          "| mean log posterior | load |")
    print("|---" * 18 + "|")
    for r in rows:
        print(f"| {r['regime']} | {r['metric']} | {r['num_chains']} | {r['num_warmup']} + {r['num_draws']} "
              f"| {r['chosen_metric']} | {r['target']:g} | {r['min_ess']:.0f} / {r['median_ess']:.0f} "
              f"| {r['min_tail_ess']:.0f} | {r['max_rhat']:.3f} ({r['worst_rhat']}) | {r['divergences']} "
              f"| {r['gradient_evaluations']:,} "
              f"| {r['ess_per_1000_gradients']:.3f} | {r['ess_per_second']:.3g} "
              f"| {r['ess_per_second_with_warmup']:.3g} "
              f"| {r['ess_per_cpu_second']:.3g} | {r['ess_per_cpu_second_with_warmup']:.3g} "
              f"| {r['mean_draw_log_posterior']:.1f} ± {r['mean_draw_log_posterior_mcse']:.1f} "
              f"| {r['load'][0]:.1f} → {r['load'][1]:.1f} |")

    for regime in dict.fromkeys(r["regime"] for r in rows):
        runs = [r for r in rows if r["regime"] == regime]
        gaps = [(abs(a["mean_draw_log_posterior"] - b["mean_draw_log_posterior"])
                 / np.hypot(a["mean_draw_log_posterior_mcse"], b["mean_draw_log_posterior_mcse"]), a, b)
                for i, a in enumerate(runs) for b in runs[i + 1:]]
        if gaps:
            z, a, b = max(gaps, key=lambda g: g[0])
            print(f"{regime}: mean log posterior {min(r['mean_draw_log_posterior'] for r in runs):.1f} .. "
                  f"{max(r['mean_draw_log_posterior'] for r in runs):.1f} over {len(runs)} runs; largest difference "
                  f"{z:.2f} combined MCSE ({a['metric']}, {a['num_chains']} chains vs {b['metric']}, "
                  f"{b['num_chains']} chains)")

    def rate(row):
        return row["gradient_evaluations"] / row["sampling_seconds"]

    for regime in dict.fromkeys(r["regime"] for r in rows):
        auto = {r["num_chains"]: r for r in rows if r["regime"] == regime and r["metric"] == "auto"}
        if 1 in auto and 2 in auto:
            one, two = auto[1], auto[2]
            print(f"{regime}: two chains over one (auto), min ESS/s of sampling {two['ess_per_second']:.3g} / "
                  f"{one['ess_per_second']:.3g} = {two['ess_per_second'] / one['ess_per_second']:.2f}x; gradient "
                  f"evaluations per second of sampling {rate(two):.0f} / {rate(one):.0f} = {rate(two) / rate(one):.2f}x"
                  f" [load {two['load'][0]:.1f} / {one['load'][0]:.1f}]")


def leaf_cost(seed):
    """Print the CPU time of a NUTS leaf on the weak posterior and how much of it is the gradient.

    Trees of depth 7 at a fixed step from the MAP, with a diagonal M^-1 and with the dense inverse
    Gauss-Newton precision; the rest of a leaf is the leapfrog, the U-turn checks and the multinomial draw.
    Returns, per metric, the microseconds of CPU time of a leaf and of its gradient, and the leaves timed.
    """
    from sepsti.core.samplers import hmc, nuts

    intensity, noise_std = REGIMES["weak"]
    data = simulate_raman(1, seed=seed, intensity=intensity, noise_std=noise_std)
    model = NMFGPP(data.X, num_components=2, plate_shape=data.plate_shape, beta=10.0, noise_std=noise_std)
    with single_threaded_blas():
        theta = map_nmf_gpp(model, num_starts=1, seed=seed).theta
        kernel = nuts.build_kernel(model.logdensity_and_grad, max_tree_depth=7)
        covariance = np.linalg.inv(model.gauss_newton_precision(theta))
        metrics = {"diagonal": (np.full(model.dim, 0.05), 0.02),
                   "dense (Gauss-Newton)": (0.5 * (covariance + covariance.T), 0.1)}
        costs = {}
        for name, (inverse_mass, step_size) in metrics.items():
            rng = stream(seed, 6)
            state = hmc.init(theta, model.logdensity_and_grad)
            load_start, cpu_start, leaves = load(), time.process_time(), 0
            for _ in range(10):
                state, info = kernel(rng, state, step_size, inverse_mass)
                leaves += info.num_integration_steps
            per_leaf = (time.process_time() - cpu_start) / leaves
            cpu_start = time.process_time()
            for _ in range(leaves):
                model.logdensity_and_grad(state.position)
            per_gradient = (time.process_time() - cpu_start) / leaves
            costs[name] = {"leaf_us": 1e6 * per_leaf, "gradient_us": 1e6 * per_gradient, "leaves": leaves}
            print(f"NUTS leaf, {name} metric: {1e6 * per_leaf:.0f} us CPU, of which the gradient "
                  f"{1e6 * per_gradient:.0f} "
                  f"us and the rest {1e6 * (per_leaf - per_gradient):.0f} us ({leaves} leaves) "
                  f"[load average {load_start:.2f} -> {load():.2f}]", flush=True)
    return costs


def results_name(args):
    """The name of a run's results: its regimes, and its metrics where they are not the default."""
    if args.gradient_only:
        return f"{NAME}_gradient"
    return (f"{NAME}_{'-'.join(args.regimes)}"
            + ("" if tuple(args.metrics) == DEFAULT_METRICS else f"_{'-'.join(args.metrics)}"))


def main():
    parser = recipe_parser(f"benchmarks/{NAME}", __doc__.splitlines()[0], output=results_name,
                           output_help=f"{NAME}_REGIMES[_METRICS]",
                           writes=f"DIR/{NAME}_gradient.json instead with --gradient-only")
    add_chain_options(parser)
    parser.add_argument("--max-tree-depth", type=positive_int, default=10, help="largest NUTS tree depth (default 10)")
    parser.add_argument("--one-chain", action="store_true", help="also run auto with one chain")
    parser.add_argument("--regimes", type=choice_list(tuple(REGIMES)), default="stiff,weak,faint",
                        help="simulated maps (raman_nuts.py --regime), comma-separated (default stiff,weak,faint)")
    parser.add_argument("--diagonal-draws", type=warmup_count, default=None,
                        help="warm-up and draws of the fixed diagonal metrics in the stiff regime, whose trees reach "
                             "depth 10 (default: as the others)")
    parser.add_argument("--metrics", type=choice_list(tuple(METRICS)), default=",".join(DEFAULT_METRICS),
                        help=f"metrics run side by side, comma-separated (default {','.join(DEFAULT_METRICS)})")
    parser.add_argument("--skip-gradient", action="store_true", help="skip the gradient-rate comparison")
    parser.add_argument("--gradient-only", action="store_true",
                        help="only the gradient-rate comparison and the cost of a NUTS leaf")
    parser.add_output_file("--json", help="also write the NUTS rows alone to this JSON file")
    parser.add_argument("--rhat-null", action="store_true",
                        help="R-hat that stationary chains with each run's ESS would show, at 1x, 2x and 4x the draws")
    args = parser.parse_args()
    num_warmup, num_draws = chain_lengths(args)

    results = {"settings": {"num_warmup": num_warmup, "num_draws": num_draws, "diagonal_draws": args.diagonal_draws,
                            "max_tree_depth": args.max_tree_depth, "target": args.target, "chains": args.chains,
                            "scale_moves": args.scale_moves, "beta": 10.0, "seed": args.seed}}
    if not args.skip_gradient:
        results["gradient_rates"] = gradient_rates(args.seed, args.quick)
        results["leaf_cost"] = leaf_cost(args.seed)
    if args.gradient_only:
        write_results(args, results)
        return
    rows = []
    for regime in args.regimes:
        intensity, noise_std = REGIMES[regime]
        regime_data = simulate_raman(1, seed=args.seed, intensity=intensity, noise_std=noise_std)
        runs = [(metric, args.chains) for metric in args.metrics]
        if args.one_chain:
            runs.append(("auto", 1))
        for metric, chains in runs:
            load_start = load()
            warmup, draws = num_warmup, num_draws
            if regime == "stiff" and metric.startswith("diagonal") and args.diagonal_draws:
                warmup = draws = args.diagonal_draws
            with single_threaded_blas():
                record, _, result = run_one(regime_data, 10.0, num_warmup=warmup, num_draws=draws, metric=metric,
                                            max_tree_depth=args.max_tree_depth, target=args.target, seed=args.seed,
                                            num_chains=chains, scale_moves=args.scale_moves)
            record.update(regime=regime, load=[load_start, load()], num_warmup=warmup, num_draws=draws,
                          ess_per_1000_gradients=1e3 * record["min_ess"] / record["gradient_evaluations"])
            rows.append(record)
            print(f"{regime:6s} {metric:19s} chains {chains}: chosen {record['chosen_metric']:16s} "
                  f"min/median ESS {record['min_ess']:7.1f} / {record['median_ess']:7.1f} "
                  f"(tail {record['min_tail_ess']:.1f}, "
                  f"worst {record['worst']}), min ESS/s {record['ess_per_second']:7.3f} sampling, "
                  f"{record['ess_per_second_with_warmup']:7.3f} with warm-up, "
                  f"{record['ess_per_cpu_second']:.3g} per CPU "
                  f"second of the slowest chain; R-hat {record['max_rhat']:.3f}; "
                  f"divergences {record['divergences']} (warm-up {record['warmup_divergences']}); gradients "
                  f"{record['gradient_evaluations']} (+{record['warmup_gradient_evaluations']} warm-up); depth "
                  f"{record['mean_tree_depth']:.2f}; step {np.mean(record['step_size']):.3g}; sampling "
                  f"{record['sampling_seconds']:.1f} s, warm-up {record['warmup_seconds']:.1f} s; mean log posterior "
                  f"{record['mean_draw_log_posterior']:.1f} +- {record['mean_draw_log_posterior_mcse']:.1f}; "
                  f"max R-hat at {record['worst_rhat']}; delta {record['target']:g}, checks {record['step_checks']} "
                  f"[load {load_start:.2f} -> {load():.2f}]", flush=True)
            if args.rhat_null and chains > 1:
                quantities = np.concatenate([result.draws, result.logdensity[:, :, None], result.summaries], axis=2)
                null, (bulk, folded, least, median) = rhat_null(quantities, args.seed)
                print(f"    largest R-hat at bulk ESS {bulk:.0f}, folded ESS {folded:.0f}; folded ESS min {least:.0f}, "
                      f"median {median:.0f}. R-hat of stationary chains with these ESS: " + ", ".join(
                          f"{factor}x draws: max {m:.4f}, P(max < 1.01) {p:.2f}" for factor, (m, p) in null.items()),
                      flush=True)
            for pilot in record["pilots"]:
                print(f"    pilot {pilot['metric']:16s} min ESS {pilot['min_ess']:6.1f} ({pilot['worst']}), "
                      f"{pilot['work']:.0f} gradients, {1e3 * pilot['ess_per_work']:.3g} per 1000, step "
                      f"{pilot['step_size']:.3g}, depth {pilot['mean_tree_depth']:.2f}, "
                      f"divergences {pilot['num_divergent']}", flush=True)
    print_table(rows)
    if args.json is not None:
        write_json(args.json, rows, overwrite=args.overwrite)
    write_results(args, {**results, "runs": rows})


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
