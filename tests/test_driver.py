"""The chain driver: which iterations it keeps, and the counts it refuses."""

from typing import NamedTuple

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.samplers.driver import run_chain


def count(rng, state, iteration):
    return iteration, None


@pytest.mark.parametrize("num_steps, burn_in, thin, kept", [(10, 3, 4, [4, 8]), (10, 9, 1, [10]), (10, 3, 100, [4]),
                                                            (1, 0, 1, [1]),
                                                            (np.int64(10), np.int32(3), np.uint8(4), [4, 8])])
def test_burn_in_and_thinning_keep_the_right_iterations(num_steps, burn_in, thin, kept):
    result = run_chain(count, 0, np.random.default_rng(0), num_steps=num_steps, burn_in=burn_in, thin=thin)
    assert result.samples.tolist() == kept


@pytest.mark.parametrize("counts, name", [({"thin": 1.5}, "thin=1.5"), ({"burn_in": 2.5}, "burn_in=2.5"),
                                          ({"num_steps": 10.5}, "num_steps=10.5"),
                                          ({"num_steps": 10.0}, "num_steps=10.0"), ({"thin": True}, "thin=True"),
                                          ({"num_steps": "10"}, "num_steps='10'"),
                                          ({"num_steps": None}, "num_steps=None"), ({"num_steps": 0}, "num_steps=0"),
                                          ({"burn_in": -1}, "burn_in=-1"), ({"thin": 0}, "thin=0"),
                                          ({"burn_in": 10}, "burn_in=10 must be below")])
def test_counts_that_are_not_integers_or_are_inconsistent_are_refused(counts, name):
    # thin=1.5 kept every third draw, burn_in=2.5 ended in an IndexError and num_steps=10.5 in a TypeError
    def step(rng, state, iteration):
        raise AssertionError("a step was taken")

    with pytest.raises(ParameterError, match=name):
        run_chain(step, 0, np.random.default_rng(0), **{"num_steps": 10, **counts})


@pytest.mark.parametrize("rng", [0, None, np.random.RandomState(0)])
def test_the_random_generator_is_checked_before_the_first_step(rng):
    """A seed met an AttributeError inside the first step."""
    steps = []
    with pytest.raises(ParameterError, match=r"^rng=.*: expected a numpy\.random\.Generator"):
        run_chain(lambda r, s, i: steps.append(i) or (s, None), np.zeros(2), rng, num_steps=3)
    assert steps == []


def test_divergences_are_counted_after_burn_in_only():
    """Flags raised during burn-in, which were counted too before, are not in num_divergent."""
    class Info(NamedTuple):
        is_divergent: bool

    def step(rng, state, iteration):
        return iteration, Info(iteration in (1, 2, 3, 7))  # three flags in the burn-in of 5, one after

    result = run_chain(step, 0, np.random.default_rng(0), num_steps=8, burn_in=5)
    assert result.num_divergent == 1
    assert result.info.is_divergent.tolist() == [True, True, True, False, False, False, True, False]


def test_an_initial_log_density_with_one_non_finite_chain_is_refused():
    """One chain's NaN log density among finite ones started the run before."""
    class State(NamedTuple):
        position: np.ndarray
        logdensity: np.ndarray

    with pytest.raises(ParameterError, match="initial log density"):
        run_chain(lambda r, s, i: (s, None), State(np.zeros(3), np.array([0.0, np.nan, -1.0])),
                  np.random.default_rng(0), num_steps=2)
