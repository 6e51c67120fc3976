"""Properties of navigation over stores built from generated sources.

Each example writes a small source of ``.txt`` reports, ingests it into a
fresh store with a small chunk size (so documents have many chunks), and
checks that positions, walks, windows and texts agree with each other.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from researchstore import Store
from researchstore.text.analysis import count_tokens

# Every example builds a store: the whole module runs with the slow tests.
pytestmark = pytest.mark.slow

SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

WORD = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzæøåéü0123456789", min_size=1, max_size=10
).flatmap(
    lambda word: st.sampled_from(["", ".", ",", "!", "?", ";", "'s", "-x"]).map(
        lambda tail: word + tail
    )
)
PARAGRAPH = st.lists(WORD, min_size=1, max_size=60).map(" ".join)
FILE_TEXT = st.lists(PARAGRAPH, min_size=1, max_size=14).map("\n\n".join)

#: ``{report key: {file name: text}}``; a key ending in ``.txt`` is a single-file report.
CORPUS = st.dictionaries(
    keys=st.sampled_from(["a", "b/c", "b/d", "e/f/g", "solo.txt", "b/solo.txt"]),
    values=st.dictionaries(
        keys=st.sampled_from(["one.txt", "two.txt", "three.txt"]),
        values=FILE_TEXT,
        min_size=1,
        max_size=3,
    ),
    min_size=1,
    max_size=3,
)
CHUNK_TOKENS = st.sampled_from([8, 16, 32, 64])


def write_corpus(root: Path, corpus: dict[str, dict[str, str]]) -> dict[str, str]:
    """Write the source; return ``{document path: its text}``."""
    written: dict[str, str] = {}
    for key, files in corpus.items():
        if key.endswith(".txt"):
            text = next(iter(files.values()))
            (root / key).parent.mkdir(parents=True, exist_ok=True)
            (root / key).write_text(text)
            written[key] = text
            continue
        folder = root / key
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.json").write_text(
            json.dumps({"title": f"Report {key}", "date": "2026-01-01", "tags": {}})
        )
        for name, text in files.items():
            (folder / name).write_text(text)
            written[f"{key}/{name}"] = text
    return written


@contextmanager
def built(
    corpus: dict[str, dict[str, str]], chunk_tokens: int
) -> Iterator[tuple[Store, dict[str, str]]]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "source"
        root.mkdir()
        written = write_corpus(root, corpus)
        with Store(Path(folder) / "r.db", progress=False, chunk_tokens=chunk_tokens) as store:
            summary = store.ingest(root, name="generated")
            assert summary.failed == 0, summary.failures
            yield store, written


def ok(envelope: dict[str, Any]) -> Any:
    assert set(envelope) == {"result"}, envelope
    return envelope["result"]


def documents(store: Store) -> list[tuple[str, str]]:
    """Every stored document as ``(document_id, path)``."""
    return store._conn.execute("SELECT document_id, path FROM documents ORDER BY path").fetchall()


def skeleton(store: Store, document_id: str) -> list[dict[str, Any]]:
    document = ok(store.call("get_document", {"id": document_id}))["document"]
    assert document is not None
    return document["chunks"]


def ids(chunks: list[dict[str, Any]]) -> list[str]:
    return [chunk["chunk_id"] for chunk in chunks]


@pytest.mark.parametrize("with_failures", [False, True], ids=["all-ok", "some-embed-failed"])
@SETTINGS
@given(corpus=CORPUS, chunk_tokens=CHUNK_TOKENS, count=st.integers(1, 6), data=st.data())
def test_walks_agree_with_the_document_skeleton(
    with_failures: bool,
    corpus: dict[str, dict[str, str]],
    chunk_tokens: int,
    count: int,
    data: st.DataObject,
) -> None:
    with built(corpus, chunk_tokens) as (store, _):
        all_ids = [row[0] for row in store._conn.execute("SELECT chunk_id FROM chunks")]
        failed: set[str] = set()
        if with_failures and all_ids:
            failed = set(data.draw(st.sets(st.sampled_from(all_ids), max_size=len(all_ids))))
            with store.transaction() as conn:
                conn.executemany(
                    "UPDATE chunks SET status = 'embed_failed' WHERE chunk_id = ?",
                    [(chunk_id,) for chunk_id in failed],
                )
        for document_id, _path in documents(store):
            chunks = skeleton(store, document_id)
            assert [chunk["position"] for chunk in chunks] == list(range(len(chunks)))
            assert {c["chunk_id"] for c in chunks if c["status"] == "embed_failed"} == (
                failed & set(ids(chunks))
            )
            for index, chunk in enumerate(chunks):
                chunk_id = chunk["chunk_id"]
                after = [c for c in chunks[index + 1 :] if c["status"] == "ok"]
                before = [c for c in chunks[:index] if c["status"] == "ok"]
                walked = ok(store.call("get_chunk_next", {"id": chunk_id, "count": count}))
                assert walked["found"] is True
                assert ids(walked["chunks"]) == ids(after[:count])
                walked = ok(store.call("get_chunk_prev", {"id": chunk_id, "count": count}))
                assert ids(walked["chunks"]) == ids(before[-count:] if before else [])
                around = ok(store.call("get_chunk_neighbors", {"id": chunk_id, "count": count}))
                assert around["chunk"]["chunk_id"] == chunk_id
                assert around["chunk"]["position"] == index
                assert ids(around["prev"]) == ids(before[-count:] if before else [])
                assert ids(around["next"]) == ids(after[:count])
                for walked_chunk in around["prev"] + around["next"]:
                    assert walked_chunk["status"] == "ok"
                    assert walked_chunk["document_id"] == document_id
        if failed:
            # Search never returns an embed_failed chunk, whatever it matches.
            some_failed = sorted(failed)[0]
            text = ok(store.call("get_chunks", {"ids": [some_failed]}))["chunks"][0]["text"]
            query = " ".join(text.split()[:20])
            hits = ok(store.call("research_chunk_search", {"query": query, "limit": 50}))["hits"]
            assert not failed & set(ids(hits))


@SETTINGS
@given(corpus=CORPUS, chunk_tokens=CHUNK_TOKENS, limit=st.integers(1, 7))
def test_document_windows_concatenate_to_the_skeleton(
    corpus: dict[str, dict[str, str]], chunk_tokens: int, limit: int
) -> None:
    with built(corpus, chunk_tokens) as (store, _):
        for document_id, _path in documents(store):
            chunks = skeleton(store, document_id)
            collected: list[dict[str, Any]] = []
            start = 0
            while True:
                window = ok(
                    store.call(
                        "get_document_chunks", {"id": document_id, "from": start, "limit": limit}
                    )
                )
                assert window["total_chunks"] == len(chunks)
                assert len(window["chunks"]) <= limit
                if not window["chunks"]:
                    break
                assert [c["position"] for c in window["chunks"]] == list(
                    range(start, start + len(window["chunks"]))
                )
                collected.extend(window["chunks"])
                start += limit
            assert start >= len(chunks)
            assert ids(collected) == ids(chunks)
            assert [c["token_count"] for c in collected] == [c["token_count"] for c in chunks]


def read_all(store: Store, document_id: str) -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = []
    while True:
        window = ok(
            store.call(
                "get_document_chunks", {"id": document_id, "from": len(chunks), "limit": 100}
            )
        )
        if not window["chunks"]:
            return chunks
        chunks.extend(window["chunks"])


@SETTINGS
@given(corpus=CORPUS, chunk_tokens=CHUNK_TOKENS)
def test_text_survives_ingest(corpus: dict[str, dict[str, str]], chunk_tokens: int) -> None:
    with built(corpus, chunk_tokens) as (store, written):
        stored = {path: document_id for document_id, path in documents(store)}
        assert set(stored) == set(written)
        for path, text in written.items():
            chunks = read_all(store, stored[path])
            assert chunks, path
            joined = " ".join(chunk["text"] for chunk in chunks)
            assert joined.split() == text.split(), path
            for chunk in chunks:
                assert chunk["text"].strip(), "never an empty chunk"
                assert chunk["token_count"] == count_tokens(chunk["text"])
            document = ok(store.call("get_document", {"id": stored[path]}))["document"]
            assert document["token_count"] == sum(chunk["token_count"] for chunk in chunks)
            assert_parents(store, chunks[0]["chunk_id"], stored[path], path)


def assert_parents(store: Store, chunk_id: str, document_id: str, path: str) -> None:
    """document → report → the folders above the report, innermost first → source version."""
    chain = ok(store.call("get_chunk_parents", {"id": chunk_id}))["parents"]
    parts = path.split("/")
    report_key = path if path.endswith("solo.txt") else "/".join(parts[:-1])
    folders = report_key.split("/")[:-1]
    assert [node["kind"] for node in chain] == (
        ["document", "report"] + ["folder"] * len(folders) + ["source_version"]
    )
    assert chain[0]["document_id"] == document_id and chain[0]["name"] == parts[-1]
    assert chain[1]["name"] == report_key.split("/")[-1]
    assert [node["name"] for node in chain[2:-1]] == list(reversed(folders))
    assert chain[-1]["name"] == "generated"
    assert all(node["id"] and node["name"] for node in chain)


def timestamp(ms: int, *, comma: bool) -> str:
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{',' if comma else '.'}{millis:03d}"


CUE_WORDS = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=9), min_size=0, max_size=12
)
CUES = st.lists(
    st.tuples(st.integers(0, 5_000), st.integers(1, 8_000), CUE_WORDS), min_size=1, max_size=40
)


def caption_file(cues: list[tuple[int, int, list[str]]], *, srt: bool) -> tuple[str, list[Any]]:
    """A caption file and its cues as ``(start_ms, end_ms, text)``; starts never go back."""
    lines = [] if srt else ["WEBVTT", ""]
    expected = []
    start = 0
    for number, (gap, duration, words) in enumerate(cues, 1):
        start += gap
        # Unique first and last words: no cue repeats the one before (no rolling repeat).
        text = " ".join([f"q{number}start", *words, f"q{number}end"])
        if srt:
            lines.append(str(number))
        lines.append(f"{timestamp(start, comma=srt)} --> {timestamp(start + duration, comma=srt)}")
        lines.extend([text, ""])
        expected.append((start, start + duration, text))
    return "\n".join(lines), expected


@SETTINGS
@given(cues=CUES, srt=st.booleans(), chunk_tokens=CHUNK_TOKENS)
def test_caption_chunks_keep_their_times_and_text(
    cues: list[tuple[int, int, list[str]]], srt: bool, chunk_tokens: int
) -> None:
    content, expected = caption_file(cues, srt=srt)
    name = "talk.srt" if srt else "talk.vtt"
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "source"
        root.mkdir()
        (root / name).write_text(content)
        with Store(Path(folder) / "r.db", progress=False, chunk_tokens=chunk_tokens) as store:
            summary = store.ingest(root, name="captions")
            assert summary.skipped == [], summary.skipped
            ((document_id, _),) = documents(store)
            chunks = read_all(store, document_id)
            assert [chunk["position"] for chunk in chunks] == list(range(len(chunks)))
            joined = " ".join(chunk["text"] for chunk in chunks)
            assert joined.split() == " ".join(text for _, _, text in expected).split()
            for chunk in chunks:
                assert chunk["start_ms"] is not None and chunk["end_ms"] is not None
                assert chunk["start_ms"] <= chunk["end_ms"]
            starts = [chunk["start_ms"] for chunk in chunks]
            assert starts == sorted(starts)
            assert starts[0] == expected[0][0]
            assert max(chunk["end_ms"] for chunk in chunks) == max(end for _, end, _ in expected)
            # Each chunk spans exactly the cues whose text it holds.
            for chunk in chunks:
                held = [cue for cue in expected if cue[2].split()[0] in chunk["text"].split()]
                assert chunk["start_ms"] == min(start for start, _, _ in held)
                assert chunk["end_ms"] == max(end for _, end, _ in held)
