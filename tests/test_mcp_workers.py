"""The HTTP server's worker processes (``mcp_workers``): the same answers on every core.

A served store's read calls go to worker processes forked by ``serve``; each
opens the store read-only. Their answers are the server's own, field for
field; a worker that ends fails only the calls it held, telling them to call
again, and leaves the rest to the others, then to the server itself; a call
that runs long runs at a lower CPU priority until it ends; the server's end
is its workers' end. Every test runs a real ``researchstore serve`` and its
real workers, over a real store.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import (
    FIXTURE_SOURCE,
    OTHER_WORKSPACE,
    WORKSPACE,
    mcp_headers,
    mcp_http_server,
    mcp_open_session,
    program,
)

from researchstore import Store
from researchstore.auth import create_key
from researchstore.mcp_workers import (
    LANE_DEPTH,
    LONG_CALL_NICE,
    SEARCH_NICE,
    NoWorker,
    WorkerPool,
    _Worker,
)

#: How long a test waits for an event that should come at once before failing.
PATIENCE_S = 60
QUERY = "varroa mite"

_ids = itertools.count(1000)


def wait_for(done: Any, what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not done():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.01)


class Served:
    """A store of the fixtures with two keys: one for any workspace, one for another."""

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
        self.holds = folder / "holds"
        self.holds.mkdir()

    @property
    def slow_cli(self) -> list[str]:
        return [*program("slow_server"), str(self.holds)]

    def started(self, query: str) -> bool:
        return (self.holds / f"started-{query.replace(' ', '-')}").exists()

    def release(self) -> None:
        (self.holds / "release").touch()


@pytest.fixture
def served(tmp_path: Path) -> Served:
    return Served(tmp_path)


def call(
    client: httpx.Client, url: str, key: str, session: str, tool: str, **arguments: Any
) -> Any:
    """One ``tools/call`` in an open session: its JSON-RPC ``result``."""
    message = {
        "jsonrpc": "2.0",
        "id": next(_ids),
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    response = client.post(url, json=message, headers=mcp_headers(key, session), timeout=120)
    assert response.status_code == 200, response.text
    return response.json()["result"]


def open_session(client: httpx.Client, url: str, key: str) -> str:
    response = mcp_open_session(client, url, key)
    assert response.status_code == 200, response.text
    return str(response.headers["mcp-session-id"])


def worker_pids(log: Path) -> list[int]:
    """The server's worker processes, as it announced them."""
    found = re.search(
        r"worker processes answer the read tools' calls \(pids ([\d, ]+)\)", log.read_text()
    )
    assert found, log.read_text()
    return [int(pid) for pid in found.group(1).split(", ")]


def running(pid: int) -> bool:
    """Whether ``pid`` is a process still running (not ended, not a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def thread_nice_values(pid: int) -> list[int]:
    """The nice value of each of ``pid``'s threads."""
    values = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        values.append(int(fields[16]))
    return values


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
    """Every call of ``calls_of`` by both keys, in one session each."""
    results = []
    with httpx.Client() as client:
        for key in served.keys:
            session = open_session(client, url, key)
            for tool, arguments in calls_of(served):
                results.append(call(client, url, key, session, tool, **arguments))
    return results


@pytest.mark.slow
def test_workers_answer_every_read_tool_as_the_server_itself_does(served: Served) -> None:
    log_workers, log_alone = served.folder / "workers.log", served.folder / "alone.log"
    with mcp_http_server(served.db, log_workers, "--workers", "2") as url:
        assert len(worker_pids(log_workers)) == 2
        through_workers = answers(url, served)
    with mcp_http_server(served.db, log_alone, "--workers", "0") as url:
        assert "the server process answers every call" in log_alone.read_text()
        alone = answers(url, served)
    assert through_workers == alone
    assert through_workers[0]["structuredContent"]["result"]["hits"]  # a real search
    assert through_workers[3]["isError"]  # a blank query is refused, the same way
    assert "Traceback" not in log_workers.read_text()


@pytest.mark.slow
def test_a_worker_that_ends_leaves_its_calls_to_the_others_then_to_the_server(
    served: Served,
) -> None:
    log = served.folder / "server.log"
    with mcp_http_server(served.db, log, "--workers", "2") as url, httpx.Client() as client:
        session = open_session(client, url, served.key)
        expected = call(client, url, served.key, session, "research_chunk_search", query=QUERY)
        first, second = worker_pids(log)
        os.kill(first, signal.SIGKILL)
        # A call sent in the moment before the server sees its end would be told to
        # call again (it might have been what ended it): the notice comes first.
        wait_for(lambda: "its calls go to the other 1" in log.read_text(), "the first notice")
        for _ in range(20):  # whichever worker a call would have gone to
            assert call(client, url, served.key, session, "research_chunk_search", query=QUERY) == (
                expected
            )
            got = call(
                client, url, served.key, session, "research_get_chunk", chunk_id=served.chunk_id
            )
            assert not got["isError"]
        os.kill(second, signal.SIGKILL)
        wait_for(
            lambda: "the server answers every call itself from now on" in log.read_text(),
            "the second notice",
        )
        for _ in range(5):
            assert call(client, url, served.key, session, "research_chunk_search", query=QUERY) == (
                expected
            )
    text = log.read_text()
    assert f"(pid {first}) stopped" in text and "killed by signal 9" in text
    assert "Traceback" not in text


@pytest.mark.slow
def test_a_call_whose_worker_ends_is_told_to_call_again(served: Served) -> None:
    log = served.folder / "server.log"
    with (
        mcp_http_server(served.db, log, "--workers", "1", cli=served.slow_cli) as url,
        httpx.Client() as client,
    ):
        session = open_session(client, url, served.key)
        outcome: dict[str, Any] = {}

        def held_search() -> None:
            outcome["result"] = call(
                client, url, served.key, session, "research_chunk_search", query="hold a"
            )

        thread = threading.Thread(target=held_search)
        thread.start()
        try:
            wait_for(lambda: served.started("hold a"), "the held search to start")
            (worker,) = worker_pids(log)
            os.kill(worker, signal.SIGKILL)
            thread.join(PATIENCE_S)
        finally:
            served.release()
            thread.join(PATIENCE_S)
        result = outcome["result"]
        assert result["isError"]
        error = result["structuredContent"]["error"]
        assert error["code"] == "internal"
        assert f"(pid {worker}) ended before it answered" in error["message"]
        assert error["message"].endswith("Make the call again")
        # The server answers the same call itself now.
        again = call(client, url, served.key, session, "research_chunk_search", query="hold a")
        assert not again["isError"]


@pytest.mark.slow
def test_searches_run_at_a_lower_cpu_priority_than_lookups(served: Served) -> None:
    """A lookup that wakes while searches keep every core busy runs first."""
    log = served.folder / "server.log"
    with (
        mcp_http_server(served.db, log, "--workers", "2") as url,
        httpx.Client() as client,
    ):
        session = open_session(client, url, served.key)
        pids = worker_pids(log)
        before = [thread_nice_values(pid) for pid in pids]
        assert all(SEARCH_NICE not in values for values in before)
        for _ in range(4):
            found = call(client, url, served.key, session, "research_chunk_search", query=QUERY)
            assert not found["isError"]
            got = call(
                client, url, served.key, session, "research_get_chunk", chunk_id=served.chunk_id
            )
            assert not got["isError"]
        after = [thread_nice_values(pid) for pid in pids]
        # The searches' threads stay, at their priority; every other thread is as it was.
        assert any(SEARCH_NICE in values for values in after)
        assert all(set(values) <= {0, SEARCH_NICE} for values in after)


@pytest.mark.slow
def test_a_long_call_runs_at_a_lower_cpu_priority_until_it_ends(served: Served) -> None:
    log = served.folder / "server.log"
    with (
        mcp_http_server(served.db, log, "--workers", "2", cli=served.slow_cli) as url,
        httpx.Client() as client,
    ):
        session = open_session(client, url, served.key)
        pids = worker_pids(log)
        outcome: dict[str, Any] = {}

        def held_search() -> None:
            outcome["result"] = call(
                client, url, served.key, session, "research_chunk_search", query="hold b"
            )

        thread = threading.Thread(target=held_search)
        thread.start()
        try:
            wait_for(lambda: served.started("hold b"), "the held search to start")
            wait_for(
                lambda: any(LONG_CALL_NICE in thread_nice_values(pid) for pid in pids),
                "the long call's thread to be lowered",
            )
            lowered = [pid for pid in pids if LONG_CALL_NICE in thread_nice_values(pid)]
            assert len(lowered) == 1 and thread_nice_values(lowered[0]).count(LONG_CALL_NICE) == 1
            # Calls beside it are answered meanwhile, by the other worker, at full priority.
            got = call(
                client, url, served.key, session, "research_get_chunk", chunk_id=served.chunk_id
            )
            assert not got["isError"] and thread.is_alive()
        finally:
            served.release()
            thread.join(PATIENCE_S)
        assert not outcome["result"]["isError"]
        # Raised back when it ended (or, where that is not allowed, its thread ended).
        wait_for(
            lambda: all(LONG_CALL_NICE not in thread_nice_values(pid) for pid in pids),
            "the lowered thread to be raised back",
        )
        assert all(running(pid) for pid in pids)
        if os.geteuid() == 0:  # allowed to raise it back: to a search thread's own priority
            assert SEARCH_NICE in thread_nice_values(lowered[0])


@pytest.mark.slow
def test_the_server_ends_its_workers_when_it_stops(served: Served) -> None:
    log = served.folder / "server.log"
    with mcp_http_server(served.db, log) as url, httpx.Client() as client:
        cores = os.cpu_count() or 1
        if cores == 1:
            assert "the server process answers every call" in log.read_text()
            pytest.skip("one core: the server has no workers by default")
        pids = worker_pids(log)
        assert len(pids) == cores  # one per core, the lookups' lane among them
        session = open_session(client, url, served.key)
        assert call(client, url, served.key, session, "research_chunk_search", query=QUERY)
    # mcp_http_server sent SIGTERM and waited for the server to exit.
    wait_for(lambda: not any(running(pid) for pid in pids), "the workers to end")
    assert "Traceback" not in log.read_text()


# -- where a call goes (no processes: the pool's choice alone) ------------------------


@pytest.fixture
def pool() -> Iterator[WorkerPool]:
    sockets = [socket.socketpair() for _ in range(3)]
    workers = [
        _Worker(pid=-1, sock=ours, number=number) for number, (ours, _) in enumerate(sockets, 1)
    ]
    yield WorkerPool(workers)
    for ours, theirs in sockets:
        ours.close()
        theirs.close()


def _in_flight(worker: _Worker, count: int, *, sent_s_ago: float = 0.0) -> None:
    loop = asyncio.new_event_loop()
    try:
        for _ in range(count):
            call_id = len(worker.pending) + 1000 * worker.number
            worker.pending[call_id] = loop.create_future()
            worker.sent[call_id] = time.monotonic() - sent_s_ago
    finally:
        loop.close()


def test_lookups_take_the_lane_and_searches_the_others(pool: WorkerPool) -> None:
    lane, second, third = pool._workers
    assert pool._pick("research_get_chunk") is lane
    assert pool._pick("research_chunk_search") in (second, third)
    _in_flight(second, 2)
    assert pool._pick("research_chunk_search") is third
    # Lookups overflow once LANE_DEPTH wait in the lane, to the least busy.
    _in_flight(lane, LANE_DEPTH)
    assert pool._pick("get_chunk_next") is third
    # Searches overflow into the lane only when the others are far busier.
    _in_flight(third, 3)
    assert pool._pick("research_chunk_search") is second
    _in_flight(second, LANE_DEPTH * 2)
    _in_flight(third, LANE_DEPTH * 2)
    assert pool._pick("research_chunk_search") is lane


def test_a_worker_with_a_long_call_gets_no_other(pool: WorkerPool) -> None:
    lane, second, third = pool._workers
    _in_flight(second, 1, sent_s_ago=5.0)
    for name in ("research_get_chunk", "research_chunk_search"):
        assert pool._pick(name) is not second
    _in_flight(lane, 1, sent_s_ago=5.0)
    assert pool._pick("research_get_chunk") is third  # the lane is the next one free
    # Searches keep out of the one lane left: to the least busy long call's worker.
    _in_flight(second, 1, sent_s_ago=5.0)
    assert pool._pick("research_chunk_search") is lane
    _in_flight(third, 1, sent_s_ago=5.0)
    assert pool._pick("research_get_chunk") is lane  # none free: all share again
    lane.alive = second.alive = third.alive = False
    with pytest.raises(NoWorker):
        pool._pick("research_get_chunk")
