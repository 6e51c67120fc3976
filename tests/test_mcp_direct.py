"""Tool calls answered directly (``mcp_calls.DirectCalls``) are answered as the SDK answers them.

Two apps over one store, one answering the calls of open sessions itself and
one leaving every request to the SDK, are asked the same things: every tool,
hits and misses and bad input, and every request the direct path must leave
to the SDK (a listing, a ping, a batch, a bad header, another key's or an
ended session). Their answers are the same, field for field.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from helpers import FIXTURE_SOURCE, MCP_ACCEPT, mcp_headers, mcp_open_session
from starlette.testclient import TestClient

from researchstore import Store
from researchstore.auth import create_key
from researchstore.mcp_server import HttpLimits, http_app

URL = "http://127.0.0.1/mcp"


@dataclass
class Served:
    store: Store
    keys: dict[str, str]
    chunk_id: str
    document_id: str
    report_id: int


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("direct")
    shutil.copytree(FIXTURE_SOURCE, folder / "source")
    with Store(folder / "research.db", progress=False) as store:
        store.ingest(folder / "source", name="fixtures")
        keys = {name: create_key(store, label=name) for name in ("a", "b")}
        hit = store.call("research_chunk_search", {"query": "varroa mite", "limit": 1})
        first = hit["result"]["hits"][0]
        yield Served(store, keys, first["chunk_id"], first["document_id"], first["report_id"])


def client_for(served: Served, *, direct: bool, **limits: Any) -> TestClient:
    app = http_app(served.store, limits=replace(HttpLimits(**limits), direct_calls=direct))
    return TestClient(app, base_url="http://127.0.0.1")


def open_session(client: TestClient, key: str) -> str:
    response = mcp_open_session(client, URL, key)
    assert response.status_code == 200, response.text
    return str(response.headers["mcp-session-id"])


def post(client: TestClient, key: str, session: str, message: Any, **headers: str) -> Any:
    return client.post(URL, json=message, headers={**mcp_headers(key, session), **headers})


def call(name: str, arguments: Any, request_id: int | str = 7) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def answer(response: Any) -> tuple[int, Any, str | None]:
    body = response.json() if response.content else None
    return response.status_code, body, response.headers.get("content-type")


def calls_of_every_kind(served: Served) -> list[dict[str, Any]]:
    chunk, document = served.chunk_id, served.document_id
    return [
        call("research_chunk_search", {"query": "varroa mite", "limit": 3}),
        call("research_chunk_search", {"query": "bees", "tags": {"season": ["spring"]}}, "s-1"),
        call("research_chunk_search", {"query": ""}),
        call("research_get_chunk", {"chunk_id": chunk}),
        call("research_get_chunk", {"chunk_id": "01a2303d-0000-7000-8000-000000000000"}),
        call("get_chunks", {"ids": [chunk, "missing"]}),
        call("get_chunk_next", {"id": chunk, "count": 2}),
        call("get_chunk_prev", {"id": chunk}),
        call("get_chunk_neighbors", {"id": chunk, "count": 1}),
        call("get_chunk_parents", {"id": chunk}),
        call("get_document", {"id": document}),
        call("get_document_chunks", {"id": document, "from": 1, "limit": 2}),
        call("research_get_report", {"report_id": served.report_id}),
        call("research_resolve_chunk", {"chunk_id": chunk}),
        call("get_chunk_next", {"id": chunk, "count": 1000}),
        call("no_such_tool", {}),
        call("research_evidence_retrieve", {"kind": "url_text"}),
        {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "get_document"}},
    ]


def test_every_call_is_answered_as_the_sdk_answers_it(served: Served) -> None:
    key = served.keys["a"]
    with client_for(served, direct=True) as direct, client_for(served, direct=False) as sdk:
        sessions = {"direct": open_session(direct, key), "sdk": open_session(sdk, key)}
        counter = direct.app.state.direct_calls  # type: ignore[attr-defined]
        assert sdk.app.state.direct_calls is None  # type: ignore[attr-defined]
        before = counter.served
        messages = calls_of_every_kind(served)
        for message in messages:
            mine = post(direct, key, sessions["direct"], message)
            theirs = post(sdk, key, sessions["sdk"], message)
            assert answer(mine) == answer(theirs), message
            assert mine.headers["mcp-session-id"] == sessions["direct"]
        assert counter.served - before == len(messages)


def test_requests_it_does_not_take_are_left_to_the_sdk(served: Served) -> None:
    key = served.keys["a"]
    with client_for(served, direct=True) as direct, client_for(served, direct=False) as sdk:
        sessions = {"direct": open_session(direct, key), "sdk": open_session(sdk, key)}
        counter = direct.app.state.direct_calls  # type: ignore[attr-defined]
        before = counter.served
        lookup = call("research_get_chunk", {"chunk_id": served.chunk_id})
        asked: list[tuple[Any, dict[str, str]]] = [
            ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {}),
            ({"jsonrpc": "2.0", "id": 2, "method": "ping"}, {}),
            ([lookup], {}),  # a batch
            ({**lookup, "extra": 1}, {}),
            (lookup, {"mcp-protocol-version": "1999-01-01"}),
            (lookup, {"accept": "text/event-stream"}),
        ]
        for message, headers in asked:
            mine = post(direct, key, sessions["direct"], message, **headers)
            theirs = post(sdk, key, sessions["sdk"], message, **headers)
            assert mine.status_code == theirs.status_code, message
            if theirs.headers.get("content-type", "").startswith("application/json"):
                assert mine.json() == theirs.json(), message
        assert counter.served == before


def test_a_session_is_answered_only_for_the_key_that_opened_it(served: Served) -> None:
    lookup = call("research_get_chunk", {"chunk_id": served.chunk_id})
    with client_for(served, direct=True) as client:
        session = open_session(client, served.keys["a"])
        counter = client.app.state.direct_calls  # type: ignore[attr-defined]
        before = counter.served
        response = post(client, served.keys["b"], session, lookup)
        assert response.status_code == 404
        assert counter.served == before
        assert post(client, served.keys["a"], session, lookup).status_code == 200
        assert counter.served == before + 1


def test_an_ended_or_unknown_session_is_not_answered(served: Served) -> None:
    key = served.keys["a"]
    lookup = call("research_get_chunk", {"chunk_id": served.chunk_id})
    with client_for(served, direct=True) as client:
        session = open_session(client, key)
        assert post(client, key, session, lookup).status_code == 200
        ended = client.delete(URL, headers=mcp_headers(key, session))
        assert ended.status_code == 200
        assert post(client, key, session, lookup).status_code == 404
        assert post(client, key, "0" * 32, lookup).status_code == 404


def test_a_request_to_another_host_is_refused_as_the_sdk_refuses_it(served: Served) -> None:
    key = served.keys["a"]
    lookup = call("research_get_chunk", {"chunk_id": served.chunk_id})
    with client_for(served, direct=True) as direct, client_for(served, direct=False) as sdk:
        sessions = {"direct": open_session(direct, key), "sdk": open_session(sdk, key)}
        rebound = {"host": "attacker.example"}
        mine = post(direct, key, sessions["direct"], lookup, **rebound)
        theirs = post(sdk, key, sessions["sdk"], lookup, **rebound)
        assert mine.status_code == theirs.status_code == 421
        assert direct.app.state.direct_calls.served == 0  # type: ignore[attr-defined]


def test_a_session_used_only_by_direct_calls_stays_open_then_expires_when_idle(
    served: Served,
) -> None:
    key = served.keys["a"]
    lookup = call("research_get_chunk", {"chunk_id": served.chunk_id})
    with client_for(served, direct=True, session_idle_timeout_s=0.6) as client:
        session = open_session(client, key)
        deadline = time.monotonic() + 1.5  # well past the idle timeout
        while time.monotonic() < deadline:
            response = post(client, key, session, lookup)
            assert response.status_code == 200, response.text
            time.sleep(0.15)
        time.sleep(1.5)
        assert post(client, key, session, lookup).status_code == 404


def test_the_opening_request_is_the_sdks(served: Served) -> None:
    """``initialize`` is never answered directly, and a call before it has no session."""
    with client_for(served, direct=True) as client:
        early = client.post(
            URL,
            json=call("research_get_chunk", {"chunk_id": served.chunk_id}),
            headers={**MCP_ACCEPT, "x-api-key": served.keys["a"]},
        )
        assert early.status_code == 400  # no session id: the SDK's answer
        open_session(client, served.keys["a"])
        assert client.app.state.direct_calls.served == 0  # type: ignore[attr-defined]


def test_the_direct_answer_names_the_session(served: Served) -> None:
    key = served.keys["a"]
    with client_for(served, direct=True) as client:
        session = open_session(client, key)
        response = post(client, key, session, call("research_get_chunk", {"chunk_id": "x"}))
        assert response.headers["content-type"] == "application/json"
        assert response.headers["mcp-session-id"] == session
        assert response.json()["id"] == 7


def test_a_checked_key_is_refused_once_revoked_by_another_connection(served: Served) -> None:
    from researchstore.auth import KeyCache, create_key, revoke_key

    key = create_key(served.store, label="short-lived")
    cache = KeyCache(served.store)
    first = cache.authenticate(key)
    assert first is not None
    assert cache.authenticate(key) is first  # from the cache: the store is unchanged
    assert cache.authenticate(key + "x") is None
    with Store(served.store.path, progress=False, open_indexes=False) as other:
        revoke_key(other, key)  # a commit from another connection
    assert cache.authenticate(key) is None


def test_a_key_revoked_while_its_session_is_open_is_refused_at_its_next_call(
    served: Served,
) -> None:
    from researchstore.auth import create_key, revoke_key

    key = create_key(served.store, label="revoked-mid-session")
    lookup = call("research_get_chunk", {"chunk_id": served.chunk_id})
    with client_for(served, direct=True) as client:
        session = open_session(client, key)
        assert post(client, key, session, lookup).status_code == 200
        with Store(served.store.path, progress=False, open_indexes=False) as other:
            revoke_key(other, key)
        assert post(client, key, session, lookup).status_code == 401
