"""The bounded, address-checked HTTPS fetcher behind evidence retrieval.

``fetch(url, policy=...)`` returns a ``Fetched`` body or raises ``FetchError``
with the retrieval ``status`` and ``reason`` it stands for. What it promises:

1. **https only**, no credentials in the URL, and never a local-looking name
   (``localhost``, ``*.localhost``, ``*.local``, ``*.internal``, a single
   label, a numeric trick such as ``0x7f.1``).
2. **Every resolved address is public.** The name is resolved once, with
   ``getaddrinfo`` under a time limit. Loopback, private, link-local, CGNAT,
   multicast, reserved, unspecified and cloud-metadata addresses are refused,
   and so is IPv4 hidden in IPv6 (mapped, compatible, NAT64, 6to4, Teredo).
   A refusal is ``blocked`` / ``unsafe_url`` and no socket is created.
   ``FetchPolicy.allowed_networks`` lets named networks through on purpose
   (tests allow ``127.0.0.1/32``); nothing else can.
3. **The connection is pinned** to the addresses that were checked: a custom
   ``httpcore`` network backend connects to them and ignores the name, while
   the URL keeps the name, so TLS SNI, certificate verification and ``Host``
   all use it. A DNS answer that changes between check and connect changes
   nothing.
4. **Redirects are followed here**, at most ``max_redirects``, each target
   checked as in 1-3 (an ``http://`` hop is ``unsafe_url``).
5. **Bounded bytes**: a ``Content-Length`` over ``max_bytes`` is refused
   before reading; raw and decoded bytes are counted while streaming, and
   gzip / deflate are decoded here with ``max_length``, so a compression bomb
   stops at the cap without ever expanding in memory.
6. **A total deadline** over resolution, connect, TLS and every read; a slow
   drip cannot stretch it. A ``threading.Event`` cancels between reads.
7. **Nothing from the environment**: no proxies, no ``.netrc``
   (``trust_env=False``); the only settings are the policy's.

The exception tree::

    FetchError              status / reason of the retrieval result
     └── FetchCancelled     status "cancelled", reason "cancelled"
"""

from __future__ import annotations

import errno
import ipaddress
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import httpcore
import httpx

from researchstore.inflate import ContentTooLarge, UnsupportedContent, body_decoder

__all__ = [
    "FetchCancelled",
    "FetchError",
    "FetchPolicy",
    "Fetched",
    "address_problem",
    "check_url",
    "fetch",
    "host_problem",
    "system_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
#: ``(host, port)`` → the addresses it resolves to, as strings.
Resolver = Callable[[str, int], Sequence[str]]

DEFAULT_MAX_BYTES = 5 * 1024 * 1024
DEFAULT_USER_AGENT = "researchstore-evidence/1 (+bounded public retrieval)"
REDIRECT_CODES = frozenset((301, 302, 303, 307, 308))
_MAX_LOCATION = 8192
#: How often a blocked read wakes up to look at the cancel event.
_POLL_S = 0.1

_METADATA = tuple(
    ipaddress.ip_network(net)
    for net in (
        "169.254.169.254/32",  # AWS, GCP, Azure, OpenStack instance metadata
        "169.254.170.2/32",  # AWS ECS task metadata
        "168.63.129.16/32",  # Azure wireserver (a public address)
        "100.100.100.200/32",  # Alibaba Cloud metadata
        "fd00:ec2::254/128",  # AWS metadata over IPv6
    )
)
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_LOCAL_SUFFIXES = (
    ".localhost", ".local", ".localdomain", ".internal", ".intranet", ".lan", ".home.arpa",
    ".corp", ".private",
)  # fmt: skip
_NUMERIC_LABEL = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")
_EGRESS_ERRNOS = frozenset(
    (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN, errno.EADDRNOTAVAIL,
     errno.EACCES, errno.EPERM)
)  # fmt: skip


class FetchError(Exception):
    """The fetch did not yield content; ``status`` and ``reason`` say why, as the result will."""

    def __init__(
        self,
        status: str,
        reason: str,
        message: str,
        *,
        url: str | None = None,
        retry_after_seconds: int | None = None,
        http_status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        #: The URL that answered, when a response came back at all.
        self.url = url
        self.retry_after_seconds = retry_after_seconds
        self.http_status = http_status


class FetchCancelled(FetchError):
    """The caller's cancel event was set while the fetch was under way."""

    def __init__(self) -> None:
        super().__init__("cancelled", "cancelled", "the retrieval was cancelled")


def unsafe(message: str) -> FetchError:
    return FetchError("blocked", "unsafe_url", message)


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``getaddrinfo`` gives for ``host`` (TCP), in its order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def static_resolver(table: Mapping[str, Sequence[str]], fallback: Resolver | None) -> Resolver:
    """Answer ``table``'s names from it (like curl's ``--resolve``), others from ``fallback``."""
    names = {name.lower().rstrip("."): list(addresses) for name, addresses in table.items()}

    def resolve(host: str, port: int) -> Sequence[str]:
        if host in names:
            return names[host]
        if fallback is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return fallback(host, port)

    return resolve


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    """Every limit and switch of the fetcher; the defaults are the safe ones."""

    #: The most bytes read from the wire, and the most after decoding.
    max_bytes: int = DEFAULT_MAX_BYTES
    max_redirects: int = 5
    #: The total deadline of one retrieval: DNS, connects, TLS, every read.
    timeout_s: float = 30.0
    connect_timeout_s: float = 10.0
    #: A resolver that has not answered by then counts as no egress.
    dns_timeout_s: float = 5.0
    #: Networks let through although not public. Empty: only public addresses.
    allowed_networks: tuple[IPNetwork, ...] = ()
    resolver: Resolver = system_resolver
    #: Trust roots for TLS; None uses httpx's default (certifi).
    ssl_context: ssl.SSLContext | None = None
    #: False: no network at all (every fetch is ``egress_unavailable``).
    egress: bool = True
    user_agent: str = DEFAULT_USER_AGENT

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> FetchPolicy:
        """The policy that the process environment asks for.

        ``RESEARCHSTORE_EGRESS=off`` turns the network off.
        ``RESEARCHSTORE_FETCH_ALLOW`` lists networks let through although not
        public (``127.0.0.1/32,::1/128``): for a local test server, never for
        production. ``RESEARCHSTORE_FETCH_CA_BUNDLE`` names a PEM file of
        trust roots. ``RESEARCHSTORE_FETCH_RESOLVE`` pins names to addresses
        (``host=1.2.3.4,other=5.6.7.8``); those addresses are still checked.
        ``RESEARCHSTORE_FETCH_TIMEOUT`` and ``RESEARCHSTORE_FETCH_MAX_BYTES``
        change the limits.
        """
        env = os.environ if environ is None else environ
        options: dict[str, Any] = {}
        if env.get("RESEARCHSTORE_EGRESS", "").strip().lower() in ("0", "off", "false", "no"):
            options["egress"] = False
        allow = env.get("RESEARCHSTORE_FETCH_ALLOW", "").strip()
        if allow:
            options["allowed_networks"] = tuple(
                ipaddress.ip_network(item.strip(), strict=False)
                for item in allow.split(",")
                if item.strip()
            )
        bundle = env.get("RESEARCHSTORE_FETCH_CA_BUNDLE", "").strip()
        if bundle:
            options["ssl_context"] = ssl.create_default_context(cafile=bundle)
        pins = env.get("RESEARCHSTORE_FETCH_RESOLVE", "").strip()
        if pins:
            table: dict[str, list[str]] = {}
            for item in pins.split(","):
                name, _, address = item.partition("=")
                if name.strip() and address.strip():
                    table.setdefault(name.strip(), []).append(address.strip())
            options["resolver"] = static_resolver(table, system_resolver)
        if env.get("RESEARCHSTORE_FETCH_TIMEOUT", "").strip():
            options["timeout_s"] = float(env["RESEARCHSTORE_FETCH_TIMEOUT"])
        if env.get("RESEARCHSTORE_FETCH_MAX_BYTES", "").strip():
            options["max_bytes"] = int(env["RESEARCHSTORE_FETCH_MAX_BYTES"])
        return cls(**options)


@dataclass(frozen=True, slots=True)
class Fetched:
    """A successful (2xx) response, its body read and decoded within the limits."""

    url: str
    status_code: int
    #: Lower-case ``type/subtype`` from ``Content-Type``, without parameters.
    media_type: str | None
    charset: str | None
    body: bytes
    #: False when the server closed the connection before the end of the body.
    complete: bool = True
    redirects: tuple[str, ...] = ()
    #: The address the connection went to (one of the checked ones).
    address: str = ""
    headers: dict[str, str] = field(default_factory=dict)


# -- the address guard ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    url: httpx.URL
    host: str  # ASCII (IDNA), lower case, no trailing dot, no brackets
    port: int


def check_url(url: str) -> Target:
    """Parse ``url`` and refuse anything but a plain https URL to a non-local name."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as error:
        raise unsafe(f"not a valid URL: {error}") from None
    if parsed.scheme != "https":
        raise unsafe(f"only https URLs are fetched, not {parsed.scheme or 'a relative'!r} ones")
    if parsed.userinfo:
        raise unsafe("a URL with credentials in it is not fetched")
    try:
        host = parsed.raw_host.decode("ascii").lower().rstrip(".")
    except UnicodeDecodeError:
        raise unsafe("the host name is not valid") from None
    port = parsed.port if parsed.port is not None else 443
    if not host:
        raise unsafe("the URL has no host")
    if not 0 < port < 65536:
        raise unsafe(f"port {port} is not a valid port")
    problem = host_problem(host)
    if problem:
        raise unsafe(f"{host}: {problem}")
    return Target(parsed.copy_with(fragment=None), host, port)


def host_problem(host: str) -> str | None:
    """Why a host name (not an address) is never fetched, or None."""
    if _literal(host) is not None:
        return None  # an address: checked like any resolved one
    if host == "localhost" or host.endswith(_LOCAL_SUFFIXES) or host == "localhost.localdomain":
        return "a local name"
    labels = host.split(".")
    if len(labels) < 2:
        return "a single-label name resolves inside the local network"
    if all(_NUMERIC_LABEL.match(label) for label in labels):
        return "a numeric host that is not a plain address"
    return None


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def address_problem(address: IPAddress, allowed: Iterable[IPNetwork] = ()) -> str | None:
    """Why ``address`` must not be connected to, or None when it is public (or allowed)."""
    for network in allowed:
        if address.version == network.version and address in network:
            return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return "an IPv4-mapped IPv6 address"
        if address.sixtofour is not None:
            return "a 6to4 address (IPv4 inside IPv6)"
        if address.teredo is not None:
            return "a Teredo address (IPv4 inside IPv6)"
        if any(address in network for network in _NAT64):
            return "a NAT64 address (IPv4 inside IPv6)"
        if address in _IPV4_COMPATIBLE and not address.is_unspecified and not address.is_loopback:
            return "an IPv4-compatible IPv6 address"
    checks = (
        (any(address.version == n.version and address in n for n in _METADATA),
         "a cloud metadata address"),
        (address.is_loopback, "a loopback address"),
        (address.is_unspecified, "the unspecified address"),
        (address.is_link_local, "a link-local address"),
        (address.version == 4 and address in _CGNAT, "a shared (CGNAT) address"),
        (address.is_multicast, "a multicast address"),
        (address.is_private, "a private address"),
        (address.is_reserved, "a reserved address"),
        (not address.is_global, "not a globally reachable address"),
    )  # fmt: skip
    for refused, why in checks:
        if refused:
            return why
    return None


def _resolve(target: Target, policy: FetchPolicy, guard: _Guard) -> list[str]:
    """Resolve once, within the DNS limit, and check every address; refuse on any bad one."""
    literal = _literal(target.host)
    if literal is not None:
        addresses = [str(literal)]
    else:
        addresses = _run_resolver(policy, target, guard)
    if not addresses:
        raise FetchError("unavailable", "not_found", f"{target.host} has no address")
    checked = []
    for text in addresses:
        address = _literal(text.split("%")[0]) if "%" in text else _literal(text)
        if address is None:
            raise unsafe(f"{target.host} resolved to something that is not an address: {text!r}")
        problem = address_problem(address, policy.allowed_networks)
        if problem:
            raise unsafe(f"{target.host} resolves to {address}, {problem}")
        checked.append(str(address))
    return checked


def _run_resolver(policy: FetchPolicy, target: Target, guard: _Guard) -> list[str]:
    answer: list[Sequence[str]] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            answer.append(policy.resolver(target.host, target.port))
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
            failure.append(error)

    limit = min(policy.dns_timeout_s, guard.remaining())
    # getaddrinfo cannot be interrupted: a daemon thread lets the deadline win.
    thread = threading.Thread(target=work, name="researchstore-resolve", daemon=True)
    thread.start()
    thread.join(max(limit, 0.0))
    if thread.is_alive():
        if guard.remaining() <= 0:
            raise FetchError("unavailable", "timeout", "the total time limit ran out")
        raise FetchError(
            "unavailable",
            "egress_unavailable",
            f"no DNS answer for {target.host} within {policy.dns_timeout_s:g}s",
        )
    if failure:
        error = failure[0]
        if isinstance(error, socket.gaierror):
            if error.errno in (
                socket.EAI_NONAME,
                getattr(socket, "EAI_NODATA", None),
                getattr(socket, "EAI_ADDRFAMILY", None),
            ):
                raise FetchError(
                    "unavailable", "not_found", f"{target.host}: no such host ({error})"
                ) from None
            raise FetchError(
                "unavailable", "egress_unavailable", f"{target.host} could not be resolved: {error}"
            ) from None
        if isinstance(error, OSError):
            raise FetchError(
                "unavailable", "egress_unavailable", f"{target.host} could not be resolved: {error}"
            ) from None
        raise error
    return [str(address) for address in answer[0]]


# -- the pinned, deadline-bound connection -------------------------------------


class _Guard:
    """The total deadline and the cancel event, consulted before every socket wait."""

    def __init__(self, deadline: float, cancel: threading.Event | None) -> None:
        self.deadline = deadline
        self.cancel = cancel

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise FetchCancelled()
        if self.remaining() <= 0:
            raise FetchError("unavailable", "timeout", "the total time limit ran out")

    def wait(self, timeout: float | None, *, poll: bool = True) -> float:
        """How long the next socket operation may block."""
        self.check()
        wait = self.remaining()
        if timeout is not None:
            wait = min(wait, timeout)
        if poll and self.cancel is not None:
            wait = min(wait, _POLL_S)
        return max(wait, 0.001)


class _GuardedStream(httpcore.NetworkStream):
    """A socket whose every read and write honours the guard (deadline, cancel)."""

    def __init__(self, sock: socket.socket, guard: _Guard) -> None:
        self._sock = sock
        self._guard = guard

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        started = time.monotonic()
        while True:
            left = None if timeout is None else timeout - (time.monotonic() - started)
            if left is not None and left <= 0:
                raise httpcore.ReadTimeout("read timed out")
            self._sock.settimeout(self._guard.wait(left))
            try:
                return self._sock.recv(max_bytes)
            except TimeoutError:
                continue  # woke up to look at the deadline and the cancel event
            except OSError as error:
                raise httpcore.ReadError(str(error)) from error

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        while buffer:
            self._sock.settimeout(self._guard.wait(timeout, poll=False))
            try:
                sent = self._sock.send(buffer)
            except TimeoutError as error:
                raise httpcore.WriteTimeout(str(error)) from error
            except OSError as error:
                raise httpcore.WriteError(str(error)) from error
            buffer = buffer[sent:]

    def close(self) -> None:
        self._sock.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        self._sock.settimeout(self._guard.wait(timeout, poll=False))
        try:
            tls = ssl_context.wrap_socket(self._sock, server_hostname=server_hostname)
        except TimeoutError as error:
            self._sock.close()
            self._guard.check()
            raise httpcore.ConnectTimeout(str(error)) from error
        except (ssl.SSLError, OSError) as error:
            self._sock.close()
            raise httpcore.ConnectError(str(error)) from error
        return _GuardedStream(tls, self._guard)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object" and isinstance(self._sock, ssl.SSLSocket):
            return self._sock._sslobj  # type: ignore[attr-defined]  # as httpcore does
        if info == "server_addr":
            return self._sock.getpeername()
        if info == "client_addr":
            return self._sock.getsockname()
        if info == "socket":
            return self._sock
        if info == "is_readable":
            return _is_readable(self._sock)
        return None


def _is_readable(sock: socket.socket) -> bool:
    import select

    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


class _PinnedBackend(httpcore.NetworkBackend):
    """Connects to the checked addresses, whatever name httpcore asks for."""

    def __init__(self, target: Target, addresses: list[str], guard: _Guard) -> None:
        self._target = target
        self._addresses = addresses
        self._guard = guard
        self.connected_to = ""
        #: Why the last connect failed (httpcore's pool drops the cause on re-raise).
        self.failure: OSError | None = None

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        if host.strip("[]").lower().rstrip(".") != self._target.host or port != self._target.port:
            # Only the checked origin is ever connected to (no proxy, no other host).
            raise httpcore.ConnectError(f"refusing to connect to unchecked {host}:{port}")
        last: OSError | None = None
        for address in self._addresses:
            try:
                sock = socket.create_connection(
                    (address, port), timeout=self._guard.wait(timeout, poll=False)
                )
            except TimeoutError as error:
                self._guard.check()
                last = self.failure = error
                continue
            except OSError as error:
                last = self.failure = error
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.connected_to = address
            return _GuardedStream(sock, self._guard)
        if isinstance(last, TimeoutError):
            raise httpcore.ConnectTimeout(str(last)) from last
        raise httpcore.ConnectError(str(last)) from last

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are never used for retrieval")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class _PinnedTransport(httpx.HTTPTransport):
    """httpx's own transport over a pool whose only backend is ``_PinnedBackend``."""

    def __init__(self, backend: _PinnedBackend, ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=ssl_context, trust_env=False, http2=False, retries=0)
        # httpx offers no switch for the network backend; replacing its pool
        # keeps httpx's request/response mapping and exception translation.
        self._pool.close()
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=1,
            max_keepalive_connections=0,
            http1=True,
            http2=False,
            retries=0,
            network_backend=backend,
        )


# -- fetching ------------------------------------------------------------------

_DEFAULT_CONTEXT: ssl.SSLContext | None = None


def _ssl_context(policy: FetchPolicy) -> ssl.SSLContext:
    global _DEFAULT_CONTEXT
    if policy.ssl_context is not None:
        return policy.ssl_context
    if _DEFAULT_CONTEXT is None:
        _DEFAULT_CONTEXT = httpx.create_ssl_context(trust_env=False)
    return _DEFAULT_CONTEXT


def fetch(
    url: str,
    *,
    policy: FetchPolicy,
    accept: str = "*/*",
    headers: Mapping[str, str] | None = None,
    deadline: float | None = None,
    cancel: threading.Event | None = None,
) -> Fetched:
    """GET ``url`` within ``policy``; a 2xx body or ``FetchError``.

    ``deadline`` (``time.monotonic()``) lets several fetches share one limit.
    """
    if not policy.egress:
        raise FetchError(
            "unavailable",
            "egress_unavailable",
            "network access is turned off (RESEARCHSTORE_EGRESS)",
        )
    guard = _Guard(
        deadline if deadline is not None else time.monotonic() + policy.timeout_s, cancel
    )
    request_headers = {
        "User-Agent": policy.user_agent,
        "Accept": accept,
        "Accept-Encoding": "gzip, deflate",
        **(headers or {}),
    }
    redirects: list[str] = []
    current = url
    for _ in range(policy.max_redirects + 1):
        guard.check()
        target = check_url(current)
        addresses = _resolve(target, policy, guard)
        guard.check()
        outcome = _get(target, addresses, policy, guard, request_headers)
        if isinstance(outcome, Fetched):
            return Fetched(
                url=outcome.url,
                status_code=outcome.status_code,
                media_type=outcome.media_type,
                charset=outcome.charset,
                body=outcome.body,
                complete=outcome.complete,
                redirects=tuple(redirects),
                address=outcome.address,
                headers=outcome.headers,
            )
        redirects.append(outcome)
        current = outcome
    raise FetchError(
        "unavailable", "unavailable", f"more than {policy.max_redirects} redirects", url=current
    )


def _get(
    target: Target,
    addresses: list[str],
    policy: FetchPolicy,
    guard: _Guard,
    headers: Mapping[str, str],
) -> Fetched | str:
    """One request to one checked origin: the body, or the next URL of a redirect."""
    backend = _PinnedBackend(target, addresses, guard)
    transport = _PinnedTransport(backend, _ssl_context(policy))
    timeout = httpx.Timeout(connect=policy.connect_timeout_s, read=None, write=10.0, pool=1.0)
    url = str(target.url)
    with httpx.Client(
        transport=transport, trust_env=False, follow_redirects=False, timeout=timeout
    ) as client:
        try:
            response = client.send(
                client.build_request("GET", target.url, headers=headers), stream=True
            )
        except httpx.HTTPError as error:
            raise _transport_failure(error, guard, target, backend=backend) from None
        try:
            return _read_response(response, url, policy, guard, backend)
        finally:
            response.close()


def _read_response(
    response: httpx.Response,
    url: str,
    policy: FetchPolicy,
    guard: _Guard,
    backend: _PinnedBackend,
) -> Fetched | str:
    code = response.status_code
    if code in REDIRECT_CODES:
        location = response.headers.get("location", "").strip()
        if not location or len(location) > _MAX_LOCATION:
            raise FetchError(
                "unavailable",
                "unavailable",
                f"HTTP {code} without a usable Location",
                url=url,
                http_status=code,
            )
        try:
            return str(httpx.URL(url).join(location).copy_with(fragment=None))
        except (httpx.InvalidURL, ValueError) as error:
            raise unsafe(f"redirect to an invalid URL: {error}") from None
    if not 200 <= code < 300:
        raise _status_failure(response, url)
    length = response.headers.get("content-length", "").strip()
    if length.isdigit() and int(length) > policy.max_bytes:
        raise FetchError(
            "unsupported",
            "response_too_large",
            f"the response declares {length} bytes; the limit is {policy.max_bytes}",
            url=url,
            http_status=code,
        )
    raw_total = 0
    complete = True
    try:
        decoder = body_decoder(response.headers.get("content-encoding", ""), policy.max_bytes)
        try:
            for raw in response.iter_raw():
                raw_total += len(raw)
                if raw_total > policy.max_bytes:
                    raise FetchError(
                        "unsupported",
                        "response_too_large",
                        f"the response is over {policy.max_bytes} bytes",
                        url=url,
                        http_status=code,
                    )
                decoder.feed(raw)
        except httpx.RemoteProtocolError as error:
            # The server closed before the end of the body: what came is kept.
            if raw_total == 0:
                raise FetchError(
                    "unavailable",
                    "unavailable",
                    f"the connection closed before the body: {error}",
                    url=url,
                    http_status=code,
                ) from None
            complete = False
        except httpx.HTTPError as error:
            raise _transport_failure(error, guard, None, url=url) from None
        body = decoder.finish(strict=complete)
    except ContentTooLarge:
        raise FetchError(
            "unsupported",
            "response_too_large",
            f"the decoded response is over {policy.max_bytes} bytes",
            url=url,
        ) from None
    except UnsupportedContent as error:
        raise FetchError("unsupported", "unsupported_content", str(error), url=url) from None
    media_type, charset = _content_type(response.headers.get("content-type", ""))
    return Fetched(
        url=url,
        status_code=code,
        media_type=media_type,
        charset=charset,
        body=body,
        complete=complete,
        address=backend.connected_to,
        headers={key.lower(): value for key, value in response.headers.items()},
    )


def _content_type(value: str) -> tuple[str | None, str | None]:
    media_type, _, parameters = value.partition(";")
    media_type = media_type.strip().lower() or None
    charset = None
    for parameter in parameters.split(";"):
        name, _, parameter_value = parameter.partition("=")
        if name.strip().lower() == "charset" and parameter_value.strip():
            charset = parameter_value.strip().strip("\"'").lower()
    return media_type, charset


def retry_after_seconds(value: str | None, *, now: float | None = None) -> int | None:
    """``Retry-After`` (seconds or an HTTP date) as whole seconds in 1..86400, or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        seconds = int(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None or when.tzinfo is None:
            return None
        seconds = int(when.timestamp() - (time.time() if now is None else now) + 0.999)
    return min(max(seconds, 1), 86_400)


def _status_failure(response: httpx.Response, url: str) -> FetchError:
    code = response.status_code
    retry_after = retry_after_seconds(response.headers.get("retry-after"))
    message = f"HTTP {code} from {url}"
    if code in (401, 403, 407, 451):
        return FetchError("blocked", "access_denied", message, url=url, http_status=code)
    if code in (404, 410):
        return FetchError("unavailable", "not_found", message, url=url, http_status=code)
    if code == 429:
        return FetchError(
            "rate_limited",
            "rate_limited",
            message,
            url=url,
            retry_after_seconds=retry_after,
            http_status=code,
        )
    if code == 408 or code == 504:
        return FetchError(
            "unavailable",
            "timeout",
            message,
            url=url,
            retry_after_seconds=retry_after if code == 504 else None,
            http_status=code,
        )
    return FetchError(
        "unavailable",
        "unavailable",
        message,
        url=url,
        retry_after_seconds=retry_after if code >= 500 else None,
        http_status=code,
    )


def _transport_failure(
    error: httpx.HTTPError,
    guard: _Guard,
    target: Target | None,
    *,
    url: str | None = None,
    backend: _PinnedBackend | None = None,
) -> FetchError:
    """A network-level failure as a status and reason (the guard's own errors pass through)."""
    guard.check()  # the deadline or a cancel explains it best
    where = target.host if target is not None else url
    if isinstance(error, httpx.TimeoutException):
        return FetchError("unavailable", "timeout", f"{where}: timed out ({error})", url=url)
    cause: BaseException | None = error
    if (
        backend is not None
        and backend.failure is not None
        and isinstance(error, httpx.ConnectError)
    ):
        cause = backend.failure
    while cause is not None:
        if isinstance(cause, ssl.SSLError):
            return FetchError(
                "unavailable", "unavailable", f"{where}: TLS failed ({cause})", url=url
            )
        if isinstance(cause, OSError) and cause.errno in _EGRESS_ERRNOS:
            return FetchError(
                "unavailable",
                "egress_unavailable",
                f"{where}: the network is unreachable ({cause})",
                url=url,
            )
        cause = cause.__cause__ or cause.__context__
    return FetchError("unavailable", "unavailable", f"{where}: {error}", url=url)
