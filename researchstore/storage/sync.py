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
schema, unreadable (files missing or empty), or behind or ahead of what
SQLite says it applied; and, once every pending change is applied, when it
holds another number of documents than SQLite has ``ok`` chunks. A tool
call that meets a damaged index has it repaired at once (``recover``). Opening
never needs to write: with another writer at work, or the disk full, the
pending work waits for the next writer.

An index written back from the copy the store file keeps (``packing.py``) is
not waited for on disk: its sidecar names the boot it was written in
(``unflushed_boot``), and after a restart it is written back again.

An index beside a store file that is missing or empty belongs to the store
that file was: it is left alone and the store refuses to open.

A read-only store (a read-only file, folder or mount) writes nothing beside
itself: it uses an index folder there that is current as it is, and
otherwise one in the cache directory, in the entry of the state its file
was in when opened (``index_cache.py``), built there from SQLite when it is
missing or not current. ``IndexPlaces.folder`` (``index_places.py``) is the
one answer to where an index lives. Pending changes wait for a writable open: searches read what the
index holds.

A store file from elsewhere is untrusted: the names it holds (its packed
files', its ``store_uuid``) become paths only once checked, and the folders
left beside it are matched by name, never trusted for a process number.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from researchstore.errors import (
    DiskFull,
    ResearchStoreError,
    StoreDamaged,
    StoreLocked,
)
from researchstore.progress import progress_bar
from researchstore.storage.chunk_rows import mark_refused
from researchstore.storage.db import (
    forget_pending,
    last_pending_seq,
    read_meta,
    read_meta_number,
    write_meta,
)
from researchstore.storage.derived import DerivedIndex, IndexDamaged
from researchstore.storage.foreign_errors import storage_errors
from researchstore.storage.index_folders import (
    boot_id,
    read_sidecar,
    remove_tree,
    write_sidecar,
)
from researchstore.storage.index_places import IndexPlaces, SyncedStore, applied_key, applied_seq
from researchstore.storage.stored import whole_number

REBUILD_BATCH = 5_000

IndexT = TypeVar("IndexT", bound=DerivedIndex)


class IndexSync:
    """The derived indexes of one store, and the one way they follow SQLite."""

    def __init__(
        self,
        store: SyncedStore,
        kinds: Callable[[], Sequence[type[DerivedIndex]]],
        *,
        lock: threading.RLock,
    ) -> None:
        self._store = store
        #: The store's own lock: opening the indexes on first need happens once.
        self._lock = lock
        self._load_kinds = kinds
        self._loaded_kinds: tuple[type[DerivedIndex], ...] | None = None
        self._open: dict[str, DerivedIndex] = {}
        #: Whether ``open`` ran: until then every index is opened on first need.
        self.opened = False
        #: What opening found and repaired (or could not), for ``check`` to tell.
        self.repairs: list[str] = []
        #: Where each index lives, and whether it is current there.
        self.places = IndexPlaces(store, lock=lock)
        #: The indexes a call met damaged whose files were sound, so they were
        #: opened afresh: met damaged again, they are rebuilt (``recover``).
        self._opened_afresh: set[str] = set()

    # -- opening -----------------------------------------------------------

    @property
    def _kinds(self) -> tuple[type[DerivedIndex], ...]:
        if self._loaded_kinds is None:
            self._loaded_kinds = tuple(self._load_kinds())
        return self._loaded_kinds

    def get(self, kind: type[IndexT]) -> IndexT:
        """The open index of ``kind`` (opening the indexes first if need be)."""
        self.ensure_open()
        return cast(IndexT, self._open[kind.name])

    def has(self, name: str) -> bool:
        """Whether the store keeps an index of this name (without opening any)."""
        return any(kind.name == name for kind in self._kinds)

    def remove_folder(self, kind: type[DerivedIndex]) -> None:
        """Remove the folder of an index the store no longer keeps."""
        remove_tree(self.places.folder(kind))

    def refuse_orphaned_indexes(self) -> None:
        """Refuse a new store file with a store's index beside it (``IndexPlaces``)."""
        self.places.refuse_orphaned_indexes(self._kinds)

    def reload_kinds(self) -> None:
        """Ask the store again which indexes it keeps (a first vector was written),
        opening any new one now if the others are open."""
        with self._lock:
            self._loaded_kinds = None
            if not self.opened and not self._open:
                return  # asked again when first needed
            names = {kind.name for kind in self._kinds}
            for name in [name for name in self._open if name not in names]:
                self._open.pop(name).close_writer()
            if self.opened:
                for kind in self._kinds:
                    if kind.name not in self._open:
                        self._open[kind.name] = self._open_one(kind)

    def ensure_open(self) -> None:
        """Open and settle the indexes if the store was opened without them."""
        if self.opened:
            return
        with self._lock:
            if not self.opened:
                self.open()
                self.settle()

    def open(self) -> None:
        """Open every index, rebuilding those that cannot be used as they are."""
        self.opened = True
        if not self._store.read_only:
            self.places.remove_stale_folders(self._kinds)
        for kind in self._kinds:
            self._open[kind.name] = self._open_one(kind)

    def settle(self) -> None:
        """After opening: apply what is pending, then check each index's document count.

        Both need the writer lock, taken only if free: another writer applies
        the record itself. On a full disk the pending work waits (reads still
        work), and an index that cannot be rebuilt now is told in ``repairs``;
        so is a damaged store file, which each call that meets it reports.
        A read-only store applies nothing: ``check`` tells what is pending.
        """
        if self._store.read_only:
            return
        try:
            self.catch_up(wait=False)
            self.verify_counts()
            self.pack_unpacked()
        except DiskFull as error:
            self.repairs.append(f"left for the next writer: {error.message}")
        except StoreDamaged as error:
            # Each call that meets the damage says so; reads elsewhere still work.
            self.repairs.append(f"not compared: {error.message}")

    def pack_unpacked(self) -> None:
        """Keep in the store file the indexes it holds no copy of yet (a store made
        before copies were kept), if no other process is writing."""
        store = self._store
        with store.reading() as conn:
            missing = [kind for kind in self._kinds if read_meta(conn, _packed_key(kind)) is None]
        if not missing:
            return
        try:
            with store.writing(wait=False), store.transaction() as conn:
                for kind in missing:
                    applied = applied_seq(conn, kind)
                    self._pack(conn, kind, self._open[kind.name], applied)
        except StoreLocked:
            return

    def _open_one(self, kind: type[DerivedIndex]) -> DerivedIndex:
        if self._store.read_only:
            return self._open_read_only(kind)
        problem = self.places.problem(kind)
        if problem is None:
            try:
                return kind.open(self.places.folder(kind))
            except IndexDamaged as error:
                problem = f"unreadable: {error}"
        with self._store.writing(wait=True):
            # Another process may have rebuilt it while we waited.
            if self.places.problem(kind) is None:
                try:
                    return kind.open(self.places.folder(kind))
                except IndexDamaged:
                    pass
            try:
                unpacked = self._unpack(kind)
            except IndexDamaged as refused:
                unpacked, problem = None, _copy_refused(problem, refused)
            if unpacked is not None:
                if problem != "missing":
                    self.repairs.append(f"{kind.name} restored from the store file ({problem})")
                return unpacked
            if problem != "missing" or self._expects_entries(kind):
                self.repairs.append(f"{kind.name} rebuilt on opening ({problem})")
            return self._rebuild(kind, problem)

    def _unpack(self, kind: type[DerivedIndex]) -> DerivedIndex | None:
        """The index as the store file holds it (``packing.py``), written into its
        folder; None when the store holds none of this schema. A copy that names
        a file no index writes, or that cannot be opened, is refused:
        ``IndexDamaged``, saying why.

        Every change since it was packed is still pending, and applied after.
        """
        from researchstore.storage import packing

        store = self._store
        with store.reading() as conn:
            seq = read_meta_number(conn, _packed_key(kind))
            schema = read_meta(conn, f"{kind.name}_packed_schema")
            issued = last_pending_seq(conn)
        if seq is None or seq > issued or schema != str(kind.schema_version):
            # None of this schema; or a number no researchstore wrote (past the
            # last change ever queued): what the copy reflects is unknown.
            return None
        folder = self.places.folder(kind)
        temporary = folder.with_name(folder.name + f".rebuild-{os.getpid()}")
        remove_tree(temporary, ignore_errors=True)
        try:
            with self._index_errors(folder):
                temporary.mkdir(parents=True)
                # Not waiting for the disk: it can take seconds, most of a
                # copy's first answer when the copy itself is still being
                # written back. Files lost with the page cache are lost
                # only with a restart, and the sidecar names this boot: after
                # one, the files are written back again (``problem``).
                boot = boot_id()
                with store.reading() as conn:
                    packing.unpack(
                        conn,
                        kind.name,
                        temporary,
                        file_names=kind.file_names,
                        durable=boot is None,
                    )
                write_sidecar(
                    temporary,
                    store_uuid=store.store_uuid,
                    schema_version=kind.schema_version,
                    applied_seq=seq,
                    unflushed_boot=boot,
                )
                kind.open(temporary)  # a damaged copy is rebuilt instead
        except IndexDamaged as refused:
            remove_tree(temporary, ignore_errors=True)
            # Said of the folder it was for: the temporary one is gone.
            raise IndexDamaged(refused.message.replace(str(temporary), str(folder))) from None
        except BaseException:
            remove_tree(temporary, ignore_errors=True)
            raise
        self.places.swap_in(folder, temporary)
        if not store.read_only:
            with store.transaction() as conn:
                write_meta(conn, applied_key(kind), str(seq))
        return kind.open(folder)

    def _open_read_only(self, kind: type[DerivedIndex]) -> DerivedIndex:
        """Open ``kind`` for a read-only store: where it is, if current and readable
        there; else from (or built in) the cache directory."""
        folder = beside = self.places.folder(kind)
        if folder == self.places.beside(kind):
            try:
                return kind.open(folder)
            except (IndexDamaged, OSError) as error:
                # Tantivy takes a lock file even to read: a read-only folder refuses it.
                beside_problem = f"cannot be opened there: {error}"
        else:
            beside = self.places.beside(kind)
            beside_problem = self.places.problem(kind, beside) or "not current"
        cached = self.places.place_in_cache(kind)
        with self.places.cache_locked(kind) as entry:
            problem = self.places.problem(kind, cached)
            if problem is None:
                try:
                    return kind.open(cached)
                except IndexDamaged as error:
                    problem = f"unreadable: {error}"
            try:
                unpacked = self._unpack(kind)
            except IndexDamaged as refused:
                unpacked, problem = None, _copy_refused(problem, refused)
            if unpacked is not None:
                self.repairs.append(
                    f"{kind.name} written in {cached} from the copy the store file keeps: the "
                    f"store is read-only, the one beside it ({beside}) "
                    f"{_as_clause(beside_problem)}, and the cached copy was {problem}"
                )
                entry.remove_unused()
                return unpacked
            if self._expects_entries(kind):
                self.repairs.append(
                    f"{kind.name} built in {cached}: the store is read-only, the one beside it "
                    f"({beside}) {_as_clause(beside_problem)}, and the cached copy was {problem}"
                )
            rebuilt = self._rebuild(kind, problem)
            entry.remove_unused()
            return rebuilt

    def _expects_entries(self, kind: type[DerivedIndex]) -> bool:
        """Whether SQLite holds anything for ``kind``: a missing folder of an index
        with nothing to hold yet (a new store, a first vector) is made, not repaired."""
        with self._store.reading() as conn:
            return kind.expected_count(conn) > 0

    def verify_counts(self) -> None:
        """Rebuild each index whose document count is not the store's count of ``ok`` chunks.

        The counts are compared only once nothing is pending; a difference
        seen without the writer lock is looked at again under it (another
        process may have been between its SQLite and its index commit), and
        with another writer at work it is left to that writer.
        """
        if not self._count_mismatches(refresh=False):  # the indexes were just opened
            return
        try:
            with self._store.writing(wait=False):
                for kind, why in self._count_mismatches(refresh=True):
                    self._open[kind.name].close_writer()
                    self.repairs.append(f"{kind.name} rebuilt on opening ({why})")
                    self._open[kind.name] = self._rebuild(kind, why)
        except StoreLocked:
            return

    def _count_mismatches(self, *, refresh: bool) -> list[tuple[type[DerivedIndex], str]]:
        with self._store.reading() as conn:
            if conn.execute("SELECT 1 FROM index_pending LIMIT 1").fetchone() is not None:
                return []
            expecting = {kind.name: kind.expected_count(conn) for kind in self._kinds}
        mismatches = []
        for kind in self._kinds:
            expected = expecting[kind.name]
            index = self._open[kind.name]
            try:
                if refresh:
                    index.refresh()
                held = index.document_count()
            except IndexDamaged as error:
                mismatches.append((kind, f"unreadable: {error}"))
                continue
            if held != expected:
                mismatches.append((kind, f"it holds {held} chunks where the store has {expected}"))
        return mismatches

    def recover(self, damage: IndexDamaged) -> StoreDamaged:
        """Repair the indexes after a call met ``damage``; the error that call returns.

        An index whose files fail their checks is rebuilt from SQLite; one
        whose files are sound is opened afresh (what failed was in memory),
        and rebuilt if a call meets it damaged again (bytes altered with
        their checksums written anew, as a store file from elsewhere may
        carry them). A writable store does either now if no other process
        is writing; a read-only one rebuilds in the cache directory, under
        the cache's lock. The message also says how to repair it by hand.
        """
        store = self._store
        damaged = next(
            (kind for kind in self._kinds if str(self.places.folder(kind)) in damage.message),
            self._kinds[0],
        )
        where = self.places.folder(damaged)
        try:
            if store.read_only:
                with self._lock:
                    outcome = self._repair(damaged)
            else:
                with store.writing(wait=False):
                    outcome = self._repair(damaged)
        except StoreLocked:
            outcome = "another process is writing the store, so it could not be repaired now"
        except ResearchStoreError as error:
            outcome = f"repairing it failed ({error.message})"
        except OSError as error:
            outcome = f"repairing it failed ({error})"
        if not store.read_only:
            which = f"the {damaged.label} beside {store.path}"
            by_hand = f"researchstore rebuild-index {store.path}"
        elif where == self.places.beside(damaged):
            which = f"the {damaged.label} beside the read-only store {store.path}"
            by_hand = f"researchstore rebuild-index {store.path}, where it can be written"
        else:
            which = f"the {damaged.label} of the read-only store {store.path}, kept in {where},"
            by_hand = f"remove {where}: the next open builds it again from the store"
        return StoreDamaged(
            f"{which} is damaged ({damage.message}); {outcome}. To repair it by hand: {by_hand}",
            details={"index": str(where)},
        )

    def _repair(self, damaged: type[DerivedIndex]) -> str:
        repaired = []
        for kind in self._kinds:
            current = self._open[kind.name]
            current.close_writer()
            try:
                files = current.verify()
            except IndexDamaged as error:
                files = [error.message]
            if files:
                why = f"damaged: {'; '.join(files)}"
            elif kind is damaged and kind.name in self._opened_afresh:
                why = "damaged again after it was opened afresh, though its files pass their checks"
            else:
                self._open[kind.name] = kind.open(self.places.folder(kind))
                if kind is damaged:
                    self._opened_afresh.add(kind.name)
                repaired.append("opened afresh (its files are sound)")
                continue
            self._opened_afresh.discard(kind.name)
            self._open[kind.name] = self._rebuild_damaged(kind, why)
            repaired.append("rebuilt from the store")
        return f"it has been {' and '.join(dict.fromkeys(repaired))}, so the call can be made again"

    def _rebuild_damaged(self, kind: type[DerivedIndex], why: str) -> DerivedIndex:
        """Rebuild ``kind`` where it may be written: beside a writable store; for a
        read-only one, in the cache (even if it was read from beside the store)."""
        if not self._store.read_only:
            return self._rebuild(kind, why)
        self.places.place_in_cache(kind)
        with self.places.cache_locked(kind) as entry:
            rebuilt = self._rebuild(kind, why)
            entry.remove_unused()
            return rebuilt

    # -- rebuilding --------------------------------------------------------

    def rebuild(self, *, why: str = "asked to") -> int:
        """Rebuild every index from SQLite; return the number of chunks indexed."""
        with self._store.writing(wait=True):
            for kind in self._kinds:
                current = self._open.get(kind.name)
                if current is not None:
                    current.close_writer()
                self._open[kind.name] = self._rebuild(kind, why)
            self.opened = True
            with self._store.reading() as conn:
                return self._kinds[0].expected_count(conn)

    def _rebuild(self, kind: type[DerivedIndex], why: str) -> DerivedIndex:
        """Build ``kind`` from SQLite in a folder of its own, then swap it in.

        A rebuild that fails (a full disk, a damaged store) removes its
        folder and leaves the index as it was.
        """
        folder = self.places.folder(kind)
        temporary = folder.with_name(folder.name + f".rebuild-{os.getpid()}")
        remove_tree(temporary, ignore_errors=True)
        store = self._store
        try:
            with self._index_errors(folder):
                index = kind.create(temporary)
                try:
                    with store.reading() as conn:
                        total = kind.expected_count(conn)
                        snapshot_seq = last_pending_seq(conn)
                        description = f"Rebuilding {kind.name} ({why})"
                        with progress_bar(description, total=total, enabled=store.progress) as bar:
                            batch: list[Any] = []
                            for chunk in kind.read(conn):
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
                finally:
                    index.close_writer()
        except BaseException:
            remove_tree(temporary, ignore_errors=True)
            raise
        self.places.swap_in(folder, temporary)
        if store.read_only:
            return kind.open(folder)  # the cache's own sidecar says what it reflects
        opened = kind.open(folder)
        with store.transaction() as conn:
            write_meta(conn, applied_key(kind), str(snapshot_seq))
            self._pack(conn, kind, opened, snapshot_seq)
            self._forget_applied(conn)
        return opened

    # -- following the pending record --------------------------------------

    def catch_up(self, *, wait: bool = True) -> int:
        """Apply every pending change to every index; return how many reports.

        With ``wait=False`` and another writer at work, do nothing: that
        writer applies the record itself.
        """
        self.ensure_open()
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
        with self._store.reading() as conn, self._index_errors():
            for kind in self._kinds:
                applied = applied_seq(conn, kind)
                rows = conn.execute(
                    "SELECT seq, report_id, target FROM index_pending WHERE seq > ? ORDER BY seq",
                    (applied,),
                ).fetchall()
                if not rows:
                    continue
                index = self._open[kind.name]
                # Rows queued for another index are passed over (and count as applied).
                mine = (row["report_id"] for row in rows if row["target"] in (None, kind.name))
                for report_id in dict.fromkeys(mine):
                    index.delete_report(report_id)
                    self._add(index, list(kind.read(conn, report_id)))
                    applied_reports.add(report_id)
                last_seq = max(last_seq, rows[-1]["seq"])
        if last_seq:
            self.commit(last_seq)
        else:
            self._pack_lagging()  # every index is current; its copy may not be
        return len(applied_reports)

    def _pack_lagging(self) -> None:
        """Pack each index whose copy in the store file is behind what it reflects
        (a run stopped between its index commits and its end)."""
        with self._store.transaction() as conn:
            for kind in self._kinds:
                applied = applied_seq(conn, kind)
                packed = read_meta_number(conn, _packed_key(kind))
                if packed is None or packed < applied:
                    self._pack(conn, kind, self._open[kind.name], applied)
            self._forget_applied(conn)

    def feed(self, report_id: int, chunks: list[Any], *, replaced: bool) -> None:
        """Give every index a report just written (uncommitted until ``commit``).

        An index fed later (``fed_on_write`` false) only forgets what it held
        of a replaced report.
        """
        self.ensure_open()
        with self._index_errors():
            for index in self._open.values():
                if replaced:
                    index.delete_report(report_id)
                if index.fed_on_write:
                    self._add(index, chunks)

    def remove(self, report_ids: Sequence[int]) -> None:
        """Take removed reports out of every index (uncommitted until ``commit``)."""
        self.ensure_open()
        with self._index_errors():
            for index in self._open.values():
                for report_id in report_ids:
                    index.delete_report(report_id)

    def _add(self, index: DerivedIndex, chunks: list[Any]) -> None:
        """Add chunks to an index; a chunk it refuses is marked and left out.

        A full disk or a damaged index is no chunk's fault: it leaves as it is.
        Only the word index refuses chunks for their text; anything another
        index refuses means that index is damaged.
        """
        if not index.fed_on_write:
            try:
                index.add(chunks)
            except (OSError, ResearchStoreError):
                raise
            except Exception as error:
                raise IndexDamaged(f"the {index.name} index refused its rows: {error}") from error
            return
        try:
            index.add(chunks)
            return
        except (OSError, ResearchStoreError):
            raise
        except Exception:  # find the refused one(s) below, one by one
            pass
        refused = []
        for chunk in chunks:
            try:
                index.add([chunk])
            except (OSError, ResearchStoreError):
                raise
            except Exception:
                refused.append(chunk.chunk_id)
        if refused:
            with self._store.transaction() as conn:
                mark_refused(conn, refused)

    def commit(self, applied_seq: int, *, fed_on_write: bool | None = None) -> None:
        """Commit every index (or those whose ``fed_on_write`` is as given), then
        forget the pending rows they all reflect.

        A run commits the word index as it goes (``fed_on_write=True``) and
        an index fed later at its end: the vector index rewrites its whole
        graph on commit, and during a run it only forgets replaced reports.
        What an index has not committed stays pending for it.
        """
        self.ensure_open()
        store = self._store
        kinds = [
            kind
            for kind in self._kinds
            if fed_on_write is None or kind.fed_on_write == fed_on_write
        ]
        with self._index_errors():
            for kind in kinds:
                index = self._open[kind.name]
                index.commit()
                folder = self.places.folder(kind)
                write_sidecar(
                    folder,
                    store_uuid=store.store_uuid,
                    schema_version=kind.schema_version,
                    applied_seq=applied_seq,
                    # The files written back unflushed are still there.
                    unflushed_boot=(read_sidecar(folder) or {}).get("unflushed_boot"),
                )
        with store.transaction() as conn:
            for kind in kinds:
                write_meta(conn, applied_key(kind), str(applied_seq))
            if fed_on_write is not True:
                # The end of a run (or a catch-up): every index reflects
                # ``applied_seq`` now, and the store file keeps its files.
                for kind in self._kinds:
                    self._pack(conn, kind, self._open[kind.name], applied_seq)
            self._forget_applied(conn)

    def _pack(
        self, conn: Any, kind: type[DerivedIndex], index: DerivedIndex, applied_seq: int
    ) -> None:
        """Keep the index's committed files in the store file (``packing.py``)."""
        from researchstore.storage import packing

        with self._index_errors():
            for _ in range(3):
                conn.execute("SAVEPOINT pack")
                try:
                    packing.pack(
                        conn, kind.name, index.committed_files(), rewritten=kind.rewritten_files
                    )
                except (FileNotFoundError, IndexDamaged):
                    # A background merge replaced segments while they were
                    # read: read the new list (each file is immutable).
                    conn.execute("ROLLBACK TO pack")
                    conn.execute("RELEASE pack")
                    continue
                conn.execute("RELEASE pack")
                break
            else:
                return  # left for the next commit: what it has not packed stays pending
        write_meta(conn, _packed_key(kind), str(applied_seq))
        write_meta(conn, f"{kind.name}_packed_schema", str(kind.schema_version))

    def _forget_applied(self, conn: Any) -> None:
        """Forget the pending rows every index of the store reflects.

        Every index the store has ever kept counts (its ``<name>_applied_seq``
        is in ``meta``), opened here or not, and so does what the store file
        holds of it (``<name>_packed_seq``): a copy of the file unpacks that
        and replays the rest. A number no researchstore writes counts as 0:
        nothing is forgotten for it.
        """
        issued = last_pending_seq(conn)
        applied = [
            number if number is not None and number <= issued else 0
            for number in (
                whole_number(value)
                for (value,) in conn.execute(
                    "SELECT value FROM meta WHERE key LIKE '%\\_applied\\_seq' ESCAPE '\\' "
                    "OR key LIKE '%\\_packed\\_seq' ESCAPE '\\'"
                )
            )
        ]
        forget_pending(conn, min(applied, default=0))

    # -- lifetime ----------------------------------------------------------

    def refresh(self) -> None:
        self.ensure_open()
        for index in self._open.values():
            index.refresh()

    def close_writers(self) -> None:
        for index in self._open.values():
            index.close_writer()

    def close(self) -> None:
        """Close the writers and let go of the indexes (their files, their watchers)
        and of the cache entry they were in."""
        self.close_writers()
        self._open.clear()
        self.places.release()

    def _index_errors(self, folder: Path | None = None) -> storage_errors:
        """An OSError from writing an index (a full disk) leaves as the store's error for it."""
        return storage_errors(folder or self.places.folder(self._kinds[0]))


def _copy_refused(problem: str, refused: IndexDamaged) -> str:
    """Why an index is rebuilt when the copy its store file keeps was refused too."""
    return f"{problem}; the copy the store file keeps was refused: {refused.message}"


def _as_clause(problem: str) -> str:
    """A ``problem`` said of a folder: "is missing", "is behind the store", "cannot be ..."."""
    return problem if problem.startswith("cannot") else f"is {problem}"


def _packed_key(kind: type[DerivedIndex]) -> str:
    """The change of ``index_pending`` the files packed in the store file reflect."""
    return f"{kind.name}_packed_seq"
