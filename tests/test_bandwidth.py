"""Rates, dictionaries and the band above the dictionary's: :mod:`sepsti.bandwidth` and ``enhance``."""

import numpy as np
import pytest
import soundfile

from sepsti import bandwidth, features
from sepsti.audio import resample
from sepsti.denoise import MASK_FLOOR
from sepsti.dictionary import (default_dictionary_path, load_dictionary, narrowband_dictionary_path,
                               wideband_dictionary_path)

from test_cli_train import run

WIDE = features.framing_for_rate(16000)


@pytest.mark.parametrize("rate, wideband", [(4000, False), (8000, False), (8001, True), (11025, True), (12000, True),
                                            (16000, True), (22050, True), (44100, True), (48000, True)])
def test_dictionary_for_rate(rate, wideband):
    expected = wideband_dictionary_path() if wideband else narrowband_dictionary_path()
    assert bandwidth.dictionary_path_for_rate(rate) == expected


@pytest.mark.parametrize("rate", [4000, 6000, 8000, 11025, 16000, 22050, 44100, 48000])
def test_each_input_rate_is_enhanced_with_the_shipped_dictionary_of_its_band(rate):
    """Inputs up to 8 kHz get the shipped 8 kHz dictionary, faster ones the 16 kHz one and above it an upper band."""
    from sepsti.audio import validate_sample_rate

    dictionary = load_dictionary(bandwidth.dictionary_path_for_rate(rate))
    assert dictionary.framing == features.framing_for_rate(8000 if rate <= 8000 else 16000)
    assert bandwidth.has_upper_band(rate, dictionary.framing) == (rate > 16000)
    assert validate_sample_rate(rate, dictionary.sample_rate) == rate


def test_shipped_dictionaries_load_with_their_framing():
    narrow = load_dictionary(default_dictionary_path())
    wide = load_dictionary(wideband_dictionary_path())
    assert narrow.framing == features.NARROWBAND
    assert wide.framing == WIDE == (16000, 1024, 512)
    assert wide.W.shape == (513, wide.rank)
    with np.load(wideband_dictionary_path(), allow_pickle=False) as archive:
        assert archive["W"].dtype == np.float32  # shipped small
    assert wideband_dictionary_path().stat().st_size < 600_000


def test_shipped_8_kHz_dictionary_has_atoms_of_three_frames_from_the_16_kHz_ones_speakers():
    wide = load_dictionary(wideband_dictionary_path())
    narrow = load_dictionary(narrowband_dictionary_path())
    assert narrow.framing == features.NARROWBAND and narrow.context == 1
    assert narrow.W.shape == (3 * 257, narrow.rank)
    np.testing.assert_allclose(narrow.W.sum(axis=0), 1.0, rtol=1e-6)
    assert (narrow.corpus, narrow.files) == (wide.corpus, wide.files)  # the same training speakers
    # with its mask atoms (257 x 128 in float32) and its twelve band-gain networks (float32)
    assert narrowband_dictionary_path().stat().st_size < 1_300_000


@pytest.mark.parametrize("path, count, units, predicts", [(narrowband_dictionary_path, 12, [64, 32], "gain"),
                                                            (wideband_dictionary_path, 1, [128, 64], "move")])
def test_shipped_dictionaries_have_band_gain_networks(path, count, units, predicts):
    """recipes/train_band_gains.py: per training four networks of 64 and 32 units predicting the gain, each trained
    without a quarter of the noise types; three trainings stacked in the 8 kHz dictionary, and in the 16 kHz
    dictionary distilled into one network of 128 and 64 units predicting their move."""
    networks = load_dictionary(path()).band_gains
    assert networks is not None and networks.num_networks == count and networks.predicts == predicts
    assert [layer.shape[2] for layer in networks.hidden] == units


def test_shipped_8_kHz_dictionary_has_mask_atoms_learned_within_the_telephone_band():
    """recipes/train_mask_atoms.py: the atoms' centre frame outside the band the NOIZEUS training speech has, the
    learned atoms inside it, raised above the centre frame where the fit leaves the speech low."""
    narrow = load_dictionary(narrowband_dictionary_path())
    centre = narrow.W[257:514]
    assert narrow.mask_atoms.shape == (257, narrow.rank)
    learned = ~np.all(narrow.mask_atoms == centre, axis=1)
    band = np.flatnonzero(learned) * 8000 / 512
    assert np.all(np.diff(np.flatnonzero(learned)) == 1)  # one band
    assert band.min() < 300 and 3400 < band.max() < 3700
    above = narrow.mask_atoms[learned] > centre[learned]
    assert above.mean() > 0.5


def _pieces(y, sizes):
    start, k = 0, 0
    while start < len(y):
        yield y[start:start + sizes[k % len(sizes)]]
        start += sizes[k % len(sizes)]
        k += 1


def _run_upper_band(y, rate, speech_share, *, block_sizes=(len,), piece_sizes=(4096,)):
    """The enhancer's signal path with a given per-bin speech share as its mask (speech, noise)."""
    from sepsti.audio import Resampler

    down = resample(y, rate, WIDE.sample_rate)
    spectrogram = features.stft(down, framing=WIDE)
    sizes = [size(y) if callable(size) else size for size in block_sizes]
    upper = bandwidth.UpperBand(lambda: _pieces(y, sizes), rate, len(y), WIDE)
    speech = speech_share * np.abs(spectrogram)
    upper.add_mask(speech[:, :7], np.abs(spectrogram[:, :7]) - speech[:, :7])
    upper.add_mask(speech[:, 7:], np.abs(spectrogram[:, 7:]) - speech[:, 7:])
    low = features.istft(speech_share * spectrogram, len(down), framing=WIDE)
    back = Resampler(WIDE.sample_rate, rate, len(down))
    out = [upper.apply(piece) for piece in _pieces(back.push(low), piece_sizes)]
    out.append(upper.apply(back.finish()))
    return np.concatenate(out)[:len(y)]


@pytest.mark.parametrize("rate, length", [(22050, 11025), (48000, 24000), (44100, 22051), (48000, 24001)])
def test_full_mask_gives_the_input_back(rng, rate, length):
    # the two bands add up to the input: a model that calls everything speech changes nothing; also where the way
    # back to the input's rate rounds up past its length (22051 samples at 44.1 kHz: 8001 at 16 kHz, 22052 back)
    y = 0.1 * rng.standard_normal(length)
    np.testing.assert_allclose(_run_upper_band(y, rate, 1.0), y, rtol=0, atol=1e-9)


def test_upper_band_follows_the_gain_of_the_top_band(rng):
    rate = 48000
    y = 0.1 * rng.standard_normal(rate)
    out = _run_upper_band(y, rate, 0.25)
    spectrum = lambda z: np.abs(np.fft.rfft(z)) ** 2  # noqa: E731
    frequencies = np.fft.rfftfreq(len(y), 1 / rate)
    upper = frequencies > 9000
    # amplitude gain 1/4 in the modelled band, so 1/16 of the power above it too
    ratio = spectrum(out)[upper].sum() / spectrum(y)[upper].sum()
    assert ratio == pytest.approx(1 / 16, rel=0.02)
    # a model that calls nothing speech leaves the upper band at the mask's floor (-26 dB)
    out_zero = _run_upper_band(y, rate, 0.0)
    ratio = spectrum(out_zero)[upper].sum() / spectrum(y)[upper].sum()
    assert ratio == pytest.approx(MASK_FLOOR ** 2, rel=0.02)


def test_blocks_and_pieces_do_not_change_the_result(rng):
    rate = 44100
    y = 0.1 * rng.standard_normal(rate)
    share = np.linspace(0.0, 1.0, WIDE.n_bins)[:, None]
    whole = _run_upper_band(y, rate, share)
    pieced = _run_upper_band(y, rate, share, block_sizes=(999, 4096, 17), piece_sizes=(1, 3000, 777))
    np.testing.assert_allclose(pieced, whole, rtol=0, atol=1e-12)


def _fricative_test_signal(rng, rate, seconds=3.0):
    """Voiced stretches (harmonics below 4 kHz) alternating with fricative-like noise bursts that reach
    up to 0.45 × the rate, in pauses of nothing; the noise is weak white noise over the whole band."""
    from scipy.signal import butter, sosfilt

    n = int(seconds * rate)
    t = np.arange(n) / rate
    f0 = 130 * (1 + 0.1 * np.sin(2 * np.pi * 0.7 * t))
    phase = 2 * np.pi * np.cumsum(f0) / rate
    voiced = sum(np.sin(k * phase) / k for k in range(1, 30) if k * 150 < 4000)
    cycle = (t * 2.0) % 1.0
    voiced *= (cycle < 0.4)
    hiss = sosfilt(butter(6, [4500, 0.45 * rate], btype="bandpass", fs=rate, output="sos"), rng.standard_normal(n))
    hiss *= (cycle > 0.5) & (cycle < 0.75)
    clean = 0.05 * voiced / np.std(voiced) + 0.05 * hiss / np.std(hiss)
    return clean, clean + 0.002 * rng.standard_normal(n)


def _band_energy(y, rate, low, high=np.inf):
    power = np.abs(np.fft.rfft(y)) ** 2
    frequencies = np.fft.rfftfreq(len(y), 1 / rate)
    return power[(frequencies > low) & (frequencies <= high)].sum()


@pytest.mark.parametrize("rate, top", [(16000, 8000), (48000, 24000)])
def test_enhanced_output_keeps_its_high_band(tmp_path, rng, rate, top):
    clean, noisy = _fricative_test_signal(rng, rate)
    soundfile.write(tmp_path / "noisy.wav", noisy, rate, subtype="FLOAT")
    result = run(["enhance", tmp_path / "noisy.wav", "-o", tmp_path / "out.wav"])
    assert result.exit_code == 0, result.stderr
    out, out_rate = soundfile.read(tmp_path / "out.wav")
    assert out_rate == rate and len(out) == len(noisy)
    for low, high in [(4000, top), (8000, top)] if rate > 16000 else [(4000, top)]:
        kept = 10 * np.log10(_band_energy(out, rate, low, high) / _band_energy(clean, rate, low, high))
        assert abs(kept) < 3.0, f"{low}-{high} Hz: output {kept:.2f} dB against the clean speech"


def test_upper_band_noise_is_reduced_where_the_model_hears_no_speech(tmp_path, rng):
    rate = 48000
    clean, noisy = _fricative_test_signal(rng, rate)
    soundfile.write(tmp_path / "noisy.wav", noisy, rate, subtype="FLOAT")
    assert run(["enhance", tmp_path / "noisy.wav", "-o", tmp_path / "out.wav"]).exit_code == 0
    out, _ = soundfile.read(tmp_path / "out.wav")
    t = np.arange(len(clean)) / rate
    pause = ((t * 2.0) % 1.0 > 0.8) & ((t * 2.0) % 1.0 < 0.95)  # neither voiced nor fricative
    kept = _band_energy(out[pause], rate, 12000, 20000) / _band_energy(noisy[pause], rate, 12000, 20000)
    assert 10 * np.log10(kept) < -6.0, 10 * np.log10(kept)


def test_enhance_picks_the_dictionary_per_rate(tmp_path, rng, monkeypatch):
    import sepsti.commands.enhance as command

    used = []
    real = command.enhance_file

    def recorder(audio, target, W, framing, **options):
        atoms = options["mask_atoms"]
        used.append((audio.sample_rate, framing, W.shape[0], None if atoms is None else atoms.shape))
        return real(audio, target, W, framing, **options)

    monkeypatch.setattr(command, "enhance_file", recorder)
    rates = (8000, 11025, 16000, 22050, 48000)
    for rate in rates:
        soundfile.write(tmp_path / f"in{rate}.wav", 0.1 * rng.standard_normal(2 * rate), rate, subtype="PCM_16")
    result = run(["enhance", *[tmp_path / f"in{rate}.wav" for rate in rates], "--out-dir", tmp_path / "out",
                  "--iterations", 2])
    assert result.exit_code == 0, result.stderr
    narrow, wide = features.NARROWBAND, WIDE
    assert used == [(8000, narrow, 3 * 257, (257, 128)), (11025, wide, 513, None), (16000, wide, 513, None),
                    (22050, wide, 513, None), (48000, wide, 513, None)]  # the 8 kHz dictionary's mask atoms
    for rate in rates:
        info = soundfile.info(tmp_path / "out" / f"in{rate}.wav")
        assert (info.samplerate, info.frames) == (rate, 2 * rate)
    # --dictionary applies to every input
    used.clear()
    result = run(["enhance", tmp_path / "in48000.wav", tmp_path / "in8000.wav", "--out-dir", tmp_path / "again",
                  "--dictionary", default_dictionary_path(), "--iterations", 2])
    assert result.exit_code == 0, result.stderr
    assert used == [(48000, narrow, 257, None), (8000, narrow, 257, None)]


def test_noise_sample_is_learned_with_the_framing_of_each_input_dictionary(tmp_path, rng, monkeypatch):
    """One noise sample (22.05 kHz) for an 8 kHz and a 48 kHz input: each gets the sample's model in its own
    dictionary's framing, learned on the sample resampled to that dictionary's rate."""
    import sepsti.commands.enhance as command
    from sepsti.audio import load_audio
    from sepsti.noise_model import learn_noise

    used = {}
    real = command.enhance_file

    def recorder(audio, target, W, framing, **options):
        used[audio.sample_rate] = (framing, options["noise"])
        return real(audio, target, W, framing, **options)

    monkeypatch.setattr(command, "enhance_file", recorder)
    soundfile.write(tmp_path / "noise.wav", 0.05 * rng.standard_normal(22050 * 2), 22050, subtype="FLOAT")
    for rate in (8000, 48000):
        soundfile.write(tmp_path / f"in{rate}.wav", 0.1 * rng.standard_normal(rate // 5), rate, subtype="PCM_16")
    result = run(["enhance", tmp_path / "in8000.wav", tmp_path / "in48000.wav", "--out-dir", tmp_path / "out",
                  "--noise-sample", tmp_path / "noise.wav", "--iterations", 2])
    assert result.exit_code == 0 and result.stderr == "", result.stderr  # 0.2 s inputs: enhanced with the sample
    for rate, framing in ((8000, features.NARROWBAND), (48000, WIDE)):
        used_framing, model = used[rate]
        assert used_framing == framing and model.W_noise.shape == (1, framing.n_bins, 5)
        sample = load_audio(tmp_path / "noise.wav", sample_rate=framing.sample_rate).samples
        expected = learn_noise(lambda: iter((features.magnitude(sample, framing=framing),)), 5)
        np.testing.assert_allclose(model.floor, expected.floor, rtol=1e-10)
        np.testing.assert_allclose(model.W_noise, expected.W_noise, rtol=1e-6, atol=1e-12)
        assert soundfile.info(tmp_path / "out" / f"in{rate}.wav").frames == rate // 5


def test_a_short_file_above_the_dictionary_rate_is_written_unchanged_with_its_upper_band(tmp_path, rng):
    """0.3 s at 48 kHz is 11 frames of the 16 kHz dictionary, fewer than 4 per noise atom: the input comes back."""
    clean, noisy = _fricative_test_signal(rng, 48000, seconds=0.3)
    soundfile.write(tmp_path / "short.wav", noisy, 48000, subtype="PCM_16")
    result = run(["enhance", tmp_path / "short.wav", "-o", tmp_path / "out.wav"])
    assert result.exit_code == 0, result.stderr
    assert "too short" in result.stderr and "(11 frames, 0.30 s" in result.stderr, result.stderr
    np.testing.assert_array_equal(soundfile.read(tmp_path / "out.wav", dtype="int16")[0],
                                  soundfile.read(tmp_path / "short.wav", dtype="int16")[0])


def test_evaluate_enhance_signal_keeps_the_upper_band_as_enhance_does(tmp_path, rng):
    from sepsti.commands.evaluate import enhance_signal

    clean, noisy = _fricative_test_signal(rng, 48000, seconds=2.0)
    soundfile.write(tmp_path / "noisy.wav", noisy, 48000, subtype="FLOAT")
    assert run(["enhance", tmp_path / "noisy.wav", "-o", tmp_path / "out.flac", "--iterations", 10]).exit_code == 0
    written, _ = soundfile.read(tmp_path / "out.flac")
    speech = enhance_signal(noisy, 48000, load_dictionary(wideband_dictionary_path()), max_iter=10)
    np.testing.assert_allclose(speech, written, rtol=0, atol=1.01 / 32768)  # FLAC's 16-bit rounding
    assert abs(10 * np.log10(_band_energy(speech, 48000, 8000) / _band_energy(clean, 48000, 8000))) < 3.0


def test_networks_that_lower_every_band_lower_the_band_above_as_much(tmp_path, rng):
    """Band-gain networks that all predict the mask's floor take every band of the mask there (agreed, and in every
    frame a lowering of the speech gate's size); the upper band follows: its output is the floor times the upper
    band (the correction's ratio over the top band times the separation's share there), in `enhance` and in
    `evaluate` alike (without the ratio it keeps 0.88 of its power here)."""
    from sepsti.commands.evaluate import enhance_signal
    from sepsti.dictionary import save_dictionary
    from test_denoise import _constant_band_gains

    clean, noisy = _fricative_test_signal(rng, 48000, seconds=2.0)
    upper = noisy - resample(resample(noisy, 48000, 16000), 16000, 48000, length=len(noisy))
    shipped = load_dictionary(wideband_dictionary_path())
    lowering = shipped._replace(band_gains=_constant_band_gains([np.log(MASK_FLOOR)] * 2))
    speech = enhance_signal(noisy, 48000, lowering, max_iter=10)
    above = _band_energy(speech, 48000, 9000, 22000) / _band_energy(upper, 48000, 9000, 22000)
    assert above == pytest.approx(MASK_FLOOR ** 2, rel=0.05)
    save_dictionary(tmp_path / "lowering.npz", lowering)
    soundfile.write(tmp_path / "noisy.wav", noisy, 48000, subtype="FLOAT")
    assert run(["enhance", tmp_path / "noisy.wav", "-o", tmp_path / "out.wav", "--iterations", 10, "--dictionary",
                tmp_path / "lowering.npz"]).exit_code == 0
    np.testing.assert_allclose(soundfile.read(tmp_path / "out.wav")[0], speech, rtol=0, atol=1.01 / 32768)


def test_shipped_dictionary_trained_on_train_speakers_only():
    from pathlib import Path

    from sepsti.corpora import wideband

    data = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "wideband"
    if not wideband.is_wideband_corpus(data):
        pytest.skip("wideband corpus not found at ../shared/data/wideband")
    splits = wideband.split_of(wideband.read_manifest(data))
    files = load_dictionary(wideband_dictionary_path()).files
    speakers = {name.split("-")[0] for name in files}
    assert files and {splits[speaker] for speaker in speakers} == {"train"}


def test_upper_band_gain_steps_where_the_top_bands_speech_share_does(rng):
    """Gains from a mask of known share: the enhanced signal is left at zero, so what comes out is the gain
    times the upper band (the input minus ``resample_poly`` down to 16 kHz and back, computed here on its own).

    Frames 0 .. k-1 are all noise (gain MASK_FLOOR); from frame k on, the speech share is 1 in three of every
    four bins of TOP_BAND (4-7.6 kHz of the 16 kHz dictionary: bins with n_fft/4 <= bin <= 0.475 n_fft) and 0
    in the rest, and in every bin below (unit magnitudes): the gain is ``Σ S / Σ (S + N)`` over the top band
    = (its speech bins) / (its bins). Frame j is centred on input sample j · hop · 3 (hop 256 at 16 kHz, 768
    at 48 kHz), the gain linear in between: the step spans samples (k-1) · 768 .. k · 768 exactly."""
    from scipy.signal import resample_poly

    rate, frames, k = 48000, 70, 30
    y = 0.1 * rng.standard_normal(rate)
    upper = y - resample_poly(resample_poly(y, 1, 3), 3, 1)
    bins = np.arange(WIDE.n_bins)
    top = (bins >= WIDE.n_fft / 4) & (bins <= 0.475 * WIDE.n_fft)
    assert np.count_nonzero(top) == 231  # bins 256 .. 486
    share = np.zeros((WIDE.n_bins, frames))
    share[top & (bins % 4 != 0), k:] = 1.0
    gain = np.count_nonzero(top & (bins % 4 != 0)) / np.count_nonzero(top)  # 173 / 231
    pieces = [np.zeros(size) for size in (1000, 4096, 17, 30000, 20000)]  # more than the input: the rest is zero
    band = bandwidth.UpperBand(lambda: _pieces(y, [7000]), rate, len(y), WIDE)
    band.add_mask(share[:, :k + 3], 1.0 - share[:, :k + 3])
    band.add_mask(share[:, k + 3:], 1.0 - share[:, k + 3:])
    out = np.concatenate([band.apply(piece) for piece in pieces])[:len(y)]
    hop = 768
    samples = np.arange(len(y))
    expected = np.where(samples <= (k - 1) * hop, MASK_FLOOR,
                        np.where(samples >= k * hop, gain,
                                 MASK_FLOOR + (gain - MASK_FLOOR) * (samples - (k - 1) * hop) / hop))
    np.testing.assert_allclose(out, expected * upper, rtol=0, atol=1e-12)
    # the upper band's power after the step: the gain squared
    after = slice(k * hop, len(y))
    assert np.sum(out[after] ** 2) / np.sum(upper[after] ** 2) == pytest.approx(gain ** 2, rel=1e-9)


@pytest.mark.parametrize("floor", [MASK_FLOOR, 10.0 ** (-10 / 20), 1.0])
def test_the_upper_band_of_noise_alone_is_lowered_to_the_mask_floor_it_is_given(rng, floor):
    """``--max-reduction`` sets the mask's floor, which the enhancer hands to ``add_mask``: frames that are all noise
    give the upper band (the input minus ``resample_poly`` down to 16 kHz and back) that floor as its gain, not
    the default MASK_FLOOR. The enhanced band is left at zero, so what comes out is the floor times the upper band."""
    from scipy.signal import resample_poly

    rate, frames = 48000, 70
    y = 0.1 * rng.standard_normal(rate)
    upper = y - resample_poly(resample_poly(y, 1, 3), 3, 1)
    band = bandwidth.UpperBand(lambda: _pieces(y, [7000]), rate, len(y), WIDE)
    band.add_mask(np.zeros((WIDE.n_bins, frames)), np.ones((WIDE.n_bins, frames)), floor)
    out = np.concatenate([band.apply(piece) for piece in (np.zeros(20000), np.zeros(len(y) - 20000))])
    np.testing.assert_allclose(out, floor * upper, rtol=0, atol=1e-12)


def test_the_upper_band_is_lowered_as_far_as_the_correction_lowers_the_top_band(rng):
    """A speech share of 1/2 in every bin; the correction lowers the top band's mask in frames 0-29 (to a fifth in
    its lower 116 bins, whose mixture is three times as loud, kept in its upper 115: the mean weighted by the mixture
    falls to (3 · 116 · 0.2 + 115) / (3 · 116 + 115) of it), raises it in frames 30-49 (not carried upward), is not
    yet reported for frames 50-69 (the enhanced band is left at zero: what comes out is the gain times the upper
    band, the input minus resample_poly down to 16 kHz and back)."""
    from scipy.signal import resample_poly

    rate, frames = 48000, 70
    y = 0.1 * rng.standard_normal(rate)
    upper = y - resample_poly(resample_poly(y, 1, 3), 3, 1)
    bins = np.arange(WIDE.n_bins)
    top = np.flatnonzero((bins >= WIDE.n_fft / 4) & (bins <= 0.475 * WIDE.n_fft))  # bins 256 .. 486
    lower = top[:len(top) // 2 + 1]  # 116 bins of 231: the halves weighted 3 · 116 against 115
    magnitude = np.ones((WIDE.n_bins, 50))
    magnitude[lower] = 3.0
    mask = np.full((WIDE.n_bins, 50), 0.5)
    corrected = mask.copy()
    corrected[lower, :30] *= 0.2
    corrected[:, 30:] = 1.0
    band = bandwidth.UpperBand(lambda: _pieces(y, [7000]), rate, len(y), WIDE)
    band.add_mask(np.full((WIDE.n_bins, frames), 0.5), np.full((WIDE.n_bins, frames), 0.5))
    band.add_correction(mask[:, :20], corrected[:, :20], magnitude[:, :20])
    band.add_correction(mask[:, 20:], corrected[:, 20:], magnitude[:, 20:])
    out = np.concatenate([band.apply(piece) for piece in (np.zeros(9000), np.zeros(len(y) - 9000))])
    lowered = (3 * 116 * 0.2 + 115) / (3 * 116 + 115)
    frame_gains = 0.5 * np.concatenate([np.full(30, lowered), np.ones(40)])
    gain = np.interp(np.arange(len(y)), np.arange(frames) * 768, frame_gains)
    np.testing.assert_allclose(out, gain * upper, rtol=0, atol=1e-12)


def test_upper_band_gain_is_interpolated_between_frame_centres_a_fraction_of_a_sample_apart(rng):
    """At 44.1 kHz frame j of the 16 kHz dictionary's enhancer (hop 256 at 16 kHz) is centred on input sample
    j · 256 · 44100 / 16000 = j · 705.6, not on a whole number of samples: gains alternating between 1 and the
    floor, frame by frame, are interpolated linearly between those centres (the enhanced band is left at zero, so
    what comes out is the gain times the upper band: the input minus resample_poly down by 160 / 441 and back)."""
    from scipy.signal import resample_poly

    rate, frames = 44100, 70
    y = 0.1 * rng.standard_normal(rate)
    upper = y - resample_poly(resample_poly(y, 160, 441), 441, 160)[:len(y)]
    frame_gains = np.where(np.arange(frames) % 2 == 0, 1.0, MASK_FLOOR)
    band = bandwidth.UpperBand(lambda: _pieces(y, [5000]), rate, len(y), WIDE)
    band.add_mask(frame_gains * np.ones((WIDE.n_bins, 1)), (1.0 - frame_gains) * np.ones((WIDE.n_bins, 1)))
    out = np.concatenate([band.apply(piece) for piece in (np.zeros(7001), np.zeros(len(y) - 7001))])
    gain = np.interp(np.arange(len(y)), np.arange(frames) * 705.6, frame_gains)
    np.testing.assert_allclose(out, gain * upper, rtol=0, atol=1e-12)


def test_an_input_the_enhancer_computed_no_frames_for_is_given_back(rng):
    """An all-zero input: the enhancer computes no frames and records no gains, and its upper band is silent; the
    enhanced pieces come back unchanged."""
    rate = 48000
    band = bandwidth.UpperBand(lambda: _pieces(np.zeros(rate), [7000]), rate, rate, WIDE)
    pieces = [rng.standard_normal(size) for size in (0, 1000, rate - 1000)]
    for piece in pieces:
        np.testing.assert_array_equal(band.apply(piece), piece)


def test_the_top_band_takes_in_its_upper_edge(rng):
    """With a 640-point window (a dictionary trained at 10 kHz) bin 304 lies exactly at TOP_BAND's upper edge,
    0.475 of the window's rate: it is part of the top band, bins 160 .. 304. Speech in every bin of it and noise of
    the same magnitude in bin 304 alone give the gain 145 / 146 (the enhanced band is left at zero: what comes out is
    the gain times the upper band, the input minus resample_poly down to 10 kHz and back)."""
    from scipy.signal import resample_poly

    framing = features.Framing(10000, 640, 320)
    rate = 20000
    y = 0.1 * rng.standard_normal(rate // 2)
    upper = y - resample_poly(resample_poly(y, 1, 2), 2, 1)
    speech = np.zeros((framing.n_bins, 70))
    speech[160:305] = 1.0
    noise = np.zeros_like(speech)
    noise[304] = 1.0
    band = bandwidth.UpperBand(lambda: _pieces(y, [4000]), rate, len(y), framing)
    band.add_mask(speech, noise)
    out = band.apply(np.zeros(len(y)))
    np.testing.assert_allclose(out, 145 / 146 * upper, rtol=0, atol=1e-12)
