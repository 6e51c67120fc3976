"""The bounded, address-checked fetcher against a real HTTPS server on loopback.

The server is the ``site`` fixture (``helpers.serve_site``). The fetcher
refuses loopback by default (tested first); the other tests use the site's
policy, which lets ``127.0.0.1/32`` through explicitly and resolves test
names (``evidence.test``...) to it with a static resolver, so the name-based
checks, SNI and ``Host`` are real.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
import time
import tracemalloc
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from helpers import ARTICLE, Drip, Site

import researchstore.fetch
import researchstore.fetch.client
import researchstore.fetch.guard
from researchstore.fetch import (
    FetchCancelled,
    FetchError,
    FetchPolicy,
    address_problem,
    check_url,
    fetch,
    retry_after_seconds,
)

# -- spies ---------------------------------------------------------------------


@dataclass
class SocketSpy:
    """Every socket created and every connection asked for while installed."""

    sockets: int = 0
    connections: list[tuple[Any, ...]] = field(default_factory=list)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> SocketSpy:
    record = SocketSpy()
    real_socket = socket.socket
    real_connect = socket.create_connection

    class CountingSocket(real_socket):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            record.sockets += 1
            super().__init__(*args, **kwargs)

    def connect(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        record.connections.append(tuple(address))
        return real_connect(address, *args, **kwargs)

    monkeypatch.setattr(socket, "socket", CountingSocket)
    monkeypatch.setattr(socket, "create_connection", connect)
    return record


def refused(url: str, policy: FetchPolicy, **options: Any) -> FetchError:
    with pytest.raises(FetchError) as error:
        fetch(url, policy=policy, **options)
    return error.value


# -- the address guard ---------------------------------------------------------


def test_loopback_is_refused_by_default(site: Site, spy: SocketSpy) -> None:
    default = FetchPolicy(ssl_context=site.client_context)
    for url in (site.url("/page.html", "127.0.0.1"), f"https://[::1]:{site.server.port}/"):
        error = refused(url, default)
        assert (error.status, error.reason) == ("blocked", "unsafe_url"), url
    # A name that resolves to loopback is refused the same way.
    named = replace(default, resolver=site.policy.resolver)
    error = refused(site.url("/page.html"), named)
    assert (error.status, error.reason) == ("blocked", "unsafe_url")
    assert "loopback" in error.message
    assert spy.sockets == 0 and spy.connections == []


UNSAFE_ADDRESSES = [
    "127.0.0.1", "127.255.255.254", "10.1.2.3", "172.16.0.1", "192.168.1.1",
    "169.254.169.254", "169.254.170.2", "169.254.1.1", "100.64.0.1", "100.100.100.200",
    "168.63.129.16", "0.0.0.0", "224.0.0.1", "239.255.255.250", "240.0.0.1",
    "255.255.255.255", "192.0.0.170", "198.18.0.1", "192.0.2.1",
    "::1", "::", "fe80::1", "fe80::1%1", "fc00::1", "fd00:ec2::254", "ff02::1",
    "::ffff:127.0.0.1", "::ffff:8.8.8.8", "::127.0.0.1", "::8.8.8.8",
    "64:ff9b::7f00:1", "64:ff9b::808:808", "64:ff9b:1::a00:1",
    "2002:7f00:1::1", "2002:808:808::1",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:db8::1",
]  # fmt: skip


@pytest.mark.parametrize("address", UNSAFE_ADDRESSES)
def test_every_unsafe_address_is_refused_before_any_socket(
    site: Site, spy: SocketSpy, address: str
) -> None:
    asked: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        asked.append(host)
        return [address]

    policy = FetchPolicy(resolver=resolver, ssl_context=site.client_context)
    error = refused("https://public-looking.example.com/page", policy)
    assert (error.status, error.reason) == ("blocked", "unsafe_url"), error.message
    assert asked == ["public-looking.example.com"]  # resolved once
    assert spy.sockets == 0 and spy.connections == []


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e"]
)
def test_public_addresses_pass_the_guard(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is None


def test_one_unsafe_address_among_public_ones_refuses_the_name(spy: SocketSpy) -> None:
    policy = FetchPolicy(resolver=lambda host, port: ["93.184.216.34", "10.0.0.1"])
    error = refused("https://mixed.example.com/", policy)
    assert error.reason == "unsafe_url" and "10.0.0.1" in error.message
    assert spy.sockets == 0


UNSAFE_URLS = [
    "http://evidence.test/page.html", "ftp://evidence.test/file", "file:///etc/passwd",
    "https://user:secret@evidence.test/", "https://localhost/", "https://LOCALHOST./",
    "https://api.localhost/", "https://metadata.google.internal/computeMetadata/v1/",
    "https://printer.local/", "https://intranet/", "https://router.lan/",
    "https://0x7f.1/", "https://2130706433/", "https://127.1/", "https://017700000001/",
    "https://[::1]/", "https://[::ffff:169.254.169.254]/", "https://169.254.169.254/latest/",
    "https:///nohost", "not a url", "https://evidence.test:0/",
]  # fmt: skip


@pytest.mark.parametrize("url", UNSAFE_URLS)
def test_unsafe_urls_are_refused_before_resolving(spy: SocketSpy, url: str) -> None:
    asked: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["8.8.8.8"]

    error = refused(url, FetchPolicy(resolver=resolver))
    assert (error.status, error.reason) == ("blocked", "unsafe_url"), url
    assert asked == []
    assert spy.sockets == 0 and spy.connections == []


def test_check_url_keeps_the_name_and_port() -> None:
    target = check_url("https://Evidence.Test.:8443/a/b?c=d#frag")
    assert (target.host, target.port) == ("evidence.test", 8443)
    assert "#" not in str(target.url)


# -- pinning -------------------------------------------------------------------


def test_the_connection_is_pinned_to_the_checked_address(site: Site, spy: SocketSpy) -> None:
    answers = iter([["127.0.0.1"], ["10.9.9.9"], ["10.9.9.9"]])
    asked: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        asked.append(host)
        return next(answers)  # a second lookup would get a private address

    policy = replace(site.policy, resolver=rebinding)
    site.server.server_names.clear()
    before = len(site.server.requests)
    fetched = fetch(site.url("/page.html"), policy=policy)
    assert b"Varroa" in fetched.body
    assert asked == ["evidence.test"]
    assert spy.connections == [("127.0.0.1", site.server.port)]
    assert fetched.address == "127.0.0.1"
    # TLS and HTTP still speak the name: SNI, certificate and Host.
    assert site.server.server_names == ["evidence.test"]
    assert site.server.requests[before:] == [(f"evidence.test:{site.server.port}", "/page.html")]


def test_the_certificate_is_checked_against_the_name(site: Site, spy: SocketSpy) -> None:
    error = refused(site.url("/page.html", "nocert.test"), site.policy)
    assert (error.status, error.reason) == ("unavailable", "unavailable")
    assert "TLS" in error.message
    untrusted = replace(site.policy, ssl_context=ssl.create_default_context())
    assert "TLS" in refused(site.url("/page.html"), untrusted).message


def test_environment_proxies_are_ignored(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("SSL_CERT_FILE", "/nonexistent.pem")
    assert b"Varroa" in fetch(site.url("/page.html"), policy=site.policy).body


# -- redirects -----------------------------------------------------------------


def test_redirects_are_followed_and_each_hop_is_checked(site: Site, spy: SocketSpy) -> None:
    fetched = fetch(site.url("/hop-1"), policy=site.policy)
    assert fetched.url == site.url("/page.html")
    assert fetched.redirects == (site.url("/hop-2"), site.url("/hop-3"), site.url("/page.html"))
    assert len(spy.connections) == 4  # one pinned connection per hop

    other = fetch(site.url("/to-other"), policy=site.policy)
    assert other.url == site.url("/page.html", "other.test")

    assert refused(site.url("/loop"), site.policy).reason == "unavailable"
    short = replace(site.policy, max_redirects=2)
    assert "redirects" in refused(site.url("/hop-1"), short).message
    for path in ("/to-http", "/to-localhost", "/to-private"):
        connections = len(spy.connections)
        error = refused(site.url(path), site.policy)
        assert (error.status, error.reason) == ("blocked", "unsafe_url"), path
        assert len(spy.connections) == connections + 1  # only the redirecting hop


# -- statuses ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "status", "reason", "retry_after"),
    [
        ("/401", "blocked", "access_denied", None),
        ("/403", "blocked", "access_denied", None),
        ("/404", "unavailable", "not_found", None),
        ("/410", "unavailable", "not_found", None),
        ("/missing", "unavailable", "not_found", None),
        ("/429", "rate_limited", "rate_limited", 120),
        ("/429-date", "rate_limited", "rate_limited", 1),
        ("/500", "unavailable", "unavailable", None),
        ("/503", "unavailable", "unavailable", 30),
    ],
)
def test_http_statuses(
    site: Site, path: str, status: str, reason: str, retry_after: int | None
) -> None:
    error = refused(site.url(path), site.policy)
    assert (error.status, error.reason, error.retry_after_seconds) == (status, reason, retry_after)
    assert error.url == site.url(path)


def test_retry_after_values() -> None:
    assert retry_after_seconds("120") == 120
    assert retry_after_seconds("0") == 1
    assert retry_after_seconds("999999") == 86_400
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 1
    assert retry_after_seconds("Thu, 01 Jan 2099 00:00:00 GMT") == 86_400
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


# -- bytes and time ------------------------------------------------------------


def test_content_encodings(site: Site) -> None:
    for path in ("/gzip.html", "/deflate.html"):
        assert fetch(site.url(path), policy=site.policy).body == ARTICLE, path
    error = refused(site.url("/brotli.html"), site.policy)
    assert (error.status, error.reason) == ("unsupported", "unsupported_content")


def test_a_compression_bomb_stops_at_the_cap(site: Site) -> None:
    tracemalloc.start()
    try:
        error = refused(site.url("/bomb.html"), site.policy)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (error.status, error.reason) == ("unsupported", "response_too_large")
    assert "decoded" in error.message
    # 40 MiB of decoded data never existed in memory: the cap is 1 MB.
    assert peak < 6 * site.policy.max_bytes, peak


@pytest.fixture
def received(site: Site) -> tuple[FetchPolicy, list[int]]:
    """The site's policy, with a TLS socket that counts the bytes the fetcher reads."""
    counts: list[int] = []

    class CountingSocket(ssl.SSLSocket):
        def recv(self, buflen: int = 1024, flags: int = 0) -> bytes:
            data = super().recv(buflen, flags)
            counts.append(len(data))
            return data

    context = ssl.create_default_context()
    site.ca.configure_trust(context)
    context.sslsocket_class = CountingSocket
    return replace(site.policy, ssl_context=context), counts


def test_huge_bodies_are_cut_off(site: Site, received: tuple[FetchPolicy, list[int]]) -> None:
    policy, counts = received
    declared = refused(site.url("/declared-huge.html"), policy)
    assert (declared.status, declared.reason) == ("unsupported", "response_too_large")
    assert sum(counts) < 10_000  # the headers alone: the declared length refuses it
    counts.clear()
    streamed = refused(site.url("/endless.html"), policy)
    assert (streamed.status, streamed.reason) == ("unsupported", "response_too_large")
    # The cap and one read past it, not the 8 MiB the server would send.
    assert sum(counts) < policy.max_bytes + 2 * 65_536, sum(counts)


class StoppedClock:
    """The fetcher's ``time``: its monotonic clock moves only when a test moves it."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.time = time.time
        self.sleep = time.sleep

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_the_total_deadline_beats_a_slow_drip(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = StoppedClock()
    # The fetcher's deadline is set (client) and checked (guard) on this clock.
    monkeypatch.setattr(researchstore.fetch.client, "time", clock)
    monkeypatch.setattr(researchstore.fetch.guard, "time", clock)
    # Every byte comes soon after the last, so no read ever waits long; each one
    # costs the fetcher an eighth of a second on its clock.
    slow = Drip(limit=10_000, pause=0.002, on_byte=lambda sent: clock.advance(0.125))
    site.server.routes["/drip-deadline"] = slow
    error = refused(site.url("/drip-deadline"), replace(site.policy, timeout_s=1.0))
    assert (error.status, error.reason) == ("unavailable", "timeout")
    assert "total time limit" in error.message
    assert slow.done.wait(30)
    # The deadline ended it: not before 8 bytes (1 s on the fetcher's clock),
    # and long before the drip ran out.
    assert slow.client_left and 8 <= slow.sent < slow.limit, slow.sent


@pytest.mark.slow
def test_cancel_stops_a_fetch_between_reads(site: Site) -> None:
    cancel = threading.Event()
    # Cancelled after the third byte; uncancelled, the drip would outlast the 5 s
    # limit and the fetch would end in a timeout instead.
    slow = Drip(on_byte=lambda sent: sent == 3 and cancel.set())
    site.server.routes["/drip-cancel"] = slow
    with pytest.raises(FetchCancelled) as error:
        fetch(site.url("/drip-cancel"), policy=site.policy, cancel=cancel)
    assert (error.value.status, error.value.reason) == ("cancelled", "cancelled")
    assert slow.done.wait(30)
    assert slow.client_left and 3 <= slow.sent < slow.limit, slow.sent


def test_a_body_cut_short_is_kept_and_marked(site: Site) -> None:
    fetched = fetch(site.url("/truncated.html"), policy=site.policy)
    assert fetched.complete is False
    assert b"first half arrived" in fetched.body


# -- no egress -----------------------------------------------------------------


def test_egress_turned_off_touches_nothing(spy: SocketSpy) -> None:
    asked: list[str] = []
    policy = FetchPolicy(egress=False, resolver=lambda host, port: asked.append(host) or [])
    error = refused("https://example.com/", policy)
    assert (error.status, error.reason) == ("unavailable", "egress_unavailable")
    assert asked == [] and spy.sockets == 0
    assert FetchPolicy.from_env({"RESEARCHSTORE_EGRESS": "off"}).egress is False


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (
            socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"),
            "egress_unavailable",
        ),
        (socket.gaierror(socket.EAI_FAIL, "Non-recoverable failure"), "egress_unavailable"),
        (OSError(101, "Network is unreachable"), "egress_unavailable"),
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "not_found"),
    ],
)
def test_resolution_failures(spy: SocketSpy, failure: OSError, reason: str) -> None:
    def resolver(host: str, port: int) -> list[str]:
        raise failure

    error = refused("https://example.com/", FetchPolicy(resolver=resolver))
    assert (error.status, error.reason) == ("unavailable", reason)
    assert spy.sockets == 0


@pytest.mark.slow
def test_a_resolver_that_never_answers_is_no_egress() -> None:
    release = threading.Event()
    answered = threading.Event()

    def hanging(host: str, port: int) -> list[str]:
        release.wait(5)
        answered.set()
        return ["8.8.8.8"]

    try:
        error = refused("https://example.com/", FetchPolicy(resolver=hanging, dns_timeout_s=0.3))
        gave_up_first = not answered.is_set()
    finally:
        release.set()
    assert (error.status, error.reason) == ("unavailable", "egress_unavailable")
    assert "no DNS answer for example.com within 0.3s" in error.message
    assert gave_up_first  # the fetch did not wait for the resolver


def test_an_unreachable_network_is_no_egress(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        raise OSError(101, "Network is unreachable")

    monkeypatch.setattr(socket, "create_connection", unreachable)
    error = refused(site.url("/page.html"), site.policy)
    assert (error.status, error.reason) == ("unavailable", "egress_unavailable")


def test_policy_from_environment(site: Site) -> None:
    policy = FetchPolicy.from_env(
        {
            "RESEARCHSTORE_FETCH_ALLOW": "127.0.0.1/32, ::1/128",
            "RESEARCHSTORE_FETCH_CA_BUNDLE": site.ca_file,
            "RESEARCHSTORE_FETCH_RESOLVE": "evidence.test=127.0.0.1,x.test=127.0.0.2",
            "RESEARCHSTORE_FETCH_TIMEOUT": "7.5",
            "RESEARCHSTORE_FETCH_MAX_BYTES": "1234",
        }
    )
    assert policy.allowed_networks == (
        ipaddress.ip_network("127.0.0.1/32"),
        ipaddress.ip_network("::1/128"),
    )
    assert (policy.timeout_s, policy.max_bytes, policy.egress) == (7.5, 1234, True)
    assert policy.resolver("evidence.test", 443) == ["127.0.0.1"]
    assert b"Varroa" in fetch(site.url("/page.html"), policy=replace(policy, max_bytes=10**6)).body
    assert FetchPolicy.from_env({}) == replace(FetchPolicy(), resolver=FetchPolicy().resolver)


def test_the_package_keeps_one_socket_path() -> None:
    """Only the pinned backend opens connections: no other socket call in the package."""
    package = Path(researchstore.fetch.__file__).parent
    sources = {path.name: path.read_text() for path in package.glob("*.py")}
    connects = {name for name, source in sources.items() if "socket.create_connection(" in source}
    assert connects == {"transport.py"}
    assert sources["transport.py"].count("socket.create_connection(") == 1
    assert not any("socket.socket(" in source for source in sources.values())
