"""Checks of scalar settings, each raising :class:`sepsti.core.errors.ParameterError` that names the setting."""

import math
import numbers

import numpy as np

from sepsti.core.errors import ParameterError

__all__ = ["integer_at_least", "integers_at_least", "distinct_ranks", "integer_within", "positive_number",
           "finite_number", "number_within", "positive_numbers", "real_array", "scalar", "is_number"]


def scalar(value):
    """A 0-d array as the number it holds (``np.array(1.0)`` stands where a number is expected); else ``value``."""
    return value.item() if isinstance(value, np.ndarray) and value.ndim == 0 else value


def is_number(value):
    """Whether ``value`` is a real number (a 0-d array of one included), not a bool."""
    value = scalar(value)
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _is_integer(value):
    """Whether ``value`` is an integer (a NumPy one included), not a bool or a float such as 2.0."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def integer_at_least(name, value, low):
    """``value`` as an int: an integer (not a bool, not a float such as 2.5) of at least ``low``."""
    if not _is_integer(value) or value < low:
        raise ParameterError(f"{name}={value!r} must be an integer of at least {low}")
    return int(value)


def integers_at_least(name, values, low):
    """``values`` as a tuple of ints, each an integer (not a bool, not a float such as 1.5) of at least ``low``,
    named ``name[i]`` when refused."""
    try:
        values = tuple(values)
    except TypeError:  # None, a number
        raise ParameterError(f"{name}={values!r}: expected a sequence of integers of at least {low}") from None
    return tuple(integer_at_least(f"{name}[{i}]", value, low) for i, value in enumerate(values))


def distinct_ranks(ranks):
    """Distinct positive integers, in the order given, as a list of ints; a float such as 1.5 is refused, not
    truncated."""
    try:
        ranks = list(ranks)
    except TypeError:
        raise ParameterError(f"ranks={ranks!r}: expected distinct positive integers") from None
    ranks = [integer_at_least(f"ranks[{i}]", rank, 1) for i, rank in enumerate(ranks)]
    if not ranks or len(set(ranks)) != len(ranks):
        raise ParameterError(f"ranks={ranks}: expected distinct positive integers")
    return ranks


def integer_within(name, value, low, high):
    """``value`` as an int: an integer (not a bool, not a float such as 2.5) in ``low..high``."""
    if not _is_integer(value) or not low <= value <= high:
        raise ParameterError(f"{name}={value!r} must be an integer in {low}..{high}")
    return int(value)


def positive_number(name, value):
    """``value`` as a float: finite and above 0."""
    value = scalar(value)
    if not is_number(value) or not (np.isfinite(value) and value > 0):
        raise ParameterError(f"{name}={value!r} must be a positive number")
    return float(value)


def finite_number(name, value):
    """``value`` as a float: a finite number (not a bool)."""
    value = scalar(value)
    if not is_number(value) or not np.isfinite(value):
        raise ParameterError(f"{name}={value!r} must be a finite number")
    return float(value)


def real_array(name, value, *, keep_dtype=False):
    """``value`` as a float64 array (with ``keep_dtype``, in its own integer, boolean or float type); complex or
    non-numeric values refused, not cast (NumPy drops an imaginary part with a warning only)."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):  # sequences of unequal lengths (a NamedTuple of arrays and numbers, say)
        raise ParameterError(f"{name}: expected an array of real numbers, got a {type(value).__name__} that does "
                             "not form one (sequences of unequal lengths?)") from None
    if array.dtype.kind == "c":
        raise ParameterError(f"{name}: complex values ({array.dtype}); expected real numbers")
    if array.dtype.kind not in "biuf":  # strings ("1.5" would be read), objects
        raise ParameterError(f"{name}: expected real numbers, got values of type {array.dtype}")
    return array if keep_dtype else array.astype(np.float64)


def number_within(name, value, low, high):
    """``value`` as a float in [low, high]."""
    value = scalar(value)
    if not is_number(value) or not low <= value <= high:
        raise ParameterError(f"{name}={value!r} must be a number in [{low:g}, {high:g}]")
    return float(value)


def positive_numbers(name, value):
    """``value`` unchanged: a number, or an array of numbers, each finite and above 0.

    Cheap for a float (or a NumPy float64), so that a kernel can check its step at every call (an array of
    steps costs about 2 µs).
    """
    if isinstance(value, float) and 0.0 < value < math.inf:
        return value
    array = np.asarray(value)
    if array.dtype.kind not in "iuf" or not (array.size and array.min() > 0 and array.max() < np.inf):  # NaN fails
        raise ParameterError(f"{name}={value!r} must be a positive finite number, or an array of them")
    return value

