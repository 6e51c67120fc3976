"""What the project imports is what its install asks for.

A package imported only because another dependency happens to pull it in
breaks the day that dependency stops doing so (as the test client's move
to httpx2 broke a fresh install). Every third-party module imported by
the package must come from a distribution its core dependencies or an
extra name; every one imported by the tests or their programs, from the
core dependencies, the ``test`` extra, or another extra (whose tests skip
where it is not installed).
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterator
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: Modules of the tests' own folder, found on their path.
TEST_MODULES = {path.stem for path in (ROOT / "tests").rglob("*.py")}


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(text).name.lower().replace("_", "-") for text in requirements}


CORE = _names(PROJECT["dependencies"])
EXTRAS = {name: _names(listed) for name, listed in PROJECT["optional-dependencies"].items()}


def _imported(folder: Path) -> Iterator[tuple[str, str]]:
    """Each top-level module imported under ``folder``, with the file that imports it."""
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield alias.name.partition(".")[0], path.name
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                yield node.module.partition(".")[0], path.name


def _third_party(folder: Path) -> dict[str, str]:
    """Third-party modules imported under ``folder`` that are installed here, by module."""
    found = {}
    for module, where in _imported(folder):
        if module in sys.stdlib_module_names or module in ("researchstore", "__future__"):
            continue
        if module in TEST_MODULES:
            continue
        found.setdefault(module, where)
    return found


#: Each installed top-level module's distributions (reading them all is slow: once).
INSTALLED = packages_distributions()


def _distributions(module: str) -> set[str]:
    return {name.lower().replace("_", "-") for name in INSTALLED.get(module, [])}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("folder", "allowed"),
    [
        ("researchstore", CORE.union(*EXTRAS.values())),
        ("tests", CORE.union(*EXTRAS.values())),
    ],
)
def test_every_imported_package_is_named_by_the_install(folder: str, allowed: set[str]) -> None:
    unnamed = []
    for module, where in sorted(_third_party(ROOT / folder).items()):
        distributions = _distributions(module)
        if not distributions:
            continue  # not installed here: an extra's, imported where it is there
        if not distributions & allowed:
            unnamed.append(f"{module} ({where}; from {', '.join(sorted(distributions))})")
    assert not unnamed, "imported, but no dependency or extra names it: " + "; ".join(unnamed)


def test_the_tests_need_nothing_beyond_the_core_and_the_test_extra() -> None:
    """Modules of another extra are imported by the tests only where it is installed:
    each such import sits in a test that skips without it (``importorskip``, or a
    marker). The README's test command installs only ``.[test]``."""
    core_and_test = CORE | EXTRAS["test"]
    others = set().union(*(names for extra, names in EXTRAS.items() if extra != "test"))
    for module, where in sorted(_third_party(ROOT / "tests").items()):
        distributions = _distributions(module)
        if distributions and not distributions & core_and_test:
            assert distributions & others, (module, where)
