"""Damage and faults: a store file or an index damaged, a full disk, a panic, a crash.

Every case here is made for real: files truncated, removed, overwritten or
with bytes flipped on disk; a panic in Tantivy brought about by a segment's
own bytes; a full disk as a small tmpfs in a private mount namespace;
processes killed with SIGKILL at chosen points. After each, the store says
what happened and what to do, never answers wrongly in silence, and
repairs what it can: the index is derived and is rebuilt from SQLite.
"""

from __future__ import annotations

import asyncio
import errno
import json
import re
import shutil
import signal
import sqlite3
import struct
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    forget_packed_indexes,
    mcp_http_server,
    mcp_http_session,
    program,
    rewrite,
    run_cli,
)
from mcp import ClientSession

from researchstore import TOOLS, DiskFull, Store, StoreDamaged, call_tool
from researchstore.errors import EXIT_CODES
from researchstore.indexes.index import SearchIndex
from researchstore.serving.auth import create_key
from researchstore.storage.db import queue_pending, storage_error
from researchstore.storage.derived import IndexedChunk
from researchstore.storage.index_folders import SIDECAR

QUERY = "varroa mite"

# -- building and damaging stores ----------------------------------------------


def build(tmp_path: Path, source_dir: Path) -> tuple[Path, list[str]]:
    """A closed store of ``source_dir``, and the chunk ids its search for QUERY finds."""
    db = tmp_path / "r.db"
    with Store(db, progress=False) as store:
        store.ingest(source_dir, name="field")
        hits = [hit["chunk_id"] for hit in store.search(QUERY, limit=20)]
    assert hits
    return db, hits


def index_folder(db: Path) -> Path:
    return db.with_name(db.name + ".index")


def largest_segment(folder: Path) -> str:
    """The id of the segment holding the most (it has the largest ``.store`` file)."""
    return max(folder.glob("*.store"), key=lambda path: path.stat().st_size).stem


def flip(path: Path, *, at: float = 0.5, length: int = 32) -> None:
    """Invert ``length`` bytes of ``path``, from ``at`` (a fraction) of its size."""
    data = bytearray(path.read_bytes())
    start = int(len(data) * at)
    for position in range(start, min(len(data), start + length)):
        data[position] ^= 0xFF
    rewrite(path, bytes(data))


def listing(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def leftovers(db: Path) -> list[str]:
    """Rebuild and swap folders beside the store (there should be none)."""
    return sorted(p.name for p in db.parent.iterdir() if re.search(r"\.(rebuild|old)-\d+$", p.name))


def ids(hits: list[dict[str, Any]]) -> list[str]:
    return [hit["chunk_id"] for hit in hits]


def assert_sound(store: Store) -> None:
    report = store.check()
    assert report["consistent"], report
    assert report["problems"] == []


# Tantivy's composite files (one section per field) end with a table of the
# sections' offsets, as VInts (7 bits a byte, the last byte's high bit set),
# followed by the table's length and Tantivy's own footer.


def _read_vint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte & 0x80:
            return value, position
        shift += 7


def _vint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F)
        value >>= 7
    out.append(value | 0x80)
    return bytes(out)


def empty_a_fields_postings(idx: Path, field: int) -> None:
    """Make field number ``field``'s postings section of a ``.idx`` file empty.

    The file still opens (every section is in range), but each of the
    field's terms now points past its section: Tantivy panics reading it.
    """
    data = idx.read_bytes()
    footer_length = struct.unpack("<I", data[-8:-4])[0]
    body, footer = data[: -8 - footer_length], data[-8 - footer_length :]
    table_length = struct.unpack("<I", body[-4:])[0]
    table_start = len(body) - 4 - table_length
    table = body[table_start:-4]
    count, position = _read_vint(table, 0)
    sections, offset = [], 0
    for _ in range(count):
        delta, position = _read_vint(table, position)
        offset += delta
        field_number = struct.unpack("<I", table[position : position + 4])[0]
        index, position = _read_vint(table, position + 4)
        sections.append([offset, field_number, index])
    numbers = [section[1] for section in sections]
    following = sections[numbers.index(field) + 1]
    following[0] = sections[numbers.index(field)][0]
    rewritten, previous = bytearray(_vint(count)), 0
    for offset, field_number, index in sections:
        rewritten += _vint(offset - previous) + struct.pack("<I", field_number) + _vint(index)
        previous = offset
    rewrite(idx, body[:table_start] + bytes(rewritten) + struct.pack("<I", len(rewritten)) + footer)


TEXT_FIELD = 4  # chunk_id, report_id, document_id, title, text, ...


def make_search_panic(db: Path) -> None:
    folder = index_folder(db)
    for idx in folder.glob("*.idx"):
        empty_a_fields_postings(idx, TEXT_FIELD)


# -- 4. an empty or missing store file beside an index ---------------------------


@pytest.mark.slow
def test_an_emptied_store_file_is_refused_and_its_index_left_alone(
    tmp_path: Path, source_dir: Path
) -> None:
    db, _ = build(tmp_path, source_dir)
    before = listing(index_folder(db))
    db.write_bytes(b"")
    with pytest.raises(StoreDamaged) as refused:
        Store(db, progress=False)
    message = refused.value.message
    assert f"the store file {db} is empty (0 bytes)" in message
    assert f"delete {index_folder(db)} first" in message and "backup" in message
    search = run_cli("search", str(db), QUERY)
    assert search.returncode == StoreDamaged.exit_code == 1
    assert search.stderr.startswith(f"Error: the store file {db} is empty")
    check = run_cli("check", str(db))
    assert check.returncode == 1, check.stderr
    assert json.loads(check.stdout)["problems"] == [message]
    assert "Traceback" not in search.stderr + check.stderr
    assert listing(index_folder(db)) == before
    assert db.stat().st_size == 0


@pytest.mark.slow
def test_a_removed_store_file_is_not_recreated_over_its_index(
    tmp_path: Path, source_dir: Path
) -> None:
    db, _ = build(tmp_path, source_dir)
    before = listing(index_folder(db))
    db.unlink()
    result = run_cli("ingest", str(db), str(source_dir))
    assert result.returncode == 1
    assert result.stderr.startswith(f"Error: the store file {db} is missing")
    assert listing(index_folder(db)) == before
    assert not db.exists()


def test_a_new_store_may_reuse_a_folder_whose_index_holds_nothing(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with Store(db, progress=False):
        pass  # a store with nothing in it: its index has no documents
    db.write_bytes(b"")
    with Store(db, progress=False) as store:
        assert_sound(store)


# -- 5. index damage: seen on opening, or found by check -------------------------


def _remove_meta(folder: Path) -> None:
    (folder / "meta.json").unlink()


def _empty_segment_list(folder: Path) -> None:
    meta = json.loads((folder / "meta.json").read_text())
    rewrite(folder / "meta.json", json.dumps({**meta, "segments": []}).encode())


def _empty_folder_but_sidecar(folder: Path) -> None:
    for entry in folder.iterdir():
        if entry.name != SIDECAR:
            entry.unlink()


def _remove_file(extension: str) -> Any:
    def remove(folder: Path) -> None:
        (folder / f"{largest_segment(folder)}.{extension}").unlink()

    return remove


def _empty_file(extension: str) -> Any:
    def empty(folder: Path) -> None:
        rewrite(folder / f"{largest_segment(folder)}.{extension}", b"")

    return empty


DAMAGE_SEEN_ON_OPENING = {
    "meta.json removed": _remove_meta,
    "segment list emptied": _empty_segment_list,
    "folder emptied, sidecar kept": _empty_folder_but_sidecar,
    ".pos removed": _remove_file("pos"),
    ".store removed": _remove_file("store"),
    ".term emptied": _empty_file("term"),
}


@pytest.mark.parametrize("damage", list(DAMAGE_SEEN_ON_OPENING))
def test_index_damage_seen_on_opening_is_rebuilt(
    tmp_path: Path, source_dir: Path, damage: str
) -> None:
    db, expected = build(tmp_path, source_dir)
    DAMAGE_SEEN_ON_OPENING[damage](index_folder(db))
    with Store(db, progress=False) as store:
        # Restored from the copy the store file keeps, else rebuilt.
        assert [
            line
            for line in store.sync.repairs
            if "restored from the store file" in line or "rebuilt on opening" in line
        ]
        assert ids(store.search(QUERY, limit=20)) == expected
        assert_sound(store)
    assert leftovers(db) == []


def test_an_index_holding_a_chunk_the_store_lacks_is_rebuilt_on_opening(
    tmp_path: Path, source_dir: Path
) -> None:
    """As a lost delete leaves it: the index names a chunk SQLite retired."""
    db, expected = build(tmp_path, source_dir)
    with Store(db, progress=False) as store:
        chunks = store.check()["chunks_ok"]
        index = store.sync.get(SearchIndex)
        index.add(
            [
                IndexedChunk(
                    chunk_id="retired-chunk",
                    report_id=1,
                    document_id="retired-document",
                    title="Varroa mite survey",
                    text="Varroa mite varroa mite varroa mite.",
                    tags={},
                    date="2026-01-01",
                    source="field",
                    kind="text",
                )
            ]
        )
        index.commit()
        index.close_writer()
    with Store(db, progress=False) as store:
        assert store.sync.repairs == [
            f"index rebuilt on opening (it holds {chunks + 1} chunks where the store has {chunks})"
        ]
        assert "retired-chunk" not in ids(store.search(QUERY, limit=20))
        assert ids(store.search(QUERY, limit=20)) == expected
        assert_sound(store)


#: Where 32 bytes are flipped, and who finds it: opening (Tantivy refuses the
#: segment, the index is rebuilt at once) or ``check`` (only reading it all
#: back shows it).
FLIPS = {"store": "check", "idx": "check", "term": "check", "pos": "check", "fast": "opening"}


@pytest.mark.slow
@pytest.mark.parametrize("extension", list(FLIPS))
def test_flipped_bytes_in_a_segment_are_found(
    tmp_path: Path, source_dir: Path, extension: str
) -> None:
    db, expected = build(tmp_path, source_dir)
    segment = largest_segment(index_folder(db))
    flip(index_folder(db) / f"{segment}.{extension}", at=0.4)
    result = run_cli("check", str(db))
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    if FLIPS[extension] == "opening":
        assert result.returncode == 0, result.stdout
        [repair] = report["repaired_on_open"]
        assert repair.startswith("index restored from the store file (unreadable: ")
    else:
        assert result.returncode == 1, result.stdout
        assert not report["consistent"]
        [problem] = report["problems"]
        assert problem.endswith(f"rebuild it with: researchstore rebuild-index {db}")
        assert f"{segment}.{extension} fails its checksum" in problem
        assert f"problem: {problem}\n" in result.stderr
        rebuilt = run_cli("rebuild-index", str(db))
        assert rebuilt.returncode == 0, rebuilt.stderr
    with Store(db, progress=False) as store:
        assert ids(store.search(QUERY, limit=20)) == expected
        assert_sound(store)


def test_check_reads_every_file_and_document_of_a_sound_index(filled_store: Store) -> None:
    report = filled_store.check()
    assert report["consistent"] and report["index_files"] == "ok"
    assert report["indexed"] == report["chunks_ok"] > 0
    assert report["reports_differing"] == 0 and report["repaired_on_open"] == []


# -- the crash-recovery gap: a delete lost to a merge after a kill ---------------


def indexed(report: int, count: int, *, version: int = 1) -> list[IndexedChunk]:
    return [
        IndexedChunk(
            chunk_id=f"r{report}-v{version}-{number}",
            report_id=report,
            document_id=f"d{report}-v{version}",
            title=f"Report {report}",
            text=f"Hive {report}, survey {version}, note {number}.",
            tags={},
            date="2026-05-04",
            source="field",
            kind="text",
        )
        for number in range(count)
    ]


def one_segment_a_commit(folder: Path) -> SearchIndex:
    """A new index whose writer has one indexing thread: each commit adds one segment."""
    index = SearchIndex.create(folder)
    index.close_writer()  # the bulk writer of a rebuild has two
    return index


def test_a_first_delete_after_a_killed_run_survives_the_merge_it_starts(tmp_path: Path) -> None:
    """A run killed just after an index commit leaves segments no merge has seen yet,
    the last commit's deletes in one of them; replaying its pending changes starts
    with a delete. Tantivy stamps a new writer's first operation with the last
    commit's opstamp, and the merge the next commit starts (at that opstamp) used
    to lose it for exactly that segment: the old chunks came back.

    The index is put in that state directly: a kill lands there only if it beats
    a merge thread, which no test can promise.
    """
    earlier, last = tmp_path / "index", tmp_path / "last-commits"
    index = one_segment_a_commit(earlier)
    for report in range(1, 7):  # one large segment, five small
        index.add(indexed(report, 300 if report == 1 else 60))
        index.commit()
    index.close_writer()
    index = one_segment_a_commit(last)
    index.add(indexed(7, 60))
    index.commit()
    index.add(indexed(20, 30) + indexed(21, 30) + indexed(22, 30))
    index.commit()
    index.delete_report(20)  # report 20 replaced: the last commit deletes in that segment
    index.commit()
    index.close_writer()
    meta = json.loads((earlier / "meta.json").read_text())
    last_meta = json.loads((last / "meta.json").read_text())
    for path in last.iterdir():
        if path.suffix in {".idx", ".pos", ".term", ".store", ".fast", ".fieldnorm", ".del"}:
            shutil.copy2(path, earlier / path.name)
    meta["segments"] += last_meta["segments"]
    meta["opstamp"] = last_meta["opstamp"]
    (earlier / "meta.json").write_text(json.dumps(meta))
    assert len(meta["segments"]) == 8  # what the merge policy merges at the next commit

    index = SearchIndex.open(earlier)
    index.delete_report(21)  # the replay of report 21's pending change: delete, then add
    index.add(indexed(21, 2, version=2))
    index.commit()
    index.close_writer()  # waits for the merge
    held = SearchIndex.open(earlier).all_chunk_ids()
    assert sorted(chunk for chunk in held if chunk.startswith("r21-")) == ["r21-v2-0", "r21-v2-1"]
    assert len(held) == len(set(held)) == 300 + 6 * 60 + 2 + 30


# -- 6. a panic in Tantivy ---------------------------------------------------------


@pytest.mark.slow
def test_a_panic_in_a_search_is_one_error_and_the_index_is_rebuilt(
    tmp_path: Path, source_dir: Path
) -> None:
    db, expected = build(tmp_path, source_dir)
    make_search_panic(db)
    with Store(db, progress=False) as store:
        envelope = store.call("research_chunk_search", {"query": QUERY})
        error = envelope["error"]
        assert error["code"] == "internal"
        assert error["message"].startswith(f"the word index beside {db} is damaged (")
        assert "Tantivy panicked reading it" in error["message"]
        assert "it has been rebuilt from the store" in error["message"]
        assert error["message"].endswith(f"To repair it by hand: researchstore rebuild-index {db}")
        again = store.call("research_chunk_search", {"query": QUERY, "limit": 20})
        assert ids(again["result"]["hits"]) == expected
        assert_sound(store)


def test_any_panic_in_a_tool_stays_inside_its_envelope(filled_store: Store) -> None:
    class PanicException(BaseException):
        """Stands in for ``pyo3_runtime.PanicException``: a BaseException, by that name."""

    def panics(store: Store, arguments: dict[str, Any]) -> dict[str, Any]:
        raise PanicException("index out of bounds: the len is 3 but the index is 7")

    def interrupted(store: Store, arguments: dict[str, Any]) -> dict[str, Any]:
        raise KeyboardInterrupt

    get_chunks = TOOLS["get_chunks"]
    envelope = call_tool(
        filled_store,
        "get_chunks",
        {"ids": ["x"]},
        tools={"get_chunks": replace(get_chunks, run=panics)},
    )
    message = envelope["error"]["message"]
    assert envelope["error"]["code"] == "internal"
    assert "a Rust panic: index out of bounds" in message
    assert "it has been opened afresh (its files are sound)" in message  # nothing to rebuild
    assert message.endswith(f"researchstore rebuild-index {filled_store.path}")
    with pytest.raises(KeyboardInterrupt):  # not a panic: not the boundary's to keep
        call_tool(
            filled_store,
            "get_chunks",
            {"ids": ["x"]},
            tools={"get_chunks": replace(get_chunks, run=interrupted)},
        )
    assert filled_store.search(QUERY)
    assert_sound(filled_store)


@pytest.mark.slow
def test_a_panic_over_http_is_one_error_and_the_server_recovers(
    tmp_path: Path, source_dir: Path
) -> None:
    db, expected = build(tmp_path, source_dir)
    with Store(db, progress=False) as store:
        key = create_key(store, label="agent")
    make_search_panic(db)

    async def search(session: ClientSession) -> tuple[bool, dict[str, Any]]:
        result = await session.call_tool("research_chunk_search", {"query": QUERY, "limit": 20})
        assert result.structuredContent is not None
        return bool(result.isError), result.structuredContent

    async def run(url: str) -> list[tuple[bool, dict[str, Any]]]:
        async with mcp_http_session(url, key) as first, mcp_http_session(url, key) as second:
            return [await search(first), await search(first), await search(second)]

    # One process: each of ``--workers N`` meets the damage in its own open index,
    # and reports it once, before the repair of whichever process was first.
    with mcp_http_server(db, tmp_path / "server.log", "--workers", "1") as url:
        (failed, error), (_, again), (_, other) = asyncio.run(run(url))
    assert failed and error["error"]["code"] == "internal"
    assert f"researchstore rebuild-index {db}" in error["error"]["message"]
    assert ids(again["result"]["hits"]) == ids(other["result"]["hits"]) == expected
    with Store(db, progress=False) as store:
        assert_sound(store)


# -- 9. a full disk ----------------------------------------------------------------


def test_storage_errors_say_what_happened(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    full = storage_error(db, sqlite3.OperationalError("database or disk is full"))
    assert isinstance(full, DiskFull) and full.exit_code == 4
    assert full.message.startswith(f"the disk holding {db} is full (database or disk is full)")
    assert EXIT_CODES[full.code] == 4
    no_space = storage_error(db, OSError(errno.ENOSPC, "No space left on device"))
    assert isinstance(no_space, DiskFull)
    damaged = storage_error(db, sqlite3.DatabaseError("database disk image is malformed"))
    assert isinstance(damaged, StoreDamaged) and damaged.exit_code == 1
    assert f"researchstore check {db}" in damaged.message
    assert storage_error(db, sqlite3.IntegrityError("UNIQUE constraint failed")) is None
    assert storage_error(db, OSError(errno.EACCES, "Permission denied")) is None


def _no_space(*args: Any, **kwargs: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_while_indexing_marks_no_chunk_and_loses_nothing(
    tmp_path: Path, source_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "r.db"
    with Store(db, progress=False) as store:
        with monkeypatch.context() as patched:
            patched.setattr(SearchIndex, "add", _no_space)
            with pytest.raises(DiskFull, match=r"is full \(No space left on device\)"):
                store.ingest(source_dir, name="field")
        statuses = store._conn.execute("SELECT DISTINCT status FROM chunks").fetchall()
        assert [status for (status,) in statuses] == ["ok"]
    with Store(db, progress=False) as store:  # the next open applies what was pending
        assert store.search(QUERY)
        assert_sound(store)


def test_opening_on_a_full_disk_leaves_pending_work_and_still_reads(
    tmp_path: Path, source_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, expected = build(tmp_path, source_dir)
    with Store(db, progress=False) as store:
        with store.transaction() as conn:
            queue_pending(conn, 1, "2026-05-04T00:00:00Z")  # as a run cut short leaves it
    with monkeypatch.context() as patched:
        patched.setattr(SearchIndex, "commit", _no_space)
        with Store(db, progress=False) as store:
            assert ids(store.search(QUERY, limit=20)) == expected
            [waiting] = store.sync.repairs
            assert waiting.startswith(f"left for the next writer: the disk holding {db}")
            report = store.check()
            assert report["pending"] == 1 and not report["consistent"]
            assert "the next open or run applies them" in report["problems"][0]
    with Store(db, progress=False) as store:
        assert ids(store.search(QUERY, limit=20)) == expected
        assert_sound(store)


def _can_mount_a_tmpfs() -> bool:
    try:
        probe = subprocess.run(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                'mount -t tmpfs -o size=1m tmpfs "$(mktemp -d)"',
            ],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


@pytest.mark.slow
def test_a_full_disk_is_one_clear_error_and_reads_still_work(tmp_path: Path) -> None:
    if not _can_mount_a_tmpfs():
        pytest.skip("needs root and a private mount namespace to mount a small tmpfs")
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = 'mount -t tmpfs -o size=4m tmpfs "$1" && shift && exec "$@"'
    result = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            mount,
            "sh",
            str(disk),
            *program("disk_full"),
            str(disk),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    steps = json.loads(result.stdout)
    assert steps["crash"]["rc"] == -signal.SIGKILL, steps["crash"]
    db = disk / "r.db"
    full = f"Error: the disk holding {db}"
    for name in ("full_reingest", "full_rebuild_index"):
        step = steps[name]
        assert step["rc"] == DiskFull.exit_code == 4, step
        assert step["stderr"].startswith(full) and "is full" in step["stderr"], step
    for name, step in steps.items():
        if isinstance(step, dict) and name != "crash":
            assert "Traceback" not in step["stderr"], (name, step["stderr"])
    search = steps["full_search"]
    assert search["rc"] == 0 and json.loads(search["stdout"])["result"]["hits"], search
    assert steps["full_get_chunk"]["rc"] == 0
    check = steps["full_check"]
    assert check["rc"] == 1 and "the next open or run applies them" in check["stderr"]
    assert not [name for name in steps["full_leftovers"] if ".rebuild-" in name]
    assert steps["freed_search"]["rc"] == 0
    for name in ("freed_check", "freed_reingest", "freed_check_again"):
        assert steps[name]["rc"] == 0, (name, steps[name])
    assert json.loads(steps["freed_check_again"]["stdout"])["consistent"]


# -- 10. a damaged store file, and leftover rebuild folders -------------------------


def overwrite_table_root(db: Path, table: str) -> None:
    """Overwrite the root page of ``table`` with garbage, as a bad disk block would."""
    with sqlite3.connect(db) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,))
        (page,) = root.fetchone()
    conn.close()
    with open(db, "r+b") as handle:
        handle.seek((page - 1) * page_size)
        handle.write(bytes([0xA5]) * page_size)


@pytest.mark.slow
def test_a_damaged_store_file_gives_a_clear_error_and_leaves_no_folder(
    tmp_path: Path, source_dir: Path
) -> None:
    db, _ = build(tmp_path, source_dir)
    shutil.rmtree(index_folder(db))  # opening rebuilds it, reading every chunk ...
    forget_packed_indexes(db)  # ... when the store file keeps no copy of it
    overwrite_table_root(db, "chunks")
    with pytest.raises(StoreDamaged, match=f"the store file {re.escape(str(db))} is damaged"):
        Store(db, progress=False)
    assert leftovers(db) == []
    search = run_cli("search", str(db), QUERY)
    assert search.returncode == 1
    assert search.stderr.startswith(f"Error: the store file {db} is damaged (")
    assert "sqlite3" in search.stderr and ".recover" in search.stderr
    check = run_cli("check", str(db))
    assert check.returncode == 1
    report = json.loads(check.stdout)
    assert report["integrity"] != "ok" and not report["consistent"]
    assert "Traceback" not in search.stderr + check.stderr
    assert leftovers(db) == []


@pytest.mark.slow
def test_check_reports_a_damaged_page_the_index_does_not_need(
    tmp_path: Path, source_dir: Path
) -> None:
    db, _ = build(tmp_path, source_dir)
    overwrite_table_root(db, "chunk_history")
    result = run_cli("check", str(db))
    assert result.returncode == 1, result.stdout
    report = json.loads(result.stdout)
    assert report["integrity"] != "ok"
    assert report["chunks_ok"] > 0 and report["indexed"] == report["chunks_ok"]
    [problem] = report["problems"]
    assert problem.startswith(f"the store file {db} is damaged (")
    assert "backup" in problem and ".recover" in problem


def dead_pid() -> int:
    """The id of a process that has ended."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_rebuild_folders_of_ended_processes_are_removed_on_open(
    tmp_path: Path, source_dir: Path
) -> None:
    db, expected = build(tmp_path, source_dir)
    gone = dead_pid()
    alive = subprocess.Popen(["sleep", "60"])
    try:
        for name in (
            f"r.db.index.rebuild-{gone}",
            f"r.db.index.old-{gone}",
            f"r.db.index.rebuild-{alive.pid}",
        ):
            (tmp_path / name).mkdir()
            (tmp_path / name / "meta.json").write_text("{}")
        with Store(db, progress=False) as store:
            assert ids(store.search(QUERY, limit=20)) == expected
        assert leftovers(db) == [f"r.db.index.rebuild-{alive.pid}"]
    finally:
        alive.kill()
        alive.wait()


@pytest.mark.slow
def test_a_killed_rebuild_leaves_nothing_after_the_next_open(
    tmp_path: Path, source_dir: Path
) -> None:
    db, expected = build(tmp_path, source_dir)
    killed = subprocess.run(
        [*program("crashing_rebuild"), str(db)], capture_output=True, text=True, timeout=60
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    [left] = leftovers(db)
    assert left.startswith("r.db.index.rebuild-")
    with Store(db, progress=False) as store:
        assert ids(store.search(QUERY, limit=20)) == expected
        assert_sound(store)
    assert leftovers(db) == []
