"""The optional C speedups (``_speedups.c``), and what they must answer.

``setup.py`` builds ``researchstore._speedups`` where a C compiler is at
hand; where there is none the build goes on without it, ``SPEEDUPS`` is
None, and every caller takes the same steps in Python (or Tantivy): the
answers are the same, only slower. Tests hold the two paths alike.
"""

from __future__ import annotations

import importlib
from types import NotImplementedType
from typing import Any, Protocol, cast

__all__ = ["SPEEDUPS", "Speedups"]


class Speedups(Protocol):
    """What ``_speedups.c`` offers."""

    def words(
        self, texts: list[str], prefixes: frozenset[str], stopwords: frozenset[str], /
    ) -> list[tuple[list[int], list[int], list[str], list[int]] | None]:
        """Each text's ASCII words that start as one of ``prefixes``, stop words
        left out, as (starts, ends, words lower-cased), and where its words with
        a letter past ASCII stand (start, end, start, end...); None for a text
        that may hold CJK (``highlight.Highlighter``)."""
        ...

    def choose(
        self,
        found: list[tuple[list[int], list[int], list[str], list[str]] | None],
        stems: list[list[str]],
        terms: list[frozenset[str]],
        /,
    ) -> list[tuple[list[int], list[int], list[str] | None] | None]:
        """Each text's matches (starts, ends, keys) under the analysis whose
        ``terms`` hold most of its words' ``stems`` (the first on a tie);
        ``found``: each text's (starts, ends, words, keys), ``stems`` each
        analysis's stem of every word, in turn (``highlight.Highlighter``)."""
        ...

    def fragment(
        self, text: str, starts: list[int], ends: list[int], max_chars: int, words: list[str], /
    ) -> str:
        """``fragments.fragment_html``, the matches' words given."""
        ...

    def count_tokens(self, text: str, stopwords: frozenset[str], /) -> int | None:
        """How many tokens the index's English analyzer, less its stemmer,
        yields for an ASCII ``text``; None for any other (``index.count_tokens``)."""
        ...

    def name_evidence(
        self, names: str, rules: tuple[object, ...], /
    ) -> str | None | NotImplementedType:
        """``html_rules._read_names`` for an ASCII ``names`` under ``rules``
        (``html_rules._NAME_RULES``); NotImplemented for any other."""
        ...

    def markup_depth(self, text: str, flat: tuple[str, ...], raw: tuple[str, ...], /) -> int:
        """The most tags open at once in ``text``, those named in ``flat`` (in
        lower or upper case) not counted, nor any inside a ``raw`` element or a
        comment (``html_rules._markup_depth``)."""
        ...

    def markup_attributes(
        self, text: str, raw: tuple[str, ...], foreign: tuple[str, ...], /
    ) -> int:
        """The most attributes one tag in ``text`` holds, its tags, comments and
        ``raw`` elements' text read as the HTML tokenizer reads them, raw text
        inside a ``foreign`` element as markup (``html_rules._most_attributes``)."""
        ...

    def lexbor_bind(self, path: str, /) -> bool:
        """Bind the tree functions of selectolax's Lexbor module, loaded from
        ``path``; whether they could be (``html._bind_lexbor``)."""
        ...

    def evidence_at(
        self,
        addresses: list[int],
        rules: tuple[object, ...],
        roles: tuple[str, ...],
        itemprops: tuple[str, ...],
        /,
    ) -> list[str | None | NotImplementedType]:
        """``html_rules.boilerplate_evidence`` of the elements at ``addresses``
        (``LexborNode.mem_id``, of a tree alive for the call), read in C;
        NotImplemented where Python must read one (``html._marked_elements``)."""
        ...

    def lexbor_tree(self, path: str, node_type: type, text_address: int, text: bytes, /) -> bool:
        """Bind the rest of Lexbor's tree functions and selectolax's own
        ``LexborNode.new``, finding where the text node at ``text_address``
        keeps its text (``text``, UTF-8, at least 64 bytes); whether they
        could be (``html._bind_tree``)."""
        ...

    def lexbor_node(self, parser: object, address: int, /) -> Any:
        """The selectolax ``LexborNode`` at ``address`` of ``parser``'s tree (only
        ``html`` imports selectolax, hence Any): an address
        this module gave for that tree, which has not changed since."""
        ...

    def paragraphs_at(
        self,
        root: int,
        max_nodes: int,
        inline: frozenset[str],
        paragraph_like: frozenset[str],
        headings: dict[str, int],
        max_ancestors: int,
        /,
    ) -> tuple[dict[int, tuple[list[str], list[str]]], dict[int, int]]:
        """``html._read_paragraphs`` of the element at ``root``, read in C."""
        ...

    def paragraph_scores(
        self,
        paragraphs: dict[int, tuple[list[str], list[str]]],
        commas: str,
        min_length: int,
        max_ancestors: int,
        chars_ancestors: int,
        chars_budget: int,
        /,
    ) -> tuple[dict[int, float], dict[int, int], dict[int, int], dict[int, int]]:
        """``html._score_paragraphs``, read in C."""
        ...

    def walk_blocks(
        self,
        walker: object,
        parser: object,
        root: int,
        stop_after: int,
        rules: tuple[object, ...],
        /,
    ) -> None:
        """``html._Walker.walk`` of the element at ``root`` (``stop_after``: an
        element's address, or 0), into ``walker``'s blocks; its ``_block_at``
        reads lists, definitions, code and tables (``rules``: html._WALK_RULES)."""
        ...

    def list_text(self, walker: object, root: int, rules: tuple[object, ...], /) -> str:
        """``html._Walker._list`` of the element at ``root``, spending ``walker``'s
        node budget (``rules``: html._WALK_RULES)."""
        ...

    def elements_at(self, parser: object, root: int, wanted: frozenset[str], /) -> list[Any]:
        """The elements at and under ``root`` whose tag is one of ``wanted``, in
        document order, as (tag, selectolax ``LexborNode``) (``html._Elements``)."""
        ...

    def ancestor_in(self, address: int, addresses: set[int], steps: int, /) -> bool:
        """Whether one of the first ``steps`` ancestors of the node at ``address``
        is at one of ``addresses`` (``html._ancestor_in``)."""
        ...

    def text_length(self, address: int, /) -> int:
        """``len(node.text())`` of the node at ``address``, without making the text
        (``html._text_length``)."""
        ...

    def link_chars_at(self, address: int, /) -> tuple[int, int]:
        """The element's text length, and the lengths of the texts of its links
        (``a[href]``, itself included) summed (``html._LinkDensity``)."""
        ...

    def collapsed_link_chars(self, address: int, /) -> int:
        """The lengths of the texts of the element's links (``a[href]``, itself
        included), whitespace collapsed, summed (``html._link_chars``)."""
        ...

    def marked_at(
        self,
        parser: object,
        root: int,
        never: frozenset[str],
        most: int,
        rules: tuple[object, ...],
        roles: tuple[str, ...],
        itemprops: tuple[str, ...],
        /,
    ) -> list[tuple[Any, str | NotImplementedType]]:
        """``html._marked_elements`` in one walk from ``root``: each element with
        evidence among the first ``most`` the attribute selector finds, as
        (selectolax ``LexborNode``, evidence); NotImplemented where Python
        must read it."""
        ...


def _load() -> Speedups | None:
    """The built extension, held to ``Speedups`` (the one statement of its types)."""
    try:
        return cast(Speedups, importlib.import_module("researchstore._speedups"))
    except ImportError:
        return None


SPEEDUPS = _load()
