"""The embedding stage: a vector for every chunk that has none, for the store's model.

It never blocks the store: chunks are read in batches, embedded with no lock
held, and their vectors written in a short transaction (with an
``index_pending`` row for the vector index) that passes over a chunk
replaced meanwhile. Every committed batch stays: an interrupted run resumes
where it stopped, and a run with nothing to do costs one query. A chunk whose
embedding fails (no text, a model error, an output that is not finite) is
``embed_failed`` with the reason, and the next run tries it again.

The reading (``read_batches``), the model's part of a batch (``embed_batch``)
and the writing (``write_outcomes``) are the same when the model runs on a
Ray cluster (``ray_embed``): only where ``embed_batch`` runs differs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from researchstore.progress import progress_bar
from researchstore.storage.dates import utc_now
from researchstore.storage.db import queue_pending
from researchstore.storage.vectors import (
    ChunkToEmbed,
    chunks_to_embed,
    claim_model,
    count_to_embed,
    quantize,
    record_failures,
    write_vectors,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from researchstore.meaning.embedding import Embedder
    from researchstore.storage.vectors import ModelIdentity
    from researchstore.store import Store

#: Chunks read and handed to the model at once: the model sorts them by
#: length, so a larger batch pads less (the model's own batch is ``batch_size``).
READ_BATCH = 512
#: The vector index is brought up to date at least this often during a run.
APPLY_SECONDS = 30.0


@dataclass
class EmbedSummary:
    """What an embedding run did."""

    model: str
    embedded: int = 0
    failed: int = 0
    #: Chunks replaced or removed while they were being embedded.
    passed_over: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    failures: list[dict[str, Any]] = field(default_factory=list)
    #: Of ``embedded``, the chunks written before the run this one follows
    #: (``older_than``): an ingest embeds what earlier runs left without a vector.
    older: int = 0
    #: No chunk was waiting for a vector, so no model was loaded.
    nothing_to_do: bool = False
    #: Why the model was chosen, when the store's languages chose it (one line).
    note: str | None = None
    #: On a Ray cluster: the chunks each node's actors embedded, by node id.
    nodes: dict[str, int] = field(default_factory=dict)

    @property
    def chunks_per_second(self) -> float:
        return self.embedded / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "embedded": self.embedded,
            "failed": self.failed,
            "passed_over": self.passed_over,
            "seconds": round(self.seconds, 3),
            "chunks_per_second": round(self.chunks_per_second, 2),
            "interrupted": self.interrupted,
            "older": self.older,
            "nothing_to_do": self.nothing_to_do,
            "note": self.note,
            "nodes": self.nodes,
            "failures": self.failures[:20],
        }


#: One batch's outcome: a vector (int8 bytes) for each chunk the model
#: embedded, and why each other chunk failed (``embed_batch``).
BatchOutcome = tuple[list[tuple[ChunkToEmbed, bytes]], list[tuple[ChunkToEmbed, str]]]


def embed_store(
    store: Store,
    embedder: Embedder,
    *,
    batch_size: int = 64,
    retry_failed: bool = True,
    progress: bool | None = None,
    older_than: int | None = None,
) -> EmbedSummary:
    """Embed every chunk of ``store`` that has no vector (and retry failed ones).

    ``older_than``: the last chunk rowid before a run that this one follows;
    the summary counts the chunks embedded from before it as ``older``.
    """
    started = time.perf_counter()
    claim_store_model(store, embedder)
    outcomes = (
        embed_batch(embedder, batch, batch_size=batch_size)
        for batch in read_batches(store, retry_failed=retry_failed)
    )
    return write_outcomes(
        store,
        outcomes,
        EmbedSummary(model=embedder.model_id),
        description=f"Embedding ({embedder.model_id})",
        started=started,
        retry_failed=retry_failed,
        progress=progress,
        older_than=older_than,
    )


def claim_store_model(store: Store, model: ModelIdentity) -> None:
    """Record ``model`` as the store's (refusing another) before its first vector is written."""
    with store.writing(), store.transaction() as conn:
        newly = claim_model(conn, model)
    if newly:
        store.reload_index_kinds()


def read_batches(store: Store, *, retry_failed: bool) -> Iterator[list[ChunkToEmbed]]:
    """The chunks that have no vector, ``READ_BATCH`` at a time by rowid, each batch in a
    short read of its own (a batch is read when the one before it has been handed on)."""
    after = 0
    while True:
        with store.reading() as conn:
            batch = chunks_to_embed(conn, after=after, limit=READ_BATCH, retry_failed=retry_failed)
        if not batch:
            return
        after = batch[-1].rowid
        yield batch


def write_outcomes(
    store: Store,
    outcomes: Iterable[BatchOutcome],
    summary: EmbedSummary,
    *,
    description: str,
    started: float,
    retry_failed: bool,
    progress: bool | None,
    older_than: int | None,
) -> EmbedSummary:
    """Write each batch's vectors and failures as it comes, in a short transaction of its own.

    The one write path of every embedding run (one process, or a Ray cluster):
    each committed batch stays, and the vector index is brought up to date
    every ``APPLY_SECONDS`` and at the end. ``started``: ``time.perf_counter()``
    when the run began.
    """
    with store.reading() as conn:
        total = count_to_embed(conn, retry_failed=retry_failed)
    last_apply = time.monotonic()
    try:
        with progress_bar(
            description,
            total=total,
            enabled=store.progress if progress is None else progress,
        ) as bar:
            for vectors, failures in outcomes:
                now = utc_now()
                with store.writing(), store.transaction() as conn:
                    reports, stored = write_vectors(conn, vectors)
                    failed = record_failures(conn, failures, now)
                    for report_id in sorted(reports):
                        queue_pending(conn, report_id, now, target="vectors")
                summary.embedded += stored
                if older_than is not None:
                    summary.older += sum(chunk.rowid <= older_than for chunk, _ in vectors)
                summary.failed += failed
                summary.passed_over += len(vectors) + len(failures) - stored - failed
                summary.failures.extend(
                    {"chunk_id": chunk.chunk_id, "reason": reason} for chunk, reason in failures
                )
                bar.advance(len(vectors) + len(failures))
                if time.monotonic() - last_apply >= APPLY_SECONDS:
                    store.sync_index()
                    last_apply = time.monotonic()
    except KeyboardInterrupt:
        summary.interrupted = True
        raise
    finally:
        summary.seconds = time.perf_counter() - started
        if not summary.interrupted:
            store.sync_index()
    return summary


def embed_batch(
    embedder: Embedder, batch: Sequence[ChunkToEmbed], *, batch_size: int
) -> BatchOutcome:
    """Vectors (int8 bytes) for the chunks the model embeds, and why each other failed.

    A model error on the whole batch is narrowed down chunk by chunk, so one
    bad chunk fails alone.
    """
    failures: list[tuple[ChunkToEmbed, str]] = []
    usable = []
    for chunk in batch:
        if not chunk.text.strip():
            failures.append((chunk, "empty text: nothing to embed"))
        else:
            usable.append(chunk)
    if not usable:
        return [], failures
    try:
        matrix = _embed(embedder, [chunk.embedded_text for chunk in usable], batch_size)
        embedded = [(chunk, matrix[index]) for index, chunk in enumerate(usable)]
    except KeyboardInterrupt:
        raise
    except Exception:
        embedded = []
        for chunk in usable:
            try:
                embedded.append((chunk, _embed(embedder, [chunk.embedded_text], batch_size)[0]))
            except KeyboardInterrupt:
                raise
            except Exception as error:
                failures.append((chunk, f"model error: {type(error).__name__}: {error}"))
    import numpy as np

    good: list[tuple[ChunkToEmbed, Any]] = []
    for chunk, vector in embedded:
        problem = _vector_problem(np.asarray(vector, dtype=np.float64), embedder.dimension)
        if problem:
            failures.append((chunk, problem))
        else:
            good.append((chunk, vector))
    if not good:
        return [], failures
    blobs = quantize(np.stack([vector for _, vector in good]).astype(np.float32))
    return [(chunk, blob) for (chunk, _), blob in zip(good, blobs, strict=True)], failures


def _embed(embedder: Embedder, texts: list[str], batch_size: int) -> npt.NDArray[np.float32]:
    matrix = embedder.embed(texts, batch_size=batch_size)
    shape = getattr(matrix, "shape", None)
    if shape is None or len(shape) != 2 or shape[0] != len(texts):
        raise ValueError(f"the model returned {shape} for {len(texts)} texts")
    return matrix


def _vector_problem(vector: npt.NDArray[np.float64], dimension: int) -> str | None:
    import numpy as np

    if vector.shape != (dimension,):
        return f"model output has shape {vector.shape}, not ({dimension},)"
    if not bool(np.isfinite(vector).all()):
        return "model output is not finite (NaN or infinity)"
    if not bool(vector.any()):
        return "model output is all zeros (no direction to compare)"
    return None
