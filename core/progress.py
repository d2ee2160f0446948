"""Progress bars on stderr (tqdm), shown on a terminal only unless asked for.

A bar a caller enables is drawn when the user asks for bars on the command line: a
command's own ``--progress`` (the caller passes ``force=True``) or ``sepsti --progress``
(which calls :func:`forced`). Otherwise ``SEPSTI_PROGRESS=1`` in the environment turns
them on and ``SEPSTI_PROGRESS=0`` off, and without it they are drawn when stderr is a
terminal. Logs redirected to a file or a pipe thus get no carriage-return bar updates
by default. Lines printed while a bar is shown go through :func:`above` (warnings through
:func:`warnings_above`), so that on a terminal each comes on a line of its own, not after the bar.
"""

import contextlib
import os
import sys

__all__ = ["progress_bar", "forced", "wanted", "above", "warnings_above"]

_FORCED = [False]


@contextlib.contextmanager
def forced(enabled=True):
    """Within this block, bars callers enable are drawn even when stderr is not a terminal."""
    previous = _FORCED[0]
    _FORCED[0] = bool(enabled)
    try:
        yield
    finally:
        _FORCED[0] = previous


def wanted(*, force=False):
    """Whether an enabled bar is drawn now (see the module docstring)."""
    if force or _FORCED[0]:
        return True
    setting = os.environ.get("SEPSTI_PROGRESS", "").strip()
    if setting in ("0", "1"):
        return setting == "1"
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def above(bar):
    """Within this block, what prints to stdout or stderr goes above ``bar`` (and any other bar drawn): the bars
    are cleared first and drawn again after. Nothing is written besides when no bar is drawn."""
    with bar.external_write_mode(file=sys.stderr):
        yield


@contextlib.contextmanager
def warnings_above(bar):
    """Within this block, warnings print above ``bar`` (:func:`above`)."""
    import warnings

    show = warnings.showwarning

    def show_above(*args, **kwargs):
        with above(bar):
            show(*args, **kwargs)

    warnings.showwarning = show_above
    try:
        yield
    finally:
        warnings.showwarning = show


def progress_bar(total, *, desc=None, enabled=True, unit="it", force=False):
    """Return a tqdm progress bar writing to stderr.

    Parameters
    ----------
    total : int
        Number of steps.
    desc : str, optional
        Label shown before the bar.
    enabled : bool
        False gives a bar that prints nothing (same interface). True draws it when
        :func:`wanted` says so: on a terminal, or when forced.
    unit : str
        Unit name shown with the rate.
    force : bool
        Draw an enabled bar even when stderr is not a terminal or ``SEPSTI_PROGRESS=0``.
    """
    from tqdm.auto import tqdm

    show = bool(enabled) and wanted(force=force)
    return tqdm(total=total, desc=desc, disable=not show, unit=unit, file=sys.stderr,
                leave=False, dynamic_ncols=True)
