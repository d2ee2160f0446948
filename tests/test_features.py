"""STFT features: agreement with librosa, exact reconstruction, shapes."""

import numpy as np
import pytest

from sepsti import features


def _librosa_stft(y):
    import librosa

    padded = features._pad_to_hop(y)
    return librosa.stft(padded * features.AMPLITUDE_SCALE, n_fft=features.N_FFT, hop_length=features.HOP_LENGTH,
                        window=features.WINDOW, center=True, pad_mode="constant")


def test_window_matches_scipy():
    from scipy.signal import get_window

    np.testing.assert_allclose(features.window(), get_window("hamming", features.N_FFT, fftbins=True),
                               rtol=0, atol=1e-15)


@pytest.mark.parametrize("n", [512, 513, 1000, 24000, 24007])
def test_stft_matches_librosa(rng, n):
    y = rng.uniform(-1, 1, n)
    ours = features.stft(y)
    reference = _librosa_stft(y)
    assert ours.shape == reference.shape == (257, int(np.ceil(n / 256)) + 1)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-10 * np.abs(reference).max())


@pytest.mark.parametrize("n", [512, 777, 24000])
def test_istft_matches_librosa_on_modified_spectrogram(rng, n):
    import librosa

    y = rng.uniform(-1, 1, n)
    spectrogram = features.stft(y) * rng.uniform(0, 1, (257, int(np.ceil(n / 256)) + 1))
    padded = int(np.ceil(n / 256) * 256)
    reference = librosa.istft(spectrogram, n_fft=512, hop_length=256, window="hamming", center=True,
                              length=padded)[:n] / features.AMPLITUDE_SCALE
    np.testing.assert_allclose(features.istft(spectrogram, n), reference, rtol=0, atol=1e-12)


@pytest.mark.parametrize("n", [512, 700, 8000, 24001])
def test_istft_inverts_stft(rng, n):
    y = rng.uniform(-1, 1, n)
    np.testing.assert_allclose(features.istft(features.stft(y), n), y, rtol=0, atol=1e-12)


def test_zero_signal_gives_zero_spectrogram():
    S = features.stft(np.zeros(1000))
    assert not np.any(S)
    assert not np.any(features.istft(S, 1000))


def test_magnitude_scale(rng):
    y = rng.uniform(-1, 1, 2048)
    np.testing.assert_allclose(features.magnitude(y / 2), features.magnitude(y) / 2, rtol=1e-12)
    assert features.magnitude(y).max() > 1000  # int16 scale, not [-1, 1)


def test_training_matrix_concatenates(rng):
    signals = [rng.uniform(-1, 1, n) for n in (600, 1024, 3000)]
    X = features.training_matrix(signals)
    assert X.shape == (257, sum(int(np.ceil(n / 256)) + 1 for n in (600, 1024, 3000)))
    np.testing.assert_array_equal(X[:, :4], features.magnitude(signals[0]))


@pytest.mark.noizeus
def test_training_matrix_shape_on_noizeus(noizeus_root):
    from sepsti.corpora.noizeus import clean_signals

    signals = clean_signals(noizeus_root, split="train")
    assert [utterance for utterance, _, _ in signals] == [f"sp{i:02d}" for i in range(1, 21)]
    assert {rate for _, _, rate in signals} == {features.SAMPLE_RATE}
    X = features.training_matrix([y for _, y, _ in signals])
    assert X.shape == (257, 1661)


@pytest.mark.parametrize("n", [0, 1, 255, 256, 257, 5000, 9999])
@pytest.mark.parametrize("chunk_frames", [1, 3, 64])
def test_stft_and_istft_in_pieces_equal_the_whole(rng, n, chunk_frames):
    from sepsti.features import OverlapAdd, stft_chunks

    y = rng.uniform(-1, 1, n)
    cuts = np.sort(rng.integers(0, n + 1, 5))
    pieces = list(stft_chunks(np.split(y, cuts), chunk_frames))
    assert all(piece.shape[1] == chunk_frames for piece in pieces[:-1])
    S = features.stft(y)
    np.testing.assert_array_equal(np.concatenate(pieces, axis=1), S)
    masked = rng.uniform(size=S.shape) * S
    synthesis = OverlapAdd()
    out = [synthesis.push(masked[:, j:j + chunk_frames]) for j in range(0, S.shape[1], chunk_frames)]
    out = np.concatenate([*out, synthesis.finish(n)])[:n]
    np.testing.assert_array_equal(out, features.istft(masked, n))
