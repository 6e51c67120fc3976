"""Chunking: slices of the document text, about the target size, never empty."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from researchstore.ingest.chunking import chunk_blocks, chunk_segments
from researchstore.ingest.model import Block, Segment
from researchstore.text.analysis import count_tokens

WORDS = st.sampled_from(
    "hive queen drone varroa mite nectar river oxygen nitrate sample method "
    "result lecture student data. Spring! winter? état café 2026 x_y C++".split()
)
SENTENCE = st.lists(WORDS, min_size=1, max_size=40).map(" ".join)
PARAGRAPH = st.lists(SENTENCE, min_size=1, max_size=30).map(". ".join)


def _blocks(texts: list[str]) -> list[Block]:
    return [Block(text) for text in texts]


def test_small_blocks_share_a_chunk() -> None:
    text, chunks = chunk_blocks(_blocks(["One short paragraph.", "Another one."]))
    assert text == "One short paragraph.\n\nAnother one."
    assert len(chunks) == 1
    assert chunks[0].text == text
    assert chunks[0].token_count == count_tokens(text) == 5


def test_blocks_split_at_block_boundaries_near_the_target() -> None:
    paragraph = " ".join(["word"] * 100)
    _, chunks = chunk_blocks(_blocks([paragraph] * 5), target_tokens=256)
    assert [chunk.token_count for chunk in chunks] == [200, 200, 100]
    assert all(chunk.text.startswith("word") and chunk.text.endswith("word") for chunk in chunks)


def test_an_oversized_block_splits_at_sentences() -> None:
    sentence = "The hive was inspected in the early morning by two students."
    # 6 index tokens a sentence (stop words are not counted), 360 in all.
    block = " ".join([sentence] * 60)
    _, chunks = chunk_blocks(_blocks([block]), target_tokens=100)
    assert len(chunks) == 4
    for chunk in chunks:
        assert chunk.text.startswith("The hive") and chunk.text.endswith("students.")
        assert chunk.token_count <= 100


def test_a_sentence_without_end_splits_at_words() -> None:
    block = " ".join(f"w{n}" for n in range(1000))
    _, chunks = chunk_blocks(_blocks([block]), target_tokens=64)
    assert all(chunk.token_count <= 64 for chunk in chunks)
    assert " ".join(chunk.text for chunk in chunks) == block


def test_a_heading_starts_a_new_chunk_and_names_it() -> None:
    intro = " ".join(["intro"] * 80)
    body = " ".join(["body"] * 40)
    blocks = [
        Block("Report", kind="heading"),
        Block(intro, heading_path=("Report",)),
        Block("Methods", kind="heading", heading_path=("Report",)),
        Block(body, heading_path=("Report", "Methods")),
    ]
    _, chunks = chunk_blocks(blocks, target_tokens=256)
    assert [chunk.text.split("\n\n")[0] for chunk in chunks] == ["Report", "Methods"]
    assert chunks[0].heading_path == ("Report",)
    assert chunks[1].heading_path == ("Report", "Methods")


def test_a_heading_never_ends_a_chunk() -> None:
    blocks = [
        Block(" ".join(["alpha"] * 60)),
        Block("Next part", kind="heading"),
        Block(" ".join(["beta"] * 250), heading_path=("Next part",)),
    ]
    _, chunks = chunk_blocks(blocks, target_tokens=256)
    assert not chunks[0].text.endswith("Next part")
    assert chunks[1].text.startswith("Next part")


def test_captions_keep_their_time_span() -> None:
    segments = [Segment(n * 1000, n * 1000 + 900, f"line number {n}") for n in range(100)]
    text, chunks = chunk_segments(segments, target_tokens=30)
    assert text.split("\n") == [segment.text for segment in segments]
    assert chunks[0].start_ms == 0
    assert chunks[-1].end_ms == 99_900
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert before.end_ms is not None and after.start_ms is not None
        assert before.end_ms <= after.start_ms


def test_nothing_readable_gives_no_chunk() -> None:
    assert chunk_blocks([])[1] == []
    assert chunk_blocks(_blocks(["   ", "\n"]))[1] == []
    assert chunk_segments([])[1] == []


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.lists(PARAGRAPH, min_size=1, max_size=12), st.integers(min_value=8, max_value=300))
def test_chunks_are_ordered_slices_that_cover_the_text(paragraphs: list[str], target: int) -> None:
    text, chunks = chunk_blocks(_blocks(paragraphs), target_tokens=target)
    assert [chunk.position for chunk in chunks] == list(range(len(chunks)))
    previous_end = 0
    for chunk in chunks:
        assert chunk.text.strip(), "never an empty chunk"
        assert text[chunk.char_start : chunk.char_end] == chunk.text
        assert not text[previous_end : chunk.char_start].strip(), "nothing lost between chunks"
        assert chunk.token_count == count_tokens(chunk.text)
        previous_end = chunk.char_end
    assert not text[previous_end:].strip()
    # The text survives chunking word for word.
    assert " ".join(" ".join(chunk.text for chunk in chunks).split()) == " ".join(text.split())


@settings(max_examples=40, deadline=None)
@given(st.lists(SENTENCE, min_size=1, max_size=80), st.integers(min_value=4, max_value=200))
def test_caption_chunks_are_ordered_in_time(lines: list[str], target: int) -> None:
    segments = [Segment(n * 2000, n * 2000 + 1500, line) for n, line in enumerate(lines)]
    _, chunks = chunk_segments(segments, target_tokens=target)
    assert sum(chunk.text.count("\n") + 1 for chunk in chunks) == len(lines)
    for chunk in chunks:
        assert chunk.start_ms is not None and chunk.end_ms is not None
        assert chunk.start_ms < chunk.end_ms


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400) | st.lists(WORDS, max_size=80).map(" ".join))
def test_token_counts_are_the_tokens_the_index_stores(text: str) -> None:
    from researchstore.text.analysis import analyze

    assert count_tokens(text) == len(analyze(text))


_ASCII = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?'\"-_\n\t"
#: Stop words in any case, words at the index's length limit (39 letters
#: kept, 40 dropped) and words that only start as stop words do.
_EDGES = ["The", "AND", "is", "iT", "x" * 39, "Y" * 40, "thee", "andes", "a1", "the9"]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_EDGES) | st.text(_ASCII, max_size=45), max_size=60).map(" ".join))
def test_an_ascii_text_is_counted_as_tantivy_counts_it(text: str) -> None:
    """``count_tokens`` counts an ASCII text in C where the speedup is built: the
    same count as Tantivy's analyzer gives."""
    from researchstore.text import analysis
    from researchstore.text.analysis import analyze

    if analysis.SPEEDUPS is None:
        pytest.skip("the C speedup is not built")
    assert analysis.SPEEDUPS.count_tokens(text, analysis.STOPWORD_SET) == len(analyze(text))
    # Not ASCII: counted in Python.
    assert analysis.SPEEDUPS.count_tokens(text + "é", analysis.STOPWORD_SET) is None
