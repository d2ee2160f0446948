"""Tests of sepsti.metrics: BSS_EVAL figures of the speech source against hand-computable cases."""

import warnings

import numpy as np
import pytest

from core.errors import ParameterError
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


def test_noise_free_mixture(signals, rng):
    clean, _, _ = signals
    # noisy == clean: no interference reference; the estimate's noise part is all artifact
    artifact = 0.1 * rng.standard_normal(N)
    scores = bss_eval(clean, clean, clean + artifact)
    assert scores["sir"] == np.inf
    expected = db(np.sum(clean**2) / (np.sum(artifact**2) * (1 - FILTER / N)))
    assert abs(scores["sar"] - expected) < 0.03
    # an estimate equal to the mixture scores noisy - speech == 0 without trouble
    assert bss_eval(clean, clean, clean)["sdr"] > 100


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
