"""Dictionary files: round trip, atomic writing, and one named error per bad field."""

import os
import zipfile

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti import features
from sepsti.band_gains import NUM_INPUTS
from sepsti.dictionary import (FIELDS, OPTIONAL_FIELDS, Dictionary, default_dictionary_path, load_dictionary,
                               save_dictionary)


def _dictionary(rng, rank=4):
    return Dictionary(W=rng.gamma(1.0, 1.0, (257, rank)), rank=rank, sample_rate=8000, n_fft=512,
                      hop_length=256, window="hamming", scale=32768.0, prior_rate=0.0, corpus="corpus",
                      files=("sp01", "sp02"), iterations=10, seed=3, version="0.1.0")


def _fields(dictionary):
    return {"W": dictionary.W, "rank": np.int64(dictionary.rank), "sample_rate": np.int64(dictionary.sample_rate),
            "n_fft": np.int64(dictionary.n_fft), "hop_length": np.int64(dictionary.hop_length),
            "window": np.str_(dictionary.window), "scale": np.float64(dictionary.scale),
            "prior_rate": np.float64(dictionary.prior_rate), "corpus": np.str_(dictionary.corpus),
            "files": np.array(dictionary.files), "iterations": np.int64(dictionary.iterations),
            "seed": np.int64(dictionary.seed), "version": np.str_(dictionary.version)}


def _band_gains(rng, hidden=(5, 3)):
    from sepsti.band_gains import NUM_INPUTS, BandGains

    sizes = (NUM_INPUTS, *hidden)
    return BandGains(rng.standard_normal((2, NUM_INPUTS)), rng.uniform(0.5, 2.0, (2, NUM_INPUTS)),
                     tuple(rng.standard_normal((2, a + 1, b)) for a, b in zip(sizes, sizes[1:])),
                     rng.standard_normal((2, hidden[-1] + 1)))


def _band_gain_fields(band_gains):
    hidden = {f"band_gains_hidden_{i}": layer for i, layer in enumerate(band_gains.hidden, start=1)}
    return {"band_gains_mean": band_gains.mean, "band_gains_scale": band_gains.scale, **hidden,
            "band_gains_output": band_gains.output}


def test_round_trip(tmp_path, rng):
    original = _dictionary(rng)._replace(mask_atoms=rng.gamma(1.0, 1.0, (257, 4)), band_gains=_band_gains(rng))
    path = tmp_path / "d.npz"
    save_dictionary(path, original, dtype=np.float32)
    loaded = load_dictionary(path)
    np.testing.assert_array_equal(loaded.W, original.W.astype(np.float32))
    np.testing.assert_array_equal(loaded.mask_atoms, original.mask_atoms.astype(np.float32))
    for field in FIELDS[1:] + ("context",):
        assert getattr(loaded, field) == getattr(original, field), field
    stored = _band_gain_fields(loaded.band_gains)
    for name, array in _band_gain_fields(original.band_gains).items():
        np.testing.assert_array_equal(stored[name], array.astype(np.float32))  # stored as W is
        assert stored[name].dtype == np.float64
    rows = rng.normal(0.0, 2.0, (30, loaded.band_gains.mean.shape[1]))  # the networks run in single precision
    np.testing.assert_array_equal(loaded.band_gains.predict(rows), original.band_gains.predict(rows))
    assert os.listdir(tmp_path) == ["d.npz"]
    with np.load(path, allow_pickle=False) as archive:
        assert set(archive.files) == set(FIELDS) | {"context", "mask_atoms"} | set(stored)
    assert loaded.band_gains.predicts == "gain"


def test_networks_predicting_the_move_say_so_in_the_file(tmp_path, rng):
    """What the networks predict is stored only where it is not the ideal gain, and read back."""
    original = _dictionary(rng)._replace(band_gains=_band_gains(rng)._replace(predicts="move"))
    save_dictionary(tmp_path / "d.npz", original)
    with np.load(tmp_path / "d.npz", allow_pickle=False) as archive:
        assert str(archive["band_gains_predicts"]) == "move"
    loaded = load_dictionary(tmp_path / "d.npz")
    assert loaded.band_gains.predicts == "move"
    np.testing.assert_array_equal(loaded.band_gains.output, original.band_gains.output)


@pytest.mark.parametrize("change, message", [
    (lambda arrays: arrays.pop("band_gains_output"), "field 'band_gains_output': the band gains are stored as"),
    (lambda arrays: arrays.pop("band_gains_hidden_1"), "field 'band_gains_hidden_1': the band gains are stored as"),
    (lambda arrays: arrays.update(band_gains_extra=np.ones(3)), "field 'band_gains_extra': the band gains are"),
    (lambda arrays: arrays.update(band_gains_mean=np.ones((2, 5))), "field 'band_gains': shapes .* do not chain"),
    (lambda arrays: arrays.update(band_gains_scale=-np.ones((2, NUM_INPUTS))),
     "field 'band_gains' must be finite, with positive scales"),
    (lambda arrays: arrays.update(band_gains_predicts=np.str_("moves")),
     "field 'band_gains': predicts 'moves', expected one of gain, move"),
    (lambda arrays: arrays.update(band_gains_predicts=np.ones(2)), "field 'band_gains_predicts' must be a scalar"),
])
def test_bad_band_gains_are_named(tmp_path, rng, change, message):
    arrays = {**_fields(_dictionary(rng)), **_band_gain_fields(_band_gains(rng))}
    change(arrays)
    np.savez(tmp_path / "d.npz", **arrays)
    with pytest.raises(ParameterError, match=message):
        load_dictionary(tmp_path / "d.npz")


def test_networks_of_an_earlier_version_are_refused_unless_left_out(tmp_path, rng):
    """A recipe that trains the networks again reads a file whose networks an earlier version trained."""
    networks = _band_gains(rng)
    earlier = networks._replace(mean=networks.mean[:, :185], scale=networks.scale[:, :185],
                                hidden=(networks.hidden[0][:, -186:], *networks.hidden[1:]))
    original = _dictionary(rng)
    np.savez(tmp_path / "d.npz", **_fields(original), **_band_gain_fields(earlier))
    with pytest.raises(ParameterError, match="networks of 185 inputs, .* train them again"):
        load_dictionary(tmp_path / "d.npz")
    loaded = load_dictionary(tmp_path / "d.npz", band_gains=False)
    assert loaded.band_gains is None
    np.testing.assert_array_equal(loaded.W, original.W)


def test_numbers_that_need_their_full_width_round_trip(tmp_path, rng):
    """A prior rate not exact in float32 and a seed and iteration count beyond 32 bits come back as saved."""
    original = _dictionary(rng)._replace(prior_rate=0.1, seed=2 ** 40 + 1, iterations=2 ** 33, scale=32768.1)
    save_dictionary(tmp_path / "d.npz", original)
    loaded = load_dictionary(tmp_path / "d.npz", features=False)
    assert (loaded.prior_rate, loaded.seed, loaded.iterations, loaded.scale) == (0.1, 2 ** 40 + 1, 2 ** 33, 32768.1)


def test_atoms_of_several_frames_round_trip(tmp_path, rng):
    original = _dictionary(rng)._replace(W=rng.gamma(1.0, 1.0, (3 * 257, 4)), context=1)
    save_dictionary(tmp_path / "d.npz", original)
    loaded = load_dictionary(tmp_path / "d.npz")
    assert loaded.context == 1 and loaded.framing == features.NARROWBAND
    np.testing.assert_array_equal(loaded.W, original.W)


def test_a_file_without_context_holds_single_frames(tmp_path, rng):
    np.savez(tmp_path / "d.npz", **_fields(_dictionary(rng)))  # as files were written before the field
    assert load_dictionary(tmp_path / "d.npz").context == 0


def test_a_file_without_mask_atoms_or_band_gains_has_none_and_writes_none(tmp_path, rng):
    np.savez(tmp_path / "d.npz", **_fields(_dictionary(rng)))
    loaded = load_dictionary(tmp_path / "d.npz")
    assert loaded.mask_atoms is None and loaded.band_gains is None
    save_dictionary(tmp_path / "again.npz", loaded)
    with np.load(tmp_path / "again.npz", allow_pickle=False) as archive:
        assert "mask_atoms" not in archive.files
        assert not [name for name in archive.files if name.startswith("band_gains")]


@pytest.mark.parametrize("value, message", [
    (np.ones((256, 4)), r"'mask_atoms' must have shape \(257, 4\), a frame of bins per atom, got \(256, 4\)"),
    (np.ones((771, 4)), r"'mask_atoms' must have shape \(257, 4\)"),
    (np.ones((257, 3)), r"'mask_atoms' must have shape \(257, 4\)"),
    (-np.ones((257, 4)), "'mask_atoms' must be finite and non-negative"),
    (np.full((257, 4), np.inf), "'mask_atoms' must be finite and non-negative"),
    (np.array([["a"] * 4] * 257), "'mask_atoms' must be a real array"),
])
def test_bad_mask_atoms_are_named(tmp_path, rng, value, message):
    arrays = {**_fields(_dictionary(rng)), "mask_atoms": value}
    np.savez(tmp_path / "d.npz", **arrays)
    with pytest.raises(ParameterError, match=message):
        load_dictionary(tmp_path / "d.npz")
    with pytest.raises(ParameterError, match=message):
        save_dictionary(tmp_path / "e.npz", _dictionary(rng)._replace(mask_atoms=value))


@pytest.mark.parametrize("context, rows, message", [
    (np.int64(1), 257, "'W' has 257 rows but n_fft=512 gives 257 frequency bins, 3 frames of them with context=1: 771"),
    (np.int64(0), 771, "'W' has 771 rows but n_fft=512 gives 257 frequency bins$"),
    (np.int64(-1), 257, "'context'=-1 must be >= 0"),
    (np.float64(1.0), 771, "'context' must be an integer"),
])
def test_bad_context_is_named(tmp_path, rng, context, rows, message):
    arrays = _fields(_dictionary(rng))
    arrays["W"], arrays["context"] = rng.gamma(1.0, 1.0, (rows, 4)), context
    np.savez(tmp_path / "d.npz", **arrays)
    with pytest.raises(ParameterError, match=message):
        load_dictionary(tmp_path / "d.npz")


def test_save_rejects_bad_dictionary_and_leaves_nothing(tmp_path, rng):
    bad = _dictionary(rng)._replace(W=-np.ones((257, 4)))
    with pytest.raises(ParameterError, match="'W' has negative"):
        save_dictionary(tmp_path / "d.npz", bad)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("field", FIELDS)
def test_missing_field_is_named(tmp_path, rng, field):
    arrays = _fields(_dictionary(rng))
    del arrays[field]
    np.savez(tmp_path / "d.npz", **arrays)
    with pytest.raises(ParameterError, match=f"field '{field}' is missing"):
        load_dictionary(tmp_path / "d.npz")


@pytest.mark.parametrize("field, value, message", [
    ("W", np.ones((256, 4)), "'W' has 256 rows .* n_fft=512 gives 257"),
    ("W", np.ones((257, 3)), "'W' has 3 columns but rank=4"),
    ("W", np.ones(257), "'W' must be 2-D"),
    ("W", np.full((257, 4), np.nan), "'W' has 1028 NaN or infinite"),
    ("W", -np.ones((257, 4)), "'W' has negative"),
    ("W", np.zeros((257, 4)), "'W' is all zero"),
    ("W", np.array([["a"] * 4] * 257), "'W' must be a real array"),
    ("rank", np.float64(4.0), "'rank' must be an integer"),
    ("rank", np.array([4]), "'rank' must be a scalar"),
    ("sample_rate", np.int64(0), "'sample_rate'=0 must be a positive integer"),
    ("hop_length", np.int64(0), "'hop_length'=0 must be a positive integer"),
    ("sample_rate", np.int64(2_000_000), "sample_rate=2000000: expected 4000..48000 Hz"),
    ("sample_rate", np.int64(1), "sample_rate=1: expected 4000..48000 Hz"),
    ("W", np.c_[np.ones((257, 3)), np.full(257, 1e-312)], "atom 3 sums to 2.57e-310, too small"),
    ("n_fft", np.int64(510), "'W' has 257 rows .* n_fft=510 gives 256"),
    ("hop_length", np.int64(128), "n_fft=512, hop_length=128: expected an even n_fft and hop_length = n_fft / 2"),
    ("window", np.str_("hann"), "'window'='hann' does not match"),
    ("window", np.int64(3), "'window' must be a string"),
    ("scale", np.float64(1.0), "'scale'=1.0 does not match"),
    ("scale", np.float64(-1.0), "'scale'=-1.0 must be positive"),
    ("scale", np.float64(0.0), "'scale'=0.0 must be positive"),
    ("scale", np.float64(np.inf), "'scale'=inf must be positive"),
    ("prior_rate", np.float64(np.nan), "'prior_rate'=nan must be >= 0"),
    ("iterations", np.int64(-1), "'iterations'=-1 must be >= 0"),
    ("files", np.array([[1, 2]]), "'files' must be a 1-D array of strings"),
    ("files", np.array([1, 2]), r"'files' must be a 1-D array of strings, got dtype int64 and shape \(2,\)"),
    ("files", np.array([["sp01", "sp02"]]), r"'files' must be a 1-D array .* dtype <U4 and shape \(1, 2\)"),
    ("W", np.ones((257, 5)), "'W' has 5 columns but rank=4"),
    ("W", np.r_[np.ones((256, 4)), [[1.0, 1.0, -1e-300, 1.0]]], r"'W' has negative entries \(min -1e-300\)"),
])
def test_bad_field_is_named(tmp_path, rng, field, value, message):
    _assert_bad_field_is_named(tmp_path, _dictionary(rng), field, value, message)


def _assert_bad_field_is_named(tmp_path, dictionary, field, value, message):
    arrays = _fields(dictionary)
    arrays[field] = value
    np.savez(tmp_path / "d.npz", **arrays)
    with pytest.raises(ParameterError, match=message):
        load_dictionary(tmp_path / "d.npz")


def test_a_dead_atom_loads(tmp_path, rng):
    """EM can leave an atom unused and at zero: the enhancer's fit gives it no weight."""
    dictionary = _dictionary(rng)
    dictionary.W[:, 2] = 0.0
    save_dictionary(tmp_path / "d.npz", dictionary)
    assert not np.any(load_dictionary(tmp_path / "d.npz").W[:, 2])


def test_a_huge_W_is_refused_from_its_header(tmp_path, rng, monkeypatch):
    """The size is read from W's header, before W itself: a file that unpacks to gigabytes is not unpacked."""
    import sepsti.dictionary

    arrays = _fields(_dictionary(rng, rank=40))
    arrays["rank"] = np.int64(40)
    np.savez_compressed(tmp_path / "d.npz", **arrays)
    monkeypatch.setattr(sepsti.dictionary, "MAX_ENTRIES", 257 * 40 - 1)
    monkeypatch.setattr(np.lib.npyio.NpzFile, "__getitem__", None)  # reading any array would fail
    with pytest.raises(ParameterError, match=r"'W' has shape \(257, 40\) \(10,280 entries\), more than the 10,279"):
        load_dictionary(tmp_path / "d.npz")


def test_other_overlap_loads_when_features_not_required(tmp_path, rng):
    arrays = _fields(_dictionary(rng))
    arrays["hop_length"] = np.int64(128)
    np.savez(tmp_path / "d.npz", **arrays)
    assert load_dictionary(tmp_path / "d.npz", features=False).hop_length == 128


def test_a_hop_of_zero_is_refused_when_features_are_not_required(tmp_path, rng):
    from sepsti.dictionary import validate_dictionary

    arrays = _fields(_dictionary(rng))
    arrays["hop_length"] = np.int64(0)
    np.savez(tmp_path / "d.npz", **arrays)
    with pytest.raises(ParameterError, match="'hop_length'=0 must be a positive integer"):
        load_dictionary(tmp_path / "d.npz", features=False)
    with pytest.raises(ParameterError, match="'hop_length'=0 must be a positive integer"):
        validate_dictionary(_dictionary(rng)._replace(hop_length=0))


def test_a_hop_other_than_half_the_window_is_saved_and_framed_as_given(tmp_path, rng):
    save_dictionary(tmp_path / "d.npz", _dictionary(rng)._replace(hop_length=128))
    loaded = load_dictionary(tmp_path / "d.npz", features=False)
    assert loaded.hop_length == 128 and loaded.framing == features.Framing(8000, 512, 128)


def test_limits_that_are_allowed_load(tmp_path, rng):
    """No iterations (a dictionary left at its start), integer scale and prior rate, and atoms summing to 1e-300
    (above float64's smallest normal, 2.2e-308, so scalable to sum 1) all load."""
    arrays = _fields(_dictionary(rng))
    arrays.update(iterations=np.int64(0), scale=np.int64(32768), prior_rate=np.int64(2))
    arrays["W"][:, 1] = 1e-300 / 257
    np.savez(tmp_path / "d.npz", **arrays)
    loaded = load_dictionary(tmp_path / "d.npz")
    assert (loaded.iterations, loaded.scale, loaded.prior_rate) == (0, 32768.0, 2.0)
    assert loaded.W[:, 1].sum() == pytest.approx(1e-300, rel=1e-12)


def test_integer_fields_stored_unsigned_load(tmp_path, rng):
    """Counts stored as unsigned integers (as another writer may store them) are integers: they load as such."""
    arrays = _fields(_dictionary(rng))
    arrays.update(rank=np.uint8(4), sample_rate=np.uint32(8000), n_fft=np.uint16(512), hop_length=np.uint64(256),
                  iterations=np.uint32(10), seed=np.uint64(3), context=np.uint8(0))
    np.savez(tmp_path / "d.npz", **arrays)
    loaded = load_dictionary(tmp_path / "d.npz")
    assert (loaded.rank, loaded.sample_rate, loaded.n_fft, loaded.hop_length, loaded.iterations, loaded.seed,
            loaded.context) == (4, 8000, 512, 256, 10, 3, 0)
    assert all(type(getattr(loaded, field)) is int for field in ("rank", "sample_rate", "seed", "context"))


def _wideband(rng, rank=6):
    return _dictionary(rng, rank)._replace(W=rng.gamma(1.0, 1.0, (513, rank)).astype(np.float32), sample_rate=16000,
                                           n_fft=1024, hop_length=512, corpus="wideband", files=("103", "1034"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_wideband_round_trip(tmp_path, rng, dtype):
    original = _wideband(rng)
    path = tmp_path / "wide.npz"
    save_dictionary(path, original, dtype=dtype)
    with np.load(path, allow_pickle=False) as archive:
        assert archive["W"].dtype == dtype
    loaded = load_dictionary(path)
    assert loaded.W.dtype == np.float64
    np.testing.assert_array_equal(loaded.W, original.W.astype(dtype))
    assert loaded.framing == features.Framing(16000, 1024, 512) == features.framing_for_rate(16000)
    assert loaded.framing.n_bins == 513
    for field in FIELDS[1:] + tuple(OPTIONAL_FIELDS):
        assert getattr(loaded, field) == getattr(original, field), field


@pytest.mark.parametrize("field, value, message", [
    ("W", np.ones((257, 6)), "'W' has 257 rows .* n_fft=1024 gives 513"),
    ("n_fft", np.int64(512), "'W' has 513 rows .* n_fft=512 gives 257"),
    ("hop_length", np.int64(256), "n_fft=1024, hop_length=256: expected .* hop_length = n_fft / 2"),
    ("sample_rate", np.float64(16000.0), "'sample_rate' must be an integer"),
    ("sample_rate", np.int64(-16000), "'sample_rate'=-16000 must be a positive integer"),
])
def test_wideband_bad_field_is_named(tmp_path, rng, field, value, message):
    _assert_bad_field_is_named(tmp_path, _wideband(rng), field, value, message)


def test_save_refuses_other_storage_types(tmp_path, rng):
    with pytest.raises(ParameterError, match="float32 or float64"):
        save_dictionary(tmp_path / "d.npz", _wideband(rng), dtype=np.float16)
    assert os.listdir(tmp_path) == []


def test_framing_for_rate():
    assert features.framing_for_rate(8000) == features.NARROWBAND
    assert features.framing_for_rate(16000) == (16000, 1024, 512)
    assert features.framing_for_rate(22050) == (22050, 1412, 706)
    with pytest.raises(ParameterError, match="sample_rate=500"):
        features.framing_for_rate(500)


@pytest.mark.parametrize("rate, accepted", [(3999, False), (4000, True), (22050, True), (44100, True), (48000, True),
                                            (48001, False)])
def test_dictionaries_load_at_every_rate_from_4_to_48_khz(tmp_path, rng, rate, accepted):
    """A dictionary trained at any rate from 4 kHz to 48 kHz, both included, loads with its framing; outside, none."""
    framing = features.framing_for_rate(rate)
    dictionary = _dictionary(rng)._replace(W=rng.gamma(1.0, 1.0, (framing.n_bins, 4)), sample_rate=rate,
                                           n_fft=framing.n_fft, hop_length=framing.hop_length)
    save_dictionary(tmp_path / "d.npz", dictionary)
    if accepted:
        assert load_dictionary(tmp_path / "d.npz").framing == framing
    else:
        with pytest.raises(ParameterError, match=f"sample_rate={rate}: expected 4000..48000 Hz"):
            load_dictionary(tmp_path / "d.npz")


def test_not_a_dictionary_file(tmp_path, rng):
    cases = {"missing.npz": None, "empty.npz": b"", "text.npz": b"hello, not numpy\n", "short.npz": b"PK"}
    for name, content in cases.items():
        if content is not None:
            (tmp_path / name).write_bytes(content)
    with pytest.raises(ParameterError, match="no such file"):
        load_dictionary(tmp_path / "missing.npz")
    with pytest.raises(ParameterError, match="empty file"):
        load_dictionary(tmp_path / "empty.npz")
    with pytest.raises(ParameterError, match="not a dictionary file"):
        load_dictionary(tmp_path / "text.npz")
    with pytest.raises(ParameterError, match="short.npz: not a dictionary file"):  # two bytes: not empty
        load_dictionary(tmp_path / "short.npz")
    with pytest.raises(ParameterError, match="is a directory"):
        load_dictionary(tmp_path)
    np.save(tmp_path / "array.npy", np.ones(3))
    with pytest.raises(ParameterError, match="not a dictionary file"):
        load_dictionary(tmp_path / "array.npy")
    zipfile.ZipFile(tmp_path / "other.zip", "w").close()  # a zip archive's end record alone: PK\x05\x06
    with pytest.raises(ParameterError, match="not a dictionary file"):
        load_dictionary(tmp_path / "other.zip")


def test_identifiers_keep_their_order_and_a_W_in_npy_format_2_loads(tmp_path, rng):
    """The training files in the order trained on, not sorted; W written in .npy format 2.0 (as NumPy writes an
    array whose header outgrows format 1.0) read from its own header."""
    original = _dictionary(rng)._replace(files=("sp02", "sp10", "sp01"))
    save_dictionary(tmp_path / "d.npz", original)
    assert load_dictionary(tmp_path / "d.npz").files == ("sp02", "sp10", "sp01")
    with zipfile.ZipFile(tmp_path / "v2.npz", "w") as archive:
        for field, value in _fields(original).items():
            with archive.open(f"{field}.npy", "w") as member:
                np.lib.format.write_array(member, np.asarray(value), version=(2, 0) if field == "W" else None)
    with zipfile.ZipFile(tmp_path / "v2.npz") as archive, archive.open("W.npy") as member:
        assert np.lib.format.read_magic(member) == (2, 0)
    np.testing.assert_array_equal(load_dictionary(tmp_path / "v2.npz").W, original.W)


def test_truncated_and_corrupt_archives(tmp_path, rng):
    path = tmp_path / "d.npz"
    save_dictionary(path, _dictionary(rng, rank=64))
    data = path.read_bytes()
    (tmp_path / "truncated.npz").write_bytes(data[:len(data) // 2])
    with pytest.raises(ParameterError, match="not a readable dictionary file"):
        load_dictionary(tmp_path / "truncated.npz")
    # Flip bytes inside the compressed W member: the zip CRC or zlib catches it.
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("W.npy")
    corrupt = bytearray(data)
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 100
    corrupt[start:start + 50] = bytes(50)
    (tmp_path / "corrupt.npz").write_bytes(bytes(corrupt))
    with pytest.raises(ParameterError, match="not a readable dictionary file"):
        load_dictionary(tmp_path / "corrupt.npz")


def test_default_dictionary_path_is_package_data():
    path = default_dictionary_path()
    assert path.name == "default_dictionary.npz"
    assert path.parent.name == "data" and path.parent.parent.name == "sepsti"


def test_default_dictionary_is_valid():
    path = default_dictionary_path()
    if not path.exists():
        pytest.skip("default dictionary not built yet")
    dictionary = load_dictionary(path)
    assert dictionary.W.shape == (features.N_BINS, 128)
    assert dictionary.files == tuple(f"sp{i:02d}" for i in range(1, 21))


def test_save_replaces_an_existing_file_only_when_asked(tmp_path, rng):
    """Refused by default, before anything is written (replaced by default before); replaced with overwrite=True."""
    path = tmp_path / "d.npz"
    save_dictionary(path, _dictionary(rng))
    before = path.read_bytes()
    replacement = _dictionary(rng, rank=3)
    with pytest.raises(ParameterError, match="d.npz: output exists; it was left as it is"):
        save_dictionary(path, replacement)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["d.npz"]
    save_dictionary(path, replacement, overwrite=True)
    np.testing.assert_array_equal(load_dictionary(path).W, replacement.W)
    assert os.listdir(tmp_path) == ["d.npz"]


def test_save_without_overwrite_never_replaces(tmp_path, rng):
    path = tmp_path / "d.npz"
    save_dictionary(path, _dictionary(rng), overwrite=False)
    before = path.read_bytes()
    with pytest.raises(ParameterError, match="output exists"):
        save_dictionary(path, _dictionary(rng, rank=3), overwrite=False)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["d.npz"]


@pytest.mark.parametrize("field, value, shown", [
    ("files", np.full(5, "x" * 8), r"shape \(5,\) of <U8 \(160 bytes\)"),
    ("corpus", np.str_("c" * 40), r"shape \(\) of <U40 \(160 bytes\)"),
    ("version", np.str_("v" * 40), r"shape \(\) of <U40 \(160 bytes\)"),
    ("seed", np.zeros(20), r"shape \(20,\) of float64 \(160 bytes\)"),
    ("context", np.zeros(20), r"shape \(20,\) of float64 \(160 bytes\)"),  # an optional field
])
def test_other_fields_too_large_are_refused_from_their_headers(tmp_path, rng, monkeypatch, field, value, shown):
    """Every field's size is read from its header before any field is read: a file of a few hundred kilobytes
    with ``files = np.full(2 ** 22, 'x' * 8)`` unpacked to 128 MiB, and to 424 MB as identifiers."""
    import sepsti.dictionary

    arrays = _fields(_dictionary(rng))
    arrays[field] = value
    np.savez_compressed(tmp_path / "d.npz", **arrays)
    monkeypatch.setattr(sepsti.dictionary, "MAX_FIELD_BYTES", 159)
    monkeypatch.setattr(np.lib.npyio.NpzFile, "__getitem__", None)  # reading any array would fail
    with pytest.raises(ParameterError, match=rf"field '{field}' has {shown}, more than the 159 it may hold"):
        load_dictionary(tmp_path / "d.npz")


def test_fields_of_exactly_the_size_limits_load(tmp_path, rng, monkeypatch):
    """MAX_FIELD_BYTES and MAX_ENTRIES are the most a field may hold: a field of exactly that size loads."""
    import sepsti.dictionary

    arrays = _fields(_dictionary(rng))
    arrays["files"] = np.full(5, "x" * 8)  # 160 bytes
    np.savez_compressed(tmp_path / "d.npz", **arrays)
    monkeypatch.setattr(sepsti.dictionary, "MAX_FIELD_BYTES", 160)
    monkeypatch.setattr(sepsti.dictionary, "MAX_ENTRIES", 257 * 4)
    loaded = load_dictionary(tmp_path / "d.npz")
    assert loaded.files == ("x" * 8,) * 5 and loaded.W.shape == (257, 4)


def test_identifiers_of_a_real_corpus_load_and_a_bomb_of_them_does_not(tmp_path, rng):
    """MAX_FIELD_BYTES holds 200,000 identifiers of 16 characters (LibriSpeech's are), not 2 ** 22 of 8."""
    arrays = _fields(_dictionary(rng))
    arrays["files"] = np.array([f"{i:06d}-{i:09d}" for i in range(200_000)])
    np.savez_compressed(tmp_path / "real.npz", **arrays)
    assert len(load_dictionary(tmp_path / "real.npz").files) == 200_000
    arrays["files"] = np.full(2 ** 22, "x" * 8)
    np.savez_compressed(tmp_path / "bomb.npz", **arrays)
    with pytest.raises(ParameterError, match=r"field 'files' has shape \(4194304,\) of <U8 \(134,217,728 bytes\)"):
        load_dictionary(tmp_path / "bomb.npz")


def test_a_W_of_entries_wider_than_float64_is_refused_from_its_header(tmp_path, rng, monkeypatch):
    """W's entries are bounded in number (MAX_ENTRIES) and in bytes (as many float64): strings of megabytes
    are refused before they are read."""
    import sepsti.dictionary

    arrays = _fields(_dictionary(rng))
    arrays["W"] = np.full((257, 4), "1" * 3)
    np.savez_compressed(tmp_path / "d.npz", **arrays)
    monkeypatch.setattr(sepsti.dictionary, "MAX_ENTRIES", 257 * 4)
    monkeypatch.setattr(np.lib.npyio.NpzFile, "__getitem__", None)
    with pytest.raises(ParameterError, match=r"field 'W' has shape \(257, 4\) of <U3 \(12,336 bytes\), more than "
                                             r"the 8,224 it may hold"):
        load_dictionary(tmp_path / "d.npz")


def test_atoms_whose_sum_overflows_are_refused(tmp_path, rng):
    """W = 1e308: every atom sums to inf, so scaled to sum 1 it would be all zero (the enhancer's output then at
    the mask floor); refused as atoms too small to be scaled are."""
    from sepsti.dictionary import validate_dictionary

    W = np.c_[np.ones((257, 2)), np.full((257, 2), 1e308)]
    with pytest.raises(ParameterError, match="atom 2 sums to inf, too large to be scaled to sum 1"):
        validate_dictionary(_dictionary(rng)._replace(W=W))
    _assert_bad_field_is_named(tmp_path, _dictionary(rng), "W", W, "atom 2 sums to inf, too large")
    validate_dictionary(_dictionary(rng)._replace(W=np.full((257, 4), 1e305)))  # sums of 2.6e307


def test_save_refuses_a_W_its_storage_type_cannot_hold(tmp_path, rng):
    """Checked as stored: W · 1e39 is inf in float32, a file the loader would refuse; nothing is written."""
    big = _dictionary(rng)._replace(W=_dictionary(rng).W * 1e39)
    beyond = int(np.sum(big.W > np.finfo(np.float32).max))
    with pytest.raises(ParameterError, match=rf"d.npz \(stored as float32\): field 'W' has {beyond} NaN or infinite"):
        save_dictionary(tmp_path / "d.npz", big, dtype=np.float32)
    assert os.listdir(tmp_path) == []
    save_dictionary(tmp_path / "d.npz", big)
    np.testing.assert_array_equal(load_dictionary(tmp_path / "d.npz").W, big.W)


@pytest.mark.parametrize("field, value, message", [
    ("files", "abc", "'files' must be a tuple of strings, got 'abc'"),  # was stored as ('a', 'b', 'c')
    ("files", ("sp01", 2), "'files' must be a tuple of strings"),
    ("files", None, "'files' must be a tuple of strings, got None"),
    ("sample_rate", 8000.9, "'sample_rate'=8000.9 must be an integer"),  # was stored as 8000
    ("sample_rate", 8000.0, "'sample_rate'=8000.0 must be an integer"),  # the loader refuses a float
    ("rank", True, "'rank'=True must be an integer"),
    ("n_fft", "512", "'n_fft'='512' must be an integer"),  # was a TypeError
    ("context", 0.5, "'context'=0.5 must be an integer"),
    ("window", None, "'window'=None must be a string"),  # was stored as 'None'
    ("corpus", b"c", "'corpus'=b'c' must be a string"),
    ("scale", "32768", "'scale'='32768' must be a real number"),
    ("scale", True, "'scale'=True must be a real number"),  # was stored as 1.0
    ("prior_rate", 1j, r"'prior_rate'=1j must be a real number"),
])
def test_save_refuses_fields_of_the_wrong_type_and_writes_nothing(tmp_path, rng, field, value, message):
    with pytest.raises(ParameterError, match=rf"d.npz: field {message}"):
        save_dictionary(tmp_path / "d.npz", _dictionary(rng)._replace(**{field: value}))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("field, value", [("seed", 2 ** 64), ("seed", -2 ** 63 - 1), ("iterations", 2 ** 63)])
def test_save_refuses_an_integer_beyond_64_bits_and_writes_nothing(tmp_path, rng, field, value):
    """The file holds 64-bit integers: a larger one was an OverflowError from NumPy, not a named field."""
    with pytest.raises(ParameterError, match=rf"d.npz: field '{field}'={value} does not fit the 64-bit integer a "
                                             r"dictionary file holds$"):
        save_dictionary(tmp_path / "d.npz", _dictionary(rng)._replace(**{field: value}))
    assert os.listdir(tmp_path) == []
    save_dictionary(tmp_path / "d.npz", _dictionary(rng)._replace(seed=2 ** 63 - 1))
    assert load_dictionary(tmp_path / "d.npz").seed == 2 ** 63 - 1


def test_numpy_scalars_and_lists_of_identifiers_are_saved_as_the_fields(tmp_path, rng):
    dictionary = _dictionary(rng)._replace(rank=np.int64(4), sample_rate=np.int32(8000), scale=np.float32(32768),
                                           prior_rate=0, files=["sp01", np.str_("sp02")], window=np.str_("hamming"))
    save_dictionary(tmp_path / "d.npz", dictionary)
    loaded = load_dictionary(tmp_path / "d.npz")
    assert (loaded.rank, loaded.sample_rate, loaded.scale, loaded.files) == (4, 8000, 32768.0, ("sp01", "sp02"))


def test_validate_dictionary_returns_identifiers_as_a_tuple_and_W_as_float64(rng):
    """As a loaded dictionary holds them: a list of identifiers becomes a tuple, a W of integers or float32 float64."""
    from sepsti.dictionary import validate_dictionary

    W = rng.integers(0, 5, (257, 4))
    W[0] = 1  # not all zero
    for given in (W, W.astype(np.float32)):
        checked = validate_dictionary(_dictionary(rng)._replace(W=given, files=["sp01", "sp02"]))
        assert checked.files == ("sp01", "sp02") and type(checked.files) is tuple
        assert checked.W.dtype == np.float64
        np.testing.assert_array_equal(checked.W, W)


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    """Opening a FIFO for reading blocks until a writer comes: refused as not a regular file, as audio is."""
    import threading

    fifo = tmp_path / "d.npz"
    os.mkfifo(fifo)
    errors = []

    def load():
        try:
            load_dictionary(fifo)
        except ParameterError as error:
            errors.append(str(error))

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(timeout=10)
    if thread.is_alive():  # let the blocked reader go before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout=10)
        pytest.fail("load_dictionary waited on a FIFO")
    assert errors == [f"dictionary {fifo}: not a regular file"]


def test_saving_onto_a_folder_is_refused_before_anything_is_written(tmp_path, rng, monkeypatch):
    (tmp_path / "d.npz").mkdir()
    monkeypatch.setattr(np, "savez_compressed", None)  # writing would fail otherwise
    for overwrite in (True, False):
        with pytest.raises(ParameterError, match="d.npz: output is a directory"):
            save_dictionary(tmp_path / "d.npz", _dictionary(rng), overwrite=overwrite)
    assert os.listdir(tmp_path) == ["d.npz"] and os.listdir(tmp_path / "d.npz") == []
