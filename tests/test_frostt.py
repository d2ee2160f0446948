import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.sparse_tensor import SparseTensor, coalesce, from_dense, to_dense, validate_sparse_tensor
from sepsti.corpora.frostt import read_tns, write_tns


def _write(tmp_path, text, name="t.tns"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _raw(tmp_path, data, name="t.tns"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_reads_comments_blank_lines_and_infers_shape(tmp_path):
    path = _write(tmp_path, "# a header\n\n1 1 1 2\n  3 2 1   1.5  # trailing comment\n\n2 4 3 1\n")
    tensor = read_tns(path)
    assert tensor.shape == (3, 4, 3)
    dense = np.zeros((3, 4, 3))
    dense[0, 0, 0], dense[2, 1, 0], dense[1, 3, 2] = 2, 1.5, 1
    np.testing.assert_array_equal(to_dense(tensor), dense)
    assert tensor.coords.dtype == np.int64


def test_given_shape_and_chunk_boundaries(tmp_path, rng):
    coords = np.stack([rng.integers(0, n, size=500) for n in (30, 20, 10)], axis=1)
    tensor = coalesce(coords, rng.integers(1, 5, size=500), (30, 20, 10))
    path = write_tns(tmp_path / "x.tns", tensor, comment="random\ncounts")
    assert path.read_text().splitlines()[:3] == ["# shape: 30 20 10", "# random", "# counts"]
    for chunk in (1, 7, 10_000):
        back = read_tns(path, shape=(31, 20, 10), chunk_lines=chunk)
        assert back.shape == (31, 20, 10)
        np.testing.assert_array_equal(back.coords, tensor.coords)
        np.testing.assert_array_equal(back.values, tensor.values)


def test_gzip_round_trip_and_four_modes(tmp_path, rng):
    coords = np.stack([rng.integers(0, 5, size=50) for _ in range(4)], axis=1)
    tensor = coalesce(coords, rng.random(50), (5, 5, 5, 5))
    path = write_tns(tmp_path / "x.tns.gz", tensor)
    assert path.read_bytes()[:2] == b"\x1f\x8b"  # gzip's magic number
    back = read_tns(path)
    np.testing.assert_array_equal(back.coords, tensor.coords)
    np.testing.assert_allclose(back.values, tensor.values, rtol=1e-15)
    # a file compressed elsewhere (FROSTT's indices count from 1)
    with gzip.open(tmp_path / "y.tns.gz", "wt") as stream:
        stream.write("2 1 3 1 2.5\n")
    other = read_tns(tmp_path / "y.tns.gz")
    assert other.shape == (2, 1, 3, 1) and other.coords.tolist() == [[1, 0, 2, 0]] and other.values.tolist() == [2.5]


def test_duplicates_are_summed_with_a_warning(tmp_path):
    path = _write(tmp_path, "1 1 1 1\n1 1 1 2\n2 2 2 0\n")
    with pytest.warns(UserWarning, match="1 lines repeat"):
        tensor = read_tns(path)
    assert tensor.nnz == 1 and tensor.values[0] == 3
    assert tensor.shape == (2, 2, 2)


@pytest.mark.parametrize("text, match", [
    ("1 1 1 1\n1 2 1\n", r"t\.tns:2: expected 4 columns \(3 indices and a value\), found 3"),
    ("1 1 1 1\n# c\n1 2 1 1 5\n", r":3: expected 4 columns"),
    ("1 1 1 1\n1 x 1 1\n", r":2: index 'x' in column 2 is not an integer"),
    ("1 1.5 1 1\n", r":1: index '1.5' in column 2 is not an integer"),
    ("1 1 1 1\n\n1 1 0 1\n", r":3: index 0 in column 3 is below 1"),
    ("1 1 1 abc\n", r":1: value 'abc' is not a number"),
    ("1 1 1 -2\n", r":1: value '-2' is negative"),
    ("1 1 1 nan\n", r":1: value 'nan' is not finite"),
    ("1 1 1 1\n1 1 2 inf\n", r":2: value 'inf' is not finite"),  # accepted when NaN alone was refused
    ("# only a comment\n\n", r"no entries"),
    ("5\n", r":1: a line needs at least one index and a value"),
])
def test_malformed_lines_name_the_line(tmp_path, text, match):
    with pytest.raises(ParameterError, match=match):
        read_tns(_write(tmp_path, text), chunk_lines=2)


def test_line_numbers_count_across_chunks(tmp_path):
    text = "".join("1 1 1 1\n" for _ in range(9)) + "1 1\n"
    with pytest.raises(ParameterError, match=r":10: expected 4 columns"):
        read_tns(_write(tmp_path, text), chunk_lines=4)


def test_index_beyond_given_shape(tmp_path):
    with pytest.raises(ParameterError, match=r":2: index 4 in column 1 exceeds the given shape"):
        read_tns(_write(tmp_path, "1 1 1 1\n4 1 1 1\n"), shape=(3, 3, 3))


def test_negative_values_allowed_when_not_counts(tmp_path):
    tensor = read_tns(_write(tmp_path, "1 1 1 -2.5\n"), counts=False)
    assert tensor.values[0] == -2.5


def test_write_refuses_to_overwrite(tmp_path):
    path = _write(tmp_path, "1 1 1 1\n")
    with pytest.raises(ParameterError, match="exists"):
        write_tns(path, read_tns(path))


def test_coalesce_refuses_coordinates_outside_the_shape():
    # flattened, [0, 5] in a 3 x 3 tensor would land on [1, 2] and be summed into it
    from sepsti.core.errors import ParameterError

    with pytest.raises(ParameterError, match=r"coords\[0\] = \[0, 5\]: outside the shape \(3, 3\)"):
        coalesce([[0, 5], [1, 2]], [1.0, 2.0], (3, 3))
    with pytest.raises(ParameterError, match=r"coords\[1\] = \[-1, 0\]"):
        coalesce([[0, 0], [-1, 0]], [1.0, 2.0], (3, 3))


def test_byte_order_mark_is_skipped(tmp_path):
    tensor = read_tns(_raw(tmp_path, b"\xef\xbb\xbf1 1 1 2\r\n2 2 2 3\r\n"))
    assert tensor.coords.tolist() == [[0, 0, 0], [1, 1, 1]] and tensor.values.tolist() == [2.0, 3.0]
    with gzip.open(tmp_path / "bom.tns.gz", "wb") as stream:
        stream.write(b"\xef\xbb\xbf1 1 1 2\n")
    assert read_tns(tmp_path / "bom.tns.gz").values.tolist() == [2.0]


def _gzip_bytes(tmp_path, cut):
    return _raw(tmp_path, cut(gzip.compress(b"1 2 3 4\n" * 5000)), "t.tns.gz")


@pytest.mark.parametrize("make, match", [
    (lambda d: _raw(d, b"1 1 1 2\n\xff\xfe 2 2 3\n"), r"not UTF-8 text \(undecodable byte 0xff\)"),
    (lambda d: _raw(d, gzip.compress(b"1 1 1 2\n")), r"not UTF-8 text"),  # compressed, but not named .gz
    (lambda d: _raw(d, b"not gzip", "t.tns.gz"), r"not a valid gzip file \(Not a gzipped file"),
    (lambda d: _gzip_bytes(d, lambda data: data[:len(data) // 2]), r"not a valid gzip file \(Compressed file ended"),
    (lambda d: _gzip_bytes(d, lambda data: data[:20] + b"\xff" * 10 + data[30:]), r"not a valid gzip file"),
    (lambda d: _gzip_bytes(d, lambda data: data[:-8] + bytes([data[-8] ^ 1]) + data[-7:]), r"CRC check failed"),
    (lambda d: (d / "t.tns").mkdir() or d / "t.tns", r"is a directory"),
    (lambda d: d / "absent.tns", r"no such file$"),  # was a FileNotFoundError
    (lambda d: (d / "t.tns").symlink_to(d / "absent.tns") or d / "t.tns", r"a broken symbolic link$"),
])
def test_unreadable_files_raise_one_line_naming_the_file(tmp_path, make, match):
    path = make(tmp_path)
    with pytest.raises(ParameterError, match=match) as caught:
        read_tns(path)
    assert str(caught.value).startswith(f"{path}: ") and "\n" not in str(caught.value)


def test_recipe_reports_a_bad_tns_file_in_one_line(tmp_path):
    path = _raw(tmp_path, bytes(range(256)))
    recipe = Path(__file__).resolve().parents[1] / "recipes" / "parafac_large.py"
    result = subprocess.run([sys.executable, str(recipe), "--tns", str(path), "--lambdas", "1", "--out",
                             str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (f"recipes/parafac_large.py: error: --tns: {path}: not UTF-8 text "
                                              "(undecodable byte 0x80); a .tns file holds lines 'i_1 ... i_N value'")


def test_shapes_beyond_two_to_the_63_entries(tmp_path):
    # 4e6^3 entries (FROSTT's nell-1 and delicious-4d are this large): no int64 linear index
    path = _write(tmp_path, "4000000 4000000 4000000 1\n1 1 1 2\n4000000 4000000 4000000 3\n1 1 2 0\n")
    with pytest.warns(UserWarning, match="1 lines repeat"):
        tensor = read_tns(path)
    assert tensor.shape == (4000000,) * 3
    assert tensor.coords.tolist() == [[0, 0, 0], [3999999] * 3] and tensor.values.tolist() == [2.0, 4.0]
    # [2**61, 0] and [0, 0] would share the linear index 2**64 ≡ 0 (mod 2**64)
    shape = (2 ** 62, 8)
    coords = [[2 ** 61, 0], [0, 0], [2 ** 61, 0], [5, 7], [2 ** 62 - 1, 7]]
    merged = coalesce(coords, [1.0, 2.0, 4.0, 8.0, 16.0], shape)
    assert merged.coords.tolist() == [[0, 0], [5, 7], [2 ** 61, 0], [2 ** 62 - 1, 7]]
    assert merged.values.tolist() == [2.0, 8.0, 5.0, 16.0]
    assert validate_sparse_tensor(merged).nnz == 4
    with pytest.raises(ParameterError, match="duplicate coordinates"):
        validate_sparse_tensor(SparseTensor(np.array([[2 ** 61, 0], [5, 7], [2 ** 61, 0]]), np.ones(3), shape))


def test_indices_beyond_32_bits_are_read(tmp_path):
    """An index of 3e9 (past 2^31) was refused as not fitting in an integer when indices were read in 32 bits."""
    tensor = read_tns(_write(tmp_path, "3000000000 1 1 2\n1 5000000000 1 3\n"))
    assert tensor.shape == (3000000000, 5000000000, 1)
    assert tensor.coords.tolist() == [[0, 4999999999, 0], [2999999999, 0, 0]] and tensor.values.tolist() == [3.0, 2.0]


def test_coalesce_agrees_on_both_sides_of_two_to_the_63(rng):
    coords = rng.integers(0, 6, size=(400, 4))
    values = rng.integers(0, 3, size=400).astype(float)
    small = coalesce(coords, values, (6, 6, 6, 6))
    large = coalesce(coords, values, (6, 6, 2 ** 40, 2 ** 40))
    np.testing.assert_array_equal(large.coords, small.coords)
    np.testing.assert_array_equal(large.values, small.values)


@pytest.mark.parametrize("values, text", [
    ([1e19, 3.0], "1 1 1e+19\n2 2 3\n"),
    ([-1e19, 3.0], "1 1 -1e+19\n2 2 3\n"),
    ([2.0 ** 53 - 1, 3.0], "1 1 9007199254740991\n2 2 3\n"),
])
def test_write_large_values_without_overflow(tmp_path, values, text):
    tensor = SparseTensor(np.array([[0, 0], [1, 1]]), np.array(values), (2, 2))
    assert write_tns(tmp_path / "v.tns", tensor).read_text() == "# shape: 2 2\n" + text
    assert read_tns(tmp_path / "v.tns", counts=False).values.tolist() == values


@pytest.mark.parametrize("tensor, match", [
    (SparseTensor(np.array([[0, 0, 0]]), np.array([np.nan]), (1, 1, 1)), r"^tensor: values contain NaN or infinity"),
    (SparseTensor(np.array([[0, 1], [1, 1]]), np.array([np.inf, 3.0]), (2, 2)), r"^tensor: values contain NaN"),
    (SparseTensor(np.array([[5, 0, 0]]), np.array([1.0]), (1, 1, 1)), r"^tensor: coords\[0\] = \[5, 0, 0\]: outside"),
    (SparseTensor(np.array([[-1, 0, 0]]), np.array([1.0]), (1, 1, 1)), r"^tensor: coords\[0\] = \[-1, 0, 0\]: outside"),
    (SparseTensor(np.zeros((0, 3), dtype=np.int64), np.zeros(0), (3, 3, 3)), r"^tensor: no stored entries"),
    ((np.array([[0, 0, 0]]), np.array([1.0]), (1, 1, 1)), r"^tensor: expected a SparseTensor"),
])
def test_write_refuses_a_tensor_read_tns_would_not_give_back(tmp_path, tensor, match):
    """NaN values, coordinates outside the shape or below 0 and empty tensors were written."""
    with pytest.raises(ParameterError, match=match):
        write_tns(tmp_path / "x.tns", tensor)
    assert not (tmp_path / "x.tns").exists()


def test_the_shape_is_written_and_read_back(tmp_path):
    """The shape came back as the largest coordinates: a tensor whose last slices are empty lost them."""
    dense = np.zeros((4, 5, 6))
    dense[0, 1, 2], dense[2, 0, 1] = 3.0, 1.5
    tensor = from_dense(dense)
    path = write_tns(tmp_path / "x.tns.gz", tensor, comment="shape: 1 1 1")
    with gzip.open(path, "rt") as stream:
        assert stream.read().splitlines()[:2] == ["# shape: 4 5 6", "# shape: 1 1 1"]  # the first line alone counts
    back = read_tns(path, counts=False, chunk_lines=1)
    assert back.shape == (4, 5, 6)
    np.testing.assert_array_equal(back.coords, tensor.coords)
    np.testing.assert_array_equal(back.values, tensor.values)
    assert read_tns(path, shape=(9, 9, 9), counts=False).shape == (9, 9, 9)  # a shape given wins
    with pytest.raises(ParameterError, match=r":2: index 3 in column 1 exceeds the shape of its header line "
                                             r"\(2, 2, 2\)"):
        read_tns(_write(tmp_path, "# shape: 2 2 2\n3 1 1 1\n"))
    assert read_tns(_write(tmp_path, "# shapes: 2 2 2\n3 1 1 1\n", "u.tns")).shape == (3, 1, 1)
    assert read_tns(_write(tmp_path, "# shape: 0 2 2\n3 1 1 1\n", "v.tns")).shape == (3, 1, 1)  # no shape: a comment


@pytest.mark.parametrize("text, repeats", [
    ("1 1 1 0\n1 1 1 3\n", 1),  # a zero and a value at one coordinate
    ("1 1 1 3\n1 1 1 -3\n2 2 2 1\n", 1),  # values that cancel: one line repeats, not two
    ("1 1 1 1\n1 1 1 2\n1 1 1 4\n2 2 2 0\n", 2),
])
def test_repeated_coordinates_are_counted_by_line(tmp_path, text, repeats):
    """A coordinate of a zero and a value went unwarned; two lines that cancel were counted as two repeats."""
    with pytest.warns(UserWarning, match=f"t.tns: {repeats} lines repeat an earlier coordinate"):
        read_tns(_write(tmp_path, text), counts=False)


def test_a_path_that_is_not_one_is_refused_by_name():
    """None met a TypeError inside pathlib."""
    with pytest.raises(ParameterError, match=r"^path=None must be a path \(a str or os\.PathLike\)$"):
        read_tns(None)


def test_a_shape_comment_past_the_first_line_is_a_comment(tmp_path):
    """A '# shape:' line at the start of a later chunk was taken as the shape (and line 3 refused beyond it)."""
    path = _write(tmp_path, "1 1 1 1\n# shape: 2 2 2\n3 1 1 1\n")
    for chunk in (1, 2, 10):
        tensor = read_tns(path, chunk_lines=chunk)
        assert tensor.shape == (3, 1, 1)
        assert tensor.coords.tolist() == [[0, 0, 0], [2, 0, 0]] and tensor.values.tolist() == [1.0, 1.0]


def test_entries_past_a_write_chunk_are_all_written(tmp_path, monkeypatch):
    """A chunk of lines one short of its entries dropped the last entry of every chunk but the last."""
    import sepsti.corpora.frostt as frostt

    monkeypatch.setattr(frostt, "_CHUNK_LINES", 2)
    dense = np.arange(1.0, 8.0).reshape(7, 1)
    path = write_tns(tmp_path / "x.tns", from_dense(dense))
    assert path.read_text() == "# shape: 7 1\n" + "".join(f"{i} 1 {i}\n" for i in range(1, 8))
    np.testing.assert_array_equal(to_dense(read_tns(path)), dense)


@pytest.mark.parametrize("options, match", [
    (dict(shape=(3, 0, 3)), r"^shape=\(3, 0, 3\) must be a non-empty tuple of positive sizes$"),
    (dict(shape=()), r"^shape=\(\) must be a non-empty tuple"),
    (dict(chunk_lines=0), r"^chunk_lines=0 must be a positive integer$"),
])
def test_an_empty_shape_or_chunk_is_refused_by_name(tmp_path, options, match):
    """A mode of size 0 was refused as 'index 1 exceeds the given shape', and chunks of 0 lines as 'no entries'."""
    with pytest.raises(ParameterError, match=match):
        read_tns(_write(tmp_path, "1 1 1 1\n"), **options)
