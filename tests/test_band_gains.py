"""The learned band-gain correction: its networks against scikit-learn's, its inputs against a band-by-band
reference, the networks' mean and the gates, the same mask however the frames are cut, and its checks."""

import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from sepsti import band_gains as bg
from sepsti import features
from sepsti.core.errors import ParameterError

ANALYSIS = features.enhancement_framing(features.NARROWBAND)


def _networks(rng, count=3, hidden=(6, 4), spread=0.3):
    """Random ReLU networks whose predictions (logs) vary around -1."""
    sizes = (bg.NUM_INPUTS, *hidden)
    layers = tuple(spread * rng.standard_normal((count, n_in + 1, n_out)) for n_in, n_out in zip(sizes, sizes[1:]))
    output = spread * rng.standard_normal((count, hidden[-1] + 1))
    output[:, -1] = -1.0
    return bg.BandGains(rng.standard_normal((count, bg.NUM_INPUTS)), rng.uniform(0.5, 2.0, (count, bg.NUM_INPUTS)),
                        layers, output)


def _constant(values):
    """Networks that predict ``values`` (one per network) whatever their inputs."""
    count = len(values)
    output = np.zeros((count, 2))
    output[:, -1] = values
    return bg.BandGains(np.zeros((count, bg.NUM_INPUTS)), np.ones((count, bg.NUM_INPUTS)),
                        (np.zeros((count, bg.NUM_INPUTS + 1, 1)),), output)


def _separation(rng, frames=40, loudness=1.0):
    """``(S, mixture, speech, noise, mask)`` of random parts, the speech scaled by ``loudness`` (each frame's or
    one)."""
    n_bins = ANALYSIS.n_bins
    speech = rng.gamma(0.5, 1.0, (n_bins, frames)) * np.linspace(3.0, 0.1, n_bins)[:, None] * loudness
    noise = rng.gamma(2.0, 0.3, (n_bins, frames))
    mixture = speech + noise
    mask = np.maximum(speech / (speech + noise), 0.1)
    S = mixture * np.exp(2j * np.pi * rng.random((n_bins, frames)))
    return S, mixture, speech, noise, mask


def test_predictions_are_scikit_learns(rng):
    """The NumPy forward pass of the recipe's conversion gives MLPRegressor's predictions (a peer), to single
    precision."""
    pytest.importorskip("sklearn")
    from sklearn.neural_network import MLPRegressor
    from sklearn.preprocessing import StandardScaler

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))
    from train_band_gains import band_gains_of

    X = rng.normal(3.0, 2.0, (400, bg.NUM_INPUTS))
    fitted = []
    for seed in range(2):
        y = np.tanh(X[:, seed]) + 0.1 * rng.standard_normal(400)
        scaler = StandardScaler().fit(X)
        network = MLPRegressor(hidden_layer_sizes=(8, 5), max_iter=2000, random_state=seed)
        fitted.append((scaler, network.fit(scaler.transform(X), y)))
    networks = bg.validate_band_gains(band_gains_of(fitted))
    Z = rng.normal(3.0, 2.0, (50, bg.NUM_INPUTS))
    want = np.stack([network.predict(scaler.transform(Z)) for scaler, network in fitted])
    np.testing.assert_allclose(networks.predict(Z), want, rtol=0, atol=5e-6)  # computed in single precision


def _reference_inputs(levels):
    """The networks' inputs built band by band and frame by frame over the whole file, its edges repeated: for band
    b, the rows of bands b - 1, b, b + 1 (edges repeated), then which band it is."""
    frames = levels.shape[2]
    padded = np.pad(levels, ((0, 0), (0, 0), (bg.CONTEXT, bg.CONTEXT)), mode="edge")
    level = levels[0]
    own = []
    for band in range(bg.NUM_BANDS):
        rows = []
        for frame in range(frames):
            centre = frame + bg.CONTEXT
            at = [padded[:, band, centre + offset] for offset in bg.OFFSETS]  # each (5,)
            window = padded[0, band, centre - bg.CONTEXT:centre + bg.CONTEXT + 1]
            rows.append([*(a[1] for a in at), *(a[2] for a in at), *(a[0] - level[band, frame] for a in at),
                         *(a[3] for a in at), *(a[4] for a in at), level[band, frame] - level[:, frame].mean(),
                         window.max() - level[band, frame], window.min() - level[band, frame]])
        own.append(np.array(rows).T)
    rows = []
    for band in range(bg.NUM_BANDS):
        which = np.zeros((bg.NUM_BANDS, frames))
        which[band] = 1.0
        rows.append(np.concatenate([own[max(band - 1, 0)], own[band], own[min(band + 1, bg.NUM_BANDS - 1)], which]).T)
    return np.concatenate(rows)


def test_inputs_are_the_band_by_band_reference(rng):
    S, mixture, speech, noise, mask = _separation(rng, frames=100)  # beyond the furthest offset
    levels = bg.band_levels(bg.band_weights(ANALYSIS), mixture, speech, noise, mask, ANALYSIS.sample_rate)
    example = bg.TrainingExample(levels, np.zeros(levels.shape[1:]), np.ones(levels.shape[1:]))
    inputs = example.inputs()
    assert inputs.shape == (bg.NUM_BANDS * S.shape[1], bg.NUM_INPUTS)
    np.testing.assert_allclose(inputs, _reference_inputs(levels), rtol=0, atol=1e-12)


def _periodicity_of(frame, bands, sample_rate):
    """The periodicity of one windowed frame in the time domain: its circular autocorrelation over the window's,
    highest at the period searched lag by lag; then each band's share of the frame (its spectrum weighted by the
    band's square root) correlated with itself shifted by the period, over its power."""
    n = len(frame)
    window = features.window(features.Framing(sample_rate, n, n))

    def circular(x, lag):
        return np.dot(x, np.roll(x, -lag))

    lags = range(int(sample_rate / bg.PITCH_HZ[1]), int(sample_rate / bg.PITCH_HZ[0]) + 1)
    period = max(lags, key=lambda lag: circular(frame, lag) / circular(window, lag))
    parts = [np.fft.irfft(np.sqrt(band) * np.fft.rfft(frame), n=n) for band in bands]
    return np.array([circular(part, period) / circular(part, 0) for part in parts])


@pytest.mark.parametrize("rate", [8000, 16000])
def test_periodicity_is_the_band_limited_autocorrelation_at_the_period(rng, rate):
    analysis = features.enhancement_framing(features.framing_for_rate(rate))
    bands = bg.band_weights(analysis)
    n = analysis.n_fft
    time = np.arange(n) / rate
    voiced = sum(np.cos(2 * np.pi * 137.0 * k * time + rng.uniform(0, 2 * np.pi)) for k in range(1, 25))
    frames = features.window(analysis) * np.stack([voiced + 0.5 * rng.standard_normal(n),
                                                   *rng.standard_normal((3, n))])
    power = np.abs(np.fft.rfft(frames, axis=1)).T ** 2
    want = np.stack([_periodicity_of(frame, bands, rate) for frame in frames], axis=1)
    np.testing.assert_allclose(bg.periodicity(bands, power, rate), want, rtol=0, atol=1e-9)


@pytest.mark.parametrize("rate", [8000, 16000])
def test_a_voice_is_periodic_in_its_bands_and_noise_is_not(rng, rate):
    """Harmonics of 70–380 Hz: most bands near one; white noise about zero (the searched period, chosen where the
    frame correlates best, biases it up a little: 0.06–0.10 over 400 frames, their spread 0.06)."""
    analysis = features.enhancement_framing(features.framing_for_rate(rate))
    bands = bg.band_weights(analysis)
    n = analysis.n_fft
    time = np.arange(n) / rate
    window = features.window(analysis)
    for pitch in (70.0, 150.0, 380.0):
        voice = sum(np.cos(2 * np.pi * pitch * k * time + rng.uniform(0, 2 * np.pi)) / np.sqrt(k)
                    for k in range(1, int(0.95 * rate / 2 / pitch)))
        values = bg.periodicity(bands, np.abs(np.fft.rfft(window * voice))[:, None] ** 2, rate)
        assert np.median(values) > 0.7
    noise = np.abs(np.fft.rfft(window * rng.standard_normal((400, n)), axis=1)).T ** 2
    assert abs(bg.periodicity(bands, noise, rate).mean()) < 0.15


@pytest.mark.parametrize("framing, top", [(features.NARROWBAND, 3900.0), (features.framing_for_rate(16000), 7800.0)])
def test_the_bands_cover_the_modelled_band_and_sum_to_one_inside(framing, top):
    """From LOWEST_HZ to TOP_SHARE of the Nyquist frequency, at either dictionary's rate."""
    analysis = features.enhancement_framing(framing)
    bands = bg.band_weights(analysis)
    frequencies = np.arange(analysis.n_bins) * analysis.sample_rate / analysis.n_fft
    total = bands.sum(axis=0)
    corners = np.geomspace(bg.LOWEST_HZ, top, bg.NUM_BANDS + 2)
    inside = (frequencies >= corners[1]) & (frequencies <= corners[-2])
    np.testing.assert_allclose(total[inside], 1.0, atol=1e-12)
    assert np.all(total[(frequencies <= bg.LOWEST_HZ) | (frequencies >= top)] == 0)
    assert np.all(total[(frequencies > corners[0]) & (frequencies < top)] > 0)


@pytest.mark.parametrize("framing", [features.NARROWBAND, features.framing_for_rate(16000)])
def test_every_bin_takes_a_weighted_mean_of_the_moves_beyond_the_bands_the_nearest_bands(framing):
    """Inside the bands a bin takes their moves by their weights over the weights' sum; below LOWEST_HZ the lowest
    band's move, above TOP_SHARE of the Nyquist frequency the top band's, whole."""
    analysis = features.enhancement_framing(framing)
    bands, weights = bg.band_weights(analysis), bg.move_weights(analysis)
    frequencies = np.arange(analysis.n_bins) * analysis.sample_rate / analysis.n_fft
    below, above = frequencies <= bg.LOWEST_HZ, frequencies >= bg.highest_hz(analysis.sample_rate)
    assert below.sum() >= 6 and above.sum() >= 1
    np.testing.assert_allclose(weights.sum(axis=0), 1.0, atol=1e-12)
    np.testing.assert_array_equal(weights[:, below], np.eye(bg.NUM_BANDS)[:, [0]] * np.ones(below.sum()))
    np.testing.assert_array_equal(weights[:, above], np.eye(bg.NUM_BANDS)[:, [-1]] * np.ones(above.sum()))
    inside = ~below & ~above
    np.testing.assert_allclose(weights[:, inside] * bands[:, inside].sum(axis=0), bands[:, inside], atol=1e-12)


def _fixed(moves, predicts="gain"):
    """Networks moving a gain of -1 (in logs) by ``moves`` (num_networks, n) for the rows 0 .. n - 1 (a row's first
    input is its number), predicting the gain -1 + move or the move itself, counting the rows each call gives
    them."""
    class Fixed(NamedTuple):
        calls: list
        predicts: str

        def predict(self, rows):
            self.calls.append(len(rows))
            return (-1.0 if predicts == "gain" else 0.0) + np.asarray(moves, dtype=float)[:, rows[:, 0].astype(int)]

    return Fixed([], predicts)


@pytest.mark.parametrize("moves, expected", [
    ([[-0.2, 0.3, 0.1, 0.0]], [-0.1, 0.15, 0.05, 0.0]),  # one network: BLEND of its move either way
    ([[-0.2, 0.3, 0.1], [-0.2, 0.1, 0.1]], [-0.2, 0.1, 0.05]),  # lowering they agree on taken whole
    ([[-0.2, 0.3, 0.1, 0.0], [-0.5, 0.1, -0.1, 0.2]],  # a mean lowering of 0.35, its standard error 0.15
     [-0.35 * 0.35 ** 2 / (0.35 ** 2 + 0.15 ** 2), 0.1, 0.0, 0.05]),
    ([[-0.4, 0.3], [-0.2, 0.1], [-0.2, 0.2], [0.0, 0.2]],  # sample variance 0.08 / 3 over four: s² = 0.02 / 3
     [-0.2 * 0.04 / (0.04 + 0.02 / 3), 0.1]),
])
def test_the_move_is_toward_the_mean_of_the_networks_lowering_as_far_as_they_agree(moves, expected):
    """A raising takes BLEND of the move to the networks' mean, a lowering d² / (d² + s²) of it, s the standard
    error of their mean (with one network, BLEND)."""
    networks = _fixed(moves)
    rows = np.arange(len(expected), dtype=float)[:, None]
    everywhere = np.ones(len(expected), dtype=bool)
    moved = bg.mean_moves(networks, rows, np.full(len(expected), -1.0), everywhere, 0.1)
    np.testing.assert_allclose(moved, expected, rtol=0, atol=1e-7)  # the networks' single precision
    assert networks.calls == [len(expected)]


def test_predictions_beyond_the_floor_and_one_are_clipped_before_the_mean():
    networks = _fixed([[-2.0, 1.5, 0.5], [-0.5, -0.5, 0.3]])  # gains of -3 (below log 0.1) and 0.5 (above 0) clipped
    moved = bg.mean_moves(networks, np.arange(3.0)[:, None], np.full(3, -1.0), np.ones(3, bool), 0.1)
    lowered = [np.log(0.1) + 1.0, -0.5]  # the two predictions of the first row as moves
    mean, error = np.mean(lowered), np.std(lowered, ddof=1) / np.sqrt(2)
    np.testing.assert_allclose(moved, [mean * mean ** 2 / (mean ** 2 + error ** 2), bg.BLEND * (1.0 - 0.5) / 2,
                                       bg.BLEND * 0.4], rtol=0, atol=1e-7)


def test_gated_raisings_are_dropped_and_rows_that_cannot_move_are_not_asked():
    """A raising where raising is shut is dropped, a lowering taken anywhere; a gain at the floor where raising is
    shut is not given to the networks."""
    networks = _fixed([[-0.2, 0.3, 0.3, 0.5, -0.5], [-0.4, 0.1, 0.1, 0.5, -0.5]])
    rows = np.arange(5.0)[:, None]
    gains = np.array([-1.0, -1.0, -1.0, np.log(0.1), 0.0])
    raising = np.array([False, False, True, False, False])
    lowered = -0.3 * 0.3 ** 2 / (0.3 ** 2 + 0.01)  # predictions 0.1 apart: a standard error of 0.1 about the mean
    np.testing.assert_allclose(bg.mean_moves(networks, rows, gains, raising, 0.1),
                               [lowered, 0.0, bg.BLEND * 0.2, 0.0, -1.5], rtol=0, atol=1e-7)
    assert networks.calls == [4]


def test_networks_predicting_the_move_make_their_mean_move_within_the_floor_and_one():
    """Networks predicting the move: their mean taken whole, clipped so that the gain stays in [floor, 1], a raising
    only where raising is open, a gain at the floor where raising is shut not asked about."""
    networks = _fixed([[-0.2, 0.3, 0.3, -3.0, 2.0, 0.4], [-0.4, 0.1, 0.1, -2.0, 1.0, 0.4]], predicts="move")
    gains = np.array([-1.0, -1.0, -1.0, -1.0, -0.5, np.log(0.1)])
    raising = np.array([False, False, True, True, True, False])
    np.testing.assert_allclose(bg.mean_moves(networks, np.arange(6.0)[:, None], gains, raising, 0.1),
                               [-0.3, 0.0, 0.2, np.log(0.1) + 1.0, 0.5, 0.0], rtol=0, atol=1e-12)
    assert networks.calls == [5]


def test_ensemble_moves_take_blend_of_a_raising_and_the_agreed_share_of_a_lowering(rng):
    """What a distilled network learns: the move ``d`` to the mean of four networks' predictions, ``d³ / (d² + s²)``
    if it lowers (``s²`` their sample variance over four), ``BLEND · d`` if it raises."""
    predictions = np.clip(rng.normal(-1.0, 0.4, (4, 50)), np.log(0.1), 0.0)
    gains = rng.uniform(np.log(0.1), 0.0, 50)
    d = predictions.mean(axis=0) - gains
    lowering = d ** 3 / (d ** 2 + predictions.var(axis=0, ddof=1) / 4)
    assert 10 < np.sum(d < 0) < 40
    np.testing.assert_allclose(bg.ensemble_moves(predictions, gains, 0.1), np.where(d < 0, lowering, bg.BLEND * d),
                               rtol=1e-12, atol=0)


def _corrected(pieces, networks):
    """The corrected mask of all the pieces' frames."""
    return np.concatenate([mask for _, _, mask in bg.corrected_masks(pieces, networks, ANALYSIS, 0.1)], axis=1)


def _noisy_context_of(levels):
    """Per frame, whether the speech part's power over the ±CONTEXT frames is at most NOISY_CONTEXT_DB above the
    noise part's, the first and last frames standing for those beyond them (a frame at a time)."""
    ends = [np.repeat(levels[:, :, :1], bg.CONTEXT, axis=2), np.repeat(levels[:, :, -1:], bg.CONTEXT, axis=2)]
    padded = np.concatenate([ends[0], levels, ends[1]], axis=2)
    speech, noise = (np.exp(padded[0] + padded[part]).sum(axis=0) for part in (1, 2))
    width = 2 * bg.CONTEXT + 1
    return np.array([10 * np.log10(speech[t:t + width].sum() / noise[t:t + width].sum()) <= bg.NOISY_CONTEXT_DB
                     for t in range(levels.shape[2])])


def test_a_noisy_context_is_the_speech_and_noise_parts_power_over_half_a_second(rng):
    levels = rng.normal(-1.0, 1.0, (4, bg.NUM_BANDS, 200))
    levels[1, :, :100] -= 2.0  # the speech part well below the noise part until frame 100, well above it after
    levels[1, :, 100:] += 3.0
    want = _noisy_context_of(levels)[40:160]
    assert 0 < want.mean() < 1
    np.testing.assert_array_equal(bg.noisy_context(levels, 40, 160), want)


@pytest.mark.parametrize("values, gated_by", [([0.0, 0.0], "noise"), ([-1.0, -1.3], "speech"),
                                              ([np.log(0.1), np.log(0.1) - 1.0], "yielding"),
                                              ([0.0, np.log(0.1)], None)])
def test_the_mask_moves_toward_the_mean_where_the_gates_let_it(rng, values, gated_by):
    """Networks agreeing on a gain of one raise a band's gain halfway in logs, but not where its noise part is more
    than NOISE_GATE_DB above its speech part; on a gain 10 dB down they lower a band's, but not where its speech part
    is more than SPEECH_GATE_DB above its noise part and the half second around the frame is not noisy; on the
    floor's gain (one of them below it) they lower it to the floor there too in frames where that is SPEECH_GATE_DB
    or more in such a band; on one and the floor, toward the mean of the two, a lowering shrunk by their spread."""
    frames = 160  # the speech 30 dB louder in the first half: a clean context there, a noisy one in the second
    S, mixture, speech, noise, mask = _separation(rng, frames, np.where(np.arange(frames) < frames // 2, 10.0, 0.3))
    bands = bg.band_weights(ANALYSIS)
    levels = bg.band_levels(bands, mixture, speech, noise, mask, ANALYSIS.sample_rate)
    spread = bg.move_weights(ANALYSIS)
    speech_over_noise_db = 10 * np.log10(np.e) * (levels[1] - levels[2])
    noisy = _noisy_context_of(levels)
    assert 0 < noisy.mean() < 1
    clipped = np.clip(values, np.log(0.1), 0.0)
    moves = np.mean(clipped) - levels[3]
    error = np.var(clipped, ddof=1) / len(clipped)  # the squared standard error of the networks' mean
    taken = np.where(moves < 0, moves ** 2 / (moves ** 2 + error), bg.BLEND) * moves
    shut = (speech_over_noise_db > bg.SPEECH_GATE_DB) & ~noisy
    yielding = (shut & (taken <= -bg.SPEECH_GATE_DB * np.log(10) / 20)).any(axis=0)
    passes = (moves < 0) & (~shut | yielding) | (moves > 0) & (speech_over_noise_db >= -bg.NOISE_GATE_DB)
    if gated_by in ("noise", "speech"):
        gated = speech_over_noise_db < -bg.NOISE_GATE_DB if gated_by == "noise" else shut
        assert 0 < gated.mean() < 1  # some band-frames of each
        moving = moves > 0 if gated_by == "noise" else moves < 0
        np.testing.assert_array_equal(passes[moving], ~gated[moving])
        if gated_by == "speech":  # lowered for the noisy context alone
            assert (passes & (speech_over_noise_db > bg.SPEECH_GATE_DB)).any()
    if gated_by == "yielding":  # lowered to the floor, by up to 20 dB, where the gate is shut
        assert (passes & shut).any()
    want = np.clip(mask * np.exp(spread.T @ np.where(passes, taken, 0.0)), 0.1, 1.0)
    corrected = _corrected([(S, mixture, speech, noise, mask)], _constant(values))
    np.testing.assert_allclose(corrected, want, rtol=1e-6)  # the networks' single precision
    assert not np.allclose(corrected, mask)


def _by_band(lowest, rest, count=2):
    """``count`` networks that predict ``lowest`` for the lowest band and ``rest`` for the others."""
    hidden = np.zeros((count, bg.NUM_INPUTS + 1, 1))
    hidden[:, bg.NUM_INPUTS - bg.NUM_BANDS, 0] = 1.0  # the input that says the row is the lowest band's
    output = np.zeros((count, 2))
    output[:, 0], output[:, 1] = lowest - rest, rest
    return bg.BandGains(np.zeros((count, bg.NUM_INPUTS)), np.ones((count, bg.NUM_INPUTS)), (hidden,), output)


def test_a_lowering_of_the_gates_size_opens_the_shut_bands_of_its_frame(rng):
    """Where the lowest band is shut to a lowering and the networks take it down by SPEECH_GATE_DB or more, the
    other bands shut in its frame are lowered too (by less); where it is not, they are not."""
    frames = 160
    S, mixture, speech, noise, mask = _separation(rng, frames, np.where(np.arange(frames) < frames // 2, 10.0, 0.3))
    bands = bg.band_weights(ANALYSIS)
    levels = bg.band_levels(bands, mixture, speech, noise, mask, ANALYSIS.sample_rate)
    speech_over_noise_db = 10 * np.log10(np.e) * (levels[1] - levels[2])
    shut = (speech_over_noise_db > bg.SPEECH_GATE_DB) & ~_noisy_context_of(levels)
    predictions = np.where(np.arange(bg.NUM_BANDS)[:, None] == 0, np.log(0.1), -0.5)
    moves = predictions - levels[3]  # the two networks agree: a lowering taken whole
    taken = np.where(moves < 0, 1.0, bg.BLEND) * moves
    assert np.all(np.abs(moves[1:][shut[1:]]) < bg.SPEECH_GATE_DB * np.log(10) / 20)  # too small to open alone
    yielding = (shut & (taken <= -bg.SPEECH_GATE_DB * np.log(10) / 20)).any(axis=0)
    assert 0 < (yielding & shut[1:].any(axis=0)).sum() < shut[1:].any(axis=0).sum()  # some frames of each
    passes = (moves < 0) & (~shut | yielding) | (moves > 0) & (speech_over_noise_db >= -bg.NOISE_GATE_DB)
    assert (passes[1:] & shut[1:]).any()
    spread = bg.move_weights(ANALYSIS)
    want = np.clip(mask * np.exp(spread.T @ np.where(passes, taken, 0.0)), 0.1, 1.0)
    corrected = _corrected([(S, mixture, speech, noise, mask)], _by_band(np.log(0.1), -0.5))
    np.testing.assert_allclose(corrected, want, rtol=1e-6)  # the networks' single precision


@pytest.mark.parametrize("cut", ["whole", "frames", "random"])
def test_the_mask_does_not_depend_on_how_the_frames_are_cut(rng, cut):
    S, mixture, speech, noise, mask = _separation(rng, frames=37)
    networks = _networks(rng)
    whole = _corrected([(S, mixture, speech, noise, mask)], networks)
    assert not np.allclose(whole, mask)
    frames = S.shape[1]
    edges = {"whole": [0, frames], "frames": list(range(frames + 1)),
             "random": [0, *sorted(rng.choice(np.arange(1, frames), 9, replace=False)), frames]}[cut]
    pieces = [tuple(part[:, a:b] for part in (S, mixture, speech, noise, mask)) for a, b in zip(edges, edges[1:])]
    given = list(bg.corrected_masks(pieces, networks, ANALYSIS, 0.1))
    np.testing.assert_array_equal(np.concatenate([S_part for S_part, _, _ in given], axis=1), S)
    np.testing.assert_array_equal(np.concatenate([part for _, part, _ in given], axis=1), mask)
    # the networks run in single precision on blocks of rows whose size depends on the cut
    np.testing.assert_allclose(np.concatenate([part for _, _, part in given], axis=1), whole, rtol=0, atol=1e-7)


def test_the_inputs_built_in_blocks_of_frames_give_the_same_mask(rng, monkeypatch):
    S, mixture, speech, noise, mask = _separation(rng, frames=37)
    networks = _networks(rng)
    whole = _corrected([(S, mixture, speech, noise, mask)], networks)
    monkeypatch.setattr(bg, "INPUT_FRAMES", 5)  # 37 frames: seven blocks and two frames
    np.testing.assert_allclose(_corrected([(S, mixture, speech, noise, mask)], networks), whole, rtol=0, atol=1e-7)


def test_a_stft_of_several_channels_is_held_back_with_its_mask(rng):
    S, mixture, speech, noise, mask = _separation(rng, frames=12)
    stereo = np.stack([S, 0.5 * S], axis=-1)
    pieces = [(stereo[:, a:a + 5], mixture[:, a:a + 5], speech[:, a:a + 5], noise[:, a:a + 5], mask[:, a:a + 5])
              for a in range(0, 12, 5)]
    given = list(bg.corrected_masks(pieces, _networks(rng), ANALYSIS, 0.1))
    np.testing.assert_array_equal(np.concatenate([part for part, _, _ in given], axis=1), stereo)
    np.testing.assert_array_equal(np.concatenate([part for _, part, _ in given], axis=1), mask)
    assert sum(m.shape[1] for _, _, m in given) == 12


def _valid(rng):
    return _networks(rng, count=2)


@pytest.mark.parametrize("change, message", [
    (lambda g: g._replace(mean=g.mean[:, :-1]), "do not chain"),
    (lambda g: g._replace(mean=g.mean[:, :107]), "networks of 107 inputs, which read ±3 frames around the frame as "
                                                 "an earlier version's did .224 inputs now.: train them again"),
    (lambda g: g._replace(mean=g.mean[:, :185]), "networks of 185 inputs, which do not read the mixture's "
                                                 "periodicity as an earlier version's did"),
    (lambda g: g._replace(scale=g.scale[:1]), "do not chain"),
    (lambda g: g._replace(hidden=(g.hidden[0][:, :-1],) + g.hidden[1:]), "do not chain"),
    (lambda g: g._replace(output=g.output[:, :-1]), "do not chain"),
    (lambda g: g._replace(hidden=()), "at least one hidden layer"),
    (lambda g: g._replace(scale=np.zeros_like(g.scale)), "positive scales"),
    (lambda g: g._replace(output=np.full_like(g.output, np.nan)), "finite"),
    (lambda g: g._replace(mean=g.mean.astype(str)), "real arrays"),
    (lambda g: tuple(g), "must be a sepsti.band_gains.BandGains, got tuple"),
    (lambda g: g._replace(predicts="moves"), "predicts 'moves', expected one of gain, move"),
])
def test_bad_networks_are_named(rng, change, message):
    with pytest.raises(ParameterError, match=message):
        bg.validate_band_gains(change(_valid(rng)))
