"""``sepsti select-rank``: choose the speech-dictionary rank by marginal likelihood (STI).

The clean train split of the corpus (:meth:`sepsti.training.TrainSplit.matrix`:
257 x frames magnitudes on the int16 scale at 8 kHz, 513 x frames at 16 kHz for a
wideband folder; ``--frames N`` keeps N of them spread evenly) is modelled by Poisson NMF with
exponential priors; for every rank the log marginal likelihood is estimated by Stochastic Thermodynamic
Integration (:mod:`sepsti.core.evidence.rank_selection`): chains per (rank,
temperature, replicate) — full-data MALA on a reference path from a Gaussian
around the posterior's mode with ``--preset reference`` (the default, the
validated setting), block-parallel (p)SGLD with the others; ``--preset blocks`` the fast block-parallel
one for small counts, ``--preset paper`` ICASSP'16's; single options replace
single settings of the preset (those its chains or grid do not use are refused
when set other than the preset's, not ignored: ``--alpha``/``--sigma`` with SGLD,
``--power`` with the uniform schedule, the block samplers' settings with MALA). ``--temperatures T`` counts the
intervals of the grid (T + 1 temperatures, T >= 2).

Under ``mpiexec -n P`` the chains are spread over the P processes; process 0
alone prints and writes. Results do not depend on P.
"""

from pathlib import Path

import click

from sepsti.commands import (PLOT_EXTENSIONS, SEED, Command, FiniteRange, InputPath, OutputPath, check_plot_format,
                             parse_list, progress_option, shown)

__all__ = ["SPEECH_MODEL", "compile_kernels", "select_rank"]

#: The model of magnitude spectrograms that ``select-rank`` (by default) and ``train --rank auto`` compare
#: ranks of: quasi-Poisson with the STFT's own (Rayleigh) dispersion and the prior on the data's scale at
#: every rank (``docs/rank_selection.md``).
SPEECH_MODEL = {"dispersion": "rayleigh", "prior_rate": "matched"}


def _ranks(text):
    from sepsti.core.errors import ParameterError

    ranks = parse_list(text, "ranks", int, example="32,64,128")
    if min(ranks) < 1 or len(set(ranks)) != len(ranks):
        raise ParameterError(f"--ranks {text!r}: expected distinct positive integers like 32,64,128")
    return ranks


#: The most iterations per chain (``--samples``, ``--keep``): its step sizes are computed ahead, 80 MB at this count.
MAX_SAMPLES = 10 ** 7

#: CLI option -> setting of the grid or chain (None: take the preset's).
_OVERRIDES = {"num_intervals": "num_intervals", "schedule": "schedule", "power": "power", "rule": "rule",
              "num_steps": "num_steps", "num_keep": "num_keep", "num_blocks": "num_blocks", "sampler": "sampler",
              "step_a": "step_a", "step_b": "step_b", "alpha": "alpha", "sigma": "sigma", "evaluate": "evaluate",
              "init": "init", "exact_prior": "exact_prior"}


@click.command("select-rank", cls=Command)
@click.option("--corpus", required=True, type=InputPath("folder", path_type=Path), envvar="SEPSTI_NOIZEUS",
              help="NOIZEUS-style corpus folder (its clean train split sp01-sp20, at 8 kHz), or a wideband folder "
                   "with a manifest.json (its train speakers, at 16 kHz): the matrix `sepsti train` learns on. "
                   "When not given: $SEPSTI_NOIZEUS.")
@click.option("--frames", type=click.IntRange(min=1), default=None,
              help="Model this many of the matrix's frames, spread evenly over it (default: all): for a matrix "
                   "too large to sample whole (docs/rank_selection.md).")
@click.option("--ranks", default="32,64,128,256", show_default=True, callback=lambda ctx, param, value: _ranks(value),
              help="Candidate ranks, comma-separated, at most the frequency bins (257 at 8 kHz, 513 at 16 kHz; "
                   "from min(bins, frames) on, a factorization fits any data and the rank is not identifiable).")
@click.option("--preset", type=click.Choice(["reference", "blocks", "paper"]), default="reference", show_default=True,
              help="Settings: 'reference' (full-data MALA from a log-space reference; validated up to speech "
                   "scale, see docs/rank_selection.md), 'blocks' (block-parallel pSGLD from the prior; fast, "
                   "accurate on small counts only) or 'paper' (ICASSP'16, a reproduction); the options below "
                   "replace single settings.")
@click.option("--replicates", "num_replicates", type=click.IntRange(min=1, max=1000), default=None,
              help="Independent chains per (rank, temperature); their spread gives the standard errors "
                   "[preset's].")
@click.option("--temperatures", "num_intervals", type=click.IntRange(min=2, max=10_000), default=None,
              help="T, intervals of the temperature grid (T + 1 temperatures), at least 2 [preset's].")
@click.option("--schedule", type=click.Choice(["uniform", "power", "beta"]), default=None,
              help="Temperature grid: t_i = (i/T)^c, i/T or I_(i/T)(c, c) (dense at both ends) [preset's].")
@click.option("--power", type=FiniteRange(min=1.0), default=None,
              help="c of the power or beta schedule (the uniform one has none) [preset's].")
@click.option("--rule", type=click.Choice(["trapezoid", "simpson"]), default=None,
              help="Quadrature over the grid (Simpson works in u = i/T) [preset's].")
@click.option("--samples", "num_steps", type=click.IntRange(min=1, max=MAX_SAMPLES), default=None,
              help="K, iterations per chain [preset's].")
@click.option("--keep", "num_keep", type=click.IntRange(min=1, max=MAX_SAMPLES), default=None,
              help="L, last iterations kept for the averages, at most K [preset's].")
@click.option("--blocks", "num_blocks", type=click.IntRange(min=1), default=None,
              help="B: the data are cut into B x B blocks (block presets) [8 there; the reference preset uses "
                   "all the data].")
@click.option("--sampler", type=click.Choice(["sgld", "psgld", "mala"]), default=None,
              help="Block-parallel SGLD (ICASSP'16), its preconditioned variant (PARAFAC'18), or full-data "
                   "MALA on the reference path [preset's].")
@click.option("--step-a", type=FiniteRange(min=0.0, min_open=True), default=None,
              help="a of the step (a/k)^b of the block samplers [preset's].")
@click.option("--step-b", type=FiniteRange(min=0.5, max=1.0, min_open=True), default=None,
              help="b of the step (a/k)^b, in (0.5, 1] [0.51].")
@click.option("--prior-rate", default=SPEECH_MODEL["prior_rate"], show_default=True,
              help="lambda of the exponential priors on W and H; 'matched': sqrt(R / mean(X / dispersion)), the "
                   "prior on the data's scale at every rank (docs/rank_selection.md).")
@click.option("--alpha", type=FiniteRange(0.0, 1.0), default=None,
              help="pSGLD: decay of the squared-gradient average [0.99].")
@click.option("--sigma", type=FiniteRange(min=0.0, min_open=True), default=None,
              help="pSGLD: floor added to sqrt(v) [preset's].")
@click.option("--evaluate", type=click.Choice(["after-update", "before-update"]), default=None,
              help="Score theta(k-1) on S(k) or theta(k) on S(k) (ICASSP'16 eq. 9) "
                   "[preset's].")
@click.option("--init", type=click.Choice(["em", "random"]), default=None,
              help="Chain start: a random start on the data's scale, or 100 MAP-EM iterations from it "
                   "[preset's].")
@click.option("--dispersion", default=SPEECH_MODEL["dispersion"], show_default=True,
              help="Divide the magnitudes by this before modelling them as Poisson counts (quasi-Poisson); "
                   "'rayleigh': (4/pi - 1) mean(X), the spread of STFT magnitudes themselves "
                   "(docs/rank_selection.md).")
@click.option("--dtype", type=click.Choice(["float32", "float64"]), default="float32", show_default=True,
              help="Floating-point type of the data and of the block chains (log-likelihoods are summed in "
                   "float64; the reference path's chains compute in float64).")
@click.option("--exact-prior/--no-exact-prior", default=None,
              help="At t = 0, independent draws instead of a chain (of the prior; on the reference path of its "
                   "Gaussian) [preset's: on for reference, off for blocks and paper]. With Simpson's rule on a "
                   "power or beta grid (c > 1) t = 0 weighs 0: the choice then changes E_0 and the tempering "
                   "check only, not the estimate.")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Chains run concurrently per process [default: all cores; 1 under mpiexec].")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Random seed.")
@click.option("--checkpoint", type=OutputPath("folder", path_type=Path), default=None,
              help="Folder keeping every finished chain; rerunning the same command resumes. A new or empty "
                   "folder, or the checkpoint of an earlier run.")
@click.option("--json", "json_path", type=OutputPath(path_type=Path), default=None, help="Write results as JSON.")
@click.option("--plot", "plot_path", type=OutputPath(path_type=Path), default=None,
              help=f"Plot log p(X | R) against R ({', '.join(PLOT_EXTENSIONS)}).")
@click.option("--overwrite", is_flag=True, help="Replace existing --json / --plot files.")
@progress_option("over the chains")
@click.option("--quiet", is_flag=True, hidden=True, help="--no-progress, as earlier versions spelt it.")
def select_rank(corpus, frames, ranks, preset, num_replicates, prior_rate, dispersion, dtype, threads, seed, checkpoint,
                json_path, plot_path, overwrite, progress, quiet, **options):
    """Estimate log p(X | R) for every candidate rank and select the largest."""
    import numpy as np

    from sepsti.core.errors import ParameterError
    from sepsti.core.parallel import mpi

    if quiet:
        progress = False
    prior_rate = _positive_or("--prior-rate", prior_rate, "matched")
    overrides = {_OVERRIDES[name]: value for name, value in options.items() if value is not None}
    if "evaluate" in overrides:
        overrides["evaluate"] = overrides["evaluate"].replace("-", "_")
    dispersion = _positive_or("--dispersion", dispersion, "rayleigh")
    from sepsti.core.evidence.rank_selection import resolve_settings
    from sepsti.core.evidence.sti_nmf import PRESETS

    _check_keep(PRESETS[preset].chain, preset, options["num_steps"], options["num_keep"])
    settings = resolve_settings(PRESETS, preset, num_replicates=num_replicates, **overrides)  # before any work
    settings.grid.check(option_name=lambda field: f"--{field}")
    _check_unused(settings, preset, options)
    if settings.chain.num_keep == 1 and settings.num_replicates == 1:
        raise ParameterError(f"--keep 1{_origin(options['num_keep'], preset)} with --replicates 1"
                             f"{_origin(num_replicates, preset)}: one kept value of one chain per temperature gives "
                             "no standard error; give --keep 2 or more, or --replicates 2 or more")
    if settings.chain.sampler == "mala":
        if preset != "reference":
            raise ParameterError(f"--sampler mala: the reference path's full-data chains, not a '{preset}' preset's; "
                                 "use --preset reference (the default)")
        if settings.chain.num_blocks is not None:
            raise ParameterError(f"--blocks {settings.chain.num_blocks}: MALA chains (the reference preset) use all "
                                 "the data; blocks apply to --preset blocks or paper")
        from sepsti.core.evidence.reference_path import check_reference_chain

        check_reference_chain(settings.chain, option_name=lambda field: f"--{field.replace('_', '-')}")
    elif preset == "reference":
        raise ParameterError(f"--sampler {settings.chain.sampler}: block-parallel chains, not the reference preset's "
                             "full-data MALA ones; use --preset blocks or paper")
    comm = mpi.world()
    with mpi.abort_on_error(comm):
        if mpi.is_root(comm):
            _check_outputs(json_path, plot_path, overwrite, checkpoint)
            if checkpoint is not None:
                _check_checkpoint(checkpoint)
        from sepsti.core.io import check_not_an_input
        from sepsti.training import train_split

        split = train_split(corpus)
        for path in (json_path, plot_path) if mpi.is_root(comm) else ():  # only process 0 writes them
            if path is not None:
                check_not_an_input(path, split.inputs())
        too_large = [rank for rank in ranks if rank > split.framing.n_bins]
        if too_large:
            raise ParameterError(f"--ranks {','.join(map(str, too_large))}: above the {split.framing.n_bins} "
                                 f"frequency bins of the matrix, where a factorization fits any data: no data "
                                 "identify such a rank")
        X = split.matrix(frames=frames)[0].astype(np.dtype(dtype))
        blocks = settings.chain.num_blocks
        if blocks is not None and blocks > min(X.shape):
            raise ParameterError(f"--blocks {blocks}{_origin(options['num_blocks'], preset)}: the "
                                 f"{X.shape[0]} x {X.shape[1]} matrix cuts into at most {min(X.shape)} x "
                                 f"{min(X.shape)} blocks; give --blocks {min(X.shape)} or fewer")
        if dispersion != "rayleigh":
            _check_dispersion(X, dispersion)
        if settings.chain.sampler != "mala":
            quiet = progress is False or not mpi.is_root(comm)
            mpi.root_first(comm, lambda: compile_kernels(X.dtype, quiet=quiet))
        from sepsti.core.evidence.rank_selection import to_json
        from sepsti.core.evidence.sti_nmf import select_rank_sti

        selection = select_rank_sti(X, ranks, grid=settings.grid, chain=settings.chain,
                                    num_replicates=settings.num_replicates, prior_rate=prior_rate,
                                    dispersion=dispersion, seed=seed, checkpoint=checkpoint, comm=comm,
                                    threads=threads, progress=progress is not False)
        if not mpi.is_root(comm):
            return
        results = to_json(selection, corpus=str(corpus), preset=preset, matrix=list(X.shape))
        _print_table(selection)
        if json_path is not None:
            _write_json(json_path, results, overwrite=overwrite)
            click.echo(f"wrote {shown(json_path)}")
        if plot_path is not None:
            _write_plot(plot_path, selection, overwrite=overwrite)
            click.echo(f"wrote {shown(plot_path)}")


def compile_kernels(dtype, *, quiet=False):
    """Compile (or load from numba's cache) the block kernels, saying so once when it takes a while."""
    import time

    from sepsti.core.evidence.sti_nmf import warm_up

    started = time.perf_counter()
    warm_up((dtype,))
    seconds = time.perf_counter() - started
    if seconds > 2.0 and not quiet:
        click.echo(f"compiled the sampling kernels in {seconds:.0f} s (once after installing; not counted as "
                   "chain time)", err=True)


def _positive_or(option, text, word):
    """An option's value: ``word`` or a finite positive number."""
    from sepsti.core.errors import ParameterError

    if text == word:
        return text
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ParameterError(f"{option}={text!r}: expected {word!r} or a positive number")
    return value


def _check_dispersion(X, dispersion):
    """Refuse a ``--dispersion`` that divides ``X`` into more counts than float64 tells apart (2**53), or to zeros."""
    from decimal import ROUND_CEILING, Decimal

    import numpy as np

    from sepsti.core.errors import ParameterError
    from sepsti.core.evidence.sti_nmf import smallest_dispersion

    least = Decimal(smallest_dispersion(X))
    if dispersion < least:
        # rounded up, so that the value suggested passes
        least = least.quantize(Decimal(1).scaleb(least.adjusted() - 2), rounding=ROUND_CEILING)
        raise ParameterError(f"--dispersion {dispersion:g}: the {X.shape[0]} x {X.shape[1]} matrix divided by it "
                             f"would total more than 2**53 counts, beyond which float64 tells no count from the "
                             f"next; give --dispersion {least:g} or more")
    with np.errstate(over="ignore", under="ignore"):
        zero = not np.any((X / dispersion).astype(X.dtype))
    if zero:
        raise ParameterError(f"--dispersion {dispersion:g}: the {X.shape[0]} x {X.shape[1]} matrix divided by it "
                             f"rounds to zero in {X.dtype.name}; give a smaller --dispersion")


def _origin(value, preset):
    """`` (the <preset> preset's)`` after a setting the command line did not give."""
    return "" if value is not None else f" (the {preset} preset's)"


def _check_keep(chain, preset, num_steps, num_keep):
    """Refuse more iterations kept (``--keep``) than a chain runs (``--samples``), the preset's or given."""
    import numpy as np

    from sepsti.core.errors import ParameterError

    steps = num_steps if num_steps is not None else int(np.min(chain.num_steps))  # one, or one per temperature
    keep = num_keep if num_keep is not None else chain.num_keep
    if keep > steps:
        raise ParameterError(f"--keep {keep}{_origin(num_keep, preset)} exceeds --samples {steps}"
                             f"{_origin(num_steps, preset)}: a chain keeps at most the iterations it runs")


def _check_unused(settings, preset, options):
    """Refuse ``--alpha``/``--sigma`` with SGLD chains and ``--power`` with the uniform schedule, set other than the
    preset's (as the reference path's MALA chains are checked): neither uses them."""
    from sepsti.core.errors import ParameterError
    from sepsti.core.evidence.sti_nmf import PRESETS

    base = PRESETS[preset]
    unused = [f"--{name}" for name in ("alpha", "sigma") if options[name] not in (None, getattr(base.chain, name))]
    if unused and settings.chain.sampler == "sgld":
        raise ParameterError(f"{', '.join(unused)}: not used by SGLD chains{_origin(options['sampler'], preset)}: "
                             "they set pSGLD's preconditioner; give --sampler psgld with them, or leave them out")
    if options["power"] not in (None, base.grid.power) and settings.grid.schedule == "uniform":
        raise ParameterError(f"--power {options['power']:g}: not used by the uniform schedule"
                             f"{_origin(options['schedule'], preset)}, t_i = i/T; give --schedule power or beta with "
                             "it, or leave it out")


def _check_checkpoint(folder):
    """Refuse a ``--checkpoint`` that is a file, or a non-empty folder that is not a checkpoint of select-rank.

    A checkpoint holds the ``settings.json`` the rank-selection engine writes first (its ``grid`` and
    ``data`` fingerprint among the settings); whether they are this run's the engine checks.
    """
    import json

    from sepsti.core.errors import ParameterError

    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ParameterError(f"--checkpoint {folder}: not a folder; give a new or empty folder")
    if not folder.exists() or not any(folder.iterdir()):
        return
    manifest = folder / "settings.json"
    if not manifest.is_file():
        raise ParameterError(f"--checkpoint {folder}: a folder that holds other files than a select-rank "
                             "checkpoint (no settings.json of one); give a new or empty folder")
    try:
        settings = json.loads(manifest.read_text())
    except (OSError, ValueError) as error:
        raise ParameterError(f"--checkpoint {folder}: its settings.json is unreadable ({error}); use another "
                             "checkpoint folder or delete it") from None
    if not isinstance(settings, dict) or not {"grid", "data"} <= set(settings):
        raise ParameterError(f"--checkpoint {folder}: its settings.json is not a select-rank checkpoint's; give a "
                             "new or empty folder")


def _check_outputs(json_path, plot_path, overwrite, checkpoint):
    """Refuse a --plot format not written, files there without --overwrite, two options naming one path, and
    outputs inside the checkpoint folder."""
    from sepsti.core.errors import ParameterError
    from sepsti.core.io import check_output_path

    check_plot_format(plot_path)

    for option, path in (("--json", json_path), ("--plot", plot_path)):
        if path is not None and checkpoint is not None and Path(checkpoint).resolve() in (
                Path(path).resolve(), *Path(path).resolve().parents):
            raise ParameterError(f"{option} {path}: inside --checkpoint {checkpoint}, the engine's folder; "
                                 f"give {option} a file outside it")
    for path in (json_path, plot_path):
        if path is not None:
            check_output_path(path, overwrite=overwrite)
    if json_path is not None and plot_path is not None and Path(json_path).resolve() == Path(plot_path).resolve():
        raise ParameterError(f"--json and --plot are the same file {json_path}")


def _print_table(selection):
    click.echo(f"{'rank':>6} {'log p(X|R)':>16} {'stderr':>10} {'chain s':>9}")
    rows = zip(selection.ranks, selection.log_marginal_likelihood, selection.stderr,
               selection.timing["chain_seconds_per_rank"])
    for rank, value, stderr, seconds in rows:
        mark = " *" if rank == selection.selected_rank else ""
        click.echo(f"{rank:>6} {value:16.1f} {stderr:10.1f} {seconds:9.1f}{mark}")
    compiled = "" if selection.settings["chain"]["sampler"] == "mala" else \
        f", {100 * selection.timing['kernel_share']:.0f}% in kernels"  # the reference path runs on NumPy/BLAS
    click.echo(f"selected rank: {selection.selected_rank}  ({selection.timing['seconds']:.1f} s{compiled})")


def _write_json(path, results, *, overwrite):
    import json

    from sepsti.core.io import atomic_path

    with atomic_path(path, overwrite=overwrite) as tmp:
        Path(tmp).write_text(json.dumps(results, indent=2) + "\n")


def _write_plot(path, selection, *, overwrite):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from sepsti.core.io import atomic_path

    order = np.argsort(selection.ranks)  # the line runs from rank to rank in order, however they were given
    ranks = np.asarray(selection.ranks)[order]
    values, errors = selection.log_marginal_likelihood[order], 2 * selection.stderr[order]
    fig, ax = plt.subplots(figsize=(4.5, 3.4))
    ax.errorbar(ranks, values, yerr=errors, fmt="o-", ms=4, capsize=3)
    ax.axvline(selection.selected_rank, color="grey", ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ranks, [str(r) for r in ranks])
    ax.set_xlabel("rank R")
    ax.set_ylabel("log p(X | R)  (STI, ±2 s.e.)")
    fig.tight_layout()
    with atomic_path(path, overwrite=overwrite) as tmp:
        fig.savefig(tmp, dpi=120, format=Path(path).suffix[1:].lower())
    plt.close(fig)
