"""Every read tool, and every kind of write, on a store that can only be read.

Usage: ``read_only_tour.py STORE API_KEY WORK_DIR``. Reads STORE through
``Store``, the command line, the MCP server over stdio and over HTTP (with
API_KEY), and asks each to write; WORK_DIR (writable) holds the HTTP
server's log. Prints one JSON object: each step's outcome.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers import CLI, FIXTURE_SOURCE, mcp_call, mcp_http_server, mcp_open_session, session_of

from researchstore import ResearchStoreError, Store

WORKSPACE = "11111111-1111-4111-8111-111111111111"


def cli(*args: str) -> dict[str, Any]:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)
    return {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


def through_store(db: str) -> dict[str, Any]:
    steps: dict[str, Any] = {}
    with Store(db, progress=False) as store:
        steps["reason"] = store.read_only_reason
        steps["index_path"] = str(store.index_path)
        hits = store.search("varroa mite", limit=3)
        chunk_id, document_id = hits[0]["chunk_id"], hits[0]["document_id"]
        steps["chunk_id"], steps["document_id"] = chunk_id, document_id
        steps["search"] = [hit["chunk_id"] for hit in hits]
        steps["get_chunk"] = store.get_chunk(chunk_id) is not None
        steps["get_chunks"] = len(store.get_chunks([chunk_id])["chunks"])
        steps["next"] = store.get_chunk_next(chunk_id, count=1)["found"]
        steps["neighbors"] = store.get_chunk_neighbors(chunk_id, count=1)["chunk"] is not None
        steps["parents"] = bool(store.get_chunk_parents(chunk_id))
        steps["document"] = store.get_document(document_id) is not None
        steps["document_chunks"] = store.get_document_chunks(document_id)["total_chunks"]
        steps["report"] = store.get_report(hits[0]["report_id"]) is not None
        steps["report_id"] = hits[0]["report_id"]
        steps["resolve"] = store.resolve_chunk(chunk_id) is not None
        steps["check"] = store.check()
        refusals = {}
        for name, write in {
            "ingest": lambda: store.ingest(FIXTURE_SOURCE, name="again"),
            "embed": lambda: store.embed(),
            "rebuild_index": store.rebuild_index,
        }.items():
            try:
                write()
                refusals[name] = None
            except ResearchStoreError as error:
                refusals[name] = {"type": type(error).__name__, "message": error.message}
        steps["refused"] = refusals
        retrieve = {"url": "https://example.org/", "kind": "url_text"}
        retrieve |= {"workspace_id": WORKSPACE, "mutation_id": str(uuid.uuid4())}
        steps["retrieve"] = store.call("research_evidence_retrieve", retrieve)
    return steps


def through_cli(db: str, chunk_id: str, document_id: str) -> dict[str, Any]:
    return {
        "search": cli("search", db, "varroa mite", "--json"),
        "call": cli("call", db, "research_get_chunk", json.dumps({"chunk_id": chunk_id})),
        "chunk": cli("chunk", db, chunk_id, "--next", "1"),
        "doc": cli("doc", db, document_id),
        "check": cli("check", db),
        "ingest": cli("ingest", db, str(FIXTURE_SOURCE), "--name", "again"),
        "reingest": cli("reingest", db),
        "embed": cli("embed", db),
        "keys_create": cli("keys", "create", db),
        "retrieve": cli(
            "retrieve", db, "https://example.org/", "--kind", "url_text", "--workspace", WORKSPACE
        ),
    }


async def through_stdio(db: str, chunk_id: str) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=CLI[0], args=[*CLI[1:], "serve", db, "--profile", "full"], env=dict(os.environ)
    )
    async with AsyncExitStack() as stack:
        log = stack.enter_context(open(os.devnull, "w"))
        read, write = await stack.enter_async_context(stdio_client(params, errlog=log))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        search = await session.call_tool("research_chunk_search", {"query": "varroa mite"})
        chunk = await session.call_tool("research_get_chunk", {"chunk_id": chunk_id})
        notes = FIXTURE_SOURCE / "field-studies" / "2025" / "pond-dipping-notes.txt"
        ingest = await session.call_tool("ingest_file", {"path": str(notes)})
        return {
            "search": search.structuredContent,
            "get_chunk": chunk.structuredContent,
            "ingest_file": ingest.structuredContent,
        }


def through_http(db: str, key: str, work: Path, chunk_id: str) -> dict[str, Any]:
    import httpx

    with mcp_http_server(db, work / "http.log") as url, httpx.Client(timeout=60) as client:
        session = session_of(mcp_open_session(client, url, key))
        results = {}
        for tool, arguments in {
            "research_chunk_search": {"query": "varroa mite"},
            "research_get_chunk": {"chunk_id": chunk_id},
            "get_chunk_next": {"id": chunk_id, "count": 1},
        }.items():
            response = mcp_call(client, url, key, session, tool, arguments)
            results[tool] = response.json()["result"]["structuredContent"]
    results["log"] = (work / "http.log").read_text()
    return results


def through_web(db: str, chunk_id: str, document_id: str, report_id: int) -> dict[str, Any]:
    """Every page for people, as HTML and as JSON: each one's status."""
    from starlette.testclient import TestClient

    from researchstore.web import web_app

    pages = [
        "/",
        "/index.json",
        "/search?q=varroa+mite",
        "/search.json?q=varroa+mite",
        f"/document/{document_id}",
        f"/document/{document_id}.json",
        f"/chunk/{chunk_id}.json",
        "/reports",
        "/reports.json",
        f"/report/{report_id}",
        f"/report/{report_id}.json",
    ]
    with Store(db, progress=False) as store:
        client = TestClient(web_app(store), base_url="http://127.0.0.1")
        statuses = {page: client.get(page).status_code for page in pages}
        chunk = client.get(f"/chunk/{chunk_id}", follow_redirects=False)
        statuses[f"/chunk/{chunk_id}"] = chunk.status_code
    return statuses


def main(db: str, key: str, work: str) -> None:
    steps: dict[str, Any] = {"store": through_store(db)}
    chunk_id, document_id = steps["store"]["chunk_id"], steps["store"]["document_id"]
    steps["cli"] = through_cli(db, chunk_id, document_id)
    steps["stdio"] = asyncio.run(through_stdio(db, chunk_id))
    steps["http"] = through_http(db, key, Path(work), chunk_id)
    steps["web"] = through_web(db, chunk_id, document_id, steps["store"]["report_id"])
    steps["left_beside"] = sorted(entry.name for entry in Path(db).parent.iterdir())
    print(json.dumps(steps))


if __name__ == "__main__":
    main(*sys.argv[1:4])
