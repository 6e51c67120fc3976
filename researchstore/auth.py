"""API keys for the MCP server over HTTP, and who is calling a tool.

A key reads ``rsk_<key_id>_<secret>``. ``key_id`` (12 hex digits) is public:
it names the key in listings and finds its row. ``secret`` is 32 random bytes
(URL-safe base64). The store keeps only ``sha256(salt + secret)`` with a
random salt per key; a secret of 256 random bits needs no slow hash, and the
comparison is constant-time. The plaintext is shown once, by ``create_key``.

A key carries scopes (``agent:research`` for evidence retrieval) and the
workspaces it may use (``*`` for any). Over HTTP the server authenticates
every request and runs the tool ``acting_as`` the key's ``Principal``; a tool
that needs a right calls ``current_principal().require(...)``, which raises
``NotEntitled``. Everything else, the library, the CLI and the MCP server over
stdio, acts as ``LOCAL_USER``, who has every right.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from researchstore.dates import utc_now
from researchstore.errors import InvalidInput, NotEntitled
from researchstore.store import Store

#: Every scope a key can hold, and what it allows.
SCOPES: dict[str, str] = {
    "agent:research": "retrieve public sources as evidence (research_evidence_retrieve)",
}
ANY_WORKSPACE = "*"
KEY_PREFIX = "rsk"
#: ``last_used_at`` is stamped at most this often per key, so that serving
#: requests does not turn every read into a write.
TOUCH_INTERVAL_S = 60.0

_KEY = re.compile(r"^rsk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
#: How a key can be named for revocation: its id, its listed prefix, or itself.
_KEY_REFERENCE = re.compile(r"^(?:rsk_)?([0-9a-f]{12})(?:_[A-Za-z0-9_-]*)?$")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the rights of one API key, or the local user's (all)."""

    scopes: frozenset[str]
    workspaces: frozenset[str]
    key_id: str | None = None
    unrestricted: bool = False

    def require(self, scope: str, workspace: str | None = None) -> None:
        """Raise ``NotEntitled`` unless this caller holds ``scope`` (in ``workspace``)."""
        if self.unrestricted:
            return
        if scope not in self.scopes:
            raise NotEntitled(
                f"this API key lacks the scope {scope!r}",
                details={"required_scope": scope, "key_id": self.key_id},
            )
        if workspace is None or ANY_WORKSPACE in self.workspaces:
            return
        if _canonical_workspace(workspace) not in self.workspaces:
            raise NotEntitled(
                f"this API key may not use workspace {workspace!r}",
                field="workspace_id",
                details={"workspace_id": workspace, "key_id": self.key_id},
            )


LOCAL_USER = Principal(
    scopes=frozenset(SCOPES), workspaces=frozenset({ANY_WORKSPACE}), unrestricted=True
)
#: Holds nothing: what a request that somehow lost its key acts as.
NOBODY = Principal(scopes=frozenset(), workspaces=frozenset())

_current: ContextVar[Principal] = ContextVar("researchstore_principal", default=LOCAL_USER)


def current_principal() -> Principal:
    """The caller of the tool now running (``LOCAL_USER`` outside the HTTP server)."""
    return _current.get()


@contextmanager
def acting_as(principal: Principal) -> Iterator[Principal]:
    """Run the block as ``principal``."""
    token = _current.set(principal)
    try:
        yield principal
    finally:
        _current.reset(token)


# -- keys ----------------------------------------------------------------------


def _canonical_workspace(workspace: str) -> str:
    try:
        return str(uuid.UUID(workspace))
    except (ValueError, AttributeError, TypeError):
        return workspace


def _check_scopes(scopes: Iterable[str]) -> list[str]:
    checked = sorted(set(scopes))
    for scope in checked:
        if scope not in SCOPES:
            raise InvalidInput(
                f"unknown scope {scope!r}; known scopes: {', '.join(sorted(SCOPES))}",
                field="scope",
            )
    return checked


def _check_workspaces(workspaces: Iterable[str]) -> list[str]:
    checked: set[str] = set()
    for workspace in workspaces:
        if workspace == ANY_WORKSPACE:
            checked.add(workspace)
            continue
        try:
            checked.add(str(uuid.UUID(workspace)))
        except (ValueError, AttributeError, TypeError):
            raise InvalidInput(
                f"workspace must be a UUID or {ANY_WORKSPACE!r}; got {workspace!r}",
                field="workspace",
            ) from None
    return sorted(checked)


def _hash(salt: bytes, secret: str) -> bytes:
    return hashlib.sha256(salt + secret.encode("ascii")).digest()


def create_key(
    store: Store,
    *,
    scopes: Iterable[str] = (),
    workspaces: Iterable[str] = (),
    label: str | None = None,
) -> str:
    """Create a key and return its plaintext: the only time it is ever shown."""
    checked_scopes = _check_scopes(scopes)
    checked_workspaces = _check_workspaces(workspaces)
    secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii").rstrip("=")
    salt = secrets.token_bytes(16)
    with store.transaction() as conn:
        while True:
            key_id = secrets.token_hex(6)
            taken = conn.execute("SELECT 1 FROM api_keys WHERE key_id = ?", (key_id,)).fetchone()
            if taken is None:
                break
        conn.execute(
            "INSERT INTO api_keys (key_id, label, salt, secret_hash, scopes, workspaces, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                key_id,
                label,
                salt,
                _hash(salt, secret),
                json.dumps(checked_scopes),
                json.dumps(checked_workspaces),
                utc_now(),
            ),
        )
    return f"{KEY_PREFIX}_{key_id}_{secret}"


def list_keys(store: Store, *, include_revoked: bool = True) -> list[dict[str, Any]]:
    """Every key's public facts (never a secret or a hash), oldest first."""
    where = "" if include_revoked else " WHERE revoked_at IS NULL"
    with store.reading() as conn:
        rows = conn.execute(
            "SELECT key_id, label, scopes, workspaces, created_at, revoked_at, last_used_at "
            f"FROM api_keys{where} ORDER BY id"
        ).fetchall()
    return [
        {
            "key_id": key_id,
            "prefix": f"{KEY_PREFIX}_{key_id}_",
            "label": label,
            "scopes": json.loads(scopes),
            "workspaces": json.loads(workspaces),
            "created_at": created_at,
            "revoked_at": revoked_at,
            "last_used_at": last_used_at,
        }
        for key_id, label, scopes, workspaces, created_at, revoked_at, last_used_at in rows
    ]


def revoke_key(store: Store, key_id: str) -> bool:
    """Revoke a key by its id, listed prefix or plaintext; False if no live key has it."""
    match = _KEY_REFERENCE.match(key_id.strip().rstrip("…"))
    if match is not None:
        key_id = match.group(1)
    with store.transaction() as conn:
        cursor = conn.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL",
            (utc_now(), key_id),
        )
    return cursor.rowcount > 0


def authenticate(store: Store, key: str | None, *, touch: bool = True) -> Principal | None:
    """The principal of a live ``key``, or None for a missing, wrong or revoked key."""
    match = _KEY.match(key or "")
    if match is None:
        return None
    key_id, secret = match.groups()
    with store.reading() as conn:
        row = conn.execute(
            "SELECT salt, secret_hash, scopes, workspaces FROM api_keys "
            "WHERE key_id = ? AND revoked_at IS NULL",
            (key_id,),
        ).fetchone()
    if row is None or not hmac.compare_digest(_hash(row[0], secret), row[1]):
        return None
    if touch:
        _touch(store, key_id)
    return Principal(
        scopes=frozenset(json.loads(row[2])),
        workspaces=frozenset(json.loads(row[3])),
        key_id=key_id,
    )


_touched: dict[tuple[str, str], float] = {}
_touched_lock = threading.Lock()


def _touch(store: Store, key_id: str) -> None:
    """Stamp ``last_used_at``, at most once a minute and never waiting on a writer."""
    now = time.monotonic()
    slot = (str(store.path), key_id)
    with _touched_lock:
        if now - _touched.get(slot, -TOUCH_INTERVAL_S) < TOUCH_INTERVAL_S:
            return
        _touched[slot] = now
    # Its own connection with a short timeout: a long ingest transaction must
    # not hold up a request (or the store's lock) for a bookkeeping stamp.
    try:
        conn = sqlite3.connect(store.path, timeout=0.05, isolation_level=None)
        try:
            conn.execute(
                "UPDATE api_keys SET last_used_at = ? WHERE key_id = ?", (utc_now(), key_id)
            )
        finally:
            conn.close()
    except sqlite3.OperationalError:
        with _touched_lock:  # busy: let the next request stamp it
            _touched.pop(slot, None)


__all__ = [
    "ANY_WORKSPACE",
    "LOCAL_USER",
    "NOBODY",
    "SCOPES",
    "Principal",
    "acting_as",
    "authenticate",
    "create_key",
    "current_principal",
    "list_keys",
    "revoke_key",
]
