"""Speed of rank selection on speech: the NOIZEUS training matrix, both presets.

Runs ``select_rank_sti`` on the NOIZEUS clean train split (257 x 1661; or the
train speakers of a wideband folder at 16 kHz, 513 x 45,683, ``--frames N`` of them) with
R in {32, 64, 128, 256, 512} and ``--preset reference`` (the validated
settings, on the speech model as ``sepsti select-rank`` runs them) or
``--preset paper`` (ICASSP'16 Fig. 4 on the raw magnitudes: T = 5
intervals, K = 1250 keeping 500, 8 x 8 blocks, a = 5e-7, b = 0.51,
lambda = 4e-4), and prints the
time per rank and the share spent in the compiled
likelihood/gradient/update kernels. The peer figures are the paper's own
(C + GSL/BLAS + OpenMPI on a 4-core 2.5 GHz laptop): 9 minutes for STI,
about 6 hours for Chib's method; the ratio is printed against them.

Launch with ``mpiexec -n P`` to spread the chains over P processes (one
thread each); without MPI, ``--threads N`` runs N chains at a time in one
process (default: numba's thread count). The timed region includes the chain
starts; the kernels are compiled (or loaded from numba's cache) before it.
Besides wall time it prints the CPU seconds of every process: on a shared
machine wall time counts the waiting for other jobs, CPU time does not.

    python recipes/benchmarks/sti_speech.py --corpus DIR [--preset reference|blocks|paper] [--quick] [--threads N]
    mpiexec -n 2 python recipes/benchmarks/sti_speech.py --corpus DIR

``--quick``: K = 250 keeping 100 (timing only). Writes ``DIR/sti_speech.json`` (the selection as
``sepsti select-rank --json`` writes it, with the times); ``--json PATH`` writes that document alone to PATH
too, which ``recipes/sti_speech.py --sti-json`` reuses.
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import (noizeus_corpus, positive_int, rank_list, recipe_parser, run_recipe, write_json,  # noqa: E402
                     write_results)

NAME = "sti_speech"

PAPER_STI_SECONDS = 9 * 60
PAPER_CHIB_SECONDS = 6 * 3600


def main():
    parser = recipe_parser(f"benchmarks/{NAME}", __doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None,
                        help="NOIZEUS folder, or a wideband one (default: $SEPSTI_NOIZEUS or ../shared/data/noizeus)")
    parser.add_argument("--ranks", type=rank_list, default=[32, 64, 128, 256, 512],
                        help="candidate ranks, comma-separated (default 32,64,128,256,512)")
    parser.add_argument("--frames", type=positive_int, default=None,
                        help="model this many frames spread evenly over the matrix (default: all)")
    parser.add_argument("--dtype", choices=["float64", "float32"], default="float32",
                        help="the matrix's and the chains' floating-point type (default float32)")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="numba threads per process (default: all without MPI, 1 under mpiexec)")
    parser.add_argument("--preset", choices=["reference", "blocks", "paper"], default="reference",
                        help="select_rank_sti's preset (default reference; paper: ICASSP'16's settings)")
    parser.add_argument("--samples", type=positive_int, default=None,
                        help="iterations per chain (default: the preset's)")
    parser.add_argument("--keep", type=positive_int, default=None, help="kept iterations (default: the preset's)")
    parser.add_output_file("--json", help="also write the selection alone to this JSON file (for --sti-json)")
    args = parser.parse_args()
    corpus = noizeus_corpus(args.corpus)

    import numba

    from sepsti.core.evidence.sti_nmf import select_rank_sti
    from sepsti.core.parallel import mpi
    from sepsti.commands.select_rank import SPEECH_MODEL
    from sepsti.training import train_split

    comm = mpi.world()
    with mpi.abort_on_error(comm):
        X = train_split(corpus).matrix(frames=args.frames)[0].astype(args.dtype)
        ranks = args.ranks
        from sepsti.core.evidence.rank_selection import to_json
        from sepsti.core.evidence.sti_nmf import warm_up

        overrides = {"prior_rate": 4e-4} if args.preset == "paper" else dict(SPEECH_MODEL)
        if args.quick:
            overrides.update(num_steps=250, num_keep=100)
        if args.samples is not None:
            overrides["num_steps"] = args.samples
        if args.keep is not None:
            overrides["num_keep"] = args.keep
        warm_up((X.dtype,))  # compile (or load from numba's cache) outside the timed region
        start = time.perf_counter()
        cpu_start = time.process_time()
        selection = select_rank_sti(X, ranks, preset=args.preset, comm=comm, threads=args.threads, progress=True,
                                    seed=args.seed, **overrides)
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
        cpus = [cpu] if comm is None else comm.gather(cpu, root=0)
        if not mpi.is_root(comm):
            return
        processes = 1 if comm is None else comm.Get_size()
        chain = selection.settings["chain"]
        timing = selection.timing
        print(f"X {X.shape} {X.dtype}, {processes} process(es), preset {args.preset}: K = {chain['num_steps']} "
              f"(keep {chain['num_keep']}), {chain['num_blocks']} x {chain['num_blocks']} blocks, "
              f"{selection.settings['num_replicates']} replicate(s), T = {selection.settings['grid']['num_intervals']}")
        print(f"{'rank':>6} {'log p(X|R)':>16} {'stderr':>10} {'chain s':>9} {'chain CPU s':>12}")
        for rank, value, stderr, seconds, cpu_rank in zip(ranks, selection.log_marginal_likelihood, selection.stderr,
                                                          timing["chain_seconds_per_rank"],
                                                          timing["chain_cpu_seconds_per_rank"]):
            print(f"{rank:>6} {value:16.1f} {stderr:10.1f} {seconds:9.1f} {cpu_rank:12.1f}")
        print(f"selected rank {selection.selected_rank}; all kept samples finite: {selection.all_finite}, "
              f"min factor entry {selection.min_kept:.3g}")
        threads = args.threads if args.threads is not None else (1 if comm is not None else numba.get_num_threads())
        print(f"sepsti STI: {wall:.1f} s wall on {processes} process(es) x {threads} thread(s): "
              f"starts {timing['start_seconds']:.1f} s, chains {sum(timing['chain_seconds_per_rank']):.1f} s summed "
              f"({100 * timing['kernel_share']:.0f}% of chain time in the compiled likelihood/gradient/update loop)")
        print(f"CPU seconds per process: {', '.join(f'{c:.1f}' for c in cpus)} (wall on a busy machine overstates "
              "the time; CPU time does not count waiting)")
        print(f"paper's C STI: {PAPER_STI_SECONDS} s -> ratio {PAPER_STI_SECONDS / wall:.2f}x; "
              f"paper's Chib: {PAPER_CHIB_SECONDS} s -> ratio {PAPER_CHIB_SECONDS / wall:.0f}x")
        document = to_json(selection, corpus=str(corpus), preset=args.preset)
        document.update(wall_seconds=wall, cpu_seconds_per_process=cpus, threads=threads, quick=args.quick)
        if args.json is not None:
            write_json(args.json, document, overwrite=args.overwrite)
        write_results(args, document)


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
