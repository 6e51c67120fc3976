"""Read queries over the SQLite file, one function per question.

Each takes an open connection and returns plain dicts (or None for a miss).
The caller (``Store``) runs each tool call inside one read transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from researchstore.storage.derived import CHUNK_DATE, SEARCHABLE
from researchstore.storage.filters import report_tags
from researchstore.storage.stored import string_list

_CHUNK_COLUMNS = (
    "c.chunk_id, d.document_id, c.report_id, c.position, c.text, c.token_count, "
    "c.status, c.heading_path, c.start_ms, c.end_ms"
)
_CHUNK_FROM = "FROM chunks c JOIN documents d ON d.id = c.document_rowid"


@lru_cache(maxsize=8192)
def _decoded_path(stored: object) -> tuple[str, ...]:
    return tuple(string_list(stored) or ())


def heading_path(stored: object) -> list[str]:
    """A chunk's stored heading path as a list (chunks of a section share one);
    one that is not a JSON list of strings reads as none."""
    return list(_decoded_path(stored)) if stored else []


def _chunk(row: Sequence[Any]) -> dict[str, Any]:
    """A chunk from the first columns of a ``_CHUNK_COLUMNS`` row (a plain tuple)."""
    (
        chunk_id,
        document_id,
        report_id,
        position,
        text,
        token_count,
        status,
        stored_path,
        start_ms,
        end_ms,
    ) = row[:10]
    return {
        "chunk_id": chunk_id,
        "document_id": document_id,
        "report_id": report_id,
        "position": position,
        "text": text,
        "token_count": token_count,
        "status": status,
        "heading_path": heading_path(stored_path),
        "start_ms": start_ms,
        "end_ms": end_ms,
    }


def _tuples(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
    """Rows as plain tuples, for the queries that return many rows and unpack them
    by name (``sqlite3.Row`` costs a lookup per column read, measurable there)."""
    cursor = conn.cursor()
    cursor.row_factory = None
    return cursor.execute(sql, params)


def chunk_rows(
    conn: sqlite3.Connection, where: str, params: Sequence[Any], *, with_span: bool = False
) -> list[dict[str, Any]]:
    """Chunks (navigation shape) matching an SQL condition on ``c``/``d``."""
    columns = _CHUNK_COLUMNS + (", c.char_start, c.char_end" if with_span else "")
    out = []
    for row in _tuples(conn, f"SELECT {columns} {_CHUNK_FROM} WHERE {where}", params):
        chunk = _chunk(row)
        if with_span:
            *_, chunk["char_start"], chunk["char_end"] = row
        out.append(chunk)
    return out


def get_chunk(conn: sqlite3.Connection, chunk_id: str) -> dict[str, Any] | None:
    """Seed 000's shape: report_id, title, date, score 0.0, text, chunk_id."""
    row = conn.execute(
        f"SELECT c.report_id, r.title, {CHUNK_DATE} AS date, c.text, c.chunk_id "
        "FROM chunks c JOIN documents d ON d.id = c.document_rowid "
        "JOIN reports r ON r.report_id = c.report_id WHERE c.chunk_id = ?",
        (chunk_id,),
    ).fetchone()
    if row is None:
        return None
    return {
        "report_id": row["report_id"],
        "title": row["title"],
        # Seed 000 requires a string here: a chunk without a date answers "".
        "date": row["date"],
        "score": 0.0,
        "text": row["text"],
        "chunk_id": row["chunk_id"],
    }


def get_chunks(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, Any]:
    unique = list(dict.fromkeys(ids))
    marks = ",".join("?" * len(unique))
    rows = _tuples(
        conn, f"SELECT {_CHUNK_COLUMNS} {_CHUNK_FROM} WHERE c.chunk_id IN ({marks})", unique
    )
    by_id = {chunk["chunk_id"]: chunk for chunk in map(_chunk, rows)}
    return {
        "chunks": [by_id[chunk_id] for chunk_id in ids if chunk_id in by_id],
        "not_found": [chunk_id for chunk_id in unique if chunk_id not in by_id],
    }


def _anchor(conn: sqlite3.Connection, chunk_id: str) -> tuple[int, int] | None:
    row = conn.execute(
        "SELECT document_rowid, position FROM chunks WHERE chunk_id = ?", (chunk_id,)
    ).fetchone()
    return (row["document_rowid"], row["position"]) if row else None


def _walk(
    conn: sqlite3.Connection, document_rowid: int, position: int, count: int, *, forward: bool
) -> list[dict[str, Any]]:
    if forward:
        sql = (
            f"SELECT {_CHUNK_COLUMNS} {_CHUNK_FROM} WHERE c.document_rowid = ? "
            "AND c.position > ? AND c.status = 'ok' ORDER BY c.position LIMIT ?"
        )
    else:
        sql = (
            f"SELECT {_CHUNK_COLUMNS} {_CHUNK_FROM} WHERE c.document_rowid = ? "
            "AND c.position < ? AND c.status = 'ok' ORDER BY c.position DESC LIMIT ?"
        )
    chunks = [_chunk(row) for row in _tuples(conn, sql, (document_rowid, position, count))]
    if not forward:
        chunks.reverse()
    return chunks


def get_chunk_walk(
    conn: sqlite3.Connection, chunk_id: str, count: int, *, forward: bool
) -> dict[str, Any]:
    anchor = _anchor(conn, chunk_id)
    if anchor is None:
        return {"found": False, "chunks": []}
    return {"found": True, "chunks": _walk(conn, *anchor, count, forward=forward)}


def get_chunk_neighbors(conn: sqlite3.Connection, chunk_id: str, count: int) -> dict[str, Any]:
    row = _tuples(
        conn,
        f"SELECT {_CHUNK_COLUMNS}, c.document_rowid {_CHUNK_FROM} WHERE c.chunk_id = ?",
        (chunk_id,),
    ).fetchone()
    if row is None:
        return {"chunk": None, "prev": [], "next": []}
    *_, document_rowid = row
    chunk = _chunk(row)
    position = chunk["position"]
    return {
        "chunk": chunk,
        "prev": _walk(conn, document_rowid, position, count, forward=False),
        "next": _walk(conn, document_rowid, position, count, forward=True),
    }


def get_chunk_parents(conn: sqlite3.Connection, chunk_id: str) -> list[dict[str, Any]] | None:
    row = conn.execute(
        "SELECT d.document_id, d.name, d.path, d.kind, d.title, "
        "r.report_id, r.key, r.title AS report_title, r.is_dir, r.folder_id, "
        "v.version_id, v.started_at, s.name AS source "
        "FROM chunks c JOIN documents d ON d.id = c.document_rowid "
        "JOIN reports r ON r.report_id = d.report_id "
        "JOIN source_versions v ON v.id = d.source_version_id "
        "JOIN sources s ON s.id = r.source_id WHERE c.chunk_id = ?",
        (chunk_id,),
    ).fetchone()
    if row is None:
        return None
    chain: list[dict[str, Any]] = [
        {
            "id": row["document_id"],
            "name": row["name"],
            "kind": "document",
            "document_id": row["document_id"],
            "path": row["path"],
            "document_kind": row["kind"],
            "title": row["title"],
        },
        {
            "id": str(row["report_id"]),
            "name": row["key"].rsplit("/", 1)[-1],
            "kind": "report",
            "report_id": row["report_id"],
            "path": row["key"],
            "title": row["report_title"],
        },
    ]
    folders = conn.execute(
        "WITH RECURSIVE up(id, depth) AS (SELECT ?, 0 UNION ALL "
        "SELECT f.parent_id, up.depth + 1 FROM folders f JOIN up ON f.id = up.id "
        "WHERE f.parent_id IS NOT NULL) "
        "SELECT f.folder_id, f.name, f.path FROM up JOIN folders f ON f.id = up.id "
        "ORDER BY up.depth",
        (row["folder_id"],),
    ).fetchall()
    chain.extend(
        {
            "id": folder["folder_id"],
            "name": folder["name"],
            "kind": "folder",
            "path": folder["path"],
        }
        for folder in folders
    )
    chain.append(
        {
            "id": row["version_id"],
            "name": row["source"],
            "kind": "source_version",
            "source": row["source"],
            "started_at": row["started_at"],
        }
    )
    return chain


_DOCUMENT_COLUMNS = (
    "d.id, d.document_id, d.report_id, d.path, d.name, d.kind, d.title, d.description, "
    "d.language, d.date, d.status, d.reason, d.skipped, d.chunk_count, d.token_count, "
    "d.created_at, d.encoding, d.date_source"
)


def _document(row: Sequence[Any]) -> dict[str, Any]:
    """A document from a ``_DOCUMENT_COLUMNS`` row (a plain tuple)."""
    (
        _rowid,
        document_id,
        report_id,
        path,
        name,
        kind,
        title,
        description,
        language,
        date,
        status,
        reason,
        skipped,
        chunk_count,
        token_count,
        created_at,
        encoding,
        date_source,
    ) = row
    return {
        "document_id": document_id,
        "report_id": report_id,
        "path": path,
        "name": name,
        "kind": kind,
        "title": title,
        "description": description,
        "language": language,
        "date": date,
        "status": status,
        "reason": reason,
        "skipped": string_list(skipped) or [],
        "total_chunks": chunk_count,
        "token_count": token_count,
        "created_at": created_at,
        "encoding": encoding,
        # Where the page's own date came from (meta, time, json-ld, byline);
        # None when it has none and its chunks carry the report's date.
        "date_source": date_source,
    }


def get_document(conn: sqlite3.Connection, document_id: str) -> dict[str, Any] | None:
    row = _tuples(
        conn, f"SELECT {_DOCUMENT_COLUMNS} FROM documents d WHERE d.document_id = ?", (document_id,)
    ).fetchone()
    if row is None:
        return None
    document = _document(row)
    document_rowid, *_ = row
    skeleton = conn.cursor()
    skeleton.row_factory = None  # plain tuples, unpacked by name: a skeleton can be long
    skeleton.execute(
        "SELECT chunk_id, position, token_count, status FROM chunks "
        "WHERE document_rowid = ? ORDER BY position",
        (document_rowid,),
    )
    document["chunks"] = [
        {"chunk_id": chunk_id, "position": position, "token_count": tokens, "status": status}
        for chunk_id, position, tokens, status in skeleton
    ]
    return document


def get_document_chunks(
    conn: sqlite3.Connection, document_id: str, start: int, limit: int
) -> dict[str, Any]:
    row = conn.execute(
        "SELECT id, chunk_count FROM documents WHERE document_id = ?", (document_id,)
    ).fetchone()
    if row is None:
        return {
            "found": False,
            "document_id": document_id,
            "from": start,
            "total_chunks": 0,
            "chunks": [],
        }
    chunks = [
        _chunk(r)
        for r in _tuples(
            conn,
            f"SELECT {_CHUNK_COLUMNS} {_CHUNK_FROM} WHERE c.document_rowid = ? "
            "AND c.position >= ? ORDER BY c.position LIMIT ?",
            (row["id"], start, limit),
        )
    ]
    return {
        "found": True,
        "document_id": document_id,
        "from": start,
        "total_chunks": row["chunk_count"],
        "chunks": chunks,
    }


def get_report(conn: sqlite3.Connection, report_id: int) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT r.report_id, r.title, r.date, r.tags, r.key, r.is_dir, s.name AS source, "
        "r.created_at, r.updated_at FROM reports r JOIN sources s ON s.id = r.source_id "
        "WHERE r.report_id = ?",
        (report_id,),
    ).fetchone()
    if row is None:
        return None
    documents = [
        _document(r)
        for r in _tuples(
            conn,
            f"SELECT {_DOCUMENT_COLUMNS} FROM documents d WHERE d.report_id = ? ORDER BY d.path",
            (report_id,),
        )
    ]
    return {
        "report_id": row["report_id"],
        "title": row["title"],
        "date": row["date"] or None,
        "tags": report_tags(row["tags"]),
        "key": row["key"],
        "is_directory": bool(row["is_dir"]),
        "source": row["source"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "documents": documents,
    }


def search_rows(conn: sqlite3.Connection, chunk_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The SQLite side of search hits: only chunks that exist and are searchable
    (``ok``, or ``embed_failed`` by their embedding: search finds those by words)."""
    return {row["chunk_id"]: row for row in _search_rows(conn, "c.chunk_id", chunk_ids)}


def search_rows_by_rowid(
    conn: sqlite3.Connection, rowids: Sequence[int]
) -> dict[int, dict[str, Any]]:
    """``search_rows`` for chunks named by rowid (the vector index's keys)."""
    return {row["_rowid"]: row for row in _search_rows(conn, "c.id", rowids)}


#: Where a search hit's row comes from: its chunk, document, report, source,
#: and the workspace whose evidence it is (if any).
_HITS_FROM = (
    "FROM chunks c JOIN documents d ON d.id = c.document_rowid "
    "JOIN reports r ON r.report_id = c.report_id JOIN sources s ON s.id = r.source_id "
    "LEFT JOIN evidence e ON e.report_id = c.report_id"
)


def _search_rows(
    conn: sqlite3.Connection, column: str, values: Sequence[Any]
) -> list[dict[str, Any]]:
    if not values:
        return []
    cursor = conn.cursor()
    cursor.row_factory = None  # plain tuples, unpacked by name below: a search's hot path
    rows = cursor.execute(_search_rows_sql(column, len(values)), list(values)).fetchall()
    return [
        {
            "chunk_id": chunk_id,
            "report_id": report_id,
            "document_id": document_id,
            "title": title,
            "date": date or None,
            "text": text,
            "tags": report_tags(tags),
            "position": position,
            "start_ms": start_ms,
            "end_ms": end_ms,
            "heading_path": heading_path(stored_path),
            "kind": kind,
            "document_title": document_title,
            "source": source,
            "_evidence": source_kind == "workspace",
            "_workspace": workspace_id,
            "_rowid": rowid,
        }
        for (
            chunk_id,
            report_id,
            document_id,
            title,
            date,
            text,
            tags,
            position,
            start_ms,
            end_ms,
            stored_path,
            kind,
            document_title,
            source,
            source_kind,
            rowid,
            workspace_id,
        ) in rows
    ]


@lru_cache(maxsize=128)
def _search_rows_sql(column: str, count: int) -> str:
    """``_search_rows``' statement for ``count`` values: one text per count, so
    that SQLite's statement cache serves every search after the first."""
    return (
        f"SELECT c.chunk_id, c.report_id, d.document_id, r.title, {CHUNK_DATE} AS date, "
        "c.text, r.tags, "
        "c.position, c.start_ms, c.end_ms, c.heading_path, d.kind, d.title AS document_title, "
        "s.name AS source, s.kind AS source_kind, c.id AS rowid, e.workspace_id "
        f"{_HITS_FROM} WHERE {column} IN ({','.join('?' * count)}) AND {SEARCHABLE}"
    )


def candidate_rows(
    conn: sqlite3.Connection, rowids: Sequence[int], *, with_tags: bool
) -> dict[int, dict[str, Any]]:
    return {row["_rowid"]: row for row in _candidate_rows(conn, "c.id", rowids, with_tags)}


def candidate_rows_by_chunk_id(
    conn: sqlite3.Connection, chunk_ids: Sequence[str], *, with_tags: bool
) -> dict[str, dict[str, Any]]:
    return {
        row["chunk_id"]: row for row in _candidate_rows(conn, "c.chunk_id", chunk_ids, with_tags)
    }


def _candidate_rows(
    conn: sqlite3.Connection, column: str, values: Sequence[Any], with_tags: bool
) -> list[dict[str, Any]]:
    """What search needs of a candidate before it is chosen: what filters look at.

    Cheap next to ``search_rows`` (no text, titles or headings; tags parsed
    only ``with_tags``); the hits chosen are read in full by ``search_rows_by_rowid``.
    """
    if not values:
        return []
    marks = ",".join("?" * len(values))
    rows = conn.execute(
        f"SELECT c.id, c.chunk_id, c.report_id, {CHUNK_DATE}, r.tags, d.kind, s.name, s.kind, "
        f"e.workspace_id {_HITS_FROM} WHERE {column} IN ({marks}) AND {SEARCHABLE}",
        list(values),
    ).fetchall()
    return [
        {
            "_rowid": row[0],
            "chunk_id": row[1],
            "report_id": row[2],
            "date": row[3] or None,
            "tags": report_tags(row[4]) if with_tags else None,
            "kind": row[5],
            "source": row[6],
            "_evidence": row[7] == "workspace",
            "_workspace": row[8],
        }
        for row in rows
    ]


_OWNER_SQL = {
    "chunk": "SELECT s.kind, s.name FROM chunks c JOIN reports r ON r.report_id = c.report_id "
    "JOIN sources s ON s.id = r.source_id WHERE c.chunk_id = ?",
    "retired_chunk": "SELECT s.kind, s.name FROM chunk_history h "
    "JOIN reports r ON r.report_id = h.report_id "
    "JOIN sources s ON s.id = r.source_id WHERE h.chunk_id = ?",
    "document": "SELECT s.kind, s.name FROM documents d JOIN reports r "
    "ON r.report_id = d.report_id JOIN sources s ON s.id = r.source_id WHERE d.document_id = ?",
    "report": "SELECT s.kind, s.name FROM reports r JOIN sources s ON s.id = r.source_id "
    "WHERE r.report_id = ?",
}


def owning_workspace(conn: sqlite3.Connection, kind: str, value: Any) -> str | None:
    """The workspace whose evidence holds this chunk/document/report, or None."""
    for sql_kind in ("chunk", "retired_chunk") if kind == "chunk" else (kind,):
        row = conn.execute(_OWNER_SQL[sql_kind], (value,)).fetchone()
        if row is not None:
            if row["kind"] != "workspace":
                return None
            workspace: str = row["name"].partition(":")[2]
            return workspace
    return None
