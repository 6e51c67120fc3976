"""Walk a source, parse and chunk each report, write it in batches.

Per report: unchanged (same file metadata, or same content) → untouched, its
ids stay; modified → its documents and chunks are deleted and re-inserted
with new ids in the same transaction; new → inserted; gone (when asked to
remove them) → deleted. Each run is a new source version. A file that cannot
be read or parsed is recorded with its reason and never stops the run.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from researchstore.dates import is_iso_date, utc_now
from researchstore.errors import InvalidInput
from researchstore.forwarding import prune_history, retire_report_chunks
from researchstore.ids import new_id
from researchstore.index import IndexedChunk
from researchstore.ingest import workers
from researchstore.ingest.chunking import chunk_blocks, chunk_segments
from researchstore.ingest.discovery import (
    REPORT_FILE,
    ReportSource,
    discover,
    discover_keys,
    report_signature,
)
from researchstore.ingest.model import ChunkDraft, ParsedDocument
from researchstore.ingest.parsers import SUPPORTED_SUFFIXES, parse_file
from researchstore.progress import progress_bar

if TYPE_CHECKING:
    from researchstore.store import Store

MAX_FILE_BYTES = 64 * 1024 * 1024
BATCH_CHUNKS = 2_000
BATCH_REPORTS = 200
INDEX_COMMIT_CHUNKS = 100_000
#: The longest a run lets the index lag behind its SQLite commits: while it
#: lags, search cannot see the reports written since (their old ids are gone
#: from SQLite, their new ids not yet in the index).
INDEX_COMMIT_SECONDS = 1.0


@dataclass(slots=True)
class IngestSummary:
    source: str
    version_id: str
    new: int = 0
    modified: int = 0
    unchanged: int = 0
    removed: int = 0
    failed: int = 0
    documents: int = 0
    chunks: int = 0
    seconds: float = 0.0
    #: Reports that could not be stored at all: ``{"report", "reason"}``.
    failures: list[dict[str, str]] = field(default_factory=list)
    #: Files stored with a status other than ok, or not read at all:
    #: ``{"path", "status", "reason", "details"}``.
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "version_id": self.version_id,
            "new": self.new,
            "modified": self.modified,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "failed": self.failed,
            "documents": self.documents,
            "chunks": self.chunks,
            "seconds": round(self.seconds, 3),
            "failures": self.failures,
            "skipped": self.skipped,
        }


@dataclass(slots=True)
class _Document:
    path: str
    parsed: ParsedDocument
    drafts: list[ChunkDraft]
    content_hash: str
    status: str
    reason: str | None


@dataclass(slots=True)
class _Prepared:
    source: ReportSource
    existing_id: int | None
    wanted_id: int | None
    title: str
    date: str
    tags: dict[str, Any]
    signature: str
    content_hash: str
    documents: list[_Document]

    @property
    def chunk_count(self) -> int:
        return sum(len(document.drafts) for document in self.documents)


class ReportError(Exception):
    """This report cannot be stored; the message says why."""


# -- preparing one report (no database work) ---------------------------------


def _read_meta(root: Path, report: ReportSource) -> tuple[dict[str, Any], bytes]:
    if not report.is_dir:
        return {}, b""
    raw = (root / report.key / REPORT_FILE).read_bytes()
    try:
        meta = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ReportError(f"{REPORT_FILE} is not valid JSON: {error}") from None
    if not isinstance(meta, dict):
        raise ReportError(f"{REPORT_FILE} must hold a JSON object")
    title = meta.get("title")
    if title is not None and (not isinstance(title, str) or not title.strip()):
        raise ReportError(f"{REPORT_FILE}: title must be a non-empty string")
    report_date = meta.get("date")
    if report_date is not None and not is_iso_date(report_date):
        raise ReportError(f"{REPORT_FILE}: date must be YYYY-MM-DD, got {report_date!r}")
    tags = meta.get("tags", {})
    if not isinstance(tags, dict) or not all(
        isinstance(value, str | int | float | bool)
        or (isinstance(value, list) and all(isinstance(item, str) for item in value))
        for value in tags.values()
    ):
        raise ReportError(f"{REPORT_FILE}: tags must map names to strings or lists of strings")
    wanted_id = meta.get("id")
    if wanted_id is not None and (
        not isinstance(wanted_id, int) or isinstance(wanted_id, bool) or wanted_id < 1
    ):
        raise ReportError(f"{REPORT_FILE}: id must be a positive integer")
    return meta, raw


def _prepare(
    root: Path, report: ReportSource, *, existing_id: int | None, signature: str, chunk_tokens: int
) -> _Prepared:
    meta, meta_bytes = _read_meta(root, report)
    digest = hashlib.sha256(meta_bytes)
    documents = []
    newest_mtime = 0.0
    for path in report.files:
        documents.append(_prepare_document(root, path, chunk_tokens))
        digest.update(path.encode() + b"\0" + documents[-1].content_hash.encode())
        try:
            newest_mtime = max(newest_mtime, (root / path).stat().st_mtime)
        except OSError:
            pass
    first = documents[0].parsed if documents else None
    fallback_title = Path(report.key).stem if not report.is_dir else Path(report.key).name
    title = meta.get("title") or (first.title if first and first.title else None) or fallback_title
    report_date = meta.get("date") or (first.date if first and first.date else None)
    if not report_date or not is_iso_date(report_date):
        report_date = datetime.fromtimestamp(newest_mtime or time.time(), UTC).date().isoformat()
    return _Prepared(
        source=report,
        existing_id=existing_id,
        wanted_id=meta.get("id"),
        title=title.strip()[:500],
        date=report_date,
        tags=meta.get("tags", {}),
        signature=signature,
        content_hash=digest.hexdigest(),
        documents=documents,
    )


def _prepare_document(root: Path, path: str, chunk_tokens: int) -> _Document:
    file_path = root / path
    try:
        size = file_path.stat().st_size
        if size > MAX_FILE_BYTES:
            parsed = ParsedDocument(kind=_kind_of(path), status="invalid", reason="too_large")
            parsed.skipped.append(f"file is {size} bytes; the limit is {MAX_FILE_BYTES}")
            return _Document(path, parsed, [], f"size:{size}", "invalid", "too_large")
        data = file_path.read_bytes()
    except OSError as error:
        parsed = ParsedDocument(kind=_kind_of(path), status="invalid", reason="unreadable")
        parsed.skipped.append(str(error))
        return _Document(path, parsed, [], "unreadable", "invalid", "unreadable")
    parsed = parse_file(file_path, data=data)
    _, drafts, status, reason = chunk_parsed(parsed, chunk_tokens=chunk_tokens)
    return _Document(path, parsed, drafts, hashlib.sha256(data).hexdigest(), status, reason)


def chunk_parsed(
    parsed: ParsedDocument, *, chunk_tokens: int
) -> tuple[str, list[ChunkDraft], str, str | None]:
    """A parsed file's text, its chunks, and its status and reason as stored.

    A file that parsed but yields no chunk is stored as ``empty``.
    """
    if parsed.segments:
        text, drafts = chunk_segments(parsed.segments, target_tokens=chunk_tokens)
    else:
        text, drafts = chunk_blocks(parsed.blocks, target_tokens=chunk_tokens)
    status, reason = parsed.status, parsed.reason
    if not drafts and status in ("ok", "partial"):
        status, reason = "empty", reason or "no_text"
    return text, drafts, status, reason


def _kind_of(path: str) -> str:
    suffix = Path(path).suffix.lower()
    return {".vtt": "vtt", ".srt": "srt", ".txt": "text", ".md": "text"}.get(suffix, "html")


# -- writing -----------------------------------------------------------------


class _Writer:
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
        self.conn = store.conn
        self.source_id = source_id
        self.source_name = source_name
        self.version_rowid = version_rowid
        self.batch: list[_Prepared] = []
        self.batch_chunks = 0
        self.uncommitted_chunks = 0
        self.last_seq = 0
        self.committed_seq = 0
        self.last_index_commit = time.monotonic()
        self.folders: dict[str, int] = {}

    def add(self, prepared: _Prepared) -> None:
        self.batch.append(prepared)
        self.batch_chunks += prepared.chunk_count
        if self.batch_chunks >= BATCH_CHUNKS or len(self.batch) >= BATCH_REPORTS:
            self.flush()

    def flush(self) -> None:
        """Write the batch in one transaction, then hand its chunks to the index."""
        if not self.batch:
            return
        to_index: list[tuple[int, bool, list[IndexedChunk]]] = []
        now = utc_now()
        with self.store.transaction():
            for prepared in self.batch:
                self.conn.execute("SAVEPOINT report")
                try:
                    report_id, chunks = self._write_report(prepared, now)
                except ReportError as error:
                    self.conn.execute("ROLLBACK TO report")
                    self.conn.execute("RELEASE report")
                    _refuse(self.summary, prepared.source.key, str(error))
                    continue
                self.conn.execute("RELEASE report")
                _count_written(self.summary, prepared)
                to_index.append((report_id, prepared.existing_id is not None, chunks))
            row = self.conn.execute(
                "SELECT seq FROM sqlite_sequence WHERE name = 'index_pending'"
            ).fetchone()
            self.last_seq = row[0] if row else 0
        replaced = False
        for report_id, existed, chunks in to_index:
            if existed:
                self.store.index.delete_report(report_id)
                replaced = True
            self.store.index_chunks(chunks)
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
            self.commit_index()

    def commit_index(self) -> None:
        if self.last_seq and self.last_seq != self.committed_seq:
            self.store.commit_index(self.last_seq)
            self.committed_seq = self.last_seq
        self.uncommitted_chunks = 0
        self.last_index_commit = time.monotonic()

    def _folder(self, path: str) -> int | None:
        if not path:
            return None
        if path in self.folders:
            return self.folders[path]
        row = self.conn.execute(
            "SELECT id FROM folders WHERE source_id = ? AND path = ?", (self.source_id, path)
        ).fetchone()
        if row is None:
            parent = self._folder(path.rpartition("/")[0])
            cursor = self.conn.execute(
                "INSERT INTO folders (folder_id, source_id, parent_id, path, name) "
                "VALUES (?, ?, ?, ?, ?)",
                (new_id(), self.source_id, parent, path, path.rpartition("/")[2]),
            )
            folder_rowid = cursor.lastrowid
        else:
            folder_rowid = row[0]
        self.folders[path] = folder_rowid
        return folder_rowid

    def _write_report(self, prepared: _Prepared, now: str) -> tuple[int, list[IndexedChunk]]:
        source = prepared.source
        tags_json = json.dumps(prepared.tags, sort_keys=True, ensure_ascii=False)
        folder_rowid = self._folder(source.folder)
        values = (
            folder_rowid,
            self.version_rowid,
            int(source.is_dir),
            prepared.title,
            prepared.date,
            tags_json,
            prepared.signature,
            prepared.content_hash,
            now,
        )
        if prepared.existing_id is not None:
            report_id = prepared.existing_id
            retire_report_chunks(
                self.conn, report_id, version_rowid=self.version_rowid, reason="modified", now=now
            )
            self.conn.execute("DELETE FROM chunks WHERE report_id = ?", (report_id,))
            self.conn.execute("DELETE FROM documents WHERE report_id = ?", (report_id,))
            self.conn.execute(
                "UPDATE reports SET folder_id = ?, source_version_id = ?, is_dir = ?, title = ?, "
                "date = ?, tags = ?, signature = ?, content_hash = ?, updated_at = ? "
                "WHERE report_id = ?",
                (*values, report_id),
            )
        else:
            if prepared.wanted_id is not None:
                taken = self.conn.execute(
                    "SELECT key FROM reports WHERE report_id = ?", (prepared.wanted_id,)
                ).fetchone()
                if taken is not None:
                    raise ReportError(
                        f"{REPORT_FILE} asks for id {prepared.wanted_id}, "
                        f"which report {taken[0]!r} already has"
                    )
            report_id = _claim_report_id(self.conn, prepared.wanted_id)
            self.conn.execute(
                "INSERT INTO reports (report_id, source_id, key, folder_id, source_version_id, "
                "is_dir, title, date, tags, signature, content_hash, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (report_id, self.source_id, source.key, *values, now),
            )
        indexed: list[IndexedChunk] = []
        for document in prepared.documents:
            indexed.extend(self._write_document(report_id, prepared, document, now))
        self.conn.execute(
            "INSERT INTO index_pending (report_id, queued_at) VALUES (?, ?)", (report_id, now)
        )
        return report_id, indexed

    def _write_document(
        self, report_id: int, prepared: _Prepared, document: _Document, now: str
    ) -> list[IndexedChunk]:
        parsed = document.parsed
        document_id = new_id()
        cursor = self.conn.execute(
            "INSERT INTO documents (document_id, report_id, source_version_id, path, name, kind, "
            "title, description, language, date, encoding, status, reason, skipped, "
            "content_hash, chunk_count, token_count, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                document_id,
                report_id,
                self.version_rowid,
                document.path,
                document.path.rpartition("/")[2],
                parsed.kind,
                parsed.title,
                parsed.description,
                parsed.language,
                parsed.date,
                parsed.encoding,
                document.status,
                document.reason,
                json.dumps(parsed.skipped[:100], ensure_ascii=False),
                document.content_hash,
                len(document.drafts),
                sum(draft.token_count for draft in document.drafts),
                now,
            ),
        )
        document_rowid = cursor.lastrowid
        chunk_ids = [new_id() for _ in document.drafts]
        self.conn.executemany(
            "INSERT INTO chunks (chunk_id, document_rowid, report_id, position, status, text, "
            "token_count, heading_path, start_ms, end_ms, char_start, char_end) "
            "VALUES (?, ?, ?, ?, 'ok', ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    chunk_id,
                    document_rowid,
                    report_id,
                    draft.position,
                    draft.text,
                    draft.token_count,
                    json.dumps(draft.heading_path, ensure_ascii=False)
                    if draft.heading_path
                    else None,
                    draft.start_ms,
                    draft.end_ms,
                    draft.char_start,
                    draft.char_end,
                )
                for chunk_id, draft in zip(chunk_ids, document.drafts, strict=True)
            ],
        )
        from researchstore.store import index_title

        title = index_title(prepared.title, parsed.title)
        return [
            IndexedChunk(
                chunk_id=chunk_id,
                report_id=report_id,
                document_id=document_id,
                title=title,
                text=draft.text,
                tags=prepared.tags,
                date=prepared.date,
                source=self.source_name,
                kind=parsed.kind,
            )
            for chunk_id, draft in zip(chunk_ids, document.drafts, strict=True)
        ]


def _claim_report_id(conn: sqlite3.Connection, wanted: int | None) -> int:
    """A new report's id: the one report.json asks for, or one never used before.

    ``reports.report_id`` alone would hand a removed report's id to the next
    new report, and an agent holding that id would get an unrelated report;
    a high-water mark in ``meta`` prevents that.
    """
    row = conn.execute("SELECT value FROM meta WHERE key = 'report_id_high'").fetchone()
    highest = max(
        int(row[0]) if row else 0,
        conn.execute("SELECT coalesce(max(report_id), 0) FROM reports").fetchone()[0],
    )
    report_id = wanted if wanted is not None else highest + 1
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('report_id_high', ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (str(max(highest, report_id)),),
    )
    return report_id


# -- the run -----------------------------------------------------------------


def ingest_source(
    store: Store,
    root: Path,
    *,
    name: str | None = None,
    remove_missing: bool = False,
    only: Sequence[str] | None = None,
    kind: str = "directory",
    wait: bool = False,
    progress: bool | None = None,
) -> IngestSummary:
    """Ingest (or refresh) every report under ``root`` as source ``name``.

    With ``only``, just those report keys (paths relative to ``root``) are
    looked at: the cost is then that of the named reports, not of the tree.
    A source of kind ``files`` is a set of single files, refreshed by name,
    never walked.
    """
    if not root.is_dir():
        raise InvalidInput(f"not a directory: {root}", field="source_dir")
    root = root.resolve()
    name = name or root.name
    started = time.perf_counter()
    with store.writing(wait=wait):
        store.sync_index(wait=True)
        source_id, version_rowid, version_id = _begin_version(store, root, name, kind)
        summary = IngestSummary(source=name, version_id=version_id)
        writer = _Writer(store, source_id, name, version_rowid, summary)
        if only is None:
            reports, passed_over = discover(root)
            existing = _existing_reports(store, source_id)
        else:
            reports, passed_over = discover_keys(root, only)
            existing = _existing_reports(store, source_id, keys=[key.strip("/") for key in only])
        summary.skipped.extend(passed_over)
        with progress_bar(f"Ingesting {name}", total=len(reports), enabled=progress) as bar:
            tasks = []
            for report in reports:
                known = existing.pop(report.key, None)
                signature = report_signature(root, report)
                if known is not None and known[1] == signature:
                    summary.unchanged += 1
                    bar.advance()
                else:
                    tasks.append((report, known, signature))
            parallel = workers.PARALLEL_MIN_REPORTS <= len(tasks)
            for (report, known, signature), outcome in workers.prepare_in_order(
                root,
                tasks,
                chunk_tokens=store.chunk_tokens,
                workers=workers.default_workers() if parallel else 1,
            ):
                _accept(store, report, known, signature, outcome, writer, summary)
                bar.advance()
            writer.flush()
            if remove_missing and existing and not reports and only is None:
                # An empty root is far more often an unmounted disk than a
                # source whose every report was deleted on purpose.
                _refuse(
                    summary,
                    "*",
                    f"no reports found under {root}; refusing to remove "
                    f"all {len(existing)} reports of source {name!r}",
                )
            elif remove_missing and existing:
                gone = [report_id for report_id, _, _ in existing.values()]
                _remove_reports(store, gone, version_rowid=version_rowid)
                summary.removed = len(gone)
            writer.last_seq = _last_seq(store)
            writer.commit_index()
        summary.seconds = time.perf_counter() - started
        _finish_version(store, version_rowid, summary)
    return summary


def ingest_file(
    store: Store, path: Path, *, name: str = "local-files", progress: bool | None = None
) -> IngestSummary:
    """Ingest one local file as a single-file report of source ``name``.

    The report's key is the file's absolute path, so files from different
    folders never collide and ingesting the same file again refreshes it.
    The source is of kind ``files``: a re-ingest refreshes its files by name
    and never walks the file system from its root.
    """
    path = path.resolve()
    if not path.is_file():
        raise InvalidInput(f"not a file: {path}", field="path")
    if path.suffix.lower() not in SUPPORTED_SUFFIXES:
        raise InvalidInput(
            f"unsupported file type {path.suffix!r}; supported: "
            f"{', '.join(sorted(SUPPORTED_SUFFIXES))}",
            field="path",
        )
    root = Path(path.anchor)
    return ingest_source(
        store,
        root,
        name=name,
        only=[path.relative_to(root).as_posix()],
        kind="files",
        wait=True,
        progress=progress,
    )


def _accept(
    store: Store,
    report: ReportSource,
    known: tuple[int, str, str] | None,
    signature: str,
    outcome: _Prepared | str,
    writer: _Writer,
    summary: IngestSummary,
) -> None:
    """Hand a prepared report to the writer, or record why it failed."""
    if isinstance(outcome, str):
        _refuse(summary, report.key, outcome)
        return
    if known is not None and known[2] == outcome.content_hash:
        # Touched but not changed: remember the new file times only.
        with store.transaction():
            store.conn.execute(
                "UPDATE reports SET signature = ? WHERE report_id = ?", (signature, known[0])
            )
        summary.unchanged += 1
        return
    writer.add(outcome)


def write_document_report(
    store: Store,
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
    as an ingested one. Runs inside the caller's transaction and writer lock;
    returns the report id.
    """
    prepared = _Prepared(
        source=ReportSource(key, "", False, [path]),
        existing_id=existing_id,
        wanted_id=None,
        title=title,
        date=date,
        tags=tags,
        signature=content_hash,
        content_hash=content_hash,
        documents=[_Document(path, parsed, drafts, content_hash, parsed.status, parsed.reason)],
    )
    summary = IngestSummary(source=source_name, version_id="")
    writer = _Writer(store, source_id, source_name, version_rowid, summary)
    report_id, _ = writer._write_report(prepared, now)
    return report_id


def _count_written(summary: IngestSummary, prepared: _Prepared) -> None:
    if prepared.existing_id is None:
        summary.new += 1
    else:
        summary.modified += 1
    summary.documents += len(prepared.documents)
    summary.chunks += prepared.chunk_count
    for document in prepared.documents:
        if document.status != "ok":
            summary.skipped.append(
                {
                    "path": document.path,
                    "status": document.status,
                    "reason": document.reason,
                    "details": document.parsed.skipped[:20],
                }
            )


def _refuse(summary: IngestSummary, key: str, reason: str) -> None:
    summary.failed += 1
    summary.failures.append({"report": key, "reason": reason})


def _begin_version(
    store: Store, root: Path, name: str, kind: str = "directory"
) -> tuple[int, int, str]:
    version_id = new_id()
    with store.transaction() as conn:
        # We hold the writer lock: a version still "running" was cut short.
        conn.execute("UPDATE source_versions SET status = 'interrupted' WHERE status = 'running'")
        prune_history(conn)
        row = conn.execute("SELECT id, kind FROM sources WHERE name = ?", (name,)).fetchone()
        if row is None:
            source_id = conn.execute(
                "INSERT INTO sources (name, root, kind, created_at) VALUES (?, ?, ?, ?)",
                (name, str(root), kind, utc_now()),
            ).lastrowid
        elif row[1] != kind:
            raise InvalidInput(
                f"the source name {name!r} is taken by a source of kind {row[1]!r}; "
                "choose another name",
                field="name",
            )
        else:
            source_id = row[0]
            conn.execute("UPDATE sources SET root = ? WHERE id = ?", (str(root), source_id))
        version_rowid = conn.execute(
            "INSERT INTO source_versions (version_id, source_id, started_at, status) "
            "VALUES (?, ?, ?, 'running')",
            (version_id, source_id, utc_now()),
        ).lastrowid
    return int(source_id or 0), int(version_rowid or 0), version_id


def _finish_version(store: Store, version_rowid: int, summary: IngestSummary) -> None:
    counts = {key: value for key, value in summary.to_dict().items() if isinstance(value, int)}
    with store.transaction() as conn:
        conn.execute(
            "UPDATE source_versions SET finished_at = ?, status = ?, summary = ? WHERE id = ?",
            (
                utc_now(),
                "completed" if not summary.failed else "completed_with_failures",
                json.dumps({**counts, "failures": summary.failures}),
                version_rowid,
            ),
        )


def _existing_reports(
    store: Store, source_id: int, *, keys: Sequence[str] | None = None
) -> dict[str, tuple[int, str, str]]:
    sql = "SELECT key, report_id, signature, content_hash FROM reports WHERE source_id = ?"
    if keys is None:
        rows = store.conn.execute(sql, (source_id,))
    else:
        marks = ",".join("?" * len(keys))
        rows = store.conn.execute(f"{sql} AND key IN ({marks})", (source_id, *keys))
    return {key: (report_id, signature, digest) for key, report_id, signature, digest in rows}


def _remove_reports(store: Store, report_ids: list[int], *, version_rowid: int) -> None:
    now = utc_now()
    with store.transaction() as conn:
        for report_id in report_ids:
            retire_report_chunks(
                conn, report_id, version_rowid=version_rowid, reason="removed", now=now
            )
            conn.execute("DELETE FROM chunks WHERE report_id = ?", (report_id,))
            conn.execute("DELETE FROM documents WHERE report_id = ?", (report_id,))
            conn.execute("DELETE FROM reports WHERE report_id = ?", (report_id,))
            conn.execute(
                "INSERT INTO index_pending (report_id, queued_at) VALUES (?, ?)", (report_id, now)
            )
    for report_id in report_ids:
        store.index.delete_report(report_id)


def _last_seq(store: Store) -> int:
    row = store.conn.execute(
        "SELECT seq FROM sqlite_sequence WHERE name = 'index_pending'"
    ).fetchone()
    return row[0] if row else 0
