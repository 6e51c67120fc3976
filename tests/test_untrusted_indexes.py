"""The index copies a store file carries are never trusted blindly.

A store file keeps copies of its indexes' files (``packing.py``), and a file
from elsewhere may carry any bytes there. A vector graph whose neighbour ids
were altered used to pass every check on opening and kill the first
semantic (or hybrid, the default) search with SIGSEGV; now a graph this
machine did not build is never read, but rebuilt from the vectors in SQLite.
Altered Tantivy files give a clear error or a rebuild, never a crash.

Every search runs in a child process (``programs/search_store.py``), so a
crash is a negative exit status, not the end of the test run.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import struct
import subprocess
import zlib
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from helpers import HashingEmbedder, long_text, program, rewrite, write_report

from researchstore import Store

QUERY = "colony hive varroa"
#: Out of range for any store here: a neighbour id no node has.
FAR_ID = 1_000_000

Alteration = Callable[[bytearray], None]


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, dict[str, list[str]]]:
    """A store with vectors, and its answers in each mode."""
    source = tmp_path / "source"
    for number in range(6):
        write_report(
            source,
            f"r{number}",
            title=f"Colony notes {number}",
            date="2026-03-01",
            tags={"season": "spring"},
            files={"notes.txt": long_text(6, seed=number)},
        )
    db = tmp_path / "a" / "r.db"
    with Store(db, progress=False, embedder=HashingEmbedder()) as store:
        store.ingest(source, name="s")
        store.embed()
        expected = {
            mode: [hit["chunk_id"] for hit in store.search(QUERY, limit=10, mode=mode)]
            for mode in ("semantic", "hybrid", "keyword")
        }
    assert all(expected.values())
    return db, expected


def _far_ids_at_the_end(data: bytearray) -> None:
    """The last 100 bytes, where the graph's last nodes list their neighbours."""
    data[-100:] = struct.pack("<I", FAR_ID) * 25


def _far_ids_inside(data: bytearray) -> None:
    """20 neighbour-sized words 2,000 bytes before the end."""
    start = len(data) - 2000
    data[start : start + 80] = struct.pack("<I", FAR_ID) * 20


def _random_bytes(data: bytearray) -> None:
    """Random bytes over the second half of the file."""
    chance = random.Random(7)
    for position in range(len(data) // 2, len(data)):
        data[position] = chance.randrange(256)


def _alter_packed(db: Path, index_name: str, suffix: str, alter: Alteration) -> None:
    """Alter the one file of ``index_name`` whose name ends with ``suffix``, as packed in ``db``."""
    with closing(sqlite3.connect(db)) as conn, conn:
        [(name, data)] = conn.execute(
            "SELECT name, data FROM index_files WHERE index_name = ? AND name LIKE ? AND part = 0",
            (index_name, f"%{suffix}"),
        ).fetchall()
        altered = bytearray(data)
        alter(altered)
        assert altered != data
        conn.execute(
            "UPDATE index_files SET data = ? WHERE index_name = ? AND name = ? AND part = 0",
            (bytes(altered), index_name, name),
        )


def _copy_alone(db: Path, to: Path) -> Path:
    """The `.db` file alone, as a sandbox receives it."""
    to.mkdir(parents=True)
    copy = to / db.name
    shutil.copyfile(db, copy)
    return copy


def _search_in_child(db: Path, *, read_only: bool, cache: Path | None = None) -> dict[str, Any]:
    """What ``programs/search_store.py`` answers; ``cache``: another machine's cache directory."""
    env = dict(os.environ)
    if cache is not None:
        env["RESEARCHSTORE_CACHE_DIR"] = str(cache)
    child = subprocess.run(
        [*program("search_store"), str(db), QUERY, *(["--read-only"] if read_only else [])],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert child.returncode == 0, f"exit {child.returncode}: {child.stderr[-2000:]}"
    answer: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    return answer


def _assert_answers(answer: dict[str, Any], expected: dict[str, list[str]]) -> None:
    for mode, hits in answer["answers"]:
        assert hits == expected[mode], (mode, answer)


@pytest.mark.slow
@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only"])
@pytest.mark.parametrize(
    "alter",
    [_far_ids_at_the_end, _far_ids_inside, _random_bytes],
    ids=["far-ids-at-the-end", "far-ids-inside", "random-bytes"],
)
def test_an_altered_vector_graph_in_the_store_file_is_rebuilt_not_read(
    tmp_path: Path,
    built: tuple[Path, dict[str, list[str]]],
    alter: Alteration,
    read_only: bool,
) -> None:
    db, expected = built
    _alter_packed(db, "vectors", ".usearch", alter)
    copy = _copy_alone(db, tmp_path / "sandbox")
    answer = _search_in_child(copy, read_only=read_only)
    _assert_answers(answer, expected)
    assert any(repair.startswith("vectors ") for repair in answer["repairs"]), answer


@pytest.mark.slow
@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only"])
def test_a_graph_built_on_another_machine_is_rebuilt_here(
    tmp_path: Path, built: tuple[Path, dict[str, list[str]]], read_only: bool
) -> None:
    db, expected = built
    copy = _copy_alone(db, tmp_path / "sandbox")
    elsewhere = tmp_path / "another-machine-cache"
    answer = _search_in_child(copy, read_only=read_only, cache=elsewhere)
    _assert_answers(answer, expected)
    # The note says why the copy the store file keeps was not used, not "missing".
    assert any(
        repair.startswith("vectors ") and "not built on this machine" in repair
        for repair in answer["repairs"]
    ), answer
    if not read_only:
        # The store file now carries the graph built here: opening it again reads it.
        again = _search_in_child(copy, read_only=False, cache=elsewhere)
        assert again["repairs"] == []
        _assert_answers(again, expected)


@pytest.mark.slow
def test_a_vector_folder_changed_since_it_was_built_is_rebuilt(
    built: tuple[Path, dict[str, list[str]]],
) -> None:
    db, expected = built
    [graph] = db.with_name(db.name + ".vectors").glob("*.usearch")
    data = bytearray(graph.read_bytes())
    _far_ids_at_the_end(data)
    rewrite(graph, bytes(data))
    answer = _search_in_child(db, read_only=False)
    _assert_answers(answer, expected)
    assert any("not built on this machine" in repair for repair in answer["repairs"]), answer


# -- the word index -------------------------------------------------------------


def _overwrite_body(*, keep_checksum: bool) -> Alteration:
    """Overwrite the middle of a Tantivy file's body; with ``keep_checksum``, write its
    footer's checksum anew, as a hostile sender would, so that the file passes it."""

    def alter(data: bytearray) -> None:
        length, _ = struct.unpack("<II", data[-8:])
        body = len(data) - 8 - length
        footer = json.loads(bytes(data[body:-8]))
        data[body // 4 : body // 2] = b"\xff" * (body // 2 - body // 4)
        if keep_checksum:
            footer["crc"] = zlib.crc32(bytes(data[:body]))
            written = json.dumps(footer).encode()
            data[body:] = written + struct.pack("<II", len(written), 1337)

    return alter


def _assert_hits_or_clear_errors(answer: dict[str, Any], expected: dict[str, list[str]]) -> None:
    """Each answer is a clear error naming the damage, or hits; a semantic search that
    answers (it reads the word index only to analyse the query) answers right."""
    for mode, hits in answer["answers"]:
        if isinstance(hits, dict):
            assert "word index" in hits["error"] and "is damaged" in hits["error"], answer
        elif mode == "semantic":
            assert hits == expected[mode], answer


@pytest.mark.slow
@pytest.mark.parametrize("keep_checksum", [False, True], ids=["checksum-fails", "checksum-kept"])
@pytest.mark.parametrize("suffix", [".store", ".term", ".idx"])
@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only"])
def test_altered_tantivy_files_give_a_clear_error_or_a_rebuild_never_a_crash(
    tmp_path: Path,
    built: tuple[Path, dict[str, list[str]]],
    suffix: str,
    keep_checksum: bool,
    read_only: bool,
) -> None:
    db, expected = built
    _alter_packed(db, "index", suffix, _overwrite_body(keep_checksum=keep_checksum))
    copy = _copy_alone(db, tmp_path / "sandbox")
    answer = _search_in_child(copy, read_only=read_only)
    _assert_hits_or_clear_errors(answer, expected)
    if read_only:
        return
    errors = [hits["error"] for _, hits in answer["answers"] if isinstance(hits, dict)]
    assert errors and all("researchstore rebuild-index" in error for error in errors), answer
    if not keep_checksum:
        # The first call that met the damage had the index rebuilt (its files fail
        # their checksums): the second round of searches answers right.
        _assert_answers({"answers": answer["answers"][3:]}, expected)
    # What the error says to do repairs it.
    with Store(copy, progress=False, embedder=HashingEmbedder()) as store:
        store.rebuild_index()
    _assert_answers(_search_in_child(copy, read_only=False), expected)


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".store", ".idx"])
@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only"])
def test_tantivy_files_altered_with_their_checksums_are_rebuilt_when_met_damaged_again(
    tmp_path: Path,
    built: tuple[Path, dict[str, list[str]]],
    suffix: str,
    read_only: bool,
) -> None:
    """Files that pass their checksums yet cannot be read: the first call that meets
    them has the index opened afresh, the second has it rebuilt from SQLite (for a
    read-only store, in the cache), so later calls, and later opens, answer right."""
    db, expected = built
    _alter_packed(db, "index", suffix, _overwrite_body(keep_checksum=True))
    copy = _copy_alone(db, tmp_path / "sandbox")
    answer = _search_in_child(copy, read_only=read_only)
    _assert_hits_or_clear_errors(answer, expected)
    errors = [hits["error"] for _, hits in answer["answers"] if isinstance(hits, dict)]
    assert 1 <= len(errors) <= 2, answer
    _assert_answers({"answers": answer["answers"][3:]}, expected)
    assert "it has been rebuilt from the store" in errors[-1], errors
    if read_only:
        # The index is in the cache: the error says where, and what can be done there.
        for error in errors:
            assert "of the read-only store" in error and "kept in" in error, error
            assert "rebuild-index" not in error and "To repair it by hand: remove " in error
    else:
        assert all("researchstore rebuild-index" in error for error in errors), errors
    # The rebuilt index is kept (beside the store, or in the cache): the next open reads it.
    again = _search_in_child(copy, read_only=read_only)
    _assert_answers(again, expected)


# -- values of another type where the store keeps bytes ---------------------------


@pytest.mark.slow
@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only"])
def test_a_packed_file_held_as_text_is_refused_and_the_index_rebuilt(
    tmp_path: Path, built: tuple[Path, dict[str, list[str]]], read_only: bool
) -> None:
    """SQLite keeps any type in any column: text where a file's bytes belong."""
    db, expected = built
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(
            "UPDATE index_files SET data = 'not bytes' WHERE index_name = 'index' "
            "AND name LIKE '%.term'"
        )
    copy = _copy_alone(db, tmp_path / "sandbox")
    answer = _search_in_child(copy, read_only=read_only)
    _assert_answers(answer, expected)
    assert any("holds str where the bytes of" in repair for repair in answer["repairs"]), answer


@pytest.mark.slow
def test_a_vector_of_another_size_is_left_out_and_check_says_so(
    tmp_path: Path, built: tuple[Path, dict[str, list[str]]]
) -> None:
    db, expected = built
    with closing(sqlite3.connect(db)) as conn, conn:
        (rowid,) = conn.execute("SELECT min(chunk_rowid) FROM vectors").fetchone()
        conn.execute("UPDATE vectors SET vector = zeroblob(7) WHERE chunk_rowid = ?", (rowid,))
        conn.execute("UPDATE vectors SET vector = 'text' WHERE chunk_rowid = ?", (rowid + 1,))
    copy = _copy_alone(db, tmp_path / "sandbox")
    answer = _search_in_child(copy, read_only=False)
    for mode, hits in answer["answers"]:
        assert isinstance(hits, list), (mode, answer)  # answers, if not quite the same
    with Store(copy, progress=False, embedder=HashingEmbedder()) as store:
        report = store.check()
    assert report["vectors"]["misshapen"] == 2 and not report["consistent"]
    assert any(
        "2 vectors in the store file are not of its dimension" in problem
        for problem in report["problems"]
    ), report["problems"]


def test_check_of_a_read_only_store_says_to_remove_its_damaged_cache_not_to_rebuild(
    tmp_path: Path, built: tuple[Path, dict[str, list[str]]]
) -> None:
    """``rebuild-index`` refuses a read-only store: the repair is to drop the cache's copy."""
    db, _ = built
    copy = _copy_alone(db, tmp_path / "sandbox")
    with Store(copy, progress=False, read_only=True) as store:
        folder = store.index_path
    assert folder != copy.with_name(copy.name + ".index")  # in the cache
    [segment] = list(folder.glob("*.term"))[:1]
    data = bytearray(segment.read_bytes())
    data[len(data) // 4] ^= 0xFF  # its checksum now fails
    rewrite(segment, bytes(data))
    with Store(copy, progress=False, read_only=True) as store:
        report = store.check()
    [problem] = [problem for problem in report["problems"] if "word index" in problem]
    assert f"remove {folder.parent}" in problem and "rebuild-index" not in problem, problem
