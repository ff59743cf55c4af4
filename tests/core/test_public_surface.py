"""The packages whose names are imported at first use (`core.lazy_exports`): each name
of ``__all__`` is the object its module defines, the type checkers' imports say the same
as the run-time table, and ``import core`` alone imports none of core's heavy modules."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAZY_PACKAGES = ("core", "core.formats", "core.search_index")


def type_checking_imports(package: str) -> dict[str, str]:
    """name -> module, from the package's ``if TYPE_CHECKING:`` block."""
    source = REPO / package.replace(".", "/") / "__init__.py"
    tree = ast.parse(source.read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module is not None
                found.update({alias.name: statement.module for alias in statement.names})
    return found


def run_fresh(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_every_public_name_is_its_modules_object(name: str) -> None:
    package = importlib.import_module(name)
    table = {n: module for module, names in package.MODULES.items() for n in names}
    assert type_checking_imports(name) == table
    assert sorted(package.__all__) == sorted(table)
    for public, module in table.items():
        assert getattr(package, public) is getattr(importlib.import_module(module), public)
    assert set(package.__all__) <= set(dir(package))
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        _ = package.no_such_name


def test_import_core_imports_nothing_until_a_name_is_used() -> None:
    heavy = ("core.manager", "core.history", "core.discovery", "sqlite3", "core.formats.claude")
    out = run_fresh(
        "import sys, core\n"
        f"print(*[m in sys.modules for m in {heavy!r}])\n"
        "from core import SessionManager, paths\n"
        "print(SessionManager.__module__, paths.__name__, 'core.manager' in sys.modules)\n"
    ).splitlines()
    assert out == [" ".join(["False"] * len(heavy)), "core.manager core.paths True"]
