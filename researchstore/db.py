"""The SQLite file: connections, the writer lock, ``meta`` and the pending record.

Every transaction is explicit (autocommit connections, ``BEGIN IMMEDIATE``
for writers). ``meta`` holds small store-wide values; ``index_pending`` is the
durable record of changes the derived indexes have yet to follow, and its
last issued number is read here and nowhere else.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import IO

from researchstore.dates import utc_now
from researchstore.errors import InvalidInput, ResearchStoreError, UpstreamUnavailable

BUSY_TIMEOUT_MS = 10_000


def connect(path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode whose rows read by column name."""
    conn = sqlite3.connect(
        path,
        isolation_level=None,
        check_same_thread=False,
        cached_statements=256,
        timeout=BUSY_TIMEOUT_MS / 1000,
    )
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    # NORMAL in WAL mode survives any process crash (kill -9); only a power
    # loss can drop the last commits, and the index checks catch that.
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA mmap_size = 2147418112")  # SQLite's default ceiling; address space only
    conn.execute("PRAGMA cache_size = -65536")
    return conn


def open_error(path: Path, error: sqlite3.DatabaseError) -> ResearchStoreError:
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


def read_meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row["value"])


def write_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def last_pending_seq(conn: sqlite3.Connection) -> int:
    """The number of the last change ever queued in ``index_pending`` (0: none)."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'index_pending'").fetchone()
    return 0 if row is None else int(row["seq"])


def queue_pending(conn: sqlite3.Connection, report_id: int, now: str) -> None:
    """Record that the derived indexes must follow a change to ``report_id``."""
    conn.execute("INSERT INTO index_pending (report_id, queued_at) VALUES (?, ?)", (report_id, now))


class WriterLock:
    """An exclusive, process-wide lock on the store for writers (``<db>.lock``).

    The file holds who took it, so a refused writer can say who holds it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[str] | None = None

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
        if not isinstance(info, dict) or not info:
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
