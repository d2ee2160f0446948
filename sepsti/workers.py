"""Independent tasks (one file each) in worker processes, results in order: the commands' ``--jobs``.

:class:`Workers` runs a module-level function on picklable arguments in a pool of processes, each
with one BLAS thread (:func:`sepsti.core.parallel.processes.process_pool`: the workers are the
parallelism, and every worker then computes as one process alone does). Results come back in the
order of the tasks, and at most two tasks per worker are submitted ahead of the first unfinished one,
so that a long list of files is never read into memory at once. Workers ignore SIGINT: on Ctrl-C the parent leaves the ``with``
block, which lets the tasks already handed to workers finish (their outputs are complete files) and
drops the rest.
"""

import os

__all__ = ["resolve_jobs", "Workers"]


def resolve_jobs(jobs):
    """The number of worker processes for ``--jobs``: 0 means one per core this process may use."""
    if jobs == 0:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return int(jobs)


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
