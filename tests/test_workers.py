"""``sepsti.workers``: the number of workers ``--jobs`` gives, results and warnings in order, Ctrl-C and kills."""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import warnings

import pytest

from sepsti import workers


@pytest.mark.parametrize("memory, expected", [(None, 8), (64 * 2 ** 30, 8), (2 ** 30, 2), (10 * 2 ** 20, 1)])
def test_jobs_0_is_one_per_core_as_far_as_memory_holds(monkeypatch, memory, expected):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setattr(workers, "_available_memory", lambda: memory)
    assert workers.resolve_jobs(0) == expected
    assert workers.resolve_jobs(3) == 3 and workers.resolve_jobs(1) == 1  # a number asked for is taken as it is


def test_available_memory_is_read_where_the_system_says():
    memory = workers._available_memory()
    if os.path.exists("/proc/meminfo"):
        assert memory is not None and 0 < memory <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    else:
        assert memory is None


def test_available_memory_is_what_the_system_can_give_in_bytes(monkeypatch):
    """MemAvailable (what can be given without swapping), not MemFree, read in kB of 1024 bytes."""
    import io

    meminfo = "MemTotal:        8000000 kB\nMemFree:          300000 kB\nMemAvailable:    5000000 kB\n"
    monkeypatch.setattr(workers, "open", lambda path: io.StringIO(meminfo), raising=False)
    assert workers._available_memory() == 5_000_000 * 1024


def _warn_and_return(index, seconds):
    time.sleep(seconds)
    warnings.warn(f"task {index}", UserWarning)
    return index


def test_results_and_their_warnings_come_in_the_order_of_the_tasks():
    tasks = [(index, 0.5 if index == 0 else 0.0) for index in range(5)]  # the first task ends last
    with pytest.warns(UserWarning) as caught, workers.Workers(2) as pool:
        assert list(pool.map(_warn_and_return, tasks)) == list(range(5))
    assert [str(warning.message) for warning in caught] == [f"task {index}" for index in range(5)]


def _warn_twice(index):
    warnings.warn(f"task {index}, first", UserWarning)
    warnings.warn(f"task {index}, second", UserWarning)
    return index


@pytest.mark.parametrize("jobs", [1, 2])
def test_every_warning_of_a_task_comes_and_one_job_runs_here(jobs):
    """Each of a task's warnings is shown, in order; with one job the tasks run in this process, with two in
    workers."""
    with pytest.warns(UserWarning) as caught, workers.Workers(jobs) as pool:
        assert list(pool.map(_warn_twice, [(0,), (1,)])) == [0, 1]
        pids = list(pool.map(os.getpid, [()] * 2))
    assert [str(warning.message) for warning in caught] == ["task 0, first", "task 0, second", "task 1, first",
                                                            "task 1, second"]
    assert pids == [os.getpid()] * 2 if jobs == 1 else os.getpid() not in pids


def test_sigterm_once_armed_is_raised_once_and_then_ignored():
    """The cleanup a first SIGTERM starts is not cut short by a second one."""
    previous = signal.getsignal(signal.SIGTERM)
    try:
        workers.raise_on_sigterm()
        with pytest.raises(workers.Terminated):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # cut short: the handler raises at once
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGTERM)  # ignored
    finally:
        signal.signal(signal.SIGTERM, previous)


def _fail_first(index, seconds):
    time.sleep(seconds)
    if index == 0:
        raise ValueError("task 0 failed")
    return index


@pytest.mark.parametrize("jobs", [1, 2])
def test_after_an_exception_the_tasks_running_still_give_their_outcomes(jobs):
    """The first task fails after 1 s while the other worker runs the three handed out behind it: their results
    come after the exception, in order, and no other task starts; with one job nothing runs after it."""
    started = []

    def tasks():
        for index in range(8):
            started.append(index)
            yield index, 1.0 if index == 0 else 0.0

    with workers.Workers(jobs) as pool:
        outcomes = list(pool.outcomes(_fail_first, tasks()))
    assert isinstance(outcomes[0][1], ValueError) and outcomes[0][0] is None
    assert outcomes[1:] == ([(1, None), (2, None), (3, None)] if jobs > 1 else [])
    assert max(started) <= 4  # the task generator is not read on once the exception has come
    with workers.Workers(jobs) as pool, pytest.raises(ValueError, match="task 0 failed"):
        list(pool.map(_fail_first, tasks()))


def _fail_first_stopping(index, seconds):
    if index == 0:
        deadline = time.monotonic() + 30
        while workers._SHARED["latest"].value < 1 and time.monotonic() < deadline:  # task 1 has started
            time.sleep(0.01)
        workers._SHARED["stop"].set()  # as the parent sets it on the exception, but before this worker is free
        raise ValueError("task 0 failed")
    time.sleep(seconds)
    return index


def test_the_tasks_skipped_after_an_exception_give_no_outcome():
    """Task 0 fails once task 1 has started, which runs for 1 s: tasks 2 and 3, handed to the pool, are skipped; the
    outcomes are the exception and task 1's result, nothing for the skipped ones (a None each, which callers such as
    enhance's loop cannot unpack)."""
    with workers.Workers(2) as pool:
        outcomes = list(pool.outcomes(_fail_first_stopping, [(index, 1.0) for index in range(8)]))
    assert [type(error) for _, error in outcomes] == [ValueError, type(None)] and outcomes[1] == (1, None)


def _log_and_sleep(log, index, seconds):
    with open(log, "a") as file:
        file.write(f"{index}\n")
    time.sleep(seconds)
    with open(log, "a") as file:
        file.write(f"end {index}\n")
    return index


def test_leaving_the_block_early_starts_no_task_queued_behind_those_running(tmp_path):
    """After the first result the caller stops reading: the tasks running (those after task 0 that started) finish
    before the block is left, and task 3, handed to the pool but not started before the block ends, never starts."""
    log = tmp_path / "started.txt"
    tasks = [(log, index, 0.0 if index == 0 else 1.0) for index in range(8)]
    with workers.Workers(2) as pool:
        for result in pool.map(_log_and_sleep, tasks):
            assert result == 0
            break
    lines = log.read_text().splitlines()
    started = [line for line in lines if line.isdigit()]
    assert "3" not in started
    assert all(f"end {index}" in lines for index in started)  # finished before the block is left


def test_a_termination_in_the_block_stops_the_running_tasks_at_once(tmp_path):
    """SIGTERM raised where the caller is, not in a wait on the workers: the task running is not waited for."""
    from concurrent.futures.process import _ExecutorManagerThread

    def managers():
        return {thread for thread in threading.enumerate() if isinstance(thread, _ExecutorManagerThread)}

    earlier = managers()
    log = tmp_path / "started.txt"
    begun = time.monotonic()
    with pytest.raises(workers.Terminated), workers.Workers(2) as pool:
        outcomes = pool.outcomes(_log_and_sleep, [(log, 0, 0.0), (log, 1, 10.0)])
        assert next(outcomes) == (0, None)
        raise workers.Terminated
    assert time.monotonic() - begun < 5
    # and the pool's manager thread has ended: at exit, Python 3.11 wrote to the wake-up pipe it was closing (a
    # traceback after "Terminated." in one CI run)
    assert managers() <= earlier


def test_sigterm_ends_an_idle_worker_quietly(capfd):
    """A worker between tasks (its last one over) ends on SIGTERM as the signal ends a process: no exception raised in
    it, no traceback."""
    with workers.Workers(2) as pool:
        assert len(list(pool.map(os.getpid, [()] * 4))) == 4
        processes = list(pool._pool._processes.values())
        for process in processes:
            process.terminate()
        for process in processes:
            process.join(timeout=10)
    assert [process.exitcode for process in processes] == [-signal.SIGTERM] * len(processes)
    assert "Traceback" not in capfd.readouterr().err


_SCRIPT = """
import os, signal, sys, time
from pathlib import Path
from sepsti.core.io import atomic_path
from sepsti.workers import Terminated, Workers, raise_on_sigterm

def log(line):
    with open(sys.argv[1], "a") as file:
        file.write(line + "\\n")

def task(index):
    with atomic_path(Path(sys.argv[1]).parent / "out" / f"{index}.txt") as path:
        path.write_text("partial")
        log(f"start {index}")
        time.sleep(float(sys.argv[2]))
        log(f"end {index}")
    return index

if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if sys.argv[3] == "armed":
        raise_on_sigterm()
    try:
        with Workers(2) as pool:
            for index in pool.map(task, ((index,) for index in range(8))):
                log(f"got {index}")
    except Terminated:
        log("terminated")
    except KeyboardInterrupt:
        log("interrupted")
"""


@pytest.fixture
def two_running(tmp_path):
    """A script whose two workers have started the first two of eight tasks of ``seconds`` each, each writing
    a file in ``out`` (SIGTERM armed with ``sigterm="armed"``)."""
    script, log = tmp_path / "script.py", tmp_path / "log.txt"
    script.write_text(_SCRIPT)
    started = []

    (tmp_path / "out").mkdir()

    def start(seconds, sigterm="default"):
        process = subprocess.Popen([sys.executable, script, log, str(seconds), sigterm], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        started.append(process)
        deadline = time.monotonic() + 60
        while not {"start 0", "start 1"} <= set(log.read_text().splitlines() if log.exists() else ()):
            assert time.monotonic() < deadline and process.poll() is None, "the tasks did not start"
            time.sleep(0.05)
        return process, log

    yield start
    for process in started:  # whatever is left of the script and its workers
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_ctrl_c_lets_the_running_tasks_finish_with_their_results_and_skips_the_rest(two_running):
    process, log = two_running(1.5)
    os.killpg(process.pid, signal.SIGINT)
    output, _ = process.communicate(timeout=30)
    # the first Ctrl-C said nothing, and the run went on for as long as the files took
    assert output.decode() == "Ctrl-C: finishing the 2 files in progress; press Ctrl-C again to stop now\n"
    lines = log.read_text().splitlines()
    assert sorted(lines) == ["end 0", "end 1", "got 0", "got 1", "interrupted", "start 0", "start 1"]
    assert [line for line in lines if line.split()[0] not in ("start", "end")] == ["got 0", "got 1", "interrupted"]


def test_a_second_ctrl_c_stops_the_running_tasks_at_once(two_running):
    process, log = two_running(60)
    os.killpg(process.pid, signal.SIGINT)
    time.sleep(0.5)
    os.killpg(process.pid, signal.SIGINT)
    process.communicate(timeout=15)  # the workers are gone too: nothing holds the script's stdout open
    assert log.read_text().splitlines()[2:] == ["interrupted"]
    assert os.listdir(log.parent / "out") == []  # the files being written, temporaries included


@pytest.mark.parametrize("group", [False, True], ids=["parent", "group"])
def test_sigterm_once_armed_stops_the_running_tasks_at_once_and_removes_their_files(two_running, group):
    process, log = two_running(60, "armed")
    (os.killpg if group else os.kill)(process.pid, signal.SIGTERM)
    output, _ = process.communicate(timeout=15)  # the workers are gone too: nothing holds the script's stdout open
    assert log.read_text().splitlines()[2:] == ["terminated"] and process.returncode == 0, output
    assert os.listdir(log.parent / "out") == []  # the files being written, temporaries included


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers follow their parent on Linux")
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_workers_end_with_their_parent(two_running, how):
    process, log = two_running(60)
    os.kill(process.pid, how)
    process.communicate(timeout=15)  # the workers are gone too: nothing holds the script's stdout open
    # ended by SIGTERM, not SIGKILL, their tasks removed the files being written (left behind before)
    assert os.listdir(log.parent / "out") == []
