"""sepsti.corpora.audio: reading audio, and every bad file it must refuse with one line."""

import os
import struct

import numpy as np
import pytest
import soundfile

from sepsti.core.errors import ParameterError
from sepsti.corpora.audio import audio_info, read_audio, read_audio_blocks


def _write(path, y, sample_rate=8000, subtype="PCM_16", **kwargs):
    soundfile.write(str(path), y, sample_rate, subtype=subtype, **kwargs)
    return path


def test_reads_int16_exactly(tmp_path, rng):
    samples = rng.integers(-32768, 32768, size=1000).astype(np.int16)
    path = _write(tmp_path / "a.wav", samples)
    y, sample_rate = read_audio(path)
    assert sample_rate == 8000
    assert y.dtype == np.float64 and y.shape == (1000,)
    np.testing.assert_array_equal(y, samples / 32768.0)
    assert y.min() >= -1.0 and y.max() < 1.0


def test_stereo_is_downmixed_by_mean(tmp_path, rng):
    stereo = rng.uniform(-0.5, 0.5, size=(800, 2))
    path = _write(tmp_path / "s.wav", stereo, subtype="FLOAT")
    y, _ = read_audio(path)
    np.testing.assert_allclose(y, stereo.astype(np.float32).astype(np.float64).mean(axis=1))


@pytest.mark.parametrize("extension, subtype", [("flac", "PCM_16"), ("ogg", "VORBIS")])
def test_reads_other_formats(tmp_path, extension, subtype):
    t = np.arange(16000) / 16000
    path = _write(tmp_path / f"x.{extension}", 0.3 * np.sin(2 * np.pi * 440 * t), 16000, subtype)
    y, sample_rate = read_audio(path)
    assert sample_rate == 16000 and len(y) == 16000
    assert abs(np.sqrt(np.mean(y ** 2)) - 0.3 / np.sqrt(2)) < 0.02


def test_all_zero_audio_is_valid(tmp_path):
    y, _ = read_audio(_write(tmp_path / "z.wav", np.zeros(500)))
    assert y.shape == (500,) and not y.any()


def test_info_matches_header(tmp_path):
    info = audio_info(_write(tmp_path / "i.wav", np.zeros((1200, 2)), 16000))
    assert (info.sample_rate, info.num_samples, info.channels) == (16000, 1200, 2)
    assert info.duration == pytest.approx(0.075)


@pytest.mark.parametrize("marker", [0xFFFFFFFF, 0x7FFFF000])  # unknown size; the second is SoX's, to a pipe
def test_wav_data_chunk_of_unknown_size_is_read_to_the_end(tmp_path, marker):
    samples = (np.arange(800) % 64 - 32).astype(np.int16)
    data = bytearray(_write(tmp_path / "p.wav", samples).read_bytes())
    position = data.index(b"data")
    data[position + 4:position + 8] = marker.to_bytes(4, "little")
    data[4:8] = min(marker + 36, 0xFFFFFFFF).to_bytes(4, "little")  # the RIFF size as such writers set it
    y, _ = read_audio(_raw(tmp_path / "p.wav", bytes(data)))
    np.testing.assert_array_equal(y, samples / 32768.0)


def _raw(path, data):
    path.write_bytes(data)
    return path


def _fifo(path):
    os.mkfifo(path)
    return path


def _truncated(tmp_path):
    path = _write(tmp_path / "t.wav", np.full(8000, 0.1))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _header_only(tmp_path):
    path = _write(tmp_path / "h.wav", np.full(100, 0.1))
    path.write_bytes(path.read_bytes()[:30])
    return path


def _data_chunk_header_only(tmp_path):
    """The 44 bytes of a 16-bit WAV's header, its data chunk's 8 among them, and none of its 100 samples."""
    path = _write(tmp_path / "d.wav", np.full(100, 0.1))
    path.write_bytes(path.read_bytes()[:44])
    return path


def _wav(chunks, order="<", form=b"RIFF"):
    """A WAVE file of ``(id, bytes)`` chunks, each padded to an even length."""
    body = b"WAVE" + b"".join(id + struct.pack(order + "I", len(data)) + data + b"\0" * (len(data) & 1)
                              for id, data in chunks)
    return form + struct.pack(order + "I", len(body)) + body


def _truncated_after_an_odd_chunk(tmp_path):
    """An odd-sized chunk (3 bytes and a pad byte) before the data chunk, 300 of whose 800 samples are cut."""
    fmt = struct.pack("<HHIIHH", 1, 1, 8000, 16000, 2, 16)
    data = _wav([(b"fmt ", fmt), (b"junk", b"abc"), (b"data", bytes(1600))])
    return _raw(tmp_path / "o.wav", data[:-600])


def _truncated_big_endian(tmp_path):
    """A RIFX (big-endian) WAV, 300 of whose 800 samples are cut."""
    path = _write(tmp_path / "x.wav", np.full(800, 0.1), endian="BIG")
    return _raw(path, path.read_bytes()[:-600])


@pytest.mark.parametrize("make, why", [
    (lambda d: d / "missing.wav", "no such file"),
    (lambda d: d, "is a directory"),
    (lambda d: _raw(d / "e.wav", b""), "empty file"),
    (lambda d: _fifo(d / "f.wav"), "not a regular file"),
    (lambda d: _raw(d / "n.wav", b"this is not audio at all\n" * 20), "not a readable audio file"),
    (_truncated, "truncated WAV"),
    (_header_only, "not a readable audio file"),
    (_data_chunk_header_only, r"truncated WAV file \(200 bytes of audio data missing\)"),
    (_truncated_after_an_odd_chunk, r"truncated WAV file \(600 bytes of audio data missing\)"),
    (_truncated_big_endian, r"truncated WAV file \(600 bytes of audio data missing\)"),
    (lambda d: _write(d / "zero.wav", np.zeros(0)), "zero-length audio"),
    (lambda d: _write(d / "nan.wav", np.array([0.1, np.nan, 0.2]), subtype="FLOAT"), "NaN or Inf"),
    (lambda d: _write(d / "inf.wav", np.array([0.1, np.inf, -np.inf]), subtype="DOUBLE"), "NaN or Inf"),
    (lambda d: _write(d / "nan2.wav", np.array([[0.1, 0.2], [np.nan, 0.0]]), subtype="FLOAT"), "NaN or Inf"),
])
def test_bad_files_raise_one_line(tmp_path, make, why):
    path = make(tmp_path)
    with pytest.raises(ParameterError, match=why) as caught:
        read_audio(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert "\n" not in message
    assert message.count(str(path)) == 1 and "Error opening" not in message  # libsndfile's own prefix cut off


def test_audio_files_by_their_real_extensions_hidden_folders_passed_over(tmp_path, rng):
    from sepsti.corpora.audio import audio_files

    y = rng.uniform(-0.5, 0.5, 800)
    (tmp_path / "deeper").mkdir()
    (tmp_path / ".Trash-1000").mkdir()
    for name, format in (("a.wav", "WAV"), ("b.aif", "AIFF"), ("c.AIFF", "AIFF"), ("deeper/d.flac", "FLAC"),
                         ("e.oga", "OGG"), (".hidden.wav", "WAV"), (".Trash-1000/f.wav", "WAV")):
        _write(tmp_path / name, y, format=format, subtype="VORBIS" if format == "OGG" else "PCM_16")
    (tmp_path / "notes.txt").write_text("not audio")
    (tmp_path / "data.mat").write_bytes(b"MATLAB 5.0")  # a format libsndfile names, not taken for audio
    (tmp_path / "g.raw").write_bytes(bytes(1600))  # headerless: no rate to read
    assert [path.relative_to(tmp_path).as_posix() for path in audio_files(tmp_path)] == [
        "a.wav", "b.aif", "c.AIFF", "e.oga", "deeper/d.flac"]
    assert all(read_audio(path)[1] == 8000 for path in audio_files(tmp_path))


def test_audio_files_below_a_link_to_a_folder_are_found(tmp_path, rng):
    from sepsti.corpora.audio import audio_files

    (tmp_path / "elsewhere").mkdir()
    _write(tmp_path / "elsewhere" / "a.wav", rng.uniform(-0.5, 0.5, 800))
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "linked").symlink_to(tmp_path / "elsewhere")
    assert audio_files(tmp_path / "root") == [tmp_path / "root" / "linked" / "a.wav"]


def test_a_link_loop_or_a_second_link_to_a_folder_is_walked_once(tmp_path, rng):
    """A link back up the tree was followed until the path grew too long to resolve, every file found 40 times
    (two such links in one folder: 2^40 folders, a walk that never ended)."""
    from sepsti.corpora.audio import audio_files

    root = tmp_path / "root"
    (root / "deeper").mkdir(parents=True)
    _write(root / "a.wav", rng.uniform(-0.5, 0.5, 800))
    _write(root / "deeper" / "b.wav", rng.uniform(-0.5, 0.5, 800))
    (root / "deeper" / "up").symlink_to("..", target_is_directory=True)
    (root / "again").symlink_to(root / "deeper", target_is_directory=True)
    assert [path.relative_to(root).as_posix() for path in audio_files(root)] == ["a.wav", "again/b.wav"]


@pytest.mark.parametrize("block_size", [0, -1, None, 1.5, True])
def test_a_bad_block_size_is_refused_by_name(tmp_path, block_size):
    """The file was blamed ('corrupt audio file') for a block size of 0, None or 1.5."""
    path = _write(tmp_path / "a.wav", np.zeros(100))
    with pytest.raises(ParameterError, match=rf"^block_size={block_size!r} must be an integer of at least 1"):
        list(read_audio_blocks(path, block_size=block_size))
    assert np.concatenate(list(read_audio_blocks(path, block_size=7))).shape == (100,)


@pytest.mark.parametrize("path", [None, b"a.wav", 3])
def test_a_path_that_is_not_one_is_refused_by_name(path):
    """None, bytes or a number met a TypeError inside pathlib or os.walk."""
    from sepsti.corpora.audio import audio_files

    for read in (audio_info, read_audio, lambda path: next(read_audio_blocks(path))):
        with pytest.raises(ParameterError, match=rf"^path={path!r} must be a path \(a str or os\.PathLike\)$"):
            read(path)
    with pytest.raises(ParameterError, match=rf"^root={path!r} must be a path \(a str or os\.PathLike\)$"):
        audio_files(path)


def test_blocks_downmix_and_count_as_the_whole_file_does(tmp_path, rng):
    stereo = rng.uniform(-0.5, 0.5, size=(10, 2))
    path = _write(tmp_path / "s.wav", stereo, subtype="DOUBLE")
    blocks = list(read_audio_blocks(path, block_size=4))
    assert [len(block) for block in blocks] == [4, 4, 2]
    np.testing.assert_array_equal(np.concatenate(blocks), stereo.mean(axis=1))
    kept = list(read_audio_blocks(path, block_size=4, downmix=False))
    np.testing.assert_array_equal(np.concatenate(kept), stereo)
    bad = _write(tmp_path / "nan.wav", np.array([0.1, 0.2, 0.3, 0.4, 0.5, np.nan, 0.7]), subtype="FLOAT")
    with pytest.raises(ParameterError, match=r"nan\.wav: 1 sample\(s\) are NaN or Inf \(in the block from sample 4\)$"):
        list(read_audio_blocks(bad, block_size=4))


def test_fewer_samples_than_the_header_counts_are_refused(tmp_path, monkeypatch):
    path = _write(tmp_path / "a.wav", np.zeros(100))
    header = soundfile.info

    def overcounted(file):
        info = header(file)
        info.frames += 3
        return info

    monkeypatch.setattr(soundfile, "info", overcounted)
    why = r"a\.wav: corrupt audio file \(header says 103 samples, 100 could be read\)$"
    with pytest.raises(ParameterError, match=why):
        read_audio(path)
    with pytest.raises(ParameterError, match=why):
        list(read_audio_blocks(path, block_size=64))


def test_a_wav_with_a_chunk_after_its_data_is_read_whole(tmp_path):
    """A LIST chunk of tags after the samples (as many editors write them): its bytes beyond the data chunk's
    are no shortfall, not a truncation."""
    samples = (np.arange(800) % 64 - 32).astype(np.int16)
    fmt = struct.pack("<HHIIHH", 1, 1, 8000, 16000, 2, 16)
    tags = b"INFOINAM" + struct.pack("<I", 5) + b"title\0"
    path = _raw(tmp_path / "l.wav", _wav([(b"fmt ", fmt), (b"data", samples.tobytes()), (b"LIST", tags)]))
    assert audio_info(path).num_samples == 800
    y, sample_rate = read_audio(path)
    assert sample_rate == 8000
    np.testing.assert_array_equal(y, samples / 32768.0)


def test_a_mono_file_read_without_downmix_is_one_dimensional(tmp_path, rng):
    """Channels kept are a second axis for a multichannel file only: a mono file came back (n, 1)."""
    mono = _write(tmp_path / "m.wav", rng.uniform(-0.5, 0.5, 10), subtype="DOUBLE")
    stereo = _write(tmp_path / "s.wav", rng.uniform(-0.5, 0.5, (10, 2)), subtype="DOUBLE")
    assert read_audio(mono, downmix=False)[0].shape == (10,)
    assert [block.shape for block in read_audio_blocks(mono, block_size=4, downmix=False)] == [(4,), (4,), (2,)]
    y, _ = read_audio(stereo, downmix=False)
    assert y.shape == (10, 2)
    np.testing.assert_array_equal(y, soundfile.read(str(stereo))[0])


def test_zero_length_audio_is_refused_block_by_block_too(tmp_path):
    path = _write(tmp_path / "zero.wav", np.zeros(0))
    with pytest.raises(ParameterError, match=r"zero\.wav: zero-length audio \(no samples\)$"):
        list(read_audio_blocks(path))


def test_the_non_finite_samples_are_counted(tmp_path):
    path = _write(tmp_path / "inf.wav", np.array([0.1, np.inf, 0.3, np.nan, -np.inf, 0.6]), subtype="FLOAT")
    with pytest.raises(ParameterError, match=r"inf\.wav: 3 sample\(s\) are NaN or Inf$"):
        read_audio(path)
    with pytest.raises(ParameterError, match=r"inf\.wav: 2 sample\(s\) are NaN or Inf \(in the block from sample 0\)$"):
        list(read_audio_blocks(path, block_size=4))


def test_audio_files_walk_the_folders_in_sorted_order(tmp_path, rng):
    """Files of a folder before its subfolders', the subfolders by name at every depth."""
    from sepsti.corpora.audio import audio_files

    y = rng.uniform(-0.5, 0.5, 80)
    names = ["a/x.wav", "a/b/y.wav", "a/c/z.wav", "b/x.wav", "c/x.wav", "d/x.wav", "e/x.wav", "z.wav"]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        _write(tmp_path / name, y)
    assert [path.relative_to(tmp_path).as_posix() for path in audio_files(str(tmp_path))] == [
        "z.wav", "a/x.wav", "a/b/y.wav", "a/c/z.wav", "b/x.wav", "c/x.wav", "d/x.wav", "e/x.wav"]


def test_check_aligned_refuses_another_rate_or_length_naming_both_files():
    from sepsti.corpora.audio import check_aligned

    y = np.zeros(100)
    check_aligned("n.wav", y, 8000, "c.wav", y.copy(), 8000)
    with pytest.raises(ParameterError, match=r"^n\.wav: sample rate 8000 Hz differs from 16000 Hz of its clean file "
                                             r"c\.wav$"):
        check_aligned("n.wav", y, 8000, "c.wav", y, 16000)
    with pytest.raises(ParameterError, match=r"^n\.wav: 100 samples but its clean file c\.wav has 99; files must be "
                                             r"sample-aligned$"):
        check_aligned("n.wav", y, 8000, "c.wav", y[:99], 8000)


def _corrupt_mp3(path):
    """A 3 s MP3 with 300 of its bytes past the first frame overwritten: libmpg123 prints errors as it decodes."""
    if "MP3" not in soundfile.available_formats():
        pytest.skip("this libsndfile writes no MP3")
    soundfile.write(str(path), 0.1 * np.random.default_rng(0).standard_normal(48000), 16000, format="MP3")
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(1)
    for position in rng.integers(500, len(data), 300):
        data[position] = rng.integers(256)
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("read", [read_audio, lambda path: list(read_audio_blocks(path, block_size=4096))])
def test_a_corrupt_mp3_is_refused_in_one_line_without_the_decoders_own(tmp_path, capfd, monkeypatch, read):
    import contextlib

    from sepsti.corpora import audio

    path = _corrupt_mp3(tmp_path / "a.mp3")
    with pytest.raises(ParameterError, match=r"a\.mp3: corrupt audio file \(header says 48000 samples, \d+ could"):
        read(path)
    assert capfd.readouterr().err == ""
    monkeypatch.setattr(audio, "_decoders_quiet", contextlib.nullcontext)
    with pytest.raises(ParameterError):
        read(path)
    assert "libmpg123" in capfd.readouterr().err  # what the quieting keeps from the terminal


def test_standard_error_is_back_between_blocks_and_after(tmp_path, capfd):
    import sys

    path = _write(tmp_path / "a.wav", np.zeros(300))
    print("before", file=sys.stderr, end=" ")  # buffered by Python: flushed before the quieting, not lost
    for number, _ in enumerate(read_audio_blocks(path, block_size=100)):
        os.write(2, f"block {number} ".encode())
    read_audio(path)
    os.write(2, b"after")
    assert capfd.readouterr().err == "before block 0 block 1 block 2 after"
