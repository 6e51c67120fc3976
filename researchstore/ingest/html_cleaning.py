"""Cleaning an HTML page's tree before its article is chosen and read.

- ``Elements`` finds the elements of the tags the steps read, in one walk;
- ``unpack_templates`` reads the markup a page renders from templates
  (declarative shadow roots, template scripts in the article) as its own;
- ``drop_boilerplate`` removes what is never the article (scripts, styles,
  navigation, footers, forms...) and, when asked, what is likely chrome:
  hidden elements, and those their id, class, role, aria-label or
  microdata mark (``html_rules.boilerplate_evidence``), unless they hold
  the article. It returns the page's declared article elements
  (``Landmarks``), which ``html_container`` weighs.
"""

from __future__ import annotations

from itertools import islice
from typing import NamedTuple

from selectolax.lexbor import LexborHTMLParser, LexborNode

from researchstore.ingest.html_nodes import (
    MAX_NODES,
    ancestor_in,
    ancestors,
    has_ancestor,
    kind_of,
)
from researchstore.ingest.html_rules import (
    BREAK,
    boilerplate_evidence,
    is_hidden,
    limit_markup,
)
from researchstore.ingest.html_tags import DROP_TAGS, NEVER_BOILERPLATE

__all__ = [
    "READ_TAGS",
    "Elements",
    "Landmarks",
    "drop_boilerplate",
    "unpack_templates",
]

#: Elements removed with what they hold (a line break becomes a marker).
_DROP_OR_BREAK = frozenset((*DROP_TAGS, "br"))
#: Elements the steps read by their tag (``Elements``).
READ_TAGS = frozenset(("meta", "time", "script", "title", "h1", "template", "header", "form"))
_ATTRIBUTE_SELECTOR = (
    f":is([class],[id],[role],[aria-label],[aria-modal],[itemprop],[itemtype])"
    f":not({','.join(NEVER_BOILERPLATE)})"
)
_HIDDEN_SELECTOR = '[hidden],[aria-hidden="true" i],[style*="none" i],[style*="hidden" i]'
#: How many elements with an id, class, role... are looked at for boilerplate.
_MAX_CANDIDATES = 20_000
#: How many times over the page's text the boilerplate checks may read in all.
_CHECK_BUDGET_PAGES = 50
#: How many headers and forms (and a hidden element's siblings) are looked at.
_MAX_ELEMENT_CHECKS = 500
#: A class-name hit is overruled when the element holds this much text, most
#: of it in paragraphs of at least ``_PROSE_PARAGRAPH`` characters.
_PROSE_MIN_CHARS = 500
_PROSE_PARAGRAPH = 80
#: Template scripts inside the declared article, read as markup (at most so many).
_TEMPLATE_TYPES = ("text/template", "text/x-template")
_MAX_SHADOW_ROOTS = 200
_MAX_TEMPLATES = 20


def unpack_templates(tree: LexborHTMLParser, markup: str | bytes, elements: Elements) -> Elements:
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
        elements = Elements(tree)
    unpacked = False
    templates = [node for node in elements.tagged("script") if _is_article_template(node)]
    for script in templates[:_MAX_TEMPLATES]:
        markup = script.text()
        if "<" in markup:  # markup, not a bare value ("{{ title }}")
            unpacked |= _replace_with_markup(script, markup)
    return Elements(tree) if unpacked else elements


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


class Elements:
    """A page's elements of the tags its steps ask for, in one walk of it.

    A CSS query walks the whole page and parses its selector on every call;
    these are found by tag, all at once, in document order: ``dropped``, those
    removed with what they hold (and line breaks), and ``tagged(tag)`` the
    ones of ``READ_TAGS``.
    """

    __slots__ = ("_by_tag", "dropped")

    def __init__(self, tree: LexborHTMLParser) -> None:
        self._by_tag: dict[str, list[LexborNode]] = {}
        self.dropped: list[LexborNode] = []
        root = tree.root
        if root is None:
            return
        for node in root.traverse():
            tag = node.tag
            if tag in _DROP_OR_BREAK:
                self.dropped.append(node)
            if tag in READ_TAGS:
                self._by_tag.setdefault(tag, []).append(node)

    def tagged(self, tag: str) -> list[LexborNode]:
        return self._by_tag.get(tag, [])


def _marked_elements(tree: LexborHTMLParser) -> list[tuple[LexborNode, str]]:
    """Each of ``tree.css(_ATTRIBUTE_SELECTOR)``'s first ``_MAX_CANDIDATES`` that
    its attributes mark as chrome, with how (``boilerplate_evidence``)."""
    marked = []
    for node in tree.css(_ATTRIBUTE_SELECTOR)[:_MAX_CANDIDATES]:
        evidence = boilerplate_evidence(node.attributes)
        if evidence is not None:
            marked.append((node, evidence))
    return marked


class Landmarks(NamedTuple):
    """The elements a page declares its article with, each kind in document order."""

    #: ``[itemprop=articleBody]``: microdata naming the article's body.
    body: list[LexborNode]
    article: list[LexborNode]
    #: ``<main>`` or ``[role=main]``.
    main: list[LexborNode]
    #: ``body`` and ``main`` together.
    declared: list[LexborNode]

    def left(self) -> Landmarks:
        """Those still in the page (an element removed from it has no parent)."""
        return Landmarks(*([node for node in nodes if node.parent is not None] for nodes in self))


def _landmarks(tree: LexborHTMLParser) -> Landmarks:
    """The page's declared article elements, found in one walk of it."""
    found = Landmarks([], [], [], [])
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


def drop_boilerplate(
    tree: LexborHTMLParser, elements: Elements, *, aggressive: bool, names: bool = True
) -> Landmarks:
    """Remove what is never the article; with ``aggressive``, likely chrome too
    (hidden, marked by ARIA or microdata, or by its id or class: with
    ``names`` everywhere; without, a component's name such as "widget"
    only outside the ``<main>`` the page declares). Returns the page's
    landmarks as they were before (``Landmarks.left`` gives those left)."""
    # An <aside> or <nav> around the article the page declares is a layout
    # box, not chrome: it stays (what else it holds is judged later).
    landmarks = _landmarks(tree)
    declared = {holder.mem_id for node in landmarks.declared[:20] for holder in ancestors(node)}
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
    body_chars = len(body.text())
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
        articles = [node for node in articles if has_ancestor(node, ("main",))] or articles
    articles.sort(key=lambda node: len(node.text()))
    article_holders = {
        holder.mem_id for node in [*mains, *articles[-1:]] for holder in (node, *ancestors(node))
    }

    def beside_main(node: LexborNode) -> bool:
        # Outside the <main> the page declares, and not around it.
        return (
            bool(mains) and node.mem_id not in article_holders and not has_ancestor(node, ("main",))
        )

    def protected(node: LexborNode, *, evidence: str = "role") -> bool:
        # A wrapper around the article (a page-wide <form>, a layout div
        # with "sidebar" in its class) must not take the article with it.
        nonlocal budget
        if node.mem_id in article_holders or budget < 0:
            return True
        chars = len(node.text())
        budget -= chars
        if chars * 2 >= body_chars:
            # Half the page: a wrapper around the article, unless it floats
            # over the page or the page declares its <main> and this box is
            # neither in it nor around it.
            return evidence != "overlay" and (not mains or has_ancestor(node, ("main",)))
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
        if removed and ancestor_in(node, removed, 32):
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
        if not has_ancestor(node, ("main", "article")) and (names or beside_main(node)):
            remove_if_unprotected(node, evidence="name")
    forms = [node for node in elements.tagged("form") if node.parent is not None]
    for node in forms[:_MAX_ELEMENT_CHECKS]:
        remove_if_unprotected(node)
    return landmarks


def _is_hidden_page(node: LexborNode, shown_kinds: dict[int, set[tuple[str, str]]]) -> bool:
    """Whether a hidden element is one page of several alike, one of them shown.

    A slideshow, a paged gallery or a set of tabs shows one box and hides
    its alike siblings until the reader pages on: those hold the rest of
    the same text, not chrome. ``shown_kinds`` keeps each parent's shown
    kinds, read once per parent.
    """
    kind = kind_of(node)
    parent = node.parent
    if kind is None or parent is None:
        return False
    shown = shown_kinds.get(parent.mem_id)
    if shown is None:
        shown = set()
        for sibling in islice(parent.iter(), _MAX_ELEMENT_CHECKS):
            sibling_kind = kind_of(sibling)
            if sibling_kind is not None and not is_hidden(sibling.attributes):
                shown.add(sibling_kind)
        shown_kinds[parent.mem_id] = shown
    return kind in shown


def _prose_chars(node: LexborNode) -> int:
    """Characters of ``node``'s text set in paragraphs long enough to be prose,
    or in preformatted blocks (code, which no strip of chrome holds)."""
    total = 0
    for paragraph in node.css("p, pre")[:500]:
        length = len(paragraph.text())
        if length >= _PROSE_PARAGRAPH or paragraph.tag == "pre":
            total += length
    return total
