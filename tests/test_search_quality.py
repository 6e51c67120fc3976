"""Relevance rules of search, each with a small corpus written here.

What bench/quality_search.py measured on SciFact, pinned down as behaviour:
a chunk is found by its report's title, stop words are neither indexed nor
counted, a quoted phrase still matches across a stop word, and a term the
query repeats weighs more.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import write_report

from researchstore import Store
from researchstore.indexes.index import INDEX_SCHEMA_VERSION
from researchstore.text.analysis import analyze, count_tokens


def _search(store: Store, query: str, limit: int = 10) -> list[dict[str, Any]]:
    answer = store.call("research_chunk_search", {"query": query, "limit": limit})
    assert "result" in answer, answer
    return answer["result"]["hits"]


def _store_with(tmp_path: Path, reports: dict[str, tuple[str, str]]) -> Store:
    """A store holding one report per ``key: (title, text)``."""
    source = tmp_path / "source"
    for key, (title, text) in reports.items():
        write_report(source, key, title=title, date="2026-01-01", tags={},
                     files={"notes.txt": text})  # fmt: skip
    store = Store(tmp_path / "store.db", progress=False)
    store.ingest(source, name="source", progress=False)
    return store


def _keys(store: Store, hits: list[dict[str, Any]]) -> list[str]:
    keys = {row[0]: row[1] for row in store._conn.execute("SELECT report_id, key FROM reports")}
    return [keys[hit["report_id"]] for hit in hits]


def test_stop_words_are_not_index_terms() -> None:
    assert analyze("The effect of a drug on the mice") == ["effect", "drug", "mice"]
    assert count_tokens("The effect of a drug on the mice") == 3
    assert INDEX_SCHEMA_VERSION >= 3  # the analyzer changed: older indexes rebuild


def test_token_counts_are_what_the_index_yields(tmp_path: Path) -> None:
    text = "The hive was inspected in the early morning. " * 80
    with _store_with(tmp_path, {"hive": ("Hive notes", text)}) as store:
        for chunk_text, token_count in store._conn.execute("SELECT text, token_count FROM chunks"):
            assert token_count == count_tokens(chunk_text) == len(analyze(chunk_text))


def test_a_query_of_stop_words_only_is_a_miss_not_an_error(tmp_path: Path) -> None:
    with _store_with(tmp_path, {"hive": ("Hive notes", "The hive is in the garden.")}) as store:
        assert _search(store, "the of and") == []
        assert _keys(store, _search(store, "the hive")) == ["hive"]


def test_a_chunk_is_found_by_its_report_title(tmp_path: Path) -> None:
    # The second chunk never names the subject; only the title does.
    body = "\n\n".join(
        f"Paragraph {number} about field sampling methods and weather logs." for number in range(80)
    )
    reports = {
        "varroa": ("Varroa mite counts", body),
        "other": ("Sampling notes", body.replace("Paragraph", "Section")),
    }
    with _store_with(tmp_path, reports) as store:
        chunk_count = store._conn.execute(
            "SELECT count(*) FROM chunks c JOIN reports r USING (report_id) WHERE r.key = 'varroa'"
        ).fetchone()[0]
        assert chunk_count > 1
        hits = _search(store, "varroa", limit=50)
        assert len(hits) == chunk_count
        assert set(_keys(store, hits)) == {"varroa"}
        # The title stays out of the stored text and the snippet.
        assert all("Varroa" not in hit["text"] for hit in hits)


def test_the_title_ranks_a_report_above_one_that_only_mentions_the_words(tmp_path: Path) -> None:
    reports = {
        "about": ("Oxalic acid treatment of colonies", "We treated twelve colonies in winter."),
        "mention": (
            "Apiary diary",
            "Oxalic acid was on the shopping list, next to sugar, frames, wax and a new smoker.",
        ),
    }
    with _store_with(tmp_path, reports) as store:
        assert _keys(store, _search(store, "oxalic acid treatment"))[0] == "about"


def test_a_quoted_phrase_matches_across_a_stop_word(tmp_path: Path) -> None:
    reports = {
        "phrase": ("Notes A", "We measured the effect of the drug on sleep."),
        "apart": ("Notes B", "The drug had one effect: on sleep, we measured nothing."),
    }
    with _store_with(tmp_path, reports) as store:
        assert _keys(store, _search(store, '"effect of the drug"'))[0] == "phrase"
        assert _keys(store, _search(store, '"drug had one effect"'))[0] == "apart"


@pytest.mark.parametrize(
    ("query", "first"), [("alpine alpine meadow", "alpine"), ("alpine meadow meadow", "meadow")]
)
def test_a_repeated_query_term_weighs_more(tmp_path: Path, query: str, first: str) -> None:
    reports = {
        "alpine": ("Notes A", "Alpine plots were surveyed in July."),
        "meadow": ("Notes B", "Meadow plots were surveyed in July."),
    }
    with _store_with(tmp_path, reports) as store:
        assert _keys(store, _search(store, query))[0] == first
