"""Evidence records: a ``ready`` or ``partial`` outcome stored as a workspace report.

Each workspace has one source (kind ``workspace``, named
``workspace:<id>``); each piece of evidence is one report in it holding one
document, chunked and indexed like any other. ``evidence_id`` is stable per
workspace, URL, kind and language; ``revision`` rises only when the content
changes. The ``evidence`` table maps one to the other.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid
from datetime import datetime
from typing import TYPE_CHECKING

from researchstore.errors import ResearchStoreError
from researchstore.evidence.config import RetrievalConfig
from researchstore.evidence.outcome import Outcome, clip
from researchstore.fetch.urls import without_fragment
from researchstore.ingest.chunking import chunk_blocks, chunk_segments
from researchstore.ingest.writer import (
    add_source,
    record_finished_version,
    write_document_report,
)
from researchstore.storage.dates import NO_DATE, stamp

if TYPE_CHECKING:
    from researchstore.store import Store

__all__ = ["evidence_id_for", "write_evidence"]

_EVIDENCE_NAMESPACE = uuid.UUID("4f9d1c52-6a0e-5b7e-9a43-2f7c0d6b8e11")


def evidence_id_for(workspace_id: str, url: str, kind: str, language: str | None) -> str:
    """The stable evidence id of a URL read as ``kind`` (in ``language``) in a workspace."""
    try:
        normalized = without_fragment(url)
    except ValueError:
        normalized = url
    name = "\n".join((workspace_id, kind, (language or "").lower(), normalized))
    return str(uuid.uuid5(_EVIDENCE_NAMESPACE, name))


def write_evidence(
    store: Store,
    conn: sqlite3.Connection,
    *,
    workspace_id: str,
    url: str,
    kind: str,
    language: str | None,
    outcome: Outcome,
    config: RetrievalConfig,
) -> tuple[str, int]:
    """Write (or keep) the evidence report of ``outcome``; its id and revision.

    Runs inside the caller's transaction and writer lock. The report is
    written the way ingest writes one (``write_document_report``), so it has
    the same rows, forwarding record and ``index_pending`` entry.
    """
    if outcome.document is None:
        raise ValueError("only an outcome with a document (ready or partial) is evidence")
    evidence_id = evidence_id_for(workspace_id, url, kind, language)
    document = outcome.document
    content_hash = hashlib.sha256(
        json.dumps(
            [
                document.kind,
                outcome.title,
                outcome.description,
                outcome.text,
                [(s.start_ms, s.end_ms) for s in outcome.segments],
            ],
            ensure_ascii=False,
        ).encode()
    ).hexdigest()
    now = config.clock()
    known = conn.execute(
        "SELECT e.revision, e.content_hash, r.report_id AS live_report_id FROM evidence e "
        "LEFT JOIN reports r ON r.report_id = e.report_id WHERE e.evidence_id = ?",
        (evidence_id,),
    ).fetchone()
    if known is not None and known["content_hash"] == content_hash and known["live_report_id"]:
        return evidence_id, int(known["revision"])
    revision = (known["revision"] + 1) if known is not None else 1
    source_name = f"workspace:{workspace_id}"
    source_id = _workspace_source(conn, source_name, workspace_id, now)
    version_rowid = record_finished_version(
        conn, source_id, stamp(now), {"evidence_id": evidence_id, "revision": revision}
    )
    if document.segments:
        _, drafts = chunk_segments(document.segments, target_tokens=store.chunk_tokens)
        path = f"{evidence_id}/captions.{'vtt' if document.kind == 'vtt' else 'srt'}"
    else:
        _, drafts = chunk_blocks(document.blocks, target_tokens=store.chunk_tokens)
        path = f"{evidence_id}/page.{'txt' if document.kind == 'text' else 'html'}"
    tags = {"retrieval_kind": kind, "url": url}
    if outcome.source_url and outcome.source_url != url:
        tags["source_url"] = outcome.source_url
    if language:
        tags["language"] = language
    title = clip(outcome.title, 200) or clip(url, 200) or evidence_id
    report_id = write_document_report(
        store,
        conn,
        source_id=source_id,
        source_name=source_name,
        version_rowid=int(version_rowid or 0),
        key=evidence_id,
        path=path,
        parsed=document,
        drafts=drafts,
        title=title,
        # The page's own date, if it has one; never the day it was retrieved
        # (``retrieved_at`` says that), which a date filter would take for its date.
        date=document.date or NO_DATE,
        tags=tags,
        content_hash=content_hash,
        existing_id=known["live_report_id"] if known is not None else None,
        now=stamp(now),
    )
    conn.execute(
        "INSERT INTO evidence (evidence_id, workspace_id, url, kind, language, report_id, "
        "revision, content_hash, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(evidence_id) DO UPDATE SET report_id = excluded.report_id, "
        "revision = excluded.revision, content_hash = excluded.content_hash, "
        "updated_at = excluded.updated_at",
        (
            evidence_id,
            workspace_id,
            url,
            kind,
            language,
            report_id,
            revision,
            content_hash,
            stamp(now),
            stamp(now),
        ),
    )
    return evidence_id, revision


def _workspace_source(conn: sqlite3.Connection, name: str, workspace_id: str, now: datetime) -> int:
    row = conn.execute("SELECT id, kind FROM sources WHERE name = ?", (name,)).fetchone()
    if row is not None:
        if row["kind"] != "workspace":
            raise ResearchStoreError(
                f"the source name {name!r} is taken by a {row['kind']} source; evidence of "
                "this workspace cannot be stored"
            )
        return int(row["id"])
    return add_source(conn, name, workspace_id, "workspace", stamp(now))
