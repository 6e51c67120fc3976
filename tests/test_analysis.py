"""Token counts without Tantivy (``analysis.py``) agree with Tantivy's analyzer."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from researchstore import analysis
from researchstore.index import analyze

sys.path.insert(0, str(analysis.__file__).rsplit("/researchstore/", 1)[0] + "/scripts")
import make_unicode_words


def test_the_tables_are_what_the_installed_tantivy_says() -> None:
    """A Tantivy built with another Unicode version fails here: run
    ``scripts/make_unicode_words.py`` again."""
    ranges = make_unicode_words.word_characters()
    written = make_unicode_words.render(ranges, make_unicode_words.ascii_folds(ranges))
    assert written.split('"""', 2)[2] == make_unicode_words.TARGET.read_text().split('"""', 2)[2]


#: Words that fold to stop words ("Thé", "ÀND", fullwidth "ｉｓ"), letters that
#: Python and Rust class apart (a Hebrew point, a Devanagari vowel sign, a
#: circled letter), words at the length limit in two- and four-byte letters.
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
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_EDGES) | st.text(max_size=30), max_size=30).map(" ".join))
def test_any_text_is_counted_as_tantivy_counts_it(text: str) -> None:
    assert analysis.count_tokens(text) == len(analyze(text))


@pytest.mark.parametrize("text", _EDGES, ids=range(len(_EDGES)))
def test_a_text_past_ascii_is_counted_in_python_as_tantivy_counts_it(text: str) -> None:
    assert sum(1 for word in analysis.words(text) if analysis.is_token(word)) == len(analyze(text))
