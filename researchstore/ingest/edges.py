"""Boilerplate at the edges of the chosen content, told by structure, not words.

The main container of a page (``html.py``) often still holds chrome around
the article: a byline and date line, categories, "share" and "related" strips,
a newsletter box, tags. Those blocks look alike in every language: they are
short and carry no sentence, or most of their text is links, and they sit
before the article's first paragraph of prose or after its last one.

:func:`trim_edges` reads the blocks in reading order, each with the share of
its text inside links, and keeps:

- every heading and every block of prose between the first and the last
  paragraph of prose, except blocks mostly made of links (an inline
  "read also" teaser, a list of related links), and the short line with no
  sentence in it right before such a block, which introduces it;
- before the first and after the last paragraph of prose, the blocks that
  read as text: before it headings, and on both sides blocks mostly not
  links that are long or end a sentence (after the article, no heading: the
  section it starts holds no prose, it is a strip's or a teaser's title).

Lengths are measured with :func:`~researchstore.text.language.weighted_length`:
a CJK character, about a word in itself, counts as ``CJK_LETTER_WEIGHT`` (3)
letters, so a Chinese paragraph of 40 characters is as long as a Latin one
of 120.

A short page (a brief news story) may have no paragraph that long. When its
paragraphs that end a sentence are a few (``_SHORT_PAGE_PARAGRAPHS``), each of
at least ``_SENTENCE_CHARS``, and stand together with no block mostly made of
links among them (a listing's excerpts stand between links to its stories),
they are its prose, and its edges are trimmed the same way.

A page with neither (a listing, a form, a table) is left as it is: there is
no article to trim around.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from researchstore.ingest.model import Block
from researchstore.text.language import weighted_length

__all__ = ["PROSE_CHARS", "is_prose", "trim_edges"]

#: A paragraph of prose is at least this long (``weighted_length``), with few links.
PROSE_CHARS = 100
#: A page with no paragraph of prose is a short article when this many of its
#: paragraphs, each at least ``_SENTENCE_CHARS`` long, end a sentence.
_SHORT_PAGE_PARAGRAPHS = 3
_SENTENCE_CHARS = 40
#: Above this share of link text, a block of prose is not prose.
_PROSE_LINKS = 0.3
#: Above this share, a block at the edges is a link strip.
_EDGE_LINKS = 0.5
#: Above this share, a block even inside the article is a link strip.
_INNER_LINKS = 0.6
#: A block before the article this long that is mostly not links reads as
#: text (a byline or a date line is shorter); after it, any such block.
_LEAD_TEXT_CHARS = 80
_TAIL_TEXT_CHARS = 60
#: Sentence-final punctuation in the scripts the project reads.
_SENTENCE_END = re.compile(r"[.!?…。！？؟।][\"'”’»)\]）」』]*$")
_TEXT_KINDS = frozenset(("paragraph", "quote"))
#: How a copyright notice starts: the sign, or its spelling in ASCII.
_NOTICE = ("©", "(c) ", "(C) ")
#: A line that ends in a colon introduces what follows it.
_INTRODUCES = re.compile(r"[:：]\s*$")


def _is_long(text: str, chars: int) -> bool:
    """Whether ``text`` is at least ``chars`` long, each CJK character weighed as a word."""
    # Weighing only adds to the length: a text long in characters needs no count.
    return len(text) >= chars or weighted_length(text) >= chars


def is_prose(block: Block, link_share: float) -> bool:
    """A paragraph of running text: long, and mostly not links."""
    return (
        block.kind in _TEXT_KINDS
        and link_share < _PROSE_LINKS
        and _is_long(block.text, PROSE_CHARS)
    )


def _is_sentence(block: Block, link_share: float) -> bool:
    """A paragraph of a short page's prose: a sentence or more, mostly not links."""
    return (
        block.kind in _TEXT_KINDS
        and link_share < _PROSE_LINKS
        and _SENTENCE_END.search(block.text) is not None
        and _is_long(block.text, _SENTENCE_CHARS)
    )


def _is_notice(block: Block) -> bool:
    """A copyright notice: a block that starts with the sign, in any language."""
    return block.text.startswith(_NOTICE)


def _reads_as_text(block: Block, link_share: float, min_chars: int) -> bool:
    """Whether a block at the edges of the article is text rather than chrome."""
    if block.kind == "heading":
        return True
    if _is_notice(block):
        return False
    if link_share >= _EDGE_LINKS:
        return False
    if block.kind not in _TEXT_KINDS:
        return True  # a table, code or a list of mostly plain items
    text = block.text
    return _is_long(text, min_chars) or _SENTENCE_END.search(text) is not None


def _is_label(block: Block) -> bool:
    """A short line of text that is no sentence: what introduces a strip."""
    return (
        block.kind == "paragraph"
        and not _is_long(block.text, _TAIL_TEXT_CHARS)
        and "\n" not in block.text
        and _SENTENCE_END.search(block.text) is None
    )


def trim_edges(blocks: Sequence[Block], link_shares: Sequence[float]) -> list[Block]:
    """The blocks without the chrome at the edges of the article (see the module)."""
    prose = _prose_positions(blocks, link_shares)
    if not prose:
        return list(blocks)
    # A copyright notice after the article's first paragraph ends it, however
    # long; at its start it is a picture's credit run into the first paragraph.
    first = prose[0]
    last = next(
        (position for position in reversed(prose) if not _is_notice(blocks[position])), first
    )
    kept: list[Block] = []
    for position, (block, share) in enumerate(zip(blocks, link_shares, strict=True)):
        if first <= position <= last:
            keep = block.kind == "heading" or share < _INNER_LINKS
            if not keep and kept and kept[-1] is blocks[position - 1] and _is_label(kept[-1]):
                # The short line that introduced the strip ("Read also:") goes with it.
                kept.pop()
            if (
                not keep
                and kept
                and kept[-1].kind == "heading"
                and _follows(kept[-1], blocks, position)
            ):
                # So does the heading right above it: the strip's title ("More on this").
                kept.pop()
        elif position < first:
            # The line right before the first paragraph that ends in a colon
            # introduces it ("The best part comes now:"), in any language.
            keep = _reads_as_text(block, share, _LEAD_TEXT_CHARS) or (
                position == first - 1
                and share < _EDGE_LINKS
                and _INTRODUCES.search(block.text) is not None
            )
        else:
            # The line right after the article (a signature, a source) is
            # its end; what follows is judged as a strip.
            # A heading there heads no prose: a strip's or a teaser's title.
            close = position == last + 1 and share < _EDGE_LINKS and not _is_notice(block)
            keep = block.kind != "heading" and (
                close or _reads_as_text(block, share, _TAIL_TEXT_CHARS)
            )
        if keep:
            kept.append(block)
    return _without_empty_sections(kept)


def _prose_positions(blocks: Sequence[Block], link_shares: Sequence[float]) -> list[int]:
    """Where the article's prose is: its paragraphs of prose, else a short page's."""
    pairs = list(enumerate(zip(blocks, link_shares, strict=True)))
    prose = [position for position, (block, share) in pairs if is_prose(block, share)]
    if prose:
        return prose
    sentences = [position for position, (block, share) in pairs if _is_sentence(block, share)]
    if len(sentences) < _SHORT_PAGE_PARAGRAPHS:
        return []
    # An article's paragraphs stand together; a listing's excerpts stand
    # between the links to its stories.
    if any(share >= _INNER_LINKS for share in link_shares[sentences[0] : sentences[-1]]):
        return []
    return sentences


def _follows(block: Block, blocks: Sequence[Block], position: int) -> bool:
    """Whether ``block`` stands right before ``position``, or before the label there."""
    before = blocks[position - 1] if position else None
    if before is block:
        return True
    return position >= 2 and blocks[position - 2] is block and _is_label(blocks[position - 1])


def _without_empty_sections(blocks: list[Block]) -> list[Block]:
    """Drop headings whose section holds nothing but headings (its strip is gone)."""
    kept: list[Block] = []
    for block in reversed(blocks):
        if block.kind == "heading":
            depth = len(block.heading_path)
            # The section goes on until a heading at this depth or above.
            has_content = False
            for later in reversed(kept):
                if later.kind == "heading" and len(later.heading_path) <= depth:
                    break
                if later.kind != "heading":
                    has_content = True
                    break
            if not has_content:
                continue
        kept.append(block)
    kept.reverse()
    return kept
