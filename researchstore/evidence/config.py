"""How retrievals run: ``RetrievalConfig``, passed in (never looked up in a registry).

A store carries one as ``Library(..., retrieval=RetrievalConfig(...))``; a
call to ``retrieve`` may pass its own. The HTTP stack is not imported here:
the default fetcher is chosen when a retrieval runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from researchstore.fetch.fetcher import Fetcher
from researchstore.fetch.policy import FetchPolicy

__all__ = ["RetrievalConfig", "utc_now"]


def utc_now() -> datetime:
    """Now, timezone-aware in UTC: the default clock of a retrieval."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class RetrievalConfig:
    """The fetch policy, the fetcher, how long receipts hold, parser limits and the clock."""

    fetch: FetchPolicy = field(default_factory=FetchPolicy)
    #: A receipt is valid this long after it was created, then ``expired``.
    receipt_ttl: timedelta = timedelta(hours=24)
    #: The most HTML nodes a page is read to; None: the HTML parser's own limit.
    max_nodes: int | None = None
    clock: Callable[[], datetime] = utc_now
    #: What fetches content; None: the bounded httpx fetcher
    #: (``researchstore.fetch.client.fetch``). Tests pass canned responses here.
    fetcher: Fetcher | None = None

    @classmethod
    def from_env(cls) -> RetrievalConfig:
        """``FetchPolicy.from_env`` plus ``RESEARCHSTORE_RECEIPT_TTL`` (e.g. ``24h``, ``90m``)."""
        ttl = os.environ.get("RESEARCHSTORE_RECEIPT_TTL", "").strip()
        if ttl:
            from researchstore.storage.dates import parse_duration

            return cls(
                fetch=FetchPolicy.from_env(), receipt_ttl=timedelta(seconds=parse_duration(ttl))
            )
        return cls(fetch=FetchPolicy.from_env())
