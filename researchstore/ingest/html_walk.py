"""A chosen element of an HTML page into blocks, in reading order.

``Walker`` walks the element's subtree without recursion, within a node
budget: headings (and the path of headings above each block), paragraphs,
lists, definitions, tables of data, code and quotes, each with the share of
its text inside links (``edges.py`` reads it to trim link strips).
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborNode

from researchstore.ingest.edges import PROSE_CHARS
from researchstore.ingest.html_nodes import collapse
from researchstore.ingest.html_rules import BREAK, join_lines
from researchstore.ingest.html_tags import (
    CELLS,
    HEADINGS,
    INLINE,
    LEAF_BLOCKS,
    LISTS,
    VOID_SKIP,
)
from researchstore.ingest.model import Block

__all__ = ["Walker", "link_chars"]

_TRAILING_BRACKETS = re.compile(r"\s*\[[^\[\]]{1,60}\]$")


def link_chars(node: LexborNode) -> int:
    """Characters of ``node``'s text inside links (``a[href]``), whitespace collapsed."""
    return sum(len(collapse(link.text())) for link in node.css("a[href]"))


def _phrase_link_chars(node: LexborNode) -> int:
    """``link_chars`` of an element of phrasing content (a paragraph's few
    elements): walked node by node, cheaper than a CSS query, which
    parses its selector on every call."""
    total = 0
    for element in node.traverse():
        if element.tag == "a" and "href" in element.attributes:
            total += len(collapse(element.text()))
    return total


class Walker:
    """Turns a subtree into blocks without recursion, within a node budget."""

    def __init__(self, max_nodes: int) -> None:
        self.blocks: list[Block] = []
        #: Per block, the share of its text inside links (``edges.py`` reads it).
        self.link_shares: list[float] = []
        self.limited = False
        self._link_chars = 0
        self._budget = max_nodes
        self._headings: list[tuple[int, str]] = []
        self._path_cache: tuple[str, ...] | None = ()
        self._parts: list[str] = []
        self._quotes: list[tuple[int, tuple[str, ...]]] = []

    def _spend(self) -> bool:
        """Count one node; False once the budget is spent."""
        self._budget -= 1
        if self._budget < 0:
            self.limited = True
            return False
        return True

    def _path(self) -> tuple[str, ...]:
        # Made once per change of the headings, not once per block.
        if self._path_cache is None:
            self._path_cache = tuple(text for _, text in self._headings)
        return self._path_cache

    def _emit(self, text: str, kind: str, link_chars: int = 0) -> None:
        if text:
            self.blocks.append(Block(text, kind, self._path()))
            self.link_shares.append(min(link_chars / len(text), 1.0))

    def _flush(self) -> None:
        if self._parts:
            text = join_lines(self._parts)
            self._parts.clear()
            self._emit(text, "paragraph", self._link_chars)
        self._link_chars = 0

    def walk(self, root: LexborNode | None, *, stop_after: LexborNode | None = None) -> None:
        """Walk ``root``'s subtree; with ``stop_after``, stop where that element ends."""
        if root is None:
            return
        end = stop_after.mem_id if stop_after is not None else None
        stack: list[tuple[LexborNode, bool]] = [(root, False)]
        while stack and not self.limited:
            node, leaving = stack.pop()
            if leaving:
                self._leave(node)
                if node.mem_id == end:
                    break
                continue
            # The budget, counted inline: this loop runs for every node.
            self._budget -= 1
            if self._budget < 0:
                self.limited = True
                break
            tag = node.tag or ""
            if tag == "-text":
                # Whitespace is collapsed once, when the paragraph is flushed.
                self._parts.append(node.text_content or "")
                continue
            if not tag or tag[0] == "-":
                # A comment, the document, or a processing instruction
                # (<?php ... ?>, <?xml ...?>), which has no tag name at all.
                continue
            if tag == "a" and "href" in node.attributes:
                # A link's text in one call: its length is what tells a link
                # list from prose (a card of blocks inside a link is a teaser).
                link_text = node.text()
                self._parts.append(link_text)
                self._link_chars += len(collapse(link_text))
            elif tag in INLINE:
                _push_children(stack, node)
            elif tag in VOID_SKIP:
                continue
            elif tag == "br":
                self._parts.append(BREAK)
            elif tag in LEAF_BLOCKS:
                # Phrasing content only (the parser closes a <p> before any
                # block), so one call reads it all.
                self._flush()
                text = _leaf_text(node)
                if tag == "figcaption" and len(text) < PROSE_CHARS:
                    # A line under a picture (its credit, a label) is not the
                    # article's text; a caption that reads as prose is.
                    continue
                self._emit(text, "paragraph", _phrase_link_chars(node))
            elif tag in HEADINGS:
                self._heading(node, HEADINGS[tag])
            elif tag in _READ_BY_BLOCK_AT:
                self._flush()
                self._block_at(node)
            elif tag == "table" and _is_data_table(node):
                self._flush()
                self._table(node)
            else:
                self._flush()
                if tag == "blockquote":
                    self._quotes.append((len(self.blocks), self._path()))
                stack.append((node, True))
                _push_children(stack, node)
        self._flush()
        while self._quotes:  # the budget ran out inside a quote
            self._close_quote()

    def _block_at(self, node: LexborNode) -> bool:
        """Read a list, definitions, code or a data table (the walk has
        flushed its paragraph); False for a table that lays out the page."""
        tag = node.tag
        if tag == "table":
            if not _is_data_table(node):
                return False
            self._table(node)
        elif tag == "dl":
            self._emit(self._definitions(node), "list", link_chars(node))
        elif tag == "pre":
            self._emit(_code_text(node), "code")
        else:
            self._emit(self._list(node), "list", link_chars(node))
        return True

    def _leave(self, node: LexborNode) -> None:
        self._flush()
        if node.tag == "blockquote" and self._quotes:
            self._close_quote()

    def _close_quote(self) -> None:
        start, path = self._quotes.pop()
        inner = self.blocks[start:]
        shares = self.link_shares[start:]
        del self.blocks[start:], self.link_shares[start:]
        if inner:
            text = "\n".join(block.text for block in inner)
            pairs = zip(shares, inner, strict=True)
            linked = sum(share * len(block.text) for share, block in pairs)
            self.blocks.append(Block(text, "quote", path))
            self.link_shares.append(min(linked / len(text), 1.0))

    def _heading(self, node: LexborNode, level: int) -> None:
        text = _without_heading_control(node, _leaf_text(node).replace("\n", " "))
        if not text:
            return
        self._flush()
        while self._headings and self._headings[-1][0] >= level:
            self._headings.pop()
        self._path_cache = None
        self._emit(text, "heading")
        self._headings.append((level, text))
        self._path_cache = None

    def _list(self, node: LexborNode) -> str:
        """A list as lines: ``- item`` / ``1. item``, nested lists indented."""
        lines: list[str] = []
        parts: list[str] = []
        lists: list[list[int]] = []  # per open list: [ordered, next number]
        marker: str | None = None
        indent = ""

        def flush() -> None:
            nonlocal marker
            text = join_lines(parts).replace("\n", " ")
            parts.clear()
            if text:
                lines.append(indent + (marker or "  ") + text if marker or lists else text)
                marker = None

        stack: list[tuple[LexborNode, bool]] = [(node, False)]
        while stack:
            current, leaving = stack.pop()
            tag = current.tag or ""
            if leaving:
                flush()
                if tag in LISTS and lists:
                    lists.pop()
                elif tag == "li":
                    marker = None
                continue
            if not self._spend():
                break
            if current.is_text_node:
                parts.append(current.text_content or "")
                continue
            if not current.is_element_node or tag in VOID_SKIP:
                continue
            if tag in INLINE:
                _push_children(stack, current)
                continue
            elif tag in LISTS:
                flush()
                lists.append([int(tag == "ol"), _list_start(current)])
            elif tag == "li":
                flush()
                indent = "  " * min(max(len(lists) - 1, 0), 8)
                if lists and lists[-1][0]:
                    marker = f"{lists[-1][1]}. "
                    lists[-1][1] += 1
                else:
                    marker = "- "
            else:
                flush()
            stack.append((current, True))
            _push_children(stack, current)
        flush()
        return "\n".join(lines)

    def _definitions(self, node: LexborNode) -> str:
        lines = []
        for child in _flatten_div_children(node):
            if child.tag == "dt":
                text = _leaf_text(child).replace("\n", " ")
                if text:
                    lines.append(text)
            elif child.tag == "dd":
                text = _leaf_text(child).replace("\n", " ")
                if text:
                    lines.append("  " + text)
        return "\n".join(lines)

    def _table(self, node: LexborNode) -> None:
        caption = node.css_first("caption")
        if caption is not None:
            self._emit(_leaf_text(caption).replace("\n", " "), "paragraph")
        rows = []
        for row in node.css("tr"):
            if not self._spend():
                break
            cells = [
                _leaf_text(cell).replace("\n", " ") for cell in row.iter() if cell.tag in CELLS
            ]
            if any(cells):
                rows.append(" | ".join(cells))
        self._emit("\n".join(rows), "table")


def _without_heading_control(node: LexborNode, text: str) -> str:
    """A heading's text without a bracketed link at its end ("Ziele [bearbeiten]").

    A link in brackets after a heading's words is a control (edit this
    section, copy its address), in any language; the words stay.
    """
    control = _TRAILING_BRACKETS.search(text)
    if control is None or control.start() == 0:
        return text
    for link in node.css("a"):
        link_text = collapse(link.text())
        if link_text and link_text in control.group():
            return text[: control.start()]
    return text


def _push_children(stack: list[tuple[LexborNode, bool]], node: LexborNode) -> None:
    children = list(node.iter(include_text=True))
    stack.extend((child, False) for child in reversed(children))


def _flatten_div_children(node: LexborNode) -> list[LexborNode]:
    """Children of a ``dl``, looking through the ``div`` groups HTML allows."""
    children: list[LexborNode] = []
    for child in node.iter():
        if child.tag == "div":
            children.extend(child.iter())
        else:
            children.append(child)
    return children


def _list_start(node: LexborNode) -> int:
    try:
        return int(node.attributes.get("start") or 1)
    except ValueError:
        return 1


def _leaf_text(node: LexborNode) -> str:
    """All text under ``node`` as collapsed lines (``<br>`` breaks lines)."""
    return join_lines([node.text(deep=True)])


def _code_text(node: LexborNode) -> str:
    """A ``pre`` block's text with its whitespace, minus blank edge lines."""
    lines = (node.text(deep=True) or "").replace(BREAK, "\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(line.rstrip() for line in lines).rstrip()


def _is_data_table(node: LexborNode) -> bool:
    """Tell a table of data from one used for page layout."""
    if (node.attributes.get("role") or "").lower() in ("presentation", "none"):
        return False
    descendants = node.traverse()
    next(descendants)  # the table itself
    if any(descendant.tag == "table" for descendant in descendants):
        return False  # stops at the first nested table: linear even when deep
    widest = 0
    for row in node.css("tr")[:50]:
        cells = [cell for cell in row.iter() if cell.tag in CELLS]
        widest = max(widest, len(cells))
        if any(len(cell.text()) > 1000 for cell in cells):
            return False
    return widest >= 2


#: Read by ``Walker._block_at``, whole (a table only when it holds data).
_READ_BY_BLOCK_AT = LISTS | {"li", "dl", "pre"}
