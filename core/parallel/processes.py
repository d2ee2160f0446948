"""Pools of worker processes whose workers are the parallelism (one BLAS thread each).

Used by the parallel chains of :mod:`sepsti.core.samplers.chains` and by the application's ``--jobs``.
Workers start by ``fork`` where the platform has it, so that loaded modules and compiled code (a
model's numba kernels, say) are shared without pickling; else by ``spawn``.
"""

__all__ = ["process_pool"]

_BLAS_LIMITS = []  # a worker's BLAS limit, kept for its lifetime


def _start_worker(initializer, initargs):
    from threadpoolctl import threadpool_limits

    _BLAS_LIMITS.append(threadpool_limits(limits=1, user_api="blas"))
    if initializer is not None:
        initializer(*initargs)


def process_pool(num_workers, initializer=None, initargs=()):
    """A :class:`concurrent.futures.ProcessPoolExecutor` of ``num_workers`` processes, one BLAS thread each.

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
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return ProcessPoolExecutor(num_workers, mp_context=multiprocessing.get_context(method),
                               initializer=_start_worker, initargs=(initializer, tuple(initargs)))
