"""The recipes' ``--sepsti CHECKOUT``: a child ``python -m sepsti`` runs the checkout's modules, all of them."""

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))

from _common import checkout_package  # noqa: E402


def test_every_module_comes_from_the_checkout(tmp_path):
    """``sepsti.core`` and ``sepsti.corpora`` live in ``core/`` and ``corpora/`` (pyproject's package-dir):
    with the checkout alone on PYTHONPATH they came from the installed package instead."""
    for name in ("sepsti", "core", "corpora"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"MARKER = 'checkout {name}'\n")
    (tmp_path / "sepsti" / "__main__.py").write_text(
        "import sepsti, sepsti.core, sepsti.corpora\n"
        "print(sepsti.MARKER, '|', sepsti.core.MARKER, '|', sepsti.corpora.MARKER)\n")
    with checkout_package(tmp_path) as (env, cwd):
        result = subprocess.run([sys.executable, "-m", "sepsti"], env=env, cwd=cwd, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "checkout sepsti | checkout core | checkout corpora"
    assert not cwd.exists()  # the links are gone with the block
