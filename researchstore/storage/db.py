"""The SQLite file: connections, the writer lock, ``meta`` and the pending record.

Every transaction is explicit (autocommit connections, ``BEGIN IMMEDIATE``
for writers). ``meta`` holds small store-wide values; ``index_pending`` is the
durable record of changes the derived indexes have yet to follow, and its
last issued number is read here and nowhere else.

What a failed read or write of the file means is said here once
(``storage_error``): a full disk, a busy or read-only file, a damaged file.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import sqlite3
import stat
import sys
import time
from pathlib import Path
from typing import IO
from urllib.parse import quote

from researchstore.errors import (
    DiskFull,
    InvalidInput,
    ResearchStoreError,
    StoreDamaged,
    StoreReadOnly,
    UpstreamUnavailable,
)
from researchstore.storage.dates import utc_now
from researchstore.storage.stored import json_object, whole_number

BUSY_TIMEOUT_MS = 10_000


def connect(
    path: Path,
    *,
    cache_kib: int = 65_536,
    read_only: bool = False,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
) -> sqlite3.Connection:
    """A connection in autocommit mode whose rows read by column name.

    ``read_only``: through ``read_only_uri``, and setting nothing in the file.
    Nothing is written to the file here: a writer turns on its write-ahead
    log once the file is known to be a store (``use_write_ahead_log``).
    """
    conn = sqlite3.connect(
        read_only_uri(path) if read_only else path,
        uri=read_only,
        isolation_level=None,
        check_same_thread=False,
        cached_statements=256,
        timeout=busy_timeout_ms / 1000,
    )
    conn.row_factory = sqlite3.Row
    distrust_schema(conn)
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    conn.execute("PRAGMA foreign_keys = ON")
    # NORMAL in WAL mode survives any process crash (kill -9); only a power
    # loss can drop the last commits, and the index checks catch that.
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA mmap_size = 2147418112")  # SQLite's default ceiling; address space only
    conn.execute(f"PRAGMA cache_size = -{int(cache_kib)}")
    return conn


def use_write_ahead_log(conn: sqlite3.Connection) -> None:
    """Keep the file in WAL mode (the file remembers it: later connections find it so).

    Its header is written: only for a file known to be a store, never one refused.
    """
    conn.execute("PRAGMA journal_mode = WAL")


def distrust_schema(conn: sqlite3.Connection) -> None:
    """Treat the file's own SQL as untrusted, as SQLite advises for a file from elsewhere.

    ``trusted_schema`` off: the file's triggers, views, defaults, checks and
    indexes may call only functions SQLite deems harmless. Defensive mode
    (where Python offers it, 3.12 on) keeps SQL from writing the schema or
    pages directly. Neither stops a trigger of plain SQL: the schema itself
    is compared with the store's own before it is read (``schema.verify_schema``).
    """
    conn.execute("PRAGMA trusted_schema = OFF")
    if sys.version_info >= (3, 12):
        conn.setconfig(sqlite3.SQLITE_DBCONFIG_DEFENSIVE, True)


def read_only_uri(path: Path) -> str:
    """The URI that opens ``path`` for reading only.

    SQLite reads a WAL store through its shared-memory file (``-shm``), made
    beside the store. Where the folder cannot be written, a store with no
    write-ahead log left (every writer checkpoints at close) is opened
    ``immutable``: no ``-shm``, no locks. One whose log still holds commits
    needs its ``-shm`` there too, or it cannot be read (``storage_error``).
    """
    uri = "file:" + quote(str(path.absolute()), safe="/")
    wal = path.with_name(path.name + "-wal")
    if not os.access(path.parent, os.W_OK) and not _holds_bytes(wal):
        return uri + "?mode=ro&immutable=1"
    return uri + "?mode=ro"


def _holds_bytes(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def open_error(
    path: Path, error: sqlite3.DatabaseError, *, known_store: bool
) -> ResearchStoreError:
    """Say why a file could not be opened as a store, in terms a user can act on."""
    translated = storage_error(path, error, known_store=known_store)
    if translated is not None:
        return translated
    return InvalidInput(f"{path} is not a researchstore SQLite file ({error})", field="store")


def undecodable_message(error: UnicodeDecodeError) -> sqlite3.DatabaseError:
    """The error SQLite gave, whose message Python's sqlite3 could not decode: it quotes
    the file's own bytes (a name in a damaged schema), here replaced where not UTF-8."""
    return sqlite3.DatabaseError(bytes(error.object).decode("utf-8", "replace"))


def storage_error(
    path: Path, error: BaseException, *, known_store: bool = True
) -> ResearchStoreError | None:
    """What a failed read or write of ``path`` means, as an error a user can act on.

    None when the error is none of these (a bug, or a constraint the caller
    handles): a full disk (``DiskFull``), a busy or read-only file, a
    damaged file (``StoreDamaged``), an I/O error. A file SQLite cannot read
    as a database at all is damaged only if it is ``known_store``.
    """
    if isinstance(error, OSError):
        return disk_full(path, error) if error.errno in (errno.ENOSPC, errno.EDQUOT) else None
    if not isinstance(error, sqlite3.DatabaseError) or isinstance(error, sqlite3.IntegrityError):
        return None
    name = getattr(error, "sqlite_errorname", "") or ""
    text = str(error)
    if name.startswith("SQLITE_FULL") or "database or disk is full" in text:
        return disk_full(path, error)
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text or "busy" in text:
        return UpstreamUnavailable(f"{path} is busy ({text}); try again", field="store")
    if name.startswith("SQLITE_READONLY") or "readonly" in text or "read-only" in text:
        return StoreReadOnly(
            f"{path} is read-only: researchstore needs to write the file and its folder "
            "(write-ahead log, index)",
            field="store",
        )
    if name.startswith("SQLITE_CORRUPT") or "malformed" in text:
        return damaged_store(path, text)
    if "Could not decode to UTF-8" in text:  # Python's sqlite3: text no researchstore writes
        return damaged_store(path, text)
    if name.startswith("SQLITE_NOTADB") or "not a database" in text:
        return damaged_store(path, text) if known_store else None
    if name.startswith("SQLITE_IOERR") or "disk I/O error" in text:
        # SQLite says "full" only for its own files' writes; creating the
        # shared-memory index of a write-ahead log on a full disk is an I/O error.
        if no_space_left(path):
            return disk_full(path, error)
        return UpstreamUnavailable(f"could not read or write {path} ({text}); check the disk")
    return None


#: Less free space than this, and an I/O error is put down to a full disk.
NEARLY_FULL_BYTES = 1 << 20


def no_space_left(path: Path) -> bool:
    """Whether the filesystem holding ``path`` has (next to) no space left for us."""
    try:
        stats = os.statvfs(path.parent)
    except OSError:
        return False
    blocks = stats.f_bfree if os.geteuid() == 0 else stats.f_bavail
    return blocks * stats.f_frsize < NEARLY_FULL_BYTES


def disk_full(path: Path, error: BaseException) -> DiskFull:
    """The one error a full disk gives, whichever write found it."""
    return DiskFull(
        f"the disk holding {path} is full ({_reason(error)}): free some space, then run "
        "the command again (nothing committed is lost)",
        details={"path": str(path)},
    )


def damaged_store(path: Path, reason: str, *, checked: bool = False) -> StoreDamaged:
    """The error for a store file SQLite finds damaged, with what to do about it.

    ``checked``: said by ``researchstore check`` itself, which need not be suggested.
    """
    see = "" if checked else f"see 'researchstore check {path}'; "
    return StoreDamaged(
        f"the store file {path} is damaged ({reason}): {see}"
        "restore the file from a backup (its index is rebuilt from it), or save what SQLite "
        f"can still read into a new store: sqlite3 {path} .recover | sqlite3 RECOVERED.db",
        details={"path": str(path)},
    )


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.errno:
        return os.strerror(error.errno)
    return str(error)


def read_meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row["value"])


def read_meta_number(conn: sqlite3.Connection, key: str) -> int | None:
    """A count or sequence number kept in ``meta``; None when it is missing or not a
    number researchstore writes (``stored.whole_number``): the caller says what that means."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else whole_number(row["value"])


def store_file(conn: sqlite3.Connection) -> str:
    """The path of the file ``conn`` reads (for a message)."""
    row = conn.execute("SELECT file FROM pragma_database_list WHERE name = 'main'").fetchone()
    return str(row[0]) if row is not None else "(unknown)"


def file_identity(path: Path) -> tuple[int, int]:
    """Which file ``path`` names now: its device and inode."""
    found = os.stat(path)
    return found.st_dev, found.st_ino


def write_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    """Set ``key`` in ``meta``: with ``delete_meta``, the only SQL that writes the table
    (but the migrations')."""
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def delete_meta(conn: sqlite3.Connection, *keys: str) -> None:
    """Remove ``keys`` from ``meta`` (those it holds)."""
    conn.executemany("DELETE FROM meta WHERE key = ?", [(key,) for key in keys])


def last_pending_seq(conn: sqlite3.Connection) -> int:
    """The number of the last change ever queued in ``index_pending`` (0: none).

    Read as SQLite reads it to number the next change (``CAST``): a value no
    researchstore writes counts as 0, or as SQLite's largest integer.
    """
    row = conn.execute(
        "SELECT CAST(seq AS INTEGER) AS seq FROM sqlite_sequence WHERE name = 'index_pending'"
    ).fetchone()
    return 0 if row is None else max(0, int(row["seq"]))


def forget_pending(conn: sqlite3.Connection, through_seq: int) -> None:
    """Drop the changes of ``index_pending`` up to ``through_seq``: every index has them.

    With ``queue_pending``, the only SQL that writes the pending record.
    """
    conn.execute("DELETE FROM index_pending WHERE seq <= ?", (through_seq,))


def pending_count(conn: sqlite3.Connection) -> int:
    """How many changes wait in ``index_pending`` for some index to apply them."""
    return int(conn.execute("SELECT count(*) FROM index_pending").fetchone()[0])


def queue_pending(
    conn: sqlite3.Connection, report_id: int, now: str, *, target: str | None = None
) -> None:
    """Record that the derived indexes (or the one named ``target``) must follow
    a change to ``report_id``."""
    conn.execute(
        "INSERT INTO index_pending (report_id, queued_at, target) VALUES (?, ?, ?)",
        (report_id, now, target),
    )


#: How a lock file is opened: made if need be, never through a link.
_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
#: The most of a lock file read back to say who holds it.
_HOLDER_BYTES = 4096


class WriterLock:
    """An exclusive, process-wide lock on the store for writers (``<db>.lock``).

    The file holds who took it, so a refused writer can say who holds it.
    A folder from elsewhere may hold anything by that name: a link (to
    ``~/.bashrc``, which a writable open would empty), a second name of
    another file, a FIFO. Only a plain file of one name is used; anything
    else is refused with an ``OSError`` saying what it is, and left as it is.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[str] | None = None

    def acquire(self, *, wait: bool, timeout: float = 60.0) -> bool:
        handle = self._open()
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
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps({"pid": os.getpid(), "since": utc_now()}))
            handle.flush()
        except OSError:
            pass  # who holds the lock only serves messages: a full disk must not stop a writer
        self._handle = handle
        return True

    def _open(self) -> IO[str]:
        try:
            descriptor = os.open(self.path, _LOCK_FLAGS, 0o644)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise OSError(
                    errno.ELOOP,
                    "it is a symbolic link, which researchstore never makes there and never "
                    "writes through: remove it",
                    str(self.path),
                ) from None
            raise
        try:
            found = os.fstat(descriptor)
            if not stat.S_ISREG(found.st_mode) or found.st_nlink != 1:
                what = "a file with other names" if stat.S_ISREG(found.st_mode) else "no file"
                raise OSError(
                    errno.EINVAL,
                    f"it is {what}, which researchstore never makes there: remove it",
                    str(self.path),
                )
            os.set_blocking(descriptor, True)
        except BaseException:
            os.close(descriptor)
            raise
        return open(descriptor, "a+")

    def holder(self) -> str:
        try:
            descriptor = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return "another process"
        try:
            info = json_object(os.read(descriptor, _HOLDER_BYTES))
        except OSError:
            return "another process"
        finally:
            os.close(descriptor)
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
