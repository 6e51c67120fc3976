"""What a derived index is: the protocol every index beside the store follows.

A derived index (the Tantivy word index, the vector index) holds nothing
SQLite does not. Each reads what it is fed from SQLite itself (``read``:
the word index takes ``IndexedChunk``s, read here in one place; the vector
index takes vectors) and is kept up to date by ``sync.IndexSync``. Adding
one is a new module with a class that meets ``DerivedIndex``, plus its name
in the store's list of indexes.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self

from researchstore.errors import StoreDamaged
from researchstore.storage.filters import report_tags


@dataclass(frozen=True, slots=True)
class IndexedChunk:
    """What a derived index needs of one chunk (all of it comes from SQLite)."""

    chunk_id: str
    report_id: int
    document_id: str
    title: str
    text: str
    tags: dict[str, Any]
    date: str
    source: str
    kind: str
    #: The workspace of an evidence chunk; None for every other chunk.
    workspace: str | None = None
    #: Its document's language (declared or detected), which chooses the
    #: chunk's analysis; None when not known.
    language: str | None = None


class IndexDamaged(StoreDamaged):
    """A derived index's folder cannot be opened or read as it is: rebuild it.

    The index is rebuilt from SQLite when this is met on opening, and by the
    tool boundary when a call meets it; nothing in SQLite is lost.
    """


def is_panic(error: BaseException) -> bool:
    """A Rust panic raised through PyO3 (``pyo3_runtime.PanicException``, a ``BaseException``).

    An index in a Rust extension panics on some damaged files instead of
    raising: it is damage to report, not a reason to stop the process.
    """
    return type(error).__name__ == "PanicException"


class DerivedIndex(Protocol):
    """An index in a folder beside the store file, rebuilt from SQLite at will."""

    #: Names the index: its ``meta`` key (``<name>_applied_seq``) and messages.
    name: ClassVar[str]
    #: What messages call it ("the word index").
    label: ClassVar[str]
    #: The folder beside ``STORE.db``: ``STORE.db<suffix>``.
    suffix: ClassVar[str]
    #: Bump when what the index stores changes: older folders are rebuilt.
    schema_version: ClassVar[int]
    #: Whether the chunks of a report just written are fed to it (the word
    #: index); an index fed later (vectors, after embedding) only forgets a
    #: replaced report's rows on write, and follows ``index_pending`` rows
    #: queued for it by name.
    fed_on_write: ClassVar[bool]

    @classmethod
    def read(cls, conn: sqlite3.Connection, report_id: int | None = None) -> Iterator[Any]:
        """What the index holds of one report (or of the store), read from SQLite."""
        ...

    @classmethod
    def expected_count(cls, conn: sqlite3.Connection) -> int:
        """How many entries the index must hold, by SQLite (cheap: compared on every open)."""
        ...

    @classmethod
    def open(cls, path: Path) -> Self:
        """Open an existing folder; raise ``IndexDamaged`` if it cannot be used."""
        ...

    @classmethod
    def create(cls, path: Path) -> Self:
        """Create an empty index in a new folder, ready for a bulk load."""
        ...

    @classmethod
    def holds_data(cls, path: Path) -> bool:
        """Whether the folder at ``path`` holds documents (or what may be them)."""
        ...

    def add(self, rows: Sequence[Any]) -> None:
        """Add what ``read`` gave (uncommitted); raise if one of them is refused."""
        ...

    def delete_report(self, report_id: int) -> None: ...

    def commit(self) -> None:
        """Make every add and delete since the last commit durable and visible."""
        ...

    def close_writer(self) -> None:
        """Release what writing holds (after a commit)."""
        ...

    def refresh(self) -> None:
        """See commits made by other processes."""
        ...

    def all_chunk_ids(self) -> list[str]:
        """Every chunk id held, read back from what the index stores (for checks)."""
        ...

    def document_count(self) -> int:
        """How many chunks the index holds, cheaply (it is compared on every open)."""
        ...

    def verify(self) -> list[str]:
        """Read the index's files back in full; what is damaged, if anything (for checks)."""
        ...

    #: Files the index rewrites in place on commit (all others are immutable).
    rewritten_files: ClassVar[frozenset[str]]
    #: Every name ``committed_files`` may give (a whole name, ``fullmatch``):
    #: a copy of the index that names any other file is not written back.
    file_names: ClassVar[re.Pattern[str]]

    def committed_files(self) -> list[Path]:
        """The files that hold the index as of its last commit (what is packed)."""
        ...


def index_title(report_title: str, document_title: str | None) -> str:
    """The text indexed as a chunk's title: its report's and its document's."""
    if document_title and document_title != report_title:
        return f"{report_title}\n{document_title}"
    return report_title


#: The chunks search finds by words: ``ok`` ones, and those whose embedding
#: failed (seed 001: navigation skips them; search still finds them by words).
#: A chunk the word index itself refused is ``embed_failed`` with no
#: ``embed_failures`` row: it is in no index.
SEARCHABLE = (
    "(c.status = 'ok' OR EXISTS (SELECT 1 FROM embed_failures f WHERE f.chunk_rowid = c.id))"
)

#: A chunk's date (``d`` its document, ``r`` its report): the document's own
#: when it has one (``date_source`` says where it came from), else the
#: report's; ``NO_DATE`` ("") when neither has one.
CHUNK_DATE = "CASE WHEN d.date_source IS NOT NULL THEN d.date ELSE r.date END"


def count_searchable_chunks(conn: sqlite3.Connection) -> int:
    """How many chunks the word index must hold (``SEARCHABLE``).

    Counted as all chunks less the few that are not ``ok`` (a partial index
    holds those) plus those of them whose embedding failed, so it costs a
    walk of the smallest indexes, never of the table.
    """
    row = conn.execute(
        "SELECT (SELECT count(*) FROM chunks) - (SELECT count(*) FROM chunks WHERE status != 'ok')"
        " + (SELECT count(*) FROM chunks c JOIN embed_failures f ON f.chunk_rowid = c.id"
        " WHERE c.status != 'ok')"
    ).fetchone()
    return int(row[0])


def indexed_chunks(
    conn: sqlite3.Connection, report_id: int | None = None
) -> Iterator[IndexedChunk]:
    """Every searchable chunk (of one report, or of the store) as the word index takes it."""
    where = f"WHERE {SEARCHABLE}" + (" AND c.report_id = ?" if report_id is not None else "")
    cursor = conn.execute(
        "SELECT c.chunk_id, c.report_id, d.document_id, r.title AS report_title, "
        f"d.title AS document_title, c.text, r.tags, {CHUNK_DATE} AS date, s.name AS source, "
        "d.kind, "
        "e.workspace_id, d.language FROM chunks c "
        "JOIN documents d ON d.id = c.document_rowid "
        "JOIN reports r ON r.report_id = c.report_id JOIN sources s ON s.id = r.source_id "
        # Evidence is indexed under its workspace.
        "LEFT JOIN evidence e ON e.report_id = c.report_id "
        f"{where} ORDER BY c.id",
        () if report_id is None else (report_id,),
    )
    tags_cache: dict[str, dict[str, Any]] = {}
    for row in cursor:
        tags = tags_cache.get(row["tags"])
        if tags is None:
            tags = tags_cache[row["tags"]] = report_tags(row["tags"])
        yield IndexedChunk(
            chunk_id=row["chunk_id"],
            report_id=row["report_id"],
            document_id=row["document_id"],
            title=index_title(row["report_title"], row["document_title"]),
            text=row["text"],
            tags=tags,
            date=row["date"],
            source=row["source"],
            kind=row["kind"],
            workspace=row["workspace_id"],
            language=row["language"],
        )
