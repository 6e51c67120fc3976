"""The default ``Fetcher``: a bounded, address-checked HTTPS GET over httpx.

``fetch(url, policy=...)`` returns a ``Fetched`` body or raises ``FetchError``
with the retrieval ``status`` and ``reason`` it stands for. What it promises:

1. **https only**, no credentials in the URL, and never a local-looking name
   (``localhost``, ``*.localhost``, ``*.local``, ``*.internal``, a single
   label, a numeric trick such as ``0x7f.1``): ``urls.check_url``.
2. **Every resolved address is public** (``addresses.resolve_addresses``).
   The name is resolved once, with ``getaddrinfo`` under a time limit.
   Loopback, private, link-local, CGNAT, multicast, reserved, unspecified
   and cloud-metadata addresses are refused, and so is IPv4 hidden in IPv6
   (mapped, compatible, NAT64, 6to4, Teredo). A refusal is ``blocked`` /
   ``unsafe_url`` and no socket is created. ``FetchPolicy.allowed_networks``
   lets named networks through on purpose (tests allow ``127.0.0.1/32``);
   nothing else can.
3. **The connection is pinned** to the addresses that were checked
   (``transport.PinnedBackend``): it connects to them and ignores the name,
   while the URL keeps the name, so TLS SNI, certificate verification and
   ``Host`` all use it. A DNS answer that changes between check and connect
   changes nothing.
4. **Redirects are followed here**, at most ``max_redirects``, each target
   checked as in 1-3 (an ``http://`` hop is ``unsafe_url``).
5. **Bounded bytes**: a ``Content-Length`` over ``max_bytes`` is refused
   before reading; raw and decoded bytes are counted while streaming, and
   gzip / deflate are decoded here with ``max_length`` (``inflate``), so a
   compression bomb stops at the cap without ever expanding in memory.
6. **A total deadline** over resolution, connect, TLS and every read
   (``guard.Guard``); a slow drip cannot stretch it. A ``threading.Event``
   cancels between reads.
7. **Nothing from the environment**: no proxies, no ``.netrc``
   (``trust_env=False``); the only settings are the policy's.
"""

from __future__ import annotations

import errno
import ssl
import threading
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime

import httpx

from researchstore.fetch.addresses import resolve_addresses
from researchstore.fetch.errors import FetchError, unsafe_url
from researchstore.fetch.fetcher import Fetched
from researchstore.fetch.guard import Guard
from researchstore.fetch.inflate import ContentTooLarge, UnsupportedContent, body_decoder
from researchstore.fetch.policy import FetchPolicy
from researchstore.fetch.transport import PinnedBackend, PinnedTransport
from researchstore.fetch.urls import Target, check_url

__all__ = ["REDIRECT_CODES", "fetch", "retry_after_seconds"]

REDIRECT_CODES = frozenset((301, 302, 303, 307, 308))
_MAX_LOCATION = 8192
_EGRESS_ERRNOS = frozenset(
    (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN, errno.EADDRNOTAVAIL,
     errno.EACCES, errno.EPERM)
)  # fmt: skip

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
    guard = Guard(deadline if deadline is not None else time.monotonic() + policy.timeout_s, cancel)
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
        addresses = resolve_addresses(target.host, target.port, policy, guard)
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
    guard: Guard,
    headers: Mapping[str, str],
) -> Fetched | str:
    """One request to one checked origin: the body, or the next URL of a redirect."""
    backend = PinnedBackend(target.host, target.port, addresses, guard)
    transport = PinnedTransport(backend, _ssl_context(policy))
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
    guard: Guard,
    backend: PinnedBackend,
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
            raise unsafe_url(f"redirect to an invalid URL: {error}") from None
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
    declared, _, parameters = value.partition(";")
    media_type = declared.strip().lower() or None
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
    guard: Guard,
    target: Target | None,
    *,
    url: str | None = None,
    backend: PinnedBackend | None = None,
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
