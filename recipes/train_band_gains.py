"""The learned correction of a dictionary's band gains (:mod:`sepsti.band_gains`), trained on recorded noises.

At 8 kHz, training mixtures, all of the NOIZEUS training sentences (sp01–sp20): the corpus's own noisy files; the same
noises at 20, 25, 30 and 40 dB (each file's noise at the corpus's highest SNR, ``noisy − clean``, scaled); the
clean sentences themselves, each :attr:`Training.clean_copies` times; and seventeen types of recorded noise
(:data:`RECORDED`: ambiences, machines, music, keystrokes and weather from Debian's packages, mostly games') at
:attr:`Training.snrs`, each an excerpt of the type's recordings band-limited like NOIZEUS, the file's energy
ratio its label minus 0.48 dB as in ``benchmarks/unseen_noise_corpus.py``. Beside the NOIZEUS talkers, the wideband
corpus's ``train`` talkers (``--wideband``; :mod:`sepsti.corpora.wideband`, 108 LibriSpeech utterances of as many
speakers, none of them in the split the benchmarks draw crowds from) resampled to 8 kHz, at −26 dBFS and not
band-limited, as an 8 kHz microphone recording gives them: each clean once and in :attr:`Training.talker_mixtures`
mixtures, each with a noise type drawn from all the others (the corpus's as the noise of its training files at their
highest SNR, end to end) at an SNR drawn from :attr:`Training.snrs`. At 16 kHz (the wideband dictionary,
:data:`WIDEBAND`), the wideband talkers alone at the dictionary's rate, each clean :attr:`Training.talker_copies`
times and in more mixtures, the recorded noises at full band. The enhancer, as ``sepsti enhance`` runs it
with the dictionary, separates every mixture (:func:`sepsti.mask_atoms.record_separation`; each distinct one once:
a clean file's copies, and the mixtures a later training makes again, take its separation); per band and frame the
networks read its separation and learn the ideal band gain (:func:`sepsti.band_gains.training_example`).
The noise types (the corpus's, the recorded ones and the clean speech) are dealt in alphabetical order into
:attr:`Training.groups` groups, and one network (scikit-learn's ``MLPRegressor``) is trained without each, on
:attr:`Training.rows` band-frames drawn from the rest, two networks at a time, each in a process of its own;
:attr:`Training.trainings` such trainings at successive seeds (three at 8 kHz, ``--trainings``) are stacked into one
ensemble. The dictionary is written again with the networks in its ``band_gains`` field, to ``DIR/<its name>.npz``
(``--out``; to ship it, copy it over the shipped dictionary of its rate in ``sepsti/data``); networks the given file
already holds are left out unread, whichever version trained them. ``--quick``: two sentences, two wideband talkers,
four recorded types, two SNRs, two groups, 20,000 rows, one training.

``--distil``: the networks the given dictionary holds (predicting the ideal gain) are the teacher, and one network
(:class:`Distillation`) learns the moves they make (:func:`sepsti.band_gains.ensemble_moves`) on band-frames of the
separations of one training's mixtures (seed ``--seed``); the dictionary is written with it alone, predicting the
move (:attr:`sepsti.band_gains.BandGains.predicts`): at 16 kHz about the stack's correction at the cost of one
network, and the shipped 16 kHz dictionary is three trainings distilled so; at 8 kHz it fell short of the stack.

The recorded noises come from Debian's packages, installed (``--root /``, the default) or unpacked into one
folder (``dpkg-deb -x PACKAGE.deb DIR`` for each, ``--root DIR``)::

    apt-get install megaglest-data wesnoth-1.16-data xmoto-data bucklespring-data flightgear-data-base \\
        supertuxkart-data widelands-data

Usage::

    python recipes/train_band_gains.py [--corpus DIR] [--wideband DIR] [--root DIR] [--dictionary PATH] \\
        [--trainings N] [--quick] [--out DIR]
    python recipes/train_band_gains.py --dictionary sepsti/data/wideband_dictionary.npz [--wideband DIR] \\
        [--root DIR] [--out DIR]
    python recipes/train_band_gains.py --dictionary TEACHER.npz --distil [--seed N] [--out DIR]
"""

import collections
import functools
import os
import sys
import warnings
from pathlib import Path
from typing import NamedTuple

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))

import numpy as np  # noqa: E402

from _common import (DEFAULT_WIDEBAND, dictionary_to_extend, noizeus_corpus, positive_int,  # noqa: E402
                     recipe_parser, require_packages, run_recipe, write_results)
from enhance_wideband import wideband_folder  # noqa: E402

NAME = "train_band_gains"
_MEGAGLEST = "usr/share/games/megaglest"
_WESNOTH = "usr/share/games/wesnoth/1.16/data/core/sounds"
_FLIGHTGEAR = "usr/share/games/flightgear"
_KART = "usr/share/games/supertuxkart/data"
_WIDELANDS = "usr/share/games/widelands/data/sound"
#: The recorded noise types: each a list of glob patterns under the packages' root.
RECORDED = {
    "animals": [f"{_WIDELANDS}/animals/*.ogg", f"{_KART}/tracks/scotland/sheep.ogg", f"{_KART}/sfx/exotic-birds_2.ogg"],
    "birds": [f"{_MEGAGLEST}/tilesets/{tileset}/sounds/day.ogg"
              for tileset in ("birch_forest", "dark_forest", "fernland", "spring")]
             + [f"{_MEGAGLEST}/tilesets/autumn/sounds/sunny_day.ogg",
                f"{_MEGAGLEST}/tilesets/mediterran/sounds/desertday.ogg"],
    "drums": [f"{_WESNOTH}/ambient/wardrums.ogg"],
    "engine": [f"{_FLIGHTGEAR}/Aircraft/c172p/Sounds/{name}" for name in ("engine-idle.wav", "engine.wav")]
              + [f"{_FLIGHTGEAR}/Sounds/{name}" for name in ("engine-prop.wav", "prop.wav", "exhaust_loop.wav",
                                                              "R-1535Slow.wav", "turbojet_fan.wav")]
              + [f"{_KART}/sfx/airplane_jetEngine.ogg", f"{_KART}/sfx/engine_small.ogg"],
    "fire": [f"{_WESNOTH}/ambient/campfire.ogg", f"{_MEGAGLEST}/tilesets/hell/sounds/hell.ogg"],
    "locomotive": [f"{_KART}/library/stklib_steamLocomotive_a/steamLocomotive.ogg",
                   f"{_KART}/tracks/black_forest/steamLocomotive.ogg"],
    "music": [f"{_MEGAGLEST}/techs/megapack/factions/*/music/*.ogg", "usr/share/games/xmoto/Textures/Musics/*.ogg"],
    "night": [f"{_MEGAGLEST}/tilesets/{tileset}/sounds/night.ogg"
              for tileset in ("birch_forest", "dark_forest", "fernland", "mediterran")]
             + [f"{_MEGAGLEST}/tilesets/autumn/sounds/nightime.ogg"],
    "rain": [f"{_MEGAGLEST}/tilesets/{tileset}/sounds/rain.ogg" for tileset in ("autumn", "birch_forest")]
            + [f"{_MEGAGLEST}/tilesets/desert2/sounds/rain.wav"],
    "rolling": [f"{_FLIGHTGEAR}/Aircraft/c172p/Sounds/tires-rolling-{ground}.wav" for ground in ("asphalt", "gravel")]
               + [f"{_FLIGHTGEAR}/Sounds/rattleroll.wav"],
    "ship": [f"{_WESNOTH}/ambient/ship.ogg", f"{_WESNOTH}/rumble.ogg"],
    "static": [f"{_KART}/sfx/{name}.ogg" for name in ("static-radio", "spaceship", "tractor_beam")],
    "storm": [f"{_FLIGHTGEAR}/Sounds/{name}.wav" for name in ("thunder", "thunder1", "rain-windshield", "rain")],
    "typing": ["usr/share/buckle/wav/*.wav"],
    "water": [f"{_FLIGHTGEAR}/Aircraft/c172p/Sounds/water-{speed}.wav" for speed in ("fast", "still")]
             + [f"{_FLIGHTGEAR}/Sounds/wave.wav", f"{_KART}/sfx/river_loop.ogg", f"{_KART}/sfx/waterfall_loop_2.ogg"],
    "wind": [f"{_MEGAGLEST}/tilesets/winter/sounds/wind.ogg"],
    "workshop": [f"{_WIDELANDS}/atlanteans/saw/*.ogg", f"{_WIDELANDS}/atlanteans/cutting/*.ogg",
                 f"{_WIDELANDS}/smiths/*.ogg", f"{_WIDELANDS}/mill/*.ogg"],
}
#: Keystrokes a second in ``typing``, each at a gain drawn from this range, over a faint hiss (RMS).
KEYSTROKES_PER_SECOND = 7.0
KEYSTROKE_GAINS = (0.4, 1.2)
TYPING_HISS = 1e-4
#: Worker processes separating the mixtures and fitting the networks: one per core of the machine the recipe runs on.
PROCESSES = 2
#: The noise type of the clean sentences.
CLEAN = "clean"
#: RMS (dBFS) the wideband talkers are set to.
TALKER_LEVEL_DB = -26.0


class Training(NamedTuple):
    """How the correction is trained.

    Attributes
    ----------
    snrs : tuple of int
        The recorded noises' SNRs (dB).
    higher_snrs : tuple of int
        The corpus's noises' SNRs beyond its own files'.
    clean_copies : int
        How many times each clean NOIZEUS sentence counts.
    talker_copies : int
        How many times each wideband talker's clean speech counts.
    talker_mixtures : int
        Noisy mixtures of each wideband talker.
    groups : int
        Groups the noise types are dealt into: networks trained, each without one group.
    rows : int
        Band-frames each network is trained on, drawn with :attr:`sepsti.band_gains.TrainingExample.weight`.
    hidden : tuple of int
        Units of the hidden layers.
    max_iter : int
        Epochs at most (scikit-learn's early stopping on a tenth of the rows ends most runs before).
    trainings : int
        Independent trainings whose networks are stacked into one ensemble: the k-th (from 0) draws its mixtures,
        rows and initial weights from seed ``--seed + k``, so that its networks are those a run with that seed
        alone writes.
    """

    snrs: tuple = (0, 5, 10, 15, 20, 25, 30, 40)
    higher_snrs: tuple = (20, 25, 30, 40)
    clean_copies: int = 10
    talker_copies: int = 1
    talker_mixtures: int = 6
    groups: int = 4
    rows: int = 1_200_000
    hidden: tuple = (64, 32)
    max_iter: int = 150
    trainings: int = 3


class Distillation(NamedTuple):
    """How the networks of a dictionary are distilled into one (``--distil``).

    Attributes
    ----------
    rows : int
        Band-frames the network learns from, drawn with :attr:`sepsti.band_gains.TrainingExample.weight` from the
        separations of all of one training's mixtures.
    hidden : tuple of int
        Units of its hidden layers: twice the teacher's networks', one network standing for twelve.
    max_iter : int
        Epochs at most.
    """

    rows: int = 1_200_000
    hidden: tuple = (128, 64)
    max_iter: int = 150


QUICK_DISTILLATION = Distillation(rows=20_000, hidden=(16, 8), max_iter=10)
#: At 16 kHz, where the wideband talkers are all the speech: each clean twice and in 18 mixtures; one training (the
#: shipped 16 kHz dictionary stacks three, ``--trainings 3``, and distils them into one network, ``--distil``:
#: twelve networks would take a 10-minute 16 kHz file to the edge of 50 times real time).
WIDEBAND = Training(talker_copies=2, talker_mixtures=18, trainings=1)
QUICK = Training(snrs=(0, 20), higher_snrs=(30,), clean_copies=2, talker_mixtures=2, groups=2, rows=20_000,
                 max_iter=10, trainings=1)


def main(argv=None):
    parser = recipe_parser(NAME, __doc__.splitlines()[0], plot=True,
                           writes="DIR/<the dictionary's name>.npz, the dictionary with them")
    parser.add_argument("--corpus", type=Path, default=None,
                        help="NOIZEUS-style folder, for an 8 kHz dictionary (default: $SEPSTI_NOIZEUS or "
                             "../shared/data/noizeus)")
    parser.add_argument("--wideband", type=wideband_folder, default=str(DEFAULT_WIDEBAND),
                        help="wideband corpus whose train-split talkers join the NOIZEUS ones "
                             "(default: ../shared/data/wideband)")
    parser.add_argument("--root", type=Path, default=Path("/"),
                        help="the folder Debian's packages of recorded noises are installed or unpacked in "
                             "(default: /)")
    parser.add_argument("--dictionary", type=Path, default=None,
                        help="the speech dictionary (8 or 16 kHz) to learn the correction for (default: the shipped "
                             "8 kHz one)")
    parser.add_argument("--trainings", type=positive_int, default=None,
                        help="independent trainings stacked, at seeds --seed, --seed + 1, ... (default: 3 at 8 kHz, "
                             "1 at 16 kHz and with --quick)")
    parser.add_argument("--distil", action="store_true",
                        help="distil the networks the dictionary holds into one network predicting their moves, "
                             "learned on the mixtures of seed --seed")
    args = parser.parse_args(argv)
    require_packages({"training the networks": "scikit-learn"}, "train")

    from sepsti.core.errors import ParameterError
    from sepsti.core.io import check_output_path
    from sepsti.corpora import wideband
    from sepsti.corpora.noizeus import TRAIN_IDS, corpus_index
    from sepsti.dictionary import save_dictionary

    source, dictionary, storage = dictionary_to_extend(args.dictionary, band_gains=args.distil)
    teacher = _teacher(dictionary, source, args) if args.distil else None
    dictionary = dictionary._replace(band_gains=None)
    rate = dictionary.sample_rate
    if rate not in (8000, 16000):
        raise ParameterError(f"dictionary {source}: at {rate} Hz; the correction is trained at 8 kHz (the NOIZEUS "
                             f"sentences and the wideband talkers) or 16 kHz (the wideband talkers)")
    narrowband = rate == 8000
    corpus = noizeus_corpus(args.corpus) if narrowband else None
    training = QUICK if args.quick else Training() if narrowband else WIDEBAND
    training = training._replace(trainings=1 if args.distil else args.trainings or training.trainings)
    distillation = (QUICK_DISTILLATION if args.quick else Distillation()) if args.distil else None
    seeds = [args.seed + k for k in range(training.trainings)]
    if seeds[-1] >= 2 ** 32:
        raise ParameterError(f"--seed {args.seed} with {training.trainings} trainings: their seeds must stay below "
                             f"2**32")
    kinds = sorted(RECORDED)[:4] if args.quick else sorted(RECORDED)
    recordings = {kind: _recordings(args.root, kind) for kind in kinds}
    args.out.mkdir(parents=True, exist_ok=True)  # the inputs checked first: a bad one leaves no folder behind
    target = check_output_path(args.out / f"{Path(source).stem}.npz", overwrite=args.overwrite, inputs=[source])

    talkers = wideband.select(args.wideband, "train")[:2 if args.quick else None]
    sentences, corpus_noises, index = [], {}, None
    if narrowband:
        index = corpus_index(corpus)
        sentences = list(TRAIN_IDS[:2] if args.quick else TRAIN_IDS)
        corpus_noises = _corpus_noises(index, sentences)
    fitted, fits, counts, separations, separated = [], [], collections.Counter(), {}, 0
    for seed in seeds:
        mixtures = _mixtures(index, sentences, recordings, training, seed) if narrowband else []
        mixtures += _talker_mixtures(talkers, recordings, corpus_noises, training, rate, seed)
        examples, made = _separated(mixtures, dictionary, separations)
        counts.update(kind for kind, _ in examples)
        separated += made
        if args.distil:
            trained = _distilled(examples, teacher, distillation, seed)
        else:
            trained = _trained(examples, training, seed)
        fitted += [pair for pair, _ in trained]
        fits += [{"seed": seed, **fit} for _, fit in trained]
    band_gains = band_gains_of(fitted)._replace(predicts="move" if args.distil else "gain")
    save_dictionary(target, dictionary._replace(band_gains=band_gains), overwrite=args.overwrite, dtype=storage)

    print(f"{counts.total()} mixtures of {len(counts)} noise types in {len(seeds)} training(s), {separated} "
          f"separated (copies, and mixtures a training makes again, once); " + "; ".join(
        f"network {k + 1} (seed {fit['seed']}) {_learned(fit)}: {fit['epochs']} epochs"
        f"{'' if fit['stopped_early'] else ' (the most allowed)'}, validation R² {fit['validation_r2']:.3f}"
        for k, fit in enumerate(fits)))
    print(f"wrote {target}")
    results = {"corpus": corpus and str(corpus), "sample_rate": rate, "wideband": str(args.wideband),
               "root": str(args.root), "speech_dictionary": str(source), "dictionary": str(target),
               "training": training._asdict(), "seeds": seeds, "distilled_from": teacher and teacher.num_networks,
               "distillation": distillation and distillation._asdict(), "sentences": sentences,
               "talkers": [talker.path.stem for talker in talkers], "mixtures_by_type": dict(counts),
               "separations": separated, "networks": fits}
    write_results(args, results, _figure(fits))


def _teacher(dictionary, source, args):
    """The networks ``--distil`` distils; :class:`ParameterError` if the dictionary has none predicting the gain or
    ``--trainings`` is given (the distillation learns from one training's mixtures)."""
    from sepsti.core.errors import ParameterError

    if args.trainings:
        raise ParameterError("--distil learns from the mixtures of one training (seed --seed): drop --trainings")
    teacher = dictionary.band_gains
    if teacher is None or teacher.predicts != "gain":
        what = "no networks" if teacher is None else "a network predicting the move, already distilled"
        raise ParameterError(f"dictionary {source}: holds {what}; --distil needs networks predicting the gain "
                             f"(written by this recipe without --distil)")
    return teacher


def _learned(fit, shown=None):
    """What a network learned from, for the summary line and the figure (the first ``shown`` noise types left out,
    all by default)."""
    if "distilled_from" in fit:
        return f"distilled from {fit['distilled_from']} networks"
    kinds = fit["without"][:shown]
    return f"without {', '.join(kinds)}{' …' if len(kinds) < len(fit['without']) else ''}"


def _recordings(root, kind):
    """The files of a recorded noise type under ``root``, sorted; :class:`ParameterError` if a pattern finds none."""
    from sepsti.core.errors import ParameterError

    files = []
    for pattern in RECORDED[kind]:
        found = sorted(str(path) for path in Path(root).glob(pattern))
        if not found:
            raise ParameterError(f"--root {root}: no {pattern} (noise type {kind!r}); install or unpack the "
                                 f"packages the recipe's docstring lists")
        files += found
    return files


def _mixtures(index, sentences, recordings, training, seed):
    """``(kind, noisy, clean)`` of every training mixture (8 kHz)."""
    from sepsti.corpora.noizeus import iter_mixtures
    from sepsti.corpora.synth import telephone_band
    from unseen_noise_corpus import NOIZEUS_OFFSET_DB

    from _recordings import snr_gain

    mixtures, cleans = [], {}
    highest = max(index.snrs)
    for mixture in iter_mixtures(index, split=sentences):
        mixtures.append((mixture.noise, mixture.noisy, mixture.clean))
        cleans[mixture.utterance] = mixture.clean
        if mixture.snr == highest:
            for snr in training.higher_snrs:
                gain = snr_gain(mixture.clean, mixture.noise_signal, snr + NOIZEUS_OFFSET_DB)
                mixtures.append((mixture.noise, mixture.clean + gain * mixture.noise_signal, mixture.clean))
    for utterance in sorted(cleans):
        mixtures += [(CLEAN, cleans[utterance], cleans[utterance])] * training.clean_copies
    for number, (kind, files) in enumerate(sorted(recordings.items())):
        rng = np.random.default_rng([seed, number])
        for utterance in sorted(cleans):
            clean = cleans[utterance]
            for snr in training.snrs:
                noise = telephone_band(_recorded_noise(kind, files, len(clean), 8000, rng))
                gain = snr_gain(clean, noise, snr + NOIZEUS_OFFSET_DB)
                mixtures.append((kind, np.clip(clean + gain * noise, -1.0, 1.0), clean))
    return mixtures


def _corpus_noises(index, sentences):
    """``{noise type: signal}``: the noise of the corpus's files of ``sentences`` at their highest SNR, end to end."""
    from sepsti.corpora.noizeus import iter_mixtures

    noises = collections.defaultdict(list)
    for mixture in iter_mixtures(index, split=sentences, snrs=[max(index.snrs)]):
        noises[mixture.noise].append(mixture.noise_signal)
    return {kind: np.concatenate(signals) for kind, signals in noises.items()}


def _talker_mixtures(talkers, recordings, corpus_noises, training, rate, seed):
    """``(kind, noisy, clean)`` of the wideband talkers at ``rate``: each clean :attr:`Training.talker_copies` times,
    and in :attr:`Training.talker_mixtures` mixtures of a noise type and an SNR drawn at random."""
    from sepsti.audio import resample
    from sepsti.corpora.audio import read_audio
    from sepsti.corpora.wideband import highpass

    from _recordings import at_level, looped_window, snr_gain

    kinds = sorted([*recordings, *corpus_noises])
    mixtures = []
    for number, talker in enumerate(talkers):
        rng = np.random.default_rng([seed, len(recordings), number])
        y, talker_rate = read_audio(talker.path)
        clean = at_level(resample(highpass(y, talker_rate), talker_rate, rate), TALKER_LEVEL_DB)
        mixtures += [(CLEAN, clean, clean)] * training.talker_copies
        for _ in range(training.talker_mixtures):
            kind = kinds[rng.integers(len(kinds))]
            if kind in corpus_noises:
                noise = looped_window(corpus_noises[kind], len(clean), rng)
            else:
                noise = _recorded_noise(kind, recordings[kind], len(clean), rate, rng)
            gain = snr_gain(clean, noise, training.snrs[rng.integers(len(training.snrs))])
            mixtures.append((kind, np.clip(clean + gain * noise, -1.0, 1.0), clean))
    return mixtures


def _recorded_noise(kind, files, n, rate, rng):
    """``n`` samples at ``rate`` of a recorded noise type: an excerpt of one of its ``files``, or keystrokes."""
    from _recordings import excerpt

    return _typing(files, n, rate, rng) if kind == "typing" else excerpt(files, n, rate, rng)


def _typing(keys, n, rate, rng):
    """``n`` samples at ``rate`` of keystrokes (recordings of single keys) at random times over a faint hiss."""
    y = TYPING_HISS * rng.standard_normal(n)
    position = 0
    while True:
        position += int(rng.exponential(rate / KEYSTROKES_PER_SECOND))
        key = _keystroke(keys[rng.integers(len(keys))], rate) * rng.uniform(*KEYSTROKE_GAINS)
        if position + len(key) >= n:
            return y
        y[position:position + len(key)] += key


@functools.cache
def _keystroke(path, rate):
    """A key's recording at ``rate``, its channels averaged (each read once at a rate)."""
    import soundfile

    from sepsti.audio import resample

    key, key_rate = soundfile.read(path, always_2d=True)
    return resample(key.mean(axis=1), key_rate, rate)


def _separated(mixtures, dictionary, separations):
    """``(kind, TrainingExample)`` of each mixture the enhancer could separate, and how many separations were made
    (two at a time). The separation is deterministic, so each distinct mixture is separated once: its copies, and
    those of the previous training's mixtures made again (the corpus's files, the clean speech), take the one made.

    ``separations`` maps :func:`_digest` of a mixture to its separation (None where it failed): the previous
    training's on entry, this one's on return. What this training does not make again is let go first, so that one
    training's separations are held at a time.
    """
    from sepsti.core.processes import process_pool
    from sepsti.core.progress import progress_bar

    digests = [_digest(noisy, clean) for _, noisy, clean in mixtures]
    for digest in separations.keys() - set(digests):
        del separations[digest]
    work = {}
    for digest, (_, noisy, clean) in zip(digests, mixtures):
        if digest not in separations:
            work.setdefault(digest, (noisy, clean))
    with process_pool(PROCESSES, _use, (dictionary,)) as pool, \
            progress_bar(len(work), desc="separating", unit="mixture") as bar:
        for digest, example in zip(work, pool.map(_example, work.values(), chunksize=8)):
            separations[digest] = example
            bar.update(1)
    examples = [(kind, separations[digest]) for (kind, _, _), digest in zip(mixtures, digests)]
    return [(kind, example) for kind, example in examples if example is not None], len(work)


def _digest(noisy, clean):
    """A digest of a mixture's two signals (their dtypes, lengths and samples): equal for mixtures made alike."""
    import hashlib

    digest = hashlib.blake2b(digest_size=16)
    for signal in (noisy, clean):
        signal = np.ascontiguousarray(signal)
        digest.update(f"{signal.dtype.str}{signal.shape}".encode())
        digest.update(signal)
    return digest.digest()


_WORKER = {}  # a worker's dictionary, the atoms its mask rebuilds the speech with, and its analysis framing


def _use(dictionary):
    from sepsti import features
    from sepsti.mask_atoms import speech_atoms

    _WORKER.update(dictionary=dictionary, atoms=speech_atoms(dictionary.W, dictionary.mask_atoms, dictionary.framing),
                   framing=features.enhancement_framing(dictionary.framing))


def _example(work):
    from sepsti.band_gains import training_example
    from sepsti.denoise import MASK_FLOOR
    from sepsti.mask_atoms import record_separation

    noisy, clean = work
    dictionary = _WORKER["dictionary"]
    record = record_separation(noisy, clean, dictionary.W, framing=dictionary.framing)
    if record is None:
        return None
    example = training_example(record, _WORKER["atoms"], _WORKER["framing"], MASK_FLOOR)
    return example._replace(**{field: value.astype(np.float32) for field, value in example._asdict().items()})


def _trained(examples, training, seed):
    """``((scaler, network), fit)`` of each network, one trained without each group of noise types: the fitted
    scikit-learn pair and how the fit went."""
    kinds = sorted({kind for kind, _ in examples})
    groups = [kinds[k::training.groups] for k in range(training.groups)]
    rng = np.random.default_rng(seed)
    picks = [_draw([example.weight.reshape(-1) if kind not in group else np.zeros(example.weight.size)
                    for kind, example in examples], training.rows, rng)
             for group in groups]  # per network, the band-frames drawn from each example
    fitted = _fitted_apart(examples, picks, training, seed)
    return [(pair, {"without": group, **fit}) for group, (pair, fit) in zip(groups, fitted)]


_FITTING = {}  # a fitting process's examples, picks and settings


def _fitted_apart(examples, picks, training, seed):
    """``(pair, fit)`` of a network fitted on each of ``picks``, :data:`PROCESSES` at a time. Each process fits with
    one BLAS thread, as a single process would, so the networks are those of fitting them one after another, to the
    bit; forked (:func:`sepsti.core.processes.process_pool`), the processes read the examples without a copy."""
    from sepsti.core.processes import process_pool

    with process_pool(min(PROCESSES, len(picks)), _hold, (examples, picks, training, seed)) as pool:
        return list(pool.map(_fit_one, range(len(picks))))


def _hold(examples, picks, training, seed):
    """A fitting process's start: what it fits from."""
    _FITTING.update(examples=examples, picks=picks, training=training, seed=seed)


def _fit_one(k):
    """The network of the ``k``-th picks, in a fitting process."""
    training = _FITTING["training"]
    X, y, _ = _rows(_FITTING["examples"], _FITTING["picks"][k])
    return _fit(X, y, training.hidden, training.max_iter, _FITTING["seed"])


def _distilled(examples, teacher, distillation, seed):
    """``[((scaler, network), fit)]`` of one network learning ``teacher``'s moves
    (:func:`sepsti.band_gains.ensemble_moves`) on band-frames drawn from all the examples."""
    from sepsti.band_gains import ensemble_moves
    from sepsti.denoise import MASK_FLOOR

    picks = _draw([example.weight.reshape(-1) for _, example in examples], distillation.rows,
                  np.random.default_rng(seed))
    X, _, gains = _rows(examples, picks)
    moves = np.empty(len(X))
    for start in range(0, len(X), 100_000):  # the teacher's activations held for a part of the rows at a time
        block = slice(start, start + 100_000)
        moves[block] = ensemble_moves(teacher.predict(X[block]), gains[block], MASK_FLOOR)
    pair, fit = _fit(X, moves, distillation.hidden, distillation.max_iter, seed)
    return [(pair, {"distilled_from": teacher.num_networks, **fit})]


def _draw(weights, rows, rng):
    """``rows`` band-frames drawn with ``weights`` (one array per example): the indices drawn from each example."""
    totals = np.array([w.sum() for w in weights])
    counts = rng.multinomial(rows, totals / totals.sum())
    return [rng.choice(w.size, count, p=w / w.sum()) if count else np.zeros(0, dtype=int)
            for w, count in zip(weights, counts)]


def _fit(X, y, hidden, max_iter, seed):
    """``((scaler, network), fit)``: scikit-learn's standardisation and ReLU network fitted to ``X``, ``y`` (early
    stopping on a tenth), and how the fit went."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPRegressor
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(X)
    network = MLPRegressor(hidden_layer_sizes=hidden, early_stopping=True, max_iter=max_iter, random_state=seed,
                           batch_size=1024, n_iter_no_change=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        network.fit(scaler.transform(X, copy=False), y)
    return (scaler, network), {"rows": len(X), "epochs": int(network.n_iter_),
                               "stopped_early": not any(issubclass(w.category, ConvergenceWarning) for w in caught),
                               "loss": [float(value) for value in network.loss_curve_],
                               "validation_r2": float(network.best_validation_score_),
                               "validation": [float(value) for value in network.validation_scores_]}


def _rows(examples, picks):
    """One network's inputs, targets and the mask's band gains (logs): the band-frames ``picks`` (an index array
    per example), in the examples' order, the inputs built into one array of their final size. Each example's
    inputs are computed again for each network, so that the recipe holds one network's rows at a time, not every
    network's."""
    from sepsti.band_gains import NUM_INPUTS

    X = np.empty((sum(len(chosen) for chosen in picks), NUM_INPUTS))
    targets, gains, start = [], [], 0
    for (_, example), chosen in zip(examples, picks):
        if len(chosen):
            X[start:start + len(chosen)] = example.inputs()[chosen]
            targets.append(example.target.reshape(-1)[chosen])
            gains.append(example.levels[3].reshape(-1)[chosen])
            start += len(chosen)
    return X, np.concatenate(targets), np.concatenate(gains).astype(np.float64)


def band_gains_of(fitted):
    """:class:`sepsti.band_gains.BandGains` of scikit-learn's fitted ``(StandardScaler, MLPRegressor)`` pairs (ReLU
    networks of one shape)."""
    from sepsti.band_gains import BandGains

    layers = [[np.vstack([weights, bias[None]]) for weights, bias in zip(network.coefs_, network.intercepts_)]
              for _, network in fitted]
    hidden = tuple(np.stack([network[i] for network in layers]) for i in range(len(layers[0]) - 1))
    scalers = [scaler for scaler, _ in fitted]
    return BandGains(np.stack([scaler.mean_ for scaler in scalers]), np.stack([scaler.scale_ for scaler in scalers]),
                     hidden, np.stack([network[-1][:, 0] for network in layers]))


def _figure(fits):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for k, fit in enumerate(fits):
        label = f"seed {fit['seed']}, {_learned(fit, shown=3)}"
        left.plot(np.arange(1, len(fit["loss"]) + 1), fit["loss"], label=label)
        right.plot(np.arange(1, len(fit["validation"]) + 1), fit["validation"], label=label)
    left.set(xlabel="epoch", ylabel="training loss (half the squared error)", title="the networks' training")
    right.set(xlabel="epoch", ylabel="R² on the held-back tenth", title="validation")
    right.legend(fontsize="small")
    figure.tight_layout()
    return figure


if __name__ == "__main__":
    run_recipe(main, NAME)
