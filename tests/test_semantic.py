"""Search by meaning: the embedding stage, vectors and their index, the three search modes.

Two tiers. The core tier embeds with ``HashingEmbedder`` (a hashed bag of
words, numpy alone): nothing here loads torch, and a child process proves
it. The ``semantic`` tier runs the real all-MiniLM-L6-v2 through the command
line, and is skipped where the extra is not installed.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import (
    FIXTURE_SOURCE,
    PARAGRAPHS,
    HashingEmbedder,
    long_text,
    ok,
    program,
    run_cli,
    validator,
    write_report,
)

from researchstore import Store
from researchstore.catalogue import TOOLS
from researchstore.contracts import output_schema
from researchstore.errors import InvalidInput
from researchstore.meaning.embedding import MINILM, model_installed
from researchstore.principal import Principal, acting_as
from researchstore.storage.derived import index_title
from researchstore.storage.vectors import quantize

MODES = ("keyword", "semantic", "hybrid")
WORKSPACE_A = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
WORKSPACE_B = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"


# -- stores and embedders ---------------------------------------------------------


class FailingEmbedder(HashingEmbedder):
    """The hashing model, failing on purpose for texts that carry a marker word.

    ``explode``: the model raises; ``nanvalue``: a NaN in the vector;
    ``zerovalue``: a vector of zeros.
    """

    def embed(self, texts: Any, *, batch_size: int = 64) -> Any:
        if any("explode" in text for text in texts):
            self.calls.append(len(texts))
            raise RuntimeError("the model cannot take this text")
        matrix = super().embed(texts, batch_size=batch_size)
        for row, text in enumerate(texts):
            if "nanvalue" in text:
                matrix[row, 0] = np.nan
            if "zerovalue" in text:
                matrix[row, :] = 0.0
        return matrix


class WideEmbedder(HashingEmbedder):
    """Says one dimension, returns vectors one wider (a broken model)."""

    def embed(self, texts: Any, *, batch_size: int = 64) -> Any:
        matrix = super().embed(texts, batch_size=batch_size)
        return np.hstack([matrix, np.ones((len(texts), 1), dtype=np.float32)])


class InterruptingEmbedder(HashingEmbedder):
    """Stopped with Ctrl-C on its call number ``stop_at`` (counting from 1)."""

    def __init__(self, stop_at: int) -> None:
        super().__init__()
        self.stop_at = stop_at

    def embed(self, texts: Any, *, batch_size: int = 64) -> Any:
        if len(self.calls) + 1 == self.stop_at:
            raise KeyboardInterrupt
        return super().embed(texts, batch_size=batch_size)


def meaning_source(root: Path) -> Path:
    """Four reports with words of their own (bees, rivers, soils, a lecture in captions)."""
    write_report(
        root,
        "field/bees",
        title="Bee colony survey",
        date="2026-03-14",
        tags={"audience": "students", "season": "spring"},
        files={"notes.txt": long_text(8)},
    )
    write_report(
        root,
        "field/river",
        title="River water quality",
        date="2025-09-02",
        tags={"audience": "public", "season": "autumn"},
        files={"summary.txt": long_text(6, seed=4)},
    )
    write_report(
        root,
        "field/soils",
        title="Living soils",
        date="2024-05-20",
        tags={"audience": "public", "season": "spring"},
        files={
            "soil.txt": "Earthworms turn the compost into crumbly humus beneath the orchard.\n\n"
            "Fungal threads bind the clay particles into stable aggregates.\n"
        },
    )
    write_report(
        root,
        "lectures/soil-lecture",
        title="Soil lecture",
        date="2025-11-03",
        tags={"audience": "students"},
        files={
            "talk.vtt": "WEBVTT\n\n00:00:01.000 --> 00:00:04.000\nEarthworms and fungal threads "
            "build the humus.\n\n00:00:05.000 --> 00:00:09.000\nCompost feeds them all winter.\n"
        },
    )
    return root


@pytest.fixture
def hashing() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture
def meaning_store(tmp_path: Path, hashing: HashingEmbedder) -> Store:
    """``meaning_source`` ingested and embedded with the hashing model."""
    store = Store(tmp_path / "meaning.db", progress=False, embedder=hashing)
    store.ingest(meaning_source(tmp_path / "source"), name="field")
    store.embed()
    yield store
    store.close()


def sql(store: Store, query: str, *args: Any) -> list[Any]:
    with store.reading() as conn:
        return [tuple(row) for row in conn.execute(query, args)]


MODEL_META = "SELECT key, value FROM meta WHERE key IN ('vector_model', 'vector_dim')"
QUEUE_VECTORS = "INSERT INTO index_pending (report_id, queued_at, target) VALUES (?, '', 'vectors')"
FORGET_VECTORS = (
    "DELETE FROM vectors WHERE chunk_rowid IN (SELECT id FROM chunks WHERE report_id = ?)"
)


def report_chunks(store: Store, report_id: int, column: str = "id") -> set[Any]:
    return {
        row[0] for row in sql(store, f"SELECT {column} FROM chunks WHERE report_id = ?", report_id)
    }


def vector_rows(store: Store) -> dict[int, bytes]:
    return dict(sql(store, "SELECT chunk_rowid, vector FROM vectors"))


def index_keys(store: Store) -> set[int]:
    return {int(key) for key in store.vector_index().all_chunk_ids()}


def searchable(store: Store) -> list[tuple[str, int]]:
    """(chunk_id, rowid) of every ``ok`` chunk."""
    return sql(store, "SELECT chunk_id, id FROM chunks WHERE status = 'ok' ORDER BY id")


def assert_vectors_follow(store: Store) -> None:
    """Every ok chunk has its vector, the index holds exactly those keys, check agrees."""
    held = vector_rows(store)
    assert set(held) == {rowid for _, rowid in searchable(store)}
    assert index_keys(store) == set(held)
    report = store.check()
    assert report["consistent"], report
    assert store.vector_index().verify() == []


def stored_vector(embedder: HashingEmbedder, text: str) -> bytes:
    return quantize(embedder.vector(text)[None, :])[0]


def embedded_texts(store: Store) -> dict[int, str]:
    """What the model was given for each chunk: the titles above it, then its text."""
    rows = sql(
        store,
        "SELECT c.id, c.text, r.title, d.title FROM chunks c "
        "JOIN documents d ON d.id = c.document_rowid JOIN reports r ON r.report_id = c.report_id",
    )
    return {
        rowid: f"{index_title(report, document)}\n\n{text}"
        for rowid, text, report, document in rows
    }


# -- embedding and the default mode ---------------------------------------------


def test_embedding_gives_every_ok_chunk_a_vector_and_makes_hybrid_the_default(
    tmp_path: Path, hashing: HashingEmbedder
) -> None:
    with Store(tmp_path / "r.db", progress=False, embedder=hashing) as store:
        store.ingest(meaning_source(tmp_path / "source"), name="field")
        assert store.default_search_mode() == "keyword"
        assert store.search("earthworms")[0]  # words work before any vector
        refused = store.call("research_chunk_search", {"query": "humus", "mode": "semantic"})
        assert refused["error"]["code"] == "invalid_input"
        assert refused["error"]["field"] == "mode"
        assert "researchstore embed" in refused["error"]["message"]

        summary = store.embed()
        chunks = searchable(store)
        assert summary.embedded == len(chunks) > 5
        assert summary.failed == summary.passed_over == 0
        assert sum(hashing.calls) == len(chunks)
        assert_vectors_follow(store)
        # Each stored vector is the model's own for the chunk's text.
        texts = embedded_texts(store)
        for rowid, blob in vector_rows(store).items():
            assert blob == stored_vector(hashing, texts[rowid])
        assert store.default_search_mode() == "hybrid"
        assert store.call("research_chunk_search", {"query": "humus"})["result"]["mode"] == (
            "hybrid"
        )
        assert store.embed().embedded == 0  # nothing left to do
        assert store.check()["repaired_on_open"] == []


def test_a_store_told_to_keep_no_vectors_answers_semantic_with_a_clear_error(
    tmp_path: Path, source_dir: Path
) -> None:
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(source_dir, name="field")
        for mode in ("semantic", "hybrid"):
            with pytest.raises(InvalidInput, match="researchstore embed") as raised:
                store.search("varroa", mode=mode)
            assert raised.value.field == "mode"
        assert store.search("varroa", mode="keyword")


# -- the three modes ---------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_finds_hits_scored_as_documented(meaning_store: Store, mode: str) -> None:
    envelope = meaning_store.call(
        "research_chunk_search", {"query": "earthworms compost humus", "mode": mode, "limit": 50}
    )
    validator(output_schema("research_chunk_search")).validate(envelope)
    result = ok(envelope)
    assert result["mode"] == mode
    hits = result["hits"]
    assert hits and all(hit["snippet"] for hit in hits)
    assert hits[0]["report_id"] in _report_ids(meaning_store, "Living soils", "Soil lecture")
    scores = [hit["score"] for hit in hits]
    assert scores == sorted(scores, reverse=True)
    if mode == "semantic":
        assert all(-1.0 <= score <= 1.0 for score in scores)
    if mode == "hybrid":
        assert all(0.0 <= score <= 1.0 for score in scores)
        assert scores[0] > 0.5


def test_semantic_search_finds_what_shares_no_word_with_a_keyword_hit(
    meaning_store: Store,
) -> None:
    # "humus" alone: words find two chunks; meaning finds every chunk, the soils first.
    keyword = meaning_store.search("humus", mode="keyword", limit=50)
    semantic = meaning_store.search("humus", mode="semantic", limit=50)
    assert len(semantic) == len(searchable(meaning_store)) > len(keyword)
    # A hit without the query's word has the start of its text as its snippet.
    far = semantic[-1]
    assert far["score"] < semantic[0]["score"]
    assert "humus" not in far["text"]
    assert far["snippet"] == far["text"][:200]


def test_the_mode_is_in_the_input_schema_and_checked() -> None:
    schema = TOOLS["research_chunk_search"].input_schema()
    assert schema["properties"]["mode"]["enum"] == list(MODES)
    assert "mode" not in schema["required"]
    output = output_schema("research_chunk_search")
    assert "mode" in json.dumps(output)


def test_an_unknown_mode_is_refused(meaning_store: Store) -> None:
    refused = meaning_store.call("research_chunk_search", {"query": "humus", "mode": "fuzzy"})
    assert refused["error"]["code"] == "invalid_input"
    assert refused["error"]["field"] == "mode"


@pytest.mark.parametrize("mode", ("semantic", "hybrid"))
def test_ties_are_ordered_by_chunk_id(tmp_path: Path, hashing: HashingEmbedder, mode: str) -> None:
    root = tmp_path / "source"
    root.mkdir()
    for number in range(6):
        write_report(
            root,
            f"copy-{number}",
            title="Hive notes",
            date="2026-05-01",
            tags={},
            files={"notes.txt": "Identical notes on hive weight and pollen.\n"},
        )
    with Store(tmp_path / "r.db", progress=False, embedder=hashing) as store:
        store.ingest(root, name="copies")
        store.embed()
        hits = store.search("hive weight pollen", mode=mode, limit=6)
        assert len(hits) == 6
        assert len({hit["score"] for hit in hits}) == 1
        assert [hit["chunk_id"] for hit in hits] == sorted(hit["chunk_id"] for hit in hits)
        # A limit inside the tie keeps the smallest ids.
        first = store.search("hive weight pollen", mode=mode, limit=2)
        assert [hit["chunk_id"] for hit in first] == [hit["chunk_id"] for hit in hits[:2]]


def _report_ids(store: Store, *titles: str) -> set[int]:
    marks = ",".join("?" * len(titles))
    return {
        row[0]
        for row in sql(store, f"SELECT report_id FROM reports WHERE title IN ({marks})", *titles)
    }


FILTERS: list[tuple[str, dict[str, Any], str]] = [
    ("tags", {"tags": {"audience": "students"}}, 'r.tags LIKE \'%"audience": "students"%\''),
    ("tags-two", {"tags": {"audience": "public", "season": "spring"}}, "r.title = 'Living soils'"),
    ("date_from", {"date_from": "2025-06-01"}, "r.date >= '2025-06-01'"),
    ("date_to", {"date_to": "2025-01-01"}, "r.date <= '2025-01-01'"),
    ("dates", {"date_from": "2025-01-01", "date_to": "2025-12-31"}, "r.date LIKE '2025-%'"),
    ("kind", {"kind": "vtt"}, "d.kind = 'vtt'"),
    ("source", {"source": "field"}, "1"),
    ("source-other", {"source": "elsewhere"}, "0"),
]


@pytest.mark.parametrize("mode", ("semantic", "hybrid"))
@pytest.mark.parametrize(
    ("arguments", "where"), [f[1:] for f in FILTERS], ids=[f[0] for f in FILTERS]
)
def test_every_filter_applies_by_meaning(
    meaning_store: Store, mode: str, arguments: dict[str, Any], where: str
) -> None:
    # Semantic search reaches every chunk with a vector: with room for all,
    # a filtered search returns exactly the chunks the filter lets through.
    expected = {
        row[0]
        for row in sql(
            meaning_store,
            "SELECT c.chunk_id FROM chunks c JOIN documents d ON d.id = c.document_rowid "
            f"JOIN reports r ON r.report_id = c.report_id WHERE c.status = 'ok' AND {where}",
        )
    }
    hits = meaning_store.search("earthworms varroa oxygen", mode=mode, limit=50, **arguments)
    if mode == "semantic":
        assert {hit["chunk_id"] for hit in hits} == expected
    else:
        assert {hit["chunk_id"] for hit in hits} <= expected
        assert hits or not expected


@pytest.mark.parametrize("mode", ("semantic", "hybrid"))
def test_the_report_filter_applies_by_meaning(meaning_store: Store, mode: str) -> None:
    (soils,) = _report_ids(meaning_store, "Living soils")
    hits = meaning_store.search("varroa mite brood", mode=mode, report_id=soils, limit=10)
    assert hits and {hit["report_id"] for hit in hits} == {soils}


@pytest.mark.parametrize("mode", ("semantic", "hybrid"))
def test_a_filter_leaving_a_few_far_chunks_widens_the_search(
    tmp_path: Path, hashing: HashingEmbedder, mode: str
) -> None:
    root = tmp_path / "source"
    write_report(
        root,
        "bees",
        title="Bees",
        date="2026-01-01",
        tags={},
        files={"notes.txt": "\n\n".join(f"Varroa mite count {n} in the hive." for n in range(300))},
    )
    write_report(
        root,
        "far",
        title="Far away",
        date="2020-01-01",
        tags={"place": "far"},
        files={"far.txt": "Glaciers calve icebergs.\n\nPenguins huddle in the blizzard."},
    )
    with Store(tmp_path / "r.db", progress=False, embedder=hashing, chunk_tokens=16) as store:
        store.ingest(root, name="field")
        store.embed()
        assert len(searchable(store)) > 100
        far = {
            row[0] for row in sql(store, "SELECT chunk_id FROM chunks WHERE text LIKE '%Glaciers%'")
        }
        assert len(far) == 1
        for filters in ({"tags": {"place": "far"}}, {"date_to": "2021-01-01"}):
            hits = store.search("varroa mite hive", mode=mode, limit=3, **filters)
            assert {hit["chunk_id"] for hit in hits} == far


def _evidence_store(store: Store) -> dict[str, int]:
    """Two of ``meaning_source``'s reports made evidence of workspaces A and B."""
    (bees,) = _report_ids(store, "Bee colony survey")
    (river,) = _report_ids(store, "River water quality")
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO sources (name, kind, root, created_at) VALUES ('ws', 'workspace', '', '')"
        )
        source = conn.execute("SELECT id FROM sources WHERE name = 'ws'").fetchone()[0]
        for report_id, workspace in ((bees, WORKSPACE_A), (river, WORKSPACE_B)):
            conn.execute(
                "UPDATE reports SET source_id = ? WHERE report_id = ?", (source, report_id)
            )
            conn.execute(
                "INSERT INTO evidence (evidence_id, workspace_id, url, kind, report_id, revision, "
                "content_hash) VALUES (?, ?, 'https://evidence.test/', 'html', ?, 1, '')",
                (f"evidence-{report_id}", workspace, report_id),
            )
    store.rebuild_index()
    return {WORKSPACE_A: bees, WORKSPACE_B: river}


@pytest.mark.parametrize("mode", MODES)
def test_evidence_is_found_only_in_its_own_workspaces_search(
    meaning_store: Store, mode: str
) -> None:
    owners = _evidence_store(meaning_store)
    query = "varroa oxygen earthworms"
    public = meaning_store.search(query, mode=mode, limit=50)
    assert public and not {hit["report_id"] for hit in public} & set(owners.values())
    for workspace, report_id in owners.items():
        principal = Principal(
            scopes=frozenset({"agent:research"}), workspaces=frozenset(owners), key_id="test"
        )
        with acting_as(principal):
            hits = meaning_store.search(query, mode=mode, limit=50, workspace_id=workspace)
        assert hits and {hit["report_id"] for hit in hits} == {report_id}, workspace


# -- embed_failed, for real --------------------------------------------------------

MARKED = {
    "explode": "model error: RuntimeError: the model cannot take this text",
    "nanvalue": "model output is not finite (NaN or infinity)",
    "zerovalue": "model output is all zeros (no direction to compare)",
}


def marked_source(root: Path) -> Path:
    """One document whose chunks 2, 4 and 6 carry a marker the failing model trips on."""
    paragraphs = []
    for position in range(8):
        marker = {2: "explode", 4: "nanvalue", 6: "zerovalue"}.get(position, "")
        words = " ".join(PARAGRAPHS[(position + k) % len(PARAGRAPHS)] for k in range(3))
        paragraphs.append(f"Section {position}. {marker} {words}")
    write_report(
        root,
        "marked",
        title="Marked notes",
        date="2026-02-02",
        tags={},
        files={"notes.txt": "\n\n".join(paragraphs)},
    )
    return root


@pytest.fixture
def failed_store(tmp_path: Path) -> Store:
    """``marked_source`` in chunks of a paragraph each, one chunk emptied, embedded by
    the failing model."""
    store = Store(tmp_path / "failed.db", progress=False, chunk_tokens=40)
    store.ingest(marked_source(tmp_path / "source"), name="marked")
    chunks = sql(store, "SELECT chunk_id, text FROM chunks ORDER BY position")
    assert len(chunks) == 8 and all(f"Section {n}." in text for n, (_, text) in enumerate(chunks))
    with store.transaction() as conn:
        conn.execute("UPDATE chunks SET text = ' \n ' WHERE position = 7")
    store.embed(embedder=FailingEmbedder())
    yield store
    store.close()


def _by_position(store: Store) -> list[Any]:
    return sql(
        store,
        "SELECT c.position, c.chunk_id, c.status, f.reason, v.chunk_rowid IS NOT NULL AS vector "
        "FROM chunks c LEFT JOIN embed_failures f ON f.chunk_rowid = c.id "
        "LEFT JOIN vectors v ON v.chunk_rowid = c.id ORDER BY c.position",
    )


def test_a_chunk_the_model_fails_on_is_embed_failed_with_its_reason(failed_store: Store) -> None:
    rows = _by_position(failed_store)
    reasons = {
        2: MARKED["explode"],
        4: MARKED["nanvalue"],
        6: MARKED["zerovalue"],
        7: "empty text: nothing to embed",
    }
    for position, _, status, reason, vector in rows:
        if position in reasons:
            assert (status, reason, vector) == ("embed_failed", reasons[position], 0)
        else:  # the others of the same batch got their vectors
            assert (status, reason, vector) == ("ok", None, 1)
    assert_vectors_follow(failed_store)


def test_navigation_skips_embed_failed_chunks_and_words_still_find_them(
    failed_store: Store,
) -> None:
    ids = [row[1] for row in _by_position(failed_store)]
    store = failed_store
    assert [c["position"] for c in store.get_chunk_next(ids[0], count=5)["chunks"]] == [1, 3, 5]
    assert [c["position"] for c in store.get_chunk_prev(ids[5], count=5)["chunks"]] == [0, 1, 3]
    around = store.get_chunk_neighbors(ids[3], count=1)
    assert [c["position"] for c in around["prev"] + around["next"]] == [1, 5]
    # A failed chunk is still read by id, and found by its words (only by words).
    assert store.get_chunk(ids[2])["status"] == "embed_failed"
    for marker, position in (("explode", 2), ("nanvalue", 4), ("zerovalue", 6)):
        assert [hit["chunk_id"] for hit in store.search(marker, mode="keyword")] == [ids[position]]
    embedder = HashingEmbedder()
    with Store(store.path, progress=False, embedder=embedder) as reopened:
        semantic = reopened.search("explode nanvalue zerovalue", mode="semantic", limit=50)
        assert {hit["chunk_id"] for hit in semantic} == {ids[n] for n in (0, 1, 3, 5)}
        hybrid = reopened.search("explode", mode="hybrid", limit=50)
        assert ids[2] in {hit["chunk_id"] for hit in hybrid}


def test_the_next_run_retries_failed_chunks_unless_told_not_to(failed_store: Store) -> None:
    store = failed_store
    again = store.embed(embedder=FailingEmbedder(), retry_failed=False)
    assert (again.embedded, again.failed) == (0, 0)
    retried = store.embed(embedder=FailingEmbedder())
    assert (retried.embedded, retried.failed) == (0, 4)
    assert sql(store, "SELECT DISTINCT attempts FROM embed_failures") == [(2,)]

    good = HashingEmbedder()
    assert store.embed(embedder=good, retry_failed=False).embedded == 0
    fixed = store.embed(embedder=good)
    assert (fixed.embedded, fixed.failed) == (3, 1)  # the empty chunk has nothing to embed
    rows = _by_position(store)
    assert [row[2] for row in rows] == ["ok"] * 7 + ["embed_failed"]
    assert all(row[4] for row in rows[:7])
    assert_vectors_follow(store)
    assert [c["position"] for c in store.get_chunk_next(rows[0][1], count=10)["chunks"]] == [
        1,
        2,
        3,
        4,
        5,
        6,
    ]


def test_a_model_that_returns_the_wrong_dimension_fails_every_chunk(
    tmp_path: Path, source_dir: Path
) -> None:
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(source_dir, name="field")
        summary = store.embed(embedder=WideEmbedder())
        total = len(sql(store, "SELECT 1 FROM chunks"))
        assert (summary.embedded, summary.failed) == (0, total)
        reasons = {row[0] for row in sql(store, "SELECT reason FROM embed_failures")}
        assert reasons == {"model output has shape (49,), not (48,)"}
        assert store.search("varroa", mode="keyword")  # words still find every chunk
        assert store.check()["consistent"]
        assert store.embed(embedder=HashingEmbedder()).embedded == total
        assert_vectors_follow(store)


# -- re-ingest, models --------------------------------------------------------------


def test_reingest_embeds_only_the_new_chunks_and_drops_the_replaced_vectors(
    tmp_path: Path,
) -> None:
    source = meaning_source(tmp_path / "source")
    embedder = HashingEmbedder()
    with Store(tmp_path / "r.db", progress=False, embedder=embedder) as store:
        store.ingest(source, name="field")
        store.embed()
        (bees,) = _report_ids(store, "Bee colony survey")
        before = vector_rows(store)
        old_bees = {row[0] for row in sql(store, "SELECT id FROM chunks WHERE report_id = ?", bees)}
        (source / "field" / "bees" / "notes.txt").write_text(long_text(5, seed=2))
        assert store.ingest(source, name="field").modified == 1
        new_bees = {row[0] for row in sql(store, "SELECT id FROM chunks WHERE report_id = ?", bees)}
        kept = set(before) - old_bees
        # The replaced chunks' vectors went with them, from SQLite and from the index.
        assert set(vector_rows(store)) == kept
        assert index_keys(store) == kept
        embedder.calls.clear()
        summary = store.embed()
        assert summary.embedded == sum(embedder.calls) == len(new_bees)
        after = vector_rows(store)
        assert {rowid: after[rowid] for rowid in kept} == {rowid: before[rowid] for rowid in kept}
        assert_vectors_follow(store)
        hits = store.search("varroa", mode="semantic", report_id=bees, limit=50)
        assert len(hits) == len(new_bees)


def test_the_model_is_recorded_and_another_is_refused_until_the_vectors_are_dropped(
    meaning_store: Store,
) -> None:
    store = meaning_store
    model = dict(sql(store, MODEL_META))
    assert model == {"vector_model": "hashing-words@1", "vector_dim": "48"}
    before = vector_rows(store)
    for other in (HashingEmbedder(model_id="other-words@1"), HashingEmbedder(dimension=32)):
        with pytest.raises(InvalidInput, match="vectors of two models are never mixed") as raised:
            store.embed(embedder=other)
        assert raised.value.field == "model"
        assert vector_rows(store) == before
        assert dict(sql(store, MODEL_META)) == model

    assert store.drop_vectors() == len(before)
    assert vector_rows(store) == {}
    assert store.default_search_mode() == "keyword"
    assert not store.path.with_name(store.path.name + ".vectors").exists()
    newer = HashingEmbedder(model_id="other-words@1", dimension=32)
    assert store.embed(embedder=newer).embedded == len(before)
    assert sql(store, "SELECT value FROM meta WHERE key = 'vector_dim'") == [("32",)]
    assert {len(blob) for blob in vector_rows(store).values()} == {32}
    assert_vectors_follow(store)
    with Store(store.path, progress=False, embedder=newer) as reopened:
        assert reopened.default_search_mode() == "hybrid"
        assert reopened.search("earthworms humus", mode="semantic")[0]["report_id"] in (
            _report_ids(reopened, "Living soils", "Soil lecture")
        )
        assert reopened.check()["repaired_on_open"] == []


# -- the vector index follows SQLite ------------------------------------------------


def _answers(store: Store) -> list[list[tuple[str, float]]]:
    return [
        [(hit["chunk_id"], round(hit["score"], 6)) for hit in store.search(query, mode=mode)]
        for query in ("earthworms humus", "varroa brood", "oxygen nitrate river")
        for mode in ("semantic", "hybrid")
    ]


def _vectors_folder(store: Store) -> Path:
    return store.path.with_name(store.path.name + ".vectors")


def test_a_deleted_vector_index_is_rebuilt_on_opening_with_the_same_answers(
    meaning_store: Store, hashing: HashingEmbedder
) -> None:
    answers = _answers(meaning_store)
    meaning_store.close()
    import shutil

    shutil.rmtree(_vectors_folder(meaning_store))
    with Store(meaning_store.path, progress=False, embedder=hashing) as store:
        assert store.sync.repairs == []  # written back from the store file's copy
        assert _answers(store) == answers
        assert_vectors_follow(store)


def test_a_vector_index_behind_the_store_is_rebuilt(
    meaning_store: Store, hashing: HashingEmbedder, tmp_path: Path
) -> None:
    import shutil

    folder = _vectors_folder(meaning_store)
    shutil.copytree(folder, tmp_path / "early")  # the index as it was
    (bees,) = _report_ids(meaning_store, "Bee colony survey")
    source = tmp_path / "source"
    (source / "field" / "bees" / "notes.txt").write_text(long_text(3, seed=1))
    meaning_store.ingest(source, name="field")
    meaning_store.embed()
    answers = _answers(meaning_store)
    meaning_store.close()
    shutil.rmtree(folder)
    shutil.copytree(tmp_path / "early", folder)  # a stale copy put back
    with Store(meaning_store.path, progress=False, embedder=hashing) as store:
        assert store.sync.repairs == ["vectors restored from the store file (behind the store)"]
        assert _answers(store) == answers
        assert_vectors_follow(store)
        assert len(store.search("varroa", mode="semantic", report_id=bees, limit=50)) == len(
            sql(store, "SELECT 1 FROM chunks WHERE report_id = ?", bees)
        )


def test_vectors_queued_but_not_applied_are_applied_on_the_next_open(
    meaning_store: Store, hashing: HashingEmbedder
) -> None:
    answers = _answers(meaning_store)
    keys = index_keys(meaning_store)
    # As a crash between the SQLite commit and the index commit leaves it:
    # vectors are stored and queued for the vector index, which never saw them.
    (soils,) = _report_ids(meaning_store, "Living soils")
    with meaning_store.transaction() as conn:
        rows = conn.execute(
            "SELECT v.chunk_rowid, v.vector FROM vectors v JOIN chunks c ON c.id = v.chunk_rowid "
            "WHERE c.report_id = ?",
            (soils,),
        ).fetchall()
    meaning_store.close()
    with Store(meaning_store.path, progress=False, embedder=hashing) as store:
        with store.transaction() as conn:
            conn.execute(FORGET_VECTORS, (soils,))
            conn.execute(QUEUE_VECTORS, (soils,))
        store.sync.catch_up()
        assert index_keys(store) == keys - {row[0] for row in rows}
        with store.transaction() as conn:
            conn.executemany("INSERT INTO vectors (chunk_rowid, vector) VALUES (?, ?)", rows)
            conn.execute(QUEUE_VECTORS, (soils,))
    with Store(meaning_store.path, progress=False, embedder=hashing) as store:
        assert sql(store, "SELECT count(*) FROM index_pending") == [(0,)]
        assert index_keys(store) == keys
        assert _answers(store) == answers
        assert_vectors_follow(store)


def test_a_process_keeping_only_the_word_index_leaves_the_vector_rows_queued(
    meaning_store: Store, hashing: HashingEmbedder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from researchstore import store as store_module
    from researchstore.indexes.index import SearchIndex

    keys = index_keys(meaning_store)
    (soils,) = _report_ids(meaning_store, "Living soils")
    with meaning_store.transaction() as conn:
        conn.execute(FORGET_VECTORS, (soils,))
        conn.execute(QUEUE_VECTORS, (soils,))
    meaning_store.close()
    with monkeypatch.context() as patched:
        patched.setattr(store_module, "derived_indexes", lambda store=None: (SearchIndex,))
        with Store(meaning_store.path, progress=False) as words_only:
            (tmp_path / "source" / "misc").mkdir()
            (tmp_path / "source" / "misc" / "memo.txt").write_text("Memo on the orchard humus.\n")
            assert words_only.ingest(tmp_path / "source", name="field").new == 1
            pending = sql(words_only, "SELECT report_id, target FROM index_pending")
            assert (soils, "vectors") in pending
    with Store(meaning_store.path, progress=False, embedder=hashing) as store:
        assert sql(store, "SELECT count(*) FROM index_pending") == [(0,)]
        soils_rows = {
            row[0] for row in sql(store, "SELECT id FROM chunks WHERE report_id = ?", soils)
        }
        assert index_keys(store) == keys - soils_rows
        assert store.embed().embedded == len(soils_rows) + 1
        assert_vectors_follow(store)


@pytest.mark.slow
def test_a_crash_before_the_vector_index_commit_is_replayed_on_opening(
    tmp_path: Path, hashing: HashingEmbedder
) -> None:
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(meaning_source(tmp_path / "source"), name="field")
        total = len(searchable(store))
    crashed = subprocess.run(
        [*program("crashing_embed"), str(tmp_path / "r.db")], capture_output=True, timeout=60
    )
    assert crashed.returncode == 9, crashed.stderr
    with sqlite3.connect(tmp_path / "r.db") as conn:
        assert conn.execute("SELECT count(*) FROM vectors").fetchone()[0] == total
        assert conn.execute("SELECT count(*) FROM index_pending").fetchone()[0] > 0
    with Store(tmp_path / "r.db", progress=False, embedder=hashing) as store:
        assert sql(store, "SELECT count(*) FROM index_pending") == [(0,)]
        assert len(index_keys(store)) == total
        assert store.embed().embedded == 0
        assert_vectors_follow(store)
        assert store.search("earthworms humus", mode="semantic")[0]["report_id"] in (
            _report_ids(store, "Living soils", "Soil lecture")
        )


# -- runs that stop, chunks that change -----------------------------------------------


def test_an_interrupted_run_keeps_its_batches_and_the_next_run_does_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from researchstore.meaning import embed as embed_module

    monkeypatch.setattr(embed_module, "READ_BATCH", 4)
    with Store(tmp_path / "r.db", progress=False, chunk_tokens=40) as store:
        store.ingest(meaning_source(tmp_path / "source"), name="field")
        total = len(searchable(store))
        assert total > 12
        stopping = InterruptingEmbedder(stop_at=3)
        with pytest.raises(KeyboardInterrupt):
            store.embed(embedder=stopping)
        assert len(vector_rows(store)) == 8  # two batches committed
    hashing = HashingEmbedder()
    with Store(tmp_path / "r.db", progress=False, embedder=hashing) as store:
        assert len(index_keys(store)) == 8  # replayed on opening
        summary = store.embed()
        assert summary.embedded == sum(hashing.calls) == total - 8
        assert_vectors_follow(store)


class ReplacingEmbedder(HashingEmbedder):
    """On its first call, rewrites a report on disk and re-ingests it through another Store."""

    def __init__(self, store_path: Path, source: Path, report_file: Path) -> None:
        super().__init__()
        self.store_path, self.source, self.report_file = store_path, source, report_file

    def embed(self, texts: Any, *, batch_size: int = 64) -> Any:
        if not self.calls:
            self.report_file.write_text(long_text(4, seed=5))
            with Store(self.store_path, progress=False) as other:
                assert other.ingest(self.source, name="field").modified == 1
        return super().embed(texts, batch_size=batch_size)


def test_a_chunk_replaced_while_it_was_embedded_gets_no_vector(tmp_path: Path) -> None:
    source = meaning_source(tmp_path / "source")
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(source, name="field")
        (river,) = _report_ids(store, "River water quality")
        old = {
            row[0] for row in sql(store, "SELECT chunk_id FROM chunks WHERE report_id = ?", river)
        }
        embedder = ReplacingEmbedder(store.path, source, source / "field" / "river" / "summary.txt")
        summary = store.embed(embedder=embedder)
        assert summary.passed_over == len(old) > 0
        assert not old & {row[0] for row in sql(store, "SELECT chunk_id FROM chunks")}
        # Every vector stored is its own chunk's, whatever rowids the new chunks took.
        texts = embedded_texts(store)
        for rowid, blob in vector_rows(store).items():
            assert blob == stored_vector(embedder, texts[rowid])
        store.embed(embedder=HashingEmbedder())
        assert_vectors_follow(store)


# -- child processes and the command line --------------------------------------------


@pytest.mark.slow
def test_the_core_tier_never_imports_torch_or_ray(tmp_path: Path) -> None:
    env = {**os.environ, "RESEARCHSTORE_EMBED": "auto"}
    done = subprocess.run(
        [*program("embed_without_torch"), str(tmp_path / "r.db"), str(FIXTURE_SOURCE)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["embedded"] > 0
    assert all(outcome["hits"].values()), outcome
    assert outcome["loaded"] == []


@pytest.mark.slow
def test_keyword_search_on_the_command_line_needs_no_model(tmp_path: Path) -> None:
    store = str(tmp_path / "r.db")
    assert run_cli("ingest", store, str(FIXTURE_SOURCE), "--no-embed").returncode == 0
    found = run_cli("search", store, "varroa mite", "--mode", "keyword", "--json")
    assert found.returncode == 0, found.stderr
    result = json.loads(found.stdout)["result"]
    assert result["mode"] == "keyword" and result["hits"]
    refused = run_cli("search", store, "varroa mite", "--mode", "semantic")
    assert refused.returncode != 0
    assert "researchstore embed" in refused.stderr


# -- the real model (the semantic extra) ------------------------------------------------

#: Shares no word with the fixtures (keyword search finds nothing), means their varroa.
PARAPHRASE = "parasitic pests plaguing honeybees"

needs_model = pytest.mark.skipif(
    not model_installed(MINILM),
    reason="the semantic extra (sentence-transformers) is not installed",
)


def offline_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``researchstore ARGS...`` embedding by default, with every proxy a closed port."""
    closed = "http://127.0.0.1:9"
    env = {key: value for key, value in os.environ.items() if not key.startswith("HF_")}
    env.update(RESEARCHSTORE_EMBED="auto", HTTP_PROXY=closed, HTTPS_PROXY=closed, ALL_PROXY=closed)
    env.pop("NO_PROXY", None)
    return subprocess.run(
        [*program("cli"), *args], capture_output=True, text=True, timeout=300, env=env
    )


@pytest.mark.slow
@pytest.mark.semantic
@needs_model
def test_the_real_model_embeds_on_ingest_and_finds_a_paraphrase(tmp_path: Path) -> None:
    store = str(tmp_path / "r.db")
    ingested = offline_cli("ingest", store, str(FIXTURE_SOURCE), "--json")
    assert ingested.returncode == 0, ingested.stderr
    embedded = json.loads(ingested.stdout.splitlines()[-1])["embed"]
    assert embedded["model"].startswith("all-MiniLM-L6-v2@")
    assert embedded["failed"] == 0
    with Store(store, progress=False, open_indexes=False) as opened:
        ok_chunks = len(searchable(opened))
        assert embedded["embedded"] == ok_chunks == len(vector_rows(opened))
        assert sql(opened, "SELECT value FROM meta WHERE key = 'vector_dim'") == [("384",)]
        (bees,) = _report_ids(opened, "Rooftop apiaries: spring colony survey 2026")

    by_words = run_cli("search", store, PARAPHRASE, "--mode", "keyword", "--json")
    assert json.loads(by_words.stdout)["result"]["hits"] == []
    for mode in ("semantic", "hybrid"):
        found = offline_cli("search", store, PARAPHRASE, "--mode", mode, "--json")
        assert found.returncode == 0, found.stderr
        result = json.loads(found.stdout)["result"]
        assert result["mode"] == mode
        assert result["hits"][0]["report_id"] == bees, result["hits"][0]["title"]

    again = offline_cli("embed", store, "--device", "cpu", "--json")
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)["embed"]
    assert (summary["embedded"], summary["failed"]) == (0, 0)


@pytest.mark.slow
@pytest.mark.semantic
@needs_model
def test_asking_for_cuda_without_a_gpu_is_a_clear_error(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    store = str(tmp_path / "r.db")
    assert run_cli("ingest", store, str(FIXTURE_SOURCE), "--no-embed").returncode == 0
    refused = offline_cli("embed", store, "--device", "cuda")
    assert refused.returncode not in (0, 1), refused.stderr
    assert "--device cuda" in refused.stderr and "no CUDA device" in refused.stderr
    with Store(store, progress=False, open_indexes=False) as opened:
        assert vector_rows(opened) == {}
