"""``sepsti enhance``: remove noise from speech files with a fixed speech dictionary.

Every input and every output is validated before any file is processed: all
inputs and the ``--noise-sample`` are read and checked block by block (format,
rate, length, finite samples; the sample at least ``--noise-rank`` frames), the
dictionary is loaded and checked, and every output path is checked (not an input, not existing unless
``--overwrite``, folder writable, format writable at its input's rate and channels). A bad third file therefore
stops the command before the first output is written. Each output is then
written atomically (temporary file, then a rename that, without
``--overwrite``, refuses a file that appeared meanwhile), so a file is either
complete or absent.

Files are processed in pieces (:func:`sepsti.denoise.denoise_blocks`): peak
memory does not grow with a file's length. A file with fewer than
:func:`sepsti.noise_model.min_frames` frames, or with too little sound besides
digital silence to learn its noise from (and no ``--noise-sample``), is
copied unchanged, with one warning line.

Conventions: signals are float64 in [-1, 1); processing happens at the
dictionary's rate, each output has its input's rate, length and channels (one
mask for all channels, from their magnitudes' power mean,
:func:`sepsti.features.channel_magnitude`; or each channel enhanced as a file of
its own where the channels hold different talkers, ``--channels``). Without
``--dictionary``, inputs up to 8 kHz use the shipped 8 kHz dictionary (atoms of
three frames, :attr:`sepsti.dictionary.Dictionary.context`, atoms learned for
the mask, :attr:`sepsti.dictionary.Dictionary.mask_atoms`, and a learned correction of the mask's band gains,
:attr:`sepsti.dictionary.Dictionary.band_gains`) and
inputs above 8 kHz the 16 kHz one (:mod:`sepsti.bandwidth`; with a correction of its own); the band
of an input above its dictionary's is enhanced with the speech share of the top
modelled band, lowered where the correction lowers that band (:class:`sepsti.bandwidth.UpperBand`).
Any dictionary's band-gain correction, where it has one, is applied.
"""

import contextlib
from pathlib import Path

import click

from sepsti.commands import (ITERATIONS, MAX_REDUCTION, SEED, Command, EnhancerIterations, InputPath, OutputPath,
                             progress_option, shown, single_blas_thread_by_default)

__all__ = ["enhance", "plan_outputs"]

#: Fewest STFT frames per piece of a file of many channels (a second at 16 ms).
MIN_CHUNK_FRAMES = 64

def plan_outputs(inputs, output, out_dir):
    """Map each input to its output path.

    Parameters
    ----------
    inputs : list of Path
    output : Path or None
        ``-o``: only with a single input.
    out_dir : Path or None
        ``--out-dir``: outputs keep their input's file name.

    Returns
    -------
    list of Path

    Raises
    ------
    ParameterError
        If neither or both are given, ``-o`` is used with several inputs, or
        two inputs would write the same output.
    """
    from sepsti.core.errors import ParameterError

    if (output is None) == (out_dir is None):
        raise ParameterError("output: give exactly one of -o OUT (one input) or --out-dir DIR")
    if output is not None:
        if len(inputs) != 1:
            raise ParameterError(f"-o {output}: {len(inputs)} inputs given; use --out-dir DIR for several files")
        return [Path(output)]
    outputs = [Path(out_dir) / Path(path).name for path in inputs]
    seen = {}
    for path, target in zip(inputs, outputs):
        key = str(target.resolve()) if target.parent.exists() else str(target)
        if key in seen:
            raise ParameterError(f"--out-dir {out_dir}: inputs {seen[key]} and {path} would both be written "
                                 f"to {target}")
        seen[key] = path
    return outputs


def _check_out_dir(out_dir):
    """The folder must exist or be creatable (its nearest existing parent writable)."""
    import os

    from sepsti.core.errors import ParameterError

    from sepsti.core.io import why_missing

    out_dir = Path(out_dir)
    if out_dir.exists():
        if not out_dir.is_dir():
            raise ParameterError(f"--out-dir {out_dir}: exists and is not a directory")
        return False
    parent = out_dir
    while not parent.exists():
        if os.path.lexists(parent):  # mkdir would say "File exists"
            raise ParameterError(f"--out-dir {out_dir}: {shown(parent)} is {why_missing(parent)}; give a folder")
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise ParameterError(f"--out-dir {out_dir}: cannot create it ({parent} is not a writable directory)")
    return True


def _missing_folders(folder):
    """``folder`` and those of its parents that do not exist, deepest first."""
    missing = []
    folder = Path(folder)
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    return missing


def copy_file(audio, target, *, overwrite):
    """Write a checked input's samples into ``target`` unchanged, at its own rate, every channel.

    Parameters
    ----------
    audio : sepsti.audio.AudioInput
    target : Path
    overwrite : bool
        Whether ``target`` may be replaced (also at the final rename).

    Returns
    -------
    int
        Output samples clipped to full scale.
    """
    from sepsti.audio import open_output
    from sepsti.corpora.audio import read_audio_blocks

    with open_output(target, audio.sample_rate, overwrite=overwrite, channels=audio.channels,
                     like=audio.subtype) as output:
        for block in read_audio_blocks(audio.path, downmix=False):
            output.write(block)
    return output.clipped


def _enhanced(audio, W, framing, channel, chunk_frames, options):
    """A checked input enhanced, at its own rate, piece by piece.

    ``channel`` None: all channels together, each with the same mask (``(n, channels)`` pieces for several);
    otherwise that channel alone, as a mono file of it would be (``(n,)`` pieces).
    """
    from sepsti import denoise
    from sepsti.audio import Resampler, input_blocks
    from sepsti.bandwidth import UpperBand, has_upper_band

    def blocks(rate):
        pieces = input_blocks(audio, sample_rate=rate, downmix=False)
        return pieces if channel is None else (piece[:, channel] for piece in pieces)

    rate = framing.sample_rate
    back = Resampler(rate, audio.sample_rate, audio.num_samples)
    upper = None
    if has_upper_band(audio.sample_rate, framing):
        upper = UpperBand(lambda: blocks(audio.sample_rate), audio.sample_rate, audio.length, framing)
        options = {**options, "mask_fn": upper.add_mask, "correction_fn": upper.add_correction}

    def at_own_rate():
        for piece in denoise.denoise_blocks(lambda: blocks(rate), audio.num_samples, W, framing=framing,
                                            chunk_frames=chunk_frames, **options):
            yield back.push(piece)
        yield back.finish()

    for samples in at_own_rate():
        yield samples if upper is None else upper.apply(samples)


def _channel_or_input(audio, channel, enhanced, kept):
    """The pieces of one channel enhanced alone, or its input's samples as they are when too little of it can
    be learned from (the reason, naming the channel, appended to ``kept``)."""
    from sepsti.audio import input_blocks
    from sepsti.denoise import UnchangedSignalWarning

    try:
        first = next(enhanced, None)  # the noise model is learned before the first piece
    except UnchangedSignalWarning as reason:
        kept.append(f"channel {channel + 1}: {reason}")
        yield from (piece[:, channel] for piece in input_blocks(audio, sample_rate=audio.sample_rate, downmix=False))
        return
    if first is not None:
        yield first
    yield from enhanced


def _side_by_side(streams):
    """Pieces of equally long mono streams, as ``(n, streams)`` pieces of their common samples."""
    import numpy as np

    iterators = [iter(stream) for stream in streams]
    held = [np.empty(0) for _ in iterators]
    while True:
        for i, iterator in enumerate(iterators):
            while iterator is not None and not len(held[i]):
                piece = next(iterator, None)
                if piece is None:
                    iterators[i] = iterator = None
                else:
                    held[i] = np.asarray(piece, dtype=np.float64)
        count = min(len(piece) for piece in held)
        if not count:
            return
        yield np.stack([piece[:count] for piece in held], axis=1)
        held = [piece[count:] for piece in held]


def _channels_differ(audio, framing, chunk_frames):
    """Whether a checked input's channels hold different sources (:func:`sepsti.features.channel_level_spread`)."""
    from sepsti import features
    from sepsti.audio import input_blocks

    spectra = features.stft_chunks(input_blocks(audio, sample_rate=framing.sample_rate, downmix=False),
                                   chunk_frames, framing=framing)
    return features.channel_level_spread(spectra, framing) > features.DIFFERENT_SOURCES_DB


def enhance_file(audio, target, W, framing, *, overwrite, written=None, channels="auto", **options):
    """Enhance one checked input into ``target``, piece by piece: every channel with the same mask, or each alone.

    Parameters
    ----------
    audio : sepsti.audio.AudioInput
    target : Path
    W : ndarray, shape (n_bins · (2 · context + 1), rank)
        Speech dictionary.
    framing : sepsti.features.Framing
        The dictionary's STFT; its rate is the processing rate.
    overwrite : bool
        Whether ``target`` may be replaced (also at the final rename).
    written : callable, optional
        Called with the whole seconds of audio written since its last call (a progress bar's ``update``).
    channels : {"auto", "joint", "separate"}
        ``joint``: all channels together, each with the same mask; ``separate``: each channel alone (its own
        noise model and mask), as a mono file of it would be; ``auto``: separate where the channels hold
        different sources (:func:`_channels_differ`), else joint.
    **options
        For :func:`sepsti.denoise.denoise_blocks`.

    Returns
    -------
    clipped : int
        Output samples clipped to full scale.
    reason : str or None
        With channels enhanced each alone: which were written as they are, and why.
    """
    import numpy as np

    from sepsti import denoise
    from sepsti.audio import open_output

    # pieces of as many frames in all channels as one channel's: memory stays that of a mono file
    chunk_frames = max(denoise.CHUNK_FRAMES // audio.channels, MIN_CHUNK_FRAMES)
    kept = []  # channels written as they are
    if audio.channels > 1 and (channels == "separate"
                               or (channels == "auto" and _channels_differ(audio, framing, chunk_frames))):
        pieces = _side_by_side([_channel_or_input(audio, channel,
                                                  _enhanced(audio, W, framing, channel, chunk_frames, options), kept)
                                for channel in range(audio.channels)])
    else:
        pieces = _enhanced(audio, W, framing, None, chunk_frames, options)
    seconds = 0  # whole seconds written
    with open_output(target, audio.sample_rate, overwrite=overwrite, channels=audio.channels,
                     like=audio.subtype) as output:
        for samples in pieces:
            samples = samples[:max(0, audio.length - output.written)]
            if len(samples):
                output.write(samples)
                if written is not None and output.written // audio.sample_rate > seconds:
                    written(output.written // audio.sample_rate - seconds)
                    seconds = output.written // audio.sample_rate
        missing = audio.length - output.written
        if missing > 0:
            output.write(np.zeros((missing,) if audio.channels == 1 else (missing, audio.channels)))
    return output.clipped, "; ".join(kept) or None


def process_file(audio, target, speech_dictionary, overwrite, file_bar, options):
    """Enhance one checked input into ``target``, or copy it when too little of it can be learned from.

    Parameters
    ----------
    audio : sepsti.audio.AudioInput
    target : Path
    speech_dictionary : sepsti.dictionary.Dictionary
    overwrite : bool
    file_bar : (bool, bool)
        Whether a bar over the file's seconds may be drawn, and whether even off a terminal.
    options : dict
        For :func:`enhance_file`: ``noise_rank``, ``seed``, ``channels``, and ``max_iter``,
        ``mask_floor`` and a ``noise`` model when given.

    Returns
    -------
    clipped : int
        Output samples clipped to full scale.
    reason : str or None
        Why the file, or some of its channels, was written unchanged, if it was.
    """
    from sepsti import features
    from sepsti.core.progress import progress_bar
    from sepsti.denoise import UnchangedSignalWarning, unchanged_signal_raised
    from sepsti.noise_model import min_frames, shortest_seconds

    framing = speech_dictionary.framing
    if options.get("mask_floor") == 1.0:  # --max-reduction 0: nothing is lowered, the input is the output
        return copy_file(audio, target, overwrite=overwrite), None
    if audio.num_samples < framing.n_fft:
        return copy_file(audio, target, overwrite=overwrite), (
            f"shorter than one frame ({1000 * audio.length / audio.sample_rate:.1f} ms; "
            f"{1000 * framing.n_fft / framing.sample_rate:.0f} ms at {framing.sample_rate} Hz)")
    frames = features.num_frames(audio.num_samples, framing=framing)
    fewest = min_frames(options["noise_rank"], framing)
    if "noise" not in options and frames < fewest:
        least = shortest_seconds(options["noise_rank"], framing)
        return copy_file(audio, target, overwrite=overwrite), (
            f"too short to learn its noise from ({frames} frames, {audio.length / audio.sample_rate:.2f} s; at least "
            f"{fewest}, {least:.2f} s, at --noise-rank {options['noise_rank']})")
    with unchanged_signal_raised(), progress_bar(audio.length // audio.sample_rate, desc=audio.path.name, unit="s",
                                                 enabled=file_bar[0], force=file_bar[1]) as bar:
        try:
            return enhance_file(audio, target, speech_dictionary.W, framing, overwrite=overwrite,
                                written=bar.update, mask_atoms=speech_dictionary.mask_atoms,
                                band_gains=speech_dictionary.band_gains, **options)
        except UnchangedSignalWarning as reason:
            # a file of (nearly) nothing but digital silence: no output is kept, the input is copied
            return copy_file(audio, target, overwrite=overwrite), str(reason)


#: A noise sample this many times the power of a noisy input (10 dB) cannot be at the level of its noise.
LOUD_SAMPLE = 10.0


def _warn_of_a_loud_sample(sample, inputs):
    """Warn, in one line, of the inputs a noise sample is far louder than: it takes their speech with the noise."""
    import math

    quieter = [audio for audio in inputs if 0 < LOUD_SAMPLE * audio.power < sample.power]  # silence is kept as is
    if quieter:
        first = quieter[0]
        which = shown(first.path) + (f" and {len(quieter) - 1} other input(s)" if len(quieter) > 1 else "")
        click.echo(f"Warning: --noise-sample {shown(sample.path)} is {10 * math.log10(sample.power / first.power):.0f} "
                   f"dB louder than {which}; record it at the level of the input's noise (a louder sample removes "
                   "speech with it)", err=True)


def _process(checked, outputs, overwrite, options, noise_models, progress, jobs):
    """Enhance the checked inputs into their outputs, one line each; after a failure, the files finished
    meanwhile (by other workers) are still reported, then the failure is raised."""
    from sepsti.core.progress import above, progress_bar, warnings_above
    from sepsti.workers import Workers, resolve_jobs

    workers = min(resolve_jobs(jobs), len(checked))
    file_bar = (progress is not False and workers == 1, bool(progress))  # with workers, their bars would mix
    tasks = ((audio, target, speech_dictionary, overwrite, file_bar,
              {**options, **({"noise": noise_models[speech_dictionary.framing]} if noise_models else {})})
             for (audio, speech_dictionary), target in zip(checked, outputs))
    show = len(checked) > 1 and progress is not False
    failure, finished = None, 0
    with progress_bar(len(checked), desc="enhance", unit="file", enabled=show, force=bool(progress)) as bar, \
            warnings_above(bar), Workers(workers) as pool:
        for (audio, _), target, (result, error) in zip(checked, outputs, pool.outcomes(process_file, tasks)):
            finished += 1
            if error is not None:
                failure = failure or error
                continue
            clipped, reason = result
            bar.update(1)
            with above(bar):  # on a terminal, a line of its own, not one after the bar
                if reason is not None:
                    click.echo(f"Warning: {shown(audio.path)}: {reason}; written unchanged", err=True)
                if clipped:
                    remedy = ("scale the input into [-1, 1] to keep them" if audio.peak > 1.0 else
                              "the enhanced signal overshoots where the input is near full scale; lower the input's "
                              "level to keep them")
                    click.echo(f"Warning: {shown(target)}: {clipped} samples beyond full scale were clipped (the "
                               f"input's peak is {audio.peak:.3g}); {remedy}", err=True)
                click.echo(f"wrote {shown(target)}")
    if failure is not None:
        raise _with_the_inputs_left(failure, [audio.path for audio, _ in checked[finished:]])


def _with_the_inputs_left(failure, left):
    """A failure's error, naming the inputs no file started for after it (a ParameterError's one line)."""
    from sepsti.core.errors import ParameterError

    if not left or not isinstance(failure, ParameterError):
        return failure
    others = f" and {len(left) - 1} other input{'s' * (len(left) > 2)}" if len(left) > 1 else ""
    return ParameterError(f"{failure}; not enhanced after it: {shown(left[0])}{others}")


@click.command("enhance", cls=Command)
@click.argument("inputs", nargs=-1, required=True, metavar="IN...", type=InputPath(path_type=Path))
@click.option("-o", "--output", type=OutputPath(path_type=Path), default=None,
              help="Output file (one input). The extension picks the format; the input's sample format "
                   "(16-bit, 24-bit, float, ...) is kept where that format holds it, else .wav is 16-bit PCM.")
@click.option("--out-dir", type=OutputPath("folder", path_type=Path), default=None,
              help="Output folder for several inputs; file names are kept. Created if missing.")
@click.option("--dictionary", type=InputPath(path_type=Path), default=None,
              help="Speech dictionary (.npz from `sepsti train`) for every input. Default: the shipped 8 kHz "
                   "dictionary for inputs up to 8 kHz, the shipped 16 kHz one above.")
@click.option("--noise-rank", type=click.IntRange(min=1, max=257), default=5, show_default=True,
              help="Number of noise atoms learned on each file (at most 257, the frequency bins of the "
                   "8 kHz dictionary).")
@click.option("--noise-sample", type=InputPath(path_type=Path), default=None,
              help="A recording of the noise alone: the noise dictionary is learned from it (any rate; resampled "
                   "to the rate of each input's dictionary) instead of from each file. Record it at the files' "
                   "level: a louder sample removes speech.")
@click.option("--iterations", type=ITERATIONS, default=None, cls=EnhancerIterations,
              help="EM iterations per file: exactly this many, as the enhancer runs no convergence test "
                   "(default: {default}, the enhancer's own).")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Seed of the noise-dictionary initialization.")
@click.option("--overwrite", is_flag=True, help="Replace existing output files.")
@progress_option("over the seconds of each file written (with one job) and over several files")
@click.option("--max-reduction", type=MAX_REDUCTION, default=None, metavar="DB",
              help="The most any time-frequency bin is lowered, in dB (default: 26, the enhancer's own). Less "
                   "keeps more of the background; 0 gives the input back. Mains hum is removed whatever it "
                   "says, unless it is 0.")
@click.option("--channels", type=click.Choice(["auto", "joint", "separate"]), default="auto", show_default=True,
              help="joint: a file's channels are modelled together and each gets the same gains (one scene: "
                   "their balance and phases are kept); separate: each channel is enhanced alone, as a file of "
                   "its own (channels that hold different talkers, e.g. one lavalier microphone each); auto: "
                   "separate where the channels' level difference swings by more than 6 dB over the loud "
                   "frames, else joint.")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=1, show_default=True,
              help="Files enhanced at once, each in a process of its own (0: one per core, as far as the free "
                   "memory holds 400 MB each). Outputs are the same as with one.")
def enhance(inputs, output, out_dir, dictionary, noise_rank, noise_sample, iterations, seed, overwrite, progress,
            max_reduction, channels, jobs):
    """Remove noise from speech files IN ... (anything libsndfile reads).

    Each output has its input's rate, length and channels: the channels are
    modelled together and each gets the same gains, so their balance and
    phases are kept; channels whose level difference swings as different
    talkers take turns are enhanced each alone (--channels). By rate:
    below 8 kHz, upsampled to the 8 kHz dictionary and back; 8 kHz, the 8 kHz
    dictionary as is; 8-16 kHz (11.025, 12 kHz), upsampled to the 16 kHz
    dictionary and back; 16 kHz, the 16 kHz dictionary as is (full band); above
    16 kHz (22.05-48 kHz), the 16 kHz dictionary up to 8 kHz. The band above the dictionary's is kept and
    enhanced with the speech share the model finds in the top of its band
    (frame by frame, lowered where its learned correction lowers that band),
    never cut. The noise model follows the noise through each
    file, learned from the frames it judges noise-dominated (no pauses needed),
    or comes from --noise-sample (learned at the rate of each file's dictionary);
    either way each frame's noise is also predicted from the frames around it,
    and a tone above 300 Hz that holds steady for 0.8 s (a squeal, a whine, a
    held note) is counted as noise at once. Mains hum (lines at multiples of
    50 or 60 Hz held through the file) is subtracted first, as sinusoids, in full
    whatever --max-reduction says (unless it is 0). A file too short to learn its noise
    from (under 1.25 s, or fewer than 4 x --noise-rank frames of 32 ms; or no 8 s
    stretch holds that much sound besides digital silence) is written unchanged,
    with a line saying so. All inputs and outputs are checked before any work is
    done.
    """
    single_blas_thread_by_default()
    from sepsti.core.errors import ParameterError
    from sepsti.core.io import check_output_path
    from sepsti.audio import inspect_input, output_format
    from sepsti.bandwidth import dictionary_path_for_rate
    from sepsti.corpora.audio import audio_info
    from sepsti.noise_model import validate_noise_rank
    from sepsti.dictionary import load_dictionary, narrowband_dictionary_path, wideband_dictionary_path

    # --- validation: nothing is written until everything has passed ---
    inputs = [Path(path) for path in inputs]
    headers = [audio_info(path) for path in inputs]  # a missing input or a folder is named before any output
    outputs = plan_outputs(inputs, output, out_dir)
    dictionary_paths = [Path(dictionary)] if dictionary is not None else [narrowband_dictionary_path(),
                                                                           wideband_dictionary_path()]
    create_out_dir = _check_out_dir(out_dir) if out_dir is not None else False
    for target, header in zip(outputs, headers):
        if not create_out_dir:
            check_output_path(target, overwrite=overwrite,
                              inputs=[*inputs, *dictionary_paths, *([noise_sample] if noise_sample else [])])
        # the output has the input's rate, channels and (where its format holds it) sample format
        output_format(target, header.subtype, sample_rate=header.sample_rate, channels=header.channels)
    loaded = {}
    if dictionary is not None:  # a bad --dictionary is reported before any input's samples are read
        loaded[Path(dictionary)] = load_dictionary(dictionary)
    checked = []
    for path, header in zip(inputs, headers):
        dictionary_path = Path(dictionary) if dictionary is not None else dictionary_path_for_rate(header.sample_rate)
        if dictionary_path not in loaded:
            loaded[dictionary_path] = load_dictionary(dictionary_path)
        speech_dictionary = loaded[dictionary_path]
        framing = speech_dictionary.framing
        if noise_rank > framing.n_bins:
            raise ParameterError(f"--noise-rank {noise_rank}: at most {framing.n_bins}, the frequency bins of "
                                 f"{dictionary_path}")
        checked.append((inspect_input(path, sample_rate=framing.sample_rate), speech_dictionary))
    # the noise sample is checked at the rate and framing of every dictionary it will serve
    samples = {}
    if noise_sample is not None:
        for framing in dict.fromkeys(speech_dictionary.framing for _, speech_dictionary in checked):
            try:
                sample = inspect_input(noise_sample, sample_rate=framing.sample_rate, n_fft=framing.n_fft)
            except ParameterError as error:  # "<path>: <why>", named as the option's errors are
                raise ParameterError(f"--noise-sample {error}") from None
            validate_noise_rank(noise_rank, sample.num_samples, name=f"--noise-sample {noise_sample}",
                                framing=framing)
            samples[framing] = sample
        _warn_of_a_loud_sample(sample, [audio for audio, _ in checked])

    # --- processing (the noise sample's model first: a sample with too little sound stops the command here) ---
    options = {"noise_rank": noise_rank, "seed": seed, "channels": channels}
    if iterations is not None:
        options["max_iter"] = iterations
    if max_reduction is not None:
        options["mask_floor"] = 10.0 ** (-max_reduction / 20.0)
    noise_models = {}  # the noise sample's model in each framing in use
    if samples:
        import functools

        from sepsti.audio import input_blocks
        from sepsti.denoise import CHUNK_FRAMES
        from sepsti.features import channel_magnitude, stft_chunks
        from sepsti.hum import hum_free
        from sepsti.noise_model import learn_noise

        def sample_magnitudes(blocks, framing):  # as the inputs' channels are modelled, their hum subtracted
            return (channel_magnitude(S) for S in stft_chunks(blocks(), CHUNK_FRAMES, framing=framing))

        for framing, sample in samples.items():
            blocks = hum_free(functools.partial(input_blocks, sample, sample_rate=framing.sample_rate, downmix=False),
                              framing.sample_rate)
            noise_models[framing] = learn_noise(functools.partial(sample_magnitudes, blocks, framing), noise_rank,
                                                seed=seed, name=f"--noise-sample {noise_sample}")
    created = _missing_folders(out_dir) if create_out_dir else []  # removed again if left empty by a failure
    if created:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    try:
        _process(checked, outputs, overwrite, options, noise_models, progress, jobs)
    except BaseException:
        for folder in created:  # deepest first; a folder holding anything stays
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
