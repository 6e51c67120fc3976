"""Snippets: cut from a hit's own text in one cheap pass, marking what the index matched.

``Highlighter.highlights`` finds the words of each text that start as a query term does
(one pattern over all the texts of a search), stems only those, and keeps
the window holding the most distinct matched words. These tests hold it to
the index's own analysis, word for word.
"""

from __future__ import annotations

import html
import os
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import researchstore.text.highlight as highlight_module
from researchstore.indexes.index import HIGHLIGHTER
from researchstore.speedups import Speedups
from researchstore.text.analysis import MARK, analyze, index_terms
from researchstore.text.highlight import _speedups

highlight = HIGHLIGHTER.highlight
highlights = HIGHLIGHTER.highlights

TEXTS = [
    "Varroa mites were counted; the mite loads (mites per 100 bees) fell.",
    "Flies fly over the dry fields while the flies' larvae dry out.",
    "A café – “Mites” in «Café» beds; cafés, CAFE and Café-au-lait? Mites!",
    "snake_case mites_and_bees: under_scores split words as the index does.",
    "Éléphants and élan: accents fold, so Elephant matches éléphant.",
    "Plain words " + "x" * 45 + " mites beside a word too long for the index.",
    "Straße und Maßnahmen: mites in the İstanbul apiary, MITES again.",
    "B12 and b1 are not the same; B1 vitamins, b12b1 neither.",
    "Why?Mites!Flies?dry...mites?",
    "Why?Mites!Flies?dry...café?mites",
    "Runs side by side: ÉlÉphant–café—mites…«Éléphants» ending in café",
    "éléphant",
]
QUERY = "mite café fly elephant b1 dry straße"


def _marked(snippet: str) -> list[str]:
    return [html.unescape(word) for word in re.findall(r"<b>(.*?)</b>", snippet)]


def _index_matches(text: str, query: str) -> list[str]:
    """The words of ``text`` the English index holds as one of the query's terms."""
    wanted = set(index_terms(query))
    return [word for word in re.findall(r"[^\W_]+", text) if set(analyze(word)) & wanted]


@pytest.mark.parametrize("text", TEXTS)
def test_a_snippet_marks_exactly_the_words_the_index_matches(text: str) -> None:
    terms = {"en": frozenset(index_terms(QUERY))}
    snippet = highlight(text, terms, max_chars=10_000)
    assert _marked(snippet) == _index_matches(text, QUERY)
    # Nothing else changes: the text, escaped, with marks.
    bare = snippet.replace("<b>", "").replace("</b>", "")
    assert html.unescape(bare) == text.strip()
    assert "<" not in bare and ">" not in bare


#: Words the English stemmer turns into stems that do not start as they do
#: ("using": "use", "dying": "die", "skies": "sky"), or into stems shorter than
#: three letters ("going": "go"), beside words that only look alike.
STEMMED_APART = [
    "Using the tools while aging, owing nothing; the use of age, used and owed.",
    "Dying, lying and tying; skies and a sky; going and doing; gone, gold, goods.",
    "Émigrés using Œuvres – ça aging, des skies «going»",
]
STEMMED_APART_QUERY = "use age owe die lie tie sky go do"


@pytest.mark.parametrize("text", STEMMED_APART)
def test_words_whose_stem_starts_otherwise_are_marked_as_the_index_matches(text: str) -> None:
    terms = {"en": frozenset(index_terms(STEMMED_APART_QUERY))}
    marked = _marked(highlight(text, terms, max_chars=10_000))
    assert marked == _index_matches(text, STEMMED_APART_QUERY)
    assert len(marked) >= 4


def test_texts_are_highlighted_alike_alone_and_together() -> None:
    russian = frozenset(term.removesuffix(MARK) for term in index_terms("мир", "ru"))
    terms = {"en": frozenset(index_terms(QUERY)), "ru": russian}
    texts = [*TEXTS, "Привет мир: «мир» и мировой mites", "中国宇航员们 mites", "no match here"]
    together = highlights(texts, terms)
    assert together == [highlight(text, terms) for text in texts]
    # The analysis matching most words of a text wins: Russian here, twice.
    assert _marked(together[-3]) == ["мир", "мир"]
    assert _marked(together[-2]) == ["mites"]
    assert together[-1] == "no match here"


def test_the_window_kept_holds_the_most_distinct_matched_words() -> None:
    text = (
        "Mites appear once at the start. "
        + "Filler sentence about nothing in particular. " * 12
        + "Here bees and mites and flies stand together. "
        + "More filler to the end. " * 8
    )
    terms = {"en": frozenset(index_terms("mites bees flies"))}
    snippet = highlight(text, terms)
    assert {word.lower() for word in _marked(snippet)} == {"mites", "bees", "flies"}
    assert len(html.unescape(snippet.replace("<b>", "").replace("</b>", ""))) <= 200
    # The snippet starts and ends at word boundaries of the text.
    plain = html.unescape(snippet.replace("<b>", "").replace("</b>", ""))
    start = text.index(plain)
    assert start == 0 or not text[start - 1].isalnum()


def test_no_match_shows_the_start_of_the_text_escaped() -> None:
    text = "<script>alert(1)</script> & nothing the query asks for. " * 10
    snippet = highlight(text, {"en": frozenset(index_terms("varroa"))})
    assert snippet == html.escape(text[:200], quote=False)
    assert highlights([text], {}) == [html.escape(text[:200], quote=False)]


def test_a_text_holding_the_marks_own_characters_is_still_escaped() -> None:
    text = "control \x02 and \x03 characters <b> beside mites & bees"
    snippet = highlight(text, {"en": frozenset(index_terms("mites"))})
    assert "<b>mites</b>" in snippet
    assert "&lt;b&gt;" in snippet and "\x02" in snippet and "&amp;" in snippet


def test_stems_kept_from_search_to_search_change_no_snippet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    russian = frozenset(term.removesuffix(MARK) for term in index_terms("мир", "ru"))
    terms = {"en": frozenset(index_terms(QUERY)), "ru": russian}
    texts = [*TEXTS, "Привет мир: «мир» и мировой mites"]
    monkeypatch.setattr(
        HIGHLIGHTER, "_stemmed", {analysis: {} for analysis in HIGHLIGHTER._stemmed}
    )
    cold = highlights(texts, terms)
    assert highlights(texts, terms) == cold
    # A full store of stems starts afresh, with the same snippets.
    monkeypatch.setattr(HIGHLIGHTER, "most_stemmed", 1)
    assert highlights(texts, terms) == cold
    assert [highlight(text, terms) for text in texts] == cold


#: Words other stemmers stem into terms that start otherwise than they do:
#: German reads "ue", "oe" and "ae" as umlauts, Finnish drops a doubled
#: letter, Dutch doubles a vowel and drops the "ge" of a participle.
STEMMED_APART_ELSEWHERE = [
    (
        "de",
        "Köln Müller Übung zuerst für Öl",
        "In Koeln und Köln, Mueller und Müller, Uebung und Übung; zuerst fuer Oel, für Öl.",
    ),
    ("fi", "ukko array ettei", "Ukko sanoi, ettei array ole tyhjä, ja ukko nauroi."),
    ("nl", "werken lopen bouwen", "Zij hebben gewerkt, gelopen en gebouwd; werken, lopen, bouwen."),
]


@pytest.mark.parametrize(("analysis", "query", "text"), STEMMED_APART_ELSEWHERE)
def test_words_other_stemmers_stem_apart_are_marked_as_the_index_matches(
    analysis: str, query: str, text: str
) -> None:
    def terms_of(words: str) -> set[str]:
        return {term.removesuffix(MARK) for term in index_terms(words, analysis)}

    wanted = terms_of(query)
    expected = [word for word in re.findall(r"[^\W_]+", text) if terms_of(word) & wanted]
    marked = _marked(highlight(text, {analysis: frozenset(wanted)}, max_chars=10_000))
    assert marked == expected
    assert len(expected) >= 4


# -- the C speedup (``researchstore._speedups``) -------------------------------------

_C_ALPHABET = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 .,;?!-_'\"<>&\n\t"
#: Not letters or digits past ASCII (they split words), then letters that are.
_C_WIDE = "–—·±×’“”…≥ βαéüç中İ"
_C_WORDS = [
    *["mites", "mite", "flies", "fly", "dry", "using", "going", "its", "b12", "b1"],
    *["café", "Cafés", "Éléphants", "élan", "naïve", "Straße", "βcell", "мир", "мировой", "Thé"],
]
#: A 38-letter stem, its 39-letter plural (indexed) and its 40-letter past
#: tense (too long: the index drops it); words just past a short stem's reach.
_C_LONG = "ka" * 19
_C_EDGES = [_C_LONG + "s", _C_LONG.upper() + "ED", "goings", "Doings", "goes", "its"]


@pytest.mark.skipif(_speedups is None, reason="the C speedup is not built")
@pytest.mark.parametrize("query", [_C_LONG, "go do it"])
def test_the_c_speedup_keeps_to_the_index_s_word_lengths(query: str) -> None:
    text = " ".join(_C_EDGES + ["going", "doing", "it", "Go"])
    terms = {"en": frozenset(index_terms(query))}
    with_c = highlight(text, terms, max_chars=10_000)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(highlight_module, "_speedups", None)
        assert highlight(text, terms, max_chars=10_000) == with_c
    assert _marked(with_c)


def _c_texts() -> st.SearchStrategy[str]:
    word = st.sampled_from(_C_WORDS + _C_EDGES) | st.text(_C_ALPHABET, min_size=1, max_size=45)
    piece = word | st.text(_C_WIDE, min_size=1, max_size=2) | st.sampled_from(" ,.?\x02\x03")
    return st.lists(piece, max_size=120).map("".join)


@pytest.mark.slow
@pytest.mark.skipif(_speedups is None, reason="the C speedup is not built")
@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(_c_texts(), min_size=1, max_size=6),
    query=st.lists(st.sampled_from(_C_WORDS + ["the", "x", "go", "do", "use"]), max_size=5),
)
def test_the_c_speedup_finds_the_words_python_finds(texts: list[str], query: list[str]) -> None:
    russian = frozenset(term.removesuffix(MARK) for term in index_terms(" ".join(query), "ru"))
    terms = {"en": frozenset(index_terms(" ".join(query))), "ru": russian}
    terms = {analysis: found for analysis, found in terms.items() if found}
    with_c = [highlights(texts, terms, max_chars=size) for size in (200, 60, 15)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(highlight_module, "_speedups", None)
        assert [highlights(texts, terms, max_chars=size) for size in (200, 60, 15)] == with_c


#: Windows away from the text's start: the context kept before the first
#: match, cuts inside long words, and matches that just fit.
_C_WINDOWS = [
    "x " * 50 + "mites " + "y " * 30 + "flies bees " + "z " * 80,
    "Filler" * 3 + " " + "abcdefghijklmnopqrstuvwxyz" * 2 + " mites & <bees> " + "q" * 70,
    "mites " + "w" * 48 + " flies",
    "mites " + "w" * 49 + " flies " + "longwordlongword " * 9 + "bees mites flies",
    "\u2003 mites\u00a0\u2013 flies\u3000 ",
]


@pytest.mark.skipif(_speedups is None, reason="the C speedup is not built")
@pytest.mark.parametrize("text", _C_WINDOWS)
@pytest.mark.parametrize("size", [15, 30, 60, 200])
def test_the_c_speedup_cuts_the_same_window(text: str, size: int) -> None:
    terms = {"en": frozenset(index_terms("mites flies bees"))}
    with_c = highlight(text, terms, max_chars=size)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(highlight_module, "_speedups", None)
        assert highlight(text, terms, max_chars=size) == with_c
    assert _marked(with_c)


@pytest.mark.parametrize("together", [False, True])
def test_on_a_tie_english_wins_whichever_path(together: bool) -> None:
    """A text matching as many words in English as in German is marked as English."""
    german = frozenset(term.removesuffix(MARK) for term in index_terms("Bienen", "de"))
    terms = {"de": german, "en": frozenset(index_terms("mites"))}
    texts = ["Mites and Bienen here", "Bienen only"] if together else ["Mites and Bienen here"]
    with_c = highlights(texts, terms)
    assert _marked(with_c[0]) == ["Mites"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(highlight_module, "_speedups", None)
        assert highlights(texts, terms) == with_c


def test_the_c_speedup_is_built_where_asked() -> None:
    """CI has a compiler and asks for the C step (``RESEARCHSTORE_REQUIRE_SPEEDUPS``
    in ``.ci/run``), so the tests there run it; elsewhere it is optional and
    the same snippets come from Python."""
    if not os.environ.get("RESEARCHSTORE_REQUIRE_SPEEDUPS"):
        pytest.skip("the C step is optional here (RESEARCHSTORE_REQUIRE_SPEEDUPS is not set)")
    assert _speedups is not None, "researchstore/_speedups.c was not built: no C compiler?"


@pytest.mark.skipif(_speedups is None, reason="the C speedup is not built")
def test_the_built_c_speedup_offers_every_function_its_contract_names() -> None:
    """A build that failed leaves an older module in place (the step is
    optional): one without a function added since is caught here."""
    named = {name for name in vars(Speedups) if not name.startswith("_")}
    assert named, "speedups.Speedups names no function"
    assert sorted(name for name in named if not callable(getattr(_speedups, name, None))) == []
