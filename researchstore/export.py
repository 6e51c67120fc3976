"""Every chunk of a store with its report and document, as JSON lines or Parquet.

The rows come in store order: sources by name, each source's reports by key,
each report's documents in the order they were stored, each document's
chunks by position. They are read from one read transaction a batch at a
time and written as they come, so memory is bounded by a batch (for Parquet,
a row group) whatever the size of the store: each loop of the query follows
an index in the order wanted, so SQLite sorts nothing and the first rows are
written before the rest are read.

Each row has the keys of ``COLUMNS``, documented in the README ("Looking
inside a store"): keys may be added, never renamed. In JSON lines ``tags`` is
the report's tags object; Parquet has no such type, so there it is the same
object as JSON text. pyarrow, for Parquet, is imported here only, and only
when Parquet is asked for; it is no dependency of researchstore.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson

from researchstore.errors import InvalidInput
from researchstore.listing import source_rowid
from researchstore.progress import Progress, progress_bar, wanted
from researchstore.storage.filters import report_tags, stored_tags
from researchstore.storage.queries import heading_path
from researchstore.storage.stored import json_default

if TYPE_CHECKING:
    from researchstore.store import Store

#: The keys of every exported row, in order.
COLUMNS = (
    "chunk_id",
    "report_id",
    "source",
    "report_key",
    "report_title",
    "report_date",
    "tags",
    "document_id",
    "document_path",
    "document_title",
    "document_kind",
    "document_language",
    "document_status",
    "position",
    "start_ms",
    "end_ms",
    "heading_path",
    "text",
    "token_count",
    "status",
)
FORMATS = ("jsonl", "parquet")
#: Rows read at a time (and written at a time, as JSON lines).
BATCH_ROWS = 1_000
#: Rows of a Parquet row group, read at a time: big enough to compress well.
PARQUET_ROW_GROUP_ROWS = 10_000

#: The query of every exported row, ``{where}`` empty or ``WHERE s.id = ?`` (a source).
ROWS_SQL = (
    "SELECT c.chunk_id, r.report_id, s.name, r.key, r.title, r.date, r.tags, d.document_id, "
    "d.path, d.title, d.kind, d.language, d.status, c.position, c.start_ms, c.end_ms, "
    "c.heading_path, c.text, c.token_count, c.status "
    # CROSS JOIN keeps the loops in this order, each along an index in the
    # order wanted: SQLite sorts nothing, and the first rows come at once.
    "FROM sources s CROSS JOIN reports r ON r.source_id = s.id "
    "CROSS JOIN documents d ON d.report_id = r.report_id "
    "CROSS JOIN chunks c ON c.document_rowid = d.id "
    "{where} ORDER BY s.name, r.key, d.id, c.position"
)

Row = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class ExportSummary:
    """What an export wrote: how many chunks, in which format, where, in how long."""

    chunks: int
    format: str
    destination: str
    seconds: float

    @property
    def chunks_per_second(self) -> float:
        return self.chunks / self.seconds if self.seconds > 0 else 0.0


def chunk_batches(
    conn: sqlite3.Connection, *, source: str | None = None, batch_rows: int = BATCH_ROWS
) -> Iterator[list[Row]]:
    """The rows of every chunk (of ``source``), ``batch_rows`` at a time, in store order."""
    where, params = (
        ("", ()) if source is None else ("WHERE s.id = ?", (source_rowid(conn, source),))
    )
    cursor = conn.cursor()
    cursor.row_factory = None  # plain tuples, unpacked by position: a row per chunk
    cursor.execute(ROWS_SQL.format(where=where), params)
    while batch := cursor.fetchmany(batch_rows):
        yield batch


def count_chunks(conn: sqlite3.Connection, *, source: str | None = None) -> int:
    """How many rows ``chunk_batches`` yields."""
    if source is None:
        return int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
    return int(
        conn.execute(
            "SELECT count(*) FROM chunks c JOIN reports r ON r.report_id = c.report_id "
            "WHERE r.source_id = ?",
            (source_rowid(conn, source),),
        ).fetchone()[0]
    )


@lru_cache(maxsize=4096)
def _tags(stored: object) -> dict[str, Any]:
    """A report's tags, decoded once for all its chunks (``filters.report_tags``)."""
    return report_tags(stored)


@lru_cache(maxsize=4096)
def _tags_text(stored: object) -> str:
    """A report's tags as Parquet keeps them, JSON text: ``{}`` where they cannot be read."""
    return stored if isinstance(stored, str) and stored_tags(stored) is not None else "{}"


def row_record(row: Row) -> dict[str, Any]:
    """One exported row as JSON lines write it: the keys of ``COLUMNS``."""
    (
        chunk_id,
        report_id,
        source,
        report_key,
        report_title,
        report_date,
        tags,
        document_id,
        document_path,
        document_title,
        document_kind,
        document_language,
        document_status,
        position,
        start_ms,
        end_ms,
        stored_path,
        text,
        token_count,
        status,
    ) = row
    # A literal, not dict(zip(COLUMNS, row)): half the time, and this runs per chunk.
    return {
        "chunk_id": chunk_id,
        "report_id": report_id,
        "source": source,
        "report_key": report_key,
        "report_title": report_title,
        "report_date": report_date or None,  # no date is stored as ""
        "tags": _tags(tags),
        "document_id": document_id,
        "document_path": document_path,
        "document_title": document_title,
        "document_kind": document_kind,
        "document_language": document_language,
        "document_status": document_status,
        "position": position,
        "start_ms": start_ms,
        "end_ms": end_ms,
        "heading_path": heading_path(stored_path),
        "text": text,
        "token_count": token_count,
        "status": status,
    }


def write_jsonl(
    conn: sqlite3.Connection,
    out: BinaryIO,
    *,
    source: str | None = None,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
) -> int:
    """Write every chunk (of ``source``) to ``out`` as JSON lines; return how many."""
    written = 0
    for batch in chunk_batches(conn, source=source, batch_rows=batch_rows):
        out.write(
            b"".join(
                orjson.dumps(
                    row_record(row), default=json_default, option=orjson.OPT_APPEND_NEWLINE
                )
                for row in batch
            )
        )
        written += len(batch)
        if progress is not None:
            progress.advance(len(batch))
    return written


def require_pyarrow() -> None:
    """Refuse Parquet, saying what to install, where pyarrow is not installed."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise InvalidInput(
            "writing Parquet needs pyarrow, which is not installed: pip install pyarrow "
            "(or export JSON lines: --format jsonl)",
            field="format",
        ) from None


def write_parquet(
    conn: sqlite3.Connection,
    out: str | BinaryIO,
    *,
    source: str | None = None,
    row_group_rows: int = PARQUET_ROW_GROUP_ROWS,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
) -> int:
    """Write every chunk (of ``source``) to ``out`` as Parquet, a row group at a time.

    Each batch read becomes Arrow columns at once (far smaller than its rows as
    Python objects); a row group's worth of them is written together.
    """
    require_pyarrow()
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = parquet_schema()
    date, path = COLUMNS.index("report_date"), COLUMNS.index("heading_path")
    tags = COLUMNS.index("tags")
    written = 0
    group: list[Any] = []

    def write_group() -> None:
        table = pa.Table.from_batches(group, schema=schema)
        writer.write_table(table, row_group_size=table.num_rows)  # one row group
        group.clear()

    with pq.ParquetWriter(out, schema, compression="zstd") as writer:
        for batch in chunk_batches(conn, source=source, batch_rows=min(batch_rows, row_group_rows)):
            columns = [list(column) for column in zip(*batch, strict=True)]
            columns[date] = [value or None for value in columns[date]]
            columns[tags] = [_tags_text(value) for value in columns[tags]]
            columns[path] = [heading_path(value) for value in columns[path]]
            group.append(pa.RecordBatch.from_arrays(columns, schema=schema))
            if sum(part.num_rows for part in group) >= row_group_rows:
                write_group()
            written += len(batch)
            if progress is not None:
                progress.advance(len(batch))
        if group:
            write_group()
    return written


def parquet_schema() -> Any:
    """The Parquet columns: ``COLUMNS``, typed (``tags`` as JSON text)."""
    import pyarrow as pa

    types = {
        "report_id": pa.int64(),
        "position": pa.int64(),
        "start_ms": pa.int64(),
        "end_ms": pa.int64(),
        "token_count": pa.int64(),
        "heading_path": pa.list_(pa.string()),
    }
    return pa.schema([(name, types.get(name, pa.string())) for name in COLUMNS])


def export_store(
    store: Store,
    destination: Path | BinaryIO,
    *,
    output_format: str = "jsonl",
    source: str | None = None,
    progress: bool | None = None,
) -> ExportSummary:
    """Export every chunk (of ``source``) from one read transaction of ``store``.

    ``destination``: a file, written in full under another name and then
    put in place (it never holds half an export), or an open binary stream.
    ``progress``: a bar on stderr (None: when stderr is a terminal).
    """
    if output_format not in FORMATS:
        raise InvalidInput(
            f"no export format {output_format!r} (use jsonl or parquet)", field="format"
        )
    if output_format == "parquet":
        require_pyarrow()
    started = time.perf_counter()
    with store.reading() as conn:
        if source is not None:
            source_rowid(conn, source)  # an unknown source is refused before a file is made
        total = count_chunks(conn, source=source) if wanted(progress) else None
        with (
            progress_bar("export", total=total, enabled=progress) as bar,
            _opened(destination) as out,
        ):
            if output_format == "parquet":
                written = write_parquet(conn, out, source=source, progress=bar)
            else:
                written = write_jsonl(conn, out, source=source, progress=bar)
    where = str(destination) if isinstance(destination, Path) else "standard output"
    return ExportSummary(written, output_format, where, time.perf_counter() - started)


@contextmanager
def _opened(destination: Path | BinaryIO) -> Iterator[BinaryIO]:
    """A stream to write: ``destination`` itself, or a file put in its place once complete."""
    if not isinstance(destination, Path):
        yield destination
        destination.flush()
        return
    partial = destination.with_name(f".{destination.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)  # made new, never written through a link
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    descriptor = os.open(partial, flags, 0o666)
    try:
        with os.fdopen(descriptor, "wb") as out:
            yield out
        os.replace(partial, destination)
    finally:
        partial.unlink(missing_ok=True)
