"""Reading content through an injected ``Fetcher``: canned responses, no sockets.

``CannedFetcher`` plays the part httpx's ``MockTransport`` plays for a
client: it answers each URL from a table (a ``Fetched`` or a ``FetchError``)
and records what it was asked. The fetcher itself (TLS, addresses, limits)
is tested against a real loopback server in ``test_fetch.py``.
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from researchstore import Store, call_tool
from researchstore.evidence.config import RetrievalConfig
from researchstore.evidence.content import read_content
from researchstore.evidence.retrieve import retrieve
from researchstore.fetch import Fetched, Fetcher, FetchError, FetchPolicy

WORKSPACE = "11111111-1111-4111-8111-111111111111"
SITE = "https://evidence.example.org"

ARTICLE = (
    b'<!doctype html><html lang="en"><head><title>Hive survey</title>'
    b'<meta name="description" content="About hive survey."></head><body>'
    b"<nav><a href='/'>Home</a></nav><main><h1>Hive survey</h1>"
    b"<p>Varroa mite counts rose sharply after the second brood cycle.</p>"
    b"<p>The colony was treated with oxalic acid once the brood had capped.</p>"
    b"</main><footer>Footer links</footer></body></html>"
)
LECTURE = (
    b"<!doctype html><html lang='en'><head><title>Lecture on pollination</title></head>"
    b"<body><h1>Lecture</h1><video src='/lecture.mp4'>"
    b"<track kind='captions' srclang='en' src='captions/lecture-en.vtt' default>"
    b"<track kind='subtitles' srclang='nb' src='/captions/lecture-nb.srt'>"
    b"<track kind='chapters' srclang='de' src='/captions/chapters.vtt'>"
    b"</video><p>A recorded lecture.</p></body></html>"
)
VTT_EN = (
    b"WEBVTT\n\n00:00:00.000 --> 00:00:01.500\nThe hive was inspected.\n\n"
    b"00:00:02.000 --> 00:00:03.500\nThe mites were counted.\n"
)
SRT_NB = (
    b"1\n00:00:01,000 --> 00:00:02,500\nBikubene ble <i>inspisert</i>.\n\n"
    b"2\n00:00:03,000 --> 00:00:04,000\nVarroa ble talt.\n"
)
LOGIN_FORM = (
    b"<!doctype html><html><head><title>Sign in</title></head><body>"
    b"<form action='/session'><input name='user'><input type='password' name='pw'>"
    b"<button>Sign in</button></form><p>Members only.</p></body></html>"
)


@dataclass(frozen=True)
class Request:
    url: str
    accept: str
    headers: dict[str, str]
    deadline: float | None


@dataclass
class CannedFetcher:
    """A ``Fetcher`` answering from ``responses``; an unknown URL is a 404."""

    responses: dict[str, Fetched | FetchError]
    requests: list[Request] = field(default_factory=list)

    def __call__(
        self,
        url: str,
        *,
        policy: FetchPolicy,
        accept: str = "*/*",
        headers: Mapping[str, str] | None = None,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
    ) -> Fetched:
        self.requests.append(Request(url, accept, dict(headers or {}), deadline))
        answer = self.responses.get(url)
        if answer is None:
            raise FetchError(
                "unavailable", "not_found", f"HTTP 404 from {url}", url=url, http_status=404
            )
        if isinstance(answer, FetchError):
            raise answer
        return answer

    def urls(self) -> list[str]:
        return [request.url for request in self.requests]


def response(
    path: str, body: bytes, media_type: str = "text/html", **options: Any
) -> tuple[str, Fetched]:
    url = SITE + path
    return url, Fetched(
        url=url, status_code=200, media_type=media_type, charset=None, body=body, **options
    )


def canned(*responses: tuple[str, Fetched | FetchError]) -> CannedFetcher:
    return CannedFetcher(dict(responses))


def read(fetcher: Fetcher, path: str, kind: str = "url_text", language: str | None = None) -> Any:
    return read_content(
        SITE + path, kind, language, fetcher=fetcher, config=RetrievalConfig(fetcher=fetcher)
    )


@pytest.fixture(autouse=True)
def no_sockets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here runs without the network: a socket is a failure."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a socket was opened; the fetcher is canned here")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


# -- url_text ------------------------------------------------------------------


def test_a_pages_main_text() -> None:
    fetcher = canned(response("/article.html", ARTICLE))
    outcome = read(fetcher, "/article.html")
    result = outcome.result()
    assert (result["status"], result["reason"], result["warnings"]) == ("ready", None, [])
    assert (result["title"], result["description"]) == ("Hive survey", "About hive survey.")
    assert "Varroa mite counts rose" in result["text"] and "Footer" not in result["text"]
    assert result["provenance"]["content_kind"] == "document_text"
    assert result["provenance"]["language"] == "en"
    assert result["provenance"]["source_url"] == SITE + "/article.html"
    assert outcome.document is not None and outcome.document.kind == "html"
    [request] = fetcher.requests
    assert request.accept.startswith("text/html") and request.headers == {}


def test_a_page_read_through_retrieve_becomes_evidence(store: Store) -> None:
    fetcher = canned(response("/article.html", ARTICLE))
    retrieval = retrieve(
        store,
        url=SITE + "/article.html",
        kind="url_text",
        workspace_id=WORKSPACE,
        mutation_id=str(uuid.uuid4()),
        config=RetrievalConfig(fetcher=fetcher),
    )["retrieval"]
    assert retrieval["state"] == "completed"
    assert retrieval["result"]["status"] == "ready"
    assert retrieval["evidence"]["revision"] == 1
    hits = call_tool(
        store, "research_chunk_search", {"query": "varroa", "workspace_id": WORKSPACE}
    )["result"]["hits"]
    assert [hit["source"] for hit in hits] == [f"workspace:{WORKSPACE}"]


def test_the_tool_uses_the_stores_configuration(store: Store) -> None:
    fetcher = canned(response("/article.html", ARTICLE))
    store.retrieval = RetrievalConfig(fetcher=fetcher)  # as Store(..., retrieval=...) would
    arguments = {
        "url": SITE + "/article.html",
        "kind": "url_text",
        "workspace_id": WORKSPACE,
        "mutation_id": str(uuid.uuid4()),
    }
    envelope = call_tool(store, "research_evidence_retrieve", arguments)
    assert envelope["result"]["retrieval"]["result"]["status"] == "ready"
    assert fetcher.urls() == [SITE + "/article.html"]


@pytest.mark.parametrize(
    ("answer", "status", "reason"),
    [
        (response("/members.html", LOGIN_FORM), "blocked", "login_required"),
        (
            response("/private", LOGIN_FORM, redirects=(SITE + "/login?next=/private",)),
            "blocked",
            "login_required",
        ),
        (
            response("/image.png", b"\x89PNG\r\n\x1a\n", "image/png"),
            "unsupported",
            "unsupported_media",
        ),
        (response("/captions.vtt", VTT_EN, "text/vtt"), "unsupported", "unsupported_media"),
        (response("/blank.html", b"<html><body>   </body></html>"), "empty", "no_text"),
    ],
    ids=["password-form", "redirect-to-login", "image", "caption-file", "blank"],
)
def test_pages_that_are_not_evidence(answer: tuple[str, Fetched], status: str, reason: str) -> None:
    url, fetched = answer
    outcome = read(canned(answer), url.removeprefix(SITE))
    result = outcome.result()
    assert (result["status"], result["reason"]) == (status, reason)
    assert result["text"] == "" and outcome.document is None
    assert result["provenance"]["mime_type"] == (
        fetched.media_type if fetched.media_type != "image/png" else None
    )


def test_a_fetch_error_is_the_outcome() -> None:
    limited = FetchError(
        "rate_limited", "rate_limited", "HTTP 429", url=SITE + "/busy", retry_after_seconds=120
    )
    result = read(canned((SITE + "/busy", limited)), "/busy").result()
    assert (result["status"], result["reason"]) == ("rate_limited", "rate_limited")
    assert result["retry_after_seconds"] == 120
    assert result["provenance"]["source_url"] == SITE + "/busy"


# -- published_captions --------------------------------------------------------


def test_captions_are_chosen_from_a_pages_tracks_by_language() -> None:
    fetcher = canned(
        response("/lecture.html", LECTURE),
        response("/captions/lecture-en.vtt", VTT_EN, "text/vtt"),
        response("/captions/lecture-nb.srt", SRT_NB, "application/x-subrip"),
    )
    norwegian = read(fetcher, "/lecture.html", "published_captions", "nb-NO").result()
    assert (norwegian["status"], norwegian["reason"]) == ("ready", None)
    assert [s["text"] for s in norwegian["segments"]] == [
        "Bikubene ble inspisert.",
        "Varroa ble talt.",
    ]
    provenance = norwegian["provenance"]
    assert provenance["source_url"] == SITE + "/captions/lecture-nb.srt"
    assert (provenance["language"], provenance["caption_format"]) == ("nb", "subrip")
    assert norwegian["title"] == "Lecture on pollination"
    assert fetcher.urls() == [SITE + "/lecture.html", SITE + "/captions/lecture-nb.srt"]
    page, captions = fetcher.requests
    assert page.headers == captions.headers == {"Accept-Language": "nb-NO, *;q=0.5"}
    assert page.deadline is not None and page.deadline == captions.deadline  # one limit for both

    fetcher.requests.clear()
    default = read(fetcher, "/lecture.html", "published_captions").result()
    assert default["provenance"]["source_url"] == SITE + "/captions/lecture-en.vtt"
    assert default["provenance"]["caption_format"] == "webvtt"
    assert default["segments"][0] == {
        "start_ms": 0,
        "end_ms": 1500,
        "text": "The hive was inspected.",
    }

    fetcher.requests.clear()
    german = read(fetcher, "/lecture.html", "published_captions", "de").result()
    assert (german["status"], german["reason"]) == ("empty", "language_mismatch")
    assert fetcher.urls() == [SITE + "/lecture.html"]  # chapters are not captions


def test_a_page_without_tracks_has_no_captions() -> None:
    result = read(
        canned(response("/article.html", ARTICLE)), "/article.html", "published_captions"
    ).result()
    assert (result["status"], result["reason"]) == ("empty", "no_captions")
    assert result["segments"] == [] and result["title"] == "Hive survey"
