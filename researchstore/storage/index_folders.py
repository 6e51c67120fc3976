"""An index folder on disk: its sidecar, the boot and process that wrote it, its removal.

Each derived index lives in a folder beside the store file (or in the cache
for a read-only store). Its sidecar (``researchstore-index.json``) says which
store it was built for, at which schema, and the last pending change it
reflects; ``sync.IndexSync`` reads it to tell a current folder from one to
rebuild. A rebuild works in a folder named for its process
(``<folder>.rebuild-<pid>``), left behind only if that process died.
Nothing here knows SQLite or any index library.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

SIDECAR = "researchstore-index.json"
#: The highest process number there can be (``pid_t`` is 32 bits): a folder
#: named for a higher one was left by no process.
PID_MAX = 2**31 - 1
#: Where Linux names the current boot.
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def read_sidecar(folder: Path) -> dict[str, Any] | None:
    """The sidecar of an index folder, or None when it is missing or unreadable."""
    try:
        data = json.loads((folder / SIDECAR).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def boot_id() -> str | None:
    """The name of the machine's current boot (Linux), new after every restart;
    None where it cannot be read."""
    try:
        return BOOT_ID.read_text().strip() or None
    except OSError:
        return None


def write_sidecar(
    folder: Path,
    *,
    store_uuid: str,
    schema_version: int,
    applied_seq: int,
    unflushed_boot: str | None = None,
) -> None:
    """Record what ``folder`` holds; ``unflushed_boot``: the boot in which files
    of it were written without waiting for the disk (``IndexSync._unpack``)."""
    data: dict[str, Any] = {
        "store_uuid": store_uuid,
        "index_schema": schema_version,
        "applied_seq": applied_seq,
    }
    if unflushed_boot is not None:
        data["unflushed_boot"] = unflushed_boot
    temporary = folder / (SIDECAR + ".tmp")
    # Made new, never through a link: a folder from elsewhere may hold one by that name.
    temporary.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with os.fdopen(os.open(temporary, flags, 0o644), "w") as handle:
        json.dump(data, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, folder / SIDECAR)


def process_alive(pid: int) -> bool:
    """Whether a process with this id is running (ours counts: it may be rebuilding now).

    The number comes from a folder's name, which anyone may have made: one no
    process can have (0, or past ``PID_MAX``) is no process's.
    """
    if pid == os.getpid():
        return True
    if not 0 < pid <= PID_MAX:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def remove_tree(path: Path, *, ignore_errors: bool = True) -> None:
    """Remove a folder and everything in it (shutil loads only when one is removed).

    Anything else by its name (a link, which a folder from elsewhere may hold
    where a rebuild folder goes, or a file) is removed itself, never followed.
    """
    import shutil

    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            path.unlink()
            return
    except FileNotFoundError:
        return
    except OSError:
        if not ignore_errors:
            raise
        return
    shutil.rmtree(path, ignore_errors=ignore_errors)
