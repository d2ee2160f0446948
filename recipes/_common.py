"""What every recipe shares: its command line, how it checks it and how it writes results.

Each recipe runs as ``python recipes/<name>.py [--quick] [--out DIR] [--seed S] [--overwrite]`` (a benchmark
as ``recipes/benchmarks/<name>.py``) and writes ``DIR/<results>.json`` and, where a plot helps,
``DIR/<results>.png`` (atomically; ``<results>`` is the name, with the options that tell runs apart).
Right after parsing, before any work, the parser checks the options' values, that ``DIR`` is a folder it
can write into (or can be created), and refuses to replace results that are already there unless
``--overwrite`` is given. :func:`run_recipe` ends a recipe whose input is found wrong later in one line.
"""

import argparse
import contextlib
import json
import math
import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sepsti.core.errors import ParameterError  # noqa: E402
from sepsti.core.io import atomic_path, check_output_path, json_safe  # noqa: E402
from sepsti.core.random import KEY_LIMIT  # noqa: E402

__all__ = ["recipe_parser", "run_recipe", "require_packages", "write_results", "write_json", "claim_folders",
           "default_corpus", "noizeus_corpus", "checkout_package", "checkout_folder", "number_type", "positive_int",
           "non_negative_int", "positive_float", "non_negative_float", "integer_list", "count_list", "rank_list",
           "positive_list", "choice_list", "paired_lead", "lead_text", "add_chib_runs", "chib_runs", "CHIB_RUNS",
           "FOLDER_RECORD", "ROOT"]

#: The record a recipe keeps in a folder of files it makes (mixtures, pairs, a corpus): see :func:`claim_folders`.
FOLDER_RECORD = ".recipe.json"


def recipe_parser(name, description, *, output=None, output_help=None, plot=False, writes=None, seed_offset=0):
    """Return an argument parser with the options every recipe takes.

    Parameters
    ----------
    name : str
        Recipe name: the program is ``recipes/<name>.py`` (``benchmarks/<name>`` for a benchmark).
    description : str
    output : str or callable, optional
        Name of the results the recipe writes with :func:`write_results` (``DIR/<output>.json``, and
        ``.png`` with ``plot``), or a function of the parsed arguments giving it; default the last part of
        ``name``. When parsing, the parser checks ``--out`` and refuses existing results without ``--overwrite``.
    output_help : str, optional
        How ``--help`` names the results of a function ``output`` (e.g. ``enhance_x_LABEL_SPLIT``).
    plot : bool
        Whether the recipe writes a plot beside the JSON.
    writes : str, optional
        What else the recipe writes, for ``--help`` (e.g. ``the mixtures in DIR/noisy``).
    seed_offset : int
        The largest number the recipe adds to ``--seed`` (seeds of further data draws): ``--seed`` must
        lie in [0, 2**32 - 1 - seed_offset].
    """
    results = Path(name).name if output is None else output
    if callable(results) and output_help is None:
        raise ValueError(f"{name}: a function output needs output_help, its name in --help")
    shown = output_help or results
    epilog = (f"Writes DIR/{shown}.json" + (f" and DIR/{shown}.png" if plot else "") + " (DIR: --out)"
              + (f"; {writes}" if writes else "") + ". What an earlier run wrote there is replaced only with "
              "--overwrite.")
    parser = _RecipeParser(prog=_prog(name), description=description, epilog=epilog, output=results)
    parser.add_argument("--quick", action="store_true", help="a reduced run (minutes, not hours)")
    parser.add_argument("--out", type=Path, default=Path("results"), metavar="DIR",
                        help="output folder (default: results)")
    parser.add_argument("--seed", type=_seed_type(seed_offset), default=0,
                        help=f"random seed, 0 to {KEY_LIMIT - 1 - seed_offset} (default: 0)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace what an earlier run of this recipe wrote (its results, its folders)")
    return parser


class _RecipeParser(argparse.ArgumentParser):
    """An argument parser that checks the outputs and records the run's provenance when parsing."""

    def __init__(self, *, output, **kwargs):
        super().__init__(**kwargs)
        self._output = output
        self._output_files = []

    def add_output_file(self, flag, *, help):
        """Add an option naming a further output file (``--json PATH``), checked when parsing as the results are
        (:func:`sepsti.core.io.check_output_path`) and written with :func:`write_json`."""
        action = self.add_argument(flag, type=Path, default=None, metavar="PATH", help=help)
        self._output_files.append(action)

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(args, namespace)
        parsed._results_name = self._output(parsed) if callable(self._output) else self._output
        self._check_out(parsed.out, parsed._results_name, parsed.overwrite)
        results = {(parsed.out / f"{parsed._results_name}{suffix}").resolve() for suffix in (".json", ".png")}
        for action in self._output_files:
            path = getattr(parsed, action.dest)
            if path is not None:
                if path.resolve() in results:
                    self.error(f"{action.option_strings[0]} {path}: the results' own file; name another")
                try:
                    check_output_path(path, overwrite=parsed.overwrite)
                except ParameterError as error:
                    self.error(f"{action.option_strings[0]} {error}")
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


#: Packages imported under another name than pip's.
IMPORT_NAMES = {"scikit-learn": "sklearn"}


def require_packages(needs, extra):
    """Refuse a run (:class:`ParameterError`, one line through :func:`run_recipe`) that needs a package which is not
    installed, before any work: each is looked up (:func:`importlib.util.find_spec`), not imported.

    Parameters
    ----------
    needs : dict
        ``{what: package}``: what the run would do (a method, a timed run) and the package it needs, as pip
        names it (imported with ``_`` for ``-``, or as :data:`IMPORT_NAMES` gives).
    extra : str
        The project's extra that installs them.
    """
    import importlib.util

    missing = {}
    for what, package in needs.items():
        if importlib.util.find_spec(IMPORT_NAMES.get(package, package.replace("-", "_"))) is None:
            missing.setdefault(package, []).append(what)
    if missing:
        names = " and ".join(f"{package} (for {', '.join(whats)})" for package, whats in missing.items())
        raise ParameterError(f"{names} not installed: pip install -e '.[{extra}]'")


def _number(text, convert, accept):
    """``convert(text)`` if it converts and ``accept`` takes it, else None."""
    try:
        value = convert(text)
    except ValueError:
        return None
    return value if accept(value) else None


def number_type(convert, accept, expected):
    """An ``argparse`` type of one number, ``convert(text)`` if ``accept`` takes it: else a usage error saying what
    was ``expected``."""
    def number(text):
        value = _number(text, convert, accept)
        if value is None:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {expected}")
        return value

    number.__doc__ = f"``argparse`` type: {expected}."
    return number


def _list_type(convert, accept, expected):
    """An ``argparse`` type of a comma-separated list of numbers, each converted and accepted."""
    def numbers(text):
        values = [_number(item, convert, accept) for item in text.split(",")]
        if None in values:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {expected} separated by commas")
        return values

    numbers.__doc__ = f"``argparse`` type: {expected} separated by commas."
    return numbers


def _positive(value):
    return math.isfinite(value) and value > 0


def _non_negative(value):
    return math.isfinite(value) and value >= 0


#: ``argparse`` types of one number (counts, lengths, durations): a bad one is a usage error.
positive_int = number_type(int, _positive, "an integer of at least 1")
non_negative_int = number_type(int, _non_negative, "an integer of at least 0")
positive_float = number_type(float, _positive, "a positive number")
non_negative_float = number_type(float, _non_negative, "a number of at least 0")

#: ``argparse`` types of comma-separated lists: integers (SNRs), counts and ranks (integers of at least 1), positive
#: finite numbers (prior rates, length scales, durations).
integer_list = _list_type(int, lambda value: True, "integers")
count_list = _list_type(int, _positive, "positive integers")
rank_list = _list_type(int, _positive, "ranks (integers of at least 1)")
positive_list = _list_type(float, _positive, "positive numbers")

#: Independent runs of Chib's method per estimate in the recipes (``--chib-runs``).
CHIB_RUNS = 4


def add_chib_runs(parser):
    """Add ``--chib-runs N`` to a recipe that estimates by Chib's method (docs/chib.md)."""
    parser.add_argument("--chib-runs", type=number_type(int, lambda value: value >= 2, "an integer of at least 2"),
                        default=CHIB_RUNS, metavar="N",
                        help=f"independent Chib runs per rank, whose spread is the standard error: one run's own "
                             f"error misses what depends on its point, by 2-3 times above the data's rank (at least "
                             f"2, default {CHIB_RUNS}; docs/chib.md)")


def chib_runs(estimator, *args, num_runs, **settings):
    """Chib's estimate from ``num_runs`` independent runs (``sepsti.core.evidence.chib.chib_replicates``).

    Returns
    -------
    dict
        ``value`` (the runs' mean), ``stderr`` (their standard deviation over √n), ``runs`` (each run's
        estimate) and ``max_weight_fraction`` (the largest share of an ordinate's mean one sample holds in any
        run: near 1, that run rests on one sample), recorded in place of the warnings that say so.
    """
    from sepsti.core.evidence.chib import chib_replicates

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Chib")
        result = chib_replicates(estimator, *args, num_replicates=num_runs, **settings)
    return {"value": result.log_marginal_likelihood, "stderr": result.stderr, "runs": result.estimates.tolist(),
            "max_weight_fraction": max(float(run.max_weight_fraction.max()) for run in result.runs)}


def choice_list(choices, *, empty=False):
    """An ``argparse`` type of a comma-separated list of some of ``choices``, each at most once (none: ``''``, with
    ``empty``)."""
    def chosen(text):
        values = [item.strip() for item in text.split(",")] if text or not empty else []
        if not set(values) <= set(choices) or len(set(values)) < len(values):
            raise argparse.ArgumentTypeError(f"{text!r}: expected some of {', '.join(choices)}, separated by commas")
        return values

    chosen.__doc__ = f"``argparse`` type: some of {', '.join(choices)}, separated by commas."
    return chosen


def checkout_folder(text):
    """``argparse`` type of ``--sepsti``: a folder holding a ``sepsti`` package (this project's checkout)."""
    path = Path(text)
    if not (path / "sepsti" / "__init__.py").is_file():
        raise argparse.ArgumentTypeError(f"{text!r}: not a checkout of sepsti (no sepsti/__init__.py there)")
    return path


def paired_lead(ours, theirs, groups):
    """:func:`sepsti.comparison.paired_difference_if_defined` as a dict (None stays None)."""
    from sepsti.comparison import paired_difference_if_defined

    lead = paired_difference_if_defined(ours, theirs, groups)
    return None if lead is None else lead._asdict()


def lead_text(cell, digits):
    """A lead as ``mean [low, high] wins/pairs``, ``mean wins/pairs`` without an interval (one replicate), or –
    where undefined."""
    if cell is None:
        return "–"
    interval = f"[{cell['low']:+.{digits}f}, {cell['high']:+.{digits}f}] " if math.isfinite(cell["low"]) else ""
    return f"{cell['mean']:+.{digits}f} {interval}{cell['wins']}/{cell['pairs']}"


#: The wideband corpus beside the checkout, the recipes' default ``--wideband``.
DEFAULT_WIDEBAND = ROOT.parent / "shared" / "data" / "wideband"


def default_corpus():
    """The NOIZEUS folder: ``$SEPSTI_NOIZEUS`` or ``../shared/data/noizeus`` beside the checkout, else None."""
    for candidate in (os.environ.get("SEPSTI_NOIZEUS"), ROOT.parent / "shared" / "data" / "noizeus"):
        if candidate and Path(candidate, "clean").is_dir():
            return Path(candidate).resolve()
    return None


def dictionary_to_extend(path, *, band_gains=True):
    """The dictionary a recipe learns a part of for: ``path`` or, if None, the shipped 8 kHz one; as
    ``(path, Dictionary, the dtype its W is stored in)``, so that it is written back as it was stored. With
    ``band_gains`` False its learned band-gain correction is left out unread (a recipe that trains it again)."""
    import numpy as np

    from sepsti.dictionary import load_dictionary, narrowband_dictionary_path

    source = path or narrowband_dictionary_path()
    dictionary = load_dictionary(source, band_gains=band_gains)
    with np.load(source) as stored:
        return source, dictionary, stored["W"].dtype


def noizeus_corpus(corpus, option="--corpus"):
    """``corpus`` (an option's value), or else :func:`default_corpus`; :class:`ParameterError` if neither."""
    corpus = corpus or default_corpus()
    if corpus is None:
        raise ParameterError(f"no NOIZEUS-style corpus: pass {option} DIR or set SEPSTI_NOIZEUS")
    return corpus


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


def write_json(path, document, *, overwrite):
    """Write ``document`` (through :func:`sepsti.core.io.json_safe`: NaN and infinities as null) as the JSON file
    ``path``, atomically; without ``overwrite`` a file there is not replaced (:class:`ParameterError`)."""
    with atomic_path(path, overwrite=overwrite) as tmp:
        tmp.write_text(json.dumps(json_safe(document), indent=2, allow_nan=False) + "\n")


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
    write_json(out_dir / f"{name}.json", {**results, "provenance": {**args._provenance, "options": options}},
               overwrite=args.overwrite)
    if figure is not None:
        import matplotlib.pyplot as plt

        with atomic_path(out_dir / f"{name}.png", overwrite=args.overwrite) as tmp:
            figure.savefig(tmp, dpi=120, bbox_inches="tight", format="png")
        plt.close(figure)
    print(f"wrote {out_dir / (name + '.json')}" + (f" and {out_dir / (name + '.png')}" if figure is not None else ""))


def claim_folders(folders, settings, *, overwrite):
    """Make folders ready for the files a run writes there, or refuse before anything is written.

    Each folder keeps a record, :data:`FOLDER_RECORD`, of the ``settings`` of the run that made its files
    and of those files, written before them (so that an interrupted run is recognised too). A folder that
    is missing or empty is taken; one whose record holds the same settings and files is taken as it is
    (the run writes the same files again); one whose record differs is refused unless ``overwrite``, which
    removes the files that record lists. A folder holding a file no record lists (one named with a leading
    dot aside), or files but no record, is refused, and so is one holding a link to a folder or a listed path that
    leads outside it: nothing the recipe did not write is ever removed or written through. A record lists plain
    relative paths of files only (none with a part named with a leading dot).

    Parameters
    ----------
    folders : dict
        Folder (Path) → the files the run writes there (paths relative to it, with ``/``).
    settings : dict
        What makes the files (compared as JSON).
    overwrite : bool

    Raises
    ------
    ParameterError
        Naming the folder, and the settings that differ.
    """
    settings = json.loads(json.dumps(json_safe(settings)))
    claims = {folder: {"settings": settings, "files": sorted(files)} for folder, files in folders.items()}
    records = {folder: _checked_record(folder, claim, overwrite) for folder, claim in claims.items()}
    for folder, claim in claims.items():  # every folder checked first: a refusal leaves them all as they were
        if records[folder] not in (None, claim):
            _remove_listed(folder, records[folder]["files"])
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / FOLDER_RECORD, claim, overwrite=True)


def _checked_record(folder, claim, overwrite):
    """The record in ``folder`` (None: no folder, or an empty one) if :func:`claim_folders` may take it."""
    if folder.exists() and not folder.is_dir():
        raise ParameterError(f"{folder}: not a folder; choose another --out")
    entries = list(folder.rglob("*"))
    links = sorted(path.relative_to(folder).as_posix() for path in entries if path.is_symlink() and path.is_dir())
    if links:
        raise ParameterError(f"{folder}: holds a link to a folder ({links[0]}); remove the link or choose another "
                             "--out")
    _check_inside(folder, claim["files"])
    present = sorted(path.relative_to(folder).as_posix() for path in entries
                     if path.is_file() and not any(part.startswith(".") for part in path.relative_to(folder).parts))
    if not (folder / FOLDER_RECORD).is_file():
        if present:
            raise ParameterError(f"{folder}: holds files of no recorded run ({len(present)}, e.g. {present[0]}; no "
                                 f"{FOLDER_RECORD}); remove them or choose another --out")
        return None
    try:
        record = json.loads((folder / FOLDER_RECORD).read_text())
        theirs, listed = dict(record["settings"]), set(record["files"])
        odd = next((path for path in listed if not _plain_file_path(path)), None)
        if odd is not None:
            raise ValueError(f"{odd!r} is not a plain relative path of a file")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ParameterError(f"{folder / FOLDER_RECORD}: not a record of a run ({error}); remove the folder or "
                             "choose another --out") from None
    _check_inside(folder, listed)
    not_files = sorted(path for path in listed if (folder / path).exists() and not (folder / path).is_file())
    if not_files:
        raise ParameterError(f"{folder / FOLDER_RECORD}: lists {not_files[0]}, which is not a file; remove the "
                             "folder or choose another --out")
    foreign = [path for path in present if path not in listed]
    if foreign:
        raise ParameterError(f"{folder}: holds files its run did not write ({len(foreign)}, e.g. {foreign[0]}); move "
                             "them or choose another --out")
    if record != claim and not overwrite:
        ours = claim["settings"]
        changed = [f"{key} {theirs.get(key)!r} there, {ours.get(key)!r} now" for key in dict.fromkeys([*theirs, *ours])
                   if theirs.get(key) != ours.get(key)]
        raise ParameterError(f"{folder}: holds the files of a run with other settings ("
                             f"{'; '.join(changed) or 'other files'}); pass --overwrite to replace them, or choose "
                             "another --out")
    return record


def _check_inside(folder, files):
    """Refuse ``files`` (relative to ``folder``) of which one leads outside ``folder`` (through a link)."""
    inside = folder.resolve()
    outside = sorted(path for path in files if not (folder / path).resolve().is_relative_to(inside))
    if outside:
        raise ParameterError(f"{folder}: {outside[0]} leads outside it (a link); remove the link or choose another "
                             "--out")


def _plain_file_path(path):
    """Whether ``path`` is a relative path with ``/`` whose parts are neither empty nor named with a leading dot."""
    return isinstance(path, str) and "\0" not in path and all(part and not part.startswith(".")
                                                               for part in path.split("/"))


def _remove_listed(folder, files):
    """Remove ``files`` (relative to ``folder``) and the folders below ``folder`` that leaves empty."""
    for relative in files:
        (folder / relative).unlink(missing_ok=True)
    for below in sorted({parent for relative in files for parent in (folder / relative).parents
                         if folder in parent.parents}, key=lambda path: len(path.parts), reverse=True):
        with contextlib.suppress(OSError):  # not empty: something else is in it
            below.rmdir()


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
