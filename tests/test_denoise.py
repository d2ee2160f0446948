"""Tests of sepsti.denoise: dictionary training, noise model, enhancement on toy and NOIZEUS data."""

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti import features
from sepsti.denoise import denoise, quiet_noise_dictionary, separate, speech_prior_rates, train_dictionary
from sepsti.metrics import bss_eval

SR = features.SAMPLE_RATE


def toy_speech(rng, seconds):
    """Harmonic 'syllables' (random pitch, formant-like spectral envelope) separated by pauses."""
    n = int(seconds * SR)
    y = np.zeros(n)
    t = np.arange(n) / SR
    position = int(0.2 * SR)
    while position < n - int(0.3 * SR):
        length = int(rng.uniform(0.12, 0.3) * SR)
        f0 = rng.uniform(100, 220)
        formant = rng.uniform(500, 2500)
        segment = np.zeros(length)
        for harmonic in range(1, int(3800 // f0)):
            frequency = harmonic * f0
            gain = np.exp(-0.5 * ((frequency - formant) / 400.0) ** 2) + 0.3 * np.exp(-frequency / 800.0)
            segment += gain * np.sin(2 * np.pi * frequency * t[:length] + rng.uniform(0, 2 * np.pi))
        segment *= np.hanning(length)
        y[position:position + length] += segment
        position += length + int(rng.uniform(0.02, 0.25) * SR)
    return 0.1 * y / np.abs(y).max()


@pytest.fixture(scope="module")
def toy_dictionary():
    rng = np.random.default_rng(7)
    X = features.magnitude(toy_speech(rng, 5.0))
    W, result = train_dictionary(X, 24, max_iter=100, tol=0, seed=0)
    return W


def test_train_dictionary(rng):
    X = features.magnitude(toy_speech(rng, 2.0))
    W, result = train_dictionary(X, 8, max_iter=30, tol=0, seed=3)
    assert W.shape == (257, 8)
    np.testing.assert_allclose(W.sum(axis=0), 1.0)
    assert result.n_iter == 30 and np.all(np.diff(result.log_likelihood[[0, -1]]) > 0)
    again, _ = train_dictionary(X, 8, max_iter=30, tol=0, seed=3)
    assert np.array_equal(W, again)
    with pytest.raises(ParameterError, match="X"):
        train_dictionary(X[0], 8)


def test_all_zero_input_gives_all_zero_output(toy_dictionary):
    for length in (0, 10, 4000):
        out = denoise(np.zeros(length), toy_dictionary)
        assert out.shape == (length,) and not np.any(out)


def test_output_length_finite_and_deterministic(rng, toy_dictionary):
    for length in (100, 257, 3001):   # shorter than a frame, odd lengths
        y = 0.01 * rng.standard_normal(length)
        out = denoise(y, toy_dictionary, max_iter=20)
        assert out.shape == y.shape and np.all(np.isfinite(out))
    y = toy_speech(rng, 1.0) + 0.01 * rng.standard_normal(SR)
    assert np.array_equal(denoise(y, toy_dictionary, seed=4), denoise(y, toy_dictionary, seed=4))
    # float32 input is accepted and gives float64 output
    assert denoise(y.astype(np.float32), toy_dictionary, max_iter=10).dtype == np.float64


@pytest.mark.parametrize("snr, gain", [(0, 3.0), (15, 1.0)])
def test_toy_enhancement_beats_input(rng, toy_dictionary, snr, gain):
    clean = toy_speech(np.random.default_rng(11), 3.0)
    noise = rng.standard_normal(clean.size)
    noise *= np.sqrt(np.sum(clean**2) / (np.sum(noise**2) * 10 ** (snr / 10)))
    noisy = clean + noise
    before = bss_eval(clean, noisy, noisy)["sdr"]
    after = bss_eval(clean, noisy, denoise(noisy, toy_dictionary))["sdr"]
    assert after > before + gain, (before, after)


def test_plain_fit_when_sparsity_is_zero(rng, toy_dictionary):
    y = toy_speech(rng, 1.0) + 0.01 * rng.standard_normal(SR)
    V = features.magnitude(y)
    speech, noise = separate(V, toy_dictionary, sparsity=0.0, max_iter=50)
    sparse_speech, sparse_noise = separate(V, toy_dictionary, sparsity=1.0, max_iter=50)
    assert speech.shape == noise.shape == V.shape
    # the prior moves magnitude from the speech part to the noise part
    assert sparse_speech.sum() < speech.sum() and sparse_noise.sum() > noise.sum()


def test_quiet_noise_dictionary_finds_noise_spectrum(rng):
    noise_spectrum = rng.uniform(1, 3, 257) * np.linspace(2, 0.5, 257)
    V = rng.gamma(50.0, noise_spectrum[:, None] / 50.0, (257, 100))
    speech_frames = rng.choice(100, 60, replace=False)
    V[:, speech_frames] += rng.gamma(1.0, 20.0, (257, 60))
    W_noise, floor = quiet_noise_dictionary(V, 3, rng, quiet_fraction=0.2)
    np.testing.assert_allclose(W_noise.sum(axis=0), 1.0)
    # the quiet frames are noise only: the floor is the noise spectrum within sampling error
    np.testing.assert_allclose(floor, noise_spectrum, rtol=4 * np.sqrt(1 / 50 / 20))
    fit = W_noise @ np.linalg.lstsq(W_noise, noise_spectrum, rcond=None)[0]
    assert np.linalg.norm(fit - noise_spectrum) / np.linalg.norm(noise_spectrum) < 0.05


def test_speech_prior_rates():
    floor = np.ones(257)
    V = np.stack([np.ones(257), 10 * np.ones(257), 0.5 * np.ones(257), np.zeros(257)], axis=1)
    rates = speech_prior_rates(V, floor, 0.3)
    # shares 1 (capped at 0.9), 0.1, 1 (capped), 0 (silent frame)
    np.testing.assert_allclose(rates, [0.3 * 9, 0.3 / 9, 0.3 * 9, 0.0])


def test_bad_input(toy_dictionary):
    with pytest.raises(ParameterError, match="mono"):
        denoise(np.zeros((2, 100)), toy_dictionary)
    with pytest.raises(ParameterError, match="NaN"):
        denoise(np.full(100, np.nan), toy_dictionary)
    with pytest.raises(ParameterError, match="float"):
        denoise(np.zeros(100, dtype=np.int16), toy_dictionary)
    with pytest.raises(ParameterError, match="dictionary"):
        denoise(np.ones(100), toy_dictionary[:-1])
    with pytest.raises(ParameterError, match="noise_rank"):
        denoise(np.ones(100), toy_dictionary, noise_rank=0)
    with pytest.raises(ParameterError, match="sparsity"):
        denoise(np.ones(1000), toy_dictionary, sparsity=-1.0)


@pytest.mark.slow
@pytest.mark.noizeus
def test_noizeus_enhancement_beats_input(noizeus_root):
    import soundfile

    def read(path):
        return soundfile.read(str(path))[0]

    clean_files = {p.stem: p for p in noizeus_root.rglob("sp[0-9][0-9].wav")}
    train = [read(clean_files[f"sp{i:02d}"]) for i in range(1, 21)]
    W, _ = train_dictionary(features.training_matrix(train), 64, max_iter=60, tol=0)
    clean = read(clean_files["sp21"])
    for snr in (0, 15):
        (path,) = noizeus_root.rglob(f"sp21_babble_sn{snr}.wav")
        noisy = read(path)
        before = bss_eval(clean, noisy, noisy)["sdr"]
        after = bss_eval(clean, noisy, denoise(noisy, W))["sdr"]
        assert after > before + 0.5, (snr, before, after)


def test_pieces_give_the_whole_signal_result(rng, toy_dictionary):
    """EM, mask and resynthesis in pieces of a few frames: the one-piece result to rounding (the EM runs in
    float32, whose rounding differs with the matrix sizes: 1e-7 is 300 times below a 16-bit step)."""
    from sepsti.features import num_frames

    y = toy_speech(rng, 1.0) + 0.05 * rng.standard_normal(SR)
    whole = denoise(y, toy_dictionary, max_iter=30, seed=3)
    assert num_frames(len(y)) < 2048  # one piece by default
    for chunk_frames in (1, 7, 16):
        pieces = denoise(y, toy_dictionary, max_iter=30, seed=3, chunk_frames=chunk_frames)
        np.testing.assert_allclose(pieces, whole, rtol=0, atol=1e-7)


def test_blocks_of_any_size_give_the_same_result(rng, toy_dictionary):
    from sepsti.denoise import denoise_blocks

    y = toy_speech(rng, 1.0) + 0.05 * rng.standard_normal(SR)
    whole = denoise(y, toy_dictionary, max_iter=20)
    cuts = np.sort(rng.choice(len(y), 9, replace=False))
    streamed = np.concatenate(list(denoise_blocks(lambda: iter(np.split(y, cuts)), len(y), toy_dictionary,
                                                  max_iter=20, chunk_frames=10)))
    np.testing.assert_allclose(streamed, whole, rtol=0, atol=1e-12)


def test_initial_activations_of_a_piece_are_the_whole_ones():
    from sepsti.core.random import stream
    from sepsti.denoise import _initial_activations

    whole = stream(7, 2).uniform(0.5, 1.5, (6, 50))
    np.testing.assert_array_equal(np.hstack([_initial_activations(7, (6, 50), a, b)
                                             for a, b in ((0, 13), (13, 14), (14, 50))]), whole)


def test_quiet_frames_are_capped_on_long_recordings(monkeypatch, rng):
    import sepsti.denoise as module

    energies = rng.uniform(size=1000)
    quiet = module._quiet_frames(energies, 5, 0.2)
    np.testing.assert_array_equal(quiet, np.argsort(energies, kind="stable")[:200])
    monkeypatch.setattr(module, "MAX_QUIET_FRAMES", 50)
    capped = module._quiet_frames(energies, 5, 0.2)
    assert len(capped) == 50 and set(capped) <= set(quiet)
    assert capped[0] == quiet[0] and capped[-1] == quiet[-1]  # spread over the whole quiet share


def test_noise_rank_above_the_bins_is_refused(toy_dictionary):
    with pytest.raises(ParameterError, match="noise_rank=258: at most 257"):
        denoise(np.ones(1000), toy_dictionary, noise_rank=258)


def test_train_rank_is_bounded_by_the_frames(rng):
    X = rng.gamma(1.0, 1.0, (257, 40))
    for rank in (41, 2_000_000, 0, True):
        with pytest.raises(ParameterError, match=r"rank=.*expected an integer in 1\.\.40"):
            train_dictionary(X, rank, max_iter=1)
    assert train_dictionary(X, 40, max_iter=1, tol=0)[0].shape == (257, 40)
