"""Which derived files this machine wrote itself: a record kept outside every store.

A derived index's files can come from elsewhere: the store file carries a
copy of them (``packing.py``), written back into a folder when the file is
copied, and a store file is only data from whoever sent it. Some of those
files are read by native code that trusts its own files (a usearch graph
whose neighbour ids are out of range is read outside its memory: the
process dies with SIGSEGV), and checking their bytes would mean knowing
another library's layout. So such a file is used only if it was built here.

"Built here" means: the file holds bytes whose SHA-256 a process on this
machine recorded (``record``) right after writing them itself, from rows it
read from SQLite. The records live in the cache directory
(``writable_cache_root()/built-here/``), outside any store and any index folder, so
neither a crafted store file nor a folder sent beside one can add to them;
a digest named inside a file is only where to look first. Each record also
keeps the identity of the files known to hold those bytes (device, inode,
size, modification and change times: no sender can set a change time), so
a file already known is recognised with one ``stat``; any other file (a
copy, one written back from a store file) is hashed once.

Like everything in the cache directory, the records may be deleted at any
time: a file no longer known is hashed, not found, and its index is rebuilt
from SQLite. Where the cache directory cannot be written, nothing is
recorded, and every file is rebuilt when next opened.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from pathlib import Path

from researchstore.storage.cache_dir import writable_cache_root

FOLDER = "built-here"
#: Records kept at most; the oldest go first. An index forgets the record of
#: the files a commit of its replaces (``forget``): a copy of an older state
#: of a store is rebuilt, not read.
KEEP_RECORDS = 1024
#: Files remembered per record (the index's own folder, and copies of it).
KEEP_FILES = 8

_DIGEST = re.compile(r"[0-9a-f]{64}")
#: How a record is written: a new file, never through a link.
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: A file's identity: device, inode, size, modification and change times.
Identity = list[int]


def sha256_of(file: Path) -> str:
    with open(file, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def record(file: Path) -> str:
    """Record ``file``, which this process just wrote itself, as built
    here; return its SHA-256 (to name it by, never to trust it by)."""
    digest = sha256_of(file)
    _remember(digest, file)
    return digest


def is_built_here(file: Path, named: str | None = None) -> bool:
    """Whether ``file`` holds bytes this machine recorded.

    ``named``: the digest it is said to have (read from a manifest): where to
    look first. The answer never rests on it: a file whose identity is not in
    that record is hashed.
    """
    if named is not None and _DIGEST.fullmatch(named):
        if _identity(file) in _files_of(named):
            return True
    digest = sha256_of(file)
    try:
        if not _record_path(digest).is_file():
            return False
    except OSError:  # no cache directory: nothing was recorded
        return False
    _remember(digest, file)
    return True


def forget(digest: str | None) -> None:
    """Forget the record of ``digest`` (files an index no longer holds)."""
    if digest is not None and _DIGEST.fullmatch(digest):
        try:
            _record_path(digest).unlink(missing_ok=True)
        except OSError:
            pass


def _identity(file: Path) -> Identity:
    stat = file.stat()
    return [stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def _record_path(digest: str) -> Path:
    """Where the record of ``digest`` is kept; ``OSError`` where no cache directory
    can be written (``writable_cache_root``)."""
    return writable_cache_root() / FOLDER / digest


def _files_of(digest: str) -> list[Identity]:
    try:
        files = json.loads(_record_path(digest).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return files if isinstance(files, list) else []


def _remember(digest: str, file: Path) -> bool:
    """Add ``file`` to the record of ``digest`` (made if need be); False when the
    cache directory cannot be written."""
    try:
        path = _record_path(digest)
        files = [known for known in _files_of(digest) if known != _identity(file)]
        files = [*files[-(KEEP_FILES - 1) :], _identity(file)]
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f"{digest}.{os.getpid()}-{threading.get_ident()}.tmp")
        temporary.unlink(missing_ok=True)
        with os.fdopen(os.open(temporary, _CREATE, 0o644), "w") as handle:
            json.dump({"files": files}, handle)
        os.replace(temporary, path)
        _forget_oldest(path.parent)
    except OSError:
        return False
    return True


def _forget_oldest(folder: Path) -> None:
    records = [entry for entry in folder.iterdir() if _DIGEST.fullmatch(entry.name)]
    if len(records) <= KEEP_RECORDS:
        return
    records.sort(key=lambda entry: entry.stat().st_mtime_ns)
    for entry in records[: len(records) - KEEP_RECORDS]:
        entry.unlink(missing_ok=True)
