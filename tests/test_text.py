"""Plain text and light Markdown into blocks: title, headings, lists, columns, code."""

from __future__ import annotations

import codecs

import pytest
from hypothesis import given
from hypothesis import strategies as st

from researchstore.ingest.model import Block
from researchstore.ingest.text import parse_text

NOTES = """\
Pond dipping notes

We dipped the north pond at ten. The water was
clear and cold, and the nets came up full of weed.

# Species
## Beetles
- great diving beetle
- whirligig
  - two of them

Time   Net   Count
10:00  A     12
10:15  B     7

> A heron watched
> the whole time.

```
  raw   block
```

Weather
-------
Dry, a light westerly.
"""


def test_notes() -> None:
    doc = parse_text(NOTES.encode())
    assert (doc.kind, doc.status, doc.reason, doc.encoding) == ("text", "ok", None, "utf-8")
    assert doc.title == "Pond dipping notes"
    title = ("Pond dipping notes",)
    assert doc.blocks == [
        Block("Pond dipping notes", "heading", ()),
        Block(
            "We dipped the north pond at ten. The water was clear and cold, "
            "and the nets came up full of weed.",
            "paragraph",
            title,
        ),
        Block("Species", "heading", title),
        Block("Beetles", "heading", (*title, "Species")),
        Block(
            "- great diving beetle\n- whirligig\n  - two of them",
            "list",
            (*title, "Species", "Beetles"),
        ),
        Block(
            "Time   Net   Count\n10:00  A     12\n10:15  B     7",
            "table",
            (*title, "Species", "Beetles"),
        ),
        Block("A heron watched\nthe whole time.", "quote", (*title, "Species", "Beetles")),
        Block("  raw   block", "code", (*title, "Species", "Beetles")),
        Block("Weather", "heading", (*title, "Species")),
        Block("Dry, a light westerly.", "paragraph", (*title, "Species", "Weather")),
    ]


@pytest.mark.parametrize(
    ("text", "title"),
    [
        pytest.param("Short title\n\nBody text.\n", "Short title", id="short-first-line"),
        pytest.param("# Markdown title\nBody text.\n", "Markdown title", id="atx"),
        pytest.param("Only one line, no body.\n", None, id="single-line"),
        pytest.param("First line\nsecond line\n\nBody.\n", None, id="two-line-paragraph"),
        pytest.param("x" * 121 + "\n\nBody.\n", None, id="too-long"),
        pytest.param("- a list item\n\nBody.\n", None, id="list-first"),
    ],
)
def test_title(text: str, title: str | None) -> None:
    assert parse_text(text.encode()).title == title


def test_front_matter() -> None:
    text = "---\ntitle: Compost trial\ndate: 2024-09-18\nlang: en_GB\n"
    text += 'description: "Three bins, one summer"\n---\n\nThe bokashi bin smelled least.\n'
    doc = parse_text(text.encode())
    assert (doc.title, doc.date, doc.language) == ("Compost trial", "2024-09-18", "en-GB")
    assert doc.description == "Three bins, one summer"
    assert doc.blocks == [Block("The bokashi bin smelled least.", "paragraph", ())]


def test_short_lines_keep_their_breaks() -> None:
    doc = parse_text(b"Log\n\n06:10 arrived at the weir\n06:25 first wagtail\n06:40 mist lifting\n")
    assert (
        doc.blocks[1].text == "06:10 arrived at the weir\n06:25 first wagtail\n06:40 mist lifting"
    )


def test_unclosed_fence_runs_to_the_end() -> None:
    doc = parse_text(b"Intro words here.\n\n```\ncode line\n\nmore code\n")
    assert doc.blocks[-1] == Block("code line\n\nmore code", "code", ("Intro words here.",))


@pytest.mark.parametrize(
    ("data", "status", "reason"),
    [
        pytest.param(b"", "empty", "no_text", id="empty"),
        pytest.param(b" \n\t\n", "empty", "no_text", id="blank"),
        pytest.param(codecs.BOM_UTF8 + b"\n", "empty", "no_text", id="bom-only"),
        pytest.param(b"---\n\n---\n", "empty", "no_text", id="rules-only"),
        pytest.param(b"\x00\x01\x02\x03" * 100, "invalid", "binary", id="binary"),
    ],
)
def test_outcomes(data: bytes, status: str, reason: str) -> None:
    doc = parse_text(data)
    assert (doc.status, doc.reason) == (status, reason)
    assert doc.blocks == []


def test_legacy_encoding_and_crlf() -> None:
    doc = parse_text("Crème brûlée\r\n\r\nIt’s “fine”.\r\n".encode("cp1252"))
    assert doc.encoding == "cp1252"
    assert [block.text for block in doc.blocks] == ["Crème brûlée", "It’s “fine”."]


@given(st.text(max_size=400))
def test_never_an_empty_block(text: str) -> None:
    doc = parse_text(text.encode("utf-8", "surrogatepass"))
    assert all(block.text.strip() for block in doc.blocks)
    assert doc.status in ("ok", "empty", "invalid")
