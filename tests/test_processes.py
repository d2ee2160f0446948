"""``sepsti.core.parallel.processes``: pools whose workers run numba's parallel kernels after this process has.

Each case runs in a script of its own: a worker that GNU OpenMP ends can end with it whatever ran it.
"""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# exit status 77: no OpenMP threading layer in this numba (nothing to test)
_SCRIPT = r"""
import os, sys, time
import numba

try:
    import numba.np.ufunc.omppool
except ImportError:
    sys.exit(77)
numba.config.THREADING_LAYER = "omp"

from sepsti.core.parallel.processes import process_pool, start_context


@numba.njit(parallel=True, cache=False)
def total(n):
    s = 0.0
    for i in numba.prange(n):
        s += i
    return s


_SHARED = []


def remember(event):
    _SHARED.append(event)


def task(n):
    _SHARED[0].set()
    return total(n)


def linger(directory):
    total(10)
    open(os.path.join(directory, str(os.getpid())), "w").close()
    time.sleep(300)


if __name__ == "__main__":
    print(total(10), numba.threading_layer(), flush=True)  # OpenMP's threads started here
    context = start_context()
    event = context.Event()  # shared with the workers: of the pool's context
    with process_pool(2, remember, (event,)) as pool:
        if sys.argv[1] == "run":
            print(list(pool.map(task, [10, 100, 1000])), event.is_set(), flush=True)
        else:
            futures = [pool.submit(linger, sys.argv[2]) for _ in range(2)]
            futures[0].result()
"""


def _script(tmp_path):
    script = tmp_path / "pool.py"
    script.write_text(_SCRIPT)
    return script


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_workers_run_parallel_kernels_after_this_process_has(tmp_path):
    # forked from a process whose GNU OpenMP had started, a worker died at its first parallel kernel
    # ('fork() called from a process already using GNU OpenMP', BrokenProcessPool)
    completed = subprocess.run([sys.executable, _script(tmp_path), "run"], env=_env(), capture_output=True,
                               text=True, timeout=300)
    if completed.returncode == 77:
        pytest.skip("numba has no OpenMP threading layer here")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == ["45.0 omp", "[45.0, 4950.0, 499500.0] True"]


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
    result = sample_nuts(log_density, np.zeros(36), num_warmup=20, num_draws=5, num_chains=2, metric="diagonal",
                         num_workers=2)
    print(result.draws.shape)
"""


def test_chains_of_a_parallel_model_run_in_worker_processes(tmp_path):
    # the realistic case: sample_nuts's default process executor on a model whose kernels run in parallel,
    # its target pickled for the forkserver's workers
    script = tmp_path / "nuts.py"
    script.write_text(_NUTS)
    completed = subprocess.run([sys.executable, script], env=_env(), capture_output=True, text=True, timeout=600)
    if completed.returncode == 77:
        pytest.skip("numba has no OpenMP threading layer here")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == ["(2, 5, 36)"]


def _running(pid):
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers follow their parent on Linux")
def test_workers_started_by_the_forkserver_end_with_the_process_that_made_the_pool(tmp_path):
    started = tmp_path / "started"
    started.mkdir()
    process = subprocess.Popen([sys.executable, _script(tmp_path), "linger", str(started)], env=_env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while len(list(started.iterdir())) < 2:
            if process.poll() is not None:
                if process.returncode == 77:
                    pytest.skip("numba has no OpenMP threading layer here")
                pytest.fail(f"the script ended: {process.stderr.read().decode()}")
            assert time.monotonic() < deadline, "the workers did not start their tasks"
            time.sleep(0.1)
        workers = [int(path.name) for path in started.iterdir()]
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        deadline = time.monotonic() + 30
        while any(_running(pid) for pid in workers):
            assert time.monotonic() < deadline, "the workers outlived the process that made the pool"
            time.sleep(0.1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
