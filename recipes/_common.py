"""What every recipe shares: its command line, how it checks it and how it writes results.

Each recipe runs as ``python recipes/<name>.py [--quick] [--out DIR] [--seed S] [--overwrite]``
and writes ``DIR/<name>.json`` and ``DIR/<name>.png`` (atomically). Right after parsing, before any
work, the parser checks that ``DIR`` is a folder it can write into (or can be created) and refuses to
replace results that are already there unless ``--overwrite`` is given.
"""

import argparse
import contextlib
import json
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sepsti.core.errors import ParameterError  # noqa: E402
from sepsti.core.io import atomic_path, json_safe  # noqa: E402
from sepsti.core.random import KEY_LIMIT  # noqa: E402

__all__ = ["recipe_parser", "run_recipe", "write_results", "default_corpus", "checkout_package",
           "integer_list", "rank_list", "positive_list", "paired_lead", "lead_text", "ROOT"]


def recipe_parser(name, description, *, output=None, seed_offset=0):
    """Return an argument parser with the options every recipe takes.

    Parameters
    ----------
    name : str
        Recipe name (the program is ``recipes/<name>.py``).
    description : str
    output : str, callable or False, optional
        Name of the results the recipe writes with :func:`write_results` (``DIR/<output>.json`` and
        ``.png``), or a function of the parsed arguments giving it; default ``name``. Such a parser takes
        ``--overwrite`` and, when parsing, checks ``--out`` and refuses existing results without it.
        False: the recipe writes no such results (no ``--overwrite``, ``--out`` left to the recipe).
    seed_offset : int
        The largest number the recipe adds to ``--seed`` (seeds of further data draws): ``--seed`` must
        lie in [0, 2**32 - 1 - seed_offset].
    """
    parser = _RecipeParser(prog=_prog(name), description=description,
                           output=name if output is None else output)
    parser.add_argument("--quick", action="store_true", help="a reduced run (minutes, not hours)")
    parser.add_argument("--out", type=Path, default=Path("results"), help="output folder (default: results)")
    parser.add_argument("--seed", type=_seed_type(seed_offset), default=0,
                        help=f"random seed, 0 to {KEY_LIMIT - 1 - seed_offset} (default: 0)")
    if output is not False:
        parser.add_argument("--overwrite", action="store_true",
                            help="replace the results of an earlier run in the output folder")
    return parser


class _RecipeParser(argparse.ArgumentParser):
    """An argument parser that checks the output folder and records the run's provenance when parsing."""

    def __init__(self, *, output, **kwargs):
        super().__init__(**kwargs)
        self._output = output

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(args, namespace)
        if self._output is not False:
            parsed._results_name = self._output(parsed) if callable(self._output) else self._output
            self._check_out(parsed.out, parsed._results_name, parsed.overwrite)
        parsed._provenance = _provenance(sys.argv[1:] if args is None else args)
        return parsed

    def _check_out(self, out, name, overwrite):
        """Refuse an ``--out`` that cannot take the results, or results already there without ``--overwrite``."""
        if out.exists():
            if not out.is_dir():
                self.error(f"--out {out}: not a folder")
            folder = out
        else:  # created when the results are written: its nearest existing parent must allow it
            folder = next(parent for parent in out.absolute().parents if parent.exists())
            if not folder.is_dir():
                self.error(f"--out {out}: {folder} is not a folder")
        if not os.access(folder, os.W_OK | os.X_OK):
            self.error(f"--out {out}: cannot write into {folder}")
        if not overwrite:
            for path in (out / f"{name}.json", out / f"{name}.png"):
                if path.exists():
                    self.error(f"{path} exists: pass --overwrite to replace it, or choose another --out")


def _prog(name):
    return f"recipes/{name}.py"


def _seed_type(offset):
    """``argparse`` type of ``--seed``: an integer s with 0 <= s and s + ``offset`` < 2**32."""
    largest = KEY_LIMIT - 1 - offset

    def seed(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not 0 <= value <= largest:
            also = f" (the recipe also uses seeds up to --seed + {offset})" if offset else ""
            raise argparse.ArgumentTypeError(f"{text!r}: expected an integer from 0 to {largest}{also}")
        return value

    return seed


def run_recipe(main, name):
    """Run a recipe's ``main``: input the user can fix (:class:`ParameterError`) ends it as a usage error does,
    in one line (``recipes/<name>.py: error: ...``) with exit status 2."""
    try:
        main()
    except ParameterError as error:
        print(f"{_prog(name)}: error: {error}", file=sys.stderr)
        sys.exit(2)


def _number_list(text, convert, accept, expected):
    try:
        values = [convert(item) for item in text.split(",")]
    except ValueError:
        values = None
    if values is None or not all(accept(value) for value in values):
        raise argparse.ArgumentTypeError(f"{text!r}: expected {expected} separated by commas")
    return values


def integer_list(text):
    """``argparse`` type of a comma-separated list of integers (SNRs): a bad one is a usage error."""
    return _number_list(text, int, lambda value: True, "integers")


def rank_list(text):
    """``argparse`` type of a comma-separated list of ranks, integers of at least 1."""
    return _number_list(text, int, lambda value: value >= 1, "ranks (integers of at least 1)")


def positive_list(text):
    """``argparse`` type of a comma-separated list of positive finite numbers (prior rates, length scales)."""
    return _number_list(text, float, lambda value: math.isfinite(value) and value > 0, "positive numbers")


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


def write_results(args, results, figure=None):
    """Write ``results`` as ``args.out/<name>.json`` and ``figure`` as ``args.out/<name>.png``, under the
    results' name the parser checked (:func:`recipe_parser`'s ``output``).

    The JSON gets a ``provenance`` block: the command line (``argv``), every option's value after
    parsing (``options``), the sepsti version, ``git describe --always --dirty`` of the source tree
    (``source``; None outside a git checkout) and the Python, numpy and numba versions, as they were
    when the arguments were parsed.

    Parameters
    ----------
    args : argparse.Namespace
        The arguments of a :func:`recipe_parser`: ``out`` (created if missing) and ``overwrite``
        (without it a file that appeared at either name since parsing is not replaced:
        :class:`ParameterError`).
    results : dict
        Results; :func:`sepsti.core.io.json_safe` turns them into JSON (NaN and infinities become null).
    figure : matplotlib.figure.Figure, optional
        Saved at 120 dpi and closed.
    """
    name, out_dir = args._results_name, Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    options = {key: value for key, value in vars(args).items() if not key.startswith("_")}
    document = json_safe({**results, "provenance": {**args._provenance, "options": options}})
    with atomic_path(out_dir / f"{name}.json", overwrite=args.overwrite) as tmp:
        tmp.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n")
    if figure is not None:
        import matplotlib.pyplot as plt

        with atomic_path(out_dir / f"{name}.png", overwrite=args.overwrite) as tmp:
            figure.savefig(tmp, dpi=120, bbox_inches="tight", format="png")
        plt.close(figure)
    print(f"wrote {out_dir / (name + '.json')}" + (f" and {out_dir / (name + '.png')}" if figure is not None else ""))


def _provenance(argv):
    """What produced a run's results: its arguments, the source tree and the versions of what it runs on."""
    import importlib.metadata
    import platform
    import subprocess

    def version(package):
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return None

    source = None
    if (ROOT / ".git").exists():
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            described = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                                       capture_output=True, text=True, timeout=30)
            source = described.stdout.strip() if described.returncode == 0 else None
    return {"argv": [str(item) for item in argv], "sepsti": version("sepsti"), "source": source,
            "python": platform.python_version(), "numpy": version("numpy"), "numba": version("numba")}
