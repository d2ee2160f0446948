"""``sepsti.core.progress``: lines printed while a bar is drawn."""

import io
import sys

from sepsti.core.progress import above, progress_bar


def test_lines_printed_above_a_bar_start_lines_of_their_own(monkeypatch):
    """Stdout and stderr on one terminal: the bar is cleared before the line and drawn again after it."""
    terminal = io.StringIO()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setattr(sys, "stderr", terminal)
    with progress_bar(3, desc="work", force=True) as bar:
        bar.update(1)
        with above(bar):
            print("wrote a")
        bar.update(1)
    shown = [line.split("\r")[-1] for line in terminal.getvalue().splitlines()]  # what a terminal shows
    assert "wrote a" in shown and "work:" in terminal.getvalue(), terminal.getvalue()
    assert terminal.getvalue().split("wrote a\n")[1].lstrip("\r").startswith("work:")  # drawn again
