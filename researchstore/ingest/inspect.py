"""``researchstore parse FILE``: what ingest would store for one file."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from researchstore.ingest.parsers import SUPPORTED_SUFFIXES, parse_file
from researchstore.ingest.prepare import chunk_parsed
from researchstore.language import document_language


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
    text, drafts, status, reason = chunk_parsed(parsed, chunk_tokens=chunk_tokens)
    return {
        "file": str(path),
        "kind": parsed.kind,
        "title": parsed.title,
        "description": parsed.description,
        "language": document_language(parsed.language, [draft.text for draft in drafts]),
        "date": parsed.date,
        "encoding": parsed.encoding,
        "status": status,
        "reason": reason,
        "skipped": parsed.skipped,
        "text": text,
        "segments": [asdict(segment) for segment in parsed.segments],
        "chunks": [{**asdict(draft), "heading_path": list(draft.heading_path)} for draft in drafts],
    }
