"""Speed of the STI part of the speech experiment (ICASSP'16 Fig. 4 settings).

Runs ``select_rank_sti`` on the NOIZEUS clean train split (257 x 1661) with
R in {32, 64, 128, 256, 512}, T = 5 intervals (6 chains per rank), K = 1250
iterations keeping the last 500, 8 x 8 blocks, a = 5e-7, b = 0.51,
lambda = 4e-4, and prints the time per rank and the share spent in the
compiled likelihood/gradient/update kernels. The peer figures are the
paper's own (C + GSL/BLAS + OpenMPI on a 4-core 2.5 GHz laptop): 9 minutes
for STI, about 6 hours for Chib's method; the ratio is printed against them.

Launch with ``mpiexec -n P`` to spread the chains over P processes (one
thread each); without MPI, ``--threads N`` runs N chains at a time in one
process (default: numba's thread count), ``--threads 1`` is one core. The
timed region includes the per-rank EM starts; the kernels are compiled
(or loaded from numba's cache) before it. Besides wall time it prints the
CPU seconds of every process: on a shared machine wall time counts the
waiting for other jobs, CPU time does not.

    python recipes/benchmarks/sti_speech.py --corpus DIR [--quick] [--dtype float32|float64] [--threads N]
    mpiexec -n 2 python recipes/benchmarks/sti_speech.py --corpus DIR
"""

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PAPER_STI_SECONDS = 9 * 60
PAPER_CHIB_SECONDS = 6 * 3600


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "data" / "noizeus")
    parser.add_argument("--quick", action="store_true", help="K = 250 keeping 100 (timing only)")
    parser.add_argument("--ranks", default="32,64,128,256,512")
    parser.add_argument("--dtype", choices=["float64", "float32"], default="float32")
    parser.add_argument("--threads", type=int, default=None,
                        help="numba threads per process (default: all without MPI, 1 under mpiexec)")
    parser.add_argument("--sampler", choices=["sgld", "psgld"], default="sgld")
    parser.add_argument("--init", choices=["em", "random"], default="em")
    parser.add_argument("--schedule", choices=["paper", "power"], default="paper",
                        help="paper: T = 5 uniform, trapezoid, eq. 9; power: T = 10, (i/T)^5, Simpson, before-update")
    parser.add_argument("--exact-prior", action="store_true", help="t = 0: independent prior draws, not SGLD")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    import numba

    from core.evidence.sti_nmf import select_rank_sti
    from core.parallel import mpi
    from sepsti.commands.select_rank import _training_matrix

    comm = mpi.world()
    with mpi.abort_on_error(comm):
        X = _training_matrix(args.corpus).astype(args.dtype)
        ranks = [int(r) for r in args.ranks.split(",")]
        num_steps, num_keep = (250, 100) if args.quick else (1250, 500)
        # compile the kernels (or load them from numba's cache) outside the timed region
        from core.parallel.blocks import warm_up

        warm_up()
        select_rank_sti(X[:, :64], [2], num_intervals=1, num_steps=4, num_keep=2, num_blocks=8, threads=args.threads)
        start = time.perf_counter()
        cpu_start = time.process_time()
        grid = (dict(num_intervals=5) if args.schedule == "paper" else
                dict(num_intervals=10, schedule="power", power=5.0, rule="simpson", evaluate="before_update"))
        selection = select_rank_sti(X, ranks, **grid, num_steps=num_steps, num_keep=num_keep,
                                    num_blocks=8, sampler=args.sampler, step_a=5e-7, step_b=0.51, prior_rate=4e-4,
                                    init=args.init, exact_prior=args.exact_prior, comm=comm, threads=args.threads,
                                    progress=True)
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
        cpus = [cpu] if comm is None else comm.gather(cpu, root=0)
        if selection is None:
            return
        processes = 1 if comm is None else comm.Get_size()
        print(f"X {X.shape} {X.dtype}, {processes} process(es), K = {num_steps} (keep {num_keep}), 8 x 8 blocks")
        print(f"{'rank':>6} {'log p(X|R)':>16} {'stderr':>10} {'chain s':>9} {'chain CPU s':>12}")
        for rank, result, seconds, cpu_rank in zip(ranks, selection.results, selection.seconds_per_rank,
                                                   selection.cpu_seconds_per_rank):
            print(f"{rank:>6} {result.log_evidence:16.1f} {result.stderr:10.1f} {seconds:9.1f} {cpu_rank:12.1f}")
        print(f"selected rank {selection.selected_rank}; all kept samples finite: {selection.all_finite}, "
              f"min factor entry {selection.min_kept:.3g}")
        threads = args.threads if args.threads is not None else (1 if comm is not None else numba.get_num_threads())
        print(f"sepsti STI: {wall:.1f} s wall on {processes} process(es) x {threads} thread(s): "
              f"EM starts {selection.seconds_start:.1f} s, chains {sum(selection.seconds_per_rank):.1f} s summed "
              f"({100 * selection.kernel_share:.0f}% of chain time in the compiled likelihood/gradient/update loop)")
        print(f"CPU seconds per process: {', '.join(f'{c:.1f}' for c in cpus)} (wall on a busy machine overstates "
              "the time; CPU time does not count waiting)")
        print(f"paper's C STI: {PAPER_STI_SECONDS} s -> ratio {PAPER_STI_SECONDS / wall:.2f}x; "
              f"paper's Chib: {PAPER_CHIB_SECONDS} s -> ratio {PAPER_CHIB_SECONDS / wall:.0f}x")
        if args.json is not None:
            args.json.write_text(json.dumps({
                "ranks": ranks, "log_marginal_likelihood": [r.log_evidence for r in selection.results],
                "stderr": [r.stderr for r in selection.results], "seconds": wall, "processes": processes,
                "seconds_per_rank": selection.seconds_per_rank, "kernel_share": selection.kernel_share,
                "seconds_start": selection.seconds_start, "cpu_seconds_per_process": cpus,
                "cpu_seconds_per_rank": selection.cpu_seconds_per_rank,
                "per_temperature": {str(r): res.mean_log_likelihood.tolist()
                                    for r, res in zip(ranks, selection.results)},
                "num_steps": num_steps, "num_keep": num_keep, "dtype": args.dtype,
                "init": args.init, "schedule": args.schedule, "exact_prior": args.exact_prior,
                "threads": args.threads}, indent=2))


if __name__ == "__main__":
    main()
