"""The chains of a rank selection spread over MPI processes give the one-process result."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.mpi

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    warnings.simplefilter("ignore")
    import numpy as np
    from core.evidence.parafac_rank import select_parafac_rank
    from core.parallel.mpi import world
    from core.sparse_tensor import from_dense
    from corpora.tensors import simulate_dense
    from core.random import stream

    X, _ = simulate_dense((6, 7, 8), 2, prior_rate=0.6, rng=stream(1, 0))
    comm = world()
    assert (comm is None) == (len(sys.argv) == 2)
    result = select_parafac_rank(from_dense(X), [1, 2, 3], prior_rate=0.6, num_intervals=2, num_steps=30,
                                 num_keep=15, num_blocks=2, progress=False, comm=comm)
    if comm is None or comm.Get_rank() == 0:
        with open(sys.argv[1], "w") as handle:
            json.dump(result.log_marginal_likelihood.tolist(), handle)
""")


def _mpiexec():
    candidate = Path(sys.executable).with_name("mpiexec")
    return str(candidate) if candidate.exists() else shutil.which("mpiexec")


@pytest.mark.skipif(_mpiexec() is None, reason="mpiexec not found")
def test_same_estimates_for_one_and_two_processes(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    single, double = tmp_path / "one.json", tmp_path / "two.json"
    subprocess.run([sys.executable, str(script), str(single)], check=True, env=env, timeout=300)
    subprocess.run([_mpiexec(), "-n", "2", sys.executable, str(script), str(double), "mpi"], check=True, env=env,
                   timeout=300)
    np.testing.assert_array_equal(json.loads(single.read_text()), json.loads(double.read_text()))
