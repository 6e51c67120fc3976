"""``researchstore check``: does the store agree with itself and its indexes?"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from researchstore.index import SearchIndex

if TYPE_CHECKING:
    from researchstore.store import Store


def check_store(store: Store) -> dict[str, Any]:
    """SQLite's integrity check, and the exact sets of chunk ids of store and index."""
    with store.reading() as conn:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        ok_ids = {
            row["chunk_id"]
            for row in conn.execute("SELECT chunk_id FROM chunks WHERE status = 'ok'")
        }
        pending = conn.execute("SELECT count(*) FROM index_pending").fetchone()[0]
    index = store.sync.get(SearchIndex)
    index.refresh()
    indexed = index.all_chunk_ids()
    indexed_set = set(indexed)
    return {
        "integrity": integrity,
        "chunks_ok": len(ok_ids),
        "indexed": len(indexed),
        "missing_from_index": len(ok_ids - indexed_set),
        "unknown_to_store": len(indexed_set - ok_ids),
        "duplicates_in_index": len(indexed) - len(indexed_set),
        "pending": pending,
        "consistent": integrity == "ok" and ok_ids == indexed_set and len(indexed) == len(ok_ids),
    }
