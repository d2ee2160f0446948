"""The MPI backend: the only module that imports mpi4py.

Conventions
-----------
Everything runs without MPI: :func:`world` returns None unless the process
was started by an MPI launcher with more than one process. Work items are
dealt round-robin (item i to process i mod P) and gathered on process 0,
which alone writes outputs. Results never depend on P, because every item
draws its randomness from its own (seed, chain, block) streams.
"""

import contextlib
import os
import sys
import time
import traceback

__all__ = ["world", "is_root", "distribute", "from_root", "root_first", "abort_on_error", "launched_size", "reduction",
           "ring_exchange_start", "wait_all"]

#: Seconds a process other than 0 waits after Ctrl-C before ending the job, so that 0 reports it.
INTERRUPT_GRACE = 0.5

_LAUNCHER_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE")


def launched_size():
    """Number of processes an MPI launcher reports in the environment (1 when not launched)."""
    for name in _LAUNCHER_SIZE_VARIABLES:
        value = os.environ.get(name)
        if value and value.isdigit():
            return int(value)
    return 1


def world():
    """``MPI.COMM_WORLD`` when running under an MPI launcher with P > 1, else None."""
    if launched_size() <= 1:
        return None
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    return comm if comm.Get_size() > 1 else None


def is_root(comm):
    """True on process 0 (and without MPI)."""
    return comm is None or comm.Get_rank() == 0


def distribute(items, run_fn, comm):
    """Run ``run_fn(item)`` for this process's share of ``items``; gather all results on process 0.

    Returns
    -------
    list or None
        On process 0 (or without MPI) the results in the order of ``items``;
        None on the other processes.
    """
    items = list(items)
    if comm is None:
        return [run_fn(item) for item in items]
    rank, size = comm.Get_rank(), comm.Get_size()
    mine = {index: run_fn(item) for index, item in enumerate(items) if index % size == rank}
    gathered = comm.gather(mine, root=0)
    if rank != 0:
        return None
    merged = {}
    for part in gathered:
        merged.update(part)
    return [merged[index] for index in range(len(items))]


def from_root(comm, fn):
    """``fn()`` on process 0 alone, its result sent to every process.

    Should ``fn`` fail, it raises on process 0 and the others raise the same kind of error (a
    ParameterError, KeyboardInterrupt or else RuntimeError) instead of waiting, so that
    :func:`abort_on_error` ends every process with the same status.
    """
    if comm is None:
        return fn()
    if comm.Get_rank() != 0:
        result, failure = comm.bcast(None, root=0)
        if failure is not None:
            raise _failed_elsewhere(0, failure)
        return result
    try:
        result = fn()
    except BaseException as error:
        comm.bcast((None, type(error).__name__), root=0)
        raise
    comm.bcast((result, None), root=0)
    return result


def root_first(comm, fn):
    """Call ``fn()`` on process 0, then on the others once it has returned; return its result.

    For numba's kernels: compiled and cached by one process, then loaded by the rest, instead of compiled
    by every process at once into the same cache, which numba's cache does not survive safely. A failure
    on any process is raised on every process (the same kind of error, as by :func:`from_root`).
    """
    kept = []
    from_root(comm, lambda: kept.append(fn()))  # only that it returned is sent, not its result
    if is_root(comm):
        result, failure = kept[0], None
    else:
        try:
            result, failure = fn(), None
        except BaseException as error:  # noqa: BLE001 -- raised below, after the others have heard of it
            result, failure = None, error
    names = comm.allgather(None if failure is None else type(failure).__name__) if comm is not None else []
    if failure is not None:
        raise failure
    for process, name in enumerate(names):
        if name is not None:
            raise _failed_elsewhere(process, name)
    return result


def _failed_elsewhere(process, name):
    """The error to raise for a failure of kind ``name`` on another process: Ctrl-C as Ctrl-C, bad input as
    a ParameterError, anything else as a RuntimeError."""
    if name == "KeyboardInterrupt":  # Ctrl-C reached that process first: end as it does
        return KeyboardInterrupt()
    from sepsti.core.errors import ParameterError

    return (ParameterError if name == "ParameterError" else RuntimeError)(f"process {process} failed ({name})")


@contextlib.contextmanager
def abort_on_error(comm):
    """Turn an exception on any process into ``COMM_WORLD.Abort(1)`` (2 for bad input, 130 for Ctrl-C),
    so that no process hangs.

    Without MPI the exception propagates unchanged (the CLI maps it to an exit status).
    """
    if comm is None:
        yield
        return
    try:
        yield
    except KeyboardInterrupt:
        # Ctrl-C reaches every process (mpiexec forwards it): one line, the conventional status 130; the
        # others give process 0 a moment to say so before any Abort ends the job
        if comm.Get_rank() == 0:
            sys.stderr.write("Interrupted.\n")
            sys.stderr.flush()
        else:
            time.sleep(INTERRUPT_GRACE)
        comm.Abort(130)
    except BaseException as error:  # noqa: BLE001 -- every failure must end the whole job
        if isinstance(error, SystemExit) and not error.code:
            raise
        sys.stderr.write(f"process {comm.Get_rank()}: {type(error).__name__}: {error}\n")
        if os.environ.get("SEPSTI_DEBUG"):
            traceback.print_exc()
        sys.stderr.flush()
        comm.Abort(2 if type(error).__name__ == "ParameterError" else 1)


def reduction(name):
    """The MPI reduction operator ``name`` ("min", "max", "sum", "land") for ``comm.allreduce``."""
    from mpi4py import MPI

    return {"min": MPI.MIN, "max": MPI.MAX, "sum": MPI.SUM, "land": MPI.LAND}[name]


def ring_exchange_start(comm, send_buffer, recv_buffer, *, tag=0):
    """Start sending contiguous ``send_buffer`` to process p − 1 and receiving ``recv_buffer`` from p + 1.

    Returns the requests; compute while they travel, then :func:`wait_all` before
    reading ``recv_buffer`` or writing ``send_buffer``.
    """
    size, rank = comm.Get_size(), comm.Get_rank()
    return [comm.Irecv(recv_buffer, source=(rank + 1) % size, tag=tag),
            comm.Isend(send_buffer, dest=(rank - 1) % size, tag=tag)]


def wait_all(requests):
    """Wait for every request of :func:`ring_exchange_start`."""
    for request in requests:
        request.Wait()
