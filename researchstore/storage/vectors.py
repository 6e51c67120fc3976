"""Chunk vectors in SQLite: the truth the vector index follows.

One model per store: ``meta`` records its id, its dimension and the folder
it was loaded from. Each vector is stored as int8, scaled per vector so its
largest component is 127 (cosine, which search uses, does not see the
scale): ``dimension`` bytes a chunk. A chunk whose embedding failed is
``embed_failed`` with an ``embed_failures`` row saying why; the next embed
run tries it again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from researchstore.errors import InvalidInput, StoreDamaged
from researchstore.storage.chunk_rows import clear_embed_failures, mark_embed_failed, mark_embedded
from researchstore.storage.db import (
    delete_meta,
    read_meta,
    read_meta_number,
    store_file,
    write_meta,
)
from researchstore.storage.derived import index_title
from researchstore.storage.packing import forget as forget_packed

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np
    import numpy.typing as npt

MODEL_KEY = "vector_model"
DIMENSION_KEY = "vector_dim"
#: Where the model was loaded from when the vectors were made: a note for
#: people, never read to load a model (a store file may come from anyone).
FOLDER_KEY = "vector_model_folder"


@dataclass(frozen=True, slots=True)
class StoreModel:
    """The model a store's vectors come from."""

    model_id: str
    dimension: int
    folder: str | None


class ModelIdentity(Protocol):
    """What names the model vectors come from: an ``Embedder``, or what Ray's actors report."""

    @property
    def model_id(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def folder(self) -> Path | None: ...


class ModelMismatch(InvalidInput):
    """Vectors of one model were about to be mixed with another's."""


def store_model(conn: sqlite3.Connection) -> StoreModel | None:
    """The model recorded for the store's vectors, or None before the first.

    A dimension that is not a number researchstore writes is damage (it names
    the model, which no rebuild can find again): ``StoreDamaged``.
    """
    model_id = read_meta(conn, MODEL_KEY)
    if not model_id:
        return None
    dimension = read_meta_number(conn, DIMENSION_KEY)
    if dimension is None:
        shown = (read_meta(conn, DIMENSION_KEY) or "")[:40]
        path = store_file(conn)
        raise StoreDamaged(
            f"the store file {path} is damaged: the dimension of its vectors "
            f"(meta.{DIMENSION_KEY}) is {shown!r}, not a number researchstore writes; drop its "
            f"vectors and embed again (researchstore embed {path} --drop, then researchstore "
            "embed), or restore the file from a backup",
            details={"path": str(path)},
        )
    return StoreModel(
        model_id=model_id,
        dimension=dimension,
        folder=read_meta(conn, FOLDER_KEY) or None,
    )


def claim_model(conn: sqlite3.Connection, embedder: ModelIdentity) -> bool:
    """Record ``embedder`` as the store's model; refuse another. True if newly recorded."""
    current = store_model(conn)
    if current is not None:
        require_model(current, embedder)
        if embedder.folder is not None and current.folder != str(embedder.folder):
            write_meta(conn, FOLDER_KEY, str(embedder.folder))  # the same model, moved
        return False
    write_meta(conn, MODEL_KEY, embedder.model_id)
    write_meta(conn, DIMENSION_KEY, str(embedder.dimension))
    if embedder.folder is not None:
        write_meta(conn, FOLDER_KEY, str(embedder.folder))
    return True


def require_model(current: StoreModel, embedder: ModelIdentity) -> None:
    if current.model_id != embedder.model_id or current.dimension != embedder.dimension:
        raise ModelMismatch(
            f"this store's vectors come from {current.model_id} ({current.dimension} "
            f"dimensions), not {embedder.model_id} ({embedder.dimension}); vectors of two "
            "models are never mixed. Use that model (researchstore embed --model NAME or "
            "DIR; for any command RESEARCHSTORE_MODEL=NAME, all-MiniLM-L6-v2 or "
            "multilingual-e5-small, or RESEARCHSTORE_MODEL_FOLDER=DIR), or drop the "
            "store's vectors first (researchstore embed STORE --drop) and embed again with "
            "the new one",
            field="model",
        )


def drop_vectors(conn: sqlite3.Connection) -> int:
    """Forget every vector, failure and the model; return how many vectors went.

    The chunks whose embedding failed are ``ok`` again (their failure was the model's).
    """
    count = int(conn.execute("SELECT count(*) FROM vectors").fetchone()[0])
    clear_embed_failures(conn)
    conn.execute("DELETE FROM embed_failures")
    conn.execute("DELETE FROM vectors")
    delete_meta(conn, MODEL_KEY, DIMENSION_KEY, FOLDER_KEY, "vectors_applied_seq")
    forget_packed(conn, "vectors")
    return count


@dataclass(frozen=True, slots=True)
class ChunkToEmbed:
    rowid: int
    chunk_id: str
    report_id: int
    text: str
    #: The titles above the chunk (its report's and document's), embedded with
    #: it: a chunk is read in the context of what it is part of.
    context: str = ""

    @property
    def embedded_text(self) -> str:
        """What the model is given: the context, then the chunk's text."""
        return f"{self.context}\n\n{self.text}" if self.context else self.text


def chunks_to_embed(
    conn: sqlite3.Connection, *, after: int, limit: int, retry_failed: bool
) -> list[ChunkToEmbed]:
    """The next chunks (by rowid, past ``after``) that have no vector yet.

    ``ok`` chunks, and with ``retry_failed`` those whose embedding failed
    before; never a chunk the word index refused (its text is the problem).
    """
    failed = (
        " OR EXISTS (SELECT 1 FROM embed_failures f WHERE f.chunk_rowid = c.id)"
        if retry_failed
        else ""
    )
    rows = conn.execute(
        "SELECT c.id, c.chunk_id, c.report_id, c.text, r.title, d.title FROM chunks c "
        "JOIN documents d ON d.id = c.document_rowid JOIN reports r ON r.report_id = c.report_id "
        f"WHERE c.id > ? AND (c.status = 'ok'{failed}) "
        "AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.chunk_rowid = c.id) "
        "ORDER BY c.id LIMIT ?",
        (after, limit),
    ).fetchall()
    return [
        ChunkToEmbed(row[0], row[1], row[2], row[3], context=index_title(row[4], row[5]))
        for row in rows
    ]


def count_to_embed(conn: sqlite3.Connection, *, retry_failed: bool) -> int:
    failed = " + (SELECT count(*) FROM embed_failures)" if retry_failed else ""
    row = conn.execute(
        "SELECT (SELECT count(*) FROM chunks) - (SELECT count(*) FROM chunks WHERE status != 'ok')"
        f" - (SELECT count(*) FROM vectors){failed}"
    ).fetchone()
    return max(0, int(row[0]))


def quantize(vectors: npt.NDArray[np.float32]) -> list[bytes]:
    """Each row as int8 bytes, scaled so its largest component is ±127."""
    import numpy as np

    peak = np.abs(vectors).max(axis=1, keepdims=True)
    peak[peak == 0] = 1.0
    scaled = np.clip(np.rint(vectors / peak * 127.0), -127, 127).astype(np.int8)
    return [row.tobytes() for row in scaled]


def dequantize(blobs: Sequence[bytes], dimension: int) -> npt.NDArray[np.float32]:
    """Stored vectors back as float rows, each of unit length."""
    import numpy as np

    matrix = np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(blobs), dimension)
    floats = matrix.astype(np.float32)
    norms = np.linalg.norm(floats, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return floats / norms  # type: ignore[no-any-return]


def write_vectors(
    conn: sqlite3.Connection, rows: Iterable[tuple[ChunkToEmbed, bytes]]
) -> tuple[set[int], int]:
    """Store vectors of chunks that are still there; the reports written to, and how many.

    A chunk replaced or removed while it was embedded is passed over: the
    vector is stored only if the row still holds the same chunk.
    """
    reports: set[int] = set()
    stored = 0
    for chunk, blob in rows:
        written = conn.execute(
            "INSERT OR REPLACE INTO vectors (chunk_rowid, vector) "
            "SELECT id, ? FROM chunks WHERE id = ? AND chunk_id = ?",
            (blob, chunk.rowid, chunk.chunk_id),
        ).rowcount
        if written:
            stored += 1
            reports.add(chunk.report_id)
            conn.execute("DELETE FROM embed_failures WHERE chunk_rowid = ?", (chunk.rowid,))
            mark_embedded(conn, chunk.rowid)
    return reports, stored


def record_failures(
    conn: sqlite3.Connection, failures: Iterable[tuple[ChunkToEmbed, str]], now: str
) -> int:
    """Mark chunks whose embedding failed ``embed_failed``, with why; how many."""
    count = 0
    for chunk, reason in failures:
        if not mark_embed_failed(conn, chunk.rowid, chunk.chunk_id):
            continue
        conn.execute(
            "INSERT INTO embed_failures (chunk_rowid, reason, failed_at) VALUES (?, ?, ?) "
            "ON CONFLICT (chunk_rowid) DO UPDATE SET reason = excluded.reason, "
            "attempts = attempts + 1, failed_at = excluded.failed_at",
            (chunk.rowid, reason[:500], now),
        )
        count += 1
    return count


def vector_stats(conn: sqlite3.Connection) -> dict[str, int]:
    """How many chunks have a vector, and how many failed to get one."""
    vectors = int(conn.execute("SELECT count(*) FROM vectors").fetchone()[0])
    failed = int(conn.execute("SELECT count(*) FROM embed_failures").fetchone()[0])
    return {"vectors": vectors, "embed_failed": failed}


def has_vectors(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM vectors LIMIT 1").fetchone() is not None


def report_vectors(
    conn: sqlite3.Connection, report_id: int | None = None
) -> Iterable[tuple[int, int, bytes]]:
    """``(chunk rowid, report_id, vector)`` of one report's chunks (or all), by rowid."""
    where = " WHERE c.report_id = ?" if report_id is not None else ""
    return conn.execute(
        "SELECT v.chunk_rowid, c.report_id, v.vector FROM vectors v "
        f"JOIN chunks c ON c.id = v.chunk_rowid{where} ORDER BY v.chunk_rowid",
        () if report_id is None else (report_id,),
    )


def vectors_by_rowid(conn: sqlite3.Connection, rowids: Sequence[int]) -> dict[int, bytes]:
    if not rowids:
        return {}
    marks = ",".join("?" * len(rowids))
    return {
        rowid: blob
        for rowid, blob in conn.execute(
            f"SELECT chunk_rowid, vector FROM vectors WHERE chunk_rowid IN ({marks})",
            list(rowids),
        )
    }
