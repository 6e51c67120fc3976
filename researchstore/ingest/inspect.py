"""``researchstore parse FILE``: what ingest would store for one file."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from researchstore.ingest.discovery import REPORT_FILE
from researchstore.ingest.parsers import SUPPORTED_SUFFIXES, parse_file
from researchstore.ingest.prepare import chunk_parsed
from researchstore.storage.dates import is_iso_date
from researchstore.text.language import document_language


def _report_json_date(path: Path) -> str | None:
    """The date of the report.json beside ``path``, if it has a valid one."""
    try:
        meta = json.loads((path.parent / REPORT_FILE).read_bytes().decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    value = meta.get("date") if isinstance(meta, dict) else None
    return value if is_iso_date(value) else None


def describe_file(path: Path, *, chunk_tokens: int = 256) -> dict[str, Any]:
    """Parse and chunk ``path`` exactly as ingest does, without storing anything.

    ``date`` is the page's own date, else the date of the report.json in its
    folder (``date_source`` says which: meta, time, json-ld, byline, report),
    else null.
    """
    if path.suffix.lower() not in SUPPORTED_SUFFIXES:
        return {
            "file": str(path),
            "status": "invalid",
            "reason": "unsupported_type",
            "skipped": [f"supported suffixes: {', '.join(sorted(SUPPORTED_SUFFIXES))}"],
        }
    parsed = parse_file(path)
    text, drafts, status, reason = chunk_parsed(parsed, chunk_tokens=chunk_tokens)
    date, date_source = parsed.date, parsed.date_source
    if date is None:
        date = _report_json_date(path)
        date_source = "report" if date else None
    return {
        "file": str(path),
        "kind": parsed.kind,
        "title": parsed.title,
        "description": parsed.description,
        "language": document_language(parsed.language, [draft.text for draft in drafts]),
        "date": date,
        "date_source": date_source,
        "encoding": parsed.encoding,
        "status": status,
        "reason": reason,
        "skipped": parsed.skipped,
        "text": text,
        "segments": [asdict(segment) for segment in parsed.segments],
        "chunks": [{**asdict(draft), "heading_path": list(draft.heading_path)} for draft in drafts],
    }
