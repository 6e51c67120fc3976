"""Who is reading the pages, when they are served beside the MCP endpoint.

Under ``researchstore serve --transport http`` the pages need the same API
keys as ``/mcp``. A program sends its key in the ``x-api-key`` header; a
browser cannot, so a person gives the key once in the login form (a POST,
so the key is never in a URL, a history or a log) and gets it back as a
cookie: ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other
site's page sends it) and limited to the pages' path. Each page then runs as
that key's principal, exactly as a tool call over HTTP does. The key is
never echoed in a page nor written to a log. Standalone
(``researchstore web``) the reader is the local user and no key is asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from starlette.requests import Request

from researchstore.principal import Principal
from researchstore.serving import auth

if TYPE_CHECKING:
    from researchstore.store import Store

#: The header ``/mcp`` reads its key from (``mcp_server.API_KEY_HEADER``, named
#: here too so that the standalone pages never load the MCP SDK; a test keeps
#: the two the same).
API_KEY_HEADER = "x-api-key"
COOKIE = "researchstore_key"
#: The largest login form read (a key is under 100 characters).
MAX_FORM_BYTES = 8192


def presented_key(request: Request) -> str | None:
    """The key a request carries: its ``x-api-key`` header, else the login cookie."""
    return request.headers.get(API_KEY_HEADER) or request.cookies.get(COOKIE) or None


def principal_of(store: Store, key: str | None) -> Principal | None:
    """The principal of a live key (None: no key, or a wrong or revoked one).

    Reading a page is not recorded as a use of the key: no page writes.
    """
    if not key:
        return None
    return auth.authenticate(store, key, touch=False)


async def login_form(request: Request) -> tuple[str, str]:
    """The key and the page to go back to, from a posted login form (bounded)."""
    body = b""
    async for piece in request.stream():
        body += piece
        if len(body) > MAX_FORM_BYTES:
            return "", "/"
    fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=8)
    key = (fields.get("key") or [""])[0].strip()
    return key, safe_next((fields.get("next") or ["/"])[0])


def safe_next(target: str) -> str:
    """A page of this site to go back to after login: a path, never another site."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target
