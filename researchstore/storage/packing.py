"""The derived indexes' committed files, kept inside the store file.

So that the one ``.db`` is enough: a copy of it opens by writing these files
back into an index folder (``unpack``), not by rebuilding the index from the
chunks. SQLite stays the truth; these are a cache of what each index held at
``<name>_packed_seq`` (a change of ``index_pending``), written in the same
transaction as that number, and every pending change after it is kept until
the index has been packed again (``sync.IndexSync._forget_applied``).

Files are stored in parts of ``PART_BYTES`` (SQLite's largest value is 1 GB),
keyed by index, file name and part. A file already packed under its name is
not written again: index files are immutable once committed, except those an
index names as rewritten in place (``meta.json``, ``manifest.json``).

A store file from elsewhere may name its packed files anything. Only a plain
name (``PLAIN_NAME``) that the index itself writes (``DerivedIndex.file_names``)
is written back, and only inside the folder given: a copy naming any other
file is refused whole (``IndexDamaged``: the index is rebuilt from SQLite).
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from researchstore.storage.db import delete_meta
from researchstore.storage.derived import IndexDamaged

PART_BYTES = 8 << 20
#: What any packed file may be named, whichever index it belongs to: one
#: name inside the index's folder (no separator, not ``.`` or ``..``, no NUL,
#: nothing hidden, short). Each index narrows it to the names it writes.
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: How a file written back is opened: created new, inside the folder's own
#: descriptor, never through a link.
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def packed_names(conn: sqlite3.Connection, index_name: str) -> set[str]:
    return {
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT name FROM index_files WHERE index_name = ?", (index_name,)
        )
    }


def pack(
    conn: sqlite3.Connection,
    index_name: str,
    files: Iterable[Path],
    *,
    rewritten: frozenset[str],
) -> int:
    """Make the packed files of ``index_name`` exactly ``files``; return the bytes written."""
    held = packed_names(conn, index_name)
    wanted = {path.name: path for path in files}
    written = 0
    for name in held - set(wanted):
        conn.execute(
            "DELETE FROM index_files WHERE index_name = ? AND name = ?", (index_name, name)
        )
    for name, path in sorted(wanted.items()):
        if name in held and name not in rewritten:
            continue
        conn.execute(
            "DELETE FROM index_files WHERE index_name = ? AND name = ?", (index_name, name)
        )
        with open(path, "rb") as handle:
            part = 0
            while True:
                data = handle.read(PART_BYTES)
                if not data and part:
                    break
                conn.execute(
                    "INSERT INTO index_files (index_name, name, part, data) VALUES (?, ?, ?, ?)",
                    (index_name, name, part, data),
                )
                written += len(data)
                part += 1
                if len(data) < PART_BYTES:
                    break
    return written


def unpack(
    conn: sqlite3.Connection,
    index_name: str,
    folder: Path,
    *,
    file_names: re.Pattern[str],
    durable: bool = True,
) -> int:
    """Write the packed files of ``index_name`` into ``folder``, a new, empty folder; the bytes.

    Every name is checked before a byte is written: one that is not a plain
    name matching ``file_names`` (what the index writes) raises
    ``IndexDamaged``. ``durable``: wait until each file is on disk.
    """
    inside = folder.resolve()
    for name in packed_names(conn, index_name):
        if not (
            isinstance(name, str)
            and PLAIN_NAME.fullmatch(name)
            and file_names.fullmatch(name)
            and (inside / name).resolve().parent == inside
        ):
            raise IndexDamaged(
                f"the copy of the {index_name} index the store file keeps names a file "
                f"{str(name)[:80]!r}, which no researchstore writes: the store file was "
                "altered or damaged"
            )
    folder_fd = os.open(inside, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    written = 0
    handle: BinaryIO | None = None
    current = None
    try:
        for name, data in conn.execute(
            "SELECT name, data FROM index_files WHERE index_name = ? ORDER BY name, part",
            (index_name,),
        ):
            if not isinstance(data, bytes):  # SQLite keeps any type in any column
                raise IndexDamaged(
                    f"the copy of the {index_name} index the store file keeps holds "
                    f"{type(data).__name__} where the bytes of {str(name)[:80]!r} belong: "
                    "the store file was altered or damaged"
                )
            if handle is None or name != current:
                if handle is not None:
                    closing, handle = handle, None
                    _close(closing, durable)
                handle = os.fdopen(os.open(name, _CREATE, 0o644, dir_fd=folder_fd), "wb")
                current = name
            handle.write(data)
            written += len(data)
    finally:
        try:
            if handle is not None:
                _close(handle, durable)
        finally:
            os.close(folder_fd)
    return written


def forget(conn: sqlite3.Connection, index_name: str) -> None:
    """Drop what is packed of ``index_name`` (an index the store no longer keeps)."""
    conn.execute("DELETE FROM index_files WHERE index_name = ?", (index_name,))
    delete_meta(conn, f"{index_name}_packed_seq", f"{index_name}_packed_schema")


def _close(handle: BinaryIO, durable: bool) -> None:
    try:
        handle.flush()
        if durable:
            os.fsync(handle.fileno())
    finally:
        handle.close()
