"""``sepsti enhance``: outputs, rates and lengths, options reaching the core, and bad input."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile

from test_cli_train import (RATE, assert_one_line_error, no_temp_files, run, snapshot,  # noqa: F401
                            tiny_corpus, tiny_dictionary)


def _snr(reference, estimate):
    return 10 * np.log10(np.sum(reference ** 2) / np.sum((reference - estimate) ** 2))


@pytest.fixture
def workdir(tmp_path, tiny_corpus):
    """A folder with one noisy and one clean file copied from the tiny corpus."""
    source = tiny_corpus / "noisy" / "white_0dB" / "sp21_white_sn0.wav"
    (tmp_path / "noisy.wav").write_bytes(source.read_bytes())
    (tmp_path / "clean.wav").write_bytes((tiny_corpus / "clean" / "sp21.wav").read_bytes())
    return tmp_path


def _enhance(tiny_dictionary, *args):
    return run(["enhance", *args, "--dictionary", tiny_dictionary])


# --------------------------------------------------------------------------------------------
# success


def test_enhance_one_file(workdir, tiny_dictionary):
    before = (workdir / "noisy.wav").read_bytes()
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "out.wav")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""  # no progress bar for one file
    assert (workdir / "noisy.wav").read_bytes() == before
    info = soundfile.info(workdir / "out.wav")
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    clean, _ = soundfile.read(workdir / "clean.wav")
    assert (info.samplerate, info.frames, info.subtype, info.channels) == (RATE, len(noisy), "PCM_16", 1)
    enhanced, _ = soundfile.read(workdir / "out.wav")
    # The file holds the enhancer's output for the file's samples and the chosen dictionary, to 16-bit
    # rounding (how good that output is belongs to the enhancer's own tests and benchmark).
    from sepsti.denoise import denoise
    from sepsti.dictionary import load_dictionary

    expected = denoise(noisy, load_dictionary(tiny_dictionary).W)
    np.testing.assert_allclose(enhanced, np.clip(expected, -1, 1), rtol=0, atol=1.01 / 32768)
    assert np.sum(enhanced ** 2) < np.sum(noisy ** 2)
    assert _snr(clean, enhanced) > _snr(clean, noisy), (_snr(clean, enhanced), _snr(clean, noisy))
    assert no_temp_files(workdir)


def test_compressed_input_to_wav_is_16_bit(workdir, tiny_dictionary):
    """An MP3's stream format is not the output's (libsndfile claims WAV holds it, then cannot write it)."""
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    soundfile.write(workdir / "noisy.mp3", noisy, RATE, format="MP3")
    result = _enhance(tiny_dictionary, workdir / "noisy.mp3", "-o", workdir / "out.wav")
    assert result.exit_code == 0, result.stderr
    info = soundfile.info(workdir / "out.wav")
    assert (info.subtype, info.frames) == ("PCM_16", soundfile.info(workdir / "noisy.mp3").frames)


def test_other_rate_and_stereo_come_back_at_the_input_rate_length_and_channels(workdir, tiny_dictionary):
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    from sepsti.audio import resample

    at_22k = resample(noisy, RATE, 22050)[:-7]  # a length that is no exact multiple of the ratio
    stereo = np.stack([at_22k, 0.5 * at_22k], axis=1)
    soundfile.write(workdir / "stereo.flac", stereo, 22050)
    result = _enhance(tiny_dictionary, workdir / "stereo.flac", "-o", workdir / "out.flac")
    assert result.exit_code == 0, result.stderr
    info = soundfile.info(workdir / "out.flac")
    assert (info.samplerate, info.frames, info.channels, info.format) == (22050, len(at_22k), 2, "FLAC")
    out, _ = soundfile.read(workdir / "out.flac")
    np.testing.assert_allclose(out[:, 1], 0.5 * out[:, 0], rtol=0, atol=1.01 / 32768)  # the balance kept


@pytest.mark.parametrize("rate", [RATE, 16000])
def test_separate_channels_are_each_enhanced_as_a_file_of_its_own(workdir, tiny_dictionary, rate):
    """``--channels separate``: each channel of a file comes out as it does enhanced alone (two talkers'
    files on the left and right, at the dictionary's rate and at twice it, the band above included)."""
    from sepsti.audio import resample

    noisy, _ = soundfile.read(workdir / "noisy.wav")
    left = resample(noisy, RATE, rate)
    right = 0.7 * resample(np.roll(noisy, len(noisy) // 3)[::-1], RATE, rate)  # other sounds, other noise
    soundfile.write(workdir / "both.wav", np.stack([left, right], axis=1), rate, subtype="FLOAT")
    for name, signal in (("left", left), ("right", right)):
        soundfile.write(workdir / f"{name}.wav", signal, rate, subtype="FLOAT")
    result = _enhance(tiny_dictionary, workdir / "both.wav", workdir / "left.wav", workdir / "right.wav", "--out-dir",
                      workdir / "out", "--channels", "separate")
    assert result.exit_code == 0, result.stderr
    both, _ = soundfile.read(workdir / "out" / "both.wav")
    for channel, name in enumerate(("left", "right")):
        alone, _ = soundfile.read(workdir / "out" / f"{name}.wav")
        np.testing.assert_allclose(both[:, channel], alone, rtol=0, atol=1e-6)
    joint = _enhance(tiny_dictionary, workdir / "both.wav", "-o", workdir / "joint.wav", "--channels", "joint")
    assert joint.exit_code == 0, joint.stderr
    assert not np.allclose(soundfile.read(workdir / "joint.wav")[0], both, rtol=0, atol=1e-3)


@pytest.mark.parametrize("channels", ["separate", "auto"])
def test_a_channel_too_sparse_to_learn_from_is_kept_and_the_others_enhanced(workdir, tiny_dictionary, channels):
    """A right channel of digital silence but for 1 s of noise is written as it is, with one line naming it;
    the left one is enhanced as a file of its own would be (``auto`` takes the silent channel for another
    source)."""
    noisy = np.tile(soundfile.read(workdir / "noisy.wav")[0], 2)
    sparse = np.zeros_like(noisy)
    sparse[RATE:RATE + RATE // 2] = 0.05 * np.random.default_rng(4).standard_normal(RATE // 2)
    soundfile.write(workdir / "both.wav", np.stack([noisy, sparse], axis=1), RATE, subtype="FLOAT")
    soundfile.write(workdir / "left.wav", noisy, RATE, subtype="FLOAT")
    result = _enhance(tiny_dictionary, workdir / "both.wav", workdir / "left.wav", "--out-dir", workdir / "out",
                      "--channels", channels)
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Warning: {workdir / 'both.wav'}: channel 2: too little sound")
    assert lines[0].endswith("written unchanged")
    both, _ = soundfile.read(workdir / "out" / "both.wav")
    np.testing.assert_allclose(both[:, 0], soundfile.read(workdir / "out" / "left.wav")[0], rtol=0, atol=1e-6)
    assert not np.allclose(both[:, 0], noisy, rtol=0, atol=1e-3)
    np.testing.assert_array_equal(both[:, 1], soundfile.read(workdir / "both.wav")[0][:, 1])


def test_every_channel_too_sparse_to_learn_from_is_named_in_the_files_line(workdir, tiny_dictionary):
    """Two channels of three too sparse: the one line names both, each with its reason (the first alone passed
    before); the first channel is enhanced."""
    noisy = np.tile(soundfile.read(workdir / "noisy.wav")[0], 2)
    sparse = np.zeros_like(noisy)
    sparse[RATE:RATE + RATE // 2] = 0.05 * np.random.default_rng(4).standard_normal(RATE // 2)
    three = np.stack([noisy, sparse, 0.5 * sparse], axis=1)
    soundfile.write(workdir / "three.wav", three, RATE, subtype="FLOAT")
    result = _enhance(tiny_dictionary, workdir / "three.wav", "-o", workdir / "out.wav", "--channels", "separate")
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Warning: {workdir / 'three.wav'}: channel 2: too little sound")
    assert "; channel 3: too little sound" in lines[0] and lines[0].endswith("written unchanged"), lines[0]
    out, _ = soundfile.read(workdir / "out.wav")
    np.testing.assert_array_equal(out[:, 1:], soundfile.read(workdir / "three.wav")[0][:, 1:])
    assert not np.allclose(out[:, 0], noisy, rtol=0, atol=1e-3)


def test_auto_channels_separate_two_talkers_and_join_one_scene(workdir, tiny_dictionary):
    """``--channels auto`` (the default): two talkers who take turns, one on each channel, are enhanced each
    alone; one talker on two microphones (the second 0.4 ms later, 3 dB quieter) with one mask. Without the option
    each file comes out as with ``auto`` (a default of ``joint`` passed before)."""
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    clean, _ = soundfile.read(workdir / "clean.wav")
    half = len(noisy) // 2
    first, second = noisy.copy(), noisy.copy()
    first[half:] = (noisy - clean)[half:]   # the first talker speaks in the first half only,
    second[:half] = (noisy - clean)[:half]  # the second in the second half
    late = 0.7 * np.concatenate([np.zeros(3), noisy[:-3]])
    files = {"turns": np.stack([first, second], axis=1), "scene": np.stack([noisy, late], axis=1)}
    for name, signal in files.items():
        soundfile.write(workdir / f"{name}.wav", signal, RATE, subtype="FLOAT")
        for mode in ("auto", "joint", "separate", None):
            result = _enhance(tiny_dictionary, workdir / f"{name}.wav", "-o", workdir / f"{name}.{mode}.wav",
                              *(["--channels", mode] if mode else []))
            assert result.exit_code == 0, result.stderr
    same = {name: mode for name in files for mode in ("joint", "separate")
            if np.array_equal(soundfile.read(workdir / f"{name}.auto.wav")[0],
                              soundfile.read(workdir / f"{name}.{mode}.wav")[0])}
    assert same == {"turns": "separate", "scene": "joint"}
    for name in files:
        np.testing.assert_array_equal(soundfile.read(workdir / f"{name}.None.wav")[0],
                                      soundfile.read(workdir / f"{name}.auto.wav")[0])


def test_channels_share_one_mask(workdir, tiny_dictionary):
    """Each channel gets the same gains, so the output is linear across channels: a third channel that is
    the sum of the first two comes out as the sum of their outputs, also above the dictionary's band (11.025
    kHz). Channels in opposite phase do not cancel: two of them come out as one alone does."""
    from sepsti.audio import resample

    noisy, _ = soundfile.read(workdir / "noisy.wav")
    clean, _ = soundfile.read(workdir / "clean.wav")
    speech, noise = 0.5 * resample(clean, RATE, 11025), 0.5 * resample(noisy - clean, RATE, 11025)
    soundfile.write(workdir / "three.wav", np.stack([speech, noise, speech + noise], axis=1), 11025, subtype="FLOAT")
    soundfile.write(workdir / "one.wav", speech + noise, 11025, subtype="FLOAT")
    soundfile.write(workdir / "opposite.wav", np.stack([speech + noise, -speech - noise], axis=1), 11025,
                    subtype="FLOAT")
    for name in ("three", "one", "opposite"):
        result = _enhance(tiny_dictionary, workdir / f"{name}.wav", "-o", workdir / f"{name}.out.flac",
                          "--channels", "joint")
        assert result.exit_code == 0, result.stderr
    three, _ = soundfile.read(workdir / "three.out.flac")
    np.testing.assert_allclose(three[:, 2], three[:, 0] + three[:, 1], rtol=0, atol=2.01 / 32768)
    one, _ = soundfile.read(workdir / "one.out.flac")
    opposite, _ = soundfile.read(workdir / "opposite.out.flac")
    np.testing.assert_array_equal(opposite[:, 0], one)
    np.testing.assert_array_equal(opposite[:, 1], -one)


def test_all_zero_input_gives_all_zero_output(workdir, tiny_dictionary):
    soundfile.write(workdir / "zeros.wav", np.zeros(3000), RATE, subtype="PCM_16")
    result = _enhance(tiny_dictionary, workdir / "zeros.wav", "-o", workdir / "out.wav")
    assert result.exit_code == 0, result.stderr
    out, _ = soundfile.read(workdir / "out.wav")
    assert len(out) == 3000 and not np.any(out)


@pytest.mark.parametrize("kind", ["tone", "constant"])
def test_a_pure_tone_or_a_constant_is_enhanced_without_warnings(workdir, tiny_dictionary, kind, recwarn):
    """A pure tone or a constant (bins with next to no power beside a strong one): no warning, a finite output."""
    t = np.arange(3 * RATE) / RATE
    y = 0.5 * np.sin(2 * np.pi * 1000 * t) if kind == "tone" else np.full(t.size, 0.5)
    soundfile.write(workdir / "in.wav", y, RATE, subtype="PCM_16")
    result = _enhance(tiny_dictionary, workdir / "in.wav", "-o", workdir / "out.wav")
    assert result.exit_code == 0 and not result.stderr, result.stderr
    assert not [str(w.message) for w in recwarn], [str(w.message) for w in recwarn]
    out, _ = soundfile.read(workdir / "out.wav")
    assert np.isfinite(out).all() and len(out) == y.size


def test_several_files_into_a_new_folder_keep_names(workdir, tiny_corpus, tiny_dictionary):
    inputs = sorted((tiny_corpus / "noisy" / "hum_5dB").glob("*.wav"))
    before = snapshot(tiny_corpus)
    result = _enhance(tiny_dictionary, *inputs, "--out-dir", workdir / "new" / "out")
    assert result.exit_code == 0, result.stderr
    assert sorted(os.listdir(workdir / "new" / "out")) == sorted(path.name for path in inputs)
    assert result.stdout.count("wrote") == len(inputs)
    assert result.stderr == ""  # stderr is no terminal here: no progress bar in the log
    assert snapshot(tiny_corpus) == before
    for path in inputs:
        assert soundfile.info(workdir / "new" / "out" / path.name).frames == soundfile.info(path).frames


_PROCESS_FILE = None  # enhance's own, while a test replaces it with _dies_on_b


def _dies_on_b(audio, *arguments):
    """``process_file``, except that the worker given ``b.wav`` dies at once (as by the out-of-memory killer)."""
    if audio.path.name == "b.wav":
        os._exit(9)
    return _PROCESS_FILE(audio, *arguments)


def test_a_worker_that_dies_is_reported_in_one_line(workdir, tiny_dictionary, monkeypatch):
    """A worker killed mid-file gave 'internal failure: BrokenProcessPool: A process in the process pool was
    terminated abruptly while the future was running or pending.'"""
    import sepsti.commands.enhance
    from sepsti.core.processes import start_context

    if start_context().get_start_method() != "fork":
        pytest.skip("the replaced task reaches the workers only when they are forked")
    for name in "ab":
        (workdir / f"{name}.wav").write_bytes((workdir / "noisy.wav").read_bytes())
    monkeypatch.setattr(sys.modules[__name__], "_PROCESS_FILE", sepsti.commands.enhance.process_file)
    monkeypatch.setattr(sepsti.commands.enhance, "process_file", _dies_on_b)  # the workers fork after this
    result = _enhance(tiny_dictionary, workdir / "a.wav", workdir / "b.wav", "--out-dir", workdir / "out",
                      "--iterations", 5, "--jobs", 2)
    assert result.exit_code == 1
    assert result.stderr.endswith("Error: a worker process ended abruptly (killed, or out of memory?); the files "
                                  "written before it are complete; try fewer --jobs\n"), result.stderr
    written = [path.name for path in (workdir / "out").iterdir()] if (workdir / "out").exists() else []
    assert written in ([], ["a.wav"])  # nothing half-written


def test_jobs_give_the_outputs_and_lines_of_one_job(workdir, tiny_corpus, tiny_dictionary):
    """Files in worker processes: the same samples, the same lines in the same order (a file too short to learn
    from and a float file beyond full scale among them). One BLAS thread in this process too, as the command
    has when it starts NumPy itself: a second thread changes the last bits of the products."""
    from threadpoolctl import threadpool_limits

    noisy, _ = soundfile.read(workdir / "noisy.wav")
    soundfile.write(workdir / "short.wav", noisy[:RATE // 2], RATE, subtype="PCM_16")
    soundfile.write(workdir / "loud.wav", 20.0 * noisy, RATE, subtype="FLOAT")
    inputs = [*sorted((tiny_corpus / "noisy" / "hum_5dB").glob("*.wav"))[:3], workdir / "short.wav",
              workdir / "loud.wav"]
    results = {}
    for jobs in (1, 2, 0):
        with threadpool_limits(limits=1, user_api="blas"):
            results[jobs] = _enhance(tiny_dictionary, *inputs, "--out-dir", workdir / f"out{jobs}", "--iterations", 5,
                                     "--jobs", jobs)
        assert results[jobs].exit_code == 0, results[jobs].stderr
    for name in (path.name for path in inputs):
        one = soundfile.read(workdir / "out1" / name)[0]
        for jobs in (2, 0):
            np.testing.assert_array_equal(soundfile.read(workdir / f"out{jobs}" / name)[0], one)
    assert results[2].stdout.replace("out2", "out1") == results[1].stdout
    assert results[2].stderr.replace("out2", "out1") == results[1].stderr
    assert "short.wav: too short" in results[1].stderr


@pytest.mark.parametrize("environment", [None, "0"])
@pytest.mark.parametrize("where", ["command", "group"])
def test_progress_bar_on_request(workdir, tiny_corpus, tiny_dictionary, where, environment, monkeypatch):
    """``--progress`` asks for bars, whatever ``SEPSTI_PROGRESS`` says."""
    if environment is not None:
        monkeypatch.setenv("SEPSTI_PROGRESS", environment)
    inputs = sorted((tiny_corpus / "noisy" / "hum_5dB").glob("*.wav"))[:2]
    args = ["enhance", *inputs, "--out-dir", workdir / "out", "--dictionary", tiny_dictionary, "--iterations", 2]
    result = run(["--progress", *args] if where == "group" else [*args, "--progress"])
    assert result.exit_code == 0, result.stderr
    assert "enhance:" in result.stderr and "/2 " in result.stderr
    # and a bar over each file's seconds
    seconds = soundfile.info(inputs[0]).frames // soundfile.info(inputs[0]).samplerate
    assert f"{inputs[0].name}:" in result.stderr and f"0/{seconds} " in result.stderr, result.stderr


def test_with_several_jobs_only_the_bar_over_the_files_is_drawn(workdir, tiny_corpus, tiny_dictionary):
    """docs/enhance.md: with several jobs the bar over each file's seconds is not drawn (the workers' bars would mix
    on one line); the bar over the files is (each worker drawing its file's bar passed before)."""
    import subprocess
    import sys

    inputs = sorted((tiny_corpus / "noisy" / "hum_5dB").glob("*.wav"))[:2]
    result = subprocess.run([sys.executable, "-m", "sepsti", "enhance", *map(str, inputs), "--out-dir",
                             str(workdir / "out"), "--dictionary", str(tiny_dictionary), "--iterations", "2",
                             "--progress", "--jobs", "2"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "enhance:" in result.stderr, result.stderr
    assert not any(f"{path.name}:" in result.stderr for path in inputs), result.stderr


def test_lines_print_above_the_progress_bar(workdir, tiny_corpus, tiny_dictionary):
    """On a terminal (stdout and stderr the same) each line printed under the bar starts a line of its own, not
    after the bar; stdout alone holds just those lines."""
    import subprocess
    import sys

    inputs = sorted((tiny_corpus / "noisy" / "hum_5dB").glob("*.wav"))[:2]
    command = [sys.executable, "-m", "sepsti", "enhance", *map(str, inputs), "--out-dir", str(workdir / "out"),
               "--dictionary", str(tiny_dictionary), "--iterations", "2", "--progress"]
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert result.returncode == 0, result.stdout
    assert "enhance:" in result.stdout  # the bar was drawn
    shown = [line.split("\r")[-1] for line in result.stdout.splitlines() if "wrote " in line]  # what a terminal shows
    assert shown == [f"wrote {workdir / 'out' / path.name}" for path in inputs], result.stdout
    result = subprocess.run([*command, "--overwrite"], capture_output=True, text=True)
    assert result.returncode == 0 and "enhance:" in result.stderr, result.stderr
    assert result.stdout == "".join(f"wrote {workdir / 'out' / path.name}\n" for path in inputs)


def test_one_long_file_shows_its_progress_in_seconds(workdir, tiny_dictionary):
    """A bar over the file's seconds; none over the files, which are one (``--progress``: "over several files")."""
    noisy, rate = soundfile.read(workdir / "noisy.wav")
    soundfile.write(workdir / "long.wav", np.tile(noisy, 8), rate, subtype="PCM_16")
    seconds = 8 * len(noisy) // rate
    result = _enhance(tiny_dictionary, workdir / "long.wav", "-o", workdir / "out.wav", "--progress")
    assert result.exit_code == 0, result.stderr
    assert "long.wav:" in result.stderr and f"0/{seconds} " in result.stderr, result.stderr
    assert "enhance:" not in result.stderr and "/1 " not in result.stderr, result.stderr
    quiet = _enhance(tiny_dictionary, workdir / "long.wav", "-o", workdir / "out2.wav")
    assert quiet.exit_code == 0 and quiet.stderr == ""  # stderr is no terminal here


def test_the_bars_count_each_file_and_each_second_written_once(workdir, tiny_dictionary, monkeypatch):
    """The bar over a file's seconds ends at its whole seconds, the bar over the files at their number: each bar's
    steps add up to its total (the seconds written so far counted again at each step, a bar of 36/12, passed
    before)."""
    import sepsti.core.progress

    real = sepsti.core.progress.progress_bar
    steps = {}

    def recording(total, *, desc=None, **options):
        bar = real(total, desc=desc, **options)
        steps[desc] = (total, [])
        bar.update = steps[desc][1].append
        return bar

    monkeypatch.setattr(sepsti.core.progress, "progress_bar", recording)
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    soundfile.write(workdir / "long.wav", np.tile(noisy, 8), RATE, subtype="PCM_16")
    result = _enhance(tiny_dictionary, workdir / "long.wav", workdir / "noisy.wav", "--out-dir", workdir / "out",
                      "--iterations", 5)
    assert result.exit_code == 0, result.stderr
    bars = {desc: steps[desc] for desc in ("enhance", "long.wav", "noisy.wav")}
    assert {desc: (total, sum(counts)) for desc, (total, counts) in bars.items()} == {
        "enhance": (2, 2), "long.wav": (8 * len(noisy) // RATE,) * 2, "noisy.wav": (len(noisy) // RATE,) * 2}
    assert all(count > 0 for _, counts in bars.values() for count in counts)


def test_options_reach_the_enhancer(workdir, tiny_dictionary, monkeypatch):
    import sepsti.denoise
    from sepsti.dictionary import load_dictionary

    calls = []

    def recorder(blocks, num_samples, W, **options):
        calls.append((num_samples, W.shape, options))
        return (0.5 * block for block in blocks())

    monkeypatch.setattr(sepsti.denoise, "denoise_blocks", recorder)
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "out.wav",
                      "--noise-rank", 3, "--iterations", 17, "--seed", 4)
    assert result.exit_code == 0, result.stderr
    n = soundfile.info(workdir / "noisy.wav").frames
    dictionary = load_dictionary(tiny_dictionary)
    assert calls == [(n, dictionary.W.shape, {"noise_rank": 3, "max_iter": 17, "seed": 4, "chunk_frames": 1024,
                                              "framing": dictionary.framing, "mask_atoms": None, "band_gains": None})]
    out, _ = soundfile.read(workdir / "out.wav")
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    np.testing.assert_allclose(out, 0.5 * noisy, atol=1 / 32768)
    # a file of many channels goes in pieces of as many frames in all as a mono file's
    soundfile.write(workdir / "many.wav", np.repeat(noisy[:, None], 5, axis=1), RATE, subtype="PCM_16")
    calls.clear()
    assert _enhance(tiny_dictionary, workdir / "many.wav", "-o", workdir / "many.out.wav").exit_code == 0
    assert calls[0][2]["chunk_frames"] == 1024 // 5


def test_seed_gives_the_same_output(workdir, tiny_dictionary):
    for name in ("a.wav", "b.wav"):
        assert _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / name, "--seed", 2).exit_code == 0
    assert (workdir / "a.wav").read_bytes() == (workdir / "b.wav").read_bytes()


def test_overwrite_replaces(workdir, tiny_dictionary):
    (workdir / "out.wav").write_bytes(b"old")
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "out.wav", "--overwrite")
    assert result.exit_code == 0, result.stderr
    assert soundfile.info(workdir / "out.wav").frames > 0


def test_default_dictionary_is_used(workdir, monkeypatch, tiny_dictionary):
    """Without --dictionary an 8 kHz input gets the shipped 8 kHz dictionary (here replaced by the tiny one)."""
    import sepsti.dictionary

    chosen = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "chosen.wav")
    monkeypatch.setattr(sepsti.dictionary, "narrowband_dictionary_path", lambda: Path(tiny_dictionary))
    result = run(["enhance", workdir / "noisy.wav", "-o", workdir / "out.wav"])
    assert chosen.exit_code == 0 and result.exit_code == 0, result.stderr
    assert (workdir / "out.wav").read_bytes() == (workdir / "chosen.wav").read_bytes()


# --------------------------------------------------------------------------------------------
# bad input: exit 2, one line, nothing written, inputs untouched


def _write_bad(folder, kind):
    path = folder / f"bad_{kind}.wav"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "not-audio":
        path.write_bytes(b"RIFF? no, just text pretending to be a file\n" * 20)
    elif kind == "truncated":
        soundfile.write(path, np.zeros(4000), RATE, subtype="PCM_16")
        path.write_bytes(path.read_bytes()[:2000])
    elif kind == "zero-length":
        soundfile.write(path, np.zeros(0), RATE, subtype="PCM_16")
    elif kind == "nan":
        soundfile.write(path, np.r_[np.zeros(1000), np.nan], RATE, subtype="FLOAT")
    elif kind == "inf":
        soundfile.write(path, np.r_[np.zeros(1000), -np.inf], RATE, subtype="DOUBLE")
    elif kind == "directory":
        path.mkdir()
    return path


BAD_INPUTS = {
    "missing": "no such file", "directory": "is a directory", "empty": "empty file",
    "not-audio": "not a readable audio file", "truncated": "truncated", "zero-length": "zero-length",
    "nan": "NaN or Inf", "inf": "NaN or Inf",
}


@pytest.mark.parametrize("kind", BAD_INPUTS)
def test_bad_input_file(workdir, tiny_dictionary, kind):
    bad = _write_bad(workdir, kind) if kind != "missing" else workdir / "missing.wav"
    before = snapshot(workdir)
    result = _enhance(tiny_dictionary, bad, "-o", workdir / "out.wav")
    assert_one_line_error(result, bad.name, BAD_INPUTS[kind])
    assert snapshot(workdir) == before


@pytest.mark.parametrize("kind", ["truncated", "nan"])
def test_a_bad_third_file_stops_everything_before_any_output(workdir, tiny_corpus, tiny_dictionary, kind):
    good = sorted((tiny_corpus / "noisy" / "white_5dB").glob("*.wav"))[:2]
    bad = _write_bad(workdir, kind)
    before = snapshot(workdir)
    result = _enhance(tiny_dictionary, *good, bad, "--out-dir", workdir / "out")
    assert_one_line_error(result, bad.name)
    assert snapshot(workdir) == before
    assert not (workdir / "out").exists()
    (workdir / "existing").mkdir()
    result = _enhance(tiny_dictionary, *good, bad, "--out-dir", workdir / "existing")
    assert_one_line_error(result, bad.name)
    assert os.listdir(workdir / "existing") == []


def test_bad_outputs(workdir, tiny_dictionary):
    noisy = workdir / "noisy.wav"
    (workdir / "exists.wav").write_bytes(b"keep")
    cases = [
        (["-o", workdir / "exists.wav"], ("exists.wav", "--overwrite")),
        (["-o", noisy, "--overwrite"], ("also an input",)),
        (["-o", workdir / "clean.wav", "--noise-sample", workdir / "clean.wav", "--overwrite"], ("also an input",)),
        (["-o", workdir / "nofolder" / "o.wav"], ("does not exist",)),
        (["-o", workdir / "clean.wav" / "o.wav"], ("does not exist",)),  # folder is a file: unwritable
        (["-o", workdir], ("directory",)),
        (["-o", workdir / "o.xyz"], ("o.xyz", "extension")),
        (["--out-dir", workdir / "clean.wav"], ("not a directory",)),
        (["--out-dir", workdir], ("also an input",)),  # writes noisy.wav onto itself
        ([], ("-o OUT", "--out-dir")),
        (["-o", workdir / "a.wav", "--out-dir", workdir / "d"], ("exactly one",)),
    ]
    for options, fragments in cases:
        before = snapshot(workdir)
        assert_one_line_error(_enhance(tiny_dictionary, noisy, *options), *fragments)
        assert snapshot(workdir) == before, options


def test_an_empty_output_path_is_refused_as_such(workdir, tiny_dictionary, monkeypatch):
    """``-o ''`` said "Error: .: output is a directory"; ``--out-dir ''`` wrote into the working folder."""
    (workdir / "here").mkdir()
    monkeypatch.chdir(workdir / "here")
    before = snapshot(workdir)
    for option, noun in (("-o", "file"), ("--out-dir", "folder")):
        result = _enhance(tiny_dictionary, workdir / "noisy.wav", option, "")
        assert_one_line_error(result, f"'{option}'", f"an empty path; give a {noun} name")
        assert snapshot(workdir) == before and os.listdir(workdir / "here") == []


def test_two_inputs_need_out_dir_and_distinct_names(workdir, tiny_corpus, tiny_dictionary):
    a = tiny_corpus / "noisy" / "white_0dB" / "sp21_white_sn0.wav"
    (workdir / "sub").mkdir()
    (workdir / "sub" / "noisy.wav").write_bytes(a.read_bytes())
    before = snapshot(workdir)
    assert_one_line_error(_enhance(tiny_dictionary, a, workdir / "noisy.wav", "-o", workdir / "o.wav"),
                          "2 inputs", "--out-dir")
    assert_one_line_error(_enhance(tiny_dictionary, workdir / "noisy.wav", workdir / "sub" / "noisy.wav",
                                   "--out-dir", workdir / "out"), "both be written")
    assert snapshot(workdir) == before


def test_bad_dictionary(workdir, tiny_dictionary):
    from sepsti.dictionary import load_dictionary, save_dictionary

    good = load_dictionary(tiny_dictionary)
    (workdir / "corrupt.npz").write_bytes(tiny_dictionary.read_bytes()[:300])
    (workdir / "text.npz").write_bytes(b"not a dictionary")
    np.savez(workdir / "bins.npz", **{**_arrays(good), "W": np.ones((129, good.rank)), "n_fft": np.int64(256)})
    np.savez(workdir / "hop.npz", **{**_arrays(good), "hop_length": np.int64(128)})
    np.savez(workdir / "negative.npz", **{**_arrays(good), "W": -good.W})
    save_dictionary(workdir / "fine.npz", good)
    cases = {"corrupt.npz": "not a readable dictionary", "text.npz": "not a dictionary file",
             "bins.npz": "n_fft", "hop.npz": "hop_length=128", "negative.npz": "negative",
             "missing.npz": "no such file"}
    for name, fragment in cases.items():
        before = snapshot(workdir)
        result = run(["enhance", workdir / "noisy.wav", "-o", workdir / "out.wav", "--dictionary", workdir / name])
        assert_one_line_error(result, name, fragment)
        assert snapshot(workdir) == before
    result = run(["enhance", workdir / "noisy.wav", "-o", workdir / "fine.npz", "--dictionary", workdir / "fine.npz",
                  "--overwrite"])
    assert_one_line_error(result, "fine.npz")


def test_the_dictionary_is_never_an_output(workdir, tiny_dictionary):
    """A dictionary under an audio name (``load_dictionary`` reads any name) given as ``-o`` too, with
    ``--overwrite``: refused as an input before any work, the dictionary kept (replaced by the enhanced file
    passed before)."""
    (workdir / "speech.wav").write_bytes(tiny_dictionary.read_bytes())
    before = snapshot(workdir)
    result = run(["enhance", workdir / "noisy.wav", "-o", workdir / "speech.wav", "--dictionary",
                  workdir / "speech.wav", "--overwrite"])
    assert_one_line_error(result, "speech.wav", "also an input")
    assert snapshot(workdir) == before


def _arrays(dictionary):
    return {"W": dictionary.W, "rank": np.int64(dictionary.rank), "sample_rate": np.int64(dictionary.sample_rate),
            "n_fft": np.int64(dictionary.n_fft), "hop_length": np.int64(dictionary.hop_length),
            "window": np.str_(dictionary.window), "scale": np.float64(dictionary.scale),
            "prior_rate": np.float64(dictionary.prior_rate), "corpus": np.str_(dictionary.corpus),
            "files": np.array(dictionary.files), "iterations": np.int64(dictionary.iterations),
            "seed": np.int64(dictionary.seed), "version": np.str_(dictionary.version)}


# --------------------------------------------------------------------------------------------
# hostile input: bounded before work, races at the final rename, odd names, clipping


def test_an_output_that_appears_during_the_run_is_kept(workdir, tiny_dictionary, monkeypatch):
    import sepsti.denoise

    real = sepsti.denoise.denoise_blocks
    target = workdir / "out.wav"

    def racing(*args, **options):
        target.write_bytes(b"written by another program meanwhile")
        return real(*args, **options)

    monkeypatch.setattr(sepsti.denoise, "denoise_blocks", racing)
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", target, "--iterations", 2)
    assert_one_line_error(result, "out.wav", "created by another program", "--overwrite")
    assert target.read_bytes() == b"written by another program meanwhile"
    assert no_temp_files(workdir)
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", target, "--iterations", 2, "--overwrite")
    assert result.exit_code == 0, result.stderr
    assert soundfile.info(target).frames == soundfile.info(workdir / "noisy.wav").frames


@pytest.mark.parametrize("kind", ["enhanced", "shorter than a frame", "max-reduction 0", "digital silence"])
def test_an_output_that_appears_while_it_is_written_is_kept_whether_enhanced_or_copied(workdir, tiny_dictionary,
                                                                                      monkeypatch, kind):
    """Without --overwrite, a file another program puts at the output while it is being written is kept, for an
    output written unchanged (a copy of its input) as for an enhanced one; also for a file of digital silence, copied
    after the enhancer gave up on it (replaced passed before)."""
    import contextlib

    import sepsti.audio

    real = sepsti.audio.open_output
    target = workdir / "out.wav"

    @contextlib.contextmanager
    def racing(path, *args, **options):
        with real(path, *args, **options) as output:
            target.write_bytes(b"written by another program meanwhile")
            yield output

    monkeypatch.setattr(sepsti.audio, "open_output", racing)
    source, options = workdir / "noisy.wav", ["--iterations", 2]
    if kind == "shorter than a frame":
        source = workdir / "tiny.wav"
        soundfile.write(source, soundfile.read(workdir / "noisy.wav")[0][:RATE // 40], RATE, subtype="PCM_16")
    elif kind == "max-reduction 0":
        options = ["--max-reduction", "0"]
    elif kind == "digital silence":  # copied once the enhancer has found nothing to learn from
        source = workdir / "zeros.wav"
        soundfile.write(source, np.zeros(2 * RATE), RATE, subtype="PCM_16")
    result = _enhance(tiny_dictionary, source, "-o", target, *options)
    assert_one_line_error(result, "out.wav", "created by another program", "--overwrite")
    assert target.read_bytes() == b"written by another program meanwhile"
    assert no_temp_files(workdir)


@pytest.mark.parametrize("rate, fragment", [(1, "sample rate 1 Hz is outside 4000..384000"),
                                            (1_000_000, "outside"), (96001, "no short ratio")])
def test_sample_rates_that_would_blow_up_resampling(workdir, tiny_dictionary, rate, fragment):
    path = workdir / "odd.wav"
    soundfile.write(path, np.full(12000, 0.1), rate, subtype="PCM_16")
    before = snapshot(workdir)
    assert_one_line_error(_enhance(tiny_dictionary, path, "-o", workdir / "out.wav"), "odd.wav", fragment)
    assert snapshot(workdir) == before


def test_noise_rank_is_bounded_by_bins_and_frames(workdir, tiny_dictionary):
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "out.wav", "--noise-rank", 2000000)
    assert_one_line_error(result, "--noise-rank", "1<=x<=257", "enhance --help")
    # a dictionary of fewer bins (128-point frames, 65 bins): refused before the first output, not after it
    from sepsti.dictionary import load_dictionary, save_dictionary

    small = load_dictionary(tiny_dictionary)._replace(W=np.random.default_rng(0).uniform(size=(65, 4)), rank=4,
                                                      n_fft=128, hop_length=64, context=0)
    save_dictionary(workdir / "small.npz", small)
    (workdir / "second.wav").write_bytes((workdir / "noisy.wav").read_bytes())
    before = snapshot(workdir)
    result = run(["enhance", workdir / "noisy.wav", workdir / "second.wav", "--out-dir", workdir / "out",
                  "--dictionary", workdir / "small.npz", "--noise-rank", 100])
    assert_one_line_error(result, "--noise-rank 100: at most 65", "small.npz")
    assert snapshot(workdir) == before and not (workdir / "out").exists()


def test_a_noise_rank_of_exactly_the_dictionarys_bins_is_taken(workdir, tiny_dictionary):
    """At most the frequency bins: a dictionary of 65 bins takes ``--noise-rank 65`` (refusing it as above the bins
    passed before)."""
    from sepsti.dictionary import load_dictionary, save_dictionary

    small = load_dictionary(tiny_dictionary)._replace(W=np.random.default_rng(0).uniform(size=(65, 4)), rank=4,
                                                      n_fft=128, hop_length=64, context=0)
    save_dictionary(workdir / "small.npz", small)
    result = run(["enhance", workdir / "noisy.wav", "-o", workdir / "out.wav", "--dictionary", workdir / "small.npz",
                  "--noise-rank", 65])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"wrote {workdir / 'out.wav'}\n"
    assert soundfile.info(workdir / "out.wav").frames == soundfile.info(workdir / "noisy.wav").frames


@pytest.mark.parametrize("milliseconds, noise_rank, enhanced",
                         [(100, 5, False), (300, 5, False), (1000, 2, False), (1248, 5, False), (1249, 5, True),
                          (1550, 5, True), (1550, 13, False)])
def test_a_file_too_short_to_learn_from_is_written_unchanged(workdir, tiny_dictionary, milliseconds, noise_rank,
                                                             enhanced):
    """Under 1.25 s (41 frames), or fewer than 4 frames per noise atom: one line, the input; a lower rank does not
    help below 1.25 s, a higher one needs more frames (13 atoms: 52)."""
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    start = (len(noisy) - RATE * milliseconds // 1000) // 2  # from the middle: speech and noise
    short = noisy[start:start + RATE * milliseconds // 1000]
    soundfile.write(workdir / "short.wav", np.stack([short, -0.5 * short], axis=1), RATE, subtype="PCM_16")
    result = _enhance(tiny_dictionary, workdir / "short.wav", "-o", workdir / "out.wav", "--noise-rank", noise_rank)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == f"wrote {workdir / 'out.wav'}"
    same = np.array_equal(soundfile.read(workdir / "out.wav", dtype="int16")[0],
                          soundfile.read(workdir / "short.wav", dtype="int16")[0])
    if enhanced:
        assert result.stderr == "" and not same
        return
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Warning: ") and "short.wav" in lines[0], result.stderr
    assert "too short" in lines[0] and "written unchanged" in lines[0] and f"--noise-rank {noise_rank}" in lines[0]
    assert {2: "at least 41, 1.25 s", 5: "at least 41, 1.25 s", 13: "at least 52, 1.60 s"}[noise_rank] in lines[0]
    assert same


@pytest.mark.parametrize("rate, milliseconds, enhanced", [(6000, 1300, True), (16000, 1000, False)])
def test_a_file_at_another_rate_is_too_short_by_its_duration(workdir, tiny_dictionary, rate, milliseconds, enhanced):
    """1.25 s at any rate: its frames are counted at the dictionary's rate, where it is processed (1.3 s at 6 kHz
    written unchanged as 32 frames, or 1 s at 16 kHz enhanced from 64, passed before)."""
    from sepsti.audio import resample

    noisy, _ = soundfile.read(workdir / "noisy.wav")
    start = (len(noisy) - RATE * milliseconds // 1000) // 2
    short = resample(noisy[start:start + RATE * milliseconds // 1000], RATE, rate)
    soundfile.write(workdir / "short.wav", short, rate, subtype="PCM_16")
    result = _enhance(tiny_dictionary, workdir / "short.wav", "-o", workdir / "out.wav")
    assert result.exit_code == 0, result.stderr
    assert soundfile.info(workdir / "out.wav").frames == len(short)
    same = np.array_equal(soundfile.read(workdir / "out.wav", dtype="int16")[0],
                          soundfile.read(workdir / "short.wav", dtype="int16")[0])
    if enhanced:
        assert result.stderr == "" and not same, result.stderr
    else:
        assert result.stderr == (f"Warning: {workdir / 'short.wav'}: too short to learn its noise from (33 frames, "
                                 "1.00 s; at least 41, 1.25 s, at --noise-rank 5); written unchanged\n")
        assert same


@pytest.mark.parametrize("with_sample", [False, True])
def test_a_file_shorter_than_a_frame_is_written_unchanged(workdir, tiny_dictionary, with_sample):
    """25 ms (a frame is 64 ms), also with a noise sample: one line, the input's samples, exit 0, beside a
    file that is enhanced."""
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    soundfile.write(workdir / "tiny.wav", noisy[RATE:RATE + RATE // 40], RATE, subtype="PCM_24")
    sample = ["--noise-sample", workdir / "noisy.wav"] if with_sample else []
    result = _enhance(tiny_dictionary, workdir / "tiny.wav", workdir / "noisy.wav", "--out-dir", workdir / "out",
                      *sample)
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Warning: {workdir / 'tiny.wav'}: shorter than one frame "
                                                   f"(25.0 ms; 64 ms at {RATE} Hz); written unchanged"), lines
    assert soundfile.info(workdir / "out" / "tiny.wav").subtype == "PCM_24"
    np.testing.assert_array_equal(soundfile.read(workdir / "out" / "tiny.wav", dtype="int32")[0],
                                  soundfile.read(workdir / "tiny.wav", dtype="int32")[0])
    assert not np.array_equal(soundfile.read(workdir / "out" / "noisy.wav")[0], noisy)


def test_a_file_of_one_frame_exactly_is_enhanced_with_a_noise_sample(workdir, tiny_dictionary):
    """A frame is 64 ms, 512 samples at 8 kHz: with a noise sample's model a file of 512 is enhanced, one of 511
    written unchanged with its line."""
    rng = np.random.default_rng(5)
    soundfile.write(workdir / "sample.wav", 0.05 * rng.standard_normal(2 * RATE), RATE, subtype="FLOAT")
    for length, enhanced in ((RATE * 64 // 1000 - 1, False), (RATE * 64 // 1000, True)):
        y = 0.05 * rng.standard_normal(length) + 0.3 * np.sin(0.2 * np.arange(length))
        soundfile.write(workdir / "frame.wav", y, RATE, subtype="FLOAT")
        result = _enhance(tiny_dictionary, workdir / "frame.wav", "-o", workdir / f"out{length}.wav", "--noise-sample",
                          workdir / "sample.wav")
        assert result.exit_code == 0, result.stderr
        assert ("shorter than one frame" in result.stderr) != enhanced, result.stderr
        out, _ = soundfile.read(workdir / f"out{length}.wav")
        assert len(out) == length and np.array_equal(out, soundfile.read(workdir / "frame.wav")[0]) != enhanced


def test_a_file_of_little_but_digital_silence_is_written_unchanged(workdir, tiny_dictionary):
    """A second of noisy speech after 20 s of zeros: one line, the input, and no temporary file left."""
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    start = (len(noisy) - RATE) // 2
    padded = np.concatenate([np.zeros(20 * RATE), noisy[start:start + RATE]])
    soundfile.write(workdir / "padded.wav", padded, RATE, subtype="PCM_16")
    result = _enhance(tiny_dictionary, workdir / "padded.wav", "-o", workdir / "out.wav")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == f"wrote {workdir / 'out.wav'}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Warning: ") and "padded.wav" in lines[0], result.stderr
    assert "too little sound" in lines[0] and "written unchanged" in lines[0]
    np.testing.assert_array_equal(soundfile.read(workdir / "out.wav", dtype="int16")[0],
                                  soundfile.read(workdir / "padded.wav", dtype="int16")[0])
    assert sorted(path.name for path in workdir.iterdir() if path.name.startswith(("out", ".out"))) == ["out.wav"]


def test_noise_sample_gives_the_noise_model(workdir, tiny_dictionary):
    """The noise alone (here at another rate, resampled) gives the model denoise uses with ``noise=``."""
    from sepsti import features
    from sepsti.audio import load_audio, resample
    from sepsti.denoise import denoise
    from sepsti.dictionary import load_dictionary
    from sepsti.noise_model import learn_noise

    noisy, _ = soundfile.read(workdir / "noisy.wav")
    clean, _ = soundfile.read(workdir / "clean.wav")
    noise = noisy - clean
    soundfile.write(workdir / "noise.wav", resample(noise, RATE, 16000), 16000, subtype="FLOAT")
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "out.wav", "--noise-sample",
                      workdir / "noise.wav", "--iterations", 20)
    assert result.exit_code == 0, result.stderr
    sample = load_audio(workdir / "noise.wav", sample_rate=RATE).samples
    model = learn_noise(lambda: iter((features.magnitude(sample),)), 5)
    expected = denoise(noisy, load_dictionary(tiny_dictionary).W, noise=model, max_iter=20)
    enhanced, _ = soundfile.read(workdir / "out.wav")
    np.testing.assert_allclose(enhanced, np.clip(expected, -1, 1), rtol=0, atol=1.01 / 32768)
    assert _snr(clean, enhanced) > _snr(clean, noisy)
    # a file too short to learn its noise from is enhanced with the sample's model
    soundfile.write(workdir / "short.wav", noisy[:RATE // 10], RATE, subtype="PCM_16")
    result = _enhance(tiny_dictionary, workdir / "short.wav", "-o", workdir / "short_out.wav", "--noise-sample",
                      workdir / "noise.wav")
    assert result.exit_code == 0 and result.stderr == "", result.stderr


def test_the_seed_reaches_the_noise_sample_model(workdir, tiny_dictionary):
    """``--seed`` seeds the noise dictionary's initialization, the one learned from ``--noise-sample`` too: the output
    is the enhancer's with the sample's model learned at that seed (the model learned at seed 0 whatever was asked
    passed before)."""
    from sepsti import features
    from sepsti.denoise import denoise
    from sepsti.dictionary import load_dictionary
    from sepsti.noise_model import learn_noise

    noisy, _ = soundfile.read(workdir / "noisy.wav")
    clean, _ = soundfile.read(workdir / "clean.wav")
    soundfile.write(workdir / "noise.wav", noisy - clean, RATE, subtype="FLOAT")
    sample, _ = soundfile.read(workdir / "noise.wav")
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "out.wav", "--noise-sample",
                      workdir / "noise.wav", "--iterations", 20, "--seed", 3)
    assert result.exit_code == 0, result.stderr
    W = load_dictionary(tiny_dictionary).W
    outputs = {seed: denoise(noisy, W, noise=learn_noise(lambda: iter((features.magnitude(sample),)), 5, seed=seed),
                             max_iter=20, seed=3) for seed in (0, 3)}
    assert np.max(np.abs(outputs[3] - outputs[0])) > 10 / 32768  # the seeds' models give other outputs
    np.testing.assert_allclose(soundfile.read(workdir / "out.wav")[0], np.clip(outputs[3], -1, 1), rtol=0,
                               atol=1.01 / 32768)


def test_a_noise_sample_serves_inputs_of_both_dictionaries(workdir, tiny_dictionary, monkeypatch):
    """An 8 kHz and a 16 kHz input without --dictionary: the sample gives one model per dictionary (docs/enhance.md,
    "--noise-sample FILE"), and each file is enhanced with its own (a model for the first input's dictionary alone,
    an internal failure at the second, passed before)."""
    import sepsti.dictionary
    from sepsti.audio import resample

    monkeypatch.setattr(sepsti.dictionary, "narrowband_dictionary_path", lambda: Path(tiny_dictionary))
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    clean, _ = soundfile.read(workdir / "clean.wav")
    soundfile.write(workdir / "wide.wav", resample(noisy, RATE, 16000), 16000, subtype="FLOAT")
    soundfile.write(workdir / "noise.wav", noisy - clean, RATE, subtype="FLOAT")
    result = run(["enhance", workdir / "noisy.wav", workdir / "wide.wav", "--out-dir", workdir / "out",
                  "--noise-sample", workdir / "noise.wav", "--iterations", 2])
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    assert result.stdout == f"wrote {workdir / 'out' / 'noisy.wav'}\nwrote {workdir / 'out' / 'wide.wav'}\n"
    assert soundfile.info(workdir / "out" / "wide.wav").frames == soundfile.info(workdir / "wide.wav").frames


def test_a_noise_sample_has_its_mains_hum_subtracted_before_its_model_is_learned(workdir, tiny_dictionary,
                                                                                  monkeypatch):
    """The inputs' hum is subtracted before their mask; the sample's must be too, or its model holds the hum lines
    and lowers what is left at their frequencies. The sample is white noise and hum at 50-250 Hz (30 dB above the
    noise in those bins): what the model learns from must be as flat as white noise, every bin's mean power within
    a factor 2 of the median bin's (the mean of about 120 frames of a white noise bin spreads by some 10 %)."""
    import sepsti.noise_model

    learned = []
    learn_noise = sepsti.noise_model.learn_noise

    def spy(magnitudes, *args, **options):
        learned.append(np.concatenate(list(magnitudes()), axis=1))
        return learn_noise(magnitudes, *args, **options)

    monkeypatch.setattr(sepsti.noise_model, "learn_noise", spy)
    rng = np.random.default_rng(3)
    t = np.arange(4 * RATE) / RATE
    sample = 0.05 * rng.standard_normal(t.size) + 0.2 * sum(np.sin(2 * np.pi * 50 * k * t) / k for k in range(1, 6))
    soundfile.write(workdir / "sample.wav", sample, RATE, subtype="FLOAT")
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "out.wav", "--noise-sample",
                      workdir / "sample.wav", "--iterations", 2)
    assert result.exit_code == 0, result.stderr
    (magnitudes,) = learned
    power = np.mean(magnitudes ** 2, axis=1)
    assert np.max(power[1:-1]) < 2 * np.median(power)


def test_a_noise_sample_far_louder_than_the_input_is_warned_of(workdir, tiny_dictionary):
    """A sample 40 dB above its noise takes speech with it (docs/enhance.md: 15.11 against 9.93 dB on car noise)
    and was taken silently; one at the noise's level, or 6 dB above, is not warned of."""
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    clean, _ = soundfile.read(workdir / "clean.wav")
    soundfile.write(workdir / "quiet.wav", 0.01 * noisy, RATE, subtype="FLOAT")
    for gain in (1.0, 2.0, 100.0):
        soundfile.write(workdir / "noise.wav", gain * (noisy - clean), RATE, subtype="FLOAT")
        result = _enhance(tiny_dictionary, workdir / "noisy.wav", workdir / "quiet.wav", "--out-dir",
                          workdir / f"out{gain:g}", "--noise-sample", workdir / "noise.wav", "--iterations", 2)
        assert result.exit_code == 0, result.stderr
        level = 10 * np.log10(np.mean((gain * (noisy - clean)) ** 2) / np.mean(noisy ** 2))
        if gain == 100.0:
            assert result.stderr == (f"Warning: --noise-sample {workdir}/noise.wav is {level:.0f} dB louder than "
                                     f"{workdir}/noisy.wav and 1 other input(s); record it at the level of the "
                                     "input's noise (a louder sample removes speech with it)\n")
        else:  # the input 40 dB quieter is warned of alone
            assert result.stderr.startswith(f"Warning: --noise-sample {workdir}/noise.wav is ")
            assert f"dB louder than {workdir}/quiet.wav; record" in result.stderr


@pytest.mark.parametrize("decibels, warned", [(8, False), (12, True)])
def test_a_noise_sample_is_warned_of_from_10_db_above_an_input(workdir, tiny_dictionary, decibels, warned):
    """docs/enhance.md: a sample more than 10 dB above a whole input's power is warned of; 8 dB above is not,
    12 dB above is (a limit of 20 dB let it pass)."""
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    clean, _ = soundfile.read(workdir / "clean.wav")
    noise = noisy - clean
    gain = np.sqrt(10 ** (decibels / 10) * np.mean(noisy ** 2) / np.mean(noise ** 2))
    soundfile.write(workdir / "noise.wav", gain * noise, RATE, subtype="FLOAT")
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "out.wav", "--noise-sample",
                      workdir / "noise.wav", "--iterations", 2)
    assert result.exit_code == 0, result.stderr
    if warned:
        assert result.stderr == (f"Warning: --noise-sample {workdir}/noise.wav is {decibels} dB louder than "
                                 f"{workdir}/noisy.wav; record it at the level of the input's noise (a louder sample "
                                 "removes speech with it)\n")
    else:
        assert result.stderr == ""


def test_a_silent_input_beside_a_noise_sample_is_not_warned_of(workdir, tiny_dictionary):
    """An input of digital silence is no input the sample can be louder than: no line, exit 0, its zeros written
    (a comparison with its power of 0 raised ZeroDivisionError, an internal failure)."""
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    clean, _ = soundfile.read(workdir / "clean.wav")
    soundfile.write(workdir / "zeros.wav", np.zeros(3 * RATE), RATE, subtype="PCM_16")
    soundfile.write(workdir / "noise.wav", noisy - clean, RATE, subtype="FLOAT")
    result = _enhance(tiny_dictionary, workdir / "zeros.wav", workdir / "noisy.wav", "--out-dir", workdir / "out",
                      "--noise-sample", workdir / "noise.wav", "--iterations", 2)
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    out, _ = soundfile.read(workdir / "out" / "zeros.wav")
    assert len(out) == 3 * RATE and not np.any(out)


@pytest.mark.parametrize("kind, fragment", [("missing", "no such file"), ("text", "not a readable audio file"),
                                            ("silent", "silent"), ("short", "fewer than the noise rank 5"),
                                            ("short-loud", "fewer than the noise rank 5"),
                                            ("rate", "sample rate 1 Hz")])
def test_bad_noise_sample(workdir, tiny_dictionary, kind, fragment):
    """Refused in one line before any work; a sample too short and far louder than the input too (no warning of its
    level before the error)."""
    path = workdir / "sample.wav"
    if kind == "text":
        path.write_text("not audio")
    elif kind == "silent":
        soundfile.write(path, np.zeros(RATE), RATE, subtype="PCM_16")
    elif kind == "short":
        soundfile.write(path, 0.1 * np.ones(600), RATE, subtype="PCM_16")  # 4 frames
    elif kind == "short-loud":
        soundfile.write(path, 0.9 * np.random.default_rng(6).choice([-1.0, 1.0], 600), RATE, subtype="PCM_16")
    elif kind == "rate":
        soundfile.write(path, 0.1 * np.ones(600), 1, subtype="PCM_16")
    before = snapshot(workdir)
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "out.wav", "--noise-sample", path)
    assert_one_line_error(result, f"--noise-sample {path}", fragment)  # the option named (a missing file was not)
    assert snapshot(workdir) == before
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "--out-dir", workdir / "new", "--noise-sample", path)
    assert_one_line_error(result, f"--noise-sample {path}", fragment)
    assert snapshot(workdir) == before and not (workdir / "new").exists()  # not even the folder


@pytest.mark.parametrize("full_scale", [False, True])
def test_clipping_of_an_input_within_full_scale_says_what_helps(workdir, tiny_dictionary, monkeypatch, full_scale):
    """An input within [-1, 1] whose enhanced signal overshoots, one that reaches full scale itself (a 16-bit
    sample of -32768, read as -1.0) included: the line does not ask to rescale it into [-1, 1] but to lower its
    level."""
    import importlib

    enhance = importlib.import_module("sepsti.commands.enhance")  # the module (the package exports the command)
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    samples = np.round(0.999 * 32767 * noisy / np.abs(noisy).max()).astype(np.int16)
    if full_scale:
        samples[len(samples) // 2] = -32768
    soundfile.write(workdir / "full.wav", samples, RATE, subtype="PCM_16")
    original = enhance.enhance_file

    def overshooting(audio, target, W, framing, **options):  # an enhancer whose output overshoots
        import sepsti.audio

        real = sepsti.audio._Output.write
        monkeypatch.setattr(sepsti.audio._Output, "write", lambda self, block: real(self, 10.0 * block))
        return original(audio, target, W, framing, **options)

    monkeypatch.setattr(enhance, "enhance_file", overshooting)
    result = _enhance(tiny_dictionary, workdir / "full.wav", "-o", workdir / "out.wav", "--iterations", 5)
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "clipped" in lines[0] and "lower the input's level" in lines[0], result.stderr
    assert "[-1, 1]" not in lines[0]
    assert f"(the input's peak is {'1' if full_scale else '0.999'})" in lines[0]


def test_clipping_of_float_input_is_reported(workdir, tiny_dictionary):
    """A float input beyond full scale: kept in a float output; an integer one clips, with one line."""
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    soundfile.write(workdir / "loud.wav", 20.0 * noisy, RATE, subtype="FLOAT")  # peak about 8
    result = _enhance(tiny_dictionary, workdir / "loud.wav", "-o", workdir / "out.flac", "--iterations", 5)
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "clipped" in lines[0], result.stderr
    assert lines[0].startswith(f"Warning: {workdir / 'out.flac'}: ")  # the output that clips (docs/enhance.md)
    assert "peak" in lines[0] and "[-1, 1]" in lines[0]
    result = _enhance(tiny_dictionary, workdir / "loud.wav", "-o", workdir / "out.wav", "--iterations", 5)
    assert result.exit_code == 0 and result.stderr == ""
    assert soundfile.info(workdir / "out.wav").subtype == "FLOAT"
    assert np.abs(soundfile.read(workdir / "out.wav")[0]).max() > 1
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "quiet.wav", "--iterations", 5)
    assert result.exit_code == 0 and result.stderr == ""


def test_clipping_of_a_file_written_unchanged_is_reported(workdir, tiny_dictionary):
    """A float input beyond full scale too short to learn from, copied into a 16-bit output: the samples clipped
    are reported as for an enhanced file (no line, 0 counted for a copy, passed before)."""
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    loud = 20.0 * noisy[:RATE // 2]
    soundfile.write(workdir / "loud.wav", loud, RATE, subtype="FLOAT")
    clipped = int(np.count_nonzero(np.abs(soundfile.read(workdir / "loud.wav")[0]) > 1.0))
    assert clipped > 0
    result = _enhance(tiny_dictionary, workdir / "loud.wav", "-o", workdir / "out.flac")
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and "too short" in lines[0] and lines[0].endswith("written unchanged"), result.stderr
    assert lines[1].startswith(f"Warning: {workdir / 'out.flac'}: {clipped} samples beyond full scale were clipped "
                               "(the input's peak is ")
    assert lines[1].endswith("scale the input into [-1, 1] to keep them")


@pytest.mark.parametrize("subtype", ["PCM_24", "FLOAT"])
def test_the_input_sample_format_is_kept(workdir, tiny_dictionary, subtype):
    """A 24-bit or float input gives a 24-bit or float output: the enhancer's samples, not 16-bit steps."""
    from sepsti.denoise import denoise
    from sepsti.dictionary import load_dictionary

    noisy, _ = soundfile.read(workdir / "noisy.wav")
    soundfile.write(workdir / "in.wav", noisy, RATE, subtype=subtype)
    result = _enhance(tiny_dictionary, workdir / "in.wav", "-o", workdir / "out.wav")
    assert result.exit_code == 0, result.stderr
    assert soundfile.info(workdir / "out.wav").subtype == subtype
    expected = denoise(soundfile.read(workdir / "in.wav")[0], load_dictionary(tiny_dictionary).W)
    np.testing.assert_allclose(soundfile.read(workdir / "out.wav")[0], expected, rtol=0, atol=1e-6)


def test_streamed_output_equals_the_whole_signal_pipeline(workdir, tiny_dictionary, monkeypatch):
    """Read, resampled, enhanced and written in pieces: the same file as the in-memory pipeline
    (the 8 kHz dictionary's band, and the band above it at 11.025 kHz)."""
    import sepsti.audio
    from sepsti.audio import load_audio, resample
    from sepsti.bandwidth import UpperBand
    from sepsti.denoise import denoise_blocks
    from sepsti.dictionary import load_dictionary
    from sepsti.features import NARROWBAND

    noisy, _ = soundfile.read(workdir / "noisy.wav")
    at_11k = resample(noisy, RATE, 11025)
    stereo = np.stack([at_11k, 0.8 * at_11k], axis=1)
    soundfile.write(workdir / "in.wav", stereo, 11025, subtype="FLOAT")
    monkeypatch.setattr(sepsti.audio, "BLOCK_SAMPLES", 999)  # many blocks, none aligned with anything
    result = _enhance(tiny_dictionary, workdir / "in.wav", "-o", workdir / "out.wav", "--iterations", 10)
    assert result.exit_code == 0, result.stderr
    length = load_audio(workdir / "in.wav", sample_rate=RATE).length
    stereo = stereo.astype(np.float32).astype(np.float64)
    at_8k = np.stack([resample(channel, 11025, RATE) for channel in stereo.T], axis=1)
    upper = UpperBand(lambda: iter((stereo,)), 11025, len(stereo), NARROWBAND)
    speech = np.concatenate(list(denoise_blocks(lambda: iter((at_8k,)), len(at_8k),
                                                load_dictionary(tiny_dictionary).W, max_iter=10,
                                                mask_fn=upper.add_mask)))
    back = np.stack([resample(channel, RATE, 11025) for channel in speech.T], axis=1)
    expected = np.clip(upper.apply(back)[:length], -1, 1)
    out, rate = soundfile.read(workdir / "out.wav")
    assert rate == 11025 and out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=0, atol=1.01 / 32768)  # libsndfile's 16-bit rounding


def test_usage_errors_are_one_line(workdir, tiny_dictionary):
    for args, fragment in [(["enhance"], "Missing argument"), (["enhance", workdir / "noisy.wav", "--bogus"],
                                                                "No such option"),
                           (["enhance", workdir / "noisy.wav", "--seed", "x"], "'--seed'"), (["nope"], "nope")]:
        assert_one_line_error(run(args), fragment, "--help")
    # the option parser's own errors name the (sub)command's help too
    for args, command in [(["enhance", workdir / "noisy.wav", "-o"], "enhance"),
                          (["select-rank", "--preset"], "select-rank"),
                          (["corpus", "synth", workdir / "new", "--seed"], "corpus synth")]:
        assert_one_line_error(run(args), "requires an argument", f" {command} --help')")
    assert_one_line_error(run(["enhance", workdir / "noisy.wav", "--max-reduction", "121"]), "'--max-reduction'",
                          "0<=x<=120")


def test_file_names_that_are_not_utf8(tmp_path, workdir, tiny_dictionary):
    import subprocess
    import sys

    folder = os.fsencode(tmp_path / "names")
    os.mkdir(folder)
    source = os.path.join(folder, b"caf\xe9 noisy.wav")
    with open(source, "wb") as handle:
        handle.write((workdir / "noisy.wav").read_bytes())
    target = os.path.join(folder, b"caf\xe9 out.wav")
    command = [sys.executable, "-m", "sepsti", "enhance", source, "-o", target, "--dictionary",
               os.fsencode(tiny_dictionary), "--iterations", b"3"]
    environment = {**os.environ, "LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}
    result = subprocess.run(command, capture_output=True, env=environment, cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert b"caf\\udce9 out.wav" in result.stdout  # printable, not a UnicodeEncodeError
    assert soundfile.info(target).frames == soundfile.info(workdir / "noisy.wav").frames
    result = subprocess.run(command, capture_output=True, env=environment, cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 2 and result.stderr.count(b"\n") == 1 and b"exists" in result.stderr


@pytest.mark.parametrize("rate", [None, 22050])
def test_enhance_imports_no_slow_modules(workdir, tiny_dictionary, rate):
    # SciPy's import (its signal package's especially) takes longer than enhancing a short file; at another
    # rate than the dictionary's the input is resampled both ways and its upper band kept
    import subprocess
    import sys

    from sepsti.audio import resample

    source = workdir / "noisy.wav"
    if rate is not None:
        y, original = soundfile.read(source)
        source = workdir / "noisy_resampled.wav"
        soundfile.write(source, resample(y, original, rate), rate)
    script = ("import sys\n"
              "from sepsti.cli import cli\n"
              "cli.main(sys.argv[1:], prog_name='sepsti', standalone_mode=False)\n"
              "print(sorted({name.split('.')[0] for name in sys.modules} & {'librosa', 'numba', "
              "'matplotlib', 'mir_eval', 'sklearn', 'pystoi', 'pesq', 'scipy'}))\n")
    result = subprocess.run([sys.executable, "-c", script, "enhance", str(source), "-o",
                             str(workdir / "out.wav"), "--dictionary", str(tiny_dictionary), "--iterations", "2"],
                            capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("asked", [None, "2"])
def test_enhance_runs_one_blas_thread_unless_asked_for_more(workdir, tiny_dictionary, asked):
    """docs/enhance.md ("Speed"): the per-file EM runs on one BLAS thread unless ``OPENBLAS_NUM_THREADS`` or
    ``MKL_NUM_THREADS`` say otherwise (two asked for and one run passed before)."""
    import subprocess
    import sys

    script = ("import sys\n"
              "from sepsti.cli import cli\n"
              "cli.main(sys.argv[1:], prog_name='sepsti', standalone_mode=False)\n"
              "import threadpoolctl\n"
              "print(sorted({pool['num_threads'] for pool in threadpoolctl.threadpool_info() "
              "if pool['user_api'] == 'blas'}))\n")
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")}
    if asked is not None:
        environment.update(OPENBLAS_NUM_THREADS=asked, MKL_NUM_THREADS=asked)
    result = subprocess.run([sys.executable, "-c", script, "enhance", str(workdir / "noisy.wav"), "-o",
                             str(workdir / "out.wav"), "--dictionary", str(tiny_dictionary), "--iterations", "2"],
                            capture_output=True, text=True, env=environment, cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == f"[{asked or 1}]"


def test_two_concurrent_runs_on_one_output_give_one_file_and_one_error(workdir, tiny_dictionary):
    import subprocess
    import sys

    command = [sys.executable, "-m", "sepsti", "enhance", str(workdir / "noisy.wav"), "-o", str(workdir / "same.wav"),
               "--dictionary", str(tiny_dictionary), "--iterations", "20"]
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  cwd=Path(__file__).resolve().parents[1]) for _ in range(2)]
    outcomes = sorted((process.wait(), process.stderr.read().decode()) for process in processes)
    for process in processes:
        process.stdout.close()
        process.stderr.close()
    assert [status for status, _ in outcomes] == [0, 2], outcomes
    assert "same.wav" in outcomes[1][1] and outcomes[1][1].count("\n") == 1
    assert soundfile.info(workdir / "same.wav").frames == soundfile.info(workdir / "noisy.wav").frames
    assert no_temp_files(workdir)


@pytest.mark.parametrize("jobs", [1, 2])
def test_sigterm_removes_the_files_being_written_and_exits_143(tmp_path, tiny_dictionary, jobs):
    """``kill`` during a write: status 143, one line, and nothing of the outputs left (Ctrl-C would finish them
    with several jobs; ``kill`` stops them at once)."""
    import signal
    import subprocess
    import sys
    import time

    rng = np.random.default_rng(8)
    inputs = []
    for index in range(jobs):
        inputs.append(tmp_path / f"long{index}.wav")
        soundfile.write(inputs[-1], 0.1 * rng.standard_normal(600 * RATE), RATE, subtype="PCM_16")
    out = tmp_path / "out"
    out.mkdir()
    process = subprocess.Popen([sys.executable, "-m", "sepsti", "enhance", *map(str, inputs), "--out-dir", str(out),
                                "--dictionary", str(tiny_dictionary), "--jobs", str(jobs)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(list(out.glob(".*sepsti-tmp*"))) < jobs:
        assert time.monotonic() < deadline and process.poll() is None, "no file was being written"
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 143 and stderr == "Terminated.\n" and stdout == "", (stdout, stderr)
    assert os.listdir(out) == []


def test_sigterm_in_process_returns_after_the_workers_removed_their_files(tmp_path, tiny_dictionary):
    """The command (run as a library call here) returns only once the workers' temporary files are gone."""
    import signal
    import threading
    import time

    rng = np.random.default_rng(8)
    inputs = [tmp_path / f"long{index}.wav" for index in range(2)]
    for path in inputs:
        soundfile.write(path, 0.1 * rng.standard_normal(600 * RATE), RATE, subtype="PCM_16")
    out = tmp_path / "out"
    out.mkdir()

    def kill_when_writing():
        deadline = time.monotonic() + 60
        while len(list(out.glob(".*sepsti-tmp*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=kill_when_writing)
    killer.start()
    result = _enhance(tiny_dictionary, *inputs, "--out-dir", out, "--jobs", 2)
    leftover = os.listdir(out)
    killer.join()
    assert result.exit_code == 143 and result.stderr == "Terminated.\n", (result.exit_code, result.stderr)
    assert leftover == []


def test_an_ignored_sigterm_stays_ignored(tmp_path, tiny_dictionary):
    """``trap '' TERM``: a ``kill`` during the run changes nothing, as Python leaves an ignored SIGINT alone."""
    import signal
    import subprocess
    import sys
    import time

    soundfile.write(tmp_path / "long.wav", 0.1 * np.random.default_rng(8).standard_normal(120 * RATE), RATE,
                    subtype="PCM_16")
    out = tmp_path / "out"
    out.mkdir()
    command = [sys.executable, "-m", "sepsti", "enhance", str(tmp_path / "long.wav"), "--out-dir", str(out),
               "--dictionary", str(tiny_dictionary)]
    process = subprocess.Popen(["bash", "-c", "trap '' TERM; exec \"$@\"", "bash", *command],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(out.glob(".*sepsti-tmp*")):
        assert time.monotonic() < deadline and process.poll() is None, "no file was being written"
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0 and stderr == "", (stdout, stderr)
    assert os.listdir(out) == ["long.wav"]


def test_the_sigterm_handler_before_a_command_is_the_one_after(workdir, tiny_dictionary):
    import signal

    def handler(signum, frame):
        pass

    before = signal.signal(signal.SIGTERM, handler)
    try:
        result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "out.wav")
        assert result.exit_code == 0, result.stderr
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_sigterm_handler_installed_from_c_is_left_alone(workdir, tiny_dictionary, monkeypatch):
    """``getsignal`` gives None for it: nothing could put it back, so nothing replaces it."""
    import signal

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(signal, "getsignal", lambda signum: None)
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "out.wav")
    assert result.exit_code == 0, result.stderr
    monkeypatch.undo()
    assert signal.getsignal(signal.SIGTERM) is before


def test_max_reduction_bounds_the_attenuation(workdir, tiny_dictionary):
    """``--max-reduction 0`` gives the input back; 12 dB keeps more of it than the default 26 dB, and the output
    keeps at least the input's energy lowered by 12 dB (every bin of the mask is at least 10^(-12/20))."""
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    outputs = {}
    for reduction in (None, "12", "0"):
        extra = [] if reduction is None else ["--max-reduction", reduction]
        result = _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / f"out{reduction}.wav", *extra)
        assert result.exit_code == 0, result.stderr
        outputs[reduction] = soundfile.read(workdir / f"out{reduction}.wav")[0]
    np.testing.assert_allclose(outputs["0"], noisy, rtol=0, atol=1.01 / 32768)
    # at every rate, also those processed at a higher one and resampled back: the input, sample for sample
    from sepsti.audio import resample

    for rate in (6000, 11025):
        soundfile.write(workdir / f"at{rate}.wav", resample(noisy, RATE, rate), rate, subtype="PCM_16")
        result = run(["enhance", workdir / f"at{rate}.wav", "-o", workdir / f"at{rate}_0.wav", "--max-reduction", "0"])
        assert result.exit_code == 0 and result.stderr == "", result.stderr
        np.testing.assert_array_equal(soundfile.read(workdir / f"at{rate}_0.wav", dtype="int16")[0],
                                      soundfile.read(workdir / f"at{rate}.wav", dtype="int16")[0])
    removed = {key: np.sum((noisy - out) ** 2) for key, out in outputs.items()}
    assert removed["12"] < 0.8 * removed[None]
    energy = {key: np.sum(out ** 2) / np.sum(noisy ** 2) for key, out in outputs.items()}
    assert energy["12"] > max(energy[None], 10 ** (-12 / 10)) and energy[None] > 10 ** (-26 / 10)
    assert _enhance(tiny_dictionary, workdir / "noisy.wav", "-o", workdir / "bad.wav", "--max-reduction",
                    "-3").exit_code == 2
    before = snapshot(workdir)
    assert_one_line_error(_enhance(tiny_dictionary, workdir / "noisy.wav", "--out-dir", workdir / "nan",
                                   "--max-reduction", "nan"), "--max-reduction", "'nan' is not a finite number")
    assert snapshot(workdir) == before and not (workdir / "nan").exists()


def test_max_reduction_0_keeps_mains_hum_too(workdir, tiny_dictionary):
    """Hum is subtracted before the mask, but at ``--max-reduction 0`` nothing is lowered, the hum included."""
    rng = np.random.default_rng(3)
    t = np.arange(4 * RATE) / RATE
    noisy = 0.05 * rng.standard_normal(t.size) + 0.2 * sum(np.sin(2 * np.pi * 50 * k * t) / k for k in range(1, 6))
    source = workdir / "hum.wav"
    soundfile.write(source, noisy, RATE, subtype="PCM_16")
    noisy, _ = soundfile.read(source)
    result = _enhance(tiny_dictionary, source, "-o", workdir / "out.wav", "--max-reduction", "0")
    assert result.exit_code == 0, result.stderr
    np.testing.assert_allclose(soundfile.read(workdir / "out.wav")[0], noisy, rtol=0, atol=1.01 / 32768)


# --------------------------------------------------------------------------------------------
# outputs a format cannot hold, failures among several files, folders and names


def test_vorbis_above_192_khz_is_refused_where_libvorbis_crashed(workdir, tiny_dictionary):
    """``-o OUT.ogg`` from a 384 kHz file: one line and exit 2, where libvorbis crashed the command (status 139)
    and left an empty temporary file (a process of its own here: a crash would end the tests)."""
    import subprocess
    import sys

    noisy, _ = soundfile.read(workdir / "noisy.wav")
    soundfile.write(workdir / "high.wav", noisy[:RATE // 2], 384000, subtype="PCM_16")
    before = snapshot(workdir)
    result = subprocess.run([sys.executable, "-m", "sepsti", "enhance", str(workdir / "high.wav"), "-o",
                             str(workdir / "out.ogg"), "--dictionary", str(tiny_dictionary)], capture_output=True,
                            text=True, cwd=Path(__file__).resolve().parents[1])
    assert (result.returncode, result.stdout) == (2, ""), result
    assert result.stderr == (f"Error: {workdir / 'out.ogg'}: a '.ogg' file cannot hold 384000 Hz (Vorbis holds at most "
                             "192000 Hz); use .wav\n")
    assert snapshot(workdir) == before and no_temp_files(workdir)


@pytest.mark.parametrize("rate, name, fragment", [
    (192001, "out.ogg", "cannot hold 192001 Hz (Vorbis holds at most 192000 Hz)"),
    (44100, "out.wve", "WVE files are 8000 Hz"), (44100, "out.htk", "would say 44247 Hz"),
    (44100, "out.opus", "Opus holds"), (44100, "out.sds", "drops"), (RATE, "out.xi", "no sample rate"),
    (RATE, "out.sd2", "resource fork")])
def test_an_output_format_that_cannot_hold_the_input_is_refused_before_any_work(workdir, tiny_dictionary, rate, name,
                                                                                 fragment):
    """Refused with the other checks, before the first file is enhanced (the good file first gets no output),
    where libsndfile crashed, wrote another rate or fewer samples, or a file it cannot read."""
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    soundfile.write(workdir / f"in{Path(name).suffix}", noisy[:RATE // 2], rate, subtype="PCM_16", format="WAV")
    before = snapshot(workdir)
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", workdir / f"in{Path(name).suffix}", "--out-dir",
                      workdir / "out")
    assert_one_line_error(result, f"in{Path(name).suffix}", fragment)
    assert snapshot(workdir) == before and not (workdir / "out").exists()
    result = _enhance(tiny_dictionary, workdir / f"in{Path(name).suffix}", "-o", workdir / name)
    assert_one_line_error(result, name, fragment)
    assert snapshot(workdir) == before


@pytest.mark.parametrize("name, subtype", [("out.wve", "ALAW"), ("out.aiff", "PCM_16"), ("out.voc", "PCM_16")])
def test_outputs_keep_the_rate_and_length_where_the_format_holds_them(workdir, tiny_dictionary, name, subtype):
    """An 8 kHz WVE file; an A-law input of odd length as AIFF or VOC is 16-bit (one byte per sample read back a
    sample more)."""
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    odd = noisy[:len(noisy) // 2 * 2 - 1]
    soundfile.write(workdir / "alaw.wav", odd, RATE, subtype="ALAW")
    result = _enhance(tiny_dictionary, workdir / "alaw.wav", "-o", workdir / name, "--iterations", 2)
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    info = soundfile.info(workdir / name)
    assert (info.samplerate, info.frames, info.subtype) == (RATE, len(odd), subtype)


@pytest.mark.parametrize("outputs", [["--out-dir", "out"], ["-o", "out.wav"]])
def test_a_folder_given_as_input_is_named_as_such(workdir, tiny_dictionary, outputs):
    """Before any output is checked: also where the outputs asked for are wrong too (one ``-o`` for two inputs, said
    first, passed before)."""
    (workdir / "folder").mkdir()
    before = snapshot(workdir)
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", workdir / "folder", outputs[0], workdir / outputs[1])
    assert_one_line_error(result, "folder: is a directory")
    assert snapshot(workdir) == before and not (workdir / "out").exists()


def test_a_failure_removes_the_folders_the_command_created_while_empty(workdir, tiny_dictionary, monkeypatch):
    """Created folders left empty by a failure go (not the ones that were there); with an output in them they stay."""
    from sepsti.commands import enhance as command
    from sepsti.core.errors import ParameterError

    real = command.enhance_file

    def failing(audio, target, *args, **options):
        if audio.path.name == "second.wav":
            raise ParameterError(f"{target}: cannot write it (libsndfile: System error.; the disk is full)")
        return real(audio, target, *args, **options)

    monkeypatch.setattr(command, "enhance_file", failing)
    (workdir / "second.wav").write_bytes((workdir / "noisy.wav").read_bytes())
    (workdir / "there").mkdir()
    result = _enhance(tiny_dictionary, workdir / "second.wav", "--out-dir", workdir / "there" / "new" / "deep")
    assert_one_line_error(result, "the disk is full")
    assert os.listdir(workdir / "there") == []
    (workdir / "third.wav").write_bytes((workdir / "noisy.wav").read_bytes())
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", workdir / "second.wav", workdir / "third.wav",
                      "--out-dir", workdir / "new" / "deep", "--iterations", 2)
    # the file not started after the failure is named (it was left without a word)
    assert_one_line_error(result, f"the disk is full); not enhanced after it: {workdir / 'third.wav'}")
    assert os.listdir(workdir / "new" / "deep") == ["noisy.wav"]


@pytest.mark.parametrize("stop, status", [("KeyboardInterrupt", 130), ("Terminated", 143)])
def test_ctrl_c_or_kill_removes_the_folders_the_command_created_while_empty(workdir, tiny_dictionary, monkeypatch, stop,
                                                                          status):
    """Ctrl-C or SIGTERM during the first file leaves the created folders empty: they go too, as after an error
    (kept, empty, passed before)."""
    import sepsti.workers
    from sepsti.commands import enhance as command

    def stopped(*args, **options):
        raise KeyboardInterrupt if stop == "KeyboardInterrupt" else sepsti.workers.Terminated()

    monkeypatch.setattr(command, "enhance_file", stopped)
    (workdir / "there").mkdir()
    result = _enhance(tiny_dictionary, workdir / "noisy.wav", "--out-dir", workdir / "there" / "new" / "deep")
    assert result.exit_code == status, (result.exit_code, result.stderr)
    assert os.listdir(workdir / "there") == []


def test_jobs_report_the_files_finished_after_another_files_error(workdir, tiny_corpus, tiny_dictionary, monkeypatch):
    """With two workers, the first file fails (another program created its output meanwhile) once the other worker
    has written the second: each file written is reported, in the inputs' order, then the error."""
    import time

    from sepsti.commands import enhance as command

    inputs = sorted((tiny_corpus / "noisy" / "hum_5dB").glob("*.wav"))[:3]
    real = command.enhance_file

    def racing(audio, target, *args, **options):
        if audio.path == inputs[0]:
            deadline = time.monotonic() + 60
            while not (target.parent / inputs[1].name).exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            target.write_bytes(b"written by another program meanwhile")
        return real(audio, target, *args, **options)

    monkeypatch.setattr(command, "enhance_file", racing)  # the workers are forked with it
    (workdir / "out").mkdir()
    result = _enhance(tiny_dictionary, *inputs, "--out-dir", workdir / "out", "--jobs", 2, "--iterations", 5)
    assert_one_line_error(result, inputs[0].name, "created by another program")
    written = [workdir / "out" / path.name for path in inputs[1:] if (workdir / "out" / path.name).exists()]
    assert written[:1] == [workdir / "out" / inputs[1].name]  # the third one too if it started in time
    assert result.stdout.splitlines() == [f"wrote {path}" for path in written]
    assert no_temp_files(workdir / "out")


def test_names_with_a_line_break_print_quoted_on_one_line(workdir, tiny_dictionary):
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    short = workdir / "sh\nort.wav"
    soundfile.write(short, noisy[:RATE // 2], RATE, subtype="PCM_16")
    target = workdir / "out\nput.wav"
    result = _enhance(tiny_dictionary, short, "-o", target)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"wrote {str(target)!r}\n"
    assert result.stderr.startswith(f"Warning: {str(short)!r}: too short") and result.stderr.count("\n") == 1
    assert soundfile.info(target).frames == RATE // 2


def test_digital_silence_throughout_is_written_unchanged_with_its_line(workdir, tiny_dictionary):
    """Two seconds of zeros get the line a float file of 1e-40 gets."""
    soundfile.write(workdir / "zeros.wav", np.zeros(2 * RATE), RATE, subtype="PCM_16")
    soundfile.write(workdir / "tiny.wav", np.full(2 * RATE, 1e-40), RATE, subtype="FLOAT")
    result = _enhance(tiny_dictionary, workdir / "zeros.wav", workdir / "tiny.wav", "--out-dir", workdir / "out")
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and all("too little sound" in line and line.endswith("written unchanged") for line in lines)
    assert [line.split(": ")[1] for line in lines] == [str(workdir / "zeros.wav"), str(workdir / "tiny.wav")]
    assert not np.any(soundfile.read(workdir / "out" / "zeros.wav")[0])


def test_a_float_file_ending_in_five_seconds_of_near_denormal_noise_is_enhanced(workdir, tiny_dictionary):
    """Samples of normal(0, 1e-38) after the speech give spectrogram values below float32's tiny / eps."""
    noisy, _ = soundfile.read(workdir / "noisy.wav")
    tail = np.random.default_rng(2).normal(0, 1e-38, 5 * RATE)
    soundfile.write(workdir / "tail.wav", np.concatenate([noisy, tail]), RATE, subtype="FLOAT")
    result = _enhance(tiny_dictionary, workdir / "tail.wav", "-o", workdir / "out.wav")
    assert result.exit_code == 0, result.stderr
    out, _ = soundfile.read(workdir / "out.wav")
    assert len(out) == len(noisy) + 5 * RATE and np.all(np.isfinite(out))


def test_an_out_dir_through_a_broken_link_is_named_so(workdir, tiny_dictionary):
    """mkdir said 'od: File exists' of a dangling link."""
    (workdir / "od").symlink_to("nowhere")
    for out_dir in ("od", "od/sub"):
        result = _enhance(tiny_dictionary, workdir / "noisy.wav", "--out-dir", workdir / out_dir)
        assert_one_line_error(result, f"--out-dir {workdir / out_dir}: {workdir}/od is a broken symbolic link")
    assert not (workdir / "nowhere").exists()
