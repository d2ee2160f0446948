"""Chains of a model whose numba kernels run in parallel, after this process has run them under OpenMP.

Each case runs in a script of its own: a worker that GNU OpenMP ends can end with it whatever ran it.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT)}


_NUTS = r"""
import sys
import numpy as np
import numba

try:
    import numba.np.ufunc.omppool
except ImportError:
    sys.exit(77)
numba.config.THREADING_LAYER = "omp"

from sepsti.core.models.poisson_parafac import ParafacFactors, PoissonParafac
from sepsti.core.parallel.tensor_blocks import build_block_index
from sepsti.core.samplers.chains import sample_nuts
from sepsti.core.sparse_tensor import from_dense

X = from_dense(np.random.default_rng(0).poisson(1.0, (6, 6, 6)).astype(float))
model = PoissonParafac(X, 2, prior_rate=1.0, parallel=True)
part = build_block_index(X, 3).part(0)  # 3 blocks: the model's parallel kernel


def log_density(x):
    theta = np.exp(x).reshape(3, 6, 2)
    value, gradient = model.log_likelihood_and_grad(ParafacFactors(*theta), part)
    return value - theta.sum() + x.sum(), (np.stack(gradient) * theta - theta + 1.0).ravel()


if __name__ == "__main__":
    log_density(np.zeros(36))  # OpenMP's threads started here
    options = dict(num_warmup=20, num_draws=5, num_chains=2, metric="diagonal", seed=3)
    threads = sample_nuts(log_density, np.zeros(36), num_workers=2, executor="thread", **options)
    result = sample_nuts(log_density, np.zeros(36), num_workers=2, **options)
    print(result.draws.shape, np.array_equal(result.draws, threads.draws))
"""


def test_chains_of_a_parallel_model_run_in_threads_once_openmp_has_run(tmp_path):
    # forked from a process whose GNU OpenMP had started, a worker died at its first parallel kernel
    # ('fork() called from a process already using GNU OpenMP', BrokenProcessPool)
    script = tmp_path / "nuts.py"
    script.write_text(_NUTS)
    completed = subprocess.run([sys.executable, script], env=_env(), capture_output=True, text=True, timeout=600)
    if completed.returncode == 77:
        pytest.skip("numba has no OpenMP threading layer here")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == ["(2, 5, 36) True"]
    assert "the chains run in threads" in completed.stderr


_ORPHAN = r"""
import os, signal, sys
from sepsti.core.processes import process_pool

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # this process's own way with SIGTERM, not its workers'
    pool = process_pool(1)
    with open(sys.argv[1], "w") as file:
        file.write(str(pool.submit(os.getpid).result()))
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _ended(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in "ZX"  # a zombie not yet reaped has ended too
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="workers follow their parent on Linux")
def test_a_worker_ends_with_its_parent_whatever_the_parent_did_with_sigterm(tmp_path):
    # a worker that kept the SIGTERM disposition of the process that forked it ignored the signal its parent's
    # end sends, and lived on
    import signal
    import time

    script, pid_file = tmp_path / "orphan.py", tmp_path / "worker.pid"
    script.write_text(_ORPHAN)
    completed = subprocess.run([sys.executable, script, pid_file], env=_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=120)
    assert completed.returncode == -signal.SIGKILL
    worker = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while not _ended(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    ended = _ended(worker)
    if not ended:
        os.kill(worker, signal.SIGKILL)
    assert ended


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="workers follow their parent on Linux")
def test_a_worker_whose_parent_ended_before_it_could_follow_it_ends_at_once():
    # no signal comes once the parent has gone before the request: such a worker lived on
    import signal

    script = "import os\nfrom sepsti.core.processes import _follow_parent\n_follow_parent(os.getppid() + 1)\n"
    completed = subprocess.run([sys.executable, "-c", script + "print('alive')"], env=_env(), capture_output=True,
                               text=True, timeout=60)
    assert completed.returncode == -signal.SIGTERM and completed.stdout == ""


def test_openmp_has_not_started_before_a_parallel_kernel_has_run():
    # numba imported, no parallel kernel run: the threading layer is not known yet (was taken for OpenMP, and the
    # chains sent to threads)
    script = "import numba\nfrom sepsti.core.processes import openmp_started\nprint(openmp_started())\n"
    completed = subprocess.run([sys.executable, "-c", script], env=_env(), capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "False\n"
