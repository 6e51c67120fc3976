"""Pages that cost too much: 40,000 attributes, a million sentences, a file past its time.

Lexbor compares each new attribute of a tag with every earlier one, so the
attributes past ``html_rules.MAX_ATTRIBUTES`` are dropped before it reads a
page; sentences are split a run at a time, never an object each; and
whatever a parser does, a report that takes longer than its time
(``workers.parse_seconds``) fails alone while the run goes on.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import program
from hypothesis import given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

import researchstore.ingest.html as html_mod
from researchstore import InvalidInput, Store
from researchstore.ingest import chunking, html_cleaning, html_rules, text, workers
from researchstore.ingest.chunking import chunk_blocks
from researchstore.ingest.html import parse_html
from researchstore.ingest.html_rules import MAX_ATTRIBUTES, limit_markup
from researchstore.ingest.model import Block

LEAD = "The kept paragraph tells the reader about bees, and enough words follow it."


def attributes(count: int, *, first: str = 'class="story"') -> str:
    """``first`` and ``count`` more attributes, each named apart (Lexbor keeps
    the first of a name: a repeated one costs nothing)."""
    return " ".join(
        [first, *(f'data-field-{number:05d}="value {number}"' for number in range(count))]
    )


@pytest.fixture
def lexbor_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The most attributes one tag holds in each markup ``parse_html`` hands Lexbor."""
    seen: list[int] = []

    def reading(markup: str | bytes, **options: Any) -> LexborHTMLParser:
        page = markup.decode("utf-8", "replace") if isinstance(markup, bytes) else markup
        seen.append(html_rules._most_attributes(page))
        return LexborHTMLParser(markup, **options)

    # Every module that hands Lexbor markup: the page's, and a template's.
    monkeypatch.setattr(html_mod, "LexborHTMLParser", reading)
    monkeypatch.setattr(html_cleaning, "LexborHTMLParser", reading)
    return seen


def most_in_tree(markup: str) -> int:
    """The most attributes an element holds once Lexbor has read ``markup``."""
    tree = LexborHTMLParser(markup, scripting=True)
    assert tree.root is not None
    return max(len(node.attributes) for node in tree.root.traverse())


# -- attributes ------------------------------------------------------------------


def test_an_element_of_40000_attributes_keeps_its_text_and_its_first_attributes(
    lexbor_reads: list[int],
) -> None:
    page = (
        f"<html><body><article><h1>Crowded</h1><p>{LEAD}</p>"
        f"<div {attributes(40_000)}>The text inside the crowded element stays.</div>"
        "</article></body></html>"
    )
    notes: list[str] = []
    kept, _ = limit_markup(page, max_nodes=200_000, notes=notes)
    assert notes == [f"dropped attributes past the first {MAX_ATTRIBUTES} on 1 tags"]
    # What Lexbor reads: the tag's first attributes, none of the rest.
    assert most_in_tree(kept) == MAX_ATTRIBUTES
    crowded = LexborHTMLParser(kept).css_first("div")
    assert crowded is not None
    assert crowded.attributes["class"] == "story"
    assert f"data-field-{MAX_ATTRIBUTES - 2:05d}" in crowded.attributes
    assert "data-field-39999" not in crowded.attributes
    doc = parse_html(page.encode())
    assert doc.status == "ok"
    texts = [block.text for block in doc.blocks]
    assert LEAD in texts and "The text inside the crowded element stays." in texts
    assert lexbor_reads and max(lexbor_reads) == MAX_ATTRIBUTES


def test_a_template_is_bounded_before_it_is_read_as_markup(lexbor_reads: list[int]) -> None:
    # A script's text is no markup for the page's bound, until the article's
    # template script is read as the page's own markup.
    page = (
        f'<html><body><article><p>{LEAD}</p><script type="text/template">'
        f"<div {attributes(20_000)}>The templated text.</div></script></article></body></html>"
    )
    texts = [block.text for block in parse_html(page.encode()).blocks]
    assert texts == [LEAD, "The templated text."]
    assert max(lexbor_reads) == MAX_ATTRIBUTES


@pytest.mark.slow
def test_a_page_of_crowded_elements_keeps_every_element_and_its_text() -> None:
    cells = "".join(
        f"<section {attributes(300, first=f'id=cell-{number}')}>"
        f"<p>Paragraph {number} of the crowded page, long enough to be read as prose.</p>"
        "</section>"
        for number in range(200)
    )
    page = f"<html><body><main>{cells}</main></body></html>"
    notes: list[str] = []
    kept, _ = limit_markup(page, max_nodes=200_000, notes=notes)
    assert notes == [f"dropped attributes past the first {MAX_ATTRIBUTES} on 200 tags"]
    assert most_in_tree(kept) == MAX_ATTRIBUTES
    assert len(LexborHTMLParser(kept).css("section[id^=cell-]")) == 200
    texts = "\n".join(block.text for block in parse_html(page.encode()).blocks)
    assert all(f"Paragraph {number} of the crowded page" in texts for number in range(200))


def test_a_tag_quoted_in_a_script_is_text_but_one_in_svg_style_is_a_tag() -> None:
    crowded = f"<div {attributes(400)}>"
    # A script's text is no markup: left whole (a JSON-LD body quoting a tag).
    quoted = f'<script type="application/ld+json">{json.dumps({"articleBody": crowded})}</script>'
    notes: list[str] = []
    assert limit_markup(quoted + "<p>Prose.</p>", max_nodes=200_000, notes=notes)[0].startswith(
        quoted
    )
    assert notes == []
    # Inside <svg>, <style> is an element like any: Lexbor reads its tags.
    foreign = f"<svg><style>{crowded}</style></svg><p>Prose.</p>"
    kept, _ = limit_markup(foreign, max_nodes=200_000, notes=notes)
    assert most_in_tree(foreign) > MAX_ATTRIBUTES >= most_in_tree(kept)


#: Pieces of markup for the properties: tags, attributes of every form,
#: comments of every close, bogus comments, raw-text and foreign elements.
_PIECES = [
    "<div", "</div>", "<DIV ", "<p>", "<svg", "</svg>", "<svg/>", "<Math>", "</MATH >",
    "<script>", "</script>", "</SCRIPT ", "<style", "</style/", "<title>", "</TITLE>",
    "<textarea/", "</textarea>", "<noscript>", "</noscript\n", "<ſcript>", "<scripts>",
    " a", " b=1", " c='x'", ' d="y', " e=", "= ", " f g h", "'", '"', "=", "/", ">", " ",
    "\t", "\n", "\u00a0", "x", "é", "<", "<!--", "-->", "--!>", "<!-->", "<!--->", "<!x",
    "<?", "</>", "</1", "<![CDATA[", "]]>",
]  # fmt: skip
_MARKUP = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)


@pytest.mark.slow
@pytest.mark.skipif(html_rules._speedups is None, reason="the C speedup is not built")
@settings(max_examples=800, deadline=None)
@given(_MARKUP)
def test_the_c_speedup_counts_attributes_as_python_does(markup: str) -> None:
    assert html_rules._speedups is not None
    assert html_rules._speedups.markup_attributes(
        markup, html_rules._RAW_TEXT, html_rules._FOREIGN
    ) == html_rules._most_attributes(markup)


@pytest.mark.slow
@settings(max_examples=800, deadline=None)
@given(_MARKUP, st.integers(0, 3))
def test_the_cut_leaves_no_tag_with_more_attributes(markup: str, most: int) -> None:
    spans = html_rules._excess_attributes(markup, most)
    # The scan that passes over ordinary markup at once finds what the
    # tag-by-tag one does.
    kept = html_rules._first_attributes(most)
    expected = []
    for start, end in html_rules._attribute_runs(markup):
        found = kept.match(markup, start)
        if found is not None and found.end() < end:
            expected.append((found.end(), end))
    assert spans == expected
    assert bool(spans) == (html_rules._most_attributes(markup) > most)
    cut = html_rules._cut(markup, spans, filler=" ")
    assert html_rules._most_attributes(cut) <= most


# -- sentences -------------------------------------------------------------------

_TEXT_PIECES = [
    "a", "bb", "Word", "word", "Dr.", ".", "!", "?", "…", '"', "”", ")", "]", " ", "  ", "\n",
    "\t", "é", "北京", "x" * 40, "y" * 700,
]  # fmt: skip


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(_TEXT_PIECES), max_size=400).map("".join),
            st.sampled_from(["paragraph", "heading", "list"]),
        ),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from([4, 16, 64, 256]),
)
def test_runs_of_sentences_give_the_chunks_of_one_sentence_at_a_time(
    parts: list[tuple[str, str]], target: int
) -> None:
    blocks = [Block(words, kind) for words, kind in parts]
    found = chunk_blocks(blocks, target_tokens=target)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chunking, "_SENTENCE_RUN", re.compile(r"(?!)"))  # no run ever
        assert chunk_blocks(blocks, target_tokens=target) == found


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([" ", "  ", "\t", "\n", "\u00a0", "\u2003", "a", "bc"])).map("".join)
)
def test_long_text_is_collapsed_a_window_at_a_time_as_whole(line: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(html_rules, "_COLLAPSE_WINDOW", 4)
        patch.setattr(text, "_COLLAPSE_WINDOW", 4)
        assert html_rules.collapse_spaces(line) == " ".join(line.split())
        assert text._collapse(line) == text._SPACES.sub(" ", line).strip()


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".html", ".txt"])
def test_a_page_of_a_million_sentences_is_prepared_in_memory_near_its_size(
    tmp_path: Path, suffix: str
) -> None:
    page = tmp_path / f"dots{suffix}"
    dots = ". " * 1_500_000
    page.write_text(f"<html><body><p>{dots}</p></body></html>" if suffix == ".html" else dots)
    done = subprocess.run(
        [*program("page_cost"), str(page)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    assert measured["status"] == "ok" and measured["chars"] >= len(dots) - 2 * measured["chunks"]
    # An object per sentence took about 125 times the page's size.
    assert measured["growth"] <= 8 * measured["bytes"], measured


# -- the time bound --------------------------------------------------------------


@pytest.mark.slow
def test_a_report_past_its_time_fails_alone_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "source"
    root.mkdir()
    for word in ("alderwort", "beeswing", "cowslip"):
        # The language declared: the first report no worker waits on a model for.
        (root / f"{word}.txt").write_text(f"---\nlang: en\n---\nThe {word} grows by the fen.\n")
    # The costliest page the bounds let through: elements of the most
    # attributes Lexbor is given, 8 MB of them (over a second to parse).
    crowded = f"<div {' '.join(f'a{number}' for number in range(MAX_ATTRIBUTES))}>cell</div>"
    (root / "slow.html").write_text(crowded * (8_000_000 // len(crowded)))
    assert (root / "slow.html").stat().st_size >= workers.ISOLATE_BYTES  # read in a worker
    monkeypatch.setenv(workers.PARSE_SECONDS_ENV, "0.25")
    with Store(tmp_path / "r.db", progress=False) as store:
        summary = store.ingest(root)
        assert (summary.new, summary.failed) == (3, 1)
        [failure] = summary.failures
        assert failure["report"] == "slow.html"
        assert failure["reason"].startswith("parse_timeout: ")
        assert {hit["title"] for hit in store.search("fen", limit=10)} == {
            "alderwort",
            "beeswing",
            "cowslip",
        }


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("", workers.PARSE_SECONDS), ("2.5", 2.5), (" 90 ", 90.0), ("off", None), ("0", None)],
)
def test_the_time_bound_is_read_from_the_environment(value: str, seconds: float | None) -> None:
    assert workers.parse_seconds({workers.PARSE_SECONDS_ENV: value}) == seconds


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "1e9"])
def test_a_time_bound_that_is_no_number_of_seconds_is_refused(value: str) -> None:
    with pytest.raises(InvalidInput, match=workers.PARSE_SECONDS_ENV):
        workers.parse_seconds({workers.PARSE_SECONDS_ENV: value})
