"""Where did a stale chunk_id go? The bounded forwarding record.

When a re-ingest replaces a report, its chunks are retired into
``chunk_history`` in the same transaction (their report, document path, text
span and a hash of their text). ``resolve_chunk`` maps such an id to the
chunk(s) of the current version of the same document that hold the same
text (same hash) or, failing that, the same span. Rows older than the
retention are pruned by each run, so the record stays bounded.
"""

from __future__ import annotations

import math
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

from researchstore.storage.dates import stamp
from researchstore.storage.db import read_meta, write_meta
from researchstore.storage.queries import chunk_rows

DEFAULT_RETENTION_DAYS = 30.0
RETENTION_KEY = "forwarding_retention_days"


def text_hash(text: str) -> str:
    import hashlib  # only writers fingerprint text: not on the read path

    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def retire_report_chunks(
    conn: sqlite3.Connection, report_id: int, *, version_rowid: int, reason: str, now: str
) -> int:
    """Record every chunk of ``report_id`` before they are deleted."""
    rows = conn.execute(
        "SELECT c.chunk_id, d.path, c.position, c.char_start, c.char_end, c.text "
        "FROM chunks c JOIN documents d ON d.id = c.document_rowid WHERE c.report_id = ?",
        (report_id,),
    ).fetchall()
    conn.executemany(
        "INSERT OR REPLACE INTO chunk_history (chunk_id, report_id, document_path, position, "
        "char_start, char_end, text_hash, reason, retired_at, retired_by) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                chunk_id,
                report_id,
                path,
                position,
                start,
                end,
                text_hash(text),
                reason,
                now,
                version_rowid,
            )
            for chunk_id, path, position, start, end, text in rows
        ],
    )
    return len(rows)


def retention_days(conn: sqlite3.Connection) -> float:
    """How long replaced chunks are remembered; the default where ``meta`` holds no
    number of days researchstore writes (more than zero)."""
    value = read_meta(conn, RETENTION_KEY)
    try:
        days = float(value) if value is not None and len(value) <= 40 else None
    except ValueError:
        days = None
    return days if days is not None and 0 < days < math.inf else DEFAULT_RETENTION_DAYS


def set_retention_days(conn: sqlite3.Connection, days: float) -> None:
    write_meta(conn, RETENTION_KEY, repr(float(days)))


def prune_history(conn: sqlite3.Connection, *, now: datetime | None = None) -> int:
    """Forget forwarding rows older than the retention; return how many."""
    now = now or datetime.now(UTC)
    try:
        cutoff = stamp(now - timedelta(days=retention_days(conn)))
    except OverflowError:
        return 0  # kept longer than dates go back: nothing is that old
    return conn.execute("DELETE FROM chunk_history WHERE retired_at < ?", (cutoff,)).rowcount


def resolve_chunk(conn: sqlite3.Connection, chunk_id: str) -> dict[str, Any] | None:
    """Current, replaced (and by what), gone, or None for an id never seen."""
    current = chunk_rows(conn, "c.chunk_id = ?", (chunk_id,))
    if current:
        return {
            "chunk_id": chunk_id,
            "status": "current",
            "replaced_at": None,
            "replaced_by_run": None,
            "match": "same_id",
            "chunks": current,
        }
    row = conn.execute(
        "SELECT h.report_id, h.document_path, h.char_start, h.char_end, h.text_hash, h.reason, "
        "h.retired_at, v.version_id FROM chunk_history h "
        "JOIN source_versions v ON v.id = h.retired_by WHERE h.chunk_id = ?",
        (chunk_id,),
    ).fetchone()
    if row is None:
        return None
    report_id, path, start, end, digest, reason, retired_at, version_id = row
    resolution: dict[str, Any] = {
        "chunk_id": chunk_id,
        "status": "gone",
        "replaced_at": retired_at,
        "replaced_by_run": version_id,
        "report_id": report_id,
        "document_path": path,
        "match": None,
        "chunks": [],
    }
    if reason == "removed":
        resolution["reason"] = "the report was removed from its source"
        return resolution
    document = conn.execute(
        "SELECT id FROM documents WHERE report_id = ? AND path = ?", (report_id, path)
    ).fetchone()
    if document is None:
        resolution["reason"] = "the document is no longer part of the report"
        return resolution
    candidates = chunk_rows(
        conn, "c.document_rowid = ? ORDER BY c.position", (document[0],), with_span=True
    )
    same_text = [chunk for chunk in candidates if text_hash(chunk["text"]) == digest]
    overlapping = [
        chunk for chunk in candidates if chunk["char_start"] < end and chunk["char_end"] > start
    ]
    if same_text:
        resolution.update(status="replaced", match="same_text", chunks=same_text[:1])
    elif overlapping:
        resolution.update(status="replaced", match="overlapping_span", chunks=overlapping)
    else:
        resolution["reason"] = "the document no longer reaches that part of its text"
    for chunk in resolution["chunks"]:
        chunk.pop("char_start", None)
        chunk.pop("char_end", None)
    return resolution
