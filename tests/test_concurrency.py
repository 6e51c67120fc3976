"""Concurrent reads: no call holds another behind it.

In one process, each thread reads through its own SQLite connection and the
Tantivy searcher is shared, so a reader never waits for a writer, in this
process or another one (WAL). The MCP server answers each call as it
finishes, on both transports: a call held in one session (``slow_server.py``
holds a search until the test releases it) delays no call of another
session, nor another call of its own session. Every ordering here is shown
by events (a held call cannot finish before the test releases it), never by
elapsed time.
"""

from __future__ import annotations

import itertools
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from helpers import (
    FIXTURE_SOURCE,
    long_text,
    mcp_headers,
    mcp_http_server,
    mcp_open_session,
    program,
    session_of,
    wait_for,
)
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from researchstore import Store
from researchstore.serving.auth import create_key
from researchstore.serving.mcp_server import CALLS_PER_KEY

#: How long a test waits for an event that should come at once before failing.
PATIENCE_S = 60


# -- in one process, and beside another process's writer ---------------------------


def test_a_new_thread_reads_while_this_process_is_inside_a_write(filled_store: Store) -> None:
    """A writer of this process holds the store's lock through its run; a thread's
    first read (which opens its connection) does not wait for it, and reads the
    last committed state."""
    hit = filled_store.search("varroa mite", limit=1)[0]
    report_id, chunk_id = hit["report_id"], hit["chunk_id"]
    title = filled_store.get_report(report_id)["title"]  # type: ignore[index]
    inside, release = threading.Event(), threading.Event()

    def write() -> None:
        with filled_store.writing(), filled_store.transaction() as conn:
            conn.execute("UPDATE reports SET title = 'Rewritten' WHERE report_id = ?", (report_id,))
            inside.set()
            release.wait(PATIENCE_S)

    seen: dict[str, Any] = {}

    def read() -> None:
        seen["chunk"] = filled_store.get_chunk(chunk_id)
        seen["hits"] = filled_store.search("varroa mite", limit=3)
        seen["next"] = filled_store.get_chunk_next(chunk_id, count=1)
        seen["report"] = filled_store.get_report(report_id)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert inside.wait(PATIENCE_S)
        reader = threading.Thread(target=read)
        reader.start()
        reader.join(PATIENCE_S)
        assert not reader.is_alive(), "the reader waited for the writer"
        assert writer.is_alive() and not release.is_set()  # the write is still open
    finally:
        release.set()
        writer.join(PATIENCE_S)
    assert seen["chunk"]["chunk_id"] == chunk_id
    assert seen["hits"] and seen["hits"][0]["chunk_id"] == chunk_id
    assert seen["report"]["title"] == title  # the committed state, not the open write
    assert filled_store.get_report(report_id)["title"] == "Rewritten"  # type: ignore[index]


@pytest.mark.slow
def test_reads_go_on_while_another_process_is_inside_its_write_transaction(
    filled_store: Store, source_dir: Path
) -> None:
    """A re-ingest in another process, stopped inside its SQLite transaction (old
    chunks deleted, new ones written, nothing committed): every read here goes
    on, on the last committed state; once it commits, reads see the new one."""
    old = filled_store.search("varroa mite", limit=1)[0]
    (source_dir / "field/2026/bees/notes.txt").write_text(long_text(31, seed=9))
    with subprocess.Popen(
        [*program("open_transaction"), str(filled_store.path), str(source_dir), "field"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdin is not None and child.stdout is not None
        try:
            assert child.stdout.readline().strip() == "in transaction"
            assert filled_store.get_chunk(old["chunk_id"]) is not None
            hits = filled_store.search("varroa mite", limit=3)
            assert hits[0]["chunk_id"] == old["chunk_id"]
            assert filled_store.get_chunk_next(old["chunk_id"], count=1)["chunks"]
            assert child.poll() is None  # still inside its transaction
            child.stdin.write("go on\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "done 1 modified"
            assert child.wait(PATIENCE_S) == 0
        finally:
            if child.poll() is None:
                child.kill()
    assert filled_store.get_chunk(old["chunk_id"]) is None
    assert filled_store.search("varroa mite", limit=1)[0]["chunk_id"] != old["chunk_id"]


# -- the MCP server: a held call holds no one else ------------------------------------


class Held:
    """A store with two keys, and the folder where ``slow_server.py`` holds searches."""

    def __init__(self, folder: Path) -> None:
        self.db = folder / "research.db"
        with Store(self.db, progress=False) as store:
            store.ingest(FIXTURE_SOURCE, name="fixtures")
            self.chunk_id = store.search("varroa mite", limit=1)[0]["chunk_id"]
            self.keys = {name: create_key(store, label=name) for name in ("a", "b")}
        self.holds = folder / "holds"
        self.holds.mkdir()
        self.folder = folder

    @property
    def cli(self) -> list[str]:
        return [*program("slow_server"), str(self.holds)]

    def started(self, query: str) -> bool:
        return (self.holds / f"started-{query.replace(' ', '-')}").exists()

    def release(self) -> None:
        (self.holds / "release").touch()


@pytest.fixture
def held(tmp_path: Path) -> Held:
    return Held(tmp_path)


@pytest.fixture
def held_url(held: Held) -> Iterator[str]:
    # One process: the held searches are held by this program's own search,
    # which uvicorn's worker processes (started from an import string) would not run.
    log = held.folder / "server.log"
    with mcp_http_server(held.db, log, "--workers", "1", cli=held.cli) as url:
        yield url


_ids = itertools.count(100)


def call(
    client: httpx.Client, url: str, key: str, session: str, tool: str, **arguments: Any
) -> Any:
    """One ``tools/call`` in an open session (each with an id of its own); its ``result``."""
    message = {
        "jsonrpc": "2.0",
        "id": next(_ids),
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    response = client.post(url, json=message, headers=mcp_headers(key, session), timeout=120)
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert not result["isError"], result
    return result["structuredContent"]["result"]


def open_session(client: httpx.Client, url: str, key: str) -> str:
    response = mcp_open_session(client, url, key)
    assert response.status_code == 200, response.text
    return str(session_of(response))


def in_thread(work: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``work()`` in a thread of its own; its result (or error) lands in the dict."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = work()
        except BaseException as error:  # told by the test that joins
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


@pytest.mark.slow
def test_a_held_call_over_http_holds_no_other_call(held: Held, held_url: str) -> None:
    """While a search of session A is held: another call of A, and calls of
    session B (another key), are each answered; then A's search is too."""
    a, b = held.keys["a"], held.keys["b"]
    with httpx.Client() as client:
        session_a, session_b = open_session(client, held_url, a), open_session(client, held_url, b)
        slow, outcome = in_thread(
            lambda: call(client, held_url, a, session_a, "research_chunk_search", query="hold a")
        )
        try:
            wait_for(lambda: held.started("hold a"), "the held search to start")
            # The same session, then another session of another key.
            chunk = call(
                client, held_url, a, session_a, "research_get_chunk", chunk_id=held.chunk_id
            )
            assert chunk["chunk"]["chunk_id"] == held.chunk_id
            hits = call(
                client, held_url, b, session_b, "research_chunk_search", query="varroa mite"
            )
            assert hits["hits"][0]["chunk_id"] == held.chunk_id
            after = call(
                client, held_url, b, session_b, "get_chunk_next", id=held.chunk_id, count=1
            )
            assert after["chunks"]
            assert slow.is_alive() and not outcome  # A's search is still held
        finally:
            held.release()
            slow.join(PATIENCE_S)
    assert "error" not in outcome, outcome
    assert outcome["result"]["hits"]


@pytest.mark.slow
def test_a_key_at_its_limit_of_calls_waits_for_its_own_turn(held: Held, held_url: str) -> None:
    """A key with ``CALLS_PER_KEY`` calls held: its next call waits for one of them
    to end, and another key's calls are answered meanwhile."""
    a, b = held.keys["a"], held.keys["b"]
    queries = [f"hold {number}" for number in range(CALLS_PER_KEY + 1)]
    with httpx.Client(limits=httpx.Limits(max_connections=32)) as client:
        session_a, session_b = open_session(client, held_url, a), open_session(client, held_url, b)

        def search(query: str) -> Any:
            return call(client, held_url, a, session_a, "research_chunk_search", query=query)

        running = [in_thread(lambda query=query: search(query)) for query in queries[:-1]]
        try:
            wait_for(lambda: all(held.started(query) for query in queries[:-1]), "a's calls")
            running.append(in_thread(lambda: search(queries[-1])))
            chunk = call(
                client, held_url, b, session_b, "research_get_chunk", chunk_id=held.chunk_id
            )
            assert chunk["chunk"]["chunk_id"] == held.chunk_id
            assert not held.started(queries[-1])  # a's next call waits for a's turn
            assert all(thread.is_alive() for thread, _ in running)
        finally:
            held.release()
            for thread, _ in running:
                thread.join(PATIENCE_S)
    assert held.started(queries[-1])
    assert all(outcome["result"]["hits"] for _, outcome in running), running


@pytest.mark.slow
def test_a_held_call_over_stdio_holds_no_other_call_of_its_client(held: Held) -> None:
    """Over stdio, one client's requests in flight are each answered as it finishes."""
    params = StdioServerParameters(command=held.cli[0], args=[*held.cli[1:], "serve", str(held.db)])
    answered: list[str] = []

    async def hold(session: ClientSession) -> None:
        result = await session.call_tool("research_chunk_search", {"query": "hold s"})
        assert not result.isError and result.structuredContent
        answered.append("held search")

    async def run() -> None:
        with open(held.folder / "stdio.log", "w") as log:
            async with stdio_client(params, errlog=log) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    async with anyio.create_task_group() as group:
                        group.start_soon(hold, session)
                        with anyio.fail_after(PATIENCE_S):
                            while not held.started("hold s"):
                                await anyio.sleep(0.01)
                        chunk = await session.call_tool(
                            "research_get_chunk", {"chunk_id": held.chunk_id}
                        )
                        assert (
                            chunk.structuredContent["result"]["chunk"]["chunk_id"] == held.chunk_id
                        )  # type: ignore[index]
                        hits = await session.call_tool(
                            "research_chunk_search", {"query": "varroa mite"}
                        )
                        assert not hits.isError
                        answered.append("others")
                        held.release()

    try:
        anyio.run(run)
    finally:
        held.release()
    assert answered == ["others", "held search"]
