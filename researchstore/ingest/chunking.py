"""Blocks and timed segments into chunks of about ``target_tokens`` tokens.

A chunk is always a slice of its document's text (``document_text``): blocks
are joined with a blank line, caption segments with a newline, and a chunk
runs from the start of its first piece to the end of its last. Pieces are
whole blocks where they fit, else sentences, else runs of words; a heading
starts a new chunk unless the chunk so far is small. Token counts come from
the index's own analyzer, and add up because no token spans whitespace.

Tokens alone do not bound a chunk (a run of text without a space, or in a
script the analyzer skips, counts few tokens), so a chunk also holds at most
``max_chunk_chars(target_tokens)`` characters: a word longer than that is
cut at a character boundary. Heading paths are clipped the same way.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from researchstore.ingest.model import Block, ChunkDraft, Segment
from researchstore.text.analysis import count_tokens

DEFAULT_TARGET_TOKENS = 256
BLOCK_SEPARATOR = "\n\n"
SEGMENT_SEPARATOR = "\n"
#: The hard bound on a chunk's length, per target token: 4,096 characters at
#: the default target, about three times what English prose needs; never
#: below ``MIN_CHUNK_CHARS``, so a small target does not cut long words.
CHUNK_CHARS_PER_TOKEN = 16
MIN_CHUNK_CHARS = 1024
#: The longest heading a chunk's heading path repeats.
MAX_HEADING_CHARS = 300

# A sentence ends at . ! ? (optionally followed by closing quotes/brackets)
# and whitespace; the next one starts after that whitespace.
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"'”’)\]]*\s+")
#: Sentences are taken in runs of up to this many characters: a run whose
#: sentences all fit in a chunk is one piece, split at its sentences only
#: where a chunk ends inside it. A block of one-character sentences then
#: costs a step per run, not per sentence (far below ``MIN_CHUNK_CHARS``).
_RUN_CHARS = 128
#: The last sentence end within ``_RUN_CHARS`` (the one ``_SENTENCE_END``
#: finds there: its match at a place is the same, and none overlap).
_SENTENCE_RUN = re.compile(rf"(?s:.{{0,{_RUN_CHARS}}})({_SENTENCE_END.pattern})")
_WORD = re.compile(r"\S+")


@dataclass(slots=True)
class _Piece:
    start: int
    end: int
    tokens: int
    heading_path: tuple[str, ...]
    is_heading: bool = False
    start_ms: int | None = None
    end_ms: int | None = None
    #: A run of whole sentences, cut (``_halves``) where a chunk ends inside it.
    is_run: bool = False


def max_chunk_chars(target_tokens: int) -> int:
    """The most characters a chunk holds at ``target_tokens``, whatever its text."""
    return max(MIN_CHUNK_CHARS, CHUNK_CHARS_PER_TOKEN * target_tokens)


def document_text_of_blocks(blocks: Sequence[Block]) -> str:
    return BLOCK_SEPARATOR.join(block.text for block in blocks)


def document_text_of_segments(segments: Sequence[Segment]) -> str:
    return SEGMENT_SEPARATOR.join(segment.text for segment in segments)


def chunk_blocks(
    blocks: Sequence[Block],
    *,
    target_tokens: int = DEFAULT_TARGET_TOKENS,
    counter: Callable[[str], int] = count_tokens,
) -> tuple[str, list[ChunkDraft]]:
    """Return the document text and its chunks."""
    text = document_text_of_blocks(blocks)
    pieces = _block_pieces(text, blocks, target_tokens, counter)
    return text, _assemble(text, pieces, target_tokens, counter)


def _block_pieces(
    text: str, blocks: Sequence[Block], target_tokens: int, counter: Callable[[str], int]
) -> Iterator[_Piece]:
    """The pieces of ``blocks`` (joined in ``text``), one by one."""
    max_chars = max_chunk_chars(target_tokens)
    offset = 0
    for block in blocks:
        start, end = offset, offset + len(block.text)
        offset = end + len(BLOCK_SEPARATOR)
        if not block.text.strip():
            continue
        path = block.heading_path
        fits = end - start <= max_chars
        if block.kind == "heading" and fits:
            yield _Piece(start, end, counter(block.text), path, is_heading=True)
            continue
        tokens = counter(block.text) if fits else 0
        if fits and tokens <= target_tokens:
            yield _Piece(start, end, tokens, path)
        else:
            yield from _split_long(text, start, end, path, target_tokens, counter)


def chunk_segments(
    segments: Sequence[Segment],
    *,
    target_tokens: int = DEFAULT_TARGET_TOKENS,
    counter: Callable[[str], int] = count_tokens,
) -> tuple[str, list[ChunkDraft]]:
    """Return the transcript text and its chunks, each keeping its time span.

    A segment is never split for its tokens (a cue is said as one), only
    when it is longer than a chunk may be; its parts keep its times.
    """
    text = document_text_of_segments(segments)
    pieces = _segment_pieces(text, segments, target_tokens, counter)
    return text, _assemble(text, pieces, target_tokens, counter)


def _segment_pieces(
    text: str, segments: Sequence[Segment], target_tokens: int, counter: Callable[[str], int]
) -> Iterator[_Piece]:
    """The pieces of ``segments`` (joined in ``text``), one by one, with their times."""
    max_chars = max_chunk_chars(target_tokens)
    offset = 0
    for segment in segments:
        start, end = offset, offset + len(segment.text)
        offset = end + len(SEGMENT_SEPARATOR)
        if not segment.text.strip():
            continue
        if end - start <= max_chars:
            parts: Iterable[_Piece] = (_Piece(start, end, counter(segment.text), ()),)
        else:
            parts = _split_long(text, start, end, (), target_tokens, counter)
        for part in parts:
            part.start_ms, part.end_ms = segment.start_ms, segment.end_ms
            yield part


def _split_long(
    text: str,
    start: int,
    end: int,
    path: tuple[str, ...],
    target_tokens: int,
    counter: Callable[[str], int],
) -> Iterator[_Piece]:
    """Split one oversized block at sentences, and oversized sentences at words.

    One piece at a time, as the sentences are found, runs of short sentences
    as one piece (``_RUN_CHARS``): a block of a million one-character
    sentences is never held, nor counted, as a million objects.
    """
    max_chars = max_chunk_chars(target_tokens)
    position = start
    while position < end:
        run = _SENTENCE_RUN.match(text, position, end)
        if run is not None and (stop := run.start(1)) > position:
            tokens = counter(text[position:stop])
            if tokens <= target_tokens:
                yield _Piece(position, stop, tokens, path, is_run=True)
                position = run.end()
                continue
        found = _SENTENCE_END.search(text, position, end)
        stop, next_start = found.span() if found is not None else (end, end)
        if stop > position:
            fits = stop - position <= max_chars
            tokens = counter(text[position:stop]) if fits else 0
            if fits and tokens <= target_tokens:
                yield _Piece(position, stop, tokens, path)
            else:
                yield from _split_words(text, position, stop, path, target_tokens, counter)
        position = next_start


def _halves(text: str, run: _Piece, counter: Callable[[str], int]) -> list[_Piece]:
    """A run of sentences (``_Piece.is_run``) as two runs, cut at the sentence
    end nearest its middle; none when it is one sentence."""
    found = _SENTENCE_END.search(text, (run.start + run.end) // 2, run.end)
    found = found or _SENTENCE_END.search(text, run.start, run.end)
    if found is None:
        return []
    return [
        _Piece(
            start,
            stop,
            counter(text[start:stop]),
            run.heading_path,
            start_ms=run.start_ms,
            end_ms=run.end_ms,
            is_run=True,
        )
        for start, stop in ((run.start, found.start()), (found.end(), run.end))
    ]


def _split_words(
    text: str,
    start: int,
    end: int,
    path: tuple[str, ...],
    target_tokens: int,
    counter: Callable[[str], int],
) -> list[_Piece]:
    """Split at words, in windows of words and characters; cut a word too long for a chunk."""
    max_chars = max_chunk_chars(target_tokens)
    # A word yields at least one token most of the time; windows of
    # target_tokens/2 words keep each piece under the target in practice.
    step = max(1, target_tokens // 2)
    pieces: list[_Piece] = []
    window_start = window_end = -1
    words = 0

    def close() -> None:
        nonlocal window_start, words
        if words:
            piece_text = text[window_start:window_end]
            pieces.append(_Piece(window_start, window_end, counter(piece_text), path))
        window_start, words = -1, 0

    for match in _WORD.finditer(text, start, end):
        word_start, word_end = match.span()
        if word_end - word_start > max_chars:
            close()
            for cut_start, cut_end in _cuts(text, word_start, word_end, max_chars):
                pieces.append(_Piece(cut_start, cut_end, counter(text[cut_start:cut_end]), path))
            continue
        if words and (words >= step or word_end - window_start > max_chars):
            close()
        if not words:
            window_start = word_start
        window_end = word_end
        words += 1
    close()
    return pieces


def _cuts(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """``text[start:end]`` in runs of at most ``max_chars`` characters.

    A cut moves back over combining marks and joiners (a few at most), so
    an accent stays with its letter.
    """
    cuts = []
    while end - start > max_chars:
        cut = start + max_chars
        for _ in range(8):
            if not (unicodedata.combining(text[cut]) or text[cut] in _JOINERS):
                break
            cut -= 1
        cuts.append((start, cut))
        start = cut
    cuts.append((start, end))
    return cuts


_JOINERS = frozenset("\u200c\u200d\ufe0e\ufe0f")


def _clip(heading: str) -> str:
    if len(heading) <= MAX_HEADING_CHARS:
        return heading
    return heading[: MAX_HEADING_CHARS - 1] + "…"


def _assemble(
    text: str, pieces: Iterable[_Piece], target_tokens: int, counter: Callable[[str], int]
) -> list[ChunkDraft]:
    """Group ``pieces`` into chunks; only the chunk being filled is held.

    A run of sentences that fits whole goes in whole: none of its sentences
    would have ended the chunk. One that does not is cut in halves, and
    each half placed the same way, down to single sentences: the chunks are
    those of one piece per sentence.
    """
    chunks: list[ChunkDraft] = []
    group: list[_Piece] = []
    group_tokens = 0
    small = target_tokens // 4
    max_chars = max_chunk_chars(target_tokens)

    def flush() -> None:
        nonlocal group, group_tokens
        if not group:
            return
        first = group[0]
        path = first.heading_path
        if first.is_heading:
            path = (*path, text[first.start : first.end].strip())
        if any(len(heading) > MAX_HEADING_CHARS for heading in path):
            path = tuple(_clip(heading) for heading in path)
        starts = [piece.start_ms for piece in group if piece.start_ms is not None]
        ends = [piece.end_ms for piece in group if piece.end_ms is not None]
        chunks.append(
            ChunkDraft(
                position=len(chunks),
                text=text[first.start : group[-1].end],
                token_count=group_tokens,
                heading_path=path,
                start_ms=min(starts) if starts else None,
                end_ms=max(ends) if ends else None,
                char_start=first.start,
                char_end=group[-1].end,
            )
        )
        group = []
        group_tokens = 0

    def add(piece: _Piece) -> None:
        nonlocal group, group_tokens
        heading_break = piece.is_heading and group_tokens >= small and not group[-1].is_heading
        too_long = bool(group) and piece.end - group[0].start > max_chars
        if group and (group_tokens + piece.tokens > target_tokens or too_long or heading_break):
            # A heading belongs with what follows it, not at a chunk's end.
            carried: list[_Piece] = []
            while len(group) > 1 and group[-1].is_heading:
                carried.insert(0, group.pop())
            group_tokens -= sum(p.tokens for p in carried)
            flush()
            group = carried
            group_tokens = sum(p.tokens for p in carried)
            if group and piece.end - group[0].start > max_chars:
                flush()  # the length bound wins over keeping a heading with its text
        group.append(piece)
        group_tokens += piece.tokens

    for piece in pieces:
        pending = [piece]
        while pending:
            part = pending.pop()
            halves = (
                _halves(text, part, counter)
                if part.is_run
                and group
                and (
                    group_tokens + part.tokens > target_tokens
                    or part.end - group[0].start > max_chars
                )
                else []
            )
            if halves:
                pending.extend(reversed(halves))
            else:
                add(part)
    flush()
    return chunks
