"""The exception tree. Every error a tool can return is one of these.

    ResearchStoreError              code "internal",            exit 1
     ├── InvalidInput               code "invalid_input",       exit 2
     │    └── StoreReadOnly         code "invalid_input",       exit 2
     ├── NotEntitled                code "not_entitled",        exit 3
     ├── UpstreamUnavailable        code "upstream_unavailable", exit 4
     │    ├── StoreLocked           code "upstream_unavailable", exit 75
     │    └── DiskFull              code "upstream_unavailable", exit 4
     ├── StoreDamaged               code "internal",            exit 1
     └── StoreClosed                code "internal",            exit 1

The tool layer turns them into ``{"error": {...}}`` envelopes, the CLI into
messages and exit codes, the MCP server into ``isError`` results. An envelope
keeps only the ``code``; ``EXIT_CODES`` maps it back to an exit code.

Outside the tree, ``Interrupted`` (a ``KeyboardInterrupt``) is the work being
stopped by SIGINT or SIGTERM: never a tool's answer, and never caught by an
``except Exception``. It leaves the command line with the shell's code for
the signal (130, 143).
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from typing import Any


class ResearchStoreError(Exception):
    """Root of every researchstore error: our own bad data or a bug."""

    code = "internal"
    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.details = details

    def to_envelope(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        if self.details:
            error["details"] = self.details
        return {"error": error}


class InvalidInput(ResearchStoreError):
    """An argument is missing, of the wrong type or out of range."""

    code = "invalid_input"
    exit_code = 2


class StoreReadOnly(InvalidInput):
    """The store is read-only (a read-only file, folder or mount): it reads, never writes."""


class NotEntitled(ResearchStoreError):
    """The caller's key lacks the scope or workspace this call needs."""

    code = "not_entitled"
    exit_code = 3


class UpstreamUnavailable(ResearchStoreError):
    """The store or a remote source cannot be reached right now; retry later."""

    code = "upstream_unavailable"
    exit_code = 4


class StoreLocked(UpstreamUnavailable):
    """Another process holds the store's writer lock."""

    exit_code = 75  # EX_TEMPFAIL: cron wrappers treat it as "try again later"


class DiskFull(UpstreamUnavailable):
    """The disk holding the store (or its index) has no space left; free some and retry.

    Nothing committed is lost: work that could not be written is redone by
    the next run, and index work waits in the pending record.
    """


class StoreDamaged(ResearchStoreError):
    """The store file or an index beside it is damaged; the message says how to repair it."""


class StoreClosed(ResearchStoreError):
    """The ``Store`` was closed; open a new one to go on."""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped the work where it was; what was committed stays."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"interrupted by {self.signal_name}")

    @property
    def exit_code(self) -> int:
        """What a shell reports for a process the signal ended: 128 + its number."""
        return 128 + self.signum


def _exit_codes() -> dict[str, int]:
    """Each ``code`` with the exit code of the class that introduces it."""
    table: dict[str, int] = {}
    pending: list[type[ResearchStoreError]] = [ResearchStoreError]
    while pending:  # breadth first: the class nearest the root owns its code
        error = pending.pop(0)
        if "code" in vars(error):
            table.setdefault(error.code, error.exit_code)
        pending.extend(error.__subclasses__())
    return table


#: An error envelope's ``code`` -> the exit code of the class that owns it.
#: StoreLocked shares UpstreamUnavailable's code, so an envelope cannot say it
#: was the lock: only the raised exception leaves with 75.
EXIT_CODES: Mapping[str, int] = _exit_codes()
