"""``Store``: one research store, its SQLite file and the indexes derived from it.

The store owns the connection (``db.py``), its transactions and the writer
lock, and its derived indexes' lifecycle through one ``sync.IndexSync``:
opening, catching up, rebuilding, closing. No other module reaches into that
``IndexSync``; what they need of it is a method here.

This module sits at the bottom of the package's layers: it imports only the
modules it is built on (``FLOOR`` in ``tests/test_architecture.py``), never
the tools, ingest, embedding or evidence, not even for type hints. Those
build on ``Store``, and ``library.Library`` puts them together as methods.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from researchstore.errors import (
    InvalidInput,
    ResearchStoreError,
    StoreClosed,
    StoreDamaged,
    StoreLocked,
    StoreReadOnly,
)
from researchstore.storage.db import (
    WriterLock,
    connect,
    file_identity,
    open_error,
    read_meta,
    storage_error,
    undecodable_message,
    use_write_ahead_log,
)
from researchstore.storage.derived import DerivedIndex, IndexDamaged
from researchstore.storage.schema import migrate
from researchstore.storage.sync import IndexSync

if TYPE_CHECKING:
    from researchstore.indexes.index import SearchIndex
    from researchstore.indexes.vector_index import VectorIndex


#: SQLite page cache of each thread's read connection (the writer keeps 64 MiB).
READER_CACHE_KIB = 16_384


def derived_indexes(store: Store | None = None) -> tuple[type[DerivedIndex], ...]:
    """The store's derived indexes, in the order they are opened and fed.

    The vector index is kept once the store has a model for its vectors
    (before its file is open, every index that may be beside it is named).
    """
    from researchstore.indexes.index import SearchIndex

    if store is not None and not store.closed and not store.keeps_vectors():
        return (SearchIndex,)
    from researchstore.indexes.vector_index import VectorIndex

    return (SearchIndex, VectorIndex)


class Store:
    """One research store: a SQLite file and the indexes beside it.

    >>> with Store("research.db") as store:
    ...     with store.reading() as conn:
    ...         reports = conn.execute("SELECT count(*) FROM reports").fetchone()[0]

    The tools (search, ingest, embed, check...) are ``library.Library``'s
    methods, built on this class.

    With ``open_indexes=False`` the derived indexes are opened (checked,
    caught up, repaired) when a call first needs one, not when the store
    opens: a one-shot lookup that reads SQLite alone never loads them.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        chunk_tokens: int = 256,
        progress: bool | None = None,
        open_indexes: bool = True,
        read_only: bool | None = None,
    ) -> None:
        self.path = Path(path)
        #: Why the store is read-only (None: it is not): it reads, and every
        #: write is refused with ``StoreReadOnly``.
        self.read_only_reason = (
            ("opened read-only" if read_only else None)
            if read_only is not None
            else _why_read_only(self.path)
        )
        self.chunk_tokens = chunk_tokens
        self.progress = progress
        self._vectors_checked = 0.0
        self._lock = threading.RLock()
        #: Each thread reads through a connection of its own, so that a long
        #: read (a search) never holds another thread's lookup; writes go
        #: through ``_conn`` under ``_lock``.
        self._local = threading.local()
        #: Every thread's read connection, with its thread (closed once it has ended).
        self._readers: list[tuple[threading.Thread, sqlite3.Connection]] = []
        #: Guards ``_readers`` alone, never ``_lock``: a writer in this process
        #: holds ``_lock`` through its whole run, and a thread's first read
        #: must not wait for it.
        self._readers_lock = threading.Lock()
        self._readers_closed = False
        self._writer_lock = WriterLock(self.path.with_name(self.path.name + ".lock"))
        self._writer_depth = 0
        self._conn: sqlite3.Connection | None = None
        #: The file opened (device, inode): a connection opened later by the
        #: path must reach the same one (``_check_same_file``).
        self._file: tuple[int, int] | None = None
        self.sync = IndexSync(self, lambda: derived_indexes(self), lock=self._lock)
        if self.read_only_reason is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        elif not self.path.exists():
            raise InvalidInput(
                f"no store at {self.path} (and none can be made there: {self.read_only_reason})",
                field="store",
            )
        if self.path.is_dir():
            raise InvalidInput(f"{self.path} is a directory, not a store file", field="store")
        if self.read_only_reason is None and _looks_new(self.path):
            # An index beside a new store belongs to the store this file was.
            self.sync.refuse_orphaned_indexes()
            self.sync.reload_kinds()
        #: Whether the file is known to be a store (so unreadable means damaged).
        self._known_store = self.sync.places.any_index_beside()
        try:
            self._conn = connect(self.path, read_only=self.read_only)
            if self.read_only:
                self.store_uuid = self._read_without_migrating()
            else:
                with self.transaction() as conn:
                    migrate(conn, path=self.path)
                    self.store_uuid = read_meta(conn, "store_uuid") or ""
                use_write_ahead_log(self._conn)
            self._file = file_identity(self.path)
        except (sqlite3.DatabaseError, UnicodeDecodeError, ResearchStoreError) as error:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if isinstance(error, ResearchStoreError):
                raise
            if isinstance(error, UnicodeDecodeError):  # SQLite's message quotes the file
                error = undecodable_message(error)
            if self.read_only and _holds_bytes(self.path.with_name(self.path.name + "-wal")):
                raise self._unmerged_log(error) from None
            raise open_error(self.path, error, known_store=self._known_store) from None
        self._known_store = True
        try:
            if open_indexes:
                self.sync.open()
                self.sync.settle()
        except BaseException:
            self.close()
            raise

    # -- lifetime --------------------------------------------------------

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._conn is None

    @property
    def read_only(self) -> bool:
        """Whether the store reads only (a read-only file, folder or mount, or asked to)."""
        return self.read_only_reason is not None

    def _refuse_writes(self) -> None:
        if self.read_only_reason is not None:
            raise StoreReadOnly(
                f"the store {self.path} is read-only ({self.read_only_reason}): it can be "
                "searched and read, not written; write to a writable copy of it",
                field="store",
                details={"path": str(self.path)},
            )

    def _read_without_migrating(self) -> str:
        """The store's uuid, read without writing: a store that needs a migration is refused.

        Its schema is verified first, as a writable open does (``verify_schema``).
        """
        from researchstore.storage.schema import SCHEMA_VERSION, verify_schema

        conn = self._connection()
        conn.execute("BEGIN")
        try:
            version = verify_schema(conn, self.path, migrating=False)
            store_uuid = read_meta(conn, "store_uuid") if version else None
        finally:
            _end_reading(conn)
        if version < SCHEMA_VERSION:
            raise StoreReadOnly(
                f"the store {self.path} (schema version {version}) needs migrating to version "
                f"{SCHEMA_VERSION}, which writes it, but it is read-only ({self.read_only_reason}):"
                " open it once where it can be written, then copy it back",
                field="store",
            )
        return store_uuid or ""

    def _unmerged_log(self, error: sqlite3.DatabaseError) -> StoreReadOnly:
        return StoreReadOnly(
            f"the store {self.path} cannot be read ({error}): its write-ahead log "
            f"({self.path.name}-wal) still holds commits not merged into it, and it is "
            f"read-only ({self.read_only_reason}). Open it once where it can be written (every "
            "researchstore command merges the log when it ends), or copy the -wal and -shm "
            "files along with it",
            field="store",
        )

    @property
    def index_path(self) -> Path:
        """The word index's folder, ``STORE.db.index``."""
        from researchstore.indexes.index import SearchIndex

        return self.sync.places.folder(SearchIndex)

    def close(self) -> None:
        """Close the index writers and the connection; checkpoint the WAL.

        After a checkpoint the ``.db`` file alone holds everything, so it
        can be copied on its own.
        """
        with self._lock:
            conn = self._conn
            if conn is None:
                return
            self.sync.close()
            with self._readers_lock:
                self._readers_closed = True
                for _, reader in self._readers:
                    reader.close()
                self._readers.clear()
            try:
                if not self.read_only:
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.DatabaseError:
                pass  # another connection is reading (its close checkpoints), or a full disk
            conn.close()
            self._conn = None
            self._writer_lock.release()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreClosed(f"the store {self.path} is closed")
        return self._conn

    # -- transactions ----------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``); nests as a no-op.

        A full disk, a busy file or a damaged one leaves as the error that
        says so (``db.storage_error``), raised in the body or at the commit.
        """
        with self._lock, self._on_main_connection():
            conn = self._connection()
            self._refuse_writes()
            nested = conn.in_transaction
            if nested:
                yield conn
                return
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    if conn.in_transaction:  # SQLite may have rolled back already
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.DatabaseError as error:
                self._raise_storage_error(error)

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every query inside sees the same snapshot.

        Inside this thread's write transaction it reads there (and sees the
        writes); otherwise through this thread's own connection, so readers
        in other threads never wait for it, nor it for them.
        """
        if getattr(self._local, "main_depth", 0):
            with self._lock:
                yield self._connection()
            return
        conn = self._reader()
        if conn.in_transaction:
            yield conn
            return
        try:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                _end_reading(conn)
        except sqlite3.DatabaseError as error:
            self._raise_storage_error(error)

    def data_version(self) -> int:
        """A number that changes whenever a commit to the store file lands from
        another connection (another process, or this one's writer): what is
        read from the store may be kept while it stays the same."""
        conn = self._reader()
        try:
            version: int = conn.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.DatabaseError as error:
            self._raise_storage_error(error)
        return version

    def _reader(self) -> sqlite3.Connection:
        """This thread's read connection (opened on its first read)."""
        self._connection()  # a closed store says so
        reader: sqlite3.Connection | None = getattr(self._local, "reader", None)
        if reader is None:
            try:
                reader = connect(self.path, cache_kib=READER_CACHE_KIB, read_only=self.read_only)
            except sqlite3.DatabaseError as error:
                self._raise_storage_error(error)
            try:
                self._check_same_file()
            except BaseException:
                reader.close()
                raise
            with self._readers_lock:
                if self._readers_closed:
                    reader.close()
                    raise StoreClosed(f"the store {self.path} is closed")
                # A server's worker threads come and go: drop the readers of
                # those that have ended, so connections never pile up.
                ended = [pair for pair in self._readers if not pair[0].is_alive()]
                for _, stale in ended:
                    stale.close()
                self._readers = [pair for pair in self._readers if pair[0].is_alive()]
                self._readers.append((threading.current_thread(), reader))
            self._local.reader = reader
        return reader

    def _check_same_file(self) -> None:
        """Refuse to read through a connection opened by the path since it names
        another file (the store replaced while open): its answers would mix the
        file this Store opened, and the indexes made for it, with the other."""
        if self._file is None:
            return  # still opening: every read so far went through the one connection
        try:
            now: tuple[int, int] | None = file_identity(self.path)
        except OSError:
            now = None
        if now != self._file:
            raise StoreClosed(
                f"the store file {self.path} was replaced, moved or removed since this Store "
                "opened it: it is not read through the new name, so that no answer mixes the "
                "two files; open the store again (restart the server) to read the file now there",
                details={"path": str(self.path)},
            )

    def connect_apart(self, *, busy_timeout_ms: int) -> sqlite3.Connection:
        """A connection of its own to the store file (the caller closes it), as the
        store's connections are made and to the file this Store opened: for a small
        write that must not wait for this Store's writer (an API key's last-used stamp)."""
        self._connection()  # a closed store says so
        conn = connect(self.path, busy_timeout_ms=busy_timeout_ms)
        try:
            self._check_same_file()
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def _on_main_connection(self) -> Iterator[None]:
        """Mark this thread as working on ``_conn`` (its reads then nest there)."""
        self._local.main_depth = getattr(self._local, "main_depth", 0) + 1
        try:
            yield
        finally:
            self._local.main_depth -= 1

    def _raise_storage_error(self, error: sqlite3.DatabaseError) -> NoReturn:
        translated = storage_error(self.path, error, known_store=self._known_store)
        if translated is None:
            raise error
        raise translated from error

    @contextmanager
    def writing(self, *, wait: bool = True) -> Iterator[None]:
        """Hold the store's writer lock (re-entrant within this Store)."""
        with self._lock:
            self._connection()
            self._refuse_writes()
            if self._writer_depth == 0 and not self._acquire_writer_lock(wait=wait):
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
                    self.sync.close_writers()
                    self._writer_lock.release()

    def _acquire_writer_lock(self, *, wait: bool) -> bool:
        lock = self._writer_lock
        try:
            return lock.acquire(wait=wait)
        except OSError as error:
            translated = storage_error(lock.path, error)
            if translated is not None:
                raise translated from None
            raise InvalidInput(
                f"the store's writer lock {lock.path} cannot be taken "
                f"({error.strerror or error}); nothing was written",
                field="store",
                details={"lock": str(lock.path)},
            ) from None

    @contextmanager
    def holding_off_writers(self) -> Iterator[None]:
        """Keep other writers out while the indexes are read back (``check``).

        A read-only store cannot take the writer lock (nor be written here).
        """
        if self.read_only:
            yield
            return
        with self.writing(wait=True):
            yield

    # -- the indexes -----------------------------------------------------

    def open_indexes(self) -> None:
        """Open and settle the indexes if the store was opened without them."""
        self.sync.open()

    @property
    def index_repairs(self) -> list[str]:
        """What opening the indexes found and repaired (or could not), for ``check``."""
        return list(self.sync.repairs)

    @property
    def index_in_cache(self) -> bool:
        """Whether the word index lives in the cache directory rather than beside
        the store file (a read-only store whose index there is not current)."""
        from researchstore.indexes.index import SearchIndex

        return self.sync.places.folder(SearchIndex) != self.sync.places.beside(SearchIndex)

    def search_index(self) -> SearchIndex:
        """The word index, opened (checked, caught up, repaired) on first need."""
        from researchstore.indexes.index import SearchIndex

        if self.sync.opened and not self.closed:
            return self.sync.get(SearchIndex)  # open: no read transaction of its own
        with self.reading():  # raises StoreClosed on a closed store
            return self.sync.get(SearchIndex)

    def reload_index_kinds(self) -> None:
        """Ask again which indexes the store keeps (its first vector was written)."""
        self.sync.reload_kinds()

    def feed_indexes(self, report_id: int, chunks: list[Any], *, replaced: bool) -> None:
        """Hand every index a report's chunks, written in this process (``IndexSync.feed``)."""
        self.sync.feed(report_id, chunks, replaced=replaced)

    def remove_from_indexes(self, report_ids: Sequence[int]) -> None:
        """Take reports out of every index (``IndexSync.remove``)."""
        self.sync.remove(report_ids)

    def commit_indexes(self, applied_seq: int, *, fed_on_write: bool | None = None) -> None:
        """Commit what the indexes were fed, up to the queued change ``applied_seq``."""
        self.sync.commit(applied_seq, fed_on_write=fed_on_write)

    def recover_index(self, damage: IndexDamaged) -> StoreDamaged:
        """Repair an index a call met damaged; the error the call answers with."""
        return self.sync.recover(damage)

    def sync_index(self, *, wait: bool = True) -> int:
        """Apply every pending change to every index; return how many reports."""
        with self._lock:
            self._connection()
            return self.sync.catch_up(wait=wait)

    def rebuild_index(self) -> int:
        """Rebuild every index from SQLite; return the number of chunks indexed."""
        with self._lock:
            self._connection()
            return self.sync.rebuild()

    # -- vectors ---------------------------------------------------------

    def keeps_vectors(self) -> bool:
        """Whether the store has a model for its vectors (and so a vector index)."""
        from researchstore.storage.vectors import MODEL_KEY

        with self.reading() as conn:
            return bool(read_meta(conn, MODEL_KEY))

    def last_chunk_rowid(self) -> int:
        """The rowid of the newest chunk (0 in an empty store): a run's chunks come after it."""
        with self.reading() as conn:
            return int(conn.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()[0])

    def drop_vectors(self) -> int:
        """Forget every vector and the model they came from; return how many went."""
        from researchstore.indexes.vector_index import VectorIndex
        from researchstore.storage.vectors import drop_vectors

        with self.writing():
            with self.transaction() as conn:
                dropped = drop_vectors(conn)
            self.sync.reload_kinds()
            self.sync.remove_folder(VectorIndex)
        return dropped

    def vector_index(self) -> VectorIndex:
        """The vector index, refreshed (at most once a second) with other processes' commits."""
        import time

        from researchstore.indexes.vector_index import VectorIndex

        if not self.sync.has(VectorIndex.name):
            self.sync.reload_kinds()
        index = self.sync.get(VectorIndex)
        now = time.monotonic()
        if now - self._vectors_checked > 1.0:
            self._vectors_checked = now
            index.refresh()
        return index


def _end_reading(conn: sqlite3.Connection) -> None:
    """End a read transaction, whatever the reads inside it met.

    After a read of a damaged page SQLite repeats the error at COMMIT (and
    ends the transaction): the reader has been told already, and a read
    transaction has nothing to lose.
    """
    if not conn.in_transaction:
        return
    try:
        conn.execute("COMMIT")
    except sqlite3.DatabaseError:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def _why_read_only(path: Path) -> str | None:
    """Why a store at ``path`` can only be read (None: it can be written).

    SQLite writes a store's folder as well as its file (the write-ahead log),
    so a read-only folder makes a read-only store. A missing file is a new
    store wherever its folder can be written.
    """
    folder = path.parent
    if folder.is_dir() and not os.access(folder, os.W_OK):
        try:
            mounted_read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
        except OSError:
            mounted_read_only = False
        return "a read-only mount" if mounted_read_only else "a read-only folder"
    if path.is_file() and not os.access(path, os.W_OK):
        return "a read-only file"
    return None


def _holds_bytes(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def _looks_new(path: Path) -> bool:
    """Whether opening ``path`` would create a new store: no file, or an empty one.

    An empty file with a write-ahead log beside it is left to SQLite.
    """
    try:
        if path.stat().st_size > 0:
            return False
    except FileNotFoundError:
        return True
    wal = path.with_name(path.name + "-wal")
    return not wal.exists() or wal.stat().st_size == 0


__all__ = ["Store", "derived_indexes"]
