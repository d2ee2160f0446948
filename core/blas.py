"""One BLAS thread while the parallelism is elsewhere (blocks in numba threads, chains or EM blocks in threads).

BLAS's thread count is one setting for the whole process (threadpoolctl). Contexts that each set it and
restore what they found, entered and left by several threads in turn, undo one another's: a thread's
products then ran on several BLAS threads while others were at one (their last digits varying from run
to run), and the limit outlived them all. :func:`single_threaded_blas` counts the threads inside: the
first one in sets the limit, the last one out restores what was there before. Code that starts worker
threads enters it first, in its own thread, so that the workers' contexts find the limit set and leave it
(with OpenBLAS 0.3.30, a limit restored by a worker thread was read back as one thread by the others).
"""

import threading

__all__ = ["single_threaded_blas"]


class _SingleThreadedBlas:
    _lock = threading.Lock()
    _inside = 0
    _limits = None

    def __enter__(self):
        from threadpoolctl import threadpool_limits

        cls = type(self)
        with cls._lock:
            if cls._inside == 0:
                cls._limits = threadpool_limits(limits=1, user_api="blas")
            cls._inside += 1
        return self

    def __exit__(self, *exception):
        cls = type(self)
        with cls._lock:
            cls._inside -= 1
            if cls._inside == 0:
                cls._limits.restore_original_limits()
                cls._limits = None
        return False


def single_threaded_blas():
    """Context limiting BLAS to one thread; safe to enter from several threads at once.

    Without it every small product spawns BLAS threads that fight the worker threads for the same cores.
    """
    return _SingleThreadedBlas()
