"""Token counts (``analysis.count_tokens``: C for ASCII text where it is built,
Tantivy's analyzer less its stemmer otherwise) agree with the index's analyzer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from researchstore.text import analysis
from researchstore.text.analysis import analyze

#: Words that fold to stop words ("Thé", "ÀND", fullwidth "ｉｓ"), letters that
#: Python and Rust class apart (a Hebrew point, a Devanagari vowel sign, a
#: circled letter), words at the length limit in two- and four-byte letters,
#: and ASCII stop words at the limits the C count checks.
_EDGES = [
    "Thé",
    "ÀND",
    "ｉｓ",
    "ïn",
    "bׁא",
    "हिन्दी",
    "Ⓐ",
    "ⓘⓢ",
    "é" * 19,
    "é" * 20,
    "𝐚" * 9,
    "𝐚" * 10,
    "ß",
    "İt",
    "1½",
    "x" * 39,
    "x" * 40,
    "THE",
    "there's",
    "a_b",
]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_EDGES) | st.text(max_size=30), max_size=30).map(" ".join))
def test_any_text_is_counted_as_the_index_analyses_it(text: str) -> None:
    assert analysis.count_tokens(text) == len(analyze(text))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([*analysis.STOPWORDS, "hive", "Mite", "x" * 39, "x" * 40])
        | st.text(st.characters(max_codepoint=127), max_size=12),
        max_size=40,
    ).map(" ".join)
)
def test_ascii_text_is_counted_as_the_index_analyses_it(text: str) -> None:
    """ASCII text is what the C count takes (where it is built)."""
    assert analysis.count_tokens(text) == len(analyze(text))
