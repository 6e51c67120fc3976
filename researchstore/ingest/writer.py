"""Report, document and chunk rows: the only SQL that writes them.

``ReportWriter`` writes prepared reports in batched transactions, each
report under a savepoint (a report that cannot be written is refused alone),
and queues the change for the derived indexes in the same transaction; after
the commit it feeds the indexes (``Store.feed_indexes``). A modified report is
replaced whole: its chunks are retired to the forwarding record, its rows
deleted and written again with new ids.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from researchstore.errors import InvalidInput
from researchstore.ingest.discovery import REPORT_FILE, ReportSource
from researchstore.ingest.model import ChunkDraft, ParsedDocument
from researchstore.ingest.prepare import (
    MAX_REPORT_ID,
    PreparedDocument,
    PreparedReport,
    ReportError,
)
from researchstore.ingest.summary import IngestSummary
from researchstore.overview import REMOVED_KIND
from researchstore.storage.chunk_rows import delete_report_chunks, insert_chunks
from researchstore.storage.dates import NO_DATE, is_iso_date, utc_now
from researchstore.storage.db import last_pending_seq, queue_pending, read_meta, write_meta
from researchstore.storage.derived import IndexedChunk, index_title
from researchstore.storage.forwarding import prune_history, retire_report_chunks
from researchstore.storage.ids import new_id, new_ids
from researchstore.text.language import document_language

if TYPE_CHECKING:
    from researchstore.store import Store

BATCH_CHUNKS = 2_000
BATCH_REPORTS = 200
INDEX_COMMIT_CHUNKS = 100_000
#: The longest a run lets the word index lag behind its SQLite commits for
#: new reports: search finds them at the next index commit. A replaced
#: report is committed at once (its old ids are gone from SQLite, its new
#: ids not indexed until then). Each commit writes a Tantivy segment, and
#: every search pays per segment (term lookups, a scorer each) until
#: Tantivy's merge policy joins eight of a size, which tantivy-py gives no
#: way to ask for sooner: on SciFact, the Tantivy query took 0.22 ms over
#: the five segments a 1-second lag left against 0.09 ms over one, and each
#: commit cost the writing process about 0.2 s (bench/bench_core.py).
INDEX_COMMIT_SECONDS = 10.0
#: ``json.dumps(value, ensure_ascii=False)``, without making an encoder for
#: each call (a heading path is spelled for nearly every chunk).
_to_json = json.JSONEncoder(ensure_ascii=False).encode


class ReportWriter:
    """Writes prepared reports in batched transactions and feeds the index."""

    def __init__(
        self,
        store: Store,
        source_id: int,
        source_name: str,
        version_rowid: int,
        summary: IngestSummary,
    ) -> None:
        self.store = store
        self.summary = summary
        self.source_id = source_id
        self.source_name = source_name
        self.version_rowid = version_rowid
        self.batch: list[PreparedReport] = []
        self.batch_chunks = 0
        self.uncommitted_chunks = 0
        self.last_seq = 0
        self.committed_seq = 0
        self.last_index_commit = time.monotonic()
        self.folders: dict[str, int] = {}

    def add(self, prepared: PreparedReport) -> None:
        self.batch.append(prepared)
        self.batch_chunks += prepared.chunk_count
        if self.batch_chunks >= BATCH_CHUNKS or len(self.batch) >= BATCH_REPORTS:
            self.flush()

    def flush(self) -> None:
        """Write the batch in one transaction, then hand its chunks to the index."""
        if not self.batch:
            return
        to_index: list[tuple[int, bool, list[IndexedChunk]]] = []
        # Each report's outcome (its id, or why it was refused) is counted and
        # told once the batch is committed: a run stopped inside the
        # transaction never reports what it rolled back.
        outcomes: list[tuple[PreparedReport, int | str]] = []
        now = utc_now()
        with self.store.transaction() as conn:
            for prepared in self.batch:
                conn.execute("SAVEPOINT report")
                try:
                    report_id, chunks = self.write_report(conn, prepared, now)
                except ReportError as error:
                    conn.execute("ROLLBACK TO report")
                    conn.execute("RELEASE report")
                    outcomes.append((prepared, str(error)))
                    continue
                conn.execute("RELEASE report")
                outcomes.append((prepared, report_id))
                to_index.append((report_id, prepared.existing_id is not None, chunks))
            self.last_seq = last_pending_seq(conn)
        for prepared, outcome in outcomes:
            if isinstance(outcome, str):
                self.summary.refuse(prepared.source.key, outcome, report_id=prepared.existing_id)
            else:
                self.summary.count_written(prepared, outcome)
        replaced = False
        for report_id, existed, chunks in to_index:
            self.store.feed_indexes(report_id, chunks, replaced=existed)
            replaced = replaced or existed
            self.uncommitted_chunks += len(chunks)
        self.batch.clear()
        self.batch_chunks = 0
        lag = time.monotonic() - self.last_index_commit
        # A replaced report cannot be found until the index commit lands (its
        # old ids are gone from SQLite, its new ones not yet searchable), so
        # such a batch is committed at once; new reports may wait a little.
        if (
            replaced
            or self.uncommitted_chunks >= INDEX_COMMIT_CHUNKS
            or (lag >= INDEX_COMMIT_SECONDS)
        ):
            self.commit_index(final=False)

    def commit_index(self, *, final: bool = True) -> None:
        """Commit the indexes; during a run (not ``final``) the word index alone."""
        if not self.last_seq:
            pass
        elif self.last_seq != self.committed_seq:
            self.store.commit_indexes(self.last_seq, fed_on_write=None if final else True)
            self.committed_seq = self.last_seq
        elif final:
            self.store.commit_indexes(self.last_seq, fed_on_write=False)
        self.uncommitted_chunks = 0
        self.last_index_commit = time.monotonic()

    def _folder(self, conn: sqlite3.Connection, path: str) -> int | None:
        if not path:
            return None
        if path in self.folders:
            return self.folders[path]
        row = conn.execute(
            "SELECT id FROM folders WHERE source_id = ? AND path = ?", (self.source_id, path)
        ).fetchone()
        if row is None:
            parent = self._folder(conn, path.rpartition("/")[0])
            cursor = conn.execute(
                "INSERT INTO folders (folder_id, source_id, parent_id, path, name) "
                "VALUES (?, ?, ?, ?, ?)",
                (new_id(), self.source_id, parent, path, path.rpartition("/")[2]),
            )
            folder_rowid = int(cursor.lastrowid or 0)
        else:
            folder_rowid = int(row["id"])
        self.folders[path] = folder_rowid
        return folder_rowid

    def write_report(
        self, conn: sqlite3.Connection, prepared: PreparedReport, now: str
    ) -> tuple[int, list[IndexedChunk]]:
        source = prepared.source
        tags_json = json.dumps(prepared.tags, sort_keys=True, ensure_ascii=False)
        folder_rowid = self._folder(conn, source.folder)
        values = (
            folder_rowid,
            self.version_rowid,
            int(source.is_dir),
            prepared.title,
            prepared.date or NO_DATE,
            tags_json,
            prepared.signature,
            prepared.content_hash,
            now,
        )
        if prepared.existing_id is not None:
            report_id = prepared.existing_id
            retire_report_chunks(
                conn, report_id, version_rowid=self.version_rowid, reason="modified", now=now
            )
            delete_report_chunks(conn, report_id)
            conn.execute("DELETE FROM documents WHERE report_id = ?", (report_id,))
            conn.execute(
                "UPDATE reports SET folder_id = ?, source_version_id = ?, is_dir = ?, title = ?, "
                "date = ?, tags = ?, signature = ?, content_hash = ?, updated_at = ? "
                "WHERE report_id = ?",
                (*values, report_id),
            )
        else:
            if prepared.wanted_id is not None:
                taken = conn.execute(
                    "SELECT key FROM reports WHERE report_id = ?", (prepared.wanted_id,)
                ).fetchone()
                if taken is not None:
                    raise ReportError(
                        f"{REPORT_FILE} asks for id {prepared.wanted_id}, "
                        f"which report {taken[0]!r} already has"
                    )
            report_id = claim_report_id(conn, prepared.wanted_id)
            conn.execute(
                "INSERT INTO reports (report_id, source_id, key, folder_id, source_version_id, "
                "is_dir, title, date, tags, signature, content_hash, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (report_id, self.source_id, source.key, *values, now),
            )
        indexed: list[IndexedChunk] = []
        for document in prepared.documents:
            indexed.extend(self._write_document(conn, report_id, prepared, document, now))
        queue_pending(conn, report_id, now)
        return report_id, indexed

    def _write_document(
        self,
        conn: sqlite3.Connection,
        report_id: int,
        prepared: PreparedReport,
        document: PreparedDocument,
        now: str,
    ) -> list[IndexedChunk]:
        parsed = document.parsed
        document_id = new_id()
        # Ingest detected it while preparing (in a worker); a document read
        # by other means (evidence) is detected here.
        language = document_language(parsed.language, [draft.text for draft in document.drafts])
        # The page's own date dates its chunks; without one, the report's does.
        own_date = parsed.date if parsed.date and is_iso_date(parsed.date) else None
        date_source = (parsed.date_source or "page") if own_date else None
        chunk_date = own_date or prepared.date or NO_DATE
        cursor = conn.execute(
            "INSERT INTO documents (document_id, report_id, source_version_id, path, name, kind, "
            "title, description, language, date, date_source, encoding, status, reason, "
            "skipped, content_hash, chunk_count, token_count, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                document_id,
                report_id,
                self.version_rowid,
                document.path,
                document.path.rpartition("/")[2],
                parsed.kind,
                parsed.title,
                parsed.description,
                language,
                parsed.date,
                date_source,
                parsed.encoding,
                document.status,
                document.reason,
                _to_json(parsed.skipped[:100]),
                document.content_hash,
                len(document.drafts),
                sum(draft.token_count for draft in document.drafts),
                now,
            ),
        )
        document_rowid = cursor.lastrowid
        chunk_ids = new_ids(len(document.drafts))
        # A document's chunks share few heading paths: each spelled once.
        paths: dict[tuple[str, ...], str | None] = {(): None}
        for draft in document.drafts:
            if draft.heading_path not in paths:
                paths[draft.heading_path] = _to_json(draft.heading_path)
        insert_chunks(
            conn,
            [
                (
                    chunk_id,
                    document_rowid,
                    report_id,
                    draft.position,
                    draft.text,
                    draft.token_count,
                    paths[draft.heading_path],
                    draft.start_ms,
                    draft.end_ms,
                    draft.char_start,
                    draft.char_end,
                )
                for chunk_id, draft in zip(chunk_ids, document.drafts, strict=True)
            ],
        )
        title = index_title(prepared.title, parsed.title)
        return [
            IndexedChunk(
                chunk_id=chunk_id,
                report_id=report_id,
                document_id=document_id,
                title=title,
                text=draft.text,
                tags=prepared.tags,
                date=chunk_date,
                source=self.source_name,
                kind=parsed.kind,
                language=language,
            )
            for chunk_id, draft in zip(chunk_ids, document.drafts, strict=True)
        ]


def claim_report_id(conn: sqlite3.Connection, wanted: int | None) -> int:
    """A new report's id: the one report.json asks for, or one never used before.

    ``reports.report_id`` alone would hand a removed report's id to the next
    new report, and an agent holding that id would get an unrelated report;
    a high-water mark in ``meta`` prevents that. Ids run from 1 to
    ``MAX_REPORT_ID``; one beyond it (written by an older version) is
    ignored, so it can never push the next id out of range.
    """
    highest = _highest_report_id(conn)
    if wanted is not None:
        report_id = wanted
    elif highest < MAX_REPORT_ID:
        report_id = highest + 1
    else:
        report_id = _unused_report_id(conn)
    write_meta(conn, "report_id_high", str(max(highest, report_id)))
    return report_id


def _highest_report_id(conn: sqlite3.Connection) -> int:
    """The largest id in range ever claimed, as far as the store remembers."""
    held = conn.execute(
        "SELECT coalesce(max(report_id), 0) FROM reports WHERE report_id <= ?", (MAX_REPORT_ID,)
    ).fetchone()[0]
    mark = read_meta(conn, "report_id_high") or "0"
    if mark.isdigit() and int(mark) <= MAX_REPORT_ID:
        return max(int(held), int(mark))
    # An older version stored an id out of range, and the mark with it: the
    # ids of removed reports that the forwarding record still names stand in
    # for what the mark remembered.
    retired = conn.execute(
        "SELECT coalesce(max(report_id), 0) FROM chunk_history WHERE report_id <= ?",
        (MAX_REPORT_ID,),
    ).fetchone()[0]
    return max(int(held), int(retired))


def _unused_report_id(conn: sqlite3.Connection) -> int:
    """The smallest id no report holds and the forwarding record does not name.

    Only when every id up to the limit has been claimed (a report.json asked
    for the largest): reusing a long-gone id beats refusing every new report.
    """
    row = conn.execute(
        "SELECT min(candidate) FROM ("
        " SELECT 1 AS candidate"
        " UNION ALL SELECT report_id + 1 FROM reports WHERE report_id < ?1"
        " UNION ALL SELECT report_id + 1 FROM chunk_history WHERE report_id < ?1"
        ") WHERE candidate NOT IN (SELECT report_id FROM reports)"
        " AND candidate NOT IN (SELECT report_id FROM chunk_history)",
        (MAX_REPORT_ID,),
    ).fetchone()
    if row[0] is None:
        raise ReportError(f"every report id from 1 to {MAX_REPORT_ID} is in use")
    return int(row[0])


def write_document_report(
    store: Store,
    conn: sqlite3.Connection,
    *,
    source_id: int,
    source_name: str,
    version_rowid: int,
    key: str,
    path: str,
    parsed: ParsedDocument,
    drafts: list[ChunkDraft],
    title: str,
    date: str,
    tags: dict[str, Any],
    content_hash: str,
    existing_id: int | None,
    now: str,
) -> int:
    """Write a one-document report (new, or replacing ``existing_id``) as ingest does.

    For callers that read a document themselves (evidence retrieval): the
    report gets the same rows, forwarding record and ``index_pending`` entry
    as an ingested one. Runs inside the caller's transaction (``conn``) and
    writer lock; returns the report id.
    """
    prepared = PreparedReport(
        source=ReportSource(key, "", False, [path]),
        existing_id=existing_id,
        wanted_id=None,
        title=title,
        date=date,
        tags=tags,
        signature=content_hash,
        content_hash=content_hash,
        documents=[
            PreparedDocument(path, parsed, drafts, content_hash, parsed.status, parsed.reason)
        ],
    )
    summary = IngestSummary(source=source_name, version_id="")
    writer = ReportWriter(store, source_id, source_name, version_rowid, summary)
    report_id, _ = writer.write_report(conn, prepared, now)
    return report_id


class Version(NamedTuple):
    """A run's new source version, and the source it belongs to."""

    source_id: int
    rowid: int
    version_id: str
    #: The root the source had until this run moved it (``move_root``), or None.
    moved_from: str | None


def begin_version(
    store: Store, root: Path, name: str, kind: str = "directory", *, move_root: bool = False
) -> Version:
    """Start a run of source ``name`` at ``root`` (creating the source if new).

    A source's root changes only when the caller says so (``move_root``):
    another directory under a taken name is refused, since the next
    re-ingest would remove every report the old root holds.
    """
    version_id = new_id()
    moved_from = None
    with store.transaction() as conn:
        # We hold the writer lock: a version still "running" was cut short.
        conn.execute("UPDATE source_versions SET status = 'interrupted' WHERE status = 'running'")
        prune_history(conn)
        row = conn.execute("SELECT id, kind, root FROM sources WHERE name = ?", (name,)).fetchone()
        if row is None:
            source_id = add_source(conn, name, str(root), kind, utc_now())
        elif row["kind"] != kind:
            raise InvalidInput(
                f"the source name {name!r} is taken by a source of kind {row['kind']!r}; "
                "choose another name",
                field="name",
            )
        else:
            source_id = row["id"]
            if row["root"] != str(root):
                if not move_root:
                    raise InvalidInput(
                        f"source {name!r} is {row['root']}, not {root}; to ingest {root} "
                        "as a source of its own, give it another name (--name NAME); if "
                        f"source {name!r} has moved to {root}, say so (--move-root), and "
                        "the next reingest removes the reports not found there",
                        field="name",
                    )
                moved_from = str(row["root"])
                conn.execute("UPDATE sources SET root = ? WHERE id = ?", (str(root), source_id))
        version_rowid = conn.execute(
            "INSERT INTO source_versions (version_id, source_id, started_at, status) "
            "VALUES (?, ?, ?, 'running')",
            (version_id, source_id, utc_now()),
        ).lastrowid
    return Version(int(source_id or 0), int(version_rowid or 0), version_id, moved_from)


def add_source(conn: sqlite3.Connection, name: str, root: str, kind: str, now: str) -> int:
    """A new source's row; its id."""
    return int(
        conn.execute(
            "INSERT INTO sources (name, root, kind, created_at) VALUES (?, ?, ?, ?)",
            (name, root, kind, now),
        ).lastrowid
        or 0
    )


def record_link_choice(conn: sqlite3.Connection, source_id: int, follow: bool) -> None:
    """Whether the source follows links outside its root, from now on."""
    conn.execute(
        "UPDATE sources SET follow_external_links = ? WHERE id = ?", (int(follow), source_id)
    )


def record_finished_version(
    conn: sqlite3.Connection, source_id: int, now: str, summary: dict[str, Any]
) -> int:
    """A run of the source that is over as it starts (evidence stored in one step); its rowid."""
    return int(
        conn.execute(
            "INSERT INTO source_versions (version_id, source_id, started_at, finished_at, "
            "status, summary) VALUES (?, ?, ?, ?, 'completed', ?)",
            (new_id(), source_id, now, now, json.dumps(summary)),
        ).lastrowid
        or 0
    )


def record_signature(conn: sqlite3.Connection, report_id: int, signature: str) -> None:
    """A report touched but not changed: its new file times only."""
    conn.execute("UPDATE reports SET signature = ? WHERE report_id = ?", (signature, report_id))


def finish_version(
    store: Store,
    version_rowid: int,
    summary: IngestSummary,
    *,
    status: str | None = None,
    stopped: str | None = None,
) -> None:
    """Record how the run went: its ``status`` (by default from its failures) and counts.

    ``stopped`` says why a run that did not get to its end stopped.
    """
    counts = {key: value for key, value in summary.to_dict().items() if isinstance(value, int)}
    record: dict[str, Any] = {**counts, "failures": summary.failures}
    if stopped is not None:
        record["stopped"] = stopped
    with store.transaction() as conn:
        conn.execute(
            "UPDATE source_versions SET finished_at = ?, status = ?, summary = ? WHERE id = ?",
            (utc_now(), status or summary.status, json.dumps(record), version_rowid),
        )


class KnownReport(NamedTuple):
    """A report the store holds: what change detection compares."""

    report_id: int
    signature: str
    content_hash: str


def existing_reports(
    store: Store, source_id: int, *, keys: Sequence[str] | None = None
) -> dict[str, KnownReport]:
    """The reports a source has now, by key: ``(report_id, signature, content_hash)``."""
    sql = "SELECT key, report_id, signature, content_hash FROM reports WHERE source_id = ?"
    with store.reading() as conn:
        if keys is None:
            rows = conn.execute(sql, (source_id,)).fetchall()
        else:
            marks = ",".join("?" * len(keys))
            rows = conn.execute(f"{sql} AND key IN ({marks})", (source_id, *keys)).fetchall()
    return {
        row["key"]: KnownReport(row["report_id"], row["signature"], row["content_hash"])
        for row in rows
    }


def remove_reports(store: Store, report_ids: list[int], *, version_rowid: int) -> None:
    now = utc_now()
    with store.transaction() as conn:
        for report_id in report_ids:
            retire_report_chunks(
                conn, report_id, version_rowid=version_rowid, reason="removed", now=now
            )
            delete_report_chunks(conn, report_id)
            conn.execute("DELETE FROM documents WHERE report_id = ?", (report_id,))
            conn.execute("DELETE FROM reports WHERE report_id = ?", (report_id,))
            queue_pending(conn, report_id, now)
    store.remove_from_indexes(report_ids)


class RemovedSource(NamedTuple):
    """What ``remove_source`` took out of the store."""

    name: str
    root: str
    reports: int
    chunks: int


def source_contents(store: Store, name: str) -> RemovedSource:
    """What removing the directory source ``name`` would take: its reports and chunks."""
    with store.reading() as conn:
        row = conn.execute(
            "SELECT s.id, s.root, s.kind FROM sources s WHERE s.name = ?", (name,)
        ).fetchone()
        if row is None or row["kind"] not in ("directory", "files"):
            raise InvalidInput(
                f"no source named {name!r} (researchstore sources STORE lists them; "
                "a workspace's evidence is not removed this way)",
                field="source",
            )
        reports, chunks = conn.execute(
            "SELECT count(*), coalesce(sum(c.chunks), 0) FROM reports r "
            "LEFT JOIN (SELECT report_id, count(*) AS chunks FROM chunks GROUP BY report_id) c "
            "ON c.report_id = r.report_id WHERE r.source_id = ?",
            (row["id"],),
        ).fetchone()
    return RemovedSource(name, str(row["root"] or ""), int(reports), int(chunks))


def remove_source(store: Store, name: str) -> RemovedSource:
    """Remove the source ``name`` and every report of it, on purpose.

    Its chunks go to the forwarding record as ``removed`` (an old chunk id
    still says what became of it), every index forgets them, and the
    removal is a run of its own in the source's history. The source's row
    stays for that history, as kind ``removed`` under a name that no longer
    takes ``name``: a later ingest may use the name again.
    """
    with store.writing(wait=False):
        store.sync_index(wait=True)
        contents = source_contents(store, name)
        with store.reading() as conn:
            source_id = int(
                conn.execute("SELECT id FROM sources WHERE name = ?", (name,)).fetchone()[0]
            )
        version_id = new_id()
        with store.transaction() as conn:
            version_rowid = int(
                conn.execute(
                    "INSERT INTO source_versions (version_id, source_id, started_at, status) "
                    "VALUES (?, ?, ?, 'running')",
                    (version_id, source_id, utc_now()),
                ).lastrowid
                or 0
            )
        report_ids = [report.report_id for report in existing_reports(store, source_id).values()]
        remove_reports(store, report_ids, version_rowid=version_rowid)
        summary = {"removed": len(report_ids), "chunks": contents.chunks, "failures": []}
        with store.transaction() as conn:
            conn.execute("DELETE FROM folders WHERE source_id = ?", (source_id,))
            conn.execute(
                "UPDATE source_versions SET finished_at = ?, status = 'removed', summary = ? "
                "WHERE id = ?",
                (utc_now(), json.dumps(summary), version_rowid),
            )
            conn.execute(
                "UPDATE sources SET name = ?, kind = ? WHERE id = ?",
                (f"{REMOVED_KIND}:{version_id}:{name}", REMOVED_KIND, source_id),
            )
            seq = last_pending_seq(conn)
        if report_ids:
            store.commit_indexes(seq)
    return contents
