"""``Library`` over ``Store``: the tools as methods, on a store that has none."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import FIXTURE_SOURCE, HashingEmbedder

import researchstore
from researchstore.library import Library
from researchstore.store import Store
from researchstore.tools import call_tool


def test_the_old_name_store_opens_a_library() -> None:
    assert researchstore.Store is researchstore.Library is Library


@pytest.mark.slow
def test_a_bare_store_has_no_tools_but_reads_what_a_library_wrote(tmp_path: Path) -> None:
    db = tmp_path / "research.db"
    with Library(db, progress=False) as library:
        library.ingest(FIXTURE_SOURCE, name="fixtures")
        hits = library.search("varroa", limit=3)
    assert hits
    with Store(db, progress=False) as store:
        assert not hasattr(store, "search")
        assert not hasattr(store, "ingest")
        with store.reading() as conn:
            assert conn.execute("SELECT count(*) FROM reports").fetchone()[0] > 0
        assert store.search_index().document_count() > 0
        envelope = call_tool(store, "research_chunk_search", {"query": "varroa", "limit": 3})
    assert envelope["result"]["mode"] == "keyword"
    assert [hit["chunk_id"] for hit in envelope["result"]["hits"]] == [
        hit["chunk_id"] for hit in hits
    ]


@pytest.mark.slow
def test_a_bare_store_searches_by_words_even_where_vectors_are(tmp_path: Path) -> None:
    """The model that embeds queries is the library's: a bare store loads none,
    and a search by meaning on it says to open a Library."""
    db = tmp_path / "research.db"
    with Library(db, progress=False, embedder=HashingEmbedder()) as library:
        library.ingest(FIXTURE_SOURCE, name="fixtures")
        assert library.embed().embedded > 0
        assert library.default_search_mode() == "hybrid"
        assert library.call("research_chunk_search", {"query": "varroa"})["result"]["mode"] == (
            "hybrid"
        )
    with Store(db, progress=False) as store:
        assert store.keeps_vectors()
        words = call_tool(store, "research_chunk_search", {"query": "varroa"})
        meaning = call_tool(store, "research_chunk_search", {"query": "varroa", "mode": "semantic"})
    assert words["result"]["mode"] == "keyword"
    assert meaning["error"]["code"] == "invalid_input"
    assert meaning["error"]["field"] == "mode"
    assert "researchstore.Library" in meaning["error"]["message"]


def test_the_ingest_file_tool_runs_on_a_bare_store(tmp_path: Path) -> None:
    note = tmp_path / "note.txt"
    note.write_text("Varroa mites were counted in every hive this spring.\n")
    with Store(tmp_path / "research.db", progress=False) as store:
        envelope = call_tool(store, "ingest_file", {"path": str(note)})
        assert "result" in envelope, envelope
        with store.reading() as conn:
            assert conn.execute("SELECT count(*) FROM reports").fetchone()[0] == 1
