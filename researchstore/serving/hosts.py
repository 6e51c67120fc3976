"""Which requests a server answers, by the address it is bound to: DNS rebinding refused.

A page in a browser can reach a server on this machine through a name of
its own that it points at 127.0.0.1 (DNS rebinding); the browser then sends
that name as ``Host``, and the page's origin as ``Origin``. So a server
bound to loopback (any address of 127.0.0.0/8 or ``::1``, however spelled:
``127.1``, ``0:0:0:0:0:0:0:1``, ``::ffff:127.0.0.1``; or ``localhost``)
answers a request only if

1. its ``Host`` names loopback: ``localhost`` or a loopback address (an
   IPv6 one in brackets), with any port, else 421;
2. its ``Origin``, if it names a page, is ``http://`` and such a name, else
   403. ``null`` names none: the pages' own forms send it (their
   ``Referrer-Policy: no-referrer`` makes a browser hide their origin).

Bound elsewhere, every request is answered: ``serve`` asks for an API key
there, and ``web`` says as it starts that it asks for none. ``HostGuard``
applies the rule; ``researchstore web`` and ``researchstore serve
--transport http`` both put it in front of everything they serve.
"""

from __future__ import annotations

import ipaddress
import re
import socket

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

#: A ``Host`` header: a name or IPv4 address, or an IPv6 address in brackets; a port.
_HOST = re.compile(r"(?:\[(?P<ipv6>[^\[\]]*)\]|(?P<name>[^:\[\]]*))(?::[0-9]*)?")


def _loopback_address(text: str) -> bool:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback  # Python 3.11's is_loopback says no
    return address.is_loopback


def is_loopback(address: str) -> bool:
    """Whether binding ``address`` binds loopback: ``localhost``, or an address in any
    spelling the socket accepts (``127.1``, ``[::1]``); other names are not resolved."""
    bare = address.strip("[]")
    if bare.lower() == "localhost":
        return True
    if _loopback_address(bare):
        return True
    try:
        # How bind reads an address ipaddress refuses (``127.1``, ``0x7f.1``).
        found = socket.getaddrinfo(bare, None, flags=socket.AI_NUMERICHOST)
    except (OSError, UnicodeError, ValueError):
        return False
    return bool(found) and all(_loopback_address(str(info[4][0])) for info in found)


def names_loopback(host: str) -> bool:
    """Whether a ``Host`` header names this machine: ``localhost`` or a loopback address."""
    match = _HOST.fullmatch(host)
    if match is None:
        return False
    if match["ipv6"] is not None:
        return ":" in match["ipv6"] and _loopback_address(match["ipv6"])
    name = match["name"]
    return name.lower() == "localhost" or _loopback_address(name)


def refusal(host: str | None, origin: str | None) -> tuple[int, str] | None:
    """Why a server bound to loopback refuses a request with these headers (a
    status and a message), or None if it answers it."""
    if host is None or not names_loopback(host):
        return 421, "this server answers only requests addressed to it by a loopback name\n"
    if origin is not None and origin != "null":
        scheme, separator, rest = origin.partition("://")
        if not (separator and scheme.lower() == "http" and names_loopback(rest)):
            return 403, "this server answers only pages of this machine (Origin)\n"
    return None


class HostGuard:
    """ASGI middleware: bound to loopback (``bound``), refuse what ``refusal`` refuses."""

    def __init__(self, app: ASGIApp, *, bound: str) -> None:
        self.app = app
        self.enforced = is_loopback(bound)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # No route takes a websocket: those are refused further in, whatever their Host.
        if self.enforced and scope["type"] == "http":
            headers = Headers(scope=scope)
            refused = refusal(headers.get("host"), headers.get("origin"))
            if refused is not None:
                status, message = refused
                await PlainTextResponse(message, status_code=status)(scope, receive, send)
                return
        await self.app(scope, receive, send)
