"""docs/data.md names every shipped data file and every recorded noise type the band-gain networks learn from."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "recipes"))

import train_band_gains  # noqa: E402

PAGE = (ROOT / "docs" / "data.md").read_text(encoding="utf-8")


def test_every_shipped_file_is_described():
    described = set(re.findall(r"^\| `([\w.]+\.npz)` \|", PAGE, flags=re.M))
    assert described == {path.name for path in (ROOT / "sepsti" / "data").glob("*.npz")}


def test_the_recorded_noise_types_are_the_recipes():
    table = PAGE[PAGE.index("## The recorded noises"):]
    rows = [line.split("|") for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    named = {kind.strip() for row in rows for kind in row[3].split(",")}
    assert named == set(train_band_gains.RECORDED)
