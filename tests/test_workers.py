"""The number of workers ``--jobs`` gives (``sepsti.workers.resolve_jobs``)."""

import os

import pytest

from sepsti import workers


@pytest.mark.parametrize("memory, expected", [(None, 8), (64 * 2 ** 30, 8), (2 ** 30, 2), (10 * 2 ** 20, 1)])
def test_jobs_0_is_one_per_core_as_far_as_memory_holds(monkeypatch, memory, expected):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setattr(workers, "_available_memory", lambda: memory)
    assert workers.resolve_jobs(0) == expected
    assert workers.resolve_jobs(3) == 3  # a number asked for is taken as it is


def test_available_memory_is_read_where_the_system_says():
    memory = workers._available_memory()
    if os.path.exists("/proc/meminfo"):
        assert memory is not None and 0 < memory <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    else:
        assert memory is None
