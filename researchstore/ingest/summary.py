"""What one ingest run did: counts, failed reports and files stored with a status.

The summary is also the run's log as it happens: each report written
(``new``, ``modified``), ``removed`` or ``failed`` is told to ``on_event``
once SQLite has committed it, as an event ``{"time", "event", "source",
"report", "report_id", ...}``; the run ends with a ``summary`` event (the
counts, and the run's ``status``). The command line prints them as lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from researchstore.storage.dates import utc_now

if TYPE_CHECKING:
    from researchstore.ingest.prepare import PreparedReport

#: Who hears a run's events (see the module docstring).
EventListener = Callable[[dict[str, Any]], None]


@dataclass(slots=True)
class IngestSummary:
    source: str
    version_id: str
    new: int = 0
    modified: int = 0
    unchanged: int = 0
    removed: int = 0
    failed: int = 0
    documents: int = 0
    chunks: int = 0
    seconds: float = 0.0
    #: Reports that could not be stored at all: ``{"report", "reason"}``.
    failures: list[dict[str, str]] = field(default_factory=list)
    #: Files stored with a status other than ok, or not read at all:
    #: ``{"path", "status", "reason", "details"}``.
    skipped: list[dict[str, Any]] = field(default_factory=list)
    on_event: EventListener | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "version_id": self.version_id,
            "new": self.new,
            "modified": self.modified,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "failed": self.failed,
            "documents": self.documents,
            "chunks": self.chunks,
            "seconds": round(self.seconds, 3),
            "failures": self.failures,
            "skipped": self.skipped,
        }

    @property
    def status(self) -> str:
        """How a run that got to its end went."""
        return "completed" if not self.failed else "completed_with_failures"

    def emit(self, event: str, **fields: Any) -> None:
        """Tell the listener (if any) about ``event``, stamped with the time and source."""
        if self.on_event is not None:
            self.on_event({"time": utc_now(), "event": event, "source": self.source, **fields})

    def count_written(self, prepared: PreparedReport, report_id: int) -> None:
        """Count a report just written, and list its files not stored as ``ok``."""
        if prepared.existing_id is None:
            self.new += 1
        else:
            self.modified += 1
        self.documents += len(prepared.documents)
        self.chunks += prepared.chunk_count
        for document in prepared.documents:
            if document.status != "ok":
                self.skipped.append(
                    {
                        "path": document.path,
                        "status": document.status,
                        "reason": document.reason,
                        "details": document.parsed.skipped[:20],
                    }
                )
        self.emit(
            "new" if prepared.existing_id is None else "modified",
            report=prepared.source.key,
            report_id=report_id,
        )

    def count_removed(self, key: str, report_id: int) -> None:
        """Count a report removed because it is gone from the source."""
        self.removed += 1
        self.emit("removed", report=key, report_id=report_id)

    def refuse(self, key: str, reason: str, *, report_id: int | None = None) -> None:
        """Count a report that could not be stored, with the reason."""
        self.failed += 1
        self.failures.append({"report": key, "reason": reason})
        self.emit("failed", report=key, report_id=report_id, reason=reason)

    def finish(self, status: str, **fields: Any) -> None:
        """End the run's log: the ``summary`` event, with the run's ``status``."""
        self.emit("summary", status=status, **self.to_dict(), **fields)
