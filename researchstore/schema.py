"""Tables and migrations of the one SQLite file (created with sqlite-utils).

Each migration runs once, in order, inside the caller's transaction; the
number of the last one applied is kept in ``meta.schema_version``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

from researchstore.db import read_meta, write_meta
from researchstore.errors import InvalidInput
from researchstore.ids import new_id

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
    # API keys for the MCP server over HTTP (researchstore/auth.py). Only a
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


def migrate(conn: sqlite3.Connection) -> bool:
    """Bring the file up to ``SCHEMA_VERSION``; return True if anything ran.

    The caller holds a ``BEGIN IMMEDIATE`` transaction.
    """
    conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    current = int(read_meta(conn, "schema_version") or 0)
    if current > SCHEMA_VERSION:
        raise InvalidInput(
            f"store schema version {current} is newer than this researchstore "
            f"({SCHEMA_VERSION}); upgrade researchstore",
            field="store",
        )
    if current == SCHEMA_VERSION:
        return False
    # Only a new or older store pays for importing sqlite-utils.
    import sqlite_utils

    db = sqlite_utils.Database(conn)
    if current == 0:
        conn.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('store_uuid', ?)",
            [new_id()],
        )
    for version in range(current, SCHEMA_VERSION):
        MIGRATIONS[version](db)
    write_meta(conn, "schema_version", str(SCHEMA_VERSION))
    return True
