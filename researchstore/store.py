"""``Store``: the SQLite connection, the Tantivy index beside it, and the tools.

SQLite is the only truth. Every change that the index must follow is written
to ``index_pending`` in the same transaction as the change itself; the index
is brought up to date from that record after the SQLite commit, and a crash
in between is repaired on the next open. The index folder is rebuilt from
SQLite whenever it is missing, belongs to another store, is of an older
schema, or is behind or ahead of what SQLite says it has applied.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from researchstore import queries
from researchstore.dates import utc_now
from researchstore.errors import (
    InvalidInput,
    ResearchStoreError,
    StoreLocked,
    UpstreamUnavailable,
)
from researchstore.index import (
    INDEX_SCHEMA_VERSION,
    IndexedChunk,
    SearchFilters,
    SearchIndex,
    tag_value,
)
from researchstore.progress import progress_bar
from researchstore.schema import migrate

if TYPE_CHECKING:
    from researchstore.ingest.pipeline import IngestSummary

BUSY_TIMEOUT_MS = 10_000
_REBUILD_BATCH = 5_000


def connect(path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode: every transaction is explicit."""
    conn = sqlite3.connect(
        path,
        isolation_level=None,
        check_same_thread=False,
        cached_statements=256,
        timeout=BUSY_TIMEOUT_MS / 1000,
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    # NORMAL in WAL mode survives any process crash (kill -9); only a power
    # loss can drop the last commits, and the index check below catches that.
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA mmap_size = 2147418112")  # SQLite's default ceiling; address space only
    conn.execute("PRAGMA cache_size = -65536")
    return conn


class WriterLock:
    """An exclusive, process-wide lock on the store for writers (``<db>.lock``).

    The file holds who took it, so a refused writer can say who holds it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: Any = None

    def acquire(self, *, wait: bool, timeout: float = 60.0) -> bool:
        handle = open(self.path, "a+")
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not wait or time.monotonic() > deadline:
                    handle.close()
                    return False
                time.sleep(0.05)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "since": utc_now()}))
        handle.flush()
        self._handle = handle
        return True

    def holder(self) -> str:
        try:
            info = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return "another process"
        if not info:
            return "another process"
        return f"process {info.get('pid')} (since {info.get('since')})"

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    @property
    def held(self) -> bool:
        return self._handle is not None


def _open_error(path: Path, error: sqlite3.DatabaseError) -> ResearchStoreError:
    """Say why a store file could not be opened, in terms a user can act on."""
    text = str(error)
    if "locked" in text or "busy" in text:
        return UpstreamUnavailable(f"{path} is busy ({text}); try again", field="store")
    if "readonly" in text or "read-only" in text:
        return InvalidInput(
            f"{path} is read-only: researchstore needs to write the file and its folder "
            "(write-ahead log, index)",
            field="store",
        )
    return InvalidInput(f"{path} is not a researchstore SQLite file ({text})", field="store")


class Store:
    """One research store: a SQLite file and the Tantivy index beside it.

    >>> with Store("research.db") as store:
    ...     store.ingest("fixtures/source", name="fixtures")
    ...     hits = store.search("varroa mites")
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        chunk_tokens: int = 256,
        progress: bool | None = None,
    ) -> None:
        self.path = Path(path)
        self.index_path = self.path.with_name(self.path.name + ".index")
        self.chunk_tokens = chunk_tokens
        self.progress = progress
        self._lock = threading.RLock()
        self._writer_lock = WriterLock(self.path.with_name(self.path.name + ".lock"))
        self._writer_depth = 0
        self.index: SearchIndex | None = None  # type: ignore[assignment]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_dir():
            raise InvalidInput(f"{self.path} is a directory, not a store file", field="store")
        try:
            self.conn = connect(self.path)
            with self.transaction():
                migrate(self.conn)
        except sqlite3.DatabaseError as error:
            raise _open_error(self.path, error) from None
        self.store_uuid = self._meta("store_uuid") or ""
        self.index = self._open_index()
        self.sync_index(wait=False)

    # -- lifetime --------------------------------------------------------

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the index writer and the connection; checkpoint the WAL.

        After a checkpoint the ``.db`` file alone holds everything, so it
        can be copied on its own.
        """
        with self._lock:
            if self.conn is None:
                return
            if self.index is not None:
                self.index.close_writer()
            try:
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.OperationalError:
                pass  # another connection is reading; its close checkpoints
            self.conn.close()
            self.conn = None  # type: ignore[assignment]
            self._writer_lock.release()

    # -- transactions ----------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``); nests as a no-op."""
        with self._lock:
            if self.conn.in_transaction:
                yield self.conn
                return
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every query inside sees the same snapshot."""
        with self._lock:
            if self.conn.in_transaction:
                yield self.conn
                return
            self.conn.execute("BEGIN")
            try:
                yield self.conn
            finally:
                self.conn.execute("COMMIT")

    @contextmanager
    def writing(self, *, wait: bool = True) -> Iterator[None]:
        """Hold the store's writer lock (re-entrant within this Store)."""
        with self._lock:
            if self._writer_depth == 0 and not self._writer_lock.acquire(wait=wait):
                raise StoreLocked(
                    f"the store is being written by {self._writer_lock.holder()}",
                    details={"lock": str(self._writer_lock.path)},
                )
            self._writer_depth += 1
            try:
                yield
            finally:
                self._writer_depth -= 1
                if self._writer_depth == 0:
                    if self.index is not None:
                        self.index.close_writer()
                    self._writer_lock.release()

    def _meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self.conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # -- the index -------------------------------------------------------

    def _index_problem(self) -> str | None:
        """Why the index folder cannot be used as it is, or None."""
        sidecar = SearchIndex.read_sidecar(self.index_path)
        if sidecar is None:
            return "missing"
        if sidecar.get("store_uuid") != self.store_uuid:
            return "built for another store"
        if sidecar.get("index_schema") != INDEX_SCHEMA_VERSION:
            return "older index schema"
        applied = int(self._meta("index_applied_seq") or 0)
        row = self.conn.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = 'index_pending'"
        ).fetchone()
        issued = row[0] if row else 0
        seen = sidecar.get("applied_seq")
        if not isinstance(seen, int) or seen < applied:
            return "behind the store"
        if seen > issued:
            return "ahead of the store"
        return None

    def _open_index(self) -> SearchIndex:
        problem = self._index_problem()
        if problem is None:
            index = self._try_open_index()
            if index is not None:
                return index
            problem = "unreadable"
        with self.writing(wait=True):
            # Another process may have rebuilt it while we waited.
            if self._index_problem() is None:
                index = self._try_open_index()
                if index is not None:
                    return index
            return self._rebuild(problem)

    def _try_open_index(self) -> SearchIndex | None:
        try:
            return SearchIndex.open(self.index_path)
        except ValueError:  # tantivy's word for a damaged folder: rebuild it
            return None

    def rebuild_index(self) -> int:
        """Rebuild the index from SQLite; return the number of chunks indexed."""
        with self.writing(wait=True):
            self.index.close_writer()
            self.index = self._rebuild("asked to")
            return self.index.num_docs

    def _rebuild(self, why: str) -> SearchIndex:
        temporary = self.index_path.with_name(self.index_path.name + f".rebuild-{os.getpid()}")
        SearchIndex.remove(temporary)
        index = SearchIndex.create(temporary)
        index.writer(bulk=True)
        with self.reading():
            total = self.conn.execute("SELECT count(*) FROM chunks WHERE status = 'ok'").fetchone()[
                0
            ]
            row = self.conn.execute(
                "SELECT seq FROM sqlite_sequence WHERE name = 'index_pending'"
            ).fetchone()
            snapshot_seq = row[0] if row else 0
            description = f"Rebuilding index ({why})"
            with progress_bar(description, total=total, enabled=self.progress) as bar:
                batch: list[IndexedChunk] = []
                for chunk in self._indexed_chunks():
                    batch.append(chunk)
                    if len(batch) >= _REBUILD_BATCH:
                        index.add(batch)
                        bar.advance(len(batch))
                        batch.clear()
                index.add(batch)
                bar.advance(len(batch))
        index.commit()
        index.write_sidecar(store_uuid=self.store_uuid, applied_seq=snapshot_seq)
        index.close_writer()
        old = self.index_path.with_name(self.index_path.name + f".old-{os.getpid()}")
        if self.index_path.exists():
            os.replace(self.index_path, old)
        os.replace(temporary, self.index_path)
        SearchIndex.remove(old)
        with self.transaction():
            self.conn.execute("DELETE FROM index_pending WHERE seq <= ?", (snapshot_seq,))
            self._set_meta("index_applied_seq", str(snapshot_seq))
        return SearchIndex.open(self.index_path)

    def _indexed_chunks(self, report_id: int | None = None) -> Iterator[IndexedChunk]:
        where = "WHERE c.status = 'ok'" + (" AND c.report_id = ?" if report_id is not None else "")
        cursor = self.conn.execute(
            "SELECT c.chunk_id, c.report_id, d.document_id, r.title, d.title, c.text, r.tags, "
            "r.date, s.name, d.kind, e.workspace_id FROM chunks c "
            "JOIN documents d ON d.id = c.document_rowid "
            "JOIN reports r ON r.report_id = c.report_id JOIN sources s ON s.id = r.source_id "
            # Evidence (researchstore/evidence/) is indexed under its workspace.
            "LEFT JOIN evidence e ON e.report_id = c.report_id "
            f"{where} ORDER BY c.id",
            () if report_id is None else (report_id,),
        )
        tags_cache: dict[str, dict[str, Any]] = {}
        for row in cursor:
            tags = tags_cache.get(row[6])
            if tags is None:
                tags = tags_cache[row[6]] = json.loads(row[6])
            yield IndexedChunk(
                chunk_id=row[0],
                report_id=row[1],
                document_id=row[2],
                title=index_title(row[3], row[4]),
                text=row[5],
                tags=tags,
                date=row[7],
                source=row[8],
                kind=row[9],
                workspace=row[10],
            )

    def sync_index(self, *, wait: bool = True) -> int:
        """Apply every pending change to the index; return how many reports.

        With ``wait=False`` and another writer at work, do nothing: that
        writer applies the record itself.
        """
        with self._lock:
            pending = self.conn.execute("SELECT 1 FROM index_pending LIMIT 1").fetchone()
            if pending is None:
                return 0
            try:
                with self.writing(wait=wait):
                    return self._apply_pending()
            except StoreLocked:
                if wait:
                    raise
                return 0

    def _apply_pending(self) -> int:
        rows = self.conn.execute("SELECT seq, report_id FROM index_pending ORDER BY seq").fetchall()
        if not rows:
            return 0
        report_ids = list(dict.fromkeys(report_id for _, report_id in rows))
        with self.reading():
            for report_id in report_ids:
                self.index.delete_report(report_id)
                self.index_chunks(list(self._indexed_chunks(report_id)))
        self.commit_index(rows[-1][0])
        return len(report_ids)

    def index_chunks(self, chunks: list[IndexedChunk]) -> None:
        """Add chunks to the open index writer; a chunk it rejects is marked."""
        try:
            self.index.add(chunks)
            return
        except Exception:  # find the rejected one(s) below, one by one
            pass
        failed = []
        for chunk in chunks:
            try:
                self.index.add([chunk])
            except Exception:
                failed.append(chunk.chunk_id)
        if failed:
            with self.transaction():
                self.conn.executemany(
                    "UPDATE chunks SET status = 'embed_failed' WHERE chunk_id = ?",
                    [(chunk_id,) for chunk_id in failed],
                )

    def commit_index(self, applied_seq: int) -> None:
        """Commit the index writer, then forget the pending rows it reflects."""
        self.index.commit()
        self.index.write_sidecar(store_uuid=self.store_uuid, applied_seq=applied_seq)
        with self.transaction():
            self.conn.execute("DELETE FROM index_pending WHERE seq <= ?", (applied_seq,))
            self._set_meta("index_applied_seq", str(applied_seq))

    # -- ingest ----------------------------------------------------------

    def ingest(
        self,
        source_dir: str | os.PathLike[str],
        *,
        name: str | None = None,
        progress: bool | None = None,
    ) -> IngestSummary:
        """Ingest every report under ``source_dir`` into the source ``name``."""
        from researchstore.ingest.pipeline import ingest_source

        return ingest_source(
            self,
            Path(source_dir),
            name=name,
            progress=self.progress if progress is None else progress,
        )

    def ingest_file(
        self, path: str | os.PathLike[str], *, name: str = "local-files"
    ) -> IngestSummary:
        """Ingest one local file as its own report (refreshing it if known)."""
        from researchstore.ingest.pipeline import ingest_file

        return ingest_file(self, Path(path), name=name, progress=False)

    # -- the tools, as Python methods ------------------------------------

    def call(self, tool_name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run any tool by name; always returns a ``result`` or ``error`` envelope."""
        from researchstore.tools import call_tool

        return call_tool(self, tool_name, arguments)

    def get_chunk(self, chunk_id: str) -> dict[str, Any] | None:
        with self.reading() as conn:
            return queries.get_chunk(conn, chunk_id)

    def get_chunks(self, ids: list[str]) -> dict[str, Any]:
        with self.reading() as conn:
            return queries.get_chunks(conn, ids)

    def get_chunk_next(self, chunk_id: str, count: int = 5) -> dict[str, Any]:
        with self.reading() as conn:
            return queries.get_chunk_walk(conn, chunk_id, count, forward=True)

    def get_chunk_prev(self, chunk_id: str, count: int = 5) -> dict[str, Any]:
        with self.reading() as conn:
            return queries.get_chunk_walk(conn, chunk_id, count, forward=False)

    def get_chunk_neighbors(self, chunk_id: str, count: int = 2) -> dict[str, Any]:
        with self.reading() as conn:
            return queries.get_chunk_neighbors(conn, chunk_id, count)

    def get_chunk_parents(self, chunk_id: str) -> list[dict[str, Any]] | None:
        with self.reading() as conn:
            return queries.get_chunk_parents(conn, chunk_id)

    def get_document(self, document_id: str) -> dict[str, Any] | None:
        with self.reading() as conn:
            return queries.get_document(conn, document_id)

    def get_document_chunks(
        self, document_id: str, start: int = 0, limit: int = 20
    ) -> dict[str, Any]:
        with self.reading() as conn:
            return queries.get_document_chunks(conn, document_id, start, limit)

    def resolve_chunk(self, chunk_id: str) -> dict[str, Any] | None:
        """Where a (possibly stale) chunk id's content lives now; None if never seen."""
        from researchstore.forwarding import resolve_chunk

        with self.reading() as conn:
            return resolve_chunk(conn, chunk_id)

    def get_report(self, report_id: int) -> dict[str, Any] | None:
        with self.reading() as conn:
            return queries.get_report(conn, report_id)

    def _search_rows(
        self, tantivy_query: Any, limit: int, searcher: Any, filters: SearchFilters
    ) -> tuple[list[dict[str, Any]], int]:
        """The best hits that exist in SQLite, with every hit tied with the last; and
        how many hits were dropped because SQLite no longer has their chunk.

        Loading a hit's chunk id from the index costs far more than ranking
        it, so ids are loaded only for the hits needed: ``limit`` of them,
        plus those tied in score with the last one (ordered by chunk_id
        later), plus replacements for dropped ones.

        A hit whose chunk a re-ingest has just replaced (its run has
        committed SQLite but not yet the index) is forwarded to the current
        chunk holding the same text, so a modified report stays findable
        through the whole run: in its new version, never a mix.
        """
        evidence = filters.workspace is not None
        page = limit + _TIE_MARGIN
        hits: list[dict[str, Any]] = []
        dropped = offset = 0
        last_score: float | None = None
        for _ in range(4):
            found = self.index.top(tantivy_query, limit=page, offset=offset, searcher=searcher)
            position = 0
            while position < len(found):
                if (
                    len(hits) >= limit
                    and last_score is not None
                    and (found[position][0] < last_score)
                ):
                    return hits, dropped  # past the last tie
                end = min(len(found), position + max(1, limit - len(hits)))
                while end < len(found) and found[end][0] == found[end - 1][0]:
                    end += 1  # keep a run of equal scores together
                batch = found[position:end]
                position = end
                ids = self.index.chunk_ids([address for _, address in batch], searcher=searcher)
                with self.reading() as conn:
                    rows = queries.search_rows(conn, ids)
                    for (score, _), chunk_id in zip(batch, ids, strict=True):
                        row = rows.get(chunk_id)
                        if row is None:
                            dropped += 1
                            row = _forwarded_row(conn, chunk_id, filters, hits)
                            if row is None:
                                continue
                        if row.pop("_evidence") != evidence:
                            continue  # evidence only in a workspace's search, and only there
                        row["score"] = score
                        hits.append(row)
                last_score = batch[-1][0]
            if len(found) < page:
                break
            offset += page
        return hits, dropped

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        filters: SearchFilters | None = None,
    ) -> list[dict[str, Any]]:
        """Best chunks for ``query``; every hit exists in SQLite right now."""
        filters = filters or SearchFilters()
        with self._lock:
            tantivy_query = self.index.build_query(query, filters)
            if tantivy_query is None:
                return []
            for attempt in range(2):
                searcher = self.index.searcher()
                with self.reading():  # one SQLite snapshot for every hit of this search
                    hits, dropped = self._search_rows(tantivy_query, limit, searcher, filters)
                if not dropped or attempt:
                    break
                # Hits whose chunks SQLite no longer has: another process has
                # probably committed a newer index already; look at it.
                self.index.refresh()
            # Equal scores in a deterministic order (by chunk_id), whatever
            # the index's segment layout after a rebuild.
            hits.sort(key=lambda hit: (-hit["score"], hit["chunk_id"]))
            del hits[limit:]
            snippets = self.index.snippets(
                tantivy_query, [hit["text"] for hit in hits], searcher=searcher
            )
            for hit, snippet in zip(hits, snippets, strict=True):
                hit["snippet"] = snippet
            return hits


def _forwarded_row(
    conn: sqlite3.Connection, chunk_id: str, filters: SearchFilters, hits: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The search row of the chunk that now holds a replaced chunk's text, if any."""
    from researchstore.forwarding import resolve_chunk

    resolution = resolve_chunk(conn, chunk_id)
    if resolution is None or resolution["status"] != "replaced":
        return None
    taken = {hit["chunk_id"] for hit in hits}
    for chunk in resolution["chunks"]:
        if chunk["chunk_id"] in taken:
            continue
        row = queries.search_rows(conn, [chunk["chunk_id"]]).get(chunk["chunk_id"])
        if row is not None and _row_matches(row, filters):
            return row
    return None


def _row_matches(row: dict[str, Any], filters: SearchFilters) -> bool:
    """Whether a forwarded row still meets the filters (its report may have changed)."""
    if filters.report_id is not None and row["report_id"] != filters.report_id:
        return False
    if filters.source is not None and row["source"] != filters.source:
        return False
    if filters.kind is not None and row["kind"] != filters.kind:
        return False
    if filters.date_from is not None and row["date"] < filters.date_from:
        return False
    if filters.date_to is not None and row["date"] > filters.date_to:
        return False
    for name, wanted in (filters.tags or {}).items():
        value = row["tags"].get(name)
        have = {tag_value(item) for item in (value if isinstance(value, list) else [value])}
        if value is None or not have.intersection(wanted):
            return False
    return True


#: Hits ranked past ``limit`` in one go, so that hits tied in score with the
#: last one can be ordered by chunk_id without a second search.
_TIE_MARGIN = 5


def index_title(report_title: str, document_title: str | None) -> str:
    """The text indexed as a chunk's title: its report's and its document's."""
    if document_title and document_title != report_title:
        return f"{report_title}\n{document_title}"
    return report_title


def check_store(store: Store) -> dict[str, Any]:
    """Compare store and index: SQLite integrity and the exact sets of chunk ids."""
    with store.reading() as conn:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        ok_ids = {row[0] for row in conn.execute("SELECT chunk_id FROM chunks WHERE status = 'ok'")}
        pending = conn.execute("SELECT count(*) FROM index_pending").fetchone()[0]
    store.index.refresh()
    indexed = store.index.all_chunk_ids()
    indexed_set = set(indexed)
    return {
        "integrity": integrity,
        "chunks_ok": len(ok_ids),
        "indexed": len(indexed),
        "missing_from_index": len(ok_ids - indexed_set),
        "unknown_to_store": len(indexed_set - ok_ids),
        "duplicates_in_index": len(indexed) - len(indexed_set),
        "pending": pending,
        "consistent": integrity == "ok" and ok_ids == indexed_set and len(indexed) == len(ok_ids),
    }


__all__ = ["Store", "ResearchStoreError", "check_store", "utc_now"]
