"""``sepsti train``: learn a speech dictionary by EM on the clean train split of a corpus.

The corpus is a NOIZEUS-style folder (train split sp01–sp20) or a wideband folder described by
a ``manifest.json`` (:mod:`sepsti.corpora.wideband`: its train speakers, flagged files left out,
high-passed at 80 Hz). The training matrix (:meth:`sepsti.training.TrainSplit.matrix`) is the
concatenation of the STFT magnitudes (257 × 1661 on NOIZEUS sp01–sp20) of every clean file of
the train split, resampled to ``--rate`` (default 8 kHz for NOIZEUS-style folders, 16 kHz for
wideband ones) with the framing scaled to it (:func:`sepsti.features.framing_for_rate`: 64 ms
windows, 32 ms hop), which the dictionary file records. With ``--context C`` each training frame
is stacked with the ``C`` frames on each side of it a quarter window apart (the enhancer's frames),
and the atoms span those ``2C + 1`` frames (:func:`sepsti.features.training_matrix`; the shipped
8 kHz dictionary has ``C = 1``). The output is checked before training and written atomically.

``--rank auto`` first picks the rank by marginal likelihood: thermodynamic
integration over ``--ranks`` (:func:`sepsti.core.evidence.sti_nmf.select_rank_sti`)
with the validated settings and the speech model
(:data:`sepsti.commands.select_rank.SPEECH_MODEL`), as ``sepsti select-rank`` with
its defaults, on the single-frame spectra also with ``--context`` (stacked frames
would count each magnitude ``2C + 1`` times). Ranks above the number of training
frames are refused before any work. A ``--rate`` above the rate of every file (the band above their
Nyquist frequency is then empty) and a rank from the matrix's smaller side on (its frames, or its rows:
the bins times ``2C + 1``; where a factorization fits any data, as ``sepsti select-rank`` says) are warned
of, not refused.
"""

from pathlib import Path

import click

from sepsti.commands import (ITERATIONS, SEED, Command, FiniteRange, InputPath, OutputPath, parse_list, progress_option,
                             shown)

__all__ = ["train"]


class _Rank(click.ParamType):
    """A positive integer, or ``auto``."""

    name = "R|auto"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or str(value).lower() == "auto":
            return value if isinstance(value, int) else "auto"
        try:
            rank = int(value)
        except ValueError:
            self.fail(f"{value!r}: expected a positive integer or 'auto'", param, ctx)
        if rank < 1:
            self.fail(f"{value!r}: expected a positive integer or 'auto'", param, ctx)
        return rank


def _ranks(text):
    from sepsti.core.errors import ParameterError

    ranks = sorted(set(parse_list(text, "ranks", int, example="32,64,128")))
    if ranks[0] < 1:
        raise ParameterError(f"--ranks {text!r}: expected positive integers like 32,64,128")
    return ranks


@click.command("train", cls=Command)
@click.option("--corpus", required=True, type=InputPath("folder", path_type=Path), envvar="SEPSTI_NOIZEUS",
              help="NOIZEUS-style corpus folder (its clean train split sp01-sp20 is used), or a wideband "
                   "folder with a manifest.json (its train speakers; flagged files left out). When not given: "
                   "$SEPSTI_NOIZEUS.")
@click.option("--rate", type=click.IntRange(min=4000, max=48000), default=None,  # features.DICTIONARY_RATES
              help="Sample rate of the dictionary (Hz); the STFT is 64 ms windows, 32 ms hop at that rate. "
                   "Default: 8000 for NOIZEUS-style folders, 16000 for wideband ones.")
@click.option("--rank", required=True, type=_Rank(),
              help="Number of dictionary atoms, or 'auto' to select it by STI over --ranks.")
@click.option("--ranks", "candidate_ranks", default="32,64,128,256", show_default=True,
              callback=lambda ctx, param, value: _ranks(value),
              help="Candidate ranks of --rank auto (refused with a --rank of its own).")
@click.option("-o", "--output", required=True, type=OutputPath(path_type=Path), help="Dictionary file (.npz).")
@click.option("--iterations", type=ITERATIONS, default=200, show_default=True,
              help="Most EM iterations: EM stops earlier once the log-likelihood changes by less than --tol.")
@click.option("--tol", type=FiniteRange(min=0.0), default=None,
              help="Relative log-likelihood change that stops EM (default: the trainer's; 0 runs "
                   "exactly --iterations).")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Seed of the random initialization.")
@click.option("--context", type=click.IntRange(min=0, max=8), default=0, show_default=True,
              help="Frames on each side of an atom's centre frame, a quarter window apart (the shipped 8 kHz "
                   "dictionary: 1).")
@click.option("--dtype", type=click.Choice(["float64", "float32"]), default="float64", show_default=True,
              help="Storage type of the atoms; float32 halves the file (the shipped 16 kHz dictionary).")
@click.option("--overwrite", is_flag=True, help="Replace an existing output file.")
@progress_option("over the EM iterations (and the temperatures of --rank auto)")
def train(corpus, rate, rank, candidate_ranks, output, iterations, tol, seed, context, dtype, overwrite, progress):
    """Train a speech dictionary of RANK atoms on the clean train split of a corpus."""
    import warnings

    from sepsti import features
    from sepsti.core.errors import ConvergenceWarning, ParameterError

    source = click.get_current_context().get_parameter_source("candidate_ranks")
    if rank != "auto" and source is not click.core.ParameterSource.DEFAULT:
        raise ParameterError(f"--ranks {','.join(map(str, candidate_ranks))}: candidates of --rank auto, but "
                             f"--rank {rank} fixes the rank; give one of the two")

    from sepsti.core.io import check_output_path
    from sepsti.dictionary import Dictionary, save_dictionary
    from sepsti.training import train_split

    split = train_split(corpus, rate)
    check_output_path(output, overwrite=overwrite, inputs=split.inputs())
    if Path(output).suffix.lower() != ".npz":
        raise ParameterError(f"-o {output}: a dictionary is an .npz archive; give an output name ending in .npz")
    X, ids = split.matrix(context=context)
    too_many = [r for r in (candidate_ranks if rank == "auto" else [rank]) if r > X.shape[1]]
    if too_many:
        option = "--ranks" if rank == "auto" else "--rank"
        raise ParameterError(f"{option} {','.join(map(str, too_many))}: more atoms than the {X.shape[1]} training "
                             f"frames; lower the rank or add training files")
    _warn_of_empty_band(split, "--rate" if rate is not None else "the default --rate")
    chosen = None
    if rank == "auto":
        # the evidence of the single-frame spectra, as select-rank has it: stacked frames would count each
        # magnitude 2C + 1 times; the atoms of C frames on each side take the rank chosen there
        n_bins = split.framing.n_bins
        rank = chosen = _select_rank(X[context * n_bins:(context + 1) * n_bins], candidate_ranks, seed,
                                     progress is not False)
    if rank >= min(X.shape):
        label = f"the chosen rank {rank}" if rank == chosen else f"--rank {rank}"
        click.echo(f"Warning: {label}: not below the {_smaller_side(X, split.framing.n_bins, context)} of the "
                   f"{X.shape[0]} x {X.shape[1]} training matrix, where a factorization fits any data: no data "
                   "identify such a rank", err=True)

    from sepsti.denoise import train_dictionary

    options = {"max_iter": iterations, "seed": seed, "progress": progress is not False}
    if tol is not None:
        options["tol"] = tol
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        W, result = train_dictionary(X, rank, **options)
    for warning in caught:
        if issubclass(warning.category, ConvergenceWarning):
            click.echo(f"note: EM stopped at --iterations {iterations} before the log-likelihood met "
                       f"--tol; raise --iterations for a tighter fit", err=True)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    framing = split.framing
    dictionary = Dictionary(
        W=W, rank=rank, sample_rate=framing.sample_rate, n_fft=framing.n_fft,
        hop_length=framing.hop_length, window=features.WINDOW, scale=features.AMPLITUDE_SCALE,
        prior_rate=_prior_rate(train_dictionary), corpus=str(Path(corpus)), files=tuple(ids),
        iterations=int(result.n_iter), seed=seed, version=_version(), context=context)
    save_dictionary(output, dictionary, overwrite=overwrite, dtype=dtype)
    log_likelihood = float(result.log_likelihood[-1])
    click.echo(f"trained a rank-{rank} dictionary on {len(ids)} files ({X.shape[0]} x {X.shape[1]}), "
               f"{result.n_iter} EM iterations, log-likelihood {log_likelihood:.6g}: wrote {shown(output)}")


def _warn_of_empty_band(split, option):
    """Say so (naming the ``option`` that set the rate) when the split is modelled above the rate of every one of
    its files: the dictionary's band above their Nyquist frequency is then empty."""
    rate = split.framing.sample_rate
    rates = set(split.file_rates())
    if rate > max(rates):
        files = f"at {max(rates)} Hz" if len(rates) == 1 else f"at most {max(rates)} Hz"
        click.echo(f"Warning: {option} {rate}: the corpus's files are {files}, so the dictionary's band above "
                   f"{max(rates) / 2:g} Hz (their Nyquist frequency) is empty; train on wideband speech (recorded "
                   f"at {rate} Hz or more) for a dictionary of the whole band", err=True)


def _smaller_side(X, n_bins, context):
    """The smaller side of the training matrix ``X`` in words: its frames, or its frequency bins (rows)."""
    if X.shape[1] <= X.shape[0]:
        return f"{X.shape[1]} training frames"
    if context:
        return f"{X.shape[0]} rows ({n_bins} frequency bins x {2 * context + 1} frames)"
    return f"{n_bins} frequency bins"


def _select_rank(X, ranks, seed, progress):
    """The rank of largest log marginal likelihood under the speech model, reported on stderr."""
    from sepsti.core.evidence.sti_nmf import select_rank_sti
    from sepsti.commands.select_rank import SPEECH_MODEL

    selection = select_rank_sti(X, ranks, seed=seed, progress=progress, **SPEECH_MODEL)
    click.echo(f"quasi-Poisson: magnitudes divided by their Rayleigh dispersion "
               f"{selection.settings['model']['dispersion']:.4g}", err=True)
    for candidate, value, stderr in zip(selection.ranks, selection.log_marginal_likelihood, selection.stderr):
        click.echo(f"rank {candidate:>4}: log p(X | R) = {value:.6g} ± {stderr:.2g}", err=True)
    click.echo(f"selected rank {selection.selected_rank} by STI", err=True)
    return int(selection.selected_rank)


def _prior_rate(train_dictionary):
    """The activation prior rate the trainer used: its default, as no option overrides it."""
    import inspect

    parameter = inspect.signature(train_dictionary).parameters.get("prior_rate")
    return float(parameter.default) if parameter is not None and parameter.default is not parameter.empty else 0.0


def _version():
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sepsti")
    except PackageNotFoundError:
        return "unknown"
