"""Tests of sepsti.core.evidence.tempering_check against exact power-posterior expectations."""

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.evidence.tempering_check import largest_decrease


def exact_gaussian_expectations(temperatures, n=50, prior_var=4.0, noise_var=1.0, xbar=0.3):
    """E_t[log p(x|θ)] for x_i ~ N(θ, 1), θ ~ N(0, prior_var): a closed form rising in t."""
    post_var = 1.0 / (1.0 / prior_var + temperatures * n / noise_var)
    post_mean = post_var * temperatures * n * xbar / noise_var
    # sum_i E(x_i - θ)^2 with sum_i (x_i - xbar)^2 = n (taken as the data's spread)
    sq = n + n * ((xbar - post_mean) ** 2 + post_var)
    return -0.5 * n * np.log(2 * np.pi * noise_var) - 0.5 * sq / noise_var


def test_equilibrated_expectations_never_fall():
    t = np.linspace(0.0, 1.0, 11) ** 4
    mean = exact_gaussian_expectations(t)
    assert np.all(np.diff(mean) > 0)
    se = np.full(t.size, 0.05)
    # the largest "decrease" of a rising sequence is its smallest rise, negative, in joint standard errors
    assert largest_decrease(mean, se) == pytest.approx(-np.min(np.diff(mean)) / np.hypot(0.05, 0.05), rel=1e-12)


def test_a_fall_is_measured_in_joint_standard_errors():
    mean = np.array([-100.0, -50.0, -56.0, -40.0])
    se = np.array([1.0, 1.5, 2.0, 1.0])
    assert largest_decrease(mean, se) == pytest.approx(6.0 / np.sqrt(1.5**2 + 2.0**2))


def test_zero_errors():
    assert largest_decrease([-3.0, -2.0], [0.0, 0.0]) == -np.inf
    assert largest_decrease([-2.0, -3.0], [0.0, 0.0]) == np.inf


def test_shapes_are_checked():
    with pytest.raises(ParameterError):
        largest_decrease([1.0, 2.0], [1.0])
    with pytest.raises(ParameterError):
        largest_decrease([1.0], [1.0])


@pytest.mark.parametrize("mean, mcse, name", [
    ([-3.0, np.nan, -1.0], [0.1, 0.1, 0.1], "mean_log_likelihood"),  # was NaN: no fall, no warning
    ([-3.0, -np.inf, -1.0], [0.1, 0.1, 0.1], "mean_log_likelihood"),
    ([-3.0, -2.0, -1.0], [0.1, -0.1, 0.1], "mcse"),
    ([-3.0, -2.0, -1.0], [0.1, np.nan, 0.1], "mcse"),
    ([-3.0, -2.0, -1.0], [0.1, np.inf, 0.1], "mcse"),
])
def test_non_finite_means_and_bad_errors_are_refused(mean, mcse, name):
    with pytest.raises(ParameterError, match=rf"^{name} is .* at temperature indices \[1\]"):
        largest_decrease(mean, mcse)


def test_equal_expectations_known_exactly_are_no_fall():
    # a log-likelihood that does not depend on theta: E_t is the same at every t, with no error; that is
    # not a decrease (the derivative, a variance, is 0), so no warning
    assert largest_decrease([-5.0, -5.0, -5.0], [0.0, 0.0, 0.0]) == -np.inf
