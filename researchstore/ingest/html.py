"""HTML pages into metadata and readable blocks (selectolax, Lexbor backend).

``parse_html`` parses the page and runs the steps:

1. guard: binary bytes, a size limit, and nesting so deep that Lexbor's tree
   builder would go quadratic (flattened, as browsers do);
2. metadata from ``<head>``: title, description, language, date;
3. cleaning: scripts, styles, navigation, footers, forms, asides, hidden
   elements and boilerplate marked by id/class/role/aria-label are removed;
4. the main container: ``<main>``, ``[role=main]`` or ``<article>`` when it
   holds most of the text, else the element with the densest paragraphs;
5. an iterative walk (no recursion, a node budget) emitting headings,
   paragraphs, lists, tables, code and quotes in reading order.

Each step has its module: ``html_metadata`` (2), ``html_cleaning`` (3),
``html_container`` (4), ``html_walk`` (5); ``html_rules`` holds the rules
that read text and attributes, apart from the tree. All read selectolax's
tree through its public API only; they and ``html_nodes`` are the only
modules that import selectolax.
"""

from __future__ import annotations

from html import unescape

from selectolax.lexbor import LexborHTMLParser

from researchstore.ingest.decode import declared_encoding, decode_exact, unreadable
from researchstore.ingest.edges import PROSE_CHARS, is_prose, trim_edges
from researchstore.ingest.html_cleaning import Elements, drop_boilerplate, unpack_templates
from researchstore.ingest.html_container import drop_teasers, main_container
from researchstore.ingest.html_metadata import read_byline_date, read_metadata
from researchstore.ingest.html_nodes import MAX_NODES, collapse
from researchstore.ingest.html_rules import json_ld_body, limit_markup
from researchstore.ingest.html_walk import Walker
from researchstore.ingest.model import Block, ParsedDocument

__all__ = ["MAX_BYTES", "MAX_NODES", "parse_html"]

MAX_BYTES = 20_000_000
#: A page whose chosen container shows no prose and less text than this is
#: read a second time (a long one is a listing or a table, read as it is);
#: the second choice of container is taken when it shows this much prose.
_FALLBACK_BELOW = 5000
_FALLBACK_PROSE = 2 * PROSE_CHARS
#: The article's text is read from JSON-LD's ``articleBody`` when it holds
#: this many characters, and this many times the text the markup gave.
_DECLARED_BODY_CHARS = 500
_DECLARED_BODY_SHARE = 2


def parse_html(
    data: bytes, *, max_nodes: int = MAX_NODES, max_bytes: int = MAX_BYTES
) -> ParsedDocument:
    """Parse an HTML page into metadata and readable blocks.

    Over ``max_bytes``, only the first ``max_bytes`` are read (``partial`` /
    ``too_large``); past ``max_nodes`` visited nodes, the walk stops and keeps
    what it has (``partial`` / ``nodes_limited``).
    """
    early = unreadable(data, "html")
    if early is not None:
        return early
    doc = ParsedDocument(kind="html")
    truncated = len(data) > max_bytes
    if truncated:
        doc.skipped.append(f"read the first {max_bytes} of {len(data)} bytes")
        data = data[:max_bytes]
    text, doc.encoding, exact = decode_exact(
        data, declared=declared_encoding(data), final=not truncated
    )
    tags = data.count(b"<") if exact else None  # a byte scan, cheaper than the text's
    kept, cut_at_node_limit = limit_markup(text, max_nodes=max_nodes, notes=doc.skipped, tags=tags)
    # What Lexbor reads: the page's own bytes where they are the text's UTF-8
    # (selectolax would encode the text again), else the text.
    markup: str | bytes = data if exact and kept is text else kept
    del text, kept  # a copy of the page fewer while it is read

    tree = LexborHTMLParser(markup, scripting=True)
    elements = Elements(tree)
    story, json_ld = read_metadata(tree, doc, elements)
    elements = unpack_templates(tree, markup, elements)
    walker = Walker(max_nodes)
    landmarks = drop_boilerplate(tree, elements, aggressive=True)
    container, article_end, teasers = main_container(tree, max_nodes, landmarks, story=story)
    drop_teasers(container, teasers)
    walker.walk(container, stop_after=article_end)
    if not walker.blocks and not walker.limited:
        # Cleaning can remove a whole page whose wrapper has an unlucky class
        # name; read it again with only the certain junk removed.
        tree = LexborHTMLParser(markup, scripting=True)
        elements = unpack_templates(tree, markup, Elements(tree))
        drop_boilerplate(tree, elements, aggressive=False)
        walker = Walker(max_nodes)
        walker.walk(tree.body or tree.root)
    doc.blocks = trim_edges(walker.blocks, walker.link_shares)
    if (
        walker.blocks
        and not walker.limited
        and sum(len(block.text) for block in doc.blocks) < _FALLBACK_BELOW
        and not _prose_in(doc.blocks)
    ):
        # No paragraph of prose: chrome may have won, or cleaning took the
        # article with it (a page builder's "widget" boxes). Choose again
        # without judging boxes in the article by the names of components
        # (a layout region's name, "sidebar" or "footer", still counts, and
        # beside a declared <main> every name does), and keep what reads as text.
        tree = LexborHTMLParser(markup, scripting=True)
        elements = unpack_templates(tree, markup, Elements(tree))
        landmarks = drop_boilerplate(tree, elements, aggressive=True, names=False)
        container, article_end, teasers = main_container(tree, max_nodes, landmarks, story=story)
        drop_teasers(container, teasers)
        second = Walker(max_nodes)
        second.walk(container, stop_after=article_end)
        blocks = trim_edges(second.blocks, second.link_shares)
        if not second.limited and _prose_in(blocks) >= _FALLBACK_PROSE:
            walker, doc.blocks = second, blocks
    if json_ld and not walker.limited:
        _read_declared_body(doc, json_ld, max_nodes)
    if doc.date is None:
        # Read before trimming: the byline is among the lines trimmed.
        read_byline_date(doc, walker.blocks)

    if walker.limited:
        doc.skipped.append(f"stopped after {max_nodes} nodes")
    if truncated:
        doc.status, doc.reason = "partial", "too_large"
    elif walker.limited or cut_at_node_limit:
        doc.status, doc.reason = "partial", "nodes_limited"
    if not doc.blocks and doc.status == "ok":
        doc.status, doc.reason = "empty", "no_text"
    return doc


def _read_declared_body(doc: ParsedDocument, json_ld: list[str], max_nodes: int) -> None:
    """Read the article from the page's JSON-LD ``articleBody`` when the
    markup held much less text: a page whose script renders the article
    from data it carries, or one that shows its lead and keeps the rest
    for subscribers. The markup's title and paragraphs of prose (the lead)
    stay before it, unless the declared body holds them too.
    """
    read = sum(len(block.text) for block in doc.blocks)
    wanted = max(_DECLARED_BODY_CHARS, _DECLARED_BODY_SHARE * read)
    # A block's text is no shorter than any string in it: most pages' JSON-LD
    # is too short to hold such a body, and is not parsed again.
    sources = [source for source in json_ld if len(source) >= wanted and "articleBody" in source]
    body = next(filter(None, map(json_ld_body, sources)), None)
    if body is None or len(body) < wanted:
        return
    if "<" in body and ">" in body:
        # Markup inside the string: its text, as a page's.
        fragment = LexborHTMLParser(limit_markup(body, max_nodes=max_nodes, notes=doc.skipped)[0])
        walker = Walker(max_nodes)
        walker.walk(fragment.body or fragment.root)
        blocks = walker.blocks
    else:
        # Plain text, where publishers often leave entities ("&amp;", "&#8217;").
        paragraphs = (collapse(unescape(line)) for line in body.splitlines())
        blocks = [Block(text) for text in paragraphs if text]
    if sum(len(block.text) for block in blocks) < _DECLARED_BODY_SHARE * read:
        return
    declared = collapse(body)
    lead = [
        block
        for position, block in enumerate(doc.blocks)
        if (block.kind == "heading" and not position)
        or (is_prose(block, 0.0) and collapse(block.text) not in declared)
    ]
    doc.blocks = lead + blocks
    doc.skipped.append(
        f"the markup held {read} characters of text: "
        f"read the {len(body)} of its JSON-LD articleBody after its title and lead"
    )


def _prose_in(blocks: list[Block]) -> int:
    """Characters of ``blocks`` in paragraphs of prose (their links not known)."""
    return sum(len(block.text) for block in blocks if is_prose(block, 0.0))
