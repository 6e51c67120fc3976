"""WebVTT (webvtt-py) and SubRip (pysrt) captions into timed segments.

The only module that imports ``webvtt`` and ``pysrt``. Both libraries are
fed one cue block at a time: webvtt-py 0.6 silently drops a cue it cannot
read (and rejects a whole file in strict mode), and pysrt either drops bad
cues silently or stops at the first one. Reading block by block lets every
good cue survive and every bad one be named in ``skipped``.

Outcomes (``ParsedDocument.status`` / ``reason``):

- ``ok``: every cue read.
- ``partial`` / ``invalid_cues``: some cues skipped (bad timings, negative
  times, end before start); the others kept.
- ``invalid`` / ``invalid_captions``: text, but no cue could be read, or not
  captions at all (a malformed or misplaced WEBVTT header, or neither a header
  nor a cue at the top of the file).
- ``invalid`` / ``binary``: not text at all.
- ``empty`` / ``no_text``: an empty file, or cues without any text.

Bounded for any file: lines are decoded and read one at a time (never the
whole text as one string), each cue is kept once, as the segment it becomes,
and at most ``MAX_NOTES`` notes and ``MAX_BLOCK_LINES`` lines a block are
kept (what is past them is counted and said). Memory stays within a few
times the file's size and time grows with it linearly, for WebVTT and SubRip
alike; a file without a header is read by the named format's reader, and by
the other only when the first did not read it cleanly.
"""

from __future__ import annotations

import html
import html.entities
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, islice, pairwise
from operator import attrgetter

import pysrt
import webvtt
from webvtt.errors import MalformedCaptionError, MalformedFileError

from researchstore.ingest.decode import decode_lines, normalize_language, unreadable
from researchstore.ingest.model import ParsedDocument, Segment
from researchstore.kinds import DocumentKind

__all__ = ["parse_srt", "parse_vtt"]

#: A cue starting at most this long after the previous one ended can repeat it.
_FOLLOW_ON_MS = 1000
#: Notes on what was skipped kept per file; past them, a count.
MAX_NOTES = 200
#: Lines kept per block (a cue with its text, a comment, a header); past
#: them, a block's lines are counted and said, not kept.
MAX_BLOCK_LINES = 1000
_NOTE_LINE = re.compile(r"line (\d+)")
# SubRip has no escapes, so "<" starts a tag only when a ">" closes it on the line.
_SRT_TAG = re.compile(r"<[^<>\n]*>")
# WebVTT: "<" always starts a tag, which runs to the next ">" or the cue's end
# (a literal "<" must be written "&lt;"), as in the spec's cue text tokenizer.
_VTT_TAG = re.compile(r"<[^>]*>?")
# Character references end with ";": "&amp;", "&#233;", "&#x2014;". Without it
# ("&lt", "AT&T") the text is kept as written, as WebVTT players show it.
_REFERENCE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_HEADER = re.compile(r"WEBVTT(?:[ \t]|$)")
# A two-field time ("mm:ss.ttt") whose first field has three digits or more.
_WIDE_MINUTES = re.compile(r"(?<![\d:])(\d{3,}):(\d{2})\.(\d{3})(?![\d:])")
# SubRip files from Aegisub and friends carry ASS override blocks like {\an8}.
_ASS_OVERRIDE = re.compile(r"\{\\[^{}\n]*\}")
_DIGITS = re.compile(r"^\s*\d+\s*$")
_HEADER_FIELD = re.compile(r"^\s*([A-Za-z][\w -]*?)\s*[:=]\s*(.*?)\s*$")
_NOTE_TITLE = re.compile(r"^\s*title\s*[:=]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
# hh:mm:ss,mmm or hh:mm:ss.mmm; a leading minus is caught to report it, as
# pysrt would read "-00:00:01,000" as plus one second.
_SRT_TIMING = re.compile(
    r"^\s*(-?)\d+:\d{1,2}:\d{1,2}[,.]\d{1,3}\s*-->\s*(-?)\d+:\d{1,2}:\d{1,2}[,.]\d{1,3}(?:\s|$)"
)


@dataclass(slots=True)
class _Reading:
    """What one reader made of a file: its cues as segments, and notes on the rest."""

    #: False for a trial read that only counts.
    keep: bool = True
    #: Cues with text and valid times, in file order, each already a segment.
    cues: list[Segment] = field(default_factory=list)
    #: Cue blocks read (with or without text, valid times or not).
    count: int = 0
    #: Notes on blocks and cues that could not be read (``noted`` counts them all).
    notes: list[str] = field(default_factory=list)
    noted: int = 0
    #: Cues read but refused for their times (negative, ending before they start).
    refused: int = 0
    title: str | None = None
    language: str | None = None
    #: A WebVTT header or at least one cue timing line was seen.
    recognised: bool = False

    def note(self, note: str) -> None:
        """Say why a block or cue was not read."""
        self.noted += 1
        self._keep_note(note)

    def add(self, number: int, line: int, start_ms: int, end_ms: int, lines: list[str]) -> None:
        """Take one cue read from the file: checked, and kept as a segment."""
        self.count += 1
        why = None
        if start_ms < 0 or end_ms < 0:
            why = "negative time"
        elif end_ms < start_ms:
            why = "ends before it starts"
        if why is not None:
            self.refused += 1
            self._keep_note(_note(number, line, why))
        elif lines and self.keep:
            self.cues.append(Segment(start_ms, end_ms, "\n".join(lines)))

    def _keep_note(self, note: str) -> None:
        if self.keep and len(self.notes) < MAX_NOTES:
            self.notes.append(note)

    @property
    def clean(self) -> bool:
        return self.count > 0 and not self.noted and not self.refused

    def skipped(self) -> list[str]:
        """The notes in file order, and how many more there were."""
        notes = sorted(self.notes, key=_note_line)
        more = self.noted + self.refused - len(notes)
        if more > 0:
            notes.append(f"and {more} more cues or blocks skipped")
        return notes


def parse_vtt(data: bytes) -> ParsedDocument:
    """Parse WebVTT bytes; a SubRip file with a ``.vtt`` name is read too."""
    return _parse_captions(data, "vtt")


def parse_srt(data: bytes) -> ParsedDocument:
    """Parse SubRip bytes; a WebVTT file with a ``.srt`` name is read too."""
    return _parse_captions(data, "srt")


Reader = Callable[[Iterable[str], int, bool], _Reading]


def _parse_captions(data: bytes, kind: str) -> ParsedDocument:
    doc_kind: DocumentKind = "vtt" if kind == "vtt" else "srt"
    early = unreadable(data, doc_kind)
    if early is not None:
        return early
    doc = ParsedDocument(kind=doc_kind)
    # WebVTT's parsing rules turn a NUL into U+FFFD (SubRip says nothing;
    # the same is done for it).
    lines, doc.encoding = decode_lines(data, nul_replaced=True)
    # Blank lines before the first cue of a SubRip file are tolerated; line
    # numbers still count them.
    opening = _opening(lines)
    if opening is None:
        doc.status, doc.reason = "empty", "no_text"
        return doc
    first_line, head = opening
    problem = None
    if _HEADER.match(head) and first_line > 1:
        problem = f"the WEBVTT header is on line {first_line}, not the first line"
    elif head.lstrip().startswith("WEBVTT") and not _HEADER.match(head):
        problem = f"malformed WEBVTT header {_shorten(head)}"
    elif not _HEADER.match(head) and "-->" not in head and not _DIGITS.match(head):
        # Neither a header nor a cue: what comes first is not captions.
        problem = f"no WEBVTT header; the file starts with {_shorten(head)}"
    if problem is not None:
        doc.status, doc.reason = "invalid", "invalid_captions"
        doc.skipped.append(problem)
        return doc

    def read(reader: Reader, *, keep: bool = True) -> _Reading:
        return reader(islice(lines, first_line - 1, None), first_line, keep)

    if _HEADER.match(head):
        reading = read(_read_vtt)
    else:
        # No header: the file may be misnamed. The named format's reader
        # goes first; when it did not read the file cleanly, the other one
        # counts what it would read, and reads it if it reads more cues
        # (or as many, with fewer skipped). Only one reading is ever kept.
        named, other = (_read_vtt, _read_srt) if kind == "vtt" else (_read_srt, _read_vtt)
        reading = read(named)
        if not reading.clean:
            trial = read(other, keep=False)
            if (trial.count, -trial.noted) > (reading.count, -reading.noted):
                del reading
                reading = read(other)

    doc.title, doc.language = reading.title, reading.language
    if not reading.count:
        doc.skipped = reading.skipped()
        if reading.recognised and not reading.noted:
            doc.status, doc.reason = "empty", "no_text"
        else:
            doc.status, doc.reason = "invalid", "invalid_captions"
            if not reading.recognised:
                doc.skipped.append("no WEBVTT header and no cue timings found")
        return doc

    doc.segments = _segments(reading.cues)
    doc.skipped = reading.skipped()
    if not doc.segments:
        doc.status = "invalid" if doc.skipped else "empty"
        doc.reason = "invalid_captions" if doc.skipped else "no_text"
    elif doc.skipped:
        doc.status, doc.reason = "partial", "invalid_cues"
    return doc


def _opening(lines: Iterable[str]) -> tuple[int, str] | None:
    """The first line that is not empty, and its number; None if there is no text."""
    numbered = enumerate(lines, 1)
    for number, line in numbered:
        if line:
            if line.strip() or any(rest.strip() for _, rest in numbered):
                return number, line
            return None
    return None


# -- blocks --------------------------------------------------------------------


def _split_blocks(
    lines: Iterable[str], *, vtt: bool, first_line: int = 1
) -> Iterator[tuple[int, list[str], int]]:
    """Split lines into ``(first_line_number, lines, lines_not_kept)`` blocks.

    A block ends at an empty line (WebVTT: truly empty, as YouTube cues hold
    lines of one space; SubRip: blank). As in webvtt-py, a timing line that
    cannot belong to the current block starts a new one, so a missing blank
    line does not merge two cues; a cue number left on the previous line
    moves with it. A block keeps at most ``MAX_BLOCK_LINES`` lines; the
    rest are counted.
    """
    start = 0
    block: list[str] = []
    dropped = 0
    last = ""  # the block's last line, kept or not
    in_header = False
    for number, line in enumerate(lines, first_line):
        if number == first_line:
            in_header = vtt and line.startswith("WEBVTT")
        empty = not line if vtt else not line.strip()
        if empty:
            if block:
                yield start, block, dropped
                in_header = False
            block, dropped = [], 0
            continue
        if block and "-->" in line and (in_header or len(block) > 1 or "-->" in block[0]):
            in_header = False
            carried = []
            if not vtt and len(block) > 1 and _DIGITS.match(last):
                carried = [last]
                if dropped:
                    dropped -= 1
                else:
                    block.pop()
            yield start, block, dropped
            start, block, dropped = number - len(carried), carried, 0
        if not block:
            start = number
        if len(block) < MAX_BLOCK_LINES:
            block.append(line)
        else:
            dropped += 1
        last = line
    if block:
        yield start, block, dropped


def _timing_index(block: list[str]) -> int | None:
    """Return the index of a block's timing line: first, or after an id."""
    if "-->" in block[0]:
        return 0
    if len(block) > 1 and "-->" in block[1]:
        return 1
    return None


def _clean_lines(raw_lines: list[str], *, srt: bool) -> list[str]:
    """Strip cue markup, decode entities, collapse whitespace, drop empty lines."""
    # Most cues hold no markup and no reference: each pattern is run only
    # where its first character is (a third of a caption file's parse).
    if srt:
        lines = [
            _ASS_OVERRIDE.sub("", _SRT_TAG.sub("", raw)) if "<" in raw or "{" in raw else raw
            for raw in raw_lines
        ]
    else:
        # A WebVTT tag can run over a line break; markup is read across lines.
        joined = "\n".join(raw_lines)
        lines = (_VTT_TAG.sub("", joined) if "<" in joined else joined).split("\n")
    cleaned = []
    for raw in lines:
        if "&" in raw:
            raw = _REFERENCE.sub(_decode_reference, raw)
        line = " ".join(raw.split())  # runs of whitespace as one space, none at the ends
        if line:
            cleaned.append(line)
    return cleaned


def _decode_reference(match: re.Match[str]) -> str:
    reference = match.group()
    if reference[1] == "#":
        return html.unescape(reference)
    return html.entities.html5.get(reference[1:], reference)


def _note(number: int, line: int, why: str) -> str:
    return f"cue {number} (line {line}): {why}"


def _note_line(note: str) -> int:
    match = _NOTE_LINE.search(note)
    return int(match.group(1)) if match else 0


def _shorten(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


# -- WebVTT ---------------------------------------------------------------------


def _read_vtt(lines: Iterable[str], first_line: int = 1, keep: bool = True) -> _Reading:
    reading = _Reading(keep=keep)
    blocks = _split_blocks(lines, vtt=True, first_line=first_line)
    opening = next(blocks, None)
    if opening is None:
        return reading
    has_header = opening[1][0].startswith("WEBVTT")
    if has_header:
        reading.recognised = True
        _read_vtt_header(opening[1], reading)
    number = 0
    for block_line, block, dropped in blocks if has_header else chain([opening], blocks):
        timing = _timing_index(block)
        if timing is None:
            head = block[0].strip()
            if not "".join(block).strip():
                continue  # lines of spaces only: nothing to read, nothing lost
            if head.startswith("NOTE"):
                match = _NOTE_TITLE.search("\n".join(block)[4:])
                if match and reading.title is None:
                    reading.title = match.group(1)
            elif head == "STYLE" or head.startswith("REGION"):
                continue
            elif has_header or "-->" in "".join(block):
                # Text outside any cue is never shown by a player; say so
                # rather than drop it silently.
                reading.note(f"block at line {block_line}: no cue timings, {_shorten(head)}")
            continue
        number += 1
        reading.recognised = True
        line = block_line + timing
        fast = _canonical_timing(block[timing])
        if fast is not None:
            start_ms, end_ms = fast
            raw_lines = block[timing + 1 :]
        else:
            caption = _vtt_caption(block)
            if caption is None:
                reading.note(_note(number, line, f"bad timing line {_shorten(block[timing])}"))
                continue
            start_ms = caption.start_time.in_milliseconds()
            end_ms = caption.end_time.in_milliseconds()
            raw_lines = list(caption.lines)
        if dropped:
            reading.note(
                _note(number, line, f"{dropped} lines past the first {len(block)} not read")
            )
        reading.add(number, line, start_ms, end_ms, _clean_lines(raw_lines, srt=False))
    return reading


# The timing line almost every file uses: "00:01:02.345 --> 00:01:04.000"
# (hours optional) plus optional settings. Read here directly, it costs a
# regex; anything else goes through webvtt-py, which reads a cue in about
# 40 microseconds (a third of a caption file's ingest time, measured).
_CANONICAL_TIMING = re.compile(
    r"(?:(\d{2,}):)?([0-5]\d):([0-5]\d)\.(\d{3})[ \t]+-->[ \t]+"
    r"(?:(\d{2,}):)?([0-5]\d):([0-5]\d)\.(\d{3})(?:[ \t]+[^\n]*)?"
)


def _canonical_timing(line: str) -> tuple[int, int] | None:
    match = _CANONICAL_TIMING.fullmatch(line.strip())
    if match is None:
        return None
    h1, m1, s1, f1, h2, m2, s2, f2 = match.groups()
    start = ((int(h1 or 0) * 60 + int(m1)) * 60 + int(s1)) * 1000 + int(f1)
    end = ((int(h2 or 0) * 60 + int(m2)) * 60 + int(s2)) * 1000 + int(f2)
    return start, end


def _read_vtt_header(header: list[str], reading: _Reading) -> None:
    for line in header[1:]:
        match = _HEADER_FIELD.match(line)
        if match is None:
            continue
        name, value = match.group(1).lower(), match.group(2)
        if name == "language" and reading.language is None:
            reading.language = normalize_language(value)
        elif name == "title" and value and reading.title is None:
            reading.title = value


# The timing line webvtt-py 0.6 reads at the most lenient (its CUE_TIMINGS_PATTERN).
_LENIENT_TIMESTAMP = r"(?:\d+:)?\d{1,2}:\d{1,2}\.\d{1,3}"
_LENIENT_TIMING = re.compile(rf"\s*{_LENIENT_TIMESTAMP}\s*-->\s*{_LENIENT_TIMESTAMP}")


def _vtt_caption(block: list[str]) -> webvtt.Caption | None:
    """Read one cue block with webvtt-py, or None if it cannot be read.

    Strict first; then lenient, which also accepts short fields such as
    ``0:1:5.2`` and unknown cue settings, which are harmless here.
    """
    timing = _timing_index(block) or 0
    timing_line = _WIDE_MINUTES.sub(_wide_minutes, block[timing])
    if not _LENIENT_TIMING.match(timing_line):
        return None  # webvtt-py would refuse it too, after about 40 microseconds a try
    block = [*block[:timing], timing_line, *block[timing + 1 :]]
    source = "WEBVTT\n\n" + "\n".join(block)
    for strict in (True, False):
        try:
            captions = webvtt.from_string(source, strict=strict).captions
        except (MalformedCaptionError, MalformedFileError, ValueError):
            continue
        if len(captions) == 1:
            return captions[0]
    return None


def _wide_minutes(match: re.Match[str]) -> str:
    """``120:00.000`` → ``120:00:00.000``: a first field over 59 counts hours.

    The WebVTT spec's rule for the first field, read as vtt.js reads it;
    ``000:05.000`` (not over 59) stays minutes and seconds.
    """
    first, second, fraction = match.groups()
    if int(first) > 59:
        return f"{int(first)}:{second}:00.{fraction}"
    return f"{int(first):02d}:{second}.{fraction}"


# -- SubRip --------------------------------------------------------------------


# The timing line almost every SubRip file uses: "00:01:02,345 --> 00:01:04,000"
# (coordinates may follow a space). Read here directly, as pysrt reads it;
# anything else goes through pysrt (half a SubRip file's parse time, measured).
_CANONICAL_SRT_TIMING = re.compile(
    r"[ \t]*(\d+):(\d{2}):(\d{2})[,.](\d{3})[ \t]*-->[ \t]*"
    r"(\d+):(\d{2}):(\d{2})[,.](\d{3})(?: [^\n]*)?"
)


def _canonical_srt_timing(line: str) -> tuple[int, int] | None:
    match = _CANONICAL_SRT_TIMING.fullmatch(line.rstrip())
    if match is None:
        return None
    h1, m1, s1, f1, h2, m2, s2, f2 = map(int, match.groups())
    return ((h1 * 60 + m1) * 60 + s1) * 1000 + f1, ((h2 * 60 + m2) * 60 + s2) * 1000 + f2


class _OpenCue:
    """The last cue read from a SubRip file: later text blocks may still belong to it."""

    __slots__ = ("end_ms", "line", "lines", "number", "start_ms")

    def __init__(self, number: int, line: int, start_ms: int, end_ms: int, lines: list[str]):
        self.number, self.line = number, line
        self.start_ms, self.end_ms = start_ms, end_ms
        self.lines = lines


def _read_srt(lines: Iterable[str], first_line: int = 1, keep: bool = True) -> _Reading:
    reading = _Reading(keep=keep)
    number = 0
    open_cue: _OpenCue | None = None

    def close() -> None:
        if open_cue is not None:
            reading.add(
                open_cue.number, open_cue.line, open_cue.start_ms, open_cue.end_ms, open_cue.lines
            )

    for block_line, block, dropped in _split_blocks(lines, vtt=False, first_line=first_line):
        timing = _timing_index(block)
        if timing is None:
            if "-->" in "".join(block):
                reading.note(f"block at line {block_line}: no cue timings, {_shorten(block[0])}")
            elif open_cue is not None and not _DIGITS.match(block[0]):
                # A blank line inside a cue's text is a common authoring slip
                # in SubRip: the text still belongs to the cue before it.
                room = MAX_BLOCK_LINES - len(open_cue.lines)
                more = _clean_lines(block, srt=True)
                open_cue.lines.extend(more[: max(0, room)])
                dropped += max(0, len(more) - max(0, room))
                if dropped:
                    reading.note(
                        f"block at line {block_line}: {dropped} lines of cue "
                        f"{open_cue.number} past the first {MAX_BLOCK_LINES} not read"
                    )
            elif not _DIGITS.match(block[0]):
                reading.note(
                    f"block at line {block_line}: text before the first cue, {_shorten(block[0])}"
                )
            continue
        number += 1
        line = block_line + timing
        timing_line = block[timing]
        match = _SRT_TIMING.match(timing_line)
        if match is None:
            reading.note(_note(number, line, f"bad timing line {_shorten(timing_line)}"))
            continue
        reading.recognised = True
        if match.group(1) or match.group(2):
            reading.note(_note(number, line, "negative time"))
            continue
        if len(block) - timing < 2:
            continue  # a cue without text: nothing to keep, nothing lost
        fast = _canonical_srt_timing(timing_line)
        if fast is not None:
            start_ms, end_ms = fast
            text_lines = block[timing + 1 :]
        else:
            try:
                item = pysrt.SubRipItem.from_lines(block)
            except (pysrt.Error, ValueError) as error:
                why = f"{type(error).__name__} {_shorten(timing_line)}"
                reading.note(_note(number, line, why))
                continue
            start_ms, end_ms = item.start.ordinal, item.end.ordinal
            text_lines = item.text.split("\n")
        if dropped:
            reading.note(
                _note(number, line, f"{dropped} lines past the first {len(block)} not read")
            )
        close()
        open_cue = _OpenCue(number, line, start_ms, end_ms, _clean_lines(text_lines, srt=True))
    close()
    return reading


# -- segments --------------------------------------------------------------------


def _segments(cues: list[Segment]) -> list[Segment]:
    """Sort and de-duplicate cues into segments, in place.

    Rolling auto-captions (YouTube style) show the previous line again above
    each new one, with ten-millisecond "snapshot" cues in between that only
    repeat text. Each spoken line is kept once, timed by the cue that
    introduced it. A cue's leading lines that repeat the previous cue's
    trailing lines are dropped when it follows on at once (within a second);
    a cue with nothing new is dropped whole. The list is rewritten as it is
    read, and a cue kept whole stays the same object, so the segments cost
    no more than the cues.
    """
    if any(after.start_ms < before.start_ms for before, after in pairwise(cues)):
        cues.sort(key=attrgetter("start_ms"))  # stable: file order breaks ties

    kept = 0
    previous: list[str] = []
    previous_end = 0
    for index, cue in enumerate(cues):
        lines = cue.text.split("\n")
        if cue.end_ms == cue.start_ms:
            # A zero-length cue is valid WebVTT; one that only repeats its
            # neighbours is a rolling-caption snapshot, one with new words is kept.
            following = cues[index + 1].text.split("\n") if index + 1 < len(cues) else []
            if {*previous, *following}.issuperset(lines):
                continue
        # Only a cue that follows on (nearly) at once repeats the one before;
        # the same words after a pause were said again.
        repeated = _overlap(previous, lines) if cue.start_ms <= previous_end + _FOLLOW_ON_MS else 0
        previous, previous_end = lines, cue.end_ms
        if repeated == len(lines):
            continue
        if repeated:
            cue = Segment(cue.start_ms, cue.end_ms, "\n".join(lines[repeated:]))
        cues[kept] = cue
        kept += 1
    del cues[kept:]
    return cues


def _overlap(previous: list[str], lines: list[str]) -> int:
    """Return how many leading ``lines`` repeat the trailing ``previous`` lines.

    A whole repeated cue, or up to three rolled-over lines: rolling captions
    carry one or two, and checking every size would be quadratic.
    """
    if lines == previous:
        return len(lines)
    for size in range(min(len(previous), len(lines), 3), 0, -1):
        if previous[-size:] == lines[:size]:
            return size
    return 0
