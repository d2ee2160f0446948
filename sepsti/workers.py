"""Independent tasks (one file each) in worker processes, results in order: the commands' ``--jobs``.

:class:`Workers` runs a module-level function on picklable arguments in a pool of processes, each
with one BLAS thread (:func:`sepsti.core.parallel.processes.process_pool`: the workers are the
parallelism, and every worker then computes as one process alone does). Results come back in the
order of the tasks, and at most two tasks per worker are submitted ahead of the first unfinished one,
so that a long list of files is never read into memory at once. Workers ignore SIGINT: on Ctrl-C
the parent leaves the ``with`` block, which lets the tasks already handed to workers finish (their
outputs are complete files) and drops the rest.
"""

import os

__all__ = ["WORKER_MEMORY", "resolve_jobs", "Workers"]

#: Memory (bytes) set aside per worker when ``--jobs 0`` picks the count: above the peak of one file
#: (a 10-minute 16 kHz file with mains hum, or 8 channels at 48 kHz: under 300 MB, docs/enhance.md).
WORKER_MEMORY = 400 * 2 ** 20


def _available_memory():
    """Memory the system can give without swapping (bytes), or None where it does not say."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def resolve_jobs(jobs):
    """The number of worker processes for ``--jobs``.

    0 means one per core this process may use, but no more than the available memory holds at
    :data:`WORKER_MEMORY` each (at least one); any other number is taken as it is.
    """
    if jobs != 0:
        return int(jobs)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    memory = _available_memory()
    return cores if memory is None else max(1, min(cores, memory // WORKER_MEMORY))


def _ignore_interrupts():
    """Workers leave SIGINT to the parent, which decides what is finished."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Workers:
    """``jobs`` worker processes (none for 1: every task runs in this process), as a context manager.

    Parameters
    ----------
    jobs : int
    """

    def __init__(self, jobs):
        self.jobs = int(jobs)
        self._pool = None

    def __enter__(self):
        if self.jobs > 1:
            from sepsti.core.parallel.processes import process_pool

            self._pool = process_pool(self.jobs, _ignore_interrupts)
        return self

    def __exit__(self, *exc_info):
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def map(self, function, tasks):
        """``function(*arguments)`` for each tuple of ``tasks``, in order.

        Parameters
        ----------
        function : callable
            A module-level function (pickled by reference).
        tasks : iterable of tuple
            Its arguments, consumed as workers become free.

        Yields
        ------
        object
            Each task's result, in the order of ``tasks``; a task's exception is raised here when its
            turn comes.
        """
        if self._pool is None:
            for arguments in tasks:
                yield function(*arguments)
            return
        import collections

        pending = collections.deque()
        for arguments in tasks:
            pending.append(self._pool.submit(function, *arguments))
            if len(pending) >= 2 * self.jobs:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
