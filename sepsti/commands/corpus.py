"""``sepsti corpus``: make a synthetic NOIZEUS-style corpus, or describe a corpus folder."""

import re
from pathlib import Path

import click

from sepsti.commands import SEED, Group, InputPath, OutputPath, parse_list, progress_option, shown
from sepsti.core.errors import ParameterError

__all__ = ["corpus", "parse_utterances", "pairing_problems"]


def parse_utterances(text):
    """``"30"`` -> 30 (the first N ids); ``"sp01-sp04,sp21"`` or ``"1-4,21"`` -> a list of ids."""
    from sepsti.corpora.noizeus import ALL_IDS

    text = text.strip()
    if re.fullmatch(r"\d+", text):
        if not 1 <= int(text) <= len(ALL_IDS):
            raise ParameterError(f"--utterances {text}: expected a count in 1..{len(ALL_IDS)} or ids like "
                                 "sp01-sp04,sp21")
        return int(text)
    ids = []
    for part in parse_list(text, "utterances", example="sp01-sp04,sp21"):
        match = re.fullmatch(r"(?:sp)?(\d+)(?:-(?:sp)?(\d+))?", part, re.IGNORECASE)
        if match is None:
            raise ParameterError(f"--utterances {text}: expected a count or ids like sp01-sp04,sp21")
        first = int(match[1])
        last = int(match[2]) if match[2] else first
        if last < first:
            raise ParameterError(f"--utterances {text}: range {part} runs backwards")
        outside = first if not 1 <= first <= len(ALL_IDS) else last if last > len(ALL_IDS) else None
        if outside is not None:  # before a range of millions is spelt out
            raise ParameterError(f"--utterances {text}: sp{outside:02d} not in {ALL_IDS[0]}..{ALL_IDS[-1]}")
        ids.extend(f"sp{number:02d}" for number in range(first, last + 1))
    return ids


def _listed(items, limit=3):
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def pairing_problems(index, unusable=None):
    """What stops noisy files from being used with their clean partner (headers only, no samples read).

    Parameters
    ----------
    index : sepsti.corpora.noizeus.CorpusIndex
    unusable : dict, optional
        ``{path: why}`` of files already found unusable (the train split's, read whole), reported with
        the unreadable headers, each file once.

    Returns
    -------
    list of str
        One line per kind of problem: noisy files without a clean file, with another length
        or rate than it, and unusable files; empty when every noisy file has a usable partner.
    """
    from sepsti.corpora.audio import audio_info

    unusable = dict(unusable or {})
    headers = {}

    def header(path):
        if path not in headers and path not in unusable:
            try:
                headers[path] = audio_info(path)
            except ParameterError as error:
                unusable[path] = str(error)
        return headers.get(path)

    orphans, lengths, rates = [], [], []
    for (utterance, _, _), path in sorted(index.noisy.items()):
        if utterance not in index.clean:
            orphans.append(path.name)
            continue
        noisy, clean = header(path), header(index.clean[utterance])
        if noisy is None or clean is None:
            continue
        if noisy.sample_rate != clean.sample_rate:
            rates.append(f"{path.name} ({noisy.sample_rate} vs {clean.sample_rate} Hz)")
        elif noisy.num_samples != clean.num_samples:
            lengths.append(f"{path.name} ({noisy.num_samples} vs {clean.num_samples} samples)")
    problems = []
    if orphans:
        problems.append(f"{len(orphans)} noisy file(s) without a clean file: {_listed(orphans)}")
    if lengths:
        problems.append(f"{len(lengths)} noisy file(s) whose length differs from their clean file's: "
                        f"{_listed(lengths)}")
    if rates:
        problems.append(f"{len(rates)} noisy file(s) whose sample rate differs from their clean file's: "
                        f"{_listed(rates)}")
    if unusable:
        problems.append(f"{len(unusable)} unusable file(s): {_listed(list(unusable.values()), 1)}")
    return problems


def _train_signals(index):
    """The clean files of the train split as ``sepsti train`` models them by default (at 8 kHz), and the others.

    Returns
    -------
    signals : list of ndarray
        The files that can be read, each resampled to 8 kHz.
    unusable : dict
        ``{path: why}`` of the files that cannot be read, or have a rate no resampling takes.
    """
    from sepsti.audio import resample, validate_sample_rate
    from sepsti.corpora.audio import read_audio
    from sepsti.corpora.noizeus import TRAIN_IDS
    from sepsti.features import SAMPLE_RATE

    signals, unusable = [], {}
    for path in (index.clean[utterance] for utterance in TRAIN_IDS if utterance in index.clean):
        try:
            y, rate = read_audio(path)
            validate_sample_rate(rate, SAMPLE_RATE, name=str(path))
        except ParameterError as error:
            unusable[path] = str(error)
            continue
        signals.append(resample(y, rate, SAMPLE_RATE))
    return signals, unusable


@click.group("corpus", cls=Group)
def corpus():
    """Make NOIZEUS-style corpora, or describe a corpus folder."""


@corpus.command("synth")
@click.argument("directory", type=OutputPath("folder", path_type=Path))
@click.option("--seed", type=SEED, default=0, show_default=True, help="Random seed.")
@click.option("--overwrite", is_flag=True, help="Replace the corpus in a non-empty DIRECTORY.")
@click.option("--utterances", default="30", show_default=True,
              help="How many utterances (sp01..spN), or ids such as sp01-sp04,sp21-sp22.")
@click.option("--noise", "noises", default="white,pink,babble,car,street", show_default=True,
              help="Noise types, comma-separated.")
@click.option("--snr", "snrs", default="0,5,10,15", show_default=True,
              help="SNRs in dB (integers in -20..40), comma-separated.")
@progress_option("over the files written")
def synth(directory, seed, overwrite, utterances, noises, snrs, progress):
    """Write a synthetic NOIZEUS-style corpus to DIRECTORY.

    Clean files go to DIRECTORY/clean/spNN.wav and mixtures to
    DIRECTORY/noisy/<noise>_<snr>dB/spNN_<noise>_sn<snr>.wav (8 kHz, 16-bit).
    """
    from sepsti.corpora.synth import write_corpus

    settings = write_corpus(directory, seed=seed, utterances=parse_utterances(utterances),
                            noises=parse_list(noises, "noise"), snrs=parse_list(snrs, "snr", int, "0,5,10,15"),
                            overwrite=overwrite, progress=progress is not False)
    count = len(settings["ids"])
    click.echo(f"wrote {settings['files']} files to {shown(directory)}: {count} utterance{'s' * (count != 1)}, "
               f"noises {', '.join(settings['noises'])}, SNRs {', '.join(map(str, settings['snrs']))} dB, "
               f"seed {settings['seed']}")


@corpus.command("info")
@click.argument("directory", type=InputPath("folder", path_type=Path))
def info(directory):
    """Describe the NOIZEUS-style files found below DIRECTORY, or the wideband corpus it holds.

    Files that cannot be used are named once, on stderr; the training matrix is that of the train
    split's other files, at 8 kHz (as `sepsti train` makes it by default). A folder with a
    manifest.json is a wideband corpus: its splits by speaker, the files left out for their flags,
    and the training matrix at 16 kHz.
    """
    from sepsti.corpora import wideband
    from sepsti.corpora.noizeus import corpus_index

    if wideband.is_wideband_corpus(directory):
        _describe_wideband(directory)
        return
    index = corpus_index(directory)
    click.echo(index.describe())
    if index.noisy:
        snrs = index.snrs
        width = max(len(noise) for noise in index.noises) + 2
        click.echo("noisy files per noise and SNR (dB):")
        click.echo(" " * width + "".join(f"{snr:>6}" for snr in snrs))
        for noise in index.noises:
            counts = [sum(1 for key in index.noisy if key[1] == noise and key[2] == snr) for snr in snrs]
            click.echo(f"{noise:<{width}}" + "".join(f"{count:>6}" for count in counts))
    signals, unusable = _train_signals(index)
    for line in pairing_problems(index, unusable):
        click.echo(f"Warning: {line}", err=True)
    if signals:
        from sepsti.features import training_matrix

        shape = training_matrix(signals).shape
        left_out = f", {len(unusable)} unusable left out" if unusable else ""
        click.echo(f"training matrix (train split, {len(signals)} files{left_out}): {shape[0]} x {shape[1]}")
    elif unusable:
        click.echo(f"training matrix: none (the {len(unusable)} clean files of the train split are unusable)")
    else:
        click.echo("training matrix: no clean files of the train split (sp01-sp20)")


def _describe_wideband(directory):
    """``corpus info`` of a wideband folder: what its manifest lists, split by split, and the train matrix."""
    import warnings

    from sepsti.corpora import wideband
    from sepsti.corpora.audio import audio_info
    from sepsti.training import train_split

    utterances = wideband.read_manifest(directory)
    splits = wideband.split_of(utterances)
    rates = sorted({u.rate for u in utterances})
    click.echo(f"wideband corpus ({wideband.MANIFEST}): {len(utterances)} files, {len(splits)} speakers, rates "
               f"{', '.join(f'{rate} Hz' for rate in rates)}")
    click.echo(f"{'split':<12}{'speakers':>9}{'files':>7}{'minutes':>9}{'left out':>10}")
    for split in wideband.SPLITS:
        members = [u for u in utterances if splits[u.speaker] == split]
        left_out = sum(1 for u in members if set(u.flags) & set(wideband.EXCLUDED_FLAGS))
        click.echo(f"{split:<12}{len({u.speaker for u in members}):>9}{len(members):>7}"
                   f"{sum(u.duration for u in members) / 60:>9.1f}{left_out:>10}")
    flags = sorted({flag for u in utterances for flag in u.flags})
    if flags:
        counts = ", ".join(f"{flag} {sum(flag in u.flags for u in utterances)}"
                           f"{' (left out)' if flag in wideband.EXCLUDED_FLAGS else ''}" for flag in flags)
        click.echo(f"flags: {counts}; every file is high-passed at {wideband.HIGHPASS_HZ:g} Hz")
    missing, unreadable, misstated = [], [], []
    for u in utterances:
        if not u.path.is_file():
            missing.append(shown(u.path))
            continue
        try:
            rate = audio_info(u.path).sample_rate
        except ParameterError as error:
            unreadable.append(str(error))
            continue
        if rate != u.rate:  # the split is by the stated rate: a 16 kHz speaker stated otherwise leaves train
            misstated.append(f"{shown(u.path)} ({u.rate} Hz stated, {rate} Hz in the file)")
    for count, what, items in ((len(missing), f"listed in {wideband.MANIFEST} not found", missing),
                               (len(unreadable), "unreadable", unreadable),
                               (len(misstated), f"whose rate {wideband.MANIFEST} misstates", misstated)):
        if count:
            click.echo(f"Warning: {count} file(s) {what}: {_listed(items, 1 if items is unreadable else 3)}",
                       err=True)
    with warnings.catch_warnings():  # the manifest's speakers were warned of above, when its splits were read
        warnings.filterwarnings("ignore", message="wideband manifest", category=UserWarning)
        split = train_split(directory)
        X, files = split.matrix()
    click.echo(f"training matrix (train split, {len(files)} files, at {split.framing.sample_rate} Hz): "
               f"{X.shape[0]} x {X.shape[1]}")
