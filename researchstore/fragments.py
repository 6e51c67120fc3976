"""Snippets: the words a query matched in a text, cut into a short HTML fragment.

The word index (``index.py``) finds which words of a hit's text match, as
character spans; this module chooses the window to show and marks them.
Everything but the ``<b>`` marks is escaped.
"""

from __future__ import annotations


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


def fragment_html(text: str, spans: list[tuple[int, int]], max_chars: int) -> str:
    """About ``max_chars`` of ``text``, HTML-escaped, with the words at ``spans`` in ``<b>``.

    The window kept is the one (starting at a match) holding the most
    distinct matched words, with some text before its first match.
    """
    best_start, best_count = spans[0][0], 0
    for start, _ in spans:
        inside = {text[s:e].lower() for s, e in spans if start <= s and e <= start + max_chars}
        if len(inside) > best_count:
            best_start, best_count = start, len(inside)
    last_end = max(e for s, e in spans if best_start <= s and e <= best_start + max_chars)
    # Some context before the first match: a quarter of the room the matches leave.
    lead = max(0, max_chars - (last_end - best_start)) // 4
    begin = max(0, min(best_start - lead, len(text) - max_chars))
    begin = word_start(text, begin)
    end = min(len(text), max(last_end, begin + max_chars))
    if end < len(text):
        end = max(last_end, word_start(text, end))
    pieces, at = [], begin
    for start, stop in spans:
        if start < begin or stop > end:
            continue
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
