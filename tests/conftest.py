"""Shared fixtures: one seeded generator, the NOIZEUS corpus when it is there, Ctrl-C as at a terminal, and the
loaded BLAS libraries' thread counts."""

import os
import signal
from pathlib import Path

import numpy as np
import pytest

SEED = 440

# Each pytest-xdist worker (and what it starts) keeps a numba cache of its own: numba's cache is not safe
# when several processes compile the same function at once (numba issues 4807 and 10128; a crash seen once
# after a run on two workers, docs/rank_selection.md). Read by numba when it is first imported.
if "PYTEST_XDIST_WORKER" in os.environ and "NUMBA_CACHE_DIR" not in os.environ:
    os.environ["NUMBA_CACHE_DIR"] = str(Path(__file__).resolve().parents[1] / "build" / "numba-cache"
                                        / os.environ["PYTEST_XDIST_WORKER"])


@pytest.fixture
def sigint_as_at_a_terminal():
    """Python's Ctrl-C handler for the test, and so SIGINT at its default in the programs it starts.

    A non-interactive shell starts background jobs (``make test &``) with SIGINT ignored, which survives
    exec: ``_thread.interrupt_main`` then does nothing and a child ignores Ctrl-C. A handled signal is
    reset to its default across exec.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if previous is not None:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture
def blas_threads():
    """A function giving each loaded BLAS library's thread count, by its file (threadpoolctl's view)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def counts():
        return {pool["filepath"]: pool["num_threads"] for pool in threadpoolctl.threadpool_info()
                if pool["user_api"] == "blas"}

    return counts


@pytest.fixture
def rng():
    """A fresh generator with a fixed seed for each test."""
    return np.random.default_rng(SEED)


def _noizeus_root():
    candidates = [os.environ.get("SEPSTI_NOIZEUS"),
                  Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "noizeus"]
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
