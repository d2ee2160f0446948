"""Raman simulator: shapes, determinism, Voigt peaks, hotspots, noise level."""

import numpy as np
import pytest
from scipy.special import voigt_profile

from sepsti.core.errors import ParameterError
from sepsti.corpora.raman import hotspot_map, simulate_raman, voigt_spectrum


@pytest.mark.parametrize("experiment", [1, 2])
def test_shapes_truth_and_noise(experiment):
    data = simulate_raman(experiment, seed=3)
    assert data.X.shape == (625, 50) and data.D.shape == (625, 2) and data.H.shape == (2, 50)
    assert np.all(data.D >= 0) and np.all(data.H >= 0)
    np.testing.assert_allclose(data.H.max(axis=1), 1.0)
    residual = data.X - data.D @ data.H
    # the standard error of a sample standard deviation is σ / √(2n)
    assert residual.std() == pytest.approx(0.05, rel=4 / np.sqrt(2 * residual.size))
    assert len(data.peaks) == experiment and len(data.hotspots) == 2


def test_deterministic_from_the_seed():
    a, b, c = simulate_raman(1, seed=5), simulate_raman(1, seed=5), simulate_raman(1, seed=6)
    np.testing.assert_array_equal(a.X, b.X)
    assert not np.array_equal(a.X, c.X)


def test_experiment_2_has_two_close_peaks():
    data = simulate_raman(2, seed=0)
    centers = sorted(p["center"] for p in data.peaks)
    assert 2.5 < centers[1] - centers[0] < 5.5


def test_voigt_and_hotspot_building_blocks():
    peak = {"center": 10.0, "sigma": 1.5, "gamma": 1.0, "amplitude": 2.0}
    spectrum = voigt_spectrum(21, [peak])
    assert spectrum.argmax() == 10 and spectrum[10] == pytest.approx(2.0)
    np.testing.assert_allclose(spectrum[7] / spectrum[10], voigt_profile(3.0, 1.5, 1.0) / voigt_profile(0.0, 1.5, 1.0))
    loading = hotspot_map((9, 9), [{"center": (4, 4), "radius": 1.0, "amplitude": 1.0}]).reshape(9, 9)
    assert loading[4, 4] == pytest.approx(1.0) and loading[4, 5] == pytest.approx(np.exp(-0.5))


def test_validation():
    with pytest.raises(ParameterError, match="experiment"):
        simulate_raman(3)
    with pytest.raises(ParameterError, match="noise_std"):
        simulate_raman(1, noise_std=-1.0)


def test_intensity_scales_the_loadings_only():
    base, bright = simulate_raman(1, seed=2), simulate_raman(1, seed=2, intensity=5.0, noise_std=5.0)
    np.testing.assert_allclose(bright.D, 5.0 * base.D)
    np.testing.assert_array_equal(bright.H, base.H)
    # the same draw of the noise, at the level asked for (not scaled by the intensity)
    np.testing.assert_allclose(bright.X - bright.D @ bright.H, 5.0 / base.noise_std * (base.X - base.D @ base.H),
                               rtol=1e-6, atol=1e-9)
    with pytest.raises(ParameterError, match="intensity"):
        simulate_raman(1, intensity=0.0)


def test_plates_too_small_for_two_hotspots_are_refused():
    # on an 8 x 8 plate a first hotspot near the middle leaves no room for the second (seed 2 is one)
    with pytest.raises(ParameterError, match=r"plate_shape=\(8, 8\): expected two sizes of at least 9"):
        simulate_raman(1, seed=2, plate_shape=(8, 8))
    for seed in range(40):
        assert len(simulate_raman(1, seed=seed, plate_shape=(9, 9), num_wavenumbers=20).hotspots) == 2


@pytest.mark.parametrize("kwargs, match", [
    (dict(noise_std=np.inf), r"^noise_std=inf must be a number in \[0, "),
    (dict(noise_std=np.nan), r"^noise_std=nan must be a number"),
    (dict(noise_std="0.1"), r"^noise_std='0.1' must be a number"),
    (dict(intensity=np.inf), r"^intensity=inf must be a positive number"),
    (dict(experiment=1.0), r"^experiment=1.0: expected 1 or 2"),
    (dict(experiment=True), r"^experiment=True: expected 1 or 2"),
    (dict(plate_shape=(9.9, 9.9)), r"^plate_shape=\(9.9, 9.9\): expected two sizes of at least 9, integers"),
    (dict(plate_shape=25), r"^plate_shape=25: expected two sizes"),
    (dict(num_wavenumbers=50.5), r"^num_wavenumbers=50.5 must be an integer of at least 20"),
])
def test_arguments_are_checked_by_name(kwargs, match):
    """Infinite noise and intensity gave infinite maps, experiment=1.0 a message about stream keys, a plate of 9.9 was
    cut to 9, a string noise_std a raw TypeError."""
    with pytest.raises(ParameterError, match=match):
        simulate_raman(**{"experiment": 1, **kwargs})


@pytest.mark.parametrize("experiment", [1, 2])
def test_the_peaks_give_the_analyte_spectrum_returned(experiment):
    """The amplitudes described the analyte before it was scaled to a maximum of 1."""
    for seed in range(5):
        data = simulate_raman(experiment, seed=seed)
        np.testing.assert_allclose(voigt_spectrum(data.H.shape[1], data.peaks), data.H[0], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("experiment", [1, 2])
def test_the_background_loading_ranges_from_0_3_to_1_halved(experiment):
    """0.3 + 0.7 f / max f, halved: its maximum is exactly 0.5 (an unnormalised f passed before)."""
    data = simulate_raman(experiment, seed=4, intensity=2.0)
    background = data.D[:, 1] / 2.0
    assert background.max() == pytest.approx(0.5, rel=1e-12)
    assert background.min() > 0.15
