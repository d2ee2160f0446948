"""Simulated surface-enhanced Raman maps for the NMF-GPP experiments.

Conventions: a plate of ``plate_shape`` = (rows, cols) positions (25 × 25),
each measured at ``num_wavenumbers`` (50) wavenumbers indexed 0..L−1. The data
matrix ``X`` has shape ``(K, L)`` with K = rows · cols positions in row-major
plate order; ``X = D H + noise`` with true loadings ``D`` of shape ``(K, M)``
and spectra ``H`` of shape ``(M, L)``; component 0 is the analyte, the last
component the background. Everything is deterministic given the seed
(:func:`sepsti.core.random.stream`).

Experiment 1: one analyte spectrum (one Voigt peak) present in two hotspots,
plus a background. Experiment 2: the analyte spectrum is two Voigt curves
with nearly the same peak position (a strong and a weaker shoulder), two
hotspots, plus a background. Both have M = 2 true components.
"""

import numbers
import sys
from typing import NamedTuple

import numpy as np
from scipy.special import voigt_profile

from sepsti.core.checks import integer_at_least, number_within, positive_number
from sepsti.core.errors import ParameterError
from sepsti.core.random import stream

__all__ = ["RamanData", "voigt_spectrum", "hotspot_map", "simulate_raman"]


class RamanData(NamedTuple):
    """A simulated Raman map with its ground truth.

    Attributes
    ----------
    X : ndarray, shape (K, L)
    D : ndarray, shape (K, M)
        True loadings (column 0: analyte, column 1: background).
    H : ndarray, shape (M, L)
        True spectra, each scaled to a maximum of 1.
    plate_shape : tuple of int
    noise_std : float
    experiment : int
    peaks : list of dict
        The Voigt peaks of the analyte (center, sigma, gamma, amplitude), amplitudes on the scale of ``H``:
        ``voigt_spectrum(L, peaks)`` is ``H[0]``.
    hotspots : list of dict
        Hotspot centers (row, col), radius and amplitude.
    """

    X: np.ndarray
    D: np.ndarray
    H: np.ndarray
    plate_shape: tuple
    noise_std: float
    experiment: int
    peaks: list
    hotspots: list


def voigt_spectrum(num_wavenumbers, peaks):
    """Sum of Voigt curves over indices 0..L−1, each scaled so its own maximum is its amplitude.

    Parameters
    ----------
    num_wavenumbers : int
    peaks : list of dict
        Keys ``center``, ``sigma`` (Gaussian width), ``gamma`` (Lorentzian
        half-width), ``amplitude``.

    Returns
    -------
    ndarray, shape (num_wavenumbers,)
    """
    grid = np.arange(num_wavenumbers, dtype=float)
    spectrum = np.zeros(num_wavenumbers)
    for peak in peaks:
        shape = voigt_profile(grid - peak["center"], peak["sigma"], peak["gamma"])
        spectrum += peak["amplitude"] * shape / voigt_profile(0.0, peak["sigma"], peak["gamma"])
    return spectrum


def hotspot_map(plate_shape, hotspots):
    """Smooth blobs exp(−‖x − c‖² / (2 r²)) · a summed over hotspots, flattened row-major, shape (K,)."""
    rows, cols = np.meshgrid(np.arange(plate_shape[0]), np.arange(plate_shape[1]), indexing="ij")
    loading = np.zeros(plate_shape)
    for spot in hotspots:
        squared = (rows - spot["center"][0]) ** 2 + (cols - spot["center"][1]) ** 2
        loading += spot["amplitude"] * np.exp(-squared / (2.0 * spot["radius"] ** 2))
    return loading.ravel()


def simulate_raman(experiment, *, seed=0, plate_shape=(25, 25), num_wavenumbers=50, noise_std=0.05, intensity=1.0):
    """Simulate Experiment 1 or 2 of the NUTS NMF-GPP paper.

    ``intensity`` scales the signal (the loadings) and ``noise_std`` the noise,
    so the map can be put in counts: ``intensity=100, noise_std=5`` has the
    signal-to-noise ratio of the default (1, 0.05) but a likelihood
    (σ_N = 5) far less stiff relative to the exponential priors.

    Parameters
    ----------
    experiment : {1, 2}
        An integer (not a bool or a float).
    seed : int
    plate_shape : tuple of int
        Two integer sizes, both at least 9.
    num_wavenumbers : int
        At least 20.
    noise_std : float
        Standard deviation of the additive Gaussian noise: finite, at least 0.
    intensity : float
        Signal scale: the true loadings are multiplied by it (spectra keep their maximum of 1); finite, above 0.

    Returns
    -------
    RamanData

    Raises
    ------
    ParameterError
        An argument out of its range or of another type, named.
    """
    if isinstance(experiment, (bool, np.bool_)) or not isinstance(experiment, numbers.Integral) \
            or experiment not in (1, 2):
        raise ParameterError(f"experiment={experiment!r}: expected 1 or 2")
    experiment = int(experiment)
    try:
        sizes = tuple(plate_shape)
    except TypeError:
        sizes = ()
    # from 9 on, wherever the first hotspot falls, the second has room more than 0.3 · min(plate_shape) away
    if len(sizes) != 2 or not all(not isinstance(n, (bool, np.bool_)) and isinstance(n, numbers.Integral) and n >= 9
                                  for n in sizes):
        raise ParameterError(f"plate_shape={plate_shape!r}: expected two sizes of at least 9, integers (room for two "
                             "hotspots)")
    plate_shape = tuple(int(n) for n in sizes)
    num_wavenumbers = integer_at_least("num_wavenumbers", num_wavenumbers, 20)
    noise_std = number_within("noise_std", noise_std, 0.0, sys.float_info.max)
    intensity = positive_number("intensity", intensity)
    rng = stream(seed, 7, experiment)
    length = num_wavenumbers
    center = rng.uniform(0.35, 0.6) * length
    main = {"center": center, "sigma": rng.uniform(1.5, 2.5), "gamma": rng.uniform(0.8, 1.5), "amplitude": 1.0}
    peaks = [main]
    if experiment == 2:
        # A weaker curve whose peak sits a few wavenumbers from the main one.
        peaks.append({"center": center - rng.uniform(3.0, 5.0), "sigma": rng.uniform(1.0, 2.0),
                      "gamma": rng.uniform(0.5, 1.0), "amplitude": rng.uniform(0.4, 0.6)})
    analyte = voigt_spectrum(length, peaks)
    scale = analyte.max()
    analyte /= scale
    for peak in peaks:  # the peaks of the spectrum returned
        peak["amplitude"] /= scale

    grid = np.arange(length, dtype=float)
    background = 0.4 + 0.6 * np.exp(-0.5 * ((grid - rng.uniform(0.2, 0.8) * length) / (0.35 * length)) ** 2)
    background /= background.max()

    rows, cols = plate_shape
    spots = []
    margin = max(2, round(0.15 * min(rows, cols)))
    for _ in range(10000):
        if len(spots) == 2:
            break
        candidate = (rng.uniform(margin, rows - margin - 1), rng.uniform(margin, cols - margin - 1))
        if all(np.hypot(candidate[0] - s["center"][0], candidate[1] - s["center"][1]) > 0.3 * min(rows, cols)
               for s in spots):
            spots.append({"center": candidate, "radius": rng.uniform(1.5, 2.5), "amplitude": rng.uniform(0.7, 1.0)})
    loading = hotspot_map(plate_shape, spots)
    # Background loading: a gentle, everywhere-positive field from two wide blobs.
    wide = [{"center": (rng.uniform(0, rows), rng.uniform(0, cols)), "radius": 0.6 * min(rows, cols),
             "amplitude": 1.0} for _ in range(2)]
    background_loading = 0.3 + 0.7 * hotspot_map(plate_shape, wide) / hotspot_map(plate_shape, wide).max()

    D = intensity * np.column_stack([loading, 0.5 * background_loading])
    H = np.vstack([analyte, background])
    X = D @ H + noise_std * rng.standard_normal((D.shape[0], length))
    return RamanData(X, D, H, plate_shape, float(noise_std), experiment, peaks, spots)
