"""Speech enhancement by Poisson NMF with a fixed speech dictionary (ICASSP'16 §4.2, eq. 14).

Conventions
-----------
Magnitudes are ``(n_bins, n_frames)`` STFT magnitudes from :mod:`sepsti.features` (on the int16
amplitude scale). A speech dictionary ``W`` is ``(n_bins, rank)``, non-negative, or ``(n_bins · (2c +
1), rank)`` for atoms of ``2c + 1`` frames a quarter window apart (:attr:`sepsti.dictionary.Dictionary.context`,
read from the shape): each frame is then fitted stacked with its ``c`` neighbours on each side
(:func:`sepsti.features.in_context`) and keeps the centre frame's part of the fit. Signals are float
arrays at the rate of the dictionary's framing (``framing=``, :class:`sepsti.features.Framing`;
default the 8 kHz :data:`sepsti.features.NARROWBAND`: 257 bins).

The noisy magnitude is modelled as ``V ≈ W_sp H_sp + W_no H_no + N̂`` (Poisson, ICASSP'16
eq. 14, with a known term ``N̂``) with exponential priors on the speech activations. The speech
dictionary is trained on clean speech and held fixed. The noise model (:mod:`sepsti.noise_model`)
follows the noise through the signal: each segment of a few seconds gets its own noise dictionary
and floor, learned on the frames around it that are quietest relative to a minimum-statistics noise floor (so neither
pauses in the speech nor a constant noise are needed), and held fixed too, so that it cannot
absorb speech; or one model comes from a recording of the noise alone. Beside its segment's
dictionary, the noise part of every frame holds a known component ``N̂``: the mean noise
magnitude of that frame, predicted from the frames around it by MMSE speech-presence tracking of the noise power
(:mod:`sepsti.noise_power`); it follows the loud moments and quick changes of a noise, which a
dictionary learned on the quietest frames does not hold, and anchors the noise part's level.
Mains hum, where the signal has it, is subtracted first, as sinusoids (:mod:`sepsti.hum`): the mask
would otherwise attenuate every bin it dominates, the voice's low harmonics with it.
All activations are learned by MAP-EM on the noisy magnitudes; the prior rate of a frame's
speech activations grows with the frame's estimated noise share, so that content the noise
model can explain goes to the noise part, while frames well above the noise floor are left
alone. Where the noise dominates a bin, the speech estimate is averaged with the neighbouring
frames' (:func:`smooth_speech`); the speech is then rebuilt with the Wiener-style mask
``S / (S + N)`` (``N`` the whole noise part), at least :data:`MASK_FLOOR`, applied to the complex
noisy STFT. The speech part ``S`` is rebuilt from the fitted speech activations with the atoms' centre frame,
or with atoms learned for the mask where the dictionary has them (``mask_atoms``, :mod:`sepsti.mask_atoms`); where it
has a learned correction of the mask's band gains (``band_gains``, :mod:`sepsti.band_gains`), the mask then moves
toward the mean of the gains its networks predict.

:func:`denoise` and :func:`denoise_blocks` take the dictionary's framing and enhance in frames of its
window every quarter window (:func:`sepsti.features.enhancement_framing`), twice as dense as the
dictionary's own, which the noise model is learned on.
"""

import contextlib
import warnings
from typing import NamedTuple

import numpy as np

from sepsti.core.checks import integer_at_least
from sepsti.core.errors import ParameterError
from sepsti.core.factorization import initialize_nmf, poisson_nmf_em
from sepsti.core.random import KEY_LIMIT, stream
from sepsti import features
from sepsti.audio import MAX_PEAK, check_layout
from sepsti.hum import hum_free
from sepsti.noise_model import (NoiseModel, min_frames, shortest_seconds, too_little_sound, track_noise,
                                validate_noise_model)
from sepsti.noise_power import (RAYLEIGH_POWER, NoisePowerTracker, expected_magnitude, median_magnitude,
                                track_noise_power)

__all__ = ["SPARSITY", "EM_ITERATIONS", "MASK_FLOOR", "CHUNK_FRAMES", "train_dictionary", "denoise",
           "denoise_blocks", "separate", "smooth_speech", "speech_mask", "speech_prior_rates",
           "UnchangedSignalWarning", "unchanged_signal_raised"]


def train_dictionary(X, rank, *, max_iter=200, tol=1e-4, seed=0, prior_rate=0.0, progress=False):
    """Train a speech dictionary by EM on clean magnitudes.

    Parameters
    ----------
    X : ndarray, shape (n_bins, n_frames)
        Clean-speech magnitudes (e.g. :func:`sepsti.features.training_matrix`), not all zero.
    rank : int
        Number of dictionary columns, at most the number of frames.
    max_iter : int
        EM iteration cap.
    tol : float
        Relative tolerance of EM (0 runs exactly ``max_iter`` iterations).
    seed : int
        Seed of the initialisation.
    prior_rate : float
        Rate of the exponential prior on the activations during training (0: plain EM).
    progress : bool
        Progress bar on stderr.

    Returns
    -------
    W : ndarray, shape (n_bins, rank)
        Dictionary in float64, each column scaled to sum 1 (the scale moves to the activations).
    result : sepsti.core.factorization.EMResult
        The full EM result (``result.W`` unnormalised, ``result.H``, history, ``n_iter``),
        computed in float32.
    """
    X = np.asarray(X)
    if X.ndim != 2:
        raise ParameterError(f"X: expected a (n_bins, n_frames) matrix, got shape {X.shape}")
    if np.issubdtype(X.dtype, np.number) and not np.iscomplexobj(X):
        # EM in single precision: magnitudes of 16-bit audio need no more, and the matrix
        # products, nearly all of the time, run twice as fast (the log-likelihood is in float64)
        X = X.astype(np.float32)
    if isinstance(rank, (bool, np.bool_)) or not isinstance(rank, (int, np.integer)) or not 1 <= rank <= X.shape[1]:
        # more atoms than frames fits nothing, and H alone would take rank × frames × 4 bytes
        raise ParameterError(f"rank={rank!r}: expected an integer in 1..{X.shape[1]}, the number of training "
                             "frames; lower the rank or add training files")
    if X.dtype.kind in "bf" and not np.any(X):
        raise ParameterError("X: all zero; expected clean-speech magnitudes")
    W0, H0 = initialize_nmf(X, rank, stream(seed, 0))
    result = poisson_nmf_em(X, W0, H0, prior_rate_H=prior_rate, max_iter=max_iter, tol=tol,
                            progress=progress, desc=f"train R={rank}")
    W = result.W.astype(np.float64)
    W /= np.maximum(W.sum(axis=0, keepdims=True), np.finfo(np.float64).tiny)
    return W, result


def _validate_dictionary(W, framing):
    from sepsti.core.checks import real_array

    W = real_array("W", W)
    frames, extra = divmod(W.shape[0], framing.n_bins) if W.ndim == 2 else (0, 1)
    if W.ndim != 2 or extra or frames % 2 == 0 or W.shape[1] < 1:
        raise ParameterError(f"W: expected a ({framing.n_bins}, rank) dictionary for n_fft={framing.n_fft} "
                             f"(or {framing.n_bins} rows per frame of an odd number of frames), got shape {W.shape}")
    if not np.all(np.isfinite(W)) or W.min() < 0:
        raise ParameterError("W: the dictionary must be finite and non-negative")
    if not np.any(W.sum(axis=0) >= np.finfo(np.float64).tiny):
        raise ParameterError("W: no atom has a positive entry (the dictionary is zero or subnormal)")
    return W


def _with_mask_atoms(W, mask_atoms, framing):
    """``W``'s atoms scaled to sum 1, and the atoms the speech is rebuilt with for the mask on the same scale:
    ``mask_atoms``, or the atoms' centre frame."""
    n_bins, rank = framing.n_bins, W.shape[1]
    if mask_atoms is None:
        mask_atoms = _centre(W, framing)
    else:
        from sepsti.core.checks import real_array

        mask_atoms = real_array("mask_atoms", mask_atoms)
        if mask_atoms.shape != (n_bins, rank):
            raise ParameterError(f"mask_atoms: expected ({n_bins}, {rank}), a frame of bins for each of W's atoms, "
                                 f"got shape {mask_atoms.shape}")
        if not np.all(np.isfinite(mask_atoms)) or mask_atoms.min() < 0:
            raise ParameterError("mask_atoms: must be finite and non-negative")
    sums = np.maximum(W.sum(axis=0, keepdims=True), np.finfo(np.float64).tiny)
    return W / sums, mask_atoms / sums


def _context(W, framing):
    """Frames on each side of the centre frame of ``W``'s atoms."""
    return (W.shape[0] // framing.n_bins - 1) // 2


def _centre(W, framing):
    """The centre frame of each of ``W``'s atoms, ``(n_bins, rank)``, as it is in ``W``."""
    context = _context(W, framing)
    return W[context * framing.n_bins:(context + 1) * framing.n_bins]


def _centre_frame(W, framing):
    """The centre frame of each atom, renormalised: a single-frame dictionary for the noise model."""
    centre = _centre(W, framing)
    return centre / np.maximum(centre.sum(axis=0, keepdims=True), np.finfo(np.float64).tiny)


def _validate_signal(y):
    y = np.asarray(y)
    if y.ndim != 1:
        raise ParameterError(f"y: expected a mono 1-D signal, got shape {y.shape}")
    if not np.issubdtype(y.dtype, np.floating):
        raise ParameterError(f"y: expected a float signal in [-1, 1), got dtype {y.dtype}")
    y = y.astype(np.float64)
    if not np.all(np.isfinite(y)):
        raise ParameterError("y: the signal contains NaN or Inf samples")
    peak = float(np.max(np.abs(y), initial=0.0))
    if peak > MAX_PEAK:  # an internal magnitude overflowed and was named instead
        raise ParameterError(f"y: samples reach {peak:.3g}, far beyond full scale (1.0); scale the signal to its "
                             "real level first")
    return y


#: Scale of the speech-activation prior rates (:func:`speech_prior_rates`). More removes more noise
#: energy but also the weak speech that carries the envelope cues of intelligibility: with the
#: 8 kHz dictionary of three-frame atoms, 0.3 gains 0.1 dB SDR at 0 dB on the NOIZEUS development set
#: and loses 0.009 STOI there; with the 16 kHz dictionary 0.21 beats 0.3 in both at every SNR
#: (docs/enhance.md, "Atoms of three frames").
SPARSITY = 0.21
#: EM iterations per frame of the enhancement. The activations start equal and the speech prior
#: sparsifies them; with frames every quarter window, 15 / 20 / 30 iterations give 6.04 / 6.12 / 6.29 dB
#: SDR at 0 dB on the NOIZEUS development set, 3.34 / 3.38 / 3.47 dB on speech-like noises no setting was
#: chosen on (STOI 0.666 / 0.666 / 0.664) and the same on wideband speech to 0.03 dB; 30 take 12-15 %
#: more time (docs/enhance.md).
EM_ITERATIONS = 20
#: Least gain of the speech mask (-26 dB): no time-frequency bin of the input is removed outright, so
#: the noise left is a quiet copy of the input's instead of isolated tones ("musical noise"), which
#: PESQ marks down; on NOIZEUS it raises PESQ by 0.15-0.18 at every SNR and leaves SDR and STOI
#: unchanged to 0.002 (docs/enhance.md).
MASK_FLOOR = 0.05
#: Frames per STFT chunk when a signal is enhanced in pieces (16 s with the enhancer's 16 ms hop at
#: every shipped framing, 33 s for the noise model's 32 ms; the EM then takes the frames as the noise
#: power tracker releases them). Memory per chunk is about 16 kB per frame at 8 kHz, 32 kB at 16 kHz,
#: more with the resampling of a faster input; the EM runs in blocks of 1024 columns anyway, so
#: larger chunks gain no speed.
CHUNK_FRAMES = 1024


class UnchangedSignalWarning(UserWarning):
    """A signal was returned as it is: too little of it could be judged noise."""


@contextlib.contextmanager
def unchanged_signal_raised():
    """Within it, :class:`UnchangedSignalWarning` is raised instead of warned.

    For applications that keep the input themselves (a copy of the file, the mixture scored as it
    is) rather than the signal returned; other warnings pass as they would.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnchangedSignalWarning)
        yield


def speech_prior_rates(V, noise_level, sparsity):
    """Per-frame rates of the exponential prior on the speech activations.

    ``λ_j = sparsity · ρ_j / (1 − ρ_j)`` with ``ρ_j = min(Σ_f min(n_fj, V_fj) / Σ_f V_fj, 0.9)`` the
    frame's estimated noise share (``n`` the noise level: the enhancer passes each frame's median
    noise magnitude predicted by the noise power tracker; a frame of zeros has share 0), so that
    ``λ_j`` is at most ``9 · sparsity``: frames that the noise explains get a
    strong pull of their speech activations towards 0, frames well above it (clean-ish speech)
    almost none. With unit-sum dictionary columns, the rate is the price of one unit of speech
    magnitude relative to noise magnitude.

    Parameters
    ----------
    V : ndarray, shape (n_bins, n_frames)
        Magnitudes, finite and at least 0.
    noise_level : ndarray, shape (n_bins, n_frames) or (n_bins,)
        Each frame's noise magnitude per bin, or one for all frames; finite and at least 0.
    sparsity : float
        At least 0.

    Returns
    -------
    ndarray, shape (n_frames,)

    Raises
    ------
    ParameterError
        Shapes that do not match, values that are not finite magnitudes, a sparsity that is not a finite number >= 0.
    """
    V, level = np.asarray(V), np.asarray(noise_level)
    if V.ndim != 2:
        raise ParameterError(f"V: expected a (n_bins, n_frames) matrix, got shape {V.shape}")
    if level.shape not in (V.shape, V.shape[:1]):
        raise ParameterError(f"noise_level: shape {level.shape}; expected {V.shape} or ({V.shape[0]},), as V")
    for name, values in (("V", V), ("noise_level", level)):
        if values.dtype.kind not in "iuf" or not np.all(np.isfinite(values)) or (values.size and values.min() < 0):
            raise ParameterError(f"{name}: expected finite real magnitudes of at least 0")
    _check_sparsity(sparsity)
    return _prior_rates(V, level, sparsity)


def _prior_rates(V, noise_level, sparsity):
    """:func:`speech_prior_rates` of checked arguments."""
    total = V.sum(axis=0)
    level = noise_level if np.ndim(noise_level) == 2 else np.asarray(noise_level)[:, None]
    share = np.minimum(level, V).sum(axis=0) / np.maximum(total, np.finfo(np.float64).tiny)
    share = np.clip(share, 0.0, _MAX_NOISE_SHARE)
    return sparsity * share / (1.0 - share)


_MAX_NOISE_SHARE = 0.9


def smooth_speech(speech, noise, before=None, after=None):
    """The speech magnitudes averaged over neighbouring frames in proportion to the noise's share.

    ``S̃_j = S_j + ρ_j / 4 · (S_{j-1} − 2 S_j + S_{j+1})`` in every bin, ``ρ = N / (S + N)``: where
    the noise dominates a bin, a frame's speech estimate is mostly estimation error, nearly
    independent from frame to frame (the noise's periodogram is), while the speech itself changes
    little over one 16 ms hop, so the ``[¼, ½, ¼]`` average of the frame and its neighbours is
    the better estimate; where the speech dominates, the estimate is left as it is, onsets
    included (and so is a bin with neither).

    Parameters
    ----------
    speech, noise : ndarray, shape (n_bins, m)
        Speech and noise magnitudes of consecutive frames.
    before, after : ndarray, shape (n_bins,), optional
        The speech magnitudes of the frames just before and after these (none: the first or last
        frame stands for its missing neighbour).

    Returns
    -------
    ndarray, shape (n_bins, m)
    """
    first = speech[:, 0] if before is None else before
    last = speech[:, -1] if after is None else after
    smoothed = -2.0 * speech
    smoothed[:, 1:] += speech[:, :-1]
    smoothed[:, 0] += first
    smoothed[:, :-1] += speech[:, 1:]
    smoothed[:, -1] += last
    share = np.add(speech, noise)
    np.divide(noise, share, out=share, where=share > 0)  # a bin with neither keeps its 0
    smoothed *= share
    smoothed *= 0.25
    smoothed += speech
    return smoothed


def _smoothed(pieces):
    """``(S, speech, noise)`` pieces of consecutive frames, the speech smoothed (:func:`smooth_speech`).

    Each frame waits for the next one: a piece's last frame is released, on its own, before
    the next piece; the signal's last frame comes at the end.
    """
    held, before = None, None
    for S, speech, noise in pieces:
        if held is not None:
            yield held[0], smooth_speech(held[1], held[2], before, speech[:, 0]), held[2]
            before = held[1][:, 0]
        if speech.shape[1] > 1:
            yield S[:, :-1], smooth_speech(speech[:, :-1], noise[:, :-1], before, speech[:, -1]), noise[:, :-1]
            before = speech[:, -2].copy()
        held = (S[:, -1:].copy(), speech[:, -1:].copy(), noise[:, -1:].copy())
    if held is not None:
        yield held[0], smooth_speech(held[1], held[2], before), held[2]


def speech_mask(speech, noise, floor=MASK_FLOOR):
    """The gain ``max(S / (S + N), floor)`` of the speech and noise magnitudes (``S + N = 0``: the floor).

    Parameters
    ----------
    speech, noise : ndarray
        Non-negative magnitudes of one shape.
    floor : float
        The least gain, in (0, 1] (:data:`MASK_FLOOR`).

    Returns
    -------
    ndarray, the shape of ``speech``

    Raises
    ------
    ParameterError
        A ``floor`` that is not a number in (0, 1].
    """
    _check_mask_floor("floor", floor)
    total = speech + noise
    mask = np.divide(speech, total, out=np.zeros_like(speech), where=total > 0)
    return np.maximum(mask, floor, out=mask)


class _Setting(NamedTuple):
    W: np.ndarray          # speech dictionary, (n_bins * (2 * context + 1), rank), unit-sum columns
    mask_atoms: np.ndarray  # (n_bins, rank): the atoms the speech is rebuilt with for the mask, on W's scale
    context: int           # frames on each side of an atom's centre frame
    noise: NoiseModel
    level: float           # mean frame magnitude: sets the least start of a frame's activations


def _separate_frames(V, noise_power, setting, start, *, max_iter, sparsity):
    """Speech activations and noise magnitudes of frames ``start : start + m``.

    ``V`` and ``noise_power`` are ``(n_bins, m + 2 · context)``: the frames with ``setting.context``
    neighbours on each side (:func:`_in_context`). Frames are independent given the fixed
    dictionaries, the tracked noise power and the per-frame prior rates, so the frames are split
    where the noise model changes segment and each part is fitted with its segment's noise
    dictionary. The noise part of each frame also holds a known component, the mean noise
    magnitude predicted for that frame by the noise power tracker (:mod:`sepsti.noise_power`);
    the dictionaries explain what it does not. With atoms of several frames, each frame is
    fitted stacked with its neighbours (:func:`sepsti.features.in_context`), each noise atom and
    the predicted noise repeated likewise, and keeps the centre frame's part of the noise.
    Every activation of a frame starts equal, together explaining the frame's magnitude beyond
    the predicted noise (at least a thousandth of the mean frame's): a start that depends on
    the frame alone, so pieces of a long signal start where the whole would.
    """
    n_bins, frames, rank = V.shape[0], 2 * setting.context + 1, setting.W.shape[1]
    centre = slice(setting.context * n_bins, (setting.context + 1) * n_bins)
    end = V.shape[1] - 2 * setting.context
    activations, noise = np.empty((rank, end)), np.empty((n_bins, end))
    position = 0
    while position < end:
        segment = setting.noise.segment(start + position)
        last = segment == len(setting.noise.floor) - 1
        stop = end if last else min(end, (segment + 1) * setting.noise.segment_frames - start)
        around = slice(position, stop + 2 * setting.context)  # the part's frames and their neighbours
        part = features.in_context(V[:, around], setting.context)
        known = features.in_context(expected_magnitude(noise_power[:, around]).astype(V.dtype), setting.context)
        W_all = np.concatenate([setting.W, np.tile(setting.noise.W_noise[segment], (frames, 1)) / frames], axis=1)
        size = W_all.shape[1]
        unexplained = part.sum(axis=0, dtype=np.float64) - known.sum(axis=0, dtype=np.float64)
        H = np.repeat(np.maximum(unexplained, 1e-3 * frames * setting.level)[None, :] / size, size, axis=0)
        rates = np.zeros((size, part.shape[1]))
        if sparsity > 0:
            # the noise's level in each frame: the median magnitude of the noise predicted for it
            level = features.in_context(median_magnitude(noise_power[:, around]), setting.context)
            rates[:rank] = _prior_rates(part, level, sparsity)[None, :]
        result = poisson_nmf_em(part, W_all, H, update_W=False, prior_rate_H=rates, max_iter=max_iter, tol=0,
                                track_log_likelihood=False, background=known)
        activations[:, position:stop] = result.H[:rank]
        noise[:, position:stop] = result.W[centre, rank:] @ result.H[rank:] + known[centre]
        position = stop
    return activations, noise


def _in_context(pieces, context, dtype=np.float64):
    """``(S, noise_power)`` pieces of consecutive frames, with ``context`` neighbouring frames on each side.

    Yields ``(S, V, noise_power)``: a piece's complex frames (of each channel), and the magnitudes
    (:func:`sepsti.features.channel_magnitude`, in ``dtype``) and
    noise power of those frames with the ``context`` frames before and after them (the signal's first and
    last frames standing for the missing ones at its ends). Each frame waits for the ``context``
    frames after it.
    """
    if context == 0:
        for S, power in pieces:
            yield S, features.channel_magnitude(S).astype(dtype, copy=False), power
        return
    held = None  # the frames not yet released, the magnitudes and powers with their context before
    for S, power in pieces:
        V = features.channel_magnitude(S).astype(dtype, copy=False)
        if held is None:
            edge = ((0, 0), (context, 0))
            held = (S, np.pad(V, edge, mode="edge"), np.pad(power, edge, mode="edge"))
        else:
            held = tuple(np.concatenate([old, new], axis=1) for old, new in zip(held, (S, V, power)))
        ready = held[0].shape[1] - context
        if ready > 0:
            yield held[0][:, :ready], held[1][:, :ready + 2 * context], held[2][:, :ready + 2 * context]
            held = tuple(part[:, ready:].copy() for part in held)  # not views: the piece can go
    if held is not None and held[0].shape[1]:
        edge = ((0, 0), (0, context))
        yield held[0], np.pad(held[1], edge, mode="edge"), np.pad(held[2], edge, mode="edge")


def separate(V, W, *, noise_rank=5, max_iter=EM_ITERATIONS, sparsity=SPARSITY, noise=None, seed=0,
             framing=features.NARROWBAND, mask_atoms=None):
    """Split noisy magnitudes into speech and noise parts with a fixed speech dictionary.

    The noise model follows the noise through the recording (:func:`sepsti.noise_model.track_noise`), unless
    one is given (:func:`sepsti.noise_model.learn_noise` on a noise-only recording); its dictionaries are held
    fixed with the speech dictionary, each frame's noise part also holds the mean noise
    magnitude predicted for it (:func:`sepsti.noise_power.track_noise_power`), and the
    activations are learned by MAP-EM on all frames, with exponential priors on the speech
    activations whose rates follow each frame's estimated noise share
    (:func:`speech_prior_rates`).

    It takes ``V`` as it is: unlike :func:`denoise`, it has no short-signal guard, and a ``V`` of fewer than
    :func:`sepsti.noise_model.min_frames` frames is separated all the same if two frames per noise atom are
    other than digital silence, its quietest frames (speech, in a short piece of continuous speech) learned as
    noise; with fewer, and no ``noise``, it is refused (too little sound). :func:`denoise` gives either back
    unchanged.

    Parameters
    ----------
    V : ndarray, shape (n_bins, n_frames)
        Noisy magnitudes (real, finite, at least 0; at least one frame), ``n_bins`` those of ``framing``.
    W : ndarray, shape (n_bins · (2 · context + 1), rank)
        Speech dictionary (fixed), columns summing to 1; with atoms of several frames, the frames
        of ``V`` are those atoms' frames (a quarter window apart).
    noise_rank : int
        Columns of each noise dictionary learned on ``V`` (ignored with ``noise``).
    max_iter : int
        EM iterations (run exactly).
    sparsity : float
        Scale of the speech-activation prior rates (0: maximum likelihood, the plain method
        with fixed noise dictionaries).
    noise : NoiseModel, optional
        A noise model learned elsewhere (:func:`sepsti.noise_model.learn_noise`, on magnitudes of the same framing).
    seed : int
        Seed of the noise dictionaries' initialisations, in [0, 2**32) (checked with ``noise`` too).
    framing : sepsti.features.Framing
        The STFT of ``V`` (:func:`sepsti.noise_model.track_noise` counts its durations in its frames).
    mask_atoms : ndarray, shape (n_bins, rank), optional
        The atoms the speech part is rebuilt with, on the scale of ``W``'s columns
        (:attr:`sepsti.dictionary.Dictionary.mask_atoms`; default the atoms' centre frame).

    Returns
    -------
    speech, noise : ndarray, shape (n_bins, n_frames)
        ``W_sp H_sp`` (``W_sp`` the mask atoms), and ``W_no H_no`` plus the predicted noise magnitude.

    Raises
    ------
    ParameterError
        Magnitudes, a dictionary or options as :func:`denoise` refuses them, a ``V`` of other bins than
        ``framing``'s; without ``noise``, if too little of ``V`` is other than digital silence to learn a noise
        model from (:func:`sepsti.noise_model.track_noise`).
    """
    W, mask_atoms = _with_mask_atoms(_validate_dictionary(W, framing), mask_atoms, framing)
    _validate_options(noise_rank, max_iter, sparsity, seed, framing)
    V = np.asarray(V)
    if V.dtype.kind not in "iuf" or V.ndim != 2 or V.shape[0] != framing.n_bins or V.shape[1] < 1:
        raise ParameterError(f"V: expected real magnitudes of shape ({framing.n_bins}, n_frames), the bins of "
                             f"n_fft={framing.n_fft}, with a frame at least; got {V.dtype} of shape {V.shape}")
    V = np.asarray(V, dtype=np.float64)
    if noise is None:
        noise, _ = track_noise(lambda: iter((V,)), noise_rank, seed=seed, framing=framing,
                               speech=_centre_frame(W, framing))
        if noise is None:
            raise ParameterError(f"V: {too_little_sound(noise_rank, framing)}; give a noise model (learn_noise)")
    else:
        noise = validate_noise_model(noise, framing)
    level = max(float(V.sum(axis=0).mean()), np.finfo(np.float64).tiny)
    noise_power = track_noise_power(V, _initial_noise_power(noise), framing)
    setting = _Setting(W, mask_atoms, _context(W, framing), noise, level)
    parts, start = [], 0
    for _, part, power in _in_context(iter(((V, noise_power),)), setting.context):
        parts.append(_separate_frames(part, power, setting, start, max_iter=max_iter, sparsity=sparsity))
        start += parts[-1][0].shape[1]
    activations, noise_part = zip(*parts)
    return mask_atoms @ np.concatenate(activations, axis=1), np.concatenate(noise_part, axis=1)


def _initial_noise_power(noise):
    """The noise power tracker's start: the first segment's floor (median magnitudes) as a power."""
    return RAYLEIGH_POWER * np.square(noise.floor[0].astype(np.float64))


def _with_noise_power(spectra, tracker):
    """The complex spectra re-cut into the pieces whose noise power ``tracker`` has estimated.

    Yields
    ------
    S : ndarray, shape (n_bins, m) or (n_bins, m, channels)
    noise_power : ndarray, shape (n_bins, m)
    """
    held = None
    for S in spectra:
        estimates = tracker.push(features.channel_magnitude(S))
        held = S if held is None else np.concatenate([held, S], axis=1)
        del S  # one copy of the frames at a time
        if estimates.shape[1]:
            yield held[:, :estimates.shape[1]], estimates
            held = held[:, estimates.shape[1]:].copy()
    estimates = tracker.finish()
    if estimates.shape[1]:
        yield held, estimates


def _check_sparsity(sparsity):
    if isinstance(sparsity, (bool, np.bool_)) or not (
            isinstance(sparsity, (int, float, np.integer, np.floating)) and np.isfinite(sparsity) and sparsity >= 0):
        raise ParameterError(f"sparsity: expected a finite number >= 0, got {sparsity!r}")


def _validate_options(noise_rank, max_iter, sparsity, seed, framing, chunk_frames=CHUNK_FRAMES, mask_floor=MASK_FLOOR):
    if isinstance(noise_rank, (bool, np.bool_)) or not isinstance(noise_rank, (int, np.integer)) or noise_rank < 1:
        raise ParameterError(f"noise_rank: expected a positive integer, got {noise_rank!r}")
    if noise_rank > framing.n_bins:
        raise ParameterError(f"noise_rank={noise_rank}: at most {framing.n_bins} (the number of frequency bins)")
    if isinstance(max_iter, (bool, np.bool_)) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ParameterError(f"max_iter: expected a positive integer, got {max_iter!r}")
    _check_sparsity(sparsity)
    if integer_at_least("seed", seed, 0) >= KEY_LIMIT:
        raise ParameterError(f"seed={seed!r} must be below 2**32")
    if isinstance(chunk_frames, (bool, np.bool_)) or not isinstance(chunk_frames, (int, np.integer)) \
            or chunk_frames < 1:
        raise ParameterError(f"chunk_frames: expected a positive integer, got {chunk_frames!r}")
    _check_mask_floor("mask_floor", mask_floor)


def _check_mask_floor(name, floor):
    """Refuse a mask's least gain that is not a number in (0, 1] (a bool included)."""
    if isinstance(floor, (bool, np.bool_)) or not (
            isinstance(floor, (int, float, np.integer, np.floating)) and 0 < floor <= 1):
        raise ParameterError(f"{name}: expected a number in (0, 1], got {floor!r}")


def _checked_blocks(blocks, num_samples):
    """``blocks`` with each pass checked: ``num_samples`` samples in all, in blocks of the first block's channels."""
    passes = 0

    def checked():
        nonlocal passes
        passes += 1
        count, channels = 0, None
        for block in blocks():
            block = np.asarray(block)
            check_layout(block.shape, num_samples, name="blocks")
            if channels is None:
                channels = block.shape[1:]
            elif block.shape[1:] != channels:
                first = "(n,)" if not channels else f"(n, {channels[0]})"
                raise ParameterError(f"blocks: a block of shape {block.shape} after blocks of shape {first}; "
                                     "every block must have the same channels")
            count += len(block)
            yield block
        if count != num_samples:
            remedy = ("num_samples must be the length of the signal" if passes == 1 else
                      "blocks() must return a new iterator over the same samples at each call")
            raise ParameterError(f"blocks: {count} samples in pass {passes}, but num_samples={num_samples}; {remedy}")
    return checked


def _least_length(noise_rank, framing):
    """The fewest frames, and seconds, a signal's own noise is learned from, in words."""
    return (f"at least {min_frames(noise_rank, framing)}, {shortest_seconds(noise_rank, framing):.2f} s, at a noise "
            f"rank of {noise_rank}")


def _read_only(array):
    """A view of ``array`` that cannot be written to."""
    view = array.view()
    view.flags.writeable = False
    return view


def _reported(corrections, correction_fn):
    """``(S, corrected)`` of each ``(S, mask, corrected)``, each handed to ``correction_fn`` first (if given)."""
    for S, mask, corrected in corrections:
        if correction_fn is not None:
            correction_fn(_read_only(mask), _read_only(corrected), _read_only(features.channel_magnitude(S)))
        yield S, corrected


def denoise_blocks(blocks, num_samples, W, *, noise_rank=5, max_iter=EM_ITERATIONS, sparsity=SPARSITY, noise=None,
                   seed=0, chunk_frames=CHUNK_FRAMES, framing=features.NARROWBAND, mask_fn=None, mask_floor=MASK_FLOOR,
                   mask_atoms=None, band_gains=None, activations_fn=None, correction_fn=None):
    """Enhance a signal given block by block; memory does not grow with its length.

    The method is :func:`denoise`'s, computed in passes over the signal: mains hum
    (:func:`sepsti.hum.find_hum`, one pass, and where found :func:`sepsti.hum.measure_hum`, one more;
    it is subtracted in every later pass), the noise model
    (:func:`sepsti.noise_model.track_noise` in the dictionary's frames, two passes; one pass for the frames' scale
    with ``noise`` given), then, in frames every quarter window, the tracked noise power, MAP-EM,
    the speech smoothing and the mask in pieces of about ``chunk_frames`` frames (each piece
    waits for its noise power's lookahead, :class:`NoisePowerTracker`, for the frames after it that
    atoms of several frames span, for one frame more, :func:`smooth_speech`, and, with ``band_gains``, for
    :data:`sepsti.band_gains.CONTEXT` more).
    Frames are independent once the dictionaries, the tracked noise power and the prior rates
    are fixed, the tracker's result does not depend on how the frames are cut, and each frame's
    activations start from the frame alone, so the result does not depend on
    ``chunk_frames`` beyond rounding.

    Parameters
    ----------
    blocks : callable
        ``blocks()`` returns a new iterator over the signal's consecutive pieces (float arrays in
        [-1, 1) at ``framing.sample_rate``, shape ``(n,)``, or ``(n, channels)`` for a signal of several
        channels); it is called up to five times. The channels are modelled as one, by their
        magnitudes' power mean (:func:`sepsti.features.channel_magnitude`), and each is given the
        same mask: their balance and phases are kept.
    num_samples : int
        Length of the signal (at least 0): the samples (of each channel) ``blocks()`` gives in every pass.
    W : ndarray, shape (n_bins · (2 · context + 1), rank)
        Speech dictionary (:attr:`sepsti.dictionary.Dictionary.W`).
    noise_rank, max_iter, sparsity, noise, seed, framing, mask_floor, mask_atoms, band_gains
        As :func:`denoise`.
    chunk_frames : int
        STFT frames per piece (:data:`CHUNK_FRAMES`).
    mask_fn : callable, optional
        Called as ``mask_fn(speech, noise, mask_floor)`` with each piece's speech (smoothed) and noise
        magnitudes, shape (n_bins, m), in frames every quarter window, before that piece's
        samples are yielded (the upper-band extension of :mod:`sepsti.bandwidth` takes its gains
        from them, at least the mask's floor); a signal too short to be enhanced gives its magnitudes as speech and zero
        noise (gain 1). The arrays are the enhancer's own, read-only: copy them to change them.
    correction_fn : callable, optional
        With ``band_gains``, called as ``correction_fn(mask, corrected, magnitude)`` with each piece's mask before
        and after the correction and the mixture's magnitudes, shape (n_bins, m), in order, before that piece's
        samples are yielded (the upper band follows the correction's lowering of the top band). Read-only, like
        ``mask_fn``'s.
    activations_fn : callable, optional
        Called as ``activations_fn(H, noise, S)`` with each piece's speech activations, shape (rank, m), noise
        magnitudes, shape (n_bins, m), as fitted (before the speech is rebuilt and smoothed), and the STFT the
        mask is applied to (its hum removed; shape (n_bins, m), or (n_bins, m, channels)), in order: what
        :func:`sepsti.mask_atoms.record_separation` records. Read-only, like ``mask_fn``'s; not called for a
        signal too short to be enhanced.

    Warns
    -----
    UnchangedSignalWarning
        Without ``noise``, when the signal is too short to learn its noise from (fewer than
        :func:`sepsti.noise_model.min_frames` frames), or too little of it is other than digital silence
        (:func:`sepsti.noise_model.track_noise`; all of it included); the signal is then yielded as it is.

    Yields
    ------
    ndarray
        Consecutive pieces of the speech estimate, ``num_samples`` samples in all (of each channel).

    Raises
    ------
    ParameterError
        Bad options (a noise rank above the frequency bins, say). At the end of a pass over ``blocks()`` that gave
        other than ``num_samples`` samples (a second pass that gives none: an iterator that is not new at each
        call); at a block of another shape than ``(n,)`` or ``(n, channels)``, or of other channels than the first.
    """
    W = _validate_dictionary(W, framing)
    _validate_options(noise_rank, max_iter, sparsity, seed, framing, chunk_frames, mask_floor)
    noise_rank, max_iter, chunk_frames = int(noise_rank), int(max_iter), int(chunk_frames)
    num_samples = integer_at_least("num_samples", num_samples, 0)
    if noise is not None:
        noise = validate_noise_model(noise, framing)
    tiny = np.finfo(np.float64).tiny
    W, mask_atoms = _with_mask_atoms(W, mask_atoms, framing)
    if band_gains is not None:
        from sepsti.band_gains import validate_band_gains

        band_gains = validate_band_gains(band_gains)

    analysis = features.enhancement_framing(framing)  # the dictionary's window, a quarter-window hop

    def magnitudes(stft_framing=framing):
        return (features.channel_magnitude(S)
                for S in features.stft_chunks(blocks(), chunk_frames, framing=stft_framing))

    def unchanged():
        # too little to tell noise from speech: the signal is left as it is (its upper band too)
        if mask_fn is not None:
            for V in magnitudes(analysis):
                mask_fn(V, np.zeros_like(V), mask_floor)
        for block in source():
            yield np.asarray(block, dtype=np.float64)

    source = _checked_blocks(blocks, num_samples)
    frames = features.num_frames(num_samples, framing=framing)
    if noise is None and frames < min_frames(noise_rank, framing):
        warnings.warn(f"too short to learn its noise from ({frames} frames, {num_samples / framing.sample_rate:.2f} s; "
                      f"{_least_length(noise_rank, framing)})", UnchangedSignalWarning, stacklevel=2)
        yield from unchanged()
        return
    # mains hum is subtracted as sinusoids before anything else, where the mask would take the voice with it;
    # at a floor of one nothing is lowered, the hum included
    blocks = hum_free(source, framing.sample_rate) if mask_floor < 1.0 else source
    # the noise model is learned on the dictionary's own frames (frames twice as dense would double its
    # time for 0.06 dB at 0 dB) and serves the enhancer's: its segments span the same seconds
    if noise is None:
        noise, energies = track_noise(magnitudes, noise_rank, seed=seed, framing=framing,
                                      speech=_centre_frame(W, framing))
        if noise is None:  # digital silence throughout included
            warnings.warn(too_little_sound(noise_rank, framing), UnchangedSignalWarning, stacklevel=2)
            yield from unchanged()
            return
    else:
        energies = np.concatenate([V.sum(axis=0) for V in magnitudes()])
        if not np.any(energies):  # digital silence throughout: nothing to lower
            for block in blocks():
                yield np.zeros(np.shape(block))
            return
    noise = noise._replace(segment_frames=noise.segment_frames * (framing.hop_length // analysis.hop_length))
    setting = _Setting(W, mask_atoms, _context(W, framing), noise, max(float(energies.mean()), tiny))

    def separated():
        start = 0
        tracker = NoisePowerTracker(_initial_noise_power(noise), analysis)
        spectra = _with_noise_power(features.stft_chunks(blocks(), chunk_frames, framing=analysis), tracker)
        # single precision: magnitudes of 16-bit audio need no more, and the EM runs twice as fast
        for S, V, noise_power in _in_context(spectra, setting.context, np.float32):
            activations, noise_part = _separate_frames(V, noise_power, setting, start, max_iter=max_iter,
                                                       sparsity=sparsity)
            if activations_fn is not None:
                activations_fn(_read_only(activations), _read_only(noise_part), _read_only(S))
            start += S.shape[1]
            yield S, setting.mask_atoms @ activations, noise_part

    def masked():
        for S, speech, noise_part in _smoothed(separated()):
            if mask_fn is not None:
                mask_fn(_read_only(speech), _read_only(noise_part), mask_floor)
            yield S, speech, noise_part, speech_mask(speech, noise_part, mask_floor)

    # activations, smoothing, mask and resynthesis, piece by piece
    if band_gains is None:
        masks = ((S, mask) for S, _, _, mask in masked())
    else:
        from sepsti.band_gains import corrected_masks

        masks = _reported(corrected_masks(((S, features.channel_magnitude(S), speech, noise_part, mask)
                                           for S, speech, noise_part, mask in masked()), band_gains, analysis,
                                          mask_floor), correction_fn)
    synthesis = features.OverlapAdd(analysis)
    produced = 0
    for S, mask in masks:
        samples = synthesis.push(mask.reshape(*mask.shape, *[1] * (S.ndim - 2)) * S)[:num_samples - produced]
        produced += len(samples)
        if len(samples):
            yield samples
    rest = synthesis.finish(num_samples)[:num_samples - produced]
    if len(rest):
        yield rest


def denoise(y, W, *, noise_rank=5, max_iter=EM_ITERATIONS, sparsity=SPARSITY, noise=None, seed=0,
            chunk_frames=CHUNK_FRAMES, framing=features.NARROWBAND, mask_floor=MASK_FLOOR, mask_atoms=None,
            band_gains=None):
    """Enhance a noisy speech signal.

    Parameters
    ----------
    y : ndarray, shape (n_samples,)
        Noisy signal in [-1, 1) at ``framing.sample_rate``.
    W : ndarray, shape (n_bins · (2 · context + 1), rank)
        Speech dictionary (fixed during enhancement; :attr:`sepsti.dictionary.Dictionary.W`).
    noise_rank : int
        Rank of the noise dictionaries learned on the signal itself (at most the number of
        frequency bins, 257 at 8 kHz). A signal of fewer than :func:`sepsti.noise_model.min_frames` frames is
        returned unchanged, with an :class:`UnchangedSignalWarning`: too little of it could be judged noise; so
        is one with too few frames other than digital silence (an all-zero one included).
    max_iter : int
        EM iterations.
    sparsity : float
        Scale of the exponential prior rates on the speech activations (see :func:`separate`);
        0 gives the maximum-likelihood fit.
    noise : NoiseModel, optional
        A noise model learned from a noise-only recording (:func:`sepsti.noise_model.learn_noise`) instead of the
        one tracked on the signal (:func:`sepsti.noise_model.track_noise`).
    seed : int
        Seed of the noise dictionaries' initialisations, in [0, 2**32) (checked with ``noise`` too); the output is
        deterministic for a seed.
    chunk_frames : int
        Frames per piece of EM (:func:`denoise_blocks`); the result does not depend on it
        beyond rounding.
    framing : sepsti.features.Framing
        The dictionary's STFT (:attr:`sepsti.dictionary.Dictionary.framing`): the noise model is
        learned on its frames, and the signal is enhanced in frames of its window every quarter
        window (:func:`sepsti.features.enhancement_framing`).
    mask_floor : float
        The least gain of the mask, in (0, 1] (:data:`MASK_FLOOR`; 1 returns the input).
    mask_atoms : ndarray, shape (n_bins, rank), optional
        The atoms the speech is rebuilt with for the mask, on the scale of ``W``'s columns
        (:attr:`sepsti.dictionary.Dictionary.mask_atoms`; default the atoms' centre frame).
    band_gains : sepsti.band_gains.BandGains, optional
        The mask's learned band-gain correction (:attr:`sepsti.dictionary.Dictionary.band_gains`; default none).

    Returns
    -------
    ndarray, shape (n_samples,)
        The speech estimate; all-zero input gives all-zero output.

    Raises
    ------
    ParameterError
        A signal that is not 1-D float and finite, a dictionary of the wrong shape, bad options.
    """
    y = _validate_signal(y)
    W = _validate_dictionary(W, framing)
    _validate_options(noise_rank, max_iter, sparsity, seed, framing, chunk_frames, mask_floor)
    pieces = denoise_blocks(lambda: iter((y,)), y.size, W, noise_rank=noise_rank, max_iter=max_iter,
                            sparsity=sparsity, noise=noise, seed=seed, chunk_frames=chunk_frames, framing=framing,
                            mask_floor=mask_floor, mask_atoms=mask_atoms, band_gains=band_gains)
    return np.concatenate(list(pieces))
