"""NUTS on NMF-GPP for simulated Raman maps: both experiments of the NUTS NMF-GPP paper, beta = 10 and 20.

For each experiment (1: one Voigt peak in two hotspots; 2: two Voigt curves
with nearly the same peak) and each length-scale beta (10 "unsmooth", 20
"smooth"), with M = 2 components:

1. MAP by L-BFGS on (delta, eta) (best of 3 starts), as the paper does;
2. NUTS from the MAP: 1500 warm-up iterations (dual averaging to delta = 0.8,
   windowed diagonal mass matrix) then 1500 draws (``--quick``: 100 + 100, max tree depth 7).

Settings the paper leaves open: lambda = 1 for both exponential marginals,
sigma_N = the simulator's noise standard deviation (0.05), kernels exactly as
written in the paper (SE exp(-(i-j)^2/beta^2) over wavenumber, exponential
exp(-||x-x'||/beta^2) over plate coordinates), jitter 1e-6.

``--metric diagonal`` (default) is the paper's setting: NUTS on theta with an
adapted diagonal mass matrix. On this posterior (Laplace condition number
~1e6 at the MAP) its step size settles near 1e-3 and the trees saturate
``max_tree_depth``, so a full run costs ~3e6 gradient evaluations.
``--metric laplace`` runs NUTS on u with theta = theta_MAP + A u,
where A whitens the ``--rank`` stiffest directions of the Laplace precision
at the MAP (finite-difference Hessian); the diagonal mass matrix is then
adapted on u (an experiment: in short runs it did not enlarge the step).
``--metric dense`` runs NUTS on theta with a dense mass matrix, M^-1 = the
Laplace covariance at the MAP (inverse finite-difference Hessian), kept
fixed while dual averaging sets the step; ``--metric dense-adapted`` starts
there and re-estimates M^-1 in Stan's windows (regularised Welford
covariance; it needs windows of well over dim = 1350 draws to help).
Measured on Experiment 1, beta = 10, 300 + 300, depth 8: dense raises the
step from 2.3e-3 to 9.5e-3 and the median ESS from 3 to 88, but the trees
still saturate and the smallest ESS stays ~1.5: the slowest direction is the
D/H scale ridge of the background component, whose curvature changes along
the ridge, which no constant metric whitens. dense-adapted (windows of
<= 150 draws) gives 183 divergences and median ESS 5.

``--metric gauss-newton`` keeps the paper's posterior and sampler and
changes the warm-up only: the first half adapts a diagonal metric as usual
(the chain leaves the MAP for the typical set), then M^-1 is fixed to
(I + sigma_N^-2 J^T J)^-1 at the state reached (J = d vec(DH)/d theta: the
Gauss-Newton precision, positive definite anywhere) and the second half
adapts the step only. The Laplace metric above is taken at the MAP, which is
far from where the posterior mass is: along the scale orbit
(D_k, H_k) -> (c D_k, H_k / c) the posterior density times the orbit's
volume factor peaks near c = e^3.5 for the background component of
Experiment 1 (+589 nats over the MAP point), so a metric fitted at the MAP
does not describe the draws. ``--scale-moves N`` adds, after each NUTS
transition, N sweeps of Metropolis moves along that orbit per component
(log c ~ N(0, s_k^2), accepted with the density ratio times the Jacobian;
s_k adapted to acceptance 0.44 during warm-up), an exact kernel for the same
posterior (Liu & Sabatti 2000). Measured on Experiment 1, beta = 10, at the
paper's lengths (1500 + 1500, depth 10, load 7-10): diagonal min ESS 2.9,
median 49, 0.0023 min-ESS/s, every tree at depth 10; gauss-newton with 5
sweeps: min ESS 258, median 1726, 0.70 min-ESS/s, mean depth 4.9, same mean
log posterior of the draws (-16425 vs -16427). Either addition alone leaves
the smallest ESS near 2 (150 + 150 runs).

The analyte component is the MAP component best correlated with the true
spectrum; posterior correlations use the same component in every draw.
ESS is ArviZ-style bulk ESS over all latent parameters (the smallest one),
per second of the sampling phase (warm-up excluded).
"""

import time

import numpy as np

from _common import recipe_parser, write_results

from core.errors import ParameterError
from core.factorization.map import limit_blas_threads, map_nmf_gpp
from core.models.nmf_gpp import NMFGPP
from core.random import stream
from core.samplers import group_move, hmc, nuts
from core.samplers.diagnostics import effective_sample_size
from core.samplers.driver import run_chain
from core.samplers.mass_matrix import low_rank_preconditioner, numerical_precision, reparametrize
from core.samplers.warmup import window_adaptation
from corpora.raman import simulate_raman

NAME = "raman_nuts"


def corr(a, b):
    return float(np.corrcoef(a, b)[0, 1])


class ScaleMoves:
    """Scale moves of every component after each NUTS transition, the proposal adapted while ``is_adapting``."""

    def __init__(self, model, target_fn, num_moves):
        self.kernel = group_move.build_kernel(model.rescale, target_fn, num_groups=model.num_components,
                                              num_moves=num_moves)
        self.log_proposal_std = np.full(model.num_components, np.log(0.05))
        self.is_adapting = True
        self.iteration = 0
        self.acceptance = []

    def __call__(self, rng, state):
        state, info = self.kernel(rng, state, self.log_proposal_std)
        self.acceptance.append(info.acceptance_rate)
        if self.is_adapting:
            self.iteration += 1
            self.log_proposal_std = group_move.adapt_log_proposal_std(self.log_proposal_std, info.acceptance_rate,
                                                                      self.iteration)
        return state


def run_one(data, beta, *, num_warmup, num_draws, metric, rank, max_tree_depth, target, seed, progress,
            scale_moves=0):
    model = NMFGPP(data.X, num_components=2, plate_shape=data.plate_shape, beta=beta, noise_std=data.noise_std)
    start = time.perf_counter()
    estimate = map_nmf_gpp(model, num_starts=3, seed=seed)
    map_seconds = time.perf_counter() - start
    analyte = int(np.argmax([corr(estimate.H[k], data.H[0]) for k in range(2)]))

    if metric == "laplace" and scale_moves:
        raise ParameterError("--scale-moves works on theta itself: use it with another --metric")
    if metric == "laplace":
        transform = low_rank_preconditioner(numerical_precision(model.logdensity_and_grad, estimate.theta),
                                            estimate.theta, rank=rank)
        target_fn, to_theta = reparametrize(model.logdensity_and_grad, transform)
        position = np.zeros(model.dim)
    else:
        target_fn, to_theta = model.logdensity_and_grad, (lambda u: u)
        position = estimate.theta
    adaptation = {}
    if metric.startswith("dense"):
        covariance = np.linalg.inv(numerical_precision(model.logdensity_and_grad, estimate.theta))
        adaptation = {"metric": "dense", "inverse_mass_matrix": 0.5 * (covariance + covariance.T),
                      "adapt_mass_matrix": metric == "dense-adapted"}
    nuts_kernel = nuts.build_kernel(target_fn, max_tree_depth=max_tree_depth)
    moves = ScaleMoves(model, target_fn, scale_moves) if scale_moves else None

    def kernel(rng, state, step_size, inverse_mass_matrix):
        state, info = nuts_kernel(rng, state, step_size, inverse_mass_matrix)
        if moves is not None:
            state = moves(rng, state)
        return state, info

    rng = stream(seed, 11, data.experiment, int(beta))
    start = time.perf_counter()
    desc = f"warm-up exp {data.experiment} beta {beta}"
    if metric == "gauss-newton":
        # Reach the typical set with the diagonal metric first, then fix M⁻¹ = (I + σ⁻² JᵀJ)⁻¹ there.
        first = window_adaptation(kernel, hmc.init(position, target_fn), rng, target_fn,
                                  num_steps=num_warmup // 2, target=target, progress=progress, desc=desc)
        covariance = np.linalg.inv(model.gauss_newton_precision(first.state.position))
        warm = window_adaptation(kernel, first.state, rng, target_fn, num_steps=num_warmup - num_warmup // 2,
                                 target=target, metric="dense", inverse_mass_matrix=0.5 * (covariance + covariance.T),
                                 adapt_mass_matrix=False, progress=progress, desc=desc)
        warm = warm._replace(num_divergent=first.num_divergent + warm.num_divergent)
    else:
        warm = window_adaptation(kernel, hmc.init(position, target_fn), rng, target_fn, num_steps=num_warmup,
                                 target=target, progress=progress, desc=desc, **adaptation)
    if moves is not None:
        moves.is_adapting = False
    warm_seconds = time.perf_counter() - start
    start = time.perf_counter()
    chain = run_chain(lambda r, s, i: kernel(r, s, warm.step_size, warm.inverse_mass_matrix), warm.state, rng,
                      num_steps=num_draws, progress=progress, desc=f"draws exp {data.experiment} beta {beta}")
    seconds = time.perf_counter() - start
    thetas = to_theta(chain.samples)
    ess = effective_sample_size(thetas[None])
    spectra = [model.factors(theta)[1][analyte] for theta in thetas]
    picks = np.linspace(max(0, num_draws - 100), num_draws - 1, 4).astype(int)
    record = {
        "experiment": data.experiment, "beta": beta,
        "map_spectrum_corr": corr(estimate.H[analyte], data.H[0]),
        "map_loading_corr": corr(estimate.D[:, analyte], data.D[:, 0]),
        "posterior_spectrum_corr": float(np.mean([corr(h, data.H[0]) for h in spectra])),
        "ess_per_second": float(ess.min() / seconds),
        "min_ess": float(ess.min()), "median_ess": float(np.median(ess)),
        "divergences": int(chain.num_divergent), "warmup_divergences": int(warm.num_divergent),
        "step_size": float(warm.step_size), "mean_tree_depth": float(np.mean(chain.info.tree_depth)),
        "max_tree_depth_hits": int(np.sum(chain.info.tree_depth >= max_tree_depth)),
        "mean_acceptance": float(np.mean(chain.info.acceptance_rate)),
        "gradient_evaluations": int(np.sum(chain.info.num_integration_steps)),
        "map_seconds": map_seconds, "warmup_seconds": warm_seconds, "sampling_seconds": seconds,
        "map_log_posterior": estimate.log_posterior,
        "metric": metric, "scale_moves": scale_moves,
        "scale_move_acceptance": (np.mean(moves.acceptance[-num_draws:], axis=0).tolist() if moves else None),
        "mean_draw_log_posterior": float(np.mean([model.logdensity_and_grad(t)[0] for t in thetas[::10]])),
    }
    figures = {"true_H": data.H[0], "map_H": estimate.H[analyte],
               "draw_H": [spectra[i] for i in picks],
               "true_D": data.D[:, 0].reshape(data.plate_shape),
               "map_D": estimate.D[:, analyte].reshape(data.plate_shape),
               "draw_D": [model.factors(thetas[i])[0][:, analyte].reshape(data.plate_shape) for i in picks[[0, -1]]]}
    return record, figures


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
                ("draw", fig_data["draw_D"][0]), ("draw (last)", fig_data["draw_D"][1])]
        for ax, (label, image) in zip(row[1:], maps):
            shown = ax.imshow(image, cmap="viridis")
            fig.colorbar(shown, ax=ax, fraction=0.046)
            ax.set_title(f"{title}: {label}", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
    fig.tight_layout()
    return fig


def main():
    parser = recipe_parser(NAME, __doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=None, help="warm-up iterations (default 1500; quick 100)")
    parser.add_argument("--draws", type=int, default=None, help="kept draws (default 1500; quick 100)")
    parser.add_argument("--metric", choices=["diagonal", "laplace", "dense", "dense-adapted", "gauss-newton"],
                        default="diagonal")
    parser.add_argument("--scale-moves", type=int, default=0,
                        help="sweeps of D/H scale moves per NUTS transition (default 0: NUTS alone, as the paper)")
    parser.add_argument("--rank", type=int, default=300, help="whitened directions for --metric laplace")
    parser.add_argument("--max-tree-depth", type=int, default=None, help="default 10; quick 7")
    parser.add_argument("--target", type=float, default=0.8, help="target acceptance statistic delta")
    parser.add_argument("--experiments", default="1,2")
    parser.add_argument("--betas", default="10,20")
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args()
    num_warmup = args.warmup or (100 if args.quick else 1500)
    num_draws = args.draws or (100 if args.quick else 1500)
    args.max_tree_depth = args.max_tree_depth or (7 if args.quick else 10)

    runs, panels = [], []
    with limit_blas_threads(1):
        for experiment in [int(e) for e in args.experiments.split(",")]:
            data = simulate_raman(experiment, seed=args.seed)
            for beta in [float(b) for b in args.betas.split(",")]:
                record, fig_data = run_one(data, beta, num_warmup=num_warmup, num_draws=num_draws,
                                           metric=args.metric, rank=args.rank, max_tree_depth=args.max_tree_depth,
                                           target=args.target, seed=args.seed, progress=args.progress,
                                           scale_moves=args.scale_moves)
                runs.append(record)
                panels.append((record, fig_data))
                print(f"exp {experiment} beta {beta:g}: MAP corr {record['map_spectrum_corr']:.3f}, posterior corr "
                      f"{record['posterior_spectrum_corr']:.3f}, min ESS {record['min_ess']:.0f} "
                      f"({record['ess_per_second']:.2f}/s), divergences {record['divergences']}, "
                      f"step {record['step_size']:.3g}, depth {record['mean_tree_depth']:.2f}", flush=True)
    settings = {"num_warmup": num_warmup, "num_draws": num_draws, "metric": args.metric, "rank": args.rank,
                "scale_moves": args.scale_moves,
                "max_tree_depth": args.max_tree_depth, "target": args.target, "rate": 1.0, "noise_std": 0.05,
                "num_components": 2, "seed": args.seed}
    write_results(args.out, NAME, {"runs": runs, "settings": settings}, make_figure(panels))


if __name__ == "__main__":
    main()
