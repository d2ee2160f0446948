"""MPI backend: real ``mpiexec -n 2`` processes (marked ``mpi``, deselected by default)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.parallel import mpi

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = Path(sys.executable).parent / "mpiexec"

SCRIPT = r"""
import json, sys
import numpy as np
from sepsti.core.evidence.sti_nmf import select_rank_sti
from sepsti.core.models.poisson_nmf import PoissonNMF
from sepsti.core.parallel import mpi

comm = mpi.world()
assert (1 if comm is None else comm.Get_size()) == int(sys.argv[3]), "not the world asked for"
with mpi.abort_on_error(comm):
    if sys.argv[2] == "fail" and comm is not None and comm.Get_rank() == 1:
        raise RuntimeError("failure on process 1")
    X = PoissonNMF.sample(np.random.default_rng(3), (24, 21), 2, rate_W=0.5, rate_H=0.5)[2]
    result = select_rank_sti(X, [1, 2, 3], preset="blocks", num_intervals=2, num_steps=30, num_keep=10, num_blocks=3,
                             step_a=1e-4, prior_rate=0.5, num_replicates=2, comm=comm)
    if sys.argv[2] == "fail":
        import time
        time.sleep(120)  # the job must end long before this
    if mpi.is_root(comm):
        json.dump({"log_marginal_likelihood": result.log_marginal_likelihood.tolist(),
                   "replicates": result.replicates.tolist(),
                   "means": [r.mean_log_likelihood.tolist() for r in result.per_temperature]}, open(sys.argv[1], "w"))
"""


def _run(tmp_path, processes, mode="ok", timeout=300):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    out = tmp_path / f"out-{processes}.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, str(script), str(out), mode, str(processes)]
    if processes > 1:
        command = [str(MPIEXEC), "-n", str(processes)] + command
    completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    return completed, out


def test_without_launcher_there_is_no_world(monkeypatch):
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # not imported (which starts MPI) to be told so
    assert mpi.world() is None
    assert mpi.distribute([1, 2, 3], lambda x: x * x, None) == [1, 4, 9]


class _Process:
    """Process ``rank`` of ``size``: its collectives return ``replies[name]`` and record what it gave."""

    def __init__(self, rank, size, **replies):
        self.rank, self.size, self.replies, self.given, self.aborted = rank, size, replies, [], None

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def _collective(self, name, value):
        self.given.append((name, value))
        return self.replies.get(name)

    def gather(self, value, root):
        return self._collective("gather", value)

    def bcast(self, value, root):
        return self._collective("bcast", value)

    def allgather(self, value):
        return self._collective("allgather", value)

    def Abort(self, code):
        self.aborted = code


@pytest.mark.parametrize("name", ["PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE"])
def test_each_launchers_size_variable_is_read(monkeypatch, name):
    """A launcher's variable left out of the list (Open MPI's, say) made its jobs run as one process each."""
    for other in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE"):
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(name, "3")
    assert mpi.launched_size() == 3


def test_a_world_of_one_process_is_no_world(monkeypatch):
    """A launcher's variable set for a process that MPI starts alone: its world of one was returned."""
    import types

    world_of_one = types.SimpleNamespace(COMM_WORLD=types.SimpleNamespace(Get_size=lambda: 1))
    monkeypatch.setitem(sys.modules, "mpi4py", types.SimpleNamespace(MPI=world_of_one))
    monkeypatch.setenv("PMI_SIZE", "2")
    assert mpi.world() is None


def test_items_are_dealt_round_robin():
    """Item i runs on process i mod P: a deal shifted by one process gave the same results and passed before."""
    ran = []
    process = _Process(1, 3)
    assert mpi.distribute("abcdefg", lambda item: ran.append(item) or item * 2, process) is None
    assert ran == ["b", "e"] and process.given == [("gather", {1: "bb", 4: "ee"})]
    root = _Process(0, 3, gather=[{0: "AA", 3: "DD", 6: "GG"}, {1: "bb", 4: "ee"}, {2: "CC", 5: "FF"}])
    assert mpi.distribute("abcdefg", str.upper, root) == ["AA", "bb", "CC", "DD", "ee", "FF", "GG"]


@pytest.mark.parametrize("name, raised", [("KeyboardInterrupt", KeyboardInterrupt), ("ValueError", RuntimeError)])
def test_a_failure_on_process_0_is_raised_on_the_others_as_its_kind(name, raised):
    """Ctrl-C on process 0 was raised on the others as a RuntimeError."""
    with pytest.raises(raised):
        mpi.from_root(_Process(1, 2, bcast=(None, name)), lambda: None)


def test_root_first_names_the_process_that_failed(capsys):
    """Process 2's failure was reported as process 1's."""
    with pytest.raises(RuntimeError, match=r"^process 2 failed \(ValueError\)$"):
        mpi.root_first(_Process(0, 3, allgather=[None, None, "ValueError"]), lambda: 7)


@pytest.mark.parametrize("error, status, line", [
    (ParameterError("bad input"), 2, "process 0: ParameterError: bad input"),
    (ValueError("a bug"), 1, "process 0: ValueError: a bug"),
    (KeyboardInterrupt(), 130, "Interrupted."),
    (SystemExit(3), 1, "process 0: SystemExit: 3")])
def test_a_failure_ends_the_job_with_its_status_and_one_line(capsys, error, status, line):
    """Every failure ended the job with status 1: bad input (2) and Ctrl-C (130) as well; the line said neither the
    kind of error nor, for Ctrl-C, anything on process 0."""
    process = _Process(0, 2)
    with mpi.abort_on_error(process):
        raise error
    assert process.aborted == status
    assert capsys.readouterr().err == line + "\n"


def test_a_successful_exit_is_no_failure():
    """sys.exit(0) inside ended the job as a failure."""
    process = _Process(0, 2)
    with pytest.raises(SystemExit), mpi.abort_on_error(process):
        sys.exit(0)
    assert process.aborted is None


ROOT_FIRST = r"""
import sys, time
from pathlib import Path
from sepsti.core.parallel import mpi

comm = mpi.world()
marker = Path(sys.argv[1])

def first():
    if comm.Get_rank() == 0:
        time.sleep(0.5)  # the others would be well on their way without the wait
        if sys.argv[2] == "fail":
            raise ValueError("failed on process 0")
        if sys.argv[2] == "bad input":
            from sepsti.core.errors import ParameterError
            raise ParameterError("bad input on process 0")
        marker.write_text("done")
        return "first"
    assert marker.exists(), "ran before process 0 had finished"
    if sys.argv[2] == "fail on 1" and comm.Get_rank() == 1:
        raise ValueError("failed on process 1")
    return "after"

try:
    outcome = mpi.root_first(comm, first)
except Exception as error:
    outcome = type(error).__name__
marker.with_name(f"process-{comm.Get_rank()}").write_text(outcome)
"""


def test_root_first_without_mpi_just_calls():
    assert mpi.root_first(None, lambda: 7) == 7


@pytest.mark.mpi
@pytest.mark.parametrize("mode, expected", [("ok", ["first", "after", "after"]),
                                            ("fail", ["ValueError", "RuntimeError", "RuntimeError"]),
                                            ("bad input", ["ParameterError"] * 3),
                                            ("fail on 1", ["RuntimeError", "ValueError", "RuntimeError"])])
def test_root_first_runs_process_0_before_the_others(tmp_path, mode, expected):
    script = tmp_path / "root_first.py"
    script.write_text(ROOT_FIRST)
    completed = subprocess.run([str(MPIEXEC), "-n", "3", sys.executable, str(script), str(tmp_path / "done"), mode],
                               env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                               timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert [(tmp_path / f"process-{rank}").read_text() for rank in range(3)] == expected


@pytest.mark.mpi
def test_results_identical_for_one_two_and_four_processes(tmp_path):
    single, out1 = _run(tmp_path, 1)
    assert single.returncode == 0, single.stderr
    expected = json.loads(out1.read_text())
    for processes in (2, 4):  # chains and EM starts are dealt differently: the same numbers
        completed, out = _run(tmp_path, processes)
        assert completed.returncode == 0, completed.stderr
        assert json.loads(out.read_text()) == expected, processes


@pytest.mark.mpi
def test_exception_on_one_process_ends_the_job(tmp_path):
    start = time.monotonic()
    completed, out = _run(tmp_path, 2, mode="fail", timeout=100)
    assert completed.returncode != 0
    assert time.monotonic() - start < 60
    assert "failure on process 1" in completed.stderr
    assert not out.exists()


DISTRIBUTED = r"""
import json, sys
import numpy as np
from sepsti.core.evidence.sti import LangevinSettings
from sepsti.core.models.poisson_nmf import PoissonNMF
from sepsti.core.parallel import mpi
from sepsti.core.parallel.blocks import init_state, initial_factors, run_block_chain
from sepsti.core.parallel.distributed import run_distributed_block_chain

comm = mpi.world()
assert comm is not None and comm.Get_size() == 2, "not the world asked for"
with mpi.abort_on_error(comm):
    X = PoissonNMF.sample(np.random.default_rng(3), (37, 29), 3, rate_W=0.5, rate_H=0.5)[2]
    W, H = initial_factors(X, 3, np.random.default_rng(4))
    report = {}
    # the diverging chain's trace turns NaN while its factors stay finite; after 14 iterations a process's copies
    # of the H groups numbered as its row groups are stale (after 13 it had updated them last: an H assembled
    # from those copies passed before)
    for sampler, steps in (("sgld", dict(num_steps=13, step_a=1e-3)), ("psgld", dict(num_steps=14, step_a=1e-3)),
                           ("diverging", dict(num_steps=40, step_a=1e6, step_b=1.0))):
        settings = LangevinSettings(sampler=sampler.replace("diverging", "sgld"), num_keep=6, **steps)
        kwargs = dict(temperature=0.8, num_blocks=4, rate_W=0.5, rate_H=0.5)
        spread = run_distributed_block_chain(X, W, H, comm, settings, seed=7, chain=2, **kwargs)
        if mpi.is_root(comm):
            single = run_block_chain(X, init_state(W, H, seed=7, chain=2, num_blocks=4), settings, **kwargs)
            same = {field: bool(np.array_equal(getattr(spread.state, field), getattr(single.state, field)))
                    for field in single.state._fields}
            same.update(trace=bool(np.allclose(spread.trace, single.trace, rtol=1e-12, atol=0, equal_nan=True)),
                        all_finite=spread.all_finite == single.all_finite,
                        min_kept=bool(np.array_equal(spread.min_kept, single.min_kept, equal_nan=True)),
                        cpu_seconds=bool(spread.cpu_seconds > 0))
            report[sampler] = same
    # an overflow, and the smallest entries, in process 1's rows alone (row groups of 10, 9, 9 and 9 rows; at
    # part 0 row group 3 meets column group 3, columns 22 to 28): process 0's flags alone passed before
    X_big = X.copy()
    X_big[30, 25] = 1e200
    W_low = W.copy()
    W_low[19:] = 1e-6
    for case, data, start, step_a in (("overflow on 1", X_big, W, 1e110), ("lowest on 1", X, W_low, 1e-20)):
        settings = LangevinSettings(sampler="sgld", num_steps=1, num_keep=1, step_a=step_a, step_b=1.0,
                                    evaluate="before_update")
        kwargs = dict(temperature=1.0, num_blocks=4, rate_W=0.5, rate_H=0.5)
        spread = run_distributed_block_chain(data, start, H, comm, settings, seed=7, chain=2, **kwargs)
        if mpi.is_root(comm):
            single = run_block_chain(data, init_state(start, H, seed=7, chain=2, num_blocks=4), settings, **kwargs)
            if case == "overflow on 1":
                shown = not single.all_finite and bool(np.isfinite(single.trace).all())
            else:
                shown = single.all_finite and single.min_kept < 2e-6
            report[case] = dict(shown=shown, all_finite=spread.all_finite == single.all_finite,
                                min_kept=bool(np.array_equal(spread.min_kept, single.min_kept, equal_nan=True)))
    if mpi.is_root(comm):
        json.dump(report, open(sys.argv[1], "w"))
"""


@pytest.mark.mpi
def test_block_distributed_sampler_gives_the_single_process_samples(tmp_path):
    script = tmp_path / "distributed.py"
    script.write_text(DISTRIBUTED)
    out = tmp_path / "report.json"
    completed = subprocess.run([str(MPIEXEC), "-n", "2", sys.executable, str(script), str(out)],
                               env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                               timeout=300)
    assert completed.returncode == 0, completed.stderr
    report = json.loads(out.read_text())
    fields = ("W", "H", "v_W", "v_H", "states_W", "states_H", "trace", "all_finite", "min_kept", "cpu_seconds")
    assert report == {**{sampler: dict.fromkeys(fields, True) for sampler in ("sgld", "psgld", "diverging")},
                      **{case: dict.fromkeys(("shown", "all_finite", "min_kept"), True)
                         for case in ("overflow on 1", "lowest on 1")}}
