"""One translator of foreign errors: SQLite's, the disk's and Tantivy's into the store's own.

As httpx's ``map_httpcore_exceptions`` turns every httpcore error into its
own in one place, the errors other libraries raise become the package's
(``errors.py``) here, each in the ``with`` block of the code that may meet
them, instead of ``except`` chains in each module:

- ``storage_errors(path)``: an OSError that means something to a user (a
  full disk) leaves as the store's error for it (``db.storage_error``);
  any other leaves as it came. Around writes of a derived index.
- ``tool_errors(path)``: the tool boundary. Every error leaves as a
  ``ResearchStoreError``: SQLite's and the disk's as ``storage_error`` says
  (a busy or unreadable store otherwise ``UpstreamUnavailable``), any other
  exception as ``internal`` naming its type, a Rust panic as
  ``IndexDamaged``. ``KeyboardInterrupt``, ``SystemExit`` and a cancelled
  task pass through: they are not errors of a call.
- ``index_read_errors(path)`` and ``index_write_errors(path)``: Tantivy
  raises ``ValueError`` for damage and for I/O alike, quoting the errno
  ("... (os error 28)"), and panics on some damaged files. An I/O error
  leaves as the ``OSError`` it names (so a full disk is told from damage),
  damage as ``IndexDamaged``.

Each is a class named as a function (as ``contextlib.suppress`` is), with an
``__exit__`` that never swallows an error: a function whose ``return`` is
inside the block needs none after it.
"""

from __future__ import annotations

import errno
import re
import sqlite3
from pathlib import Path
from types import TracebackType
from typing import Literal

from researchstore.errors import ResearchStoreError, UpstreamUnavailable
from researchstore.storage.db import no_space_left, storage_error
from researchstore.storage.derived import IndexDamaged, is_panic

_OS_ERROR = re.compile(r"os error (\d+)")


class _Translator:
    """A ``with`` block whose errors leave translated (``translate``)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> Literal[False]:
        if error is not None:
            translated = self.translate(error)
            if translated is not None and translated is not error:
                raise translated from None if self.hides_cause else error
        return False

    #: Whether the foreign error is left out of the translated one's chain
    #: (Tantivy's: its message is quoted whole).
    hides_cause = False

    def translate(self, error: BaseException) -> BaseException | None:
        """What ``error`` leaves as; None (or itself): as it came."""
        raise NotImplementedError


class storage_errors(_Translator):
    """An OSError raised in the block leaves as the store's error for it, where it has one."""

    path: Path

    def __init__(self, path: Path) -> None:
        super().__init__(path)

    def translate(self, error: BaseException) -> BaseException | None:
        if isinstance(error, OSError):
            return storage_error(self.path, error)
        return None


class tool_errors(_Translator):
    """Every error raised in the block leaves as a ``ResearchStoreError`` (see the module)."""

    path: Path

    def __init__(self, path: Path) -> None:
        super().__init__(path)

    def translate(self, error: BaseException) -> BaseException | None:
        if isinstance(error, ResearchStoreError):
            return None
        if isinstance(error, sqlite3.DatabaseError | OSError):
            translated = storage_error(self.path, error)
            if translated is not None:
                return translated
            if isinstance(error, sqlite3.OperationalError):
                return UpstreamUnavailable(f"the store is busy or unreadable: {error}")
            return ResearchStoreError(f"{type(error).__name__}: {error}")
        if isinstance(error, Exception):
            return ResearchStoreError(f"{type(error).__name__}: {error}")
        if is_panic(error):
            # A panic the index did not turn into IndexDamaged itself.
            return IndexDamaged(f"a Rust panic: {error}")
        return None  # KeyboardInterrupt, SystemExit, a cancelled task: not ours to keep


class index_read_errors(_Translator):
    """What a failed read of a Tantivy index means: its OSError, or damage."""

    hides_cause = True

    def translate(self, error: BaseException) -> BaseException | None:
        where = f"{self.path}: " if self.path is not None else ""
        if isinstance(error, ValueError):
            code = tantivy_errno(error)
            if code is not None and code not in (errno.ENOENT, errno.EIO):
                return OSError(code, f"{where}{error}")
            return IndexDamaged(f"{where}{error}")
        if is_panic(error):
            return IndexDamaged(f"{where}Tantivy panicked reading it ({error})")
        return None


class index_write_errors(_Translator):
    """What a failed write of a Tantivy index means: its OSError, or damage."""

    path: Path
    hides_cause = True

    def __init__(self, path: Path) -> None:
        super().__init__(path)

    def translate(self, error: BaseException) -> BaseException | None:
        if isinstance(error, ValueError):
            code = tantivy_errno(error)
            if code is None and no_space_left(self.path):
                # e.g. "The index writer was killed. It can happen if an indexing
                # worker encountered an Io error": the worker's error is not quoted.
                code = errno.ENOSPC
            if code is not None:
                return OSError(code, f"{self.path}: {error}")
            return None
        if is_panic(error):
            return IndexDamaged(f"{self.path}: Tantivy panicked writing it ({error})")
        return None


def tantivy_errno(error: ValueError) -> int | None:
    """The errno Tantivy quotes in an I/O error ("... (os error 28)"), if any."""
    if "No space left on device" in str(error):
        return errno.ENOSPC
    found = _OS_ERROR.search(str(error))
    return int(found.group(1)) if found else None
