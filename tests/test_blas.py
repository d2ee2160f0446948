"""``sepsti.core.parallel.blas``: one BLAS thread inside, what was there before after."""

import pytest

from sepsti.core.parallel.blas import single_threaded_blas


def test_an_error_inside_is_raised_and_the_limit_restored():
    """An exit that returned true swallowed the error."""
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas_threads():
        return {pool["filepath"]: pool["num_threads"] for pool in threadpoolctl.threadpool_info()
                if pool["user_api"] == "blas"}

    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        with pytest.raises(ValueError, match="^inside$"), single_threaded_blas():
            assert set(blas_threads().values()) <= {1}
            raise ValueError("inside")
        assert blas_threads() == before
