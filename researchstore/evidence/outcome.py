"""What a retrieval found (``Outcome``) and the result payload seed 002 gives it.

``content`` produces an outcome; ``records`` stores a ``ready`` or
``partial`` one as evidence; ``receipts`` settles the receipt with its
``result()``. Timestamps are written one way here (``stamp``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from researchstore.evidence.spec import MAX_URL_LENGTH, MAX_WARNINGS, PARSER_VERSION
from researchstore.ingest.model import ParsedDocument, Segment

__all__ = ["MEDIA_TYPES", "Outcome", "clip"]

#: The media types a result may name (any other is reported as null).
MEDIA_TYPES = frozenset(
    ("text/html", "application/xhtml+xml", "text/plain", "text/vtt", "application/x-subrip",
     "application/srt", "text/srt")
)  # fmt: skip


def clip(text: str | None, limit: int) -> str | None:
    """Whitespace collapsed, cut to ``limit`` characters with an ellipsis; None when empty."""
    if text is None:
        return None
    text = " ".join(text.split())
    if not text:
        return None
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass(slots=True)
class Outcome:
    """What a retrieval found, before it is a result (and maybe evidence)."""

    kind: str
    status: str
    reason: str | None = None
    warnings: list[str] = field(default_factory=list)
    text: str = ""
    title: str | None = None
    description: str | None = None
    segments: list[Segment] = field(default_factory=list)
    source_url: str | None = None
    retrieved_at: str = ""
    mime_type: str | None = None
    content_kind: str = "none"
    caption_format: str | None = None
    language: str | None = None
    retry_after_seconds: int | None = None
    #: What is stored as evidence: a parsed document of the returned content.
    document: ParsedDocument | None = None

    def result(self) -> dict[str, Any]:
        """Seed 002's ``retrieval.result``."""
        warnings = [w for w in dict.fromkeys(self.warnings) if w != self.reason]
        source_url = (
            self.source_url if self.source_url and len(self.source_url) <= MAX_URL_LENGTH else None
        )
        return {
            "kind": self.kind,
            "status": self.status,
            "text": self.text,
            "title": clip(self.title, 200),
            "description": clip(self.description, 2000),
            "segments": [
                {"start_ms": s.start_ms, "end_ms": s.end_ms, "text": s.text} for s in self.segments
            ],
            "provenance": {
                "source_url": source_url,
                "retrieved_at": self.retrieved_at,
                "mime_type": self.mime_type if self.mime_type in MEDIA_TYPES else None,
                "parser_version": PARSER_VERSION,
                "content_kind": self.content_kind,
                "caption_format": self.caption_format,
                "language": self.language,
                "language_source": "publisher_declared" if self.language else "unknown",
                "platform_native_verified": False,
            },
            "reason": self.reason,
            "warnings": warnings[:MAX_WARNINGS],
            "retry_after_seconds": self.retry_after_seconds,
        }

    def flag(self, status: str, reason: str) -> None:
        """Note a limit or condition: the first one is the reason, the others warnings."""
        if self.reason is None:
            self.status, self.reason = status, reason
        else:
            self.warnings.append(reason)
