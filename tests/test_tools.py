"""The tool contracts (SPEC §4, seeds 000 and 001), through ``Store.call``.

Every call goes through the envelope layer, so these tests see exactly what a
CLI or MCP caller sees: ``{"result": ...}`` or ``{"error": {...}}``.
"""

from __future__ import annotations

import html
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from helpers import SEED_FORMATS, load_schema, long_text, ok, validator, write_report
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from researchstore import TOOLS, Store

SEARCH_HIT_KEYS = {
    "chunk_id",
    "report_id",
    "document_id",
    "title",
    "date",
    "score",
    "text",
    "snippet",
    "tags",
    "position",
    "start_ms",
    "end_ms",
}
CHUNK_BODY_KEYS = {
    "chunk_id",
    "document_id",
    "report_id",
    "position",
    "text",
    "token_count",
    "status",
    "heading_path",
    "start_ms",
    "end_ms",
}
UNKNOWN = "00000000-0000-7000-8000-000000000000"


# -- the store these tests read ------------------------------------------------


HTML_PAGE = """<!DOCTYPE html>
<html lang="en"><head><title>Churchyard lichens</title></head>
<body><main><h1>Churchyard lichens</h1>
<p>Xanthoria grows on the south wall where the varroa talk never reaches.</p>
<p>Usnea hangs from the yew, a sign of clean air.</p></main></body></html>
"""

VTT_FILE = """WEBVTT

00:00:01.000 --> 00:00:04.000
Welcome to the varroa workshop.

00:00:04.500 --> 00:00:08.000
We count mites with a sugar roll.
"""


@pytest.fixture(scope="module")
def tool_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """Two sources: ``alpha`` (three reports, text/html/vtt) and ``beta`` (one report)."""
    base = tmp_path_factory.mktemp("tools")
    alpha = base / "alpha"
    write_report(
        alpha,
        "field/2026/bees",
        title="Bee colony survey",
        date="2026-03-14",
        tags={"audience": "students", "season": "spring"},
        files={"notes.txt": long_text(30)},
    )
    write_report(
        alpha,
        "field/2025/river",
        title="River water quality",
        date="2025-09-02",
        tags={"audience": "public", "season": "autumn"},
        files={"summary.txt": long_text(12, seed=4)},
    )
    (alpha / "misc").mkdir(parents=True)
    (alpha / "misc" / "memo.txt").write_text(
        "Memo\n\nThe lecture hall moves to building C, next to the pollinator garden.\n"
    )
    (alpha / "misc" / "markup.txt").write_text(
        "Angle brackets: <script>alert(1)</script> & <b>bold</b> beside the snippetword.\n"
    )
    (alpha / "pages").mkdir()
    (alpha / "pages" / "lichens.html").write_text(HTML_PAGE)
    (alpha / "pages" / "workshop.vtt").write_text(VTT_FILE)
    beta = base / "beta"
    write_report(
        beta,
        "garden/compost",
        title="Compost trial",
        date="2024-09-18",
        tags={"audience": "public", "season": "autumn"},
        files={
            "trial.txt": "Vermicompost beds fed the pollinator strip.\n\n"
            "Varroa were not part of this trial at all."
        },
    )
    with Store(base / "tools.db", progress=False, chunk_tokens=48) as store:
        store.ingest(alpha, name="alpha")
        store.ingest(beta, name="beta")
        yield store


def assert_invalid(envelope: dict[str, Any], field: str | None) -> None:
    assert set(envelope) == {"error"}, envelope
    error = envelope["error"]
    assert error["code"] == "invalid_input", error
    assert isinstance(error["message"], str) and error["message"]
    assert set(error) <= {"code", "message", "field", "details"}
    if field is not None:
        assert error.get("field") == field, error


def search(store: Store, query: str, **args: Any) -> list[dict[str, Any]]:
    return ok(store.call("research_chunk_search", {"query": query, **args}))["hits"]


def report_id_of(store: Store, key: str) -> int:
    row = store._conn.execute("SELECT report_id FROM reports WHERE key = ?", (key,)).fetchone()
    assert row is not None, key
    return int(row[0])


def document_of(store: Store, report_key: str, name: str) -> dict[str, Any]:
    report = ok(store.call("research_get_report", {"report_id": report_id_of(store, report_key)}))
    (document,) = [d for d in report["report"]["documents"] if d["name"] == name]
    full = ok(store.call("get_document", {"id": document["document_id"]}))["document"]
    assert full is not None
    return full


@pytest.fixture(scope="module")
def bees(tool_store: Store) -> dict[str, Any]:
    """The long document (many chunks) that navigation tests walk."""
    document = document_of(tool_store, "field/2026/bees", "notes.txt")
    assert len(document["chunks"]) >= 25
    return document


# -- research_get_chunk (seed 000) ---------------------------------------------


@pytest.fixture(scope="module")
def get_chunk_validator() -> Any:
    """Seed 000's output schema of ``research_get_chunk``, from ``tests/schemas``."""
    return validator(load_schema("get_chunk.output.json"), formats=SEED_FORMATS)


def test_get_chunk_hit_is_exactly_the_seed_shape(
    tool_store: Store, bees: dict[str, Any], get_chunk_validator: Any
) -> None:
    chunk_id = bees["chunks"][3]["chunk_id"]
    envelope = tool_store.call("research_get_chunk", {"chunk_id": chunk_id})
    get_chunk_validator.validate(envelope)
    chunk = ok(envelope)["chunk"]
    assert set(ok(envelope)) == {"chunk"}
    assert set(chunk) == {"report_id", "title", "date", "score", "text", "chunk_id"}
    assert chunk["chunk_id"] == chunk_id
    assert chunk["score"] == 0.0 and isinstance(chunk["score"], float)
    assert chunk["report_id"] == report_id_of(tool_store, "field/2026/bees")
    assert isinstance(chunk["report_id"], int) and not isinstance(chunk["report_id"], bool)
    assert chunk["title"] == "Bee colony survey"
    assert chunk["date"] == "2026-03-14"
    body = ok(tool_store.call("get_chunks", {"ids": [chunk_id]}))["chunks"][0]
    assert chunk["text"] == body["text"] and chunk["text"].strip()


def test_get_chunk_hit_round_trips_every_search_hit(
    tool_store: Store, get_chunk_validator: Any
) -> None:
    hits = search(tool_store, "varroa pollinator", limit=50)
    assert hits
    for hit in hits:
        envelope = tool_store.call("research_get_chunk", {"chunk_id": hit["chunk_id"]})
        get_chunk_validator.validate(envelope)
        chunk = ok(envelope)["chunk"]
        assert chunk is not None
        # A hit's missing date is null; seed 000's required string is "".
        assert (chunk["report_id"], chunk["title"], chunk["date"], chunk["text"]) == (
            hit["report_id"],
            hit["title"],
            hit["date"] or "",
            hit["text"],
        )


@pytest.mark.parametrize("chunk_id", [UNKNOWN, "not-a-uuid", "x" * 200, "' OR 1=1 --"])
def test_get_chunk_miss_is_a_result_not_an_error(
    tool_store: Store, get_chunk_validator: Any, chunk_id: str
) -> None:
    envelope = tool_store.call("research_get_chunk", {"chunk_id": chunk_id})
    get_chunk_validator.validate(envelope)
    assert envelope == {"result": {"chunk": None}}


@pytest.mark.parametrize(
    "arguments", [{}, {"chunk_id": ""}, {"chunk_id": 5}, {"chunk_id": None}, {"chunk_id": ["a"]}]
)
def test_get_chunk_refusals_validate_against_the_seed_schema(
    tool_store: Store, get_chunk_validator: Any, arguments: dict[str, Any]
) -> None:
    envelope = tool_store.call("research_get_chunk", arguments)
    get_chunk_validator.validate(envelope)
    assert_invalid(envelope, "chunk_id")


# -- research_chunk_search -----------------------------------------------------


def test_search_hits_carry_every_documented_field(tool_store: Store) -> None:
    hits = search(tool_store, "oxalic acid")
    assert len(hits) == 10
    for hit in hits:
        assert SEARCH_HIT_KEYS <= set(hit), SEARCH_HIT_KEYS - set(hit)
        report = ok(tool_store.call("research_get_report", {"report_id": hit["report_id"]}))
        report = report["report"]
        assert (hit["title"], hit["date"], hit["tags"]) == (
            report["title"],
            report["date"],
            report["tags"],
        )
        assert hit["document_id"] in {d["document_id"] for d in report["documents"]}
        assert isinstance(hit["score"], float) and hit["score"] > 0
        assert isinstance(hit["position"], int) and hit["position"] >= 0
        assert "oxalic acid" in hit["text"]
        assert hit["start_ms"] is None and hit["end_ms"] is None  # not a caption
    assert {hit["title"] for hit in hits} <= {"Bee colony survey", "River water quality"}
    scores = [hit["score"] for hit in hits]
    assert scores == sorted(scores, reverse=True)


def test_search_hit_position_and_document_agree_with_the_document(tool_store: Store) -> None:
    for hit in search(tool_store, "varroa", limit=20):
        document = ok(tool_store.call("get_document", {"id": hit["document_id"]}))["document"]
        skeleton = {c["chunk_id"]: c["position"] for c in document["chunks"]}
        assert skeleton[hit["chunk_id"]] == hit["position"]
        assert document["report_id"] == hit["report_id"]


def test_search_snippets_highlight_the_match(tool_store: Store) -> None:
    hits = search(tool_store, "oxalic")
    assert hits
    for hit in hits:
        assert re.search(r"<b>oxalic</b>", hit["snippet"], re.IGNORECASE), hit["snippet"]
        assert "<script" not in hit["snippet"]


def test_search_snippets_escape_everything_but_the_highlights(tool_store: Store) -> None:
    (hit,) = search(tool_store, "snippetword script")
    snippet = hit["snippet"]
    assert "<b>snippetword</b>" in snippet and "<b>script</b>" in snippet
    bare = snippet.replace("<b>", "").replace("</b>", "")
    assert "<" not in bare and ">" not in bare
    assert "&lt;" in bare and "&amp;" in bare
    assert html.unescape(bare).rstrip(".") in hit["text"]


def test_search_limit_defaults_to_10_and_is_honoured(tool_store: Store) -> None:
    many = search(tool_store, "varroa", limit=50)
    assert len(many) > 10
    assert len(search(tool_store, "varroa")) == 10
    assert len(search(tool_store, "varroa", limit=1)) == 1
    # The same ranking whatever the limit (scores tie on repeated text, so compare scores).
    assert [h["score"] for h in search(tool_store, "varroa", limit=10)] == [
        h["score"] for h in many[:10]
    ]


@pytest.mark.parametrize("limit", [0, -1, 51, 1000, "10", 2.5, True, False, [10]])
def test_search_limit_out_of_range_or_wrong_type(tool_store: Store, limit: Any) -> None:
    assert_invalid(
        tool_store.call("research_chunk_search", {"query": "varroa", "limit": limit}), "limit"
    )


def test_search_filter_by_report_id(tool_store: Store) -> None:
    river = report_id_of(tool_store, "field/2025/river")
    everywhere = search(tool_store, "varroa", limit=50)
    assert {hit["report_id"] for hit in everywhere} - {river}
    hits = search(tool_store, "varroa", limit=50, report_id=river)
    assert hits and {hit["report_id"] for hit in hits} == {river}
    assert search(tool_store, "varroa", report_id=999_999) == []


def test_search_filter_by_tags(tool_store: Store) -> None:
    students = search(tool_store, "varroa", limit=50, tags={"audience": "students"})
    assert students and all(hit["tags"]["audience"] == "students" for hit in students)
    public = search(tool_store, "varroa", limit=50, tags={"audience": ["public"]})
    assert public and all(hit["tags"]["audience"] == "public" for hit in public)
    either = search(tool_store, "varroa", limit=50, tags={"audience": ["students", "public"]})
    assert {hit["tags"]["audience"] for hit in either} <= {"students", "public"}
    assert len(either) == min(50, len(students) + len(public))
    both = search(tool_store, "varroa", limit=50, tags={"audience": "public", "season": "autumn"})
    assert both and all(hit["tags"] == {"audience": "public", "season": "autumn"} for hit in both)
    assert search(tool_store, "varroa", tags={"audience": "nobody"}) == []
    assert search(tool_store, "varroa", tags={"no-such-tag": "students"}) == []


def test_search_filter_by_dates(tool_store: Store) -> None:
    hits = search(tool_store, "varroa", limit=50, date_from="2026-01-01")
    assert hits and all(hit["date"] >= "2026-01-01" for hit in hits)
    hits = search(tool_store, "varroa", limit=50, date_to="2025-12-31")
    assert hits and all(hit["date"] <= "2025-12-31" for hit in hits)
    hits = search(tool_store, "varroa", limit=50, date_from="2025-09-02", date_to="2025-09-02")
    assert hits and {hit["date"] for hit in hits} == {"2025-09-02"}
    assert search(tool_store, "varroa", date_from="2030-01-01") == []
    assert_invalid(
        tool_store.call(
            "research_chunk_search",
            {"query": "varroa", "date_from": "2026-02-01", "date_to": "2026-01-01"},
        ),
        "date_from",
    )


def test_search_filter_by_source(tool_store: Store) -> None:
    alpha = search(tool_store, "pollinator", limit=50, source="alpha")
    beta = search(tool_store, "pollinator", limit=50, source="beta")
    assert alpha and beta
    assert {hit["title"] for hit in beta} == {"Compost trial"}
    assert "Compost trial" not in {hit["title"] for hit in alpha}
    assert search(tool_store, "pollinator", source="gamma") == []


def test_search_filter_by_kind(tool_store: Store) -> None:
    assert {h["kind"] for h in search(tool_store, "varroa", limit=50, kind="text")} == {"text"}
    html = search(tool_store, "varroa", limit=50, kind="html")
    assert [h["document_id"] for h in html] and {h["kind"] for h in html} == {"html"}
    vtt = search(tool_store, "varroa", limit=50, kind="vtt")
    assert vtt and {h["kind"] for h in vtt} == {"vtt"}
    assert vtt[0]["start_ms"] == 1000 and vtt[0]["end_ms"] >= 4000
    assert search(tool_store, "varroa", kind="srt") == []
    assert search(tool_store, "xanthoria", kind="text") == []
    assert search(tool_store, "xanthoria", kind="html")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("report_id", "1"),
        ("report_id", 0),
        ("report_id", True),
        ("report_id", 1.5),
        ("tags", "audience=students"),
        ("tags", ["students"]),
        ("tags", {"audience": 5}),
        ("tags", {"audience": []}),
        ("tags", {"audience": [""]}),
        ("date_from", "2026-13-01"),
        ("date_from", "2026-02-30"),
        ("date_from", "yesterday"),
        ("date_from", 20260101),
        ("date_to", "14/03/2026"),
        ("date_to", "2026-3-14"),
        ("source", ""),
        ("source", 1),
        ("kind", "pdf"),
        ("kind", "HTML"),
        ("kind", 1),
    ],
)
def test_search_bad_filters_name_their_field(tool_store: Store, field: str, value: Any) -> None:
    assert_invalid(
        tool_store.call("research_chunk_search", {"query": "varroa", field: value}), field
    )


@pytest.mark.parametrize("query", ["", None, 5, ["varroa"]])
def test_search_needs_a_non_empty_string_query(tool_store: Store, query: Any) -> None:
    assert_invalid(tool_store.call("research_chunk_search", {"query": query}), "query")


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '"""',
        '"varroa',
        'varroa"',
        '"varroa mite"',
        "title:varroa",
        "text:",
        ":",
        "varroa AND",
        "AND OR NOT",
        "NOT varroa",
        "(varroa",
        "varroa)",
        "[1 TO 5]",
        "{}",
        "varroa^2",
        "varroa~",
        "*",
        "?",
        "\\",
        "+-!",
        "a:b:c",
        "-",
        "' OR 1=1 --",
        "\x00",
        "\x00varroa\x07",
        "\u200b",
        "🐝 varroa",
        "ørretyngel",
        "漢字",
        "   ",
        "\n\t",
        "varroa " * 64,  # the most terms a query may hold (catalogue.MAX_QUERY_TERMS)
        "x" * 4096,
    ],
    ids=lambda query: repr(query)[:30],
)
def test_search_accepts_any_text(tool_store: Store, query: str) -> None:
    hits = search(tool_store, query)
    assert isinstance(hits, list) and len(hits) <= 10


@given(query=st.text(min_size=1, max_size=300))
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_search_never_errors_on_any_text(tool_store: Store, query: str) -> None:
    envelope = tool_store.call("research_chunk_search", {"query": query, "limit": 5})
    assert "error" not in envelope, envelope
    assert isinstance(envelope["result"]["hits"], list)


@given(
    words=st.lists(
        st.sampled_from(
            [
                "varroa",
                "AND",
                "OR",
                "NOT",
                '"',
                ":",
                "(",
                ")",
                "[",
                "]",
                "{",
                "}",
                "^",
                "~",
                "*",
                "\\",
                "text:",
                "title:",
                "-",
                "+",
                "'",
                "hive",
                "\x00",
                "\u00e5",
                "🐝",
                "TO",
                "\n",
            ]
        ),
        min_size=1,
        max_size=30,
    ),
    separator=st.sampled_from(["", " ", "  "]),
)
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_search_never_errors_on_query_syntax(
    tool_store: Store, words: list[str], separator: str
) -> None:
    query = separator.join(words)
    envelope = tool_store.call("research_chunk_search", {"query": query, "limit": 3})
    assert "error" not in envelope, envelope


def test_search_query_longer_than_its_declared_maximum_is_invalid_input(
    tool_store: Store,
) -> None:
    maximum = TOOLS["research_chunk_search"].input_schema()["properties"]["query"]["maxLength"]
    assert_invalid(
        tool_store.call("research_chunk_search", {"query": "v" * (maximum + 1)}), "query"
    )


LONE_SURROGATE = json.loads('"\\ud800"')


@pytest.mark.parametrize(
    ("tool_name", "arguments"),
    [
        ("research_chunk_search", {"query": f"varroa {LONE_SURROGATE}"}),
        ("research_get_chunk", {"chunk_id": LONE_SURROGATE}),
        ("get_chunks", {"ids": [LONE_SURROGATE]}),
        ("get_document", {"id": LONE_SURROGATE}),
    ],
    ids=["search", "get_chunk", "get_chunks", "get_document"],
)
def test_a_lone_surrogate_is_never_an_internal_error(
    tool_store: Store, tool_name: str, arguments: dict[str, Any]
) -> None:
    """JSON can carry ``"\\ud800"`` and Python's json decodes it; an MCP client may send one."""
    envelope = tool_store.call(tool_name, arguments)
    if tool_name == "research_chunk_search":
        assert "result" in envelope, envelope  # SPEC §4: any query string is accepted
    else:
        assert "result" in envelope or envelope["error"]["code"] == "invalid_input", envelope


@pytest.mark.parametrize(
    ("tool_name", "field"),
    [
        ("research_get_report", "report_id"),
        ("research_chunk_search", "report_id"),
        ("get_document_chunks", "from"),
    ],
)
def test_a_huge_integer_is_a_result_or_invalid_input(
    tool_store: Store, bees: dict[str, Any], tool_name: str, field: str
) -> None:
    base = {
        "research_get_report": {},
        "research_chunk_search": {"query": "varroa"},
        "get_document_chunks": {"id": bees["document_id"]},
    }[tool_name]
    envelope = tool_store.call(tool_name, {**base, field: 2**63})
    if "error" in envelope:
        assert_invalid(envelope, field)


def test_search_phrase_in_quotes_ranks_the_phrase_first(tool_store: Store) -> None:
    hits = search(tool_store, '"oxalic acid"')
    assert hits and "oxalic acid" in hits[0]["text"]


# -- research_get_report -------------------------------------------------------


def test_get_report_hit(tool_store: Store) -> None:
    report_id = report_id_of(tool_store, "field/2026/bees")
    report = ok(tool_store.call("research_get_report", {"report_id": report_id}))["report"]
    assert report["report_id"] == report_id
    assert report["title"] == "Bee colony survey"
    assert report["date"] == "2026-03-14"
    assert report["tags"] == {"audience": "students", "season": "spring"}
    assert report["source"] == "alpha"
    assert [d["name"] for d in report["documents"]] == ["notes.txt"]
    document = report["documents"][0]
    assert document["kind"] == "text" and document["status"] == "ok"
    full = ok(tool_store.call("get_document", {"id": document["document_id"]}))["document"]
    assert full["report_id"] == report_id
    assert document["total_chunks"] == len(full["chunks"])


def test_get_report_of_a_single_file_report(tool_store: Store) -> None:
    report_id = report_id_of(tool_store, "misc/memo.txt")
    report = ok(tool_store.call("research_get_report", {"report_id": report_id}))["report"]
    assert report["tags"] == {}
    assert [d["path"] for d in report["documents"]] == ["misc/memo.txt"]
    # Neither the memo nor a report.json gives a date: none, not the ingest day.
    assert report["date"] is None


def test_get_report_miss_is_null(tool_store: Store) -> None:
    assert tool_store.call("research_get_report", {"report_id": 999_999}) == {
        "result": {"report": None}
    }


# -- get_chunks ----------------------------------------------------------------


def test_get_chunks_keeps_the_order_asked(tool_store: Store, bees: dict[str, Any]) -> None:
    ids = [chunk["chunk_id"] for chunk in bees["chunks"][:20]]
    asked = list(reversed(ids))
    result = ok(tool_store.call("get_chunks", {"ids": asked}))
    assert [chunk["chunk_id"] for chunk in result["chunks"]] == asked
    assert result["not_found"] == []
    for chunk in result["chunks"]:
        assert set(chunk) >= CHUNK_BODY_KEYS
        assert chunk["document_id"] == bees["document_id"] and chunk["text"].strip()
    skeleton = {c["chunk_id"]: c for c in bees["chunks"]}
    for chunk in result["chunks"]:
        assert chunk["position"] == skeleton[chunk["chunk_id"]]["position"]
        assert chunk["token_count"] == skeleton[chunk["chunk_id"]]["token_count"]


def test_get_chunks_one_id(tool_store: Store, bees: dict[str, Any]) -> None:
    chunk_id = bees["chunks"][0]["chunk_id"]
    result = ok(tool_store.call("get_chunks", {"ids": [chunk_id]}))
    assert [chunk["chunk_id"] for chunk in result["chunks"]] == [chunk_id]
    assert result["not_found"] == []


def test_get_chunks_reports_what_was_not_found(tool_store: Store, bees: dict[str, Any]) -> None:
    first, second = (chunk["chunk_id"] for chunk in bees["chunks"][:2])
    missing = str(uuid.uuid4())
    result = ok(tool_store.call("get_chunks", {"ids": [missing, first, UNKNOWN, second]}))
    assert [chunk["chunk_id"] for chunk in result["chunks"]] == [first, second]
    assert sorted(result["not_found"]) == sorted([missing, UNKNOWN])
    assert ok(tool_store.call("get_chunks", {"ids": [UNKNOWN]})) == {
        "chunks": [],
        "not_found": [UNKNOWN],
    }


def test_get_chunks_with_duplicate_ids(tool_store: Store, bees: dict[str, Any]) -> None:
    first, second = (chunk["chunk_id"] for chunk in bees["chunks"][:2])
    result = ok(tool_store.call("get_chunks", {"ids": [first, second, first, UNKNOWN, UNKNOWN]}))
    assert [chunk["chunk_id"] for chunk in result["chunks"]] == [first, second, first]
    assert result["not_found"] == [UNKNOWN]


@pytest.mark.parametrize(
    "ids",
    [[], ["a"] * 21, "abc", None, [1], [""], [None], {"0": "a"}, [["a"]]],
    ids=[
        "0 ids",
        "21 ids",
        "string",
        "null",
        "int item",
        "empty item",
        "null item",
        "object",
        "nested",
    ],
)
def test_get_chunks_bad_ids(tool_store: Store, ids: Any) -> None:
    assert_invalid(tool_store.call("get_chunks", {"ids": ids}), "ids")


def test_get_chunks_accepts_exactly_20(tool_store: Store, bees: dict[str, Any]) -> None:
    ids = [chunk["chunk_id"] for chunk in bees["chunks"][:19]] + [UNKNOWN]
    result = ok(tool_store.call("get_chunks", {"ids": ids}))
    assert len(result["chunks"]) == 19 and result["not_found"] == [UNKNOWN]


# -- get_chunk_next / get_chunk_prev -------------------------------------------


def positions(chunks: list[dict[str, Any]]) -> list[int]:
    return [chunk["position"] for chunk in chunks]


def test_next_defaults_to_5_in_reading_order(tool_store: Store, bees: dict[str, Any]) -> None:
    anchor = bees["chunks"][3]["chunk_id"]
    result = ok(tool_store.call("get_chunk_next", {"id": anchor}))
    assert result["found"] is True
    assert positions(result["chunks"]) == [4, 5, 6, 7, 8]
    assert [c["chunk_id"] for c in result["chunks"]] == [c["chunk_id"] for c in bees["chunks"][4:9]]
    assert all(set(chunk) >= CHUNK_BODY_KEYS for chunk in result["chunks"])


def test_prev_defaults_to_5_in_reading_order(tool_store: Store, bees: dict[str, Any]) -> None:
    anchor = bees["chunks"][10]["chunk_id"]
    result = ok(tool_store.call("get_chunk_prev", {"id": anchor}))
    assert result["found"] is True
    assert positions(result["chunks"]) == [5, 6, 7, 8, 9]


@pytest.mark.parametrize("tool", ["get_chunk_next", "get_chunk_prev"])
def test_walk_count_bounds(tool_store: Store, bees: dict[str, Any], tool: str) -> None:
    total = len(bees["chunks"])
    anchor = bees["chunks"][0 if tool == "get_chunk_next" else -1]["chunk_id"]
    one = ok(tool_store.call(tool, {"id": anchor, "count": 1}))["chunks"]
    assert positions(one) == ([1] if tool == "get_chunk_next" else [total - 2])
    everything = ok(tool_store.call(tool, {"id": anchor, "count": 100}))["chunks"]
    if tool == "get_chunk_next":
        assert positions(everything) == list(range(1, total))[:100]
    else:
        assert positions(everything) == list(range(total - 1))[-100:]


def test_walks_past_the_edge_give_an_empty_list(tool_store: Store, bees: dict[str, Any]) -> None:
    first, last = bees["chunks"][0]["chunk_id"], bees["chunks"][-1]["chunk_id"]
    assert ok(tool_store.call("get_chunk_next", {"id": last})) == {"found": True, "chunks": []}
    assert ok(tool_store.call("get_chunk_prev", {"id": first})) == {"found": True, "chunks": []}
    near_end = bees["chunks"][-3]["chunk_id"]
    assert len(ok(tool_store.call("get_chunk_next", {"id": near_end}))["chunks"]) == 2


def test_walks_stay_inside_their_document(tool_store: Store, bees: dict[str, Any]) -> None:
    last = bees["chunks"][-1]["chunk_id"]
    walked = ok(tool_store.call("get_chunk_prev", {"id": last, "count": 100}))["chunks"]
    assert {chunk["document_id"] for chunk in walked} == {bees["document_id"]}


@pytest.mark.parametrize("tool", ["get_chunk_next", "get_chunk_prev"])
def test_walk_from_an_unknown_id(tool_store: Store, tool: str) -> None:
    assert ok(tool_store.call(tool, {"id": UNKNOWN})) == {"found": False, "chunks": []}


# -- get_chunk_neighbors -------------------------------------------------------


def test_neighbors_default_to_2_each_side(tool_store: Store, bees: dict[str, Any]) -> None:
    anchor = bees["chunks"][6]
    result = ok(tool_store.call("get_chunk_neighbors", {"id": anchor["chunk_id"]}))
    assert result["chunk"]["chunk_id"] == anchor["chunk_id"]
    assert result["chunk"]["position"] == 6 and result["chunk"]["text"]
    assert positions(result["prev"]) == [4, 5]
    assert positions(result["next"]) == [7, 8]


def test_neighbors_at_the_edges(tool_store: Store, bees: dict[str, Any]) -> None:
    total = len(bees["chunks"])
    first = ok(tool_store.call("get_chunk_neighbors", {"id": bees["chunks"][0]["chunk_id"]}))
    assert first["prev"] == [] and positions(first["next"]) == [1, 2]
    last = ok(tool_store.call("get_chunk_neighbors", {"id": bees["chunks"][-1]["chunk_id"]}))
    assert positions(last["prev"]) == [total - 3, total - 2] and last["next"] == []
    second = ok(
        tool_store.call("get_chunk_neighbors", {"id": bees["chunks"][1]["chunk_id"], "count": 3})
    )
    assert positions(second["prev"]) == [0] and positions(second["next"]) == [2, 3, 4]
    wide = ok(
        tool_store.call("get_chunk_neighbors", {"id": bees["chunks"][5]["chunk_id"], "count": 100})
    )
    assert positions(wide["prev"]) + [5] + positions(wide["next"]) == list(range(total))


def test_neighbors_of_a_single_chunk_document(tool_store: Store) -> None:
    memo = document_of(tool_store, "misc/memo.txt", "memo.txt")
    assert len(memo["chunks"]) == 1
    result = ok(tool_store.call("get_chunk_neighbors", {"id": memo["chunks"][0]["chunk_id"]}))
    assert result["prev"] == [] and result["next"] == []
    assert "lecture hall" in result["chunk"]["text"]


def test_neighbors_of_an_unknown_id(tool_store: Store) -> None:
    assert ok(tool_store.call("get_chunk_neighbors", {"id": UNKNOWN})) == {
        "chunk": None,
        "prev": [],
        "next": [],
    }


# -- get_chunk_parents ---------------------------------------------------------


def test_parents_chain_from_document_to_source_version(
    tool_store: Store, bees: dict[str, Any]
) -> None:
    chunk_id = bees["chunks"][2]["chunk_id"]
    chain = ok(tool_store.call("get_chunk_parents", {"id": chunk_id}))["parents"]
    for node in chain:
        assert {"id", "name", "kind"} <= set(node), node
        assert isinstance(node["id"], str) and node["id"]
        assert isinstance(node["name"], str) and node["name"]
    assert [node["kind"] for node in chain] == [
        "document",
        "report",
        "folder",
        "folder",
        "source_version",
    ]
    assert [node["name"] for node in chain] == ["notes.txt", "bees", "2026", "field", "alpha"]
    document = chain[0]
    assert document["document_id"] == bees["document_id"]
    fetched = ok(tool_store.call("get_document", {"id": document["document_id"]}))["document"]
    assert chunk_id in {chunk["chunk_id"] for chunk in fetched["chunks"]}
    assert chain[1]["report_id"] == report_id_of(tool_store, "field/2026/bees")
    assert len({node["id"] for node in chain}) == len(chain)


def test_parents_of_a_single_file_report(tool_store: Store) -> None:
    memo = document_of(tool_store, "misc/memo.txt", "memo.txt")
    chain = ok(tool_store.call("get_chunk_parents", {"id": memo["chunks"][0]["chunk_id"]}))
    kinds = [(node["kind"], node["name"]) for node in chain["parents"]]
    assert kinds == [
        ("document", "memo.txt"),
        ("report", "memo.txt"),
        ("folder", "misc"),
        ("source_version", "alpha"),
    ]


def test_parents_of_the_other_source(tool_store: Store) -> None:
    (hit,) = search(tool_store, "vermicompost")
    chain = ok(tool_store.call("get_chunk_parents", {"id": hit["chunk_id"]}))["parents"]
    assert chain[-1]["kind"] == "source_version" and chain[-1]["name"] == "beta"
    assert chain[0]["document_id"] == hit["document_id"]


def test_parents_of_an_unknown_id(tool_store: Store) -> None:
    assert tool_store.call("get_chunk_parents", {"id": UNKNOWN}) == {"result": {"parents": None}}


# -- get_document --------------------------------------------------------------


def test_document_skeleton_has_every_chunk_without_text(
    tool_store: Store, bees: dict[str, Any]
) -> None:
    document = bees
    assert document["kind"] == "text" and document["path"] == "field/2026/bees/notes.txt"
    assert document["total_chunks"] == len(document["chunks"])
    assert positions(document["chunks"]) == list(range(len(document["chunks"])))
    for chunk in document["chunks"]:
        assert {"chunk_id", "position", "token_count"} <= set(chunk)
        assert "text" not in chunk
        assert isinstance(chunk["token_count"], int) and chunk["token_count"] > 0
    assert document["token_count"] == sum(chunk["token_count"] for chunk in document["chunks"])
    ids = [chunk["chunk_id"] for chunk in document["chunks"]]
    assert len(set(ids)) == len(ids)


def test_document_miss_is_null(tool_store: Store) -> None:
    assert tool_store.call("get_document", {"id": UNKNOWN}) == {"result": {"document": None}}


# -- get_document_chunks -------------------------------------------------------


def test_document_chunks_default_window(tool_store: Store, bees: dict[str, Any]) -> None:
    result = ok(tool_store.call("get_document_chunks", {"id": bees["document_id"]}))
    assert result["total_chunks"] == len(bees["chunks"])
    assert result["from"] == 0
    assert positions(result["chunks"]) == list(range(20))
    assert [c["chunk_id"] for c in result["chunks"]] == [c["chunk_id"] for c in bees["chunks"][:20]]
    assert all(chunk["text"].strip() for chunk in result["chunks"])


def test_document_chunks_windows(tool_store: Store, bees: dict[str, Any]) -> None:
    total = len(bees["chunks"])
    document_id = bees["document_id"]
    window = ok(tool_store.call("get_document_chunks", {"id": document_id, "from": 6, "limit": 6}))
    assert positions(window["chunks"]) == list(range(6, 12))
    one = ok(tool_store.call("get_document_chunks", {"id": document_id, "limit": 1}))
    assert positions(one["chunks"]) == [0]
    tail = ok(
        tool_store.call("get_document_chunks", {"id": document_id, "from": total - 1, "limit": 100})
    )
    assert positions(tail["chunks"]) == [total - 1]
    everything = ok(tool_store.call("get_document_chunks", {"id": document_id, "limit": 100}))
    assert positions(everything["chunks"]) == list(range(min(total, 100)))


@pytest.mark.parametrize("past", [0, 1, 1000, 2**40])
def test_document_chunks_past_the_end(tool_store: Store, bees: dict[str, Any], past: int) -> None:
    total = len(bees["chunks"])
    result = ok(
        tool_store.call("get_document_chunks", {"id": bees["document_id"], "from": total + past})
    )
    assert result["chunks"] == [] and result["total_chunks"] == total


def test_document_chunks_of_an_unknown_document(tool_store: Store) -> None:
    result = ok(tool_store.call("get_document_chunks", {"id": UNKNOWN}))
    assert result["chunks"] == [] and result["total_chunks"] == 0
    assert result.get("found") is False


# -- every parameter of every tool: bad arguments are invalid_input ------------


def valid_value(param: Any) -> Any:
    """A value that passes ``param``'s checks (it need not exist in the store)."""
    if getattr(param, "enum", None):
        return param.enum[0]
    if param.type == "string" and getattr(param, "format", None) == "uuid":
        return "11111111-1111-4111-8111-111111111111"
    if param.type == "string":
        return "2026-01-01" if getattr(param, "format", None) == "date" else "x"
    if param.type == "integer":
        return param.minimum if param.minimum is not None else 1
    if param.type == "array":
        return ["x"]
    if param.type == "object":
        return {"audience": "students"}
    if param.type == "boolean":
        return True
    if param.type == "number":
        return 1
    raise NotImplementedError(param.type)


def invalid_values(param: Any) -> list[tuple[str, Any]]:
    """(label, value) pairs that ``param`` must refuse."""
    kind = param.type
    cases: list[tuple[str, Any]] = []
    wrong_types = {
        "string": [
            ("int", 5),
            ("list", ["x"]),
            ("object", {"x": 1}),
            ("bool", True),
            ("float", 1.5),
        ],
        "integer": [
            ("string", "5"),
            ("float", 1.5),
            ("bool-true", True),
            ("bool-false", False),
            ("list", [1]),
            ("object", {"n": 1}),
        ],
        "array": [("string", "x"), ("int", 1), ("object", {"0": "x"}), ("bool", True)],
        "object": [("string", "x"), ("list", ["x"]), ("int", 1), ("bool", True)],
        "boolean": [("string", "true"), ("int", 1)],
        "number": [("string", "1"), ("bool", True)],
    }
    cases.extend(wrong_types.get(kind, []))
    minimum, maximum = getattr(param, "minimum", None), getattr(param, "maximum", None)
    if minimum is not None:
        cases.append(("below-minimum", minimum - 1))
        cases.append(("far-below-minimum", minimum - 1000))
    if maximum is not None:
        cases.append(("above-maximum", maximum + 1))
        cases.append(("far-above-maximum", maximum + 10**6))
    min_length, max_length = getattr(param, "min_length", None), getattr(param, "max_length", None)
    if min_length:
        cases.append(("too-short", "x" * (min_length - 1)))
    if max_length is not None:
        cases.append(("too-long", "x" * (max_length + 1)))
    min_items, max_items = getattr(param, "min_items", None), getattr(param, "max_items", None)
    if min_items:
        cases.append(("too-few-items", ["x"] * (min_items - 1)))
    if max_items is not None:
        cases.append(("too-many-items", ["x"] * (max_items + 1)))
    if kind == "array":
        cases.extend([("int-item", [1]), ("empty-item", [""]), ("null-item", [None])])
    if getattr(param, "enum", None):
        cases.append(("not-in-enum", "not-one-of-them"))
    if getattr(param, "format", None) == "date":
        cases.extend([("bad-date", "2026-13-40"), ("not-a-date", "soon")])
    if kind == "object":
        cases.extend([("bad-tag-value", {"audience": 5}), ("empty-tag-list", {"audience": []})])
    return cases


def base_arguments(tool: Any) -> dict[str, Any]:
    return {param.name: valid_value(param) for param in tool.params if param.required}


PARAM_CASES = [
    pytest.param(name, param.name, value, id=f"{name}-{param.name}-{label}")
    for name, tool in TOOLS.items()
    for param in tool.params
    for label, value in invalid_values(param)
]
REQUIRED_CASES = [
    pytest.param(name, param.name, id=f"{name}-{param.name}")
    for name, tool in TOOLS.items()
    for param in tool.params
    if param.required
]


@pytest.mark.parametrize(("tool_name", "field", "value"), PARAM_CASES)
def test_every_parameter_refuses_bad_values(
    tool_store: Store, tool_name: str, field: str, value: Any
) -> None:
    arguments = {**base_arguments(TOOLS[tool_name]), field: value}
    assert_invalid(tool_store.call(tool_name, arguments), field)


@pytest.mark.parametrize(("tool_name", "field", "value"), PARAM_CASES)
def test_the_published_input_schema_refuses_the_same_values(
    tool_name: str, field: str, value: Any
) -> None:
    """What the tool refuses, its input schema (what MCP clients see) refuses too."""
    tool = TOOLS[tool_name]
    schema = tool.input_schema()
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    validator.validate(base_arguments(tool))
    arguments = {**base_arguments(tool), field: value}
    assert not validator.is_valid(arguments), arguments


@pytest.mark.parametrize(("tool_name", "field"), REQUIRED_CASES)
def test_every_required_parameter_is_required(
    tool_store: Store, tool_name: str, field: str
) -> None:
    tool = TOOLS[tool_name]
    arguments = base_arguments(tool)
    del arguments[field]
    assert_invalid(tool_store.call(tool_name, arguments), field)
    assert_invalid(tool_store.call(tool_name, {**arguments, field: None}), field)
    assert field in tool.input_schema()["required"]


@pytest.mark.parametrize("tool_name", list(TOOLS))
def test_every_tool_refuses_unknown_arguments(tool_store: Store, tool_name: str) -> None:
    arguments = {**base_arguments(TOOLS[tool_name]), "bogus": 1}
    assert_invalid(tool_store.call(tool_name, arguments), "bogus")
    assert TOOLS[tool_name].input_schema()["additionalProperties"] is False


@pytest.mark.parametrize("tool_name", list(TOOLS))
@pytest.mark.parametrize(
    "arguments", [[], ["x"], "x", 5, True], ids=["list", "list-item", "string", "int", "bool"]
)
def test_every_tool_refuses_non_object_arguments(
    tool_store: Store, tool_name: str, arguments: Any
) -> None:
    envelope = tool_store.call(tool_name, arguments)
    assert_invalid(envelope, None)
    assert envelope["error"].get("field") in (None, "arguments")


@pytest.mark.parametrize(
    "tool_name", [name for name, tool in TOOLS.items() if any(p.required for p in tool.params)]
)
def test_every_tool_with_required_params_refuses_no_arguments(
    tool_store: Store, tool_name: str
) -> None:
    first_required = next(p.name for p in TOOLS[tool_name].params if p.required)
    assert_invalid(tool_store.call(tool_name, None), first_required)
    assert_invalid(tool_store.call(tool_name, {}), first_required)


@pytest.mark.parametrize("tool_name", list(TOOLS))
def test_every_tool_declares_its_defaults_and_ranges(tool_name: str) -> None:
    schema = TOOLS[tool_name].input_schema()
    assert schema["type"] == "object"
    for param in TOOLS[tool_name].params:
        assert param.description
        declared = schema["properties"][param.name]
        if param.type == "integer" and param.minimum is not None:
            assert declared["minimum"] == param.minimum


@pytest.mark.parametrize(
    ("tool_name", "field", "default", "minimum", "maximum"),
    [
        ("research_chunk_search", "limit", 10, 1, 50),
        ("get_chunk_next", "count", 5, 1, 100),
        ("get_chunk_prev", "count", 5, 1, 100),
        ("get_chunk_neighbors", "count", 2, 1, 100),
        ("get_document_chunks", "from", 0, 0, 9_007_199_254_740_991),
        ("get_document_chunks", "limit", 20, 1, 100),
        ("get_chunks", "ids", None, None, None),
    ],
)
def test_documented_defaults_and_ranges(
    tool_name: str, field: str, default: Any, minimum: Any, maximum: Any
) -> None:
    declared = TOOLS[tool_name].input_schema()["properties"][field]
    assert declared.get("default") == default
    assert declared.get("minimum") == minimum
    assert declared.get("maximum") == maximum
    if field == "ids":
        assert (declared["minItems"], declared["maxItems"]) == (1, 20)


@pytest.mark.parametrize("name", ["", "no_such_tool", "RESEARCH_GET_CHUNK", "get_chunk"])
def test_unknown_tool_name_is_invalid_input(tool_store: Store, name: str) -> None:
    envelope = tool_store.call(name, {"chunk_id": "x"})
    assert_invalid(envelope, None)
    assert envelope["error"].get("field") in (None, "tool", "name")


def test_booleans_are_not_integers(tool_store: Store, bees: dict[str, Any]) -> None:
    anchor = bees["chunks"][0]["chunk_id"]
    assert_invalid(tool_store.call("get_chunk_next", {"id": anchor, "count": True}), "count")
    assert_invalid(tool_store.call("research_get_report", {"report_id": True}), "report_id")
    assert_invalid(
        tool_store.call("get_document_chunks", {"id": bees["document_id"], "from": False}), "from"
    )
    assert_invalid(tool_store.call("research_chunk_search", {"query": "x", "limit": True}), "limit")


def test_every_edge_case_envelope_matches_the_published_output_schema(
    tool_store: Store, bees: dict[str, Any]
) -> None:
    """Hits, misses, edges and refusals all fit the output schema MCP clients are given."""
    from researchstore.contracts import has_output_schema, output_schema

    chunks = bees["chunks"]
    first, middle, last = chunks[0]["chunk_id"], chunks[5]["chunk_id"], chunks[-1]["chunk_id"]
    document_id = bees["document_id"]
    calls: list[tuple[str, Any]] = [
        ("research_chunk_search", {"query": "varroa", "limit": 50}),
        ("research_chunk_search", {"query": "zyzzyva"}),
        ("research_chunk_search", {"query": "varroa", "kind": "vtt"}),
        ("research_chunk_search", {"query": ""}),
        ("research_get_chunk", {"chunk_id": middle}),
        ("research_get_chunk", {"chunk_id": UNKNOWN}),
        ("research_get_report", {"report_id": bees["report_id"]}),
        ("research_get_report", {"report_id": 999_999}),
        ("get_chunks", {"ids": [c["chunk_id"] for c in chunks[:19]] + [UNKNOWN]}),
        ("get_chunks", {"ids": [middle, middle]}),
        ("get_chunks", {"ids": []}),
        ("get_chunk_next", {"id": first, "count": 100}),
        ("get_chunk_next", {"id": last}),
        ("get_chunk_prev", {"id": first}),
        ("get_chunk_prev", {"id": UNKNOWN}),
        ("get_chunk_neighbors", {"id": middle, "count": 100}),
        ("get_chunk_neighbors", {"id": UNKNOWN}),
        ("get_chunk_parents", {"id": middle}),
        ("get_chunk_parents", {"id": UNKNOWN}),
        ("get_document", {"id": document_id}),
        ("get_document", {"id": UNKNOWN}),
        ("get_document_chunks", {"id": document_id, "from": 0, "limit": 100}),
        ("get_document_chunks", {"id": document_id, "from": 10_000}),
        ("get_document_chunks", {"id": UNKNOWN}),
        ("get_document_chunks", {"id": document_id, "limit": 0}),
        ("research_resolve_chunk", {"chunk_id": middle}),
        ("research_resolve_chunk", {"chunk_id": UNKNOWN}),
    ]
    checked = 0
    for name, arguments in calls:
        if name not in TOOLS or not has_output_schema(name):
            continue
        envelope = tool_store.call(name, arguments)
        errors = list(validator(output_schema(name)).iter_errors(envelope))
        assert not errors, (name, arguments, [error.message for error in errors[:3]])
        checked += 1
    assert checked >= 25


def test_every_result_is_json(tool_store: Store, bees: dict[str, Any]) -> None:
    """Envelopes go over MCP and the CLI as JSON: they must round-trip."""
    anchor = bees["chunks"][1]["chunk_id"]
    calls = {
        "research_chunk_search": {"query": "varroa"},
        "research_get_chunk": {"chunk_id": anchor},
        "research_get_report": {"report_id": bees["report_id"]},
        "get_chunks": {"ids": [anchor]},
        "get_chunk_next": {"id": anchor},
        "get_chunk_prev": {"id": anchor},
        "get_chunk_neighbors": {"id": anchor},
        "get_chunk_parents": {"id": anchor},
        "get_document": {"id": bees["document_id"]},
        "get_document_chunks": {"id": bees["document_id"]},
    }
    for name, arguments in calls.items():
        envelope = tool_store.call(name, arguments)
        assert "result" in envelope, (name, envelope)
        assert json.loads(json.dumps(envelope)) == envelope
