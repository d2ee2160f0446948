"""Shared fixtures: one seeded generator, and the NOIZEUS corpus when it is there."""

import os
from pathlib import Path

import numpy as np
import pytest

SEED = 440


@pytest.fixture
def rng():
    """A fresh generator with a fixed seed for each test."""
    return np.random.default_rng(SEED)


def _noizeus_root():
    candidates = [os.environ.get("SEPSTI_NOIZEUS"), Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "noizeus"]
    for candidate in candidates:
        if candidate and Path(candidate, "clean").is_dir():
            return Path(candidate).resolve()
    return None


@pytest.fixture(scope="session")
def noizeus_root():
    """The NOIZEUS corpus folder; the test is skipped when it is absent."""
    root = _noizeus_root()
    if root is None:
        pytest.skip("NOIZEUS corpus not found (set SEPSTI_NOIZEUS or place it at ../shared/data/noizeus)")
    return root
