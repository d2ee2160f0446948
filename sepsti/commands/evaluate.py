"""``sepsti evaluate``: enhance noisy recordings and score input and output against the clean speech.

The recordings are the test mixtures of a NOIZEUS-style corpus (``--corpus``), or noisy files paired
by name with clean ones (``--clean`` and ``--noisy``, any rate; :mod:`sepsti.recordings`); each is
enhanced as ``sepsti enhance`` would, with the dictionary it picks for the file's rate unless
``--dictionary`` names one. A multichannel noisy file is enhanced by enhance's own code, its channels
kept (its default ``--channels auto``), and each channel is scored against the clean file's matching
channel, or its only one: each score is the mean over the channels where it is defined.

Scores are BSS Eval SDR/SIR/SAR in dB (:func:`sepsti.metrics.bss_eval`,
references ``[clean, noisy − clean]``, estimates ``[speech, noisy − speech]``;
for the input, ``speech = noisy``), STOI, extended STOI and PESQ (MOS-LQO) of
the speech against the clean reference (:func:`sepsti.metrics.stoi`,
:func:`sepsti.metrics.pesq`) and, above 8 kHz, the levels of the band above 4 kHz
against the clean speech's (:func:`sepsti.metrics.high_band_level`,
:func:`sepsti.metrics.fricative_level`), all at the recording's sample rate. The table on
stdout gives, per SNR, the mean over the mixtures of the input's scores and of the
enhanced scores, the improvement (extended STOI is in the JSON only) and the 95 %
interval of the SDR and STOI improvements with the sentences as the replicates (a
sentence is mixed with every noise at every SNR, so its mixtures are not independent:
:func:`sepsti.comparison.paired_difference`). The improvement is the estimate that
interval is about: the mean over the sentences of each one's mean difference over the
mixtures with both scores defined, which is the difference of the two means when every
sentence has as many mixtures and no score is undefined. Pairs carry
no SNR label unless ``--names`` reads one from their names (with the sentence
as the replicate); without it the table has one line, over all of them, and
each file is a replicate. The JSON file is::

    {"results": [{"file": "sp21", "noise": "car", "snr": 5,
                  "input": {"sdr", "sir", "sar", "stoi", "estoi", "pesq", "high_band_db", "fricative_db"},
                  "enhanced": {...}}, ...],
     "summary": {"by_snr": [{"snr", "count", "input", "enhanced", "improvement", "interval"}, ...],
                 "overall": {"count", "input", "enhanced", "improvement", "interval"},
                 "corpus", "dictionaries": [{"path", "sample_rate", "rank"}], "noises", "snrs",
                 "pesq_modes", "settings"}}

With pairs, ``corpus`` is ``{"clean": folder, "noisy": folder}``; without ``--names`` a result is
``{"file": name, "input", "enhanced"}``, ``by_snr``, ``noises`` and ``snrs`` are empty, and the plot
draws each file's enhanced score against its input's (with it, a result also has ``"name"`` when the
sentence is read, and ``"noise"`` / ``"snr"`` as read).

The input's SAR is infinite (the mixture has no artifacts by construction),
so it and its difference print as ∞ and – and are ``null`` in the JSON, which
has no infinities. Undefined scores (NaN: silent signals, too little speech
for STOI, a pair PESQ refuses) are ``null`` too; a file whose input or enhanced
score is undefined or infinite (a noiseless mixture's SIR) is left out of both
means of that score, so that the two columns are over the same files.
Each warns once per file, but the two levels of the band above 4 kHz, which clean
speech without that band leaves undefined in every file: the first warning of each
is given at the end, with the count of the other files.

STOI and PESQ need the optional packages pystoi and pesq (``pip install
'sepsti[eval]'``). Without them one line on stderr says so and the scores
they give are left out of the table, the JSON and the plot; SDR/SIR/SAR are
reported as ever.

All recordings and dictionaries are read and checked (each recording's rate, level and
length as ``sepsti enhance`` checks an input), and the outputs checked, before any
enhancement starts.
"""

import contextlib
import math
from pathlib import Path

import click
from click.core import ParameterSource

from sepsti.commands import (ITERATIONS, MAX_REDUCTION, PLOT_EXTENSIONS, SEED, Command, EnhancerIterations, InputPath,
                             OutputPath, check_plot_format, parse_list, progress_option, shown,
                             single_blas_thread_by_default)

__all__ = ["evaluate", "summarize", "format_table", "enhance_and_score",
           "enhance_signal", "enhance_channels", "score_signals", "score_mixture"]

#: Every score, in the order of the JSON objects.
METRICS = ("sdr", "sir", "sar", "stoi", "estoi", "pesq", "high_band_db", "fricative_db")
#: The scores in the table and the plot, with their number of decimals and unit.
_SHOWN = {"sdr": (2, "dB"), "sir": (2, "dB"), "sar": (2, "dB"), "stoi": (3, ""), "pesq": (2, "MOS-LQO")}
#: The scores computed by each optional package (for the message when it is missing).
_PERCEPTUAL = {"stoi": ("stoi", "estoi"), "pesq": ("pesq",)}
#: The scores of the band above 4 kHz, not in the table, whose warnings (one per file where band-limited clean
#: speech leaves them undefined) the command gives once each (:func:`_band_warnings_collapsed`).
_BAND_WARNINGS = ("high_band_level", "fricative_level")


def _metrics(rows):
    """The scores the rows carry, in :data:`METRICS` order."""
    return [metric for metric in METRICS if rows and metric in rows[0]["input"]]


def _means(rows):
    """Input and enhanced means of each score, both over the rows where both are finite.

    Silent estimates score NaN and a noiseless mixture's input SIR is inf: such a row leaves both means, so that
    the two columns and their improvement are over the same files. A score with no such row (the unprocessed
    input's SAR, infinite in every row) has each side's own mean over its finite values, or its common value.
    """
    import numpy as np

    means = {"input": {}, "enhanced": {}}
    for metric in _metrics(rows):
        values = {key: np.array([row[key][metric] for row in rows], dtype=float) for key in means}
        both = np.isfinite(values["input"]) & np.isfinite(values["enhanced"])
        for key, side in values.items():
            kept = side[both] if both.any() else side[np.isfinite(side)]
            if kept.size:
                means[key][metric] = float(kept.mean())
            else:
                means[key][metric] = float(side[0]) if side.size and np.all(side == side[0]) else float("nan")
    return means


def _group(rows):
    means = _means(rows)
    leads = {metric: _lead(rows, metric) for metric in means["enhanced"]}
    return {"count": len(rows), **means,
            "improvement": {metric: lead.mean if lead else float("nan") for metric, lead in leads.items()},
            "interval": {metric: [lead.low, lead.high] if lead and math.isfinite(lead.low) else None
                         for metric, lead in leads.items()}}


def _lead(rows, metric):
    """The mean improvement over the sentences and its 95 % interval (None where no file has both scores).

    Each sentence's mean paired difference over the files where both scores are defined, then their
    mean (:func:`sepsti.comparison.paired_difference`); with as many files per sentence and every score
    defined, the difference of the means.
    """
    from sepsti.comparison import paired_difference_if_defined

    return paired_difference_if_defined([row["enhanced"][metric] for row in rows],
                                        [row["input"][metric] for row in rows], [row["file"] for row in rows])


def summarize(results):
    """Mean scores per SNR and overall.

    Parameters
    ----------
    results : list of dict
        Rows with ``file`` (the sentence), ``snr`` (absent for pairs), ``input`` and ``enhanced`` (each
        ``{"sdr", "sir", "sar"}`` and, when scored, ``"stoi"``, ``"estoi"``, ``"pesq"``; every row the same
        keys).

    Returns
    -------
    dict
        ``{"by_snr": [{"snr", "count", "input", "enhanced", "improvement", "interval"}], "overall": {...}}``
        (``by_snr`` empty when no row has an SNR);
        each of ``input``, ``enhanced``, ``improvement``, ``interval`` has the rows' scores as keys.
        ``improvement`` is the mean paired difference over the rows' ``file`` (the replicates:
        :func:`sepsti.comparison.paired_difference`; a corpus's sentence is mixed with every noise, each
        pair is its own), NaN where no row has both scores (the input's SAR); ``interval`` is its 95 %
        interval ``[low, high]``, None where undefined (also for a single file).
    """
    snrs = sorted({row["snr"] for row in results if "snr" in row})
    by_snr = [{"snr": snr, **_group([row for row in results if row["snr"] == snr])} for snr in snrs]
    return {"by_snr": by_snr, "overall": _group(results)}


def _cell(value, width, digits, sign=""):
    """A table cell; infinities (the input's SAR) print as ∞ and undefined values as –."""
    if math.isnan(value):
        return f"{'–':>{width}}"
    if math.isinf(value):
        return f"{'∞' if value > 0 else '−∞':>{width}}"
    return f"{value:>{sign}{width}.{digits}f}"


def format_table(summary, replicates="sentences"):
    """The stdout table: one line per SNR and one for all, input / enhanced / difference.

    SDR, SIR and SAR are in dB; STOI and PESQ columns appear when the summary has them; the
    intervals' line names the ``replicates``. Recordings above 8 kHz add a line with the mean levels
    of the band above 4 kHz against the clean speech (:func:`sepsti.metrics.high_band_level`,
    :func:`sepsti.metrics.fricative_level`).
    """
    shown = [metric for metric in _SHOWN if metric in summary["overall"]["input"]]
    names = [metric.upper() for metric in shown]
    header = (f"{'SNR':>6} {'files':>5} | {'input ' + names[0]:>9} " + " ".join(f"{name:>6}" for name in names[1:])
              + f" | {'enhanced ' + names[0]:>12} " + " ".join(f"{name:>6}" for name in names[1:])
              + " | " + " ".join(f"{'Δ' + name:>6}" for name in names))
    lines = [header, "-" * len(header)]
    groups = [(f"{entry['snr']} dB", entry) for entry in summary["by_snr"]] + [("all", summary["overall"])]
    for label, entry in groups:
        cells = []
        for key, first_width, sign in (("input", 9, ""), ("enhanced", 12, ""), ("improvement", 6, "+")):
            cells.append(" ".join(_cell(entry[key][metric], first_width if number == 0 else 6, _SHOWN[metric][0],
                                        sign) for number, metric in enumerate(shown)))
        lines.append(f"{label:>6} {entry['count']:>5} | " + " | ".join(cells))
    for metric in ("sdr", "stoi"):
        intervals = [(label, entry["interval"][metric]) for label, entry in groups
                     if metric in shown and entry["interval"][metric] is not None]
        if intervals:
            digits = _SHOWN[metric][0]
            lines.append(f"95 % interval of Δ{metric.upper()} over the {replicates}: " + ", ".join(
                f"{label} [{low:+.{digits}f}, {high:+.{digits}f}]" for label, (low, high) in intervals))
    band = {name: [summary["overall"][key].get(metric, math.nan) for key in ("input", "enhanced")]
            for metric, name in (("high_band_db", "energy share"), ("fricative_db", "fricative frames"))}
    if any(math.isfinite(value) for pair in band.values() for value in pair):
        lines.append("above 4 kHz against the clean speech (dB): " + "; ".join(
            f"{name} input {_cell(before, 0, 1, '+').strip()}, enhanced {_cell(after, 0, 1, '+').strip()}"
            for name, (before, after) in band.items()))
    return "\n".join(lines)


def _plot(summary, results, path, title, replicates, overwrite=True):
    """The plot of ``--plot``: the scores against SNR, or for pairs each file's output against its input.

    The title ends with what the 95 % intervals are over (the ``replicates``), or that there is none; the legend
    lies under the panels, where it hides no point.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sepsti.core.io import atomic_path

    shown = [metric for metric in _SHOWN if metric in summary["overall"]["input"]]
    figure, axes = plt.subplots(1, len(shown), figsize=(4 * len(shown), 3.9))
    for axis, metric in zip(axes, shown):
        if summary["by_snr"]:
            _draw_against_snr(axis, summary, metric)
        else:
            _draw_pairs(axis, summary, results, metric)
        axis.grid(alpha=0.3)
    drawn = summary["by_snr"] or [summary["overall"]]  # the intervals the panels show
    if any(entry["interval"][metric] is not None for entry in drawn for metric in shown):
        title += f"; 95 % intervals over the {replicates}"
    else:
        title += f"; no 95 % interval (fewer than two {replicates} with both scores)"
    figure.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=7, frameon=False)
    figure.suptitle(title)
    figure.tight_layout(rect=(0, 0.05, 1, 1))
    with atomic_path(path, overwrite=overwrite) as tmp:
        figure.savefig(tmp, dpi=120, format=Path(path).suffix[1:].lower())
    plt.close(figure)


def _draw_against_snr(axis, summary, metric):
    """Input and enhanced means per SNR, the 95 % interval of the gain as bars on the enhanced curve where it has
    one."""
    snrs = [entry["snr"] for entry in summary["by_snr"]]
    axis.plot(snrs, [entry["input"][metric] for entry in summary["by_snr"]], "o--", label="input")
    enhanced = [entry["enhanced"][metric] for entry in summary["by_snr"]]
    axis.plot(snrs, enhanced, "s-", color="C1", label="enhanced")
    bars = [(entry["snr"], value, entry["improvement"][metric] - entry["interval"][metric][0],
             entry["interval"][metric][1] - entry["improvement"][metric])
            for entry, value in zip(summary["by_snr"], enhanced) if entry["interval"][metric] is not None]
    if bars:
        at, level, below, above = zip(*bars)
        axis.errorbar(at, level, yerr=[below, above], fmt="none", ecolor="C1", capsize=3,
                      label="95 % interval of the gain")
    axis.set_title(metric.upper())
    axis.set_xlabel("input SNR (dB)")
    axis.set_ylabel(_SHOWN[metric][1])
    axis.set_xticks(snrs)


def _draw_pairs(axis, summary, results, metric):
    """Each file's enhanced score against its input's and the diagonal (no change); the title gives the
    mean gain and its 95 % interval over the files."""
    import numpy as np

    digits, unit = _SHOWN[metric]
    unit = f" ({unit})" if unit else ""
    if metric == "sar":  # the input's SAR is infinite: each file's SAR against its input SDR
        before = np.array([row["input"]["sdr"] for row in results], dtype=float)
        axis.set_xlabel("input SDR (dB)")
    else:
        before = np.array([row["input"][metric] for row in results], dtype=float)
        axis.set_xlabel(f"input {metric.upper()}{unit}")
        finite = np.concatenate([before, [row["enhanced"][metric] for row in results]])
        finite = finite[np.isfinite(finite)]
        if finite.size:
            axis.plot([finite.min(), finite.max()], [finite.min(), finite.max()], "k--", linewidth=0.8,
                      label="no change")
    axis.plot(before, [row["enhanced"][metric] for row in results], "o", markersize=3, alpha=0.6, label="a file")
    axis.set_ylabel(f"enhanced {metric.upper()}{unit}")
    gain, interval = summary["overall"]["improvement"][metric], summary["overall"]["interval"][metric]
    title = metric.upper()
    if np.isfinite(gain):
        title += f": mean gain {gain:+.{digits}f}"
        if interval is not None:
            title += f" [{interval[0]:+.{digits}f}, {interval[1]:+.{digits}f}]"
    axis.set_title(title, fontsize=9)


@click.command("evaluate", cls=Command)
@click.option("--corpus", type=InputPath("folder", path_type=Path), default=None, envvar="SEPSTI_NOIZEUS",
              help="NOIZEUS-style corpus folder; its test split (sp21-sp30) is scored. When not given: "
                   "$SEPSTI_NOIZEUS, unless --clean and --noisy are given.")
@click.option("--clean", "clean_root", type=InputPath("folder", path_type=Path), default=None,
              help="Folder of clean recordings; with --noisy, instead of --corpus.")
@click.option("--noisy", "noisy_root", type=InputPath("folder", path_type=Path), default=None,
              help="Folder of noisy recordings, each named as its clean file (any extension libsndfile "
                   "reads, any rate, sample-aligned); every one is scored.")
@click.option("--names", default=None,
              help="With pairs: a regular expression the file names match, whose groups (?P<sentence>...), "
                   "(?P<noise>...), (?P<snr>...) label them, e.g. "
                   "'(?P<sentence>.+)_(?P<noise>[a-z]+)_(?P<snr>-?\\d+)dB'; "
                   "the scores are then given per SNR.")
@click.option("--dictionary", type=InputPath(path_type=Path), default=None,
              help="Speech dictionary (.npz). Default: the one `enhance` picks for each file's rate.")
@click.option("--noise", "noises", default=None, help="Noise types to score, e.g. car,babble (default: all).")
@click.option("--snr", "snrs", default=None, help="SNRs in dB to score, e.g. 0,5 (default: all).")
@click.option("--json", "json_path", type=OutputPath(path_type=Path), default=None,
              help="Write the scores as JSON.")
@click.option("--plot", "plot_path", type=OutputPath(path_type=Path), default=None,
              help="Plot SDR/SIR/SAR/STOI/PESQ against SNR, input vs enhanced, with the 95 % interval of "
                   "the gain over the sentences; for pairs without SNR labels, each file's enhanced score "
                   f"against its input's ({', '.join(PLOT_EXTENSIONS)}).")
@click.option("--noise-rank", type=click.IntRange(min=1, max=257), default=5, show_default=True,
              help="Number of noise atoms learned on each mixture (at most 257, the frequency bins of the "
                   "8 kHz dictionary).")
@click.option("--iterations", type=ITERATIONS, default=None, cls=EnhancerIterations,
              help="EM iterations per mixture: exactly this many, as the enhancer runs no convergence test "
                   "(default: {default}, the enhancer's own).")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Seed of the noise-dictionary initialization.")
@click.option("--overwrite", is_flag=True, help="Replace existing --json / --plot files.")
@click.option("--max-reduction", type=MAX_REDUCTION, default=None, metavar="DB",
              help="As enhance's: the most any time-frequency bin is lowered, in dB (default: 26).")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=1, show_default=True,
              help="Recordings enhanced and scored at once, each in a process of its own (0: one per core, as far as "
                   "the free memory holds 400 MB each). Scores are the same as with one.")
@progress_option("over the recordings scored")
def evaluate(corpus, clean_root, noisy_root, names, dictionary, noises, snrs, json_path, plot_path, noise_rank,
             iterations, seed, overwrite, max_reduction, jobs, progress):
    """Enhance noisy recordings and score them against the clean speech (SDR/SIR/SAR in dB, STOI, PESQ).

    The recordings are a NOIZEUS-style corpus's test mixtures (--corpus), or noisy files paired by
    name with clean ones (--clean and --noisy, e.g. VoiceBank-DEMAND's test set). A multichannel
    noisy file is enhanced as enhance does it (channels kept, --channels auto) and each channel
    scored against the clean file's matching channel (a mono clean file: against it); the file's
    scores are the means over the channels where they are defined.
    """
    single_blas_thread_by_default()
    import collections
    import json

    from sepsti.audio import resample, validate_frames, validate_sample_rate
    from sepsti.core.errors import ParameterError
    from sepsti.core.io import atomic_path, check_output_path, json_safe
    from sepsti.recordings import Dictionaries, find_recordings
    from sepsti.workers import Workers, resolve_jobs

    noise_list = parse_list(noises, "noise", lambda item: item.lower())
    snr_list = parse_list(snrs, "snr", int)
    if (clean_root is not None or noisy_root is not None) and (
            click.get_current_context().get_parameter_source("corpus") is ParameterSource.ENVIRONMENT):
        corpus = None

    # --- validation: outputs, dictionaries, every recording ---
    outputs = [path for path in (json_path, plot_path) if path is not None]
    if json_path is not None and plot_path is not None and Path(json_path).resolve() == Path(plot_path).resolve():
        raise ParameterError(f"--json and --plot are the same file {json_path}")
    check_plot_format(plot_path)
    dictionaries = Dictionaries(dictionary)
    recordings = find_recordings(corpus, clean_root, noisy_root, noise_list, snr_list, names)
    for path in outputs:
        check_output_path(path, overwrite=overwrite, inputs=[*dictionaries.used, *recordings.inputs])
    rates = set()
    for item in recordings.items:
        recording = recordings.load(item)
        speech_dictionary = dictionaries.for_rate(recording.sample_rate)
        rate = speech_dictionary.sample_rate
        # enhance's checks of an input (sepsti.audio.inspect_input), before a rate's resampling filter is built
        validate_sample_rate(recording.sample_rate, rate, name=str(recording.path))
        _check_peaks(recording)
        validate_frames(resample(recording.noisy, recording.sample_rate, rate), rate, name=str(recording.path),
                        n_fft=speech_dictionary.n_fft)
        rates.add(recording.sample_rate)

    # --- enhancement and scoring ---
    import numpy as np

    from sepsti.core.progress import above, progress_bar, warnings_above
    from sepsti.denoise import EM_ITERATIONS, MASK_FLOOR
    from sepsti.metrics import pesq_mode, unavailable_scores

    missing = unavailable_scores()
    if missing:
        click.echo(f"Warning: {' and '.join(score.upper() for score in missing)} not scored: "
                   f"{' and '.join(missing.values())} not installed (pip install 'sepsti[eval]')", err=True)
    skipped = {metric for score in missing for metric in _PERCEPTUAL[score]}
    metrics = [metric for metric in METRICS if metric not in skipped]

    options = {"noise_rank": noise_rank, "seed": seed}
    if iterations is not None:
        options["max_iter"] = iterations
    if max_reduction is not None:
        options["mask_floor"] = 10.0 ** (-max_reduction / 20.0)
    results = []
    labels = collections.deque()  # of the recordings handed out, in order

    def tasks():
        for item in recordings.items:
            recording = recordings.load(item)
            labels.append((recordings.label(recording), recording.path))
            yield recording, dictionaries.for_rate(recording.sample_rate), options, metrics

    with _band_warnings_collapsed(), \
            progress_bar(len(recordings.items), desc="evaluate", unit="file", enabled=progress is not False) as bar, \
            warnings_above(bar), Workers(min(resolve_jobs(jobs), len(recordings.items))) as pool:
        for scores, reason in pool.map(enhance_and_score, tasks()):
            row, path = labels.popleft()
            if reason is not None:
                with above(bar):
                    click.echo(f"Warning: {shown(path)}: {reason}; scored unchanged", err=True)
            results.append({**row, **scores})
            bar.update(1)

    summary = summarize(results)
    click.echo(format_table(summary, recordings.replicates))
    summary.update({
        "corpus": recordings.corpus,
        "dictionaries": dictionaries.describe(),
        "noises": sorted({row["noise"] for row in results if "noise" in row}),
        "snrs": sorted({row["snr"] for row in results if "snr" in row}),
        "pesq_modes": sorted({pesq_mode(rate) for rate in rates}) if "pesq" in metrics else [],
        "settings": {"noise_rank": noise_rank, "iterations": options.get("max_iter", EM_ITERATIONS), "seed": seed,
                     # + 0.0: no reduction is 0.0, not -0.0
                     "max_reduction_db": float(-20.0 * np.log10(options.get("mask_floor", MASK_FLOOR))) + 0.0},
    })
    if json_path is not None:
        with atomic_path(json_path, overwrite=overwrite) as tmp:
            document = json_safe({"results": results, "summary": summary})
            tmp.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n")
        click.echo(f"wrote {shown(json_path)}")
    if plot_path is not None:
        ranks = "/".join(str(rank) for rank in sorted({used.rank for used in dictionaries.used.values()}))
        _plot(summary, results, plot_path, f"{recordings.title}: {len(results)} {recordings.noun}, rank-{ranks} "
                                           "dictionary", recordings.replicates, overwrite)
        click.echo(f"wrote {shown(plot_path)}")


@contextlib.contextmanager
def _band_warnings_collapsed():
    """Within this block, the warnings of the scores :data:`_BAND_WARNINGS` (``<file>: [channel N: ]high_band_level:
    <reason>``) are held back; when it ends, the first of each score and reason (its numbers aside) is given with
    the count of the other files. Other warnings print as they come."""
    import re
    import warnings

    band = re.compile(rf"^(?P<file>.*?)(?:: channel \d+)?: (?P<score>{'|'.join(_BAND_WARNINGS)}): (?P<reason>.*)$",
                      re.DOTALL)
    show = warnings.showwarning
    held = {}  # (score, reason without its numbers) -> [first warning's message, category, filename, line, files]

    def hold(message, category, filename, lineno, *args, **kwargs):
        parts = band.match(str(message))
        if parts is None:
            show(message, category, filename, lineno, *args, **kwargs)
            return
        key = parts["score"], re.sub(r"\d[\d.e+-]*", "#", parts["reason"])
        held.setdefault(key, [message, category, filename, lineno, set()])[-1].add(parts["file"])

    warnings.showwarning = hold
    try:
        yield
    finally:
        warnings.showwarning = show
    for message, category, filename, lineno, files in held.values():
        more = len(files) - 1
        show(f"{message}; and in {more} more file{'s' if more > 1 else ''}" if more else message, category,
             filename, lineno)


def _check_peaks(recording):
    """Refuse a recording whose noisy or clean samples lie beyond :data:`sepsti.audio.MAX_PEAK`, as enhance does.

    Raises
    ------
    ParameterError
        Naming the noisy file (and its clean reference, when that is the one).
    """
    import numpy as np

    from sepsti.audio import MAX_PEAK
    from sepsti.core.errors import ParameterError

    for signal, whose in ((recording.noisy, ""), (recording.clean, "its clean reference's ")):
        peak = float(np.max(np.abs(signal), initial=0.0))
        if peak > MAX_PEAK:
            raise ParameterError(f"{recording.path}: {whose}samples reach {peak:.3g}, far beyond full scale (1.0); "
                                 "scale the files to their real level first")


def enhance_and_score(recording, speech_dictionary, options, metrics):
    """Enhance one recording as ``sepsti enhance`` would and score input and output (a task of ``--jobs``).

    Parameters
    ----------
    recording : object
        With ``clean``, ``noisy``, ``sample_rate`` and ``path`` (a corpus mixture or a pair); a multichannel
        recording's signals are ``(n_samples, channels)`` and its ``path`` is the noisy file.
    speech_dictionary : sepsti.dictionary.Dictionary
    options : dict
        For :func:`enhance_signal` (:func:`enhance_channels` for several channels).
    metrics : list of str

    Returns
    -------
    scores : dict
        :func:`score_signals` of the input and the output.
    reason : str or None
        Why the recording, or some of its channels, was scored unchanged (too little besides digital silence),
        if it was.
    """
    import numpy as np

    from sepsti.denoise import UnchangedSignalWarning, unchanged_signal_raised

    reason = None
    if np.ndim(recording.noisy) > 1:
        speech, reason = enhance_channels(recording.path, speech_dictionary, options)
    else:
        with unchanged_signal_raised():
            # a file of (nearly) nothing but digital silence is scored as it is, as enhance writes it
            try:
                speech = enhance_signal(recording.noisy, recording.sample_rate, speech_dictionary, **options)
            except UnchangedSignalWarning as unchanged:
                speech, reason = recording.noisy, str(unchanged)
    return score_signals(recording, {"input": recording.noisy, "enhanced": speech}, metrics), reason


def enhance_signal(noisy, sample_rate, speech_dictionary, **options):
    """Enhance a signal in memory as ``sepsti enhance`` would: at the dictionary's rate, back at its own.

    A signal at a rate above the dictionary's keeps its upper band, enhanced with the speech share
    of the top modelled band (:class:`sepsti.bandwidth.UpperBand`), as ``sepsti enhance`` does.

    Parameters
    ----------
    noisy : ndarray, shape (n_samples,)
    sample_rate : int
        The signal's rate.
    speech_dictionary : sepsti.dictionary.Dictionary
    **options
        For :func:`sepsti.denoise.denoise_blocks` (``noise_rank``, ``max_iter``, ``noise``, ``seed``, ...).

    Returns
    -------
    ndarray, shape (n_samples,)
    """
    import numpy as np

    from sepsti.audio import resample
    from sepsti.bandwidth import UpperBand, has_upper_band
    from sepsti.denoise import denoise, denoise_blocks

    if options.get("mask_floor") == 1.0:  # --max-reduction 0: the input itself, as enhance copies it
        return np.array(noisy, dtype=np.float64)
    framing = speech_dictionary.framing
    rate = framing.sample_rate
    signal = resample(noisy, sample_rate, rate)
    if has_upper_band(sample_rate, framing):
        noisy = np.asarray(noisy, dtype=np.float64)
        upper = UpperBand(lambda: iter((noisy,)), sample_rate, len(noisy), framing)
        speech = np.concatenate(list(denoise_blocks(lambda: iter((signal,)), len(signal), speech_dictionary.W,
                                                    framing=framing, mask_fn=upper.add_mask,
                                                    correction_fn=upper.add_correction,
                                                    mask_atoms=speech_dictionary.mask_atoms,
                                                    band_gains=speech_dictionary.band_gains, **options)))
        return upper.apply(resample(speech, rate, sample_rate, length=len(noisy)))
    else:
        speech = denoise(signal, speech_dictionary.W, framing=framing, mask_atoms=speech_dictionary.mask_atoms,
                         band_gains=speech_dictionary.band_gains, **options)
    return resample(speech, rate, sample_rate, length=len(noisy))


def enhance_channels(path, speech_dictionary, options):
    """Enhance a multichannel file with ``sepsti enhance``'s own code, every channel kept.

    :func:`sepsti.commands.enhance.process_file`, with enhance's default ``--channels auto``, writes the
    output into a temporary file as float64 (not rounded to the input's sample format, as
    :func:`enhance_signal`'s output is not), which is read back.

    Parameters
    ----------
    path : Path
        The noisy file.
    speech_dictionary : sepsti.dictionary.Dictionary
    options : dict
        For :func:`sepsti.commands.enhance.process_file` (``noise_rank``, ``seed``, ``max_iter``, ``mask_floor``).

    Returns
    -------
    speech : ndarray, shape (n_samples, channels)
    reason : str or None
        Why the file, or some of its channels, was kept unchanged, if it was.
    """
    import tempfile

    import numpy as np

    from sepsti.audio import inspect_input
    from sepsti.commands.enhance import process_file
    from sepsti.corpora.audio import read_audio_blocks

    audio = inspect_input(path, sample_rate=speech_dictionary.sample_rate)._replace(subtype="DOUBLE")
    with tempfile.TemporaryDirectory(prefix="sepsti-evaluate-") as folder:
        target = Path(folder) / "enhanced.w64"  # Sony Wave64: no 4 GB limit
        _, reason = process_file(audio, target, speech_dictionary, False, (False, False),
                                 {**options, "channels": "auto"})
        return np.concatenate(list(read_audio_blocks(target, downmix=False))), reason


def score_signals(mixture, signals, metrics=METRICS):
    """The scores of several signals of one mixture (the input, enhancers' outputs), by name.

    A score left undefined warns once for the mixture, naming its file, however many of the signals it
    concerns (the clean speech without a fricative frame makes every signal's fricative level NaN).

    Parameters
    ----------
    mixture : sepsti.corpora.noizeus.Mixture or sepsti.corpora.pairs.Pair
    signals : dict
        ``{name: signal}``, each at the mixture's rate, length and channels.
    metrics : sequence of str

    Returns
    -------
    dict
        ``{name: scores}``, each as :func:`score_mixture` gives them.
    """
    from sepsti.metrics import warnings_once

    with warnings_once(mixture.path):
        return {name: score_mixture(mixture, signal, metrics) for name, signal in signals.items()}


def score_mixture(mixture, speech, metrics=METRICS):
    """The scores of ``speech`` (the mixture itself for the input) against the mixture's clean speech.

    Parameters
    ----------
    mixture : sepsti.corpora.noizeus.Mixture or sepsti.corpora.pairs.Pair
        Anything with ``clean``, ``noisy`` and ``sample_rate``: ``(n_samples,)``, or ``(n_samples, channels)``
        for a multichannel recording.
    speech : ndarray, shape (n_samples,) or (n_samples, channels)
        At the mixture's rate, length and channels.
    metrics : sequence of str
        Among :data:`METRICS` (STOI and ESTOI need pystoi, PESQ needs pesq; the two levels of the band
        above 4 kHz, :func:`sepsti.metrics.high_band_level` and :func:`sepsti.metrics.fricative_level`,
        are NaN at 8 kHz and below).

    Returns
    -------
    dict
        ``{metric: float}``; undefined scores are NaN. Of several channels, each one's scores against the
        clean speech's matching channel (or its only one), and of each score the mean over the channels
        where it is defined (the warnings of the others name their channel).
    """
    import warnings

    import numpy as np

    from sepsti.metrics import warnings_once

    if np.ndim(speech) == 1:
        return _scores(mixture.clean, mixture.noisy, speech, mixture.sample_rate, metrics)
    channels = []
    for channel in range(speech.shape[1]):
        clean = mixture.clean if np.ndim(mixture.clean) == 1 else mixture.clean[:, channel]
        with warnings_once(f"channel {channel + 1}"):
            channels.append(_scores(clean, mixture.noisy[:, channel], speech[:, channel], mixture.sample_rate,
                                    metrics))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a score no channel defines is NaN, its warnings given
        return {metric: float(np.nanmean([scores[metric] for scores in channels])) for metric in metrics}


def _scores(clean, noisy, speech, sample_rate, metrics):
    """:func:`score_mixture` of one channel."""
    from sepsti.metrics import HIGH_BAND_HZ, bss_eval, fricative_level, high_band_level, pesq, stoi

    scores = dict(bss_eval(clean, noisy, speech))
    wide = sample_rate > 2 * HIGH_BAND_HZ  # else there is no band above 4 kHz to score: NaN
    scores["high_band_db"] = high_band_level(clean, speech, sample_rate) if wide else float("nan")
    scores["fricative_db"] = fricative_level(clean, speech, sample_rate)[0] if wide else float("nan")
    if "stoi" in metrics:
        scores["stoi"] = stoi(clean, speech, sample_rate)
        scores["estoi"] = stoi(clean, speech, sample_rate, extended=True)
    if "pesq" in metrics:
        scores["pesq"] = pesq(clean, speech, sample_rate)
    return {metric: float(scores[metric]) for metric in metrics}
