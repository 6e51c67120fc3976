"""What a fetched response says: a page's main text or a caption file's segments.

The reading half of evidence retrieval: ``read_content`` asks the injected
``Fetcher`` for the URL (and, for a page's ``<track>``, for its caption
file) and turns the response, or the ``FetchError``, into an ``Outcome``
with the status, reason, text, segments and provenance that seed 002's
schema asks for, using the ingest parsers. It never raises for content.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from typing import Any

from researchstore.evidence.config import RetrievalConfig
from researchstore.evidence.outcome import Outcome, clip
from researchstore.evidence.spec import MAX_LANGUAGE_LENGTH, MAX_SEGMENTS, MAX_TEXT
from researchstore.fetch.errors import FetchError
from researchstore.fetch.fetcher import Fetched, Fetcher
from researchstore.fetch.urls import join_url, url_host, url_path
from researchstore.ingest.captions import parse_srt, parse_vtt
from researchstore.ingest.decode import declared_encoding, decode_text, normalize_language
from researchstore.ingest.html import parse_html
from researchstore.ingest.model import Block, ParsedDocument, Segment
from researchstore.ingest.text import parse_text
from researchstore.kinds import DocumentKind
from researchstore.storage.dates import stamp

__all__ = ["read_content"]

_HTML_TYPES = frozenset(("text/html", "application/xhtml+xml"))
_SUBRIP_TYPES = frozenset(("application/x-subrip", "application/srt", "text/srt"))
_CAPTION_TYPES = _SUBRIP_TYPES | {"text/vtt"}
#: Types a server may give a caption file it knows nothing about.
_VAGUE_TYPES = frozenset((None, "text/plain", "application/octet-stream", "binary/octet-stream"))
#: Video platforms whose captions are not published as files on the page.
_PLATFORMS = (
    "youtube.com", "youtu.be", "youtube-nocookie.com", "vimeo.com", "tiktok.com",
    "facebook.com", "fb.watch", "instagram.com", "twitch.tv", "dailymotion.com", "dai.ly",
    "x.com", "twitter.com", "rumble.com", "bilibili.com",
)  # fmt: skip
_LOGIN_PATH = re.compile(
    r"/(?:log[-_]?in|sign[-_]?in|signon|auth|authenticate|sso|session/new|"
    r"accounts/login|users/sign_in|oauth2?/authorize)(?:[/._?-]|$)",
    re.IGNORECASE,
)
_PASSWORD_INPUT = re.compile(rb"<input\b[^>]*\btype\s*=\s*[\"']?password", re.IGNORECASE)
_SRT_TIMING = re.compile(rb"\d+:\d{1,2}:\d{1,2}[,.]\d{1,3}\s*-->\s*\d+:\d{1,2}:\d{1,2}")


def read_content(
    url: str,
    kind: str,
    language: str | None,
    *,
    fetcher: Fetcher,
    config: RetrievalConfig,
    cancel: threading.Event | None = None,
) -> Outcome:
    """Fetch and read ``url`` as ``kind``; every failure becomes an outcome, never an exception.

    Every fetch goes through ``fetcher`` (the caller has already chosen it,
    ``config.fetcher`` or the default), under one deadline
    (``config.fetch.timeout_s``) shared by a page and its caption file.
    """
    session = _Session(fetcher, config, time.monotonic() + config.fetch.timeout_s, cancel)
    try:
        if kind == "url_text":
            return _read_page_text(url, language, session)
        return _read_captions(url, language, session)
    except FetchError as error:
        return _failure(kind, error, config)


@dataclass(frozen=True, slots=True)
class _Session:
    """One retrieval's fetcher, configuration, shared deadline and cancel event."""

    fetcher: Fetcher
    config: RetrievalConfig
    deadline: float
    cancel: threading.Event | None

    def get(self, url: str, accept: str, language: str | None) -> Fetched:
        headers = {"Accept-Language": f"{language}, *;q=0.5"} if language else None
        return self.fetcher(
            url,
            policy=self.config.fetch,
            accept=accept,
            headers=headers,
            deadline=self.deadline,
            cancel=self.cancel,
        )

    def parse_page(self, fetched: Fetched) -> ParsedDocument:
        options = {} if self.config.max_nodes is None else {"max_nodes": self.config.max_nodes}
        return _parse(parse_html, _with_charset(fetched), "html", **options)


def _language(value: str | None) -> str | None:
    tag = normalize_language(value)
    return tag if tag and len(tag) <= MAX_LANGUAGE_LENGTH else None


def _same_language(wanted: str, declared: str) -> bool:
    return wanted.lower().split("-")[0] == declared.lower().split("-")[0]


def _failure(kind: str, error: FetchError, config: RetrievalConfig) -> Outcome:
    return Outcome(
        kind,
        error.status,
        error.reason,
        source_url=error.url,
        retrieved_at=stamp(config.clock()),
        retry_after_seconds=error.retry_after_seconds,
    )


def _fetched_outcome(kind: str, fetched: Fetched, config: RetrievalConfig) -> Outcome:
    outcome = Outcome(
        kind,
        "ready",
        source_url=fetched.url,
        retrieved_at=stamp(config.clock()),
        mime_type=fetched.media_type,
    )
    if not fetched.complete:
        outcome.flag("partial", "source_partial")
    return outcome


# -- url_text ------------------------------------------------------------------


def _read_page_text(url: str, language: str | None, session: _Session) -> Outcome:
    accept = "text/html, application/xhtml+xml, text/plain;q=0.8, */*;q=0.1"
    fetched = session.get(url, accept, language)
    outcome = _fetched_outcome("url_text", fetched, session.config)
    media_type = fetched.media_type
    if media_type in _CAPTION_TYPES:
        outcome.status, outcome.reason = "unsupported", "unsupported_media"
        outcome.warnings = []
        return outcome  # a caption file: kind=published_captions reads it
    if media_type in _HTML_TYPES or (media_type in _VAGUE_TYPES and _looks_like_html(fetched)):
        parsed = session.parse_page(fetched)
        if _login_wall(fetched, parsed):
            return Outcome(
                "url_text",
                "blocked",
                "login_required",
                source_url=fetched.url,
                retrieved_at=outcome.retrieved_at,
                mime_type=media_type,
            )
    elif media_type == "text/plain":
        parsed = _parse(parse_text, fetched.body, "text")
    else:
        outcome.status, outcome.reason = "unsupported", "unsupported_media"
        outcome.warnings = []
        return outcome
    outcome.title, outcome.description = parsed.title, parsed.description
    outcome.language = _language(parsed.language)
    if language and outcome.language and not _same_language(language, outcome.language):
        outcome.warnings.append("language_mismatch")
    if parsed.status == "invalid":
        return _without_content(outcome, "unsupported", "unsupported_content")
    if parsed.status == "partial":
        outcome.flag(
            "partial", "nodes_limited" if parsed.reason == "nodes_limited" else "response_too_large"
        )
    blocks, limited = _limit_blocks(parsed.blocks)
    if limited:
        outcome.flag("partial", "text_limited")
    outcome.text = "\n\n".join(block.text for block in blocks)
    if not outcome.text.strip():
        if clip(outcome.title, 200) or clip(outcome.description, 2000):
            outcome = _without_content(outcome, "empty", "metadata_only")
            outcome.content_kind = "metadata_only"
            return outcome
        return _without_content(outcome, "empty", "no_text")
    outcome.content_kind = "document_text"
    outcome.document = replace(
        parsed,
        blocks=blocks,
        segments=[],
        status="ok" if outcome.status == "ready" else "partial",
        reason=outcome.reason,
        skipped=parsed.skipped[:100],
    )
    return outcome


def _parse(
    parser: Callable[..., ParsedDocument], data: bytes, kind: DocumentKind, **options: Any
) -> ParsedDocument:
    """Run an ingest parser; content that breaks it is ``invalid``, as in ``parse_file``."""
    try:
        return parser(data, **options)
    except Exception as error:
        return ParsedDocument(
            kind=kind,
            status="invalid",
            reason="parser_error",
            skipped=[f"{type(error).__name__}: {error}"[:500]],
        )


def _without_content(outcome: Outcome, status: str, reason: str) -> Outcome:
    outcome.status, outcome.reason = status, reason
    outcome.text, outcome.segments, outcome.document = "", [], None
    outcome.warnings = [w for w in outcome.warnings if w == "language_mismatch"]
    return outcome


def _looks_like_html(fetched: Fetched) -> bool:
    head = fetched.body[:1024].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html")) or b"<html" in head


def _with_charset(fetched: Fetched) -> bytes:
    """The body, with the header's charset made visible to the parser (the header wins)."""
    body = fetched.body
    if (
        fetched.charset
        and declared_encoding(body) is None
        and not body.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff"))
    ):
        label = re.sub(r"[^A-Za-z0-9_.:-]", "", fetched.charset)[:40]
        return f'<meta charset="{label}">'.encode("ascii") + body
    return body


def _login_wall(fetched: Fetched, parsed: ParsedDocument) -> bool:
    """A redirect to a sign-in page, or a page that is little but a password form."""
    if fetched.redirects and _LOGIN_PATH.search(url_path(fetched.url)):
        return True
    if _PASSWORD_INPUT.search(fetched.body):
        text = sum(len(block.text) for block in parsed.blocks)
        return text < 1500
    return False


def _limit_blocks(blocks: list[Block]) -> tuple[list[Block], bool]:
    """The blocks whose joined text fits ``MAX_TEXT``; the last one cut at a word."""
    kept: list[Block] = []
    used = 0
    for block in blocks:
        separator = 2 if kept else 0
        if used + separator + len(block.text) <= MAX_TEXT:
            kept.append(block)
            used += separator + len(block.text)
            continue
        room = MAX_TEXT - used - separator
        cut = _cut_at_word(block.text, room)
        if cut:
            kept.append(replace(block, text=cut))
        return kept, True
    return kept, False


def _cut_at_word(text: str, room: int) -> str:
    if room <= 0:
        return ""
    cut = text[:room]
    if len(text) > room and " " in cut[room // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip()


# -- published_captions --------------------------------------------------------


def _read_captions(url: str, language: str | None, session: _Session) -> Outcome:
    accept = (
        "text/vtt, application/x-subrip, text/srt, text/html;q=0.8, "
        "application/xhtml+xml;q=0.8, */*;q=0.1"
    )
    fetched = session.get(url, accept, language)
    page: ParsedDocument | None = None
    track_language: str | None = None
    if fetched.media_type in _HTML_TYPES or (
        fetched.media_type in _VAGUE_TYPES and _looks_like_html(fetched)
    ):
        page_outcome = _fetched_outcome("published_captions", fetched, session.config)
        page = session.parse_page(fetched)
        if _login_wall(fetched, page):
            return _without_content(page_outcome, "blocked", "login_required")
        page_outcome.title, page_outcome.description = page.title, page.description
        tracks = _find_tracks(fetched)
        if not tracks:
            if _is_platform(fetched.url) or _is_platform(url):
                return _without_content(page_outcome, "unsupported", "unsupported_source")
            return _without_content(page_outcome, "empty", "no_captions")
        track = _choose_track(tracks, language)
        if track is None:
            return _without_content(page_outcome, "empty", "language_mismatch")
        track_language = _language(track.srclang)
        try:
            caption_url = join_url(fetched.url, track.src)
        except ValueError:
            return _without_content(page_outcome, "unsupported", "invalid_captions")
        fetched = session.get(caption_url, accept, language)
    return _caption_outcome(fetched, page, track_language, language, session.config)


def _caption_outcome(
    fetched: Fetched,
    page: ParsedDocument | None,
    track_language: str | None,
    language: str | None,
    config: RetrievalConfig,
) -> Outcome:
    outcome = _fetched_outcome("published_captions", fetched, config)
    if page is not None:
        outcome.title, outcome.description = page.title, page.description
    caption_format = _caption_format(fetched)
    if caption_format is None:
        return _without_content(outcome, "unsupported", "unsupported_media")
    outcome.caption_format = caption_format
    if caption_format == "webvtt":
        parsed = _parse(parse_vtt, fetched.body, "vtt")
    else:
        parsed = _parse(parse_srt, fetched.body, "srt")
    outcome.title = outcome.title or parsed.title
    outcome.language = track_language or _language(parsed.language)
    if language and outcome.language and not _same_language(language, outcome.language):
        outcome.warnings.append("language_mismatch")
    if parsed.status == "invalid":
        reason = "unsupported_content" if parsed.reason == "binary" else "invalid_captions"
        return _without_content(outcome, "unsupported", reason)
    if parsed.status == "partial":
        outcome.flag("partial", "invalid_cues")
    segments, limit = _limit_segments(parsed.segments)
    if limit:
        outcome.flag("partial", limit)
    if not segments:
        return _without_content(outcome, "empty", "no_captions")
    outcome.segments = segments
    outcome.text = "\n".join(segment.text for segment in segments)
    outcome.content_kind = "published_caption_file"
    outcome.document = replace(
        parsed,
        segments=segments,
        blocks=[],
        title=outcome.title,
        description=outcome.description,
        language=outcome.language,
        status="ok" if outcome.status == "ready" else "partial",
        reason=outcome.reason,
        skipped=parsed.skipped[:100],
    )
    return outcome


def _caption_format(fetched: Fetched) -> str | None:
    """``webvtt`` or ``subrip`` from the media type, else from the bytes; None: not captions."""
    head = fetched.body[:2048].lstrip(b"\xef\xbb\xbf \t\r\n")
    if fetched.media_type in _CAPTION_TYPES or fetched.media_type in _VAGUE_TYPES:
        if head.startswith(b"WEBVTT"):
            return "webvtt"
        if _SRT_TIMING.search(head):
            return "subrip"
        if fetched.media_type == "text/vtt":
            return "webvtt"
        if fetched.media_type in _SUBRIP_TYPES:
            return "subrip"
        path = url_path(fetched.url).lower()
        if path.endswith(".vtt"):
            return "webvtt"
        if path.endswith(".srt"):
            return "subrip"
    return None


def _limit_segments(segments: list[Segment]) -> tuple[list[Segment], str | None]:
    kept: list[Segment] = []
    used = 0
    for segment in segments:
        text = segment.text.strip()[:MAX_TEXT]
        if not text or segment.end_ms <= 0 or segment.start_ms < 0:
            continue
        if len(kept) == MAX_SEGMENTS:
            return kept, "cues_limited"
        separator = 1 if kept else 0
        if used + separator + len(text) > MAX_TEXT:
            return kept, "text_limited"
        kept.append(Segment(segment.start_ms, segment.end_ms, text))
        used += separator + len(text)
    return kept, None


def _is_platform(url: str) -> bool:
    try:
        host = url_host(url).lower().rstrip(".")
    except ValueError:
        return False
    return any(host == name or host.endswith("." + name) for name in _PLATFORMS)


@dataclass(frozen=True, slots=True)
class _Track:
    src: str
    kind: str
    srclang: str | None
    default: bool


class _TrackFinder(HTMLParser):
    """The ``<track>`` elements of a page (and its ``<base href>``), nothing else."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tracks: list[_Track] = []
        self.base: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name.lower(): value for name, value in attrs}
        if tag == "base" and self.base is None and attributes.get("href"):
            self.base = (attributes["href"] or "").strip()
        if tag != "track" or len(self.tracks) >= 100:
            return
        # A missing or unknown kind means subtitles (the HTML standard).
        kind = (attributes.get("kind") or "subtitles").strip().lower()
        if kind not in ("captions", "subtitles", "descriptions", "chapters", "metadata"):
            kind = "subtitles"
        src = (attributes.get("src") or "").strip()
        if kind in ("captions", "subtitles") and src:
            self.tracks.append(
                _Track(src, kind, attributes.get("srclang"), "default" in attributes)
            )


def _find_tracks(fetched: Fetched) -> list[_Track]:
    text, _ = decode_text(fetched.body, declared=declared_encoding(fetched.body))
    finder = _TrackFinder()
    finder.feed(text)
    finder.close()
    if finder.base:
        try:
            base = join_url(fetched.url, finder.base)
        except ValueError:
            return finder.tracks
        return [replace(track, src=join_url(base, track.src)) for track in finder.tracks]
    return finder.tracks


def _choose_track(tracks: list[_Track], language: str | None) -> _Track | None:
    """The track in ``language`` (exact tag first, then the same primary language)."""
    if language is None:
        defaults = [track for track in tracks if track.default]
        return (defaults or tracks)[0]
    wanted = language.lower()
    matches: tuple[Callable[[str], bool], ...] = (
        lambda tag: tag == wanted,
        lambda tag: tag.split("-")[0] == wanted.split("-")[0],
    )
    for match in matches:
        for track in tracks:
            if track.srclang and match(track.srclang.strip().lower().replace("_", "-")):
                return track
    return None
