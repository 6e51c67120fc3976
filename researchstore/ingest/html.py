"""HTML pages into metadata and readable blocks (selectolax, Lexbor backend).

The only module that imports selectolax. The steps:

1. guard: binary bytes, a size limit, and nesting so deep that Lexbor's tree
   builder would go quadratic (flattened, as browsers do);
2. metadata from ``<head>``: title, description, language, date;
3. cleaning: scripts, styles, navigation, footers, forms, asides, hidden
   elements and boilerplate marked by id/class/role/aria-label are removed;
4. the main container: ``<main>``, ``[role=main]`` or ``<article>`` when it
   holds most of the text, else the element with the densest paragraphs;
5. an iterative walk (no recursion, a node budget) emitting headings,
   paragraphs, lists, tables, code and quotes in reading order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from html import unescape
from itertools import islice
from types import NotImplementedType
from typing import Any, NamedTuple

from selectolax.lexbor import LexborHTMLParser, LexborNode

from researchstore.ingest.decode import (
    declared_encoding,
    decode_exact,
    normalize_language,
    unreadable,
)
from researchstore.ingest.edges import PROSE_CHARS, is_prose, trim_edges
from researchstore.ingest.html_rules import (
    BREAK,
    DATE_KEYS,
    EVIDENCE_RULES_FOR_C,
    boilerplate_evidence,
    choose_title,
    collapse_spaces,
    is_hidden,
    iso_date,
    join_lines,
    json_ld_body,
    json_ld_date,
    limit_markup,
    visible_date,
)
from researchstore.ingest.html_tags import (
    CELLS,
    DROP_TAGS,
    HEADINGS,
    INLINE,
    LEAF_BLOCKS,
    LISTS,
    NEVER_BOILERPLATE,
    PARAGRAPH_LIKE,
    TITLE_KEYS,
    VOID_SKIP,
)
from researchstore.ingest.model import Block, ParsedDocument
from researchstore.speedups import SPEEDUPS, Speedups

__all__ = ["parse_html"]

MAX_NODES = 200_000
MAX_BYTES = 20_000_000
#: An ancestor of the densest element wins when it holds this much more text.
_GROW = 1.5

#: Elements removed with what they hold (a line break becomes a marker).
_DROP_OR_BREAK = frozenset((*DROP_TAGS, "br"))
#: Elements the steps read by their tag (``_Elements``).
_READ_TAGS = frozenset(("meta", "time", "script", "title", "h1", "template", "header", "form"))
_WANTED_TAGS = _DROP_OR_BREAK | _READ_TAGS
_ATTRIBUTE_SELECTOR = (
    f":is([class],[id],[role],[aria-label],[aria-modal],[itemprop],[itemtype])"
    f":not({','.join(NEVER_BOILERPLATE)})"
)
#: The tags ``_ATTRIBUTE_SELECTOR`` leaves out, as ``_speedups.marked_at`` reads them.
_NEVER_BOILERPLATE = frozenset(NEVER_BOILERPLATE)
_HIDDEN_SELECTOR = '[hidden],[aria-hidden="true" i],[style*="none" i],[style*="hidden" i]'


def _bind_lexbor() -> Speedups | None:
    """The C speedups, where they can read selectolax's own tree (Lexbor's
    functions, which its module exports); else None."""
    if SPEEDUPS is None:
        return None
    import selectolax.lexbor

    try:
        if not SPEEDUPS.lexbor_bind(selectolax.lexbor.__file__):
            return None
    except AttributeError:  # an older build of the speedups
        return None
    # Read one page both ways: a Lexbor whose functions changed is not used.
    nodes = LexborHTMLParser(_BIND_CHECK).css(_ATTRIBUTE_SELECTOR)
    read = SPEEDUPS.evidence_at([node.mem_id for node in nodes], *EVIDENCE_RULES_FOR_C)
    wanted = [boilerplate_evidence(node.attributes) for node in nodes]
    return SPEEDUPS if read == wanted == ["region", "role", "role", "comments", None] else None


#: A page whose elements each read differently (``_bind_lexbor``).
_BIND_CHECK = (
    '<div class="site-sidebar x" id="a"><p role="navigation" class="entry">a</p>'
    '<section itemprop="name author">b</section><ul id="comments"><li class="c">c</li></ul></div>'
)


_LEXBOR = _bind_lexbor()
#: The C speedups where they can also walk selectolax's tree (``_bind_tree``,
#: at the end of this module).
_TREE: Speedups | None = None

#: How many elements with an id, class, role... are looked at for boilerplate.
_MAX_CANDIDATES = 20_000
#: How many times over the page's text the boilerplate checks may read in all.
_CHECK_BUDGET_PAGES = 50
#: How many headers and forms are looked at.
_MAX_ELEMENT_CHECKS = 500
#: A class-name hit is overruled when the element holds this much text, most
#: of it in paragraphs of at least ``_PROSE_PARAGRAPH`` characters.
_PROSE_MIN_CHARS = 500
_PROSE_PARAGRAPH = 80
#: Ancestor walks stop after this many steps (deep trees stay linear).
_MAX_ANCESTORS = 256


#: How many blocks at the top of the article are read for a byline's date.
_BYLINE_BLOCKS = 6
#: A declared container grows into ancestors adding at most this share of text.
_WIDEN_SHARE = 1.3
_WIDEN_STEPS = 4
#: Where a page declares its article, most specific first.
#: With the share of the densest element's text each must hold: microdata
#: names the article's body itself, <article> and <main> often a wider box.
_DECLARED_CONTAINERS = (("body", 0.2), ("article", 0.5), ("main", 0.5))
#: A page whose chosen container shows no prose and less text than this is
#: read a second time (a long one is a listing or a table, read as it is);
#: the second choice of container is taken when it shows this much prose.
_FALLBACK_BELOW = 5000
_FALLBACK_PROSE = 2 * PROSE_CHARS
#: JSON-LD read for the article's text: at most so many blocks; used when
#: it holds this many characters, and this many times the text the markup gave.
_MAX_JSON_LD = 20
_DECLARED_BODY_CHARS = 500
_DECLARED_BODY_SHARE = 2
#: Template scripts inside the declared article, read as markup (at most so many).
_TEMPLATE_TYPES = ("text/template", "text/x-template")
_MAX_SHADOW_ROOTS = 200
_MAX_TEMPLATES = 20
#: Teaser cards (``_teaser_cards``): how many alike boxes make a group, how
#: far above its linked heading a box may be, and how long one may read.
_TEASER_GROUP = 3
_CARD_STEPS = 4
_TEASER_CHARS = 800
#: A page not declared a story is a listing when its teasers hold this many
#: times the text of everything else.
_LISTING_SHARE = 4
#: Commas in the scripts that write them (a paragraph's score counts them).
_COMMAS = (",", "、", "，", "،")
_TRAILING_BRACKETS = re.compile(r"\s*\[[^\[\]]{1,60}\]$")


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
    elements = _Elements(tree)
    story, json_ld = _read_metadata(tree, doc, elements)
    elements = _unpack_templates(tree, markup, elements)
    walker = _Walker(max_nodes)
    landmarks = _drop_boilerplate(tree, elements, aggressive=True)
    container, article_end, teasers = _main_container(tree, max_nodes, landmarks, story=story)
    _drop_teasers(container, teasers)
    walker.walk(container, stop_after=article_end)
    if not walker.blocks and not walker.limited:
        # Cleaning can remove a whole page whose wrapper has an unlucky class
        # name; read it again with only the certain junk removed.
        tree = LexborHTMLParser(markup, scripting=True)
        elements = _unpack_templates(tree, markup, _Elements(tree))
        _drop_boilerplate(tree, elements, aggressive=False)
        walker = _Walker(max_nodes)
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
        elements = _unpack_templates(tree, markup, _Elements(tree))
        landmarks = _drop_boilerplate(tree, elements, aggressive=True, names=False)
        container, article_end, teasers = _main_container(tree, max_nodes, landmarks, story=story)
        _drop_teasers(container, teasers)
        second = _Walker(max_nodes)
        second.walk(container, stop_after=article_end)
        blocks = trim_edges(second.blocks, second.link_shares)
        if not second.limited and _prose_in(blocks) >= _FALLBACK_PROSE:
            walker, doc.blocks = second, blocks
    if json_ld and not walker.limited:
        _read_declared_body(doc, json_ld, max_nodes)
    if doc.date is None:
        # Read before trimming: the byline is among the lines trimmed.
        _read_byline_date(doc, walker.blocks)

    if walker.limited:
        doc.skipped.append(f"stopped after {max_nodes} nodes")
    if truncated:
        doc.status, doc.reason = "partial", "too_large"
    elif walker.limited or cut_at_node_limit:
        doc.status, doc.reason = "partial", "nodes_limited"
    if not doc.blocks and doc.status == "ok":
        doc.status, doc.reason = "empty", "no_text"
    return doc


# -- metadata ------------------------------------------------------------------


def _collapse(text: str | None) -> str:
    return collapse_spaces(text or "")


def _collapsed_length(parts: list[str]) -> int:
    """``len(_collapse(" ".join(parts)))``, without making the string."""
    words = " ".join(parts).split()
    return sum(map(len, words)) + len(words) - 1 if words else 0


def _read_metadata(
    tree: LexborHTMLParser, doc: ParsedDocument, elements: _Elements
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
        content = _collapse(attributes.get("content"))
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
    title_node = next((node for node in titles if _has_ancestor(node, ("head",))), None)
    title_node = title_node or next(iter(titles), None)
    title = _collapse(title_node.text()) if title_node is not None else ""
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
        walker = _Walker(max_nodes)
        walker.walk(fragment.body or fragment.root)
        blocks = walker.blocks
    else:
        # Plain text, where publishers often leave entities ("&amp;", "&#8217;").
        paragraphs = (_collapse(unescape(line)) for line in body.splitlines())
        blocks = [Block(text) for text in paragraphs if text]
    if sum(len(block.text) for block in blocks) < _DECLARED_BODY_SHARE * read:
        return
    declared = _collapse(body)
    lead = [
        block
        for position, block in enumerate(doc.blocks)
        if (block.kind == "heading" and not position)
        or (is_prose(block, 0.0) and _collapse(block.text) not in declared)
    ]
    doc.blocks = lead + blocks
    doc.skipped.append(
        f"the markup held {read} characters of text: "
        f"read the {len(body)} of its JSON-LD articleBody after its title and lead"
    )


def _metadata_elements(tree: LexborHTMLParser, elements: _Elements) -> dict[str, list[LexborNode]]:
    """The elements ``_read_metadata`` reads, by kind, each in document order."""
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


def _read_byline_date(doc: ParsedDocument, blocks: list[Block]) -> None:
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
        text = _collapse(h1.text())
        if not text:
            continue
        if _has_ancestor(h1, ("main", "article")):
            return text
        first = first or text
    return first


# -- cleaning ------------------------------------------------------------------


def _unpack_templates(
    tree: LexborHTMLParser, markup: str | bytes, elements: _Elements
) -> _Elements:
    """Read the markup a page renders from templates as the page's markup.

    - A declarative shadow root (``<template shadowrootmode="open">``) is
      drawn by the browser in place of the template: its text is the page's.
      Other ``<template>`` elements are inert and stay dropped.
    - Some pages (Blogger's themes among them) ship the article's body as a
      ``<script type="text/template">`` that a script renders: the text is
      the page's own, only not parsed yet. Templates outside the declared
      article stay scripts.

    A page whose ``markup`` (its text, or its UTF-8 bytes) never says
    "template" is not searched. Returns the page's ``elements``, found again
    where markup was unpacked.
    """
    # One scan of the page before any look at the tree.
    says = "template" in markup if isinstance(markup, str) else b"template" in markup
    if not says:
        return elements
    unpacked = False
    roots = [node for node in elements.tagged("template") if _is_shadow_root(node)]
    for root in roots[:_MAX_SHADOW_ROOTS]:
        markup = root.html or ""
        # The template's own tags around its content (Lexbor keeps the content
        # apart from the tree: only the markup reaches it).
        markup = markup[markup.find(">") + 1 : markup.rfind("<")]
        unpacked |= _replace_with_markup(root, markup)
    if unpacked:
        # The markup of a shadow root may hold template scripts of its own.
        elements = _Elements(tree)
    unpacked = False
    templates = [node for node in elements.tagged("script") if _is_article_template(node)]
    for script in templates[:_MAX_TEMPLATES]:
        markup = script.text()
        if "<" in markup:  # markup, not a bare value ("{{ title }}")
            unpacked |= _replace_with_markup(script, markup)
    return _Elements(tree) if unpacked else elements


def _is_shadow_root(template: LexborNode) -> bool:
    """Whether a ``<template>`` is a declarative shadow root."""
    attributes = template.attributes
    return "shadowrootmode" in attributes or "shadowroot" in attributes


def _is_article_template(script: LexborNode) -> bool:
    """Whether a ``<script>`` is a template inside the article the page declares."""
    if (script.attributes.get("type") or "").lower() not in _TEMPLATE_TYPES:
        return False
    parent = script.parent
    while parent is not None:
        if parent.tag in ("article", "main") or parent.attributes.get("itemprop") == "articleBody":
            return True
        parent = parent.parent
    return False


def _replace_with_markup(node: LexborNode, markup: str) -> bool:
    """Put the elements of ``markup`` in ``node``'s place; whether there were any."""
    if not markup.strip():
        return False
    # A script's text was never bounded with the page's markup: bound it now.
    markup = limit_markup(markup, max_nodes=MAX_NODES, notes=[])[0]
    holder = LexborHTMLParser(f"<div>{markup}</div>", scripting=True).css_first("body > div")
    if holder is None:
        return False
    node.replace_with(holder)
    return True


def _ancestors(node: LexborNode) -> Iterator[LexborNode]:
    """The node's ancestors, nearest first, at most ``_MAX_ANCESTORS`` of them."""
    parent = node.parent
    for _ in range(_MAX_ANCESTORS):
        if parent is None:
            return
        yield parent
        parent = parent.parent


def _text_length(node: LexborNode) -> int:
    """``len(node.text())``, counted in C without making the text where it can be."""
    if _TREE is not None:
        return _TREE.text_length(node.mem_id)
    return len(node.text())


def _ancestor_in(node: LexborNode, addresses: set[int], steps: int) -> bool:
    """Whether one of the node's first ``steps`` ancestors is at one of ``addresses``."""
    if _TREE is not None:
        return _TREE.ancestor_in(node.mem_id, addresses, steps)
    return any(parent.mem_id in addresses for parent in islice(_ancestors(node), steps))


def _has_ancestor(node: LexborNode, tags: tuple[str, ...]) -> bool:
    return any(
        parent.tag in tags or parent.attributes.get("role") == "main" for parent in _ancestors(node)
    )


class _Elements:
    """A page's elements of the tags its steps ask for, in one walk of it.

    A CSS query walks the whole page and parses its selector on every call;
    these are found by tag, all at once, in document order: ``dropped``, those
    removed with what they hold (and line breaks), and ``tagged(tag)`` the
    ones of ``_READ_TAGS``.
    """

    __slots__ = ("_by_tag", "dropped")

    def __init__(self, tree: LexborHTMLParser) -> None:
        self._by_tag: dict[str, list[LexborNode]] = {}
        self.dropped: list[LexborNode] = []
        root = tree.root
        if root is None:
            return
        found: Iterable[tuple[str | None, LexborNode]]
        if _TREE is not None:  # in C: a node made only for each element wanted
            found = _TREE.elements_at(tree, root.mem_id, _WANTED_TAGS)
        else:
            found = ((node.tag, node) for node in root.traverse())
        for tag, node in found:
            if tag in _DROP_OR_BREAK:
                self.dropped.append(node)
            if tag in _READ_TAGS:
                self._by_tag.setdefault(tag, []).append(node)

    def tagged(self, tag: str) -> list[LexborNode]:
        return self._by_tag.get(tag, [])


def _marked_elements(tree: LexborHTMLParser) -> list[tuple[LexborNode, str]]:
    """Each of ``tree.css(_ATTRIBUTE_SELECTOR)``'s first ``_MAX_CANDIDATES`` that
    its attributes mark as chrome, with how (``boilerplate_evidence``). Their
    attributes are read in C where it can read selectolax's tree: a node's
    ``attributes`` makes a dict of them all, most of a page's cost here."""
    pairs: Iterable[tuple[LexborNode, str | None | NotImplementedType]]
    if _TREE is not None and tree.root is not None:
        # In one walk in C: a node made only for an element marked.
        pairs = _TREE.marked_at(
            tree, tree.root.mem_id, _NEVER_BOILERPLATE, _MAX_CANDIDATES, *EVIDENCE_RULES_FOR_C
        )
    else:
        candidates = tree.css(_ATTRIBUTE_SELECTOR)[:_MAX_CANDIDATES]
        read: list[str | None | NotImplementedType]
        if _LEXBOR is None:
            read = [NotImplemented] * len(candidates)
        else:
            read = _LEXBOR.evidence_at([node.mem_id for node in candidates], *EVIDENCE_RULES_FOR_C)
        pairs = zip(candidates, read, strict=True)
    marked = []
    for node, evidence in pairs:
        if isinstance(evidence, NotImplementedType):  # what only Python reads
            evidence = boilerplate_evidence(node.attributes)
        if evidence is not None:
            marked.append((node, evidence))
    return marked


class _Landmarks(NamedTuple):
    """The elements a page declares its article with, each kind in document order."""

    #: ``[itemprop=articleBody]``: microdata naming the article's body.
    body: list[LexborNode]
    article: list[LexborNode]
    #: ``<main>`` or ``[role=main]``.
    main: list[LexborNode]
    #: ``body`` and ``main`` together.
    declared: list[LexborNode]

    def left(self) -> _Landmarks:
        """Those still in the page (an element removed from it has no parent)."""
        return _Landmarks(*([node for node in nodes if node.parent is not None] for nodes in self))


def _landmarks(tree: LexborHTMLParser) -> _Landmarks:
    """The page's declared article elements, found in one walk of it."""
    found = _Landmarks([], [], [], [])
    for node in tree.css("main, [role=main], [itemprop=articleBody], article"):
        attributes = node.attributes
        body = attributes.get("itemprop") == "articleBody"
        main = node.tag == "main" or attributes.get("role") == "main"
        if body:
            found.body.append(node)
        if main:
            found.main.append(node)
        if body or main:
            found.declared.append(node)
        if node.tag == "article":
            found.article.append(node)
    return found


def _drop_boilerplate(
    tree: LexborHTMLParser, elements: _Elements, *, aggressive: bool, names: bool = True
) -> _Landmarks:
    """Remove what is never the article; with ``aggressive``, likely chrome too
    (hidden, marked by ARIA or microdata, or by its id or class: with
    ``names`` everywhere; without, a component's name such as "widget"
    only outside the ``<main>`` the page declares). Returns the page's
    landmarks as they were before (``_Landmarks.left`` gives those left)."""
    # An <aside> or <nav> around the article the page declares is a layout
    # box, not chrome: it stays (what else it holds is judged later).
    landmarks = _landmarks(tree)
    declared = {holder.mem_id for node in landmarks.declared[:20] for holder in _ancestors(node)}
    for node in elements.dropped:
        if node.tag == "br":
            # Line breaks become a marker character, so that text read in one
            # call (``node.text()``) still shows where the lines broke.
            node.replace_with(BREAK)
        elif node.mem_id not in declared:
            node.decompose()
    if not aggressive:
        return landmarks
    body = tree.body or tree.root
    if body is None:
        return landmarks
    body_chars = _text_length(body)
    # Checks cost about the size of the element checked: a budget in
    # characters keeps many small ones cheap and bounds a few huge ones.
    budget = _CHECK_BUDGET_PAGES * body_chars + 100_000
    removed: set[int] = set()
    # Everything holding the <main> or the longest <article> (not one that
    # is a comment), found once, not per check.
    left = landmarks.left()
    mains, articles = left.main[:20], left.article[:20]
    if mains:
        # The page's own article is the one in its <main>, where there is one.
        articles = [node for node in articles if _has_ancestor(node, ("main",))] or articles
    articles.sort(key=_text_length)
    article_holders = {
        holder.mem_id for node in [*mains, *articles[-1:]] for holder in (node, *_ancestors(node))
    }

    def beside_main(node: LexborNode) -> bool:
        # Outside the <main> the page declares, and not around it.
        return (
            bool(mains)
            and node.mem_id not in article_holders
            and not _has_ancestor(node, ("main",))
        )

    def protected(node: LexborNode, *, evidence: str = "role") -> bool:
        # A wrapper around the article (a page-wide <form>, a layout div
        # with "sidebar" in its class) must not take the article with it.
        nonlocal budget
        if node.mem_id in article_holders or budget < 0:
            return True
        chars = _text_length(node)
        budget -= chars
        if chars * 2 >= body_chars:
            # Half the page: a wrapper around the article, unless it floats
            # over the page or the page declares its <main> and this box is
            # neither in it nor around it.
            return evidence != "overlay" and (not mains or _has_ancestor(node, ("main",)))
        if evidence not in ("name", "region", "overlay") or chars < _PROSE_MIN_CHARS:
            return False
        # Only a word in a class name says it is chrome, while the element
        # reads as running text (most of it in long paragraphs or code): a
        # layout wrapper such as "entry share" or "elementor-widget", or a
        # manual's section named for its title ("sharing-your-changes"), kept.
        budget -= chars
        return _prose_chars(node) * 2 >= chars

    def remove_if_unprotected(
        node: LexborNode, *, hidden: bool = False, evidence: str = "role"
    ) -> None:
        # Inside a subtree already removed: gone with it, nothing to check.
        if removed and _ancestor_in(node, removed, 32):
            removed.add(node.mem_id)
        elif hidden and node.mem_id not in article_holders:
            # Hidden is what the page says outright, unlike a class name: it
            # goes however much text it holds (a hidden wrapper around the
            # <main> or <article> is one that a script reveals: it stays).
            removed.add(node.mem_id)
            node.decompose()
        elif not protected(node, evidence=evidence):
            removed.add(node.mem_id)
            node.decompose()

    # Every loop is capped, so a page of a million classed elements costs no
    # more than an ordinary one; what is left over is merely kept.
    shown_kinds: dict[int, set[tuple[str, str]]] = {}
    for node in tree.css(_HIDDEN_SELECTOR)[:_MAX_CANDIDATES]:
        if budget < 0:
            break
        if (
            node.tag not in ("html", "body")
            and is_hidden(node.attributes)
            and not _is_hidden_page(node, shown_kinds)
        ):
            remove_if_unprotected(node, hidden=True)
    for node, evidence in _marked_elements(tree):
        if budget < 0:
            break
        if names or evidence != "name" or beside_main(node):
            remove_if_unprotected(node, evidence=evidence)
    # Those still in the page (an element removed has no parent), the
    # headers first, then the forms left once the headers are judged.
    headers = [node for node in elements.tagged("header") if node.parent is not None]
    for node in headers[:_MAX_ELEMENT_CHECKS]:
        # A page-wide <header> around the <main> is a layout wrapper.
        if not _has_ancestor(node, ("main", "article")) and (names or beside_main(node)):
            remove_if_unprotected(node, evidence="name")
    forms = [node for node in elements.tagged("form") if node.parent is not None]
    for node in forms[:_MAX_ELEMENT_CHECKS]:
        remove_if_unprotected(node)
    return landmarks


def _kind(node: LexborNode) -> tuple[str, str] | None:
    """An element's tag and first class (a box's own name, before its states)."""
    classes = (node.attributes.get("class") or "").split()
    return (node.tag or "", classes[0]) if classes else None


def _is_hidden_page(node: LexborNode, shown_kinds: dict[int, set[tuple[str, str]]]) -> bool:
    """Whether a hidden element is one page of several alike, one of them shown.

    A slideshow, a paged gallery or a set of tabs shows one box and hides
    its alike siblings until the reader pages on: those hold the rest of
    the same text, not chrome. ``shown_kinds`` keeps each parent's shown
    kinds, read once per parent.
    """
    kind = _kind(node)
    parent = node.parent
    if kind is None or parent is None:
        return False
    shown = shown_kinds.get(parent.mem_id)
    if shown is None:
        shown = set()
        for sibling in islice(parent.iter(), _MAX_ELEMENT_CHECKS):
            sibling_kind = _kind(sibling)
            if sibling_kind is not None and not is_hidden(sibling.attributes):
                shown.add(sibling_kind)
        shown_kinds[parent.mem_id] = shown
    return kind in shown


def _prose_in(blocks: list[Block]) -> int:
    """Characters of ``blocks`` in paragraphs of prose (their links not known)."""
    return sum(len(block.text) for block in blocks if is_prose(block, 0.0))


def _prose_chars(node: LexborNode) -> int:
    """Characters of ``node``'s text set in paragraphs long enough to be prose,
    or in preformatted blocks (code, which no strip of chrome holds)."""
    total = 0
    for paragraph in node.css("p, pre")[:500]:
        length = _text_length(paragraph)
        if length >= _PROSE_PARAGRAPH or paragraph.tag == "pre":
            total += length
    return total


def _main_container(
    tree: LexborHTMLParser, max_nodes: int, landmarks: _Landmarks, *, story: bool = False
) -> tuple[LexborNode | None, LexborNode | None, list[LexborNode]]:
    """Pick the element holding the article's text, where the article ends,
    and the teasers of other stories found on the page (``_Densest.teasers``).

    The densest element by paragraph score is the structural candidate; an
    element the page declares as its article (microdata ``articleBody``,
    then ``<article>``, then ``<main>``) wins when it holds enough of that
    much paragraph text outside links (a fifth for ``articleBody``, half for
    the others), so a declared teaser, a link strip or a footer marked up as
    an article never stands in for the story. A
    declared container grows into the ancestor that adds its lead and title,
    read up to the declared container's end (what follows it there is a
    byline box, tags or related stories).
    """
    body = tree.body or tree.root
    if body is None:
        return None, None, []
    found = _densest(body, max_nodes, story=story)
    landmarks = landmarks.left()
    if found is None:
        # No paragraph anywhere: the largest declared container, else all.
        for nodes in (landmarks.main, landmarks.article):
            sized = [(_text_length(node), node) for node in nodes[:20]]
            if sized:
                return max(sized, key=lambda pair: pair[0])[1], None, []
        return body, None, []
    top, content, teasers = found
    best = content(top)
    for kind, share in _DECLARED_CONTAINERS:
        candidates = getattr(landmarks, kind)[:50]
        if not candidates:
            continue
        chars, declared = max(
            ((content(node), node) for node in candidates), key=lambda pair: pair[0]
        )
        end = declared
        if kind == "body":
            split = _split_body(candidates, content)
            if split is not None:
                chars, declared, end = split
        if chars >= share * best and chars > 0:
            wider = _widen(declared, chars, content)
            return wider, (end if wider is not end else None), teasers
    return top, None, teasers


def _split_body(
    bodies: list[LexborNode], content: Callable[[LexborNode], int]
) -> tuple[int, LexborNode, LexborNode] | None:
    """An article body declared in parts (``articleBody`` set on each run of
    paragraphs between its pictures and boxes): the parts' paragraph text,
    the nearest element holding them all, and the last part. None unless
    there are several parts and that element holds little else.
    """
    parts = [node for node in bodies if content(node) > 0]
    if len(parts) < 2:
        return None
    chain = [parts[0], *_ancestors(parts[0])]
    depth = {node.mem_id: position for position, node in enumerate(chain)}
    common = 0
    for part in parts[1:]:
        meets = next(
            (depth[node.mem_id] for node in (part, *_ancestors(part)) if node.mem_id in depth), None
        )
        if meets is None:
            return None
        common = max(common, meets)
    holder = chain[common]
    chars = sum(content(part) for part in parts)
    if holder.tag in ("body", "html") or content(holder) > _WIDEN_SHARE * chars:
        return None
    return chars, holder, parts[-1]


def _drop_teasers(container: LexborNode | None, teasers: list[LexborNode]) -> None:
    """Remove the teaser cards inside ``container``: other stories' titles,
    excerpts and bylines, wherever they sit in the story. A card that holds
    the container is kept.
    """
    if container is None or not teasers:
        return
    around = {container.mem_id, *(parent.mem_id for parent in _ancestors(container))}
    inside = [
        teaser
        for teaser in teasers
        if teaser.mem_id not in around and _ancestor_in(teaser, {container.mem_id}, _MAX_ANCESTORS)
    ]
    # Judged on the whole tree first: a node removed with an outer one is gone.
    addresses = {teaser.mem_id for teaser in inside}
    for teaser in [node for node in inside if not _ancestor_in(node, addresses, _MAX_ANCESTORS)]:
        teaser.decompose()


def _widen(node: LexborNode, chars: int, content: Callable[[LexborNode], int]) -> LexborNode:
    """The node, or the ancestor that adds its lead and title and little else.

    A declared article body often leaves out the standfirst above it; a
    parent whose paragraph text is not much more than the node's holds
    that and no second story.
    """
    for ancestor in islice(_ancestors(node), _WIDEN_STEPS):
        if ancestor.tag in ("body", "html") or content(ancestor) > _WIDEN_SHARE * chars:
            break
        node = ancestor
    return node


#: A paragraph shorter than this (its text and links) is not scored.
_MIN_PARAGRAPH = 25
#: Paragraph text is summed into at most this many ancestors of its parent,
#: and over at most ``_CHARS_BUDGET`` such steps in all.
_CHARS_ANCESTORS = 64
_CHARS_BUDGET = 1_000_000

#: Paragraphs by their element's address: (texts outside links, texts in links).
Paragraphs = dict[int, tuple[list[str], list[str]]]


def _read_paragraphs(
    body: LexborNode, max_nodes: int
) -> tuple[Paragraphs, dict[int, int], dict[int, LexborNode] | None]:
    """Each "paragraph" under ``body`` with its texts, in document order: the
    nearest non-inline element around a run of text, so pages that set their
    text in bare ``<div>``s score like ``<p>``s. Also each heading whose text
    runs inside a link, with the link (for the teaser cards: a CSS query
    would walk the page again). By address (``mem_id``); read in C where it
    can read selectolax's tree, else here, which also gives the nodes seen.
    """
    if _TREE is not None:
        paragraphs, headings = _TREE.paragraphs_at(
            body.mem_id, max_nodes, INLINE, PARAGRAPH_LIKE, HEADINGS, _MAX_ANCESTORS
        )
        return paragraphs, headings, None
    return _read_paragraphs_py(body, max_nodes)


def _read_paragraphs_py(
    body: LexborNode, max_nodes: int
) -> tuple[Paragraphs, dict[int, int], dict[int, LexborNode]]:
    paragraphs: Paragraphs = {}
    linked_headings: dict[int, int] = {}
    nodes: dict[int, LexborNode] = {}
    for node in islice(body.traverse(include_text=True), max_nodes):
        if not node.is_text_node:
            continue
        text = node.text_content
        if not text or text.isspace():
            continue
        # The nearest non-inline ancestor, walked by hand: this loop runs
        # for every piece of text on the page.
        parent = node.parent
        link = None
        steps = 0
        while parent is not None and steps < _MAX_ANCESTORS:
            tag = parent.tag
            if tag == "a":
                # An <a> without href is an anchor to link to, not a link.
                if link is None and "href" in parent.attributes:
                    link = parent
            elif tag not in INLINE:
                break
            parent = parent.parent
            steps += 1
        if parent is None or parent.tag not in PARAGRAPH_LIKE:
            if link is not None and parent is not None and parent.tag in HEADINGS:
                if parent.mem_id not in linked_headings:
                    linked_headings[parent.mem_id] = link.mem_id
                    nodes[parent.mem_id], nodes[link.mem_id] = parent, link
            continue
        entry = paragraphs.get(parent.mem_id)
        if entry is None:
            entry = paragraphs[parent.mem_id] = ([], [])
            nodes[parent.mem_id] = parent
        (entry[1] if link is not None else entry[0]).append(text)
    return paragraphs, linked_headings, nodes


def _score_paragraphs(
    paragraphs: Paragraphs, nodes: dict[int, LexborNode] | None
) -> tuple[dict[int, float], dict[int, int], dict[int, int], dict[int, int]]:
    """Readability's scores: each paragraph's, shared out to five ancestors.

    Returns, by address, each scored element's score, the paragraph text
    right under each element, each paragraph's own text outside links, and
    the paragraph text under each element (summed upwards per parent, not
    per paragraph, within a step budget, so it stays linear in practice).
    In C where ``_read_paragraphs`` was (``nodes`` None), else here, adding
    the elements scored to ``nodes``.
    """
    if nodes is None:
        assert _TREE is not None
        return _TREE.paragraph_scores(
            paragraphs,
            "".join(_COMMAS),
            _MIN_PARAGRAPH,
            _MAX_ANCESTORS,
            _CHARS_ANCESTORS,
            _CHARS_BUDGET,
        )
    scores: dict[int, float] = {}
    direct: dict[int, int] = {}
    own: dict[int, int] = {}
    for key, (plain, links) in paragraphs.items():
        text = _collapse(" ".join(plain))
        link_chars = _collapsed_length(links) if links else 0
        length = len(text) + link_chars
        if length < _MIN_PARAGRAPH:
            continue
        commas = sum(map(text.count, _COMMAS))
        score = (1 + commas + min(length // 100, 3)) * len(text) / length
        own[key] = len(text)
        parent = nodes[key].parent
        if parent is None:
            continue
        direct[parent.mem_id] = direct.get(parent.mem_id, 0) + len(text)
        nodes[parent.mem_id] = parent
        for divider in (1, 2, 6, 9, 12):  # Readability's shares for five ancestors
            if parent is None or parent.tag in ("html", "-document"):
                break
            nodes[parent.mem_id] = parent
            scores[parent.mem_id] = scores.get(parent.mem_id, 0.0) + score / divider
            parent = parent.parent
    chars: dict[int, int] = {}
    steps = 0
    for key, length in direct.items():
        chars[key] = chars.get(key, 0) + length
        for ancestor in islice(_ancestors(nodes[key]), _CHARS_ANCESTORS):
            chars[ancestor.mem_id] = chars.get(ancestor.mem_id, 0) + length
        steps += _CHARS_ANCESTORS
        if steps > _CHARS_BUDGET:
            break
    return scores, direct, own, chars


class _Densest(NamedTuple):
    #: The element whose paragraphs score highest.
    top: LexborNode
    #: Any element's paragraph text outside links.
    content: Callable[[LexborNode], int]
    #: The teaser cards to remove: other stories' titles and first lines on a
    #: page that declares itself one story (none on any other page).
    teasers: list[LexborNode]


def _densest(body: LexborNode, max_nodes: int, *, story: bool = False) -> _Densest | None:
    """The element whose paragraphs score highest (Readability's heuristic).

    Paragraphs (``_read_paragraphs``) are scored as Readability does; text
    inside links counts against its paragraph.
    """
    paragraphs, linked_headings, nodes = _read_paragraphs(body, max_nodes)
    node_at: Callable[[int], LexborNode]
    if nodes is None:
        assert _TREE is not None
        node_at = partial(_TREE.lexbor_node, body.parser)
    else:
        node_at = nodes.__getitem__
    pairs = [
        (node_at(heading), node_at(link))
        for heading, link in islice(linked_headings.items(), _MAX_ELEMENT_CHECKS)
    ]
    cards = _teaser_cards(pairs)
    discounted_teasers: list[LexborNode] = []
    if cards:
        # A teaser's excerpt reads as prose, but the story it stands for is
        # elsewhere: counted as the link it is, on a page that declares
        # itself one story or holds enough text besides; otherwise the page
        # is a listing, and its teasers are what it says.
        # Each teaser paragraph, with the outermost card it sits in.
        card_of = {
            key: card for key in paragraphs if (card := _card_of(node_at(key), cards)) is not None
        }
        teasers = list(card_of)
        teaser_chars = sum(len(text) for key in teasers for text in paragraphs[key][0])
        other_chars = sum(len(text) for plain, _ in paragraphs.values() for text in plain)
        other_chars -= teaser_chars
        if other_chars and (story or other_chars * _LISTING_SHARE >= teaser_chars):
            for key in teasers:
                plain, links = paragraphs[key]
                paragraphs[key] = ([], links + plain)
            if story and other_chars * _LISTING_SHARE >= teaser_chars:
                # Removed whole from the container too, only where the page
                # declares one story and its own text holds its own: a
                # shop's or a forum's cards may be what it lists.
                boxes = {card.mem_id: card for card in card_of.values()}
                discounted_teasers = list(boxes.values())
    scores, direct, own, chars = _score_paragraphs(paragraphs, nodes)
    if not scores:
        return None

    def content(node: LexborNode) -> int:
        return chars.get(node.mem_id, 0) + own.get(node.mem_id, 0)

    # Discount link lists (ads, "more stories") by their link density.
    link_density = _LinkDensity()
    # The five best after the discount, of the ten best before it: once the
    # next one's score before it is below the fifth best after it, neither
    # it nor any after it can be among them (a discount never raises a
    # score), and their links are not counted.
    discounted: list[tuple[float, LexborNode]] = []
    for key, score in sorted(scores.items(), key=lambda item: item[1], reverse=True)[:10]:
        if len(discounted) >= 5 and score < sorted(pair[0] for pair in discounted)[-5]:
            break
        node = node_at(key)
        discounted.append((score * (1 - link_density(node)), node))
    ranked = sorted(discounted, key=lambda pair: pair[0], reverse=True)[:5]
    top_score, top = ranked[0]
    # Several near-best candidates under one ancestor: the text is split
    # into sections (steps, chapters), and the ancestor holds them all.
    alternatives = [node for score, node in ranked[1:] if score >= 0.75 * top_score]
    if len(alternatives) >= 2:
        lineages = [{parent.mem_id for parent in _ancestors(node)} for node in alternatives]
        for ancestor in _ancestors(top):
            if ancestor.tag in ("body", "html"):
                break
            if sum(ancestor.mem_id in lineage for lineage in lineages) >= 2:
                top = ancestor
                break
    # An ancestor holding much more paragraph text, not as links, holds the
    # rest of the article (sections set apart from the densest one), up to
    # the <body> itself when the sections sit right inside it; so does one
    # whose added text is mostly its own paragraphs: the story's lead set
    # beside the box that holds the rest of it.
    density_checks = 0
    for ancestor in list(_ancestors(top)):
        if ancestor.tag == "html" or density_checks >= 10:
            break
        current, grown = chars.get(top.mem_id, 0), chars.get(ancestor.mem_id, 0)
        beside = direct.get(ancestor.mem_id, 0)
        added = grown - current
        if grown >= _GROW * current or (
            added > 0 and beside >= PROSE_CHARS and 2 * beside >= added
        ):
            density_checks += 1
            if link_density(ancestor) < 0.3:
                top = ancestor
    # A wrapper with nothing else in it is the same container.
    for ancestor in list(_ancestors(top)):
        if ancestor.tag in ("body", "html") or sum(1 for _ in ancestor.iter()) != 1:
            break
        top = ancestor
    return _Densest(top, content, discounted_teasers)


def _teaser_cards(linked_headings: list[tuple[LexborNode, LexborNode]]) -> set[int]:
    """Teaser cards: three or more alike siblings, each a short box headed by a
    link to another page (a story's title and its first lines, "more stories").
    ``linked_headings``: each heading with text inside a link, and that link.

    The heading's own box, or one of its next few ancestors, is a card when
    its parent holds at least ``_TEASER_GROUP`` such boxes of the same tag and
    first class, each at most ``_TEASER_CHARS`` long. A story's own title
    linked to itself is one box, not a group; a heading linked to a place
    on the page ("#section") links nowhere else.
    """
    groups: dict[tuple[int, str, str], dict[int, LexborNode]] = {}
    for heading, link in linked_headings:
        href = link.attributes.get("href") or ""
        if not href or href.startswith("#"):
            continue
        heading_chars = len(_collapse(heading.text()))
        if not heading_chars or len(_collapse(link.text())) * 2 < heading_chars:
            continue
        box = heading
        for _ in range(_CARD_STEPS):
            parent = box.parent
            if parent is None or parent.tag in ("body", "html"):
                break
            if box is not heading:
                # Alike by tag and first class: a card's other classes often
                # number it ("slide-loop-2") or give its state.
                key = (parent.mem_id, *(_kind(box) or (box.tag or "", "")))
                groups.setdefault(key, {})[box.mem_id] = box
            box = parent
    cards: set[int] = set()
    for members in groups.values():
        if len(members) < _TEASER_GROUP:
            continue
        short = [node for node in members.values() if len(_collapse(node.text())) <= _TEASER_CHARS]
        if len(short) >= _TEASER_GROUP:
            cards.update(node.mem_id for node in short)
    return cards


def _card_of(node: LexborNode, cards: set[int]) -> LexborNode | None:
    """The outermost of the teaser ``cards`` that ``node`` is or sits in, if any."""
    card = node if node.mem_id in cards else None
    for parent in islice(_ancestors(node), _CARD_STEPS * 2):
        if parent.mem_id in cards:
            card = parent
    return card


def _link_chars(node: LexborNode) -> int:
    """Characters of ``node``'s text inside links (read in C where it can be)."""
    if _TREE is not None:
        return _TREE.collapsed_link_chars(node.mem_id)
    return sum(len(_collapse(link.text())) for link in node.css("a[href]"))


def _phrase_link_chars(node: LexborNode) -> int:
    """``_link_chars`` of an element of phrasing content (a paragraph's few
    elements): walked in Python, cheaper there than a CSS query, which
    parses its selector on every call."""
    total = 0
    for element in node.traverse():
        if element.tag == "a" and "href" in element.attributes:
            total += len(_collapse(element.text()))
    return total


class _LinkDensity:
    """The share of an element's text inside links (``a[href]``).

    The elements asked about are often nested (a container, its parent...):
    each link's text is read once for all of them, and each element's share
    once. The tree must not change between calls.
    """

    def __init__(self) -> None:
        self._links: dict[int, int] = {}
        self._shares: dict[int, float] = {}

    def __call__(self, node: LexborNode) -> float:
        share = self._shares.get(node.mem_id)
        if share is None:
            share = self._shares[node.mem_id] = self._share(node)
        return share

    def _share(self, node: LexborNode) -> float:
        if _TREE is not None:  # in C, each link read again: cheaper than a CSS query
            total, linked = _TREE.link_chars_at(node.mem_id)
            return min(linked / total, 1.0) if total else 1.0
        total = len(node.text())
        if not total:
            return 1.0
        links = self._links
        linked = 0
        for link in node.css("a[href]"):
            length = links.get(link.mem_id)
            if length is None:
                length = links[link.mem_id] = len(link.text())
            linked += length
        return min(linked / total, 1.0)


# -- walking -------------------------------------------------------------------


class _Walker:
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
        """Walk ``root``'s subtree; with ``stop_after``, stop where that element ends.

        In C where it can walk selectolax's tree (``_block_at`` reads lists,
        definitions, code and tables for it), else here: the same blocks.
        """
        if root is None:
            return
        if _TREE is not None and not self._parts and not self._link_chars:
            end_address = stop_after.mem_id if stop_after is not None else 0
            _TREE.walk_blocks(self, root.parser, root.mem_id, end_address, _WALK_RULES)
            return
        self._walk_py(root, stop_after=stop_after)

    def _walk_py(self, root: LexborNode, *, stop_after: LexborNode | None = None) -> None:
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
                self._link_chars += len(_collapse(link_text))
            elif tag in INLINE:
                _push_children(stack, node)
            elif tag in VOID_SKIP:
                continue
            elif tag == "br":
                self._parts.append(BREAK)
            elif tag in LEAF_BLOCKS:
                # Phrasing content only (the parser closes a <p> before any
                # block), so one call in C reads it all.
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
            self._emit(self._definitions(node), "list", _link_chars(node))
        elif tag == "pre":
            self._emit(_code_text(node), "code")
        else:
            self._emit(self._list(node), "list", _link_chars(node))
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
        """A list as lines: ``- item`` / ``1. item``, nested lists indented.

        In C where the walk is (``walk_blocks``), else here: the same lines.
        """
        if _TREE is not None:
            return _TREE.list_text(self, node.mem_id, _WALK_RULES)
        return self._list_py(node)

    def _list_py(self, node: LexborNode) -> str:
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
        link_text = _collapse(link.text())
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
        if any(_text_length(cell) > 1000 for cell in cells):
            return False
    return widest >= 2


#: Read by ``_Walker._block_at``, whole (a table only when it holds data).
_READ_BY_BLOCK_AT = LISTS | {"li", "dl", "pre"}
#: What ``walk_blocks`` needs to walk as ``_Walker.walk`` does.
_WALK_RULES = (
    INLINE,
    VOID_SKIP,
    LEAF_BLOCKS,
    HEADINGS,
    _READ_BY_BLOCK_AT,
    LISTS,
    Block,
    join_lines,
    _without_heading_control,
    PROSE_CHARS,
    "paragraph",
    "heading",
    "\n",
    " ",
)


def _bind_tree() -> Speedups | None:
    """The C speedups, where they can walk selectolax's tree and make its
    nodes (``_read_paragraphs``); else None. A page is read both ways first:
    a Lexbor or selectolax that changed is not used."""
    if _LEXBOR is None:
        return None
    import selectolax.lexbor

    text = _TREE_CHECK_TEXT
    calibration = LexborHTMLParser(f"<p>{text}</p>").body
    if calibration is None:
        return None
    found = [node for node in calibration.traverse(include_text=True) if node.is_text_node]
    try:
        bound = _LEXBOR.lexbor_tree(
            selectolax.lexbor.__file__, LexborNode, found[0].mem_id, text.encode()
        )
    except AttributeError:  # an older build of the speedups
        return None
    if not bound:
        return None
    global _TREE
    whole = LexborHTMLParser(
        "<html><head><title>t</title><meta name=a content=b><script>s</script></head>"
        f"<body>{_TREE_CHECK}<nav class=menu>n</nav><form><header>h<br>i</header></form>"
        '<aside id="sidebar"><span class="share">s</span></aside></body></html>'
    )
    try:
        _TREE = _LEXBOR
        in_c = _read_check_page(whole)
    except Exception:  # a selectolax whose nodes are not what they were
        return None
    finally:
        _TREE = None
    wanted = _read_check_page(whole)
    elements, marks, _, _, read, _, blocks, _ = wanted
    # The page must hold what each step reads: else a step could pass unseen.
    exercised = len(elements) >= 7 and bool(marks) and len(read[0]) >= 4
    kinds = {kind for _, kind, _ in blocks}
    return _LEXBOR if in_c == wanted and exercised and len(kinds) == 6 else None


def _read_check_page(whole: LexborHTMLParser) -> tuple[list[Any], ...]:
    """What each step that ``_TREE`` speeds up reads of the check page."""
    page = whole.body
    assert page is not None
    elements = _Elements(whole)
    found = [(node.tag, node.mem_id) for node in elements.dropped] + [
        (node.tag, node.mem_id) for tag in sorted(_READ_TAGS) for node in elements.tagged(tag)
    ]
    marks = [(node.mem_id, node.tag, mark) for node, mark in _marked_elements(whole)]
    nodes = list(page.traverse())
    lineage = [_ancestor_in(node, {page.mem_id}, 2) for node in nodes]
    density = _LinkDensity()
    links = [(density(node), _link_chars(node), _text_length(node)) for node in nodes]
    paragraphs, headings, seen = _read_paragraphs(page, 10_000)
    read = [*_in_order([paragraphs, headings]), *_in_order(_score_paragraphs(paragraphs, seen))]
    walker = _Walker(10_000)
    walker.walk(page)
    blocks = [(block.text, block.kind, block.heading_path) for block in walker.blocks]
    densest = _densest(page, 10_000)
    chosen = [densest.top.mem_id if densest else None]
    return found, marks, lineage, links, read, chosen, blocks, walker.link_shares


def _in_order(parts: Sequence[Mapping[int, object]]) -> list[list[tuple[int, object]]]:
    return [list(part.items()) for part in parts]


#: Where a text node keeps its text is found with this (``lexbor_tree``).
_TREE_CHECK_TEXT = "researchstore finds where a text node keeps this; " * 12 + "q"
#: A page read both ways before the tree is walked in C (``_bind_tree``).
_TREE_CHECK = (
    "<div id=story><section><p>First, a paragraph of prose, long enough to be scored, "
    "with <a href=/x>a link</a>, <b>bold <i>words</i></b> and <a name=n>an anchor</a>.</p>"
    "<div>Text set in a bare div\u00a0and\u3000wide spaces，still one paragraph、counted.</div>"
    "<p>  </p><td>a cell's text that is long enough</td></section>"
    '<h2><a href="/more">A linked heading</a></h2>'
    "<blockquote>Quoted text, in a quote, with commas, many commas.</blockquote>"
    "<p><a href=/a>Only</a> <a href=/b>links</a> <a href=/c>in this one paragraph</a></p>"
    "</div><p>Right under the body, a paragraph of its own.</p>"
    "<h3>Lists [<a href=/e>edit</a>]</h3><ul><li>one<ol start=3><li>three</li></ol></li></ul>"
    "<dl><dt>term</dt><dd>its meaning</dd></dl><pre>  code\n   kept</pre>"
    "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>"
    "<h4>two\ue000lines</h4><figure><figcaption>A credit</figcaption></figure>"
    "line<br>broken <img alt=x> here"
)

_TREE = _bind_tree()
