"""Why a fetch yielded no content, as the retrieval result will say it.

Every failure of a fetcher is a ``FetchError`` carrying the ``status`` and
``reason`` of seed 002's retrieval result, so a caller turns it into a result
without knowing which layer (URL check, DNS, TLS, HTTP, decoding) failed::

    FetchError              status / reason of the retrieval result
     └── FetchCancelled     status "cancelled", reason "cancelled"
"""

from __future__ import annotations

__all__ = ["FetchCancelled", "FetchError", "unsafe_url"]


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


def unsafe_url(message: str) -> FetchError:
    """A refusal to contact a URL or address: ``blocked`` / ``unsafe_url``."""
    return FetchError("blocked", "unsafe_url", message)
