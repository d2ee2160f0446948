"""A correction of the enhancer's band gains, learned from its own separations of training mixtures.

Per frame and band (:data:`NUM_BANDS` triangular bands, log-spaced from :data:`LOWEST_HZ` to :data:`TOP_SHARE` of the
Nyquist frequency: 3.9 kHz at 8 kHz, 7.8 kHz at 16 kHz),
small networks read the band powers of the mixture, of the speech part and of the noise part and the mask's band
gain and how periodic the mixture is in the band at the frame's voice period (:func:`periodicity`), each at
:data:`OFFSETS` (up to ±:data:`CONTEXT` frames, half a second), and how far the mixture's band power rises and falls
within them, and predict the band's ideal gain ``sqrt(B|X|² / B|Y|²)`` in logs (``X`` the
clean speech, ``Y`` the mixture). Each network is trained without a share of the training's noise types; the mask
moves toward the mean of their predictions (in logs), :data:`BLEND` of the way up and down as far as the networks
agree (:func:`agreement_share`); it is not lowered in a band where the separation puts the speech part more than
:data:`SPEECH_GATE_DB` above the noise part (there the networks' lowering lost on near-clean input) unless it puts
the speech part no more than :data:`NOISY_CONTEXT_DB` above the noise part over all bands within ±:data:`CONTEXT`
frames (there the voice-like parts of a noise are what the gate kept) or the frame holds a band so shut whose
lowering taken is :data:`SPEECH_GATE_DB` or more (there the separation took a noise's clinks for speech), nor raised
where it puts the noise part more than :data:`NOISE_GATE_DB` above the speech part (there the raising lowered PESQ
under talkers unlike the NOIZEUS ones); band-frames that no move may leave are not asked about.
A single network may instead predict those moves themselves, learned from such an ensemble's (distilled,
:attr:`BandGains.predicts`): about the ensemble's correction at one network's cost.
The moves are spread to the bins by the bands' weights (:func:`move_weights`), the bins below the lowest band and
above the top one taking that band's move. docs/enhance.md ("A learned correction of the band gains",
"Half a second around the frame", "The networks' mean", "The speech gate opened where the half second is noisy",
"Lowered as far as the networks agree", "The speech gate yields to a lowering of its own size", "The bins beyond
the bands", "Three trainings stacked", "One network learns the stack's moves") has the measurements;
``recipes/train_band_gains.py`` trains the networks (and distils them) and stores them in a dictionary file
(:attr:`sepsti.dictionary.Dictionary.band_gains`).

Conventions
-----------
Magnitudes are ``(n_bins, m)`` in the enhancer's analysis framing (:func:`sepsti.features.enhancement_framing`),
band values ``(NUM_BANDS, m)``, and a network's inputs one row per band and frame, bands first.
"""

import functools
from typing import NamedTuple

import numpy as np

__all__ = ["BandGains", "NUM_BANDS", "LOWEST_HZ", "TOP_SHARE", "highest_hz", "OFFSETS", "CONTEXT", "NUM_INPUTS",
           "PITCH_HZ", "BLEND", "SPEECH_GATE_DB", "NOISY_CONTEXT_DB", "NOISE_GATE_DB", "INPUT_FRAMES",
           "validate_band_gains", "band_weights", "move_weights", "periodicity", "band_levels", "network_inputs",
           "noisy_context", "ideal_band_gains", "TrainingExample", "training_example", "agreement_share", "PREDICTS",
           "ensemble_moves", "mean_moves", "corrected_mask", "corrected_masks"]

NUM_BANDS = 20
LOWEST_HZ = 100.0
#: The top band's upper edge, as a share of the Nyquist frequency.
TOP_SHARE = 0.975
#: The frames read around a frame (in the enhancer's frames, 16 ms apart): the three on each side, and three pairs
#: further out, the furthest half a second away.
OFFSETS = (-32, -16, -8, -3, -2, -1, 0, 1, 2, 3, 8, 16, 32)
#: Frames read on each side of a frame.
CONTEXT = max(OFFSETS)
#: Inputs per band and frame: for the band and its two neighbours, the speech and noise parts' band power over the
#: mixture's, the mixture's band power over the frame's, the mask's band gain and the mixture's periodicity, each at
#: :data:`OFFSETS`; the band's power over the mean of the frame's bands; the highest and the lowest of the mixture's
#: band power within ±:data:`CONTEXT` frames over the frame's; then which band it is.
NUM_INPUTS = 3 * (5 * len(OFFSETS) + 3) + NUM_BANDS
#: Inputs per band and frame of the networks of earlier versions, and what they lack.
_EARLIER_INPUTS = {107: "read ±3 frames around the frame", 185: "do not read the mixture's periodicity"}
#: What networks may predict (:attr:`BandGains.predicts`).
PREDICTS = ("gain", "move")
#: The voice's fundamental frequencies (Hz) whose periods :func:`periodicity` searches.
PITCH_HZ = (60.0, 400.0)
#: The share of a raising to the networks' mean prediction (in logs) the mask takes, and of a lowering when there is
#: one network (:func:`agreement_share`).
BLEND = 0.5
#: No lowering where the separation's speech part is this far (dB) above its noise part in the band, unless in a
#: frame where the lowering taken in such a band is this far (dB) or further.
SPEECH_GATE_DB = 15.0
#: Lowering is let through in every band of a frame where the separation's speech part is at most this far (dB) above
#: its noise part, their powers summed over all bands and the frames within ±:data:`CONTEXT` (:func:`noisy_context`).
NOISY_CONTEXT_DB = 5.0
#: No raising where the separation's noise part is this far (dB) above its speech part in the band.
NOISE_GATE_DB = 0.0
#: Frames whose networks' inputs are built at once (30 kB a frame), so that memory does not grow with a piece.
INPUT_FRAMES = 128
_TINY = 1e-10
_DB_PER_LOG = 20.0 / np.log(10.0)  # decibels per unit of a gain's log


class BandGains(NamedTuple):
    """Networks stacked along the first axis (all of one shape), predicting either a band's ideal gain in logs or
    the move of the mask's band gain (in logs) that an ensemble of such networks makes (:attr:`predicts`).

    Each is a ReLU network on standardised inputs: ``h = (x - mean) / scale``, then
    ``h = max(h @ W + b, 0)`` for each hidden layer (weights and bias stacked as ``[W; b]``), then ``h @ w + c``.

    Attributes
    ----------
    mean, scale : ndarray, shape (num_networks, NUM_INPUTS)
    hidden : tuple of ndarray, each shape (num_networks, inputs + 1, units)
    output : ndarray, shape (num_networks, units + 1)
    predicts : str
        ``"gain"``: the ideal band gain, the mask moving toward the networks' mean as far as they agree
        (:func:`ensemble_moves`); ``"move"``: that move itself, learned from such an ensemble (a distilled network,
        one matrix product where the ensemble has one per network), their mean taken.
    """

    mean: np.ndarray
    scale: np.ndarray
    hidden: tuple
    output: np.ndarray
    predicts: str = "gain"

    @property
    def num_networks(self):
        return self.mean.shape[0]

    def predict(self, rows):
        """Every network's prediction for ``rows`` (n, NUM_INPUTS): shape (num_networks, n).

        Computed in single precision (four times as fast as in double, to about 1e-5 in logs), the standardisation
        folded into the first layer's weights, the networks' first layers side by side in one matrix product."""
        single = np.float32
        first = self.hidden[0].astype(single)  # (networks, NUM_INPUTS + 1, units)
        weights = first[:, :-1] / self.scale.astype(single)[:, :, None]
        bias = first[:, -1] - np.einsum("ki,kiu->ku", self.mean.astype(single), weights)
        units = weights.shape[2]
        side_by_side = weights.transpose(1, 0, 2).reshape(weights.shape[1], -1)
        h = np.asarray(rows, dtype=single) @ side_by_side + bias.reshape(-1)
        np.maximum(h, 0.0, out=h)
        h = h.reshape(len(h), self.num_networks, units).transpose(1, 0, 2)  # (networks, n, units)
        for layer in self.hidden[1:]:
            weights = layer.astype(single)
            h = h @ weights[:, :-1] + weights[:, -1:]
            np.maximum(h, 0.0, out=h)
        output = self.output.astype(single)
        return ((h @ output[:, :-1, None])[:, :, 0] + output[:, -1:]).astype(np.float64)


def highest_hz(sample_rate):
    """The top band's upper edge (Hz) at ``sample_rate``: :data:`TOP_SHARE` of the Nyquist frequency."""
    return TOP_SHARE * sample_rate / 2


def validate_band_gains(band_gains, *, name="band_gains"):
    """Check ``band_gains`` and return it with float64 arrays.

    Parameters
    ----------
    band_gains : BandGains
    name : str
        How to name it in messages.

    Raises
    ------
    ParameterError
        Not a :class:`BandGains`, arrays that are not real or finite, scales that are not positive, shapes that do
        not chain, :attr:`BandGains.predicts` not one of :data:`PREDICTS`.
    """
    from sepsti.core.errors import ParameterError

    if not isinstance(band_gains, BandGains):
        raise ParameterError(f"{name} must be a sepsti.band_gains.BandGains, got {type(band_gains).__name__}")
    arrays = [np.asarray(array) for array in (band_gains.mean, band_gains.scale, *band_gains.hidden,
                                              band_gains.output)]
    if not band_gains.hidden or any(array.dtype.kind not in "fiu" for array in arrays):
        raise ParameterError(f"{name} must hold real arrays and at least one hidden layer")
    mean, scale, *hidden, output = (array.astype(np.float64) for array in arrays)
    networks = mean.shape[0] if mean.ndim == 2 else 0
    inputs, chained = NUM_INPUTS, True
    for layer in hidden:
        chained &= layer.ndim == 3 and layer.shape[:2] == (networks, inputs + 1) and layer.shape[2] > 0
        inputs = layer.shape[-1] if layer.ndim else 0
    if mean.ndim == 2 and mean.shape[1] in _EARLIER_INPUTS:
        raise ParameterError(f"{name}: networks of {mean.shape[1]} inputs, which {_EARLIER_INPUTS[mean.shape[1]]} as "
                             f"an earlier version's did ({NUM_INPUTS} inputs now): train them again with "
                             "recipes/train_band_gains.py")
    if (networks < 1 or mean.shape != (networks, NUM_INPUTS) or scale.shape != mean.shape or not chained
            or output.shape != (networks, inputs + 1)):
        shapes = ", ".join(str(array.shape) for array in arrays)
        raise ParameterError(f"{name}: shapes {shapes} do not chain: expected mean and scale (networks, "
                             f"{NUM_INPUTS}), each hidden layer (networks, inputs + 1, units) and the output "
                             f"(networks, units + 1)")
    if not all(np.all(np.isfinite(array)) for array in (mean, scale, output, *hidden)) or np.any(scale <= 0):
        raise ParameterError(f"{name} must be finite, with positive scales")
    if not isinstance(band_gains.predicts, str) or band_gains.predicts not in PREDICTS:
        raise ParameterError(f"{name}: predicts {band_gains.predicts!r}, expected one of {', '.join(PREDICTS)}")
    return BandGains(mean, scale, tuple(hidden), output, band_gains.predicts)


def band_weights(framing):
    """The bands' triangular weights over the bins of ``framing`` (:class:`sepsti.features.Framing`),
    shape (NUM_BANDS, n_bins)."""
    frequencies = np.arange(framing.n_bins) * framing.sample_rate / framing.n_fft
    corners = np.geomspace(LOWEST_HZ, highest_hz(framing.sample_rate), NUM_BANDS + 2)
    low, centre, high = corners[:-2, None], corners[1:-1, None], corners[2:, None]
    rising = (frequencies - low) / (centre - low)
    falling = (high - frequencies) / (high - centre)
    return np.clip(np.minimum(rising, falling), 0.0, None)


def move_weights(framing):
    """How the bands' moves reach the bins of ``framing``: each band's weight over the bands' sum in the bin, and the
    bins below the lowest band and above the top one taking that band's move whole, shape (NUM_BANDS, n_bins)."""
    bands = band_weights(framing)
    weights = bands / np.maximum(bands.sum(axis=0), _TINY)
    frequencies = np.arange(framing.n_bins) * framing.sample_rate / framing.n_fft
    weights[0, frequencies <= LOWEST_HZ] = 1.0
    weights[-1, frequencies >= highest_hz(framing.sample_rate)] = 1.0
    return weights


def periodicity(bands, power, sample_rate):
    """Per band and frame, how periodic the windowed frame is at its voice period: its autocorrelation at that lag,
    band-limited by the band's weights, over the band's power (1 where the band holds harmonics of the period alone,
    about 0 for noise).

    The period is the lag of :data:`PITCH_HZ` at which the frame's autocorrelation over the window's is highest.

    Parameters
    ----------
    bands : ndarray, shape (NUM_BANDS, n_bins)
        :func:`band_weights`.
    power : ndarray, shape (n_bins, m)
        The mixture's power spectra, the frames windowed by :func:`sepsti.features.window` of ``2 (n_bins - 1)``
        points.
    sample_rate : int

    Returns
    -------
    ndarray, shape (NUM_BANDS, m)
    """
    n_fft = 2 * (power.shape[0] - 1)
    shortest, windows, cosines = _period_search(sample_rate, n_fft)
    frames = np.fft.irfft(power.T, n=n_fft)[:, shortest:shortest + len(windows)]  # autocorrelations at the lags
    cosines = np.ascontiguousarray(cosines[np.argmax(frames / windows, axis=1)].T)  # (n_bins, m): at each period
    return (bands @ (power * cosines)) / (bands @ power + _TINY)


@functools.lru_cache(maxsize=4)
def _period_search(sample_rate, n_fft):
    """The lags :func:`periodicity` searches: the shortest, the window's autocorrelation at each, and
    ``cos(2π k lag / n_fft)`` for each lag and bin ``k``."""
    from sepsti.features import Framing, window

    lags = np.arange(int(sample_rate / PITCH_HZ[1]), int(sample_rate / PITCH_HZ[0]) + 1)
    windows = np.fft.irfft(np.abs(np.fft.rfft(window(Framing(sample_rate, n_fft, n_fft)))) ** 2, n=n_fft)[lags]
    cosines = np.ascontiguousarray(np.cos(2 * np.pi * np.arange(n_fft // 2 + 1)[:, None] * lags[None, :] / n_fft).T)
    for array in (windows, cosines):
        array.setflags(write=False)  # shared by every call
    return lags[0], windows, cosines


def band_levels(bands, mixture, speech, noise, mask, sample_rate):
    """Per band and frame: in logs, the mixture's power, the speech and noise parts' over it, the mask's gain; then
    the mixture's :func:`periodicity`.

    Parameters
    ----------
    bands : ndarray, shape (NUM_BANDS, n_bins)
        :func:`band_weights`.
    mixture, speech, noise, mask : ndarray, shape (n_bins, m)
        Magnitudes of the mixture and of the separation's parts, and the mask.
    sample_rate : int

    Returns
    -------
    ndarray, shape (5, NUM_BANDS, m)
    """
    power = mixture ** 2
    mixture_level = np.log(bands @ power + _TINY)
    return np.stack([mixture_level,
                     np.log(bands @ speech ** 2 + _TINY) - mixture_level,
                     np.log(bands @ noise ** 2 + _TINY) - mixture_level,
                     0.5 * (np.log(bands @ (mask ** 2 * power) + _TINY) - mixture_level),
                     periodicity(bands, power, sample_rate)])


def network_inputs(levels, start, stop):
    """The networks' inputs for frames ``start:stop`` of ``levels`` (:func:`band_levels`), which holds
    :data:`CONTEXT` frames on each side of them; shape ((stop - start) · NUM_BANDS, NUM_INPUTS), bands first."""
    span = np.stack([levels[:, :, start + offset:stop + offset] for offset in OFFSETS],
                    axis=1)  # (5, len(OFFSETS), NUM_BANDS, m)
    level = levels[0, :, start:stop]
    around = np.lib.stride_tricks.sliding_window_view(levels[0, :, start - CONTEXT:stop + CONTEXT],
                                                      2 * CONTEXT + 1, axis=1)  # (NUM_BANDS, m, 2 CONTEXT + 1)
    own = np.concatenate([span[1], span[2], span[0] - level, span[3], span[4], (level - level.mean(axis=0))[None],
                          (around.max(axis=2) - level)[None],
                          (around.min(axis=2) - level)[None]])  # (5 len(OFFSETS) + 3, NUM_BANDS, m)
    below = np.concatenate([own[:, :1], own[:, :-1]], axis=1)
    above = np.concatenate([own[:, 1:], own[:, -1:]], axis=1)
    which = np.broadcast_to(np.eye(NUM_BANDS, dtype=levels.dtype)[:, :, None], (NUM_BANDS, NUM_BANDS, stop - start))
    inputs = np.concatenate([below, own, above, which], axis=0)  # (NUM_INPUTS, NUM_BANDS, m)
    return inputs.reshape(NUM_INPUTS, -1).T


def ideal_band_gains(bands, mixture, clean, floor):
    """The target: the clean speech's band power over the mixture's, square-rooted, in [floor, 1], in logs;
    shape (NUM_BANDS, m)."""
    ratio = (bands @ clean ** 2 + _TINY) / (bands @ mixture ** 2 + _TINY)
    return np.clip(0.5 * np.log(ratio), np.log(floor), 0.0)


class TrainingExample(NamedTuple):
    """One training mixture as the networks learn from it.

    Attributes
    ----------
    levels : ndarray, shape (5, NUM_BANDS, m)
        :func:`band_levels` of the enhancer's separation.
    target : ndarray, shape (NUM_BANDS, m)
        :func:`ideal_band_gains`.
    weight : ndarray, shape (NUM_BANDS, m)
        How often a band-frame is drawn for training: the square root of the mixture's band power over its mean
        (the SDR counts the loud bands).
    """

    levels: np.ndarray
    target: np.ndarray
    weight: np.ndarray

    def inputs(self):
        """The networks' inputs for every band-frame, ``(NUM_BANDS · m, NUM_INPUTS)``, bands first; the first and
        last frames stand for the frames before and after, as in :func:`corrected_masks`."""
        frames = self.levels.shape[2]
        padded = np.pad(self.levels, ((0, 0), (0, 0), (CONTEXT, CONTEXT)), mode="edge")
        return network_inputs(padded, CONTEXT, CONTEXT + frames)


def training_example(record, atoms, framing, floor):
    """The :class:`TrainingExample` of a mixture the enhancer separated.

    Parameters
    ----------
    record : sepsti.mask_atoms.SeparationRecord
    atoms : ndarray, shape (n_bins, rank)
        The atoms the speech is rebuilt with (:func:`sepsti.mask_atoms.speech_atoms`).
    framing : sepsti.features.Framing
        The record's framing (the enhancer's analysis framing).
    floor : float
        The mask's least gain.
    """
    from sepsti.denoise import smooth_speech, speech_mask

    bands = band_weights(framing)
    speech = smooth_speech(atoms @ record.H, record.noise)
    mask = speech_mask(speech, record.noise, floor)
    power = bands @ record.noisy ** 2
    weight = np.sqrt(power / max(power.mean(), _TINY))
    return TrainingExample(band_levels(bands, record.noisy, speech, record.noise, mask, framing.sample_rate),
                           ideal_band_gains(bands, record.noisy, record.clean, floor), weight)


def agreement_share(predictions, move):
    """The share of a lowering ``move`` to the networks' mean prediction the mask takes: ``d² / (d² + s²)``, ``d``
    the move and ``s`` the standard error of the mean (the predictions' sample variance over their number), so that
    a lowering the networks agree on is taken whole and one they disagree on shrinks toward none; with one network,
    whose error is not measured, :data:`BLEND`.

    Parameters
    ----------
    predictions : ndarray, shape (num_networks, n)
        The networks' clipped predictions (logs).
    move : ndarray, shape (n,)
        Their mean less the band gain.

    Returns
    -------
    ndarray, shape (n,)
    """
    if len(predictions) < 2:
        return np.full(move.shape, BLEND)
    square = move ** 2
    return square / np.maximum(square + predictions.var(axis=0, ddof=1) / len(predictions), _TINY)


def ensemble_moves(predictions, gains, floor):
    """The moves of the band gains (in logs) toward the mean of networks predicting the ideal gain: each prediction
    clipped to ``[log(floor), 0]``, the move ``d`` from ``gains`` to their mean times its :func:`agreement_share` if
    it lowers, :data:`BLEND` of it if it raises.

    Parameters
    ----------
    predictions : ndarray, shape (num_networks, n)
        The networks' predictions (logs).
    gains : ndarray, shape (n,)
        The mask's band gains (logs).
    floor : float
        The mask's least gain.

    Returns
    -------
    ndarray, shape (n,)
    """
    predictions = np.clip(predictions, np.log(floor), 0.0)
    move = predictions.mean(axis=0) - gains
    return np.where(move < 0, agreement_share(predictions, move), BLEND) * move


def mean_moves(band_gains, rows, gains, raising, floor):
    """The moves of the band gains (in logs) the networks make, where the raising gate lets them.

    Networks predicting the ideal gain make :func:`ensemble_moves`; networks predicting the move make the mean of
    their predictions, clipped so that the gain stays in ``[floor, 1]``. A lowering is taken, a raising only where
    ``raising``. Rows that no move may leave (a gain at the floor where raising is shut) are not asked about.

    Parameters
    ----------
    band_gains : BandGains
    rows : ndarray, shape (n, NUM_INPUTS)
        The networks' inputs (:func:`network_inputs`).
    gains : ndarray, shape (n,)
        The mask's band gains (logs).
    raising : ndarray of bool, shape (n,)
        Where a raising may pass.
    floor : float
        The mask's least gain.

    Returns
    -------
    ndarray, shape (n,)
    """
    low = np.log(floor)
    live = np.flatnonzero((gains > low) | raising & (gains < 0.0))
    moves = np.zeros(len(gains))
    if not live.size:
        return moves
    predictions = band_gains.predict(np.asarray(rows[live], dtype=np.float32))  # the networks' precision
    if band_gains.predicts == "move":
        move = np.clip(predictions.mean(axis=0), low - gains[live], -gains[live])
    else:
        move = ensemble_moves(predictions, gains[live], floor)
    moves[live] = np.where((move < 0) | (move > 0) & raising[live], move, 0.0)
    return moves


def noisy_context(levels, start, stop):
    """Whether the separation puts the speech part at most :data:`NOISY_CONTEXT_DB` above the noise part, their
    powers summed over all bands and the frames within ±:data:`CONTEXT`, for frames ``start:stop`` of ``levels``
    (:func:`band_levels`, with :data:`CONTEXT` frames on each side of them); shape (stop − start,)."""
    powers = np.exp(levels[0] + levels[1:3]).sum(axis=1)  # (2, frames): the speech and noise parts' power
    windows = np.lib.stride_tricks.sliding_window_view(powers[:, start - CONTEXT:stop + CONTEXT], 2 * CONTEXT + 1,
                                                       axis=1).sum(axis=2)
    return windows[0] <= 10.0 ** (NOISY_CONTEXT_DB / 10.0) * windows[1]


def corrected_mask(band_gains, spread, mask, levels, start, stop, floor):
    """The mask of frames ``start:stop`` of ``levels`` (:func:`band_levels`, with :data:`CONTEXT` frames on each
    side), corrected; ``mask`` holds those frames only, ``spread`` how a band's move reaches the bins
    (:func:`move_weights`)."""
    speech_over_noise_db = 10.0 / np.log(10.0) * (levels[1, :, start:stop] - levels[2, :, start:stop])
    shut = (speech_over_noise_db > SPEECH_GATE_DB) & ~noisy_context(levels, start, stop)  # to a lowering
    raising = speech_over_noise_db >= -NOISE_GATE_DB
    moves = np.empty((NUM_BANDS, stop - start))
    single = levels.astype(np.float32)  # the networks' precision: their inputs built in it
    for first in range(start, stop, INPUT_FRAMES):
        last = min(first + INPUT_FRAMES, stop)
        block = slice(first - start, last - start)
        moves[:, block] = mean_moves(
            band_gains, network_inputs(single, first, last), levels[3, :, first:last].reshape(-1),
            raising[:, block].reshape(-1), floor).reshape(NUM_BANDS, -1)
    yielding = (shut & (moves <= -SPEECH_GATE_DB / _DB_PER_LOG)).any(axis=0)  # frames whose shut bands open
    moves[(moves < 0) & shut & ~yielding] = 0.0
    return np.clip(mask * np.exp(spread.T @ moves), floor, 1.0)


def corrected_masks(pieces, band_gains, framing, floor):
    """The masks of consecutive pieces, corrected; each piece waits for :data:`CONTEXT` frames after it.

    Parameters
    ----------
    pieces : iterable of tuple
        ``(S, mixture, speech, noise, mask)`` of consecutive frames: the STFT the mask is applied to (any trailing
        channel axis), and magnitudes and mask of shape (n_bins, m).
    band_gains : BandGains
    framing : sepsti.features.Framing
        The frames' framing.
    floor : float
        The mask's least gain.

    Yields
    ------
    tuple
        ``(S, mask, corrected)`` of consecutive frames, all of them in the end: the mask given and the mask
        corrected; the signal's first and last frames stand for the frames before and after it.
    """
    bands, spread = band_weights(framing), move_weights(framing)
    before = None  # levels of the CONTEXT frames before the held ones
    held = None  # (S, mask, levels) of frames not yet given out
    for S, mixture, speech, noise, mask in pieces:
        levels = band_levels(bands, mixture, speech, noise, mask, framing.sample_rate)
        if before is None:
            before = np.repeat(levels[:, :, :1], CONTEXT, axis=2)
        if held is not None:
            S, mask, levels = (np.concatenate([held[0], S], axis=1), np.concatenate([held[1], mask], axis=1),
                               np.concatenate([held[2], levels], axis=2))
        held = (S, mask, levels)
        ready = held[2].shape[2] - CONTEXT
        if ready > 0:
            window = np.concatenate([before, held[2]], axis=2)
            yield held[0][:, :ready], held[1][:, :ready], corrected_mask(band_gains, spread, held[1][:, :ready],
                                                                         window, CONTEXT, CONTEXT + ready, floor)
            before = window[:, :, ready:ready + CONTEXT]
            held = (held[0][:, ready:], held[1][:, ready:], held[2][:, :, ready:])
    if held is not None and held[2].shape[2]:
        frames = held[2].shape[2]
        window = np.concatenate([before, held[2], np.repeat(held[2][:, :, -1:], CONTEXT, axis=2)], axis=2)
        yield held[0], held[1], corrected_mask(band_gains, spread, held[1], window, CONTEXT, CONTEXT + frames, floor)
