"""Blocks and timed segments into chunks of about ``target_tokens`` tokens.

A chunk is always a slice of its document's text (``document_text``): blocks
are joined with a blank line, caption segments with a newline, and a chunk
runs from the start of its first piece to the end of its last. Pieces are
whole blocks where they fit, else sentences, else runs of words; a heading
starts a new chunk unless the chunk so far is small. Token counts come from
the index's own analyzer, and add up because no token spans whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from researchstore.index import count_tokens
from researchstore.ingest.model import Block, ChunkDraft, Segment

DEFAULT_TARGET_TOKENS = 256
BLOCK_SEPARATOR = "\n\n"
SEGMENT_SEPARATOR = "\n"

# A sentence ends at . ! ? (optionally followed by closing quotes/brackets)
# and whitespace; the next one starts after that whitespace.
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"'”’)\]]*\s+")
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
    pieces: list[_Piece] = []
    offset = 0
    for block in blocks:
        start, end = offset, offset + len(block.text)
        offset = end + len(BLOCK_SEPARATOR)
        if not block.text.strip():
            continue
        path = block.heading_path
        if block.kind == "heading":
            pieces.append(_Piece(start, end, counter(block.text), path, is_heading=True))
            continue
        tokens = counter(block.text)
        if tokens <= target_tokens:
            pieces.append(_Piece(start, end, tokens, path))
        else:
            pieces.extend(_split_long(text, start, end, path, target_tokens, counter))
    return text, _assemble(text, pieces, target_tokens)


def chunk_segments(
    segments: Sequence[Segment],
    *,
    target_tokens: int = DEFAULT_TARGET_TOKENS,
    counter: Callable[[str], int] = count_tokens,
) -> tuple[str, list[ChunkDraft]]:
    """Return the transcript text and its chunks, each keeping its time span."""
    text = document_text_of_segments(segments)
    pieces: list[_Piece] = []
    offset = 0
    for segment in segments:
        start, end = offset, offset + len(segment.text)
        offset = end + len(SEGMENT_SEPARATOR)
        if not segment.text.strip():
            continue
        pieces.append(
            _Piece(
                start,
                end,
                counter(segment.text),
                (),
                start_ms=segment.start_ms,
                end_ms=segment.end_ms,
            )
        )
    return text, _assemble(text, pieces, target_tokens)


def _split_long(
    text: str,
    start: int,
    end: int,
    path: tuple[str, ...],
    target_tokens: int,
    counter: Callable[[str], int],
) -> list[_Piece]:
    """Split one oversized block at sentences, and oversized sentences at words."""
    pieces: list[_Piece] = []
    sentence_start = start
    bounds = [(m.start(), m.end()) for m in _SENTENCE_END.finditer(text, start, end)]
    bounds.append((end, end))
    for stop, next_start in bounds:
        if stop > sentence_start:
            tokens = counter(text[sentence_start:stop])
            if tokens <= target_tokens:
                pieces.append(_Piece(sentence_start, stop, tokens, path))
            else:
                pieces.extend(
                    _split_words(text, sentence_start, stop, path, target_tokens, counter)
                )
        sentence_start = next_start
    return pieces


def _split_words(
    text: str,
    start: int,
    end: int,
    path: tuple[str, ...],
    target_tokens: int,
    counter: Callable[[str], int],
) -> list[_Piece]:
    words = [(m.start(), m.end()) for m in _WORD.finditer(text, start, end)]
    pieces = []
    # A word yields at least one token most of the time; windows of
    # target_tokens/2 words keep each piece under the target in practice.
    step = max(1, target_tokens // 2)
    for index in range(0, len(words), step):
        window = words[index : index + step]
        piece_start, piece_end = window[0][0], window[-1][1]
        pieces.append(_Piece(piece_start, piece_end, counter(text[piece_start:piece_end]), path))
    return pieces


def _assemble(text: str, pieces: list[_Piece], target_tokens: int) -> list[ChunkDraft]:
    chunks: list[ChunkDraft] = []
    group: list[_Piece] = []
    group_tokens = 0
    small = target_tokens // 4

    def flush() -> None:
        nonlocal group, group_tokens
        if not group:
            return
        first = group[0]
        path = first.heading_path
        if first.is_heading:
            path = (*path, text[first.start : first.end].strip())
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

    for piece in pieces:
        heading_break = piece.is_heading and group_tokens >= small and not group[-1].is_heading
        if group and (group_tokens + piece.tokens > target_tokens or heading_break):
            # A heading belongs with what follows it, not at a chunk's end.
            carried: list[_Piece] = []
            while len(group) > 1 and group[-1].is_heading:
                carried.insert(0, group.pop())
            group_tokens -= sum(p.tokens for p in carried)
            flush()
            group = carried
            group_tokens = sum(p.tokens for p in carried)
        group.append(piece)
        group_tokens += piece.tokens
    flush()
    return chunks
