"""Dates: a page's own, else its report.json's, else none; never the day of the ingest.

Every file here is written moments before it is ingested, so its time on
disk is today: a date taken from the clock or from the file would show.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import SEED_FORMATS, load_schema, ok, validator

from researchstore import Store
from researchstore.ingest.inspect import describe_file

PROSE = (
    "The survey team walked the transect at dawn and counted every bumblebee on the "
    "clover, the knapweed and the bramble along the old railway embankment. "
)


def today_candidates() -> set[str]:
    """Today, in UTC and locally (a test running across midnight sees both)."""
    return {datetime.now(UTC).date().isoformat(), date.today().isoformat()}


def html_page(word: str, head: str = "", lead: str = "") -> str:
    return (
        f"<!DOCTYPE html><html><head><title>Page {word}</title>{head}</head><body>"
        f"<article><h1>Page {word}</h1>{lead}<p>{word} {PROSE * 3}</p></article></body></html>"
    )


TODAY = datetime.now(UTC).date().isoformat()
PAGES = {
    "meta.html": (
        html_page("metaword", '<meta property="article:published_time" content="2021-05-04">'),
        "2021-05-04",
        "meta",
    ),
    "time.html": (
        html_page("timeword", lead='<p><time datetime="2020-02-03T10:00">3 Feb</time></p>'),
        "2020-02-03",
        "time",
    ),
    "jsonld.html": (
        html_page(
            "jsonldword",
            '<script type="application/ld+json">'
            '{"@type": "NewsArticle", "datePublished": "2019-01-02T08:00:00Z"}</script>',
        ),
        "2019-01-02",
        "json-ld",
    ),
    "byline.html": (
        html_page("bylineword", lead="<p>Publisert 06.07.2018 kl. 08.00</p>"),
        "2018-07-06",
        "byline",
    ),
    "undated.html": (html_page("undatedword"), None, None),
    # A page may well say it is from today: then today it is.
    "today.html": (
        html_page("todayword", f'<meta name="date" content="{TODAY}">'),
        TODAY,
        "meta",
    ),
}


@pytest.fixture(scope="module")
def dated_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    root = tmp_path_factory.mktemp("dates") / "source"
    root.mkdir()
    for name, (markup, _, _) in PAGES.items():
        (root / name).write_text(markup)
    dated = root / "dated-report"
    dated.mkdir()
    (dated / "report.json").write_text(json.dumps({"title": "Dated", "date": "2017-03-04"}))
    (dated / "page.html").write_text(html_page("reportword"))
    undated = root / "undated-report"
    undated.mkdir()
    (undated / "report.json").write_text(json.dumps({"title": "Undated"}))
    (undated / "page.html").write_text(html_page("nodateword"))
    with Store(root.parent / "dates.db", progress=False) as store:
        store.ingest(root, name="dates")
        yield store


def hits(store: Store, query: str, **filters: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = ok(
        store.call("research_chunk_search", {"query": query, "limit": 50, **filters})
    )["hits"]
    return found


EXPECTED = {
    "metaword": "2021-05-04",
    "timeword": "2020-02-03",
    "jsonldword": "2019-01-02",
    "bylineword": "2018-07-06",
    "undatedword": None,
    "todayword": TODAY,
    "reportword": "2017-03-04",
    "nodateword": None,
}


@pytest.mark.parametrize(("word", "expected"), EXPECTED.items())
def test_each_chunk_has_its_pages_date_or_none(
    dated_store: Store, word: str, expected: str | None
) -> None:
    found = hits(dated_store, word)
    assert found
    chunk_validator = validator(load_schema("get_chunk.output.json"), formats=SEED_FORMATS)
    for hit in found:
        assert hit["date"] == expected
        envelope = dated_store.call("research_get_chunk", {"chunk_id": hit["chunk_id"]})
        chunk_validator.validate(envelope)
        # Seed 000 requires a string: "" says there is none.
        assert ok(envelope)["chunk"]["date"] == (expected or "")
        report = ok(dated_store.call("research_get_report", {"report_id": hit["report_id"]}))
        assert report["report"]["date"] == expected


def test_no_chunk_is_dated_the_day_of_its_ingest_unless_its_page_says_so(
    dated_store: Store,
) -> None:
    today = today_candidates()
    for word, expected in EXPECTED.items():
        for hit in hits(dated_store, word):
            if hit["date"] in today:
                assert expected == hit["date"] and word == "todayword"


def test_a_date_range_leaves_out_chunks_without_a_date(dated_store: Store) -> None:
    for word in ("undatedword", "nodateword"):
        assert hits(dated_store, word, date_from="1900-01-01") == []
        assert hits(dated_store, word, date_to="2999-12-31") == []
    assert hits(dated_store, "metaword", date_to="2999-12-31")


@pytest.mark.parametrize(
    ("name", "expected", "source"),
    [(name, expected, source) for name, (_, expected, source) in PAGES.items()],
)
def test_parse_says_where_the_date_came_from(
    tmp_path: Path, name: str, expected: str | None, source: str | None
) -> None:
    path = tmp_path / name
    path.write_text(PAGES[name][0])
    described = describe_file(path)
    assert (described["date"], described["date_source"]) == (expected, source)


def test_parse_falls_back_to_the_report_json_date(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text(json.dumps({"title": "R", "date": "2016-08-09"}))
    path = tmp_path / "page.html"
    path.write_text(html_page("fallbackword"))
    described = describe_file(path)
    assert (described["date"], described["date_source"]) == ("2016-08-09", "report")


def mixed_source(root: Path) -> Path:
    """A report.json dated 2024-01-01 around a page dated 2025-06-30 and an undated page."""
    report = root / "source" / "mixed-report"
    report.mkdir(parents=True)
    (report / "report.json").write_text(json.dumps({"title": "Mixed", "date": "2024-01-01"}))
    (report / "dated.html").write_text(
        html_page("ownpageword", '<meta property="article:published_time" content="2025-06-30">')
    )
    (report / "plain.html").write_text(html_page("plainpageword"))
    return report.parent


MIXED = {"ownpageword": "2025-06-30", "plainpageword": "2024-01-01"}


def assert_mixed_dates(store: Store) -> None:
    """Each page's chunks carry its own date, else report.json's, in every place."""
    for word, expected in MIXED.items():
        found = hits(store, word)
        assert found and {hit["date"] for hit in found} == {expected}
        for hit in found:
            chunk = ok(store.call("research_get_chunk", {"chunk_id": hit["chunk_id"]}))["chunk"]
            assert chunk["date"] == expected
            report = ok(store.call("research_get_report", {"report_id": hit["report_id"]}))
            assert report["report"]["date"] == "2024-01-01"
    assert hits(store, "ownpageword", date_from="2025-06-30", date_to="2025-06-30")
    assert hits(store, "ownpageword", date_to="2024-12-31") == []
    assert hits(store, "plainpageword", date_from="2024-01-01", date_to="2024-01-01")
    assert hits(store, "plainpageword", date_from="2025-01-01") == []


def test_a_pages_own_date_wins_over_its_report_json_date(tmp_path: Path) -> None:
    source = mixed_source(tmp_path)
    with Store(tmp_path / "mixed.db", progress=False) as store:
        store.ingest(source, name="mixed")
        assert_mixed_dates(store)
        with store.reading() as conn:
            rows = conn.execute("SELECT name, date, date_source FROM documents ORDER BY name")
            assert [tuple(row) for row in rows] == [
                ("dated.html", "2025-06-30", "meta"),
                ("plain.html", None, None),
            ]
        # get_document says where a document's own date came from.
        sources = {}
        for word in MIXED:
            document_id = hits(store, word)[0]["document_id"]
            document = ok(store.call("get_document", {"id": document_id}))["document"]
            sources[word] = (document["date"], document["date_source"])
        assert sources == {"ownpageword": ("2025-06-30", "meta"), "plainpageword": (None, None)}
        # A rebuilt index and a re-ingest of a changed page give the same dates.
        assert store.rebuild_index() > 0
        assert_mixed_dates(store)
        (source / "mixed-report" / "plain.html").write_text(html_page("plainpageword") + " ")
        store.ingest(source, name="mixed")
        assert_mixed_dates(store)


def test_a_store_made_before_document_dates_opens_and_keeps_its_report_dates(
    tmp_path: Path,
) -> None:
    from researchstore.storage.schema import SCHEMA_VERSION

    source = mixed_source(tmp_path)
    path = tmp_path / "old.db"
    with Store(path, progress=False) as store:
        store.ingest(source, name="mixed")
    # As the previous version left it: no date_source, and the index holding
    # every chunk under its report's date.
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE documents DROP COLUMN date_source")
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION - 1),)
        )
    with Store(path, progress=False) as store:
        store.rebuild_index()
        for word in MIXED:
            found = hits(store, word)
            assert found and {hit["date"] for hit in found} == {"2024-01-01"}
            chunk_id = found[0]["chunk_id"]
            chunk = ok(store.call("research_get_chunk", {"chunk_id": chunk_id}))["chunk"]
            assert chunk["date"] == "2024-01-01"
            assert hits(store, word, date_from="2024-01-01", date_to="2024-01-01")
        with store.reading() as conn:
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'")
            assert int(version.fetchone()[0]) == SCHEMA_VERSION
            unsourced = conn.execute("SELECT count(*) FROM documents WHERE date_source IS NULL")
            assert unsourced.fetchone()[0] == 2
        # Its next ingest of a changed report gives the page its own date.
        (source / "mixed-report" / "dated.html").write_text(
            html_page(
                "ownpageword", '<meta property="article:published_time" content="2025-06-30">'
            )
            + " "
        )
        store.ingest(source, name="mixed")
        assert_mixed_dates(store)
