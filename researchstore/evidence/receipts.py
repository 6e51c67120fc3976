"""Retrieval receipts: one row per ``(workspace_id, mutation_id)`` in ``retrievals``.

A receipt is written ``running`` (with this process's identity) before
anything is fetched, and settled ``completed`` or ``cancelled`` with the
result. Looking one up brings it up to date: past ``valid_until`` it reads
``expired``; still ``running`` while the process that wrote it is gone (or
long after any deadline) it becomes ``unconfirmed``, never success.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
from contextlib import suppress
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from researchstore.errors import InvalidInput
from researchstore.evidence.config import RetrievalConfig
from researchstore.evidence.outcome import Outcome
from researchstore.storage.dates import stamp, stored_stamp
from researchstore.storage.ids import new_id
from researchstore.storage.stored import json_object

if TYPE_CHECKING:
    from researchstore.store import Store

__all__ = [
    "ReceiptKey",
    "discard_running",
    "open_receipt",
    "payload",
    "release",
    "settle",
]

#: A receipt still ``running`` this long after the fetch deadline is not running.
_RUNNING_GRACE = timedelta(minutes=2)
#: The highest process number there can be (``pid_t`` is 32 bits).
_PID_MAX = 2**31 - 1
_COLUMNS = (
    "id",
    "workspace_id",
    "mutation_id",
    "arguments",
    "state",
    "kind",
    "created_at",
    "settled_at",
    "valid_until",
    "result",
    "evidence_id",
    "evidence_revision",
    "owner",
)
_SELECT = ", ".join(_COLUMNS)


class ReceiptKey(NamedTuple):
    """Which receipt: the store file (resolved), the workspace and the mutation id."""

    store_path: str
    workspace_id: str
    mutation_id: str


#: Receipts this process is working on.
_active: set[ReceiptKey] = set()
_active_lock = threading.Lock()


def open_receipt(
    store: Store, key: ReceiptKey, arguments: str, kind: str, config: RetrievalConfig
) -> tuple[dict[str, Any], bool]:
    """The existing receipt (brought up to date), or a new ``running`` one (fresh=True).

    A fresh receipt counts as live in this process until ``release(key)``.
    """
    with _active_lock:
        # Held while the receipt is looked up, so that a second caller in this
        # process sees the first one's receipt as live.
        row, fresh = _open(store, key, arguments, kind, config)
        if fresh:
            _active.add(key)
    return row, fresh


def release(key: ReceiptKey) -> None:
    """This process no longer works on ``key``'s receipt."""
    with _active_lock:
        _active.discard(key)


def _open(
    store: Store, key: ReceiptKey, arguments: str, kind: str, config: RetrievalConfig
) -> tuple[dict[str, Any], bool]:
    now = config.clock()
    with store.transaction() as conn:
        found = conn.execute(
            f"SELECT {_SELECT} FROM retrievals WHERE workspace_id = ? AND mutation_id = ?",
            (key.workspace_id, key.mutation_id),
        ).fetchone()
        if found is None:
            row: dict[str, Any] = {
                "id": new_id(),
                "workspace_id": key.workspace_id,
                "mutation_id": key.mutation_id,
                "arguments": arguments,
                "state": "running",
                "kind": kind,
                "created_at": stamp(now),
                "settled_at": None,
                "valid_until": stamp(now + config.receipt_ttl),
                "result": None,
                "evidence_id": None,
                "evidence_revision": None,
                "owner": json.dumps(_owner()),
            }
            conn.execute(
                f"INSERT INTO retrievals ({_SELECT}) VALUES ({', '.join('?' * len(row))})",
                tuple(row.values()),
            )
            return row, True
        row = dict(zip(_COLUMNS, found, strict=True))
        if row["arguments"] != arguments:
            raise InvalidInput(
                "mutation_id: already used in this workspace for a retrieval with other "
                "arguments; use a new mutation_id for a new retrieval",
                field="mutation_id",
                details={"retrieval_id": row["id"], "arguments": json_object(row["arguments"])},
            )
        state = row["state"]
        if state == "running" and not _still_running(row, key, now, config):
            state = "unconfirmed"
            row["settled_at"] = stamp(now)
        valid_until = stored_stamp(row["valid_until"])
        if state != "running" and (valid_until is None or now >= valid_until):
            state = "expired"  # a time no researchstore wrote: valid no longer
        if state != row["state"]:
            row["state"] = state
            conn.execute(
                "UPDATE retrievals SET state = ?, settled_at = ? WHERE id = ?",
                (state, row["settled_at"], row["id"]),
            )
        return row, False


def _owner() -> dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": _process_start(os.getpid()),
    }


def _process_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (tells a reused pid apart), where known."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat.rsplit(b")", 1)[-1].split()
    return fields[19].decode() if len(fields) > 19 else None


def _still_running(
    row: dict[str, Any], key: ReceiptKey, now: datetime, config: RetrievalConfig
) -> bool:
    """Is the process that wrote this ``running`` receipt still working on it?"""
    if key in _active:
        return True
    created = stored_stamp(row["created_at"])
    deadline = timedelta(seconds=config.fetch.timeout_s) + _RUNNING_GRACE
    if created is None or now - created > deadline:
        return False  # past every deadline: whatever ran it, it is not finishing
    owner = json_object(row["owner"])
    if owner is None:
        return False
    if owner.get("host") != socket.gethostname():
        return True  # another machine: only its age can tell
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid == os.getpid():
        return False  # this process, and not in _active: it died with a thread or an earlier run
    if isinstance(pid, bool) or not 0 < pid <= _PID_MAX:
        return False  # no process has that number
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    started = owner.get("started")
    return started is None or _process_start(pid) == started


def settle(
    store: Store,
    row: dict[str, Any],
    outcome: Outcome,
    evidence: tuple[str, int] | None,
    config: RetrievalConfig,
) -> dict[str, Any]:
    """Write ``outcome`` (and the evidence it became) into the receipt; the settled row."""
    settled = dict(row)
    settled.update(
        state="cancelled" if outcome.status == "cancelled" else "completed",
        settled_at=stamp(max(config.clock(), stored_stamp(row["created_at"]) or config.clock())),
        result=json.dumps(outcome.result(), ensure_ascii=False),
        evidence_id=evidence[0] if evidence else None,
        evidence_revision=evidence[1] if evidence else None,
    )
    with store.transaction() as conn:
        conn.execute(
            "UPDATE retrievals SET state = ?, settled_at = ?, result = ?, evidence_id = ?, "
            "evidence_revision = ? WHERE id = ?",
            (
                settled["state"],
                settled["settled_at"],
                settled["result"],
                settled["evidence_id"],
                settled["evidence_revision"],
                row["id"],
            ),
        )
    return settled


def discard_running(store: Store, receipt_id: str) -> None:
    """Delete a receipt still ``running`` (an error, not a crash: the call can be retried)."""
    with suppress(sqlite3.Error), store.transaction() as conn:
        conn.execute("DELETE FROM retrievals WHERE id = ? AND state = 'running'", (receipt_id,))


def payload(row: dict[str, Any]) -> dict[str, Any]:
    """Seed 002's ``retrieval`` object of a receipt row."""
    evidence = None
    if row["evidence_id"] is not None:
        evidence = {"evidence_id": row["evidence_id"], "revision": row["evidence_revision"]}
    return {
        "id": row["id"],
        "workspace_id": row["workspace_id"],
        "mutation_id": row["mutation_id"],
        "state": row["state"],
        "kind": row["kind"],
        "created_at": row["created_at"],
        "settled_at": row["settled_at"],
        "valid_until": row["valid_until"],
        "result": json_object(row["result"]),
        "evidence": evidence,
    }
