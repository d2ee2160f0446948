"""The noise model of the enhancer: noise dictionaries and floors that follow the noise.

A :class:`NoiseModel` holds one noise dictionary (Poisson NMF atoms, columns summing to 1) and one
floor (each bin's median magnitude) per segment of a signal. :func:`track_noise` learns it from
the noisy signal itself: minimum statistics (Martin 2001) give each bin's noise floor along the
recording, each frame's loudness relative to its floor judges how noise-dominated it is, and each
segment of :data:`SEGMENT_SECONDS` is learned on the quietest frames around it, so that no pause in
the speech is needed and a noise that changes is learned where it is. :func:`learn_noise` learns
one model from a recording of the noise alone. Frames of digital silence (padding, muted stretches)
carry no noise and are never learned on.

Magnitudes are ``(n_bins, n_frames)`` STFT magnitudes from :mod:`sepsti.features`, given as a
callable that returns a new iterator over consecutive chunks, so that a long signal is read in
passes without being held; durations are counted in the frames of a
:class:`sepsti.features.Framing`. :mod:`sepsti.denoise` holds the models fixed beside the speech
dictionary.
"""

from typing import NamedTuple

import numpy as np

from sepsti.core.checks import integer_at_least
from sepsti.core.errors import ParameterError
from sepsti.core.factorization import initialize_nmf, poisson_nmf_em
from sepsti.core.random import stream
from sepsti import features

__all__ = ["MAX_NOISE_FRAMES", "NOISE_FRACTION", "NOISE_CEILING", "BESIDE_SPEECH_MAX_RATE", "SMOOTHING_SECONDS",
           "MINIMUM_SECONDS", "SHORTEST_SECONDS", "SEGMENT_SECONDS", "CONTEXT_SECONDS", "QUIET_FLOOR_POWER",
           "NoiseModel", "track_noise", "learn_noise", "min_frames", "shortest_seconds", "too_little_sound",
           "validate_noise_model", "validate_noise_rank"]

#: Most frames a noise recording's model is learned on (2.2 min at 8 kHz); a longer recording
#: has this many spread evenly over it.
MAX_NOISE_FRAMES = 4096
#: Share of the frames around a segment judged noise-dominated and learned on (at least two per atom).
NOISE_FRACTION = 0.2
#: Multiple of a bin's minimum-statistics floor at which the magnitudes of those frames are cut
#: before their noise dictionary is learned: in continuous speech the quietest frames still hold
#: speech, whose peaks stand far above the floor and would otherwise be learned as noise.
NOISE_CEILING = 3.0
#: Highest sample rate (Hz) at which the noise dictionaries are learned beside the fixed speech
#: dictionary, on uncut magnitudes, instead: the speech atoms take the speech left in the chosen
#: frames. In the telephone band the shipped speech dictionary fits every voice tested; above it,
#: a voice whose upper band it fits poorly would be learned as noise (docs/enhance.md, "The 8 kHz
#: dictionary: many speakers, and noise learned beside it").
BESIDE_SPEECH_MAX_RATE = 8000
#: Time constant (s) of the recursive smoothing of each bin's magnitude before its minimum is taken.
SMOOTHING_SECONDS = 0.1
#: Span (s) of the window around a frame over which each bin's smoothed minimum is its noise floor:
#: long enough that every bin meets a gap between phonemes of continuous speech (minimum statistics,
#: Martin 2001, uses 1.5 s; twice that keeps the floor steadier under dense speech).
MINIMUM_SECONDS = 3.0
#: Shortest span (s) of the frames of a signal whose own noise is learned (:func:`min_frames`): 41 frames 32 ms
#: apart, signals of 1.25 s and more. Below it, pieces of continuous speech come out worse than the input more
#: often and by more (docs/enhance.md, "Short files").
SHORTEST_SECONDS = 1.3
#: Length (s) of the segments that get their own noise model.
SEGMENT_SECONDS = 4.0
#: Context (s) on each side of a segment whose frames its noise model is also learned on.
CONTEXT_SECONDS = 2.0
#: Power of a stationary noise over the power of the median magnitude of its quietest frames, those a segment's
#: floor is the median of: white noise of 2–3 s (a NOIZEUS sentence) gives 0.73–0.80 alone and 0.78–0.90 under
#: speech at 0–10 dB, at 8 and 16 kHz, rising towards 0.9 (alone) and 0.96 (under speech) over 30 s. A tracked
#: floor is raised by it, so that the noise power tracker starts from the noise's power (docs/enhance.md).
QUIET_FLOOR_POWER = 0.77


def min_frames(noise_rank, framing=features.NARROWBAND):
    """Fewest STFT frames a signal's own noise model is learned from.

    Two conditions, the larger count wins. The frames judged noise-dominated (at least two per
    noise atom) must be at most half of the signal's frames: 4 x ``noise_rank``. And the frames
    must span :data:`SHORTEST_SECONDS`: in a shorter piece of continuous speech the quietest frames
    are more often speech, which would be learned as noise and removed (``docs/enhance.md``, "Short
    files").

    Parameters
    ----------
    noise_rank : int
    framing : sepsti.features.Framing

    Returns
    -------
    int
    """
    return max(4 * int(noise_rank), framing.frames(SHORTEST_SECONDS))


def shortest_seconds(noise_rank, framing=features.NARROWBAND):
    """Length (s) of the shortest signal with :func:`min_frames` frames (centred frames: that many less two hops,
    and one sample)."""
    return ((min_frames(noise_rank, framing) - 2) * framing.hop_length + 1) / framing.sample_rate


class NoiseModel(NamedTuple):
    """Noise dictionaries and floors, one per segment of a signal.

    Attributes
    ----------
    W_noise : ndarray, shape (n_segments, n_bins, noise_rank)
        Each segment's noise dictionary, columns summing to 1.
    floor : ndarray, shape (n_segments, n_bins)
        Each segment's noise floor: each bin's median magnitude over the frames it was learned on, over
        the square root of :data:`QUIET_FLOOR_POWER` where those were the quietest (:func:`track_noise`);
        the noise power tracker starts from the first segment's.
    segment_frames : int
        Frames per segment; frame ``j`` belongs to segment ``min(j // segment_frames, n_segments - 1)``.
    """

    W_noise: np.ndarray
    floor: np.ndarray
    segment_frames: int

    def segment(self, frame):
        return min(frame // self.segment_frames, len(self.floor) - 1)


def _fit_noise(Vq, noise_rank, rng, offset, max_iter, ceiling=None, speech=None):
    """Noise dictionary and floor from the magnitudes ``Vq`` of noise-dominated frames.

    The floor is each bin's median over the frames; with ``ceiling`` (same shape as ``Vq``) the
    dictionary is learned on the magnitudes cut at it; with ``speech`` (a speech dictionary,
    ``(n_bins, rank)``), beside its atoms held fixed, so that what they explain is not learned.
    """
    noise_floor = np.median(Vq, axis=1)
    if ceiling is not None:
        Vq = np.minimum(Vq, ceiling)
    # a small offset keeps bins that are exactly zero in these frames learnable; in single precision, as the
    # separation's EM runs (its products take half the time: a tenth of a long file's at 8 kHz)
    Vq = np.asarray(Vq, dtype=np.float32) + np.float32(offset)
    W0, H0 = initialize_nmf(Vq, noise_rank, rng)
    if speech is None:
        result = poisson_nmf_em(Vq, W0, H0, max_iter=max_iter, tol=0, track_log_likelihood=False)
    else:
        W0 = np.concatenate([np.asarray(speech, dtype=np.float32), W0 / W0.sum(axis=0, keepdims=True)], axis=1)
        # every activation starts equal, together explaining each frame
        H0 = np.repeat(Vq.sum(axis=0, keepdims=True) / W0.shape[1], W0.shape[1], axis=0)
        learned = np.arange(W0.shape[1]) >= W0.shape[1] - noise_rank
        result = poisson_nmf_em(Vq, W0, H0, update_W=learned, max_iter=max_iter, tol=0, track_log_likelihood=False)
    W_noise = result.W[:, -noise_rank:].astype(np.float64)
    return W_noise / W_noise.sum(axis=0, keepdims=True), noise_floor


def _offset(mean_magnitude):
    return 1e-3 * max(float(mean_magnitude), np.finfo(np.float64).tiny)


def _spread(indices, limit):
    """At most ``limit`` of ``indices``, spread evenly over them (first and last kept)."""
    if len(indices) <= limit:
        return indices
    return indices[np.unique(np.linspace(0, len(indices) - 1, limit).round().astype(np.int64))]


class _MinimumTracker:
    """Minimum statistics of the frames' magnitudes, pushed chunk by chunk.

    Each bin's magnitude is smoothed over time (first-order recursion, time constant
    :data:`SMOOTHING_SECONDS`); the minimum of the smoothed magnitude is kept per block of
    frames (a quarter of :data:`MINIMUM_SECONDS`), and a bin's floor at a block is the minimum
    over the four blocks around it. Speech seldom fills a bin for the whole window, so the
    floor follows the noise under continuous speech; being a minimum, it lies below the noise's
    mean by a factor that is about the same in every bin, which ranking frames does not mind.
    Frames of digital silence are skipped (a block of nothing else has no floor: NaN).
    """

    def __init__(self, framing):
        self.block = framing.frames(MINIMUM_SECONDS / 4)
        self._alpha = float(np.exp(-framing.hop_length / framing.sample_rate / SMOOTHING_SECONDS))
        self._smoothed = None
        self._minimum = None
        self._count = 0
        self._bins = 0
        self._blocks = []

    def push(self, V):
        self._bins = V.shape[0]
        for frame, silent in zip(V.T, _silent_frames(V)):
            self._count += 1
            if silent:
                # digital silence: no noise to see; its frames count towards the block only
                self._close_block(frame)
                continue
            if self._smoothed is None:
                self._smoothed = frame.copy()
            else:
                self._smoothed = self._alpha * self._smoothed + (1.0 - self._alpha) * frame
            self._minimum = self._smoothed.copy() if self._minimum is None else np.minimum(self._minimum,
                                                                                          self._smoothed)
            self._close_block(frame)

    def _close_block(self, frame):
        if self._count % self.block == 0:
            # a block of digital silence alone has no minimum (NaN)
            self._blocks.append(np.full(len(frame), np.nan, dtype=np.float32) if self._minimum is None
                                else self._minimum.astype(np.float32))
            self._minimum = None

    def floors(self):
        """Per-block floors, shape (n_blocks, n_bins).

        Block ``b`` covers frames ``b·block`` to ``(b + 1)·block - 1``, the last block also any
        frames after it.

        Every block's window has the same length (:data:`MINIMUM_SECONDS`, shifted inwards at
        the ends of the signal; the whole signal if shorter): a minimum over fewer frames would
        lie higher, and the frames near the ends would look quieter than they are.
        """
        blocks = list(self._blocks)
        if self._minimum is not None:  # a last, shorter block joins the one before it
            blocks[-1:] = [np.fmin(blocks[-1], self._minimum) if blocks else self._minimum.astype(np.float32)]
        if not blocks:  # fewer frames than a block, all of them digital silence
            blocks = [np.full(self._bins, np.nan, dtype=np.float32)]
        minima = np.array(blocks)
        width = min(len(minima), 4)
        floors = np.empty_like(minima)
        for index in range(len(minima)):
            start = min(max(0, index - width // 2), len(minima) - width)
            # blocks of digital silence (NaN) do not count; a window of nothing else stays NaN
            floors[index] = np.fmin.reduce(minima[start:start + width], axis=0)
        return floors


def _silent_frames(V):
    """Which frames of ``V`` (``(n_bins, m)``) are digital silence (:data:`sepsti.features.SILENT_MAGNITUDE`)."""
    return V.sum(axis=0) <= features.SILENT_MAGNITUDE * V.shape[0]


def _relative_loudness(V, floor):
    """Each frame's total magnitude over its noise floor's (``floor`` per frame, ``(n_bins, m)``).

    A frame of digital silence is infinitely loud in this sense: it is never taken for noise.
    """
    heard = ~_silent_frames(V)
    loudness = np.full(V.shape[1], np.inf)
    loudness[heard] = V[:, heard].sum(axis=0) / np.maximum(floor[:, heard].sum(axis=0),
                                                            features.SILENT_MAGNITUDE * V.shape[0])
    return loudness


def _segment_noise_models(magnitudes, n_frames, noise_rank, rng, offset, floors, block, framing, speech):
    """One noise model per segment, learned on the noise-dominated frames around it (one pass).

    The frames stream through a buffer holding a segment and its context. A frame's loudness
    is taken relative to the minimum-statistics floor of its block, so that a louder noise
    elsewhere in the window does not hide this part's noise; the :data:`NOISE_FRACTION` of the
    frames around a segment that are quietest in that sense (at least two per atom) are the
    ones its dictionary and floor are learned on (beside ``speech``, if given, else cut at
    :data:`NOISE_CEILING` times the floor). Frames of digital silence are never chosen:
    a segment whose window holds fewer than :func:`min_frames` other frames (a long stretch of
    zeros; a shorter window needs all its frames heard), or fewer than two per atom, takes the
    model of the nearest segment that has them; with none, there is no model (``None``).

    Raises
    ------
    ParameterError
        ``magnitudes()`` gave other frames than ``n_frames`` (an iterator that is not new at each call).
    """
    segment = framing.frames(SEGMENT_SECONDS)
    context = framing.frames(CONTEXT_SECONDS)
    fewest = min_frames(noise_rank, framing)
    n_segments = max(1, -(-n_frames // segment))
    if n_segments > 1 and 2 * (n_frames - (n_segments - 1) * segment) < segment:
        n_segments -= 1  # a last piece shorter than half a segment joins the segment before it
    W_noise = np.empty((n_segments, floors.shape[1], noise_rank))
    noise_floor = np.empty((n_segments, floors.shape[1]))
    learned = np.zeros(n_segments, dtype=bool)
    bounds = [(max(0, s * segment - context),
               n_frames if s == n_segments - 1 else min(n_frames, (s + 1) * segment + context))
              for s in range(n_segments)]
    frames, loudness, buffer_start, seen, s = [], [], 0, 0, 0
    for V in magnitudes():
        frame_blocks = np.minimum((seen + np.arange(V.shape[1])) // block, len(floors) - 1)
        loudness.append(_relative_loudness(V, floors[frame_blocks].T))
        frames.append(V)
        seen += V.shape[1]
        while s < n_segments and seen >= bounds[s][1]:
            frames, loudness = [np.concatenate(frames, axis=1)], [np.concatenate(loudness)]
            start, stop = bounds[s][0] - buffer_start, bounds[s][1] - buffer_start
            heard = np.flatnonzero(np.isfinite(loudness[0][start:stop]))  # digital silence is infinitely loud
            # min_frames heard frames, all of a shorter window (a short signal, a high noise rank), two per atom
            if len(heard) >= max(2 * noise_rank, min(fewest, stop - start)):
                count = min(len(heard), max(2 * noise_rank, int(np.ceil(NOISE_FRACTION * len(heard)))))
                chosen = start + np.sort(heard[np.argsort(loudness[0][start + heard], kind="stable")[:count]])
                ceiling = None if speech is not None else \
                    NOISE_CEILING * floors[np.minimum((buffer_start + chosen) // block, len(floors) - 1)].T
                W_noise[s], floor = _fit_noise(frames[0][:, chosen], noise_rank, rng, offset, 50, ceiling, speech)
                noise_floor[s] = floor / np.sqrt(QUIET_FLOOR_POWER)
                learned[s] = True
            s += 1
            if s < n_segments:  # keep only the frames later segments still need
                drop = bounds[s][0] - buffer_start
                frames, loudness, buffer_start = [frames[0][:, drop:]], [loudness[0][drop:]], bounds[s][0]
    _check_second_pass(seen, n_frames)
    if not learned.any():
        return None
    if learned.all():
        return NoiseModel(W_noise, noise_floor, segment)
    # a segment of (nearly) nothing but digital silence takes its nearest learned neighbour's model
    nearest = _nearest_learned(learned)
    return NoiseModel(W_noise[nearest], noise_floor[nearest], segment)


def _nearest_learned(learned):
    """For each segment, the nearest one whose model was learned (the earlier one on a tie).

    Linear in the number of segments (the table of all distances it replaces took 50 MB at the peak
    of two hours at 8 kHz, and grows with the square of the length).
    """
    sources = np.flatnonzero(learned)
    index = np.arange(len(learned))
    after = np.minimum(np.searchsorted(sources, index), len(sources) - 1)
    before = np.maximum(after - 1, 0)
    take_before = np.abs(index - sources[before]) <= np.abs(sources[after] - index)
    return np.where(take_before, sources[before], sources[after])


def track_noise(magnitudes, noise_rank, *, seed=0, framing=features.NARROWBAND, speech=None):
    """A noise model that follows the noise through a recording, learned from the recording itself.

    Two passes over the magnitudes. Minimum statistics give each bin's noise floor along the
    recording, and each frame's loudness relative to its floor judges how noise-dominated it is;
    then each segment of :data:`SEGMENT_SECONDS` gets a rank-``noise_rank`` Poisson NMF of the
    :data:`NOISE_FRACTION` of the frames around it (:data:`CONTEXT_SECONDS` on each side) that
    are quietest relative to their floor, their magnitudes cut at :data:`NOISE_CEILING` times the
    floor (speech peaks left in them by speech without a pause are not learned as noise) — or, with
    ``speech`` and at rates up to :data:`BESIDE_SPEECH_MAX_RATE`, learned uncut beside the speech
    atoms held fixed, which take that speech instead; the segment's floor is their median over
    the square root of :data:`QUIET_FLOOR_POWER`. No pause in the speech is needed, and a noise
    that changes is learned where it is. A signal shorter than one and a half segments gets
    one model, learned on the whole signal. Frames of digital silence are never learned on; a
    segment with too few others around it (fewer than :func:`min_frames`, or than two per atom)
    takes the nearest segment's model.

    Parameters
    ----------
    magnitudes : callable
        ``magnitudes()`` returns a new iterator over consecutive chunks of the noisy
        magnitudes, each ``(n_bins, m)``, finite; it is called twice.
    noise_rank : int
        At least 1.
    seed : int
    framing : sepsti.features.Framing
        The STFT the magnitudes come from: it turns the durations (segments, context, the
        floor's smoothing and window) into frames.
    speech : ndarray, shape (n_bins, rank), optional
        The speech dictionary the model will be used with (columns summing to 1).

    Returns
    -------
    NoiseModel or None
        None if no segment has enough frames that are not digital silence (a signal of fewer than
        two frames per atom has none).
    energies : ndarray, shape (n_frames,)
        Each frame's total magnitude.

    Raises
    ------
    ParameterError
        A noise rank that is not a positive integer; no frames, or magnitudes that are not finite.
    """
    noise_rank = integer_at_least("noise_rank", noise_rank, 1)
    tracker = _MinimumTracker(framing)
    energies = []
    for V in _checked(magnitudes):
        tracker.push(V)
        energies.append(V.sum(axis=0))
    energies = np.concatenate(energies)
    floors = tracker.floors()
    beside = speech if speech is not None and framing.sample_rate <= BESIDE_SPEECH_MAX_RATE else None
    model = _segment_noise_models(magnitudes, len(energies), noise_rank, stream(seed, 1),
                                  _offset(energies.mean() / floors.shape[1]), floors, tracker.block, framing, beside)
    return model, energies


def _check_second_pass(frames, first):
    """Require as many frames in the second pass over ``magnitudes()`` as in the first."""
    if frames != first:
        raise ParameterError(f"magnitudes: {frames} STFT frames in the second pass, {first} in the first; "
                             "magnitudes() must return a new iterator over the same chunks at each call")


def _checked(magnitudes):
    """The chunks of ``magnitudes()``, each checked to be finite and non-negative; at least one frame in all."""
    frames = 0
    for V in magnitudes():
        if not np.all(np.isfinite(V) & (V >= 0)):
            raise ParameterError("magnitudes: contains NaN, Inf or negative values; expected magnitudes of at least 0")
        frames += V.shape[1]
        yield V
    if not frames:
        raise ParameterError("magnitudes: no STFT frames")


def too_little_sound(noise_rank, framing):
    """Why :func:`track_noise` gives no model, in words: no segment's window holds :func:`min_frames` frames
    that are not digital silence (a shorter signal: all of its frames), and two per atom."""
    seconds = SEGMENT_SECONDS + 2 * CONTEXT_SECONDS
    window = framing.frames(SEGMENT_SECONDS) + 2 * framing.frames(CONTEXT_SECONDS)
    if 2 * noise_rank > window:
        return (f"a noise rank of {noise_rank} needs {2 * noise_rank} frames of noise, more than the {seconds:g} s "
                f"around a segment hold ({window}); lower the noise rank")
    least = min(min_frames(noise_rank, framing), window) * framing.hop_length / framing.sample_rate
    return (f"too little sound to learn its noise from (no {seconds:g} s stretch holds {least:.2f} s that is not "
            "digital silence)")


def learn_noise(magnitudes, noise_rank, *, seed=0, name="noise sample"):
    """A noise model learned from a noise-only recording: one dictionary and floor for all frames.

    Parameters
    ----------
    magnitudes : callable
        ``magnitudes()`` returns a new iterator over consecutive chunks of the recording's
        magnitudes, each ``(n_bins, m)``, in the framing of the dictionary the model will be used
        with (at that framing's rate); it is called twice (which frames are digital silence, then
        at most :data:`MAX_NOISE_FRAMES` of the others spread evenly over the recording).
    noise_rank : int
        At most the recording's number of frames.
    seed : int
    name : str
        How to name the recording in messages (its path, say).

    Returns
    -------
    NoiseModel
        A single segment.

    Raises
    ------
    ParameterError
        A noise rank that is not a positive integer; fewer frames than ``noise_rank``, magnitudes that are not
        finite, a silent recording, or other frames in the second pass than in the first.
    """
    noise_rank = integer_at_least("noise_rank", noise_rank, 1)
    heard = ~np.concatenate([_silent_frames(V) for V in _checked(magnitudes)])
    n_frames = len(heard)
    if n_frames < noise_rank:
        raise ParameterError(f"{name}: {n_frames} STFT frames, fewer than the noise rank {noise_rank}; "
                             "give a longer noise recording or lower the noise rank")
    # frames of digital silence hold no noise; a recording of nothing else is refused below
    candidates = np.flatnonzero(heard) if heard.sum() >= noise_rank else np.arange(n_frames)
    chosen = np.zeros(n_frames, dtype=bool)
    chosen[_spread(candidates, MAX_NOISE_FRAMES)] = True
    parts, start = [], 0
    for V in magnitudes():
        parts.append(V[:, np.flatnonzero(chosen[start:start + V.shape[1]])])
        start += V.shape[1]
    _check_second_pass(start, n_frames)
    Vq = np.concatenate(parts, axis=1)
    if not np.any(Vq):
        raise ParameterError(f"{name}: the recording is silent; give a recording of the noise")
    W_noise, floor = _fit_noise(Vq, noise_rank, stream(seed, 1), _offset(Vq.mean()), 50)
    return NoiseModel(W_noise[None], floor[None], max(1, n_frames))


def validate_noise_model(noise, framing):
    """Require a well-formed :class:`NoiseModel` whose dictionaries have ``framing``'s bins.

    A model records no framing of its own: its bins (hence ``n_fft``) are checked against ``framing``, but
    not its sample rate or hop; a model learned at another rate with as many bins passes (learn it at the
    rate of the dictionary's framing).

    Returns
    -------
    NoiseModel
        ``noise``, its arrays as arrays and ``segment_frames`` an int.

    Raises
    ------
    ParameterError
        Another type; ``W_noise`` not of shape (n_segments, n_bins, noise_rank) with ``framing``'s bins,
        not finite and non-negative, or with an atom of no positive entry; ``floor`` not of shape
        (n_segments, n_bins), or not finite and non-negative; ``segment_frames`` not a positive integer.
    """
    if not isinstance(noise, NoiseModel):
        raise ParameterError(f"noise: expected a NoiseModel (learn_noise or track_noise), got {type(noise).__name__}")
    W_noise, floor = np.asarray(noise.W_noise), np.asarray(noise.floor)
    if W_noise.ndim != 3 or 0 in W_noise.shape:
        raise ParameterError(f"noise.W_noise: shape {W_noise.shape}; expected (n_segments, n_bins, noise_rank), "
                             "none of them 0")
    if W_noise.shape[1] != framing.n_bins:
        raise ParameterError(f"noise: a model of {W_noise.shape[1]} frequency bins does not fit the "
                             f"dictionary's framing ({framing.n_bins} bins at {framing.sample_rate} Hz); learn it "
                             "from magnitudes of that framing")
    if W_noise.dtype.kind not in "iuf" or not np.all(np.isfinite(W_noise)) or W_noise.min() < 0:
        raise ParameterError("noise.W_noise: the dictionaries must be finite and non-negative")
    if not np.all(W_noise.sum(axis=1) > 0):
        raise ParameterError("noise.W_noise: an atom has no positive entry")
    if floor.shape != W_noise.shape[:2]:
        raise ParameterError(f"noise.floor: shape {floor.shape}; expected {W_noise.shape[:2]}, a floor per "
                             "segment's dictionary")
    if floor.dtype.kind not in "iuf" or not np.all(np.isfinite(floor)) or floor.min() < 0:
        raise ParameterError("noise.floor: the floors must be finite magnitudes of at least 0")
    return NoiseModel(W_noise, floor, integer_at_least("noise.segment_frames", noise.segment_frames, 1))


def validate_noise_rank(noise_rank, num_samples, *, name="signal", framing=features.NARROWBAND):
    """Require at least ``noise_rank`` STFT frames in a signal of ``num_samples`` samples.

    A noise dictionary of more atoms than the frames it is learned on fits nothing; the
    command line refuses such a file before any work (the library accepts it).

    Raises
    ------
    ParameterError
        Naming the signal, its frame count and the remedy.
    """
    frames = features.num_frames(num_samples, framing=framing)
    if noise_rank > frames:
        raise ParameterError(f"{name}: {frames} STFT frames, fewer than the noise rank {noise_rank}; "
                             "lower --noise-rank or give a longer recording")
    return noise_rank
