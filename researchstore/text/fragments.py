"""Snippets: the words a query matched in a text, cut into a short HTML fragment.

The word index (``index.py``) finds which words of a hit's text match, as
character spans; this module chooses the window to show and marks them.
Everything but the ``<b>`` marks is escaped.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right


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
    starts: list[int],
    ends: list[int],
    max_chars: int,
    words: list[str] | None = None,
) -> str:
    """About ``max_chars`` of ``text``, HTML-escaped, with the words matched in ``<b>``.

    The words matched stand at ``text[starts[k]:ends[k]]``, in order and
    apart. The window kept is the one (starting at a match) holding the most
    distinct matched words, with some text before its first match.
    ``words``: the matched words, lower-cased, when the caller has them.
    """
    if words is None:
        words = [text[start:end].lower() for start, end in zip(starts, ends, strict=True)]
    first = _best_window(words, starts, ends, max_chars)
    best_start = starts[first]
    # The matches are apart, so their ends ascend as their starts do: the
    # matches that end within the window are a run, found by bisection.
    last = bisect_right(ends, best_start + max_chars, first)
    last_end = ends[last - 1] if last > first else best_start
    # Some context before the first match: a quarter of the room the matches leave.
    lead = max(0, max_chars - (last_end - best_start)) // 4
    begin = max(0, min(best_start - lead, len(text) - max_chars))
    begin = word_start(text, begin)
    end = min(len(text), max(last_end, begin + max_chars))
    if end < len(text):
        end = max(last_end, word_start(text, end))
    shown = range(bisect_left(starts, begin), bisect_right(ends, end))
    window = text[begin:end]
    if _OPEN in window or _CLOSE in window:  # never in text that means anything
        return _marked_piecewise(text, [(starts[k], ends[k]) for k in shown], begin, end)
    pieces: list[str] = []
    at = begin
    for k in shown:
        start = starts[k]
        stop = ends[k]
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


def _best_window(words: list[str], starts: list[int], ends: list[int], max_chars: int) -> int:
    """Which match starts the first ``max_chars`` window (at a match's start)
    holding the most distinct matched ``words`` (one for each match); stops at
    a window holding every word matched."""
    if ends[-1] - starts[0] <= max_chars:
        return 0  # every match fits in the first window
    every = len(set(words))
    best_first, best_count = 0, 0
    matches = len(starts)
    for first, start in enumerate(starts):
        if matches - first <= best_count:
            break  # too few matches left to hold more words
        end = bisect_right(ends, start + max_chars, first)
        if end - first <= best_count:
            continue
        count = len(set(words[first:end]))
        if count > best_count:
            best_first, best_count = first, count
            if count == every:
                break
    return best_first
