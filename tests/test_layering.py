"""The import rules the README states for ``core`` and ``corpora``, read from the source of every module.

Every import statement counts, those inside functions (lazy ones) too: a lazy import from a higher layer is
still an arrow up.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The README's order inside core, lowest first: a part imports only from parts of a lower rank (samplers and
#: factorization, of one rank, from neither). Core's top-level modules (errors, random, blas, ...) lie below them all.
CORE_RANKS = {"sparse_tensor": 0, "models": 1, "samplers": 2, "factorization": 2, "parallel": 3, "evidence": 4}


def imports(path):
    """The ``sepsti`` modules and ``mpi4py`` that ``path`` imports, as dotted names."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name.split(".")[0] in ("sepsti", "mpi4py")}


def modules(package):
    return sorted((ROOT / package).rglob("*.py"))


def layer(path):
    """The part of core a module of core belongs to: its subpackage, or its own name at the top."""
    part = path.relative_to(ROOT / "core").parts[0]
    return part.removesuffix(".py")


def test_imports_reads_every_kind_of_import(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import sepsti.core.models\nfrom sepsti.core.evidence.sti import x\nimport numpy\n"
                      "def f():\n    from sepsti.corpora import synth\n    import mpi4py.MPI\n")
    assert imports(source) == {"sepsti.core.models", "sepsti.core.evidence.sti.x", "sepsti.corpora.synth",
                               "mpi4py.MPI"}


@pytest.mark.parametrize("package, allowed", [("core", ("sepsti.core",)),
                                              ("corpora", ("sepsti.core", "sepsti.corpora"))])
def test_core_and_corpora_never_import_the_application(package, allowed):
    outside = {f"{path.relative_to(ROOT)}: {name}" for path in modules(package) for name in imports(path)
               if name.startswith("sepsti") and not name.startswith(allowed)}
    assert not outside


def test_core_imports_go_one_way():
    """sparse_tensor ← models ← samplers, factorization; samplers ← parallel ← evidence; none up or across."""
    upward = []
    for path in modules("core"):
        own = CORE_RANKS.get(layer(path), -1)
        for name in imports(path):
            parts = name.split(".")
            if parts[:2] == ["sepsti", "core"] and len(parts) > 2 and parts[2] in CORE_RANKS:
                if parts[2] != layer(path) and CORE_RANKS[parts[2]] >= own:
                    upward.append(f"{path.relative_to(ROOT)}: {name}")
    assert not upward


def test_mpi4py_is_imported_in_one_module():
    importers = {str(path.relative_to(ROOT)) for package in ("core", "corpora", "sepsti") for path in modules(package)
                 if any(name.startswith("mpi4py") for name in imports(path))}
    assert importers == {"core/parallel/mpi.py"}
