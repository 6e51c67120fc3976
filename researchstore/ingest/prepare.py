"""Preparing one report for the store: read, parse and chunk, with no database work.

Pure and picklable, so it runs in worker processes (``workers.py``): a report
directory's ``report.json`` is checked, each file parsed and chunked, and the
whole report hashed. A report that cannot be stored raises ``ReportError``
with the reason; a file that cannot be read is kept with its status.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from researchstore.ingest.chunking import chunk_blocks, chunk_segments
from researchstore.ingest.discovery import REPORT_FILE, ReportSource
from researchstore.ingest.model import ChunkDraft, ParsedDocument
from researchstore.ingest.parsers import NotRead, kind_for_path, parse_file, read_document
from researchstore.params import MAX_SAFE_INTEGER
from researchstore.storage.dates import is_iso_date
from researchstore.text.language import document_language

#: Report ids are integers from 1 to 2**53 - 1: the integers JSON carries
#: exactly, and the largest ``report_id`` the tools take.
MAX_REPORT_ID = MAX_SAFE_INTEGER
#: The largest report.json read; its fields are a title, a date, tags and an id.
MAX_REPORT_JSON_BYTES = 1024 * 1024


@dataclass(slots=True)
class PreparedDocument:
    path: str
    parsed: ParsedDocument
    drafts: list[ChunkDraft]
    content_hash: str
    status: str
    reason: str | None


@dataclass(slots=True)
class PreparedReport:
    source: ReportSource
    existing_id: int | None
    wanted_id: int | None
    title: str
    #: report.json's date, else the first page's own; None when neither has
    #: one (never the day of the ingest, nor a file's time).
    date: str | None
    tags: dict[str, Any]
    signature: str
    content_hash: str
    documents: list[PreparedDocument]

    @property
    def chunk_count(self) -> int:
        return sum(len(document.drafts) for document in self.documents)


class ReportError(Exception):
    """This report cannot be stored; the message says why."""


def read_report_meta(root: Path, report: ReportSource) -> tuple[dict[str, Any], bytes]:
    """A report directory's checked ``report.json`` and its bytes (nothing for a file).

    Raises ``ReportError`` when it cannot be read or is not what a report
    may hold.
    """
    if not report.is_dir:
        return {}, b""
    try:
        raw = read_document(
            root / report.key / REPORT_FILE,
            inside=None if report.follow_external_links else str(root),
            max_bytes=MAX_REPORT_JSON_BYTES,
        )
    except NotRead as refused:
        raise ReportError(f"{REPORT_FILE} was not read: {refused.note}") from None
    try:
        meta = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ReportError(f"{REPORT_FILE} is not valid JSON: {error}") from None
    except RecursionError:
        raise ReportError(f"{REPORT_FILE} is nested too deeply to be a report's fields") from None
    if not isinstance(meta, dict):
        raise ReportError(f"{REPORT_FILE} must hold a JSON object")
    title = meta.get("title")
    if title is not None and (not isinstance(title, str) or not title.strip()):
        raise ReportError(f"{REPORT_FILE}: title must be a non-empty string")
    report_date = meta.get("date")
    if report_date is not None and not is_iso_date(report_date):
        raise ReportError(f"{REPORT_FILE}: date must be YYYY-MM-DD, got {report_date!r}")
    tags = meta.get("tags", {})
    if not isinstance(tags, dict) or not all(
        isinstance(value, str | int | float | bool)
        or (isinstance(value, list) and all(isinstance(item, str) for item in value))
        for value in tags.values()
    ):
        raise ReportError(f"{REPORT_FILE}: tags must map names to strings or lists of strings")
    wanted_id = meta.get("id")
    if wanted_id is not None and (
        not isinstance(wanted_id, int)
        or isinstance(wanted_id, bool)
        or not 1 <= wanted_id <= MAX_REPORT_ID
    ):
        shown = repr(wanted_id)
        shown = shown if len(shown) <= 40 else shown[:40] + "…"
        raise ReportError(
            f"{REPORT_FILE}: id must be an integer from 1 to {MAX_REPORT_ID}, got {shown}"
        )
    return meta, raw


def prepare_report(
    root: Path, report: ReportSource, *, existing_id: int | None, signature: str, chunk_tokens: int
) -> PreparedReport:
    if report.problem is not None:
        raise ReportError(report.problem)
    meta, meta_bytes = read_report_meta(root, report)
    digest = hashlib.sha256(meta_bytes)
    documents = []
    inside = None if report.follow_external_links else str(root)
    for path in report.files:
        documents.append(prepare_document(root, path, chunk_tokens, inside=inside))
        digest.update(path.encode() + b"\0" + documents[-1].content_hash.encode())
    first = documents[0].parsed if documents else None
    fallback_title = Path(report.key).stem if not report.is_dir else Path(report.key).name
    title = meta.get("title") or (first.title if first and first.title else None) or fallback_title
    page_dates = (document.parsed.date for document in documents)
    report_date = meta.get("date") or next((found for found in page_dates if found), None)
    if report_date is not None and not is_iso_date(report_date):
        report_date = None
    return PreparedReport(
        source=report,
        existing_id=existing_id,
        wanted_id=meta.get("id"),
        title=title.strip()[:500],
        date=report_date,
        tags=meta.get("tags", {}),
        signature=signature,
        content_hash=digest.hexdigest(),
        documents=documents,
    )


def prepare_document(
    root: Path, path: str, chunk_tokens: int, *, inside: str | None = None
) -> PreparedDocument:
    """Read, parse and chunk one file; a file not read is kept with its status.

    With ``inside`` (the source root, resolved), the file is read only if it
    resolves there.
    """
    file_path = root / path
    kind = kind_for_path(path) or "html"
    try:
        data = read_document(file_path, inside=inside)
    except NotRead as refused:
        parsed = refused.outcome(kind)
        fingerprint = f"{refused.reason}:{refused.note}"
        return PreparedDocument(path, parsed, [], fingerprint, "invalid", refused.reason)
    except OSError as error:
        parsed = ParsedDocument(kind=kind, status="invalid", reason="unreadable")
        parsed.skipped.append(str(error))
        return PreparedDocument(path, parsed, [], "unreadable", "invalid", "unreadable")
    parsed = parse_file(file_path, data=data)
    _, drafts, status, reason = chunk_parsed(parsed, chunk_tokens=chunk_tokens)
    parsed.language = document_language(parsed.language, [draft.text for draft in drafts])
    return PreparedDocument(path, parsed, drafts, hashlib.sha256(data).hexdigest(), status, reason)


def chunk_parsed(
    parsed: ParsedDocument, *, chunk_tokens: int
) -> tuple[str, list[ChunkDraft], str, str | None]:
    """A parsed file's text, its chunks, and its status and reason as stored.

    A file that parsed but yields no chunk is stored as ``empty``.
    """
    if parsed.segments:
        text, drafts = chunk_segments(parsed.segments, target_tokens=chunk_tokens)
    else:
        text, drafts = chunk_blocks(parsed.blocks, target_tokens=chunk_tokens)
    status, reason = parsed.status, parsed.reason
    if not drafts and status in ("ok", "partial"):
        status, reason = "empty", reason or "no_text"
    return text, drafts, status, reason
