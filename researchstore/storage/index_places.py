"""Where each derived index of a store lives, and whether it is current there.

Beside a writable store, an index lives in ``STORE.db<suffix>``. A read-only
store (a read-only file, folder or mount) uses the folder beside it only if
it is current as it is; otherwise one in the cache directory, in the entry
of the state its file was in when opened (``index_cache.py``). ``folder`` is
the one answer to where an index lives; ``problem`` says why a folder
cannot be used as it is. ``sync.IndexSync`` decides what to do about it.

The ``meta`` keys ``<name>_applied_seq`` record the last change of
``index_pending`` each index reflects (``applied_seq``).
"""

from __future__ import annotations

import glob
import os
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

from researchstore.errors import StoreDamaged, StoreReadOnly
from researchstore.storage.cache_dir import writable_cache_root
from researchstore.storage.db import WriterLock, last_pending_seq, read_meta_number
from researchstore.storage.derived import DerivedIndex
from researchstore.storage.index_cache import CacheEntry, state_key, store_folder
from researchstore.storage.index_folders import (
    SIDECAR,
    boot_id,
    process_alive,
    read_sidecar,
    remove_tree,
)


class SyncedStore(Protocol):
    """What the indexes' keeper asks of the store it keeps them for (``store.Store``).

    The keeper (``sync.IndexSync``) and this module sit below ``store.py``, so
    they name the store by what they use of it rather than by importing it.
    """

    @property
    def path(self) -> Path: ...

    @property
    def store_uuid(self) -> str: ...

    @property
    def progress(self) -> bool | None: ...

    @property
    def read_only(self) -> bool: ...

    def reading(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def writing(self, *, wait: bool = True) -> AbstractContextManager[None]: ...


class IndexPlaces:
    """Where the derived indexes of one store live."""

    def __init__(self, store: SyncedStore, *, lock: threading.RLock) -> None:
        self._store = store
        self._lock = lock
        #: Where each index of a read-only store lives, once decided.
        self._placed: dict[str, Path] = {}
        #: A read-only store's entry in the cache, for the state its file was in.
        self._cache_entry: CacheEntry | None = None

    def place_in_cache(self, kind: type[DerivedIndex]) -> Path:
        """From now on, the index of ``kind`` of a read-only store lives in the cache."""
        placed = self._placed[kind.name] = self.cached(kind)
        return placed

    def folder(self, kind: type[DerivedIndex]) -> Path:
        """Where the index of ``kind`` lives: beside the store (``STORE.db<suffix>``),
        or, for a read-only store whose folder there is not current, in the cache."""
        if not self._store.read_only:
            return self.beside(kind)
        placed = self._placed.get(kind.name)
        if placed is None:
            beside = self.beside(kind)
            placed = beside if self.problem(kind, beside) is None else self.cached(kind)
            self._placed[kind.name] = placed
        return placed

    def beside(self, kind: type[DerivedIndex]) -> Path:
        """The folder of ``kind`` beside the store file."""
        path = self._store.path
        return path.with_name(path.name + kind.suffix)

    def cached(self, kind: type[DerivedIndex]) -> Path:
        """The folder of ``kind`` in the cache directory, for a read-only store."""
        return self.cache_entry().folder / self.beside(kind).name

    def cache_entry(self) -> CacheEntry:
        """The read-only store's entry in the cache: the state its file is in now,
        kept for as long as it is open."""
        with self._lock:
            if self._cache_entry is None:
                store = self._store
                try:
                    root = writable_cache_root()
                except OSError as error:
                    raise StoreReadOnly(
                        f"the indexes of the read-only store {store.path} can be kept neither "
                        f"beside it nor in the cache directory ({error}): "
                        "set RESEARCHSTORE_CACHE_DIR to a folder that can be written",
                        field="store",
                    ) from None
                folder = store_folder(root, store.store_uuid, store.path)
                with store.reading() as conn:
                    self._cache_entry = CacheEntry(folder, state_key(conn))
            return self._cache_entry

    def problem(self, kind: type[DerivedIndex], folder: Path | None = None) -> str | None:
        """Why the folder of ``kind`` (or ``folder``) cannot be used as it is, or None."""
        folder = folder or self.folder(kind)
        if folder.is_symlink():
            # researchstore never makes one; the index would be written where it leads.
            return "a link to another folder"
        sidecar = read_sidecar(folder)
        if sidecar is None:
            return "missing"
        if sidecar.get("store_uuid") != self._store.store_uuid:
            return "built for another store"
        if sidecar.get("index_schema") != kind.schema_version:
            return "older index schema"
        unflushed = sidecar.get("unflushed_boot")
        if unflushed is not None and unflushed != boot_id():
            return "written back before the machine restarted, and perhaps never on disk"
        with self._store.reading() as conn:
            applied = applied_seq(conn, kind)
            issued = last_pending_seq(conn)
        seen = sidecar.get("applied_seq")
        if not isinstance(seen, int) or seen < applied:
            return "behind the store"
        if seen > issued:
            return "ahead of the store"
        return None

    def any_index_beside(self) -> bool:
        """Whether an index of a store lies beside the store file (its sidecar is there).

        Every derived index lives in ``STORE.db.<suffix>`` with a sidecar, so
        this needs no index module loaded (a one-shot lookup loads none).
        """
        path = self._store.path
        return any(
            (folder / SIDECAR).exists()
            for folder in path.parent.glob(f"{glob.escape(path.name)}.*")
        )

    def refuse_orphaned_indexes(self, kinds: Sequence[type[DerivedIndex]]) -> None:
        """Refuse a new (missing or empty) store file that has an index with documents beside it.

        That index belongs to the store the file was: rebuilding it from an
        empty store would wipe it. It is left as it is.
        """
        path = self._store.path
        for kind in kinds:
            folder = self.folder(kind)
            if not kind.holds_data(folder):
                continue
            state = "empty (0 bytes)" if path.exists() else "missing"
            raise StoreDamaged(
                f"the store file {path} is {state}, but the {kind.name} beside it ({folder}) "
                "holds a store's documents: the store file was truncated, replaced or removed. "
                f"Nothing was changed. Restore {path} from a backup; or, to start a new, empty "
                f"store at {path}, delete {folder} first.",
                details={"path": str(path), "index": str(folder)},
            )

    def remove_stale_folders(self, kinds: Sequence[type[DerivedIndex]]) -> None:
        """Remove the rebuild and swap folders that processes no longer alive left behind."""
        for kind in kinds:
            folder = self.folder(kind)
            pattern = re.compile(re.escape(folder.name) + r"\.(?:rebuild|old)-(\d+)")
            try:
                entries = list(folder.parent.iterdir())
            except OSError:
                return
            for entry in entries:
                found = pattern.fullmatch(entry.name)
                if found and not process_alive(int(found.group(1))):
                    remove_tree(entry, ignore_errors=True)

    @staticmethod
    def swap_in(folder: Path, temporary: Path) -> None:
        """Put the folder built at ``temporary`` where ``folder`` is, moving the old one aside."""
        old = folder.with_name(folder.name + f".old-{os.getpid()}")
        if folder.exists() or folder.is_symlink():  # a link is moved aside, not followed
            remove_tree(old, ignore_errors=True)
            os.replace(folder, old)
        os.replace(temporary, folder)
        remove_tree(old, ignore_errors=True)

    @contextmanager
    def cache_locked(self, kind: type[DerivedIndex]) -> Iterator[CacheEntry]:
        """The read-only store's cache entry, held, under the lock of its store's
        cache folder: the one way into it for making or replacing an index there."""
        entry = self.cache_entry()
        try:
            entry.store_folder.mkdir(exist_ok=True)
            lock = WriterLock(entry.store_folder / "lock")
            lock.acquire(wait=True)
        except OSError as error:
            raise self._unwritable_cache(kind, error) from None
        try:
            try:
                entry.hold()
            except OSError as error:
                raise self._unwritable_cache(kind, error) from None
            yield entry
        finally:
            lock.release()

    def _unwritable_cache(self, kind: type[DerivedIndex], error: OSError) -> StoreReadOnly:
        return StoreReadOnly(
            f"the {kind.label} of the read-only store {self._store.path} can be kept "
            f"neither beside it nor in the cache directory {self.cache_entry().store_folder} "
            f"({error}): set RESEARCHSTORE_CACHE_DIR to a folder that can be written",
            field="store",
        )

    def release(self) -> None:
        """Let go of the read-only store's cache entry."""
        if self._cache_entry is not None:
            self._cache_entry.release()


def applied_key(kind: type[DerivedIndex]) -> str:
    return f"{kind.name}_applied_seq"


def applied_seq(conn: Any, kind: type[DerivedIndex]) -> int:
    """The last change of ``index_pending`` the index of ``kind`` applied (0: none).

    A number no researchstore writes (not a number, or past the last change
    ever queued) counts as 0: every change still pending is applied again,
    which an index takes as it took it the first time.
    """
    applied = read_meta_number(conn, applied_key(kind))
    return applied if applied is not None and applied <= last_pending_seq(conn) else 0
