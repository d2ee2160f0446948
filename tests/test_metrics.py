"""Tests of sepsti.metrics: BSS_EVAL figures of the speech source against hand-computable cases."""

import warnings

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.metrics import bss_eval

N = 16000
FILTER = 512


def db(ratio):
    return 10.0 * np.log10(ratio)


@pytest.fixture
def signals(rng):
    clean = rng.standard_normal(N)
    noise = 0.5 * rng.standard_normal(N)
    return clean, clean + noise, noise


def test_unprocessed_input_scores_its_snr(signals):
    clean, noisy, noise = signals
    # the mixture lies in the span of the references: no artifacts; the interference is the
    # noise less its projection on the 512 delays of the clean signal, which takes 512/N of the
    # energy of white noise on average (relative spread sqrt(2/512) of that share)
    scores = bss_eval(clean, noisy, noisy)
    snr = db(np.sum(clean**2) / (np.sum(noise**2) * (1 - FILTER / N)))
    assert abs(scores["sdr"] - snr) < 0.03
    assert abs(scores["sir"] - snr) < 0.03
    assert scores["sar"] == np.inf
    # a hair away from the mixture, the decomposition's own (finite, very large) SAR returns
    assert 100 < bss_eval(clean, noisy, noisy * (1 + 1e-12))["sar"] < np.inf


def test_scaled_and_filtered_clean_is_perfect(signals):
    clean, noisy, _ = signals
    # gains and short filters are allowed distortions in BSS_EVAL v3
    scores = bss_eval(clean, noisy, 0.3 * clean)
    assert scores["sdr"] > 100 and scores["sir"] > 100 and scores["sar"] > 100
    # a filter: only the two samples cut at the end are not explained
    scores = bss_eval(clean, noisy, np.convolve(clean, [0.5, 0.3, 0.2])[:N])
    assert scores["sdr"] > 40 and scores["sir"] > 40 and scores["sar"] > 40


def test_artifact_share_sets_sar(signals, rng):
    clean, noisy, _ = signals
    artifact = 0.1 * rng.standard_normal(N)   # independent of both references
    scores = bss_eval(clean, noisy, clean + artifact)
    # 20 dB; the share of the artifact that falls in the span of the 2 x 512 delayed references
    # counts as target or interference, raising SAR by at most -10 log10(1 - 2 * 512 / N) dB
    expected = db(np.sum(clean**2) / np.sum(artifact**2))
    bound = -db(1 - 2 * FILTER / N)
    assert expected - 0.02 < scores["sar"] < expected + bound
    assert expected - 0.02 < scores["sdr"] < expected + bound
    # interference: the artifact's projection on the 512 delays of the noise reference, 512/N of
    # its energy on average (relative spread sqrt(2/512), i.e. 0.27 dB)
    sir = db(np.sum(clean**2) / (np.sum(artifact**2) * FILTER / N))
    assert abs(scores["sir"] - sir) < 0.8


def test_matches_mir_eval_fixed_assignment(rng):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        from mir_eval.separation import bss_eval_sources

    clean = np.convolve(rng.standard_normal(8000), np.ones(5) / 5, mode="same")
    noise = rng.standard_normal(8000)
    noisy = clean + 0.7 * noise
    speech = 0.8 * clean + 0.2 * noisy + 0.05 * rng.standard_normal(8000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        sdr, sir, sar, perm = bss_eval_sources(np.stack([clean, noisy - clean]),
                                               np.stack([speech, noisy - speech]),
                                               compute_permutation=False)
    scores = bss_eval(clean, noisy, speech)
    np.testing.assert_allclose([scores["sdr"], scores["sir"], scores["sar"]], [sdr[0], sir[0], sar[0]],
                               rtol=1e-10)


def test_no_future_warning_leaks(signals):
    clean, noisy, _ = signals
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bss_eval(clean[:4000], noisy[:4000], noisy[:4000])


def test_silent_estimate_or_reference_gives_nan(signals):
    clean, noisy, _ = signals
    with pytest.warns(RuntimeWarning, match="speech estimate is silent"):
        scores = bss_eval(clean, noisy, np.zeros(N))
    assert all(np.isnan(v) for v in scores.values())
    with pytest.warns(RuntimeWarning, match="clean reference is silent"):
        scores = bss_eval(np.zeros(N), noisy, noisy)
    assert all(np.isnan(v) for v in scores.values())


def test_scores_do_not_depend_on_the_signals_scale(signals, rng):
    """At 1e-300 mir_eval's Gram matrix underflowed to a singular one, and its fallback named np.linalg.linalg,
    gone in NumPy 2: AttributeError. A power of two leaves the scores' bits as they are."""
    clean, noisy, _ = signals
    speech = clean + 0.1 * rng.standard_normal(N)
    reference = bss_eval(clean, noisy, speech)
    assert bss_eval(4.0 * clean, 4.0 * noisy, 4.0 * speech) == reference
    for scale in (1e-300, 1e-310, 1e300):  # 1e-310: subnormal peaks, where a factor 2**1030 overflowed
        scores = bss_eval(scale * clean, scale * noisy, scale * speech)
        for name, value in reference.items():
            assert scores[name] == pytest.approx(value, abs=1e-9), name


def test_a_singular_projection_gives_nan_with_a_warning():
    with pytest.warns(RuntimeWarning, match="projection is singular"):
        scores = bss_eval([0.1], [0.2], [0.15])
    assert all(np.isnan(v) for v in scores.values())


def test_noise_free_mixture(signals, rng):
    clean, _, _ = signals
    # noisy == clean: no interference reference; the estimate's noise part is all artifact
    artifact = 0.1 * rng.standard_normal(N)
    scores = bss_eval(clean, clean, clean + artifact)
    assert scores["sir"] == np.inf
    expected = db(np.sum(clean**2) / (np.sum(artifact**2) * (1 - FILTER / N)))
    assert abs(scores["sar"] - expected) < 0.03
    # the noiseless mixture scored as it is: the clean speech itself, no distortion of any kind
    assert bss_eval(clean, clean, clean) == {"sdr": np.inf, "sir": np.inf, "sar": np.inf}


@pytest.mark.parametrize("args, match", [
    ((np.zeros((2, 10)), np.zeros(10), np.zeros(10)), "clean: expected a 1-D"),
    ((np.ones(10), np.ones(9), np.ones(10)), "noisy: length 9"),
    ((np.ones(10), np.ones(10), np.full(10, np.nan)), "speech: contains NaN"),
    ((np.ones(0), np.ones(0), np.ones(0)), "clean: the signal is empty"),
])
def test_bad_input(args, match):
    with pytest.raises(ParameterError, match=match):
        bss_eval(*args)


def test_scores_pinned_on_three_recordings():
    """BSS_EVAL v3 numbers of mir_eval's bss_eval_sources, pinned (tests/generate_bss_eval_data.py).

    mir_eval.separation goes away in mir_eval 0.9; whatever replaces it in sepsti.metrics
    must reproduce these numbers (docs/metrics.md).
    """
    import json
    from pathlib import Path

    data = np.load(Path(__file__).resolve().parent / "data" / "bss_eval_pinned.npz")
    pinned = json.loads(str(data["scores"]))
    assert len(pinned) == 3
    for number, expected in enumerate(pinned):
        clean, noisy, speech = data[f"case{number}"] / 32768.0
        scores = bss_eval(clean, noisy, speech)
        for metric in ("sdr", "sir", "sar"):
            assert scores[metric] == pytest.approx(expected[metric], abs=1e-6), (number, metric)


# --------------------------------------------------------------------------------------------
# STOI and PESQ


def speech(rate, seed=5, seconds=2.0):
    from test_cli_train import speech_like

    return speech_like(np.random.default_rng(seed), seconds=seconds, rate=rate)


def at_snr(clean, noise, snr):
    return clean + noise * np.sqrt(np.sum(clean**2) / np.sum(noise**2) / 10 ** (snr / 10))


@pytest.mark.parametrize("rate", [8000, 16000])
@pytest.mark.parametrize("extended", [False, True])
def test_stoi_is_one_on_clean_speech_and_falls_with_noise(rate, extended, rng):
    from sepsti.metrics import stoi

    clean = speech(rate)
    noise = rng.standard_normal(clean.size)
    assert stoi(clean, clean, rate, extended=extended) == pytest.approx(1.0, abs=1e-9)
    scores = [stoi(clean, at_snr(clean, noise, snr), rate, extended=extended) for snr in (20, 5, -5)]
    assert 1 > scores[0] > scores[1] > scores[2], scores


@pytest.mark.parametrize("extended", [False, True])
def test_stoi_does_not_depend_on_the_signals_scale(extended, rng):
    # pystoi's absolute epsilon scored a 5 dB mixture like this one, scaled by 1e-20, at 1.6e-10 (0.652 at its
    # level), and at 1e300 found no active frame
    from sepsti.metrics import stoi, stoi_bands

    clean = speech(8000)
    noisy = at_snr(clean, rng.standard_normal(clean.size), 5)
    reference = stoi(clean, noisy, 8000, extended=extended)
    bands = stoi_bands(clean, noisy, 8000)
    assert 0.3 < reference < 0.99
    for scale in (1e-20, 1e-310, 1e300):  # subnormal samples (1e-310) keep fewer digits: 7e-12 there
        assert stoi(scale * clean, scale * noisy, 8000, extended=extended) == pytest.approx(reference, abs=1e-10)
        np.testing.assert_allclose(stoi_bands(scale * clean, scale * noisy, 8000)[0], bands[0], atol=1e-10)


def test_stoi_takes_a_rate_given_as_a_0_d_array(rng):
    from sepsti.metrics import stoi

    clean = speech(16000)
    noisy = at_snr(clean, rng.standard_normal(clean.size), 5)
    assert stoi(clean, noisy, np.array(16000)) == stoi(clean, noisy, 16000)


@pytest.mark.parametrize("rate, mode", [(8000, "nb"), (16000, "wb")])
def test_pesq_is_high_on_clean_speech_and_falls_with_noise(rate, mode, rng):
    from sepsti.metrics import pesq, pesq_mode

    assert pesq_mode(rate) == mode
    clean = speech(rate)
    noise = rng.standard_normal(clean.size)
    assert pesq(clean, clean, rate) >= 4.0
    scores = [pesq(clean, at_snr(clean, noise, snr), rate) for snr in (20, 5, -5)]
    assert 4.0 > scores[0] > scores[1] > scores[2] >= 1.0, scores


@pytest.mark.parametrize("rate, mode, pesq_rate", [
    (8000, "nb", 8000), (16000, "wb", 16000),
    (11025, "nb", 8000), (44100, "wb", 16000), (6000, "nb", 8000),   # resampled first
])
def test_scores_are_the_libraries_own_on_the_same_arrays(rate, mode, pesq_rate, rng):
    from pesq import pesq as library_pesq
    from pystoi import stoi as library_stoi
    from scipy.signal import resample_poly

    from sepsti.metrics import pesq, pesq_mode, stoi

    clean = speech(rate)
    noisy = at_snr(np.roll(clean, 3), rng.standard_normal(clean.size), 5)   # a small delay: PESQ aligns it
    assert pesq_mode(rate) == mode
    assert stoi(clean, noisy, rate) == pytest.approx(library_stoi(clean, noisy, rate), abs=1e-12)
    assert stoi(clean, noisy, rate, extended=True) == pytest.approx(library_stoi(clean, noisy, rate, extended=True),
                                                                    abs=1e-12)
    common = np.gcd(rate, pesq_rate)
    expected = library_pesq(pesq_rate, resample_poly(clean, pesq_rate // common, rate // common),
                            resample_poly(noisy, pesq_rate // common, rate // common), mode)
    # the block resampler equals resample_poly to rounding; PESQ works in float32
    assert pesq(clean, noisy, rate) == pytest.approx(expected, abs=1e-4)
    # the level of the signals does not enter either score
    assert stoi(0.1 * clean, 3.0 * noisy, rate) == pytest.approx(stoi(clean, noisy, rate), abs=1e-9)
    assert pesq(0.1 * clean, 0.1 * noisy, rate) == pytest.approx(pesq(clean, noisy, rate), abs=1e-4)


@pytest.mark.parametrize("rate", [8000, 16000])
def test_stoi_bands_average_to_the_librarys_stoi_and_place_the_loss(rate, rng):
    from pystoi import stoi as library_stoi
    from scipy.signal import butter, sosfilt

    from sepsti.metrics import stoi_bands

    clean = speech(rate)
    high = sosfilt(butter(8, 2000, "highpass", fs=rate, output="sos"), rng.standard_normal(clean.size))
    noisy = at_snr(clean, high, 0)   # noise above 2 kHz only
    values, centres = stoi_bands(clean, noisy, rate)
    assert values.shape == centres.shape == (15,)
    assert values.mean() == pytest.approx(library_stoi(clean, noisy, rate), abs=1e-12)
    assert np.all(values[centres < 1000] > 0.99), values
    assert values[centres > 2500].mean() < 0.9, values
    assert np.allclose(stoi_bands(clean, clean, rate)[0], 1.0)


def test_stoi_band_levels_show_speech_removed_and_noise_left(rng):
    from sepsti.metrics import stoi_band_levels

    clean = speech(8000)
    strong, weak, centres = stoi_band_levels(clean, 0.5 * clean, 8000)
    assert np.allclose(strong, 20 * np.log10(0.5)) and np.allclose(weak, 20 * np.log10(0.5))
    assert centres.shape == (15,)
    # steady noise fills the frames where the talker is quiet in a band more than those where it is loud
    strong, weak, _ = stoi_band_levels(clean, at_snr(clean, rng.standard_normal(clean.size), 10), 8000)
    assert np.all(weak >= strong - 0.05) and np.mean(weak - strong) > 3, (strong, weak)
    with pytest.raises(ParameterError, match="share"):
        stoi_band_levels(clean, clean, 8000, share=0.6)


def _rising_tones():
    """Tones at the centres of STOI's bands from 400 Hz (below, neighbouring tones beat within a window), all
    rising by 20 dB over 5 s at STOI's own rate: in each such band the frames' order from weakest to strongest
    is their order in time. Returns the signal, its times, the rate and the toned bands."""
    from pystoi.stoi import CF

    rate, seconds = 10000, 5.0
    time = np.arange(int(rate * seconds)) / rate
    toned = np.asarray(CF) >= 400
    tones = sum(np.sin(2 * np.pi * f * time + k) for k, f in enumerate(np.asarray(CF)[toned]))
    return 10 ** (time / seconds - 1) * tones, time / seconds, rate, toned


def test_band_levels_compare_the_weakest_and_strongest_30_percent_of_frames():
    """The levels are over the weakest and strongest 30 % of frames (docs/metrics.md): gaps between them leave 0 dB."""
    from sepsti.metrics import stoi_band_levels

    clean, fraction, rate, toned = _rising_tones()

    def muted(*spans):
        return clean * ~np.any([(fraction >= start) & (fraction < stop) for start, stop in spans], axis=0)

    strong, weak, _ = stoi_band_levels(clean, muted((0.33, 0.67)), rate)
    np.testing.assert_allclose(strong[toned], 0.0, atol=1e-9)
    np.testing.assert_allclose(weak[toned], 0.0, atol=1e-9)
    # gaps just inside the weakest and the strongest 30 % lower both levels
    strong, weak, _ = stoi_band_levels(clean, muted((0.24, 0.29), (0.71, 0.76)), rate)
    assert np.all(strong[toned] < -0.5) and np.all(weak[toned] < -0.5), (strong, weak)
    # share=0.5, the largest allowed: the two halves take every frame, the muted middle among them
    strong, weak, _ = stoi_band_levels(clean, muted((0.33, 0.67)), rate, share=0.5)
    assert np.all(strong[toned] < -0.5) and np.all(weak[toned] < -0.5), (strong, weak)


def test_band_scores_undefined_with_a_warning():
    from sepsti.metrics import stoi_band_levels, stoi_bands

    clean = speech(8000)
    with pytest.warns(RuntimeWarning, match="clean reference is silent"):
        assert np.all(np.isnan(stoi_bands(np.zeros_like(clean), clean, 8000)[0]))
    with pytest.warns(RuntimeWarning, match="less than 384 ms"):
        strong, weak, _ = stoi_band_levels(clean[:1600], clean[:1600], 8000)
    assert np.all(np.isnan(strong)) and np.all(np.isnan(weak))


def test_pesq_mode_can_be_chosen(rng):
    from pesq import pesq as library_pesq
    from scipy.signal import resample_poly

    from sepsti.metrics import pesq

    clean = speech(16000)
    noisy = at_snr(clean, rng.standard_normal(clean.size), 10)
    narrow = library_pesq(8000, resample_poly(clean, 1, 2), resample_poly(noisy, 1, 2), "nb")
    assert pesq(clean, noisy, 16000, mode="nb") == pytest.approx(narrow, abs=1e-4)
    assert pesq(clean, noisy, 16000, mode="wb") == library_pesq(16000, clean, noisy, "wb")


@pytest.mark.parametrize("case, match", [
    ("silent clean", "clean reference is silent"),
    ("silent estimate", "speech estimate is silent"),
    ("too short", None),
    ("vanishing estimate", None),
])
def test_undefined_perceptual_scores_are_nan_with_a_warning(case, match):
    from sepsti.metrics import pesq, stoi

    clean = speech(8000)
    estimate = clean + 0.01 * np.sin(np.arange(clean.size))
    if case == "silent clean":
        clean = np.zeros_like(clean)
    elif case == "silent estimate":
        estimate = np.zeros_like(clean)
    elif case == "too short":
        clean, estimate = clean[:1600], estimate[:1600]   # 0.2 s: under STOI's 384 ms and PESQ's 1/4 s
    else:
        estimate = 1e-40 * estimate   # vanishes in PESQ's float32 beside the reference
    stoi_match = {"too short": "less than 384 ms of active clean speech"}.get(case, match)
    pesq_match = {"too short": "at least 1/4 of a second",
                  "vanishing estimate": "failed on these signals"}.get(case, match)
    if stoi_match is not None:
        with pytest.warns(RuntimeWarning, match=f"{stoi_match}.*STOI is undefined"):
            assert np.isnan(stoi(clean, estimate, 8000))
    with pytest.warns(RuntimeWarning, match=f"{pesq_match}.*PESQ is undefined"):
        assert np.isnan(pesq(clean, estimate, 8000))


def test_perceptual_scores_leak_no_warning(rng):
    from sepsti.metrics import pesq, stoi

    clean = speech(8000)
    noisy = at_snr(clean, rng.standard_normal(clean.size), 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stoi(clean, noisy, 8000)
        pesq(clean, noisy, 8000)


@pytest.mark.parametrize("call, match", [
    (lambda f: f(np.ones(8000), np.ones(7999), 8000), "speech: length 7999"),
    (lambda f: f(np.ones((2, 8000)), np.ones(8000), 8000), "clean: expected a 1-D"),
    (lambda f: f(np.ones(8000), np.full(8000, np.inf), 8000), "speech: contains NaN or Inf"),
    (lambda f: f(np.ones(8000), np.ones(8000), 0), "sample_rate=0"),
    (lambda f: f(np.ones(8000), np.ones(8000), 8000.5), "sample_rate: sample rate 8000.5 is not a whole"),
    (lambda f: f(np.ones(8000), np.ones(8000), "8k"), "sample_rate: sample rate '8k' is not a whole"),
])
@pytest.mark.parametrize("name", ["stoi", "pesq"])
def test_perceptual_scores_bad_input(name, call, match):
    import sepsti.metrics

    with pytest.raises(ParameterError, match=match):
        call(getattr(sepsti.metrics, name))
    if name == "pesq":
        with pytest.raises(ParameterError, match="mode='swb'"):
            sepsti.metrics.pesq(np.ones(8000), np.ones(8000), 8000, mode="swb")


def test_unavailable_scores_names_the_missing_packages(monkeypatch):
    import sys

    from sepsti.metrics import SCORE_PACKAGES, unavailable_scores

    assert unavailable_scores() == {}
    monkeypatch.setitem(sys.modules, "pesq", None)
    assert unavailable_scores() == {"pesq": "pesq"}
    monkeypatch.setitem(sys.modules, "pystoi", None)
    assert unavailable_scores() == SCORE_PACKAGES


# --------------------------------------------------------------------------------------------
# the band above 4 kHz


def test_high_band_share_of_two_tones():
    """Tones of whole periods at 1 and 6 kHz with amplitudes 1 and 0.5: a fifth of the energy lies above 4 kHz."""
    from sepsti.metrics import high_band_share

    rate, t = 16000, np.arange(16000) / 16000
    y = np.sin(2 * np.pi * 1000 * t) + 0.5 * np.sin(2 * np.pi * 6000 * t)
    assert high_band_share(y, rate) == pytest.approx(0.2, abs=1e-9)
    assert high_band_share(y, rate, cutoff=7000) == pytest.approx(0.0, abs=1e-12)
    assert high_band_share(np.zeros(100), rate) == 0.0


def test_high_band_level_takes_its_cutoff_for_both_signals():
    """Tones of whole periods at 1, 3 and 6 kHz: with the cutoff at 2 kHz the clean speech (1 and 3 kHz, equal
    amplitudes) has half its energy above it, the estimate (all three) two thirds: 10 log10(4/3) = 1.25 dB."""
    from sepsti.metrics import high_band_level

    rate, t = 16000, np.arange(16000) / 16000
    clean = np.sin(2 * np.pi * 1000 * t) + np.sin(2 * np.pi * 3000 * t)
    estimate = clean + np.sin(2 * np.pi * 6000 * t)
    assert high_band_level(clean, estimate, rate, cutoff=2000) == pytest.approx(10 * np.log10(4 / 3), abs=1e-9)


@pytest.mark.parametrize("cutoff", [-5, 0, np.nan, "4000"])
def test_a_cutoff_that_is_not_a_positive_frequency_is_refused(cutoff):
    """cutoff=-5 gave a level of 0.0, 0 one of -8.6e-10, '4000' a bare UFuncTypeError."""
    from sepsti.metrics import high_band_level, high_band_share

    y = np.random.default_rng(0).standard_normal(16000)
    for call in (lambda: high_band_share(y, 16000, cutoff=cutoff), lambda: high_band_level(y, y, 16000, cutoff=cutoff)):
        with pytest.raises(ParameterError, match=r"^cutoff=.* must be a positive number$"):
            call()


def _band_scaled(y, rate, gain, cutoff=4000.0):
    """``y`` with every frequency above ``cutoff`` scaled by ``gain`` (an ideal filter)."""
    spectrum = np.fft.rfft(y)
    spectrum[np.fft.rfftfreq(y.size, 1 / rate) > cutoff] *= gain
    return np.fft.irfft(spectrum, n=y.size)


def fricative_speech(rng, rate=16000, seconds=2.0):
    """Voiced sound (harmonics of 150 Hz below 3 kHz) alternating every 0.1 s with hiss at 4–7 kHz."""
    n = int(rate * seconds)
    t = np.arange(n) / rate
    voiced = sum(np.sin(2 * np.pi * 150 * k * t) / k for k in range(1, 20))
    hiss = _band_scaled(rng.normal(size=n), rate, 0.0, cutoff=7000)  # below 7 kHz
    hiss = hiss - _band_scaled(hiss, rate, 0.0)  # and above 4 kHz
    fricative = (t // 0.1) % 2 == 1
    return np.where(fricative, 0.3 * hiss, 0.5 * voiced)


def test_high_band_and_fricative_levels_know_a_cut_and_a_gain(rng):
    """A gain of 0.5 above 4 kHz is −6.02 dB in the fricative frames; a cut at 4 kHz deletes them."""
    from sepsti.metrics import fricative_level, high_band_level, high_band_share

    rate = 16000
    clean = fricative_speech(rng, rate)
    assert high_band_level(clean, clean, rate) == pytest.approx(0.0, abs=1e-9)
    level, frames = fricative_level(clean, clean, rate)
    assert level == pytest.approx(0.0, abs=1e-9) and frames >= 25  # 1 s of hiss in 32 ms frames
    halved = _band_scaled(clean, rate, 0.5)
    assert fricative_level(clean, halved, rate)[0] == pytest.approx(20 * np.log10(0.5), abs=0.05)
    share = high_band_share(clean, rate)  # a quarter of the band's energy, so of the share: 1 / 4 (1 − 3/4 share)
    assert high_band_level(clean, halved, rate) == pytest.approx(10 * np.log10(0.25 / (1 - 0.75 * share)), abs=1e-9)
    cut = _band_scaled(clean, rate, 0.0)
    assert fricative_level(clean, cut + 1e-9 * rng.normal(size=cut.size), rate)[0] < -30  # what leaks from below
    noisy = clean + 0.05 * rng.normal(size=clean.size)  # white noise adds energy above 4 kHz
    assert high_band_level(clean, noisy, rate) > 0


@pytest.mark.parametrize("case, match", [
    (lambda clean: (clean, clean, 8000), "no band above 4000 Hz"),
    (lambda clean: (clean, np.zeros_like(clean), 16000), "silent"),
])
def test_band_levels_undefined_with_a_warning(rng, case, match):
    from sepsti.metrics import fricative_level, high_band_level

    clean = fricative_speech(rng)
    with pytest.warns(RuntimeWarning, match=match):
        assert np.isnan(high_band_level(*case(clean)))
    with pytest.warns(RuntimeWarning, match=match):
        assert fricative_level(*case(clean)) == (pytest.approx(np.nan, nan_ok=True), 0)
    voiced_only = np.sin(2 * np.pi * 200 * np.arange(16000) / 16000)
    with pytest.warns(RuntimeWarning, match="no frame mostly above"):
        assert np.isnan(fricative_level(voiced_only, voiced_only, 16000)[0])


def test_warnings_once_names_the_file_and_repeats_nothing():
    """Two signals scored against a clean tone with nothing above 4 kHz: one fricative warning, named."""
    from sepsti.metrics import fricative_level, warnings_once

    rate = 16000
    clean = np.sin(2 * np.pi * 300 * np.arange(rate) / rate)
    with pytest.warns(RuntimeWarning) as caught:
        with warnings_once("a.wav"):
            fricative_level(clean, clean, rate)
            fricative_level(clean, 0.5 * clean, rate)
            warnings.warn("another", UserWarning)
    assert [(w.category, str(w.message)) for w in caught] == [
        (RuntimeWarning, "a.wav: fricative_level: the clean speech has no frame mostly above the cutoff; the "
                         "fricative level is undefined (NaN)"),
        (UserWarning, "a.wav: another")]


def test_fricative_frames_are_the_32_ms_frames_mostly_above_the_cutoff_within_40_dB(rng):
    """Frames of 512 samples at 16 kHz (32 ms), each a 1 kHz tone ("voiced") and/or a 6 kHz one ("hiss") of a
    whole number of periods, a random phase each: a frame's energy above 4 kHz is exactly its hiss's. Chosen:
    the three hiss frames, one with 55 % of its energy hiss, and a hiss frame 30 dB below the loudest; not
    chosen: voiced frames, one with 45 % hiss, a hiss frame 45 dB down (beyond 40 dB), a silent one. With the
    cutoff at 500 Hz every frame within 40 dB is chosen, at 7 kHz none."""
    from sepsti.metrics import fricative_level

    rate, frame = 16000, 512
    t = np.arange(frame) / rate

    def tone(frequency, energy):  # mean square ``energy``
        return np.sqrt(2 * energy) * np.sin(2 * np.pi * frequency * t + rng.uniform(0, 2 * np.pi))

    def part(voiced, hiss):
        return tone(1000.0, voiced) + tone(6000.0, hiss)

    energies = [(1, 0), (0, 1), (1, 0), (0, 1), (0, 1), (0.55, 0.45), (1, 0), (0.45, 0.55), (0, 1e-3), (0, 10**-4.5),
                (1, 0), (0, 0), (1, 0)]  # (voiced, hiss) per frame
    chosen = {1, 3, 4, 7, 8}
    clean = np.concatenate([part(*energy) for energy in energies])
    level, count = fricative_level(clean, clean, rate)
    assert (level, count) == (pytest.approx(0.0, abs=1e-9), len(chosen))
    # the hiss halved in the chosen frames only: -6.02 dB
    halved = np.concatenate([part(voiced, hiss / 4 if i in chosen else hiss)
                             for i, (voiced, hiss) in enumerate(energies)])
    assert fricative_level(clean, halved, rate)[0] == pytest.approx(20 * np.log10(0.5), abs=1e-6)
    assert fricative_level(clean, clean, rate, cutoff=500) == (pytest.approx(0.0, abs=1e-9), len(energies) - 2)
    with pytest.warns(RuntimeWarning, match="no frame mostly above the cutoff"):
        assert fricative_level(clean, clean, rate, cutoff=7000)[1] == 0


def test_high_band_level_of_an_estimate_with_nothing_above_the_cutoff_is_undefined(rng):
    """An estimate with no energy at all above 4 kHz (a constant over 2^14 samples: the FFT's only non-zero bin
    is DC, exactly) has no high-band level: NaN with a RuntimeWarning, as documented, not −inf."""
    from sepsti.metrics import high_band_level, high_band_share

    rate = 16000
    clean = fricative_speech(rng, rate)[:2 ** 14]
    estimate = np.full(2 ** 14, 0.1)
    assert high_band_share(clean, rate) > 0.1 and high_band_share(estimate, rate) == 0.0
    with pytest.warns(RuntimeWarning, match="no energy above the cutoff"):
        level = high_band_level(clean, estimate, rate)
    assert np.isnan(level)


def test_stoi_bands_of_27_active_frames_are_undefined(rng):
    """White noise of 3840 samples at STOI's 10 kHz: pystoi's silent-frame removal keeps its
    ceil((3840 − 256) / 128) = 28 frames of 256 (overlap-added back to 27 · 128 + 256 = 3712 samples), whose
    STFT then has (3712 − 256) / 128 = 27 frames: fewer than one 384 ms segment (30), so NaN in every band with
    a warning, no error."""
    from sepsti.metrics import stoi_bands

    clean = rng.standard_normal(3840)
    with pytest.warns(RuntimeWarning, match="less than 384 ms"):
        values, centres = stoi_bands(clean, clean, 10000)
    assert values.shape == (15,) and np.all(np.isnan(values))


def test_stoi_is_defined_from_its_30th_frame_as_pystoi_is(rng):
    """White noise at STOI's 10 kHz: every frame active, so 4097 samples keep ceil(3841 / 128) = 31 frames of 256,
    overlap-added to 30 * 128 + 256 = 4096 samples, whose STFT has (4096 - 256) / 128 = 30 frames: one segment,
    scored (pystoi's STOI, without its warning; 0.41 s, above the 384 ms shortcut). One sample less keeps 30 frames,
    an STFT of 29: undefined."""
    from pystoi import stoi as library_stoi

    from sepsti.metrics import stoi, stoi_bands

    clean = rng.standard_normal(4097)
    noisy = clean + 0.5 * rng.standard_normal(clean.size)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expected = library_stoi(clean, noisy, 10000)
        assert stoi(clean, noisy, 10000) == pytest.approx(expected, abs=1e-12)
        values, _ = stoi_bands(clean, noisy, 10000)
    assert values.mean() == pytest.approx(expected, abs=1e-12)
    with pytest.warns(RuntimeWarning, match="less than 384 ms"):
        assert np.isnan(stoi(clean[:-1], noisy[:-1], 10000))
    with pytest.warns(RuntimeWarning, match="less than 384 ms"):
        assert np.all(np.isnan(stoi_bands(clean[:-1], noisy[:-1], 10000)[0]))


def test_band_levels_take_the_share_of_frames_rounded_to_the_nearest_count(rng):
    """White noise of 4097 + 2 * 128 samples at 10 kHz has 32 active frames (as above, two more): the 30 % of them
    are 9.6, rounded to 10 frames, the levels of share=10/32 exactly, not of 9/32."""
    from sepsti.metrics import stoi_band_levels

    clean = rng.standard_normal(4097 + 2 * 128)
    noisy = clean + rng.standard_normal(clean.size)
    levels = {share: stoi_band_levels(clean, noisy, 10000, share=share)[:2] for share in (0.3, 10 / 32, 9 / 32)}
    for which in (0, 1):
        np.testing.assert_array_equal(levels[0.3][which], levels[10 / 32][which])
        assert not np.array_equal(levels[0.3][which], levels[9 / 32][which])


def test_pesq_past_its_safe_length_is_undefined_and_never_reaches_the_library(monkeypatch):
    """The pesq library keeps 50 utterances in fixed tables and writes past them on longer speech (ludlows/PESQ
    #18: a segmentation fault from 120 s of NOIZEUS at 8 kHz, 140 s of LibriSpeech at 16 kHz): a longer pair is NaN
    with one warning, decided before the library is called; up to the limit the library is called as ever."""
    import pesq as library

    from sepsti.metrics import PESQ_MAX_SECONDS, pesq

    calls = []
    monkeypatch.setattr(library, "pesq", lambda rate, clean, speech, mode: calls.append(len(clean) / rate) or 2.5)
    for rate in (8000, 16000):
        piece = speech(rate)
        clean = np.tile(piece, int(PESQ_MAX_SECONDS * rate) // piece.size + 1)
        noisy = clean + 0.01 * np.sin(np.arange(clean.size))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert np.isnan(pesq(clean, noisy, rate))
        assert [str(w.message) for w in caught] == [
            f"pesq: {clean.size / rate:.1f} s, longer than the {PESQ_MAX_SECONDS:g} s the pesq library scores safely "
            "(it overruns its table of 50 utterances); PESQ is undefined (NaN)"]
        limit = int(PESQ_MAX_SECONDS * rate)
        assert pesq(clean[:limit], noisy[:limit], rate) == 2.5
    assert calls == [PESQ_MAX_SECONDS, PESQ_MAX_SECONDS]


@pytest.mark.parametrize("rate, length", [(8000, 10), (8000, 200), (8000, 300), (16000, 400), (44100, 1000)])
def test_stoi_of_a_signal_shorter_than_one_frame_is_undefined_not_an_error(rate, length, rng):
    """pystoi fails (AxisError, matmul size mismatch) on less than one of its frames: the same NaN and warning as
    for too little active speech, from the three STOI functions."""
    from sepsti.metrics import stoi, stoi_band_levels, stoi_bands

    clean = rng.standard_normal(length)
    noisy = clean + 0.1 * rng.standard_normal(length)
    for extended in (False, True):
        with pytest.warns(RuntimeWarning, match="stoi: less than 384 ms of active clean speech"):
            assert np.isnan(stoi(clean, noisy, rate, extended=extended))
    with pytest.warns(RuntimeWarning, match="stoi_bands: less than 384 ms of active clean speech"):
        assert np.all(np.isnan(stoi_bands(clean, noisy, rate)[0]))
    with pytest.warns(RuntimeWarning, match="stoi_band_levels: less than 384 ms of active clean speech"):
        strong, weak, _ = stoi_band_levels(clean, noisy, rate)
    assert np.all(np.isnan(strong)) and np.all(np.isnan(weak))


def test_stoi_bands_of_one_active_frame_in_a_long_signal_are_undefined(rng):
    """One second whose only sound is a click in its first 12.8 ms: pystoi's silent-frame removal keeps one frame,
    which its STFT cannot frame at all (pystoi's STOI says so; the band functions multiplied an empty array)."""
    from sepsti.metrics import stoi, stoi_band_levels, stoi_bands

    rate = 10000
    clean = np.zeros(rate)
    clean[:40] = rng.standard_normal(40)
    noisy = clean + 1e-3 * rng.standard_normal(rate)
    with pytest.warns(RuntimeWarning, match="less than 384 ms of active clean speech"):
        assert np.isnan(stoi(clean, noisy, rate))
    with pytest.warns(RuntimeWarning, match="stoi_bands: less than 384 ms of active clean speech"):
        assert np.all(np.isnan(stoi_bands(clean, noisy, rate)[0]))
    with pytest.warns(RuntimeWarning, match="stoi_band_levels: less than 384 ms of active clean speech"):
        assert np.all(np.isnan(stoi_band_levels(clean, noisy, rate)[0]))


def test_high_band_level_of_band_limited_clean_speech_is_undefined(rng):
    """Clean speech with next to nothing above 4 kHz (a share of 1e-7: the leakage of 8 kHz speech upsampled) has no
    high-band level: the ratio of the noise's share to that leakage was a large, meaningless level; NaN below
    HIGH_BAND_FLOOR with a warning. Speech with a real band there keeps its level, without a warning."""
    from sepsti.metrics import HIGH_BAND_FLOOR, high_band_level, high_band_share

    rate = 16000
    n = 2 * rate
    t = np.arange(n) / rate
    voiced = 0.5 * sum(np.sin(2 * np.pi * 150 * k * t) / k for k in range(1, 20))  # below 3 kHz
    hiss = rng.normal(size=n)
    clean = voiced + 2e-4 * (hiss - _band_scaled(hiss, rate, 0.0))  # and a trace above 4 kHz
    noisy = clean + 0.003 * rng.normal(size=n)
    assert 1e-8 < high_band_share(clean, rate) < HIGH_BAND_FLOOR / 10
    with pytest.warns(RuntimeWarning, match=r"high_band_level: the clean speech has .* of its energy above 4000 Hz, "
                                            r"below the floor of 1e-05 \(band-limited speech\)"):
        assert np.isnan(high_band_level(clean, noisy, rate))
    wide = fricative_speech(rng, rate)
    assert high_band_share(wide, rate) > 1000 * HIGH_BAND_FLOOR
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert high_band_level(wide, wide + 0.003 * rng.normal(size=n), rate) > 0


@pytest.mark.noizeus
def test_high_band_level_of_upsampled_noizeus_is_undefined_while_real_wideband_speech_is_far_above_the_floor(
        noizeus_root):
    """NOIZEUS sp22 and its car 5 dB mixture upsampled to 16 kHz (+11.6 dB before the floor); the clean wideband
    speech in ../shared/data/wideband, when there, has shares at least ten times the floor."""
    import glob

    import soundfile
    from scipy.signal import resample_poly

    from sepsti.metrics import HIGH_BAND_FLOOR, high_band_level, high_band_share

    clean = resample_poly(soundfile.read(noizeus_root / "clean" / "sp22.wav")[0], 2, 1)
    noisy = resample_poly(soundfile.read(noizeus_root / "noisy" / "car_5dB" / "sp22_car_sn5.wav")[0], 2, 1)
    with pytest.warns(RuntimeWarning, match="below the floor"):
        assert np.isnan(high_band_level(clean, noisy, 16000))
    files = sorted(glob.glob(str(noizeus_root.parent / "wideband" / "librispeech" / "*" / "*.flac")))[:20]
    for path in files:
        assert high_band_share(*soundfile.read(path)) > 10 * HIGH_BAND_FLOOR, path


def test_stoi_takes_extended_as_a_flag_only(rng):
    """extended='no' ran the extended measure."""
    from sepsti.metrics import stoi

    signal = rng.standard_normal(16000)
    with pytest.raises(ParameterError, match=r"^extended='no': expected True or False$"):
        stoi(signal, signal, 16000, extended="no")


def test_the_high_band_level_is_defined_from_high_band_floor_up():
    """Tones of whole periods at 1 kHz (amplitude 1) and 6 kHz (amplitude a) put a² / (1 + a²) of the energy above
    4 kHz: a clean signal with twice HIGH_BAND_FLOOR there has a level (0 dB against itself), one with half of it
    none."""
    from sepsti.metrics import HIGH_BAND_FLOOR, high_band_level

    rate, t = 16000, np.arange(16000) / 16000
    for factor, defined in ((2.0, True), (0.5, False)):
        share = factor * HIGH_BAND_FLOOR
        clean = np.sin(2 * np.pi * 1000 * t) + np.sqrt(share / (1 - share)) * np.sin(2 * np.pi * 6000 * t)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            level = high_band_level(clean, clean, rate)
        if defined:
            assert level == pytest.approx(0.0, abs=1e-9)
        else:
            assert np.isnan(level)
