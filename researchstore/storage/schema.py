"""Tables and migrations of the one SQLite file (created with sqlite-utils).

Each migration runs once, in order, inside the caller's transaction; the
number of the last one applied is kept in ``meta.schema_version``.

A store file may come from anyone (copied into a sandbox, mailed, kept as a
snapshot), and SQL kept in it runs in whoever opens it: a trigger on our
writes, a view read in place of a table. So before anything else reads the
file, ``verify_schema`` compares its ``sqlite_master`` with what the
migrations make, object for object, SQL for SQL, and refuses any other.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from researchstore.errors import InvalidInput, StoreDamaged
from researchstore.storage.db import read_meta, write_meta
from researchstore.storage.ids import new_id

if TYPE_CHECKING:
    import sqlite_utils

Migration = Callable[["sqlite_utils.Database"], None]


def _create_core(db: sqlite_utils.Database) -> None:
    db.table("sources").create(
        {"id": int, "name": str, "root": str, "kind": str, "created_at": str},
        pk="id",
        not_null={"name", "kind"},
        defaults={"kind": "directory"},
    )
    db.table("sources").create_index(["name"], unique=True)

    db.table("source_versions").create(
        {
            "id": int,
            "version_id": str,
            "source_id": int,
            "started_at": str,
            "finished_at": str,
            "status": str,
            "summary": str,
        },
        pk="id",
        foreign_keys=[("source_id", "sources", "id")],
        not_null={"version_id", "source_id", "status"},
    )
    db.table("source_versions").create_index(["version_id"], unique=True)
    db.table("source_versions").create_index(["source_id"])

    db.table("folders").create(
        {
            "id": int,
            "folder_id": str,
            "source_id": int,
            "parent_id": int,
            "path": str,
            "name": str,
        },
        pk="id",
        foreign_keys=[("source_id", "sources", "id"), ("parent_id", "folders", "id")],
        not_null={"folder_id", "source_id", "path", "name"},
    )
    db.table("folders").create_index(["source_id", "path"], unique=True)
    db.table("folders").create_index(["folder_id"], unique=True)

    db.table("reports").create(
        {
            "report_id": int,
            "source_id": int,
            "folder_id": int,
            "source_version_id": int,
            "key": str,
            "is_dir": int,
            "title": str,
            "date": str,
            "tags": str,
            "signature": str,
            "content_hash": str,
            "created_at": str,
            "updated_at": str,
        },
        pk="report_id",
        foreign_keys=[
            ("source_id", "sources", "id"),
            ("folder_id", "folders", "id"),
            ("source_version_id", "source_versions", "id"),
        ],
        not_null={"source_id", "key", "title", "date", "tags"},
        defaults={"tags": "{}", "is_dir": 0},
    )
    db.table("reports").create_index(["source_id", "key"], unique=True)

    db.table("documents").create(
        {
            "id": int,
            "document_id": str,
            "report_id": int,
            "source_version_id": int,
            "path": str,
            "name": str,
            "kind": str,
            "title": str,
            "description": str,
            "language": str,
            "date": str,
            "encoding": str,
            "status": str,
            "reason": str,
            "skipped": str,
            "content_hash": str,
            "chunk_count": int,
            "token_count": int,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[
            ("report_id", "reports", "report_id"),
            ("source_version_id", "source_versions", "id"),
        ],
        not_null={"document_id", "report_id", "path", "name", "kind", "status"},
        defaults={"chunk_count": 0, "token_count": 0, "skipped": "[]"},
    )
    db.table("documents").create_index(["document_id"], unique=True)
    db.table("documents").create_index(["report_id"])

    db.table("chunks").create(
        {
            "id": int,
            "chunk_id": str,
            "document_rowid": int,
            "report_id": int,
            "position": int,
            "status": str,
            "text": str,
            "token_count": int,
            "heading_path": str,
            "start_ms": int,
            "end_ms": int,
            "char_start": int,
            "char_end": int,
        },
        pk="id",
        foreign_keys=[("document_rowid", "documents", "id")],
        not_null={"chunk_id", "document_rowid", "report_id", "position", "status", "text"},
        defaults={"status": "ok"},
    )
    db.table("chunks").create_index(["chunk_id"], unique=True)
    db.table("chunks").create_index(["document_rowid", "position"], unique=True)
    # Replacing a report deletes its chunks by report_id (no cascades: the
    # deletes are explicit and in one transaction with the re-insert).
    db.table("chunks").create_index(["report_id"])

    # The durable record of index work still to do. A row is written in the
    # same transaction as the change it describes and deleted only after the
    # Tantivy commit that reflects it, so a crash in between is replayed.
    db.execute(
        "CREATE TABLE index_pending ("
        " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
        " report_id INTEGER NOT NULL,"
        " queued_at TEXT NOT NULL)"
    )


def _create_api_keys(db: sqlite_utils.Database) -> None:
    # API keys for the MCP server over HTTP (researchstore/serving/auth.py). Only a
    # salted hash of each key's secret is kept; key_id is the public part
    # shown in listings and used to find the row.
    db.table("api_keys").create(
        {
            "id": int,
            "key_id": str,
            "label": str,
            "salt": bytes,
            "secret_hash": bytes,
            "scopes": str,
            "workspaces": str,
            "created_at": str,
            "revoked_at": str,
            "last_used_at": str,
        },
        pk="id",
        not_null={"key_id", "salt", "secret_hash", "scopes", "workspaces", "created_at"},
        defaults={"scopes": "[]", "workspaces": "[]"},
    )
    db.table("api_keys").create_index(["key_id"], unique=True)


def _create_chunk_history(db: sqlite_utils.Database) -> None:
    # The forwarding record: chunks retired by a re-ingest (or removed with
    # their report), kept for a configurable time so that a stale chunk_id
    # can be resolved to the chunk(s) now holding the same part of the text.
    db.table("chunk_history").create(
        {
            "chunk_id": str,
            "report_id": int,
            "document_path": str,
            "position": int,
            "char_start": int,
            "char_end": int,
            "text_hash": str,
            "reason": str,
            "retired_at": str,
            "retired_by": int,
        },
        pk="chunk_id",
        foreign_keys=[("retired_by", "source_versions", "id")],
        not_null={"report_id", "document_path", "reason", "retired_at", "retired_by"},
    )
    db.table("chunk_history").create_index(["retired_at"])


def _create_evidence(db: sqlite_utils.Database) -> None:
    # Evidence retrieval (researchstore/evidence/). ``retrievals`` holds the
    # durable receipt of each call, keyed by (workspace_id, mutation_id):
    # written as ``running`` before the fetch, settled in the same
    # transaction as the evidence it stored. ``evidence`` maps a workspace's
    # evidence_id (stable per URL, kind and language) to the report holding
    # its current revision; the report lives in the workspace's source.
    db.table("retrievals").create(
        {
            "id": str,
            "workspace_id": str,
            "mutation_id": str,
            "arguments": str,
            "state": str,
            "kind": str,
            "created_at": str,
            "settled_at": str,
            "valid_until": str,
            "result": str,
            "evidence_id": str,
            "evidence_revision": int,
            "owner": str,
        },
        pk="id",
        not_null={"workspace_id", "mutation_id", "arguments", "state", "created_at", "valid_until"},
    )
    db.table("retrievals").create_index(["workspace_id", "mutation_id"], unique=True)
    db.table("evidence").create(
        {
            "evidence_id": str,
            "workspace_id": str,
            "url": str,
            "kind": str,
            "language": str,
            "report_id": int,
            "revision": int,
            "content_hash": str,
            "created_at": str,
            "updated_at": str,
        },
        pk="evidence_id",
        foreign_keys=[("report_id", "reports", "report_id")],
        not_null={"workspace_id", "url", "kind", "report_id", "revision", "content_hash"},
    )
    db.table("evidence").create_index(["report_id"], unique=True)
    db.table("evidence").create_index(["workspace_id"])


def _add_link_choice(db: sqlite_utils.Database) -> None:
    # Whether a source's walk follows symbolic links to files outside its
    # root (``ingest --follow-external-links``); re-ingest keeps the choice.
    db.execute("ALTER TABLE sources ADD COLUMN follow_external_links INTEGER NOT NULL DEFAULT 0")


def _index_unsearchable_chunks(db: sqlite_utils.Database) -> None:
    # Every open compares the word index's document count with the number of
    # ``ok`` chunks; the few chunks that are not ``ok`` are counted here, so
    # that count never reads the table.
    db.execute("CREATE INDEX chunks_not_ok ON chunks (status) WHERE status != 'ok'")


def _create_vectors(db: sqlite_utils.Database) -> None:
    # Chunk vectors for the store's one embedding model (``meta``:
    # ``vector_model``, ``vector_dim``): int8, scaled per vector, keyed by the
    # chunk's rowid, which is also the vector index's key. A chunk's vector
    # and embedding failure go when the chunk goes, however it goes.
    db.execute("CREATE TABLE vectors (chunk_rowid INTEGER PRIMARY KEY, vector BLOB NOT NULL)")
    db.execute(
        "CREATE TABLE embed_failures ("
        " chunk_rowid INTEGER PRIMARY KEY,"
        " reason TEXT NOT NULL,"
        " attempts INTEGER NOT NULL DEFAULT 1,"
        " failed_at TEXT NOT NULL)"
    )
    db.execute(
        "CREATE TRIGGER chunks_vectors_go AFTER DELETE ON chunks BEGIN"
        " DELETE FROM vectors WHERE chunk_rowid = old.id;"
        " DELETE FROM embed_failures WHERE chunk_rowid = old.id;"
        " END"
    )
    # A pending change may be for one derived index only (new vectors are
    # nothing to the word index); NULL is for every index.
    db.execute("ALTER TABLE index_pending ADD COLUMN target TEXT")


def _create_index_files(db: sqlite_utils.Database) -> None:
    # The derived indexes' committed files, kept in the store file so that a
    # copy of the one file opens without a rebuild (``packing.py``).
    db.execute(
        "CREATE TABLE index_files ("
        " index_name TEXT NOT NULL,"
        " name TEXT NOT NULL,"
        " part INTEGER NOT NULL,"
        " data BLOB NOT NULL,"
        " PRIMARY KEY (index_name, name, part))"
    )


def _add_document_date_source(db: sqlite_utils.Database) -> None:
    # Where a document's own date came from (meta, time, json-ld, byline):
    # a document that has one dates its chunks, else its report does. Rows
    # written before this column have none, so their chunks keep the
    # report's date, as the word index already holds them.
    db.execute("ALTER TABLE documents ADD COLUMN date_source TEXT")


MIGRATIONS: list[Migration] = [
    _create_core,
    _create_api_keys,
    _create_chunk_history,
    _create_evidence,
    _add_link_choice,
    _index_unsearchable_chunks,
    _create_vectors,
    _create_index_files,
    _add_document_date_source,
]
SCHEMA_VERSION = len(MIGRATIONS)


_META_COLUMNS = "(key TEXT PRIMARY KEY, value TEXT NOT NULL)"
#: ``meta`` as ``sqlite_master`` keeps it: the one table read before the rest
#: of the schema is compared.
META_TABLE = f"CREATE TABLE meta {_META_COLUMNS}"


def migrate(conn: sqlite3.Connection, *, path: Path) -> bool:
    """Bring the file at ``path`` up to ``SCHEMA_VERSION``; return True if anything ran.

    The caller holds a ``BEGIN IMMEDIATE`` transaction. The file's schema is
    verified first (``verify_schema``): nothing of a file that holds SQL of
    its own is read beyond ``sqlite_master``, nor written.
    """
    current = verify_schema(conn, path, migrating=True)
    if current == SCHEMA_VERSION:
        return False
    # Only a new or older store pays for importing sqlite-utils.
    import sqlite_utils

    db = sqlite_utils.Database(conn)
    if current == 0:
        conn.execute(f"CREATE TABLE IF NOT EXISTS meta {_META_COLUMNS}")
        conn.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('store_uuid', ?)",
            [new_id()],
        )
    for version in range(current, SCHEMA_VERSION):
        MIGRATIONS[version](db)
    write_meta(conn, "schema_version", str(SCHEMA_VERSION))
    return True


# -- the schema a store file may hold ------------------------------------------

#: ``sqlite_master`` as compared: each object's (type, name) -> (its table, its
#: SQL as ``normalized_sql`` gives it; None for an index SQLite makes itself).
Schema = dict[tuple[str, str], tuple[str, str | None]]

#: ``schema_digest`` of what the migrations make for ``SCHEMA_VERSION``: a file
#: that matches it needs no migration run to be compared. Only a cache of
#: that answer (a file that does not match is compared object by object);
#: a test keeps it current.
SCHEMA_DIGEST = "e151e41891ad103b7fbc9526faea8a2b43c22da871b7734a3b2534f2360fda20"

#: The most objects a refusal names; the rest are counted.
NAMED = 8


def verify_schema(conn: sqlite3.Connection, path: Path, *, migrating: bool) -> int:
    """The file's schema version, once its schema is found to be researchstore's own.

    One read of ``sqlite_master``, then of ``meta`` once that is our table;
    every table, index, trigger and view is then compared with what the
    migrations make for that version, and any other (an extra trigger or
    view, a view in place of a table, a table defined otherwise) is refused
    with ``StoreDamaged`` naming it. A store of an older version is compared
    only when ``migrating`` (its migrations run next); otherwise it is left,
    unread beyond ``meta``, for the caller to refuse.
    """
    found = read_schema(conn)
    if not found:
        return 0  # a new, empty file
    meta = found.get(("table", "meta"))
    if meta is None and not any(name == "meta" for _, name in found):
        raise InvalidInput(
            f"{path} is not a researchstore store: it holds "
            + _named([f"{kind} {name}" for kind, name in sorted(found)])
            + ", and no table meta",
            field="store",
        )
    if meta != ("meta", normalized_sql(META_TABLE)):
        raise foreign_schema(path, schema_differences(found, expected_schema(SCHEMA_VERSION)))
    version = stored_version(conn, path)
    if version > SCHEMA_VERSION:
        raise InvalidInput(
            f"store schema version {version} is newer than this researchstore "
            f"({SCHEMA_VERSION}); upgrade researchstore",
            field="store",
        )
    if version < SCHEMA_VERSION and not migrating:
        return version
    if version == SCHEMA_VERSION and schema_digest(found) == SCHEMA_DIGEST:
        return version
    differences = schema_differences(found, expected_schema(version))
    if differences:
        raise foreign_schema(path, differences)
    return version


def read_schema(conn: sqlite3.Connection) -> Schema:
    """The file's ``sqlite_master``, normalized (``Schema``)."""
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM main.sqlite_master").fetchall()
    return {
        (str(kind), str(name)): (str(table), normalized_sql(sql)) for kind, name, table, sql in rows
    }


def stored_version(conn: sqlite3.Connection, path: Path) -> int:
    """``meta.schema_version`` as a number (0: none); any other value is damage."""
    stored = read_meta(conn, "schema_version")
    if stored is None:
        return 0
    if not (stored.isascii() and stored.isdigit() and len(stored) <= 9):
        shown = stored if len(stored) <= 40 else stored[:40] + "…"
        raise StoreDamaged(
            f"the store file {path} is damaged: its schema version (meta.schema_version) "
            f"is {shown!r}, not a number researchstore writes; restore the file from a "
            "backup, or ask whoever sent it for a copy researchstore made",
            details={"path": str(path)},
        )
    return int(stored)


#: A string or a double-quoted name (kept), or a name quoted as sqlite-utils 3
#: quoted it, ``[name]``, or in backticks (given double quotes).
_QUOTED = re.compile(r"""('(?:[^']|'')*'|"(?:[^"]|"")*")|\[([^\]]*)\]|`([^`]*)`""")


def normalized_sql(sql: str | None) -> str | None:
    """``sql`` as the schema comparison reads it: every run of white space one
    space, every quoted name in double quotes.

    sqlite-utils 3 quotes names ``[name]`` and 4 ``"name"``: neither changes
    what SQLite makes of the text, and a store made with either is our own.
    Two texts alike after this differ in no token (white space inside a
    string aside), so in nothing that could run.
    """
    if sql is None:
        return None
    if "[" in sql or "`" in sql:
        sql = _QUOTED.sub(_double_quoted, sql)
    return " ".join(sql.split())


def _double_quoted(match: re.Match[str]) -> str:
    kept, bracketed, backticked = match.groups()
    if kept is not None:
        return kept
    return '"' + (bracketed if bracketed is not None else backticked) + '"'


def schema_digest(schema: Schema) -> str:
    """SHA-256 of a ``Schema``, in a stable order."""
    lines = (
        f"{kind} {name} {table} {sql}" for (kind, name), (table, sql) in sorted(schema.items())
    )
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


@cache
def expected_schema(version: int) -> Schema:
    """What the migrations make of a new file up to ``version``, made in memory."""
    import sqlite_utils

    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        conn.execute(META_TABLE)
        db = sqlite_utils.Database(conn)
        for migration in MIGRATIONS[:version]:
            migration(db)
        return read_schema(conn)
    finally:
        conn.close()


def schema_differences(found: Schema, expected: Schema) -> list[str]:
    """Each object of ``found`` not in ``expected`` (or unlike it), and each missing, in
    words; the indexes SQLite makes for a table's keys come last (they follow their table)."""
    expected_kinds = {name: kind for kind, name in expected}
    found_names = {name for _, name in found}
    differences = []
    for (kind, name), (table, sql) in sorted(found.items()):
        if (kind, name) not in expected:
            other = expected_kinds.get(name)
            on = f" on {table}" if kind == "trigger" else ""
            instead = f" in place of researchstore's {other} {name}" if other else ""
            differences.append(f"{kind} {name}{on}{instead}")
        elif expected[kind, name] != (table, sql):
            differences.append(f"{kind} {name} (not as researchstore makes it)")
    differences.extend(
        f"{kind} {name} missing"
        for kind, name in sorted(expected)
        if (kind, name) not in found and name not in found_names
    )
    return sorted(differences, key=lambda said: " sqlite_autoindex_" in said)


def foreign_schema(path: Path, differences: list[str]) -> StoreDamaged:
    """The refusal of a store file whose schema is not researchstore's own."""
    return StoreDamaged(
        f"the store file {path} holds a schema researchstore did not make "
        f"({_named(differences)}). Nothing in it was run: a store file may come from "
        "anyone, and researchstore opens only one that holds exactly its own tables, "
        "indexes and triggers. Ask whoever made the file for a copy researchstore made, "
        "or, if you added these yourself, remove them with the sqlite3 shell",
        details={"path": str(path), "objects": differences},
    )


def _named(items: list[str]) -> str:
    more = f" and {len(items) - NAMED} more" if len(items) > NAMED else ""
    return ", ".join(items[:NAMED]) + more
