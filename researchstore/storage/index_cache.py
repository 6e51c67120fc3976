"""Where a read-only store keeps its indexes in the cache: one entry per state of its file.

    <cache root>/<store_uuid>/lock                   taken to make, hold or remove an entry
    <cache root>/<store_uuid>/<state>/               an entry: the indexes of one state
    <cache root>/<store_uuid>/<state>/in-use         held (shared) by every Store using it
    <cache root>/<store_uuid>/<state>/<STORE.db><suffix>

``store_uuid`` is read from the store file, so it names a folder only when it
is a uuid spelt exactly as researchstore writes one (``StoreDamaged``
otherwise). ``state`` is a digest of what the indexes follow (``state_key``):
two snapshots of one store (yesterday's copy and today's, under one name)
get two entries, so opening one never swaps the index of another open
``Store``, while every open of one snapshot finds the same entry. An entry
no ``Store`` holds is removed when a new one is made, but for the
``KEEP_UNUSED`` used last.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import sqlite3
from pathlib import Path

from researchstore.errors import StoreDamaged
from researchstore.storage.ids import canonical_uuid

IN_USE = "in-use"
#: Entries of one store kept though no Store uses them (the ones used last).
KEEP_UNUSED = 2
#: An entry's name: ``state_key``'s digest, 80 bits in hex.
_DIGEST_BYTES = 10
_STATE = re.compile(rf"[0-9a-f]{{{2 * _DIGEST_BYTES}}}")


def store_folder(root: Path, store_uuid: str, path: Path) -> Path:
    """The cache folder of the store at ``path``, named by its ``store_uuid``."""
    if not store_uuid or canonical_uuid(store_uuid) != store_uuid:
        raise StoreDamaged(
            f"the store {path} names itself {store_uuid[:80]!r} (meta.store_uuid), which is "
            "no uuid researchstore writes: the file was altered or damaged. Its index cannot "
            "be kept in the cache directory under that name; open a writable copy of it, "
            "or a copy from its source",
            details={"path": str(path)},
        )
    return root / store_uuid


def state_key(conn: sqlite3.Connection) -> str:
    """A digest of the state of the store file that its indexes follow.

    Every change an index follows is queued in ``index_pending``, whose last
    number (``sqlite_sequence``) only grows, and ``meta`` says what each
    index applied and what its packed copy reflects. Two copies that went
    their own ways can agree on those numbers, not on the rest: the packed
    files are named by Tantivy's random segment ids, and the newest chunk's
    id is a random UUIDv7. Only small tables and the end of one index are read.
    """
    digest = hashlib.blake2b(digest_size=_DIGEST_BYTES)
    meta = conn.execute("SELECT key, value FROM meta ORDER BY key").fetchall()
    sections = [
        [row for row in meta if _is_index_state(str(row[0]))],
        conn.execute("SELECT name, seq FROM sqlite_sequence ORDER BY name").fetchall(),
        conn.execute(
            "SELECT index_name, name, part FROM index_files ORDER BY index_name, name, part"
        ).fetchall(),
        conn.execute("SELECT id, chunk_id FROM chunks ORDER BY id DESC LIMIT 1").fetchall(),
    ]
    for rows in sections:
        digest.update(repr([tuple(row) for row in rows]).encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _is_index_state(key: str) -> bool:
    """Whether a ``meta`` key says what an index holds (its applied, packed seq and schema)."""
    return key == "schema_version" or key.endswith(("_seq", "_schema"))


class CacheEntry:
    """One entry of a store's cache folder, and this ``Store``'s hold on it."""

    def __init__(self, store_folder: Path, state: str) -> None:
        self.store_folder = store_folder
        self.folder = store_folder / state
        self._held: int | None = None

    def hold(self) -> None:
        """Make the entry if need be and hold it (a shared lock on ``in-use``) until
        ``release``: an entry held is never removed. Called under the store's lock."""
        if self._held is not None:
            return
        self.folder.mkdir(exist_ok=True)
        descriptor = os.open(
            self.folder / IN_USE, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
        )
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH)
            os.utime(descriptor)  # used now: the entries used last are kept
        except BaseException:
            os.close(descriptor)
            raise
        self._held = descriptor

    def release(self) -> None:
        if self._held is not None:
            os.close(self._held)  # closing lets go of the lock
            self._held = None

    def remove_unused(self) -> None:
        """Remove the store's other entries that no ``Store`` holds, but the
        ``KEEP_UNUSED`` used last. Called under the store's lock, which anyone
        who would hold one of them takes first."""
        try:
            entries = [
                entry
                for entry in self.store_folder.iterdir()
                if entry != self.folder
                and _STATE.fullmatch(entry.name)
                and entry.is_dir()
                and not entry.is_symlink()
            ]
        except OSError:
            return
        entries.sort(key=_last_used, reverse=True)
        unused = 0
        for entry in entries:
            try:
                descriptor = os.open(entry / IN_USE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except FileNotFoundError:
                descriptor = None  # never held, or half made
            except OSError:
                continue
            try:
                if descriptor is not None:
                    try:
                        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue  # a Store holds it
                unused += 1
                if unused > KEEP_UNUSED:
                    shutil.rmtree(entry, ignore_errors=True)
            finally:
                if descriptor is not None:
                    os.close(descriptor)


def _last_used(entry: Path) -> float:
    try:
        return (entry / IN_USE).stat().st_mtime
    except OSError:
        return 0.0
