"""Words as the index makes them, without the index: the analyzers, stop words,
token counts and a query's terms.

The leaf under both ingest and the word index (``index.py``): it imports
Tantivy's analyzers and nothing of the package but ``language`` and the
optional C speedup, so ingest counts a chunk's tokens without loading the
index, as bm25s's ``tokenization.py`` stands under its retrievers.

Each chunk's words are analysed in its document's language
(``language.analysis_key``): English by Tantivy, any other language here,
its terms marked so that the English analysis leaves them be (``MARK``).
Each analysis drops the English stop words and its language's own
(``build_analyzer``), in the index and the query alike.
"""

from __future__ import annotations

import functools
import re

import tantivy

from researchstore.speedups import SPEEDUPS
from researchstore.text.language import ANALYSES, DEFAULT_ANALYSIS, cjk_bigrams

#: Lucene's English stop words (what Anserini's BM25 drops): measured on
#: SciFact (bench/quality_search.py), dropping them gains relevance. Every
#: analysis of the index drops them.
STOPWORDS = (
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with"
).split()
#: The stop words as one set, shared by counting and highlighting (the C
#: speedup reads a set once and keeps it while it is handed the same one).
STOPWORD_SET = frozenset(STOPWORDS)
#: Ends every term of a chunk not analysed as English: the English stemmer,
#: which strips no suffix that ends in a digit, then leaves it as it is
#: (``indexed_text``).
MARK = "0"
#: A word of this many bytes (UTF-8) or more is no token (Tantivy's
#: ``remove_long(40)``).
MAX_WORD_BYTES = 40

#: A quoted phrase of a query.
PHRASE = re.compile(r'"([^"]+)"')


def build_analyzer(
    analysis: str = DEFAULT_ANALYSIS, *, own_stop_words: bool = True, stem: bool = True
) -> tantivy.TextAnalyzer:
    """One analysis (``language.ANALYSES``): split on non-alphanumerics, lower-case,
    drop the language's stop words, fold accents, drop the English stop words, stem.

    Accents are folded before stemming, so a word written with or without
    them has one stem. Every analysis drops the English stop words (Lucene's
    list: ``STOPWORDS``); each other language with a stemmer also drops its
    own (Tantivy's list for it), matched as the list spells them, before
    folding ("på" is dropped, "pa" is not). So no analysis asks for more
    terms than the English one (which ``query_size`` bounds). A language
    without a stemmer (CJK, ``plain``) drops the English list alone.

    A word that is a stop word in one language alone ("om", "und", "men")
    is then missing from that language's chunks only, and a query's other
    analyses still ask for it ("men" is an English word). Weighed by their
    chunks alone it would be a rare term, and chunks that merely hold it
    would rank high: known-item search on German pages lost 10 points of
    rank-1 rate when per-language lists were first tried
    (``bench/quality_known_item.py``). So each chunk records the stop words
    its analysis dropped (the ``stop_word`` field, counted, never searched),
    and the query weighs such a word as common as it is across every chunk
    (``_blended``), as it was when every analysis kept it.

    ``own_stop_words=False`` keeps the language's stop words (a term for
    each word the English analysis keeps); ``stem=False`` leaves words
    unstemmed.
    """
    stemmer = ANALYSES[analysis]
    builder = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(MAX_WORD_BYTES))
        .filter(tantivy.Filter.lowercase())
    )
    if own_stop_words and _has_own_stop_words(analysis):
        builder = builder.filter(tantivy.Filter.stopword(str(stemmer)))
    builder = builder.filter(tantivy.Filter.ascii_fold()).filter(
        tantivy.Filter.custom_stopword(STOPWORDS)
    )
    if stem and stemmer is not None:
        builder = builder.filter(tantivy.Filter.stemmer(stemmer))
    return builder.build()


def _has_own_stop_words(analysis: str) -> bool:
    """Whether ``analysis`` drops a list of its language's own: each with a stemmer
    but English, whose list is ``STOPWORDS`` (Tantivy has a list for each)."""
    return analysis != DEFAULT_ANALYSIS and ANALYSES[analysis] is not None


_ANALYZERS = {analysis: build_analyzer(analysis) for analysis in ANALYSES}
_ANALYZER = _ANALYZERS[DEFAULT_ANALYSIS]
#: Each analysis keeping its language's stop words: a term for each word the
#: English analysis keeps, so the n-th term of each is the same word's.
_FORMS = {analysis: build_analyzer(analysis, own_stop_words=False) for analysis in ANALYSES}
#: Each analysis's words as its own stop words are dropped (lower-cased, not
#: yet folded): what tells which words of a query it drops.
_UNFOLDED = {
    analysis: tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
    .filter(tantivy.Filter.remove_long(MAX_WORD_BYTES))
    .filter(tantivy.Filter.lowercase())
    .filter(tantivy.Filter.stopword(str(stemmer)))
    .build()
    for analysis, stemmer in ANALYSES.items()
    if _has_own_stop_words(analysis)
}


def analyze(text: str) -> list[str]:
    """The terms the index stores for ``text`` in English."""
    return _ANALYZER.analyze(text)


def index_terms(text: str, analysis: str = DEFAULT_ANALYSIS) -> list[str]:
    """The terms of ``text`` under ``analysis`` as the index holds them (CJK runs as
    bigrams, marked unless English): what a query asks of chunks of that analysis."""
    terms, dropped = query_forms(text, analysis)
    return [term for term, stop_word in zip(terms, dropped, strict=True) if not stop_word]


@functools.lru_cache(maxsize=1024)
def query_forms(text: str, analysis: str) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """Each word of ``text`` that the English analysis keeps, as ``analysis`` makes it
    (marked unless English), and whether ``analysis`` drops it as a stop word of
    its language.

    Kept for the texts asked of it lately: a search asks for its query's
    terms when the tool checks the query's size and again when it builds
    the query.
    """
    bigrammed = cjk_bigrams(text)
    if analysis == DEFAULT_ANALYSIS:
        terms = tuple(_ANALYZER.analyze(bigrammed))
        return terms, (False,) * len(terms)
    terms = tuple(term + MARK for term in _own_terms(bigrammed, _FORMS[analysis]))
    unfolded = _UNFOLDED.get(analysis)
    if unfolded is None:
        return terms, (False,) * len(terms)
    # A stop word is a word, lower-cased, that the list holds: none of the
    # words this analysis keeps.
    kept = set(unfolded.analyze(bigrammed))
    return terms, tuple(word not in kept for word in english_words(text))


@functools.lru_cache(maxsize=64)
def english_words(text: str) -> tuple[str, ...]:
    """The words of ``text`` that the English analysis keeps, lower-cased (not
    folded, as stop word lists spell them): kept while a query is analysed
    every way."""
    bigrammed = cjk_bigrams(text)
    words, folded = _LOWER.analyze(bigrammed), _FOLD.analyze(bigrammed)
    return tuple(word for word, form in zip(words, folded, strict=True) if form not in STOPWORD_SET)


def stop_words(text: str, analysis: str) -> set[str]:
    """The stop words of its language that ``analysis`` drops from ``text``, lower-cased,
    but those the English analysis drops too (no query asks for them)."""
    unfolded = _UNFOLDED.get(analysis)
    if unfolded is None:
        return set()
    bigrammed = cjk_bigrams(text)
    dropped = sorted(set(_LOWER.analyze(bigrammed)).difference(unfolded.analyze(bigrammed)))
    folded = _FOLD.analyze(" ".join(dropped))  # "å", "à": "a"
    return {word for word, form in zip(dropped, folded, strict=True) if form not in STOPWORD_SET}


def indexed_text(text: str, analysis: str) -> str:
    """What the index is given of a chunk's ``text`` under ``analysis`` (to analyse as English)."""
    if analysis == DEFAULT_ANALYSIS:
        return cjk_bigrams(text)
    terms = _own_terms(cjk_bigrams(text), _ANALYZERS[analysis])
    return f"{MARK} ".join(terms) + MARK if terms else ""


def _own_terms(text: str, analyzer: tantivy.TextAnalyzer) -> list[str]:
    """The terms of ``text`` under an analysis other than English, unmarked.

    A term is one word again when the index splits it: a mark that lower-
    casing leaves and folding does not remove (``İ`` lower-cased is ``i``
    and a combining dot) is dropped, or the term would be two.
    """
    terms = analyzer.analyze(text)
    return [
        term if term.isalnum() else "".join(c for c in term if c.isalnum()) or term
        for term in terms
    ]


# Every word (but the long ones) lower-cased, as stop word lists spell them;
# and folded, one for one.
_LOWER = (
    tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
    .filter(tantivy.Filter.remove_long(MAX_WORD_BYTES))
    .filter(tantivy.Filter.lowercase())
    .build()
)
_FOLD = (
    tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
    .filter(tantivy.Filter.remove_long(MAX_WORD_BYTES))
    .filter(tantivy.Filter.lowercase())
    .filter(tantivy.Filter.ascii_fold())
    .build()
)


# The same tokens before any is dropped: a token's place in this list is its
# position in the index, which a phrase needs to step over stop words.
WORDS = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).build()


def phrase_terms(phrase: str, analysis: str = DEFAULT_ANALYSIS) -> list[tuple[int, str]]:
    """The terms of ``phrase`` under ``analysis`` with their positions in the index.

    In English text a stop word leaves a gap; a chunk of another language
    is given to the index as its terms alone, one after the other, its stop
    words dropped as the query's are: a phrase across one still matches.
    """
    return list(_placed_terms(phrase, analysis))


@functools.lru_cache(maxsize=1024)
def _placed_terms(phrase: str, analysis: str) -> tuple[tuple[int, str], ...]:
    """``phrase_terms``, kept as ``query_forms`` is."""
    if analysis != DEFAULT_ANALYSIS:
        return tuple(enumerate(index_terms(phrase, analysis)))
    placed = []
    for position, word in enumerate(WORDS.analyze(cjk_bigrams(phrase))):
        terms = _ANALYZER.analyze(word)
        if terms:
            placed.append((position, terms[0]))
    return tuple(placed)


def query_size(text: str) -> tuple[int, int]:
    """What ``SearchIndex.build_query`` asks of each analysis for ``text``: (terms, phrases).

    Terms are counted with repeats (a repeated term is asked for again), a
    run of CJK characters as its bigrams; phrases are the quoted groups of
    more than one term. Every analysis drops the English stop words, some
    their own too, so none asks for more. A search's cost grows with both,
    and with the analyses that hold chunks (each may stem a word its own
    way), so the tool bounds them (``catalogue``).
    """
    phrases = sum(1 for phrase in PHRASE.findall(text) if len(phrase_terms(phrase)) > 1)
    return len(index_terms(text)), phrases


# The index's analyzer less its stemmer: a stemmer maps a token to its stem
# and never drops one, so this counts the same tokens at less than half the cost.
_COUNTER = build_analyzer(stem=False)


def count_tokens(text: str) -> int:
    """The number of tokens the index's English analyzer yields for ``text``.

    An ASCII text is counted in C where the speedup is built (``speedups.py``):
    the same count, without a string made for each token.
    """
    if SPEEDUPS is not None:
        counted = SPEEDUPS.count_tokens(text, STOPWORD_SET)
        if counted is not None:
            return counted
    return len(_COUNTER.analyze(text))
