"""Snippets' matched words: where in a hit's own text the query's words stand.

A hit's text is never run through Tantivy again: its words are found as the
index splits and folds them, and stemmed only when they start as some query
term does (``_PREFIX`` letters), with each analysis the query was built for;
the analysis that matches most words wins (English on a tie).
``fragments.py`` then cuts the window shown and marks the words.

Tantivy belongs to ``index.py``: it makes the one ``Highlighter``, handing it
the analyzers (``WordAnalysis``) that make the index's words.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, compress
from typing import Protocol, cast

from researchstore.speedups import SPEEDUPS
from researchstore.text.fragments import escape_html, fragment_html, original_spans
from researchstore.text.language import DEFAULT_ANALYSIS, cjk_bigrams_with_offsets, has_cjk

#: The C step (``speedups.py``), or None: the same snippets come from
#: Python (``_plain_spans``, ``fragment_html``).
_speedups = SPEEDUPS

__all__ = ["Highlighter", "WordAnalysis"]

#: A word is stemmed only when its first this many letters (folded) are
#: those some term starts with, or one of the few variants ``_prefixes``
#: adds for stems that start otherwise than their words.
_PREFIX = 3
#: How many letters past a term shorter than ``_PREFIX`` a word may run
#: and still be looked at ("its", "doing").
_SHORT_TAIL = 2
#: Tantivy's ``remove_long``: a token this many bytes long or longer is dropped.
_LONGEST = 40
#: Words kept per analysis before starting afresh (some megabytes).
STEMMED_MOST = 200_000


class Analyzer(Protocol):
    def analyze(self, text: str) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class WordAnalysis:
    """The index's analyzers, as highlighting needs them."""

    #: The index's split alone (Tantivy's simple tokenizer).
    words: Analyzer
    #: The same words lower-cased and folded, one for one (nothing dropped).
    folded: Analyzer
    #: Each analysis's stemmer alone, for words already folded (None: no stemming).
    stemmers: Mapping[str, Analyzer | None]
    #: The words the index drops, folded.
    stopwords: frozenset[str]


class Highlighter:
    """Highlighted fragments of hits' texts, for the query's terms by analysis."""

    def __init__(self, analysis: WordAnalysis, *, most_stemmed: int = STEMMED_MOST) -> None:
        self.words = analysis.words
        self.folded = analysis.folded
        self.stemmers = analysis.stemmers
        self.stopwords = analysis.stopwords
        self.most_stemmed = most_stemmed
        #: Each analysis's stems of the words highlighted so far, by word (folded).
        self._stemmed: dict[str, dict[str, str]] = {analysis: {} for analysis in self.stemmers}

    def highlight(
        self, text: str, terms: dict[str, frozenset[str]], *, max_chars: int = 200
    ) -> str:
        """About ``max_chars`` of ``text`` around its best matches, HTML-escaped, in ``<b>``.

        ``terms`` are the query's terms by analysis. The window kept is the one
        (starting at a match) holding the most distinct matched words; without
        a match, the text's beginning.
        """
        return self.highlights([text], terms, max_chars=max_chars)[0]

    def highlights(
        self, texts: Sequence[str], terms: dict[str, frozenset[str]], *, max_chars: int = 200
    ) -> list[str]:
        """``highlight`` for each of ``texts``: all but a few (CJK) in one pass."""
        found: list[Matches | None] = [None for _ in texts]
        if terms:
            prefixes = _prefixes(terms)
            if _speedups is not None:
                # Every text but those that may hold CJK, its words found in C.
                found = self._c_spans(texts, terms, prefixes)
            # Every other text without CJK whose length lower-casing keeps, in one batch.
            lowered = {i: text.lower() for i, text in enumerate(texts) if found[i] is None}
            batch = [
                i
                for i, text in lowered.items()
                if text.isascii() or (len(text) == len(texts[i]) and not has_cjk(texts[i]))
            ]
            matches = (
                self._plain_spans([lowered[i] for i in batch], terms, prefixes) if batch else None
            )
            if matches is not None:
                for i, matched in zip(batch, matches, strict=True):
                    found[i] = matched
            for i, text in enumerate(texts):
                if found[i] is None:
                    spans = self._matched_spans(text, terms, prefixes)
                    found[i] = ([start for start, _ in spans], [end for _, end in spans], None)
        fragment = _speedups.fragment if _speedups is not None else fragment_html
        snippets = []
        for text, located in zip(texts, found, strict=True):
            if located is None or not located[0]:
                snippets.append(escape_html(text[:max_chars]))
                continue
            starts, ends, words = located
            if words is None:
                words = [text[start:end].lower() for start, end in zip(starts, ends, strict=True)]
            snippets.append(fragment(text, starts, ends, max_chars, words))
        return snippets

    def _plain_spans(
        self, lowered: list[str], terms: dict[str, frozenset[str]], prefixes: frozenset[str]
    ) -> list[Matches] | None:
        """Where the words the query matches stand in each of the ``lowered`` texts
        (lower-cased, no CJK), with those words as the texts write them
        (lower-cased); None when a word past ASCII does not fold to one.

        The texts are searched as one, every ASCII character that is not a
        letter or digit written as a space (``_SEPARATORS``) and every one past
        ASCII as ``_PAST``, so that a word starts after a space: the query's
        pattern (``_starts``) jumps from space to space, never trying its
        prefixes inside a word. A word with a character past ASCII is split
        as the index splits it and folded. The words found are stemmed together,
        once per analysis; each text then takes the analysis that matches most
        of its words (English on a tie).

        Every step over the words found is one of Python's own loops in C (a
        split, ``accumulate``, ``map``, ``compress``): a search finds a hundred
        and more words, and a loop in Python over each, several times over, cost
        more than the rest of the search together.
        """
        joined = " ".join(lowered)
        bases = list(accumulate([len(text) + 1 for text in lowered[:-1]], initial=0))
        bases.append(len(joined) + 1)
        wide = not joined.isascii()
        # In bytes, where translating is a table lookup: a "?" of the text is
        # punctuation, then every character past ASCII becomes a "?" and ``_PAST``.
        encoded = joined.replace("?", " ").encode("ascii", "replace")
        spaced = " " + encoded.translate(_SEPARATORS).decode("ascii") + " "
        # The text between matches, the space before each word matched, and the
        # word, in turn: a word starts in ``joined`` at the length of everything
        # before it in ``spaced``, less the space that ``spaced`` starts with.
        parts = _starts(prefixes).split(spaced)
        at = list(accumulate(map(len, parts), initial=-1))
        starts, ends, words = at[2::3], at[3::3], parts[2::3]
        if wide:
            # The words at characters past ASCII, which the pattern leaves out.
            past = self._past_words(joined, spaced, prefixes)
            if past is None:
                return None
            for start, end, form in past:
                at_word = bisect_left(starts, start)
                starts.insert(at_word, start)
                ends.insert(at_word, end)
                words.insert(at_word, form)
        if not self.stopwords.isdisjoint(words):
            kept = [i for i, word in enumerate(words) if word not in self.stopwords]
            starts, ends, words = _pick(kept, starts, ends, words)
        matched_by = [
            list(map(terms[analysis].__contains__, analysed))
            for analysis, analysed in self._stems(words, terms).items()
        ]
        out: list[Matches] = []
        first = 0
        for number in range(len(lowered)):
            base = bases[number]
            last = bisect_left(starts, bases[number + 1], first)
            chosen: list[bool] | None = None
            most = 0
            for matched in matched_by:
                flags = matched[first:last]
                count = flags.count(True)
                if count > most:
                    chosen, most = flags, count
            if chosen is None:
                out.append(([], [], None))
            else:
                text_starts = list(compress(starts[first:last], chosen))
                text_ends = list(compress(ends[first:last], chosen))
                if wide:
                    keys = list(map(joined.__getitem__, map(slice, text_starts, text_ends)))
                else:
                    keys = list(compress(words[first:last], chosen))
                if base:
                    text_starts = [start - base for start in text_starts]
                    text_ends = [end - base for end in text_ends]
                out.append((text_starts, text_ends, keys))
            first = last
        return out

    def _c_spans(
        self, texts: Sequence[str], terms: dict[str, frozenset[str]], prefixes: frozenset[str]
    ) -> list[Matches | None]:
        """``_plain_spans``, the words found in C (``_speedups.words``): the same
        words, each text under the analysis that matches most of them; None for
        a text C leaves to Python (one that may hold CJK, or whose words past
        ASCII do not fold one for one, or whose length lower-casing changes).

        C places the words with a letter past ASCII; they are folded here, all
        at once, as the index folds them, and kept when they start as a term
        does (``_wanted``).
        """
        assert _speedups is not None
        scanned = _speedups.words(list(texts), prefixes, self.stopwords)
        # Each text's matches: starts, ends, what each word is stemmed from
        # (an ASCII word itself, lower-cased; a word past ASCII, folded), and
        # the word as the text writes it, lower-cased.
        found: list[tuple[list[int], list[int], list[str], list[str]] | None] = [
            (words[0], words[1], words[2], words[2]) if words is not None and not words[3] else None
            for words in scanned
        ]
        wide = {i: words for i, words in enumerate(scanned) if words is not None and words[3]}
        if wide:
            for i, merged in self._fold_wide(texts, wide, prefixes).items():
                found[i] = merged
        stemmed_from = list(chain.from_iterable(words[2] for words in found if words is not None))
        stems = self._stems(stemmed_from, terms)
        return _speedups.choose(found, list(stems.values()), [terms[name] for name in stems])

    def _fold_wide(
        self,
        texts: Sequence[str],
        wide: dict[int, tuple[list[int], list[int], list[str], list[int]]],
        prefixes: frozenset[str],
    ) -> dict[int, tuple[list[int], list[int], list[str], list[str]]]:
        """The ``wide`` texts' words (``_speedups.words``, by text) with a letter
        past ASCII folded and merged in order with their ASCII words; nothing
        when one does not fold to one word (those texts stay Python's)."""
        placed: list[tuple[int, int, int]] = []
        for i, (_, _, _, spans) in wide.items():
            pairs = zip(spans[::2], spans[1::2], strict=True)
            placed.extend((i, start, end) for start, end in pairs)
        keys = [texts[i][start:end].lower() for i, start, end in placed]
        forms = self.folded.analyze(" ".join(keys))
        if len(forms) != len(keys):
            return {}  # a word that does not fold to one word (never seen)
        kept: dict[int, list[tuple[int, int, str, str]]] = {i: [] for i in wide}
        for (i, start, end), key, form in zip(placed, keys, forms, strict=True):
            if (
                _wanted(form, prefixes)
                and len(key.encode()) < _LONGEST
                and form not in self.stopwords
            ):
                kept[i].append((start, end, form, key))
        merged = {}
        for i, extra in kept.items():
            starts, ends, ascii_words, _ = wide[i]
            ordered = sorted([*zip(starts, ends, ascii_words, ascii_words, strict=True), *extra])
            merged[i] = (
                [entry[0] for entry in ordered],
                [entry[1] for entry in ordered],
                [entry[2] for entry in ordered],
                [entry[3] for entry in ordered],
            )
        return merged

    def _past_words(
        self, joined: str, spaced: str, prefixes: frozenset[str]
    ) -> list[tuple[int, int, str]] | None:
        """The words of ``joined`` that hold or touch a character past ASCII, which
        ``_starts`` leaves to this: each as the index splits it, with where it
        stands and its folded form, kept when it starts as a term does; None when
        one does not fold to one word."""
        runs: list[tuple[int, int]] = []
        for run_start, run_end in _past_runs(spaced):
            start, end = run_start - 1, run_end - 1  # in ``joined``
            while start > 0 and joined[start - 1].isalnum():
                start -= 1
            while end < len(joined) and joined[end].isalnum():
                end += 1
            runs.extend(word.span() for word in _WORD.finditer(joined, start, end))
        if not runs:
            return []
        runs = list(dict.fromkeys(runs))  # a word with two such characters is found twice
        forms = self.folded.analyze(" ".join(joined[start:end] for start, end in runs))
        if len(forms) != len(runs):
            return None
        return [
            (start, end, form)
            for (start, end), form in zip(runs, forms, strict=True)
            if _wanted(form, prefixes) and len(joined[start:end].encode()) < _LONGEST
        ]

    def _stems(self, words: list[str], terms: dict[str, frozenset[str]]) -> dict[str, list[str]]:
        """``words`` (folded) stemmed by each analysis of ``terms``, English first; an
        analysis whose stemmer does not give one stem a word is left out (never seen).

        A word's stem is kept (``_stemmed``): a store's words recur from search
        to search, and looking a hundred of them up costs a fraction of stemming them.
        """
        stems: dict[str, list[str]] = {}
        for analysis in sorted(terms, key=lambda analysis: analysis != DEFAULT_ANALYSIS):
            stemmer = self.stemmers[analysis]
            if stemmer is None or not words:
                stems[analysis] = words
                continue
            known = self._stemmed[analysis]
            analysed = list(map(known.get, words))
            if None in analysed:
                if len(known) > self.most_stemmed:
                    # A new dict, not a cleared one: a search in another thread
                    # keeps the one it holds, whole.
                    known = self._stemmed[analysis] = {}
                missing = list(dict.fromkeys(word for word in words if word not in known))
                found = stemmer.analyze(" ".join(missing))
                if len(found) != len(missing):
                    continue
                known.update(zip(missing, found, strict=True))
                analysed = list(map(known.get, words))
            stems[analysis] = cast(list[str], analysed)
        return stems

    def _matched_spans(
        self, text: str, terms: dict[str, frozenset[str]], prefixes: frozenset[str]
    ) -> list[tuple[int, int]]:
        """Where in ``text`` the words the query matches stand, under the analysis that
        matches most of them (English first: another wins only with more matches).

        Only words that start as some term does are stemmed. The text is split
        as the index splits it, CJK runs as bigrams, and folded: the path for
        texts ``_plain_spans`` does not take. ``prefixes``: ``_prefixes(terms)``.
        """
        indexed, origins = cjk_bigrams_with_offsets(text)
        folded = self.folded.analyze(indexed)
        candidates = [position for position, word in enumerate(folded) if _wanted(word, prefixes)]
        chosen = self._best_analysis([folded[position] for position in candidates], terms)
        if not chosen:
            return []
        found_spans = self._word_spans(indexed, [candidates[i] for i in chosen], len(folded))
        if origins is not None:
            found_spans = original_spans(found_spans, origins)
        return found_spans

    def _best_analysis(self, words: list[str], terms: dict[str, frozenset[str]]) -> list[int]:
        """Which of ``words`` (folded) match, as the indexes into ``words``, under the
        analysis of ``terms`` that matches most of them (English on a tie)."""
        matched: list[int] = []
        if not words:
            return matched
        joined = " ".join(words)
        for analysis in sorted(terms, key=lambda analysis: analysis != DEFAULT_ANALYSIS):
            stemmer = self.stemmers[analysis]
            stems = stemmer.analyze(joined) if stemmer is not None else words
            if len(stems) != len(words):
                continue  # a folded word that is not one word (never seen): no highlight
            wanted = terms[analysis]
            found = [i for i, stem in enumerate(stems) if stem in wanted]
            if len(found) > len(matched):
                matched = found
        return matched

    def _word_spans(self, indexed: str, wanted: list[int], words: int) -> list[tuple[int, int]]:
        """Where the words at positions ``wanted`` of the ``words`` in ``indexed`` stand."""
        found = [match.span() for match in _WORD.finditer(indexed)]
        if len(found) == words:
            return [found[position] for position in wanted]
        spans = []
        at = 0
        targets = iter(wanted)
        target = next(targets)
        for position, word in enumerate(self.words.analyze(indexed)):
            start = indexed.find(word, at)
            at = start + len(word)
            if position == target:
                spans.append((start, at))
                target = next(targets, -1)
                if target < 0:
                    break
        return spans


#: Where the matched words of one text stand: their starts, their ends, and
#: the words as the text writes them, lower-cased (None: not at hand).
Matches = tuple[list[int], list[int], list[str] | None]


def _pick(
    kept: list[int], starts: list[int], ends: list[int], words: list[str]
) -> tuple[list[int], list[int], list[str]]:
    return [starts[i] for i in kept], [ends[i] for i in kept], [words[i] for i in kept]


def _past_runs(spaced: str) -> Iterator[tuple[int, int]]:
    """Where the runs of ``_PAST`` stand in ``spaced``: found with ``str.find``,
    which skips the text at memory speed (a regular expression walks it a
    character at a time, which costs more than everything else here)."""
    at = spaced.find(_PAST)
    while at >= 0:
        end = at + 1
        while spaced.startswith(_PAST, end):
            end += 1
        yield at, end
        at = spaced.find(_PAST, end)


def _prefixes(terms: dict[str, frozenset[str]]) -> frozenset[str]:
    """The first letters a word must start with for its stem to be one of ``terms``.

    A stem starts as its word does, but for a few rules of the English
    stemmer, each given its own prefix: a "y" made "i" or back ("fly": "fli",
    "skies": "sky"), and a short stem whose "e" stands for the "i" of "-ing"
    ("using": "use", "dying": "die"). A term shorter than ``_PREFIX`` is a
    prefix of its own, of words a few letters longer (``_SHORT_TAIL``:
    "going": "go"). The other analyses' stemmers edit the start of a word
    more often: ``_edited_prefixes`` gives their terms' prefixes too.
    """
    prefixes = set()
    for analysis, wanted in terms.items():
        edited = analysis != DEFAULT_ANALYSIS
        for term in wanted:
            if edited:
                prefixes.update(_edited_prefixes(term))
            prefix = term[:_PREFIX]
            prefixes.add(prefix)
            if prefix.endswith("i"):
                prefixes.add(prefix[:-1] + "y")
            elif prefix.endswith("y"):
                prefixes.add(prefix[:-1] + "i")
            if len(prefix) == _PREFIX and prefix.endswith("e"):
                prefixes.add(prefix[:-1] + "i")
                if prefix.endswith("ie"):
                    prefixes.add(prefix[0] + "yi")
    return frozenset(prefixes)


def _edited_prefixes(term: str) -> set[str]:
    """The first letters of words whose stem is ``term`` although they start
    otherwise, as stemmers other than the English one make such stems:

    - a vowel written with an "e" after it, which the German stemmer reads
      as its umlaut ("Koeln", "fuer", "zuerst": "koln", "fur", "zurst");
    - a letter doubled that the stem has once (Finnish: "ollut": "olu");
    - a vowel the stem has doubled (Dutch: "lopen": "loop");
    - "ge" before it (Dutch participles: "gewerkt": "werk").

    Each only lets more words be stemmed: whether one matches is still the
    stemmer's answer.
    """
    edited = {("ge" + term)[:_PREFIX]}
    for at, letter in enumerate(term[:_PREFIX]):
        edited.add((term[: at + 1] + letter + term[at + 1 :])[:_PREFIX])
        if letter in "aou":
            edited.add((term[: at + 1] + "e" + term[at + 1 :])[:_PREFIX])
        if letter in "aeiouy" and term[at + 1 : at + 2] == letter:
            edited.add((term[:at] + term[at + 1 :])[:_PREFIX])
    return edited


def _wanted(word: str, prefixes: frozenset[str]) -> bool:
    """Whether ``word`` (folded) starts as a term does (``_prefixes``)."""
    if word[:_PREFIX] in prefixes:
        return True
    return len(word) <= _PREFIX + _SHORT_TAIL and any(
        word[:length] in prefixes for length in range(1, _PREFIX)
    )


@functools.lru_cache(maxsize=256)
def _starts(prefixes: frozenset[str]) -> re.Pattern[str]:
    """The words starting with ``prefixes`` (ASCII ones) of a text as
    ``_plain_spans`` writes it, each with the space before it (the space and
    the word each a group of the pattern, for ``re.split``)."""
    # A word is matched whole (possessively) and only when a space or ASCII
    # punctuation ends it: a word that runs into a character past ASCII is
    # ``_past_words``', a word the index drops as too long nobody's.
    longest = _LONGEST - 1 - _PREFIX
    ascii_prefixes = sorted(prefix for prefix in prefixes if prefix.isascii())
    if not ascii_prefixes:
        return re.compile("(?!)")
    # One shared tail for every full-length prefix, not one per alternative:
    # compiling is done per query, and Python compiles a pattern in Python,
    # at a cost that grows with its size (a fifth of a millisecond and more
    # for a query of ten words).
    alternatives = []
    stems = [re.escape(prefix) for prefix in ascii_prefixes if len(prefix) == _PREFIX]
    if stems:
        alternatives.append(f"(?:{'|'.join(stems)})[a-z0-9]{{0,{longest}}}+")
    alternatives += [
        re.escape(prefix) + f"[a-z0-9]{{0,{_PREFIX + _SHORT_TAIL - len(prefix)}}}+"
        for prefix in ascii_prefixes
        if len(prefix) < _PREFIX
    ]
    # The first letters as one class first: most words start otherwise, and
    # a class is one test where the alternatives are tried one by one.
    firsts = re.escape("".join(sorted({prefix[0] for prefix in ascii_prefixes})))
    return re.compile(f"( )(?=[{firsts}])((?:{'|'.join(alternatives)})(?![a-z0-9\x01]))")


#: Stands for a character past ASCII in the text ``_plain_spans`` searches.
_PAST = "\x01"
_SEPARATORS = bytes(
    code if chr(code).isalnum() else ord(_PAST) if chr(code) == "?" else ord(" ")
    for code in range(256)
)


# Tantivy's simple tokenizer splits on what is not alphanumeric; so does this
# for every script but a few (marks Rust counts as letters): ``_word_spans``
# checks the count and falls back to finding Tantivy's own words.
_WORD = re.compile(r"[^\W_]+")
