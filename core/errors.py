"""The one error type for input a caller can fix, and the warnings core emits."""

__all__ = ["ParameterError", "ConvergenceWarning"]


class ParameterError(ValueError):
    """Invalid input: a parameter, array, file or setting that the caller can fix.

    The message names the parameter, the value received, what was expected
    and, where there is one, the remedy.
    """


class ConvergenceWarning(UserWarning):
    """An iterative method stopped at its iteration cap before meeting its tolerance."""
