"""Plain text and light Markdown into blocks.

Blocks are split on blank lines. A short first line followed by a blank line
is the title (and the first heading). Markdown-style ``#`` and underlined
headings, ``-``/``1.`` lists, ``>`` quotes, fenced code and a YAML front
matter (``title``, ``date``, ``description``, ``lang``) are understood;
everything else is a paragraph.
"""

from __future__ import annotations

import re
import textwrap
from datetime import date

from researchstore.ingest.decode import decode_text, normalize_language, unreadable
from researchstore.ingest.model import Block, ParsedDocument

__all__ = ["parse_text"]

_TITLE_MAX_CHARS = 120
_ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_SETEXT_RULE = re.compile(r"^ {0,3}(=+|-+)\s*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,9}[.)])\s+\S")
_QUOTE = re.compile(r"^\s*>\s?")
# Two spaces or a tab inside a line: columns, which joining lines would break.
_COLUMNS = re.compile(r"\S(?: {2,}|\t)\S|\|")
_SPACES = re.compile(r"[ \t\f\v\u00a0]+")
#: The runs of ``_SPACES`` that collapsing changes (a single space stays).
_LOOSE_SPACES = re.compile(r"[ \t\f\v\u00a0]{2,}|[\t\f\v\u00a0]")
#: Lines longer than this are collapsed a window at a time (``_collapse``).
_COLLAPSE_WINDOW = 1 << 16
_DATE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})")
_FRONT_FIELD = re.compile(r"^([A-Za-z_][\w-]*)\s*:\s*(.*?)\s*$")


def parse_text(data: bytes) -> ParsedDocument:
    """Parse a ``.txt`` or ``.md`` file."""
    early = unreadable(data, "text")
    if early is not None:
        return early
    doc = ParsedDocument(kind="text")
    text, doc.encoding = decode_text(data)
    lines = text.split("\n")
    lines = _read_front_matter(lines, doc)

    raw_blocks = _split(lines)
    headings: list[tuple[int, str]] = []
    for index, (kind, block_lines, level) in enumerate(raw_blocks):
        if index == 0 and kind == "paragraph" and doc.title is None:
            only = block_lines[0].strip() if len(block_lines) == 1 else ""
            if only and len(only) <= _TITLE_MAX_CHARS and len(raw_blocks) > 1:
                kind, level = "heading", 0
        content = _render(kind, block_lines)
        if not content:
            continue
        if kind == "heading":
            while headings and headings[-1][0] >= level:
                headings.pop()
            doc.blocks.append(Block(content, "heading", tuple(h for _, h in headings)))
            headings.append((level, content))
            if doc.title is None and not doc.blocks[:-1]:
                doc.title = content
        else:
            doc.blocks.append(Block(content, kind, tuple(h for _, h in headings)))
    if not doc.blocks:
        doc.status, doc.reason = "empty", "no_text"
    return doc


def _read_front_matter(lines: list[str], doc: ParsedDocument) -> list[str]:
    """Take ``title``/``date``/``description``/``lang`` from a ``---`` YAML header."""
    if not lines or lines[0].strip() != "---":
        return lines
    for end in range(1, min(len(lines), 100)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        return lines
    for line in lines[1:end]:
        match = _FRONT_FIELD.match(line)
        if match is None:
            continue
        key, value = match.group(1).lower(), match.group(2).strip().strip("\"'")
        if not value:
            continue
        if key == "title":
            doc.title = value
        elif key in ("description", "summary"):
            doc.description = value
        elif key in ("lang", "language"):
            doc.language = normalize_language(value)
        elif key == "date":
            doc.date = _iso_date(value)
            doc.date_source = "meta" if doc.date else None
    return lines[end + 1 :]


def _iso_date(value: str) -> str | None:
    match = _DATE.match(value)
    if match is None:
        return None
    try:
        return date(*(int(part) for part in match.groups())).isoformat()
    except ValueError:
        return None


def _split(lines: list[str]) -> list[tuple[str, list[str], int]]:
    """Group lines into ``(kind, lines, heading_level)`` blocks."""
    blocks: list[tuple[str, list[str], int]] = []
    current: list[str] = []
    fence: str | None = None

    def close() -> None:
        if current:
            blocks.append(_classify(list(current)))
            current.clear()

    for line in lines:
        if fence is not None:
            if line.strip().startswith(fence):
                blocks.append(("code", list(current), 0))
                current.clear()
                fence = None
            else:
                current.append(line)
            continue
        fence_match = _FENCE.match(line)
        if fence_match:
            close()
            fence = fence_match.group(1)
            continue
        if not line.strip():
            close()
            continue
        heading = _ATX_HEADING.match(line)
        if heading:
            close()
            blocks.append(("heading", [heading.group(2)], len(heading.group(1))))
            continue
        rule = _SETEXT_RULE.match(line)
        if rule and len(current) == 1 and not _LIST_ITEM.match(current[0]):
            # "Title" underlined with === or ---: a heading.
            blocks.append(("heading", list(current), 1 if "=" in line else 2))
            current.clear()
            continue
        if rule and len(line.strip()) >= 3 and (not current or "-" in line):
            close()  # a thematic break: it ends the block and says nothing
            continue
        current.append(line)
    if fence is not None:
        blocks.append(("code", list(current), 0))  # an unclosed fence runs to the end
    else:
        close()
    return blocks


def _classify(lines: list[str]) -> tuple[str, list[str], int]:
    if _LIST_ITEM.match(lines[0]):
        return "list", lines, 0
    if all(_QUOTE.match(line) for line in lines):
        return "quote", [_QUOTE.sub("", line, count=1) for line in lines], 0
    if len(lines) > 1 and all(_COLUMNS.search(line.strip()) for line in lines):
        return "table", lines, 0
    return "paragraph", lines, 0


def _render(kind: str, lines: list[str]) -> str:
    """Turn a block's lines into its text; empty if there is none."""
    if kind == "code":
        while lines and not lines[0].strip():
            lines = lines[1:]
        return "\n".join(line.rstrip() for line in lines).rstrip()
    kept = [line.rstrip() for line in lines if line.strip()]
    if not kept:
        return ""
    if kind == "heading":
        return _collapse(kept[0])
    if any(_COLUMNS.search(line.strip()) for line in kept):
        return textwrap.dedent("\n".join(kept))  # aligned columns: keep the spacing
    if kind == "list" or _keeps_lines(kept):
        # Keep the indentation of nested list items.
        return textwrap.dedent("\n".join(_leading(line) + _collapse(line) for line in kept))
    return " ".join(_collapse(line) for line in kept)


def _collapse(line: str) -> str:
    """Runs of spaces as one space, none at the ends.

    A long line is collapsed a window at a time, never cut inside a run of
    spaces: ``re.sub`` holds each piece it keeps until it joins them (a line
    of ". " would cost 16 bytes a character).
    """
    if len(line) <= _COLLAPSE_WINDOW:
        return _LOOSE_SPACES.sub(" ", line).strip()
    pieces = []
    position = 0
    while position < len(line):
        cut = position + _COLLAPSE_WINDOW
        spaces = _SPACES.match(line, cut)
        cut = spaces.end() if spaces is not None else cut
        pieces.append(_LOOSE_SPACES.sub(" ", line[position:cut]))
        position = cut
    return "".join(pieces).strip()


def _keeps_lines(lines: list[str]) -> bool:
    """Tell whether line breaks carry meaning, as in a log of short lines."""
    if len(lines) < 2:
        return False
    short = sum(1 for line in lines[:-1] if len(line.strip()) < 40)
    return short * 2 >= len(lines) - 1


def _leading(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]
