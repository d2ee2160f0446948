"""Checks of scalar settings, each raising :class:`sepsti.core.errors.ParameterError` that names the setting."""

import numbers

import numpy as np

from sepsti.core.errors import ParameterError

__all__ = ["integer_at_least", "positive_number", "number_within"]


def integer_at_least(name, value, low):
    """``value`` as an int: an integer (not a bool, not a float such as 2.5) of at least ``low``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < low:
        raise ParameterError(f"{name}={value!r} must be an integer of at least {low}")
    return int(value)


def positive_number(name, value):
    """``value`` as a float: finite and above 0."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not (
            np.isfinite(value) and value > 0):
        raise ParameterError(f"{name}={value!r} must be a positive number")
    return float(value)


def number_within(name, value, low, high):
    """``value`` as a float in [low, high]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not low <= value <= high:
        raise ParameterError(f"{name}={value!r} must be a number in [{low:g}, {high:g}]")
    return float(value)
