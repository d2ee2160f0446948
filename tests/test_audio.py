"""Application audio: resampling by exact ratios, the one-frame check, atomic writing."""

import os

import numpy as np
import pytest
import soundfile

from sepsti.core.errors import ParameterError
from sepsti.audio import load_audio, output_format, resample, validate_frames, write_audio


@pytest.mark.parametrize("orig, target", [(16000, 8000), (44100, 8000), (8000, 22050), (11025, 8000)])
def test_resample_length_and_tone(orig, target):
    n = orig  # one second
    t = np.arange(n) / orig
    tone = 0.5 * np.sin(2 * np.pi * 440.0 * t)
    out = resample(tone, orig, target)
    assert len(out) == int(np.ceil(n * target / orig))
    expected = 0.5 * np.sin(2 * np.pi * 440.0 * np.arange(len(out)) / target)
    middle = slice(len(out) // 10, -len(out) // 10)  # away from the filter's edge transients
    np.testing.assert_allclose(out[middle], expected[middle], atol=5e-3)


def test_resample_round_trip_keeps_length_and_band(rng):
    # Band-limited signal (below 4 kHz): 8 kHz -> 44.1 kHz -> 8 kHz is near the identity.
    t = np.arange(8000) / 8000
    y = sum(0.1 * np.sin(2 * np.pi * f * t + p) for f, p in zip((200, 900, 2500), rng.uniform(0, 6, 3)))
    up = resample(y, 8000, 44100)
    back = resample(up, 44100, 8000, length=len(y))
    assert len(back) == len(y)
    np.testing.assert_allclose(back[400:-400], y[400:-400], atol=5e-3)


def test_resample_same_rate_is_identity_and_length_pads(rng):
    y = rng.uniform(-1, 1, 1000)
    np.testing.assert_array_equal(resample(y, 8000, 8000), y)
    np.testing.assert_array_equal(resample(y, 8000, 8000, length=1200)[1000:], np.zeros(200))
    np.testing.assert_array_equal(resample(y, 8000, 8000, length=10), y[:10])
    assert not np.any(resample(np.zeros(4410), 44100, 8000))


def test_resample_rejects_bad_rates():
    from sepsti.audio import Resampler

    for orig, target in ((0, 8000), (8000, 0), (-8000, 8000), (8000, -16000)):
        with pytest.raises(ParameterError, match=rf"sample rate: {orig} -> {target} Hz; rates must be positive"):
            resample(np.zeros(10), orig, target)
        with pytest.raises(ParameterError, match="rates must be positive"):
            Resampler(orig, target, 10)


def test_validate_frames():
    validate_frames(np.zeros(512), 8000)
    with pytest.raises(ParameterError, match=r"x.wav: audio shorter than one frame \(63.9 ms; at least 64 ms"):
        validate_frames(np.zeros(511), 8000, name="x.wav")


def test_load_audio_resamples_downmixes_and_keeps_original_shape(tmp_path, rng):
    stereo = rng.uniform(-0.5, 0.5, (16000, 2))
    soundfile.write(tmp_path / "s.wav", stereo, 16000, subtype="FLOAT")
    recording = load_audio(tmp_path / "s.wav", sample_rate=8000)
    assert recording.sample_rate == 16000 and recording.length == 16000
    assert len(recording.samples) == 8000
    np.testing.assert_allclose(recording.samples, resample(stereo.mean(axis=1), 16000, 8000), atol=1e-6)  # float32 file


def test_load_audio_too_short_after_resampling(tmp_path):
    soundfile.write(tmp_path / "short.wav", np.zeros(1000), 16000)  # 500 samples at 8 kHz
    with pytest.raises(ParameterError, match="short.wav: audio shorter than one frame"):
        load_audio(tmp_path / "short.wav", sample_rate=8000)


def test_load_audio_passes_reader_errors(tmp_path):
    (tmp_path / "empty.wav").write_bytes(b"")
    with pytest.raises(ParameterError, match="empty.wav: empty file"):
        load_audio(tmp_path / "empty.wav", sample_rate=8000)


@pytest.mark.parametrize("rate", [3999, 400000])
def test_load_audio_refuses_a_rate_outside_the_accepted_ones(tmp_path, rng, rate):
    soundfile.write(tmp_path / "r.wav", rng.uniform(-0.5, 0.5, 4000), rate, subtype="FLOAT")
    with pytest.raises(ParameterError, match=rf"r.wav: sample rate {rate} Hz is outside 4000..384000 Hz"):
        load_audio(tmp_path / "r.wav", sample_rate=8000)


def test_inspect_input_with_a_frame_length_refuses_a_file_shorter_than_a_frame_at_the_processing_rate(tmp_path, rng):
    """1000 samples at 16 kHz are 500 at 8 kHz, fewer than a frame of 512: refused as load_audio refuses them."""
    from sepsti.audio import inspect_input

    soundfile.write(tmp_path / "short.wav", rng.uniform(-0.5, 0.5, 1000), 16000, subtype="FLOAT")
    assert inspect_input(tmp_path / "short.wav", sample_rate=8000).num_samples == 500
    assert inspect_input(tmp_path / "short.wav", sample_rate=8000, n_fft=500).num_samples == 500
    for read in (lambda: inspect_input(tmp_path / "short.wav", sample_rate=8000, n_fft=512),
                 lambda: load_audio(tmp_path / "short.wav", sample_rate=8000)):
        with pytest.raises(ParameterError, match=r"short.wav: audio shorter than one frame \(62.5 ms; at least 64 ms = "
                                                 r"512 samples at 8000 Hz are needed\)"):
            read()


def test_output_format():
    assert output_format("a.wav") == ("WAV", "PCM_16")
    assert output_format("a.FLAC") == ("FLAC", "PCM_16")
    assert output_format("a.ogg") == ("OGG", "VORBIS")
    # the input's sample format where the output's format holds it
    assert output_format("a.wav", "PCM_24") == ("WAV", "PCM_24")
    assert output_format("a.wav", "FLOAT") == ("WAV", "FLOAT")
    assert output_format("a.flac", "PCM_24") == ("FLAC", "PCM_24")
    assert output_format("a.flac", "FLOAT") == ("FLAC", "PCM_16")
    assert output_format("a.wav", "VORBIS") == ("WAV", "PCM_16")
    assert output_format("a.wav", "ULAW") == ("WAV", "ULAW")
    # a codec's stream is not kept even where libsndfile claims the container holds it
    assert output_format("a.wav", "MPEG_LAYER_III") == ("WAV", "PCM_16")
    assert output_format("a.wav", "IMA_ADPCM") == ("WAV", "PCM_16")
    assert output_format("a.mp3", "PCM_16") == ("MP3", "MPEG_LAYER_III")
    # extensions whose format libsndfile names otherwise
    assert output_format("a.aif") == ("AIFF", "PCM_16") and output_format("a.snd") == ("AU", "PCM_16")
    assert output_format("a.oga") == ("OGG", "VORBIS") and output_format("a.opus") == ("OGG", "OPUS")
    for bad in ("a.xyz", "noextension"):
        with pytest.raises(ParameterError, match="cannot write audio with extension"):
            output_format(bad)


@pytest.mark.parametrize("name, rate, channels, fragment", [
    ("a.ogg", 384000, 1, "cannot hold 384000 Hz (Vorbis holds at most 192000 Hz)"),  # libvorbis crashes there
    ("a.ogg", 8000, 256, "at most 255"), ("a.opus", 44100, 1, "Opus holds 8000, 12000, 16000, 24000, 48000 Hz"),
    ("a.mp3", 96000, 1, "MP3 holds 8000, 11025"), ("a.mp3", 8000, 3, "3 channels (MP3 files hold at most 2)"),
    ("a.flac", 96001, 1, "in steps of 10 Hz"), ("a.flac", 8000, 9, "at most 8"),
    ("a.htk", 44100, 1, "would say 44247 Hz"), ("a.htk", 8000, 2, "at most 1"), ("a.wve", 44100, 1, "8000 Hz"),
    ("a.svx", 96000, 1, "at most 65535 Hz"), ("a.mpc2k", 65536, 1, "at most 65535 Hz"), ("a.voc", 8000, 3, "at most 2"),
    ("a.avr", 8000, 3, "at most 2"), ("a.ircam", 8000, 257, "at most 256"),
    ("a.sd2", 8000, 1, "resource fork"), ("a.sds", 8000, 1, "drops"), ("a.xi", 44100, 1, "no sample rate"),
    ("a.raw", 8000, 1, "headerless samples"),  # written, and sepsti could not read its own output
])
def test_output_format_refuses_what_the_format_cannot_hold(tmp_path, name, rate, channels, fragment):
    """Refused before anything is written: libsndfile would crash, refuse after the work, or write another rate, a
    file it cannot read back or fewer samples."""
    import re

    from sepsti.audio import open_output

    with pytest.raises(ParameterError, match=re.escape(fragment)):
        output_format(name, sample_rate=rate, channels=channels)
    with pytest.raises(ParameterError, match=re.escape(fragment)), open_output(tmp_path / name, rate,
                                                                              channels=channels):
        pass
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name, rate", [("a.ogg", 192000), ("a.flac", 65535), ("a.mpc2k", 65535), ("a.svx", 65535),
                                        ("a.flac", 96010)])
def test_rates_at_the_limits_a_format_holds_are_accepted_and_come_back(tmp_path, name, rate):
    """Vorbis holds at most 192000 Hz, FLAC any rate up to 65535 Hz, MPC2K and SVX at most 65535 Hz: those rates
    themselves are written, and read back at the rate; so is a FLAC rate above 65535 Hz in steps of 10 Hz."""
    from sepsti.audio import open_output

    with open_output(tmp_path / name, rate) as output:
        output.write(0.1 * np.sin(0.01 * np.arange(2001)))
    assert soundfile.info(tmp_path / name).samplerate == rate


def test_every_output_format_accepts_comes_back_as_written(tmp_path):
    """Each extension, with sample formats kept or not, at rates and channel counts output_format accepts: the file
    reads back at its rate, with its channels and every sample (an odd length: AIFF and VOC files of one byte per
    sample, and 24-bit PAF ones, would change it; they get 16-bit samples)."""
    extensions = ["wav", "aiff", "au", "avr", "caf", "flac", "htk", "ircam", "mat4", "mat5", "mp3", "mpc2k", "nist",
                  "ogg", "opus", "paf", "pvf", "rf64", "svx", "voc", "w64", "wavex", "wve"]
    accepted = 0
    for extension in extensions:
        for like in (None, "PCM_U8", "ULAW", "PCM_24"):
            for rate in (4000, 8000, 11025, 44100, 65536, 96001, 200000):  # not libvorbis's crash
                for channels in (1, 3):
                    path = tmp_path / f"out.{extension}"
                    try:
                        fmt, subtype = output_format(path, like, sample_rate=rate, channels=channels)
                    except ParameterError:
                        continue
                    signal = 0.1 * np.sin(0.01 * np.arange(2001))[:, None] * np.arange(1, channels + 1)
                    soundfile.write(path, signal, rate, subtype=subtype, format=fmt)
                    info = soundfile.info(path)
                    assert (info.samplerate, info.channels, info.frames) == (rate, channels, 2001), \
                        (extension, like, rate, channels)
                    accepted += 1
    assert accepted > 200
    assert output_format("a.aiff", "ULAW") == output_format("a.aiff", "PCM_S8") == ("AIFF", "PCM_16")
    assert output_format("a.voc", "PCM_U8") == ("VOC", "PCM_16")
    assert output_format("a.paf", "PCM_24") == ("PAF", "PCM_16")


def test_an_output_opened_at_another_rate_is_refused(tmp_path, monkeypatch):
    """Should libsndfile open a file at another rate than asked (XI files are always 44100 Hz), nothing is written."""
    from sepsti import audio

    monkeypatch.setattr(audio, "output_format", lambda *args, **options: ("XI", "DPCM_16"))
    with pytest.raises(ParameterError, match=r"out\.xi: libsndfile writes XI files at 44100 Hz, not 8000 Hz"):
        write_audio(tmp_path / "out.xi", np.zeros(100), 8000)
    assert os.listdir(tmp_path) == []


def test_write_audio_pcm16_atomic_and_clipped(tmp_path, rng):
    y = rng.uniform(-1, 1, 4000)
    y[0], y[1] = 1.7, -3.0
    write_audio(tmp_path / "out.wav", y, 16000)
    assert os.listdir(tmp_path) == ["out.wav"]
    info = soundfile.info(tmp_path / "out.wav")
    assert (info.samplerate, info.subtype, info.frames) == (16000, "PCM_16", 4000)
    back, _ = soundfile.read(tmp_path / "out.wav")
    assert back[0] > 0.999 and back[1] == -1.0  # saturated, not wrapped
    np.testing.assert_allclose(back[2:], y[2:], atol=1 / 32768)


@pytest.mark.parametrize("subtype, step", [("PCM_16", 2 ** -15), ("PCM_24", 2 ** -23), ("PCM_32", 2 ** -31),
                                           ("PCM_U8", 2 ** -7), ("ULAW", 0.025), ("ALAW", 0.025), ("FLOAT", None)])
def test_samples_beyond_full_scale_saturate_and_are_counted(tmp_path, subtype, step):
    """Integer and companded outputs saturate samples beyond full scale and count them; float outputs keep them."""
    # libsndfile alone wraps μ-law and A-law samples beyond full scale around to the other sign
    from sepsti.audio import open_output

    y = np.array([0.5, 1.0, 1.0001, 1.05, 1.5, 2.0, -0.5, -1.0, -1.0001, -1.05, -1.5, -2.0])
    with open_output(tmp_path / "out.wav", 8000, like=subtype) as output:
        output.write(y)
    assert soundfile.info(tmp_path / "out.wav").subtype == subtype
    back, _ = soundfile.read(tmp_path / "out.wav")
    if step is None:
        assert output.clipped == 0
        np.testing.assert_allclose(back, y, rtol=1e-7)
    else:
        assert output.clipped == 8  # the samples of magnitude above 1
        np.testing.assert_allclose(back, np.clip(y, -1.0, 1.0), rtol=0, atol=step)


def test_write_audio_failure_leaves_nothing(tmp_path):
    with pytest.raises(ParameterError):
        write_audio(tmp_path / "out.xyz", np.zeros(10), 8000)
    target = tmp_path / "out.wav"
    target.write_bytes(b"old")
    for rate in (-5, 0):  # libsndfile refuses the rate
        with pytest.raises(ParameterError, match=r"out\.wav: cannot write it \(libsndfile"):
            write_audio(target, np.zeros(10), rate, overwrite=True)
        with pytest.raises(ParameterError, match=r"out\.flac: cannot write it \(libsndfile"):
            write_audio(tmp_path / "out.flac", np.zeros(10), rate)
    assert os.listdir(tmp_path) == ["out.wav"] and target.read_bytes() == b"old"


@pytest.mark.parametrize("orig, target", [(44100, 8000), (8000, 22050), (16000, 8000), (44101, 8000), (6000, 8000),
                                          (48000, 16000), (16000, 48000), (44100, 16000)])
def test_resampler_in_blocks_equals_resample_poly(rng, orig, target):
    from math import gcd

    from scipy.signal import firwin, resample_poly

    from sepsti.audio import Resampler, _lowpass, resample

    common = gcd(orig, target)
    up, down = target // common, orig // common
    num_taps, cutoff = 20 * max(up, down) + 1, 1.0 / max(up, down)
    # NumPy's exp, vectorised on AVX-512 CPUs, rounds some values otherwise than libm's, and the Kaiser window
    # (np.kaiser against SciPy's scipy.special.i0) then differs in its last bits: with the same taps the same
    # sums in the same order are bit-identical, with such taps a few roundings apart
    same_taps = np.array_equal(_lowpass(num_taps, cutoff), firwin(num_taps, cutoff, window=("kaiser", 5.0)))

    def in_blocks(signal, cuts):
        resampler = Resampler(orig, target, len(signal))
        return np.concatenate([*(resampler.push(block) for block in np.split(signal, cuts)), resampler.finish()])

    def assert_as_scipy(out, expected):
        if same_taps:
            np.testing.assert_array_equal(out, expected)
        else:
            assert out.shape == expected.shape
            np.testing.assert_allclose(out, expected, rtol=0, atol=64 * np.finfo(float).eps * np.max(np.abs(x)))

    x = rng.standard_normal(20000)
    cuts = np.sort(rng.integers(0, len(x) + 1, 12))
    out = in_blocks(x, cuts)
    assert_as_scipy(out, resample_poly(x, up, down))
    np.testing.assert_array_equal(out, resample(x, orig, target))  # in blocks as in one piece, to the bit
    # several channels at once: each as resample_poly resamples it
    channels = np.stack([x, -0.5 * x[::-1]], axis=1)
    out = in_blocks(channels, cuts)
    assert_as_scipy(out, resample_poly(channels, up, down, axis=0))
    np.testing.assert_array_equal(out[:, 0], resample(x, orig, target))
    np.testing.assert_array_equal(out[:, 1], resample(-0.5 * x[::-1], orig, target))


@pytest.mark.parametrize("orig, target", [(44100, 16000), (16000, 16000)])
def test_a_resampler_refuses_more_or_fewer_samples_than_announced(rng, orig, target):
    """Samples beyond the announced length are refused at the push that brings them, not resampled or dropped; a
    finish before the last sample is refused, not padded with zeros."""
    from sepsti.audio import Resampler

    x = rng.uniform(-0.5, 0.5, 1000)
    resampler = Resampler(orig, target, 999)
    resampler.push(x[:500])
    with pytest.raises(ParameterError, match=r"^resampler: more than the announced 999 samples pushed$"):
        resampler.push(x[500:])
    resampler = Resampler(orig, target, 1000)
    resampler.push(x[:999])
    with pytest.raises(ParameterError, match=r"^resampler: 999 of 1000 samples pushed$"):
        resampler.finish()


def test_validate_sample_rate():
    from sepsti.audio import validate_sample_rate

    for rate in (4000, 8000, 11025, 22050, 44100, 44101, 48000, 96000, 384000):
        assert validate_sample_rate(rate, 8000) == rate
    for rate, why in ((1, "outside 4000..384000"), (400000, "outside"), (96001, "no short ratio")):
        with pytest.raises(ParameterError, match=why):
            validate_sample_rate(rate, 8000, name="x.wav")
    # reduced terms of at most MAX_RATIO_TERM (50000), the processing rate's as well as the file's
    assert validate_sample_rate(50000, 49999) == 50000 and validate_sample_rate(49999, 50000) == 49999
    for rate, target, ratio in ((50001, 49999, "49999/50001"), (49999, 50001, "50001/49999"),
                                (8000, 50001, "50001/8000")):
        with pytest.raises(ParameterError, match=f"x.wav: sample rate {rate} Hz has no short ratio to {target} Hz "
                                                 f"\\({ratio}\\)"):
            validate_sample_rate(rate, target, name="x.wav")


def test_inspect_input_and_blocks_match_load_audio(tmp_path, rng, monkeypatch):
    from scipy.signal import resample_poly

    import sepsti.audio
    from sepsti.audio import input_blocks, inspect_input

    stereo = rng.uniform(-0.5, 0.5, (20000, 2))
    stereo[100, 0] = 1.5
    soundfile.write(tmp_path / "s.wav", stereo, 22050, subtype="FLOAT")
    monkeypatch.setattr(sepsti.audio, "BLOCK_SAMPLES", 777)
    audio = inspect_input(tmp_path / "s.wav", sample_rate=8000)
    whole = load_audio(tmp_path / "s.wav", sample_rate=8000)
    assert (audio.sample_rate, audio.length, audio.num_samples, audio.channels) == \
        (22050, 20000, len(whole.samples), 2)
    assert audio.peak == 1.5  # of the channels, not of their mean
    np.testing.assert_array_equal(np.concatenate(list(input_blocks(audio, sample_rate=8000))), whole.samples)
    channels = np.concatenate(list(input_blocks(audio, sample_rate=8000, downmix=False)))
    expected = resample_poly(stereo.astype(np.float32).astype(np.float64), 160, 441, axis=0)
    np.testing.assert_allclose(channels, expected, atol=1e-12)
    np.testing.assert_allclose(channels.mean(axis=1), whole.samples, atol=1e-12)


def test_write_audio_refuses_a_file_without_overwrite_and_counts_clipping(tmp_path):
    path = tmp_path / "o.wav"
    assert write_audio(path, np.array([0.5, 1.5, -2.0, 0.0]), 8000, overwrite=False) == 2
    with pytest.raises(ParameterError, match="o.wav: output exists; it was left as it is"):
        write_audio(path, np.zeros(4), 8000, overwrite=False)
    assert soundfile.read(path)[0][1] == pytest.approx(1.0, abs=1e-4)


def test_an_output_replaces_an_existing_file_only_when_asked(tmp_path):
    """Nothing the user owns is replaced unless asked: write_audio refuses an existing file by default (it replaced it
    before), before any work, and the writers replace it with ``overwrite=True``."""
    from sepsti.audio import open_output

    path = tmp_path / "o.wav"
    path.write_bytes(b"old")
    with pytest.raises(ParameterError, match="o.wav: output exists; it was left as it is"):
        write_audio(path, np.array([0.5, -0.25]), 8000)
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["o.wav"]
    assert write_audio(path, np.array([0.5, -0.25]), 8000, overwrite=True) == 0
    np.testing.assert_array_equal(soundfile.read(path)[0], [0.5, -0.25])
    with open_output(path, 8000, overwrite=True) as output:
        output.write(np.array([0.125, 0.75, -0.5]))
    np.testing.assert_array_equal(soundfile.read(path)[0], [0.125, 0.75, -0.5])
    assert os.listdir(tmp_path) == ["o.wav"]


def test_a_failed_audio_write_names_the_output(tmp_path, monkeypatch):
    """libsndfile's write error ("System error.", a full disk) becomes one line naming the output; nothing is left."""
    def fail(self, data):
        raise soundfile.LibsndfileError(2)

    monkeypatch.setattr(soundfile.SoundFile, "write", fail)
    with pytest.raises(ParameterError, match=r"out.wav: cannot write it \(libsndfile: System error\."):
        write_audio(tmp_path / "out.wav", np.zeros(100), 8000)
    assert os.listdir(tmp_path) == []


def test_samples_far_beyond_full_scale_are_refused(tmp_path, rng):
    """Float files up to MAX_PEAK are read; beyond it their squared magnitudes would overflow float32."""
    from sepsti.audio import MAX_PEAK, inspect_input

    y = rng.standard_normal(16000)
    y /= np.abs(y).max()
    for scale, refused in ((MAX_PEAK, False), (1e14, True)):
        path = tmp_path / f"scaled_{scale:g}.wav"
        soundfile.write(path, scale * y, 8000, subtype="DOUBLE")
        for read in (lambda: load_audio(path, sample_rate=8000), lambda: inspect_input(path, sample_rate=8000)):
            if refused:
                with pytest.raises(ParameterError, match="samples reach 1e\\+14, far beyond full scale"):
                    read()
            else:
                read()


def test_resample_to_a_length_pads_and_trims_the_samples_of_every_channel(rng):
    """(n, channels): the length is the samples'; the channels stay as they are."""
    stereo = rng.uniform(-0.5, 0.5, (1000, 2))
    whole = resample(stereo, 44100, 16000)
    assert whole.shape == (363, 2)
    np.testing.assert_array_equal(resample(stereo, 44100, 16000, length=400), np.r_[whole, np.zeros((37, 2))])
    np.testing.assert_array_equal(resample(stereo, 44100, 16000, length=300), whole[:300])
    np.testing.assert_array_equal(resample(stereo, 16000, 16000, length=1200), np.r_[stereo, np.zeros((200, 2))])


@pytest.mark.parametrize("length", [-3, 2.5, "300"])
def test_resample_to_a_length_that_is_not_a_count_is_refused(rng, length):
    """-3 cut three samples off the end; 2.5 and '300' met bare TypeErrors from the slicing."""
    with pytest.raises(ParameterError, match=rf"^length={length!r} must be an integer of at least 0$"):
        resample(rng.uniform(-0.5, 0.5, 1000), 8000, 16000, length=length)


@pytest.mark.parametrize("shape", [(2, 1000), (1, 3000), (4, 1100)])
def test_a_signal_given_channels_first_is_refused(rng, shape):
    """More channels than samples, or more than MAX_CHANNELS: a (channels, n) array, not n samples of channels."""
    from sepsti.audio import Resampler

    y = rng.uniform(-0.5, 0.5, shape)
    for orig in (44100, 16000):
        with pytest.raises(ParameterError, match=rf"resampler: shape \({shape[0]}, {shape[1]}\) reads as "
                                                 rf"{shape[1]} channels of {shape[0]} samples .* transpose it"):
            resample(y, orig, 16000)
    with pytest.raises(ParameterError, match="reads as .* channels"):
        Resampler(44100, 16000, shape[0]).push(y)
    assert resample(y.T, 44100, 16000).shape == (-(-shape[1] * 160 // 441), shape[0])


def test_a_short_signal_of_a_few_channels_is_resampled_but_one_of_more_is_refused_as_channels_first():
    """Fewer samples than channels reads as channels first only above FEW_CHANNELS channels."""
    from sepsti.audio import FEW_CHANNELS

    assert resample(np.zeros((0, 2)), 44100, 16000).shape == (0, 2)
    assert resample(np.zeros((1, 2)), 44100, 16000).shape == (1, 2)
    assert resample(np.zeros((3, 4)), 16000, 16000).shape == (3, 4)
    assert resample(np.zeros((1, FEW_CHANNELS)), 16000, 8000).shape == (1, FEW_CHANNELS)
    with pytest.raises(ParameterError, match=f"{FEW_CHANNELS + 1} channels of 1 samples"):
        resample(np.zeros((1, FEW_CHANNELS + 1)), 44100, 16000)


def test_check_layout_limits():
    """Up to MAX_CHANNELS channels, and up to as many channels as samples (above FEW_CHANNELS), are a signal's
    layout; one channel more, or a third axis, is refused."""
    from sepsti.audio import MAX_CHANNELS, check_layout

    check_layout((10, MAX_CHANNELS))
    check_layout((9, 9), 9)
    for shape, length in (((10, MAX_CHANNELS + 1), None), ((9, 10), 9), ((2, 3, 4), None), ((), None)):
        with pytest.raises(ParameterError, match=r"^x: shape \("):
            check_layout(shape, length, name="x")


@pytest.mark.parametrize("rate", [4000.9, True, np.True_, "8000", 8000.5, float("nan"), float("inf"), None])
def test_a_sample_rate_that_is_not_a_whole_number_is_refused(rate):
    """Not truncated (4000.9 was 4000 Hz, True 1 Hz, '8000' 8000 Hz): named and refused."""
    from sepsti.audio import Resampler, validate_sample_rate

    with pytest.raises(ParameterError, match=r"x.wav: sample rate .* is not a whole number of Hz"):
        validate_sample_rate(rate, 8000, name="x.wav")
    for orig, target, name in ((rate, 16000, "orig_sr"), (16000, rate, "target_sr")):
        with pytest.raises(ParameterError, match=f"{name}: sample rate .* is not a whole number of Hz"):
            Resampler(orig, target, 100)


def test_a_whole_sample_rate_given_as_a_float_is_the_integer(rng):
    from sepsti.audio import validate_sample_rate

    for rate in (16000.0, np.float64(16000.0), np.float32(16000.0), np.int32(16000)):
        assert validate_sample_rate(rate, 8000) == 16000 and type(validate_sample_rate(rate, 8000)) is int
    y = rng.uniform(-0.5, 0.5, 1000)
    np.testing.assert_array_equal(resample(y, 44100.0, np.float64(16000)), resample(y, 44100, 16000))
    with pytest.raises(ParameterError, match="44100.5 is not a whole number"):
        resample(y, 44100.5, 16000)


def test_a_whole_rate_given_as_a_float_or_a_0_d_array_reaches_the_frame_check(tmp_path, rng):
    from sepsti.audio import validate_sample_rate, whole_rate

    assert whole_rate(np.array(16000), "x") == 16000 and type(whole_rate(np.array(16000.0), "x")) is int
    with pytest.raises(ParameterError, match="x: sample rate 16000.5 is not a whole number"):
        whole_rate(np.array(16000.5), "x")
    assert len(validate_frames(np.zeros(2000), 16000.0)) == 2000
    with pytest.raises(ParameterError, match=r"at least 64 ms = 1024 samples at 16000 Hz"):
        validate_frames(np.zeros(1000), np.float64(16000))
    soundfile.write(tmp_path / "a.wav", rng.uniform(-0.5, 0.5, 4000), 8000, subtype="FLOAT")
    assert len(load_audio(tmp_path / "a.wav", sample_rate=16000.0).samples) == 8000
    with pytest.raises(ParameterError, match="target_sr: sample rate 8000.5 is not a whole number"):
        validate_sample_rate(16000, 8000.5)


@pytest.mark.parametrize("rate, n_fft", [(8000, 512), (16000, 1024), (22050, 1412)])
def test_load_audio_needs_a_frame_of_the_rate(tmp_path, rng, rate, n_fft):
    """One frame of the rate's framing (64 ms), not 512 samples at every rate; the caller may name another."""
    soundfile.write(tmp_path / "short.wav", rng.uniform(-0.5, 0.5, n_fft - 1), rate, subtype="FLOAT")
    soundfile.write(tmp_path / "frame.wav", rng.uniform(-0.5, 0.5, n_fft), rate, subtype="FLOAT")
    with pytest.raises(ParameterError, match=rf"short.wav: audio shorter than one frame \(.*; at least 64 ms = "
                                             rf"{n_fft} samples at {rate} Hz are needed\)"):
        load_audio(tmp_path / "short.wav", sample_rate=rate)
    assert len(load_audio(tmp_path / "frame.wav", sample_rate=rate).samples) == n_fft
    assert len(load_audio(tmp_path / "short.wav", sample_rate=rate, n_fft=n_fft // 2).samples) == n_fft - 1
    with pytest.raises(ParameterError, match=rf"at least 64 ms = {n_fft} samples at {rate} Hz"):
        validate_frames(np.zeros(n_fft - 1), rate)


@pytest.mark.parametrize("extension, like", [(".wav", None), (".wav", "FLOAT"), (".flac", None)])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_samples_that_are_not_finite_are_refused_and_nothing_is_written(tmp_path, extension, like, bad):
    """NaN was written as full scale (-1.0) in integer formats, kept in float ones, and not counted."""
    from sepsti.audio import open_output

    path = tmp_path / f"out{extension}"
    with pytest.raises(ParameterError, match=rf"out{extension}: 1 sample\(s\) to write are NaN or Inf \(in the "
                                             r"block from sample 3\)"):
        with open_output(path, 8000, like=like) as output:
            output.write(np.zeros(3))
            output.write(np.array([0.1, bad, 0.2]))
    with pytest.raises(ParameterError, match="2 sample"):
        write_audio(path, np.array([bad, 0.5, bad]), 8000)
    with pytest.raises(ParameterError, match=r"1 sample\(s\) to write are NaN or Inf \(in the block from sample 0\)"):
        write_audio(path, np.array([0.5, 0.25, bad]), 8000)  # the last sample too
    assert os.listdir(tmp_path) == []


def test_writing_onto_a_folder_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    from sepsti.audio import open_output

    (tmp_path / "out.wav").mkdir()
    monkeypatch.setattr(soundfile, "SoundFile", None)  # opening an output would fail otherwise
    for overwrite in (True, False):
        with pytest.raises(ParameterError, match="out.wav: output is a directory"):
            write_audio(tmp_path / "out.wav", np.zeros(10), 8000, overwrite=overwrite)
        with pytest.raises(ParameterError, match="out.wav: output is a directory"):
            with open_output(tmp_path / "out.wav", 8000, overwrite=overwrite):
                pass
    assert os.listdir(tmp_path) == ["out.wav"] and os.listdir(tmp_path / "out.wav") == []


def test_inspect_input_finds_the_peak_and_power_of_every_block_and_channel(tmp_path, rng, monkeypatch):
    """The peak and the mean square are those of the whole file as soundfile reads it, wherever the loud samples are:
    a peak in the last block and in the second channel is found (it is what refuses a file beyond MAX_PEAK), and
    the power is the mean over samples and channels (a sum divided by the samples alone is twice as large)."""
    import sepsti.audio
    from sepsti.audio import MAX_PEAK, inspect_input

    stereo = rng.uniform(-0.5, 0.5, (3 * 777 + 5, 2))
    stereo[-3, 1] = 1.75  # in the last block of 5 samples
    path = tmp_path / "s.wav"
    soundfile.write(path, stereo, 8000, subtype="DOUBLE")
    monkeypatch.setattr(sepsti.audio, "BLOCK_SAMPLES", 777)
    audio = inspect_input(path, sample_rate=8000)
    assert audio.peak == 1.75
    # 4664 squares summed in another order: at most about 4664 roundings of 1.1e-16 apart
    np.testing.assert_allclose(audio.power, np.mean(stereo ** 2), rtol=1e-12)
    stereo[-3, 1] = 1e14
    soundfile.write(path, stereo, 8000, subtype="DOUBLE")
    assert 1e14 > MAX_PEAK
    with pytest.raises(ParameterError, match=r"samples reach 1e\+14, far beyond full scale"):
        inspect_input(path, sample_rate=8000)
