"""The shapes that flow through ingest: parse → blocks/segments → chunks.

Parsers (``html.py``, ``captions.py``, ``text.py``) return a ``ParsedDocument``.
Chunking (``chunking.py``) turns its blocks or segments into ``ChunkDraft``s.
The pipeline writes those to SQLite. Nothing here imports a heavy dependency.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from operator import attrgetter
from typing import Any, Literal

from researchstore.kinds import DocumentKind

#: ``ok``: parsed fully. ``partial``: parsed, but a limit cut it or parts were
#: skipped (``reason`` says which). ``empty``: nothing readable. ``invalid``:
#: not a file of its kind at all (binary, undecodable, no cue parsed).
ParseStatus = Literal["ok", "partial", "empty", "invalid"]


@dataclass(frozen=True, slots=True)
class Block:
    """One readable unit of an HTML or text document, in reading order."""

    text: str
    #: ``heading``, ``paragraph``, ``list``, ``table``, ``code``, ``quote``.
    kind: str = "paragraph"
    #: Headings above this block, outermost first (for a heading: its parents).
    heading_path: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Segment:
    """One timed caption cue: markup stripped, entities decoded."""

    start_ms: int
    end_ms: int
    text: str


@dataclass(slots=True)
class ParsedDocument:
    """What a parser read from one file, before chunking."""

    kind: DocumentKind
    status: ParseStatus = "ok"
    #: A machine-readable reason when status is not ``ok``: ``nodes_limited``,
    #: ``too_large``, ``invalid_captions``, ``invalid_cues``, ``no_text``,
    #: ``binary``, ``undecodable``.
    reason: str | None = None
    title: str | None = None
    description: str | None = None
    language: str | None = None
    #: ISO date (YYYY-MM-DD) the page declares, if any.
    date: str | None = None
    #: Where ``date`` came from: ``meta`` (a <meta> tag or front matter),
    #: ``time`` (a <time datetime>), ``json-ld``, ``byline`` (a date written
    #: above the article), or ``report`` (the report.json around the file,
    #: ``parse`` only); None with no date. Never the day it was read.
    date_source: str | None = None
    #: The encoding the bytes were decoded with (``utf-8``, ``cp1252``, ...).
    encoding: str | None = None
    blocks: list[Block] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    #: Human-readable notes on what was skipped and why, e.g.
    #: ``"cue 3 (line 12): bad timestamp '00:01:xx.000'"``.
    skipped: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ChunkDraft:
    """A chunk before it has an id: a slice of its document's text."""

    position: int
    text: str
    token_count: int
    heading_path: tuple[str, ...] = ()
    start_ms: int | None = None
    end_ms: int | None = None
    #: Offsets of ``text`` in the document's full text (``document_text``).
    char_start: int = 0
    char_end: int = 0

    def __reduce__(self) -> tuple[type[ChunkDraft], tuple[Any, ...]]:
        # Pickled (from an ingest worker) as its fields, in order: the
        # dataclass default for a frozen class with slots sets them one at a
        # time in Python, a sixth of what the main process spent on a
        # worker's results.
        return (ChunkDraft, _chunk_fields(self))


_chunk_fields = attrgetter(*(item.name for item in fields(ChunkDraft)))
