"""Clean/noisy pairs from a folder of clean speech and folders of noise recordings.

For voices and noises the corpora do not hold: each clean file below ``--speech`` (the first
``--files`` in name order of at least ``--shortest`` seconds, at most ``--seconds`` of each)
is set to −26 dBFS RMS and mixed at each
SNR of ``--snr`` (the energy ratio over the file) with an excerpt of each noise type, at the speech's
rate:

- ``--noise NAME=DIR`` (repeatable): the audio files below ``DIR``, an excerpt of one of them chosen
  at random, from a random start, per clean file (channels averaged; an excerpt quieter than −60 dBFS
  is drawn again);
- ``--noizeus DIR``: the noise types of a NOIZEUS-style corpus, each the noise of its test mixtures at
  their highest SNR (noisy − clean), put end to end.

Writes ``OUT/clean`` and ``OUT/noisy``, the same names ``<speech>_<noise>_sn<snr>.wav`` (the clean
files 32-bit float, the noisy ones 16-bit PCM). The two folders record the settings that made them
(``.recipe.json``); a run with other settings is refused there unless ``--overwrite``, which removes the
pairs that record lists first (a folder holding anything else, or no record, is refused). A
noisy file's samples beyond full scale (at low SNRs: 213 of a 7 s file in babble at −10 dB) are
clipped as 16-bit PCM holds them; each file's count is printed where it is not zero and recorded in
``OUT/mix_pairs.json`` (``clipped``, every file). Score them with::

    sepsti evaluate --clean OUT/clean --noisy OUT/noisy \\
        --names '(?P<sentence>.+)_(?P<noise>[a-z0-9]+)_sn(?P<snr>-?\\d+)'
    python recipes/benchmarks/enhance_vs_peers.py --clean OUT/clean --noisy OUT/noisy \\
        --names '(?P<sentence>.+)_(?P<noise>[a-z0-9]+)_sn(?P<snr>-?\\d+)' --out OUT

Usage::

    python recipes/benchmarks/mix_pairs.py --speech DIR [--noise NAME=DIR ...] [--noizeus DIR] \\
        [--files 12] [--shortest 3] [--seconds 9] [--snr 0,5,10,15] [--seed 0] --out OUT
"""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from _common import (claim_folders, integer_list, non_negative_float, positive_float, positive_int,  # noqa: E402
                     recipe_parser, run_recipe, write_results)
from _recordings import at_level, excerpt, looped_window, snr_gain  # noqa: E402

from sepsti.core.errors import ParameterError  # noqa: E402

NAME = "mix_pairs"
LEVEL_DB = -26.0
#: The ``--names`` pattern of ``sepsti evaluate`` and ``enhance_vs_peers.py`` that reads these pairs' names
NAMES = r"(?P<sentence>.+)_(?P<noise>[a-z0-9]+)_sn(?P<snr>-?\d+)"


def noizeus_noises(corpus):
    """``{noise type: (signal, rate)}``: each type's noise in the test mixtures at their highest SNR, end to end."""
    from sepsti.corpora.noizeus import mixtures

    try:
        chosen = list(mixtures(corpus))
    except ParameterError as error:
        raise ParameterError(f"--noizeus {corpus}: {error}") from None
    if not chosen:
        raise ParameterError(f"--noizeus {corpus}: no test mixtures there")
    highest = {}
    for mixture in chosen:
        highest[mixture.noise] = max(highest.get(mixture.noise, mixture.snr), mixture.snr)
    noises = {}
    for mixture in chosen:
        if mixture.snr == highest[mixture.noise]:
            noises.setdefault(mixture.noise, ([], mixture.sample_rate))[0].append(mixture.noise_signal)
    return {kind: (np.concatenate(parts), rate) for kind, (parts, rate) in noises.items()}


def noise_types(specs, corpus):
    """``{name: draw}``, ``draw(n, rate, rng)`` giving ``n`` samples of that noise at ``rate``."""
    from sepsti.audio import resample
    from sepsti.corpora.audio import audio_files

    types = {}
    for spec in specs:
        name, _, folder = spec.partition("=")
        if not re.fullmatch(r"[a-z0-9]+", name) or not folder:
            raise ParameterError(f"--noise {spec!r}: give NAME=DIR, NAME of lower-case letters and digits")
        if name in types:
            raise ParameterError(f"--noise {spec!r}: a second noise type named {name!r}; give each its own name")
        recordings = audio_files(Path(folder))
        if not recordings:
            raise ParameterError(f"--noise {spec!r}: no audio file below {folder}")
        types[name] = lambda n, rate, rng, recordings=recordings: excerpt(recordings, n, rate, rng)
    if corpus is not None:
        for name, (signal, source_rate) in noizeus_noises(corpus).items():
            if name in types:
                raise ParameterError(f"--noise {name}=...: {corpus} has a noise type of that name; give it another")

            def draw(n, rate, rng, signal=signal, source_rate=source_rate):
                return looped_window(resample(signal, source_rate, rate), n, rng)
            types[name] = draw
    if not types:
        raise ParameterError("give at least one --noise NAME=DIR or --noizeus DIR")
    return types


def clipped_samples(mixture):
    """Samples of ``mixture`` beyond full scale, which writing it clips."""
    return int(np.count_nonzero(np.abs(mixture) > 1.0))


def main():
    parser = recipe_parser(f"benchmarks/{NAME}", __doc__.splitlines()[0],
                           writes="the pairs in DIR/clean and DIR/noisy")
    parser.add_argument("--speech", type=Path, required=True, help="folder of clean speech (any audio file below it)")
    parser.add_argument("--noise", action="append", default=[], metavar="NAME=DIR",
                        help="a noise type: the recordings below DIR (repeatable)")
    parser.add_argument("--noizeus", type=Path, default=None, help="a NOIZEUS-style corpus whose noise types to add")
    parser.add_argument("--files", type=positive_int, default=12, help="clean files used (the first in name order)")
    parser.add_argument("--shortest", type=non_negative_float, default=3.0, help="shortest clean file used (s)")
    parser.add_argument("--seconds", type=positive_float, default=9.0,
                        help="longest stretch of each clean file used (s)")
    parser.add_argument("--snr", type=integer_list, default=[0, 5, 10, 15], help="SNRs in dB, comma-separated")
    args = parser.parse_args()
    import soundfile

    from sepsti.corpora.audio import audio_files

    types = noise_types(args.noise, args.noizeus)
    speech = [path for path in audio_files(args.speech) if soundfile.info(path).duration >= args.shortest]
    speech = speech[:3 if args.quick else args.files]
    if not speech:
        raise ParameterError(f"--speech {args.speech}: no audio file of {args.shortest:g} s or more below it")
    # a pair's name holds its file's path below --speech (folders joined by "-"), so files of one name in
    # two folders stay apart
    stems = ["-".join(path.relative_to(args.speech).with_suffix("").parts).replace(" ", "-") for path in speech]
    repeated = sorted({stem for stem in stems if stems.count(stem) > 1})
    if repeated:
        raise ParameterError(f"--speech {args.speech}: files would share the pair name {repeated[0]!r}; rename one")
    snrs = args.snr
    clean_folder, noisy_folder = args.out / "clean", args.out / "noisy"
    names = [f"{stem}_{name}_sn{snr}.wav" for stem in stems for name in sorted(types) for snr in snrs]
    settings = {"speech": [str(path.resolve()) for path in speech], "noise": args.noise,
                "noizeus": None if args.noizeus is None else str(args.noizeus.resolve()), "seconds": args.seconds,
                "snrs": snrs, "seed": args.seed}
    claim_folders({clean_folder: names, noisy_folder: names}, settings, overwrite=args.overwrite)
    clipped = {}
    for number, (path, stem) in enumerate(zip(speech, stems)):
        info = soundfile.info(path)
        clean, _ = soundfile.read(path, frames=int(args.seconds * info.samplerate), always_2d=True)
        clean = clean.mean(axis=1)
        clean = at_level(clean, LEVEL_DB)
        for k, (name, draw) in enumerate(sorted(types.items())):
            noise = draw(len(clean), info.samplerate, np.random.default_rng([args.seed, number, k]))
            for snr in snrs:
                scaled = noise * snr_gain(clean, noise, snr)
                file_name = f"{stem}_{name}_sn{snr}.wav"
                mixture = clean + scaled
                clipped[file_name] = clipped_samples(mixture)
                if clipped[file_name]:
                    print(f"{file_name}: {clipped[file_name]} samples beyond full scale, clipped")
                soundfile.write(noisy_folder / file_name, np.clip(mixture, -1, 1), info.samplerate, subtype="PCM_16")
                soundfile.write(clean_folder / file_name, clean, info.samplerate, subtype="FLOAT")
    write_results(args, {"clipped": clipped})
    print(f"wrote {len(speech) * len(types) * len(snrs)} pairs ({len(speech)} clean files x "
          f"{', '.join(sorted(types))} x {args.snr} dB) to {clean_folder} and {noisy_folder}, "
          f"{sum(count > 0 for count in clipped.values())} of them clipped; score them with\n"
          f"  sepsti evaluate --clean {clean_folder} --noisy {noisy_folder} --names '{NAMES}'")


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
