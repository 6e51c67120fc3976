"""research_evidence_retrieve end to end: a real HTTPS server on loopback, real stores.

Every envelope is validated against the tool's contract and against seed
002's output schema (``tests/schemas``). The server and its certificate are
the ``site`` fixture; the retrievals here reach it through an explicit
``127.0.0.1/32`` allowance.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from helpers import (
    ARTICLE,
    CLI,
    FORMATS,
    OTHER_WORKSPACE,
    SEED_FORMATS,
    WORKSPACE,
    Site,
    load_schema,
    page,
    redirect,
    static,
)

from researchstore import Store, call_tool
from researchstore.catalogue import TOOLS
from researchstore.cli import main
from researchstore.contracts import ERROR, output_schema
from researchstore.evidence.config import RetrievalConfig
from researchstore.evidence.records import evidence_id_for
from researchstore.evidence.retrieve import retrieve
from researchstore.evidence.spec import INPUT_SCHEMA, MAX_SEGMENTS, MAX_TEXT
from researchstore.fetch import FetchPolicy
from researchstore.principal import Principal, acting_as

TOOL = "research_evidence_retrieve"
SEED_OUTPUT = load_schema("evidence_retrieve.output.json")
SEED_INPUT = load_schema("evidence_retrieve.input.json")


def vtt(cues: int, *, header: str = "", text: str = "Cue {}: the hive was inspected.") -> bytes:
    lines = ["WEBVTT" + (f"\n{header}" if header else ""), ""]
    for number in range(cues):
        lines += [f"{ms(number * 2000)} --> {ms(number * 2000 + 1500)}", text.format(number), ""]
    return "\n".join(lines).encode()


def ms(value: int) -> str:
    hours, rest = divmod(value, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02}:{minutes:02}:{seconds:02}.{millis:03}"


SRT_NB = (
    b"1\n00:00:01,000 --> 00:00:02,500\nBikubene ble <i>inspisert</i>.\n\n"
    b"2\n00:00:03,000 --> 00:00:04,000\nVarroa ble talt.\n"
)
LECTURE = page(
    "Lecture on pollination",
    "<h1>Lecture</h1><video src='/lecture.mp4'>"
    "<track kind='captions' srclang='en' label='English' src='captions/lecture-en.vtt' default>"
    "<track kind='subtitles' srclang='nb' label='Norsk' src='/captions/lecture-nb.srt'>"
    "<track kind='chapters' srclang='de' src='/captions/chapters.vtt'>"
    "</video><p>A recorded lecture.</p>",
)
LOGIN_FORM = page(
    "Sign in",
    "<form action='/session'><input name='user'><input type='password' name='pw'>"
    "<button>Sign in</button></form><p>Members only.</p>",
)


@pytest.fixture(scope="module")
def evidence_site(site: Site) -> Site:
    long_page = page(
        "Long report",
        "".join(
            f"<p>Paragraph {number}: dissolved oxygen fell below five milligrams per litre.</p>"
            for number in range(600)
        ),
    )
    site.server.routes.update(
        {
            "/article.html": static(ARTICLE),
            "/notes.txt": static(
                b"Field notes\n\nThe kingfisher nested under the footbridge.\n",
                content_type="text/plain; charset=utf-8",
            ),
            "/long.html": static(long_page),
            "/dated.html": static(
                page(
                    "Dated survey",
                    "<p>Otters returned to the lower river after the weir was removed.</p>",
                    head='<meta property="article:published_time" content="2025-03-04T08:00:00Z">',
                )
            ),
            "/nodes.html": static(page("Nodes", "<p>x</p>" * 4000)),
            "/meta.html": static(
                b"<html><head><title>Only a title</title><meta name=description "
                b"content='And a description.'></head><body></body></html>"
            ),
            "/blank.html": static(b"<html><body>   </body></html>"),
            "/login": static(LOGIN_FORM),
            "/private-notes": redirect("/login?next=/private-notes"),
            "/members.html": static(LOGIN_FORM),
            "/image.png": static(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", content_type="image/png"),
            "/binary.html": static(bytes(range(256)) * 8),
            "/lecture.html": static(LECTURE),
            "/captions/lecture-en.vtt": static(
                vtt(3, header="Language: en"), content_type="text/vtt"
            ),
            "/captions/lecture-nb.srt": static(SRT_NB, content_type="application/x-subrip"),
            "/captions.vtt": static(vtt(3), content_type="text/vtt; charset=utf-8"),
            "/captions.srt": static(SRT_NB, content_type="application/x-subrip"),
            "/served-as-text.vtt": static(vtt(2), content_type="text/plain"),
            "/many.vtt": static(vtt(1200, text="c{}"), content_type="text/vtt"),
            "/broken.vtt": static(
                b"WEBVTT\n\nnot a timing\nhello\n\n00:xx --> 00:01\nworld\n",
                content_type="text/vtt",
            ),
            "/bad-cues.vtt": static(
                b"WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nGood one\n\n"
                b"00:00:03.000 --> 00:00:02.000\nBackwards\n\n00:00:04.000 --> 00:00:05.000\n"
                b"Good two\n",
                content_type="text/vtt",
            ),
            "/empty.vtt": static(b"WEBVTT\n\n", content_type="text/vtt"),
            "/watch": static(page("A video", "<p>Watch this video on the platform.</p>")),
            "/changing.html": lambda handler: handler.send_bytes(site.extra["changing"]),
        }
    )
    site.extra["changing"] = page("Changing", "<p>First version: bees swarmed in May.</p>")
    return site


@pytest.fixture
def config(evidence_site: Site) -> RetrievalConfig:
    return RetrievalConfig(fetch=evidence_site.policy, max_nodes=2_000)


@pytest.fixture
def evidence_store(store: Store, config: RetrievalConfig) -> Iterator[Store]:
    store.retrieval = config  # as Store(..., retrieval=config) would
    yield store


def arguments(url: str, kind: str = "url_text", **extra: Any) -> dict[str, Any]:
    return {
        "url": url,
        "kind": kind,
        "workspace_id": WORKSPACE,
        "mutation_id": str(uuid.uuid4()),
        **extra,
    }


def check(envelope: dict[str, Any]) -> dict[str, Any]:
    """Validate against the contract (and the seed's schema); the envelope back.

    ``Store.call`` wraps the tool's result in an envelope; the result itself is
    seed 002's object, which is what MCP carries as structured content.
    """
    if "error" in envelope:
        jsonschema.validate(envelope, ERROR_ENVELOPE, format_checker=FORMATS)
        return envelope
    assert set(envelope) == {"result"}
    jsonschema.validate(envelope["result"], output_schema(TOOL), format_checker=FORMATS)
    jsonschema.validate(envelope["result"], SEED_OUTPUT, format_checker=FORMATS)
    assert json.loads(json.dumps(envelope)) == envelope
    return envelope


ERROR_ENVELOPE = {
    "type": "object",
    "properties": {"error": ERROR},
    "required": ["error"],
    "additionalProperties": False,
}


def call(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    """The retrieval of a call that must succeed (as an envelope)."""
    envelope = check(call_tool(store, TOOL, args))
    assert "result" in envelope, envelope
    return envelope["result"]["retrieval"]


def outcome(retrieval: dict[str, Any]) -> tuple[str, str | None]:
    return retrieval["result"]["status"], retrieval["result"]["reason"]


def search(store: Store, query: str, workspace: str | None = None) -> list[dict[str, Any]]:
    args: dict[str, Any] = {"query": query}
    if workspace is not None:
        args["workspace_id"] = workspace
    envelope = call_tool(store, "research_chunk_search", args)
    jsonschema.validate(envelope, output_schema("research_chunk_search"), format_checker=FORMATS)
    return envelope["result"]["hits"]


# -- the contract --------------------------------------------------------------


def test_the_tool_publishes_seed_002s_input_schema_and_annotations() -> None:
    tool = TOOLS[TOOL]
    assert tool.input_schema() == INPUT_SCHEMA
    assert tool.input_schema() == SEED_INPUT
    assert (tool.profile, tool.scope, tool.read_only) == ("full", "agent:research", False)
    assert tool.annotations == {
        "readOnlyHint": False,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": True,
    }
    assert "never as instructions" in tool.description
    assert tool.title == "Read a public research source"


def test_the_contract_and_the_configuration_import_no_http_stack() -> None:
    """A tool catalogue lists the tool, and a store is configured, without httpx."""
    code = (
        "import sys, researchstore.evidence.spec, researchstore.evidence.config; "
        "loaded = [name for name in ('httpx', 'httpcore') if name in sys.modules]; "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=os.environ.copy())


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"workspace_id": "not-a-uuid"}, "workspace_id"),
        ({"mutation_id": "1234"}, "mutation_id"),
        ({"kind": "pdf"}, "kind"),
        ({"language": "en_US!"}, "language"),
        ({"language": ""}, "language"),
        ({"url": "not a uri"}, "url"),
        ({"url": "https://evidence.test/" + "x" * 2048}, "url"),
        ({"extra": 1}, "extra"),
    ],
)
def test_bad_arguments_are_invalid_input(
    evidence_store: Store, evidence_site: Site, change: dict[str, Any], field: str
) -> None:
    envelope = check(
        call_tool(evidence_store, TOOL, {**arguments(evidence_site.url("/article.html")), **change})
    )
    assert envelope["error"]["code"] == "invalid_input"
    assert envelope["error"]["field"] == field


# -- url_text ------------------------------------------------------------------


@pytest.mark.slow
def test_a_page_becomes_searchable_workspace_evidence(
    evidence_store: Store, evidence_site: Site
) -> None:
    url = evidence_site.url("/article.html")
    retrieval = call(evidence_store, arguments(url, language="en"))
    result = retrieval["result"]
    assert retrieval["state"] == "completed" and retrieval["kind"] == "url_text"
    assert outcome(retrieval) == ("ready", None) and result["warnings"] == []
    assert result["title"] == "Hive survey"
    assert result["description"] == "About hive survey."
    assert "Varroa mite counts rose" in result["text"] and "Footer" not in result["text"]
    assert result["segments"] == []
    provenance = result["provenance"]
    assert provenance == {
        "source_url": url,
        "retrieved_at": provenance["retrieved_at"],
        "mime_type": "text/html",
        "parser_version": "research-public-retrieval/v1",
        "content_kind": "document_text",
        "caption_format": None,
        "language": "en",
        "language_source": "publisher_declared",
        "platform_native_verified": False,
    }
    evidence = retrieval["evidence"]
    assert evidence == {
        "evidence_id": evidence_id_for(WORKSPACE, url, "url_text", "en"),
        "revision": 1,
    }

    # Found only by a search in its workspace.
    [hit] = search(evidence_store, "varroa", WORKSPACE)
    assert hit["source"] == f"workspace:{WORKSPACE}" and "Varroa" in hit["text"]
    assert search(evidence_store, "varroa") == []
    assert search(evidence_store, "varroa", OTHER_WORKSPACE) == []

    # The navigation tools reach it like any document.
    def navigate(name: str, args: dict[str, Any]) -> dict[str, Any]:
        envelope = call_tool(evidence_store, name, args)
        # An undated page's chunk answers "" as seed 000's required date (helpers).
        formats = SEED_FORMATS if name == "research_get_chunk" else FORMATS
        jsonschema.validate(envelope, output_schema(name), format_checker=formats)
        return envelope

    parents = navigate("get_chunk_parents", {"id": hit["chunk_id"]})
    chain = parents["result"]["parents"]
    assert [node["kind"] for node in chain] == ["document", "report", "source_version"]
    assert chain[1]["name"] == evidence["evidence_id"]
    document = navigate("get_document", {"id": hit["document_id"]})
    assert document["result"]["document"]["title"] == "Hive survey"
    window = navigate("get_document_chunks", {"id": hit["document_id"]})
    assert "\n\n".join(c["text"] for c in window["result"]["chunks"]) == result["text"]
    report = navigate("research_get_report", {"report_id": hit["report_id"]})
    assert report["result"]["report"]["tags"]["url"] == url
    assert (
        navigate("research_get_chunk", {"chunk_id": hit["chunk_id"]})["result"]["chunk"]["text"]
        == hit["text"]
    )
    neighbours = navigate("get_chunk_neighbors", {"id": hit["chunk_id"]})
    assert neighbours["result"]["chunk"]["chunk_id"] == hit["chunk_id"]

    # A rebuilt index keeps evidence in its workspace.
    evidence_store.rebuild_index()
    assert len(search(evidence_store, "varroa", WORKSPACE)) == 1
    assert search(evidence_store, "varroa") == []


def test_evidence_is_dated_by_its_page_never_by_the_day_it_was_retrieved(
    evidence_store: Store, evidence_site: Site
) -> None:
    undated = call(evidence_store, arguments(evidence_site.url("/article.html"), language="en"))
    dated = call(evidence_store, arguments(evidence_site.url("/dated.html"), language="en"))
    assert outcome(undated) == outcome(dated) == ("ready", None)
    [hit] = search(evidence_store, "varroa", WORKSPACE)
    assert hit["date"] is None  # the page says no date: retrieved_at is when it was fetched
    assert undated["result"]["provenance"]["retrieved_at"]
    [otter] = search(evidence_store, "otters weir", WORKSPACE)
    assert otter["date"] == "2025-03-04"
    for found, date in ((hit, None), (otter, "2025-03-04")):
        report = call_tool(evidence_store, "research_get_report", {"report_id": found["report_id"]})
        assert report["result"]["report"]["date"] == date
    in_range = {"date_from": "2025-01-01", "date_to": "2025-12-31"}
    envelope = call_tool(
        evidence_store,
        "research_chunk_search",
        {"query": "varroa OR otters", "workspace_id": WORKSPACE, **in_range},
    )
    assert [h["chunk_id"] for h in envelope["result"]["hits"]] == [otter["chunk_id"]]


def test_plain_text_and_a_declared_language_mismatch(
    evidence_store: Store, evidence_site: Site
) -> None:
    text = call(evidence_store, arguments(evidence_site.url("/notes.txt")))
    assert outcome(text) == ("ready", None)
    assert "kingfisher" in text["result"]["text"]
    assert text["result"]["provenance"]["mime_type"] == "text/plain"
    other = call(evidence_store, arguments(evidence_site.url("/article.html"), language="nb"))
    assert outcome(other) == ("ready", None)
    assert other["result"]["warnings"] == ["language_mismatch"]


@pytest.mark.slow
def test_limits_make_a_partial_result(evidence_store: Store, evidence_site: Site) -> None:
    long = call(evidence_store, arguments(evidence_site.url("/long.html")))
    assert outcome(long) == ("partial", "text_limited")
    assert MAX_TEXT - 100 < len(long["result"]["text"]) <= MAX_TEXT
    assert long["evidence"] is not None
    nodes = call(evidence_store, arguments(evidence_site.url("/nodes.html")))
    assert outcome(nodes) == ("partial", "nodes_limited")
    cut = call(evidence_store, arguments(evidence_site.url("/truncated.html")))
    assert outcome(cut) == ("partial", "source_partial")
    assert "first half arrived" in cut["result"]["text"]


@pytest.mark.parametrize(
    ("path", "status", "reason"),
    [
        ("/meta.html", "empty", "metadata_only"),
        ("/blank.html", "empty", "no_text"),
        ("/private-notes", "blocked", "login_required"),
        ("/members.html", "blocked", "login_required"),
        ("/image.png", "unsupported", "unsupported_media"),
        ("/captions.vtt", "unsupported", "unsupported_media"),
        ("/binary.html", "unsupported", "unsupported_content"),
        ("/brotli.html", "unsupported", "unsupported_content"),
        ("/bomb.html", "unsupported", "response_too_large"),
        ("/endless.html", "unsupported", "response_too_large"),
        ("/401", "blocked", "access_denied"),
        ("/403", "blocked", "access_denied"),
        ("/404", "unavailable", "not_found"),
        ("/410", "unavailable", "not_found"),
        ("/500", "unavailable", "unavailable"),
        ("/503", "unavailable", "unavailable"),
        ("/to-http", "blocked", "unsafe_url"),
        ("/to-private", "blocked", "unsafe_url"),
    ],
)
def test_page_outcomes(
    evidence_store: Store, evidence_site: Site, path: str, status: str, reason: str
) -> None:
    retrieval = call(evidence_store, arguments(evidence_site.url(path)))
    assert retrieval["state"] == "completed"
    assert outcome(retrieval) == (status, reason)
    assert retrieval["evidence"] is None
    result = retrieval["result"]
    assert result["text"] == "" and result["segments"] == []
    if reason == "metadata_only":
        assert result["title"] == "Only a title"
        assert result["description"] == "And a description."
        assert result["provenance"]["content_kind"] == "metadata_only"
    else:
        assert result["provenance"]["content_kind"] == "none"


def test_rate_limits_carry_retry_after(evidence_store: Store, evidence_site: Site) -> None:
    limited = call(evidence_store, arguments(evidence_site.url("/429")))
    assert outcome(limited) == ("rate_limited", "rate_limited")
    assert limited["result"]["retry_after_seconds"] == 120
    busy = call(evidence_store, arguments(evidence_site.url("/503")))
    assert busy["result"]["retry_after_seconds"] == 30


def test_unsafe_and_offline(
    evidence_store: Store, evidence_site: Site, config: RetrievalConfig
) -> None:
    # The default policy refuses the loopback test server itself.
    evidence_store.retrieval = replace(
        config,
        fetch=FetchPolicy(
            resolver=evidence_site.policy.resolver, ssl_context=evidence_site.client_context
        ),
    )
    for url in (
        evidence_site.url("/article.html"),
        evidence_site.url("/a", "127.0.0.1"),
        "http://example.com/",
        "https://localhost/",
        "ftp://example.com/x",
    ):
        retrieval = call(evidence_store, arguments(url))
        assert outcome(retrieval) == ("blocked", "unsafe_url"), url
        assert retrieval["result"]["provenance"]["source_url"] is None
    evidence_store.retrieval = replace(config, fetch=replace(config.fetch, egress=False))
    offline = call(evidence_store, arguments(evidence_site.url("/article.html")))
    assert outcome(offline) == ("unavailable", "egress_unavailable")


@pytest.mark.slow
def test_timeout_and_cancel(
    evidence_store: Store, evidence_site: Site, config: RetrievalConfig
) -> None:
    evidence_store.retrieval = replace(config, fetch=replace(config.fetch, timeout_s=0.6))
    slow = call(evidence_store, arguments(evidence_site.url("/slow.html")))
    assert outcome(slow) == ("unavailable", "timeout")
    cancel = threading.Event()
    timer = threading.Timer(0.2, cancel.set)
    timer.start()
    try:
        cancelled = retrieve(
            evidence_store,
            url=evidence_site.url("/slow.html"),
            kind="url_text",
            workspace_id=WORKSPACE,
            mutation_id=str(uuid.uuid4()),
            config=config,
            cancel=cancel,
        )
    finally:
        timer.cancel()
    check({"result": cancelled})
    assert cancelled["retrieval"]["state"] == "cancelled"
    assert outcome(cancelled["retrieval"]) == ("cancelled", "cancelled")


# -- published_captions --------------------------------------------------------


def test_a_caption_file_becomes_timed_evidence(evidence_store: Store, evidence_site: Site) -> None:
    retrieval = call(
        evidence_store, arguments(evidence_site.url("/captions.vtt"), "published_captions")
    )
    result = retrieval["result"]
    assert outcome(retrieval) == ("ready", None)
    assert result["segments"][0] == {
        "start_ms": 0,
        "end_ms": 1500,
        "text": "Cue 0: the hive was inspected.",
    }
    assert result["text"] == "\n".join(s["text"] for s in result["segments"])
    provenance = result["provenance"]
    assert (provenance["content_kind"], provenance["caption_format"], provenance["mime_type"]) == (
        "published_caption_file",
        "webvtt",
        "text/vtt",
    )
    assert provenance["platform_native_verified"] is False
    [hit] = search(evidence_store, "inspected", WORKSPACE)
    assert (hit["start_ms"], hit["end_ms"]) == (0, 5500) and hit["kind"] == "vtt"

    srt = call(evidence_store, arguments(evidence_site.url("/captions.srt"), "published_captions"))
    assert srt["result"]["provenance"]["caption_format"] == "subrip"
    assert srt["result"]["segments"][0]["text"] == "Bikubene ble inspisert."
    plain = call(
        evidence_store, arguments(evidence_site.url("/served-as-text.vtt"), "published_captions")
    )
    assert outcome(plain) == ("ready", None)
    assert plain["result"]["provenance"]["mime_type"] == "text/plain"


def test_a_page_track_is_chosen_by_language(evidence_store: Store, evidence_site: Site) -> None:
    url = evidence_site.url("/lecture.html")
    default = call(evidence_store, arguments(url, "published_captions"))
    assert outcome(default) == ("ready", None)
    assert default["result"]["provenance"]["source_url"] == evidence_site.url(
        "/captions/lecture-en.vtt"
    )
    assert default["result"]["provenance"]["language"] == "en"
    assert default["result"]["title"] == "Lecture on pollination"

    norwegian = call(evidence_store, arguments(url, "published_captions", language="nb-NO"))
    assert outcome(norwegian) == ("ready", None)
    assert norwegian["result"]["provenance"]["language"] == "nb"
    assert norwegian["result"]["provenance"]["caption_format"] == "subrip"
    assert norwegian["evidence"]["evidence_id"] != default["evidence"]["evidence_id"]

    german = call(evidence_store, arguments(url, "published_captions", language="de"))
    assert outcome(german) == ("empty", "language_mismatch")  # only chapters in German
    assert german["evidence"] is None


@pytest.mark.parametrize(
    ("url", "status", "reason"),
    [
        ("/article.html", "empty", "no_captions"),
        ("https://www.youtube.com:{port}/watch?v=abc", "unsupported", "unsupported_source"),
        ("/broken.vtt", "unsupported", "invalid_captions"),
        ("/empty.vtt", "empty", "no_captions"),
        ("/image.png", "unsupported", "unsupported_media"),
        ("/404", "unavailable", "not_found"),
    ],
)
def test_caption_outcomes(
    evidence_store: Store, evidence_site: Site, url: str, status: str, reason: str
) -> None:
    url = url.format(port=evidence_site.server.port) if "{" in url else evidence_site.url(url)
    retrieval = call(evidence_store, arguments(url, "published_captions"))
    assert outcome(retrieval) == (status, reason)
    assert retrieval["evidence"] is None and retrieval["result"]["segments"] == []


@pytest.mark.slow
def test_caption_limits(evidence_store: Store, evidence_site: Site) -> None:
    bad = call(evidence_store, arguments(evidence_site.url("/bad-cues.vtt"), "published_captions"))
    assert outcome(bad) == ("partial", "invalid_cues")
    assert [s["text"] for s in bad["result"]["segments"]] == ["Good one", "Good two"]
    many = call(evidence_store, arguments(evidence_site.url("/many.vtt"), "published_captions"))
    assert outcome(many) == ("partial", "cues_limited")
    assert len(many["result"]["segments"]) == MAX_SEGMENTS
    assert many["evidence"] is not None


# -- receipts ------------------------------------------------------------------


def test_the_same_call_returns_the_stored_receipt(
    evidence_store: Store, evidence_site: Site
) -> None:
    args = arguments(evidence_site.url("/article.html"))
    first = call(evidence_store, args)
    fetched = evidence_site.requests_for("/article.html")
    again = call(evidence_store, dict(args))
    assert again == first
    assert evidence_site.requests_for("/article.html") == fetched  # not fetched again
    upper = call(evidence_store, {**args, "workspace_id": WORKSPACE.upper()})
    assert upper == first

    changed = check(call_tool(evidence_store, TOOL, {**args, "kind": "published_captions"}))
    assert changed["error"]["code"] == "invalid_input"
    assert changed["error"]["field"] == "mutation_id"
    assert changed["error"]["details"]["retrieval_id"] == first["id"]
    # Mutation ids are per workspace.
    elsewhere = call(evidence_store, {**args, "workspace_id": OTHER_WORKSPACE})
    assert elsewhere["id"] != first["id"] and elsewhere["workspace_id"] == OTHER_WORKSPACE


def test_receipts_expire(
    evidence_store: Store, evidence_site: Site, config: RetrievalConfig
) -> None:
    now = [datetime(2099, 1, 15, 9, 0, tzinfo=UTC)]
    evidence_store.retrieval = replace(
        config, clock=lambda: now[0], receipt_ttl=timedelta(hours=24)
    )
    args = arguments(evidence_site.url("/article.html"))
    first = call(evidence_store, args)
    assert (first["created_at"], first["valid_until"]) == (
        "2099-01-15T09:00:00Z",
        "2099-01-16T09:00:00Z",
    )
    now[0] += timedelta(hours=23, minutes=59)
    assert call(evidence_store, args)["state"] == "completed"
    now[0] += timedelta(minutes=1)
    expired = call(evidence_store, args)
    assert expired["state"] == "expired"
    assert expired["result"] == first["result"] and expired["evidence"] == first["evidence"]


@pytest.mark.slow
def test_a_concurrent_call_sees_the_receipt_running(
    evidence_store: Store, evidence_site: Site, config: RetrievalConfig
) -> None:
    # The fetch runs for 2 s: time for the second call to find it running on a busy machine.
    evidence_store.retrieval = replace(config, fetch=replace(config.fetch, timeout_s=2.0))
    args = arguments(evidence_site.url("/slow.html"))
    results: list[dict[str, Any]] = []
    worker = threading.Thread(target=lambda: results.append(call(evidence_store, args)))
    worker.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not evidence_site.requests_for("/slow.html"):
        time.sleep(0.02)
    time.sleep(0.1)
    running = call(evidence_store, args)
    worker.join(10)
    assert running["state"] == "running"
    assert (running["result"], running["evidence"], running["settled_at"]) == (None, None, None)
    assert results and outcome(results[0]) == ("unavailable", "timeout")
    assert call(evidence_store, args) == results[0]


@pytest.mark.slow
def test_a_receipt_whose_process_died_is_unconfirmed(evidence_site: Site, tmp_path: Path) -> None:
    """kill -9 in the middle of a fetch: the next call says unconfirmed, never success."""
    db = tmp_path / "crash.db"
    mutation = str(uuid.uuid4())
    env = {
        **os.environ,
        "RESEARCHSTORE_FETCH_ALLOW": "127.0.0.1/32",
        "RESEARCHSTORE_FETCH_CA_BUNDLE": evidence_site.ca_file,
        "RESEARCHSTORE_FETCH_RESOLVE": "evidence.test=127.0.0.1",
        "RESEARCHSTORE_FETCH_TIMEOUT": "60",
    }
    url = evidence_site.url("/slow.html")
    process = subprocess.Popen(
        [
            *CLI,
            "retrieve",
            str(db),
            url,
            "--kind",
            "url_text",
            "--workspace",
            WORKSPACE,
            "--mutation-id",
            mutation,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        state = None
        while time.monotonic() < deadline and state != "running":
            time.sleep(0.05)
            state = _receipt_state(db, mutation)
        assert state == "running"
        process.kill()
        process.wait(10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    with Store(db, progress=False) as store:
        store.retrieval = RetrievalConfig(fetch=evidence_site.policy)
        args = {"url": url, "kind": "url_text", "workspace_id": WORKSPACE, "mutation_id": mutation}
        unconfirmed = call(store, args)
        assert unconfirmed["state"] == "unconfirmed"
        assert unconfirmed["result"] is None and unconfirmed["evidence"] is None
        assert unconfirmed["settled_at"] is not None
        assert call(store, args) == unconfirmed


def _receipt_state(db: Path, mutation: str) -> str | None:
    if not db.exists():
        return None
    conn = sqlite3.connect(db, timeout=1)
    try:
        row = conn.execute(
            "SELECT state FROM retrievals WHERE mutation_id = ?", (mutation,)
        ).fetchone()
    except sqlite3.OperationalError:
        return None  # not migrated yet
    finally:
        conn.close()
    return row[0] if row else None


def test_an_error_leaves_no_receipt(
    evidence_store: Store, evidence_site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = arguments(evidence_site.url("/article.html"))

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr("researchstore.evidence.retrieve.write_evidence", broken)
    envelope = check(call_tool(evidence_store, TOOL, args))
    assert envelope["error"]["code"] == "internal"
    monkeypatch.undo()
    assert outcome(call(evidence_store, args)) == ("ready", None)


# -- evidence ------------------------------------------------------------------


@pytest.mark.slow
def test_revision_rises_only_when_the_content_changes(
    evidence_store: Store, evidence_site: Site
) -> None:
    url = evidence_site.url("/changing.html")
    first = call(evidence_store, arguments(url))
    [old_hit] = search(evidence_store, "swarmed", WORKSPACE)
    same = call(evidence_store, arguments(url))
    assert (
        same["evidence"]
        == first["evidence"]
        == {"evidence_id": first["evidence"]["evidence_id"], "revision": 1}
    )
    assert search(evidence_store, "swarmed", WORKSPACE)[0]["chunk_id"] == old_hit["chunk_id"]

    evidence_site.extra["changing"] = page(
        "Changing", "<p>Second version: the queen was replaced.</p>"
    )
    try:
        second = call(evidence_store, arguments(url))
    finally:
        evidence_site.extra["changing"] = page(
            "Changing", "<p>First version: bees swarmed in May.</p>"
        )
    assert second["evidence"] == {"evidence_id": first["evidence"]["evidence_id"], "revision": 2}
    assert search(evidence_store, "swarmed", WORKSPACE) == []
    [new_hit] = search(evidence_store, "queen", WORKSPACE)
    assert new_hit["report_id"] == old_hit["report_id"]
    resolved = call_tool(
        evidence_store, "research_resolve_chunk", {"chunk_id": old_hit["chunk_id"]}
    )["result"]["resolution"]
    assert resolved["status"] == "replaced"


def test_workspaces_are_isolated(evidence_store: Store, evidence_site: Site) -> None:
    url = evidence_site.url("/article.html")
    mine = call(evidence_store, arguments(url))
    theirs = call(evidence_store, {**arguments(url), "workspace_id": OTHER_WORKSPACE})
    assert mine["evidence"]["evidence_id"] != theirs["evidence"]["evidence_id"]
    [hit] = search(evidence_store, "oxalic", WORKSPACE)
    [other] = search(evidence_store, "oxalic", OTHER_WORKSPACE)
    assert hit["report_id"] != other["report_id"]
    assert other["source"] == f"workspace:{OTHER_WORKSPACE}"

    key = Principal(scopes=frozenset({"agent:research"}), workspaces=frozenset({WORKSPACE}))
    with acting_as(key):
        assert len(search(evidence_store, "oxalic", WORKSPACE)) == 1
        refused = call_tool(
            evidence_store,
            "research_chunk_search",
            {"query": "oxalic", "workspace_id": OTHER_WORKSPACE},
        )
        assert refused["error"]["code"] == "not_entitled"
        elsewhere = check(
            call_tool(evidence_store, TOOL, {**arguments(url), "workspace_id": OTHER_WORKSPACE})
        )
        assert elsewhere["error"]["code"] == "not_entitled"
    reader = Principal(scopes=frozenset(), workspaces=frozenset({WORKSPACE}))
    with acting_as(reader):
        assert check(call_tool(evidence_store, TOOL, arguments(url)))["error"]["code"] == (
            "not_entitled"
        )


def test_evidence_survives_reopening_the_store(
    evidence_site: Site, config: RetrievalConfig, tmp_path: Path
) -> None:
    db = tmp_path / "reopen.db"
    with Store(db, progress=False) as store:
        store.retrieval = config
        call(store, arguments(evidence_site.url("/article.html")))
    with Store(db, progress=False) as store:
        assert len(search(store, "varroa", WORKSPACE)) == 1
        assert search(store, "varroa") == []


# -- the CLI -------------------------------------------------------------------


def test_cli_retrieve(evidence_site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCHSTORE_FETCH_ALLOW", "127.0.0.1/32")
    monkeypatch.setenv("RESEARCHSTORE_FETCH_CA_BUNDLE", evidence_site.ca_file)
    monkeypatch.setenv("RESEARCHSTORE_FETCH_RESOLVE", "evidence.test=127.0.0.1")
    db = str(tmp_path / "cli.db")
    runner = CliRunner()
    mutation = str(uuid.uuid4())
    done = runner.invoke(
        main,
        [
            "retrieve",
            db,
            evidence_site.url("/lecture.html"),
            "--kind",
            "published_captions",
            "--workspace",
            WORKSPACE,
            "--language",
            "nb",
            "--mutation-id",
            mutation,
        ],
    )
    assert done.exit_code == 0, done.output
    envelope = check(json.loads(done.output))
    assert envelope["result"]["retrieval"]["mutation_id"] == mutation
    assert outcome(envelope["result"]["retrieval"]) == ("ready", None)
    missing = runner.invoke(
        main,
        ["retrieve", db, evidence_site.url("/404"), "--kind", "url_text", "--workspace", WORKSPACE],
    )
    assert missing.exit_code == 1
    assert outcome(check(json.loads(missing.output))["result"]["retrieval"]) == (
        "unavailable",
        "not_found",
    )
    bad = runner.invoke(
        main,
        ["retrieve", db, evidence_site.url("/404"), "--kind", "url_text", "--workspace", "nope"],
    )
    assert bad.exit_code == 2
    monkeypatch.setenv("RESEARCHSTORE_EGRESS", "off")
    offline = runner.invoke(
        main,
        ["retrieve", db, "https://example.com/", "--kind", "url_text", "--workspace", WORKSPACE],
    )
    assert outcome(json.loads(offline.output)["result"]["retrieval"]) == (
        "unavailable",
        "egress_unavailable",
    )
