"""NUTS on NMF-GPP for simulated Raman maps: both experiments of the NUTS NMF-GPP paper, beta = 10 and 20.

For each experiment (1: one Voigt peak in two hotspots; 2: two Voigt curves
with nearly the same peak) and each length-scale beta (10 "unsmooth", 20
"smooth"), with M = 2 components:

1. MAP by L-BFGS on (delta, eta) (best of 3 starts), as the paper does;
2. ``--chains`` (2) NUTS chains from the MAP in parallel
   (``sepsti.core.samplers.sample_nuts``): 1000 warm-up iterations then 2000 draws
   per chain (``--quick``: 150 + 150, max tree depth 8), pooled; bulk and tail
   ESS and split-R-hat over every latent parameter, the log posterior and the
   scale coordinates log||D_m|| - log||H_m||.

``--regime`` sets the simulated map and sigma_N: ``stiff`` is the paper's
simulation (spectra peaking at 1, noise and sigma_N 0.05); ``weak`` has
sigma_N = 5 and the signal x5, a likelihood far less informative relative to
the exponential priors, as in the authors' own sigma_N = 5 setting; ``faint``
has sigma_N = 5 and the signal x2, whose diagonal-metric trees (depth 7) come
closest to those measured on the authors' data (``--intensity`` sets any
other signal scale). Which
metric mixes best differs between the two, so the default ``--metric auto``
lets the warm-up decide: after a diagonal-metric exploration, every candidate
(diagonal, the Gauss-Newton precision (I + sigma_N^-2 J^T J)^-1 at the state
reached, each with or without Metropolis moves along the D/H scale orbit
(D_m, H_m) -> (c D_m, H_m / c)) runs short pilots on every chain, and the cheapest
kind whose smallest ESS per gradient evaluation is within 2x of the best is kept, with
its moves if they are within it too (a dense M^-1 product counted as ``DENSE_COST``
gradients; ``sepsti.core.samplers.metric.choose_metric``). The fixed choices remain:
``diagonal`` (the paper's), ``gauss-newton``, ``dense`` (from warm-up draws),
each with ``+moves`` (``--scale-moves`` sweeps per transition). Whatever the
metric, the warm-up ends by checking the adapted step: if it diverged there,
the target acceptance statistic is raised from ``--target`` (0.8) to 0.9, then
0.95, and the step size re-adapted (the record's ``target`` and ``step_checks``).

Settings the paper leaves open: lambda = 1 for both exponential marginals,
sigma_N = the simulator's noise standard deviation, kernels exactly as
written in the paper (SE exp(-(i-j)^2/beta^2) over wavenumber, exponential
exp(-||x-x'||/beta^2) over plate coordinates), jitter 1e-6. Measured results
and the commands that reproduce them are in docs/nuts.md. Each run writes ``DIR/raman_nuts_<regime>.json``
and ``.png`` (``_<metric>`` added for a fixed ``--metric``, ``_x<intensity>`` for ``--intensity``), so that
runs of the regimes share a folder.

The analyte component is the MAP component best correlated with the true
spectrum; posterior correlations use the same component in every draw.
ESS per second is the smallest bulk ESS over the pooled chains per second of
wall time of the sampling phase (``ess_per_second``) and of warm-up plus
sampling (``ess_per_second_with_warmup``); ``ess_per_cpu_second`` divides by
the slowest chain's own CPU time instead, the wall time it would take with a
core per chain on an otherwise idle machine.
"""

import time

import numpy as np

from _common import (integer_list, non_negative_int, number_type, positive_float, positive_int, positive_list,
                     recipe_parser, run_recipe, write_results)

from sepsti.core.errors import ParameterError
from sepsti.core.factorization.map import map_nmf_gpp
from sepsti.core.blas import single_threaded_blas
from sepsti.core.models.nmf_gpp import NMFGPP
from sepsti.core.samplers.chains import NUTSSettings, sample_nuts
from sepsti.core.samplers.diagnostics import mcse_mean
from sepsti.core.samplers.metric import AutoMetricSettings, TargetStructure
from sepsti.corpora.raman import simulate_raman

NAME = "raman_nuts"

# (intensity, noise standard deviation = sigma_N) of the simulated map.
REGIMES = {"stiff": (1.0, 0.05), "weak": (5.0, 5.0), "faint": (2.0, 5.0)}

# Time of one product by the dense 1350 x 1350 inverse mass matrix over one gradient evaluation (numpy gemv
# against NMFGPP.logdensity_and_grad, one thread): what a dense metric's leaf costs on top of its gradient.
DENSE_COST = 2.0

METRICS = {"auto": "auto", "diagonal": "diagonal", "diagonal+moves": "diagonal+moves",
           "gauss-newton": "precision", "gauss-newton+moves": "precision+moves", "dense": "dense"}


def corr(a, b):
    return float(np.corrcoef(a, b)[0, 1])


def nmf_gpp_structure(model):
    """What NUTS can use beyond the density: the Gauss-Newton precision, the D/H scale group, its coordinates."""
    return TargetStructure(precision_fn=model.gauss_newton_precision, transform_fn=model.rescale,
                           num_groups=model.num_components, summary_fn=model.component_log_scales)


def run_one(data, beta, *, num_warmup, num_draws, metric, max_tree_depth, target, seed, num_chains=2,
            num_workers=None, scale_moves=5):
    """MAP then ``num_chains`` NUTS chains from it; returns the JSON record, the figure data and the NUTSResult."""
    if metric not in METRICS:
        raise ParameterError(f"metric={metric!r}: expected one of {sorted(METRICS)}")
    model = NMFGPP(data.X, num_components=2, plate_shape=data.plate_shape, beta=beta, noise_std=data.noise_std)
    start = time.perf_counter()
    estimate = map_nmf_gpp(model, num_starts=3, seed=seed)
    map_seconds = time.perf_counter() - start
    analyte = int(np.argmax([corr(estimate.H[k], data.H[0]) for k in range(2)]))
    model.logdensity_and_grad(estimate.theta)  # compile (or load) the kernel once, before the workers fork
    result = sample_nuts(model.logdensity_and_grad, estimate.theta, num_warmup=num_warmup, num_draws=num_draws,
                         num_chains=num_chains, metric=METRICS[metric], seed=seed, structure=nmf_gpp_structure(model),
                         settings=NUTSSettings(max_tree_depth=max_tree_depth, target=target,
                                               raised_targets=tuple(t for t in NUTSSettings().raised_targets
                                                                    if t > target)),
                         auto=AutoMetricSettings(dense_cost=DENSE_COST, num_move_sweeps=scale_moves),
                         num_workers=num_workers)
    thetas = result.draws.reshape(-1, model.dim)
    diagnostics = result.diagnostics
    spectra = [model.factors(theta)[1][analyte] for theta in thetas]
    picks = np.linspace(max(0, num_draws - 100), num_draws - 1, 4).astype(int)  # the first chain's
    wall = result.sampling_seconds
    record = {
        "experiment": data.experiment, "beta": beta, "noise_std": data.noise_std,
        "map_spectrum_corr": corr(estimate.H[analyte], data.H[0]),
        "map_loading_corr": corr(estimate.D[:, analyte], data.D[:, 0]),
        "posterior_spectrum_corr": float(np.mean([corr(h, data.H[0]) for h in spectra])),
        "metric": metric, "chosen_metric": result.metric.metric, "metric_reason": result.metric.reason,
        "pilots": [p._asdict() for p in result.metric.pilots],
        "num_chains": num_chains,
        "min_ess": diagnostics.min_bulk_ess, "median_ess": diagnostics.median_bulk_ess,
        "min_tail_ess": diagnostics.min_tail_ess, "worst": diagnostics.worst, "max_rhat": diagnostics.max_rhat,
        "worst_rhat": diagnostics.worst_rhat, "target": result.metric.target,
        "step_checks": [list(check) for check in result.metric.checks],
        "ess_per_second": diagnostics.min_bulk_ess / wall,
        "ess_per_second_with_warmup": diagnostics.min_bulk_ess / (wall + result.warmup_seconds),
        # The slowest chain's own CPU time: the wall time with a core per chain, whatever else the machine runs.
        "ess_per_cpu_second": diagnostics.min_bulk_ess / max(c.sampling_cpu_seconds for c in result.chains),
        "ess_per_cpu_second_with_warmup": diagnostics.min_bulk_ess / max(c.sampling_cpu_seconds + c.warmup_cpu_seconds
                                                                         for c in result.chains),
        "divergences": diagnostics.num_divergent,
        "warmup_divergences": int(sum(c.num_warmup_divergent for c in result.chains)),
        "step_size": [c.step_size for c in result.chains],
        "mean_tree_depth": float(np.mean([c.mean_tree_depth for c in result.chains])),
        "max_tree_depth_hits": diagnostics.num_depth_capped,  # trees the cap cut short (not those that turned at it)
        "gradient_evaluations": int(sum(c.num_gradients for c in result.chains)),
        "warmup_gradient_evaluations": int(sum(c.num_warmup_gradients for c in result.chains)),
        "scale_move_acceptance": [None if c.move_acceptance is None else c.move_acceptance.tolist()
                                  for c in result.chains],
        "map_seconds": map_seconds, "warmup_seconds": result.warmup_seconds, "sampling_seconds": wall,
        "chain_sampling_seconds": [c.sampling_seconds for c in result.chains],
        "chain_sampling_cpu_seconds": [c.sampling_cpu_seconds for c in result.chains],
        "chain_warmup_cpu_seconds": [c.warmup_cpu_seconds for c in result.chains],
        "map_log_posterior": estimate.log_posterior,
        "mean_draw_log_posterior": float(result.logdensity.mean()),
        "mean_draw_log_posterior_mcse": float(mcse_mean(result.logdensity)),
    }
    figures = {"true_H": data.H[0], "map_H": estimate.H[analyte],
               "draw_H": [spectra[i] for i in picks],
               "true_D": data.D[:, 0].reshape(data.plate_shape),
               "map_D": estimate.D[:, analyte].reshape(data.plate_shape),
               "draw_D": [model.factors(thetas[i])[0][:, analyte].reshape(data.plate_shape) for i in picks[[0, -1]]]}
    return record, figures, result


def make_figure(panels):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 5, figsize=(17, 3.2 * len(panels)), squeeze=False)
    for row, (record, fig_data) in zip(axes, panels):
        title = f"exp {record['experiment']}, β = {record['beta']}"
        ax = row[0]
        ax.plot(fig_data["true_H"] / fig_data["true_H"].max(), "k", lw=2, label="true")
        ax.plot(fig_data["map_H"] / fig_data["map_H"].max(), "C3", lw=1.5, label="MAP")
        for i, h in enumerate(fig_data["draw_H"]):
            ax.plot(h / h.max(), "C0", alpha=0.6, lw=1, label="draws" if i == 0 else None)
        ax.set_title(f"{title}: spectrum (max-normalised)")
        ax.set_xlabel("wavenumber index")
        ax.legend(fontsize=7)
        maps = [("true loading", fig_data["true_D"]), ("MAP loading", fig_data["map_D"]),
                ("chain 1, 100 draws from its end", fig_data["draw_D"][0]),
                ("chain 1, its last draw", fig_data["draw_D"][1])]
        for ax, (label, image) in zip(row[1:], maps):
            shown = ax.imshow(image, cmap="viridis")
            fig.colorbar(shown, ax=ax, fraction=0.046)
            ax.set_title(f"{title}: {label}", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
    fig.tight_layout()
    return fig


#: ``argparse`` types of the chains' lengths: the warm-up's windows take 20 iterations, split-R-hat 4 draws.
warmup_count = number_type(int, lambda value: value >= 20, "an integer of at least 20")
draw_count = number_type(int, lambda value: value >= 4, "an integer of at least 4")


def add_chain_options(parser):
    """Add the options of the NUTS runs, which ``benchmarks/nuts_nmf_gpp.py`` shares; :func:`chain_lengths` reads
    two of them."""
    parser.add_argument("--warmup", type=warmup_count, default=None,
                        help="warm-up iterations (default 1000; quick 150)")
    parser.add_argument("--draws", type=draw_count, default=None,
                        help="kept draws per chain (default 2000, enough for split-R-hat < 1.01 over 1353 quantities; "
                             "quick 150)")
    parser.add_argument("--chains", type=positive_int, default=2, help="independent chains, run in parallel")
    parser.add_argument("--scale-moves", type=non_negative_int, default=5,
                        help="sweeps of D/H scale moves per transition in +moves metrics")
    parser.add_argument("--target", type=number_type(float, lambda value: 0 < value < 1, "a number in (0, 1)"),
                        default=0.8, help="target acceptance statistic delta")


def chain_lengths(args):
    """The warm-up and the draws of ``args`` (:func:`add_chain_options`): as given, or a full or a quick run's."""
    return ((150 if args.quick else 1000) if args.warmup is None else args.warmup,
            (150 if args.quick else 2000) if args.draws is None else args.draws)


def results_name(args):
    """The name of a run's results: the regime, and the metric and the intensity where they are not the default."""
    return (f"{NAME}_{args.regime}" + ("" if args.metric == "auto" else f"_{args.metric}")
            + ("" if args.intensity is None else f"_x{args.intensity:g}"))


def main():
    parser = recipe_parser(NAME, __doc__.splitlines()[0], output=results_name,
                           output_help=f"{NAME}_REGIME[_METRIC][_xINTENSITY]", plot=True)
    add_chain_options(parser)
    parser.add_argument("--metric", choices=sorted(METRICS), default="auto",
                        help="auto (default): chosen from pilot runs in the warm-up; or a fixed one")
    parser.add_argument("--regime", choices=sorted(REGIMES), default="stiff",
                        help="stiff: sigma_N = 0.05, spectra at 1 (the paper's simulation); weak: sigma_N = 5, "
                             "signal x5 (a less informative likelihood); faint: sigma_N = 5, signal x2")
    parser.add_argument("--intensity", type=positive_float, default=None,
                        help="signal scale of the simulated map, overriding the regime's (sigma_N stays the regime's)")
    parser.add_argument("--workers", type=positive_int, default=None,
                        help="chains at once (default: min(chains, cores))")
    parser.add_argument("--max-tree-depth", type=positive_int, default=None, help="default 10; quick 8")
    parser.add_argument("--experiments", type=integer_list, default=[1, 2], help="1, 2 or 1,2 (default 1,2)")
    parser.add_argument("--betas", type=positive_list, default=[10.0, 20.0],
                        help="length scales beta, comma-separated (default 10,20)")
    args = parser.parse_args()
    if not set(args.experiments) <= {1, 2}:
        parser.error(f"--experiments {','.join(map(str, args.experiments))}: expected 1, 2 or 1,2")
    num_warmup, num_draws = chain_lengths(args)
    args.max_tree_depth = (8 if args.quick else 10) if args.max_tree_depth is None else args.max_tree_depth
    intensity, noise_std = REGIMES[args.regime]
    intensity = intensity if args.intensity is None else args.intensity

    runs, panels = [], []
    with single_threaded_blas():
        for experiment in args.experiments:
            data = simulate_raman(experiment, seed=args.seed, intensity=intensity, noise_std=noise_std)
            for beta in args.betas:
                record, fig_data, _ = run_one(data, beta, num_warmup=num_warmup, num_draws=num_draws,
                                              metric=args.metric, max_tree_depth=args.max_tree_depth,
                                              target=args.target, seed=args.seed, num_chains=args.chains,
                                              num_workers=args.workers, scale_moves=args.scale_moves)
                runs.append(record)
                panels.append((record, fig_data))
                print(f"exp {experiment} beta {beta:g} ({args.regime}): metric {record['chosen_metric']}, "
                      f"MAP corr {record['map_spectrum_corr']:.3f}, posterior corr "
                      f"{record['posterior_spectrum_corr']:.3f}, min ESS {record['min_ess']:.0f} "
                      f"({record['ess_per_second']:.2f}/s, {record['worst']}), max R-hat {record['max_rhat']:.3f}, "
                      f"divergences {record['divergences']} (delta {record['target']:g}), "
                      f"depth {record['mean_tree_depth']:.2f}", flush=True)
    settings = {"num_warmup": num_warmup, "num_draws": num_draws, "metric": args.metric, "regime": args.regime,
                "intensity": intensity, "noise_std": noise_std, "chains": args.chains, "scale_moves": args.scale_moves,
                "max_tree_depth": args.max_tree_depth, "target": args.target, "rate": 1.0,
                "num_components": 2, "seed": args.seed}
    write_results(args, {"runs": runs, "settings": settings}, make_figure(panels))


if __name__ == "__main__":
    run_recipe(main, NAME)
