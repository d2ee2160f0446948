"""``sepsti.core.blas``: one BLAS thread inside, what was there before after."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sepsti.core.blas import single_threaded_blas

ROOT = Path(__file__).resolve().parents[1]


def test_an_error_inside_is_raised_and_the_limit_restored(blas_threads):
    """An exit that returned true swallowed the error."""
    threadpoolctl = pytest.importorskip("threadpoolctl")

    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        with pytest.raises(ValueError, match="^inside$"), single_threaded_blas():
            assert set(blas_threads().values()) <= {1}
            raise ValueError("inside")
        assert blas_threads() == before


_OPENMP = r"""
import sys
import numba
import numpy as np

try:
    import numba.np.ufunc.omppool
except ImportError:
    sys.exit(77)
numba.config.THREADING_LAYER = "omp"


@numba.njit(parallel=True)
def total(x):
    s = 0.0
    for i in numba.prange(x.size):
        s += x[i]
    return s


total(np.ones(10))  # OpenMP's threads started
import threadpoolctl
from sepsti.core.blas import single_threaded_blas


def threads(api):
    return [pool["num_threads"] for pool in threadpoolctl.threadpool_info() if pool["user_api"] == api]


before = threads("openmp")
with single_threaded_blas():
    print(set(threads("blas")) == {1}, threads("openmp") == before, before != [])
"""


def test_openmp_threads_are_left_as_they_are(tmp_path):
    """BLAS alone is limited: limiting every thread pool cut OpenMP's, which numba's parallel blocks run on, to one
    thread as well."""
    script = tmp_path / "openmp.py"
    script.write_text(_OPENMP)
    completed = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=300,
                               env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "2"})
    if completed.returncode == 77:
        pytest.skip("numba has no OpenMP threading layer here")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["True", "True", "True"]
