"""Keeping every derived index in step with SQLite, written once for all of them.

The invariant: a change an index must follow is queued in ``index_pending``
in the same SQLite transaction as the change itself. After the SQLite commit
each index is fed the change, commits, and records in its folder's sidecar
(``researchstore-index.json``) and in ``meta`` (``<name>_applied_seq``) the
last queued change it reflects; a pending row is forgotten once every index
reflects it. A crash in between leaves the row, and the next open replays it
(replaying is idempotent: delete the report's chunks, add them again).

An index folder is rebuilt from SQLite, into a temporary folder swapped in
at the end, whenever it is missing, built for another store, of an older
schema, unreadable, or behind or ahead of what SQLite says it applied.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from researchstore.db import last_pending_seq, read_meta, write_meta
from researchstore.derived import DerivedIndex, IndexDamaged, IndexedChunk, indexed_chunks
from researchstore.errors import StoreLocked
from researchstore.progress import progress_bar

if TYPE_CHECKING:
    from researchstore.store import Store

SIDECAR = "researchstore-index.json"
REBUILD_BATCH = 5_000

IndexT = TypeVar("IndexT", bound=DerivedIndex)


def read_sidecar(folder: Path) -> dict[str, Any] | None:
    """The sidecar of an index folder, or None when it is missing or unreadable."""
    try:
        data = json.loads((folder / SIDECAR).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_sidecar(folder: Path, *, store_uuid: str, schema_version: int, applied_seq: int) -> None:
    data = {"store_uuid": store_uuid, "index_schema": schema_version, "applied_seq": applied_seq}
    temporary = folder / (SIDECAR + ".tmp")
    with open(temporary, "w") as handle:
        json.dump(data, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, folder / SIDECAR)


class IndexSync:
    """The derived indexes of one store, and the one way they follow SQLite."""

    def __init__(self, store: Store, kinds: Sequence[type[DerivedIndex]]) -> None:
        self._store = store
        self._kinds = tuple(kinds)
        self._open: dict[str, DerivedIndex] = {}

    # -- opening -----------------------------------------------------------

    def folder(self, kind: type[DerivedIndex]) -> Path:
        path = self._store.path
        return path.with_name(path.name + kind.suffix)

    def get(self, kind: type[IndexT]) -> IndexT:
        """The open index of ``kind``."""
        return cast(IndexT, self._open[kind.name])

    def open(self) -> None:
        """Open every index, rebuilding those that cannot be used as they are."""
        for kind in self._kinds:
            self._open[kind.name] = self._open_one(kind)

    def problem(self, kind: type[DerivedIndex]) -> str | None:
        """Why the folder of ``kind`` cannot be used as it is, or None."""
        sidecar = read_sidecar(self.folder(kind))
        if sidecar is None:
            return "missing"
        if sidecar.get("store_uuid") != self._store.store_uuid:
            return "built for another store"
        if sidecar.get("index_schema") != kind.schema_version:
            return "older index schema"
        with self._store.reading() as conn:
            applied = int(read_meta(conn, _applied_key(kind)) or 0)
            issued = last_pending_seq(conn)
        seen = sidecar.get("applied_seq")
        if not isinstance(seen, int) or seen < applied:
            return "behind the store"
        if seen > issued:
            return "ahead of the store"
        return None

    def _open_one(self, kind: type[DerivedIndex]) -> DerivedIndex:
        problem = self.problem(kind)
        if problem is None:
            try:
                return kind.open(self.folder(kind))
            except IndexDamaged:
                problem = "unreadable"
        with self._store.writing(wait=True):
            # Another process may have rebuilt it while we waited.
            if self.problem(kind) is None:
                try:
                    return kind.open(self.folder(kind))
                except IndexDamaged:
                    pass
            return self._rebuild(kind, problem)

    # -- rebuilding --------------------------------------------------------

    def rebuild(self, *, why: str = "asked to") -> int:
        """Rebuild every index from SQLite; return the number of chunks indexed."""
        with self._store.writing(wait=True):
            for kind in self._kinds:
                current = self._open.get(kind.name)
                if current is not None:
                    current.close_writer()
                self._open[kind.name] = self._rebuild(kind, why)
            with self._store.reading() as conn:
                return int(
                    conn.execute("SELECT count(*) FROM chunks WHERE status = 'ok'").fetchone()[0]
                )

    def _rebuild(self, kind: type[DerivedIndex], why: str) -> DerivedIndex:
        folder = self.folder(kind)
        temporary = folder.with_name(folder.name + f".rebuild-{os.getpid()}")
        import shutil  # only a rebuild removes folders

        shutil.rmtree(temporary, ignore_errors=True)
        index = kind.create(temporary)
        store = self._store
        with store.reading() as conn:
            total = conn.execute("SELECT count(*) FROM chunks WHERE status = 'ok'").fetchone()[0]
            snapshot_seq = last_pending_seq(conn)
            description = f"Rebuilding {kind.name} ({why})"
            with progress_bar(description, total=total, enabled=store.progress) as bar:
                batch: list[IndexedChunk] = []
                for chunk in indexed_chunks(conn):
                    batch.append(chunk)
                    if len(batch) >= REBUILD_BATCH:
                        index.add(batch)
                        bar.advance(len(batch))
                        batch.clear()
                index.add(batch)
                bar.advance(len(batch))
        index.commit()
        write_sidecar(
            temporary,
            store_uuid=store.store_uuid,
            schema_version=kind.schema_version,
            applied_seq=snapshot_seq,
        )
        index.close_writer()
        old = folder.with_name(folder.name + f".old-{os.getpid()}")
        if folder.exists():
            os.replace(folder, old)
        os.replace(temporary, folder)
        shutil.rmtree(old, ignore_errors=True)
        with store.transaction() as conn:
            write_meta(conn, _applied_key(kind), str(snapshot_seq))
            self._forget_applied(conn)
        return kind.open(folder)

    # -- following the pending record --------------------------------------

    def catch_up(self, *, wait: bool = True) -> int:
        """Apply every pending change to every index; return how many reports.

        With ``wait=False`` and another writer at work, do nothing: that
        writer applies the record itself.
        """
        with self._store.reading() as conn:
            if conn.execute("SELECT 1 FROM index_pending LIMIT 1").fetchone() is None:
                return 0
        try:
            with self._store.writing(wait=wait):
                return self._apply_pending()
        except StoreLocked:
            if wait:
                raise
            return 0

    def _apply_pending(self) -> int:
        applied_reports: set[int] = set()
        last_seq = 0
        with self._store.reading() as conn:
            for kind in self._kinds:
                applied = int(read_meta(conn, _applied_key(kind)) or 0)
                rows = conn.execute(
                    "SELECT seq, report_id FROM index_pending WHERE seq > ? ORDER BY seq",
                    (applied,),
                ).fetchall()
                if not rows:
                    continue
                index = self._open[kind.name]
                for report_id in dict.fromkeys(row["report_id"] for row in rows):
                    index.delete_report(report_id)
                    self._add(index, list(indexed_chunks(conn, report_id)))
                    applied_reports.add(report_id)
                last_seq = max(last_seq, rows[-1]["seq"])
        if last_seq:
            self.commit(last_seq)
        return len(applied_reports)

    def feed(self, report_id: int, chunks: list[IndexedChunk], *, replaced: bool) -> None:
        """Give every index a report just written (uncommitted until ``commit``)."""
        for index in self._open.values():
            if replaced:
                index.delete_report(report_id)
            self._add(index, chunks)

    def remove(self, report_ids: Sequence[int]) -> None:
        """Take removed reports out of every index (uncommitted until ``commit``)."""
        for index in self._open.values():
            for report_id in report_ids:
                index.delete_report(report_id)

    def _add(self, index: DerivedIndex, chunks: list[IndexedChunk]) -> None:
        """Add chunks to an index; a chunk it refuses is marked and left out."""
        try:
            index.add(chunks)
            return
        except Exception:  # find the refused one(s) below, one by one
            pass
        refused = []
        for chunk in chunks:
            try:
                index.add([chunk])
            except Exception:
                refused.append(chunk.chunk_id)
        if refused:
            with self._store.transaction() as conn:
                conn.executemany(
                    "UPDATE chunks SET status = 'embed_failed' WHERE chunk_id = ?",
                    [(chunk_id,) for chunk_id in refused],
                )

    def commit(self, applied_seq: int) -> None:
        """Commit every index, then forget the pending rows they all reflect."""
        store = self._store
        for kind in self._kinds:
            index = self._open[kind.name]
            index.commit()
            write_sidecar(
                self.folder(kind),
                store_uuid=store.store_uuid,
                schema_version=kind.schema_version,
                applied_seq=applied_seq,
            )
        with store.transaction() as conn:
            for kind in self._kinds:
                write_meta(conn, _applied_key(kind), str(applied_seq))
            self._forget_applied(conn)

    def _forget_applied(self, conn: Any) -> None:
        applied = [int(read_meta(conn, _applied_key(kind)) or 0) for kind in self._kinds]
        conn.execute("DELETE FROM index_pending WHERE seq <= ?", (min(applied, default=0),))

    # -- lifetime ----------------------------------------------------------

    def refresh(self) -> None:
        for index in self._open.values():
            index.refresh()

    def close_writers(self) -> None:
        for index in self._open.values():
            index.close_writer()


def _applied_key(kind: type[DerivedIndex]) -> str:
    return f"{kind.name}_applied_seq"
