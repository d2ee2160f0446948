"""The noise power of every STFT bin and frame, predicted from the frames on both sides of it.

Conventions
-----------
Magnitudes are ``(n_bins, n_frames)`` STFT magnitudes from :mod:`sepsti.features`; powers are
their squares. Frames arrive in order, chunk by chunk, in a :class:`sepsti.features.Framing`
whose hop turns the durations below into frames.

The estimator is the MMSE noise power tracker of Gerkmann & Hendriks (2012), run forwards and
backwards. In each bin, the probability that speech is present follows from the a posteriori
SNR ``γ = |Y|² / σ²`` of the last estimate ``σ²`` under a fixed a priori SNR of speech
(:data:`SPEECH_SNR_DB`): ``P = 1 / (1 + (1 + ξ) exp(−γ ξ / (1 + ξ)))``. The noise power
expected given the observation, ``(1 − P) |Y|² + P σ²``, is smoothed recursively over time
(:data:`POWER_SMOOTHING`); ``P`` is capped at :data:`STAGNATION` in a bin where its own smoothed
value (:data:`PRESENCE_SMOOTHING`) stays above the cap, so that a noise that rises for good is
followed. The estimate moves with the noise in every bin and frame that speech leaves free,
including the loud moments of a noise (a passing vehicle), which a minimum does not see. A bin of
digital silence (below :data:`sepsti.features.SILENT_MAGNITUDE`) leaves the state as it was.

Offline, a frame's noise power is predicted from both sides: from the forward recursion's
estimate *before* the frame and the backward recursion's estimate before it (from the frames
after it), their mean weighted by how recent each one's observations are. An estimate is a
weighted average of past observations, and its *age* is theirs, in frames: ``A ← w A + 1`` where
the recursion keeps the weight ``w = α + (1 − α) P`` on its old estimate (``1 / (1 − α)`` frames
where no speech holds it, growing by a frame per frame where speech does). Each estimate is
weighted by the other's age (by the inverse of its own, the variance of a level that drifts
freely): within a noise the two ages match and this is their plain mean; across a stretch of
speech the prediction moves from the noise before it to the noise after it; and where a noise
switches on or off, the recursion that meets the change as a rise, which takes it for speech,
ages and gives way to the one that has already followed it (docs/enhance.md, "A noise that
switches on"). Where the larger of the two exceeds the other by more than :data:`UNFOLLOWED_RISE_DB`,
the larger alone is taken: a recursion follows a fall of the noise within a fraction of a second
and a rise only once the stagnation cap lets it (most of a second), so after a stretch of
near-silence (a muted microphone, an edit) the recursion coming out of it lies far below the
noise for that long, too far for any weight. Elsewhere the two seldom part by so much
(docs/enhance.md, "A stretch of near-silence").

The frame's own observation is left out, and so are those of the frames
that share more than half of its samples (:func:`overlapping_neighbours`), so a model that
explains the frame is not handed a copy of its speech as noise (but in the signal's last cell,
whose backward run starts from the forward estimate at the end: docs/enhance.md); a noise that changes is followed
from either side a frame or two late (docs/enhance.md measures these choices). Under its fixed speech prior
the recursion settles a fixed factor below the power of a stationary noise (:func:`stationary_bias`,
0.72–0.79 with the framings in use; in the real-valued DC and Nyquist bins a lower one, :func:`real_bin_bias`);
the estimates are divided by it, which makes them unbiased there, and the starting power, a noise's power,
is multiplied by it.

A steady component — a whine, a squeal, a held note, a siren's held tone — rises suddenly and stays,
so the tracker takes it for speech for most of a second before the stagnation cap lets it follow.
Speech rises and falls with its syllables. So the prediction is raised to each bin's *steady power*:
where the strongest power within :data:`STEADY_HERTZ` of a bin (a tone that wavers stays inside
that band) stays within :data:`STEADY_RANGE_DB` of its peak for :data:`STEADY_SECONDS` and above
the forward recursion's prediction, from :data:`STEADY_LOWEST_HZ` up (below it a voice's lowest
harmonics may hold that still), its least value there is a level the noise holds, carried back
over the window and the band and capped by each bin's own power. A stationary noise seldom holds
within that range for so long, and where it does, its least value lies below its predicted power.

Below a few hundred hertz a voice's harmonics lie far apart, and the noise shows in the troughs between
them. A noise whose level the prediction misses there (the swells of a crowd's roar, which the recursions
smooth over) shows as ratios ``|Y|² / σ²`` that lie well above one in every bin of the band, speech or
not. Over :data:`TROUGH_LOWEST_HZ`–:data:`TROUGH_HIGHEST_HZ` and :data:`TROUGH_REACH_SECONDS` either side
of a frame, the ratios of a complex Gaussian noise are exponential about the level the prediction misses
by, so their :data:`TROUGH_QUANTILE` quantile over ``−ln(1 − q)`` reads that level from the troughs,
where the voice adds least. Where it exceeds :data:`TROUGH_RISE` and the ratios' median agrees with the
same exponential (within :data:`TROUGH_SPREAD` of it: where a voice's harmonics stand above the noise,
they spread the ratios far wider), the band's prediction is raised by it
(docs/enhance.md, "A recorded crowd under the NOIZEUS talkers").

The backward recursion restarts on a fixed grid of :data:`LOOKAHEAD_SECONDS`: for the frames of
one cell of the grid it runs from the end of the next cell down, started from the forward
estimate there, so the result depends on the frames alone, not on how they were chunked, and
memory does not grow with the recording.

References
----------
T. Gerkmann and R. C. Hendriks, "Unbiased MMSE-based noise power estimation with low
complexity and low tracking delay", IEEE TASLP 20(4), 2012 (its settings are for a 16 ms hop;
here the smoothing constants are scaled to the framing's hop, so the time constants are its).
"""

import functools

import numpy as np

from sepsti import features
from sepsti.core.errors import ParameterError

__all__ = ["SPEECH_SNR_DB", "POWER_SMOOTHING", "PRESENCE_SMOOTHING", "STAGNATION", "UNFOLLOWED_RISE_DB",
           "LOOKAHEAD_SECONDS", "STEADY_SECONDS", "STEADY_HERTZ", "STEADY_RANGE_DB", "STEADY_LOWEST_HZ",
           "TROUGH_LOWEST_HZ", "TROUGH_HIGHEST_HZ", "TROUGH_REACH_SECONDS", "TROUGH_QUANTILE", "TROUGH_RISE",
           "TROUGH_SPREAD", "RAYLEIGH_POWER", "RAYLEIGH_MEAN",
           "NoisePowerTracker", "track_noise_power", "stationary_bias", "real_bin_bias", "overlapping_neighbours",
           "expected_magnitude", "median_magnitude"]

#: A priori SNR (dB) of a bin where speech is present (ξ_H1 of Gerkmann & Hendriks).
SPEECH_SNR_DB = 15.0
#: Recursive smoothing of the noise power per 16 ms of hop (α_pow); per frame it is this to the
#: power hop / 16 ms, so the time constant is the paper's at any framing.
POWER_SMOOTHING = 0.8
#: Recursive smoothing of the speech presence probability per 16 ms of hop (the paper's 0.9).
PRESENCE_SMOOTHING = 0.9
#: Cap on the speech presence probability of a bin whose smoothed probability exceeds it.
STAGNATION = 0.99
#: Ratio (dB) of the forward and backward estimates beyond which the larger is taken alone: the other
#: has not yet followed a rise of the noise (sound returning after near-silence).
UNFOLLOWED_RISE_DB = 40.0
#: Cell of the backward recursion's restart grid (s); its lookahead is one to two cells.
LOOKAHEAD_SECONDS = 2.0
#: Shortest steady component (s): longer than the target's voice holds a harmonic within the range below.
STEADY_SECONDS = 0.8
#: Half-width (Hz) of the band over which a steady component may waver (two bins of a 64 ms window).
STEADY_HERTZ = 31.25
#: Largest rise (dB) above its least value that a steady component shows over :data:`STEADY_SECONDS`.
STEADY_RANGE_DB = 10.0
#: Lowest frequency (Hz) of a steady component: below it a voice's first harmonics move less than
#: :data:`STEADY_HERTZ` over :data:`STEADY_SECONDS` even when its pitch changes by a tenth.
STEADY_LOWEST_HZ = 300.0
#: Band (Hz) in which the noise's level is read from the troughs between a voice's harmonics.
TROUGH_LOWEST_HZ = 60.0
TROUGH_HIGHEST_HZ = 300.0
#: Reach (s) on each side of a frame over which its troughs are read.
TROUGH_REACH_SECONDS = 0.064
#: Quantile of the ratios of power to prediction that reads the troughs.
TROUGH_QUANTILE = 0.1
#: Least factor by which the troughs' level must exceed the prediction to raise it.
TROUGH_RISE = 2.0
#: Largest ratio of the median's level to the troughs' for ratios that look exponential (noise alone).
TROUGH_SPREAD = 1.5
#: Mean power over squared median magnitude of a complex Gaussian noise (Rayleigh magnitudes:
#: median² = σ² ln 4, power 2σ²): turns a floor of median magnitudes into a starting power.
RAYLEIGH_POWER = 1.0 / np.log(2.0)
#: Squared mean magnitude over power of a complex Gaussian noise (Rayleigh magnitudes: π/4).
RAYLEIGH_MEAN = np.pi / 4.0

_PAPER_HOP_SECONDS = 0.016
_SILENT_POWER = features.SILENT_MAGNITUDE ** 2
_UNFOLLOWED_RISE = 10.0 ** (UNFOLLOWED_RISE_DB / 10.0)
#: Backward runs computed side by side (bounds their memory: bins × 2 cells × this many values).
_CELLS_AT_ONCE = 16


class _Coefficients:
    """The recursion's constants at a hop, as 0-d arrays: a ufunc takes those faster than Python floats."""

    def __init__(self, hop_seconds):
        steps = hop_seconds / _PAPER_HOP_SECONDS
        xi = 10.0 ** (SPEECH_SNR_DB / 10.0)
        power, presence, exponent = POWER_SMOOTHING ** steps, PRESENCE_SMOOTHING ** steps, xi / (1.0 + xi)
        constants = dict(power=power, move=1.0 - power, presence=presence, gain=1.0 - presence, prior_odds=1.0 + xi,
                         negative_exponent=-exponent, silent=_SILENT_POWER, stagnation=STAGNATION, one=1.0)
        for name, value in constants.items():
            setattr(self, name, np.array(value))


def _recursion(powers, sigma, presence, c, age):
    """Run the tracker over ``powers`` (frames along axis 1; any trailing axes run side by side).

    ``sigma``, ``presence`` and ``age`` are the state (one frame's shape, float64), updated in place.

    Returns
    -------
    estimates, ages : ndarray, the shape and type of ``powers``
        The estimate *before* each frame (the frame's noise power predicted from the frames
        already seen, not from the frame itself) and its age in frames.
    """
    # frames first and contiguous: every step then reads and writes one block of memory
    frames = np.ascontiguousarray(np.moveaxis(powers, 1, 0))
    out = np.empty_like(frames)
    ages = np.empty_like(frames)
    # bins of digital silence say nothing about the noise: their state is held (the masked steps below are
    # slower, so frames heard throughout take the plain ones)
    heard_throughout = frames.min(axis=tuple(range(1, frames.ndim)), initial=np.inf) > c.silent  # in float64
    observed, probability, difference, share = (np.empty_like(sigma) for _ in range(4))
    stuck, heard = np.empty(sigma.shape, dtype=bool), np.empty(sigma.shape, dtype=bool)
    # every step is a ufunc on arrays of one type, writing in place (a step that mixes types is twice as slow)
    for j, frame in enumerate(frames):
        out[j] = sigma
        ages[j] = age
        np.copyto(observed, frame)
        # P(speech | |Y|²) under the a priori SNR ξ: 1 / (1 + (1 + ξ) exp(−γ ξ / (1 + ξ))), γ = |Y|² / σ²
        np.maximum(sigma, c.silent, out=difference)
        np.divide(observed, difference, out=probability)
        np.multiply(probability, c.negative_exponent, out=probability)
        np.exp(probability, out=probability)
        np.multiply(probability, c.prior_odds, out=probability)
        np.add(probability, c.one, out=probability)
        np.reciprocal(probability, out=probability)
        # the probability's smoothed value; where that stays above the cap, the cap applies
        np.multiply(probability, c.gain, out=share)
        mask = True
        if not heard_throughout[j]:
            mask = np.greater(observed, c.silent, out=heard)
        np.multiply(presence, c.presence, out=presence, where=mask)
        np.add(presence, share, out=presence, where=mask)
        np.greater(presence, c.stagnation, out=stuck)
        np.minimum(probability, c.stagnation, out=probability, where=stuck)
        # σ ← α σ + (1 − α) E[|N|² | Y] with E[|N|² | Y] = (1 − P) |Y|² + P σ², that is
        # σ ← |Y|² + (σ − |Y|²)(α + (1 − α) P)
        np.subtract(sigma, observed, out=difference)
        np.multiply(probability, c.move, out=probability)
        np.add(probability, c.power, out=probability)
        np.multiply(difference, probability, out=difference)
        np.add(difference, observed, out=sigma, where=mask)
        np.multiply(age, probability, out=age, where=mask)
        np.add(age, c.one, out=age)
    return np.moveaxis(out, 0, 1), np.moveaxis(ages, 0, 1)


class NoisePowerTracker:
    """Noise power of frames pushed chunk by chunk, predicted from the frames before and after each.

    Parameters
    ----------
    initial_power : ndarray, shape (n_bins,)
        The noise's power where the signal starts (a noise floor's power, say), finite and non-negative, for
        the framing's first ``n_bins`` bins; the recursions start from it times their bias.
    framing : sepsti.features.Framing

    Raises
    ------
    ParameterError
        An ``initial_power`` or magnitudes of another shape, or not finite; a call after :meth:`finish`.

    Notes
    -----
    A frame's estimate leaves out the frame and the frames that share more than half of its
    samples (:func:`overlapping_neighbours`: none with frames every half window, one on each side
    every quarter window), is raised to the frame's steady power (:func:`_steady`) and, below
    :data:`TROUGH_HIGHEST_HZ`, to the level its troughs read (:class:`_TroughLevel`). :meth:`push`
    returns the estimates of the frames whose lookahead has arrived (up to two cells of
    :data:`LOOKAHEAD_SECONDS` and :data:`TROUGH_REACH_SECONDS` behind the newest frame), :meth:`finish`
    the rest; in all, one estimate per frame pushed, in order.
    """

    def __init__(self, initial_power, framing):
        hop_seconds = framing.hop_length / framing.sample_rate
        self._c = _Coefficients(hop_seconds)
        initial_power = np.array(initial_power, dtype=np.float64)
        if initial_power.ndim != 1 or len(initial_power) > framing.n_bins:
            raise ParameterError(f"initial_power: expected shape (n_bins,) with at most {framing.n_bins} bins, got "
                                 f"{initial_power.shape}")
        if not np.all(np.isfinite(initial_power) & (initial_power >= 0)):
            raise ParameterError("initial_power: contains NaN, Inf or negative values; expected powers of at least 0")
        bias = _bias_per_bin(framing, len(initial_power))
        self._bias = bias[:, None].astype(np.float32)  # divides the estimates, kept in single precision
        self._cell = framing.frames(LOOKAHEAD_SECONDS)
        # the recursion settles at the bias times a stationary noise's power: it starts there
        self._sigma = bias * initial_power
        self._presence = np.full_like(self._sigma, 0.5)
        self._age = np.full_like(self._sigma, 1.0 / (1.0 - self._c.power))
        # frames still held, in single precision: enough for the estimates, half the memory
        self._powers = np.empty((len(self._sigma), 0), dtype=np.float32)
        self._forward = np.empty((2, len(self._sigma), 0), dtype=np.float32)  # estimates and their ages
        # the forward estimates of the frames just before those held, which the first held frames take
        self._gap = overlapping_neighbours(framing)
        self._forward_before = np.repeat(np.stack([self._sigma, self._age]).astype(np.float32)[:, :, None],
                                         self._gap, axis=2)
        # the last frames emitted, which the steady power of the next frames looks back on
        self._steady = _steady_reach(framing)
        self._emitted = np.empty((len(self._sigma), 0), dtype=np.float32)
        self._emitted_forward = np.empty((len(self._sigma), 0), dtype=np.float32)
        self._troughs = _TroughLevel(len(self._sigma), framing)
        self._finished = False

    def push(self, magnitudes):
        """Add frames; returns the estimates now complete, shape (n_bins, m), float32."""
        self._check_open()
        magnitudes = np.asarray(magnitudes, dtype=np.float32)
        if magnitudes.ndim != 2 or magnitudes.shape[0] != len(self._sigma):
            raise ParameterError(f"magnitudes: expected shape ({len(self._sigma)}, n_frames), got {magnitudes.shape}")
        if not np.all(np.isfinite(magnitudes) & (magnitudes >= 0)):
            raise ParameterError("magnitudes: contains NaN, Inf or negative values; expected magnitudes of at least 0")
        powers = np.square(magnitudes)
        forward = _recursion(powers, self._sigma, self._presence, self._c, self._age)
        self._powers = np.concatenate([self._powers, powers], axis=1)
        self._forward = np.concatenate([self._forward, np.stack(forward)], axis=2)
        ready = max(0, self._powers.shape[1] // self._cell - 1)  # cells whose next cell is complete
        return self._troughs.push(*self._emit(ready, 2 * self._cell))

    def finish(self):
        """The estimates of the frames still held, shape (n_bins, m), float32; the tracker takes no more."""
        self._check_open()
        self._finished = True
        cells = -(-self._powers.shape[1] // self._cell)
        return self._troughs.push(*self._emit(cells, self._powers.shape[1]), last=True)

    def _check_open(self):
        if self._finished:
            raise ParameterError("NoisePowerTracker: finish() was called already; a new tracker takes more frames")

    def _emit(self, cells, span):
        """Two-sided estimates of the first ``cells`` cells held, raised to their steady power, and those frames'
        powers; each backward run covers ``span`` frames."""
        n = self._powers.shape[1]
        stop = min(cells * self._cell, n)
        estimates = np.empty((len(self._sigma), stop), dtype=np.float32)
        # column f of this array is the forward estimate before frame f - gap
        forward = np.concatenate([self._forward_before, self._forward], axis=2)
        for first in range(0, cells, _CELLS_AT_ONCE):
            self._backward_runs(np.arange(first, min(cells, first + _CELLS_AT_ONCE)) * self._cell, span, forward,
                                estimates)
        self._forward_before = forward[:, :, stop:stop + self._gap]
        # the frames looked back on, those emitted now and those within a window after them (the rest
        # wait for the next call)
        before = self._emitted.shape[1]
        reach = slice(0, stop + self._steady[0])
        seen = np.concatenate([self._emitted, self._powers[:, reach]], axis=1)
        predicted = np.concatenate([self._emitted_forward, self._forward[0, :, reach]], axis=1)
        steady = _steady(seen, predicted / self._bias, *self._steady)
        np.maximum(estimates, steady[:, before:before + stop], out=estimates)
        keep = slice(max(0, before + stop - self._steady[0]), before + stop)
        # copies: views would hold on to the whole chunk
        self._emitted, self._emitted_forward = seen[:, keep].copy(), predicted[:, keep].copy()
        powers = self._powers[:, :stop]
        self._powers = self._powers[:, stop:]
        self._forward = self._forward[:, :, stop:]
        return estimates, powers

    def _backward_runs(self, starts, span, forward, estimates):
        """The cells starting at ``starts``: backward runs side by side, combined with the forward estimates.

        Frame f takes the forward estimate before frame f - gap (``forward[:, :, f]``: estimate and age)
        and the backward estimate before frame f + gap (at the end of the signal, the run's start): each
        weighted by the other's age, or the larger where it exceeds the other by more than
        :data:`UNFOLLOWED_RISE_DB`.
        """
        n = self._powers.shape[1]
        ends = np.minimum(starts + span, n)
        offsets = np.arange(int((ends - starts).max()))
        frames = np.clip(ends[None, :] - 1 - offsets[:, None], 0, n - 1)  # (steps, cells), counted back
        # each run starts from the forward estimate there, and its age
        sigma, age = self._forward[:, :, ends - 1].astype(np.float64)
        backward, backward_age = _recursion(self._powers[:, frames], sigma, np.full_like(sigma, 0.5), self._c, age)
        for index, (start, end) in enumerate(zip(starts, ends)):
            cell_stop = min(start + self._cell, n)
            # frame f + gap is step end - 1 - f - gap of this cell's run
            steps = np.maximum(end - 1 - self._gap - np.arange(start, cell_stop), 0)
            before, after = forward[0, :, start:cell_stop], backward[:, steps, index]
            age_before, age_after = forward[1, :, start:cell_stop], backward_age[:, steps, index]
            weighted = (before * age_after + after * age_before) / (age_before + age_after)
            larger = np.maximum(before, after)
            estimates[:, start:cell_stop] = np.where(larger > _UNFOLLOWED_RISE * np.minimum(before, after),
                                                     larger, weighted) / self._bias


class _TroughLevel:
    """The low band's estimates raised to the level read from the troughs between a voice's harmonics.

    Frames arrive in order with their estimates; a frame is returned once the frames within
    :data:`TROUGH_REACH_SECONDS` after it have arrived (at the ends of the signal, the first and the last
    frame stand in for those beyond).
    """

    def __init__(self, n_bins, framing):
        self._reach = framing.frames(TROUGH_REACH_SECONDS)
        self._band = slice(int(TROUGH_LOWEST_HZ * framing.n_fft / framing.sample_rate),
                           min(n_bins, int(TROUGH_HIGHEST_HZ * framing.n_fft / framing.sample_rate)))
        self._held = np.empty((n_bins, 0), dtype=np.float32)  # estimates not yet returned
        self._ratios = None  # the band's ratios of the frames looked back on, then of those held

    def push(self, estimates, powers, last=False):
        """Add frames' estimates and powers; returns the estimates now complete (all of them if ``last``)."""
        # below the recursion's floor a prediction says nothing (digital silence, a pure tone's far bins)
        ratios = powers[self._band] / np.maximum(estimates[self._band], _SILENT_POWER)
        if self._ratios is None:
            if not ratios.shape[1]:
                return estimates
            ratios = np.concatenate([np.repeat(ratios[:, :1], self._reach, axis=1), ratios], axis=1)
        else:
            ratios = np.concatenate([self._ratios, ratios], axis=1)
        held = np.concatenate([self._held, estimates], axis=1)
        if last:
            ratios = np.concatenate([ratios, np.repeat(ratios[:, -1:], self._reach, axis=1)], axis=1)
        ready = max(0, ratios.shape[1] - 2 * self._reach)
        out = held[:, :ready]
        if ready and self._band.stop > self._band.start:
            out[self._band] *= _trough_level(ratios[:, :ready + 2 * self._reach], self._reach)
        self._ratios, self._held = ratios[:, ready:].copy(), held[:, ready:].copy()
        return out


def _trough_level(ratios, reach):
    """Factor by which each frame's prediction is raised: the troughs' level where it is read, else one.

    Parameters
    ----------
    ratios : ndarray, shape (n_bins, m + 2 · reach)
        The band's powers over their predictions, ``reach`` frames before the first frame and after the last.
    reach : int

    Returns
    -------
    ndarray, shape (m,)
    """
    from numpy.lib.stride_tricks import sliding_window_view

    windows = sliding_window_view(ratios, 2 * reach + 1, axis=1)  # (bins, m, 2 reach + 1)
    pooled = windows.transpose(1, 0, 2).reshape(windows.shape[1], -1)
    trough, median = np.quantile(pooled, [TROUGH_QUANTILE, 0.5], axis=1)
    level = trough / -np.log1p(-TROUGH_QUANTILE)  # an exponential's q-quantile is its mean times −ln(1 − q)
    noise_alone = median / np.log(2.0) < TROUGH_SPREAD * level
    return np.where(noise_alone & (level > TROUGH_RISE), level, 1.0).astype(ratios.dtype)


def _steady_reach(framing):
    """Frames of a steady window, bins on each side of a bin it may waver over, and its lowest bin."""
    frames = framing.frames(STEADY_SECONDS)
    bins = int(round(STEADY_HERTZ * framing.n_fft / framing.sample_rate))
    lowest = int(np.ceil(STEADY_LOWEST_HZ * framing.n_fft / framing.sample_rate))
    return frames, bins, lowest


def _steady(powers, predicted, frames, bins, lowest):
    """The power of the steady components (tones) of each bin and frame; zero where there are none.

    Over every window of ``frames`` frames, take the strongest power within ``bins`` bins of each
    bin; where its least value over the window is within :data:`STEADY_RANGE_DB` of its largest and
    above the largest noise power ``predicted`` within ``bins`` bins for the window's centre frame,
    that least value is a steady level (in bins from ``lowest`` up). A frame's steady power is the
    largest steady level of the windows and bins around it that hold it, capped by its own power.
    Frames beyond the ends of ``powers`` repeat the first and last; a frame's result reaches
    ``frames`` frames either way.

    Parameters
    ----------
    powers, predicted : ndarray, shape (n_bins, n_frames)
        STFT powers, and the noise power the tracker predicts for them.
    frames, bins, lowest : int
        :data:`STEADY_SECONDS` in frames, :data:`STEADY_HERTZ` in bins, the first bin at or above
        :data:`STEADY_LOWEST_HZ` (:func:`_steady_reach`).

    Returns
    -------
    ndarray, the shape of ``powers``
    """
    band = _band_maximum(powers, bins)
    least = _running_extreme(band, frames, np.minimum)
    above = least > _band_maximum(predicted, bins)
    above[:lowest] = False
    rows = np.flatnonzero(above.any(axis=1))  # bins never above the prediction need no more work
    held = np.zeros_like(powers)
    if rows.size:
        most = _running_extreme(band[rows], frames, np.maximum)
        level = np.where(above[rows] & (least[rows] * 10.0 ** (STEADY_RANGE_DB / 10.0) >= most), least[rows], 0.0)
        held[rows] = _running_extreme(level, frames, np.maximum)
        held = _band_maximum(held, bins)
    return np.minimum(powers, held)


def _running_extreme(x, size, extreme):
    """The largest (``extreme=np.maximum``) or least (``np.minimum``) value of each row over ``size`` frames.

    ``scipy.ndimage.maximum_filter1d(x, size, axis=1, mode="nearest")`` (or ``minimum_filter1d``),
    bit-identical, without importing ``scipy.ndimage`` (half a second on a slow day): each window is
    the end of one block of ``size`` frames and the start of the next, whose running extremes from
    either end (van Herk 1992; Gil & Werman 1993) are two accumulations.
    """
    n = x.shape[1]
    if n == 0:
        return x.copy()
    blocks = -(-(n + size - 1) // size)
    left = size // 2  # the window of frame i is i - size // 2 ... i - size // 2 + size - 1
    padded = np.pad(x, [(0, 0), (left, blocks * size - n - left)], mode="edge").reshape(len(x), blocks, size)
    from_start = extreme.accumulate(padded, axis=2).reshape(len(x), -1)
    from_end = extreme.accumulate(padded[:, :, ::-1], axis=2)[:, :, ::-1].reshape(len(x), -1)
    return extreme(from_end[:, :n], from_start[:, size - 1:size - 1 + n])


def _band_maximum(x, bins):
    """The largest value within ``bins`` rows of each row of ``x`` (rows beyond the ends left out).

    ``scipy.ndimage.maximum_filter1d(x, 2 * bins + 1, axis=0, mode="nearest")`` gives the same, a third
    slower across the rows of a C-ordered spectrogram.
    """
    out = x.copy()
    for shift in range(1, bins + 1):
        np.maximum(out[shift:], x[:-shift], out=out[shift:])
        np.maximum(out[:-shift], x[shift:], out=out[:-shift])
    return out


def overlapping_neighbours(framing):
    """Frames on each side of a frame that share more than half of its samples.

    A frame's noise power is predicted without them, so that the prediction cannot copy the
    frame's own speech: 0 with frames every half window (a neighbour shares half), 1 every
    quarter window (the nearest neighbours share three quarters; the next ones half).
    """
    return max(0, framing.n_fft // framing.hop_length // 2 - 1)


def stationary_bias(framing):
    """The recursion's mean estimate over the true power on the STFT of a stationary Gaussian noise.

    Under a fixed speech prior the recursion settles below the power of a stationary noise, the
    same factor in every complex bin (0.72 at the 32 ms hop of half-overlapping 64 ms windows, 0.79 at
    the 16 ms hop of the enhancer's quarter-window frames); it is found once per framing by
    running the recursion on the STFT of simulated white noise (2000 frames, 256 bins, seeded), so
    that the frames overlap and correlate as real ones do (independent frames would give 0.71 and
    0.76), and the estimates are divided by it (for the shipped dictionaries' framings that run's result is
    kept in the code). The DC and Nyquist bins have their own (:func:`real_bin_bias`).

    Parameters
    ----------
    framing : sepsti.features.Framing

    Returns
    -------
    float
    """
    return _biases(framing)[0]


def real_bin_bias(framing):
    """:func:`stationary_bias` of the real-valued bins, DC and Nyquist.

    Their power is one squared Gaussian, not the sum of two, and spreads twice as wide: the recursion
    settles further below it (0.21 at the 32 ms hop, 0.34 at 16 ms). The Nyquist bin of white noise is
    the DC bin of the noise with every other sample's sign flipped, itself white, so both are one
    process: each frame's sum of the hops its window spans, each hop's samples weighted by its part of
    the window. Those parts' sums are drawn jointly Gaussian for 128 series of 2000 frames (seeded) and
    the recursion is run on them as on the complex bins.

    Parameters
    ----------
    framing : sepsti.features.Framing

    Returns
    -------
    float
    """
    return _biases(framing)[1]


#: :func:`_simulated_biases` of the shipped dictionaries' enhancement framings, as it computes them
#: (tests/test_noise_power.py runs it again): the run takes about a fifth of the time of enhancing a short file.
_SHIPPED_BIASES = {features.Framing(8000, 512, 128): (0.7909435358195942, 0.34385008472199396),
                   features.Framing(16000, 1024, 256): (0.7879857565404716, 0.3439541019375267)}


def _biases(framing):
    """:func:`stationary_bias` and :func:`real_bin_bias`: known for the shipped framings, else simulated."""
    return _SHIPPED_BIASES.get(framing) or _simulated_biases(framing)


@functools.lru_cache
def _simulated_biases(framing):
    """:func:`stationary_bias` and :func:`real_bin_bias`, from one run of the recursion."""
    frames = 2000
    noise = np.random.default_rng(0).standard_normal((frames - 1) * framing.hop_length) / features.AMPLITUDE_SCALE
    bins = slice(1, min(257, framing.n_bins - 1))  # complex bins: not DC or Nyquist
    powers = np.square(np.abs(features.stft(noise, framing=framing)[bins])) / np.sum(features.window(framing) ** 2)
    # the window's part in each hop it spans (the hop divides the window); a frame's DC bin sums the hops' samples
    # weighted by them
    parts = features.window(framing).reshape(-1, framing.hop_length)
    covariance = parts @ parts.T / np.sum(parts ** 2)
    # the window's parts span only {1, cos, sin}: the covariance is singular, so a jitter far below its scale
    factor = np.linalg.cholesky(covariance + 1e-12 * np.eye(len(parts)))
    sums = np.random.default_rng(1).standard_normal((128, frames + len(parts) - 1, len(parts))) @ factor.T
    real = np.square(sum(sums[:, j:j + frames, j] for j in range(len(parts))))
    n_bins = powers.shape[0] + real.shape[0]
    c = _Coefficients(framing.hop_length / framing.sample_rate)
    estimates, _ = _recursion(np.concatenate([powers, real]), np.ones(n_bins), np.full(n_bins, 0.5), c,
                              np.ones(n_bins))
    return float(estimates[:len(powers), 200:].mean()), float(estimates[len(powers):, 200:].mean())


def _bias_per_bin(framing, n_bins):
    """The bias of each of the framing's first ``n_bins`` bins: :func:`real_bin_bias` at DC and Nyquist."""
    bias = np.full(n_bins, stationary_bias(framing))
    bias[[k for k in (0, framing.n_bins - 1) if k < n_bins]] = real_bin_bias(framing)
    return bias


def track_noise_power(magnitudes, initial_power, framing):
    """Two-sided noise power estimates of a whole spectrogram (:class:`NoisePowerTracker`).

    Parameters
    ----------
    magnitudes : ndarray, shape (n_bins, n_frames)
    initial_power : ndarray, shape (n_bins,)
    framing : sepsti.features.Framing

    Returns
    -------
    ndarray, shape (n_bins, n_frames)
    """
    tracker = NoisePowerTracker(initial_power, framing)
    return np.concatenate([tracker.push(magnitudes), tracker.finish()], axis=1)


def expected_magnitude(noise_power):
    """The mean STFT magnitude of a complex Gaussian noise of the given power: ``sqrt(π/4 · power)``."""
    return np.sqrt(RAYLEIGH_MEAN * noise_power)


def median_magnitude(noise_power):
    """The median STFT magnitude of a complex Gaussian noise of the given power: ``sqrt(ln 2 · power)``."""
    return np.sqrt(noise_power / RAYLEIGH_POWER)
