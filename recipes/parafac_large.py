"""PARAFAC'18 Fig. 2c-sized: rank selection on a sparse Facebook-shaped tensor by block-parallel STI-pSGLD.

Data: a 42390 × 39986 × 1506 tensor with about ``--nnz`` (default one
million) non-zeros drawn from Poisson PARAFAC at a known rank
(``--true-rank``, default 5) with the exponential prior rate λ₀ that makes
the expected count equal to ``--nnz`` (λ₀ ≈ 234 for 10⁶ and R = 5), never
densified; or a user's FROSTT file (``--tns FILE``). For each prior rate λ in
``--lambdas`` (default λ₀/2, λ₀, 2λ₀; required with ``--tns``) and each
R ∈ 1..11: STI-pSGLD with T = 5 intervals (uniform grid), K iterations per
temperature keeping the last 500, B = 12 (iteration l uses part
(l − 1) mod 144), α = 0.99, σ = 1e−5 × nnz / N (below).

K: the paper's 3000 at t ≤ 0.6 and 30,000 at t = 0.8 and 1 (``--steps``
takes one K or T + 1 values for t = 0, 0.2, …, 1; ``--steps 3000`` is the
paper's setting). Near t = 1 the power posterior is narrowest and chains
started from the prior are still climbing after 3000 iterations: at λ₀,
E_1 rises by 7·10⁴ from K = 3000 to 12,000 and by 2·10⁴ more to 30,000
(R = 5), while at t ≤ 0.6 it moves by less than 10³; with K = 3000 at
every temperature the high-t bias is larger than the difference between
R = 5 and R = 6, and R = 6 is selected for true R = 5.

Settings chosen where the paper is silent: the step size and the scale of
σ. pSGLD's v averages the squared gradient *per tensor entry*; with
N = I J K ≈ 2.6e12 entries and 10⁶ non-zeros those averages are ~1e−9, so
the paper's σ = 1e−5 (negligible beside √v in the synthetic experiment,
where the averages are O(1)) would swamp √v, turn pSGLD into SGLD with a
step ε/σ and leave the chains where they start. σ is therefore taken
relative to the average per non-zero: σ = 1e−5 × nnz / N. With √v ≫ σ,
pSGLD's move per iteration is about ε N in every coordinate (G ≈ 1/|ḡ| and
the gradient is about N ḡ), so the fixed step after burn-in is
ε = 0.01 / (λ N) — one percent of the prior scale 1/λ per iteration — and
a = burn-in × ε^(1/b) with b = 0.51 gives it, per temperature, so every K
ends at the same step (a 2500-iteration burn-in starts 2500^b ≈ 54 times
larger); for the synthetic experiment this rule gives ε ≈ 1.1e−6, the paper's (1e−8/1500)^0.51 ≈ 2e−6. As in
:mod:`sepsti.core.evidence.parafac_rank`: t = 0 uses independent prior draws, chains
start at prior draws (``--init map``: that draw after 50 MAP sweeps).

E_t[log p(X | θ)] is the chain average of the *full* log-likelihood of the
sample every B-th kept iteration (``--evaluate full``, ``--evaluate-every``;
Σ x̂ from column sums, one pass over the non-zeros: ≈ 15 ms at R = 5, 24 ms at
R = 11, i.e. +5–7 % per chain), 42 values per chain; 500 independent prior
draws at t = 0, each scored on all the data. The paper's per-iteration part estimate (eq. 7, ``--evaluate
before_update``) is the part's log-likelihood times B²: on this tensor its
standard deviation is 1.8·10⁵ (the data's part-to-part spread; the full
log-likelihood's along a chain is 5.5–8.6·10²), and because parts are visited in
cyclic order the part scored is always the one the chain fitted B² − 1
iterations earlier, which puts the estimate 2.9–3.8·10⁴ below the full
log-likelihood of the same samples (R = 4..7 at t = 1, R = 5 at t = 0.2).

The prior rates run in the order λ₀, λ₀/2, 2λ₀, so that an interrupted run
(resumed from ``--checkpoint``) has the data's own rate first.

Run: ``python recipes/parafac_large.py [--quick] [--out DIR] [--seed S] [--tns FILE]``
(``--parallel``: the B blocks of a part on numba threads, same samples; 1.8–2.0× faster per chain with
two idle cores, slower when the cores are shared), or under
``mpiexec -n P`` (same result for any P; process 0 writes the outputs) to
spread the (rank, temperature) chains over P processes, or, with
``--distributed``, to run every chain on all P processes with its blocks
spread as in PARAFAC'18 Fig. 1 (each process keeps its A-blocks and data
slab; B- and C-blocks travel). Without the flag the block level is chosen
when one chain is too big for one process: when the tensor's non-zeros
(32 bytes each) exceed ``--chain-memory-gb`` (default 1 GiB).
JSON keys: ``shape``, ``nnz``, ``ranks``, ``lambdas``, ``log_marginal_likelihood``
(λ → list), ``stderr`` (λ → list), ``selected_rank`` (λ → R), ``true_R``,
``seconds``, ``cpu_seconds``, ``peak_rss_mb``, ``processes``, ``mpi_level``, ``settings``, and per λ
``mean_log_likelihood`` / ``mcse`` (rank → per temperature), ``largest_decrease_se`` (the tempering
check of :mod:`sepsti.core.evidence.tempering_check`, per rank), ``per_lambda_seconds``, ``per_lambda_cpu_seconds``.
"""

import resource
import time
import warnings

import numpy as np

from _common import (count_list, positive_float, positive_int, positive_list, rank_list, recipe_parser, run_recipe,
                     write_results)

from sepsti.core.errors import ParameterError
from sepsti.core.evidence.parafac_rank import select_parafac_rank
from sepsti.core.parallel.mpi import abort_on_error, is_root, world
from sepsti.core.random import stream
from sepsti.corpora.frostt import read_tns
from sepsti.corpora.tensors import FACEBOOK_SHAPE, prior_rate_for_count, simulate_sparse

NAME = "parafac_large"
STEPS = (3000, 3000, 3000, 3000, 30000, 30000)  # K at t = 0 (unused: prior draws), 0.2, ..., 1


def step_a_for(prior_rate, n_data, num_burn_in, step_b):
    """a such that (a / burn-in)^b = 0.01 / (λ N): a fixed step of 1% of the prior scale per iteration."""
    final = 0.01 / (float(np.mean(prior_rate)) * float(n_data))
    return num_burn_in * final ** (1.0 / step_b)


def sigma_for(nnz, n_data, sigma=1e-5):
    """pSGLD's σ relative to the gradient average per non-zero: ``sigma × nnz / N`` (module docstring)."""
    return float(sigma) * float(nnz) / float(n_data)


def main():
    parser = recipe_parser(NAME, __doc__.splitlines()[0], plot=True)
    parser.add_argument("--tns", help="a FROSTT .tns file to use instead of the simulated tensor")
    parser.add_argument("--nnz", type=positive_int, default=1_000_000,
                        help="expected non-zeros of the simulated tensor")
    parser.add_argument("--true-rank", type=positive_int, default=5, help="rank of the simulated tensor (default 5)")
    parser.add_argument("--lambdas", type=positive_list, help="comma-separated prior rates (default λ0/2, λ0, 2λ0)")
    parser.add_argument("--ranks", type=rank_list, help="comma-separated ranks (default 1..11)")
    parser.add_argument("--steps", type=count_list,
                        help="iterations per temperature: one K, or T + 1 comma-separated values for t = 0, 0.2, "
                        "..., 1 (default 3000 at t <= 0.6, 30000 at t = 0.8, 1; the paper: 3000)")
    parser.add_argument("--keep", type=positive_int, help="kept iterations (default 500)")
    parser.add_argument("--blocks", type=positive_int, default=12, help="B (default 12)")
    parser.add_argument("--checkpoint", help="folder for per-chain checkpoints (one subfolder per λ)")
    parser.add_argument("--evaluate", choices=("full", "before_update", "after_update"), default="full",
                        help="E_t[log p] from the full log-likelihood (default) or the paper's part estimates")
    parser.add_argument("--evaluate-every", type=positive_int, help="m of --evaluate full (default B)")
    parser.add_argument("--schedule", choices=("uniform", "power"), default="uniform",
                        help="temperature grid: t_i = i/T (default) or (i/T)^c")
    parser.add_argument("--power", type=positive_float, default=5.0, help="c of --schedule power (default 5)")
    parser.add_argument("--rule", choices=("trapezoid", "simpson"), default="trapezoid",
                        help="quadrature: trapezoid in t (default) or Simpson in u = t^(1/c)")
    parser.add_argument("--replicates", type=positive_int, default=1,
                        help="independent chains per (rank, temperature); with 2 or more the standard errors come "
                             "from their spread (default 1, the paper's)")
    parser.add_argument("--init", choices=("prior", "map"), default="prior",
                        help="chain start: a prior draw, or that draw after 50 MAP sweeps (default prior)")
    parser.add_argument("--parallel", action="store_true",
                        help="update the B blocks of a part on numba threads (same samples; for idle cores)")
    parser.add_argument("--distributed", action="store_true",
                        help="under mpiexec: spread each chain's blocks over the processes (Fig. 1)")
    parser.add_argument("--chain-memory-gb", type=positive_float, default=1.0,
                        help="under mpiexec: use the block level when the non-zeros need more (default 1)")
    args = parser.parse_args()
    started = time.perf_counter()
    warnings.simplefilter("ignore", RuntimeWarning)  # short-trace MCSE warnings: the stderr is reported anyway
    comm = world()
    with abort_on_error(comm):
        run(args, parser, comm, is_root(comm), started)


def run(args, parser, comm, is_root, started):
    """The recipe's body (every process runs it; process 0 prints and writes)."""
    if args.tns:
        if not args.lambdas:
            parser.error("--lambdas is required with --tns (the paper used 0.01,1.8,3 for Facebook)")
        try:
            X = read_tns(args.tns)
        except (ParameterError, OSError) as error:
            parser.error(f"--tns: {error}")
        true_rank, own_rate = None, None
    else:
        nnz = 100_000 if args.quick and args.nnz == 1_000_000 else args.nnz
        own_rate = prior_rate_for_count(FACEBOOK_SHAPE, args.true_rank, nnz)
        X, _ = simulate_sparse(FACEBOOK_SHAPE, args.true_rank, prior_rate=own_rate, rng=stream(args.seed, 0))
        true_rank = args.true_rank
    lambdas = args.lambdas or ([own_rate] if args.quick else [own_rate, own_rate / 2, own_rate * 2])
    ranks = args.ranks or ([3, 5, 7] if args.quick else list(range(1, 12)))
    num_steps = args.steps or ([200] if args.quick else list(STEPS))
    num_keep = (50 if args.quick else 500) if args.keep is None else args.keep
    n_data = int(np.prod(X.shape, dtype=np.float64))
    distributed = comm is not None and (args.distributed or X.nnz * 32 > args.chain_memory_gb * 2 ** 30)
    level = "blocks" if distributed else ("chains" if comm is not None else "none")
    if is_root:
        print(f"tensor {X.shape}, nnz={X.nnz}, ranks={ranks}, lambdas={[round(v, 4) for v in lambdas]}, "
              f"K={','.join(map(str, num_steps))} (keep {num_keep}), B={args.blocks}, "
              f"processes={1 if comm is None else comm.Get_size()} (MPI level: {level})", flush=True)

    results = {"shape": list(X.shape), "nnz": X.nnz, "ranks": ranks, "lambdas": sorted(lambdas), "true_R": true_rank,
               "data_prior_rate": own_rate, "log_marginal_likelihood": {}, "stderr": {}, "selected_rank": {},
               "mean_log_likelihood": {}, "mcse": {}, "largest_decrease_se": {}, "per_lambda_seconds": {},
               "per_lambda_cpu_seconds": {}, "processes": 1 if comm is None else comm.Get_size(), "mpi_level": level}
    settings = {}
    sigma = sigma_for(X.nnz, n_data)
    for rate in lambdas:
        step_a = [step_a_for(rate, n_data, max(k - num_keep, 1), 0.51) for k in num_steps]
        checkpoint = None if args.checkpoint is None else f"{args.checkpoint}/lambda_{rate:.6g}"
        cpu = time.process_time()
        every = (args.blocks if args.evaluate_every is None else args.evaluate_every) if args.evaluate == "full" else 1
        result = select_parafac_rank(X, ranks, preset="paper", prior_rate=rate, sampler="psgld", num_intervals=5,
                                     schedule=args.schedule, power=args.power, rule=args.rule,
                                     num_steps=num_steps, num_keep=num_keep, num_blocks=args.blocks,
                                     step_a=step_a, step_b=0.51, alpha=0.99, sigma=sigma, seed=args.seed,
                                     evaluate=args.evaluate, evaluate_every=every, num_replicates=args.replicates,
                                     checkpoint=checkpoint, progress=is_root, comm=comm, distributed=distributed,
                                     init=args.init, init_iterations=50 if args.init == "map" else 0,
                                     parallel=args.parallel)
        key = f"{rate:.6g}"
        results["log_marginal_likelihood"][key] = result.log_marginal_likelihood
        results["stderr"][key] = result.stderr
        results["selected_rank"][key] = result.selected_rank
        results["mean_log_likelihood"][key] = [r.mean_log_likelihood for r in result.per_temperature]
        results["mcse"][key] = [r.mcse for r in result.per_temperature]
        results["largest_decrease_se"][key] = result.largest_decrease
        results["per_lambda_seconds"][key] = result.timing["seconds"]
        results["per_lambda_cpu_seconds"][key] = time.process_time() - cpu
        settings[key] = {k: v for k, v in result.settings.items() if k != "data"}
        if is_root:
            print(f"λ={key}: " + " ".join(f"R={r}:{v:.4g}±{e:.2g}" for r, v, e in
                                          zip(ranks, result.log_marginal_likelihood, result.stderr))
                  + f" -> R={result.selected_rank} ({result.timing['seconds']:.0f} s)", flush=True)
    results["settings"] = settings
    results["seconds"] = time.perf_counter() - started
    results["cpu_seconds"] = time.process_time()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    # peak RSS of the largest process (each holds the tensor and its chains' state)
    results["peak_rss_mb"] = peak if comm is None else max(comm.allgather(peak))
    if is_root:
        print(f"total {results['seconds']:.0f} s, peak RSS {results['peak_rss_mb']:.0f} MB per process")
        write_results(args, results, figure(results))


def figure(results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted(results["log_marginal_likelihood"], key=float)
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.6), squeeze=False)
    for ax, key in zip(axes[0], keys):
        ax.errorbar(results["ranks"], results["log_marginal_likelihood"][key], yerr=results["stderr"][key],
                    marker="s", capsize=2, label="STI-PSGLD")
        if results["true_R"] is not None:
            ax.axvline(results["true_R"], color="grey", linestyle=":", label="true R")
        ax.set_title(f"λ = {float(key):.4g} → R = {results['selected_rank'][key]}")
        ax.set_xlabel("rank R")
    axes[0][0].set_ylabel("log p(X | R)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    run_recipe(main, NAME)
