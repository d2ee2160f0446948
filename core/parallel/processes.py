"""Pools of worker processes whose workers are the parallelism (one BLAS thread each).

Used by the parallel chains of :mod:`sepsti.core.samplers.chains` and by the application's ``--jobs``.
Workers start by ``fork`` where the platform has it, so that loaded modules and compiled code (a
model's numba kernels, say) are shared without pickling; else by ``spawn``. Once numba's OpenMP
threading layer has started in this process (a parallel kernel has run, or numba was asked its thread
count), a forked worker that runs a parallel kernel dies (GNU OpenMP does not survive ``fork``): pools
made from then on start their workers by ``forkserver``, from a clean server process. Their initializer,
its arguments and the functions submitted are then pickled: module-level functions of an importable
module, or of a script whose work is under ``if __name__ == "__main__":`` (the workers import it again).
On Linux a worker ends (SIGTERM) when the process that started the pool ends, however it ends
(``kill -9`` included), instead of living on without it.
"""

__all__ = ["process_pool", "start_context"]

_BLAS_LIMITS = []  # a worker's BLAS limit, kept for its lifetime


def _openmp_started():
    """Whether numba's threading layer has started in this process as OpenMP (not imported here if it is not)."""
    import sys

    numba = sys.modules.get("numba")
    if numba is None:
        return False
    try:
        return numba.threading_layer() == "omp"
    except ValueError:  # not started
        return False


def start_context():
    """The :mod:`multiprocessing` context of :func:`process_pool`'s workers (for events and locks they share).

    ``fork`` where the platform has it, unless numba's OpenMP layer has started in this process
    (module docstring): then ``forkserver``, or ``spawn`` where there is none. Decided at each call:
    take the context and make the pool together, running no numba parallel kernel in between.
    """
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and not _openmp_started():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _follow_parent(parent, via_server):
    """End this worker by SIGTERM when the process ``parent`` ends.

    A worker ``parent`` started asks Linux for the signal (``PR_SET_PDEATHSIG``). A worker of the
    forkserver (``via_server``) cannot: the server lives on while any worker does. A thread of its
    own then waits for ``parent`` to end (a pidfd, Linux 5.3 or later) and sends the signal.
    """
    import ctypes
    import os
    import signal
    import threading

    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not a handler the parent had when it forked
    if via_server:
        try:
            descriptor = os.pidfd_open(parent)
        except ProcessLookupError:  # it has ended already
            os.kill(os.getpid(), signal.SIGTERM)
            return
        threading.Thread(target=_end_after, args=(descriptor,), daemon=True).start()
        return
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it ended before the request was made
        os.kill(os.getpid(), signal.SIGTERM)


def _end_after(descriptor):
    """Send this process SIGTERM once the process of pidfd ``descriptor`` has ended."""
    import os
    import select
    import signal

    select.select([descriptor], [], [])
    os.kill(os.getpid(), signal.SIGTERM)


def _start_worker(parent, via_server, initializer, initargs):
    import sys

    from threadpoolctl import threadpool_limits

    if sys.platform.startswith("linux"):
        _follow_parent(parent, via_server)
    _BLAS_LIMITS.append(threadpool_limits(limits=1, user_api="blas"))
    if initializer is not None:
        initializer(*initargs)


def process_pool(num_workers, initializer=None, initargs=()):
    """A :class:`concurrent.futures.ProcessPoolExecutor` of ``num_workers`` processes, one BLAS thread each.

    Started by :func:`start_context`'s method, chosen now (see the module docstring: under
    ``forkserver`` the initializer, ``initargs`` and the submitted functions must pickle). Linux
    sends the workers' signal when the thread that started them ends: make and use a pool within
    one thread's lifetime (the workers start at the first ``submit``).

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

    context = start_context()
    return ProcessPoolExecutor(num_workers, mp_context=context, initializer=_start_worker,
                               initargs=(os.getpid(), context.get_start_method() == "forkserver", initializer,
                                         tuple(initargs)))
