"""The search join: ranked hits from the word index, read back from SQLite.

Every hit returned exists in SQLite right now, read from one snapshot.
Loading a hit's chunk id from the index costs far more than ranking it, so
ids are loaded only for the hits needed: ``limit`` of them, plus those tied
in score with the last one (ordered by chunk_id), plus replacements for
dropped ones. A hit whose chunk a running re-ingest has just replaced (its
SQLite commit landed, its index commit not yet) is forwarded to the current
chunk holding the same text, so a modified report stays findable through the
whole run: in its new version, never a mix.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from researchstore.indexes.index import SearchIndex
from researchstore.storage import queries
from researchstore.storage.filters import SearchFilters
from researchstore.storage.forwarding import resolve_chunk

#: Hits ranked past ``limit`` in one go, so that hits tied in score with the
#: last one can be ordered by chunk_id without a second search.
TIE_MARGIN = 5
#: Pages of ranked hits looked at before giving up on filling ``limit``.
MAX_PAGES = 4

Reading = Callable[[], AbstractContextManager[sqlite3.Connection]]


def search(
    index: SearchIndex,
    reading: Reading,
    query: str,
    *,
    limit: int,
    filters: SearchFilters,
) -> list[dict[str, Any]]:
    """Best chunks for ``query`` under ``filters``, each with a highlighted snippet."""
    tantivy_query = index.build_query(query, filters)
    if tantivy_query is None:
        return []
    for attempt in range(2):
        searcher = index.searcher()
        with reading() as conn:  # one SQLite snapshot for every hit of this search
            hits, dropped = ranked_rows(index, conn, tantivy_query, limit, searcher, filters)
        if not dropped or attempt:
            break
        # Hits whose chunks SQLite no longer has: another process has
        # probably committed a newer index already; look at it.
        index.refresh()
    # Equal scores in a deterministic order (by chunk_id), whatever the
    # index's segment layout after a rebuild.
    hits.sort(key=lambda hit: (-hit["score"], hit["chunk_id"]))
    del hits[limit:]
    snippets = index.snippets(tantivy_query, [hit["text"] for hit in hits], searcher=searcher)
    for hit, snippet in zip(hits, snippets, strict=True):
        hit["snippet"] = snippet
    return hits


RowReader = Callable[[sqlite3.Connection, list[str]], dict[str, dict[str, Any]]]


def ranked_rows(
    index: SearchIndex,
    conn: sqlite3.Connection,
    tantivy_query: Any,
    limit: int,
    searcher: Any,
    filters: SearchFilters,
    read_rows: RowReader = queries.search_rows,
) -> tuple[list[dict[str, Any]], int]:
    """The best hits that exist in SQLite, with every hit tied with the last; and
    how many hits were dropped because SQLite no longer has their chunk.

    ``read_rows`` reads the hits' rows (in full by default).
    """
    evidence = filters.workspace is not None
    page = limit + TIE_MARGIN
    hits: list[dict[str, Any]] = []
    dropped = offset = 0
    last_score: float | None = None
    for _ in range(MAX_PAGES):
        found = index.top(tantivy_query, limit=page, offset=offset, searcher=searcher)
        position = 0
        while position < len(found):
            if len(hits) >= limit and last_score is not None and found[position][0] < last_score:
                return hits, dropped  # past the last tie
            end = min(len(found), position + max(1, limit - len(hits)))
            while end < len(found) and found[end][0] == found[end - 1][0]:
                end += 1  # keep a run of equal scores together
            batch = found[position:end]
            position = end
            ids = index.chunk_ids([address for _, address in batch], searcher=searcher)
            rows = read_rows(conn, ids)
            for (score, _), chunk_id in zip(batch, ids, strict=True):
                row = rows.get(chunk_id)
                if row is None:
                    dropped += 1
                    row = _forwarded_row(conn, chunk_id, filters, hits)
                    if row is None:
                        continue
                if row.pop("_evidence") != evidence:
                    continue  # evidence only in a workspace's search, and only there
                row["score"] = score
                hits.append(row)
            last_score = batch[-1][0]
        if len(found) < page:
            break
        offset += page
    return hits, dropped


def _forwarded_row(
    conn: sqlite3.Connection, chunk_id: str, filters: SearchFilters, hits: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The search row of the chunk that now holds a replaced chunk's text, if any."""
    resolution = resolve_chunk(conn, chunk_id)
    if resolution is None or resolution["status"] != "replaced":
        return None
    taken = {hit["chunk_id"] for hit in hits}
    for chunk in resolution["chunks"]:
        if chunk["chunk_id"] in taken:
            continue
        row = queries.search_rows(conn, [chunk["chunk_id"]]).get(chunk["chunk_id"])
        if row is not None and filters.matches(row):
            return row
    return None
