"""Tests of sepsti.noise_power: the two-sided MMSE noise power tracker."""

import numpy as np
import pytest

from sepsti import features
from sepsti.core.errors import ParameterError
from sepsti.noise_power import (LOOKAHEAD_SECONDS, POWER_SMOOTHING, PRESENCE_SMOOTHING, SPEECH_SNR_DB, STAGNATION,
                                STEADY_HERTZ, STEADY_LOWEST_HZ, STEADY_RANGE_DB, STEADY_SECONDS, TROUGH_HIGHEST_HZ,
                                TROUGH_LOWEST_HZ, TROUGH_QUANTILE, TROUGH_REACH_SECONDS, TROUGH_RISE, TROUGH_SPREAD,
                                UNFOLLOWED_RISE_DB, NoisePowerTracker, real_bin_bias, stationary_bias,
                                track_noise_power)

FRAMING = features.NARROWBAND
HOP = FRAMING.hop_length / FRAMING.sample_rate


QUARTER = features.enhancement_framing(FRAMING)


def reference_estimates(powers, initial_power, framing=FRAMING, gap=0):
    """The two-sided prediction written out bin by bin and frame by frame (Gerkmann & Hendriks 2012's recursion),
    raised to the steady power (:func:`reference_steady`) and then to the troughs' level (:func:`reference_troughs`).

    Frame f takes the forward estimate before frame f - gap and the backward estimate before frame f + gap: their
    mean weighted by the other's age, or the larger where it is more than UNFOLLOWED_RISE_DB above the other. An
    estimate's age is the mean age, in frames, of the observations it averages: A <- w A + 1 at each frame, w the
    weight the estimate keeps; a bin of digital silence holds the estimate and the smoothed presence, and the
    observations averaged grow a frame older. The recursions run at the bias times the power (stationary_bias;
    real_bin_bias at DC and Nyquist): they start at the bias times the initial power, and the estimates are divided
    by it.
    """
    hop = framing.hop_length / framing.sample_rate
    alpha = POWER_SMOOTHING ** (hop / 0.016)
    beta = PRESENCE_SMOOTHING ** (hop / 0.016)
    xi = 10 ** (SPEECH_SNR_DB / 10)

    def run(sequence, sigma, age):
        """The estimate and its age before each observation."""
        presence, out = 0.5, []
        for observed in sequence:
            out.append((sigma, age))
            if observed <= features.SILENT_MAGNITUDE ** 2:  # digital silence: the state is held, its age grows
                age += 1
                continue
            probability = 1 / (1 + (1 + xi) * np.exp(-observed / sigma * xi / (1 + xi)))
            presence = beta * presence + (1 - beta) * probability
            if presence > STAGNATION:
                probability = min(probability, STAGNATION)
            sigma = alpha * sigma + (1 - alpha) * ((1 - probability) * observed + probability * sigma)
            age = (alpha + (1 - alpha) * probability) * age + 1
        return np.array(out)

    n_bins, n = powers.shape
    bias = np.array([real_bin_bias(framing) if f in (0, framing.n_bins - 1) else stationary_bias(framing)
                     for f in range(n_bins)])[:, None]
    started = initial_power * bias[:, 0]
    cell = int(round(LOOKAHEAD_SECONDS / hop))
    out = np.empty_like(powers)
    forwards = np.empty_like(powers)
    for f in range(n_bins):
        forward = run(powers[f], started[f], 1 / (1 - alpha))
        forwards[f] = forward[:, 0]
        for start in range(0, n, cell):
            # each cell's backward run starts at the end of the next cell (or of the signal), from the forward estimate
            end = start + 2 * cell if start + 2 * cell <= n else n
            backward = run(powers[f, start:end][::-1], *forward[end - 1])[::-1]
            for frame in range(start, min(start + cell, n)):
                before, age_before = forward[frame - gap] if frame >= gap else (started[f], 1 / (1 - alpha))
                after, age_after = backward[min(frame + gap, end - 1) - start]
                apart = max(before, after) > 10 ** (UNFOLLOWED_RISE_DB / 10) * min(before, after)
                weighted = (before * age_after + after * age_before) / (age_before + age_after)
                out[f, frame] = max(before, after) if apart else weighted
    return reference_troughs(powers, np.maximum(out / bias, reference_steady(powers, forwards / bias, framing)),
                             framing)


def reference_troughs(powers, estimates, framing):
    """The troughs' level written out frame by frame: the ratios of power to estimate in the bins from
    TROUGH_LOWEST_HZ up to TROUGH_HIGHEST_HZ over TROUGH_REACH_SECONDS either side (ends repeated); their
    TROUGH_QUANTILE quantile over -ln(1 - q) is the level, which multiplies those bins' estimates where it exceeds
    TROUGH_RISE and the ratios' median over ln 2 is below TROUGH_SPREAD times it."""
    n = powers.shape[1]
    reach = int(round(TROUGH_REACH_SECONDS * framing.sample_rate / framing.hop_length))
    band = trough_band(framing)
    ratios = powers[band] / estimates[band]
    out = estimates.copy()
    for j in range(n):
        window = ratios[:, np.clip(np.arange(j - reach, j + reach + 1), 0, n - 1)]
        level = np.quantile(window, TROUGH_QUANTILE) / -np.log(1 - TROUGH_QUANTILE)
        if level > TROUGH_RISE and np.median(window) / np.log(2) < TROUGH_SPREAD * level:
            out[band, j] *= level
    return out


def reference_steady(powers, predicted, framing):
    """The steady power written out window by window: the strongest power within STEADY_HERTZ of a bin, its least
    and largest over STEADY_SECONDS (ends repeated), kept where they lie within STEADY_RANGE_DB, the least is
    above every prediction within STEADY_HERTZ and the bin at or above STEADY_LOWEST_HZ; then the largest kept
    level of the windows and bins around a frame, capped by its power."""
    n_bins, n = powers.shape
    frames = int(round(STEADY_SECONDS * framing.sample_rate / framing.hop_length))
    bins = int(round(STEADY_HERTZ * framing.n_fft / framing.sample_rate))

    def around(i, size, limit):
        return np.clip(np.arange(i - size // 2, i + (size - 1) // 2 + 1), 0, limit - 1)

    def near(b):
        return slice(max(0, b - bins), b + bins + 1)

    level = np.zeros_like(powers)
    for b in range(n_bins):
        band = powers[near(b)].max(axis=0)
        for j in range(n):
            window = band[around(j, frames, n)]
            steady = window.min() * 10 ** (STEADY_RANGE_DB / 10) >= window.max()
            above = window.min() > predicted[near(b), j].max()
            if steady and above and b * framing.sample_rate / framing.n_fft >= STEADY_LOWEST_HZ:
                level[b, j] = window.min()
    held = np.array([[level[near(b)][:, around(i, frames, n)].max() for i in range(n)] for b in range(n_bins)])
    return np.minimum(powers, held)


def steady_tone(powers, bins, frames, power):
    """``powers`` with a tone of ``power`` over ``frames`` wavering between ``bins`` frame by frame (in place)."""
    for k, frame in enumerate(range(frames.start, frames.stop)):
        powers[bins[k % len(bins)], frame] += power
        powers[bins[(k + 1) % len(bins)], frame] += 0.3 * power
    return powers


#: Noise powers of the reference tests' bins: bins of very different levels side by side, then quiet bins up
#: to 420 Hz at the 8 kHz framings (tones at bins 22 and 23, 344–359 Hz, lie above STEADY_LOWEST_HZ).
LEVELS = np.concatenate([[1.0, 30.0, 1e4, 3.0, 1.0, 2.0], np.ones(21)])


def trough_band(framing):
    """The bins from TROUGH_LOWEST_HZ up to TROUGH_HIGHEST_HZ."""
    return slice(int(TROUGH_LOWEST_HZ * framing.n_fft / framing.sample_rate),
                 int(TROUGH_HIGHEST_HZ * framing.n_fft / framing.sample_rate))


def low_band_swell(powers, start):
    """``powers`` with the bins of 47-281 Hz (at 8 kHz, 512 points) eight times louder for 40 frames from ``start``,
    the first 20 with every other bin 30 dB up (a voice's harmonics, whose spread ratios the troughs' level
    refuses), in place."""
    powers[3:19, start:start + 40] *= 8.0
    powers[4:19:2, start:start + 20] *= 1000.0
    return powers


def noise_powers(rng, level, n):
    """|N|² of a complex Gaussian noise of power ``level`` per bin (exponential), shape (len(level), n)."""
    return rng.exponential(1.0, (len(level), n)) * np.asarray(level)[:, None]


def test_two_sided_estimate_matches_the_reference(rng):
    n = 7 * int(round(LOOKAHEAD_SECONDS / HOP)) + 11  # several cells and a partial one
    level = LEVELS
    powers = noise_powers(rng, level, n)
    powers[:, 100:130] *= 100.0  # a burst 20 dB up
    # near-silence, 60-100 dB down but above digital silence: the recursions come out of it far apart
    powers[:, 200:240] = 2e-6 * (1.0 + powers[:, 200:240] / level[:, None])
    steady_tone(powers, [22, 23], range(118, 160), 300.0)  # a tone across a cell's end, wavering between two bins
    low_band_swell(powers, 0)  # from the start: the troughs' level refused in some frames and read in others
    initial = level * 0.3
    ours = track_noise_power(np.sqrt(powers), initial, FRAMING)
    np.testing.assert_allclose(ours, reference_estimates(powers, initial), rtol=2e-6)
    # the tone is followed from its start (the recursion alone takes it for speech for most of a second)
    assert ours[22:24, 118:160].sum(axis=0).min() > 0.7 * 300.0, ours[22:24, 118:160].sum(axis=0).min()


def test_frames_every_quarter_window_leave_out_their_nearest_neighbours(rng):
    """Frames every quarter window share three quarters of their samples with the frames beside them."""
    from sepsti.noise_power import overlapping_neighbours

    assert overlapping_neighbours(FRAMING) == 0 and overlapping_neighbours(QUARTER) == 1
    n = 3 * int(round(LOOKAHEAD_SECONDS * QUARTER.sample_rate / QUARTER.hop_length)) + 7
    level = LEVELS
    powers = noise_powers(rng, level, n)
    powers[:, 100:130] *= 100.0
    steady_tone(powers, [22, 23], range(235, 320), 300.0)
    low_band_swell(powers, n - 40)  # up to the end, where the last frame stands in for those beyond
    initial = level * 0.3
    ours = track_noise_power(np.sqrt(powers), initial, QUARTER)
    np.testing.assert_allclose(ours, reference_estimates(powers, initial, QUARTER, gap=1), rtol=2e-6)
    # a burst in one frame moves the estimates of the frames two away, not those of its neighbours
    burst = powers.copy()
    burst[:, 200] *= 1e4
    moved = np.abs(track_noise_power(np.sqrt(burst), initial, QUARTER) / ours - 1).max(axis=0)
    assert moved[199:202].max() < 1e-6 and moved[198] > 1e-3 and moved[202] > 1e-3, moved[197:204]


@pytest.mark.parametrize("sizes", [(1,), (7,), (64, 1, 200), (5000,)])
@pytest.mark.parametrize("framing", [FRAMING, QUARTER])
def test_estimates_do_not_depend_on_chunking(rng, sizes, framing):
    level = np.exp(rng.uniform(0, 5, 40))
    # a steady tone across cells' ends (above STEADY_LOWEST_HZ): its power depends on frames already emitted
    powers = steady_tone(noise_powers(rng, level, 700), [22, 23, 24], range(100, 400), 1e4)
    # and one of 1.3 s across the end of the second cell at either hop, which both recursions take for speech: its
    # steady power, read against the forward predictions of frames already emitted, sets the estimates
    magnitudes = np.sqrt(steady_tone(powers, [33, 34], range(100, 184), 1e4))
    whole = track_noise_power(magnitudes, level, framing)
    tracker, pieces, position, index = NoisePowerTracker(level, framing), [], 0, 0
    pieces.append(tracker.push(magnitudes[:, :0]))  # an empty piece, first of all, changes nothing
    while position < magnitudes.shape[1]:
        size = sizes[index % len(sizes)]
        pieces.append(tracker.push(magnitudes[:, position:position + size]))
        position, index = position + size, index + 1
    pieces.append(tracker.finish())
    assert sum(piece.shape[1] for piece in pieces) == magnitudes.shape[1]
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), whole, rtol=1e-12)


@pytest.mark.parametrize("framing", [features.NARROWBAND, features.enhancement_framing(features.NARROWBAND)])
def test_stationary_noise_power_is_estimated_without_bias_in_every_bin(rng, framing):
    """On the STFT of a stationary noise alone the mean estimate is the noise's power, whatever the bin's level,
    in the real-valued DC and Nyquist bins too."""
    # white Gaussian noise framed as the enhancer frames it (overlapping, correlated frames)
    white = rng.standard_normal(3000 * framing.hop_length) / features.AMPLITUDE_SCALE
    powers = np.square(np.abs(features.stft(white, framing=framing))) / np.sum(features.window(framing) ** 2)
    level = np.exp(rng.uniform(0, 8, len(powers)))  # 35 dB of spectral tilt
    ratio = track_noise_power(np.sqrt(powers * level[:, None]), 0.3 * level, framing)[:, 100:] / level[:, None]

    def means(rows):
        """Each bin's mean, and the Monte-Carlo error of a bin's mean from its own course (batch means over
        stretches far longer than the recursion's memory), not from the spread across bins, which a bias that
        varies by bin would widen."""
        batches = ratio[rows, :ratio.shape[1] // 10 * 10].reshape(len(rows), 10, -1).mean(axis=2)
        return ratio[rows].mean(axis=1), np.sqrt(np.mean(batches.var(axis=1, ddof=1)) / 10)

    # every fourth complex bin, so that the bins are independent (a Hamming window's squared transform spans five)
    per_bin, se = means(np.arange(2, 254, 4))
    # the mean over bins also carries the error of the bias's own simulation (1800 frames kept; of its 256
    # bins, those four apart are independent)
    se_mean = np.hypot(se / np.sqrt(len(per_bin)), se * np.sqrt(ratio.shape[1] / 1800 / 64))
    assert abs(per_bin.mean() - 1.0) < 4 * se_mean, (per_bin.mean(), se_mean)
    assert np.abs(per_bin - 1.0).max() < 5 * se, (per_bin, se)
    # DC and Nyquist hold one squared Gaussian each and have a bias of their own (128 series of 1800 frames); with
    # the complex bins' they read 0.3-0.45. At the 32 ms hop the two recursions' weighting by age reads them
    # 1.12-1.15 on average (16 runs), at the enhancer's 16 ms hop 1.00-1.02
    edges, se_edges = means(np.array([0, framing.n_bins - 1]))
    if framing == QUARTER:
        se_edges_mean = np.hypot(se_edges / np.sqrt(2), se_edges * np.sqrt(ratio.shape[1] / 1800 / 128))
        assert abs(edges.mean() - 1.0) < 4 * se_edges_mean and np.abs(edges - 1.0).max() < 5 * se_edges, \
            (edges, se_edges)
    else:
        assert 0.7 < edges.mean() < 1.6, edges
    # the raw recursion settles well below the power: the correction is not a no-op
    assert 0.6 < stationary_bias(framing) < 0.85 and 0.15 < real_bin_bias(framing) < 0.45


@pytest.mark.parametrize("framing", [FRAMING, QUARTER])
def test_the_first_frames_of_a_stationary_noise_read_the_power_it_starts_from(rng, framing):
    """Started from a stationary noise's true power, the first frames read that power: the recursions start at
    the bias times it, where they settle (started at the power itself, the first four frames read 1.10 times it
    and a signal of one frame 1.3-1.4 times)."""
    first, alone = [], []
    for _ in range(4):
        white = rng.standard_normal(2 * framing.sample_rate) / features.AMPLITUDE_SCALE
        powers = np.square(np.abs(features.stft(white, framing=framing))) / np.sum(features.window(framing) ** 2)
        first.append(track_noise_power(np.sqrt(powers), np.ones(len(powers)), framing)[20:250, :4].mean())
        alone.append(track_noise_power(np.sqrt(powers[:, :1]), np.ones(len(powers)), framing)[20:250].mean())
    # 4 x 230 bins x 4 frames: the mean is within about 2 % of its expectation (0.97-0.98)
    assert abs(np.mean(first) - 1.0) < 0.06, first
    # one frame: the backward run starts from the forward estimate that has seen it (about 1.07)
    assert 0.95 < np.mean(alone) < 1.2, alone


@pytest.mark.parametrize("initial", [np.full(40, np.nan), -np.ones(40), np.ones((40, 1)), np.ones(300)])
def test_a_starting_power_that_is_no_power_of_the_bins_is_refused(initial):
    with pytest.raises(ParameterError, match="^initial_power: "):
        NoisePowerTracker(initial, FRAMING)


@pytest.mark.parametrize("magnitudes", [np.full((40, 10), np.nan), np.full((40, 10), np.inf), -np.ones((40, 10)),
                                        np.ones((30, 10))])
def test_magnitudes_that_are_not_magnitudes_or_of_other_bins_are_refused(magnitudes):
    """NaN magnitudes gave estimates that were all NaN, negative ones (a log spectrogram, say) were squared;
    other bins gave a broadcasting error."""
    with pytest.raises(ParameterError, match="^magnitudes: "):
        track_noise_power(magnitudes, np.ones(40), FRAMING)


def test_a_finished_tracker_takes_no_more_frames(rng):
    """finish() twice gave a broadcasting error; push() after it returned no estimates, silently."""
    magnitudes = np.sqrt(noise_powers(rng, np.ones(40), 50))
    for after in (lambda tracker: tracker.finish(), lambda tracker: tracker.push(magnitudes)):
        tracker = NoisePowerTracker(np.ones(40), FRAMING)
        assert tracker.push(magnitudes).shape[1] + tracker.finish().shape[1] == 50
        with pytest.raises(ParameterError, match="finish"):
            after(tracker)


def test_the_shipped_framings_biases_are_those_the_simulation_gives():
    """The biases kept for the shipped dictionaries' enhancement framings are the simulation's (to rounding: the
    recursion's exp may differ in its last bit from machine to machine), and every shipped dictionary has them."""
    from sepsti.bandwidth import dictionary_path_for_rate
    from sepsti.dictionary import load_dictionary
    from sepsti.noise_power import _SHIPPED_BIASES, _simulated_biases

    shipped = {features.enhancement_framing(load_dictionary(dictionary_path_for_rate(rate)).framing)
               for rate in (8000, 16000)}
    assert shipped == set(_SHIPPED_BIASES)
    for framing, biases in _SHIPPED_BIASES.items():
        np.testing.assert_allclose(biases, _simulated_biases(framing), rtol=1e-12)
        assert (stationary_bias(framing), real_bin_bias(framing)) == biases


def test_overlapping_frames_settle_higher_than_independent_ones(rng):
    """The bias is measured on framed noise: denser frames are more alike, and the recursion follows them closer."""
    from sepsti.noise_power import _Coefficients, _recursion

    quarter = features.enhancement_framing(FRAMING)
    hop_seconds = quarter.hop_length / quarter.sample_rate
    independent, _ = _recursion(rng.exponential(1.0, (256, 2000)), np.ones(256), np.full(256, 0.5),
                                _Coefficients(hop_seconds), np.ones(256))
    independent = independent[:, 200:].mean()
    assert stationary_bias(quarter) - independent > 0.02, (stationary_bias(quarter), independent)


def test_a_noise_that_switches_on_is_taken_from_the_recursion_that_followed_it(rng):
    """A 30 dB step (within UNFOLLOWED_RISE_DB): the forward recursion takes it for speech for most of a second,
    the backward one has followed it; weighted by age, the two-sided estimate is the backward one's (their plain
    mean would be about 0.75 of the noise's power from a quarter to one second after the step). Above
    TROUGH_HIGHEST_HZ, where the troughs' level does not take part."""
    n, step = 1000, 400
    level = np.where(np.arange(n) >= step, 1000.0, 1.0)
    powers = rng.exponential(1.0, (64, n)) * level
    estimates = track_noise_power(np.sqrt(powers), np.ones(64), FRAMING)[trough_band(FRAMING).stop:]
    after = slice(step + int(0.25 / HOP), step + int(1.0 / HOP))
    ratio = (estimates[:, after] / level[after]).mean()
    assert 0.9 < ratio < 1.15, ratio
    # settled on both sides, unbiased
    assert abs((estimates[:, 50:step - 70] / level[50:step - 70]).mean() - 1.0) < 0.05


def test_a_rising_noise_is_followed_and_speech_is_not(rng):
    """Above TROUGH_HIGHEST_HZ (below it, a burst without a voice's harmonics is read as noise from its troughs)."""
    level = np.full(32, 100.0)
    n = 400
    powers = noise_powers(rng, level, n)
    powers[:, 200:] *= 10.0                      # the noise rises by 10 dB for good at frame 200
    burst = slice(80, 90)                         # 0.3 s of 'speech' 20 dB above the noise
    powers[:, burst] += 100.0 * level[:, None] * rng.exponential(1.0, (32, 10))
    above = trough_band(FRAMING).stop
    estimate = track_noise_power(np.sqrt(powers), level, FRAMING)[above:].mean(axis=0) / 100.0
    settled = estimate[20:70].mean()             # noise alone, before the burst
    assert estimate[burst].max() < 2.0 * settled, (estimate[burst].max(), settled)
    # a second after the rise (both directions have seen it) the estimate is 10 dB up
    after = estimate[240:360].mean()
    assert 8.0 < after / settled < 12.5, after / settled


def test_digital_silence_holds_the_estimate(rng):
    """Frames of exact zeros (padding, a muted stretch) say nothing about the noise: the estimate is held (in the
    bins above TROUGH_HIGHEST_HZ: below it a few frames of a stationary noise in a hundred are read as louder)."""
    import warnings

    level = np.full(40, 50.0)
    above = trough_band(FRAMING).stop
    powers = np.concatenate([noise_powers(rng, level, 150), np.zeros((40, 100)), noise_powers(rng, level, 150)], axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow or division warnings either
        estimate = track_noise_power(np.sqrt(powers), level, FRAMING)[above:].mean(axis=0) / 50.0
        from_silence = track_noise_power(np.sqrt(powers[:, 150:]), 1e-12 * level, FRAMING)[above:].mean(axis=0) / 50.0
    assert np.all((estimate > 0.6) & (estimate < 1.6)), estimate.min()
    # a recording that starts with silence: the estimate after it is found from the noise, not held at zero
    assert 0.6 < from_silence[150:].mean() < 1.6, from_silence[150:].mean()


def test_the_noise_is_followed_on_both_sides_of_near_silence(rng):
    """A muted stretch (60 dB down) in a steady noise: the recursion coming out of it lags for most of a second."""
    level = np.full(32, 50.0)
    quiet = int(round(2.0 / HOP))
    powers = np.concatenate([noise_powers(rng, level, 200), noise_powers(rng, 1e-6 * level, quiet),
                             noise_powers(rng, level, 200)], axis=1)
    estimate = track_noise_power(np.sqrt(powers), level, FRAMING) / 50.0
    lag = int(round(0.5 / HOP))  # the half second on each side, where the mean of the two recursions halves it
    near = np.concatenate([estimate[:, 200 - lag:200], estimate[:, 200 + quiet:200 + quiet + lag]], axis=1)
    # over 32 bins x 2 lag frames the mean estimate of a steady noise has a standard error of a few per cent
    # (test_stationary_noise_power_is_estimated_without_bias_in_every_bin); the mean alone gives 0.5-0.6
    assert 0.8 < near.mean() < 1.25, near.mean()


@pytest.mark.parametrize("shape", [(7, 300), (3, 1), (2, 49), (4, 0)])
@pytest.mark.parametrize("size", [1, 2, 50, 51, 400])
def test_running_extremes_are_scipy_s_filters(rng, shape, size):
    from scipy.ndimage import maximum_filter1d, minimum_filter1d

    from sepsti.noise_power import _running_extreme

    x = rng.exponential(1.0, shape).astype(np.float32)
    np.testing.assert_array_equal(_running_extreme(x, size, np.maximum),
                                  maximum_filter1d(x, size, axis=1, mode="nearest"))
    np.testing.assert_array_equal(_running_extreme(x, size, np.minimum),
                                  minimum_filter1d(x, size, axis=1, mode="nearest"))


def test_a_held_tone_is_followed_at_once_but_a_voice_s_lowest_harmonic_is_not(rng):
    """A tone held for a second, 20 dB above the noise: at 1 kHz it is steady noise from its second frame; at
    110 Hz, where a voice's first harmonic may hold as still, it is left to the recursion, which takes it for
    speech."""
    framing = QUARTER
    hertz = framing.sample_rate / framing.n_fft
    level = np.ones(framing.n_bins)
    powers = noise_powers(rng, level, 300)
    held = range(100, 100 + int(round(1.0 * framing.sample_rate / framing.hop_length)))
    high, low = int(round(1000 / hertz)), int(round(110 / hertz))
    assert low * hertz < STEADY_LOWEST_HZ < high * hertz
    for b in (high, low):
        steady_tone(powers, [b, b + 1], held, 100.0)
    estimate = track_noise_power(np.sqrt(powers), level, framing)
    first = slice(held.start + 1, held.start + 20)  # the tone's first 0.3 s, from its second frame
    assert estimate[high:high + 2, first].sum(axis=0).min() > 0.7 * 100.0
    assert estimate[low:low + 2, first].sum(axis=0).max() < 10.0


def test_a_low_band_noise_the_prediction_misses_is_read_from_the_troughs(rng):
    """A roar that swells eightfold below 300 Hz for 0.4 s of every 1.2 s: the recursions smooth over the swells
    (a quarter of their power without the troughs' level); the troughs read most of it. A voice's harmonics
    over a noise the prediction knows raise nothing."""
    from sepsti import noise_power

    framing = QUARTER
    band = trough_band(framing)
    n = 800
    swelling = np.mod(np.arange(n) * framing.hop_length / framing.sample_rate, 1.2) < 0.4
    level = np.ones((40, n))
    level[band, :] = np.where(swelling, 8.0, 1.0)
    powers = rng.exponential(1.0, level.shape) * level
    voiced = rng.exponential(1.0, level.shape[:1] + (n,))
    for pitch in (120.0, 240.0):  # two harmonics, each over three bins, 20 dB up for 600 frames
        b = int(round(pitch * framing.n_fft / framing.sample_rate))
        voiced[b - 1:b + 2, 100:700] *= 100.0 * rng.exponential(1.0, (3, 600))

    def estimates(rise):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(noise_power, "TROUGH_RISE", rise)
            return (track_noise_power(np.sqrt(powers), np.ones(40), framing),
                    track_noise_power(np.sqrt(voiced), np.ones(40), framing))

    (roar, voice), (roar_unread, voice_unread) = estimates(TROUGH_RISE), estimates(np.inf)
    # 16 bins x 9 frames of exponential ratios per frame: the troughs' level is read to within a few per cent
    found, unread = [(e[band][:, swelling] / level[band][:, swelling]).mean() for e in (roar, roar_unread)]
    assert found > 0.7 and unread < 0.35, (found, unread)
    np.testing.assert_array_equal(roar[band.stop:], roar_unread[band.stop:])  # above the band: untouched
    raised = np.any(voice != voice_unread, axis=0)
    assert raised.mean() < 0.01, np.flatnonzero(raised)


@pytest.mark.parametrize("rate", [4000, 5000, 7000, 9000, 12000, 19000, 25000, 31000, 45000])
def test_real_bin_bias_at_rates_whose_window_parts_are_singular(rate):
    # the window's quarter-window parts span only {1, cos, sin}: their covariance is singular, and its
    # Cholesky factor failed ('Matrix is not positive definite') for dictionaries trained at these rates
    framing = features.enhancement_framing(features.framing_for_rate(rate))
    assert 0.3 < real_bin_bias(framing) < 0.4


def test_expected_magnitude_is_the_mean_of_rayleigh_magnitudes(rng):
    """The known noise magnitude the enhancer puts in each frame's noise part: the mean |N| of a complex Gaussian
    noise of power p is sqrt(π p / 4) (Rayleigh, σ² = p / 2 per component), not sqrt(p)."""
    from sepsti.noise_power import expected_magnitude

    power, n = np.array([7.0, 0.03]), 400_000
    samples = np.abs(rng.normal(0, np.sqrt(power[:, None] / 2), (2, n))
                     + 1j * rng.normal(0, np.sqrt(power[:, None] / 2), (2, n)))
    # the sample mean's relative standard error is sqrt((4 / π - 1) / n) = 0.083 %: five of them
    np.testing.assert_allclose(expected_magnitude(power), samples.mean(axis=1), rtol=5 * np.sqrt((4 / np.pi - 1) / n))
    np.testing.assert_allclose(expected_magnitude(power), np.sqrt(np.pi * power / 4), rtol=1e-12)


def test_digital_silence_holds_the_state_as_the_reference_does(rng):
    """Bins of exact zeros (a muted stretch in part of the band, then in all of it) hold each recursion's estimate and
    its smoothed speech presence, and age it by a frame a frame: a noise rising 20 dB just before the silence and
    another 20 dB after it, in some of those bins, is followed from the presence it had (the reference, frame by
    frame)."""
    n = 4 * int(round(LOOKAHEAD_SECONDS / HOP)) + 7
    level = LEVELS
    powers = noise_powers(rng, level, n)
    powers[3:12, 120:] *= 100.0  # rises 20 dB: the presence climbs to the stagnation cap
    powers[3:12, 200:] *= 100.0  # and again after the silence
    powers[3:18, 160:200] = 0.0  # digital silence in part of the band
    powers[:, 300:330] = 0.0  # and in all of it
    initial = level * 0.5
    np.testing.assert_allclose(track_noise_power(np.sqrt(powers), initial, FRAMING),
                               reference_estimates(powers, initial), rtol=2e-6)


def test_a_start_from_zero_power_and_digital_silence_gives_no_warning_and_finds_the_noise(rng):
    """A starting power of zero (allowed: non-negative) and a recording that opens with digital silence in every bin:
    the speech probability's a posteriori SNR divides by the floor, not by a zero estimate, and so do the troughs'
    ratios, so no division warns (nor 0 / 0 in a recording of silence alone); the noise after the silence is found
    (in the bins above TROUGH_HIGHEST_HZ)."""
    import warnings

    level = np.full(40, 50.0)
    powers = np.concatenate([np.zeros((40, 60)), noise_powers(rng, level, 300)], axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        estimate = track_noise_power(np.sqrt(powers), np.zeros(40), FRAMING)
        # a recording of digital silence alone: its noise power is zero, in the troughs' band too
        silent = track_noise_power(np.zeros((40, 100)), np.zeros(40), FRAMING)
    assert np.all(np.isfinite(estimate))
    np.testing.assert_array_equal(silent, 0.0)
    assert 0.6 < estimate[trough_band(FRAMING).stop:, 200:].mean() / 50.0 < 1.6


def test_frames_that_share_more_than_half_their_samples_are_counted_at_any_overlap():
    """With a hop of 1/r of the window, the frame k hops away shares (r - k) / r of its samples: more than half for
    k < r / 2."""
    from sepsti.noise_power import overlapping_neighbours

    for r in (1, 2, 4, 8, 16):
        framing = features.Framing(8000, 512, 512 // r)
        assert overlapping_neighbours(framing) == sum(1 for k in range(1, r) if (r - k) / r > 0.5), r


def test_a_tracker_of_bins_below_the_troughs_band_takes_frames(rng):
    """The troughs' band starts at TROUGH_LOWEST_HZ (bin 3 at 8 kHz, 512 points): a tracker of the first two bins
    alone has no band to read and returns its recursions' estimates, one per frame."""
    level = np.array([4.0, 9.0])
    magnitudes = np.sqrt(noise_powers(rng, level, 300))
    estimates = track_noise_power(magnitudes, level, FRAMING)
    assert estimates.shape == (2, 300) and np.all(np.isfinite(estimates))
    full = track_noise_power(np.concatenate([magnitudes, np.ones((1, 300))]), np.append(level, 1.0), FRAMING)
    np.testing.assert_allclose(estimates, full[:2], rtol=1e-6)


@pytest.mark.parametrize("framing", [FRAMING, QUARTER])
def test_a_tracker_given_no_frames_returns_none(framing):
    """One estimate per frame pushed: none for none, from a tracker given only empty pieces or nothing at all."""
    for pieces in ([], [np.ones((40, 0))]):
        tracker = NoisePowerTracker(np.ones(40), framing)
        returned = [tracker.push(piece) for piece in pieces] + [tracker.finish()]
        assert all(r.shape == (40, 0) for r in returned), [r.shape for r in returned]
