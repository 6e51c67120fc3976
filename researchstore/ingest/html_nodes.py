"""What the HTML steps ask of any element of selectolax's tree: its ancestors,
its first class, its text with whitespace collapsed.

The steps (``html_cleaning``, ``html_container``, ``html_walk``,
``html_metadata``) read the tree only through selectolax's public API.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

from selectolax.lexbor import LexborNode

from researchstore.ingest.html_rules import collapse_spaces

__all__ = [
    "MAX_ANCESTORS",
    "MAX_NODES",
    "ancestor_in",
    "ancestors",
    "collapse",
    "collapsed_length",
    "has_ancestor",
    "kind_of",
]

#: The nodes a page's walk may visit (``parse_html``'s default budget).
MAX_NODES = 200_000
#: Ancestor walks stop after this many steps (deep trees stay linear).
MAX_ANCESTORS = 256


def collapse(text: str | None) -> str:
    return collapse_spaces(text or "")


def collapsed_length(parts: list[str]) -> int:
    """``len(collapse(" ".join(parts)))``, without making the string."""
    words = " ".join(parts).split()
    return sum(map(len, words)) + len(words) - 1 if words else 0


def ancestors(node: LexborNode) -> Iterator[LexborNode]:
    """The node's ancestors, nearest first, at most ``MAX_ANCESTORS`` of them."""
    parent = node.parent
    for _ in range(MAX_ANCESTORS):
        if parent is None:
            return
        yield parent
        parent = parent.parent


def ancestor_in(node: LexborNode, addresses: set[int], steps: int) -> bool:
    """Whether one of the node's first ``steps`` ancestors is at one of
    ``addresses`` (their ``mem_id``)."""
    return any(parent.mem_id in addresses for parent in islice(ancestors(node), steps))


def has_ancestor(node: LexborNode, tags: tuple[str, ...]) -> bool:
    """Whether an ancestor is one of ``tags``, or declares itself the page's main part."""
    return any(
        parent.tag in tags or parent.attributes.get("role") == "main" for parent in ancestors(node)
    )


def kind_of(node: LexborNode) -> tuple[str, str] | None:
    """An element's tag and first class (a box's own name, before its states)."""
    classes = (node.attributes.get("class") or "").split()
    return (node.tag or "", classes[0]) if classes else None
