"""The optional C speedups (``_speedups.c``), and what they must answer.

``setup.py`` builds ``researchstore._speedups`` where a C compiler is at
hand; where there is none the build goes on without it, ``SPEEDUPS`` is
None, and every caller takes the same steps in Python (or Tantivy): the
answers are the same, only slower. Tests hold the two paths alike.

Each function is kept for a gain a user sees (snippets' time per search,
ingest's time per chunk and per page); ``RESEARCHSTORE_NO_SPEEDUPS=1`` leaves the built
extension unused, in this process and the workers it starts, so that a
bench can measure that gain (``bench/bench_core.py`` run with and without it).
"""

from __future__ import annotations

import importlib
import os
from typing import Protocol, cast

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
        yields for an ASCII ``text``; None for any other (``analysis.count_tokens``)."""
        ...

    def markup_attributes(
        self, text: str, raw: tuple[str, ...], foreign: tuple[str, ...], /
    ) -> int:
        """The most attributes one tag in ``text`` holds, its tags, comments and
        ``raw`` elements' text read as the HTML tokenizer reads them, raw text
        inside a ``foreign`` element as markup (``html_rules._most_attributes``)."""
        ...


def _load() -> Speedups | None:
    """The built extension, held to ``Speedups`` (the one statement of its types);
    None where it is not built, or ``RESEARCHSTORE_NO_SPEEDUPS`` says not to use it."""
    if os.environ.get("RESEARCHSTORE_NO_SPEEDUPS", "") not in ("", "0"):
        return None
    try:
        return cast(Speedups, importlib.import_module("researchstore._speedups"))
    except ImportError:
        return None


SPEEDUPS = _load()
