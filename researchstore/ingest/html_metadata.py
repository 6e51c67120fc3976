"""What an HTML page says of itself: its title, description, language and
date, from its head, its microdata and JSON-LD, and the byline above its
article.

``read_metadata`` fills a ``ParsedDocument``'s metadata from the page's
tree; ``read_byline_date`` reads a date written in the article's lead when
the page declares none.
"""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser, LexborNode

from researchstore.ingest.decode import normalize_language
from researchstore.ingest.edges import is_prose
from researchstore.ingest.html_cleaning import Elements
from researchstore.ingest.html_nodes import collapse, has_ancestor
from researchstore.ingest.html_rules import (
    DATE_KEYS,
    choose_title,
    iso_date,
    json_ld_date,
    visible_date,
)
from researchstore.ingest.html_tags import TITLE_KEYS
from researchstore.ingest.model import Block, ParsedDocument

__all__ = ["read_byline_date", "read_metadata"]

#: How many JSON-LD blocks are read (for the date, and for the article's text).
_MAX_JSON_LD = 20
#: How many blocks at the top of the article are read for a byline's date.
_BYLINE_BLOCKS = 6


def read_metadata(
    tree: LexborHTMLParser, doc: ParsedDocument, elements: Elements
) -> tuple[bool, list[str]]:
    """Fill ``doc``'s title, description, language and date from the page's
    head. Returns whether the page declares itself one story (``og:type``
    article), and the text of its JSON-LD blocks (their scripts are removed
    before the article is read)."""
    found = _metadata_elements(tree, elements)
    metas: dict[str, str] = {}
    # Where each date-bearing key was read; keys of <meta> tags are "meta".
    date_sources = {"datepublished": "time", "time": "time", "ld:datepublished": "json-ld"}
    for meta in found["meta"]:
        attributes = meta.attributes
        content = collapse(attributes.get("content"))
        if not content:
            continue
        for attribute in ("property", "name", "itemprop", "http-equiv"):
            # One tag may name several properties: property="dc:title og:title".
            for key in (attributes.get(attribute) or "").lower().split()[:8]:
                if key not in metas:
                    metas[key] = content
                    if key in date_sources:
                        date_sources[key] = "meta"
    for node in found["published"]:
        metas.setdefault("datepublished", node.attributes.get("datetime") or "")
    for node in found["time"]:
        metas.setdefault("time", node.attributes.get("datetime") or "")
    # JSON-LD is parsed only when no <meta> says when the article appeared
    # (the one key read before it): parsing it is the costly part.
    json_ld = [node.text() for node in found["json-ld"][:_MAX_JSON_LD]]
    if not iso_date(metas.get("article:published_time") or ""):
        for source in json_ld:
            published = json_ld_date(source)
            if published:
                metas.setdefault("ld:datepublished", published)
                break

    root = tree.root
    if root is not None:
        attributes = root.attributes
        doc.language = normalize_language(attributes.get("lang") or attributes.get("xml:lang"))

    # The title the publisher declares for the article in a <meta> comes
    # first (as in Readability; JSON-LD is script, never read for text); else
    # <title> (the head's, else the first), without a site-name affix that
    # the h1 gives away.
    titles = found["title"]
    title_node = next((node for node in titles if has_ancestor(node, ("head",))), None)
    title_node = title_node or next(iter(titles), None)
    title = collapse(title_node.text()) if title_node is not None else ""
    declared = next((metas[key] for key in TITLE_KEYS if metas.get(key)), "")
    site_name = metas.get("og:site_name") or ""
    doc.title = declared or choose_title(title, "", _first_h1(found["h1"]), site_name) or None
    doc.description = (
        metas.get("description")
        or metas.get("og:description")
        or metas.get("twitter:description")
        or None
    )
    for key in DATE_KEYS:
        if key in metas and (parsed := iso_date(metas[key])):
            doc.date, doc.date_source = parsed, date_sources.get(key, "meta")
            break
    return (metas.get("og:type") or "").lower() == "article", json_ld


def _metadata_elements(tree: LexborHTMLParser, elements: Elements) -> dict[str, list[LexborNode]]:
    """The elements ``read_metadata`` reads, by kind, each in document order."""
    return {
        "meta": [node for node in elements.tagged("meta") if "content" in node.attributes],
        # Any element may carry it: the one kind found by its attributes.
        "published": tree.css("[itemprop=datePublished][datetime]"),
        "time": [node for node in elements.tagged("time") if "datetime" in node.attributes],
        "json-ld": [
            node
            for node in elements.tagged("script")
            if (node.attributes.get("type") or "").lower() == "application/ld+json"
        ],
        "title": elements.tagged("title"),
        "h1": elements.tagged("h1"),
    }


def read_byline_date(doc: ParsedDocument, blocks: list[Block]) -> None:
    """A date written in the lines above the article's first paragraph, if any.

    Only the lead (the title, byline and date lines) is read: a date further
    down is one the story mentions, or a related story's.
    """
    for block in blocks[:_BYLINE_BLOCKS]:
        if is_prose(block, 0.0):
            return
        found = visible_date(block.text)
        if found is not None:
            doc.date, doc.date_source = found, "byline"
            return


def _first_h1(headings: list[LexborNode]) -> str:
    """The first of the page's ``h1`` ``headings`` in the article, else the first."""
    first = ""
    for h1 in headings[:10]:
        text = collapse(h1.text())
        if not text:
            continue
        if has_ancestor(h1, ("main", "article")):
            return text
        first = first or text
    return first
