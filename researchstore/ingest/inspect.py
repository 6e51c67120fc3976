"""``researchstore parse FILE``: what ingest would store for one file."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from researchstore.ingest.chunking import chunk_blocks, chunk_segments
from researchstore.ingest.parsers import SUPPORTED_SUFFIXES, parse_file


def describe_file(path: Path, *, chunk_tokens: int = 256) -> dict[str, Any]:
    """Parse and chunk ``path`` exactly as ingest does, without storing anything."""
    if path.suffix.lower() not in SUPPORTED_SUFFIXES:
        return {
            "file": str(path),
            "status": "invalid",
            "reason": "unsupported_type",
            "skipped": [f"supported suffixes: {', '.join(sorted(SUPPORTED_SUFFIXES))}"],
        }
    parsed = parse_file(path)
    if parsed.segments:
        text, drafts = chunk_segments(parsed.segments, target_tokens=chunk_tokens)
    else:
        text, drafts = chunk_blocks(parsed.blocks, target_tokens=chunk_tokens)
    status, reason = parsed.status, parsed.reason
    if not drafts and status in ("ok", "partial"):
        status, reason = "empty", reason or "no_text"
    return {
        "file": str(path),
        "kind": parsed.kind,
        "title": parsed.title,
        "description": parsed.description,
        "language": parsed.language,
        "date": parsed.date,
        "encoding": parsed.encoding,
        "status": status,
        "reason": reason,
        "skipped": parsed.skipped,
        "text": text,
        "segments": [asdict(segment) for segment in parsed.segments],
        "chunks": [{**asdict(draft), "heading_path": list(draft.heading_path)} for draft in drafts],
    }
