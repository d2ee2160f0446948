"""A synthetic NOIZEUS-style corpus: source-filter speech and five noise types.

Speech
------
Each utterance is a sentence of words made of syllables (consonant onsets, a
vowel nucleus, optional codas) with pauses between some words, leading and
trailing silence, 2-3 s in total. A source-filter model renders it at 8 kHz:

- voiced source: a glottal pulse train following a pitch contour (declination,
  accents on stressed syllables, slow drift; male speakers 85-155 Hz, female
  165-255 Hz) with per-period jitter and shimmer, shaped by a two-pole glottal
  low-pass and lip radiation (a first difference), plus breath noise;
- unvoiced sources: white noise through the vocal tract (aspiration, /h/) and
  band-pass noise for fricatives and stop bursts (/s/, /sh/, /f/, /p t k/);
- vocal tract: a cascade of four second-order resonators (formants), their
  frequencies gliding between vowel and consonant targets (Peterson-Barney
  values scaled by the speaker's vocal-tract length), updated every 5 ms;
- a telephone band (high-pass at 250 Hz, low-pass at 3.5 kHz) like the IRS
  filtering of NOIZEUS, applied to speech and noise alike.

Six speakers say five sentences each, in NOIZEUS order: sp01-sp10 two male
speakers, sp11-sp20 two female, sp21-sp25 male, sp26-sp30 female, so the
paper's split (train sp01-sp20, test sp21-sp30) is speaker independent with
both sexes on each side.

Noise
-----
``white``; ``pink`` (1/f power); ``babble`` (seven overlapping synthetic talkers
from speakers not in the corpus, in a reverberant room); ``car`` (brown-ish low-frequency rumble,
engine harmonics at a drifting firing rate, low-passed road noise);
``street`` (non-stationary: a fluctuating traffic background, passing
vehicles swelling and fading, horn and siren tones, impulsive knocks). Each
noise type is one 30 s recording per seed; every mixture takes a segment of it.
:func:`clatter` (kitchen clinks over running water, full band at any rate) is not
one of them: the benchmarks mix it into their household and restaurant noises.

Mixing
------
SNR is the energy ratio over the whole file, ``10 log10(sum(clean**2) /
sum(noise**2))``, on the quantised clean signal (NOIZEUS labels use active
speech level, which differs by a dB or so). Files are 16-bit PCM; clean and
noise are quantised to integers and the noisy file is their integer sum, so
``noisy - clean`` read back is the noise exactly. Clean speech is set to about
-27 dBFS RMS (±2 dB per utterance, as in NOIZEUS); if a mixture would clip,
that utterance (clean and all its mixtures) is scaled down.

Conventions
-----------
Signals are float64 arrays ``(n_samples,)`` at :data:`SAMPLE_RATE` in
[-1, 1) units. Every random choice comes from ``sepsti.core.random.stream(seed, ...)``
with a key naming the utterance or noise, so a file does not depend on which
other files are generated -- except the level of an utterance lowered so that
one of its mixtures does not clip (SNRs below about -10 dB), which then holds
for all of its files. SNRs are integers in -20..40 dB; a mixture whose
quantised energy ratio would miss its label by over 0.05 dB is refused.
"""

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from sepsti.core.checks import finite_number, integer_at_least, positive_number
from sepsti.core.errors import ParameterError
from sepsti.core.io import atomic_path
from sepsti.core.progress import progress_bar
from sepsti.core.random import stream
from sepsti.corpora.noizeus import ALL_IDS, SYNTH_MARKER, clean_name, noisy_name, split_ids

__all__ = ["SAMPLE_RATE", "NOISE_TYPES", "SNRS", "Speaker", "make_speaker", "corpus_speakers",
           "synth_utterance", "synth_noise", "clatter", "room_tail", "telephone_band", "mix", "write_corpus",
           "MARKER"]

SAMPLE_RATE = 8000
NOISE_TYPES = ("white", "pink", "babble", "car", "street")
SNRS = (0, 5, 10, 15)
NOISE_SECONDS = 30.0
CLEAN_LEVEL_DB = -27.0
# SNRs (dB) that 16-bit files hold at their label: below, the noise's peaks make the clean level drop far
# under CLEAN_LEVEL_DB; above, the noise is a few quantisation steps and its energy misses the label.
SNR_RANGE = (-20, 40)
# How far (dB) a mixture's energy ratio may be from its label.
SNR_TOLERANCE = 0.05

# Stream keys: (seed, purpose, ...). Purposes are fixed so files stay reproducible.
_KEY_SPEAKER, _KEY_UTTERANCE, _KEY_NOISE, _KEY_SEGMENT, _KEY_LEVEL = 1, 2, 3, 4, 5
_SEXES = ("male", "male", "female", "female", "male", "female")
_BLOCK = 40  # samples per formant update (5 ms at 8 kHz)

# Formant targets F1-F4 (Hz) of an adult male vocal tract (Peterson & Barney; Hillenbrand).
_VOWELS = {
    "i": (270, 2290, 3010, 3500), "I": (390, 1990, 2550, 3500), "e": (530, 1840, 2480, 3500),
    "ae": (660, 1720, 2410, 3500), "a": (730, 1090, 2440, 3400), "o": (570, 840, 2410, 3400),
    "U": (440, 1020, 2240, 3300), "u": (300, 870, 2240, 3300), "A": (640, 1190, 2390, 3400),
    "er": (490, 1350, 1690, 3300), "ai": (700, 1300, 2500, 3450), "ei": (450, 2000, 2600, 3500),
}
_VOWEL_NAMES = tuple(_VOWELS)
_VOWEL_BANDWIDTHS = (70.0, 100.0, 200.0, 450.0)


class _Phone(NamedTuple):
    voicing: float      # glottal source amplitude
    aspiration: float   # white noise through the vocal tract
    frication: str      # band of the fricative noise ("" for none)
    fric_amp: float
    formants: tuple     # F1-F4 targets, or None to take the next vowel's
    bandwidths: tuple
    duration: tuple     # (min, max) in seconds


_WIDE = (200.0, 300.0, 400.0, 500.0)
_CONSONANTS = {
    "s": _Phone(0.0, 0.0, "s", 0.30, None, _VOWEL_BANDWIDTHS, (0.09, 0.15)),
    "z": _Phone(0.35, 0.0, "s", 0.16, None, _VOWEL_BANDWIDTHS, (0.06, 0.10)),
    "sh": _Phone(0.0, 0.0, "sh", 0.30, None, _VOWEL_BANDWIDTHS, (0.09, 0.14)),
    "f": _Phone(0.0, 0.0, "f", 0.10, None, _VOWEL_BANDWIDTHS, (0.08, 0.13)),
    "v": _Phone(0.35, 0.0, "f", 0.07, None, _VOWEL_BANDWIDTHS, (0.05, 0.08)),
    "h": _Phone(0.0, 0.25, "", 0.0, None, _VOWEL_BANDWIDTHS, (0.05, 0.09)),
    "m": _Phone(0.30, 0.0, "", 0.0, (250, 1100, 2300, 3300), (60, 300, 400, 500), (0.05, 0.09)),
    "n": _Phone(0.30, 0.0, "", 0.0, (250, 1500, 2400, 3300), (60, 300, 400, 500), (0.05, 0.09)),
    "l": _Phone(0.55, 0.0, "", 0.0, (360, 1300, 2500, 3400), (80, 150, 200, 300), (0.04, 0.07)),
    "r": _Phone(0.55, 0.0, "", 0.0, (420, 1300, 1600, 3300), (80, 150, 200, 300), (0.04, 0.07)),
    "w": _Phone(0.55, 0.0, "", 0.0, (300, 700, 2200, 3300), (80, 150, 200, 300), (0.04, 0.07)),
    "j": _Phone(0.55, 0.0, "", 0.0, (270, 2200, 3000, 3500), (80, 150, 200, 300), (0.04, 0.07)),
}
_STOPS = {"p": "burst_p", "t": "burst_t", "k": "burst_k", "b": "burst_p", "d": "burst_t", "g": "burst_k"}
_ONSETS = tuple(_CONSONANTS) + tuple(_STOPS)
_CODAS = ("s", "z", "n", "m", "l", "r", "t", "d", "k", "f", "sh")
_CLUSTER_SECOND = ("l", "r", "w")

# Noise bands (Hz) of fricatives and bursts, as (type, frequencies).
_BANDS = {
    "s": ("bandpass", (2700, 3600)), "sh": ("bandpass", (1800, 3300)), "f": ("highpass", 900),
    "burst_p": ("lowpass", 1500), "burst_t": ("highpass", 2600), "burst_k": ("bandpass", (1300, 2700)),
}


class Speaker(NamedTuple):
    """Voice parameters of one synthetic speaker.

    ``f0`` is the mean pitch (Hz) and ``f0_range`` the (low, high) limits of
    its contours; ``tract`` scales formant frequencies (vocal-tract length);
    ``rate`` scales segment durations; ``breath`` is the breath-noise share
    of the voiced source; ``glottal`` the corner (Hz) of the glottal low-pass
    and ``tilt`` the pole of an extra one-pole low-pass (spectral tilt).
    """

    sex: str
    f0: float
    f0_range: tuple
    tract: float
    rate: float
    breath: float
    glottal: float
    tilt: float


def make_speaker(rng, sex):
    """Draw a speaker of the given sex ("male" or "female")."""
    if sex == "male":
        return Speaker("male", rng.uniform(100, 130), (85.0, 155.0), rng.uniform(0.94, 1.04),
                       rng.uniform(0.9, 1.1), rng.uniform(0.02, 0.06), rng.uniform(120, 180), rng.uniform(0.45, 0.6))
    if sex == "female":
        return Speaker("female", rng.uniform(190, 225), (165.0, 255.0), rng.uniform(1.12, 1.2),
                       rng.uniform(0.9, 1.1), rng.uniform(0.05, 0.1), rng.uniform(200, 300), rng.uniform(0.5, 0.65))
    raise ParameterError(f"sex={sex!r}: expected 'male' or 'female'")


def corpus_speakers(seed):
    """The six speakers of the corpus: sp01-05, sp06-10, ... sp26-30 (male, male, female, female, male, female)."""
    return [make_speaker(stream(seed, _KEY_SPEAKER, index), sex) for index, sex in enumerate(_SEXES)]


def _sos(kind, frequency, order=2):
    from scipy.signal import butter

    return butter(order, frequency, btype=kind, fs=SAMPLE_RATE, output="sos")


def telephone_band(y):
    """Band-limit a signal like NOIZEUS's IRS filtering: high-pass 250 Hz, low-pass 3.5 kHz."""
    from scipy.signal import ellip, sosfilt

    high = _sos("highpass", 250.0, order=6)
    low = ellip(6, 0.5, 60, 3450.0, btype="lowpass", fs=SAMPLE_RATE, output="sos")
    return sosfilt(low, sosfilt(high, y))


def _sentence(rng, speaker, duration):
    """Phones of a sentence: list of (phone, seconds, stress, syllable index), pauses as None."""
    phones = []
    spoken, syllable = 0.0, 0
    while spoken < duration:
        for position in range(rng.integers(1, 4)):
            stress = 1.0 if position == 0 and rng.random() < 0.7 else rng.uniform(0.55, 0.8)
            onset = []
            if rng.random() < 0.85:
                onset.append(_ONSETS[rng.integers(len(_ONSETS))])
                if onset[0] in _STOPS and rng.random() < 0.25:
                    onset.append(_CLUSTER_SECOND[rng.integers(3)])
            coda = [_CODAS[rng.integers(len(_CODAS))]] if rng.random() < 0.45 else []
            vowel = _VOWEL_NAMES[rng.integers(len(_VOWEL_NAMES))]
            vowel_seconds = rng.uniform(0.07, 0.13) + 0.08 * stress * rng.random()
            for name in onset:
                phones.append((name, _phone_seconds(rng, name), stress, syllable))
            phones.append((vowel, vowel_seconds, stress, syllable))
            for name in coda:
                phones.append((name, _phone_seconds(rng, name), stress, syllable))
            syllable += 1
        spoken = sum(seconds for _, seconds, _, _ in phones) * speaker.rate
        if spoken < duration and rng.random() < 0.3:
            phones.append((None, rng.uniform(0.06, 0.22), 0.0, syllable))
    return phones, syllable


def _phone_seconds(rng, name):
    if name in _STOPS:
        return rng.uniform(0.07, 0.12)
    low, high = _CONSONANTS[name].duration
    return rng.uniform(low, high)


def _segments(rng, speaker, phones):
    """Turn phones into sample-rate segments: (samples, voicing, aspiration, band, fric_amp, F, B, stress, syl)."""
    segments = []
    for name, seconds, stress, syllable in phones:
        samples = max(8, int(round(seconds * speaker.rate * SAMPLE_RATE)))
        if name is None:
            segments.append([samples, 0.0, 0.0, "", 0.0, "hold", _VOWEL_BANDWIDTHS, stress, syllable])
        elif name in _VOWELS:
            # A vowel glides from its own target part way to another (diphthongisation).
            formants = np.array(_VOWELS[name]) * rng.uniform(0.95, 1.05, 4)
            other = np.array(_VOWELS[_VOWEL_NAMES[rng.integers(len(_VOWEL_NAMES))]])
            glide = formants + rng.uniform(0.0, 0.6) * (other - formants)
            first = samples // 2
            segments.append([first, 1.0, 0.0, "", 0.0, tuple(formants), _VOWEL_BANDWIDTHS, stress, syllable])
            segments.append([samples - first, 1.0, 0.0, "", 0.0, tuple(glide), _VOWEL_BANDWIDTHS, stress,
                             syllable])
        elif name in _STOPS:
            voiced = name in "bdg"
            closure = int(samples * rng.uniform(0.55, 0.7))
            burst = int(rng.uniform(0.008, 0.015) * SAMPLE_RATE)
            rest = max(8, samples - closure - burst)
            segments.append([closure, 0.12 if voiced else 0.0, 0.0, "", 0.0, (200, 900, 2200, 3300), _WIDE,
                             stress, syllable])
            segments.append([burst, 0.0, 0.0, _STOPS[name], 0.45 if not voiced else 0.25, None,
                             _VOWEL_BANDWIDTHS, stress, syllable])
            segments.append([rest if not voiced else rest // 3, 0.0, 0.0 if voiced else 0.22, "", 0.0, None,
                             _VOWEL_BANDWIDTHS, stress, syllable])
        else:
            phone = _CONSONANTS[name]
            segments.append([samples, phone.voicing, phone.aspiration, phone.frication, phone.fric_amp,
                             phone.formants, phone.bandwidths, stress, syllable])
    # Consonants without their own formants take the next vowel's (anticipatory coarticulation);
    # pauses hold the previous ones.
    following = _VOWELS["A"]
    for segment in reversed(segments):
        if segment[5] is None:
            segment[5] = following
        elif segment[5] != "hold":
            following = segment[5]
    previous = _VOWELS["A"]
    for segment in segments:
        if segment[5] == "hold":
            segment[5] = previous
        previous = segment[5]
    return segments


def _smooth(track, width):
    """Moving average over ``width`` samples along axis 0, edges held."""
    if width <= 1:
        return track
    from scipy.ndimage import uniform_filter1d

    return uniform_filter1d(track, size=int(width), axis=0, mode="nearest")


def _glottal_source(rng, speaker, f0, n):
    """Unit-RMS glottal excitation for a per-sample pitch track ``f0`` (Hz)."""
    from scipy.signal import lfilter

    # Pulse instants by integrating the pitch period by period, so jitter acts per period.
    times, t = [], rng.uniform(0, 1 / speaker.f0)
    while t < n / SAMPLE_RATE:
        times.append(t)
        period = 1.0 / f0[min(int(t * SAMPLE_RATE), n - 1)]
        t += period * (1.0 + 0.01 * rng.standard_normal())
    times = np.asarray(times)
    pulses = np.zeros(n)
    np.add.at(pulses, np.minimum((times * SAMPLE_RATE).round().astype(int), n - 1),
              1.0 + 0.06 * rng.standard_normal(len(times)))
    pole = np.exp(-2 * np.pi * speaker.glottal / SAMPLE_RATE)
    flow = lfilter([1.0], [1.0, -2 * pole, pole * pole], pulses)
    source = np.diff(flow, prepend=0.0)  # lip radiation
    source = lfilter([1.0 - speaker.tilt], [1.0, -speaker.tilt], source)
    return source / max(np.sqrt(np.mean(source ** 2)), 1e-12)


def _vocal_tract(excitation, formants, bandwidths):
    """Cascade of four resonators with per-block coefficients.

    Parameters
    ----------
    excitation : ndarray, shape (n,)
    formants, bandwidths : ndarray, shape (num_blocks, 4)
        Per-block centre frequencies and bandwidths (Hz).
    """
    from scipy.signal import lfilter

    num_blocks = len(formants)
    radius = np.exp(-np.pi * bandwidths / SAMPLE_RATE)
    angle = 2 * np.pi * formants / SAMPLE_RATE
    a1, a2 = -2 * radius * np.cos(angle), radius * radius
    gain = np.prod(1 + a1 + a2, axis=1)  # unity gain at 0 Hz for each resonator
    poly = np.zeros((num_blocks, 9))
    poly[:, 0] = 1.0
    for k in range(4):  # multiply in one quadratic at a time, all blocks at once
        shifted1 = np.roll(poly, 1, axis=1)
        shifted2 = np.roll(poly, 2, axis=1)
        shifted1[:, 0] = 0.0
        shifted2[:, :2] = 0.0
        poly = poly + a1[:, k:k + 1] * shifted1 + a2[:, k:k + 1] * shifted2
    # Transposed direct-form state from the last 8 outputs: zi[m] = -sum_j a[m+1+j] y[-1-j].
    padded = np.concatenate([poly[:, 1:], np.zeros((num_blocks, 8))], axis=1)
    hankel = padded[:, np.add.outer(np.arange(8), np.arange(8))]
    out = np.empty_like(excitation)
    recent = np.zeros(8)  # y[-1], y[-2], ...
    for block in range(num_blocks):
        start, stop = block * _BLOCK, min((block + 1) * _BLOCK, len(excitation))
        if start >= stop:
            break
        # Rebuilding the state from past outputs keeps coefficient switches click-free.
        state = -hankel[block] @ recent
        out[start:stop], _ = lfilter(gain[block:block + 1], poly[block], excitation[start:stop], zi=state)
        tail = out[max(start, stop - 8):stop][::-1]
        recent = np.concatenate([tail, recent])[:8]
    return out


def synth_utterance(rng, speaker, *, duration=None):
    """Synthesise one sentence.

    Parameters
    ----------
    rng : numpy.random.Generator
    speaker : Speaker
    duration : float, optional
        Approximate total length in seconds (drawn in 2.0-3.2 s when None), above 0. The silences before and after
        (0.12-0.3 s each) and at least 0.3 s of speech, which ends with its syllable, make an utterance of at
        least 0.54 s whatever the duration asked; short ones run over most (over 60 seeds, 0.5 s gave 0.65-1.7 s
        and 1 s gave 1.0-2.1 s).

    Returns
    -------
    ndarray, shape (n_samples,)
        Telephone-band speech at :data:`SAMPLE_RATE`, RMS 0.05 (about -26 dBFS).
    """
    from scipy.signal import sosfilt

    duration = rng.uniform(2.0, 3.2) if duration is None else positive_number("duration", duration)
    lead, trail = rng.uniform(0.12, 0.3), rng.uniform(0.12, 0.3)
    phones, num_syllables = _sentence(rng, speaker, max(duration - lead - trail, 0.3))
    segments = _segments(rng, speaker, phones)
    lengths = np.array([segment[0] for segment in segments])
    lead_n, trail_n = int(lead * SAMPLE_RATE), int(trail * SAMPLE_RATE)
    n = lead_n + int(lengths.sum()) + trail_n

    def track(values, fill):
        values = np.asarray(values, dtype=float)
        body = np.repeat(values, lengths, axis=0)
        pad = [(lead_n, trail_n)] + [(0, 0)] * (values.ndim - 1)
        return np.pad(body, pad, mode="edge") if fill is None else np.pad(body, pad, constant_values=fill)

    stress = track([segment[7] for segment in segments], 0.0)
    declination = np.linspace(1.0, 0.7, n)
    voicing = _smooth(track([segment[1] for segment in segments], 0.0) * stress, 80) * declination
    aspiration = _smooth(track([segment[2] for segment in segments], 0.0) * stress, 40) * declination
    formants = track([segment[5] for segment in segments], None) * speaker.tract
    bandwidths = track([segment[6] for segment in segments], None) * (1.0 + 0.15 * (speaker.tract - 1))

    # Pitch: declination, a rise-fall accent on each stressed syllable, slow drift.
    syllable = track([segment[8] for segment in segments], -1.0)
    accent_gain = rng.uniform(0.08, 0.35, num_syllables + 1) * (rng.random(num_syllables + 1) < 0.7)
    accent = np.where(syllable >= 0, accent_gain[np.maximum(syllable, 0).astype(int)], 0.0) * (stress > 0.9)
    drift = _smooth(rng.standard_normal(n), 1600)
    drift /= max(np.std(drift), 1e-12)
    start, end = rng.uniform(1.05, 1.2), rng.uniform(0.8, 0.92)
    f0 = speaker.f0 * np.linspace(start, end, n) * (1 + _smooth(accent, 1000)) * (1 + 0.04 * drift)
    f0 = np.clip(f0, *speaker.f0_range)

    source = _glottal_source(rng, speaker, f0, n)
    noise = rng.standard_normal(n)
    excitation = voicing * (source + speaker.breath * noise) + aspiration * noise
    num_blocks = -(-n // _BLOCK)
    block_formants = _smooth(formants[::_BLOCK][:num_blocks], 12)
    block_bandwidths = _smooth(bandwidths[::_BLOCK][:num_blocks], 12)
    block_formants = np.minimum(block_formants, 0.47 * SAMPLE_RATE)
    voiced = _vocal_tract(excitation, block_formants, block_bandwidths)

    # Fricatives and bursts: band-limited noise with their own envelopes.
    frication = np.zeros(n)
    bands = track([list(_BANDS).index(segment[3]) if segment[3] else -1 for segment in segments], -1.0)
    amplitudes = track([segment[4] for segment in segments], 0.0) * stress
    hiss = rng.standard_normal(n)
    for index, (name, (kind, frequency)) in enumerate(_BANDS.items()):
        # Bursts start abruptly (3 ms ramps), fricatives fade in and out (15 ms).
        envelope = _smooth(np.where(bands == index, amplitudes, 0.0), 24 if name.startswith("burst") else 120)
        if envelope.any():
            band = sosfilt(_sos(kind, frequency, order=3), hiss)
            frication += envelope * band / max(np.std(band), 1e-12) * 2.0
    y = voiced + frication
    y *= 0.05 / max(np.sqrt(np.mean(y ** 2)), 1e-12)
    # A recording noise floor about 48 dB below the speech, as in real recordings.
    floor = _pink(rng, n)
    y += floor * (0.05 * 10 ** (-48 / 20) / max(np.std(floor), 1e-12))
    y = telephone_band(y)
    return y * (0.05 / max(np.sqrt(np.mean(y ** 2)), 1e-12))


def _pink(rng, n):
    spectrum = rng.standard_normal(n // 2 + 1) + 1j * rng.standard_normal(n // 2 + 1)
    frequencies = np.fft.rfftfreq(n, 1 / SAMPLE_RATE)
    spectrum *= 1.0 / np.sqrt(np.maximum(frequencies, 20.0))
    return np.fft.irfft(spectrum, n)


def _babble(rng, n, talkers=7):
    total = np.zeros(n)
    for _ in range(talkers):
        speaker = make_speaker(rng, "male" if rng.random() < 0.5 else "female")
        pieces, length = [], 0
        while length < n + SAMPLE_RATE:
            utterance = synth_utterance(rng, speaker)
            # Babble talkers barely pause between sentences.
            active = np.flatnonzero(np.abs(utterance) > 0.01 * np.abs(utterance).max())
            utterance = utterance[active[0]:active[-1] + 1] if active.size else utterance
            utterance *= rng.uniform(0.6, 1.4)
            pieces.append(utterance)
            length += len(utterance)
        voice = np.concatenate(pieces)
        offset = rng.integers(0, len(voice) - n + 1)
        total += voice[offset:offset + n]
    return _reverberate(rng, total, rng.uniform(0.3, 0.6))


def room_tail(rng, seconds, sample_rate=SAMPLE_RATE):
    """A synthetic room's reverberant tail: Gaussian noise decaying 60 dB in ``seconds``, at ``sample_rate``."""
    t = np.arange(int(seconds * sample_rate)) / sample_rate
    return rng.standard_normal(len(t)) * np.exp(-6.9 * t / seconds)


def _reverberate(rng, y, seconds):
    """Convolve with a synthetic room response: direct sound plus a noise tail decaying 60 dB in ``seconds``."""
    from scipy.signal import fftconvolve

    response = room_tail(rng, seconds) * 0.1
    response[0] = 1.0
    return fftconvolve(y, response)[:len(y)]


def _car(rng, n):
    from scipy.signal import lfilter, sosfilt

    t = np.arange(n) / SAMPLE_RATE
    brown = lfilter([1.0], [1.0, -0.995], rng.standard_normal(n))
    rumble = sosfilt(_sos("lowpass", 250.0, order=2), brown)
    road = sosfilt(_sos("lowpass", 700.0, order=1), rng.standard_normal(n))  # tyres and wind
    firing = rng.uniform(28, 45) * (1 + 0.08 * _smooth(rng.standard_normal(n), 16000) * 20)
    phase = 2 * np.pi * np.cumsum(firing) / SAMPLE_RATE
    engine = sum(np.cos(k * phase + rng.uniform(0, 2 * np.pi)) / k ** 1.2 for k in range(1, 9))
    engine *= 1 + 0.2 * np.sin(2 * np.pi * rng.uniform(0.1, 0.4) * t)
    parts = [rumble, road, engine]
    weights = (1.0, 0.6, 0.5)
    return sum(w * p / np.std(p) for w, p in zip(weights, parts))


def _events(rng, n, rate):
    """Start samples of a Poisson process with ``rate`` events per second."""
    count = rng.poisson(rate * n / SAMPLE_RATE)
    return np.sort(rng.integers(0, n, count))


def _street(rng, n):
    from scipy.signal import lfilter, sosfilt

    t = np.arange(n) / SAMPLE_RATE
    background = _pink(rng, n) + 0.5 * lfilter([1.0], [1.0, -0.99], rng.standard_normal(n)) / 10
    background /= np.std(background)
    background *= 1 + 0.5 * _smooth(rng.standard_normal(n), 8000) * 40  # slow traffic swell
    total = background.copy()
    # Passing vehicles: low-passed noise swelling and fading over 1-4 s with a falling cutoff.
    for start in _events(rng, n, 0.4):
        length = int(rng.uniform(1.0, 4.0) * SAMPLE_RATE)
        stop = min(n, start + length)
        span = np.arange(stop - start) / length
        envelope = np.exp(-0.5 * ((span - 0.5) / 0.18) ** 2) * rng.uniform(1.5, 4.0)
        source = rng.standard_normal(stop - start)
        bright = sosfilt(_sos("bandpass", (400.0, 2500.0), order=2), source)
        dark = sosfilt(_sos("lowpass", 400.0, order=2), source)
        doppler = np.clip(1.5 - 2 * span, 0, 1)
        total[start:stop] += envelope * (doppler * bright / np.std(bright) + dark / np.std(dark))
    # Horns: harmonic tones of 0.2-0.8 s.
    for start in _events(rng, n, 0.12):
        stop = min(n, start + int(rng.uniform(0.2, 0.8) * SAMPLE_RATE))
        local = t[start:stop] - t[start]
        pitch = rng.uniform(300, 550)
        tone = sum(np.sin(2 * np.pi * k * pitch * local) / k for k in range(1, 8) if k * pitch < 3800)
        ramp = np.minimum(1, np.minimum(local, local[-1] - local) / 0.02)
        total[start:stop] += rng.uniform(2.0, 5.0) * ramp * tone
    # Sirens: a tone sweeping up and down.
    for start in _events(rng, n, 0.05):
        stop = min(n, start + int(rng.uniform(2.0, 5.0) * SAMPLE_RATE))
        local = t[start:stop] - t[start]
        sweep = rng.uniform(650, 900) + rng.uniform(250, 450) * np.sin(2 * np.pi * rng.uniform(0.2, 0.5) * local)
        tone = np.sin(2 * np.pi * np.cumsum(sweep) / SAMPLE_RATE)
        fade = np.minimum(1, np.minimum(local, local[-1] - local) / 0.5)
        total[start:stop] += rng.uniform(1.0, 3.0) * fade * (tone + 0.3 * np.sign(tone))
    # Knocks and footsteps: short decaying impulses.
    knocks = np.zeros(n)
    for start in _events(rng, n, 1.5):
        knocks[start] = rng.uniform(5, 25) * rng.choice([-1, 1])
    radius = 0.97
    total += lfilter([1.0], [1.0, -2 * radius * np.cos(2 * np.pi * rng.uniform(150, 600) / SAMPLE_RATE),
                             radius ** 2], knocks) * 0.05
    return total


def synth_noise(kind, n, rng):
    """Synthesise ``n`` samples of a noise type.

    Parameters
    ----------
    kind : {"white", "pink", "babble", "car", "street"}
    n : int
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape (n,)
        Telephone-band noise with unit RMS.
    """
    makers = {"white": lambda rng, n: rng.standard_normal(n), "pink": _pink, "babble": _babble,
              "car": _car, "street": _street}
    if kind not in makers:
        raise ParameterError(f"noise {kind!r}: unknown noise type; expected one of {', '.join(NOISE_TYPES)}")
    n = int(n)
    if n <= 0:
        raise ParameterError(f"n={n}: expected a positive number of samples")
    # Generate a little more so that the band filter's start-up transient is cut off.
    warm = 2000
    y = telephone_band(makers[kind](rng, n + warm))[warm:]
    return y / max(np.sqrt(np.mean(y ** 2)), 1e-12)


#: Lowest rate (Hz) of :func:`clatter`: its clinks' partials lie from 1.5 kHz up to 0.45 of the rate.
_CLATTER_LEAST_RATE = 3334


def clatter(n, rate, rng):
    """``n`` samples of kitchen clatter at ``rate``: damped clinks at random times over running water.

    Clinks come about four times a second: two to five partials between 1.5 and 7 kHz (at most
    0.45 ``rate``), each decaying in 10–60 ms, with a 2 ms click; the running water is noise whose
    power rises with frequency, 20 dB below the clinks. Full band at any ``rate`` from 3334 Hz on,
    where 0.45 ``rate`` is above 1.5 kHz (not telephone band, not among :data:`NOISE_TYPES`): the
    benchmarks' household noise.

    Returns
    -------
    ndarray, shape (n,)
        About unit RMS.

    Raises
    ------
    ParameterError
        ``n`` not a positive integer, ``rate`` not an integer of at least 3334.
    """
    n = integer_at_least("n", n, 1)
    if integer_at_least("rate", rate, 1) < _CLATTER_LEAST_RATE:
        raise ParameterError(f"rate={rate}: at least {_CLATTER_LEAST_RATE} Hz, where the clinks' partials (1.5 kHz "
                             "up to 0.45 rate) have room")
    y = np.zeros(n)
    for onset in np.flatnonzero(rng.random(n) < 4.0 / rate):
        m = min(n - onset, int(0.25 * rate))
        t = np.arange(m) / rate
        clink = sum(rng.uniform(0.3, 1.0) * np.sin(2 * np.pi * rng.uniform(1500.0, min(7000.0, 0.45 * rate)) * t)
                    * np.exp(-t / rng.uniform(0.01, 0.06)) for _ in range(rng.integers(2, 6)))
        clink += 0.5 * rng.standard_normal(m) * np.exp(-t / 0.002)
        y[onset:onset + m] += rng.uniform(0.3, 1.0) * clink
    spectrum = np.fft.rfft(rng.standard_normal(n)) * np.sqrt(np.fft.rfftfreq(n, 1 / rate) / (rate / 2))
    water = np.fft.irfft(spectrum, n)
    return y / max(np.std(y), 1e-12) + 0.1 * water / max(np.std(water), 1e-12)


def mix(clean, noise, snr):
    """Scale ``noise`` so that ``10 log10(sum(clean**2) / sum(noise**2)) = snr``.

    Returns the scaled noise; ``noise`` must be as long as ``clean`` (cut a longer recording to it).

    Raises
    ------
    ParameterError
        A ``noise`` of another length than ``clean``; an ``snr`` that is not a finite number (NaN gave a NaN
        noise, -inf an infinite one).
    """
    snr = finite_number("snr", snr)
    if len(noise) != len(clean):
        raise ParameterError(f"noise: {len(noise)} samples, clean {len(clean)}; expected as many")
    clean_energy = float(np.sum(np.square(clean)))
    noise_energy = float(np.sum(np.square(noise)))
    if noise_energy == 0.0:
        return np.zeros_like(noise)
    return noise * np.sqrt(clean_energy / (noise_energy * 10 ** (snr / 10)))


def _parse_utterances(utterances):
    if isinstance(utterances, (bool, np.bool_)):
        raise ParameterError(f"utterances={utterances!r}: expected a count in 1..{len(ALL_IDS)} or a list of ids")
    if isinstance(utterances, (int, np.integer)):
        if not 1 <= utterances <= len(ALL_IDS):
            raise ParameterError(f"utterances={utterances}: expected a count in 1..{len(ALL_IDS)} or a list of ids")
        return list(ALL_IDS[:utterances])
    ids = split_ids(utterances)
    unknown = [utterance for utterance in ids if utterance not in ALL_IDS]
    if unknown:
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        raise ParameterError(f"utterances: {', '.join(unknown[:3])}{more} not in sp01..sp30")
    return sorted(set(ids))


def _parse_noises(noises):
    noises = [noises] if isinstance(noises, str) else list(noises)
    unknown = [noise for noise in noises if noise not in NOISE_TYPES]
    if unknown:
        raise ParameterError(f"noise {', '.join(map(repr, unknown))}: unknown noise type; "
                             f"expected some of {', '.join(NOISE_TYPES)}")
    if not noises:
        raise ParameterError(f"noises: none given; expected some of {', '.join(NOISE_TYPES)}")
    return list(dict.fromkeys(noises))


def _parse_snrs(snrs):
    snrs = [snrs] if isinstance(snrs, (int, np.integer)) else list(snrs)
    try:
        snrs = [int(snr) for snr in snrs]
    except (TypeError, ValueError):
        raise ParameterError(f"snrs={snrs}: expected integers (dB)") from None
    if not snrs:
        raise ParameterError(f"snrs: none given; expected integers in {SNR_RANGE[0]}..{SNR_RANGE[1]} dB")
    outside = [snr for snr in snrs if not SNR_RANGE[0] <= snr <= SNR_RANGE[1]]
    if outside:
        raise ParameterError(f"SNR {', '.join(map(str, outside))} dB: outside {SNR_RANGE[0]}..{SNR_RANGE[1]} dB; "
                             "expected SNRs in that range")
    return list(dict.fromkeys(snrs))


MARKER = SYNTH_MARKER
_GENERATOR = "corpora.synth"


def _corpus_paths(ids, noises, snrs):
    """Relative paths (POSIX) of the files a corpus with these settings holds."""
    paths = [f"clean/{clean_name(utterance)}" for utterance in ids]
    paths += [f"noisy/{noise}_{snr}dB/{noisy_name(utterance, noise, snr)}"
              for utterance in ids for noise in noises for snr in snrs]
    return paths


#: In :func:`_read_marker`'s answer: a file the marker lists but its run never wrote (it records each hash first).
_NOT_WRITTEN = ""


def _read_marker(root):
    """The files a previous ``write_corpus`` in ``root`` wrote: ``{relative path: sha256, None (a marker from
    before hashes were recorded first: unknown) or _NOT_WRITTEN}``.

    Raises
    ------
    ParameterError
        If ``root`` holds no marker or one this module did not write.
    """
    marker = root / MARKER
    refuse = (f"{root}: not a corpus written by `sepsti corpus synth` ({{why}}); --overwrite replaces only "
              "such a corpus; choose a new or empty folder")
    if not marker.is_file() or marker.is_symlink():
        raise ParameterError(refuse.format(why=f"no {MARKER}"))
    try:
        settings = json.loads(marker.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        raise ParameterError(refuse.format(why=f"{MARKER} is not its settings file")) from None
    if not isinstance(settings, dict) or settings.get("generator") != _GENERATOR:
        raise ParameterError(refuse.format(why=f"{MARKER} is not its settings file"))
    paths = settings.get("paths")
    if isinstance(paths, dict) and all(isinstance(key, str) and (value is None or isinstance(value, str))
                                       for key, value in paths.items()):
        if settings.get("hashed_before_writing") is True:  # no hash: the run never wrote that file
            return {key: _NOT_WRITTEN if value is None else value for key, value in paths.items()}
        return paths
    try:  # written before the marker listed its files: the names follow from the settings
        return dict.fromkeys(_corpus_paths(settings["ids"], settings["noises"], settings["snrs"]))
    except (KeyError, TypeError, ValueError):
        raise ParameterError(refuse.format(why=f"{MARKER} does not list its files")) from None


def _sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _own_files(root):
    """Files of a previous run below ``root`` to remove, after checking that nothing else is there.

    Everything below ``root`` must be the marker, a file the marker lists (unchanged, when the
    marker recorded its hash; not one it lists as never written), a folder of the corpus layout or a
    temporary file of ours.

    Returns
    -------
    files : list of Path
    folders : list of Path
        Corpus folders, deepest first.

    Raises
    ------
    ParameterError
        Naming the first foreign or changed files; nothing has been touched.
    """
    from sepsti.core.io import TEMPORARY_MARKER

    listed = _read_marker(root)
    ours = {MARKER, *listed}
    folders = {str(Path(name).parent.as_posix()) for name in listed} - {"."}
    for name in list(folders):
        folders.update(parent.as_posix() for parent in Path(name).parents if str(parent) != ".")
    files, foreign, changed = [], [], []
    for folder, subfolders, names in os.walk(root):
        relative_folder = Path(folder).relative_to(root)
        for name in list(subfolders):
            relative = (relative_folder / name).as_posix()
            if relative not in folders or (Path(folder) / name).is_symlink():
                foreign.append(relative + "/")
                subfolders.remove(name)
        for name in names:
            path = Path(folder) / name
            relative = (relative_folder / name).as_posix()
            base = relative_folder / name.split(TEMPORARY_MARKER, 1)[0][1:]
            if name.startswith(".") and TEMPORARY_MARKER in name and base.as_posix() in ours:
                files.append(path)
            elif (relative not in ours or listed.get(relative) == _NOT_WRITTEN or path.is_symlink()
                  or not path.is_file()):
                foreign.append(relative)
            elif listed.get(relative) is not None and _sha256(path) != listed[relative]:
                changed.append(relative)
            else:
                files.append(path)
    if foreign:
        shown = ", ".join(sorted(foreign)[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise ParameterError(f"{root}: holds {len(foreign)} file(s) or folder(s) that `corpus synth` did not "
                             f"write ({shown}); --overwrite replaces only its own files; move them away or "
                             "choose another folder")
    if changed:
        shown = ", ".join(sorted(changed)[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        raise ParameterError(f"{root}: {len(changed)} file(s) changed since `corpus synth` wrote them ({shown}); "
                             "--overwrite does not replace edited files; move them away or choose another folder")
    return files, [root / name for name in sorted(folders, key=lambda name: -name.count("/"))]


def _prepare_root(root, overwrite):
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise ParameterError(f"{root}: exists and is not a folder")
    if root.is_dir() and any(root.iterdir()):
        if not overwrite:
            raise ParameterError(f"{root}: folder is not empty; pass --overwrite to replace the corpus in it")
        # Remove what a previous run wrote, and only that: all is checked before anything goes.
        files, folders = _own_files(root)
        for path in files:
            if path.name != MARKER:
                path.unlink()
        (root / MARKER).unlink()
        for folder in folders:
            with contextlib.suppress(OSError):  # not empty: a file kept by a failed removal
                folder.rmdir()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ParameterError(f"{root}: cannot create the folder ({error.strerror or error})") from None
    if not os.access(root, os.W_OK):
        raise ParameterError(f"{root}: folder is not writable")
    return root


def _write_marker(root, settings):
    with atomic_path(root / MARKER) as temporary:
        temporary.write_text(json.dumps(settings, indent=2) + "\n")


def _wav_bytes(samples):
    """``samples`` (int16) as the bytes of a 16-bit PCM WAV file."""
    import io

    import soundfile

    buffer = io.BytesIO()
    soundfile.write(buffer, samples, SAMPLE_RATE, subtype="PCM_16", format="WAV")
    return buffer.getvalue()


def _write_bytes(path, data):
    try:
        with atomic_path(path) as temporary:
            temporary.write_bytes(data)
    except OSError as error:
        raise ParameterError(f"{path}: cannot write it ({error.strerror or error})") from None


def _remove_run(root, written, folders):
    """Remove what a run that failed wrote: its files, the marker, and the folders it created if left empty."""
    for relative in written:
        (root / relative).unlink(missing_ok=True)
    (root / MARKER).unlink(missing_ok=True)
    for folder in folders:
        with contextlib.suppress(OSError):  # not empty: something else is in it
            folder.rmdir()


def _check_snrs(utterance, clean, scaled):
    """Refuse mixtures whose quantised energy ratio is off their label (an utterance lowered for a low SNR)."""
    clean_energy = float(np.sum(np.square(clean, dtype=np.float64)))
    for (noise, snr), noise_samples in scaled.items():
        noise_energy = float(np.sum(np.square(noise_samples, dtype=np.float64)))
        ratio = 10 * np.log10(clean_energy / noise_energy) if noise_energy > 0 else np.inf
        if not abs(ratio - snr) <= SNR_TOLERANCE:
            level = 10 * np.log10(clean_energy / clean.size / 32768.0 ** 2)
            raise ParameterError(
                f"{utterance} with {noise} at {snr} dB: 16-bit samples hold it at {ratio:.3f} dB with the "
                f"utterance at {level:.1f} dBFS (lowered so that its lowest SNR does not clip); "
                f"write the lowest SNRs separately")


def _quantise(x):
    return np.round(x * 32768.0).astype(np.int64)


def write_corpus(root, *, seed=0, utterances=30, noises=NOISE_TYPES, snrs=SNRS, overwrite=False, progress=False):
    """Write a synthetic NOIZEUS-style corpus.

    Layout: ``root/clean/spNN.wav`` and
    ``root/noisy/<noise>_<snr>dB/spNN_<noise>_sn<snr>.wav`` (16-bit PCM,
    8 kHz), plus ``root/synth.json`` recording the settings.

    Parameters
    ----------
    root : str or Path
        Output folder; created if needed. A non-empty folder is refused
        unless ``overwrite``, and even then unless it holds only what a
        previous call wrote: the marker ``synth.json`` and the files it lists
        (unchanged since; their SHA-256 is recorded). Those are removed first;
        anything else makes the call fail before a file is touched.
    seed : int
    utterances : int or iterable of str
        The first N ids (sp01..spN), or explicit ids such as ``["sp01", "sp21"]``.
    noises : iterable of str
        Noise types among :data:`NOISE_TYPES`.
    snrs : iterable of int
        SNRs in dB.
    overwrite : bool
    progress : bool
        Show a progress bar on stderr.

    Returns
    -------
    dict
        The settings written to ``synth.json`` (ids, noises, snrs, the number of
        files, and ``paths``: each file's path relative to ``root`` with its SHA-256).

    Raises
    ------
    ParameterError
        For bad settings, a folder that cannot be used, or a file that cannot be written; a run
        that fails so (not one interrupted) removes what it wrote and the folders it created.
    """
    ids = _parse_utterances(utterances)
    noises = _parse_noises(noises)
    snrs = _parse_snrs(snrs)
    if not 0 <= int(seed) < 2 ** 32:
        raise ParameterError(f"seed={seed}: expected an integer in 0..2**32-1")
    missing = [folder for folder in (Path(root), *Path(root).parents) if not folder.exists()]  # deepest first
    root = _prepare_root(root, overwrite)
    written = []
    folders = [root / "clean", root / "noisy", *(root / "noisy" / f"{noise}_{snr}dB" for noise in noises
                                                 for snr in snrs)]
    created = [folder for folder in reversed(folders) if not folder.exists()] + missing
    try:
        return _write_files(root, seed, ids, noises, snrs, folders, written, progress)
    except Exception:
        _remove_run(root, written, created)
        raise


def _write_files(root, seed, ids, noises, snrs, folders, written, progress):
    """The files of :func:`write_corpus` in a prepared ``root``; ``written`` gets each one's relative path."""
    speakers = corpus_speakers(seed)
    settings = {"generator": _GENERATOR, "seed": int(seed), "sample_rate": SAMPLE_RATE, "ids": ids,
                "noises": noises, "snrs": snrs, "files": 0, "complete": False,
                "snr_definition": "10 log10(sum(clean**2) / sum(noise**2)) over the whole file",
                "speakers": [dict(speaker._asdict()) for speaker in speakers],
                "paths": dict.fromkeys(_corpus_paths(ids, noises, snrs)), "hashed_before_writing": True}
    # The marker comes first, listing what will be written: a run that is interrupted leaves
    # a folder that --overwrite still recognises as ours.
    _write_marker(root, settings)
    bar = progress_bar(len(noises) + len(ids), desc="synthesising corpus", enabled=progress)
    records = {}
    for noise in noises:
        records[noise] = synth_noise(noise, int(NOISE_SECONDS * SAMPLE_RATE),
                                     stream(seed, _KEY_NOISE, NOISE_TYPES.index(noise)))
        bar.update()
    for folder in folders:
        folder.mkdir(exist_ok=True)
    count = 0
    for utterance in ids:
        number = int(utterance[2:])
        speaker = speakers[(number - 1) // 5]
        y = synth_utterance(stream(seed, _KEY_UTTERANCE, number), speaker)
        level = CLEAN_LEVEL_DB + stream(seed, _KEY_LEVEL, number).uniform(-2.0, 2.0)
        y *= 10 ** (level / 20) / np.sqrt(np.mean(y ** 2))
        segments = {}
        for noise in noises:
            record = records[noise]
            offset = stream(seed, _KEY_SEGMENT, NOISE_TYPES.index(noise), number).integers(0, len(record) - len(y) + 1)
            segments[noise] = record[offset:offset + len(y)]
        # Lower the utterance's level if any of its mixtures would clip.
        while True:
            clean = _quantise(y)
            scaled = {(noise, snr): _quantise(mix(clean / 32768.0, segments[noise], snr))
                      for noise in noises for snr in snrs}
            peak = max(np.abs(clean + noise_samples).max() for noise_samples in scaled.values())
            if peak <= 32767 and np.abs(clean).max() <= 32767:
                break
            y *= 0.9 * 32767 / peak
        _check_snrs(utterance, clean, scaled)
        files = [(f"clean/{clean_name(utterance)}", clean)]
        files += [(f"noisy/{noise}_{snr}dB/{noisy_name(utterance, noise, snr)}", clean + noise_samples)
                  for (noise, snr), noise_samples in scaled.items()]
        encoded = [(relative, _wav_bytes(samples.astype(np.int16))) for relative, samples in files]
        for relative, data in encoded:
            settings["paths"][relative] = hashlib.sha256(data).hexdigest()
        # each file's hash is recorded before the file exists, so a file the marker lists without one was put
        # there by someone else, and --overwrite leaves it alone
        _write_marker(root, settings)
        for relative, data in encoded:
            _write_bytes(root / relative, data)
            written.append(relative)
            count += 1
        bar.update()
    bar.close()
    settings.update(files=count, complete=True)
    _write_marker(root, settings)
    return settings
