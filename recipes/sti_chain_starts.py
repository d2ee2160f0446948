"""Chains of the speech selection from both starts: how far they are from settled at each temperature.

``sepsti select-rank``'s matrix and model (the NOIZEUS train split, X / rayleigh dispersion, matched
priors), one rank, the reference path's chains as the engine runs them: replicate 0 starts from a draw
of q, replicate 1 from the end of a chain at b = 1 (``PILOT_LENGTH`` times ``--steps``), each chain
``--steps`` long with the preset's 150 iterations of burn-in. Prints and writes, per temperature and
start, the mean of the integrand log p + log L - log q over windows of ``--window`` kept iterations
and over all of them. With ``--steps 300`` the chains are the default's; longer ones show where each
start's values settle (docs/rank_selection.md, "How far the speech-scale chains are from settled").

    python recipes/sti_chain_starts.py [--corpus DIR] [--rank 64] [--temperatures 13,15] [--steps 1500]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (integer_list, noizeus_corpus, positive_int, recipe_parser, run_recipe,  # noqa: E402
                     write_results)

NAME = "sti_chain_starts"
STARTS = ("q", "b = 1")


def main():
    parser = recipe_parser(NAME, __doc__.splitlines()[0], plot=True)
    parser.add_argument("--corpus", type=Path, default=None,
                        help="NOIZEUS folder (default: $SEPSTI_NOIZEUS or ../shared/data/noizeus)")
    parser.add_argument("--rank", type=positive_int, default=64, help="the rank (default 64)")
    parser.add_argument("--temperatures", type=integer_list, default=[13, 15],
                        help="indices i of the preset's grid b_i, 1 to 16, comma-separated (default 13,15: "
                             "b = 0.91, 0.99)")
    parser.add_argument("--steps", type=positive_int, default=1500,
                        help="iterations per chain, 151 or more (default 1500; 300 is the preset's)")
    parser.add_argument("--window", type=positive_int, default=150, help="iterations per window (default 150)")
    args = parser.parse_args()
    from sepsti.core.errors import ParameterError

    if args.steps <= 150:
        raise ParameterError(f"--steps {args.steps}: the preset's burn-in is 150 iterations; give 151 or more")
    if not all(1 <= i <= 16 for i in args.temperatures):
        shown = ",".join(map(str, args.temperatures))
        raise ParameterError(f"--temperatures {shown}: expected indices 1 to 16 of the preset's grid")
    corpus = noizeus_corpus(args.corpus)

    from dataclasses import replace

    import numpy as np

    from sepsti.core.evidence.rank_selection import ChainTask
    from sepsti.core.evidence.reference_path import PILOT_LENGTH, REFERENCE_PRESET, NMFLogDensity, ReferencePathChains
    from sepsti.core.evidence.sti_nmf import rayleigh_dispersion
    from sepsti.training import train_split

    X = train_split(corpus).matrix()[0].astype(np.float32)
    X = (X / rayleigh_dispersion(X)).astype(np.float32)
    chain = replace(REFERENCE_PRESET.chain, num_steps=args.steps, num_keep=args.steps - 150)
    factory = ReferencePathChains(NMFLogDensity(X, "matched"), chain, settings={}, data_digest="")
    temperatures = REFERENCE_PRESET.grid.temperatures
    tasks = [ChainTask(args.rank, i, replicate, float(temperatures[i]))
             for i in args.temperatures for replicate in (0, 1)]
    factory.prepare(tasks, seed=args.seed, comm=None, threads=1)
    rows = []
    for task in tasks:
        trace = factory.run(task, seed=args.seed, progress=lambda count: None).trace
        windows = [float(trace[k:k + args.window].mean()) for k in range(0, trace.size, args.window)]
        rows.append({"index": task.index, "b": task.temperature, "start": STARTS[task.replicate],
                     "kept_mean": float(trace.mean()), "window_means": windows})
        print(f"i = {task.index:2d}  b = {task.temperature:.4f}  from {STARTS[task.replicate]:5s}  kept mean "
              f"{trace.mean():14.1f}  windows " + " ".join(f"{value:.0f}" for value in windows), flush=True)
    results = {"matrix": list(X.shape), "rank": args.rank, "steps": args.steps, "burn_in": 150,
               "pilot_length": PILOT_LENGTH * args.steps, "window": args.window, "chains": rows}
    write_results(args, results, _figure(rows, args.window))


def _figure(rows, window):
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    for row in rows:
        iterations = 150 + window * (0.5 + np.arange(len(row["window_means"])))
        axis.plot(iterations, row["window_means"], "o-" if row["start"] == "q" else "s--",
                  label=f"b = {row['b']:.3f}, from {row['start']}")
    axis.set_xlabel("iteration (window centre)")
    axis.set_ylabel("mean of log p + log L - log q")
    axis.legend(fontsize=8)
    return figure


if __name__ == "__main__":
    run_recipe(main, NAME)
