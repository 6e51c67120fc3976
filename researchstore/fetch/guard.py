"""The total deadline and the cancel event of one fetch, consulted before every wait."""

from __future__ import annotations

import threading
import time

from researchstore.fetch.errors import FetchCancelled, FetchError

__all__ = ["POLL_S", "Guard"]

#: How often a blocked read wakes up to look at the cancel event.
POLL_S = 0.1


class Guard:
    """One fetch's deadline (``time.monotonic()``) and cancel event."""

    def __init__(self, deadline: float, cancel: threading.Event | None) -> None:
        self.deadline = deadline
        self.cancel = cancel

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def check(self) -> None:
        """Raise ``FetchCancelled`` or a ``timeout`` ``FetchError`` when it is time to stop."""
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
            wait = min(wait, POLL_S)
        return max(wait, 0.001)
