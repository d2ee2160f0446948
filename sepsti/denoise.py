"""Speech enhancement by Poisson NMF with a fixed speech dictionary (ICASSP'16 §4.2, eq. 14).

Conventions
-----------
Magnitudes are ``(n_bins, n_frames)`` STFT magnitudes from :mod:`sepsti.features` (on the int16
amplitude scale). A speech dictionary ``W`` is ``(n_bins, rank)``, non-negative. Signals are float
arrays at the rate of the dictionary's framing (``framing=``, :class:`sepsti.features.Framing`;
default the 8 kHz :data:`sepsti.features.NARROWBAND`: 257 bins).

The noisy magnitude is modelled as ``V ≈ W_sp H_sp + W_no H_no`` (Poisson, ICASSP'16 eq. 14)
with exponential priors on the speech activations. The speech dictionary is trained on
clean speech and held fixed. The noise dictionary is learned on the quietest frames of the
noisy signal itself and then held fixed too, so that it cannot absorb speech. All
activations are learned by MAP-EM on the noisy magnitudes; the prior rate of a frame's speech
activations grows with the frame's estimated noise share, so that content the noise
dictionary can explain goes to the noise part, while frames well above the noise floor are
left alone. The speech is rebuilt with the Wiener-style mask ``S / (S + N)`` applied to the
complex noisy STFT.
"""

import functools
from typing import NamedTuple

import numpy as np

from sepsti.core.errors import ParameterError
from sepsti.core.factorization import initialize_nmf, poisson_nmf_em
from sepsti.core.random import stream
from sepsti import features

__all__ = ["CHUNK_FRAMES", "MAX_QUIET_FRAMES", "train_dictionary", "denoise", "denoise_blocks", "separate",
           "quiet_noise_dictionary", "speech_prior_rates", "validate_noise_rank"]


def train_dictionary(X, rank, *, max_iter=200, tol=1e-4, seed=0, prior_rate=0.0, progress=False):
    """Train a speech dictionary by EM on clean magnitudes.

    Parameters
    ----------
    X : ndarray, shape (n_bins, n_frames)
        Clean-speech magnitudes (e.g. :func:`sepsti.features.training_matrix`).
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
    W0, H0 = initialize_nmf(X, rank, stream(seed, 0))
    result = poisson_nmf_em(X, W0, H0, prior_rate_H=prior_rate, max_iter=max_iter, tol=tol,
                            progress=progress, desc=f"train R={rank}")
    W = result.W.astype(np.float64)
    W /= np.maximum(W.sum(axis=0, keepdims=True), np.finfo(np.float64).tiny)
    return W, result


def _validate_dictionary(W, framing):
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] != framing.n_bins or W.shape[1] < 1:
        raise ParameterError(f"W: expected a ({framing.n_bins}, rank) dictionary for n_fft={framing.n_fft}, "
                             f"got shape {W.shape}")
    if not np.all(np.isfinite(W)) or W.min() < 0:
        raise ParameterError("W: the dictionary must be finite and non-negative")
    return W


def _validate_signal(y):
    y = np.asarray(y)
    if y.ndim != 1:
        raise ParameterError(f"y: expected a mono 1-D signal, got shape {y.shape}")
    if not np.issubdtype(y.dtype, np.floating):
        raise ParameterError(f"y: expected a float signal in [-1, 1), got dtype {y.dtype}")
    y = y.astype(np.float64)
    if not np.all(np.isfinite(y)):
        raise ParameterError("y: the signal contains NaN or Inf samples")
    return y


#: Frames per piece when a signal is enhanced in pieces (65 s at 8 kHz): a file of up to this
#: many frames is one piece; memory per piece is about 16 kB per frame.
CHUNK_FRAMES = 2048
#: Most quiet frames the noise dictionary is learned on (2.2 min at 8 kHz, the quietest 20 % of
#: an 11-minute file); beyond that, frames spread evenly over the quiet set, by loudness rank.
MAX_QUIET_FRAMES = 4096


def _quiet_frames(energies, noise_rank, quiet_fraction):
    """Indices of the quiet frames, quietest first (a spread subset when there are too many)."""
    n_frames = len(energies)
    count = min(n_frames, max(2 * noise_rank, int(np.ceil(quiet_fraction * n_frames))))
    quiet = np.argsort(energies, kind="stable")[:count]
    if count > MAX_QUIET_FRAMES:
        quiet = quiet[np.unique(np.linspace(0, count - 1, MAX_QUIET_FRAMES).round().astype(np.int64))]
    return quiet


def _fit_noise(Vq, noise_rank, rng, offset, max_iter):
    """Noise dictionary and floor from the quiet frames' magnitudes ``Vq``."""
    noise_floor = Vq.mean(axis=1)
    # a small offset keeps bins that are exactly zero in the quiet frames learnable
    Vq = Vq + offset
    W0, H0 = initialize_nmf(Vq, noise_rank, rng)
    result = poisson_nmf_em(Vq, W0, H0, max_iter=max_iter, tol=0)
    W_noise = result.W / result.W.sum(axis=0, keepdims=True)
    return W_noise, noise_floor


def _offset(mean_magnitude):
    return 1e-3 * max(float(mean_magnitude), np.finfo(np.float64).tiny)


def quiet_noise_dictionary(V, noise_rank, rng, *, quiet_fraction=0.2, max_iter=50):
    """A noise dictionary learned on the quietest frames of a noisy spectrogram.

    Speech is absent or weak in the quietest frames (pauses, leading and trailing silence):
    a rank-``noise_rank`` Poisson NMF of those frames gives noise spectra only.

    Parameters
    ----------
    V : ndarray, shape (n_bins, n_frames)
        Noisy magnitudes.
    noise_rank : int
    rng : numpy.random.Generator
    quiet_fraction : float
        Share of the frames, lowest total magnitude first (at least ``2 * noise_rank`` frames;
        at most :data:`MAX_QUIET_FRAMES`, spread over that share).
    max_iter : int
        EM iterations.

    Returns
    -------
    W_noise : ndarray, shape (n_bins, noise_rank)
        Columns summing to 1.
    noise_floor : ndarray, shape (n_bins,)
        Mean magnitude of the quiet frames, per bin.
    """
    quiet = _quiet_frames(V.sum(axis=0), noise_rank, quiet_fraction)
    return _fit_noise(V[:, quiet], noise_rank, rng, _offset(V.mean()), max_iter)


def speech_prior_rates(V, noise_floor, sparsity):
    """Per-frame rates of the exponential prior on the speech activations.

    ``λ_j = sparsity · ρ_j / (1 − ρ_j)`` with ``ρ_j = Σ_f min(n_f, V_fj) / Σ_f V_fj`` the
    frame's estimated noise share (``n`` the quiet-frame noise floor): frames that the noise
    floor explains get a strong pull of their speech activations towards 0, frames well above
    it (clean-ish speech) almost none. With unit-sum dictionary columns, the rate is the
    price of one unit of speech magnitude relative to noise magnitude.

    Returns
    -------
    ndarray, shape (n_frames,)
    """
    total = V.sum(axis=0)
    share = np.minimum(noise_floor[:, None], V).sum(axis=0) / np.maximum(total, np.finfo(np.float64).tiny)
    share = np.clip(share, 0.0, _MAX_NOISE_SHARE)
    return sparsity * share / (1.0 - share)


_MAX_NOISE_SHARE = 0.9


def _initial_activations(seed, shape, start, stop):
    """Columns ``start:stop`` of ``stream(seed, 2).uniform(0.5, 1.5, shape)``, drawn on their own.

    Each row's stretch is reached by advancing the generator (one 64-bit draw per value),
    so a piece of a long signal starts from the values the whole would.
    """
    rows, n = shape
    base = stream(seed, 2).bit_generator.state
    out = np.empty((rows, stop - start))
    for row in range(rows):
        bits = np.random.PCG64()
        bits.state = base
        bits.advance(row * n + start)
        out[row] = np.random.Generator(bits).uniform(0.5, 1.5, stop - start)
    return out


class _NoiseModel(NamedTuple):
    W_all: np.ndarray      # speech dictionary then noise dictionary, (n_bins, rank + noise_rank)
    rank: int              # speech atoms
    noise_floor: np.ndarray
    level: float           # mean frame magnitude: the scale of the activations' start
    n_frames: int


def _separate_frames(V, model, start, *, max_iter, sparsity, seed):
    """Speech and noise magnitudes of frames ``start : start + V.shape[1]`` (frames are independent
    given the fixed dictionaries and the per-frame prior rates)."""
    rank, size = model.rank, model.W_all.shape[1]
    stop = start + V.shape[1]
    H = model.level / size * _initial_activations(seed, (size, model.n_frames), start, stop)
    rates = np.zeros((size, V.shape[1]))
    if sparsity > 0:
        rates[:rank] = speech_prior_rates(V, model.noise_floor, sparsity)[None, :]
    result = poisson_nmf_em(V, model.W_all, H, update_W=False, prior_rate_H=rates, max_iter=max_iter, tol=0)
    speech = result.W[:, :rank] @ result.H[:rank]
    noise = result.W[:, rank:] @ result.H[rank:]
    return speech, noise


def separate(V, W, *, noise_rank=5, max_iter=100, sparsity=0.6, quiet_fraction=0.2, seed=0):
    """Split noisy magnitudes into speech and noise parts with a fixed speech dictionary.

    The noise dictionary is learned on the quietest frames (:func:`quiet_noise_dictionary`)
    and then held fixed with the speech dictionary; the activations of both are learned by
    MAP-EM on all frames, with exponential priors on the speech activations whose rates
    follow each frame's estimated noise share (:func:`speech_prior_rates`).

    Parameters
    ----------
    V : ndarray, shape (n_bins, n_frames)
        Noisy magnitudes.
    W : ndarray, shape (n_bins, rank)
        Speech dictionary (fixed), columns summing to 1.
    noise_rank : int
        Columns of the noise dictionary.
    max_iter : int
        EM iterations (run exactly).
    sparsity : float
        Scale of the speech-activation prior rates (0: maximum likelihood, the plain method
        with a fixed quiet-frame noise dictionary).
    quiet_fraction : float
        Share of frames used to learn the noise dictionary and noise floor.
    seed : int
        Seed of the initialisations.

    Returns
    -------
    speech, noise : ndarray, shape (n_bins, n_frames)
        ``W_sp H_sp`` and ``W_no H_no``.
    """
    W_noise, noise_floor = quiet_noise_dictionary(V, noise_rank, stream(seed, 1), quiet_fraction=quiet_fraction)
    level = max(float(V.sum(axis=0).mean()), np.finfo(np.float64).tiny)
    model = _NoiseModel(np.concatenate([W, W_noise], axis=1), W.shape[1], noise_floor, level, V.shape[1])
    return _separate_frames(V, model, 0, max_iter=max_iter, sparsity=sparsity, seed=seed)


def _validate_options(noise_rank, max_iter, sparsity, chunk_frames, framing):
    if isinstance(noise_rank, (bool, np.bool_)) or not isinstance(noise_rank, (int, np.integer)) or noise_rank < 1:
        raise ParameterError(f"noise_rank: expected a positive integer, got {noise_rank!r}")
    if noise_rank > framing.n_bins:
        raise ParameterError(f"noise_rank={noise_rank}: at most {framing.n_bins} (the number of frequency bins)")
    if isinstance(max_iter, (bool, np.bool_)) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ParameterError(f"max_iter: expected a positive integer, got {max_iter!r}")
    if not (isinstance(sparsity, (int, float, np.integer, np.floating)) and np.isfinite(sparsity) and sparsity >= 0):
        raise ParameterError(f"sparsity: expected a finite number >= 0, got {sparsity!r}")
    if isinstance(chunk_frames, (bool, np.bool_)) or not isinstance(chunk_frames, (int, np.integer)) \
            or chunk_frames < 1:
        raise ParameterError(f"chunk_frames: expected a positive integer, got {chunk_frames!r}")


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


def denoise_blocks(blocks, num_samples, W, *, noise_rank=5, max_iter=100, sparsity=0.6, seed=0,
                   chunk_frames=CHUNK_FRAMES, framing=features.NARROWBAND, mask_fn=None):
    """Enhance a signal given block by block; memory does not grow with its length.

    The method is :func:`denoise`'s, computed in three passes over the signal: the frames'
    total magnitudes (to find the quiet frames and the activations' scale), the quiet
    frames' spectra (noise dictionary and floor), then MAP-EM and the mask in pieces of
    ``chunk_frames`` frames. Frames are independent once the dictionaries and the prior rates
    are fixed, and each piece starts from the activations the whole signal would, so the
    result does not depend on ``chunk_frames`` beyond rounding.

    Parameters
    ----------
    blocks : callable
        ``blocks()`` returns a new iterator over the signal's consecutive pieces (1-D float
        arrays in [-1, 1) at ``framing.sample_rate``); it is called three times.
    num_samples : int
        Length of the signal.
    W : ndarray, shape (n_bins, rank)
        Speech dictionary.
    noise_rank, max_iter, sparsity, seed, framing
        As :func:`denoise`.
    chunk_frames : int
        STFT frames per piece (:data:`CHUNK_FRAMES`).
    mask_fn : callable, optional
        Called as ``mask_fn(speech, noise)`` with each piece's speech and noise magnitudes,
        shape (n_bins, m), before that piece's samples are yielded (the upper-band extension of
        :mod:`sepsti.bandwidth` takes its gains from them).

    Yields
    ------
    ndarray
        Consecutive pieces of the speech estimate, ``num_samples`` samples in all.

    Raises
    ------
    ParameterError
        Bad options (a noise rank above the frequency bins, say).
    """
    W = _validate_dictionary(W, framing)
    _validate_options(noise_rank, max_iter, sparsity, chunk_frames, framing)
    noise_rank, max_iter, chunk_frames = int(noise_rank), int(max_iter), int(chunk_frames)
    num_samples = int(num_samples)
    tiny = np.finfo(np.float64).tiny
    W = W / np.maximum(W.sum(axis=0, keepdims=True), tiny)

    # pass 1: each frame's total magnitude (8 bytes per frame)
    stft_chunks = functools.partial(features.stft_chunks, chunk_frames=chunk_frames, framing=framing)
    energies = np.concatenate([np.abs(S).sum(axis=0) for S in stft_chunks(blocks())])
    n_frames = len(energies)
    if not np.any(energies):
        for start in range(0, num_samples, chunk_frames * framing.hop_length):
            yield np.zeros(min(chunk_frames * framing.hop_length, num_samples - start))
        return

    # pass 2: the quiet frames, in the order of their loudness
    quiet = _quiet_frames(energies, noise_rank, 0.2)
    position = np.full(n_frames, -1)
    position[quiet] = np.arange(len(quiet))
    Vq = np.empty((W.shape[0], len(quiet)))
    start = 0
    for S in stft_chunks(blocks()):
        where = position[start:start + S.shape[1]]
        Vq[:, where[where >= 0]] = np.abs(S[:, where >= 0])
        start += S.shape[1]
    mean_magnitude = energies.sum() / (W.shape[0] * n_frames)
    W_noise, noise_floor = _fit_noise(Vq, noise_rank, stream(seed, 1), _offset(mean_magnitude), 50)
    del Vq
    level = max(float(energies.mean()), tiny)
    model = _NoiseModel(np.concatenate([W, W_noise], axis=1), W.shape[1], noise_floor, level, n_frames)

    # pass 3: activations, mask and resynthesis, piece by piece
    synthesis = features.OverlapAdd(framing)
    produced, start = 0, 0
    for S in stft_chunks(blocks()):
        # single precision: magnitudes of 16-bit audio need no more, and the EM runs twice as fast
        speech, noise = _separate_frames(np.abs(S).astype(np.float32), model, start, max_iter=max_iter,
                                         sparsity=sparsity, seed=seed)
        start += S.shape[1]
        if mask_fn is not None:
            mask_fn(speech, noise)
        total = speech + noise
        mask = np.divide(speech, total, out=np.zeros_like(speech), where=total > 0)
        samples = synthesis.push(mask * S)[:num_samples - produced]
        produced += len(samples)
        if len(samples):
            yield samples
    rest = synthesis.finish(num_samples)[:num_samples - produced]
    if len(rest):
        yield rest


def denoise(y, W, *, noise_rank=5, max_iter=100, sparsity=0.6, seed=0, chunk_frames=CHUNK_FRAMES,
            framing=features.NARROWBAND):
    """Enhance a noisy speech signal.

    Parameters
    ----------
    y : ndarray, shape (n_samples,)
        Noisy signal in [-1, 1) at ``framing.sample_rate``.
    W : ndarray, shape (n_bins, rank)
        Speech dictionary (fixed during enhancement).
    noise_rank : int
        Rank of the noise dictionary learned on the signal itself (at most the number of
        frequency bins, 257 at 8 kHz; :func:`validate_noise_rank` checks it against a signal's frames).
    max_iter : int
        EM iterations.
    sparsity : float
        Scale of the exponential prior rates on the speech activations (see :func:`separate`);
        0 gives the maximum-likelihood fit.
    seed : int
        Seed of the initialisation (the output is deterministic for a seed).
    chunk_frames : int
        Frames per piece of EM (:func:`denoise_blocks`); the result does not depend on it
        beyond rounding.
    framing : sepsti.features.Framing
        The dictionary's STFT (:attr:`sepsti.dictionary.Dictionary.framing`).

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
    _validate_options(noise_rank, max_iter, sparsity, chunk_frames, framing)
    if y.size == 0 or not np.any(y):
        return np.zeros_like(y)
    pieces = denoise_blocks(lambda: iter((y,)), y.size, W, noise_rank=noise_rank, max_iter=max_iter,
                            sparsity=sparsity, seed=seed, chunk_frames=chunk_frames, framing=framing)
    return np.concatenate(list(pieces))
