"""URLs as the fetcher reads them (``httpx.URL``): the https-only check and small helpers.

``check_url`` is the first promise of the fetcher: a plain https URL to a
name that is not local, or ``unsafe_url``. The helpers give the evidence
reader the same URL parsing without importing httpx itself; each raises
``ValueError`` for a URL it cannot parse.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from researchstore.fetch.addresses import host_problem
from researchstore.fetch.errors import unsafe_url

__all__ = [
    "Target",
    "check_url",
    "join_url",
    "url_host",
    "url_path",
    "without_fragment",
]


@dataclass(frozen=True, slots=True)
class Target:
    """A checked URL and the origin it names."""

    url: httpx.URL
    host: str  # ASCII (IDNA), lower case, no trailing dot, no brackets
    port: int


def check_url(url: str) -> Target:
    """Parse ``url`` and refuse anything but a plain https URL to a non-local name."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as error:
        raise unsafe_url(f"not a valid URL: {error}") from None
    if parsed.scheme != "https":
        raise unsafe_url(f"only https URLs are fetched, not {parsed.scheme or 'a relative'!r} ones")
    if parsed.userinfo:
        raise unsafe_url("a URL with credentials in it is not fetched")
    try:
        host = parsed.raw_host.decode("ascii").lower().rstrip(".")
    except UnicodeDecodeError:
        raise unsafe_url("the host name is not valid") from None
    port = parsed.port if parsed.port is not None else 443
    if not host:
        raise unsafe_url("the URL has no host")
    if not 0 < port < 65536:
        raise unsafe_url(f"port {port} is not a valid port")
    problem = host_problem(host)
    if problem:
        raise unsafe_url(f"{host}: {problem}")
    return Target(parsed.copy_with(fragment=None), host, port)


def _parse(url: str) -> httpx.URL:
    try:
        return httpx.URL(url)
    except httpx.InvalidURL as error:
        raise ValueError(str(error)) from None


def join_url(base: str, reference: str) -> str:
    """``reference`` resolved against ``base`` (RFC 3986), as a string."""
    try:
        return str(_parse(base).join(reference))
    except httpx.InvalidURL as error:
        raise ValueError(str(error)) from None


def without_fragment(url: str) -> str:
    """``url`` normalized as httpx writes it, without its ``#fragment``."""
    try:
        return str(_parse(url).copy_with(fragment=None))
    except httpx.InvalidURL as error:
        raise ValueError(str(error)) from None


def url_path(url: str) -> str:
    """The path of ``url`` (percent-decoded, as ``httpx.URL.path``)."""
    return _parse(url).path


def url_host(url: str) -> str:
    """The host of ``url`` (IDNA decoded, as ``httpx.URL.host``)."""
    return _parse(url).host
