"""Choosing the element of an HTML page that holds its article.

Readability's heuristic: each paragraph (the nearest non-inline element
around a run of text) is scored by its length and commas, the score shared
out to its ancestors; the densest element, its score discounted by its
links, is the structural candidate. An element the page declares as its
article (``articleBody``, ``<article>``, ``<main>``) wins when it holds
enough of that text. On a page that declares itself one story, the teaser
cards of other stories (three or more alike boxes, each headed by a link)
count as links, and are removed from the chosen element.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import NamedTuple

from selectolax.lexbor import LexborHTMLParser, LexborNode

from researchstore.ingest.edges import PROSE_CHARS
from researchstore.ingest.html_cleaning import Landmarks
from researchstore.ingest.html_nodes import (
    MAX_ANCESTORS,
    ancestor_in,
    ancestors,
    collapse,
    collapsed_length,
    kind_of,
)
from researchstore.ingest.html_tags import HEADINGS, INLINE, PARAGRAPH_LIKE

__all__ = ["drop_teasers", "main_container"]

#: An ancestor of the densest element wins when it holds this much more text.
_GROW = 1.5
#: A declared container grows into ancestors adding at most this share of text.
_WIDEN_SHARE = 1.3
_WIDEN_STEPS = 4
#: Where a page declares its article, most specific first.
#: With the share of the densest element's text each must hold: microdata
#: names the article's body itself, <article> and <main> often a wider box.
_DECLARED_CONTAINERS = (("body", 0.2), ("article", 0.5), ("main", 0.5))
#: Teaser cards (``_teaser_cards``): how many alike boxes make a group, how
#: far above its linked heading a box may be, and how long one may read.
_TEASER_GROUP = 3
_CARD_STEPS = 4
_TEASER_CHARS = 800
#: How many headings inside links are looked at for teaser cards.
_MAX_LINKED_HEADINGS = 500
#: A page not declared a story is a listing when its teasers hold this many
#: times the text of everything else.
_LISTING_SHARE = 4
#: Commas in the scripts that write them (a paragraph's score counts them).
_COMMAS = (",", "、", "，", "،")


def main_container(
    tree: LexborHTMLParser, max_nodes: int, landmarks: Landmarks, *, story: bool = False
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
            sized = [(len(node.text()), node) for node in nodes[:20]]
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
    chain = [parts[0], *ancestors(parts[0])]
    depth = {node.mem_id: position for position, node in enumerate(chain)}
    common = 0
    for part in parts[1:]:
        meets = next(
            (depth[node.mem_id] for node in (part, *ancestors(part)) if node.mem_id in depth), None
        )
        if meets is None:
            return None
        common = max(common, meets)
    holder = chain[common]
    chars = sum(content(part) for part in parts)
    if holder.tag in ("body", "html") or content(holder) > _WIDEN_SHARE * chars:
        return None
    return chars, holder, parts[-1]


def drop_teasers(container: LexborNode | None, teasers: list[LexborNode]) -> None:
    """Remove the teaser cards inside ``container``: other stories' titles,
    excerpts and bylines, wherever they sit in the story. A card that holds
    the container is kept.
    """
    if container is None or not teasers:
        return
    around = {container.mem_id, *(parent.mem_id for parent in ancestors(container))}
    inside = [
        teaser
        for teaser in teasers
        if teaser.mem_id not in around and ancestor_in(teaser, {container.mem_id}, MAX_ANCESTORS)
    ]
    # Judged on the whole tree first: a node removed with an outer one is gone.
    addresses = {teaser.mem_id for teaser in inside}
    for teaser in [node for node in inside if not ancestor_in(node, addresses, MAX_ANCESTORS)]:
        teaser.decompose()


def _widen(node: LexborNode, chars: int, content: Callable[[LexborNode], int]) -> LexborNode:
    """The node, or the ancestor that adds its lead and title and little else.

    A declared article body often leaves out the standfirst above it; a
    parent whose paragraph text is not much more than the node's holds
    that and no second story.
    """
    for ancestor in islice(ancestors(node), _WIDEN_STEPS):
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
) -> tuple[Paragraphs, dict[int, int], dict[int, LexborNode]]:
    """Each "paragraph" under ``body`` with its texts, in document order: the
    nearest non-inline element around a run of text, so pages that set their
    text in bare ``<div>``s score like ``<p>``s. Also each heading whose text
    runs inside a link, with the link (for the teaser cards: a CSS query
    would walk the page again). By address (``mem_id``), with the nodes seen
    by address.
    """
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
        while parent is not None and steps < MAX_ANCESTORS:
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
    paragraphs: Paragraphs, nodes: dict[int, LexborNode]
) -> tuple[dict[int, float], dict[int, int], dict[int, int], dict[int, int]]:
    """Readability's scores: each paragraph's, shared out to five ancestors.

    Returns, by address, each scored element's score, the paragraph text
    right under each element, each paragraph's own text outside links, and
    the paragraph text under each element (summed upwards per parent, not
    per paragraph, within a step budget, so it stays linear in practice).
    The elements scored are added to ``nodes``.
    """
    scores: dict[int, float] = {}
    direct: dict[int, int] = {}
    own: dict[int, int] = {}
    for key, (plain, links) in paragraphs.items():
        text = collapse(" ".join(plain))
        link_chars = collapsed_length(links) if links else 0
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
        for ancestor in islice(ancestors(nodes[key]), _CHARS_ANCESTORS):
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
    pairs = [
        (nodes[heading], nodes[link])
        for heading, link in islice(linked_headings.items(), _MAX_LINKED_HEADINGS)
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
            key: card for key in paragraphs if (card := _card_of(nodes[key], cards)) is not None
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
        node = nodes[key]
        discounted.append((score * (1 - link_density(node)), node))
    ranked = sorted(discounted, key=lambda pair: pair[0], reverse=True)[:5]
    top_score, top = ranked[0]
    # Several near-best candidates under one ancestor: the text is split
    # into sections (steps, chapters), and the ancestor holds them all.
    alternatives = [node for score, node in ranked[1:] if score >= 0.75 * top_score]
    if len(alternatives) >= 2:
        lineages = [{parent.mem_id for parent in ancestors(node)} for node in alternatives]
        for ancestor in ancestors(top):
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
    for ancestor in list(ancestors(top)):
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
    for ancestor in list(ancestors(top)):
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
        heading_chars = len(collapse(heading.text()))
        if not heading_chars or len(collapse(link.text())) * 2 < heading_chars:
            continue
        box = heading
        for _ in range(_CARD_STEPS):
            parent = box.parent
            if parent is None or parent.tag in ("body", "html"):
                break
            if box is not heading:
                # Alike by tag and first class: a card's other classes often
                # number it ("slide-loop-2") or give its state.
                key = (parent.mem_id, *(kind_of(box) or (box.tag or "", "")))
                groups.setdefault(key, {})[box.mem_id] = box
            box = parent
    cards: set[int] = set()
    for members in groups.values():
        if len(members) < _TEASER_GROUP:
            continue
        short = [node for node in members.values() if len(collapse(node.text())) <= _TEASER_CHARS]
        if len(short) >= _TEASER_GROUP:
            cards.update(node.mem_id for node in short)
    return cards


def _card_of(node: LexborNode, cards: set[int]) -> LexborNode | None:
    """The outermost of the teaser ``cards`` that ``node`` is or sits in, if any."""
    card = node if node.mem_id in cards else None
    for parent in islice(ancestors(node), _CARD_STEPS * 2):
        if parent.mem_id in cards:
            card = parent
    return card


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
