"""API keys for the MCP server over HTTP: creation, listing, revocation, checks.

A key reads ``rsk_<key_id>_<secret>``. ``key_id`` (12 hex digits) is public:
it names the key in listings and finds its row. ``secret`` is 32 random bytes
(URL-safe base64). The store keeps only ``sha256(salt + secret)`` with a
random salt per key; a secret of 256 random bits needs no slow hash, and the
comparison is constant-time. The plaintext is shown once, by ``create_key``.

A key carries scopes and workspaces; ``authenticate`` turns a presented key
into the ``Principal`` (``principal.py``) that the server's tools run as.
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
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from researchstore.errors import StoreClosed
from researchstore.principal import (
    Principal,
    check_scopes,
    check_workspaces,
)
from researchstore.storage.dates import utc_now
from researchstore.storage.stored import string_list

if TYPE_CHECKING:
    from researchstore.store import Store

KEY_PREFIX = "rsk"
#: ``last_used_at`` is stamped at most this often per key, so that serving
#: requests does not turn every read into a write.
TOUCH_INTERVAL_S = 60.0
#: How long the stamp waits for another writer before it is left for the next request.
TOUCH_BUSY_MS = 50

_KEY = re.compile(r"^rsk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
#: How a key can be named for revocation: its id, its listed prefix, or itself.
_KEY_REFERENCE = re.compile(r"^(?:rsk_)?([0-9a-f]{12})(?:_[A-Za-z0-9_-]*)?$")


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
    checked_scopes = check_scopes(scopes)
    checked_workspaces = check_workspaces(workspaces)
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
            "scopes": string_list(scopes) or [],
            "workspaces": string_list(workspaces) or [],
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
    if row is None:
        return None
    salt, secret_hash = row["salt"], row["secret_hash"]
    if not isinstance(salt, bytes) or not isinstance(secret_hash, bytes):
        return None  # a key no researchstore wrote opens nothing
    if not hmac.compare_digest(_hash(salt, secret), secret_hash):
        return None
    if touch:
        _touch(store, key_id)
    scopes, workspaces = string_list(row["scopes"]), string_list(row["workspaces"])
    if scopes is None or workspaces is None:
        # Rights that cannot be read are none (fail closed): the key reads as
        # one made with no scope and no workspace.
        scopes = workspaces = []
    return Principal(scopes=frozenset(scopes), workspaces=frozenset(workspaces), key_id=key_id)


class KeyCache:
    """The principals of keys checked lately, kept while the store is unchanged.

    A server checks every request's key; most come again and again. An entry
    holds while the store's ``data_version`` is the one it was checked at:
    any commit to the file (a revocation, in any process) sends every key
    back to ``authenticate``. Keys are held by their SHA-256, never as given.
    """

    def __init__(self, store: Store, *, size: int = 1024) -> None:
        self.store = store
        self.size = size
        self._known: dict[bytes, tuple[int, Principal]] = {}

    def authenticate(self, key: str | None) -> Principal | None:
        """``authenticate(store, key, touch=False)``, from the cache when it holds."""
        if not key:
            return None
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
        version = self.store.data_version()
        known = self._known.get(digest)
        if known is not None and known[0] == version:
            return known[1]
        principal = authenticate(self.store, key, touch=False)
        if principal is None:
            self._known.pop(digest, None)
            return None
        if len(self._known) >= self.size:
            self._known.clear()  # a flood of distinct keys: start again
        self._known[digest] = (version, principal)
        return principal


_touched: dict[tuple[str, str], float] = {}
_touched_lock = threading.Lock()


def touch_due(store: Store, key_id: str) -> bool:
    """Whether ``key_id``'s ``last_used_at`` would be stamped now (``_touch``)."""
    if store.read_only:
        return False
    last = _touched.get((str(store.path), key_id), -TOUCH_INTERVAL_S)
    return time.monotonic() - last >= TOUCH_INTERVAL_S


def touch(store: Store, key_id: str) -> None:
    """Stamp ``key_id``'s ``last_used_at`` (at most once a minute; see ``_touch``)."""
    _touch(store, key_id)


def _touch(store: Store, key_id: str) -> None:
    """Stamp ``last_used_at``, at most once a minute and never waiting on a writer.

    A read-only store is served without the stamp.
    """
    if store.read_only:
        return
    now = time.monotonic()
    slot = (str(store.path), key_id)
    with _touched_lock:
        if now - _touched.get(slot, -TOUCH_INTERVAL_S) < TOUCH_INTERVAL_S:
            return
        _touched[slot] = now
    # Its own connection with a short timeout: a long ingest transaction must
    # not hold up a request (or the store's lock) for a bookkeeping stamp.
    try:
        conn = store.connect_apart(busy_timeout_ms=TOUCH_BUSY_MS)
        try:
            conn.execute(
                "UPDATE api_keys SET last_used_at = ? WHERE key_id = ?", (utc_now(), key_id)
            )
        finally:
            conn.close()
    except sqlite3.OperationalError:
        with _touched_lock:  # busy: let the next request stamp it
            _touched.pop(slot, None)
    except StoreClosed:
        pass  # the file was replaced since the store opened: it is not written


__all__ = ["authenticate", "create_key", "list_keys", "revoke_key", "touch", "touch_due"]
