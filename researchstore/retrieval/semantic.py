"""Search by meaning, and by words and meaning together: the three search modes.

- ``keyword``: the word index alone (``search.search``); ``score`` is BM25.
- ``semantic``: the chunks nearest the query's vector; ``score`` is their
  cosine similarity (-1 to 1), computed exactly from the stored vectors
  for the candidates the vector index proposes.
- ``hybrid``: the best ``CANDIDATES`` of each list (so at most twice that
  many hits), fused: a candidate's words score is its BM25 divided by the
  best candidate's (0 when the word list did not find it), its meaning
  score its cosine scaled to 0..1 by the lowest and highest among all the
  candidates (a chunk the word list found is given its exact cosine too);
  ``score`` is ``KEYWORD_WEIGHT`` × words + (1 − ``KEYWORD_WEIGHT``) ×
  meaning (0 to 1).

Every filter applies in every mode: the vector index is asked for more
neighbours than wanted, they are read back from one SQLite snapshot and
checked against the filters, and the search widens until enough pass or the
index has none left. Snippets are made as in keyword search; a hit with no
word of the query shows the start of its text.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from researchstore.retrieval.search import TIE_MARGIN, Reading, ranked_rows
from researchstore.retrieval.search import search as keyword_search
from researchstore.storage import queries
from researchstore.storage.filters import SearchFilters

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from researchstore.indexes.index import SearchIndex
    from researchstore.indexes.vector_index import VectorIndex
    from researchstore.meaning.embedding import Embedder

#: Candidates taken from each list before fusing: what the tool's deepest page
#: (50 hits, and 5 for ties) needs. Deeper pools lower Recall@100 on SciFact
#: (0.957 with 55 from each list, 0.933 with 105: bench/quality_search.py).
CANDIDATES = 55
#: The words' share of a hybrid score.
KEYWORD_WEIGHT = 0.5
#: Candidates the vector index proposes, re-ranked by exact cosine (at least).
RESCORE = 200
#: Candidates per hit wanted, at least; widened ×8 while filters leave too few.
OVERSAMPLE = 4


def run_search(
    *,
    mode: str,
    query: str,
    limit: int,
    filters: SearchFilters,
    reading: Reading,
    words: SearchIndex,
    vectors: VectorIndex | None = None,
    embedder: Embedder | None = None,
    timings: dict[str, float] | None = None,
) -> list[dict[str, Any]]:
    """The best ``limit`` hits for ``query`` in ``mode``, each with a snippet."""
    if mode == "keyword":
        hits = keyword_search(words, reading, query, limit=limit, filters=filters)
        return [_public(hit) for hit in hits]
    assert vectors is not None and embedder is not None
    started = time.perf_counter()
    query_vector = embed_query(embedder, query)
    if timings is not None:
        timings["embed_ms"] = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    tantivy_query = words.build_query(query, filters)
    want = limit + TIE_MARGIN
    with reading() as conn:
        depth = CANDIDATES if mode == "hybrid" else want
        meaning = _nearest(vectors, conn, query_vector, depth, filters)
        if mode == "semantic":
            hits = meaning
            for hit in hits:
                hit["score"] = hit.pop("_cosine")
        else:
            lexical: list[dict[str, Any]] = []
            if tantivy_query is not None:
                lexical, _ = ranked_rows(
                    words,
                    conn,
                    tantivy_query,
                    depth,
                    words.searcher(),
                    filters,
                    lambda conn, ids: queries.candidate_rows_by_chunk_id(
                        conn, ids, with_tags=filters.tags is not None
                    ),
                )
            hits = _fuse(conn, lexical, meaning, query_vector, vectors.dimension)
        hits.sort(key=lambda hit: (-hit["score"], hit["chunk_id"]))
        del hits[limit:]
        hits = _complete(conn, hits)
    if tantivy_query is not None:
        snippets = words.snippets(tantivy_query, [hit["text"] for hit in hits])
    else:
        snippets = [_plain_snippet(hit["text"]) for hit in hits]
    for hit, snippet in zip(hits, snippets, strict=True):
        hit["snippet"] = snippet
    if timings is not None:
        timings["search_ms"] = (time.perf_counter() - started) * 1000
    return [_public(hit) for hit in hits]


def embed_query(embedder: Embedder, query: str) -> npt.NDArray[np.float32]:
    """The query's unit vector, in the model's query form (``embedding.embed_queries``)."""
    import numpy as np

    from researchstore.meaning.embedding import embed_queries

    vector = np.asarray(embed_queries(embedder, [query])[0], dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    if not np.isfinite(norm) or norm == 0.0:
        return np.zeros(len(vector), dtype=np.float32)
    return vector / norm


def _nearest(
    vectors: VectorIndex,
    conn: Any,
    query_vector: npt.NDArray[np.float32],
    want: int,
    filters: SearchFilters,
) -> list[dict[str, Any]]:
    """The ``want`` chunks nearest by exact cosine that pass ``filters``, with ``_cosine``.

    The vector index proposes candidates; their int8 vectors are read from
    SQLite and ranked by cosine; rows are read (and filtered) best first, a
    page at a time. When filters leave too few, more candidates are asked for.
    """
    evidence = filters.workspace is not None
    total = len(vectors)
    asked = min(total, max(RESCORE, want * OVERSAMPLE))
    hits: list[dict[str, Any]] = []
    while asked > 0:
        candidates = vectors.search(query_vector, asked)
        cosines = _cosines(conn, candidates, query_vector, vectors.dimension)
        order = sorted(cosines, key=lambda rowid: -cosines[rowid])
        hits = []
        page = max(want, 16)
        for start in range(0, len(order), page):
            wanted = order[start : start + page]
            rows = queries.candidate_rows(conn, wanted, with_tags=filters.tags is not None)
            for rowid in wanted:
                row = rows.get(rowid)
                if row is None or row["_evidence"] != evidence or not filters.matches(row):
                    continue
                row["_cosine"] = cosines[rowid]
                hits.append(row)
            if len(hits) >= want:
                break
        if len(hits) >= want or len(candidates) < asked or asked >= total:
            break
        asked = min(total, asked * 8)
    return hits[:want]


def _cosines(
    conn: Any, rowids: list[int], query_vector: npt.NDArray[np.float32], dimension: int
) -> dict[int, float]:
    """The exact cosine with the query of each chunk's stored vector (those that have one)."""
    from researchstore.storage.vectors import dequantize, vectors_by_rowid

    # A vector of another size or type (a file altered elsewhere) is left out, as the
    # vector index leaves it out.
    blobs = {
        rowid: blob
        for rowid, blob in vectors_by_rowid(conn, rowids).items()
        if isinstance(blob, bytes) and len(blob) == dimension
    }
    if not blobs or not dimension:
        return {}
    held = list(blobs)
    matrix = dequantize([blobs[rowid] for rowid in held], dimension)
    return dict(zip(held, (matrix @ query_vector).tolist(), strict=True))


def _attach_cosines(
    conn: Any, hits: list[dict[str, Any]], query_vector: npt.NDArray[np.float32], dimension: int
) -> None:
    """Each hit's exact cosine with the query (0.0 for a chunk without a vector)."""
    cosines = _cosines(conn, [hit["_rowid"] for hit in hits], query_vector, dimension)
    for hit in hits:
        hit["_cosine"] = cosines.get(hit["_rowid"], 0.0)


def _fuse(
    conn: Any,
    lexical: list[dict[str, Any]],
    meaning: list[dict[str, Any]],
    query_vector: npt.NDArray[np.float32],
    dimension: int,
) -> list[dict[str, Any]]:
    """One list from both (see the module's doc)."""
    by_id: dict[str, dict[str, Any]] = {hit["chunk_id"]: hit for hit in meaning}
    bm25 = {hit["chunk_id"]: hit["score"] for hit in lexical}
    only_words = [hit for hit in lexical if hit["chunk_id"] not in by_id]
    _attach_cosines(conn, only_words, query_vector, dimension)
    for hit in only_words:
        by_id[hit["chunk_id"]] = hit
    best_words = max(bm25.values(), default=0.0)
    scale_meaning = _scaler([hit["_cosine"] for hit in by_id.values()])
    fused = []
    for chunk_id, hit in by_id.items():
        word_score = bm25.get(chunk_id, 0.0) / best_words if best_words > 0 else 0.0
        meaning_score = scale_meaning(hit.pop("_cosine"))
        hit["score"] = KEYWORD_WEIGHT * word_score + (1.0 - KEYWORD_WEIGHT) * meaning_score
        fused.append(hit)
    return fused


def _scaler(scores: list[float]) -> Any:
    """Min-max scaling to 0..1 by these scores."""
    if not scores:
        return lambda value: 0.0
    low, high = min(scores), max(scores)
    if high <= low:
        return lambda value: 1.0
    span = high - low
    return lambda value: min(1.0, max(0.0, (value - low) / span))


def _plain_snippet(text: str, max_chars: int = 200) -> str:
    return text[:max_chars].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _complete(conn: Any, hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chosen hits in full (text, titles, position), their scores kept."""
    rows = queries.search_rows_by_rowid(conn, [hit["_rowid"] for hit in hits])
    complete = []
    for hit in hits:
        row = rows.get(hit["_rowid"])
        if row is not None:
            row["score"] = hit["score"]
            complete.append(row)
    return complete


def _public(hit: dict[str, Any]) -> dict[str, Any]:
    hit.pop("_rowid", None)
    hit.pop("_evidence", None)
    hit.pop("_workspace", None)
    hit.pop("_cosine", None)
    return hit
