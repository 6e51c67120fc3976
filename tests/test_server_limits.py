"""The server and its limits: no input, client or key can hold the store or lock others out.

In-process: the bounds of every tool parameter (and that the published input
schemas state them), the fetcher's address guard against IANA's
special-purpose registries, and the server log's handling of disconnects.
Over HTTP, with ``researchstore serve`` as a real child process on loopback:
request bodies, sessions per key and idle expiry, another loopback address,
clients that go away, and the access log.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import jsonschema
import pytest
from click.testing import CliRunner
from helpers import (
    MCP_ACCEPT,
    mcp_call,
    mcp_headers,
    mcp_http_server,
    mcp_open_session,
    ok,
    session_of,
    wait_for,
)

from researchstore import Store
from researchstore.catalogue import (
    MAX_QUERY_PHRASES,
    MAX_QUERY_TERMS,
    MAX_TAG_NAME_LENGTH,
    MAX_TAG_VALUE_LENGTH,
    MAX_TAG_VALUES,
    MAX_TAGS,
    TOOLS,
)
from researchstore.cli import main
from researchstore.fetch import FetchError, FetchPolicy, address_problem, fetch
from researchstore.serving.auth import create_key

# -- envelopes and schemas -----------------------------------------------------


def invalid_field(envelope: dict[str, Any]) -> str | None:
    assert set(envelope) == {"error"}, envelope
    assert envelope["error"]["code"] == "invalid_input", envelope
    field: str | None = envelope["error"].get("field")
    return field


def published_schema_refuses(tool_name: str, arguments: dict[str, Any]) -> bool:
    schema = TOOLS[tool_name].input_schema()
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    return not validator.is_valid(arguments)


# -- 7. every input is bounded ---------------------------------------------------


TAG_FILTERS_REFUSED = {
    # 3.6 MB of one value: it held the server for a minute before.
    "300000-values": {"audience": ["students"] * 300_000},
    "too-many-values": {"audience": [f"v{n}" for n in range(MAX_TAG_VALUES + 1)]},
    "too-many-tags": {f"tag{n}": "x" for n in range(MAX_TAGS + 1)},
    "long-name": {"a" * (MAX_TAG_NAME_LENGTH + 1): "students"},
    "long-value": {"audience": "s" * (MAX_TAG_VALUE_LENGTH + 1)},
    "long-value-in-list": {"audience": ["students", "s" * (MAX_TAG_VALUE_LENGTH + 1)]},
    "empty-name": {"": "students"},
}


@pytest.mark.slow
@pytest.mark.parametrize("tags", TAG_FILTERS_REFUSED.values(), ids=TAG_FILTERS_REFUSED.keys())
def test_a_tag_filter_is_bounded_and_its_schema_says_so(
    fixture_store: Store, tags: dict[str, Any]
) -> None:
    arguments = {"query": "varroa", "tags": tags}
    assert invalid_field(fixture_store.call("research_chunk_search", arguments)) == "tags"
    assert published_schema_refuses("research_chunk_search", arguments)


@pytest.mark.slow
def test_the_largest_tag_filter_allowed_is_served(fixture_store: Store) -> None:
    tags = {
        "a" * (MAX_TAG_NAME_LENGTH - 3) + f"{n:03}": ["s" * MAX_TAG_VALUE_LENGTH] * MAX_TAG_VALUES
        for n in range(MAX_TAGS)
    }
    arguments = {"query": "varroa", "tags": tags}
    assert ok(fixture_store.call("research_chunk_search", arguments)) == {
        "hits": [],
        "mode": "keyword",
    }
    assert not published_schema_refuses("research_chunk_search", arguments)


def test_repeated_tag_values_are_asked_for_once(fixture_store: Store) -> None:
    tool = TOOLS["research_chunk_search"]
    repeated = {"audience": ["students", "public", "students"] * 10}
    bound = tool.bind({"query": "varroa", "tags": repeated})
    assert bound["tags"] == {"audience": ["students", "public"]}
    once = fixture_store.search("varroa mite", tags={"audience": ["students", "public"]})
    assert once and fixture_store.search("varroa mite", tags=repeated) == once


def words(count: int) -> str:
    return " ".join(f"word{n}" for n in range(count))


def phrases(count: int) -> str:
    return " ".join(f'"varroa mite{n}"' for n in range(count))


@pytest.mark.parametrize(
    ("query", "refused"),
    [
        (words(MAX_QUERY_TERMS), False),
        (words(MAX_QUERY_TERMS + 1), True),
        ("varroa " * (MAX_QUERY_TERMS + 1), True),  # a repeated term is asked for again
        ("the of and " * 300 + words(MAX_QUERY_TERMS), False),  # stop words are no terms
        (phrases(MAX_QUERY_PHRASES), False),
        (phrases(MAX_QUERY_PHRASES + 1), True),
        ('"varroa" ' * (MAX_QUERY_PHRASES + 1), False),  # a quoted word is no phrase
    ],
    ids=[
        "most-terms",
        "one-term-too-many",
        "one-term-repeated",
        "stop-words",
        "most-phrases",
        "one-phrase-too-many",
        "quoted-words",
    ],
)
def test_a_query_is_bounded_in_terms_and_phrases(
    fixture_store: Store, query: str, refused: bool
) -> None:
    envelope = fixture_store.call("research_chunk_search", {"query": query})
    if refused:
        assert invalid_field(envelope) == "query"
        assert "at most" in envelope["error"]["message"]
    else:
        ok(envelope)


def test_the_query_bounds_are_published_in_its_description() -> None:
    described = TOOLS["research_chunk_search"].input_schema()["properties"]["query"]
    assert f"at most {MAX_QUERY_TERMS} search terms" in described["description"]
    assert f"{MAX_QUERY_PHRASES} quoted phrases" in described["description"]


def test_ids_are_bounded_in_length(fixture_store: Store) -> None:
    arguments = {"ids": ["x" * 201]}
    assert invalid_field(fixture_store.call("get_chunks", arguments)) == "ids"
    assert published_schema_refuses("get_chunks", arguments)
    assert ok(fixture_store.call("get_chunks", {"ids": ["x" * 200]}))["not_found"] == ["x" * 200]


def unbounded(schema: dict[str, Any], where: str) -> list[str]:
    """Where a JSON Schema lets a value grow without a limit (strings, arrays, objects)."""
    kind = schema.get("type")
    if "anyOf" in schema:
        return [
            problem
            for number, option in enumerate(schema["anyOf"])
            for problem in unbounded(option, f"{where}|{number}")
        ]
    if kind == "string":
        bounded = (
            "maxLength" in schema
            or "enum" in schema
            or schema.get("format")
            in {
                "uuid",
                "date",
            }
        )
        return [] if bounded else [where]
    if kind == "array":
        problems = [] if "maxItems" in schema else [f"{where} (items)"]
        return problems + unbounded(schema["items"], f"{where}[]")
    if kind == "object":
        problems = []
        if schema.get("additionalProperties", True) is not False:
            if "maxProperties" not in schema:
                problems.append(f"{where} (properties)")
            if "maxLength" not in schema.get("propertyNames", {}):
                problems.append(f"{where} (names)")
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict):
                problems += unbounded(extra, f"{where}.*")
        for name, inner in schema.get("properties", {}).items():
            problems += unbounded(inner, f"{where}.{name}")
        return problems
    return []


@pytest.mark.parametrize("tool_name", list(TOOLS))
def test_every_published_input_schema_bounds_every_value(tool_name: str) -> None:
    """No call the input schemas allow is unbounded in size (the store checks the same)."""
    assert unbounded(TOOLS[tool_name].input_schema(), tool_name) == []


# -- 15a. the fetcher's address guard --------------------------------------------

#: IANA's IPv4 and IPv6 Special-Purpose Address Registries (2025-10), every
#: entry, with its "globally reachable" column; plus the address-space
#: registries' multicast and deprecated site-local blocks. The guard refuses
#: all of them, reachable ones too (none serves a public page).
REGISTRIES = [
    ("0.0.0.0/8", "this network", False),
    ("0.0.0.0/32", "this host on this network", False),
    ("10.0.0.0/8", "private-use", False),
    ("100.64.0.0/10", "shared address space", False),
    ("127.0.0.0/8", "loopback", False),
    ("169.254.0.0/16", "link local", False),
    ("172.16.0.0/12", "private-use", False),
    ("192.0.0.0/24", "IETF protocol assignments", False),
    ("192.0.0.0/29", "IPv4 service continuity prefix", False),
    ("192.0.0.8/32", "IPv4 dummy address", False),
    ("192.0.0.9/32", "port control protocol anycast", True),
    ("192.0.0.10/32", "traversal using relays around NAT anycast", True),
    ("192.0.0.170/32", "NAT64/DNS64 discovery", False),
    ("192.0.0.171/32", "NAT64/DNS64 discovery", False),
    ("192.0.2.0/24", "documentation (TEST-NET-1)", False),
    ("192.31.196.0/24", "AS112-v4", True),
    ("192.52.193.0/24", "AMT", True),
    ("192.88.99.0/24", "deprecated (6to4 relay anycast)", False),
    ("192.88.99.2/32", "6a44-relay anycast address", False),
    ("192.168.0.0/16", "private-use", False),
    ("192.175.48.0/24", "direct delegation AS112 service", True),
    ("198.18.0.0/15", "benchmarking", False),
    ("198.51.100.0/24", "documentation (TEST-NET-2)", False),
    ("203.0.113.0/24", "documentation (TEST-NET-3)", False),
    ("240.0.0.0/4", "reserved", False),
    ("255.255.255.255/32", "limited broadcast", False),
    ("224.0.0.0/4", "multicast (address space)", False),
    ("::1/128", "loopback address", False),
    ("::/128", "unspecified address", False),
    ("::ffff:0:0/96", "IPv4-mapped address", False),
    ("64:ff9b::/96", "IPv4-IPv6 translation", True),
    ("64:ff9b:1::/48", "IPv4-IPv6 translation", False),
    ("100::/64", "discard-only address block", False),
    ("100:0:0:1::/64", "dummy IPv6 prefix", False),
    ("2001::/23", "IETF protocol assignments", False),
    ("2001::/32", "TEREDO", False),
    ("2001:1::1/128", "port control protocol anycast", True),
    ("2001:1::2/128", "traversal using relays around NAT anycast", True),
    ("2001:1::3/128", "DNS-SD service registration protocol anycast", True),
    ("2001:2::/48", "benchmarking", False),
    ("2001:3::/32", "AMT", True),
    ("2001:4:112::/48", "AS112-v6", True),
    ("2001:10::/28", "deprecated (previously ORCHID)", False),
    ("2001:20::/28", "ORCHIDv2", True),
    ("2001:30::/28", "drone remote ID protocol entity tags", True),
    ("2001:db8::/32", "documentation", False),
    ("2002::/16", "6to4", False),
    ("2620:4f:8000::/48", "direct delegation AS112 service", True),
    ("3fff::/20", "documentation", False),
    ("5f00::/16", "segment routing (SRv6) SIDs", False),
    ("fc00::/7", "unique-local", False),
    ("fe80::/10", "link-local unicast", False),
    ("fec0::/10", "deprecated site-local (address space)", False),
    ("ff00::/8", "multicast (address space)", False),
]


def samples(block: str) -> list[str]:
    """The first, last and a middle address of a block."""
    network = ipaddress.ip_network(block)
    middle = network.network_address + network.num_addresses // 2
    return list(dict.fromkeys(str(a) for a in (network[0], middle, network[-1])))


@pytest.mark.parametrize(
    "address",
    [address for block, _, _ in REGISTRIES for address in samples(block)]
    + ["fec0::1", "3fff::1", "4000::1", "e000::1", "fe00::1", "1::1"],
)
def test_no_special_purpose_or_reserved_address_passes_the_guard(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is not None, address


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "1.1.1.1", "9.9.9.9", "2606:4700:4700::1111", "2001:4860:4860::8888",
     "2a00:1450:4001:80b::200e", "2620:fe::fe"],
)  # fmt: skip
def test_public_addresses_still_pass_the_guard(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize("address", ["fec0::1", "3fff::1", "5f00::1", "192.0.0.8"])
def test_a_name_resolving_to_a_reserved_address_is_refused_before_any_connect(
    monkeypatch: pytest.MonkeyPatch, address: str
) -> None:
    connects: list[Any] = []
    real_connect = socket.create_connection

    def connect(target: Any, *args: Any, **kwargs: Any) -> socket.socket:
        connects.append(target)
        return real_connect(target, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", connect)
    policy = FetchPolicy(resolver=lambda host, port: [address])
    with pytest.raises(FetchError) as refused:
        fetch("https://public-looking.example.com/page", policy=policy)
    assert (refused.value.status, refused.value.reason) == ("blocked", "unsafe_url")
    assert address in refused.value.message
    assert connects == []


# -- 15c. the server log ---------------------------------------------------------


@pytest.fixture
def sdk_logger() -> Iterator[logging.Logger]:
    """The SDK's logger, as it was before the test configured it."""
    logger = logging.getLogger("mcp")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield logger
    logger.handlers[:] = saved[0]
    logger.setLevel(saved[1])
    logger.propagate = saved[2]


def test_a_disconnect_leaves_no_traceback_and_other_errors_keep_theirs(
    sdk_logger: logging.Logger,
) -> None:
    from researchstore.serving.mcp_server import configure_logging

    class Lines:
        def __init__(self) -> None:
            self.text = ""

        def write(self, text: str) -> None:
            self.text += text

        def flush(self) -> None:
            pass

    stream = Lines()
    configure_logging(stream)  # type: ignore[arg-type]
    logger = logging.getLogger("mcp.server.streamable_http")
    for error in (
        anyio.ClosedResourceError(),
        ExceptionGroup("group", [anyio.BrokenResourceError(), ConnectionResetError()]),
    ):
        try:
            raise error
        except Exception:
            logger.exception("Error in standalone SSE writer")
    assert stream.text == ""
    try:
        raise ValueError("a real bug")
    except ValueError:
        logger.exception("Error handling POST request")
    assert "Traceback" in stream.text and "a real bug" in stream.text


# -- over HTTP ----------------------------------------------------------------------


class Served:
    """A store on disk with three keys, for servers started by the tests."""

    def __init__(self, folder: Path, source: Path) -> None:
        self.db = folder / "research.db"
        with Store(self.db, progress=False) as store:
            store.ingest(source, name="fixtures")
            self.chunk_id = store.search("varroa mite", limit=1)[0]["chunk_id"]
            self.keys = {name: create_key(store, label=name) for name in ("a", "b", "c")}
        self.folder = folder

    def key_id(self, name: str) -> str:
        return self.keys[name].split("_")[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Served:
    from helpers import FIXTURE_SOURCE

    return Served(tmp_path_factory.mktemp("served"), FIXTURE_SOURCE)


@pytest.fixture(scope="module")
def server_log(served: Served) -> Path:
    return served.folder / "server.log"


@pytest.fixture(scope="module")
def access_log(served: Served) -> Path:
    return served.folder / "access.log"


@pytest.fixture(scope="module")
def url(served: Served, server_log: Path, access_log: Path) -> Iterator[str]:
    """One server with the default limits, its access log in a file."""
    with mcp_http_server(served.db, server_log, "--access-log", str(access_log)) as address:
        yield address


def call_result(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    structured: dict[str, Any] = response.json()["result"]["structuredContent"]
    return structured


@pytest.mark.slow
def test_an_oversized_request_body_is_refused_before_it_is_read(served: Served, url: str) -> None:
    from researchstore.serving.mcp_server import HttpLimits

    with httpx.Client(timeout=30) as client:
        opened = mcp_open_session(client, url, served.keys["a"])
        session = session_of(opened)
        # The call that held the server for a minute: 3.6 MB of one tag value.
        flood = {"query": "varroa", "tags": {"audience": ["students"] * 300_000}}
        assert len(json.dumps(flood)) > HttpLimits().max_request_bytes
        refused = mcp_call(client, url, served.keys["a"], session, "research_chunk_search", flood)
        assert refused.status_code == 413
        # Under the body limit, the tool's own bound refuses it as invalid input.
        smaller = {"query": "varroa", "tags": {"audience": ["students"] * 1000}}
        answer = mcp_call(client, url, served.keys["a"], session, "research_chunk_search", smaller)
        envelope = call_result(answer)
        assert envelope["error"]["field"] == "tags"
        # And the server answers everyone as before.
        chunk = mcp_call(
            client, url, served.keys["b"], "", "research_get_chunk", {"chunk_id": served.chunk_id}
        )
        assert call_result(chunk)["result"]["chunk"]["chunk_id"] == served.chunk_id


def held_request(address: str, key: str) -> socket.socket:
    """A POST of ``key`` held in flight: its head sent, its body never finished."""
    host, port = address.split("/")[2].rsplit(":", 1)
    head = "".join(f"{name}: {value}\r\n" for name, value in mcp_headers(key, "").items())
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(
        f"POST /mcp HTTP/1.1\r\nhost: {host}:{port}\r\n{head}content-length: 100\r\n\r\n{{".encode()
    )
    return sock


@pytest.mark.slow
def test_one_key_cannot_hold_every_connection(served: Served, tmp_path: Path) -> None:
    """A key's requests in flight (bodies never finished here) are bounded for that
    key only; the bound is each process's, so one process serves this test."""
    key, other = served.keys["a"], served.keys["b"]
    options = ("--requests-per-key", "3", "--workers", "1")
    with mcp_http_server(served.db, tmp_path / "server.log", *options) as address:
        with httpx.Client(timeout=30) as client:
            # A GET stream holds nothing: there is none in stateless mode.
            stream = client.get(
                address, headers={**mcp_headers(key, ""), "accept": "text/event-stream"}
            )
            assert stream.status_code == 405, stream.text
            held = [held_request(address, key) for _ in range(3)]
            try:
                probe = {"chunk_id": served.chunk_id}
                # Their heads reach the server before the probe does (a probe sent
                # too soon would take a held request's place, and that one be refused).
                time.sleep(1)
                refused = mcp_call(client, address, key, "", "research_get_chunk", probe)
                for sock in held:  # still in flight: none of them was answered
                    sock.setblocking(False)
                    with pytest.raises(BlockingIOError):
                        sock.recv(1)
                assert refused.status_code == 429, refused.text
                assert "in flight" in refused.json()["error"]["message"]
                answer = mcp_call(client, address, other, "", "research_get_chunk", probe)
                assert call_result(answer)["result"]["chunk"] is not None
            finally:
                for sock in held:
                    sock.close()
            deadline = time.monotonic() + 10
            while True:  # until the server has seen the held requests go
                answer = mcp_call(client, address, key, "", "research_get_chunk", probe)
                if answer.status_code != 429 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert call_result(answer)["result"]["chunk"] is not None


@pytest.mark.slow
def test_a_server_on_another_loopback_address_answers_requests_addressed_to_it(
    served: Served, tmp_path: Path
) -> None:
    with mcp_http_server(served.db, tmp_path / "server.log", host="127.0.0.2") as address:
        assert address.startswith("http://127.0.0.2:")
        with httpx.Client(timeout=30) as client:
            opened = mcp_open_session(client, address, served.keys["a"])
            assert opened.status_code == 200, opened.text
            answer = mcp_call(
                client, address, served.keys["a"], session_of(opened),
                "research_get_chunk", {"chunk_id": served.chunk_id},
            )  # fmt: skip
            assert call_result(answer)["result"]["chunk"] is not None
            # Another name for it is still refused (DNS rebinding).
            foreign = mcp_open_session(client, address, served.keys["a"], host="evil.example")
            assert foreign.status_code == 421


@asynccontextmanager
async def sdk_session(url: str, key: str) -> AsyncIterator[Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            httpx.AsyncClient(headers={"x-api-key": key}, timeout=30)
        )
        read, write, _ = await stack.enter_async_context(
            streamable_http_client(url, http_client=client)
        )
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        yield session


@pytest.mark.slow
def test_a_client_that_goes_away_leaves_no_traceback(served: Served, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    key = served.keys["a"]
    with mcp_http_server(served.db, log) as address:

        async def come_and_go() -> None:
            # The SDK's client keeps a GET stream open and ends with DELETE.
            for _ in range(3):
                async with sdk_session(address, key) as session:
                    await session.call_tool("research_chunk_search", {"query": "varroa"})

        anyio.run(come_and_go)
        host, port = address.split("/")[2].rsplit(":", 1)
        with httpx.Client(timeout=30) as client:
            session_id = session_of(mcp_open_session(client, address, key))
        headers = mcp_headers(key, session_id)
        call = json.dumps(
            {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
             "params": {"name": "research_chunk_search", "arguments": {"query": "varroa"}}}
        ).encode()  # fmt: skip
        for method, body in (("POST", call), ("GET", b""), ("POST", call[: len(call) // 2])):
            # A request cut off half-way, or answered to a closed socket.
            head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
            if method == "GET":
                head = head.replace(MCP_ACCEPT["accept"], "text/event-stream")
            raw = (
                f"{method} /mcp HTTP/1.1\r\nhost: {host}:{port}\r\n{head}"
                f"content-length: {len(call)}\r\n\r\n"
            ).encode()
            with socket.create_connection((host, int(port))) as sock:
                sock.sendall(raw + body)
                time.sleep(0.2)
        with httpx.Client(timeout=30) as client:
            # Still serving.
            opened = mcp_open_session(client, address, key)
            assert opened.status_code == 200
            # Stateless: no session to end.
            assert client.delete(address, headers=mcp_headers(key, session_id)).status_code == 405
        # The request cut off half-way is logged once the server sees its end.
        wait_for(
            lambda: re.search(r" POST tool=- status=- ms=", log.read_text()),
            "the cut-off request's log line",
        )
    text = log.read_text()
    assert "Traceback" not in text, text
    assert "ClosedResourceError" not in text, text
    assert "ERROR" not in text, text
    # The request cut off half-way is one access-log line: no answer was sent.
    assert re.search(r" POST tool=- status=- ms=", text), text


ACCESS_LINE = re.compile(
    r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) key=(?P<key>[0-9a-f]{12}|-) "
    r"(?P<method>[A-Z]+) tool=(?P<tool>\S+) status=(?P<status>\d{3}|-)"
    r"(?: result=(?P<result>\S+))? ms=(?P<ms>\d+\.\d)$"
)


@pytest.mark.slow
def test_every_http_request_is_one_line_of_the_access_log(
    served: Served, url: str, access_log: Path, server_log: Path
) -> None:
    key = served.keys["b"]
    with httpx.Client(timeout=30) as client:
        assert client.post(url, json={}, headers={**MCP_ACCEPT, "x-api-key": "rsk_x"}).status_code
        session = session_of(mcp_open_session(client, url, key))
        found = mcp_call(client, url, key, session, "research_get_chunk", {"chunk_id": "z"})
        assert found.status_code == 200
        refused = mcp_call(client, url, key, session, "get_chunk_next", {"id": "z", "count": 0})
        assert refused.status_code == 200
        listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
        assert client.post(url, json=listing, headers=mcp_headers(key, session)).status_code == 200
    # A line is written once its answer is sent: the last may still be on its way.
    deadline = time.monotonic() + 10
    last = f"key={served.key_id('b')} POST tool=tools/list"
    while last not in access_log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = access_log.read_text().splitlines()
    parsed = [ACCESS_LINE.match(line) for line in lines]
    assert all(parsed), lines
    rows = [match.groupdict() for match in parsed if match]
    mine = [row for row in rows if row["key"] == served.key_id("b")]
    asked = [(row["method"], row["tool"], row["status"], row["result"]) for row in mine]
    assert ("POST", "-", "200", None) in asked  # initialize
    assert ("POST", "research_get_chunk", "200", "ok") in asked
    assert ("POST", "get_chunk_next", "200", "invalid_input") in asked
    assert ("POST", "tools/list", "200", None) in asked
    assert any(row["key"] == "-" and row["status"] == "401" for row in rows)
    # Never a secret, in either log.
    for name, secret in served.keys.items():
        assert secret.split("_", 2)[2] not in access_log.read_text(), name
        assert secret.split("_", 2)[2] not in server_log.read_text(), name


def test_serve_shows_the_limits_it_applies() -> None:
    from researchstore.cli import serve as serve_command
    from researchstore.serving.mcp_server import HttpLimits

    defaults = HttpLimits()
    assert serve_command.REQUESTS_PER_KEY == defaults.requests_per_key
    assert serve_command.CALLS_PER_KEY == defaults.calls_per_key
    shown = CliRunner().invoke(main, ["serve", "--help"]).output
    for option in ("--access-log", "--requests-per-key", "--calls-per-key", "--workers"):
        assert option in shown
    assert "in each server process" in " ".join(shown.split())
