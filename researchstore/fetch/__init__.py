"""The bounded, address-checked HTTPS fetcher behind evidence retrieval.

The layout, one concept per module:

- ``errors``: the ``FetchError`` tree (status and reason of a result);
- ``policy``: ``FetchPolicy``, every limit and switch, and the resolvers;
- ``addresses``: which names and addresses are never contacted;
- ``guard``: one fetch's total deadline and cancel event;
- ``fetcher``: the seam, ``Fetcher`` (a protocol) and ``Fetched``;
- ``urls``: the https-only URL check and URL helpers (httpx);
- ``inflate``: Content-Encoding undone under a byte cap;
- ``transport``: the pinned connection under httpx (httpcore);
- ``client``: ``fetch``, the default ``Fetcher`` (httpx).

Importing this package does not import httpx: ``fetch``, ``check_url`` and
``retry_after_seconds`` are loaded on first use, so a policy or a fake
fetcher can be built without the HTTP stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from researchstore.fetch.addresses import address_problem, host_problem
from researchstore.fetch.errors import FetchCancelled, FetchError
from researchstore.fetch.fetcher import Fetched, Fetcher
from researchstore.fetch.policy import FetchPolicy, static_resolver, system_resolver

if TYPE_CHECKING:
    from researchstore.fetch.client import fetch, retry_after_seconds
    from researchstore.fetch.urls import check_url

__all__ = [
    "FetchCancelled",
    "FetchError",
    "FetchPolicy",
    "Fetched",
    "Fetcher",
    "address_problem",
    "check_url",
    "fetch",
    "host_problem",
    "retry_after_seconds",
    "static_resolver",
    "system_resolver",
]

#: The names whose modules import httpx, and those modules.
_HTTP_NAMES = {
    "fetch": "researchstore.fetch.client",
    "retry_after_seconds": "researchstore.fetch.client",
    "check_url": "researchstore.fetch.urls",
}


def __getattr__(name: str) -> Any:
    module = _HTTP_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
