"""``researchstore check``: does the store agree with itself and its indexes?

It reads everything back: SQLite's integrity check over every page; every
file of the word index against its checksum; every document the index
stores (its chunk id), compared with the chunks the store finds by words
(``ok``, and those whose embedding failed), id for id;
and each report's postings, counted through a query. What opening the
store found and repaired is told too. Each problem comes with what to do.
When the store cannot be opened at all, ``check_file`` runs SQLite's check
on the file alone.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from researchstore.errors import StoreDamaged
from researchstore.storage.db import (
    damaged_store,
    distrust_schema,
    pending_count,
    undecodable_message,
)
from researchstore.storage.derived import SEARCHABLE, IndexDamaged
from researchstore.storage.filters import stored_tags

if TYPE_CHECKING:
    from researchstore.store import Store

#: Lines of SQLite's integrity check, and reports whose counts differ, told by name.
SHOWN = 5


def check_store(store: Store) -> dict[str, Any]:
    """The store checked against itself and its word index, everything read back."""
    problems: list[str] = []
    report: dict[str, Any] = {}
    with store.reading() as conn:
        integrity = _integrity(conn)
        report["integrity"] = integrity
        if integrity != "ok":
            problems.append(damaged_store(store.path, integrity, checked=True).message)
        try:
            ok_rows = conn.execute(
                f"SELECT chunk_id, report_id FROM chunks c WHERE {SEARCHABLE}"
            ).fetchall()
            pending = pending_count(conn)
            untagged = _reports_with_unreadable_tags(conn)
        except sqlite3.DatabaseError as error:
            # Damaged beyond reading the chunks: the index cannot be compared.
            problems.append(damaged_store(store.path, str(error), checked=True).message)
            report.update(consistent=False, problems=problems, repaired_on_open=store.index_repairs)
            return report
    if untagged:
        report["unreadable_tags"] = untagged
        problems.append(
            f"{len(untagged)} reports hold tags that are not a JSON object (report "
            f"{', '.join(map(str, untagged[:SHOWN]))}): they read as untagged. researchstore "
            "never writes such tags: restore the store file from a backup, or ingest the "
            "source into a new store"
        )
    ok_ids = {row[0] for row in ok_rows}
    per_report = Counter(row[1] for row in ok_rows)
    report.update(
        chunks_ok=len(ok_ids),
        indexed=0,
        missing_from_index=0,
        unknown_to_store=0,
        duplicates_in_index=0,
        reports_differing=0,
        pending=pending,
        index_files="ok",
    )
    index = store.search_index()
    rebuild = f"rebuild it with: researchstore rebuild-index {store.path}"
    if store.read_only and store.index_in_cache:
        # rebuild-index would be refused: the read-only store's indexes live in the cache.
        rebuild = (
            f"remove {index.path.parent} (the cache's copy of its indexes): the next open "
            "builds them again from the store"
        )
    damaged_files: list[str] = []
    unreadable = None
    # Under the writer lock: no other process merges or replaces files meanwhile.
    with store.holding_off_writers():
        try:
            index.refresh()
            damaged_files = index.verify()
            indexed = index.all_chunk_ids()
            counts = index.report_counts(sorted(per_report))
        except IndexDamaged as error:
            unreadable = error.message
    if damaged_files:
        report["index_files"] = damaged_files
        problems.append(
            f"the word index {index.path} is damaged ({'; '.join(damaged_files[:SHOWN])}); "
            + rebuild
        )
    if unreadable is not None:
        if not damaged_files:
            report["index_files"] = unreadable
            problems.append(f"the word index cannot be read ({unreadable}); {rebuild}")
        report.update(consistent=False, problems=problems, repaired_on_open=store.index_repairs)
        return report
    indexed_set = set(indexed)
    differing = sorted(
        report_id for report_id, count in per_report.items() if counts.get(report_id) != count
    )
    report.update(
        indexed=len(indexed),
        missing_from_index=len(ok_ids - indexed_set),
        unknown_to_store=len(indexed_set - ok_ids),
        duplicates_in_index=len(indexed) - len(indexed_set),
        reports_differing=len(differing),
    )
    disagreement = _disagreement(report, differing, counts, per_report)
    if pending and store.read_only:
        problems.append(
            f"{pending} changes are not in the word index yet ({disagreement or 'none seen'}) "
            f"and cannot be applied: the store is read-only ({store.read_only_reason}); "
            "searches read what the index holds. A writable open of the store applies them"
        )
    elif pending:
        # Until they are applied the index is expected to differ.
        problems.append(
            f"{pending} changes are not in the word index yet ({disagreement or 'none seen'}): "
            "another process is writing the store, or a run stopped before its index commit "
            "(a crash, a full disk); the next open or run applies them"
        )
    elif disagreement:
        problems.append(f"the word index disagrees with the store ({disagreement}); {rebuild}")
    if store.keeps_vectors():
        problems.extend(_check_vectors(store, report, pending=bool(pending), rebuild=rebuild))
    report.update(consistent=not problems, problems=problems, repaired_on_open=store.index_repairs)
    return report


def _check_vectors(
    store: Store, report: dict[str, Any], *, pending: bool, rebuild: str
) -> list[str]:
    """The vector index against the store's vectors, key for key, its files read back."""
    from researchstore.storage.vectors import store_model, vector_stats

    problems = []
    with store.reading() as conn:
        stored = {row[0] for row in conn.execute("SELECT chunk_rowid FROM vectors")}
        stats = vector_stats(conn)
        try:
            model = store_model(conn)
        except StoreDamaged as damage:  # its dimension is no number: said, and checked on
            model = None
            problems.append(damage.message)
        # Vectors the index leaves out (``VectorIndex.read``): of another size, or no blob.
        misshapen = set()
        if model is not None:
            misshapen = {
                row[0]
                for row in conn.execute(
                    "SELECT chunk_rowid FROM vectors "
                    "WHERE typeof(vector) != 'blob' OR length(vector) != ?",
                    (model.dimension,),
                )
            }
    index = store.vector_index()
    with store.holding_off_writers():
        try:
            index.refresh()
            files = index.verify()
            held = {int(key) for key in index.all_chunk_ids()}
        except IndexDamaged as error:
            files, held = [error.message], set()
    missing, unknown = len(stored - held - misshapen), len(held - stored)
    report["vectors"] = {
        "model": model.model_id if model else None,
        "dimension": model.dimension if model else None,
        "stored": len(stored),
        "indexed": len(held),
        "missing_from_index": missing,
        "unknown_to_store": unknown,
        "embed_failed": stats["embed_failed"],
        "misshapen": len(misshapen),
        "index_files": files or "ok",
    }
    if misshapen:
        problems.append(
            f"{len(misshapen)} vectors in the store file are not of its dimension "
            f"({model.dimension if model else '?'} bytes), so they are left out of the vector "
            "index: the file was altered or damaged; drop its vectors and embed again "
            f"(researchstore embed {store.path} --drop, then researchstore embed)"
        )
    if files:
        problems.append(
            f"the vector index {index.path} is damaged ({'; '.join(files[:SHOWN])}); {rebuild}"
        )
    elif (missing or unknown) and not pending:
        problems.append(
            f"the vector index disagrees with the store ({missing} vectors missing from it, "
            f"{unknown} the store no longer has); {rebuild}"
        )
    return problems


def check_file(path: Path, opening: StoreDamaged) -> dict[str, Any]:
    """For a store that cannot be opened: SQLite's integrity check of the file alone, read only.

    The file may be one refused for the SQL it holds: its schema is distrusted here too.
    """
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            distrust_schema(conn)
            integrity = _integrity(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError as error:
        integrity = str(error)
    return {
        "integrity": integrity,
        "consistent": False,
        "problems": [opening.message],
        "repaired_on_open": [],
    }


def _reports_with_unreadable_tags(conn: sqlite3.Connection) -> list[int]:
    """The reports whose stored tags are not a JSON object (``filters.stored_tags``)."""
    rows = conn.execute(
        "SELECT report_id, tags FROM reports WHERE tags IS NOT '{}' ORDER BY report_id"
    )
    return [int(report_id) for report_id, tags in rows if stored_tags(tags) is None]


def _integrity(conn: sqlite3.Connection) -> str:
    """SQLite's integrity check: ``ok``, or its first findings (or why it could not run)."""
    try:
        lines = [str(row[0]) for row in conn.execute("PRAGMA integrity_check").fetchall()]
    except sqlite3.DatabaseError as error:
        return str(error)
    except UnicodeDecodeError as error:  # SQLite's message quotes the file's own bytes
        return str(undecodable_message(error))
    if lines == ["ok"]:
        return "ok"
    more = f" (and {len(lines) - SHOWN} more)" if len(lines) > SHOWN else ""
    return "; ".join(lines[:SHOWN]) + more


def _disagreement(
    report: dict[str, Any],
    differing: list[int],
    counts: dict[int, int],
    per_report: Counter[int],
) -> str:
    parts = [
        f"{report[key]} {label}"
        for key, label in (
            ("missing_from_index", "chunks missing from it"),
            ("unknown_to_store", "chunks the store no longer has"),
            ("duplicates_in_index", "chunks held twice"),
        )
        if report[key]
    ]
    if differing:
        named = ", ".join(
            f"report {report_id}: {counts.get(report_id, 0)} indexed, "
            f"{per_report[report_id]} stored"
            for report_id in differing[:SHOWN]
        )
        parts.append(f"{len(differing)} reports counted differently ({named})")
    return "; ".join(parts)
