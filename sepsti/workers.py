"""Independent tasks (one file each) in worker processes, results in order: the commands' ``--jobs``.

:class:`Workers` runs a module-level function on picklable arguments in a pool of processes, each
with one BLAS thread (:func:`sepsti.core.processes.process_pool`: the workers are the
parallelism, and every worker then computes as one process alone does). Results come back in the
order of the tasks, each after the warnings its task raised (issued again here, so that they print in
that order too), and at most two tasks per worker are submitted ahead of the first unfinished one,
so that a long list of files is never read into memory at once. :meth:`Workers.outcomes` gives each
task's exception in its place: after one, no task starts, and the outcomes of those running still come.

Workers ignore SIGINT. On Ctrl-C the tasks running finish (their outputs are complete files; one
line on stderr says how many, and that a second Ctrl-C stops them) and their results still come
out, the tasks not started are skipped, and then the ``KeyboardInterrupt`` is raised; a second
Ctrl-C ends the running tasks too. SIGTERM, once :func:`raise_on_sigterm` has
armed it, ends the running tasks at once, in the workers as here: it is raised as :class:`Terminated`
where the task is, so that a file being written is removed (only ``kill -9`` leaves a temporary file,
until the next write of the same output). On Linux the workers end with this process, however it ends.
"""

import os

__all__ = ["WORKER_MEMORY", "resolve_jobs", "Terminated", "raise_on_sigterm", "Workers"]

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


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as an interrupt is (the same cleanup runs), after which nothing running is waited for."""


def raise_on_sigterm(when=None):
    """Raise :class:`Terminated` in this process's main thread on SIGTERM (once: later ones are ignored, so that
    the cleanup it starts runs to its end).

    Parameters
    ----------
    when : callable, optional
        Raise only while it returns true; otherwise the signal ends the process as it does by default.
    """
    import os
    import signal

    def _terminated(signum, frame):
        if when is None or when():
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # another one (a worker's parent ending) spares the cleanup
            raise Terminated
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, _terminated)


_SHARED = {}  # in a worker: the parent's stop event, the index of the latest task started, whether one runs


def _start_worker(stop, latest):
    """Workers leave SIGINT to the parent, which decides what is finished; SIGTERM ends a running task (its
    files are removed) or else the worker, quietly."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _SHARED.update(stop=stop, latest=latest, running=False)
    raise_on_sigterm(when=lambda: _SHARED["running"])


def _run(index, function, arguments):
    """A task in a worker: ``function(*arguments)`` and the warnings it raised, or None when skipped.

    Once the parent has set the stop event, a task is skipped unless a later one has started: the
    tasks that run are always the first ones.
    """
    import signal
    import warnings

    latest = _SHARED["latest"]
    with latest.get_lock():
        if _SHARED["stop"].is_set() and index > latest.value:
            return None
        latest.value = max(latest.value, index)
    with warnings.catch_warnings(record=True) as caught:
        _SHARED["running"] = True
        try:
            result = function(*arguments)
        except Terminated:  # its files are removed: the worker ends as the signal would have ended it
            os._exit(128 + signal.SIGTERM)
        finally:
            _SHARED["running"] = False
    return result, [(str(warning.message), warning.category, warning.filename, warning.lineno)
                    for warning in caught]


def _issued(outcome):
    """A task's result, after the warnings it raised in its worker are shown here (the worker applied the filters)."""
    import warnings

    result, caught = outcome
    for message, category, filename, lineno in caught:
        warnings.showwarning(message, category, filename, lineno)
    return result


def _first(pending):
    """The outcome of the first of the ``pending`` futures, which leaves them once it has come, not before."""
    outcome = pending[0].result()
    pending.popleft()
    return outcome


def _outcome(pending):
    """The first of the ``pending`` futures' ``(result, None)``, or ``(None, exception)`` if its task raised one,
    or None if the task was skipped; it leaves them once it has come."""
    try:
        outcome = _first(pending)
    except Exception as error:  # the task's own (a KeyboardInterrupt here is this process's)
        pending.popleft()
        return None, error
    return None if outcome is None else (_issued(outcome), None)


def _end(pool):
    """Stop the workers of ``pool`` now (SIGTERM), wait a few seconds for each to remove its files, and let go
    of it."""
    processes = list((pool._processes or {}).values())  # no public way before Python 3.14
    manager = pool._executor_manager_thread  # taken before the shutdown lets go of it
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=5)
    pool.shutdown(wait=False, cancel_futures=True)
    # the pool's manager thread closes its wake-up pipe as it ends, and Python 3.11's exit hook may write to that
    # pipe in the same instant (an ignored "Bad file descriptor" traceback after "Terminated."): let it end first
    if manager is not None:
        manager.join(timeout=5)


def _say_what_finishes(running):
    """One line on stderr after the first Ctrl-C: what is still to come, and how to stop it."""
    import sys

    if running:
        print(f"Ctrl-C: finishing the {running} file{'s' if running > 1 else ''} in progress; press Ctrl-C again "
              "to stop now", file=sys.stderr, flush=True)


class Workers:
    """``jobs`` worker processes (none for 1: every task runs in this process), as a context manager.

    Parameters
    ----------
    jobs : int
    """

    def __init__(self, jobs):
        self.jobs = int(jobs)
        self._pool = None
        self._stop = None
        self._abandoned = False  # after a second Ctrl-C the running tasks are not waited for

    def __enter__(self):
        if self.jobs > 1:
            from sepsti.core.processes import process_pool, start_context

            context = start_context()
            self._stop = context.Event()
            self._pool = process_pool(self.jobs, _start_worker, (self._stop, context.Value("q", -1)))
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        if self._pool is None:
            return
        pool, self._pool = self._pool, None
        self._stop.set()  # the tasks not started are skipped
        if isinstance(exc_value, Terminated):
            self._abandoned = True
        try:
            if not self._abandoned:
                pool.shutdown(wait=True, cancel_futures=True)  # the tasks running finish
        except KeyboardInterrupt:
            self._abandoned = True
            raise
        finally:
            if self._abandoned:
                _end(pool)

    def map(self, function, tasks):
        """Each task's result, as :meth:`outcomes` gives them; a task's exception is raised here when its turn
        comes."""
        for result, error in self.outcomes(function, tasks):
            if error is not None:
                raise error
            yield result

    def outcomes(self, function, tasks):
        """``function(*arguments)`` for each tuple of ``tasks``, in order, and the exception each raised.

        After a task's exception no task starts (with worker processes, none in a later call either);
        the tasks running finish, and their outcomes come after it (a file one of them wrote can still
        be reported).

        Parameters
        ----------
        function : callable
            A module-level function (pickled by reference).
        tasks : iterable of tuple
            Its arguments, consumed as workers become free.

        Yields
        ------
        (object, None) or (None, Exception)
            Each task's result, or the exception it raised, in the order of ``tasks``. On Ctrl-C, the
            outcomes of the tasks that were running, then the ``KeyboardInterrupt``.
        """
        if self._pool is None:
            for arguments in tasks:
                try:
                    result = function(*arguments)
                except Exception as error:
                    yield None, error
                    return
                yield result, None
            return
        import collections

        pending = collections.deque()
        try:
            for index, arguments in enumerate(tasks):
                if self._stop.is_set():
                    break
                pending.append(self._pool.submit(_run, index, function, arguments))
                if len(pending) >= 2 * self.jobs:
                    yield self._next(pending)
            while pending and (outcome := self._next(pending)) is not None:
                yield outcome
        except KeyboardInterrupt as interrupt:  # the tasks not started are skipped; those running finish
            self._stop.set()
            if isinstance(interrupt, Terminated):
                self._abandoned = True
                raise
            _say_what_finishes(min(self.jobs, sum(not future.done() for future in pending)))
            try:
                while pending and (outcome := _outcome(pending)) is not None:
                    yield outcome
            except KeyboardInterrupt:  # a second one: __exit__ stops the running tasks
                self._abandoned = True
                raise
            raise

    def _next(self, pending):
        """The first pending task's outcome (:func:`_outcome`); after an exception, the tasks not started are
        skipped."""
        outcome = _outcome(pending)
        if outcome is not None and outcome[1] is not None:
            self._stop.set()
        return outcome
