"""``sepsti select-rank``: choose the speech-dictionary rank by marginal likelihood (STI).

The clean train split of the corpus (257 x frames magnitudes on the int16
scale) is modelled by Poisson NMF with exponential priors; for every rank
the log marginal likelihood is estimated by Stochastic Thermodynamic
Integration with block-parallel SGLD (or pSGLD) chains, one per (rank,
temperature). Defaults are ICASSP'16's speech settings. ``--temperatures T``
counts the intervals of the grid (T + 1 chains per rank).

Under ``mpiexec -n P`` the chains are spread over the P processes; process 0
gathers them and alone prints and writes. Results do not depend on P.

:data:`QUASI_POISSON` holds the settings that ``sepsti train --rank auto``
uses instead of the paper's (README, "Rank selection").
"""

from pathlib import Path

import click

__all__ = ["QUASI_POISSON", "select_rank"]

#: The rank-selection settings the application uses (``sepsti train --rank auto``,
#: ``recipes/sti_speech.py``): the paper's, but with the magnitudes divided by their
#: Pearson dispersion (quasi-Poisson) and chains of 5000 iterations keeping 2000,
#: with which the STI chains pass the tempering check on speech.
QUASI_POISSON = {"dispersion": "auto", "num_steps": 5000, "num_keep": 2000}


def _ranks(text):
    try:
        ranks = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected comma-separated integers such as 32,64,128") from None
    if not ranks or min(ranks) < 1 or len(set(ranks)) != len(ranks):
        raise click.BadParameter(f"{text!r}: expected distinct positive integers")
    return ranks


@click.command("select-rank")
@click.option("--corpus", required=True, type=click.Path(path_type=Path),
              help="NOIZEUS-style corpus folder; its clean train split (sp01-sp20) is modelled.")
@click.option("--ranks", default="32,64,128,256,512", show_default=True, help="Candidate ranks, comma-separated.")
@click.option("--temperatures", "num_intervals", type=click.IntRange(min=1), default=5, show_default=True,
              help="T, intervals of the temperature grid (T + 1 chains per rank).")
@click.option("--schedule", type=click.Choice(["uniform", "power"]), default="uniform", show_default=True,
              help="Temperature grid: t_i = i/T (paper) or (i/T)^c.")
@click.option("--power", type=click.FloatRange(min=1.0), default=5.0, show_default=True,
              help="c of the power schedule.")
@click.option("--rule", type=click.Choice(["trapezoid", "simpson"]), default="trapezoid", show_default=True,
              help="Quadrature over the grid (Simpson works in u = t^(1/c)).")
@click.option("--samples", "num_steps", type=click.IntRange(min=1), default=1250, show_default=True,
              help="K, iterations per chain.")
@click.option("--keep", "num_keep", type=click.IntRange(min=1), default=500, show_default=True,
              help="L, last iterations kept for the averages.")
@click.option("--blocks", "num_blocks", type=click.IntRange(min=1), default=8, show_default=True,
              help="B: the data are cut into B x B blocks.")
@click.option("--sampler", type=click.Choice(["sgld", "psgld"]), default="sgld", show_default=True,
              help="Block-parallel SGLD (ICASSP'16) or preconditioned SGLD (PARAFAC'18).")
@click.option("--step-a", type=float, default=5e-7, show_default=True, help="a of the step (a/k)^b.")
@click.option("--step-b", type=float, default=0.51, show_default=True, help="b of the step (a/k)^b.")
@click.option("--prior-rate", type=float, default=4e-4, show_default=True,
              help="lambda of the exponential priors on W and H.")
@click.option("--alpha", type=click.FloatRange(0.0, 1.0), default=0.99, show_default=True,
              help="pSGLD: decay of the squared-gradient average.")
@click.option("--sigma", type=click.FloatRange(min=0.0, min_open=True), default=1e-5, show_default=True,
              help="pSGLD: floor added to sqrt(v).")
@click.option("--evaluate", type=click.Choice(["after-update", "before-update"]), default="after-update",
              show_default=True,
              help="Score theta(k) on S(k) (ICASSP'16 eq. 9) or theta(k-1) on S(k) (unbiased, free).")
@click.option("--init", type=click.Choice(["em", "random"]), default="em", show_default=True,
              help="Chain start: 100 MAP-EM iterations per rank from a random start, or the random start.")
@click.option("--dispersion", default="1", show_default=True,
              help="Divide the magnitudes by this before modelling them as Poisson counts; 'auto': the Pearson "
                   "dispersion of the largest rank's EM fit (quasi-Poisson).")
@click.option("--dtype", type=click.Choice(["float32", "float64"]), default="float32", show_default=True,
              help="Floating-point type of the EM starts and chains (log-likelihoods are summed in float64); "
                   "on NOIZEUS float32 moves log p(X|R) by < 0.02 standard errors and runs 1.4x faster.")
@click.option("--exact-prior", is_flag=True,
              help="At t = 0, independent prior draws instead of an SGLD chain.")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Chains run concurrently per process [default: all cores; 1 under mpiexec].")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Random seed.")
@click.option("--checkpoint", type=click.Path(path_type=Path), default=None,
              help="Folder keeping every finished chain; rerunning the same command resumes.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="Write results as JSON.")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path), default=None,
              help="Write log p(X | R) against R as PNG.")
@click.option("--overwrite", is_flag=True, help="Replace existing --json / --plot files.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def select_rank(corpus, ranks, num_intervals, schedule, power, rule, num_steps, num_keep, num_blocks, sampler, step_a,
                step_b, prior_rate, alpha, sigma, evaluate, init, dispersion, dtype, exact_prior, threads, seed,
                checkpoint, json_path, plot_path, overwrite, quiet):
    """Estimate log p(X | R) for every candidate rank and select the largest."""
    import numpy as np

    from core.errors import ParameterError
    from core.parallel import mpi
    from core.samplers.step_size import validate_step_schedule

    ranks = _ranks(ranks)
    validate_step_schedule(step_a, step_b)
    if not prior_rate > 0:
        raise ParameterError(f"--prior-rate={prior_rate} must be positive")
    if num_keep > num_steps:
        raise ParameterError(f"--keep={num_keep} exceeds --samples={num_steps}")
    dispersion = _dispersion(dispersion)
    comm = mpi.world()
    with mpi.abort_on_error(comm):
        if mpi.is_root(comm):
            _check_outputs(json_path, plot_path, overwrite)
        X = _training_matrix(corpus).astype(np.dtype(dtype))
        from core.evidence.sti_nmf import select_rank_sti

        selection = select_rank_sti(X, ranks, num_intervals=num_intervals, schedule=schedule, power=power, rule=rule,
                                    num_steps=num_steps, num_keep=num_keep, num_blocks=num_blocks, sampler=sampler,
                                    step_a=step_a, step_b=step_b, prior_rate=prior_rate, alpha=alpha, sigma=sigma,
                                    evaluate=evaluate.replace("-", "_"), init=init, dispersion=dispersion, seed=seed,
                                    exact_prior=exact_prior, checkpoint=checkpoint, comm=comm, threads=threads,
                                    progress=not quiet)
        if selection is None:
            return
        results = to_json(selection, corpus=str(corpus))
        results["timing"]["processes"] = 1 if comm is None else comm.Get_size()
        _print_table(selection)
        if json_path is not None:
            _write_json(json_path, results)
        if plot_path is not None:
            _write_plot(plot_path, selection)


def _dispersion(text):
    """``--dispersion``: 'auto' or a positive number."""
    from core.errors import ParameterError

    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ParameterError(f"--dispersion={text!r}: expected 'auto' or a positive number")
    return value


def _check_outputs(json_path, plot_path, overwrite):
    from core.io import check_output_path

    for path in (json_path, plot_path):
        if path is not None:
            check_output_path(path, overwrite=overwrite)
    if json_path is not None and plot_path is not None and Path(json_path).resolve() == Path(plot_path).resolve():
        from core.errors import ParameterError

        raise ParameterError(f"--json and --plot are the same file {json_path}")


def _training_matrix(corpus):
    from corpora.noizeus import clean_signals, corpus_index
    from sepsti import features
    from sepsti.audio import resample, validate_frames

    index = corpus_index(corpus)
    signals = []
    for utterance, y, sample_rate in clean_signals(index, split="train"):
        y = resample(y, sample_rate, features.SAMPLE_RATE)
        signals.append(validate_frames(y, features.SAMPLE_RATE, name=f"{corpus}: {utterance}"))
    return features.training_matrix(signals)


def to_json(selection, **extra):
    """The select-rank JSON document (DESIGN.md contract) of a :class:`RankSelection`.

    Everything but ``seconds`` and ``timing`` is a function of the data and
    the settings only: identical for any number of MPI processes and after
    a resume from a checkpoint.
    """
    from core.evidence.tempering_check import largest_decrease
    from core.io import json_safe

    per_temperature = {
        "temperatures": selection.results[0].temperatures.tolist(),
        "mean_log_likelihood": {str(r): res.mean_log_likelihood.tolist() for r, res in zip(selection.ranks,
                                                                                             selection.results)},
        "mcse": {str(r): res.mcse.tolist() for r, res in zip(selection.ranks, selection.results)},
        "integrated_time": {str(r): res.integrated_time.tolist() for r, res in zip(selection.ranks,
                                                                                     selection.results)},
        # E_t[log p] must rise with t; a fall of more than ~3 joint standard errors means
        # the chains did not reach their power posteriors
        "largest_decrease_se": {str(r): largest_decrease(res.mean_log_likelihood, res.mcse)
                                for r, res in zip(selection.ranks, selection.results)},
    }
    return json_safe({"ranks": list(selection.ranks),
                      "log_marginal_likelihood": [float(r.log_evidence) for r in selection.results],
                      "stderr": [float(r.stderr) for r in selection.results],
                      "selected_rank": int(selection.selected_rank),
                      "seconds": float(selection.seconds),
                      "settings": {**selection.settings, **extra},
                      "per_temperature": per_temperature,
                      "min_kept_factor": selection.min_kept,
                      "all_finite": selection.all_finite,
                      # wall-clock figures: the only keys (with "seconds") that differ between runs
                      "timing": {"chain_seconds_per_rank": selection.seconds_per_rank,
                                 "start_seconds": selection.seconds_start,
                                 "chain_cpu_seconds_per_rank": selection.cpu_seconds_per_rank,
                                 "kernel_share": selection.kernel_share}})


def _print_table(selection):
    click.echo(f"{'rank':>6} {'log p(X|R)':>16} {'stderr':>10} {'chain s':>9}")
    for rank, result, seconds in zip(selection.ranks, selection.results, selection.seconds_per_rank):
        mark = " *" if rank == selection.selected_rank else ""
        click.echo(f"{rank:>6} {result.log_evidence:16.1f} {result.stderr:10.1f} {seconds:9.1f}{mark}")
    click.echo(f"selected rank: {selection.selected_rank}  ({selection.seconds:.1f} s, "
               f"{100 * selection.kernel_share:.0f}% in kernels)")


def _write_json(path, results):
    import json

    from core.io import atomic_path

    with atomic_path(path) as tmp:
        Path(tmp).write_text(json.dumps(results, indent=2) + "\n")


def _write_plot(path, selection):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from core.io import atomic_path

    values = [r.log_evidence for r in selection.results]
    errors = [2 * r.stderr for r in selection.results]
    fig, ax = plt.subplots(figsize=(4.5, 3.4))
    ax.errorbar(selection.ranks, values, yerr=errors, fmt="o-", ms=4, capsize=3)
    ax.axvline(selection.selected_rank, color="grey", ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xticks(selection.ranks, [str(r) for r in selection.ranks])
    ax.set_xlabel("rank R")
    ax.set_ylabel("log p(X | R)  (STI, ±2 s.e.)")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
