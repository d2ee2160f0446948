"""Speech enhancement by Poisson NMF with a fixed speech dictionary (ICASSP'16 §4.2, eq. 14).

Conventions
-----------
Magnitudes are ``(n_bins, n_frames)`` STFT magnitudes from :mod:`sepsti.features` (257 bins,
on the int16 amplitude scale). A speech dictionary ``W`` is ``(n_bins, rank)``, non-negative.
Signals are float arrays at :data:`sepsti.features.SAMPLE_RATE`.

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

import numpy as np

from core.errors import ParameterError
from core.factorization import initialize_nmf, poisson_nmf_em
from core.random import stream
from sepsti import features

__all__ = ["train_dictionary", "denoise", "separate", "quiet_noise_dictionary", "speech_prior_rates"]


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
        Dictionary in float64, each column scaled to sum 1 (the scale moves to the activations).
    result : core.factorization.EMResult
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
    W0, H0 = initialize_nmf(X, rank, stream(seed, 0))
    result = poisson_nmf_em(X, W0, H0, prior_rate_H=prior_rate, max_iter=max_iter, tol=tol,
                            progress=progress, desc=f"train R={rank}")
    W = result.W.astype(np.float64)
    W /= np.maximum(W.sum(axis=0, keepdims=True), np.finfo(np.float64).tiny)
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
        Share of the frames, lowest total magnitude first (at least ``2 * noise_rank`` frames).
    max_iter : int
        EM iterations.

    Returns
    -------
    W_noise : ndarray, shape (n_bins, noise_rank)
        Columns summing to 1.
    noise_floor : ndarray, shape (n_bins,)
        Mean magnitude of the quiet frames, per bin.
    """
    n_frames = V.shape[1]
    count = min(n_frames, max(2 * noise_rank, int(np.ceil(quiet_fraction * n_frames))))
    quiet = np.argsort(V.sum(axis=0), kind="stable")[:count]
    Vq = V[:, quiet]
    noise_floor = Vq.mean(axis=1)
    # a small offset keeps bins that are exactly zero in the quiet frames learnable
    Vq = Vq + 1e-3 * max(float(V.mean()), np.finfo(np.float64).tiny)
    W0, H0 = initialize_nmf(Vq, noise_rank, rng)
    result = poisson_nmf_em(Vq, W0, H0, max_iter=max_iter, tol=0)
    W_noise = result.W / result.W.sum(axis=0, keepdims=True)
    return W_noise, noise_floor


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
    rank = W.shape[1]
    n_frames = V.shape[1]
    W_noise, noise_floor = quiet_noise_dictionary(V, noise_rank, stream(seed, 1),
                                                  quiet_fraction=quiet_fraction)
    W_all = np.concatenate([W, W_noise], axis=1)
    level = max(float(V.sum(axis=0).mean()), np.finfo(np.float64).tiny)
    H = level / (rank + noise_rank) * stream(seed, 2).uniform(0.5, 1.5, (rank + noise_rank, n_frames))
    rates = np.zeros((rank + noise_rank, n_frames))
    if sparsity > 0:
        rates[:rank] = speech_prior_rates(V, noise_floor, sparsity)[None, :]
    result = poisson_nmf_em(V, W_all, H, update_W=False, prior_rate_H=rates, max_iter=max_iter, tol=0)
    speech = result.W[:, :rank] @ result.H[:rank]
    noise = result.W[:, rank:] @ result.H[rank:]
    return speech, noise


def denoise(y, W, *, noise_rank=5, max_iter=100, sparsity=0.6, seed=0):
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
    sparsity : float
        Scale of the exponential prior rates on the speech activations (see :func:`separate`);
        0 gives the maximum-likelihood fit.
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
    if not (isinstance(sparsity, (int, float, np.integer, np.floating)) and np.isfinite(sparsity) and sparsity >= 0):
        raise ParameterError(f"sparsity: expected a finite number >= 0, got {sparsity!r}")
    if y.size == 0 or not np.any(y):
        return np.zeros_like(y)
    S = features.stft(y)
    V = np.abs(S)
    W = W / np.maximum(W.sum(axis=0, keepdims=True), np.finfo(np.float64).tiny)
    speech, noise = separate(V, W, noise_rank=int(noise_rank), max_iter=int(max_iter),
                             sparsity=float(sparsity), seed=seed)
    total = speech + noise
    mask = np.divide(speech, total, out=np.zeros_like(speech), where=total > 0)
    return features.istft(mask * S, y.size)
