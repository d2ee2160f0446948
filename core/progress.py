"""Progress bars on stderr (tqdm), silenced when not wanted."""

import sys

__all__ = ["progress_bar"]


def progress_bar(total, *, desc=None, enabled=True, unit="it"):
    """Return a tqdm progress bar writing to stderr.

    Parameters
    ----------
    total : int
        Number of steps.
    desc : str, optional
        Label shown before the bar.
    enabled : bool
        False gives a bar that prints nothing (same interface).
    unit : str
        Unit name shown with the rate.
    """
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, unit=unit, file=sys.stderr,
                leave=False, dynamic_ncols=True)
