"""STFT features: agreement with librosa, exact reconstruction, shapes."""

import re

import numpy as np
import pytest

from sepsti import features


FRAMINGS = [features.NARROWBAND, features.enhancement_framing(features.NARROWBAND)]


def _librosa_stft(y, framing):
    import librosa

    padded = features._pad_to_hop(y, framing.hop_length)
    return librosa.stft(padded * features.AMPLITUDE_SCALE, n_fft=framing.n_fft, hop_length=framing.hop_length,
                        window=features.WINDOW, center=True, pad_mode="constant")


def test_window_matches_scipy():
    from scipy.signal import get_window

    np.testing.assert_allclose(features.window(), get_window("hamming", features.N_FFT, fftbins=True),
                               rtol=0, atol=1e-15)


@pytest.mark.parametrize("n", [512, 513, 1000, 24000, 24007])
@pytest.mark.parametrize("framing", FRAMINGS)
def test_stft_matches_librosa(rng, n, framing):
    y = rng.uniform(-1, 1, n)
    ours = features.stft(y, framing=framing)
    reference = _librosa_stft(y, framing)
    hop = framing.hop_length
    assert ours.shape == reference.shape == (257, int(np.ceil(n / hop)) + 1)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-10 * np.abs(reference).max())


@pytest.mark.parametrize("n", [512, 777, 24000])
@pytest.mark.parametrize("framing", FRAMINGS)
def test_istft_matches_librosa_on_modified_spectrogram(rng, n, framing):
    import librosa

    y = rng.uniform(-1, 1, n)
    hop = framing.hop_length
    spectrogram = features.stft(y, framing=framing) * rng.uniform(0, 1, (257, int(np.ceil(n / hop)) + 1))
    padded = int(np.ceil(n / hop) * hop)
    reference = librosa.istft(spectrogram, n_fft=512, hop_length=hop, window="hamming", center=True,
                              length=padded)[:n] / features.AMPLITUDE_SCALE
    np.testing.assert_allclose(features.istft(spectrogram, n, framing=framing), reference, rtol=0, atol=1e-12)


@pytest.mark.parametrize("n", [512, 700, 8000, 24001])
@pytest.mark.parametrize("framing", FRAMINGS)
def test_istft_inverts_stft(rng, n, framing):
    y = rng.uniform(-1, 1, n)
    np.testing.assert_allclose(features.istft(features.stft(y, framing=framing), n, framing=framing), y, rtol=0,
                               atol=1e-12)


def test_enhancement_framing_quarters_the_window():
    assert features.enhancement_framing(features.NARROWBAND) == features.Framing(8000, 512, 128)
    assert features.enhancement_framing(features.framing_for_rate(16000)) == features.Framing(16000, 1024, 256)
    # a window four does not divide keeps the hop of half a window
    assert features.enhancement_framing(features.Framing(11025, 706, 353)) == features.Framing(11025, 706, 353)
    # a window four divides and eight does not (22.05 kHz: 1412 points) is quartered all the same
    assert features.enhancement_framing(features.framing_for_rate(22050)) == features.Framing(22050, 1412, 353)


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


def test_training_matrix_in_context_stacks_the_enhancers_neighbouring_frames(rng):
    signals = [rng.uniform(-1, 1, n) for n in (600, 1024, 3000)]
    X = features.training_matrix(signals, context=1)
    # the centre frames are the dictionary's own frames
    np.testing.assert_allclose(X[257:514], features.training_matrix(signals), rtol=1e-12, atol=1e-9)
    # and the frames beside them the enhancer's, a quarter window (128 samples) before and after
    dense = features.enhancement_framing(features.NARROWBAND)
    y = np.concatenate([signals[2], np.zeros(72)])  # to a multiple of the dictionary's hop, as the training pads
    M = features.magnitude(y, framing=dense)
    first = X.shape[1] - M[:, ::2].shape[1]
    np.testing.assert_allclose(X[:257, first + 3], M[:, 5], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(X[514:, first + 3], M[:, 7], rtol=1e-12, atol=1e-9)
    # a signal's first and last frames stand for their missing neighbours
    np.testing.assert_allclose(X[:257, first], M[:, 0], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(X[514:, -1], M[:, -1], rtol=1e-12, atol=1e-9)


def test_in_context_stacks_neighbours_frame_by_frame():
    M = np.arange(12.0).reshape(2, 6)
    stacked = features.in_context(M, 2)
    assert stacked.shape == (10, 2)
    np.testing.assert_array_equal(stacked[:, 0], [0, 6, 1, 7, 2, 8, 3, 9, 4, 10])
    assert features.in_context(M, 0) is M


@pytest.mark.noizeus
def test_training_matrix_shape_on_noizeus(noizeus_root):
    from sepsti.corpora.noizeus import clean_signals

    signals = clean_signals(noizeus_root, split="train")
    assert [utterance for utterance, _, _ in signals] == [f"sp{i:02d}" for i in range(1, 21)]
    assert {rate for _, _, rate in signals} == {features.SAMPLE_RATE}
    X = features.training_matrix([y for _, y, _ in signals])
    assert X.shape == (257, 1661)


@pytest.mark.parametrize("n", [0, 1, 127, 255, 256, 257, 5000, 9999])
@pytest.mark.parametrize("chunk_frames", [1, 3, 64])
@pytest.mark.parametrize("framing", FRAMINGS)
def test_stft_and_istft_in_pieces_equal_the_whole(rng, n, chunk_frames, framing):
    from sepsti.features import OverlapAdd, stft_chunks

    y = rng.uniform(-1, 1, n)
    cuts = np.sort(rng.integers(0, n + 1, 5))
    pieces = list(stft_chunks(np.split(y, cuts), chunk_frames, framing=framing))
    assert all(piece.shape[1] == chunk_frames for piece in pieces[:-1])
    S = features.stft(y, framing=framing)
    np.testing.assert_array_equal(np.concatenate(pieces, axis=1), S)
    masked = rng.uniform(size=S.shape) * S
    synthesis = OverlapAdd(framing)
    out = [synthesis.push(masked[:, j:j + chunk_frames]) for j in range(0, S.shape[1], chunk_frames)]
    out = np.concatenate([*out, synthesis.finish(n)])[:n]
    # the same sums, added in another order
    np.testing.assert_allclose(out, features.istft(masked, n, framing=framing), rtol=0, atol=1e-15)


@pytest.mark.parametrize("n", [0, 1, 257, 5000])
def test_stft_and_istft_in_pieces_take_channels(rng, n):
    """Signals (n, channels) give spectrograms (n_bins, frames, channels): each channel's, and back."""
    from sepsti.features import OverlapAdd, stft_chunks

    framing = features.enhancement_framing(features.NARROWBAND)
    y = rng.uniform(-1, 1, (n, 3))
    cuts = np.sort(rng.integers(0, n + 1, 5))
    pieces = list(stft_chunks(np.split(y, cuts), 7, framing=framing))
    S = np.stack([features.stft(channel, framing=framing) for channel in y.T], axis=-1)
    np.testing.assert_array_equal(np.concatenate(pieces, axis=1), S)
    masked = rng.uniform(size=S.shape) * S
    synthesis = OverlapAdd(framing)
    out = np.concatenate([*(synthesis.push(piece) for piece in np.array_split(masked, 4, axis=1)),
                          synthesis.finish(n)])[:n]
    expected = np.stack([features.istft(masked[..., c], n, framing=framing) for c in range(3)], axis=-1)
    assert out.shape == (n, 3)
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-15)


def test_channel_magnitude_is_the_power_mean():
    one = np.array([[3 + 4j, 0j]])
    assert np.array_equal(features.channel_magnitude(one), [[5.0, 0.0]])
    opposite = np.stack([one, -one], axis=-1)  # opposite phases do not cancel
    np.testing.assert_allclose(features.channel_magnitude(opposite), [[5.0, 0.0]])
    pair = np.array([[[3 + 0j, 4j]]])
    np.testing.assert_allclose(features.channel_magnitude(pair), [[np.sqrt(12.5)]])


def test_channel_level_spread_tells_one_scene_from_two_sources(rng):
    """0 dB for identical or scaled channels; small for one source under independent noises; large for two
    sources that take turns; infinite where a channel is silent while another sounds."""
    from sepsti.features import NARROWBAND, channel_level_spread, stft_chunks

    n = 8 * NARROWBAND.sample_rate
    t = np.arange(n) / NARROWBAND.sample_rate
    bursts = np.sin(2 * np.pi * 1.3 * t) > 0  # half the time on
    source = rng.standard_normal(n) * (0.05 + bursts)
    other = rng.standard_normal(n) * (0.05 + ~bursts)

    def spread(*channels):
        return channel_level_spread(stft_chunks(iter([np.stack(channels, axis=1)]), 100), NARROWBAND)

    assert spread(source, source) == 0.0
    assert spread(source, 0.5 * source) < 1e-9
    noise = [0.1 * rng.standard_normal(n) for _ in range(2)]
    assert spread(source + noise[0], 0.7 * source + noise[1]) < 1.0
    assert spread(source + noise[0], other + noise[1]) > 20.0
    assert spread(source, source, other) > 20.0  # the largest over the pairs
    assert spread(source, np.where(bursts, 0.0, source)) == np.inf
    assert spread(np.zeros(n), np.zeros(n)) == 0.0


def test_one_talker_in_independent_noise_on_each_microphone_is_one_scene(rng):
    """docs/enhance.md, "Channels": one talker on two microphones, the second hearing it 0.25 ms later and 2 dB
    quieter, each with its own white noise (−5 to 20 dB SNR), spreads 0.1–1.3 dB: one scene, not different
    sources (the spread is at most DIFFERENT_SOURCES_DB, the rule ``enhance --channels auto`` applies)."""
    from sepsti.features import DIFFERENT_SOURCES_DB, NARROWBAND, channel_level_spread, stft_chunks
    from test_cli_train import speech_like

    rate = NARROWBAND.sample_rate
    talker = np.concatenate([speech_like(rng, 1.6, rate) for _ in range(5)])
    far = 10 ** (-2 / 20) * np.r_[np.zeros(2), talker[:-2]]  # 2 samples at 8 kHz
    for snr in (-5, 0, 10, 20):
        noise = np.std(talker) * 10 ** (-snr / 20) * rng.standard_normal((2, len(talker)))
        y = np.stack([talker + noise[0], far + noise[1]], axis=1)
        spread = channel_level_spread(stft_chunks(iter([y]), 100), NARROWBAND)
        assert 0.1 < spread < 1.3, snr
        assert spread <= DIFFERENT_SOURCES_DB, snr


@pytest.mark.parametrize("shape", [(1000, 2), (2, 1000), (), (3, 4, 5)])
def test_stft_refuses_what_is_not_one_channel(shape):
    """A 2-D signal gave a numpy-internal error (or, channels first, wrong frames); stft_chunks takes channels."""
    from sepsti.core.errors import ParameterError

    with pytest.raises(ParameterError, match=rf"stft: y has shape {re.escape(str(shape))}; expected one channel"):
        features.stft(np.zeros(shape))


def test_istft_refuses_another_framings_bins_and_a_negative_length(rng):
    """Bins of another n_fft were cut or padded by irfft into a signal, and a negative length cut samples off."""
    from sepsti.core.errors import ParameterError

    spectrogram = features.stft(rng.standard_normal(4000))
    with pytest.raises(ParameterError, match=r"^istft: spectrogram has shape \(10, 17\); expected \(257, n_frames\)"):
        features.istft(spectrogram[:10], 4000)
    with pytest.raises(ParameterError, match=r"^istft: spectrogram has shape \(257,\)"):
        features.istft(spectrogram[:, 0], 4000)
    with pytest.raises(ParameterError, match=r"^length=-1 must be an integer of at least 0$"):
        features.istft(spectrogram, -1)
    assert features.istft(spectrogram, np.int64(3999)).shape == (3999,)


def test_context_must_be_a_whole_number_of_frames_and_a_training_matrix_needs_a_signal(rng):
    """context=-1 and no signals met NumPy's 'need at least one array to concatenate', -1 in np.pad another."""
    from sepsti.core.errors import ParameterError

    with pytest.raises(ParameterError, match=r"^context=-1 must be an integer of at least 0$"):
        features.in_context(np.ones((2, 6)), -1)
    for context in (-1, 0.5):
        with pytest.raises(ParameterError, match=rf"^context={context} must be an integer of at least 0$"):
            features.training_matrix([rng.standard_normal(4000)], context=context)
    for signals, kind in (([], "list"), (iter(()), "tuple_iterator")):
        for context in (0, 1):
            with pytest.raises(ParameterError, match=rf"^training_matrix: signals \({kind}\) holds no signal$"):
                features.training_matrix(signals, context=context)


def test_channel_level_spread_reads_only_its_band(rng):
    """The channels are compared in LEVEL_BAND_HZ (100 Hz to 4 kHz) only: at 16 kHz, a hiss of 5-7.5 kHz that one
    microphone alone hears, on and off every half second, and a 50 Hz rumble that the other alone hears, leave
    channels identical in the band at a spread of nearly 0 dB (measured 0.004: the hiss lies 64 bins above the
    band and the rumble 3 below it, and what the Hamming window's sidelobes, 43 dB down, leak into it is far below
    the talker); over the whole band they would swing by more than DIFFERENT_SOURCES_DB."""
    from sepsti.features import DIFFERENT_SOURCES_DB, channel_level_spread, framing_for_rate, stft_chunks

    framing = framing_for_rate(16000)
    rate = framing.sample_rate
    n = 6 * rate
    t = np.arange(n) / rate
    talker = rng.standard_normal(n) * (0.2 + (np.sin(2 * np.pi * 1.1 * t) > 0))
    spectrum = np.fft.rfft(talker)
    frequencies = np.fft.rfftfreq(n, 1 / rate)
    talker = np.fft.irfft(spectrum * ((frequencies >= 300) & (frequencies <= 3400)), n)
    hiss = np.fft.irfft(np.fft.rfft(rng.standard_normal(n)) * ((frequencies >= 5000) & (frequencies <= 7500)), n)
    hiss *= 3 * np.std(talker) / np.std(hiss) * (np.sin(2 * np.pi * 1.0 * t + 1.0) > 0)
    rumble = 3 * np.std(talker) * np.sin(2 * np.pi * 50 * t) * (np.sin(2 * np.pi * 0.7 * t) > 0)
    y = np.stack([talker + hiss, talker + rumble], axis=1)
    assert channel_level_spread(stft_chunks(iter([y]), 100, framing=framing), framing) < 0.1
    whole = features.stft(y[:, 0], framing=framing), features.stft(y[:, 1], framing=framing)
    level = [10 * np.log10(np.sum(np.abs(S) ** 2, axis=0)) for S in whole]
    assert np.ptp(level[0] - level[1]) > DIFFERENT_SOURCES_DB  # what the whole band would read


def test_istft_pads_with_zeros_to_a_length_past_the_frames_as_librosa(rng):
    """librosa.istft's ``length`` pads the signal with zeros past the last frame's reach, as istft's does."""
    import librosa

    y = rng.uniform(-1, 1, 1000)
    spectrogram = features.stft(y)
    ours = features.istft(spectrogram, 4000)
    reference = librosa.istft(spectrogram, n_fft=512, hop_length=256, window="hamming", center=True,
                              length=4000) / features.AMPLITUDE_SCALE
    assert ours.shape == (4000,)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours[:1000], y, rtol=0, atol=1e-12)
    assert not np.any(ours[1280:])  # 4 hops of signal and half a window of centring pad, then zeros


def test_stft_chunks_yields_a_chunk_as_soon_as_its_samples_are_given():
    """Four frames of 512 every 256 samples, the first centred on sample 0, reach sample 3 * 256 + 256 = 1024: the
    first chunk comes from one block of 1024 samples, before the next block is asked for."""
    taken = []

    def blocks():
        for number in range(3):
            taken.append(number)
            yield np.full(1024, 0.1)

    chunks = features.stft_chunks(blocks(), 4)
    first = next(chunks)
    assert first.shape == (257, 4) and taken == [0]
    np.testing.assert_array_equal(first, features.stft(np.full(3072, 0.1))[:, :4])


def test_training_matrix_in_context_of_a_framing_that_four_does_not_divide(rng):
    """A 706-point window keeps the hop of half a window when enhancing (353): the centre frames of each column are
    the dictionary's own frames, every one of them."""
    framing = features.Framing(11025, 706, 353)
    signals = [rng.uniform(-1, 1, n) for n in (1000, 3000)]
    X = features.training_matrix(signals, framing=framing, context=1)
    centre = features.training_matrix(signals, framing=framing)
    assert X.shape == (3 * 354, centre.shape[1])
    np.testing.assert_allclose(X[354:708], centre, rtol=1e-12, atol=1e-9)


def test_channel_level_spread_of_a_mostly_silent_signal_and_of_the_outer_pair_of_three(rng):
    """Digital silence in 80 % of the frames leaves the loud frames to be compared (two scaled channels: 0 dB, not
    the infinity of silent frames' -inf - -inf); of three channels, talker A, A + B and talker B, the pair A, B
    swings the most (the sum of the other two pairs' differences), and sets the spread."""
    from sepsti.features import NARROWBAND, channel_level_spread, stft_chunks

    n = 8 * NARROWBAND.sample_rate
    t = np.arange(n) / NARROWBAND.sample_rate

    def spread(*channels):
        return channel_level_spread(stft_chunks(iter([np.stack(channels, axis=1)]), 100), NARROWBAND)

    gated = rng.standard_normal(n) * (t < 1.6)
    assert spread(gated, 0.5 * gated) < 1e-9
    bursts = np.sin(2 * np.pi * 1.3 * t) > 0
    source = rng.standard_normal(n) * (0.05 + bursts)
    other = rng.standard_normal(n) * (0.05 + ~bursts)
    outer = spread(source, other)
    assert outer > 20.0
    assert spread(source, source + other, other) == outer > spread(source, source + other) + 10


def test_frames_of_a_duration_are_rounded_to_the_nearest_hop_and_at_least_one():
    """8 kHz, hop 256 (32 ms): 50 ms is 1.56 hops, 10 ms 0.31, one second 31.25."""
    assert [features.NARROWBAND.frames(seconds) for seconds in (0.05, 0.01, 0.0, 1.0)] == [2, 1, 1, 31]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_overlap_add_finishes_with_zeros_to_a_length_past_the_frames(rng, framing):
    """finish(length) pads with zeros to a length past the last frame's reach, as istft does (checked against
    librosa above)."""
    from sepsti.features import OverlapAdd

    y = rng.uniform(-1, 1, 1000)
    S = features.stft(y, framing=framing)
    synthesis = OverlapAdd(framing)
    out = np.concatenate([synthesis.push(S[:, :3]), synthesis.push(S[:, 3:]), synthesis.finish(4000)])
    assert len(out) == 4000
    np.testing.assert_allclose(out, features.istft(S, 4000, framing=framing), rtol=0, atol=1e-15)
