"""Tests of sepsti.noise_model's checks: what a noise model is learned from, and what is refused."""

import numpy as np
import pytest

from sepsti import features
from sepsti.core.errors import ParameterError
from sepsti.noise_model import (CONTEXT_SECONDS, QUIET_FLOOR_POWER, SEGMENT_SECONDS, learn_noise, min_frames,
                                too_little_sound, track_noise, validate_noise_model)
from sepsti.noise_power import RAYLEIGH_POWER

FRAMING = features.NARROWBAND


def rayleigh(rng, n_frames, n_bins=FRAMING.n_bins):
    """Magnitudes of a complex Gaussian noise of unit power, shape (n_bins, n_frames)."""
    return np.sqrt(rng.exponential(1.0, (n_bins, n_frames)))


def chunks(V):
    return lambda: iter(np.array_split(V, 3, axis=1))


@pytest.mark.parametrize("n_frames", [1, 3, 9])
def test_a_signal_of_fewer_than_two_frames_per_atom_gets_no_model(rng, n_frames):
    """A dictionary of five atoms was learned from one frame. (Shorter than min_frames, a signal that is all heard
    is learned on: the enhancer and the command line leave such signals as they are before.)"""
    model, energies = track_noise(chunks(rayleigh(rng, n_frames)), 5)
    assert model is None and len(energies) == n_frames
    assert track_noise(chunks(rayleigh(rng, 10)), 5)[0] is not None


def test_separate_refuses_a_signal_too_short_to_learn_its_noise_from(rng):
    from sepsti.denoise import separate

    W = rng.uniform(0.1, 1.0, (FRAMING.n_bins, 4))
    with pytest.raises(ParameterError, match="^V: too little sound"):
        separate(rayleigh(rng, 3), W / W.sum(axis=0), max_iter=2)


def test_every_segment_s_dictionary_has_two_frames_per_atom(rng):
    """At noise rank 100, the windows of the first and the last segment (6 s: 187 frames) hold fewer than two frames
    per atom: those segments take their neighbours' models. At 130 no window (8 s, 249 frames) holds enough."""
    model, _ = track_noise(chunks(rayleigh(rng, 500)), 100)
    assert len(model.W_noise) == 4
    np.testing.assert_array_equal(model.W_noise[0], model.W_noise[1])
    np.testing.assert_array_equal(model.W_noise[3], model.W_noise[2])
    assert not np.array_equal(model.W_noise[1], model.W_noise[2])
    assert track_noise(chunks(rayleigh(rng, min_frames(130))), 130)[0] is None
    window = FRAMING.frames(SEGMENT_SECONDS) + 2 * FRAMING.frames(CONTEXT_SECONDS)
    assert too_little_sound(130, FRAMING) == (f"a noise rank of 130 needs 260 frames of noise, more than the "
                                              f"{SEGMENT_SECONDS + 2 * CONTEXT_SECONDS:g} s around a segment hold "
                                              f"({window}); lower the noise rank")


def test_a_tracked_floor_starts_the_tracker_at_a_stationary_noise_s_power(rng):
    """The floor is the median of the quietest frames, which lie below the noise's median: raised by
    QUIET_FLOOR_POWER, its power is the noise's (unraised, 0.74 of it on 2.5 s of white noise at 8 kHz)."""
    starts = []
    for _ in range(4):
        white = rng.standard_normal(20000) / features.AMPLITUDE_SCALE
        magnitudes = np.abs(features.stft(white, framing=FRAMING)) / np.sqrt(np.sum(features.window(FRAMING) ** 2))
        model, _ = track_noise(chunks(magnitudes), 5)
        starts.append(np.median(RAYLEIGH_POWER * model.floor[0] ** 2))
    assert 0.9 < np.mean(starts) < 1.1, starts
    assert QUIET_FLOOR_POWER < 1.0


@pytest.mark.parametrize("bad", [np.nan, -1.0])
@pytest.mark.parametrize("learn", [lambda m: track_noise(m, 5)[0], lambda m: learn_noise(m, 5)])
def test_magnitudes_that_are_not_magnitudes_are_refused_by_name(rng, learn, bad):
    """A NaN frame in track_noise gave no model ('too little sound'); learn_noise named an inner argument;
    a negative frame was squared."""
    V = rayleigh(rng, 200)
    V[:, 5] = bad
    with pytest.raises(ParameterError, match="^magnitudes: contains NaN, Inf or negative"):
        learn(chunks(V))


def test_separate_names_nan_magnitudes_not_too_little_sound(rng):
    from sepsti.denoise import separate

    V = rayleigh(rng, 200)
    V[:, 5] = np.nan
    W = rng.uniform(0.1, 1.0, (FRAMING.n_bins, 4))
    with pytest.raises(ParameterError, match="^magnitudes: contains NaN, Inf or negative"):
        separate(V, W / W.sum(axis=0), max_iter=2)


@pytest.mark.parametrize("learn", [lambda m: track_noise(m, 5), lambda m: learn_noise(m, 5)])
def test_no_frames_are_refused(learn):
    with pytest.raises(ParameterError, match="^magnitudes: no STFT frames"):
        learn(lambda: iter(()))


def test_magnitudes_that_give_no_new_iterator_are_refused(rng):
    """A generator handed back at each call is empty the second time: no segment was learned ('too little
    sound')."""
    chunks_once = iter(np.array_split(rayleigh(rng, 200), 4, axis=1))
    with pytest.raises(ParameterError, match="^magnitudes: 0 STFT frames in the second pass, 200 in the first"):
        track_noise(lambda: chunks_once, 5)


@pytest.mark.parametrize("rank", [0, -1, 2.5, True])
@pytest.mark.parametrize("learn", [lambda m, r: track_noise(m, r), lambda m, r: learn_noise(m, r)])
def test_a_noise_rank_that_is_not_a_positive_integer_is_refused_by_name(rng, rank, learn):
    with pytest.raises(ParameterError, match=f"^noise_rank={rank!r} must be an integer of at least 1"):
        learn(chunks(rayleigh(rng, 200)), rank)


def test_learn_noise_refuses_other_frames_in_the_second_pass(rng):
    """An iterator handed back at each call met a raw numpy error; a second pass of other frames was learned on."""
    V = rayleigh(rng, 200)
    once = iter(np.array_split(V, 4, axis=1))
    with pytest.raises(ParameterError, match="^magnitudes: 0 STFT frames in the second pass, 200 in the first"):
        learn_noise(lambda: once, 5)
    for second in (V[:, :50], np.hstack([V, V])):
        passes = []

        def magnitudes():
            passes.append(1)
            return iter((V if len(passes) == 1 else second,))

        with pytest.raises(ParameterError, match=f"^magnitudes: {second.shape[1]} STFT frames in the second pass"):
            learn_noise(magnitudes, 5)


def test_a_malformed_noise_model_is_refused_by_its_fields(rng):
    """segment_frames 0 divided by zero; floors of other segments or bins, zero dictionaries and negative floors were
    used; a NaN floor was named as an inner argument."""
    from sepsti.denoise import denoise

    model = learn_noise(chunks(rayleigh(rng, 200)), 3)
    W = rng.uniform(0.1, 1.0, (FRAMING.n_bins, 4))
    y = 0.01 * rng.standard_normal(2 * FRAMING.sample_rate)
    for bad, match in [
        (model._replace(segment_frames=0), r"^noise.segment_frames=0 must be an integer of at least 1"),
        (model._replace(segment_frames=2.5), r"^noise.segment_frames=2.5 must be an integer"),
        (model._replace(floor=np.vstack([model.floor, model.floor])), r"^noise.floor: shape \(2, 257\); expected "
                                                                       r"\(1, 257\), a floor per segment"),
        (model._replace(floor=model.floor[:, :100]), r"^noise.floor: shape \(1, 100\)"),
        (model._replace(floor=np.nan * model.floor), "^noise.floor: the floors must be finite magnitudes"),
        (model._replace(floor=-model.floor), "^noise.floor: the floors must be finite magnitudes"),
        (model._replace(W_noise=0 * model.W_noise), "^noise.W_noise: an atom has no positive entry"),
        (model._replace(W_noise=-model.W_noise), "^noise.W_noise: the dictionaries must be finite and non-negative"),
        (model._replace(W_noise=model.W_noise[0]), r"^noise.W_noise: shape \(257, 3\); expected \(n_segments, "),
    ]:
        with pytest.raises(ParameterError, match=match):
            validate_noise_model(bad, FRAMING)
        with pytest.raises(ParameterError, match=match):
            denoise(y, W / W.sum(axis=0), noise=bad, max_iter=2)
    checked = validate_noise_model(model._replace(segment_frames=np.int64(7)), FRAMING)
    assert type(checked.segment_frames) is int and checked.W_noise is model.W_noise


def test_the_model_does_not_depend_on_how_the_magnitudes_are_chunked(rng):
    """A noise 10 dB louder over the second half of 20 s (five segments of 4 s): each frame's loudness is taken
    against the minimum-statistics floor of its own block of frames, wherever a chunk starts, so chunks of any
    size give the model of the whole."""
    n = 620
    V = rayleigh(rng, n)
    V[:, n // 2:] *= np.sqrt(10.0)
    V[:, ::7] *= 3.0  # louder frames here and there: the quietest ones are chosen
    whole, energies = track_noise(lambda: iter((V,)), 3)
    for sizes in ([100, 250, 270], [37] * 16 + [28]):
        chunked, chunked_energies = track_noise(lambda: iter(np.split(V, np.cumsum(sizes)[:-1], axis=1)), 3)
        assert len(whole.W_noise) == 5
        np.testing.assert_array_equal(chunked.floor, whole.floor)
        np.testing.assert_array_equal(chunked.W_noise, whole.W_noise)
        np.testing.assert_array_equal(chunked_energies, energies)


def test_minimum_statistics_follow_the_written_out_recursion(rng):
    """Each bin's magnitude smoothed by s_j = α s_(j-1) + (1 − α) V_j (α = exp(−hop / SMOOTHING_SECONDS), s_0 = V_0);
    its minimum per block of MINIMUM_SECONDS / 4, the last, shorter block joined to the one before (here 10 frames
    at a tenth of the level: they set that block's floor); each block's floor the least of the four blocks around
    it, shifted inwards at the ends."""
    from sepsti.noise_model import MINIMUM_SECONDS, SMOOTHING_SECONDS, _MinimumTracker

    hop = FRAMING.hop_length / FRAMING.sample_rate
    block = int(round(MINIMUM_SECONDS / 4 / hop))
    n = 6 * block + 10
    V = rng.uniform(1.0, 2.0, (3, n)) * np.linspace(1.0, 3.0, n)
    V[:, -10:] *= 0.1
    alpha = np.exp(-hop / SMOOTHING_SECONDS)
    smoothed = np.empty_like(V)
    smoothed[:, 0] = V[:, 0]
    for j in range(1, n):
        smoothed[:, j] = alpha * smoothed[:, j - 1] + (1 - alpha) * V[:, j]
    minima = [smoothed[:, b * block:(b + 1) * block].min(axis=1) for b in range(5)]
    minima.append(smoothed[:, 5 * block:].min(axis=1))  # the last block and the 10 frames after it
    expected = [np.min(minima[min(max(0, b - 2), 2):min(max(0, b - 2), 2) + 4], axis=0) for b in range(6)]
    tracker = _MinimumTracker(FRAMING)
    for part in np.array_split(V, 4, axis=1):
        tracker.push(part)
    np.testing.assert_allclose(tracker.floors(), expected, rtol=1e-6)  # the floors are kept in float32


def test_a_last_piece_of_half_a_segment_gets_its_own_model(rng):
    """A last piece shorter than half a segment joins the segment before it; one of half a segment or more is a
    segment of its own (at the enhancer's 16 ms hop a segment is 250 frames, and half of it a whole number)."""
    framing = features.enhancement_framing(FRAMING)
    segment = framing.frames(SEGMENT_SECONDS)
    assert segment % 2 == 0
    for extra, segments in [(segment // 2, 3), (segment // 2 - 1, 2)]:
        model, _ = track_noise(chunks(rayleigh(rng, 2 * segment + extra)), 2, framing=framing)
        assert len(model.W_noise) == segments, (extra, len(model.W_noise))


def test_a_segment_is_learned_on_the_quietest_frames_of_its_window_up_to_its_edges(rng, monkeypatch):
    """Segment s is learned on frames s · segment − context up to (s + 1) · segment + context, the last one
    excluded: the quietest frames at either edge of the window are chosen, and those just outside it are not."""
    from sepsti import noise_model

    segment, context = FRAMING.frames(SEGMENT_SECONDS), FRAMING.frames(CONTEXT_SECONDS)
    V = rayleigh(rng, 5 * segment, 20)
    first, last = 2 * segment - context, 3 * segment + context - 1  # segment 2's window
    quiet = [first - 1, first, last, last + 1]
    V[:, quiet] *= 0.05
    frame_of = {V[:, j].tobytes(): j for j in range(V.shape[1])}
    learned_on = []
    fit = noise_model._fit_noise

    def recording_fit(Vq, *args, **kwargs):
        learned_on.append({frame_of[np.ascontiguousarray(Vq[:, k]).tobytes()] for k in range(Vq.shape[1])})
        return fit(Vq, *args, **kwargs)

    monkeypatch.setattr(noise_model, "_fit_noise", recording_fit)
    model, _ = track_noise(chunks(V), 1)
    assert len(model.W_noise) == 5 and len(learned_on) == 5
    assert {first, last} <= learned_on[2] and not {first - 1, last + 1} & learned_on[2], sorted(learned_on[2])
    assert min(learned_on[2]) >= first and max(learned_on[2]) <= last
    assert first - 1 in learned_on[1] and last + 1 in learned_on[3]


def test_each_segment_s_frames_are_cut_at_their_own_floor(rng):
    """A low-pass noise for the first half of 20 s, then a high-pass one (each band 20 dB above the other): a rank-1
    dictionary is the mean of its frames' magnitudes cut at NOISE_CEILING times their own block's floor, the same
    share of each bin's Rayleigh magnitudes; so the first segment's atom holds 0.09 of its weight in the upper half of
    the bins and the last's 0.91 (each from 50 frames: within a few hundredths)."""
    segment = FRAMING.frames(SEGMENT_SECONDS)
    n = 5 * segment
    V = rayleigh(rng, n)
    upper = np.arange(FRAMING.n_bins) >= FRAMING.n_bins // 2
    V[upper, :n // 2] *= 0.1
    V[~upper, n // 2:] *= 0.1
    model, _ = track_noise(chunks(V), 1)
    expected = upper.sum() / (upper.sum() + 0.1 * (~upper).sum())
    shares = model.W_noise[:, upper, 0].sum(axis=1)
    assert abs(shares[-1] - expected) < 0.04 and abs(shares[0] - (1 - expected)) < 0.04, (shares, expected)


def test_minimum_statistics_count_digital_silence_towards_its_blocks_and_skip_it(rng):
    """Frames of digital silence are skipped by the smoothing and the minima but counted towards their blocks: a silent
    stretch across the end of block 0 leaves the blocks where they are, a block of nothing else has no minimum (NaN)
    and no say in its neighbours' floors, and a last, shorter block of sound joins a silent block before it. The
    level rises block by block, so each floor is the first heard block of its window, shifted inwards at the ends,
    but in one bin the last 10 frames, at a tenth of the level, set the floors of the windows that hold them."""
    from sepsti.noise_model import MINIMUM_SECONDS, SMOOTHING_SECONDS, _MinimumTracker

    hop = FRAMING.hop_length / FRAMING.sample_rate
    block = int(round(MINIMUM_SECONDS / 4 / hop))
    n = 7 * block + 10
    V = rng.uniform(1.0, 2.0, (3, n)) * np.linspace(1.0, 3.0, n)
    silent = np.zeros(n, dtype=bool)
    silent[block - 5:block + 5] = True  # across the end of block 0
    silent[2 * block:3 * block] = True  # block 2
    silent[6 * block:7 * block] = True  # the last whole block, before 10 frames of sound
    V[:, silent] = 0.0
    V[0, -10:] *= 0.1
    alpha = np.exp(-hop / SMOOTHING_SECONDS)
    smoothed = np.full_like(V, np.nan)
    state = V[:, 0]
    for j in np.flatnonzero(~silent):
        state = state if j == 0 else alpha * state + (1 - alpha) * V[:, j]
        smoothed[:, j] = state
    minima = [np.fmin.reduce(smoothed[:, b * block:(b + 1) * block], axis=1) for b in range(6)]
    minima.append(np.fmin.reduce(smoothed[:, 6 * block:], axis=1))  # the silent block 6 and the 10 frames after it
    assert np.isnan(minima[2]).all() and not np.isnan(minima[6]).any()
    expected = [np.fmin.reduce(minima[min(max(0, b - 2), 3):min(max(0, b - 2), 3) + 4], axis=0) for b in range(7)]
    tracker = _MinimumTracker(FRAMING)
    for part in np.array_split(V, 5, axis=1):
        tracker.push(part)
    floors = tracker.floors()
    assert floors.shape == (7, 3)
    np.testing.assert_allclose(floors, expected, rtol=1e-6)


@pytest.mark.parametrize("learn", [lambda m: learn_noise(m, 3).W_noise, lambda m: track_noise(m, 3)[0].W_noise])
def test_bins_of_exact_zeros_stay_learnable(rng, learn):
    """A noise band-limited below the upper quarter of the bins (resampled audio), whose upper bins are exact zeros in
    every frame: the offset added before the factorization, a thousandth of the mean magnitude (0.66 here), keeps
    their entries at its share of an atom, about 0.00066 / (192 · 0.89) = 4e-6, where without it the multiplicative
    updates drive them towards zero (1e-310 after 50 iterations)."""
    V = rayleigh(rng, 300)
    upper = 3 * FRAMING.n_bins // 4
    V[upper:] = 0.0
    W = learn(chunks(V))
    assert np.all(np.isfinite(W)) and np.all(W[:, :upper] > 1e-4)
    assert 1e-7 < W[:, upper:].min() and W[:, upper:].max() < 1e-4, (W[:, upper:].min(), W[:, upper:].max())


def test_learn_noise_takes_as_many_frames_as_atoms_and_refuses_fewer(rng):
    """The noise rank is at most the recording's number of frames: five frames give a model of five atoms, four are
    refused by name."""
    model = learn_noise(chunks(rayleigh(rng, 5)), 5)
    assert model.W_noise.shape == (1, FRAMING.n_bins, 5)
    with pytest.raises(ParameterError, match="^noise sample: 4 STFT frames, fewer than the noise rank 5"):
        learn_noise(chunks(rayleigh(rng, 4)), 5)
