"""A NOIZEUS-style corpus with noise types the enhancer was never tuned on, for ``enhance_vs_peers.py``.

The development noises (babble, car, street, train) are the ones every setting of ``sepsti enhance``
was chosen on; this writes the NOIZEUS test sentences (sp21–sp30) mixed at 0/5/10/15 dB with six
noises made from material no setting saw:

- ``crowd``: eight talkers of the wideband corpus's ``test`` split (one utterance each, random gains
  between 0.5 and 1.5, looped), resampled to 8 kHz; the split holds 34 LibriSpeech speakers and 32 clips
  of LJ Speech's one reader, drawn alike, so about half of a crowd's voices (and of the public-address
  voices) are that reader's;
- ``hall``: sixteen such talkers in a reverberant room (a decaying noise tail of 0.8 s);
- ``concourse``: a crowd of twelve plus the synthetic corpus's street noise (passing vehicles,
  horns, sirens, knocks: :func:`sepsti.corpora.synth.synth_noise`) at equal power;
- ``restaurant``: a crowd of twelve plus kitchen clatter (clinks about four times a second over
  running water: :func:`sepsti.corpora.synth.clatter`) at equal power;
- ``terminal``: an airport-like hall, mostly not speech: a broadband roar (pink noise swelling and
  fading over seconds) with a reverberant crowd of twelve 6 dB below it and a public-address voice
  (:func:`announcement`) 3 dB below it;
- ``platform``: a station-like one: a train's rumble (the synthetic corpus's car noise) rising and
  falling as trains come and go, brake squeals (:func:`squeals`, 3 dB below the rumble over the
  file, louder while they sound), a crowd of eight 6 dB below the rumble and a public-address voice
  3 dB below it.

The levels of the last two are nominal: they are set on parts of unit power before the swell and the
band limit. Measured after both over the ten sentences, the terminal's crowd and voice lie 7.7 and
6.8 dB below its roar on average (−12.9 to −4.5 and −13.9 to −0.2 dB), the platform's 5.6 and 3.8 dB
below its rumble; the squeals, about 0.3 a second, miss many a 3 s sentence.

The last two stand in for noises that are mostly not speech (airport and station halls); each noise
type has its own random stream, so adding types leaves the others' files as they were.

Every noise is band-limited like NOIZEUS (:func:`sepsti.corpora.synth.telephone_band`). Each file's
plain energy ratio is its label minus 0.48 dB, the offset of the NOIZEUS files themselves (their
labels are by active speech level, ITU-T P.56), so that the input scores are comparable. The clean
sentences are written beside the mixtures, so that the folder is a complete corpus::

    python recipes/benchmarks/unseen_noise_corpus.py --noizeus ../shared/data/noizeus \\
        --wideband ../shared/data/wideband --out results/unseen_noise
    python recipes/benchmarks/enhance_vs_peers.py --corpus results/unseen_noise/corpus --out results/unseen_noise

Writes ``OUT/corpus/clean/spNN.wav`` and ``OUT/corpus/noisy/<noise>_<snr>dB/spNN_<noise>_sn<snr>.wav``
(16-bit, 8 kHz). ``OUT/corpus`` records the settings that made it (``.recipe.json``); a run with other
settings is refused there unless ``--overwrite``, which removes the files that record lists first (a folder
holding anything else, or no record, is refused). A mixture's samples beyond full scale
are clipped as 16-bit PCM holds them (the clean sentence is shared by every mixture of it, so the two cannot
be scaled down together); each file's count is printed where it is not zero and recorded in
``OUT/unseen_noise_corpus.json`` (``clipped``, every file).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from _common import (DEFAULT_WIDEBAND, claim_folders, noizeus_corpus, recipe_parser, run_recipe,  # noqa: E402
                     write_results)
from enhance_wideband import wideband_folder  # noqa: E402
from _recordings import looped_window  # noqa: E402

NAME = "unseen_noise_corpus"
SNRS = (0, 5, 10, 15)
#: Plain energy ratio minus the label in the NOIZEUS files (their mean over the 160 test mixtures; −0.555
#: over all 480).
NOIZEUS_OFFSET_DB = -0.48
#: Talkers per noise type.
TALKERS = {"crowd": 8, "hall": 16, "concourse": 12, "restaurant": 12, "terminal": 12, "platform": 8}
#: Length (s) of the hall's reverberation tail (60 dB decay).
HALL_SECONDS = 0.8
#: Length (s) of the reverberation tail of the public-address voice and the terminal's crowd.
ANNOUNCEMENT_SECONDS = 1.5


def crowd(pool, talkers, n, rng):
    """``n`` samples of ``talkers`` voices of ``pool`` (8 kHz signals) summed with random gains."""
    total = np.zeros(n)
    for talker in rng.choice(len(pool), talkers, replace=False):
        voice = looped_window(pool[talker], n, rng)
        total += rng.uniform(0.5, 1.5) * voice / max(np.std(pool[talker]), 1e-12)
    return total


def reverberate(y, seconds, rng):
    """``y`` in a room whose noise-like response decays 60 dB in ``seconds`` (no direct sound)."""
    from scipy.signal import fftconvolve

    from sepsti.corpora.synth import room_tail

    return fftconvolve(y, room_tail(rng, seconds))[:len(y)]


def swell(n, seconds, depth_db, rng):
    """A level envelope of ``n`` samples: its dB value moves linearly between random levels (standard
    deviation ``depth_db``) every ``seconds``."""
    from sepsti.corpora.synth import SAMPLE_RATE

    knots = np.arange(0, n / SAMPLE_RATE + 2 * seconds, seconds) - rng.uniform(0, seconds)
    level_db = np.interp(np.arange(n) / SAMPLE_RATE, knots, depth_db * rng.standard_normal(len(knots)))
    return 10 ** (level_db / 20)


def announcement(pool, n, rng):
    """A public-address voice: one talker of ``pool`` in a reverberant hall, on for 2–5 s stretches
    separated by 1–4 s of silence; unit RMS over the whole."""
    from sepsti.corpora.synth import SAMPLE_RATE

    gate = np.zeros(n)
    position = int(rng.uniform(-3, 2) * SAMPLE_RATE)
    while position < n:
        stop = position + int(rng.uniform(2, 5) * SAMPLE_RATE)
        gate[max(position, 0):max(stop, 0)] = 1.0
        position = stop + int(rng.uniform(1, 4) * SAMPLE_RATE)
    y = reverberate(crowd(pool, 1, n, rng) * gate, ANNOUNCEMENT_SECONDS, rng)
    return y / max(np.std(y), 1e-12)


def squeals(n, rng):
    """Brake squeals: harmonic tones between 1 and 3 kHz with a slow vibrato, 0.5–2 s each,
    about one every three seconds; unit RMS over the whole (silence if none fell in ``n``)."""
    from sepsti.corpora.synth import SAMPLE_RATE

    y = np.zeros(n)
    for onset in np.flatnonzero(rng.random(n) < 0.3 / SAMPLE_RATE):
        t = np.arange(min(n - onset, int(rng.uniform(0.5, 2.0) * SAMPLE_RATE))) / SAMPLE_RATE
        pitch = rng.uniform(1000, 3000) * (1 + 0.01 * np.sin(2 * np.pi * rng.uniform(3, 7) * t))
        phase = 2 * np.pi * np.cumsum(pitch) / SAMPLE_RATE
        fade = np.minimum(1, np.minimum(t, t[-1] - t) / 0.1)
        y[onset:onset + len(t)] += fade * (np.sin(phase) + 0.3 * np.sin(2 * phase))
    return y / max(np.std(y), 1e-12) if y.any() else y


def make_noise(kind, pool, n, rng):
    """``n`` samples of a noise type at 8 kHz, telephone band, unit RMS."""
    from sepsti.corpora.synth import SAMPLE_RATE, clatter, synth_noise, telephone_band

    warm = SAMPLE_RATE  # the band filter's and the room's start-up is cut off
    y = crowd(pool, TALKERS[kind], n + warm, rng)
    if kind == "hall":
        y = reverberate(y, HALL_SECONDS, rng)
    elif kind == "concourse":
        y = y / np.std(y) + synth_noise("street", n + warm, rng)
    elif kind == "restaurant":
        y = y / np.std(y) + clatter(n + warm, SAMPLE_RATE, rng)
    elif kind == "terminal":
        roar = synth_noise("pink", n + warm, rng) * swell(n + warm, 3.0, 3.0, rng)
        talk = reverberate(y, ANNOUNCEMENT_SECONDS, rng)
        y = roar + 0.5 * talk / np.std(talk) + 0.7 * announcement(pool, n + warm, rng)
    elif kind == "platform":
        rumble = synth_noise("car", n + warm, rng) * swell(n + warm, 4.0, 5.0, rng)
        y = rumble + 0.5 * y / np.std(y) + 0.7 * announcement(pool, n + warm, rng) + 0.7 * squeals(n + warm, rng)
    y = telephone_band(y)[warm:]
    return y / max(np.std(y), 1e-12)


def clipped_samples(mixture):
    """Samples of ``mixture`` beyond full scale, which writing it clips."""
    return int(np.count_nonzero(np.abs(mixture) > 1.0))


def main(argv=None):
    parser = recipe_parser(f"benchmarks/{NAME}", __doc__.splitlines()[0], writes="the corpus in DIR/corpus")
    parser.add_argument("--noizeus", type=Path, default=None,
                        help="NOIZEUS folder (default: $SEPSTI_NOIZEUS or ../shared/data/noizeus)")
    parser.add_argument("--wideband", type=wideband_folder, default=str(DEFAULT_WIDEBAND),
                        help="wideband corpus whose test-split talkers make the noises")
    args = parser.parse_args(argv)

    import soundfile

    from sepsti.audio import resample
    from sepsti.core.errors import ParameterError
    from sepsti.corpora import noizeus, wideband
    from sepsti.corpora.synth import SAMPLE_RATE

    corpus = noizeus_corpus(args.noizeus, "--noizeus")
    try:
        sentences = noizeus.clean_signals(corpus, "test")
    except ParameterError as error:
        raise ParameterError(f"--noizeus {corpus}: {error}") from None
    if args.quick:
        sentences = sentences[:3]
    for utterance, _, rate in sentences:
        if rate != SAMPLE_RATE:
            raise ParameterError(f"--noizeus {corpus}: {utterance} at {rate} Hz; expected NOIZEUS at {SAMPLE_RATE} Hz")
    folder = args.out / "corpus"
    paths = {(utterance, kind, snr): f"noisy/{kind}_{snr}dB/{utterance}_{kind}_sn{snr}.wav"
             for utterance, _, _ in sentences for kind in TALKERS for snr in SNRS}
    settings = {"noizeus": str(Path(corpus).resolve()), "wideband": str(args.wideband.resolve()),
                "sentences": [utterance for utterance, _, _ in sentences], "seed": args.seed}
    claim_folders({folder: [f"clean/{utterance}.wav" for utterance, _, _ in sentences] + list(paths.values())},
                  settings, overwrite=args.overwrite)
    pool = [resample(y, rate, SAMPLE_RATE) for _, y, rate in wideband.clean_signals(args.wideband, "test")]
    (folder / "clean").mkdir(exist_ok=True)
    clipped = {}
    for number, (utterance, clean, rate) in enumerate(sentences):
        soundfile.write(folder / "clean" / f"{utterance}.wav", clean, rate, subtype="PCM_16")
        for k, kind in enumerate(TALKERS):
            noise = make_noise(kind, pool, len(clean), np.random.default_rng([args.seed, number, k]))
            for snr in SNRS:
                scaled = noise * np.sqrt(np.sum(clean ** 2) / (np.sum(noise ** 2) * 10 ** ((snr + NOIZEUS_OFFSET_DB)
                                                                                           / 10)))
                path = folder / paths[utterance, kind, snr]
                path.parent.mkdir(parents=True, exist_ok=True)
                mixture = clean + scaled
                clipped[path.name] = clipped_samples(mixture)
                if clipped[path.name]:
                    print(f"{path.name}: {clipped[path.name]} samples beyond full scale, clipped")
                soundfile.write(path, np.clip(mixture, -1, 1), rate, subtype="PCM_16")
    write_results(args, {"clipped": clipped})
    print(f"wrote {len(sentences) * len(TALKERS) * len(SNRS)} mixtures of {len(sentences)} sentences to {folder}, "
          f"{sum(count > 0 for count in clipped.values())} of them clipped")


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
