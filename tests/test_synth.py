"""sepsti.corpora.synth: speech-like utterances, noise types with their spectral signatures, exact mixing, files."""

import errno
import hashlib
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import soundfile

from sepsti.core.errors import ParameterError
from sepsti.core.io import TEMPORARY_MARKER
from sepsti.core.random import stream
from sepsti.corpora import corpus_index, mixtures, synth
from sepsti.corpora.synth import (NOISE_TYPES, SAMPLE_RATE, clatter, corpus_speakers, make_speaker, mix, synth_noise,
                           synth_utterance, telephone_band, write_corpus)


def _band_power(y, low, high):
    spectrum = np.abs(np.fft.rfft(y)) ** 2
    frequencies = np.fft.rfftfreq(len(y), 1 / SAMPLE_RATE)
    return spectrum[(frequencies >= low) & (frequencies < high)].mean()


def _frame_energy_db(y, frame=256):
    frames = y[: len(y) // frame * frame].reshape(-1, frame)
    return 10 * np.log10(np.mean(frames ** 2, axis=1) + 1e-20)


def _pitch(y):
    """Median pitch (Hz) of the 10 loudest 64 ms frames, from the autocorrelation peak in 70-300 Hz."""
    frame = 512
    frames = y[: len(y) // frame * frame].reshape(-1, frame)
    loudest = frames[np.argsort(np.sum(frames ** 2, axis=1))[-10:]]
    lags = np.arange(SAMPLE_RATE // 300, SAMPLE_RATE // 70)
    estimates = []
    for x in loudest:
        x = x - x.mean()
        correlation = np.correlate(x, x, "full")[frame - 1:]
        estimates.append(SAMPLE_RATE / lags[np.argmax(correlation[lags])])
    return float(np.median(estimates))


def test_utterance_is_deterministic_and_scaled():
    speaker = make_speaker(stream(3, 0), "male")
    first = synth_utterance(stream(3, 1), speaker)
    second = synth_utterance(stream(3, 1), speaker)
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, synth_utterance(stream(3, 2), speaker))
    assert 1.8 <= len(first) / SAMPLE_RATE <= 3.8
    assert np.all(np.isfinite(first))
    assert np.sqrt(np.mean(first ** 2)) == pytest.approx(0.05)


@pytest.mark.parametrize("sex, low, high", [("male", 80, 165), ("female", 160, 265)])
def test_pitch_in_the_speaker_range(sex, low, high):
    pitches = [_pitch(synth_utterance(stream(5, index), make_speaker(stream(6, index), sex))) for index in range(3)]
    assert all(low <= pitch <= high for pitch in pitches), pitches


def test_utterance_has_syllables_and_pauses():
    y = synth_utterance(stream(1, 1), corpus_speakers(1)[2])
    energy = _frame_energy_db(y)
    # Silence at both ends and between words: a wide range of frame energies.
    assert energy.max() - np.percentile(energy, 5) > 35
    assert energy[0] < energy.max() - 35 and energy[-1] < energy.max() - 35
    # Syllabic modulation: within the sentence, most of the envelope's modulation is at 2-8 Hz.
    active = np.flatnonzero(energy > energy.max() - 30)
    envelope = 10 ** (energy[active[0]:active[-1] + 1] / 20)
    spectrum = np.abs(np.fft.rfft(envelope - envelope.mean())) ** 2
    rates = np.fft.rfftfreq(len(envelope), 256 / SAMPLE_RATE)
    syllabic = spectrum[(rates >= 2) & (rates <= 8)].sum() / spectrum[rates > 0.9].sum()
    assert syllabic > 0.5, syllabic


def test_speech_spectrum_falls_like_telephone_speech():
    y = np.concatenate([synth_utterance(stream(2, index), speaker)
                        for index, speaker in enumerate(corpus_speakers(2))])
    low, mid, high = _band_power(y, 300, 1000), _band_power(y, 1000, 2000), _band_power(y, 2500, 3400)
    assert low > 3 * mid > 3 * high
    # The telephone band removes what is below 150 Hz.
    assert _band_power(y, 20, 120) < 1e-3 * low


def test_corpus_speakers_follow_noizeus():
    speakers = corpus_speakers(0)
    assert [speaker.sex for speaker in speakers] == ["male", "male", "female", "female", "male", "female"]
    assert all(85 <= s.f0 <= 155 for s in speakers if s.sex == "male")
    assert all(165 <= s.f0 <= 255 for s in speakers if s.sex == "female")
    assert corpus_speakers(0) == speakers and corpus_speakers(1) != speakers


@pytest.fixture(scope="module")
def noises():
    n = 4 * SAMPLE_RATE
    return {kind: synth_noise(kind, n, stream(0, index)) for index, kind in enumerate(NOISE_TYPES)}


def test_noises_are_unit_rms_and_deterministic(noises):
    for kind, y in noises.items():
        assert y.shape == (4 * SAMPLE_RATE,) and np.all(np.isfinite(y))
        assert np.sqrt(np.mean(y ** 2)) == pytest.approx(1.0)
    np.testing.assert_array_equal(synth_noise("car", 1000, stream(9)), synth_noise("car", 1000, stream(9)))


def test_noise_spectra_differ_like_real_ones(noises):
    def tilt(y):  # dB of 2.5-3.4 kHz relative to 300-1000 Hz, per Hz
        return 10 * np.log10(_band_power(y, 2500, 3400) / _band_power(y, 300, 1000))

    tilts = {kind: tilt(y) for kind, y in noises.items()}
    assert abs(tilts["white"]) < 1.5, tilts
    assert -12 < tilts["pink"] < -4, tilts
    assert tilts["car"] < tilts["pink"] - 3 and tilts["car"] < -12, tilts
    assert tilts["babble"] < -8, tilts
    # Car noise is dominated by the low band.
    car = noises["car"]
    assert _band_power(car, 200, 600) > 10 * _band_power(car, 1500, 3400)


def test_street_and_babble_are_non_stationary(noises):
    spread = {kind: np.std(_frame_energy_db(y)) for kind, y in noises.items()}
    for stationary in ("white", "pink", "car"):
        assert spread[stationary] < 1.5, spread
    assert spread["street"] > 2 * spread["pink"] and spread["babble"] > 2 * spread["pink"], spread


@pytest.mark.parametrize("rate", [8000, 16000, 48000])
def test_clatter_is_clinks_between_1_5_and_7_khz_over_quiet_water(rate):
    """About four clinks a second, their partials in 1.5 kHz to min(7 kHz, 0.45 rate), the water 20 dB down."""
    rng = np.random.default_rng(3)
    y = clatter(10 * rate, rate, rng)
    assert y.shape == (10 * rate,) and abs(np.sqrt(np.mean(y ** 2)) - 1) < 0.01  # clinks unit RMS, water +0.5 %
    power = np.abs(np.fft.rfft(y)) ** 2
    frequency = np.fft.rfftfreq(len(y), 1 / rate)
    band = (frequency >= 1500) & (frequency <= min(7000, 0.45 * rate))
    assert power[band].sum() > 0.8 * power.sum()
    # clinks: 10 ms frames whose energy jumps tenfold over the frame before (about four a second)
    energy = np.sum(y[:len(y) // (rate // 100) * (rate // 100)].reshape(-1, rate // 100) ** 2, axis=1)
    onsets = np.sum(energy[1:] > 10 * energy[:-1])
    assert 15 <= onsets <= 60, onsets
    np.testing.assert_array_equal(y, clatter(10 * rate, rate, np.random.default_rng(3)))


def test_unknown_noise_type():
    with pytest.raises(ParameterError, match="unknown noise type"):
        synth_noise("airport", 100, stream(0))
    with pytest.raises(ParameterError, match="positive number"):
        synth_noise("white", 0, stream(0))


def test_mix_sets_the_energy_ratio(rng):
    clean, noise = rng.standard_normal(1000), 3 * rng.standard_normal(1000)
    for snr in (-5, 0, 7.5):
        scaled = mix(clean, noise, snr)
        assert 10 * np.log10(np.sum(clean ** 2) / np.sum(scaled ** 2)) == pytest.approx(snr)


def test_telephone_band_keeps_the_voice_band():
    t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
    for frequency, kept in ((100, False), (1000, True), (3000, True), (3800, False)):
        y = telephone_band(np.sin(2 * np.pi * frequency * t))[2000:]
        assert (np.std(y) > 0.6) == kept, frequency


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("synth") / "corpus"
    settings = write_corpus(root, seed=7, utterances=["sp01", "sp21"], noises=["white", "street"], snrs=[0, 15])
    return root, settings


def test_layout_and_names(small_corpus):
    root, settings = small_corpus
    assert settings["files"] == 2 + 2 * 2 * 2
    assert (root / "clean" / "sp21.wav").is_file()
    assert (root / "noisy" / "street_15dB" / "sp21_street_sn15.wav").is_file()
    assert (root / "synth.json").is_file()
    info = soundfile.info(str(root / "noisy" / "white_0dB" / "sp01_white_sn0.wav"))
    assert (info.samplerate, info.subtype, info.channels) == (8000, "PCM_16", 1)
    index = corpus_index(root)
    assert index.ids == ["sp01", "sp21"] and index.noises == ["street", "white"] and index.snrs == [0, 15]
    assert not list(root.rglob(".*"))  # no temporary files left


def test_noise_is_exact_and_snr_is_the_label(small_corpus):
    root, _ = small_corpus
    loaded = mixtures(root, split="all")
    for mixture in loaded:
        # noisy - clean is an integer signal: the noise exactly as quantised, nothing clipped.
        np.testing.assert_array_equal(mixture.noise_signal * 32768, np.round(mixture.noise_signal * 32768))
        assert np.abs(mixture.noisy).max() < 1.0
        ratio = 10 * np.log10(np.sum(mixture.clean ** 2) / np.sum(mixture.noise_signal ** 2))
        assert ratio == pytest.approx(mixture.snr, abs=0.01), mixture.path
        level = 10 * np.log10(np.mean(mixture.clean ** 2))
        assert -30 < level < -24
    # Aligned: an utterance's noise at 0 and 15 dB is one signal scaled (a file paired with the wrong
    # clean one, or shifted, leaves speech in noisy - clean that does not scale with the SNR).
    by_key = {(m.utterance, m.noise, m.snr): m.noise_signal for m in loaded}
    for utterance, noise, snr in by_key:
        if snr == 0:
            loud, quiet = by_key[utterance, noise, 0], by_key[utterance, noise, 15]
            assert np.corrcoef(loud, quiet)[0, 1] > 0.9999
            assert np.sum(quiet ** 2) / np.sum(loud ** 2) == pytest.approx(10 ** -1.5, rel=1e-3)


def test_snrs_at_the_ends_of_the_range_keep_their_labels(tmp_path):
    root = tmp_path / "corpus"
    write_corpus(root, seed=3, utterances=["sp05"], noises=["white", "street"], snrs=[-20, 40])
    for mixture in mixtures(root, split="all"):
        ratio = 10 * np.log10(np.sum(mixture.clean ** 2) / np.sum(mixture.noise_signal ** 2))
        assert ratio == pytest.approx(mixture.snr, abs=0.05), mixture.path


def test_a_mixture_quantisation_takes_off_its_label_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(synth, "SNR_TOLERANCE", 0.001)
    with pytest.raises(ParameterError, match=r"sp05 with white at 40 dB: 16-bit samples hold it at "
                                             r"(39\.9|40\.0)\d\d dB with the utterance at -3\d"):
        write_corpus(tmp_path / "corpus", seed=3, utterances=["sp05"], noises=["white"], snrs=[-20, 40])


def test_same_seed_same_files_and_subsets_agree(small_corpus, tmp_path):
    root, _ = small_corpus
    again = tmp_path / "again"
    write_corpus(again, seed=7, utterances=["sp21"], noises=["white"], snrs=[15])
    for name in ("clean/sp21.wav", "noisy/white_15dB/sp21_white_sn15.wav"):
        assert (again / name).read_bytes() == (root / name).read_bytes(), name
    other = tmp_path / "other"
    write_corpus(other, seed=8, utterances=["sp21"], noises=["white"], snrs=[15])
    assert (other / "clean/sp21.wav").read_bytes() != (root / "clean/sp21.wav").read_bytes()


def test_refuses_to_clobber_and_overwrite_replaces(tmp_path):
    root = tmp_path / "c"
    write_corpus(root, seed=0, utterances=["sp02"], noises=["white"], snrs=[5])
    with pytest.raises(ParameterError, match="not empty; pass --overwrite"):
        write_corpus(root, seed=0, utterances=["sp03"], noises=["white"], snrs=[5])
    write_corpus(root, seed=0, utterances=["sp03"], noises=["pink"], snrs=[5], overwrite=True)
    index = corpus_index(root)
    assert index.ids == ["sp03"] and index.noises == ["pink"]


@pytest.mark.parametrize("options, why", [
    ({"utterances": 0}, "utterances=0"),
    ({"utterances": ["sp31"]}, "sp31 not in sp01..sp30"),
    ({"noises": ["airport"]}, "noise 'airport': unknown noise type"),
    ({"noises": []}, "noises: none given"),
    ({"snrs": ["loud"]}, "snrs="),
    ({"seed": -1}, "seed=-1"),
    ({"seed": 2 ** 32}, "seed=4294967296"),
    ({"snrs": [-21]}, r"^SNR -21 dB: outside -20\.\.40 dB"),  # not 'snrs=[-21]', which --snr does not spell
    ({"snrs": [0, 41, 50]}, r"^SNR 41, 50 dB: outside -20\.\.40 dB"),
    ({"snrs": []}, r"^snrs: none given"),
])
def test_bad_settings(tmp_path, options, why):
    with pytest.raises(ParameterError, match=why):
        write_corpus(tmp_path / "c", **options)
    assert not (tmp_path / "c").exists()


def test_root_that_is_a_file(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(ParameterError, match="not a folder"):
        write_corpus(path, utterances=1, noises=["white"], snrs=[0])


@pytest.mark.slow
def test_default_corpus_supports_nmf_enhancement(tmp_path):
    """A KL-NMF speech dictionary trained on sp01-sp20 separates sp21-sp30 from every noise type.

    The plain method (rank-64 dictionary, rank-5 noise, free activations, Wiener mask) gains
    0.4-1.4 dB SNR at 0 dB on real NOIZEUS noises; on this corpus it gains 0.6-1.8 dB.
    """
    from sepsti.features import istft, stft, training_matrix

    from sepsti.corpora import clean_signals

    root = tmp_path / "corpus"
    settings = write_corpus(root, seed=0)
    assert settings["files"] == 30 + 30 * len(NOISE_TYPES) * 4
    rng = np.random.default_rng(0)
    train = training_matrix([y for _, y, _ in clean_signals(root)])
    assert train.shape[0] == 257 and 1500 < train.shape[1] < 2100
    rank, eps = 64, 1e-9

    def kl_nmf(V, W, H, num_fixed, iterations):
        for _ in range(iterations):
            H *= (W.T @ (V / (W @ H + eps))) / (W.sum(axis=0)[:, None] + eps)
            update = ((V / (W @ H + eps)) @ H.T) / (H.sum(axis=1)[None, :] + eps)
            W[:, num_fixed:] *= update[:, num_fixed:]
        return W, H

    speech, _ = kl_nmf(train, rng.uniform(0.5, 1.5, (257, rank)) * train.mean(),
                       rng.uniform(0.5, 1.5, (rank, train.shape[1])), 0, 150)
    gains = {}
    for mixture in mixtures(root, snrs=[0]):
        spectrogram = stft(mixture.noisy)
        V = np.abs(spectrogram)
        W = np.hstack([speech, rng.uniform(0.5, 1.5, (257, 5)) * V.mean()])
        W, H = kl_nmf(V, W, rng.uniform(0.5, 1.5, (rank + 5, V.shape[1])), rank, 80)
        speech_part, noise_part = speech @ H[:rank], W[:, rank:] @ H[rank:]
        estimate = istft(speech_part / (speech_part + noise_part + eps) * spectrogram, len(mixture.noisy))

        def snr(estimate):
            return 10 * np.log10(np.sum(mixture.clean ** 2) / np.sum((mixture.clean - estimate) ** 2))

        gains.setdefault(mixture.noise, []).append(snr(estimate) - snr(mixture.noisy))
    mean_gains = {noise: float(np.mean(values)) for noise, values in gains.items()}
    assert all(gain > 0.3 for gain in mean_gains.values()), mean_gains
    # Stationary broadband noise is the easiest to separate, babble (speech-like) the hardest.
    assert mean_gains["white"] > 1.0 and mean_gains["white"] > mean_gains["babble"], mean_gains


def _tree(root):
    return {path.relative_to(root).as_posix(): path.read_bytes() if path.is_file() else None
            for path in sorted(root.rglob("*"))}


def test_overwrite_refuses_a_folder_it_did_not_write(tmp_path):
    """A copy of a real corpus (clean/, noisy/, notes) is never emptied by --overwrite."""
    root = tmp_path / "noizeus"
    (root / "clean").mkdir(parents=True)
    (root / "noisy" / "car_5dB").mkdir(parents=True)
    (root / "clean" / "sp01.wav").write_bytes(b"real speech")
    (root / "clean" / "notes.txt").write_text("mine")
    (root / "noisy" / "car_5dB" / "sp01_car_sn5.wav").write_bytes(b"real mixture")
    before = _tree(root)
    with pytest.raises(ParameterError, match="not a corpus written by `sepsti corpus synth` .no synth.json"):
        write_corpus(root, utterances=["sp01"], noises=["white"], snrs=[0], overwrite=True)
    assert _tree(root) == before
    (root / "synth.json").write_text('{"generator": "something else"}')
    before = _tree(root)
    with pytest.raises(ParameterError, match="synth.json is not its settings file"):
        write_corpus(root, utterances=["sp01"], noises=["white"], snrs=[0], overwrite=True)
    assert _tree(root) == before


@pytest.mark.parametrize("intruder", ["clean/notes.txt", "noisy/white_5dB/sp09_white_sn5.wav", "extra/a.wav",
                                      "README", f"clean/.notes.txt{TEMPORARY_MARKER}1.x"])
def test_overwrite_refuses_files_it_did_not_write_and_touches_nothing(tmp_path, intruder):
    """The last intruder is the temporary file of another program's output being written beside the corpus: only
    temporaries of the corpus's own files are taken for an interrupted run's."""
    root = tmp_path / "c"
    write_corpus(root, seed=0, utterances=["sp02"], noises=["white"], snrs=[5])
    (root / intruder).parent.mkdir(parents=True, exist_ok=True)
    (root / intruder).write_text("the user's")
    before = _tree(root)
    shown = "extra/" if intruder.startswith("extra/") else intruder  # a foreign folder is named, not searched
    with pytest.raises(ParameterError, match=f"holds 1 file.*did not write .{shown}.*--overwrite replaces only"):
        write_corpus(root, seed=1, utterances=["sp03"], noises=["pink"], snrs=[0], overwrite=True)
    assert _tree(root) == before


def test_overwrite_refuses_a_corpus_folder_replaced_by_a_link_and_writes_nothing_through_it(tmp_path):
    """clean/ made a link to the user's recordings: the link is not the corpus's folder, and the run would write
    its clean/sp02.wav through it, over the user's file of that name."""
    root = tmp_path / "c"
    write_corpus(root, seed=0, utterances=["sp02"], noises=["white"], snrs=[5])
    mine = tmp_path / "mine"
    (root / "clean").rename(mine)
    (mine / "sp02.wav").write_bytes(b"the user's own recording")
    (root / "clean").symlink_to(mine, target_is_directory=True)
    before, theirs = _tree(root), _tree(mine)
    with pytest.raises(ParameterError, match=r"holds 1 file.*did not write \(clean/\)"):
        write_corpus(root, seed=0, utterances=["sp02"], noises=["white"], snrs=[5], overwrite=True)
    assert _tree(root) == before and _tree(mine) == theirs


def test_overwrite_refuses_edited_files(tmp_path):
    root = tmp_path / "c"
    write_corpus(root, seed=0, utterances=["sp02"], noises=["white"], snrs=[5])
    (root / "clean" / "sp02.wav").write_bytes(b"edited by hand")
    before = _tree(root)
    with pytest.raises(ParameterError, match="1 file.*changed since.*clean/sp02.wav"):
        write_corpus(root, seed=0, utterances=["sp02"], noises=["white"], snrs=[5], overwrite=True)
    assert _tree(root) == before


def test_overwrite_replaces_an_interrupted_run_and_its_temporaries(tmp_path):
    import json

    root = tmp_path / "c"
    settings = write_corpus(root, seed=0, utterances=["sp02", "sp03"], noises=["white"], snrs=[5])
    assert settings["complete"] and set(settings["paths"]) == {
        "clean/sp02.wav", "clean/sp03.wav", "noisy/white_5dB/sp02_white_sn5.wav", "noisy/white_5dB/sp03_white_sn5.wav"}
    # as a run killed after its first files: the last file listed without its hash and not there, a temporary left
    marker = json.loads((root / "synth.json").read_text())
    marker.update(complete=False, paths={**marker["paths"], "clean/sp03.wav": None})
    (root / "synth.json").write_text(json.dumps(marker))
    (root / "clean" / "sp03.wav").unlink()
    (root / "clean" / f".sp03.wav{TEMPORARY_MARKER}999999.x.wav").write_bytes(b"half")
    write_corpus(root, seed=0, utterances=["sp21"], noises=["car"], snrs=[0], overwrite=True)
    assert sorted(path.relative_to(root).as_posix() for path in root.rglob("*")) == [
        "clean", "clean/sp21.wav", "noisy", "noisy/car_0dB", "noisy/car_0dB/sp21_car_sn0.wav", "synth.json"]


def test_overwrite_leaves_a_file_where_an_interrupted_run_never_wrote(tmp_path):
    """A run records each file's hash before writing it: a file at a path it lists without one is the user's (the
    marker once listed every path unhashed until the run ended, and --overwrite deleted whatever stood there)."""
    import json

    root = tmp_path / "c"
    write_corpus(root, seed=0, utterances=["sp02", "sp03"], noises=["white"], snrs=[5])
    marker = json.loads((root / "synth.json").read_text())
    marker.update(complete=False, paths={**marker["paths"], "clean/sp03.wav": None})
    (root / "synth.json").write_text(json.dumps(marker))
    (root / "clean" / "sp03.wav").write_bytes(b"the user's own recording")
    before = _tree(root)
    with pytest.raises(ParameterError, match=r"holds 1 file.*did not write \(clean/sp03\.wav\)"):
        write_corpus(root, seed=0, utterances=["sp21"], noises=["car"], snrs=[0], overwrite=True)
    assert _tree(root) == before


def test_an_interrupted_run_leaves_a_marker_with_the_hash_of_every_file_it_wrote(tmp_path, monkeypatch):
    import json

    _failing_writer(monkeypatch, fail_at=2, error=KeyboardInterrupt)
    root = tmp_path / "c"
    with pytest.raises(KeyboardInterrupt):
        write_corpus(root, seed=0, utterances=["sp02"], noises=["white"], snrs=[5])
    paths = json.loads((root / "synth.json").read_text())["paths"]
    written = [path.relative_to(root).as_posix() for path in root.rglob("*.wav")]
    assert written == ["clean/sp02.wav"] and all(paths.values())
    assert paths["clean/sp02.wav"] == hashlib.sha256((root / "clean/sp02.wav").read_bytes()).hexdigest()
    # reading it says that it is unfinished (corpus info and train used it without a word)
    with pytest.warns(UserWarning, match=r"a synthetic corpus whose writing was interrupted .*--overwrite"):
        assert corpus_index(root).ids == ["sp02"]
    monkeypatch.undo()
    write_corpus(root, seed=0, utterances=["sp02"], noises=["white"], snrs=[5], overwrite=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert corpus_index(root).ids == ["sp02"]


def test_overwrite_accepts_a_marker_from_before_file_lists(tmp_path):
    import json

    root = tmp_path / "c"
    write_corpus(root, seed=0, utterances=["sp02"], noises=["white"], snrs=[5])
    marker = json.loads((root / "synth.json").read_text())
    for key in ("paths", "complete"):
        del marker[key]
    (root / "synth.json").write_text(json.dumps(marker))
    write_corpus(root, seed=0, utterances=["sp03"], noises=["white"], snrs=[5], overwrite=True)
    assert corpus_index(root).ids == ["sp03"]


def _failing_writer(monkeypatch, fail_at, error=None):
    """Writing a file failing at its ``fail_at``-th call, as on a full disk, or with ``error``."""
    real, calls = Path.write_bytes, []

    def write_bytes(self, data):
        calls.append(self)
        if len(calls) == fail_at:
            raise error() if error else OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)


@pytest.mark.parametrize("existed", [False, True])
def test_a_file_that_cannot_be_written_is_named_and_nothing_of_the_run_is_left(tmp_path, monkeypatch, existed):
    root = tmp_path / "new" / "corpus"
    if existed:
        root.mkdir(parents=True)
    _failing_writer(monkeypatch, fail_at=4)  # sp01's three files are written, then sp02's clean file fails
    with pytest.raises(ParameterError, match=r"corpus/clean/sp02\.wav: cannot write it \(No space left on "
                                             r"device\)$"):
        write_corpus(root, seed=0, utterances=["sp01", "sp02"], noises=["white"], snrs=[0, 5])
    if existed:
        assert list(root.iterdir()) == []
    else:
        assert list(tmp_path.iterdir()) == []


def test_a_refused_mixture_leaves_nothing_of_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(synth, "SNR_TOLERANCE", 0.001)
    with pytest.raises(ParameterError, match="16-bit samples hold it"):
        write_corpus(tmp_path / "corpus", seed=3, utterances=["sp05"], noises=["white"], snrs=[-20, 40])
    assert list(tmp_path.iterdir()) == []


def test_mix_refuses_a_noise_of_another_length(rng):
    """A noise of 100 samples gave a 'mixture' of 100 samples for any clean."""
    clean = rng.standard_normal(1000)
    for noise in (rng.standard_normal(100), rng.standard_normal(1001)):
        with pytest.raises(ParameterError, match=rf"^noise: {len(noise)} samples, clean 1000; expected as many"):
            mix(clean, noise, 5)


def test_utterances_are_a_count_or_ids_and_a_refusal_names_a_few(tmp_path):
    with pytest.raises(ParameterError, match=r"^utterances=True: expected a count"):  # was taken as 1
        write_corpus(tmp_path / "c", utterances=True)
    with pytest.raises(ParameterError, match=r"^utterances: sp31, sp32, sp33 and 2 more not in sp01\.\.sp30$"):
        write_corpus(tmp_path / "c", utterances=[f"sp{n}" for n in range(31, 36)])


def test_mix_refuses_an_snr_that_is_not_a_finite_number(rng):
    """NaN gave a noise of NaNs and -inf an infinite one, silently."""
    clean, noise = rng.standard_normal((2, 1000))
    for snr in (np.nan, -np.inf, np.inf, True, "5"):
        with pytest.raises(ParameterError, match=rf"^snr={snr!r} must be a finite number"):
            mix(clean, noise, snr)
    assert np.isfinite(mix(clean, noise, -300)).all()


def test_clatter_refuses_what_it_cannot_make(rng):
    """Below 3334 Hz the clinks' band was empty ('high - low < 0'); n = 0 met a raw ValueError."""
    for n, rate, match in [(0, 8000, r"^n=0 must be an integer of at least 1"), (2.5, 8000, r"^n=2.5 must be"),
                           (6000, 3000, r"^rate=3000: at least 3334 Hz"), (100, 0, r"^rate=0 must be an integer")]:
        with pytest.raises(ParameterError, match=match):
            clatter(n, rate, rng)
    assert clatter(3334, 3334, rng).shape == (3334,)


def test_an_utterance_is_at_least_0_54_s_whatever_its_duration():
    """The duration asked is approximate: a short one gives the silences around and 0.3 s of speech at least."""
    speaker = corpus_speakers(0)[0]
    for seed in range(6):
        y = synth_utterance(stream(seed), speaker, duration=0.1)
        assert 0.54 <= len(y) / SAMPLE_RATE < 1.8
    for duration in (0, -1.0, np.nan, "1"):
        with pytest.raises(ParameterError, match=rf"^duration={duration!r} must be a positive number"):
            synth_utterance(stream(0), speaker, duration=duration)


def test_mix_of_a_silent_noise_is_silent(rng):
    """A noise of zeros has no level to set: zeros again, not the NaNs of 0 / 0."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaled = mix(rng.standard_normal(100), np.zeros(100), 5)
    np.testing.assert_array_equal(scaled, np.zeros(100))


def test_repeated_settings_are_written_once_and_the_ids_in_order(tmp_path):
    """Ids, noises and SNRs given twice or out of order name each file once: two utterances, one noise, one SNR
    are four files, the ids recorded in order."""
    settings = write_corpus(tmp_path / "c", seed=0, utterances=["sp21", "sp01", "sp21"], noises=["white", "white"],
                            snrs=[15, 15])
    assert (settings["ids"], settings["noises"], settings["snrs"], settings["files"]) == (["sp01", "sp21"], ["white"],
                                                                                         [15], 4)
    assert len(settings["paths"]) == 4


def test_utterances_are_spoken_by_the_speakers_noizeus_assigns(tmp_path):
    """sp01-sp10 male, sp11-sp20 female, sp21-sp25 male, sp26-sp30 female: the pitch of sp10, sp11, sp20, sp21, sp25
    and sp26 read back from the files lies in their sex's range (as in test_pitch_in_the_speaker_range)."""
    ids = ["sp10", "sp11", "sp20", "sp21", "sp25", "sp26"]
    write_corpus(tmp_path / "c", seed=0, utterances=ids, noises=["white"], snrs=[15])
    ranges = {"male": (80, 165), "female": (160, 265)}
    for utterance, sex in zip(ids, ["male", "female", "female", "male", "male", "female"]):
        pitch = _pitch(soundfile.read(tmp_path / "c" / "clean" / f"{utterance}.wav")[0])
        assert ranges[sex][0] <= pitch <= ranges[sex][1], (utterance, pitch)


def test_a_mixture_whose_peak_would_pass_full_scale_is_lowered_not_wrapped(tmp_path):
    """sp01 of seed 0 with white noise at -16 dB peaks at about 1.13 of full scale at its first level: the utterance
    is lowered, so that the noisy files read back are clean + noise, below full scale, the noise at -16 dB that at
    0 dB times 10 ** (16 / 20) to the two roundings (0.5 + 6.31 * 0.5 = 3.7 steps); a sample wrapped around by
    int16 would be 65536 steps off."""
    write_corpus(tmp_path / "c", seed=0, utterances=["sp01"], noises=["white"], snrs=[-16, 0])
    loud, quiet = mixtures(tmp_path / "c", split="all", snrs=[-16]) + mixtures(tmp_path / "c", split="all", snrs=[0])
    assert np.abs(loud.noisy).max() < 1.0
    steps = np.abs(loud.noise_signal - 10 ** (16 / 20) * quiet.noise_signal) * 32768
    assert steps.max() < 3.7
    ratio = 10 * np.log10(np.sum(loud.clean ** 2) / np.sum(loud.noise_signal ** 2))
    assert ratio == pytest.approx(-16, abs=0.05)


def test_a_failed_run_after_overwrite_leaves_the_folder_empty(tmp_path, monkeypatch):
    """--overwrite removes the previous corpus, files and folders (noisy/ after noisy/white_5dB/, deepest first);
    a run that then fails removes what it wrote, leaving nothing of either."""
    root = tmp_path / "c"
    write_corpus(root, seed=0, utterances=["sp02"], noises=["white"], snrs=[5])
    _failing_writer(monkeypatch, fail_at=2)
    with pytest.raises(ParameterError, match="cannot write it"):
        write_corpus(root, seed=0, utterances=["sp03"], noises=["pink"], snrs=[5], overwrite=True)
    assert list(root.iterdir()) == []


def test_clatter_clinks_four_times_a_second_below_0_45_of_the_rate():
    """60 s at 8 kHz: clinks start with probability 4 / rate per sample; at 2 a second there would be at most
    120 + 4 sqrt(120) = 164 of them, each at most one tenfold jump of a 10 ms frame's energy, and more than 170 are
    seen. The partials stop at 0.45 rate (3.6 kHz): above 3.7 kHz lie only the click and the water, under 3 % of the
    power."""
    rate = 8000
    y = clatter(60 * rate, rate, np.random.default_rng(0))
    energy = np.sum(y.reshape(-1, rate // 100) ** 2, axis=1)
    assert np.sum(energy[1:] > 10 * energy[:-1]) > 170
    power = np.abs(np.fft.rfft(y)) ** 2
    assert power[np.fft.rfftfreq(len(y), 1 / rate) > 3700].sum() < 0.03 * power.sum()


def test_a_refusal_of_four_unknown_ids_names_three_and_one_more(tmp_path):
    with pytest.raises(ParameterError, match=r"^utterances: sp31, sp32, sp33 and 1 more not in sp01\.\.sp30$"):
        write_corpus(tmp_path / "c", utterances=[f"sp{n}" for n in range(31, 35)])


def test_each_utterance_takes_its_own_stretch_of_a_noise_recording(small_corpus):
    """sp01 and sp21 of the small corpus: their street noises at 15 dB are different stretches of the 30 s
    recording, not one stretch from its start (which would correlate fully over their common length)."""
    root, _ = small_corpus
    first, second = (m.noise_signal for m in mixtures(root, split="all", noises=["street"], snrs=[15]))
    common = min(len(first), len(second))
    assert abs(np.corrcoef(first[:common], second[:common])[0, 1]) < 0.5
