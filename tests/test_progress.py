"""``sepsti.core.progress``: lines printed while a bar is drawn."""

import io
import sys
import warnings

import pytest

from sepsti.core.progress import above, forced, progress_bar, wanted, warnings_above


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


def test_a_closed_bar_leaves_no_line_behind(monkeypatch):
    """A finished bar is erased: a log on a terminal keeps the lines printed, not every bar drawn."""
    terminal = io.StringIO()
    monkeypatch.setattr(sys, "stderr", terminal)
    with progress_bar(3, desc="work", force=True) as bar:
        bar.update(3)
    assert "work:" in terminal.getvalue() and "\n" not in terminal.getvalue()
    assert terminal.getvalue().rsplit("\r", 2)[-2].strip() == "", terminal.getvalue()  # blanked after the last


class _Stream(io.StringIO):
    def __init__(self, terminal):
        super().__init__()
        self.terminal = terminal

    def isatty(self):
        return self.terminal


@pytest.mark.parametrize("setting, stderr, stdout, drawn", [
    (None, True, False, True), (None, False, True, False),  # stderr, where the bars go, decides
    (" 1 ", False, False, True), ("0", True, True, False), ("yes", True, False, True)])
def test_bars_are_wanted_as_the_environment_or_else_stderr_says(monkeypatch, setting, stderr, stdout, drawn):
    if setting is None:
        monkeypatch.delenv("SEPSTI_PROGRESS", raising=False)
    else:
        monkeypatch.setenv("SEPSTI_PROGRESS", setting)
    monkeypatch.setattr(sys, "stderr", _Stream(stderr))
    monkeypatch.setattr(sys, "stdout", _Stream(stdout))
    assert wanted() is drawn


def test_forced_blocks_nest_and_restore_what_was_set(monkeypatch):
    monkeypatch.setenv("SEPSTI_PROGRESS", "0")
    assert not wanted()
    with forced():
        assert wanted()
        with forced(False):
            assert not wanted()
        assert wanted()
    assert not wanted() and wanted(force=True)


def test_warnings_print_above_a_bar_and_as_before_after_it(monkeypatch):
    terminal = io.StringIO()
    monkeypatch.setattr(sys, "stderr", terminal)

    def show(message, category, *where):
        sys.stderr.write(f"{category.__name__}: {message}\n")

    monkeypatch.setattr(warnings, "showwarning", show)
    with progress_bar(3, desc="work", force=True) as bar, warnings_above(bar):
        bar.update(1)
        warnings.warn("careful", UserWarning)
    assert warnings.showwarning is show
    before, after = terminal.getvalue().split("UserWarning: careful\n")
    assert before.split("\r")[-2].strip() == "" and after.lstrip("\r").startswith("work:"), terminal.getvalue()
