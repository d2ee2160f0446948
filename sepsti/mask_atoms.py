"""Speech atoms learned for the enhancer's mask (discriminative NMF, Weninger et al. 2014).

The enhancer fits each frame's speech activations ``H`` under the Poisson model and rebuilds the speech
part of its mask ``M = S / (S + N)`` as ``S = W̄ H``, by default with the atoms' centre frame; where the
noise dominates, that fit leaves the speech low (docs/enhance.md). Mask atoms are a ``W̄`` learned instead,
``H`` and ``N`` held as the enhancer fitted them on training mixtures, so that the masked noisy magnitudes
``M |Y|`` come closest to the clean ``|X|`` in squared error (multiplicative updates from the centre frame,
the update kept where mixtures held out from the fit come closest). They are used within the band the training
speech has (:func:`speech_band`; outside it the training mixtures teach only that there is no speech there),
scaled by a factor chosen on the held-out mixtures by the enhancer's SDR (the squared error on magnitudes keeps
more of the noise-dominated bins than BSS_EVAL counts as interference), and stored in the dictionary file
(:attr:`sepsti.dictionary.Dictionary.mask_atoms`). ``recipes/train_mask_atoms.py`` makes the shipped ones.
"""

from typing import NamedTuple

import numpy as np

__all__ = ["MaskTraining", "SeparationRecord", "record_separation", "centre_frame", "speech_atoms",
           "speech_band", "learn_mask_atoms", "mask_atoms", "masked_snr"]

_EPS = 1e-12


class MaskTraining(NamedTuple):
    """How mask atoms are learned and used.

    Attributes
    ----------
    max_iter : int
        Multiplicative updates at most; the atoms kept are those of the update where the held-out
        mixtures' masked magnitudes come closest to their clean ones.
    factors : tuple of float
        Factors on the learned atoms tried on the held-out mixtures; the one of the highest mean SDR is kept.
    band_db : float
        The band is the bins whose long-term mean clean magnitude is within this many dB of the strongest
        bin's (:func:`speech_band`).
    """

    max_iter: int = 50
    factors: tuple = (0.35, 0.5, 0.65, 0.8)
    band_db: float = 40.0


class SeparationRecord(NamedTuple):
    """One training mixture as the enhancer separated it, frame by frame (its analysis framing).

    Attributes
    ----------
    H : ndarray, shape (rank, m)
        Speech activations.
    noise : ndarray, shape (n_bins, m)
        Noise part.
    noisy, clean : ndarray, shape (n_bins, m)
        Magnitudes of the mixture as the mask is applied to it (its mains hum removed) and of its clean speech.
    """

    H: np.ndarray
    noise: np.ndarray
    noisy: np.ndarray
    clean: np.ndarray


def record_separation(noisy, clean, W, *, framing, **options):
    """Run the enhancer on a training mixture and record its speech activations and noise part.

    Parameters
    ----------
    noisy, clean : ndarray, shape (n_samples,)
        The mixture and its clean speech, at ``framing.sample_rate``.
    W : ndarray
        The speech dictionary (:attr:`sepsti.dictionary.Dictionary.W`).
    framing : sepsti.features.Framing
        The dictionary's framing.
    **options
        For :func:`sepsti.denoise.denoise_blocks` (as enhance runs it, by default).

    Returns
    -------
    SeparationRecord or None
        None for a mixture too short to be enhanced.
    """
    import warnings

    from sepsti import features
    from sepsti.denoise import UnchangedSignalWarning, denoise_blocks

    parts = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnchangedSignalWarning)
        for _ in denoise_blocks(lambda: iter((noisy,)), len(noisy), W, framing=framing,
                                activations_fn=lambda H, noise, S: parts.append((H.copy(), noise.copy(), np.abs(S))),
                                **options):
            pass
    if not parts:
        return None
    H, noise, Y = (np.concatenate(part, axis=1).astype(np.float64) for part in zip(*parts))
    analysis = features.enhancement_framing(framing)
    X = np.abs(np.concatenate(list(features.stft_chunks(iter((clean,)), H.shape[1], framing=analysis)), axis=1))
    return SeparationRecord(H, noise, Y, X)


def centre_frame(W, framing):
    """The atoms the enhancer rebuilds the speech with when a dictionary has no mask atoms: each atom's centre
    frame, ``(n_bins, rank)``, on the scale of ``W``'s columns scaled to sum 1 (where learning starts)."""
    return speech_atoms(W, None, framing)


def speech_atoms(W, mask_atoms, framing):
    """The atoms the enhancer rebuilds the speech with for its mask, ``(n_bins, rank)``: ``mask_atoms`` (None: each
    atom's centre frame), on the scale of ``W``'s columns scaled to sum 1, as the activations it fits are."""
    from sepsti.denoise import _with_mask_atoms

    return _with_mask_atoms(W, mask_atoms, framing)[1]


def speech_band(clean, band_db=MaskTraining().band_db):
    """The bins the training speech has: long-term mean magnitude within ``band_db`` dB of the strongest bin's.

    Parameters
    ----------
    clean : ndarray, shape (n_bins, n_frames)
        Clean magnitudes.
    band_db : float

    Returns
    -------
    ndarray of bool, shape (n_bins,)
    """
    level = np.asarray(clean, dtype=np.float64).mean(axis=1)
    return level >= level.max() * 10.0 ** (-band_db / 20.0)


def masked_snr(atoms, records):
    """How close the masked noisy magnitudes come to the clean ones, in dB: ``10 log10(Σ|X|² / Σ(|X| − M|Y|)²)``."""
    signal = error = 0.0
    for record in records:
        S = atoms @ record.H
        estimate = S / np.maximum(S + record.noise, _EPS) * record.noisy
        signal += float(np.sum(record.clean ** 2))
        error += float(np.sum((record.clean - estimate) ** 2))
    return 10.0 * np.log10(signal / max(error, _EPS))


def learn_mask_atoms(start, fit, held_out, *, max_iter=MaskTraining().max_iter):
    """Atoms that rebuild the speech for the mask, learned by multiplicative updates from ``start``.

    Each update lowers the squared error ``Σ(|X| − M|Y|)²`` of the ``fit`` records, ``M = S / (S + N)``,
    ``S = W̄ H``: ``W̄ ← W̄ ∘ (Q Hᵀ) / (P Hᵀ)`` with ``P = |Y|² S N / (S + N)³``, ``Q = |X| |Y| N / (S + N)²``
    (the gradient's positive and negative parts). A ``W̄`` with which ``S`` is ``|X|`` wherever ``|Y| = |X| + N``
    is a fixed point.

    Parameters
    ----------
    start : ndarray, shape (n_bins, rank)
        The first atoms (the dictionary's centre frame), positive where they may grow.
    fit, held_out : list of SeparationRecord
        The records learned from, and those that choose the update kept.
    max_iter : int

    Returns
    -------
    atoms : ndarray, shape (n_bins, rank)
        The atoms of the update (0 = ``start``) with the highest :func:`masked_snr` on ``held_out``.
    history : list of (int, float, float)
        Update, and :func:`masked_snr` of ``fit`` and of ``held_out``, after each.
    """
    H = np.concatenate([record.H for record in fit], axis=1)
    noise, noisy, clean = (np.concatenate([getattr(record, name) for record in fit], axis=1)
                           for name in ("noise", "noisy", "clean"))
    atoms = np.array(start, dtype=np.float64)
    best, best_snr = atoms.copy(), masked_snr(atoms, held_out)
    history = [(0, masked_snr(atoms, fit), best_snr)]
    for update in range(1, max_iter + 1):
        S = atoms @ H
        total = np.maximum(S + noise, _EPS)
        share = noisy * noise / total ** 2
        atoms *= ((clean * share) @ H.T) / np.maximum((noisy * S / total * share) @ H.T, _EPS)
        snr = masked_snr(atoms, held_out)
        history.append((update, masked_snr(atoms, fit), snr))
        if snr > best_snr:
            best, best_snr = atoms.copy(), snr
    return best, history


def mask_atoms(learned, start, band, factor):
    """The atoms a dictionary file carries: ``factor`` times the learned ones within ``band``, ``start`` outside."""
    return np.where(np.asarray(band)[:, None], factor * np.asarray(learned), np.asarray(start))
