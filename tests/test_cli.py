"""The ``researchstore`` command line, through click's CliRunner.

Subprocesses only where the process matters: a writer holding the store, and
what starting the command line imports.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from helpers import run_summaries

import researchstore.cli
from researchstore import TOOLS, Store
from researchstore.cli import main
from researchstore.cli.common import print_embed_summary
from researchstore.errors import (
    EXIT_CODES,
    InvalidInput,
    NotEntitled,
    ResearchStoreError,
    StoreLocked,
    UpstreamUnavailable,
)
from researchstore.meaning.embed import EmbedSummary
from researchstore.principal import NOBODY, acting_as

NOTES = "\n\n".join(
    f"Varroa mite counts rose after brood cycle {n}. Foragers carried lime pollen home. "
    f"The colony was weighed on the hive scale every morning, entry {n}."
    for n in range(30)
)


def commands(
    group: click.Group, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    context = click.Context(group)
    for name in sorted(group.list_commands(context)):
        command = group.get_command(context, name)
        assert command is not None, name
        yield (*prefix, name), command
        if isinstance(command, click.Group):
            yield from commands(command, (*prefix, name))


ALL_COMMANDS = list(commands(main))


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def envelope_of(result: Result) -> dict[str, Any]:
    return json.loads(result.stdout)


@dataclass
class Ingested:
    db: str
    chunk_id: str
    other_chunk_id: str
    document_id: str
    report_id: int


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Ingested:
    base = tmp_path_factory.mktemp("cli")
    source = base / "source"
    (source / "field" / "bees").mkdir(parents=True)
    (source / "field" / "bees" / "report.json").write_text(
        json.dumps(
            {"title": "Bee colony survey", "date": "2026-03-14", "tags": {"audience": "students"}}
        )
    )
    (source / "field" / "bees" / "notes.txt").write_text(NOTES)
    (source / "memo.txt").write_text("The lecture hall moves to building C.")
    db = str(base / "cli.db")
    result = invoke("ingest", db, str(source), "--name", "field", "--chunk-tokens", "32", "--json")
    assert result.exit_code == 0, result.output
    [summary] = run_summaries(result.stdout)
    assert (summary["new"], summary["failed"]) == (2, 0)
    result = invoke("search", db, "varroa", "--json", "--limit", "50")
    hits = envelope_of(result)["result"]["hits"]
    assert len(hits) >= 3
    document_id = hits[0]["document_id"]
    result = invoke("doc", db, document_id)
    skeleton = envelope_of(result)["result"]["document"]["chunks"]
    return Ingested(
        db, skeleton[2]["chunk_id"], skeleton[3]["chunk_id"], document_id, hits[0]["report_id"]
    )


# -- help -------------------------------------------------------------------------


def test_there_are_commands() -> None:
    names = {path[0] for path, _ in ALL_COMMANDS}
    assert {"ingest", "search", "chunk", "doc", "call", "parse", "tools"} <= names


@pytest.mark.parametrize(
    ("path", "command"), ALL_COMMANDS, ids=[" ".join(path) for path, _ in ALL_COMMANDS]
)
def test_every_command_has_help_text(path: tuple[str, ...], command: click.Command) -> None:
    assert (command.help or command.short_help or "").strip(), path
    result = invoke(*path, "--help")
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.stdout
    first_line = (command.help or command.short_help or "").strip().splitlines()[0]
    assert first_line[:30] in " ".join(result.stdout.split())


def test_call_says_what_its_arguments_are_and_how_dash_reads_them() -> None:
    text = " ".join(invoke("call", "--help").stdout.split())
    assert "ARGUMENTS is one JSON object of the tool's arguments" in text
    assert "Give - instead to read that object from standard input" in text
    assert "ARGUMENTS - reads" not in text
    assert "| researchstore call research.db research_chunk_search -" in text


@pytest.mark.parametrize(
    ("path", "command"), ALL_COMMANDS, ids=[" ".join(path) for path, _ in ALL_COMMANDS]
)
def test_every_option_has_help_text(path: tuple[str, ...], command: click.Command) -> None:
    undocumented = [
        param.opts[0]
        for param in command.params
        if isinstance(param, click.Option) and not (param.help or "").strip()
    ]
    assert not undocumented, path


def test_the_group_help_lists_every_command() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for path, _ in ALL_COMMANDS:
        assert path[0] in result.stdout


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout.strip()


@pytest.mark.parametrize("module", ["researchstore", "researchstore.cli"])
def test_python_dash_m_runs_the_command_line(module: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: researchstore ")


def test_the_cli_modules_import_only_common() -> None:
    """No cycle: topic modules import ``common``; nothing imports the package back."""
    package = Path(researchstore.cli.__file__).parent
    for module in sorted(package.glob("*.py")):
        if module.name in ("__init__.py", "__main__.py"):
            continue
        imported: set[str] = set()
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.update(f"{node.module}.{alias.name}" for alias in node.names)
        from_cli = {name for name in imported if name.startswith("researchstore.cli")}
        assert all(name.startswith("researchstore.cli.common.") for name in from_cli), (
            module.name,
            from_cli,
        )


# -- ingest -----------------------------------------------------------------------


@pytest.mark.slow
def test_ingest_prints_a_summary_and_again_is_unchanged(ingested: Ingested, tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "one.txt").write_text("Hawkmoths visited the honeysuckle.")
    db = str(tmp_path / "new.db")
    result = invoke("ingest", db, str(source))
    assert result.exit_code == 0, result.output
    assert "1 new" in result.stdout and "0 failed" in result.stdout
    result = invoke("ingest", db, str(source), "--json")
    assert result.exit_code == 0
    [summary] = run_summaries(result.stdout)
    assert summary["unchanged"] == 1


def test_ingest_refuses_a_missing_source(tmp_path: Path) -> None:
    result = invoke("ingest", str(tmp_path / "r.db"), str(tmp_path / "nowhere"))
    assert result.exit_code == 2
    assert "nowhere" in result.output


HOLDER = textwrap.dedent(
    """
    import sys
    from researchstore import Store

    with Store(sys.argv[1], progress=False) as store, store.writing():
        print("holding", flush=True)
        sys.stdin.readline()
    """
)


@pytest.mark.slow
def test_ingest_while_another_process_writes_exits_75(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "one.txt").write_text("Hawkmoths visited the honeysuckle.")
    db = str(tmp_path / "locked.db")
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, db], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as holder:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        for output in ([], ["--json"]):
            result = invoke("ingest", db, str(source), *output)
            assert result.exit_code == StoreLocked.exit_code == 75, result.output
            assert result.stdout == ""
            assert result.stderr.startswith(
                f"Error: the store is being written by process {holder.pid} "
            )
        holder.communicate(timeout=30)  # its stdin closes: it lets go
    assert holder.returncode == 0
    assert invoke("ingest", db, str(source)).exit_code == 0


# -- search -----------------------------------------------------------------------


@pytest.mark.slow
def test_search_lists_hits(ingested: Ingested) -> None:
    result = invoke("search", ingested.db, "varroa")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("1. ")
    assert "Bee colony survey (2026-03-14)" in result.stdout
    assert "[Varroa]" in result.stdout or "[varroa]" in result.stdout
    assert "chunk " in result.stdout


def test_search_json_is_the_tool_envelope(ingested: Ingested) -> None:
    result = invoke(
        "search",
        ingested.db,
        "varroa",
        "--json",
        "--limit",
        "3",
        "--tag",
        "audience=students",
        "--date-from",
        "2026-01-01",
        "--kind",
        "text",
        "--source",
        "field",
        "--report-id",
        str(ingested.report_id),
    )
    assert result.exit_code == 0, result.output
    hits = envelope_of(result)["result"]["hits"]
    assert len(hits) == 3 and {hit["report_id"] for hit in hits} == {ingested.report_id}


def test_search_with_next(ingested: Ingested) -> None:
    top = envelope_of(invoke("search", ingested.db, "varroa", "--json", "--limit", "1"))
    hit = top["result"]["hits"][0]
    document = envelope_of(invoke("doc", ingested.db, hit["document_id"]))["result"]["document"]
    following = min(2, len(document["chunks"]) - 1 - hit["position"])
    result = invoke("search", ingested.db, "varroa", "--limit", "1", "--next", "2")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("next: chunk") == following


def test_search_without_hits(ingested: Ingested) -> None:
    result = invoke("search", ingested.db, "zyzzyva")
    assert result.exit_code == 0 and "no hits" in result.stdout


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["varroa", "--limit", "0"], "limit"),
        (["varroa", "--limit", "51"], "limit"),
        ([""], "query"),
        (["varroa", "--date-from", "2026-13-01"], "date_from"),
        (["varroa", "--date-from", "2026-02-01", "--date-to", "2026-01-01"], "date_from"),
        (["varroa", "--report-id", "0"], "report_id"),
    ],
)
def test_search_invalid_arguments(ingested: Ingested, args: list[str], field: str) -> None:
    result = invoke("search", ingested.db, *args, "--json")
    assert result.exit_code == 2, result.output
    error = envelope_of(result)["error"]
    assert (error["code"], error["field"]) == ("invalid_input", field)
    # Without --json the envelope is not printed: only the message, on stderr.
    result = invoke("search", ingested.db, *args)
    assert result.exit_code == 2
    assert (result.stdout, result.stderr) == ("", f"Error: {error['message']}\n")


@pytest.mark.parametrize(
    "args", [["--tag", "no-equals-sign"], ["--kind", "pdf"], ["--limit", "many"]]
)
def test_search_usage_errors(ingested: Ingested, args: list[str]) -> None:
    result = invoke("search", ingested.db, "varroa", *args)
    assert result.exit_code == 2
    assert "Error" in result.output


# -- chunk and doc ----------------------------------------------------------------


def test_chunk_shows_one_chunk(ingested: Ingested) -> None:
    result = invoke("chunk", ingested.db, ingested.chunk_id)
    assert result.exit_code == 0, result.output
    chunk = envelope_of(result)["result"]["chunk"]
    assert set(chunk) == {"report_id", "title", "date", "score", "text", "chunk_id"}
    assert chunk["chunk_id"] == ingested.chunk_id


def test_chunk_walks_and_parents(ingested: Ingested) -> None:
    result = invoke("chunk", ingested.db, ingested.chunk_id, "--next", "2")
    assert result.exit_code == 0
    assert [c["position"] for c in envelope_of(result)["result"]["chunks"]] == [3, 4]
    result = invoke("chunk", ingested.db, ingested.chunk_id, "--prev", "5")
    assert [c["position"] for c in envelope_of(result)["result"]["chunks"]] == [0, 1]
    result = invoke("chunk", ingested.db, ingested.chunk_id, "--parents")
    kinds = [node["kind"] for node in envelope_of(result)["result"]["parents"]]
    assert kinds == ["document", "report", "folder", "source_version"]


def test_chunk_miss_is_a_result(ingested: Ingested) -> None:
    result = invoke("chunk", ingested.db, "no-such-chunk")
    assert result.exit_code == 0
    assert envelope_of(result) == {"result": {"chunk": None}}


@pytest.mark.parametrize("args", [["--next", "0"], ["--prev", "101"], ["--next", "-1"]])
def test_chunk_invalid_counts(ingested: Ingested, args: list[str]) -> None:
    result = invoke("chunk", ingested.db, ingested.chunk_id, *args)
    assert result.exit_code == 2, result.output
    error = envelope_of(result)["error"]
    assert (error["code"], error["field"]) == ("invalid_input", "count")


def test_doc_shows_the_skeleton_and_windows(ingested: Ingested) -> None:
    result = invoke("doc", ingested.db, ingested.document_id)
    assert result.exit_code == 0
    document = envelope_of(result)["result"]["document"]
    assert document["chunks"] and all("text" not in chunk for chunk in document["chunks"])
    result = invoke("doc", ingested.db, ingested.document_id, "--from", "1", "--limit", "2")
    assert result.exit_code == 0
    window = envelope_of(result)["result"]
    assert [c["position"] for c in window["chunks"]] == [1, 2]
    assert window["total_chunks"] == len(document["chunks"])


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--from", "0", "--limit", "0"], "limit"),
        (["--from", "0", "--limit", "101"], "limit"),
        (["--from", "-1"], "from"),
    ],
)
def test_doc_invalid_window(ingested: Ingested, args: list[str], field: str) -> None:
    result = invoke("doc", ingested.db, ingested.document_id, *args)
    assert result.exit_code == 2, result.output
    error = envelope_of(result)["error"]
    assert (error["code"], error["field"]) == ("invalid_input", field)


def test_doc_miss_is_a_result(ingested: Ingested) -> None:
    result = invoke("doc", ingested.db, "no-such-document")
    assert result.exit_code == 0
    assert envelope_of(result) == {"result": {"document": None}}


# -- call: every tool -------------------------------------------------------------


def valid_arguments(tool_name: str, ingested: Ingested) -> dict[str, Any] | None:
    arguments: dict[str, Any] = {}
    for param in TOOLS[tool_name].params:
        if not param.required:
            continue
        if param.name == "query":
            arguments["query"] = "varroa"
        elif param.name == "chunk_id":
            arguments["chunk_id"] = ingested.chunk_id
        elif param.name == "id":
            arguments["id"] = ingested.document_id if "document" in tool_name else ingested.chunk_id
        elif param.name == "ids":
            arguments["ids"] = [ingested.other_chunk_id, ingested.chunk_id]
        elif param.name == "report_id":
            arguments["report_id"] = ingested.report_id
        elif param.name == "url":
            arguments["url"] = "https://research.example/notes"
        elif param.name == "kind":
            arguments["kind"] = "url_text"
        elif param.name in ("workspace_id", "mutation_id"):
            arguments[param.name] = str(uuid.uuid4())
        elif param.name == "path":  # ingest_file: a file of the source, filed under another
            arguments["path"] = str(Path(ingested.db).parent / "source" / "memo.txt")
        else:
            return None
    return arguments


@pytest.mark.parametrize("tool_name", list(TOOLS))
def test_call_runs_every_tool(
    ingested: Ingested, tool_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No network here: evidence retrieval must answer "unavailable", offline.
    monkeypatch.setenv("RESEARCHSTORE_EGRESS", "off")
    arguments = valid_arguments(tool_name, ingested)
    if arguments is None:
        pytest.skip(f"no valid arguments known for {tool_name}'s required parameters")
    result = invoke("call", ingested.db, tool_name, json.dumps(arguments))
    assert result.exit_code == 0, result.output
    envelope = envelope_of(result)
    assert set(envelope) == {"result"}, envelope
    assert envelope["result"] is not None
    values = [value for value in envelope["result"].values() if value not in (None, [], False)]
    assert values, f"{tool_name} found nothing for arguments that exist: {envelope}"


@pytest.mark.parametrize("tool_name", list(TOOLS))
def test_call_with_invalid_arguments_exits_2(ingested: Ingested, tool_name: str) -> None:
    result = invoke("call", ingested.db, tool_name, json.dumps({"bogus": 1}))
    assert result.exit_code == 2, result.output
    error = envelope_of(result)["error"]
    assert (error["code"], error["field"]) == ("invalid_input", "bogus")
    if any(param.required for param in TOOLS[tool_name].params):
        result = invoke("call", ingested.db, tool_name)
        assert result.exit_code == 2
        assert envelope_of(result)["error"]["code"] == "invalid_input"


@pytest.mark.parametrize("arguments", ["not json", "{", "{'id': 'x'}", ""])
def test_call_with_non_json_arguments(ingested: Ingested, arguments: str) -> None:
    result = invoke("call", ingested.db, "get_chunk_next", arguments)
    assert result.exit_code == 2
    error = envelope_of(result)["error"]
    assert (error["code"], error["field"]) == ("invalid_input", "arguments")


@pytest.mark.parametrize("arguments", ["[]", '"x"', "5", "null"])
def test_call_with_non_object_json(ingested: Ingested, arguments: str) -> None:
    result = invoke("call", ingested.db, "get_chunk_next", arguments)
    assert result.exit_code == 2
    assert envelope_of(result)["error"]["code"] == "invalid_input"


def test_call_an_unknown_tool(ingested: Ingested) -> None:
    result = invoke("call", ingested.db, "no_such_tool", "{}")
    assert result.exit_code == 2
    assert envelope_of(result)["error"]["code"] == "invalid_input"
    assert result.stderr.startswith("Error: unknown tool 'no_such_tool'; known tools: ")


# -- exit codes -------------------------------------------------------------------


def test_each_error_code_has_the_exit_code_of_its_class() -> None:
    assert EXIT_CODES == {
        "internal": 1,
        "invalid_input": 2,
        "not_entitled": 3,
        "upstream_unavailable": 4,
    }
    for error in (ResearchStoreError, InvalidInput, NotEntitled, UpstreamUnavailable):
        assert EXIT_CODES[error.code] == error.exit_code


@pytest.mark.parametrize(
    ("code", "exit_code"), [*EXIT_CODES.items(), ("a_code_from_a_newer_server", 1)]
)
def test_call_leaves_an_error_envelope_with_its_codes_exit_code(
    ingested: Ingested, monkeypatch: pytest.MonkeyPatch, code: str, exit_code: int
) -> None:
    envelope = {"error": {"code": code, "message": f"refused with {code}"}}
    monkeypatch.setattr(Store, "call", lambda store, name, arguments=None: envelope)
    result = invoke("call", ingested.db, "research_get_chunk", '{"chunk_id": "x"}')
    assert result.exit_code == exit_code
    assert envelope_of(result) == envelope  # the envelope stays on stdout
    assert result.stderr == f"Error: refused with {code}\n"


def test_call_without_the_scope_exits_3(ingested: Ingested) -> None:
    arguments = valid_arguments("research_evidence_retrieve", ingested)
    with acting_as(NOBODY):
        result = invoke("call", ingested.db, "research_evidence_retrieve", json.dumps(arguments))
    assert result.exit_code == NotEntitled.exit_code == 3, result.output
    assert envelope_of(result)["error"]["code"] == "not_entitled"
    assert result.stderr.startswith("Error: this API key lacks the scope ")


def test_serve_offers_the_servers_transports(ingested: Ingested) -> None:
    result = invoke("serve", ingested.db, "--transport", "carrier-pigeon")
    assert result.exit_code == 2
    assert "'stdio'" in result.stderr and "'http'" in result.stderr


# -- what starting the command line imports ---------------------------------------

#: Only ``serve`` needs the MCP SDK and only evidence retrieval needs httpx.
NOT_AT_STARTUP = {"mcp", "starlette", "pydantic", "anyio", "uvicorn", "httpx"}

IMPORTS_OF = textwrap.dedent(
    """
    import json, sys, types
    if sys.argv[1] == "without-package-init":
        # The package module without running its __init__: what the CLI
        # package itself imports.
        package = types.ModuleType("researchstore")
        package.__path__ = [sys.argv[2]]
        sys.modules["researchstore"] = package
    from researchstore.cli import main
    try:
        main(sys.argv[3:], prog_name="researchstore")
    finally:
        print(json.dumps(sorted({name.partition(".")[0] for name in sys.modules})))
    """
)


def startup_imports(ingested: Ingested, command: str, *, package_init: bool) -> set[str]:
    args = {
        "help": ["--help"],
        "call": [
            "call",
            ingested.db,
            "research_get_chunk",
            json.dumps({"chunk_id": ingested.chunk_id}),
        ],
        "search": ["call", ingested.db, "research_chunk_search", json.dumps({"query": "varroa"})],
    }[command]
    package = str(Path(researchstore.cli.__file__).parent.parent)
    mode = "with-package-init" if package_init else "without-package-init"
    result = subprocess.run(
        [sys.executable, "-c", IMPORTS_OF, mode, package, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.splitlines()[-1]))


@pytest.mark.parametrize("command", ["help", "call"])
def test_the_cli_package_imports_no_server_or_http_stack(ingested: Ingested, command: str) -> None:
    loaded = startup_imports(ingested, command, package_init=False)
    assert "researchstore" in loaded and "click" in loaded
    assert not loaded & (NOT_AT_STARTUP | {"rich"})


@pytest.mark.parametrize("command", ["help", "call"])
def test_starting_the_cli_imports_no_server_or_http_stack(ingested: Ingested, command: str) -> None:
    assert not startup_imports(ingested, command, package_init=True) & NOT_AT_STARTUP


def test_tools_lists_every_tool(ingested: Ingested) -> None:
    result = invoke("tools")
    assert result.exit_code == 0
    listed = json.loads(result.stdout)
    assert [tool["name"] for tool in listed] == list(TOOLS)
    for tool in listed:
        assert tool["description"] and tool["input_schema"]["type"] == "object"


# -- maintenance commands ---------------------------------------------------------


def test_check_and_rebuild_index(ingested: Ingested) -> None:
    result = invoke("check", ingested.db)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["integrity"] == "ok" and report["indexed"] == report["chunks_ok"] > 0
    result = invoke("rebuild-index", ingested.db)
    assert result.exit_code == 0
    assert f"indexed {report['chunks_ok']} chunks" in result.stdout


# -- a missing store --------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["search", "{db}", "varroa"],
        ["chunk", "{db}", "x"],
        ["doc", "{db}", "x"],
        ["call", "{db}", "research_get_chunk", '{"chunk_id": "x"}'],
        ["rebuild-index", "{db}"],
        ["check", "{db}"],
    ],
    ids=lambda args: args[0],
)
def test_a_missing_store_is_a_clear_error(tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "missing" / "nothing.db"
    result = invoke(*[arg.replace("{db}", str(db)) for arg in args])
    assert result.exit_code == 2  # invalid_input: STORE names no store
    assert result.stderr.startswith(f"Error: no store at {db} ")
    assert "Traceback" not in result.output
    assert not db.exists() and not db.parent.exists()


@pytest.mark.parametrize("kind", ["not-a-database", "a-directory"])
@pytest.mark.parametrize("command", ["search", "call", "chunk"])
def test_a_store_path_that_is_not_a_store_is_a_clear_error(
    tmp_path: Path, kind: str, command: str
) -> None:
    db = tmp_path / "store.db"
    if kind == "a-directory":
        db.mkdir()
    else:
        db.write_text("just some notes, not SQLite\n" * 100)
    args = {
        "search": ["varroa"],
        "call": ["research_get_chunk", '{"chunk_id": "x"}'],
        "chunk": ["x"],
    }[command]
    result = invoke(command, str(db), *args)
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert str(db) in result.output


def test_call_reads_arguments_from_standard_input(ingested: Ingested) -> None:
    arguments = json.dumps({"chunk_id": ingested.chunk_id})
    result = CliRunner().invoke(
        main, ["call", ingested.db, "research_get_chunk", "-"], input=arguments
    )
    assert result.exit_code == 0, result.output
    assert envelope_of(result)["result"]["chunk"]["chunk_id"] == ingested.chunk_id


@pytest.mark.slow
def test_a_one_shot_lookup_leaves_the_word_index_unloaded_and_a_search_loads_it(
    ingested: Ingested,
) -> None:
    assert "tantivy" not in startup_imports(ingested, "call", package_init=True)
    assert "tantivy" in startup_imports(ingested, "search", package_init=True)


def test_a_store_opened_without_its_indexes_opens_them_for_a_search(ingested: Ingested) -> None:
    from researchstore.library import Library

    with Library(ingested.db, progress=False, open_indexes=False) as store:
        assert not store.sync.opened
        assert store.get_chunk(ingested.chunk_id) is not None
        assert not store.sync.opened
        assert store.search("varroa")
        assert store.sync.opened
        assert store.check()["consistent"]


def test_the_embedding_summary_is_stamped_as_every_log_line_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A cron log read line by line: the embedding run's lines carry the time
    # as the ingest's own lines do.
    summary = EmbedSummary(
        model="a-model",
        embedded=3,
        failed=1,
        seconds=0.5,
        failures=[{"chunk_id": "c", "reason": "r"}],
    )
    print_embed_summary(summary, as_json=False)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    for line in lines:
        assert re.match(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z ", line), line
    assert "embedded 3 chunks with a-model" in lines[0]
    assert lines[1].endswith("embed_failed c: r")
