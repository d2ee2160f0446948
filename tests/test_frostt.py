import gzip

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.sparse_tensor import coalesce, to_dense
from sepsti.corpora.frostt import read_tns, write_tns


def _write(tmp_path, text, name="t.tns"):
    path = tmp_path / name
    path.write_text(text)
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


def test_missing_file_is_oserror(tmp_path):
    with pytest.raises(OSError):
        read_tns(tmp_path / "absent.tns")


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
