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
    from sepsti.core.evidence.parafac_rank import select_parafac_rank
    from sepsti.core.parallel.mpi import world
    from sepsti.core.sparse_tensor import from_dense
    from sepsti.corpora.tensors import simulate_dense
    from sepsti.core.random import stream

    X, _ = simulate_dense((6, 7, 8), 2, prior_rate=0.6, rng=stream(1, 0))
    comm = world()
    assert (comm is None) == (len(sys.argv) == 2)
    result = select_parafac_rank(from_dense(X), [1, 2, 3], preset="blocks", prior_rate=0.6, num_intervals=2,
                                 num_steps=30,
                                 num_keep=15, num_blocks=2, num_replicates=2, progress=False, comm=comm)
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


BLOCK_SCRIPT = textwrap.dedent("""
    import sys, warnings
    warnings.simplefilter("ignore")
    from dataclasses import replace
    import numpy as np
    from sepsti.core.evidence.parafac_rank import select_parafac_rank
    from sepsti.core.evidence.sti import LangevinSettings
    from sepsti.core.models.poisson_parafac import PoissonParafac
    from sepsti.core.parallel.mpi import world
    from sepsti.core.parallel.parafac_blocks import run_parafac_block_chain
    from sepsti.core.parallel.tensor_blocks import build_block_index
    from sepsti.core.sparse_tensor import from_dense
    from sepsti.corpora.tensors import simulate_dense
    from sepsti.core.random import stream

    comm = world()
    assert (1 if comm is None else comm.Get_size()) == int(sys.argv[2])
    X = from_dense(simulate_dense((9, 10, 11), 2, prior_rate=0.6, rng=stream(3, 0))[0])
    model = PoissonParafac(X, 3, prior_rate=0.6)
    theta = model.sample_prior(stream(3, 1))
    index = build_block_index(X, 5)
    kwargs = dict(prior_rates=model.prior_rates, seed=4, chain=(3, 1), temperature=0.7, comm=comm)
    settings = LangevinSettings(sampler="psgld", num_steps=57, num_keep=25, step_a=1e-3, evaluate="before_update")
    trace, state = run_parafac_block_chain(index, theta, settings, **kwargs)
    full, _ = run_parafac_block_chain(index, theta, replace(settings, evaluate="full", evaluate_every=4), **kwargs)
    selection = select_parafac_rank(X, [1, 2], preset="blocks", prior_rate=0.6, num_intervals=2, num_steps=30,
                                    num_keep=15,
                                    num_blocks=5, num_replicates=2, progress=False, comm=comm, distributed=True)
    arrays = dict(trace=trace, full=full, lml=selection.log_marginal_likelihood)
    for name in ("position", "v", "streams"):
        for mode, leaf in enumerate(getattr(state, name)):
            arrays[f"{name}{mode}"] = leaf
    if comm is None or comm.Get_rank() == 0:
        np.savez(sys.argv[1], **arrays)
""")


@pytest.mark.skipif(_mpiexec() is None, reason="mpiexec not found")
@pytest.mark.parametrize("num_processes", [2, 3])
def test_block_distributed_chain_equals_the_one_process_block_sampler(tmp_path, num_processes):
    # PARAFAC'18 Fig. 1: A-blocks stay, B/C-blocks (with v and their noise streams) travel; same samples,
    # same part and full-data log-likelihood traces
    script = tmp_path / "run.py"
    script.write_text(BLOCK_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    single, multi = tmp_path / "one.npz", tmp_path / "many.npz"
    subprocess.run([sys.executable, str(script), str(single), "1"], check=True, env=env, timeout=300)
    subprocess.run([_mpiexec(), "-n", str(num_processes), sys.executable, str(script), str(multi),
                    str(num_processes)], check=True, env=env, timeout=300)
    one, many = np.load(single), np.load(multi)
    assert sorted(one.files) == sorted(many.files)
    for name in one.files:
        np.testing.assert_array_equal(many[name], one[name], err_msg=name)
