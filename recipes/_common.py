"""What every recipe shares: its command line and how it writes results.

Each recipe runs as ``python recipes/<name>.py [--quick] [--out DIR] [--seed S]``
and writes ``DIR/<name>.json`` and ``DIR/<name>.png`` (atomically).
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sepsti.core.io import atomic_path, json_safe  # noqa: E402

__all__ = ["recipe_parser", "write_results", "default_corpus", "ROOT"]


def recipe_parser(name, description):
    """Return an argument parser with the options every recipe takes."""
    parser = argparse.ArgumentParser(prog=f"recipes/{name}.py", description=description)
    parser.add_argument("--quick", action="store_true", help="a reduced run of a minute or two")
    parser.add_argument("--out", type=Path, default=Path("results"), help="output folder (default: results)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    return parser


def default_corpus():
    """The NOIZEUS folder: ``$SEPSTI_NOIZEUS`` or ``../shared/data/noizeus`` beside the checkout, else None."""
    import os

    for candidate in (os.environ.get("SEPSTI_NOIZEUS"), ROOT.parent / "shared" / "data" / "noizeus"):
        if candidate and Path(candidate, "clean").is_dir():
            return Path(candidate).resolve()
    return None


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
