"""Hostile requests: what a client sends is answered as bad input, never as an internal error.

An argument name that is a lone surrogate, and arguments nested a thousand
deep, get ``invalid_input`` (or, for a body nested past what the server
parses, HTTP 400), by ``Store.call``; over HTTP (in process, and from a
real ``serve``) the SDK refuses the surrogate name as invalid params, and
nothing leaves a traceback in the log. Servers bound to loopback by any spelling
(``web`` and ``serve --transport http`` alike) answer only requests that
name loopback (DNS rebinding).
"""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import (
    CLI,
    MCP_ACCEPT,
    mcp_headers,
    mcp_http_server,
    mcp_open_session,
    session_of,
)
from starlette.testclient import TestClient

from researchstore import Store
from researchstore.serving.auth import create_key
from researchstore.serving.mcp_server import http_app
from researchstore.web import web_app

LONE_SURROGATE = json.loads('"\\ud800"')
DEEP = 1000
URL = "/mcp"


@dataclass
class Served:
    store: Store
    key: str
    db: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    db = tmp_path_factory.mktemp("hostile") / "research.db"
    with Store(db, progress=False) as store:
        yield Served(store, create_key(store, label="hostile"), db)


def nested(depth: int) -> list[Any]:
    """A list ``depth`` deep, built without recursion."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def call_body(arguments_json: str, request_id: int = 7) -> bytes:
    """A ``tools/call`` of ``research_get_chunk`` whose arguments are this JSON text."""
    return (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call",'
        f'"params":{{"name":"research_get_chunk","arguments":{arguments_json}}}}}'
    ).encode()


def deep_arguments(depth: int) -> str:
    return '{"chunk_id":' + "[" * depth + "]" * depth + "}"


SURROGATE_NAMED = '{"chunk_id":"x","\\ud800":1}'


def invalid(envelope: dict[str, Any]) -> dict[str, Any]:
    assert set(envelope) == {"error"}, envelope
    assert envelope["error"]["code"] == "invalid_input", envelope
    error: dict[str, Any] = envelope["error"]
    return error


# -- 9. the tools: Store.call ------------------------------------------------------


def test_an_argument_named_by_a_lone_surrogate_is_invalid_input(served: Served) -> None:
    envelope = served.store.call("research_get_chunk", {"chunk_id": "x", LONE_SURROGATE: 1})
    error = invalid(envelope)
    assert "\\ud800" in error["message"]
    # What quotes the name can always be sent: as UTF-8, and as JSON.
    json.dumps(envelope, ensure_ascii=False).encode("utf-8")


@pytest.mark.slow
@pytest.mark.parametrize("depth", [40, DEEP, 200_000])
def test_arguments_nested_deep_are_invalid_input(served: Served, depth: int) -> None:
    for arguments in ({"chunk_id": nested(depth)}, {"tags": {"a": nested(depth)}, "query": "x"}):
        tool = "research_get_chunk" if "chunk_id" in arguments else "research_chunk_search"
        error = invalid(served.store.call(tool, arguments))
        assert "deeper than 32 levels" in error["message"]


def test_arguments_as_deep_as_a_tool_takes_are_served(served: Served) -> None:
    envelope = served.store.call("research_chunk_search", {"query": "x", "tags": {"a": ["b"]}})
    assert "result" in envelope, envelope


# -- 9. over HTTP, in process: the SDK's stateless HTTP behind our checks ------------


@contextmanager
def sdk_log(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """The SDK's log and the server's, captured (the SDK's may not propagate)."""
    loggers = [logging.getLogger(name) for name in ("mcp", "uvicorn.error", "researchstore")]
    for logger in loggers:
        logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.DEBUG):
            yield
    finally:
        for logger in loggers:
            logger.removeHandler(caplog.handler)


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    assert not [record for record in caplog.records if record.exc_info], caplog.text
    assert "Traceback" not in caplog.text and "RecursionError" not in caplog.text


@contextmanager
def mcp_client(served: Served) -> Iterator[tuple[TestClient, str]]:
    app = http_app(served.store)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        opened = mcp_open_session(client, URL, served.key)
        assert opened.status_code == 200, opened.text
        yield client, session_of(opened)


def test_a_body_nested_a_thousand_deep_is_a_400_without_a_traceback(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    with sdk_log(caplog), mcp_client(served) as (client, session):
        headers = mcp_headers(served.key, session)
        response = client.post(URL, content=call_body(deep_arguments(DEEP)), headers=headers)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["code"] == -32700  # JSON-RPC's parse error
        assert "nests deeper than 64" in error["message"]
        # Not even an ``initialize``, nor a body that is all brackets.
        for body in (b"[" * DEEP, b"[" * DEEP + b"]" * DEEP, b'{"a":' * DEEP):
            refused = client.post(URL, content=body, headers=headers)
            assert refused.status_code == 400, refused.text
    no_traceback(caplog)


def test_arguments_nested_past_the_tools_bound_are_invalid_input_over_http(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    with sdk_log(caplog), mcp_client(served) as (client, session):
        response = client.post(
            URL,
            content=call_body(deep_arguments(40)),
            headers=mcp_headers(served.key, session),
        )
        assert response.status_code == 200, response.text
        error = invalid(response.json()["result"]["structuredContent"])
        assert "deeper than 32 levels" in error["message"]
    no_traceback(caplog)


def test_the_sdk_refuses_a_lone_surrogate_as_invalid_params(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK validates the request before the tool sees it: invalid params."""
    with sdk_log(caplog), mcp_client(served) as (client, session):
        response = client.post(
            URL, content=call_body(SURROGATE_NAMED), headers=mcp_headers(served.key, session)
        )
        assert response.status_code == 200, response.text
        assert response.json()["error"]["code"] == -32602
    no_traceback(caplog)


def test_a_hostile_tool_name_is_refused_and_leaves_one_log_line(served: Served) -> None:
    log = io.StringIO()
    app = http_app(served.store, access_log=log)
    names = ["\\ud800", "x status=200 result=ok\\n2026-01-01T00:00:00.000Z key=forged"]
    with TestClient(app, base_url="http://127.0.0.1") as client:
        session = session_of(mcp_open_session(client, URL, served.key))
        for name in names:
            body = call_body("{}").replace(b'"research_get_chunk"', f'"{name}"'.encode())
            response = client.post(URL, content=body, headers=mcp_headers(served.key, session))
            assert response.status_code == 200, response.text
            invalid(response.json()["result"]["structuredContent"])
    lines = log.getvalue().splitlines()
    assert len(lines) == 4, lines  # initialize, initialized, the two calls
    assert all(line.count(" status=") == 1 for line in lines), lines
    assert "tool=\\ud800 " in lines[2]


def test_the_body_depth_scan_skips_strings_and_stays_linear() -> None:
    from researchstore.serving.mcp_server import nests_deeper

    assert not nests_deeper('{"a":"[[[[[[[[[[[[[[[[[[[["}', 4)
    assert not nests_deeper('{"a":"\\"[[[[[[[[[[[[[[[[[[[["}', 4)
    assert nests_deeper('{"a":"\\\\",' + "[" * 5, 4)  # an escaped backslash ends no string
    assert nests_deeper("[" * 5, 4) and not nests_deeper("[" * 4 + "]" * 4, 4)
    assert nests_deeper("[{" * 3, 5) and not nests_deeper("[]" * 1000, 1)
    assert nests_deeper("[é" * 5, 4)  # past what is not JSON, brackets still count
    # A parser stops at an open string without looking inside: so does the scan.
    assert not nests_deeper('"' + "[" * 10, 4)
    # Quotes that each would start a string to the end: scanned once, not once each.
    assert not nests_deeper('["' + '\\"' * 200_000 + "\\", 4)
    assert not nests_deeper('"\\' * 200_000, 4)


def test_a_body_that_is_not_text_is_a_400_without_a_traceback(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    with sdk_log(caplog), mcp_client(served) as (client, session):
        headers = mcp_headers(served.key, session)
        latin1 = call_body('{"chunk_id":"x"}').replace(b'"x"', b'"\xff"')
        response = client.post(URL, content=latin1, headers=headers)
        assert response.status_code == 400, response.text
        assert "not UTF-8" in response.json()["error"]["message"]
        # UTF-16 is JSON text too, as json.loads reads it.
        utf16 = call_body('{"chunk_id":"x"}').decode().encode("utf-16-le")
        answered = client.post(URL, content=utf16, headers=headers)
        assert answered.json()["result"]["structuredContent"] == {"result": {"chunk": None}}
    no_traceback(caplog)


# -- 9. a real server, with worker processes ------------------------------------


@pytest.fixture(scope="module")
def real_server(
    served: Served, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    log = tmp_path_factory.mktemp("hostile-log") / "server.log"
    with mcp_http_server(served.db, log, "--workers", "1", host="0:0:0:0:0:0:0:1") as address:
        yield address, log


@pytest.mark.slow
def test_a_real_server_answers_hostile_calls_as_invalid_input(
    served: Served, real_server: tuple[str, Path]
) -> None:
    address, log = real_server
    assert address.startswith("http://[::1]:")
    with httpx.Client(timeout=30) as client:
        opened = mcp_open_session(client, address, served.key)
        assert opened.status_code == 200, opened.text
        headers = mcp_headers(served.key, session_of(opened))
        named = client.post(address, content=call_body(SURROGATE_NAMED), headers=headers)
        assert named.status_code == 200, named.text
        assert named.json()["error"]["code"] == -32602  # the SDK's invalid params
        deep = client.post(address, content=call_body(deep_arguments(DEEP)), headers=headers)
        assert deep.status_code == 400, deep.text
        middling = client.post(address, content=call_body(deep_arguments(40)), headers=headers)
        invalid(middling.json()["result"]["structuredContent"])
        # Still answering, by a worker.
        fine = client.post(address, content=call_body('{"chunk_id":"x"}'), headers=headers)
        assert fine.json()["result"]["structuredContent"] == {"result": {"chunk": None}}
    time.sleep(0.2)  # the log's last lines
    text = log.read_text()
    assert "Traceback" not in text and "RecursionError" not in text, text
    assert "result=internal" not in text, text


# -- 10. one Host rule for web and serve --------------------------------------------

#: Loopback as ``--host`` may spell it (the last two bind 127.0.0.1).
LOOPBACK_BINDS = ["127.0.0.2", "0:0:0:0:0:0:0:1", "[::1]", "localhost", "127.1", "::ffff:127.0.0.1"]
FOREIGN_HOSTS = [
    "attacker.example",
    "attacker.example:8766",
    "127.0.0.1.attacker.example",
    "localhost.attacker.example:8766",
    "127.0.0.1:8766@attacker.example",
    "[::1].attacker.example",
    "[127.0.0.1]:8766",
    "::1",
    "192.0.2.1:8766",
    "",
]
LOOPBACK_HOSTS = [
    "127.0.0.2:8766",
    "127.0.0.2",
    "127.0.0.1:8766",
    "127.9.9.9:1",
    "localhost:8766",
    "LOCALHOST",
    "[::1]:8766",
    "[0:0:0:0:0:0:0:1]:8766",
]


def web_client(store: Store, bound: str) -> TestClient:
    return TestClient(web_app(store, host=bound), base_url="http://127.0.0.2:8766")


def serve_client(served: Served, bound: str) -> TestClient:
    app = http_app(served.store, host=bound, pages=web_app(served.store, require_key=True))
    return TestClient(app, base_url="http://127.0.0.2:8766")


def initialize(client: TestClient, key: str, **headers: str) -> int:
    status: int = mcp_open_session(client, URL, key, **headers).status_code
    return status


@pytest.mark.slow
@pytest.mark.parametrize("bound", LOOPBACK_BINDS)
def test_web_bound_to_loopback_answers_only_loopback_names(served: Served, bound: str) -> None:
    with web_client(served.store, bound) as client:
        for host in FOREIGN_HOSTS:
            assert client.get("/index.json", headers={"host": host}).status_code == 421, host
        for host in LOOPBACK_HOSTS:
            assert client.get("/index.json", headers={"host": host}).status_code == 200, host
        foreign = {"host": "127.0.0.2:8766", "origin": "http://attacker.example"}
        assert client.get("/index.json", headers=foreign).status_code == 403
        # A page of its own posts with ``Origin: null`` (``Referrer-Policy: no-referrer``).
        assert client.get("/index.json", headers={**foreign, "origin": "null"}).status_code == 200
        mine = {**foreign, "origin": "http://localhost:8766"}
        assert client.get("/index.json", headers=mine).status_code == 200


@pytest.mark.slow
@pytest.mark.parametrize("bound", LOOPBACK_BINDS)
def test_serve_bound_to_loopback_answers_only_loopback_names(served: Served, bound: str) -> None:
    with serve_client(served, bound) as client:
        for host in FOREIGN_HOSTS:
            assert initialize(client, served.key, host=host) == 421, host
            page = client.get("/web/", headers={"host": host, "x-api-key": served.key})
            assert page.status_code == 421, host
        for host in LOOPBACK_HOSTS:
            assert initialize(client, served.key, host=host) == 200, host
        foreign = {"host": "127.0.0.2:8766", "origin": "http://attacker.example"}
        assert initialize(client, served.key, **foreign) == 403
        mine = {**foreign, "origin": "http://[::1]:8766"}
        assert initialize(client, served.key, **mine) == 200
        # Signing in: the form's own post is answered, another site's is refused.
        for origin, status in (("null", 303), ("http://attacker.example", 403)):
            signed = client.post(
                "/web/login",
                data={"key": served.key, "next": "/web/"},
                headers={"host": "127.0.0.2:8766", "origin": origin},
                follow_redirects=False,
            )
            assert signed.status_code == status, (origin, signed.text)


@pytest.mark.parametrize("bound", ["0.0.0.0", "::", "192.0.2.1"])
def test_bound_elsewhere_any_host_is_answered_and_serve_still_wants_a_key(
    served: Served, bound: str
) -> None:
    with web_client(served.store, bound) as client:
        assert client.get("/index.json", headers={"host": "attacker.example"}).status_code == 200
    with serve_client(served, bound) as client:
        assert initialize(client, served.key, host="attacker.example") == 200
        keyless = client.post(URL, json={}, headers={**MCP_ACCEPT, "host": "attacker.example"})
        assert keyless.status_code == 401


def test_the_loopback_rule() -> None:
    from researchstore.serving.hosts import is_loopback, names_loopback

    for address in [*LOOPBACK_BINDS, "127.0.0.1", "::1", "127.0.0.02", "2130706433", "LocalHost"]:
        assert is_loopback(address), address
    for address in ["0.0.0.0", "::", "192.0.2.1", "::ffff:192.0.2.1", "example.com", "", "1.2.3"]:
        assert not is_loopback(address), address
    assert all(names_loopback(host) for host in LOOPBACK_HOSTS)
    assert not any(names_loopback(host) for host in FOREIGN_HOSTS)


@contextmanager
def web_server(db: Path, host: str, log: Path) -> Iterator[str]:
    """``researchstore web`` on a free port of ``host``; yields its address."""
    with open(log, "w") as errors:
        server = subprocess.Popen(
            [*CLI, "web", str(db), "--host", host, "--port", "0"],
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
    try:
        deadline = time.monotonic() + 30
        while not (found := re.search(r"at (http://\S+)/\n", log.read_text())):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the web server did not start:\n{log.read_text()}")
            time.sleep(0.05)
        yield found.group(1)
    finally:
        server.terminate()
        server.wait(10)


@pytest.mark.slow
@pytest.mark.parametrize("host", ["127.0.0.2", "0:0:0:0:0:0:0:1"])
def test_the_web_command_bound_to_loopback_refuses_a_rebound_name(
    served: Served, host: str, tmp_path: Path
) -> None:
    with web_server(served.db, host, tmp_path / "web.log") as address, httpx.Client() as client:
        port = address.rpartition(":")[2]
        assert client.get(f"{address}/index.json").status_code == 200
        rebound = client.get(f"{address}/index.json", headers={"host": "attacker.example"})
        assert rebound.status_code == 421
        named = client.get(f"{address}/index.json", headers={"host": f"127.0.0.2:{port}"})
        assert named.status_code == 200
