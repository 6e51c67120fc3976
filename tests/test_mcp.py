"""The MCP server end to end: real subprocesses, the SDK's own client, no mocks.

The store is built here from a small source this file writes itself; servers
run as ``researchstore serve`` subprocesses over stdio and over HTTP on a free
loopback port, and every result is validated against the tool's contract.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import click
import httpx
import jsonschema
import pytest
from click.testing import CliRunner
from helpers import (
    CLI,
    FORMATS,
    OTHER_WORKSPACE,
    SEED_FORMATS,
    WORKSPACE,
    load_schema,
    mcp_http_server,
    mcp_http_session,
    session_of,
)
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from researchstore import NotEntitled, Store
from researchstore.catalogue import TOOLS
from researchstore.cli import main
from researchstore.contracts import BARE_RESULTS, ERROR, has_output_schema, output_schema
from researchstore.principal import LOCAL_USER, Principal
from researchstore.serving.auth import authenticate, create_key, revoke_key

SENTENCES = [
    "Foragers returned to the hive at dusk carrying pollen from the lime trees.",
    "Varroa mite counts rose sharply after the second brood cycle in June.",
    "The colony was treated with oxalic acid once the brood had capped.",
    "Dissolved oxygen in the river fell below five milligrams per litre in August.",
    "Nitrate runoff from the fields peaked after the first autumn storm.",
]


def paragraphs(count: int, *, seed: int = 0) -> str:
    return "\n\n".join(
        " ".join(
            f"{SENTENCES[(number + seed + k) % len(SENTENCES)]} Note {number}.{k}."
            for k in range(8)
        )
        for number in range(count)
    )


@dataclass
class Sample:
    """A built store, its keys and ids to call the tools with."""

    db: Path
    chunk_id: str
    document_id: str
    report_id: int
    keys: dict[str, str] = field(default_factory=dict)


def build_store(folder: Path) -> Sample:
    """Two report folders and a single-file report, ingested; keys of each kind."""
    source = folder / "source"
    for key, title, date, tags, seed in (
        (
            "field/bees",
            "Bee colony survey",
            "2026-03-14",
            {"audience": "students", "season": "spring"},
            0,
        ),
        (
            "field/river",
            "River water quality",
            "2026-09-02",
            {"audience": "public", "season": "autumn"},
            3,
        ),
    ):
        report = source / key
        report.mkdir(parents=True)
        (report / "report.json").write_text(
            json.dumps({"title": title, "date": date, "tags": tags})
        )
        (report / "notes.txt").write_text(paragraphs(12, seed=seed))
    (source / "memo.txt").write_text("Memo\n\nThe lecture hall moves to building C.\n")
    db = folder / "research.db"
    with Store(db, progress=False) as store:
        store.ingest(source, name="field")
        document_rowid, document_id, report_id = store._conn.execute(
            "SELECT d.id, d.document_id, d.report_id FROM documents d "
            "ORDER BY d.chunk_count DESC LIMIT 1"
        ).fetchone()
        chunk_id = store._conn.execute(
            "SELECT chunk_id FROM chunks WHERE document_rowid = ? AND position = 1",
            (document_rowid,),
        ).fetchone()[0]
        keys = {
            "research": create_key(
                store, scopes=["agent:research"], workspaces=[WORKSPACE], label="research"
            ),
            "reader": create_key(store, label="reader"),
            "revoked": create_key(store, scopes=["agent:research"], workspaces=["*"]),
        }
        assert revoke_key(store, keys["revoked"])
    return Sample(db, chunk_id, document_id, report_id, keys)


def calls(sample: Sample) -> dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """Per tool: arguments that must succeed, and arguments that must be refused."""
    chunk, document = sample.chunk_id, sample.document_id
    return {
        "research_chunk_search": (
            [
                {"query": "varroa mite"},
                {
                    "query": "oxygen",
                    "limit": 3,
                    "tags": {"audience": ["public", "students"]},
                    "date_from": "2026-01-01",
                    "date_to": "2026-12-31",
                    "kind": "text",
                },
                {"query": '"unbalanced AND (quote'},
                {"query": "nothing-matches-this"},
            ],
            [
                {"query": ""},
                {"query": "x", "limit": 51},
                {"query": "x", "limit": 0},
                {"query": "x", "date_from": "2026-13-01"},
                {"query": "x", "kind": "pdf"},
                {"limit": 5},
            ],
        ),
        "research_get_chunk": (
            [{"chunk_id": chunk}, {"chunk_id": "no-such-chunk"}],
            [{}, {"chunk_id": ""}, {"chunk_id": 7}],
        ),
        "research_get_report": (
            [{"report_id": sample.report_id}, {"report_id": 999_999}],
            [{"report_id": 0}, {"report_id": "1"}],
        ),
        "get_chunks": (
            [{"ids": [chunk]}, {"ids": [chunk, "missing", chunk]}],
            [{"ids": []}, {"ids": [chunk] * 21}, {"ids": [""]}, {"ids": chunk}],
        ),
        "get_chunk_next": (
            [{"id": chunk}, {"id": chunk, "count": 100}, {"id": "missing", "count": 1}],
            [{"id": chunk, "count": 0}, {"id": chunk, "count": 101}, {"count": 2}],
        ),
        "get_chunk_prev": (
            [{"id": chunk}, {"id": chunk, "count": 1}],
            [{"id": chunk, "count": 0}, {"id": chunk, "count": 101}],
        ),
        "get_chunk_neighbors": (
            [{"id": chunk}, {"id": chunk, "count": 100}, {"id": "missing"}],
            [{"id": chunk, "count": 0}, {"id": chunk, "count": 101}],
        ),
        "get_chunk_parents": ([{"id": chunk}, {"id": "missing"}], [{"id": ""}, {}]),
        "get_document": (
            [{"id": document}, {"id": "missing"}],
            [{"id": document, "extra": True}, {"id": ""}],
        ),
        "get_document_chunks": (
            [
                {"id": document},
                {"id": document, "from": 2, "limit": 3},
                {"id": document, "from": 10_000},
                {"id": "missing"},
            ],
            [
                {"id": document, "limit": 0},
                {"id": document, "limit": 101},
                {"id": document, "from": -1},
            ],
        ),
        "research_resolve_chunk": (
            [{"chunk_id": chunk}, {"chunk_id": "never-seen"}],
            [{}, {"chunk_id": ""}, {"chunk_id": 7}],
        ),
        "research_evidence_retrieve": (
            [
                {
                    "url": "https://example.com/research-notes",
                    "kind": "url_text",
                    "workspace_id": WORKSPACE,
                    "mutation_id": str(uuid.uuid4()),
                }
            ],
            [
                {
                    "url": "https://example.com/",
                    "kind": "pdf",
                    "workspace_id": WORKSPACE,
                    "mutation_id": str(uuid.uuid4()),
                },
                {"url": "https://example.com/", "kind": "url_text"},
            ],
        ),
    }


# -- servers and sessions ------------------------------------------------------


@asynccontextmanager
async def stdio_session(
    db: Path,
    *,
    profile: str = "core",
    env: dict[str, str] | None = None,
    errlog: Path | None = None,
) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session with ``researchstore serve`` over stdio."""
    params = StdioServerParameters(
        command=CLI[0],
        args=[*CLI[1:], "serve", str(db), "--profile", profile],
        env={**os.environ, **(env or {})},
    )
    async with AsyncExitStack() as stack:
        log = stack.enter_context(open(errlog or os.devnull, "w"))
        read, write = await stack.enter_async_context(stdio_client(params, errlog=log))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        yield session


# -- the tests -----------------------------------------------------------------

SEED_GET_CHUNK = load_schema("get_chunk.output.json")
SCHEMAS_ON = {"RESEARCHSTORE_OUTPUT_SCHEMAS": "1"}
CORE = {name for name, tool in TOOLS.items() if tool.read_only and tool.profile == "core"}
NAVIGATION = {
    "research_chunk_search",
    "research_get_chunk",
    "research_get_report",
    "get_chunks",
    "get_chunk_next",
    "get_chunk_prev",
    "get_chunk_neighbors",
    "get_chunk_parents",
    "get_document",
    "get_document_chunks",
}


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    return build_store(tmp_path_factory.mktemp("mcp"))


@pytest.fixture(scope="module")
def http_url(sample: Sample, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("http") / "server.log"
    with mcp_http_server(sample.db, log, profile="full", env=SCHEMAS_ON) as url:
        yield url


def check_result(name: str, result: types.CallToolResult) -> dict[str, Any]:
    """The call's envelope, its structured content validated; the text copy must say the same.

    Seed 002's tool carries its result object itself (``{"retrieval": ...}``);
    every other tool, and every error, carries the whole envelope.
    """
    structured = result.structuredContent
    assert structured is not None
    [text] = result.content
    assert isinstance(text, types.TextContent)
    assert json.loads(text.text) == structured
    if result.isError:
        jsonschema.validate(structured, ERROR_ENVELOPE, format_checker=FORMATS)
        return structured
    formats = SEED_FORMATS if name == "research_get_chunk" else FORMATS
    jsonschema.validate(structured, output_schema(name), format_checker=formats)
    seeds = {
        "research_get_chunk": SEED_GET_CHUNK,
        "research_evidence_retrieve": load_schema("evidence_retrieve.output.json"),
    }
    if name in seeds:
        jsonschema.validate(structured, seeds[name], format_checker=formats)
    if name in BARE_RESULTS:
        assert "result" not in structured and "error" not in structured
        return {"result": structured}
    assert "error" not in structured
    return structured


ERROR_ENVELOPE = {
    "type": "object",
    "properties": {"error": ERROR},
    "required": ["error"],
    "additionalProperties": False,
}


async def exercise(session: Any, sample: Sample, served: set[str]) -> int:
    """Call every served tool with good and bad arguments; return how many calls."""
    table = calls(sample)
    made = 0
    for name in sorted(served - {"ingest_file"}):
        assert name in table, f"{name}: add good and bad arguments to calls() here"
        good, bad = table[name]
        for arguments in good:
            result = await session.call_tool(name, arguments)
            envelope = check_result(name, result)
            assert not result.isError, (name, arguments, envelope)
        for arguments in [*bad, {**good[0], "bogus": 1}]:
            result = await session.call_tool(name, arguments)
            envelope = check_result(name, result)
            assert result.isError, (name, arguments, envelope)
            assert envelope["error"]["code"] == "invalid_input", (name, arguments, envelope)
        made += len(good) + len(bad) + 1
    result = await session.call_tool("no_such_tool", {})
    assert result.isError and result.structuredContent["error"]["code"] == "invalid_input"
    return made


# -- stdio ---------------------------------------------------------------------


@pytest.mark.slow
def test_stdio_core_profile_lists_the_read_tools(sample: Sample) -> None:
    async def listing() -> list[types.Tool]:
        async with stdio_session(sample.db, profile="core") as session:
            return (await session.list_tools()).tools

    listed = {tool.name: tool for tool in anyio.run(listing)}
    assert set(listed) == CORE
    assert NAVIGATION <= set(listed)
    for name, tool in listed.items():
        assert tool.inputSchema == TOOLS[name].input_schema()
        assert tool.inputSchema["additionalProperties"] is False
        assert tool.outputSchema is None  # RESEARCHSTORE_OUTPUT_SCHEMAS unset
        assert tool.title and tool.description
        assert tool.annotations is not None and tool.annotations.readOnlyHint is True
        assert tool.annotations.destructiveHint is False
    properties = {name: tool.inputSchema["properties"] for name, tool in listed.items()}
    assert properties["research_get_chunk"]["chunk_id"]["minLength"] == 1
    assert properties["research_chunk_search"]["query"]["minLength"] == 1
    assert (
        properties["research_chunk_search"]["limit"]["minimum"],
        properties["research_chunk_search"]["limit"]["maximum"],
    ) == (1, 50)
    assert (
        properties["get_chunks"]["ids"]["minItems"],
        properties["get_chunks"]["ids"]["maxItems"],
    ) == (1, 20)
    for name, default in (("get_chunk_next", 5), ("get_chunk_prev", 5), ("get_chunk_neighbors", 2)):
        count = properties[name]["count"]
        assert (count["minimum"], count["maximum"], count["default"]) == (1, 100, default)
    window = properties["get_document_chunks"]
    assert (window["from"]["default"], window["from"]["minimum"]) == (0, 0)
    assert (window["limit"]["default"], window["limit"]["minimum"], window["limit"]["maximum"]) == (
        20,
        1,
        100,
    )


@pytest.mark.slow
def test_stdio_full_profile_adds_ingest_and_lists_output_schemas(sample: Sample) -> None:
    async def listing() -> list[types.Tool]:
        async with stdio_session(sample.db, profile="full", env=SCHEMAS_ON) as session:
            return (await session.list_tools()).tools

    listed = {tool.name: tool for tool in anyio.run(listing)}
    assert set(listed) == set(TOOLS)
    for name, tool in listed.items():
        assert has_output_schema(name), f"{name} has no output schema in contracts.py"
        assert tool.outputSchema == output_schema(name)
    assert listed["research_get_chunk"].outputSchema == SEED_GET_CHUNK
    ingest = listed["ingest_file"]
    assert ingest.annotations is not None and ingest.annotations.readOnlyHint is False
    assert ingest.inputSchema["required"] == ["path"]
    if "research_evidence_retrieve" in listed:  # seed 002's annotations
        hints = listed["research_evidence_retrieve"].annotations
        assert hints is not None
        assert (
            hints.readOnlyHint,
            hints.destructiveHint,
            hints.idempotentHint,
            hints.openWorldHint,
        ) == (False, False, True, True)


@pytest.mark.slow
def test_stdio_every_tool_with_good_and_bad_arguments(sample: Sample) -> None:
    async def run() -> int:
        # With output schemas listed, the SDK client validates every result too.
        async with stdio_session(sample.db, profile="full", env=SCHEMAS_ON) as session:
            return await exercise(session, sample, set(TOOLS))

    assert anyio.run(run) > 60


def test_stdio_get_chunk_is_seed_000(sample: Sample) -> None:
    async def run() -> tuple[dict[str, Any], dict[str, Any]]:
        async with stdio_session(sample.db) as session:
            hit = await session.call_tool("research_get_chunk", {"chunk_id": sample.chunk_id})
            miss = await session.call_tool("research_get_chunk", {"chunk_id": "gone"})
            return check_result("research_get_chunk", hit), check_result("research_get_chunk", miss)

    hit, miss = anyio.run(run)
    chunk = hit["result"]["chunk"]
    assert set(chunk) == {"report_id", "title", "date", "score", "text", "chunk_id"}
    assert chunk["chunk_id"] == sample.chunk_id and chunk["score"] == 0.0
    assert miss == {"result": {"chunk": None}}


@pytest.mark.slow
def test_stdio_ingest_file(sample: Sample, tmp_path: Path) -> None:
    db = tmp_path / "copy.db"
    shutil.copy(sample.db, db)  # the index is rebuilt from the .db alone
    note = tmp_path / "field-note.txt"
    note.write_text("Field note\n\nA kingfisher nested under the footbridge in May.\n")

    async def run() -> list[dict[str, Any]]:
        async with stdio_session(db, profile="full") as session:
            ingested = await session.call_tool("ingest_file", {"path": str(note)})
            again = await session.call_tool(
                "ingest_file", {"path": str(note), "source": "local-files"}
            )
            found = await session.call_tool("research_chunk_search", {"query": "kingfisher"})
            refused = [
                await session.call_tool("ingest_file", arguments)
                for arguments in (
                    {"path": str(tmp_path / "absent.txt")},
                    {"path": str(tmp_path / "copy.db")},
                    {"path": ""},
                    {},
                    {"path": str(note), "other": 1},
                )
            ]
            return [
                check_result("ingest_file", ingested),
                check_result("ingest_file", again),
                check_result("research_chunk_search", found),
                *(check_result("ingest_file", result) for result in refused),
            ]

    ingested, again, found, *refused = anyio.run(run)
    assert ingested["result"]["new"] == 1 and ingested["result"]["chunks"] >= 1
    assert again["result"]["unchanged"] == 1
    assert "kingfisher" in found["result"]["hits"][0]["text"]
    for envelope in refused:
        assert envelope["error"]["code"] == "invalid_input"
    assert refused[0]["error"]["field"] == "path"


# -- HTTP ----------------------------------------------------------------------


@pytest.mark.slow
def test_http_full_profile_lists_and_calls_every_tool(sample: Sample, http_url: str) -> None:
    async def run() -> tuple[set[str], dict[str, Any], int]:
        async with mcp_http_session(http_url, sample.keys["research"]) as session:
            listed = {tool.name: tool for tool in (await session.list_tools()).tools}
            for name, tool in listed.items():
                assert tool.outputSchema == output_schema(name)
            # Local-file ingest exists over stdio only.
            refused = await session.call_tool("ingest_file", {"path": "/etc/hostname"})
            made = await exercise(session, sample, set(listed))
            return set(listed), check_result("ingest_file", refused), made

    names, refused, made = anyio.run(run)
    assert names == {name for name, tool in TOOLS.items() if "http" in tool.transports}
    assert "ingest_file" not in names
    assert refused["error"]["code"] == "invalid_input"
    assert made > 60


@pytest.mark.slow
def test_http_core_profile(sample: Sample, tmp_path: Path) -> None:
    async def listing(url: str) -> set[str]:
        async with mcp_http_session(url, sample.keys["reader"]) as session:
            return {tool.name for tool in (await session.list_tools()).tools}

    with mcp_http_server(sample.db, tmp_path / "core.log", profile="core") as url:
        assert anyio.run(listing, url) == CORE


@pytest.mark.slow
def test_http_refuses_missing_wrong_and_revoked_keys(sample: Sample, http_url: str) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    accept = {"accept": "application/json, text/event-stream"}
    live = sample.keys["research"]
    wrong_secret = live[:-4] + ("AAAA" if not live.endswith("AAAA") else "BBBB")
    refused_keys = {
        "missing": None,
        "empty": "",
        "garbage": "let-me-in",
        "wrong secret": wrong_secret,
        "revoked": sample.keys["revoked"],
    }
    with httpx.Client(timeout=10) as client:
        for why, key in refused_keys.items():
            headers = accept if key is None else {**accept, "x-api-key": key}
            response = client.post(http_url, json=initialize, headers=headers)
            assert response.status_code == 401, why
            assert response.json()["error"]["code"] == "not_entitled", why
            # Every path, not only /mcp, is behind the key.
            assert (
                client.get(http_url.replace("/mcp", "/other"), headers=headers).status_code == 401
            )
        accepted = client.post(http_url, json=initialize, headers={**accept, "x-api-key": live})
        assert accepted.status_code == 200
        assert session_of(accepted) == ""  # stateless: each request stands on its own
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "research_get_chunk", "arguments": {"chunk_id": "x"}},
        }
        headers = {**accept, "mcp-protocol-version": "2025-06-18"}
        # So every call needs its key, whoever initialized.
        assert client.post(http_url, json=call, headers=headers).status_code == 401
        other = client.post(http_url, json=call, headers={**headers, "x-api-key": live})
        assert other.status_code == 200
        # Bound to loopback, a foreign Host header is refused (DNS rebinding).
        foreign = client.post(
            http_url, json=initialize, headers={**accept, "x-api-key": live, "host": "evil.example"}
        )
        assert foreign.status_code == 421

    async def sdk_without_key() -> None:
        async with mcp_http_session(http_url, None):
            pass  # pragma: no cover - never reached

    with pytest.raises(ExceptionGroup) as refused:
        anyio.run(sdk_without_key)
    assert refused.group_contains(httpx.HTTPStatusError, match="401 Unauthorized", depth=None)


@pytest.mark.slow
def test_http_scopes_and_workspaces(sample: Sample, http_url: str) -> None:
    async def run() -> dict[str, Any]:
        async with mcp_http_session(http_url, sample.keys["reader"]) as session:
            # Read tools need no scope.
            read = await session.call_tool("research_get_chunk", {"chunk_id": sample.chunk_id})
            outcome = {"read": check_result("research_get_chunk", read)}
            if "research_evidence_retrieve" in TOOLS:
                arguments = calls(sample)["research_evidence_retrieve"][0][0]
                unscoped = await session.call_tool("research_evidence_retrieve", arguments)
                outcome["unscoped"] = check_result("research_evidence_retrieve", unscoped)
        if "research_evidence_retrieve" in TOOLS:
            async with mcp_http_session(http_url, sample.keys["research"]) as session:
                arguments = {
                    **calls(sample)["research_evidence_retrieve"][0][0],
                    "workspace_id": OTHER_WORKSPACE,
                }
                elsewhere = await session.call_tool("research_evidence_retrieve", arguments)
                outcome["elsewhere"] = check_result("research_evidence_retrieve", elsewhere)
        return outcome

    outcome = anyio.run(run)
    assert outcome["read"]["result"]["chunk"]["chunk_id"] == sample.chunk_id
    if "research_evidence_retrieve" not in TOOLS:
        pytest.skip("no served tool needs a scope yet (research_evidence_retrieve)")
    assert outcome["unscoped"]["error"]["code"] == "not_entitled"
    assert outcome["elsewhere"]["error"]["code"] == "not_entitled"
    assert outcome["elsewhere"]["error"]["field"] == "workspace_id"


@pytest.mark.slow
def test_http_twenty_parallel_clients(sample: Sample, http_url: str) -> None:
    table = calls(sample)
    work = [(name, table[name][0][0]) for name in sorted(NAVIGATION)]
    each = len(work)  # every client calls every navigation tool once
    outcomes: list[tuple[int, list[str]]] = []

    async def client(number: int) -> None:
        made, problems = 0, []
        async with mcp_http_session(http_url, sample.keys["research"]) as session:
            while made < each:
                name, arguments = work[(number + made) % len(work)]
                result = await session.call_tool(name, arguments)
                if result.isError:
                    problems.append(f"{name}: {result.structuredContent}")
                made += 1
        outcomes.append((made, problems))

    async def run() -> None:
        async with anyio.create_task_group() as group:
            for number in range(20):
                group.start_soon(client, number)

    anyio.run(run)
    assert len(outcomes) == 20
    assert [problem for _, problems in outcomes for problem in problems] == []
    assert all(made > 0 for made, _ in outcomes)
    assert [made for made, _ in outcomes] == [each] * 20


# -- principals and keys, in process -------------------------------------------


def test_principal_require() -> None:
    research = Principal(scopes=frozenset({"agent:research"}), workspaces=frozenset({WORKSPACE}))
    research.require("agent:research", WORKSPACE)
    research.require("agent:research", WORKSPACE.upper())
    research.require("agent:research")
    with pytest.raises(NotEntitled) as refused:
        research.require("agent:research", OTHER_WORKSPACE)
    assert refused.value.field == "workspace_id"
    with pytest.raises(NotEntitled):
        Principal(scopes=frozenset(), workspaces=frozenset({"*"})).require("agent:research")
    Principal(scopes=frozenset({"agent:research"}), workspaces=frozenset({"*"})).require(
        "agent:research", OTHER_WORKSPACE
    )
    LOCAL_USER.require("agent:research", OTHER_WORKSPACE)


def test_keys_commands(tmp_path: Path) -> None:
    db = tmp_path / "keys.db"
    Store(db, progress=False).close()
    runner = CliRunner()
    created = runner.invoke(
        main,
        [
            "keys",
            "create",
            str(db),
            "--scope",
            "agent:research",
            "--workspace",
            WORKSPACE,
            "--label",
            "laptop",
        ],
    )
    assert created.exit_code == 0, created.output
    key = created.stdout.strip()
    key_id = key.split("_")[1]
    assert key.startswith(f"rsk_{key_id}_")

    listed = runner.invoke(main, ["keys", "list", str(db), "--json"])
    assert listed.exit_code == 0, listed.output
    [entry] = json.loads(listed.stdout)
    assert (entry["key_id"], entry["label"], entry["scopes"], entry["workspaces"]) == (
        key_id,
        "laptop",
        ["agent:research"],
        [WORKSPACE],
    )
    secret = key.split("_", 2)[2]
    assert secret not in listed.output
    assert secret.encode() not in db.read_bytes()  # stored hashed

    with Store(db, progress=False) as store:
        principal = authenticate(store, key)
        assert principal is not None and principal.scopes == {"agent:research"}
        assert authenticate(store, key[:-1] + ("x" if key[-1] != "x" else "y")) is None
    assert runner.invoke(main, ["keys", "revoke", str(db), key_id]).exit_code == 0
    with Store(db, progress=False) as store:
        assert authenticate(store, key) is None
    assert runner.invoke(main, ["keys", "revoke", str(db), key_id]).exit_code != 0
    text = runner.invoke(main, ["keys", "list", str(db)])
    assert "revoked" in text.output and secret not in text.output

    bad_workspace = runner.invoke(main, ["keys", "create", str(db), "--workspace", "team-a"])
    assert bad_workspace.exit_code == 2 and "UUID" in bad_workspace.output
    bad_scope = runner.invoke(main, ["keys", "create", str(db), "--scope", "admin"])
    assert bad_scope.exit_code == 2


@pytest.mark.parametrize(
    "command",
    [["serve"], ["keys"], ["keys", "create"], ["keys", "list"], ["keys", "revoke"]],
    ids=" ".join,
)
def test_commands_have_help(command: list[str]) -> None:
    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0
    found: click.Command | None = main
    for name in command:
        assert isinstance(found, click.Group)
        found = found.get_command(click.Context(found), name)
    assert found is not None and found.help and len(found.help.split()) > 3


def test_serve_refuses_a_missing_store(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["serve", str(tmp_path / "absent.db")])
    assert result.exit_code != 0 and "no store" in result.output
