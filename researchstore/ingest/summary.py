"""What one ingest run did: counts, failed reports and files stored with a status."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from researchstore.ingest.prepare import PreparedReport


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

    def count_written(self, prepared: PreparedReport) -> None:
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

    def refuse(self, key: str, reason: str) -> None:
        """Count a report that could not be stored, with the reason."""
        self.failed += 1
        self.failures.append({"report": key, "reason": reason})
