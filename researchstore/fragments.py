"""Snippets: the words a query matched in a text, cut into a short HTML fragment.

The word index (``index.py``) finds which words of a hit's text match, as
character spans; this module chooses the window to show and marks them.
Everything but the ``<b>`` marks is escaped.
"""

from __future__ import annotations

from bisect import bisect_left


def escape_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def original_spans(spans: list[tuple[int, int]], origins: list[int]) -> list[tuple[int, int]]:
    """Spans in a text's bigram form as spans of the text; overlapping bigrams become one."""
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        placed = [origin for origin in origins[start:end] if origin >= 0]
        if not placed:
            continue
        span = (min(placed), max(placed) + 1)
        if merged and span[0] <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], span[1]))
        else:
            merged.append(span)
    return merged


def fragment_html(
    text: str,
    spans: list[tuple[int, int]],
    max_chars: int,
    words: list[str] | None = None,
) -> str:
    """About ``max_chars`` of ``text``, HTML-escaped, with the words at ``spans`` in ``<b>``.

    The window kept is the one (starting at a match) holding the most
    distinct matched words, with some text before its first match.
    ``words``: the matched words, lower-cased, when the caller has them.
    """
    if words is None:
        words = [text[start:end].lower() for start, end in spans]
    best_start, _ = _best_window(words, spans, max_chars)
    first = bisect_left(spans, (best_start, -1))
    last_end = best_start
    for start, stop in spans[first:]:
        if start > best_start + max_chars:
            break
        if stop <= best_start + max_chars:
            last_end = max(last_end, stop)
    # Some context before the first match: a quarter of the room the matches leave.
    lead = max(0, max_chars - (last_end - best_start)) // 4
    begin = max(0, min(best_start - lead, len(text) - max_chars))
    begin = word_start(text, begin)
    end = min(len(text), max(last_end, begin + max_chars))
    if end < len(text):
        end = max(last_end, word_start(text, end))
    shown = [span for span in spans[bisect_left(spans, (begin, -1)) :] if span[1] <= end]
    window = text[begin:end]
    if _OPEN in window or _CLOSE in window:  # never in text that means anything
        return _marked_piecewise(text, shown, begin, end)
    pieces: list[str] = []
    at = begin
    for start, stop in shown:
        pieces += (text[at:start], _OPEN, text[start:stop], _CLOSE)
        at = stop
    pieces.append(text[at:end])
    marked = escape_html("".join(pieces))
    return marked.replace(_OPEN, "<b>").replace(_CLOSE, "</b>").strip()


#: Stand for ``<b>`` and ``</b>`` while a window is escaped in one go.
_OPEN, _CLOSE = "\x02", "\x03"


def _marked_piecewise(text: str, spans: list[tuple[int, int]], begin: int, end: int) -> str:
    pieces, at = [], begin
    for start, stop in spans:
        pieces.append(escape_html(text[at:start]))
        pieces.append(f"<b>{escape_html(text[start:stop])}</b>")
        at = stop
    pieces.append(escape_html(text[at:end]))
    return "".join(pieces).strip()


def word_start(text: str, at: int) -> int:
    """``at``, moved back to the start of the word it falls in (by at most 20 characters)."""
    floor = max(0, at - 20)
    while at > floor and text[at - 1].isalnum() and at < len(text) and text[at].isalnum():
        at -= 1
    return at


def _best_window(words: list[str], spans: list[tuple[int, int]], max_chars: int) -> tuple[int, int]:
    """The start of the first ``max_chars`` window (at a span's start) holding the
    most distinct matched ``words`` (one for each of ``spans``), and how many:
    one pass over ``spans`` (in order), which stops at a window holding every
    word matched."""
    every = len(set(words))
    if spans[-1][1] - spans[0][0] <= max_chars:
        return spans[0][0], every  # every match fits in the first window
    counts: dict[str, int] = {}
    best_start, best_count = spans[0][0], 0
    end, count = 0, len(spans)
    for first in range(count):
        start = spans[first][0]
        bound = start + max_chars
        if end < first:
            end = first
        while end < count and spans[end][1] <= bound:
            word = words[end]
            counts[word] = counts.get(word, 0) + 1
            end += 1
        if len(counts) > best_count:
            best_start, best_count = start, len(counts)
            if best_count == every:
                break
        if first < end:
            word = words[first]
            left = counts[word] - 1
            if left:
                counts[word] = left
            else:
                del counts[word]
    return best_start, best_count
