"""The folder for what researchstore keeps outside a store: caches it can always rebuild."""

from __future__ import annotations

import errno
import logging
import os
import stat
import tempfile
from pathlib import Path

#: The folders already said to stand in for an unwritable cache directory.
_told: set[Path] = set()


def cache_root() -> Path:
    """Where the caches go: read-only stores' indexes, the language model unpacked.

    ``RESEARCHSTORE_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/researchstore``,
    else ``~/.cache/researchstore``.
    """
    chosen = os.environ.get("RESEARCHSTORE_CACHE_DIR")
    if chosen:
        return Path(chosen)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "researchstore"


def writable_cache_root() -> Path:
    """``cache_root()``, made if need be, where it can be written.

    Where it cannot (a user without a writable home) and
    ``RESEARCHSTORE_CACHE_DIR`` is not set, a folder of this user's own in
    the system's temporary folder (``private_temporary_folder``), said once a
    process on the ``researchstore`` logger (stderr, unless the program logs
    elsewhere). A ``RESEARCHSTORE_CACHE_DIR`` that cannot be written is the
    user's choice, and its ``OSError`` is raised, as is the first one where
    neither can be used.
    """
    chosen = cache_root()
    try:
        _make_writable(chosen)
        return chosen
    except OSError as error:
        if os.environ.get("RESEARCHSTORE_CACHE_DIR"):
            raise
        try:
            fallback = private_temporary_folder()
        except OSError:
            raise error from None
        if fallback not in _told:
            _told.add(fallback)
            logging.getLogger("researchstore").warning(
                "researchstore: the cache directory %s cannot be written (%s): caches go to "
                "%s instead (set RESEARCHSTORE_CACHE_DIR to choose another)",
                chosen,
                error.strerror or error,
                fallback,
            )
        return fallback


def private_temporary_folder() -> Path:
    """``researchstore-<uid>`` in the system's temporary folder: made with mode 0700,
    and used only while it is a folder (not a link) this user owns, made private."""
    folder = Path(tempfile.gettempdir()) / f"researchstore-{os.getuid()}"
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    found = os.lstat(folder)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        # Anyone may make a name in a shared temporary folder: not ours, not used.
        raise PermissionError(errno.EACCES, "not a folder of this user's own", str(folder))
    if stat.S_IMODE(found.st_mode) & 0o077:
        os.chmod(folder, 0o700)
    return folder


def _make_writable(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(folder))
