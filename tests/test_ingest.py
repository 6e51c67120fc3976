"""Ingest of the bundled fixtures (fixtures/README.md): every file's outcome.

The expectations here are the ones fixtures/README.md writes down: summary
counts, the status and reason of every malformed file, what text is kept and
what must never be stored, and how report.json is honoured.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import run_summaries

from researchstore import IngestSummary, Store
from researchstore.cli import main
from researchstore.ingest.inspect import describe_file
from researchstore.text.analysis import analyze

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SOURCE = FIXTURES / "source"
SOURCE2 = FIXTURES / "source2"
MALFORMED = "misc/malformed-inputs"
BEES = "field-studies/2026/rooftop-bees"
RIVER = "field-studies/2025/river-quality"
ELVEMUSLING = "field-studies/2025/elvemusling-liaelva"
SOILS = "lectures/2025-autumn/living-soils-session-1"
LICHEN = "news/2026/lichen-walk.html"
POND = "field-studies/2025/pond-dipping-notes.txt"
TRUNCATED = "archive/2024/truncated-upload.srt"


@dataclass
class Ingested:
    store: Store
    root: Path
    summary: IngestSummary
    summary2: IngestSummary


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ingested]:
    """fixtures/source as source ``fixtures`` and fixtures/source2 as ``source2``."""
    folder = tmp_path_factory.mktemp("ingest")
    root = folder / "source"
    shutil.copytree(SOURCE, root)
    shutil.copytree(SOURCE2, folder / "source2")
    with Store(folder / "fixtures.db", progress=False) as store:
        summary = store.ingest(root, name="fixtures")
        summary2 = store.ingest(folder / "source2", name="source2")
        yield Ingested(store, root, summary, summary2)


def ok(envelope: dict[str, Any]) -> Any:
    assert set(envelope) == {"result"}, envelope
    return envelope["result"]


def stored_documents(store: Store, source: str = "fixtures") -> dict[str, dict[str, Any]]:
    """``{path: get_document(...)}`` for every document of ``source``."""
    rows = store._conn.execute(
        "SELECT d.path, d.document_id FROM documents d JOIN reports r ON r.report_id = d.report_id "
        "JOIN sources s ON s.id = r.source_id WHERE s.name = ?",
        (source,),
    ).fetchall()
    return {
        path: ok(store.call("get_document", {"id": document_id}))["document"]
        for path, document_id in rows
    }


def chunk_texts(store: Store, document_id: str) -> list[str]:
    window = ok(store.call("get_document_chunks", {"id": document_id, "limit": 100}))
    return [chunk["text"] for chunk in window["chunks"]]


def report_id(store: Store, key: str) -> int:
    row = store._conn.execute("SELECT report_id FROM reports WHERE key = ?", (key,)).fetchone()
    assert row is not None, key
    return int(row[0])


def report_key(store: Store, rid: int) -> str:
    return store._conn.execute("SELECT key FROM reports WHERE report_id = ?", (rid,)).fetchone()[0]


def flat(text: str) -> str:
    return " ".join(text.split())


def search(store: Store, query: str, **args: Any) -> list[dict[str, Any]]:
    return ok(store.call("research_chunk_search", {"query": query, "limit": 50, **args}))["hits"]


# -- the summary and "no file silently dropped" -------------------------------


@pytest.mark.slow
def test_summary_counts(ingested: Ingested) -> None:
    summary = ingested.summary
    assert (summary.new, summary.modified, summary.unchanged, summary.removed, summary.failed) == (
        8,
        0,
        0,
        0,
        0,
    )
    assert summary.failures == []
    assert summary.documents == 22
    chunks = ingested.store._conn.execute(
        "SELECT count(*) FROM chunks c JOIN reports r ON r.report_id = c.report_id "
        "JOIN sources s ON s.id = r.source_id WHERE s.name = 'fixtures'"
    ).fetchone()[0]
    assert summary.chunks == chunks > 0
    assert (ingested.summary2.new, ingested.summary2.failed) == (2, 0)


def test_every_file_is_a_document_or_reported(ingested: Ingested) -> None:
    documents = stored_documents(ingested.store)
    skipped = {entry["path"]: entry for entry in ingested.summary.skipped}
    for path in sorted(ingested.root.rglob("*")):
        if path.is_dir():
            continue
        relative = path.relative_to(ingested.root).as_posix()
        if path.name == "report.json":
            report_id(ingested.store, path.parent.relative_to(ingested.root).as_posix())
            continue
        assert relative in documents or relative in skipped, f"{relative} silently dropped"
    # Every document stored with a status other than ok is reported too.
    for path, document in documents.items():
        if document["status"] != "ok":
            assert path in skipped, path
            assert skipped[path]["status"] == document["status"]
            assert skipped[path]["reason"] == document["reason"]


def test_skipped_entries_are_well_formed(ingested: Ingested) -> None:
    assert ingested.summary.skipped
    for entry in ingested.summary.skipped:
        assert set(entry) == {"path", "status", "reason", "details"}, entry
        assert entry["status"] in {"skipped", "partial", "empty", "invalid"}
        assert isinstance(entry["reason"], str) and entry["reason"]
        assert isinstance(entry["details"], list)
        assert all(isinstance(detail, str) for detail in entry["details"])
    assert json.loads(json.dumps(ingested.summary.to_dict()))["skipped"] == ingested.summary.skipped


def test_never_an_empty_chunk(ingested: Ingested) -> None:
    rows = ingested.store._conn.execute("SELECT text, token_count FROM chunks").fetchall()
    assert rows
    for text, token_count in rows:
        assert text.strip() and token_count > 0


def test_the_good_files_are_stored_ok(ingested: Ingested) -> None:
    documents = stored_documents(ingested.store)
    good = [
        f"{BEES}/index.html",
        f"{BEES}/beekeeper-interview.srt",
        f"{BEES}/field-notes.txt",
        f"{RIVER}/index.html",
        f"{RIVER}/sampling-log.txt",
        f"{ELVEMUSLING}/rapport.html",
        f"{SOILS}/lecture-01-okafor.vtt",
        f"{SOILS}/lecture-01-autocaptions.vtt",
        LICHEN,
        POND,
        f"{MALFORMED}/legacy-cp1252.srt",
        f"{MALFORMED}/legacy-latin1.vtt",
        f"{MALFORMED}/utf8-bom.vtt",
    ]
    for path in good:
        assert documents[path]["status"] == "ok", (path, documents[path]["reason"])
        assert documents[path]["chunks"], path
    assert {documents[path]["kind"] for path in good} == {"html", "vtt", "srt", "text"}


# -- the malformed inputs -------------------------------------------------------

#: file → the (status, reason) pairs fixtures/README.md accepts.
OUTCOMES: dict[str, set[tuple[str, str | None]]] = {
    f"{MALFORMED}/broken-timestamps.vtt": {("partial", "invalid_cues")},
    f"{MALFORMED}/not-captions.vtt": {("invalid", "invalid_captions")},
    f"{MALFORMED}/garbage.srt": {("invalid", "binary")},
    f"{MALFORMED}/garbage.html": {("invalid", "binary")},
    f"{MALFORMED}/legacy-cp1252.srt": {("ok", None)},
    f"{MALFORMED}/legacy-latin1.vtt": {("ok", None)},
    f"{MALFORMED}/utf8-bom.vtt": {("ok", None)},
    f"{MALFORMED}/empty.vtt": {
        ("empty", "no_text"),
        ("empty", "invalid_captions"),
        ("invalid", "invalid_captions"),
    },
    f"{MALFORMED}/empty.txt": {("empty", "no_text")},
    f"{MALFORMED}/deeply-nested.html": {("ok", None), ("partial", "nodes_limited")},
    f"{MALFORMED}/overlapping.srt": {("partial", "invalid_cues")},
    TRUNCATED: {("partial", "invalid_cues")},
}


@pytest.mark.parametrize("path", list(OUTCOMES), ids=lambda path: path.rsplit("/", 1)[-1])
def test_each_malformed_file_has_its_clear_outcome(ingested: Ingested, path: str) -> None:
    document = stored_documents(ingested.store)[path]
    outcome = (document["status"], document["reason"])
    assert outcome in OUTCOMES[path], outcome
    if document["status"] in ("invalid", "empty"):
        assert document["chunks"] == [] and document["total_chunks"] == 0
    if document["status"] == "partial":
        assert document["chunks"], "a partial file keeps what it could read"
        assert document["skipped"], "a partial file names what it skipped"
    entries = [entry for entry in ingested.summary.skipped if entry["path"] == path]
    if document["status"] == "ok":
        assert entries == []
    else:
        assert len(entries) == 1
        assert (entries[0]["status"], entries[0]["reason"]) == outcome


def test_the_malformed_report_is_stored_with_all_its_files(ingested: Ingested) -> None:
    rid = report_id(ingested.store, MALFORMED)
    report = ok(ingested.store.call("research_get_report", {"report_id": rid}))["report"]
    names = sorted(document["name"] for document in report["documents"])
    assert names == sorted(
        path.name for path in (SOURCE / MALFORMED).iterdir() if path.name != "report.json"
    )
    assert len(names) == 11


def parsed(path: str) -> dict[str, Any]:
    return describe_file(SOURCE / path)


def spans(description: dict[str, Any]) -> list[tuple[int, int]]:
    return [(s["start_ms"], s["end_ms"]) for s in description["segments"]]


def test_broken_timestamps_keep_the_good_cues() -> None:
    description = parsed(f"{MALFORMED}/broken-timestamps.vtt")
    assert (description["status"], description["reason"]) == ("partial", "invalid_cues")
    assert spans(description) == [
        (2000, 6500),
        (7000, 12000),
        (12800, 18200),
        (66000, 71500),
        (85000, 91000),
        (92000, 97500),
    ]
    assert len(description["skipped"]) == 2
    assert "reed warbler" in description["text"]
    assert "skippedcue" not in description["text"].lower()


def test_overlapping_cues_are_kept_in_start_order() -> None:
    description = parsed(f"{MALFORMED}/overlapping.srt")
    assert (description["status"], description["reason"]) == ("partial", "invalid_cues")
    assert [start for start, _ in spans(description)] == [1000, 5000, 10000, 11000, 25000]
    assert all(start <= end for start, end in spans(description))
    assert len(description["skipped"]) == 2
    assert "endbeforestart" not in description["text"].lower()


def test_a_truncated_srt_keeps_its_good_cues() -> None:
    description = parsed(TRUNCATED)
    assert (description["status"], description["reason"]) == ("partial", "invalid_cues")
    assert len(description["segments"]) == 8
    assert description["segments"][0]["start_ms"] == 1500
    assert description["segments"][-1]["end_ms"] == 38700
    assert len(description["skipped"]) == 1
    assert "hedgelaying" in description["text"].lower()


@pytest.mark.parametrize("name", ["not-captions.vtt", "garbage.srt", "garbage.html", "empty.txt"])
def test_unreadable_files_give_no_text(name: str) -> None:
    description = parsed(f"{MALFORMED}/{name}")
    assert description["status"] in ("invalid", "empty")
    assert description["chunks"] == [] and description["segments"] == []
    assert "notcaptionsprose" not in description["text"]


def normalised(encoding: str | None) -> str:
    assert encoding, "the encoding used is recorded"
    return codecs.lookup(encoding).name


@pytest.mark.parametrize(
    ("name", "segments", "encodings", "expected"),
    [
        (
            "legacy-cp1252.srt",
            7,
            {"cp1252"},
            [
                "Rémi Fauré",
                "Lüneburg",
                "\u201cHeather honey is a different animal,\u201d",
                "can\u2019t",
                "\u2014",
                "14 €",
                "\u2026",
                "Naïve",
                "crème fraîche",
                "heathland",
            ],
        ),
        (
            "legacy-latin1.vtt",
            6,
            {"cp1252", "iso8859-1"},
            [
                "Søren Ærø",
                "Højmose",
                "2 °C",
                "«like a sponge that never stops filling»",
                "Größe",
                "20 × 20 m",
                "Straße",
                "Jürgen",
                "Ça alors!",
                "peatland",
            ],
        ),
        ("utf8-bom.vtt", 3, {"utf-8", "utf-8-sig"}, ["dormouse \u2013 not a wood mouse"]),
    ],
)
def test_legacy_encodings_are_decoded(
    ingested: Ingested, name: str, segments: int, encodings: set[str], expected: list[str]
) -> None:
    description = parsed(f"{MALFORMED}/{name}")
    assert description["status"] == "ok"
    assert normalised(description["encoding"]) in encodings
    assert len(description["segments"]) == segments
    text = flat(description["text"])
    for fragment in expected:
        assert fragment in text, fragment
    assert "\ufffd" not in text and "\ufeff" not in text
    # ... and the store holds the same characters.
    document = stored_documents(ingested.store)[f"{MALFORMED}/{name}"]
    assert normalised(document["encoding"]) in encodings
    stored = flat(" ".join(chunk_texts(ingested.store, document["document_id"])))
    for fragment in expected:
        assert fragment in stored, fragment
    assert "\ufeff" not in stored


def test_a_deeply_nested_page_never_crashes(ingested: Ingested) -> None:
    description = parsed(f"{MALFORMED}/deeply-nested.html")
    assert (description["status"], description["reason"]) in {
        ("ok", None),
        ("partial", "nodes_limited"),
    }
    if description["status"] == "ok":
        assert len(description["chunks"]) == 1
        assert "bathyscaphe" in description["chunks"][0]["text"]
        assert search(ingested.store, "bathyscaphe")


# -- captions -------------------------------------------------------------------


def test_the_lecture_transcript() -> None:
    description = parsed(f"{SOILS}/lecture-01-okafor.vtt")
    assert description["status"] == "ok" and description["kind"] == "vtt"
    assert len(description["segments"]) == 50
    assert description["segments"][0]["start_ms"] == 3200
    assert description["segments"][-1]["end_ms"] == 266990
    starts = [segment["start_ms"] for segment in description["segments"]]
    assert starts == sorted(starts)
    text = description["text"]
    for markup in ("<v", "<i>", "<b>", "</", "&amp;", "sentinelnote", "WEBVTT", "-->"):
        assert markup not in text, markup
    assert "They hold air & water" in text
    assert "mycorrhizal" in text and "Glomeromycota" in text
    # About 256 index tokens a chunk (stop words are not counted).
    assert 2 <= len(description["chunks"]) <= 4
    previous_end = 0
    for chunk in description["chunks"]:
        assert chunk["start_ms"] is not None and chunk["end_ms"] is not None
        assert chunk["start_ms"] < chunk["end_ms"]
        assert chunk["start_ms"] >= previous_end - 1000
        previous_end = chunk["end_ms"]
    assert description["chunks"][0]["start_ms"] == 3200
    assert description["chunks"][-1]["end_ms"] == 266990


AUTOCAPTION_LINES = [
    "okay so while the microscope warms up",
    "let's look at what came out of the",
    "soil core from the meadow this morning",
    "this wriggling thing here is a",
    "nematode and this little barrel shape",
    "is a tardigrade a water bear",
    "tardigrades can survive drying out",
    "completely for years and then wake up",
    "again when you add a drop of water",
    "which is why you find them in moss",
    "on roofs and walls and gutters as well",
    "as in the meadow soil we sampled",
    "any questions before we move on to the",
    "springtail samples",
]


def test_rolling_auto_captions_are_deduplicated() -> None:
    description = parsed(f"{SOILS}/lecture-01-autocaptions.vtt")
    assert description["status"] == "ok"
    text = flat(description["text"])
    assert "<c>" not in text and "<00:" not in text
    where = []
    for line in AUTOCAPTION_LINES:
        assert text.count(line) == 1, (line, text.count(line))
        where.append(text.index(line))
    assert where == sorted(where)
    assert min(s["start_ms"] for s in description["segments"]) == 1040
    assert max(s["end_ms"] for s in description["segments"]) == 35790


def test_the_interview_srt() -> None:
    description = parsed(f"{BEES}/beekeeper-interview.srt")
    assert description["status"] == "ok" and description["kind"] == "srt"
    assert len(description["segments"]) == 35
    assert description["segments"][0]["start_ms"] == 2500
    assert description["segments"][-1]["end_ms"] == 209695
    assert "<i>" not in description["text"] and "</i>" not in description["text"]
    assert "artificial swarm" in description["text"]


def test_caption_chunks_in_the_store_keep_their_times(ingested: Ingested) -> None:
    hits = search(ingested.store, "glomalin")
    assert hits
    for hit in hits:
        assert hit["start_ms"] is not None and hit["end_ms"] is not None
        assert 3200 <= hit["start_ms"] < hit["end_ms"] <= 266990


# -- HTML -------------------------------------------------------------------------


def test_the_bees_page() -> None:
    description = parsed(f"{BEES}/index.html")
    assert description["status"] == "ok" and description["kind"] == "html"
    assert "rooftop apiaries" in (description["title"] or "").lower()
    assert description["description"] == (
        "How sixteen rooftop honey bee colonies came through the winter, with sugar roll counts "
        "of varroa mite loads & recommendations for the summer."
    )
    assert description["language"] == "en"
    assert description["date"] == "2026-03-14"
    assert re.search(r"100[\u00a0 ]g", description["text"])
    assert 3 <= len(description["chunks"]) <= 12  # README: "about 6"; headings split chunks
    oxalic = [c for c in description["chunks"] if "oxalic acid" in c["text"]]
    assert oxalic
    assert any(
        "Varroa mite loads" in chunk["heading_path"]
        or "Varroa mite loads" in chunk["text"].split("oxalic acid")[0]
        for chunk in oxalic
    )


def test_the_river_page() -> None:
    description = parsed(f"{RIVER}/index.html")
    assert description["status"] == "ok" and description["language"] == "en"
    assert description["date"] == "2025-07-22"
    text = description["text"]
    for fragment in ("Thornbury & Millbrook Rivers Trust", "Temperature (°C)", ">100"):
        assert fragment in text, fragment
    for entity in ("&amp;", "&nbsp;", "&deg;", "&gt;", "&mdash;"):
        assert entity not in text
    reading = [c for c in description["chunks"] if "4.1 mg" in c["text"]]
    assert reading
    assert any(
        "Dissolved oxygen: a dawn sag below Weir Bridge" in chunk["heading_path"]
        or "Dissolved oxygen: a dawn sag below Weir Bridge" in chunk["text"].split("4.1 mg")[0]
        for chunk in reading
    )


def test_the_norwegian_page() -> None:
    description = parsed(f"{ELVEMUSLING}/rapport.html")
    assert description["status"] == "ok"
    assert description["language"] == "nb"
    assert description["date"] == "2025-10-03"
    assert re.search(r"1[\u00a0 ]284", description["text"])
    assert "ørretyngel" in description["text"]


def test_the_lichen_page_without_article() -> None:
    description = parsed(LICHEN)
    assert description["status"] == "ok" and description["language"] == "en"
    assert description["date"] == "2026-04-18"
    assert "Xanthoria" in description["text"]


# -- what must never be stored, what must be found ------------------------------

SENTINELS = [
    "sentinelnav",
    "sentinelscript",
    "sentinelstyle",
    "sentinelcookie",
    "sentinelheader",
    "sentinelaside",
    "sentinelshare",
    "sentinelform",
    "sentinelfooter",
    "sentinelnote",
    "skippedcuealpha",
    "skippedcuebeta",
    "endbeforestartone",
    "endbeforestarttwo",
    "notcaptionsprose",
]


@pytest.mark.parametrize("word", SENTINELS)
def test_boilerplate_and_skipped_words_are_never_stored(ingested: Ingested, word: str) -> None:
    assert search(ingested.store, word) == []
    stored = ingested.store._conn.execute(
        "SELECT count(*) FROM chunks WHERE lower(text) LIKE ?", (f"%{word}%",)
    ).fetchone()[0]
    assert stored == 0
    metadata = ingested.store._conn.execute(
        "SELECT count(*) FROM documents WHERE lower(coalesce(title, '') || ' ' || "
        "coalesce(description, '')) LIKE ?",
        (f"%{word}%",),
    ).fetchone()[0]
    assert metadata == 0


#: (term, report key, document names holding it; None: the report's only document).
TERMS: list[tuple[str, str, set[str] | None]] = [
    ("varroa mite", BEES, {"index.html"}),
    ("oxalic acid", BEES, {"index.html"}),
    ("propolis", BEES, {"index.html"}),
    ("mahonia", BEES, {"index.html"}),
    ("bait hive", BEES, {"beekeeper-interview.srt"}),
    ("artificial swarm", BEES, {"beekeeper-interview.srt"}),
    ("Castellane", BEES, {"beekeeper-interview.srt"}),
    ("queen cells", BEES, {"beekeeper-interview.srt"}),
    ("lamppost", BEES, {"beekeeper-interview.srt"}),
    ("chalkbrood", BEES, {"field-notes.txt"}),
    ("LIB-2", BEES, {"field-notes.txt"}),
    ("sugar roll", BEES, {"index.html", "beekeeper-interview.srt", "field-notes.txt"}),
    ("Calder Street", BEES, {"index.html", "beekeeper-interview.srt", "field-notes.txt"}),
    ("hive scale", BEES, {"index.html", "field-notes.txt"}),
    ("dissolved oxygen", RIVER, {"index.html"}),
    ("nitrate runoff", RIVER, {"index.html"}),
    ("Secchi", RIVER, {"index.html"}),
    ("mayfly", RIVER, {"index.html"}),
    ("caddisfly", RIVER, {"index.html"}),
    ("phosphate", RIVER, {"index.html"}),
    ("grey wagtail", RIVER, {"sampling-log.txt"}),
    ("calibration drift", RIVER, {"sampling-log.txt"}),
    ("spraint", RIVER, {"sampling-log.txt"}),
    ("Weir Bridge", RIVER, {"index.html", "sampling-log.txt"}),
    ("elvemusling", ELVEMUSLING, None),
    ("tilslamming", ELVEMUSLING, None),
    ("gytegrus", ELVEMUSLING, None),
    ("ørretyngel", ELVEMUSLING, None),
    ("glochidier", ELVEMUSLING, None),
    ("kverndammen", ELVEMUSLING, None),
    ("mycorrhizal", SOILS, {"lecture-01-okafor.vtt"}),
    ("glomalin", SOILS, {"lecture-01-okafor.vtt"}),
    ("arbuscules", SOILS, {"lecture-01-okafor.vtt"}),
    ("rhizosphere", SOILS, {"lecture-01-okafor.vtt"}),
    ("Okafor", SOILS, {"lecture-01-okafor.vtt"}),
    ("wood wide web", SOILS, {"lecture-01-okafor.vtt"}),
    ("tardigrade", SOILS, {"lecture-01-autocaptions.vtt"}),
    ("water bear", SOILS, {"lecture-01-autocaptions.vtt"}),
    ("springtail", SOILS, {"lecture-01-okafor.vtt", "lecture-01-autocaptions.vtt"}),
    ("lichen", LICHEN, None),
    ("Xanthoria", LICHEN, None),
    ("Usnea", LICHEN, None),
    ("pixie cup", LICHEN, None),
    ("St Bride's", LICHEN, None),
    ("great diving beetle", POND, None),
    ("smooth newt", POND, None),
    ("backswimmer", POND, None),
    ("hedgelaying", TRUNCATED, None),
    ("pleacher", TRUNCATED, None),
    ("reed warbler", MALFORMED, {"broken-timestamps.vtt"}),
    ("heathland", MALFORMED, {"legacy-cp1252.srt"}),
    ("peatland", MALFORMED, {"legacy-latin1.vtt"}),
    ("dormouse", MALFORMED, {"utf8-bom.vtt"}),
    ("moth trap", MALFORMED, {"overlapping.srt"}),
]


def document_name(store: Store, document_id: str) -> str:
    return store._conn.execute(
        "SELECT name FROM documents WHERE document_id = ?", (document_id,)
    ).fetchone()[0]


@pytest.mark.parametrize(("term", "key", "names"), TERMS, ids=[term for term, _, _ in TERMS])
def test_distinctive_terms_are_found_in_the_right_place(
    ingested: Ingested, term: str, key: str, names: set[str] | None
) -> None:
    store = ingested.store
    query = f'"{term}"' if " " in term or "-" in term or "'" in term else term
    hits = search(store, query, source="fixtures")
    assert hits, term
    top = hits[0]
    assert report_key(store, top["report_id"]) == key
    if names is not None:
        assert document_name(store, top["document_id"]) in names
    assert term.lower() in flat(top["text"]).lower()
    if len(analyze(term)) == 1:
        # A one-token term: every hit is in the right report.
        assert {report_key(store, hit["report_id"]) for hit in hits} == {key}
    # The kept text has the term exactly in the documents listed, nowhere else.
    holding = {
        (report_key(store, rid), name)
        for rid, name, text in store._conn.execute(
            "SELECT c.report_id, d.name, c.text FROM chunks c "
            "JOIN documents d ON d.id = c.document_rowid"
        )
        if term.lower() in flat(text).lower()
    }
    if names is None:  # the report's only document
        (only,) = store._conn.execute(
            "SELECT d.name FROM documents d JOIN reports r ON r.report_id = d.report_id "
            "WHERE r.key = ?",
            (key,),
        ).fetchall()
        names = {only[0]}
    expected = {(key, name) for name in names}
    assert holding == expected


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("nitrogen", {(SOILS, "lecture-01-okafor.vtt"), (LICHEN, "lichen-walk.html")}),
        (
            "phacelia",
            {
                ("community/allotment-compost-trial", "trial-notes.txt"),
                ("community/seed-library.htm", "seed-library.htm"),
            },
        ),
        (
            "Greenacre",
            {
                ("community/allotment-compost-trial", "trial-notes.txt"),
                ("community/seed-library.htm", "seed-library.htm"),
            },
        ),
        ("vermicompost", {("community/allotment-compost-trial", "trial-notes.txt")}),
        ("heirloom", {("community/seed-library.htm", "seed-library.htm")}),
    ],
)
def test_terms_shared_on_purpose(
    ingested: Ingested, term: str, expected: set[tuple[str, str]]
) -> None:
    store = ingested.store
    found = {
        (report_key(store, hit["report_id"]), document_name(store, hit["document_id"]))
        for hit in search(store, term)
    }
    assert found == expected


def test_the_second_source(ingested: Ingested) -> None:
    store = ingested.store
    trial = ok(
        store.call(
            "research_get_report",
            {"report_id": report_id(store, "community/allotment-compost-trial")},
        )
    )["report"]
    assert (trial["title"], trial["date"], trial["tags"], trial["source"]) == (
        "Allotment composting trial: three methods side by side",
        "2024-09-18",
        {"audience": "public", "season": "autumn"},
        "source2",
    )
    seeds = ok(
        store.call(
            "research_get_report", {"report_id": report_id(store, "community/seed-library.htm")}
        )
    )["report"]
    assert seeds["date"] == "2024-03-02" and seeds["tags"] == {}
    assert "seed library" in seeds["title"].lower()
    assert [d["kind"] for d in seeds["documents"]] == ["html"]
    assert seeds["documents"][0]["status"] == "ok"
    assert ingested.summary2.skipped == []


def test_a_shared_term_filtered_by_source(ingested: Ingested) -> None:
    store = ingested.store
    # "library" is in the bees survey's text and the seed library's (the
    # byline naming the pollinator group is chrome above the article).
    fixtures = {
        report_key(store, hit["report_id"]) for hit in search(store, "library", source="fixtures")
    }
    source2 = {
        report_key(store, hit["report_id"]) for hit in search(store, "library", source="source2")
    }
    assert fixtures == {BEES}
    assert source2 == {"community/seed-library.htm"}
    pollinators = {
        report_key(store, hit["report_id"]) for hit in search(store, "pollinator", source="source2")
    }
    assert pollinators == {"community/allotment-compost-trial", "community/seed-library.htm"}
    assert search(store, "phacelia", source="fixtures") == []
    assert len({hit["report_id"] for hit in search(store, "phacelia")}) == 2


@pytest.mark.parametrize(
    ("tags", "source", "expected"),
    [
        ({"audience": "students"}, "fixtures", {BEES, SOILS}),
        ({"season": "autumn"}, "fixtures", {ELVEMUSLING, SOILS}),
        ({"season": "autumn"}, None, {ELVEMUSLING, SOILS, "community/allotment-compost-trial"}),
        ({"audience": "internal"}, None, {MALFORMED}),
        ({"season": "winter"}, None, {MALFORMED}),
        ({"audience": "public", "season": "summer"}, None, {RIVER}),
    ],
)
def test_tag_filters_select_the_documented_reports(
    ingested: Ingested, tags: dict[str, str], source: str | None, expected: set[str]
) -> None:
    store = ingested.store
    arguments: dict[str, Any] = {"tags": tags}
    if source:
        arguments["source"] = source
    found = {
        report_key(store, hit["report_id"])
        # Common words of the English and Norwegian fixtures (not stop words,
        # which the index drops: "og" and "i" are Norwegian ones), so that
        # only the tag filter decides.
        for hit in search(store, "elva from all one we", **arguments)
    }
    assert found == expected


# -- report.json -------------------------------------------------------------------

REPORTS = [
    (
        BEES,
        "Rooftop apiaries: spring colony survey 2026",
        "2026-03-14",
        {"audience": "students", "season": "spring"},
    ),
    (
        RIVER,
        "Sallow River water quality: summer sampling 2025",
        "2025-07-22",
        {"audience": "public", "season": "summer"},
    ),
    (
        ELVEMUSLING,
        "Elvemusling i Liaelva: høstkartlegging 2025",
        "2025-10-03",
        {"audience": "researchers", "season": "autumn"},
    ),
    (
        SOILS,
        "Living Soils lecture series, session 1: The hidden economy under your feet",
        "2025-11-05",
        {"audience": "students", "season": "autumn"},
    ),
    (MALFORMED, "Malformed inputs", "2026-01-20", {"audience": "internal", "season": "winter"}),
]


@pytest.mark.parametrize(
    ("key", "title", "date", "tags"), REPORTS, ids=[key.rsplit("/", 1)[-1] for key, *_ in REPORTS]
)
def test_report_json_is_honoured(
    ingested: Ingested, key: str, title: str, date: str, tags: dict[str, str]
) -> None:
    rid = report_id(ingested.store, key)
    report = ok(ingested.store.call("research_get_report", {"report_id": rid}))["report"]
    assert (report["title"], report["date"], report["tags"]) == (title, date, tags)
    assert report["is_directory"] is True and report["key"] == key
    assert report["source"] == "fixtures"
    for hit in search(ingested.store, "the og", report_id=rid):
        assert (hit["title"], hit["date"], hit["tags"]) == (title, date, tags)


def test_the_report_json_id_is_kept(ingested: Ingested) -> None:
    assert report_id(ingested.store, BEES) == 9001
    report = ok(ingested.store.call("research_get_report", {"report_id": 9001}))["report"]
    assert report["key"] == BEES
    assert {document["name"] for document in report["documents"]} == {
        "index.html",
        "beekeeper-interview.srt",
        "field-notes.txt",
    }


def test_single_file_reports_take_their_metadata_from_the_file(ingested: Ingested) -> None:
    lichen = ok(
        ingested.store.call("research_get_report", {"report_id": report_id(ingested.store, LICHEN)})
    )["report"]
    assert lichen["is_directory"] is False and lichen["tags"] == {}
    assert lichen["date"] == "2026-04-18"
    assert "lichen" in lichen["title"].lower()
    assert "|" not in lichen["title"] or "Hollin Vale" in lichen["title"]
    pond = ok(
        ingested.store.call("research_get_report", {"report_id": report_id(ingested.store, POND)})
    )["report"]
    # The notes declare no date (no front matter) and no report.json gives
    # one: none, not the day they were ingested nor the file's time.
    assert pond["title"].strip() and pond["date"] is None


def write_report(root: Path, key: str, meta: Any, text: str) -> None:
    folder = root / key
    folder.mkdir(parents=True, exist_ok=True)
    raw = meta if isinstance(meta, str) else json.dumps(meta)
    (folder / "report.json").write_text(raw)
    (folder / "notes.txt").write_text(text)


def test_bad_report_json_fails_that_report_only(tmp_path: Path) -> None:
    root = tmp_path / "source"
    write_report(
        root,
        "a-good",
        {"id": 50, "title": "Good", "date": "2026-01-02", "tags": {"audience": "students"}},
        "Goodword lives here.",
    )
    write_report(root, "b-bad-json", '{"title": "Broken", "date": ', "Brokenword lives here.")
    write_report(
        root, "c-bad-date", {"title": "Bad date", "date": "2026-02-30"}, "Baddateword lives here."
    )
    write_report(
        root,
        "d-taken-id",
        {"id": 50, "title": "Taken", "date": "2026-01-03"},
        "Takenword lives here.",
    )
    write_report(root, "e-not-object", [1, 2, 3], "Listword lives here.")
    write_report(
        root, "f-bad-tags", {"title": "Bad tags", "tags": ["students"]}, "Badtagsword lives here."
    )
    write_report(root, "g-bad-id", {"title": "Bad id", "id": "seven"}, "Badidword lives here.")
    (root / "solo.txt").write_text("Soloword lives here.")
    with Store(tmp_path / "r.db", progress=False) as store:
        summary = store.ingest(root, name="mixed")
        assert (summary.new, summary.failed) == (2, 6)
        failed = {failure["report"]: failure["reason"] for failure in summary.failures}
        assert set(failed) == {
            "b-bad-json",
            "c-bad-date",
            "d-taken-id",
            "e-not-object",
            "f-bad-tags",
            "g-bad-id",
        }
        assert "JSON" in failed["b-bad-json"]
        assert "date" in failed["c-bad-date"] and "2026-02-30" in failed["c-bad-date"]
        assert "50" in failed["d-taken-id"] and "a-good" in failed["d-taken-id"]
        for reason in failed.values():
            assert isinstance(reason, str) and reason
        assert report_id(store, "a-good") == 50
        assert search(store, "goodword") and search(store, "soloword")
        for word in (
            "brokenword",
            "baddateword",
            "takenword",
            "listword",
            "badtagsword",
            "badidword",
        ):
            assert search(store, word) == [], word
        keys = {row[0] for row in store._conn.execute("SELECT key FROM reports")}
        assert keys == {"a-good", "solo.txt"}
        # Fixed, the report is ingested on the next run.
        (root / "c-bad-date" / "report.json").write_text(
            json.dumps({"title": "Bad date", "date": "2026-02-28"})
        )
        again = store.ingest(root, name="mixed")
        assert (again.new, again.unchanged, again.failed) == (1, 2, 5)
        assert search(store, "baddateword")


def test_bad_report_json_makes_the_cli_exit_non_zero(tmp_path: Path) -> None:
    root = tmp_path / "source"
    write_report(root, "good", {"title": "Good", "date": "2026-01-02"}, "Goodword.")
    write_report(root, "bad", "not json at all", "Badword.")
    result = CliRunner().invoke(main, ["ingest", str(tmp_path / "r.db"), str(root), "--json"])
    assert result.exit_code == 1, result.output
    [summary] = run_summaries(result.stdout)
    assert summary["failed"] == 1 and summary["new"] == 1
    assert summary["failures"][0]["report"] == "bad"


def test_non_string_tag_values_are_filterable_as_json_spells_them(tmp_path: Path) -> None:
    root = tmp_path / "source"
    write_report(
        root,
        "r",
        {"title": "Tagged", "date": "2026-01-02", "tags": {"cohort": 2026, "reviewed": True}},
        "Taggedword.",
    )
    with Store(tmp_path / "r.db", progress=False) as store:
        assert store.ingest(root).failed == 0
        rid = report_id(store, "r")
        report = ok(store.call("research_get_report", {"report_id": rid}))["report"]
        assert report["tags"] == {"cohort": 2026, "reviewed": True}
        assert search(store, "taggedword", tags={"cohort": "2026"})
        assert search(store, "taggedword", tags={"reviewed": "true"})


# -- re-ingest ---------------------------------------------------------------------


@pytest.mark.slow
def test_reingest_unchanged_touches_nothing(ingested: Ingested) -> None:
    store = ingested.store
    before = {row[0] for row in store._conn.execute("SELECT chunk_id FROM chunks")}
    summary = store.ingest(ingested.root, name="fixtures")
    assert (summary.new, summary.modified, summary.unchanged, summary.failed) == (0, 0, 8, 0)
    # Only the times change: content is compared before anything is replaced.
    for path in ingested.root.rglob("*"):
        os.utime(path, (path.stat().st_atime, path.stat().st_mtime + 60))
    summary = store.ingest(ingested.root, name="fixtures")
    assert (summary.new, summary.modified, summary.unchanged, summary.failed) == (0, 0, 8, 0)
    after = {row[0] for row in store._conn.execute("SELECT chunk_id FROM chunks")}
    assert after == before


# -- researchstore parse FILE --json ------------------------------------------------

PARSE_KEYS = {"title", "description", "language", "text", "segments", "chunks", "status", "reason"}


@pytest.mark.parametrize(
    ("path", "status", "reason", "kind"),
    [
        (f"{BEES}/index.html", "ok", None, "html"),
        (f"{SOILS}/lecture-01-okafor.vtt", "ok", None, "vtt"),
        (f"{BEES}/beekeeper-interview.srt", "ok", None, "srt"),
        (f"{MALFORMED}/garbage.srt", "invalid", "binary", "srt"),
        (f"{MALFORMED}/broken-timestamps.vtt", "partial", "invalid_cues", "vtt"),
    ],
    ids=["html", "vtt", "srt", "garbage", "broken-timestamps"],
)
def test_parse_command_prints_what_ingest_would_store(
    path: str, status: str, reason: str | None, kind: str
) -> None:
    result = CliRunner().invoke(main, ["parse", str(SOURCE / path), "--json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert PARSE_KEYS <= set(printed)
    assert (printed["status"], printed["reason"], printed["kind"]) == (status, reason, kind)
    if status == "ok":
        assert printed["text"].strip() and printed["chunks"]
        assert printed["title"] or kind != "html"
    if kind in ("vtt", "srt") and status != "invalid":
        assert printed["segments"]
        assert all({"start_ms", "end_ms", "text"} <= set(s) for s in printed["segments"])
        assert all(c["start_ms"] is not None for c in printed["chunks"])
    if status == "invalid":
        assert printed["chunks"] == [] and printed["segments"] == []
    for chunk in printed["chunks"]:
        assert chunk["text"].strip() and chunk["token_count"] > 0
        assert chunk["text"] in printed["text"]
    assert [c["position"] for c in printed["chunks"]] == list(range(len(printed["chunks"])))


# -- what is passed over is reported, never silently dropped ----------------------


def test_unsupported_and_oversized_files_are_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from researchstore.ingest import parsers

    root = tmp_path / "source"
    write_report(root, "r", {"title": "R", "date": "2026-01-02"}, "Smallword.")
    (root / "r" / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    (root / "r" / "huge.txt").write_text("Hugeword. " * 50)
    (root / "notes.docx").write_bytes(b"PK\x03\x04")
    monkeypatch.setattr(parsers, "MAX_FILE_BYTES", 100)
    with Store(tmp_path / "r.db", progress=False) as store:
        summary = store.ingest(root)
        outcomes = {entry["path"]: (entry["status"], entry["reason"]) for entry in summary.skipped}
        assert outcomes["r/photo.jpg"][0] == "skipped"
        assert outcomes["notes.docx"][0] == "skipped"
        assert outcomes["r/huge.txt"] == ("invalid", "too_large")
        assert summary.failed == 0
        assert search(store, "smallword") and search(store, "hugeword") == []


def test_a_report_json_at_the_source_root_is_not_silently_ignored(tmp_path: Path) -> None:
    root = tmp_path / "source"
    root.mkdir()
    (root / "report.json").write_text(
        json.dumps({"title": "Root report", "date": "2026-01-02", "tags": {"audience": "students"}})
    )
    (root / "notes.txt").write_text("Rootword lives here.")
    with Store(tmp_path / "r.db", progress=False) as store:
        summary = store.ingest(root)
        honoured = store._conn.execute(
            "SELECT count(*) FROM reports WHERE title = 'Root report'"
        ).fetchone()[0]
        reported = [entry for entry in summary.skipped if entry["path"] == "report.json"]
        assert honoured or reported


@pytest.mark.parametrize("link", ["to-directory", "dangling"])
def test_symlinks_are_never_silently_dropped(tmp_path: Path, link: str) -> None:
    root = tmp_path / "source"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "linked.txt").write_text("Linkedword lives outside the source.")
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "plain.txt").write_text("Plainword.")
    if link == "to-directory":
        (root / "sub" / "linked").symlink_to(elsewhere, target_is_directory=True)
        name = "sub/linked"
    else:
        (root / "sub" / "gone.txt").symlink_to(tmp_path / "nothing-here.txt")
        name = "sub/gone.txt"
    with Store(tmp_path / "r.db", progress=False) as store:
        summary = store.ingest(root)
        paths = {row[0] for row in store._conn.execute("SELECT path FROM documents")}
        reported = {entry["path"] for entry in summary.skipped}
        assert any(path == name or path.startswith(name + "/") for path in paths | reported)
