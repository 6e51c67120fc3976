"""Words as the index counts them, without the index: stop words and token counts.

The leaf under both ingest and the word index (``index.py``): it imports
nothing of the package but the generated tables and the optional C speedup,
and never Tantivy, so ingest counts a chunk's tokens without loading the
index, as bm25s's ``tokenization.py`` stands under its retrievers.

``count_tokens`` gives the count the index's English analyzer yields
(SPEC: "``token_count`` is the count the index's tokenizer yields"): a word
is a run of the characters Tantivy's simple tokenizer keeps, shorter than
``MAX_WORD_BYTES`` in UTF-8, and not one of ``STOPWORDS`` once lower-cased
and folded to ASCII. Which characters those are, and how folding spells
them, are Tantivy's answers written down as tables (``unicode_words.py``,
checked against Tantivy by ``tests/test_analysis.py``), so the counts agree
for every text, not only for ASCII.
"""

from __future__ import annotations

import bisect

from researchstore.speedups import SPEEDUPS
from researchstore.unicode_words import ASCII_FOLDS, WORD_CHARACTERS

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
#: (``index.indexed_text``).
MARK = "0"
#: A word of this many bytes (UTF-8) or more is no token (Tantivy's
#: ``remove_long(40)``).
MAX_WORD_BYTES = 40

_FOLDS = dict((pair[0], pair[1:]) for pair in ASCII_FOLDS.split())
#: No word longer than this is a stop word, however folding spells it.
_LONGEST_STOPWORD = max(map(len, STOPWORDS))


def count_tokens(text: str) -> int:
    """The number of tokens the index's English analyzer yields for ``text``.

    An ASCII text is counted in C where the speedup is built (``speedups.py``):
    the same count, without a string made for each token.
    """
    if SPEEDUPS is not None:
        counted = SPEEDUPS.count_tokens(text, STOPWORD_SET)
        if counted is not None:
            return counted
    return sum(1 for word in words(text) if is_token(word))


def words(text: str) -> list[str]:
    """The runs of word characters in ``text``, as Tantivy's simple tokenizer splits it.

    Every other character is made a space and the text split on spaces:
    about six times faster than a regular expression of the same class,
    which Python's ``re`` checks range by range for each character past
    Latin-1.
    """
    return text.translate(_SEPARATORS).split()


def is_token(word: str) -> bool:
    """Whether the English analysis keeps ``word`` (a run of word characters).

    A word of fewer than 10 characters is under 40 bytes even if each takes
    four; a stop word is at most 5 characters before folding (folding never
    makes a word shorter).
    """
    if len(word) >= MAX_WORD_BYTES // 4 and len(word.encode()) >= MAX_WORD_BYTES:
        return False
    return len(word) > _LONGEST_STOPWORD or _folded(word) not in STOPWORD_SET


def _word_ranges(characters: str) -> tuple[list[int], list[int]]:
    """``WORD_CHARACTERS`` (a class: single characters and ``first-last`` ranges)
    as the first and last code point of each range, in order."""
    firsts: list[int] = []
    lasts: list[int] = []
    position = 0
    while position < len(characters):
        first = last = ord(characters[position])
        if characters[position + 1 : position + 2] == "-":
            last = ord(characters[position + 2])
            position += 3
        else:
            position += 1
        firsts.append(first)
        lasts.append(last)
    return firsts, lasts


class _Separators(dict[int, int]):
    """``str.translate``'s table: a word character to itself, any other to a space.

    Filled as characters are met (a text's characters are few, the code
    points many), up to ``_SEPARATORS_KEPT`` of them: a text made to hold
    every code point does not grow it past that.
    """

    def __missing__(self, code: int) -> int:
        found = bisect.bisect_right(_FIRSTS, code) - 1
        translated = code if found >= 0 and code <= _LASTS[found] else ord(" ")
        if len(self) < _SEPARATORS_KEPT:
            self[code] = translated
        return translated


_SEPARATORS_KEPT = 1 << 16
_FIRSTS, _LASTS = _word_ranges(WORD_CHARACTERS)
_SEPARATORS = _Separators({code: code if chr(code).isalnum() else ord(" ") for code in range(128)})


def _folded(word: str) -> str | None:
    """``word`` lower-cased and folded as the index folds it, where folding spells
    it all in ASCII; None where it does not (no stop word then)."""
    if word.isascii():
        return word.lower()
    spelled = []
    for character in word:
        if character.isascii():
            spelled.append(character.lower())
        else:
            fold = _FOLDS.get(character)
            if fold is None:
                return None
            spelled.append(fold)
    return "".join(spelled)
