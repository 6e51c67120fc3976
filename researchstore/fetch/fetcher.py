"""The seam between reading content and fetching it: ``Fetcher`` and ``Fetched``.

A ``Fetcher`` is anything callable like ``researchstore.fetch.client.fetch``:
given a URL, the policy, the ``Accept`` header, extra headers, a shared
deadline and a cancel event, it returns a ``Fetched`` 2xx response or raises
``FetchError`` (``researchstore.fetch.errors``). The evidence reader asks for
content only through one, so tests hand it canned responses (as httpx tests
hand a client ``MockTransport``) and the network stays out. Nothing here
imports the HTTP stack.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from researchstore.fetch.policy import FetchPolicy

__all__ = ["Fetched", "Fetcher"]


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


class Fetcher(Protocol):
    """GET ``url`` within ``policy``: a ``Fetched`` 2xx response, or ``FetchError``.

    ``deadline`` (``time.monotonic()``) lets several fetches share one limit;
    ``cancel``, once set, stops the fetch with ``FetchCancelled``.
    """

    def __call__(
        self,
        url: str,
        *,
        policy: FetchPolicy,
        accept: str = ...,
        headers: Mapping[str, str] | None = ...,
        deadline: float | None = ...,
        cancel: threading.Event | None = ...,
    ) -> Fetched: ...
