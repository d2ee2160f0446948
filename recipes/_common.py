"""What every recipe shares: its command line and how it writes results.

Each recipe runs as ``python recipes/<name>.py [--quick] [--out DIR] [--seed S]``
and writes ``DIR/<name>.json`` and ``DIR/<name>.png`` (atomically).
"""

import argparse
import contextlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sepsti.core.io import atomic_path, json_safe  # noqa: E402

__all__ = ["recipe_parser", "write_results", "default_corpus", "checkout_package", "integer_list", "paired_lead",
           "lead_text", "ROOT"]


def recipe_parser(name, description):
    """Return an argument parser with the options every recipe takes."""
    parser = argparse.ArgumentParser(prog=f"recipes/{name}.py", description=description)
    parser.add_argument("--quick", action="store_true", help="a reduced run of a minute or two")
    parser.add_argument("--out", type=Path, default=Path("results"), help="output folder (default: results)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    return parser


def integer_list(text):
    """``argparse`` type of a comma-separated list of integers (SNRs, ranks): a bad one is a usage error."""
    try:
        return [int(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected integers separated by commas") from None


def paired_lead(ours, theirs, groups):
    """:func:`sepsti.comparison.paired_difference_if_defined` as a dict (None stays None)."""
    from sepsti.comparison import paired_difference_if_defined

    lead = paired_difference_if_defined(ours, theirs, groups)
    return None if lead is None else lead._asdict()


def lead_text(cell, digits):
    """A lead as ``mean [low, high] wins/pairs``, or – where undefined."""
    if cell is None:
        return "–"
    return (f"{cell['mean']:+.{digits}f} [{cell['low']:+.{digits}f}, {cell['high']:+.{digits}f}] "
            f"{cell['wins']}/{cell['pairs']}")


def default_corpus():
    """The NOIZEUS folder: ``$SEPSTI_NOIZEUS`` or ``../shared/data/noizeus`` beside the checkout, else None."""
    import os

    for candidate in (os.environ.get("SEPSTI_NOIZEUS"), ROOT.parent / "shared" / "data" / "noizeus"):
        if candidate and Path(candidate, "clean").is_dir():
            return Path(candidate).resolve()
    return None


@contextlib.contextmanager
def checkout_package(checkout):
    """The ``sepsti`` package of a checkout laid out as installed, for ``python -m sepsti`` in a child process.

    The project maps ``sepsti.core`` to ``core/`` and ``sepsti.corpora`` to ``corpora/`` (pyproject.toml);
    with the checkout itself on ``PYTHONPATH`` those two would still come from the installed package.
    A temporary folder holds ``sepsti/`` with links to the checkout's files and to its ``core`` and
    ``corpora``, so that every module comes from the checkout; the checkout follows it on
    ``PYTHONPATH`` for older layouts, which import ``core`` and ``corpora`` as top-level packages.

    Yields
    ------
    env : dict
        The environment with ``PYTHONPATH`` set to the folder.
    cwd : Path
        The folder (``python -m`` puts the working directory first on ``sys.path``).
    """
    import os
    import tempfile

    checkout = Path(checkout).resolve()
    with tempfile.TemporaryDirectory(prefix="sepsti-checkout-") as folder:
        package = Path(folder) / "sepsti"
        package.mkdir()
        for entry in (checkout / "sepsti").iterdir():
            (package / entry.name).symlink_to(entry)
        for name in ("core", "corpora"):
            if (checkout / name).is_dir() and not (package / name).exists():
                (package / name).symlink_to(checkout / name)
        # the checkout itself next: older layouts import ``core`` and ``corpora`` as top-level packages
        yield {**os.environ, "PYTHONPATH": os.pathsep.join((folder, str(checkout)))}, Path(folder)


def write_results(out_dir, name, results, figure=None):
    """Write ``results`` as ``out_dir/name.json`` and ``figure`` as ``out_dir/name.png``.

    Parameters
    ----------
    out_dir : Path
        Output folder (created if missing).
    name : str
        Recipe name.
    results : dict
        JSON-serialisable results.
    figure : matplotlib.figure.Figure, optional
        Saved at 120 dpi and closed.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(out_dir / f"{name}.json") as tmp:
        tmp.write_text(json.dumps(json_safe(results), indent=2, default=_to_builtin) + "\n")
    if figure is not None:
        import matplotlib.pyplot as plt

        with atomic_path(out_dir / f"{name}.png") as tmp:
            figure.savefig(tmp, dpi=120, bbox_inches="tight", format="png")
        plt.close(figure)
    print(f"wrote {out_dir / (name + '.json')}" + (f" and {out_dir / (name + '.png')}" if figure is not None else ""))


def _to_builtin(value):
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
