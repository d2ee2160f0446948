"""Speech enhancement by Poisson NMF with a fixed speech dictionary (ICASSP'16 §4.2, eq. 14).

Conventions
-----------
Magnitudes are ``(n_bins, n_frames)`` STFT magnitudes from :mod:`sepsti.features` (257 bins,
on the int16 amplitude scale). A speech dictionary ``W`` is ``(n_bins, rank)``, non-negative.
Signals are float arrays at :data:`sepsti.features.SAMPLE_RATE`.

The noisy magnitude is modelled as ``V ≈ W_sp H_sp + W_no H_no`` (Poisson). The speech
dictionary is trained on clean speech and held fixed; the noise dictionary and all
activations are learned by EM on the noisy magnitudes; the speech is rebuilt with a
Wiener-style mask ``S / (S + N)`` applied to the complex noisy STFT.
"""

import numpy as np

from core.errors import ParameterError
from core.factorization import initialize_nmf, poisson_nmf_em
from core.random import stream
from sepsti import features

__all__ = ["train_dictionary", "denoise", "separate"]


def train_dictionary(X, rank, *, max_iter=200, tol=1e-4, seed=0, prior_rate=0.0, progress=False):
    """Train a speech dictionary by EM on clean magnitudes.

    Parameters
    ----------
    X : ndarray, shape (n_bins, n_frames)
        Clean-speech magnitudes (e.g. :func:`sepsti.features.training_matrix`).
    rank : int
        Number of dictionary columns.
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
        Dictionary, each column scaled to sum 1 (the scale moves to the activations).
    result : core.factorization.EMResult
        The full EM result (``result.W`` unnormalised, ``result.H``, history, ``n_iter``).
    """
    X = np.asarray(X)
    if X.ndim != 2:
        raise ParameterError(f"X: expected a (n_bins, n_frames) matrix, got shape {X.shape}")
    W0, H0 = initialize_nmf(X, rank, stream(seed, 0))
    result = poisson_nmf_em(X, W0, H0, prior_rate_H=prior_rate, max_iter=max_iter, tol=tol,
                            progress=progress, desc=f"train R={rank}")
    W = result.W / np.maximum(result.W.sum(axis=0, keepdims=True), np.finfo(result.W.dtype).tiny)
    return W, result


def _validate_dictionary(W):
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] != features.N_FFT // 2 + 1 or W.shape[1] < 1:
        raise ParameterError(f"W: expected a ({features.N_FFT // 2 + 1}, rank) dictionary, "
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


def separate(V, W, *, noise_rank=5, max_iter=200, seed=0):
    """Split noisy magnitudes into speech and noise parts with a fixed speech dictionary.

    Parameters
    ----------
    V : ndarray, shape (n_bins, n_frames)
        Noisy magnitudes.
    W : ndarray, shape (n_bins, rank)
        Speech dictionary (fixed).
    noise_rank : int
        Columns of the learned noise dictionary.
    max_iter : int
        EM iterations (run exactly).
    seed : int
        Seed of the initialisation.

    Returns
    -------
    speech, noise : ndarray, shape (n_bins, n_frames)
        ``W_sp H_sp`` and ``W_no H_no``.
    """
    rank = W.shape[1]
    rng = stream(seed, 1)
    W_noise, H = initialize_nmf(V, rank + noise_rank, rng)
    W_all = np.concatenate([W, W_noise[:, :noise_rank] / W.shape[0]], axis=1)
    update_W = np.zeros(rank + noise_rank, dtype=bool)
    update_W[rank:] = True
    result = poisson_nmf_em(V, W_all, H, update_W=update_W, max_iter=max_iter, tol=0)
    speech = result.W[:, :rank] @ result.H[:rank]
    noise = result.W[:, rank:] @ result.H[rank:]
    return speech, noise


def denoise(y, W, *, noise_rank=5, max_iter=200, seed=0):
    """Enhance a noisy speech signal.

    Parameters
    ----------
    y : ndarray, shape (n_samples,)
        Noisy signal in [-1, 1) at :data:`sepsti.features.SAMPLE_RATE`.
    W : ndarray, shape (257, rank)
        Speech dictionary (fixed during enhancement).
    noise_rank : int
        Rank of the noise dictionary learned on the signal itself.
    max_iter : int
        EM iterations.
    seed : int
        Seed of the initialisation (the output is deterministic for a seed).

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
    W = _validate_dictionary(W)
    if isinstance(noise_rank, (bool, np.bool_)) or not isinstance(noise_rank, (int, np.integer)) or noise_rank < 1:
        raise ParameterError(f"noise_rank: expected a positive integer, got {noise_rank!r}")
    if isinstance(max_iter, (bool, np.bool_)) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ParameterError(f"max_iter: expected a positive integer, got {max_iter!r}")
    if y.size == 0 or not np.any(y):
        return np.zeros_like(y)
    S = features.stft(y)
    V = np.abs(S)
    speech, noise = separate(V, W, noise_rank=int(noise_rank), max_iter=int(max_iter), seed=seed)
    total = speech + noise
    mask = np.divide(speech, total, out=np.zeros_like(speech), where=total > 0)
    return features.istft(mask * S, y.size)
