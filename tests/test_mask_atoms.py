"""Mask atoms: learning against a known reconstruction, the band, and what the enhancer does with them."""

import numpy as np
import pytest

from sepsti import features
from sepsti.mask_atoms import (SeparationRecord, learn_mask_atoms, mask_atoms, masked_snr, record_separation,
                               speech_band)


def _records(rng, atoms, count, frames=300, noise_level=0.5):
    """Records whose clean magnitudes are exactly ``atoms @ H`` and whose mixtures add a noise part to them."""
    bins, rank = atoms.shape
    records = []
    for _ in range(count):
        H = rng.gamma(0.5, 1.0, (rank, frames))
        noise = noise_level * rng.gamma(2.0, 1.0, (bins, frames)) * atoms.mean()
        clean = atoms @ H
        records.append(SeparationRecord(H, noise, clean + noise, clean))
    return records


def test_the_atoms_that_rebuild_the_clean_speech_are_learned_back(rng):
    """From atoms off by up to a factor e entry by entry, the updates come back to the ones whose mask gives the
    clean magnitudes exactly (a fixed point of the update), and held-out records agree."""
    truth = rng.gamma(1.0, 1.0, (24, 5))
    start = truth * np.exp(rng.uniform(-1.0, 1.0, truth.shape))
    fit, held_out = _records(rng, truth, 3), _records(rng, truth, 2)
    learned, history = learn_mask_atoms(start, fit, held_out, max_iter=400)
    assert history[0][2] < 25.0  # the start's masked magnitudes are far from the clean ones
    assert masked_snr(learned, held_out) > 60.0
    assert np.linalg.norm(learned - truth) < 1e-2 * np.linalg.norm(truth)
    again, _ = learn_mask_atoms(truth, fit, held_out, max_iter=1)  # the truth is a fixed point
    np.testing.assert_allclose(again, truth, rtol=1e-10)


def test_the_update_kept_is_the_one_best_on_the_held_out_records(rng):
    """Held-out records whose clean speech is rebuilt by smaller atoms than the fitted ones': the updates pass them
    on the way from a start smaller still, the fit keeps improving while the held-out records turn back, and the
    atoms returned are those of the held-out peak, not the last update."""
    truth = rng.gamma(1.0, 1.0, (24, 5))
    fit, held_out = _records(rng, truth, 3), _records(rng, 0.6 * truth, 2)
    start = 0.3 * truth
    learned, history = learn_mask_atoms(start, fit, held_out, max_iter=60)
    fit_snr = [row[1] for row in history]
    held_snr = [row[2] for row in history]
    best = int(np.argmax(held_snr))
    assert fit_snr[-1] > fit_snr[best] and 0 < best < len(history) - 1
    assert masked_snr(learned, held_out) == pytest.approx(held_snr[best], abs=1e-9)
    assert held_snr[best] > held_snr[-1] + 0.1 and held_snr[best] > held_snr[0] + 1.0


def test_the_band_is_where_the_training_speech_has_its_energy():
    level = np.full(40, 1e-4)
    level[5:30] = 1.0
    level[30] = 0.02  # -34 dB: inside a 40 dB band, outside a 30 dB one
    clean = level[:, None] * np.ones((1, 10))
    np.testing.assert_array_equal(np.flatnonzero(speech_band(clean, 40.0)), np.arange(5, 31))
    np.testing.assert_array_equal(np.flatnonzero(speech_band(clean, 30.0)), np.arange(5, 30))
    assert speech_band(clean, 90.0).all()


def test_the_file_atoms_are_the_scaled_learned_ones_inside_the_band_and_the_start_outside(rng):
    learned, start = rng.gamma(1.0, 1.0, (6, 3)), rng.gamma(1.0, 1.0, (6, 3))
    band = np.array([False, True, True, True, False, False])
    atoms = mask_atoms(learned, start, band, 0.5)
    np.testing.assert_array_equal(atoms[band], 0.5 * learned[band])
    np.testing.assert_array_equal(atoms[~band], start[~band])


def test_a_recorded_separation_is_the_one_the_enhancer_masks_with(rng):
    """The activations and noise recorded rebuild, with the dictionary's centre frame, the speech the enhancer's
    mask is made of (before smoothing, frame by frame), and the magnitudes are those of the enhancer's frames."""
    from sepsti.denoise import denoise_blocks, smooth_speech
    from sepsti.mask_atoms import centre_frame

    W = rng.gamma(1.0, 1.0, (features.N_BINS, 6))
    clean = np.sin(2 * np.pi * 440 * np.arange(16000) / 8000) * np.repeat(rng.uniform(0, 0.3, 20), 800)
    noisy = clean + 0.02 * rng.standard_normal(clean.size)
    record = record_separation(noisy, clean, W, framing=features.NARROWBAND, max_iter=5)
    analysis = features.enhancement_framing(features.NARROWBAND)
    np.testing.assert_allclose(record.noisy, features.magnitude(noisy, framing=analysis), rtol=1e-9)
    np.testing.assert_allclose(record.clean, features.magnitude(clean, framing=analysis), rtol=1e-9)
    masked = []
    list(denoise_blocks(lambda: iter((noisy,)), noisy.size, W, max_iter=5,
                        mask_fn=lambda speech, noise, floor: masked.append((speech.copy(), noise.copy()))))
    speech, noise = (np.hstack(part) for part in zip(*masked))
    centre = centre_frame(W, features.NARROWBAND)
    np.testing.assert_allclose(noise, record.noise, rtol=1e-5)
    np.testing.assert_allclose(speech, smooth_speech(centre @ record.H, record.noise), rtol=1e-4,
                               atol=1e-6 * speech.max())


def test_a_recorded_mixture_is_the_one_masked_its_mains_hum_removed(rng):
    """With hum, the record holds the mixture the enhancer masks, the hum subtracted, not the recording."""
    from sepsti.hum import hum_free
    from test_hum import _hum, _speech

    rate, W = 8000, rng.gamma(1.0, 1.0, (features.N_BINS, 6))
    clean = _speech(rng, 6, rate)
    noisy = clean + 0.05 * np.std(clean) * rng.standard_normal(clean.size)
    hum = _hum(clean.size, rate, 60.0, range(1, 6), 0.5 * np.std(clean), rng)
    record = record_separation(noisy + hum, clean, W, framing=features.NARROWBAND, max_iter=2)
    analysis = features.enhancement_framing(features.NARROWBAND)
    without = np.concatenate(list(hum_free(lambda: iter((noisy + hum,)), rate)()))
    np.testing.assert_allclose(record.noisy, features.magnitude(without, framing=analysis), rtol=1e-9)
    hum_bin = round(60.0 * analysis.n_fft / rate)
    with_hum = features.magnitude(noisy + hum, framing=analysis)
    assert np.median(with_hum[hum_bin] / record.noisy[hum_bin]) > 3  # the recording's hum is not in it


def test_too_short_a_mixture_gives_no_record(rng):
    W = rng.gamma(1.0, 1.0, (features.N_BINS, 6))
    noisy = 0.01 * rng.standard_normal(600)
    assert record_separation(noisy, noisy, W, framing=features.NARROWBAND) is None


def test_an_update_moves_each_atom_entry_down_the_gradient_of_the_squared_error(rng):
    """On records no atoms rebuild exactly, one update raises the entries whose squared error falls as they grow
    and lowers the others (the signs of a central finite difference)."""
    atoms = rng.gamma(1.0, 1.0, (8, 3))
    records = _records(rng, atoms, 1, frames=50)
    records = [record._replace(clean=record.clean * rng.uniform(0.5, 1.5, record.clean.shape)) for record in records]
    start = atoms * np.exp(rng.uniform(-0.3, 0.3, atoms.shape))
    updated, history = learn_mask_atoms(start, records, records, max_iter=1)
    assert history[1][2] > history[0][2]  # the update was kept

    def error(candidate):
        return sum(np.sum((r.clean - candidate @ r.H / (candidate @ r.H + r.noise) * r.noisy) ** 2) for r in records)

    gradient = np.empty_like(start)
    for index in np.ndindex(start.shape):
        step = np.zeros_like(start)
        step[index] = 1e-6 * start[index]
        gradient[index] = (error(start + step) - error(start - step)) / (2 * step[index])
    clear = np.abs(gradient) > 1e-6 * np.abs(gradient).max()
    np.testing.assert_array_equal(np.sign(updated - start)[clear], -np.sign(gradient)[clear])
