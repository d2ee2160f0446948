"""Pools of worker processes whose workers are the parallelism (one BLAS thread each).

Used by the parallel chains of :mod:`sepsti.core.samplers.chains` and by the application's ``--jobs``.
Workers start by ``fork`` where the platform has it, so that loaded modules and compiled code (a
model's numba kernels, say) are shared without pickling; else by ``spawn``. On Linux a worker ends
(SIGTERM) when the process that started it ends, however it ends (``kill -9`` included), instead of
living on without it.

A forked worker cannot run a numba parallel kernel once this process has run one under numba's
OpenMP layer (GNU OpenMP ends the worker: "fork() called from a process already using GNU
OpenMP"); :func:`openmp_started` tells, and callers whose work may hold such kernels run it in
threads instead (:func:`sepsti.core.samplers.chains.sample_nuts` does).

:func:`results` waits for the futures of such a pool (or of threads) as Ctrl-C can interrupt it.
"""

__all__ = ["openmp_started", "process_pool", "results", "start_context"]

_BLAS_LIMITS = []  # a worker's BLAS limit, kept for its lifetime


def openmp_started():
    """Whether numba's OpenMP threading layer has started in this process (numba is not imported to tell)."""
    import sys

    numba = sys.modules.get("numba")
    if numba is None:
        return False
    try:
        return numba.threading_layer() == "omp"
    except ValueError:  # no parallel kernel has run
        return False


def results(futures):
    """The results of ``futures``, in their order; the first exception one raised is raised as soon as it comes.

    The wait has a short timeout, which keeps the waiting thread responsive to Ctrl-C.
    """
    from concurrent.futures import FIRST_EXCEPTION, wait

    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
        for future in futures:
            if future in done and future.exception() is not None:
                future.result()  # raises it
    return [future.result() for future in futures]


def start_context():
    """The :mod:`multiprocessing` context of :func:`process_pool`'s workers (for events and locks they share)."""
    import multiprocessing

    return multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")


def _follow_parent(parent):
    """End this worker by SIGTERM when the process ``parent`` ends (Linux: ``PR_SET_PDEATHSIG``)."""
    import ctypes
    import os
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not a handler the parent had when it forked
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it ended before the request was made
        os.kill(os.getpid(), signal.SIGTERM)


def _start_worker(parent, initializer, initargs):
    import sys

    from threadpoolctl import threadpool_limits

    if sys.platform.startswith("linux"):
        _follow_parent(parent)
    _BLAS_LIMITS.append(threadpool_limits(limits=1, user_api="blas"))
    if initializer is not None:
        initializer(*initargs)


def process_pool(num_workers, initializer=None, initargs=()):
    """A :class:`concurrent.futures.ProcessPoolExecutor` of ``num_workers`` processes, one BLAS thread each.

    Linux sends the workers' signal when the thread that started them ends: make and use a pool
    within one thread's lifetime (the workers start at the first ``submit``).

    Parameters
    ----------
    num_workers : int
    initializer : callable, optional
        Run in each worker after its BLAS threads are limited, with ``initargs`` (a module-level
        function, as the executor's own ``initializer``).
    initargs : tuple

    Returns
    -------
    concurrent.futures.ProcessPoolExecutor
    """
    import os
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(num_workers, mp_context=start_context(), initializer=_start_worker,
                               initargs=(os.getpid(), initializer, tuple(initargs)))
