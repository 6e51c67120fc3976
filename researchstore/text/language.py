"""Languages: the analysis a document's words get, and its language when none is declared.

Each document is indexed under one *analysis* (``ANALYSES``), chosen by its
language: the one it declares (``<html lang>``, a caption ``Language:``
header, text front matter), else the one detected on its text by
``detect_language``. A query is analysed every way at once (``index.py``),
so it finds documents in each language with their own stemming.

- A tag maps to its analysis by its primary subtag: ``nb-NO``, ``nb``,
  ``nn`` and ``no`` are all Norwegian; ``zh``, ``ja`` and ``ko`` are ``cjk``.
- A language the store has no stemmer for is ``plain``: lower-cased and
  accent-folded, not stemmed.
- A document with no language (none declared, and its text too short or too
  mixed to tell) is analysed as English, as every document was before
  languages were told apart.

Chinese, Japanese and Korean are written without spaces between words, so
runs of their characters become overlapping character bigrams
(``cjk_bigrams``) before any analyzer sees them, in every document and every
query: a word inside a run is then a sequence of bigrams, found wherever it
stands. This is done for every analysis, since a page in any language may
quote them.

Detection loads py3langid's model when a text is first detected
(``language_model``): a process that only reads the store never pays for it.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

#: Every analysis: its name in the index → the Tantivy stemmer (and, but for
#: English, stop word list) it uses, or None for neither. English first: it is
#: the default.
ANALYSES: dict[str, str | None] = {
    "en": "english",
    "no": "norwegian",
    "sv": "swedish",
    "da": "danish",
    "de": "german",
    "fr": "french",
    "es": "spanish",
    "pt": "portuguese",
    "it": "italian",
    "nl": "dutch",
    "fi": "finnish",
    "ru": "russian",
    "cjk": None,
    "plain": None,
}
#: The analysis of a document whose language is not known.
DEFAULT_ANALYSIS = "en"
PLAIN_ANALYSIS = "plain"

#: Primary language subtags that share an analysis with another tag.
_ALIASES = {"nb": "no", "nn": "no", "zh": "cjk", "ja": "cjk", "ko": "cjk"}

#: What detection may answer: the languages with an analysis, plus a few
#: common ones that would otherwise be taken for their neighbours (Polish for
#: Czech, Ukrainian for Russian, ...) and are then analysed plainly.
DETECTED_LANGUAGES = (
    "en no nn sv da de fr es pt it nl fi ru zh ja ko "
    "pl cs sk uk tr el hu ro ar he fa hi is et lv lt id vi"
).split()
#: The first characters of a document that detection reads (its time grows
#: with them: about 0.25 ms here).
DETECTION_CHARS = 600
#: Fewer letters than this is too little text to tell a language by. A CJK
#: character, about a word in itself, counts as ``CJK_LETTER_WEIGHT``.
MIN_DETECTION_LETTERS = 20
CJK_LETTER_WEIGHT = 3
#: Below this probability (among ``DETECTED_LANGUAGES``) the language is left unknown.
MIN_CONFIDENCE = 0.5

# Han (with its extensions and compatibility forms), Hiragana, Katakana (and
# its half-width forms), Hangul syllables and jamo, and the marks that stand
# inside such runs (々, 〆, the long vowel mark ー is in the Katakana block).
_CJK_CLASS = (
    "\u1100-\u11ff\u3005-\u3007\u3041-\u309f\u30a0-\u30ff\u3130-\u318f\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0002fa1f"
)
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")


def analysis_key(language: str | None) -> str:
    """The analysis for a document in ``language`` (a tag such as ``nb-NO``, or None)."""
    if not language:
        return DEFAULT_ANALYSIS
    primary = language.split("-", 1)[0].lower()
    primary = _ALIASES.get(primary, primary)
    return primary if primary in ANALYSES else PLAIN_ANALYSIS


# A search for one range is ten times faster than for the list above: these
# two hold every CJK character (and a few others), so most texts need no more.
_CJK_HINTS = (re.compile("[\u2e80-\U0002fa1f]"), re.compile("[\u1100-\u11ff]"))


def has_cjk(text: str) -> bool:
    if text.isascii() or not any(hint.search(text) for hint in _CJK_HINTS):
        return False
    return _CJK_RUN.search(text) is not None


def weighted_length(text: str) -> int:
    """``len(text)``, with each CJK character counted as ``CJK_LETTER_WEIGHT``.

    A CJK character carries about a word, so a paragraph of 40 of them says
    what one of some 120 letters and spaces says: measured so, a length means
    as much text in every script.
    """
    if not has_cjk(text):
        return len(text)
    return len(text) + (CJK_LETTER_WEIGHT - 1) * sum(map(len, _CJK_RUN.findall(text)))


def cjk_bigrams(text: str) -> str:
    """``text`` with each run of CJK characters written as its overlapping bigrams.

    ``"中国宇航员"`` → ``" 中国 国宇 宇航 航员 "``; a single character stays as
    it is. Everything else is left alone, so the text is unchanged when it
    holds no such run.
    """
    if not has_cjk(text):
        return text
    return _CJK_RUN.sub(_bigrams, text)


def _bigrams(run: re.Match[str]) -> str:
    characters = run.group()
    if len(characters) < 2:
        return f" {characters} "
    pairs = (characters[start : start + 2] for start in range(len(characters) - 1))
    return f" {' '.join(pairs)} "


def cjk_bigrams_with_offsets(text: str) -> tuple[str, list[int] | None]:
    """``cjk_bigrams(text)``, and where each of its characters comes from in ``text``.

    The second item maps every character of the result to its index in
    ``text`` (-1 for a space put between bigrams); it is None when the text
    holds no CJK run, and the result is ``text`` itself.
    """
    if not has_cjk(text):
        return text, None
    pieces: list[str] = []
    origins: list[int] = []
    at = 0
    for run in _CJK_RUN.finditer(text):
        pieces.append(text[at : run.start()])
        origins.extend(range(at, run.start()))
        start = run.start()
        length = run.end() - start
        pairs = (
            [(start, start + 1)]
            if length < 2
            else [(index, index + 2) for index in range(start, run.end() - 1)]
        )
        for pair_start, pair_end in pairs:
            pieces.append(" " + text[pair_start:pair_end])
            origins.append(-1)
            origins.extend(range(pair_start, pair_end))
        pieces.append(" ")
        origins.append(-1)
        at = run.end()
    pieces.append(text[at:])
    origins.extend(range(at, len(text)))
    return "".join(pieces), origins


def document_language(declared: str | None, texts: list[str]) -> str | None:
    """The language stored for a document: the declared one, else the one detected on its text."""
    if declared:
        return declared
    sample = []
    length = 0
    for text in texts:
        sample.append(text)
        length += len(text)
        if length >= DETECTION_CHARS:
            break
    return detect_language("\n".join(sample)[:DETECTION_CHARS])


def detect_language(text: str) -> str | None:
    """The language ``text`` is written in (``en``, ``no``, ``nn``, ``zh``, ...), or None.

    None when the text holds fewer than ``MIN_DETECTION_LETTERS`` letters, or
    when no language of ``DETECTED_LANGUAGES`` reaches ``MIN_CONFIDENCE``: a
    document with no language is analysed as English (``analysis_key``), as
    every document was before, and a query finds it in every analysis anyway.
    """
    sample = text[:DETECTION_CHARS]
    words = _WORDS.findall(sample)
    letters = sum(map(len, words))
    if has_cjk(sample):
        letters += (CJK_LETTER_WEIGHT - 1) * sum(map(len, _CJK_RUN.findall(sample)))
    if letters < MIN_DETECTION_LETTERS:
        return None
    if _looks_english(words):
        return "en"
    language, confidence = _identifier().classify(sample)
    if confidence < MIN_CONFIDENCE:
        return None
    return str(language)


#: English function words (Lucene's stop words). A fifth or more of the
#: words of nearly every English text are these (95% of SciFact's abstracts,
#: 90% of the English trafilatura pages); under a sixth of any other
#: language's (the most, 17%, a German page quoting English).
_ENGLISH_FUNCTION_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with".split()
)
_WORDS = re.compile(r"[^\W\d_]+")


def _looks_english(words: list[str]) -> bool:
    """Whether ``words`` are plainly English: 40 or more, a fifth of them function words.

    py3langid walks the text a byte at a time in Python (about 0.3 ms for
    600 characters, more than parsing a short document takes): this look,
    ten times cheaper, spares it the commonest case.
    """
    if len(words) < 40:
        return False
    function_words = sum(1 for word in words if word.lower() in _ENGLISH_FUNCTION_WORDS)
    return function_words >= len(words) / 5


@cache
def _identifier() -> Any:
    from researchstore.text.language_model import load_identifier

    return load_identifier(DETECTED_LANGUAGES)
