"""What a store holds, listed: its sources, its reports, its counts and sizes.

The read side of ``researchstore sources``, ``reports`` and ``stats``. The
queries take a connection inside the caller's one read transaction
(``Store.reading``) and write nothing; ``list_sources`` also looks whether
each root is on disk, and ``file_sizes`` reads the sizes of the store's
files. What they return is the commands' ``--json``, documented in the
README ("Looking inside a store"): keys may be added, never renamed.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from researchstore.errors import InvalidInput
from researchstore.overview import REMOVED_KIND, run_record, source_rows
from researchstore.storage.filters import report_tags
from researchstore.storage.vectors import count_to_embed, store_model, vector_stats

#: Document statuses from best to worst: a report's status is its worst document's.
STATUS_ORDER = ("ok", "partial", "empty", "invalid")
#: The key of documents whose language is not known, in counts by language.
UNKNOWN_LANGUAGE = "unknown"
#: The key of pending index work meant for every index (``index_pending.target`` NULL).
EVERY_INDEX = "all"


def source_rowid(conn: sqlite3.Connection, name: str) -> int:
    """The rowid of the source called ``name``; ``InvalidInput`` naming the others if none."""
    row = conn.execute(
        "SELECT id FROM sources WHERE name = ? AND kind != ?", (name, REMOVED_KIND)
    ).fetchone()
    if row is not None:
        return int(row[0])
    names = [
        found
        for (found,) in conn.execute(
            "SELECT name FROM sources WHERE kind != ? ORDER BY name", (REMOVED_KIND,)
        )
    ]
    known = f"the store has {', '.join(names)}" if names else "the store has none"
    raise InvalidInput(f"no source named {name!r} ({known})", field="source")


def list_sources(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every source: its root and whether it is there now, its counts and its last run."""
    rows = source_rows(conn)
    return [
        {
            "name": row["name"],
            "kind": row["kind"],
            "root": row["root"],
            "root_present": root_present(row["kind"], row["root"]),
            "created_at": row["created_at"],
            "reports": row["reports"],
            "documents": row["documents"],
            "chunks": row["chunks"] or 0,
            "last_run": last_run(conn, row["last_version"]),
        }
        for row in rows
    ]


def root_present(kind: str, root: str | None) -> bool | None:
    """Whether a source's root folder is on disk now (None: a workspace has no folder)."""
    if kind == "workspace" or not root:
        return None
    return Path(root).is_dir()


def last_run(conn: sqlite3.Connection, version_rowid: int | None) -> dict[str, Any] | None:
    """A run as the listings show it: when, how it went, and its counts (failures left out)."""
    run = run_record(conn, version_rowid) if version_rowid else None
    if run is None:
        return None
    return {
        "version_id": run["version_id"],
        "started_at": run["started_at"],
        "finished_at": run["finished_at"],
        "status": run["status"],
        "counts": {
            name: value
            for name, value in run["summary"].items()
            if isinstance(value, int) and not isinstance(value, bool)
        },
    }


def list_every_report(
    conn: sqlite3.Connection, *, source: str | None = None
) -> list[dict[str, Any]]:
    """Every report (of ``source``), by source and key, with its documents' counts."""
    where, params = ("WHERE r.source_id = ?", [source_rowid(conn, source)]) if source else ("", [])
    statuses: dict[int, dict[str, int]] = {}
    for report_id, status, count in conn.execute(
        "SELECT d.report_id, d.status, count(*) FROM documents d "
        f"JOIN reports r ON r.report_id = d.report_id {where} GROUP BY d.report_id, d.status",
        params,
    ):
        statuses.setdefault(report_id, {})[status] = count
    reports = []
    for row in conn.execute(
        "SELECT r.report_id, s.name AS source, r.key, r.title, r.date, r.tags, r.created_at, "
        "r.updated_at, count(d.id) AS documents, coalesce(sum(d.chunk_count), 0) AS chunks, "
        "group_concat(DISTINCT d.language) AS languages "
        "FROM reports r JOIN sources s ON s.id = r.source_id "
        f"LEFT JOIN documents d ON d.report_id = r.report_id {where} "
        "GROUP BY r.report_id ORDER BY s.name, r.key",
        params,
    ):
        by_status = dict(sorted(statuses.get(row["report_id"], {}).items(), key=_status_rank))
        reports.append(
            {
                "report_id": row["report_id"],
                "source": row["source"],
                "key": row["key"],
                "title": row["title"],
                "date": row["date"] or None,
                "status": report_status(by_status),
                "documents": row["documents"],
                "documents_by_status": by_status,
                "chunks": row["chunks"],
                "languages": sorted(set(row["languages"].split(","))) if row["languages"] else [],
                "tags": report_tags(row["tags"]),
                "created_at": row["created_at"],
                "ingested_at": row["updated_at"],
            }
        )
    return reports


def report_status(documents_by_status: dict[str, int]) -> str:
    """Its worst document's status (``STATUS_ORDER``); ``empty`` for a report of no document."""
    if not documents_by_status:
        return "empty"
    return max(documents_by_status.items(), key=_status_rank)[0]


def _status_rank(item: tuple[str, int]) -> tuple[int, str]:
    status = item[0]
    rank = STATUS_ORDER.index(status) if status in STATUS_ORDER else len(STATUS_ORDER)
    return rank, status


def count_contents(conn: sqlite3.Connection) -> dict[str, Any]:
    """Counts: documents by kind, status and language; chunks; vectors; pending index work."""
    chunks = int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
    # The partial index ``chunks_not_ok`` counts the others without reading the table.
    chunks_by_status = {
        status: count
        for status, count in conn.execute(
            "SELECT status, count(*) FROM chunks WHERE status != 'ok' GROUP BY status"
        )
    }
    chunks_by_status = {"ok": chunks - sum(chunks_by_status.values()), **chunks_by_status}
    model = store_model(conn)
    vectors = vector_stats(conn)
    pending_by_target = {
        target or EVERY_INDEX: count
        for target, count in conn.execute(
            "SELECT target, count(*) FROM index_pending GROUP BY target ORDER BY target"
        )
    }
    totals = conn.execute(
        "SELECT (SELECT count(*) FROM sources WHERE kind != ?), (SELECT count(*) FROM reports), "
        "(SELECT count(*) FROM documents), "
        "(SELECT coalesce(sum(token_count), 0) FROM documents)",
        (REMOVED_KIND,),
    ).fetchone()
    return {
        "sources": totals[0],
        "reports": totals[1],
        "documents": {
            "total": totals[2],
            "by_kind": _documents_by(conn, "d.kind"),
            "by_status": dict(
                sorted(
                    _documents_by(conn, "d.status").items(),
                    key=lambda item: _status_rank((item[0], 0)),
                )
            ),
            "by_language": _documents_by(conn, f"coalesce(d.language, '{UNKNOWN_LANGUAGE}')"),
        },
        "chunks": {"total": chunks, "tokens": totals[3], "by_status": chunks_by_status},
        "vectors": {
            "model": model.model_id if model else None,
            "dimension": model.dimension if model else None,
            "chunks_with_vector": vectors["vectors"],
            "failed": vectors["embed_failed"],
            "waiting": count_to_embed(conn, retry_failed=False) if model else 0,
        },
        "index_pending": {"total": sum(pending_by_target.values()), "by_target": pending_by_target},
        "last_runs": {
            row["name"]: last_run(conn, row["last_version"])
            for row in conn.execute(
                "SELECT s.name, (SELECT max(v.id) FROM source_versions v WHERE v.source_id = s.id) "
                "AS last_version FROM sources s WHERE s.kind != ? ORDER BY s.name",
                (REMOVED_KIND,),
            )
        },
    }


def _documents_by(conn: sqlite3.Connection, column: str) -> dict[str, dict[str, int]]:
    """Documents and their chunks, counted by ``column`` (an expression on ``d``)."""
    return {
        value: {"documents": documents, "chunks": chunks}
        for value, documents, chunks in conn.execute(
            f"SELECT {column} AS value, count(*), coalesce(sum(d.chunk_count), 0) "
            "FROM documents d GROUP BY value ORDER BY value"
        )
    }


def file_sizes(store_path: Path) -> dict[str, Any]:
    """The sizes of the store file, its write-ahead log and the index folders beside it.

    The folders are those named ``STORE.db.<name>`` (``index``, ``vectors``,
    a rebuild's leftovers); a read-only store's indexes in the cache are not
    counted.
    """
    wal = store_path.with_name(store_path.name + "-wal")
    indexes = {
        folder.name[len(store_path.name) + 1 :]: _size(folder, _folder_bytes(folder))
        for folder in sorted(store_path.parent.glob(f"{_glob_escape(store_path.name)}.*"))
        if folder.is_dir()
    }
    store_bytes, wal_bytes = _file_bytes(store_path), _file_bytes(wal)
    total = store_bytes + wal_bytes + sum(index["bytes"] for index in indexes.values())
    return {
        "store": _size(store_path, store_bytes),
        "wal": _size(wal, wal_bytes),
        "indexes": indexes,
        "total": {"bytes": total, "human": human_size(total)},
    }


def store_stats(conn: sqlite3.Connection, store_path: Path) -> dict[str, Any]:
    """``count_contents`` with the sizes of the store's files (``file_sizes``)."""
    files = file_sizes(store_path)
    # length() of a blob is read from its record header, not its pages.
    packed = int(
        conn.execute("SELECT coalesce(sum(length(data)), 0) FROM index_files").fetchone()[0]
    )
    # Part of the store file's bytes: the indexes' copies (``packing.py``).
    files = {
        **{name: size for name, size in files.items() if name != "total"},
        "packed_indexes": {"bytes": packed, "human": human_size(packed)},
        "total": files["total"],
    }
    return {"store": str(store_path), "files": files, **count_contents(conn)}


def _size(path: Path, size: int) -> dict[str, Any]:
    return {"path": str(path), "bytes": size, "human": human_size(size)}


def _file_bytes(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _folder_bytes(folder: Path) -> int:
    total = 0
    for parent, _, names in os.walk(folder):
        total += sum(_file_bytes(Path(parent, name)) for name in names)
    return total


def _glob_escape(name: str) -> str:
    return "".join(f"[{char}]" if char in "*?[" else char for char in name)


def human_size(size: int) -> str:
    """``size`` bytes for a person: ``812 B``, ``1.4 KiB``, ``370.2 MiB``."""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"
