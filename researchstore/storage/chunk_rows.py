"""Chunk rows: the only SQL that writes the ``chunks`` table.

One door per table, as datasette's ``execute_write_fn`` is one way to
write: ingest adds and removes a report's chunks (``ingest/writer.py``),
the embedder and the derived indexes set a chunk's status (``vectors.py``,
``sync.py``), all through the functions here, inside their callers'
transactions. A chunk is ``ok`` when written; ``embed_failed`` when its
embedding failed (with an ``embed_failures`` row saying why) or an index
refused it (with none); ``ok`` again once it has a vector.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

#: A chunk row as ``insert_chunks`` takes it: chunk_id, document_rowid (the
#: ``lastrowid`` of its document's insert), report_id, position, text,
#: token_count, heading_path (JSON or None), start_ms, end_ms, char_start,
#: char_end.
ChunkRow = tuple[str, int | None, int, int, str, int, str | None, int | None, int | None, int, int]


def insert_chunks(conn: sqlite3.Connection, rows: Iterable[ChunkRow]) -> None:
    """Add chunks, each ``ok``."""
    conn.executemany(
        "INSERT INTO chunks (chunk_id, document_rowid, report_id, position, status, text, "
        "token_count, heading_path, start_ms, end_ms, char_start, char_end) "
        "VALUES (?, ?, ?, ?, 'ok', ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )


def delete_report_chunks(conn: sqlite3.Connection, report_id: int) -> None:
    """Remove every chunk of a report (retire them to the forwarding record first)."""
    conn.execute("DELETE FROM chunks WHERE report_id = ?", (report_id,))


def mark_embed_failed(conn: sqlite3.Connection, rowid: int, chunk_id: str) -> bool:
    """Mark the chunk at ``rowid`` ``embed_failed``, if it is still ``chunk_id``; whether it was."""
    return bool(
        conn.execute(
            "UPDATE chunks SET status = 'embed_failed' WHERE id = ? AND chunk_id = ?",
            (rowid, chunk_id),
        ).rowcount
    )


def mark_refused(conn: sqlite3.Connection, chunk_ids: Sequence[str]) -> None:
    """Mark chunks an index refused ``embed_failed``: search passes over them."""
    conn.executemany(
        "UPDATE chunks SET status = 'embed_failed' WHERE chunk_id = ?",
        [(chunk_id,) for chunk_id in chunk_ids],
    )


def mark_embedded(conn: sqlite3.Connection, rowid: int) -> None:
    """The chunk at ``rowid`` has its vector now: ``ok``."""
    conn.execute("UPDATE chunks SET status = 'ok' WHERE id = ? AND status != 'ok'", (rowid,))


def clear_embed_failures(conn: sqlite3.Connection) -> None:
    """Every chunk whose embedding failed is ``ok`` again (the vectors are dropped)."""
    conn.execute(
        "UPDATE chunks SET status = 'ok' WHERE id IN (SELECT chunk_rowid FROM embed_failures)"
    )
