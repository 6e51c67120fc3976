"""``serve --transport http --workers N``: uvicorn's worker processes, the same answers.

Each worker process is started by uvicorn from ``mcp_server.APP_FACTORY``
and serves the SDK's stateless streamable HTTP on the one port, over the
store it opens itself. Their answers are one process's answers, field for
field; a key revoked through any connection is refused by every process; a
worker that dies is replaced; a call whose id no answer can carry is
refused, and no number of them stops the others or SIGTERM. Every test runs
a real ``researchstore serve`` and its real workers, over a real store.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import (
    CLI,
    FIXTURE_SOURCE,
    OTHER_WORKSPACE,
    WORKSPACE,
    mcp_headers,
    mcp_http_server,
    wait_for,
)

from researchstore import Store
from researchstore.serving.auth import create_key, revoke_key

QUERY = "varroa mite"

_ids = itertools.count(1000)


class Served:
    """A store of the fixtures with three keys: any workspace, another, one workspace."""

    def __init__(self, folder: Path) -> None:
        self.db = folder / "research.db"
        with Store(self.db, progress=False) as store:
            store.ingest(FIXTURE_SOURCE, name="fixtures")
            hits = store.search(QUERY, limit=3)
            self.chunk_id = hits[0]["chunk_id"]
            self.document_id = store.get_chunk(self.chunk_id)["document_id"]
            self.report_id = hits[0]["report_id"]
            self.key = create_key(store, label="any")
            self.other_key = create_key(store, label="other", workspaces=[OTHER_WORKSPACE])
            self.keys = [self.key, self.other_key, create_key(store, workspaces=[WORKSPACE])]
        self.folder = folder


@pytest.fixture
def served(tmp_path: Path) -> Served:
    return Served(tmp_path)


def call(client: httpx.Client, url: str, key: str, tool: str, **arguments: Any) -> Any:
    """One ``tools/call``: its JSON-RPC ``result``."""
    message = {
        "jsonrpc": "2.0",
        "id": next(_ids),
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    response = client.post(url, json=message, headers=mcp_headers(key, ""), timeout=120)
    assert response.status_code == 200, response.text
    return response.json()["result"]


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` and that still run."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return sorted(found)


def serve_pid(db: Path) -> int:
    """The ``serve`` process serving ``db`` (started by ``mcp_http_server``)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"serve" in argv and str(db).encode() in argv:
            return int(entry.name)
    raise AssertionError(f"no serve process for {db}")


def workers_of(db: Path, count: int) -> list[int]:
    """The worker processes of the ``serve`` of ``db``, once ``count`` run.

    multiprocessing's ``spawn`` also starts its resource tracker: a worker is a
    child that loads the app, named as uvicorn names it in its command line.
    """
    parent = serve_pid(db)

    def workers() -> list[int]:
        return [
            pid
            for pid in children(parent)
            if b"multiprocessing.spawn" in Path(f"/proc/{pid}/cmdline").read_bytes()
            and b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]

    wait_for(lambda: len(workers()) == count, f"{count} workers")
    return workers()


def calls_of(served: Served) -> list[tuple[str, dict[str, Any]]]:
    """One of each read tool (hits, misses, bad input, an unknown tool)."""
    chunk, document, report = served.chunk_id, served.document_id, served.report_id
    return [
        ("research_chunk_search", {"query": QUERY}),
        ("research_chunk_search", {"query": QUERY, "limit": 3, "workspace_id": WORKSPACE}),
        ("research_chunk_search", {"query": QUERY, "limit": 5, "kind": "html"}),
        ("research_chunk_search", {"query": ""}),
        ("research_get_chunk", {"chunk_id": chunk}),
        ("research_get_chunk", {"chunk_id": "no-such-chunk"}),
        ("get_chunks", {"ids": [chunk, "no-such-chunk"]}),
        ("get_chunk_next", {"id": chunk, "count": 2}),
        ("get_chunk_prev", {"id": chunk}),
        ("get_chunk_neighbors", {"id": chunk}),
        ("get_chunk_parents", {"id": chunk}),
        ("get_document", {"id": document}),
        ("get_document_chunks", {"id": document, "limit": 3}),
        ("research_get_report", {"report_id": report}),
        ("research_resolve_chunk", {"chunk_id": chunk}),
        ("get_chunk_next", {"id": chunk, "count": "many"}),
        ("no_such_tool", {}),
    ]


def answers(url: str, served: Served) -> list[Any]:
    """Every call of ``calls_of`` by every key, each on a connection of its own."""
    results = []
    for key in served.keys:
        for tool, arguments in calls_of(served):
            with httpx.Client() as client:  # a new connection: any worker may take it
                results.append(call(client, url, key, tool, **arguments))
    return results


@pytest.mark.slow
def test_workers_answer_every_read_tool_as_one_process_does(served: Served) -> None:
    log_workers, log_alone = served.folder / "workers.log", served.folder / "alone.log"
    with mcp_http_server(served.db, log_workers, "--workers", "2") as url:
        assert "2 worker processes serve the port" in log_workers.read_text()
        workers_of(served.db, 2)
        through_workers = answers(url, served)
    with mcp_http_server(served.db, log_alone, "--workers", "1") as url:
        assert "one process serves the port" in log_alone.read_text()
        alone = answers(url, served)
    assert through_workers == alone
    assert through_workers[0]["structuredContent"]["result"]["hits"]  # a real search
    assert through_workers[3]["isError"]  # a blank query is refused, the same way
    assert "Traceback" not in log_workers.read_text()


@pytest.mark.slow
def test_a_key_revoked_through_another_connection_is_refused_by_every_worker(
    served: Served,
) -> None:
    with Store(served.db, progress=False) as store:
        key = create_key(store, label="short-lived")
    with mcp_http_server(served.db, served.folder / "server.log", "--workers", "2") as url:
        workers_of(served.db, 2)
        for _ in range(6):  # new connections, so that both workers check the key
            with httpx.Client() as client:
                assert not call(client, url, key, "research_get_chunk", chunk_id=served.chunk_id)[
                    "isError"
                ]
        with Store(served.db, progress=False, open_indexes=False) as other:
            assert revoke_key(other, key)
        for _ in range(6):
            with httpx.Client() as client:
                response = client.post(
                    url,
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                    headers=mcp_headers(key, ""),
                )
                assert response.status_code == 401, response.text


@pytest.mark.slow
def test_a_worker_that_dies_is_replaced_and_the_others_answer_meanwhile(served: Served) -> None:
    log = served.folder / "server.log"
    with mcp_http_server(served.db, log, "--workers", "2") as url:
        first, second = workers_of(served.db, 2)
        os.kill(first, signal.SIGKILL)
        for _ in range(10):  # whichever worker takes the connection
            with httpx.Client() as client:
                found = call(client, url, served.key, "research_chunk_search", query=QUERY)
                assert found["structuredContent"]["result"]["hits"]
        replaced = workers_of(served.db, 2)
        assert second in replaced and first not in replaced
    assert "Traceback" not in log.read_text()


#: A ``tools/call`` whose id is half a surrogate pair, as raw JSON (``\ud800``).
SURROGATE_ID_CALL = (
    b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/call",'
    b'"params":{"name":"research_get_chunk","arguments":{"chunk_id":"x"}}}'
)


@pytest.mark.slow
def test_calls_whose_id_is_a_lone_surrogate_are_answered_and_stop_nothing(
    served: Served,
) -> None:
    """Once such calls hung their worker thread for good: 8 locked a key out, 32 every
    key's lookups, and then SIGTERM no longer stopped ``serve``."""
    log = served.folder / "server.log"
    command = [*CLI, "serve", str(served.db), "--transport", "http", "--port", "0"]
    with open(log, "w") as errors:
        server = subprocess.Popen(
            [*command, "--workers", "2"], stdout=subprocess.DEVNULL, stderr=errors
        )
    try:
        wait_for(lambda: " at http://" in log.read_text(), "the server to listen")
        url = log.read_text().split(" at ", 1)[1].split(" ", 1)[0]
        headers = mcp_headers(served.key, "")
        with httpx.Client(timeout=30) as client:
            first = client.post(url, content=SURROGATE_ID_CALL, headers=headers)
            assert first.status_code == 400, first.text
            assert first.json()["error"]["code"] == -32600  # JSON-RPC's invalid request
            for _ in range(32):
                again = client.post(url, content=SURROGATE_ID_CALL, headers=headers)
                assert again.status_code == 400, again.text
            started = time.monotonic()
            found = call(client, url, served.key, "research_get_chunk", chunk_id=served.chunk_id)
            assert not found["isError"]
            # Not hung (a hung lookup never answered); generous for a busy CI machine.
            assert time.monotonic() - started < 15
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=20)  # promptly: within uvicorn's graceful shutdown
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    text = log.read_text()
    assert "Traceback" not in text, text


@pytest.mark.slow
def test_the_server_ends_its_workers_when_it_stops(served: Served) -> None:
    log = served.folder / "server.log"
    with mcp_http_server(served.db, log, "--workers", "2") as url, httpx.Client() as client:
        pids = workers_of(served.db, 2)
        assert call(client, url, served.key, "research_chunk_search", query=QUERY)
    # mcp_http_server sent SIGTERM and waited for the server to exit.
    wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in pids), "the workers to end")
    assert "Traceback" not in log.read_text()


def test_a_checked_key_is_refused_once_revoked_by_another_connection(served: Served) -> None:
    """What lets every process cache keys: any commit to the file sends them back."""
    from researchstore.serving.auth import KeyCache

    with Store(served.db, progress=False) as store:
        key = create_key(store, label="short-lived")
        cache = KeyCache(store)
        first = cache.authenticate(key)
        assert first is not None
        assert cache.authenticate(key) is first  # from the cache: the store is unchanged
        assert cache.authenticate(key + "x") is None
        with Store(served.db, progress=False, open_indexes=False) as other:
            revoke_key(other, key)  # a commit from another connection
        assert cache.authenticate(key) is None
