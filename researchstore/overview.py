"""What a store holds, for people: the store at a glance and its reports by folder.

The tools answer questions about one chunk, document or report; these read
functions answer the questions a person asks first (what is in here, what did
the last run change, what failed to parse, what sits in this folder). Each
takes a connection inside the caller's one read transaction and writes
nothing. ``change_marker`` is a handful of indexed reads that change whenever
a run, a retrieval or an index catch-up changes what ``store_overview``
counts, so that a caller can keep the overview until the marker moves.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence
from typing import Any

from researchstore.storage.db import pending_count
from researchstore.storage.filters import report_tags
from researchstore.storage.stored import json_object

#: The kind a removed source is kept as (``writer.remove_source``).
REMOVED_KIND = "removed"
#: Documents of each status other than ``ok`` listed by name (the count is of all).
LISTED_PER_STATUS = 50
#: Runs listed on the overview, newest first.
RECENT_RUNS = 10


def change_marker(conn: sqlite3.Connection) -> tuple[Any, ...]:
    """Moves whenever what ``store_overview`` reports changes; each part is an indexed read.

    Every write to reports, documents and chunks happens in a run (a
    ``source_versions`` row, settled with its ``finished_at``), adds rows
    (rowids only grow) or retires chunks into ``chunk_history``; the word
    index's state moves with ``index_pending``.
    """
    row = conn.execute(
        "SELECT (SELECT max(id) FROM source_versions), "
        "(SELECT finished_at || status FROM source_versions ORDER BY id DESC LIMIT 1), "
        "(SELECT max(id) FROM documents), (SELECT max(id) FROM chunks), "
        "(SELECT max(rowid) FROM chunk_history), (SELECT max(seq) FROM index_pending)"
    ).fetchone()
    return (*row, pending_count(conn))


def visible_sources(workspaces: Collection[str] | None) -> tuple[str, list[str]]:
    """An SQL condition on sources ``s`` (and its parameters): every source for
    ``None``, else the directory sources and the evidence of these workspaces."""
    if workspaces is None:
        return "1", []
    names = [f"workspace:{workspace}" for workspace in sorted(workspaces)]
    marks = ",".join("?" * len(names)) or "NULL"
    return f"(s.kind != 'workspace' OR s.name IN ({marks}))", names


def source_rows(
    conn: sqlite3.Connection, where: str = "1", params: Sequence[Any] = ()
) -> list[sqlite3.Row]:
    """Each source ``s`` matching ``where`` with its report, document and chunk counts
    and its last run's rowid (``last_version``), by name. A removed source stays only
    for its runs' history (``writer.remove_source``) and is never listed."""
    return conn.execute(
        "SELECT s.name, s.kind, s.root, s.created_at, "
        "(SELECT count(*) FROM reports r WHERE r.source_id = s.id) AS reports, "
        "(SELECT count(*) FROM documents d JOIN reports r ON r.report_id = d.report_id "
        " WHERE r.source_id = s.id) AS documents, "
        "(SELECT sum(d.chunk_count) FROM documents d JOIN reports r "
        " ON r.report_id = d.report_id WHERE r.source_id = s.id) AS chunks, "
        "(SELECT max(v.id) FROM source_versions v WHERE v.source_id = s.id) AS last_version "
        f"FROM sources s WHERE {where} AND s.kind != '{REMOVED_KIND}' ORDER BY s.name",
        tuple(params),
    ).fetchall()


def store_overview(
    conn: sqlite3.Connection, *, workspaces: Collection[str] | None = None
) -> dict[str, Any]:
    """Sources with their roots and counts, the recent runs, documents not ``ok``, tags.

    ``workspaces``: only the evidence of these workspaces (None: all of it).
    """
    where, params = visible_sources(workspaces)
    sources = [
        {
            "name": row["name"],
            "kind": row["kind"],
            "root": row["root"],
            "created_at": row["created_at"],
            "reports": row["reports"],
            "documents": row["documents"] or 0,
            "chunks": row["chunks"] or 0,
            "last_run": run_record(conn, row["last_version"]) if row["last_version"] else None,
        }
        for row in source_rows(conn, where, params)
    ]
    totals = conn.execute(
        "SELECT (SELECT count(*) FROM chunks WHERE status != 'ok') AS chunks_not_ok"
    ).fetchone()
    runs = [
        run_record(conn, row["id"])
        for row in conn.execute(
            "SELECT v.id FROM source_versions v JOIN sources s ON s.id = v.source_id "
            f"WHERE {where} ORDER BY v.id DESC LIMIT ?",
            (*params, RECENT_RUNS),
        )
    ]
    return {
        "totals": {
            "sources": len(sources),
            "reports": sum(source["reports"] for source in sources),
            "documents": sum(source["documents"] for source in sources),
            "chunks": sum(source["chunks"] for source in sources),
            "chunks_not_ok": totals["chunks_not_ok"],
        },
        "sources": sources,
        "runs": [run for run in runs if run is not None],
        "documents_by_status": _documents_by_status(conn, where, params),
        "tags": tag_values(conn, workspaces=workspaces),
        "index_pending": pending_count(conn),
    }


def run_record(conn: sqlite3.Connection, rowid: int) -> dict[str, Any] | None:
    """One run (a source version): when, how it went, and what it changed."""
    row = conn.execute(
        "SELECT v.version_id, v.started_at, v.finished_at, v.status, v.summary, s.name "
        "FROM source_versions v JOIN sources s ON s.id = v.source_id WHERE v.id = ?",
        (rowid,),
    ).fetchone()
    if row is None:
        return None
    return {
        "version_id": row["version_id"],
        "source": row["name"],
        "started_at": row["started_at"],
        "finished_at": row["finished_at"],
        "status": row["status"],
        "summary": run_summary(row["summary"]),
    }


def run_summary(stored: object) -> dict[str, Any]:
    """A run's summary as ``finish_version`` writes it (counts, failures with their report
    and reason, why it stopped); anything else a stored summary holds is left out."""
    found = json_object(stored) or {}
    failures = found.pop("failures", None)
    summary: dict[str, Any] = {
        name: value for name, value in found.items() if type(value) is int and value >= 0
    }
    if isinstance(failures, list):
        summary["failures"] = [
            failure
            for failure in failures
            if isinstance(failure, dict)
            and isinstance(failure.get("report"), str)
            and isinstance(failure.get("reason"), str)
        ]
    if isinstance(found.get("stopped"), str):
        summary["stopped"] = found["stopped"]
    return summary


def _documents_by_status(
    conn: sqlite3.Connection, where: str, params: list[str]
) -> dict[str, dict[str, Any]]:
    """Every status other than ``ok``: how many documents, and the first of them with reasons."""
    joined = (
        "FROM documents d JOIN reports r ON r.report_id = d.report_id "
        f"JOIN sources s ON s.id = r.source_id WHERE {where} AND d.status"
    )
    out: dict[str, dict[str, Any]] = {}
    for status, count in conn.execute(
        f"SELECT d.status, count(*) {joined} != 'ok' GROUP BY d.status ORDER BY d.status",
        params,
    ).fetchall():
        listed = conn.execute(
            f"SELECT d.document_id, d.report_id, d.path, d.kind, d.reason, r.title {joined} = ? "
            "ORDER BY d.path LIMIT ?",
            (*params, status, LISTED_PER_STATUS),
        ).fetchall()
        out[status] = {
            "count": count,
            "documents": [
                {
                    "document_id": row["document_id"],
                    "report_id": row["report_id"],
                    "report_title": row["title"],
                    "path": row["path"],
                    "kind": row["kind"],
                    "reason": row["reason"],
                }
                for row in listed
            ],
        }
    return out


def tag_values(
    conn: sqlite3.Connection, *, workspaces: Collection[str] | None = None
) -> dict[str, list[str]]:
    """Every tag name the (visible) reports use, with its values, sorted."""
    where, params = visible_sources(workspaces)
    tags: dict[str, set[str]] = {}
    for (stored,) in conn.execute(
        "SELECT DISTINCT r.tags FROM reports r JOIN sources s ON s.id = r.source_id "
        f"WHERE {where} AND r.tags != '{{}}'",
        params,
    ):
        for name, value in report_tags(stored).items():
            values = value if isinstance(value, list) else [value]
            tags.setdefault(str(name), set()).update(str(one) for one in values)
    return {name: sorted(values) for name, values in sorted(tags.items())}


def list_reports(
    conn: sqlite3.Connection,
    *,
    source: str,
    folder: str,
    start: int,
    limit: int,
    workspaces: Collection[str] | None = None,
) -> dict[str, Any] | None:
    """The folders and reports directly inside ``folder`` ("" for the root) of ``source``.

    None when there is no such (visible) source, or no such folder in it.
    Reports are in key order, ``limit`` of them from ``start``;
    ``total_reports`` counts all.
    """
    where, params = visible_sources(workspaces)
    found = conn.execute(
        f"SELECT s.id, s.root FROM sources s WHERE s.name = ? AND {where}", (source, *params)
    ).fetchone()
    if found is None:
        return None
    source_rowid = found["id"]
    folder_rowid: int | None = None
    if folder:
        row = conn.execute(
            "SELECT id FROM folders WHERE source_id = ? AND path = ?", (source_rowid, folder)
        ).fetchone()
        if row is None:
            return None
        folder_rowid = row["id"]
    folders = [
        {"path": row["path"], "name": row["name"]}
        for row in conn.execute(
            "SELECT path, name FROM folders WHERE source_id = ? AND parent_id IS ? ORDER BY path",
            (source_rowid, folder_rowid),
        )
    ]
    # Keys under a folder share its path and a "/": a range of the (source_id, key) index.
    low, high = (f"{folder}/", f"{folder}0") if folder else ("", "\U0010ffff")
    inside = "r.source_id = ? AND r.key >= ? AND r.key < ? AND r.folder_id IS ?"
    keys = (source_rowid, low, high, folder_rowid)
    total = conn.execute(f"SELECT count(*) FROM reports r WHERE {inside}", keys).fetchone()[0]
    reports = [
        {
            "report_id": row["report_id"],
            "title": row["title"],
            "date": row["date"],
            "tags": report_tags(row["tags"]),
            "key": row["key"],
            "is_directory": bool(row["is_dir"]),
            "documents": row["documents"],
        }
        for row in conn.execute(
            "SELECT r.report_id, r.title, r.date, r.tags, r.key, r.is_dir, "
            "(SELECT count(*) FROM documents d WHERE d.report_id = r.report_id) AS documents "
            f"FROM reports r WHERE {inside} ORDER BY r.key LIMIT ? OFFSET ?",
            (*keys, limit, start),
        )
    ]
    return {
        "source": source,
        "root": found["root"],
        "folder": folder,
        "folders": folders,
        "from": start,
        "total_reports": total,
        "reports": reports,
    }
