"""The store: one SQLite file, an index derived from it, and their agreement."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from helpers import long_text, program, write_report

from researchstore import Store, StoreLocked
from researchstore.check import check_store
from researchstore.storage.index_folders import SIDECAR


def _ids(hits: list[dict]) -> list[str]:
    return [hit["chunk_id"] for hit in hits]


def _agree(store: Store) -> None:
    report = check_store(store)
    assert report["consistent"], report
    assert report["pending"] == 0


def test_a_new_store_is_one_file_with_an_index_beside_it(tmp_path: Path) -> None:
    with Store(tmp_path / "new.db", progress=False) as store:
        assert store.path.is_file()
        assert (store.index_path / SIDECAR).is_file()
        pragmas = {
            name: store._conn.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("journal_mode", "foreign_keys", "busy_timeout")
        }
    assert pragmas == {"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": 10_000}


def test_reopening_keeps_everything(tmp_path: Path, source_dir: Path) -> None:
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(source_dir, name="field")
        before = store.search("varroa mite", limit=5)
    with Store(tmp_path / "r.db", progress=False) as store:
        assert _ids(store.search("varroa mite", limit=5)) == _ids(before)
        _agree(store)


def test_close_leaves_the_db_file_complete_on_its_own(tmp_path: Path, source_dir: Path) -> None:
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(source_dir, name="field")
    wal = tmp_path / "r.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0


def test_a_copied_db_file_alone_gives_a_working_store(tmp_path: Path, source_dir: Path) -> None:
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(source_dir, name="field")
        before = store.search("dissolved oxygen", limit=10)
        chunk_id = before[0]["chunk_id"]
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    shutil.copy(tmp_path / "r.db", sandbox / "copy.db")
    with Store(sandbox / "copy.db", progress=False) as copy:
        assert _ids(copy.search("dissolved oxygen", limit=10)) == _ids(before)
        assert copy.get_chunk(chunk_id) is not None
        _agree(copy)


@pytest.mark.parametrize(
    "damage",
    ["remove_folder", "other_store", "old_schema", "garbage_sidecar", "corrupt_meta"],
)
def test_an_unusable_index_is_rebuilt_on_open(
    tmp_path: Path, source_dir: Path, damage: str
) -> None:
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(source_dir, name="field")
        expected = _ids(store.search("nitrate runoff", limit=10))
    index = tmp_path / "r.db.index"
    sidecar = index / SIDECAR
    if damage == "remove_folder":
        shutil.rmtree(index)
    elif damage == "other_store":
        data = json.loads(sidecar.read_text())
        sidecar.write_text(json.dumps({**data, "store_uuid": "someone-else"}))
    elif damage == "old_schema":
        data = json.loads(sidecar.read_text())
        sidecar.write_text(json.dumps({**data, "index_schema": 0}))
    elif damage == "garbage_sidecar":
        sidecar.write_bytes(b"\x00\xff not json")
    elif damage == "corrupt_meta":
        (index / "meta.json").write_text("{ this is not tantivy meta")
    with Store(tmp_path / "r.db", progress=False) as store:
        assert _ids(store.search("nitrate runoff", limit=10)) == expected
        _agree(store)


def test_an_index_left_behind_the_store_is_rebuilt(tmp_path: Path, source_dir: Path) -> None:
    db = tmp_path / "r.db"
    with Store(db, progress=False) as store:
        store.ingest(source_dir, name="field")
    old_index = tmp_path / "old-index"
    shutil.copytree(tmp_path / "r.db.index", old_index)
    write_report(
        source_dir,
        "field/2027/moths",
        title="Moth trap counts",
        date="2027-06-01",
        tags={"audience": "students"},
        files={"moths.txt": "Moth traps caught hawkmoths."},
    )
    with Store(db, progress=False) as store:
        store.ingest(source_dir, name="field")
    shutil.rmtree(tmp_path / "r.db.index")
    shutil.copytree(old_index, tmp_path / "r.db.index")
    with Store(db, progress=False) as store:
        assert [hit["title"] for hit in store.search("hawkmoths")] == ["Moth trap counts"]
        _agree(store)


def test_an_index_ahead_of_the_store_is_rebuilt(tmp_path: Path, source_dir: Path) -> None:
    """A power loss can drop SQLite's last commits after the index saw them."""
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(source_dir, name="field")
    sidecar = tmp_path / "r.db.index" / SIDECAR
    data = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**data, "applied_seq": data["applied_seq"] + 50}))
    with Store(tmp_path / "r.db", progress=False) as store:
        _agree(store)
        assert json.loads(sidecar.read_text())["applied_seq"] == data["applied_seq"]


@pytest.mark.slow
def test_a_crash_between_sqlite_and_index_commit_is_repaired_on_open(
    tmp_path: Path, source_dir: Path
) -> None:
    db = tmp_path / "r.db"
    with Store(db, progress=False):
        pass
    result = subprocess.run(
        [*program("crash_writer"), str(db), str(source_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 9, result.stderr
    with sqlite3.connect(db) as conn:
        committed = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        pending = conn.execute("SELECT count(*) FROM index_pending").fetchone()[0]
    assert committed > 0 and pending > 0
    with Store(db, progress=False) as store:
        _agree(store)
        assert store.search("varroa mite")
        assert check_store(store)["indexed"] == committed


def test_search_never_returns_a_chunk_sqlite_no_longer_has(filled_store: Store) -> None:
    hits = filled_store.search("varroa", limit=50)
    gone = hits[0]["chunk_id"]
    with filled_store.transaction() as conn:
        conn.execute("DELETE FROM chunks WHERE chunk_id = ?", (gone,))
    again = filled_store.search("varroa", limit=50)
    assert gone not in _ids(again)
    assert len(again) == min(50, len(hits) - 1) or len(again) == len(hits) - 1


def test_embed_failed_chunks_keep_their_place_but_leave_search(filled_store: Store) -> None:
    store = filled_store
    hit = store.search("varroa", limit=1)[0]
    document = store.get_document(hit["document_id"])
    assert document is not None and len(document["chunks"]) >= 3
    middle = document["chunks"][1]["chunk_id"]
    with store.transaction() as conn:
        conn.execute("UPDATE chunks SET status = 'embed_failed' WHERE chunk_id = ?", (middle,))
    store.rebuild_index()
    assert middle not in _ids(store.search("varroa hive oxygen nitrate", limit=50))
    first = document["chunks"][0]["chunk_id"]
    walked = store.get_chunk_next(first, count=2)["chunks"]
    assert [chunk["position"] for chunk in walked] == [2, 3]
    assert store.get_chunk(middle) is not None
    skeleton = store.get_document(hit["document_id"])["chunks"]
    assert skeleton[1]["status"] == "embed_failed"


def test_a_chunk_the_index_rejects_is_marked_embed_failed(
    store: Store, source_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from researchstore.indexes.index import SearchIndex

    real_add = SearchIndex.add

    def picky_add(self: SearchIndex, chunks: list) -> int:
        chunks = list(chunks)
        if any("Note 3.2" in chunk.text for chunk in chunks):
            raise ValueError("rejected by the index")
        return real_add(self, chunks)

    monkeypatch.setattr(SearchIndex, "add", picky_add)
    store.ingest(source_dir, name="field")
    failed = store._conn.execute("SELECT text FROM chunks WHERE status = 'embed_failed'").fetchall()
    assert failed and all("Note 3.2" in text for (text,) in failed)
    _agree(store)


def test_a_second_writer_is_refused_while_one_works(tmp_path: Path, source_dir: Path) -> None:
    with Store(tmp_path / "r.db", progress=False) as first:
        with first.writing():
            with Store(tmp_path / "r.db", progress=False) as second:
                with pytest.raises(StoreLocked, match="being written by process"):
                    second.ingest(source_dir, name="field")
        # Once the first lets go, the second may write.
        with Store(tmp_path / "r.db", progress=False) as second:
            assert second.ingest(source_dir, name="field").new == 3


def test_reingesting_an_unchanged_source_touches_nothing(
    filled_store: Store, source_dir: Path
) -> None:
    before = filled_store.search("varroa", limit=5)
    summary = filled_store.ingest(source_dir, name="field")
    assert (summary.new, summary.modified, summary.unchanged) == (0, 0, 3)
    assert _ids(filled_store.search("varroa", limit=5)) == _ids(before)


def test_a_modified_report_gets_new_ids_and_old_ones_miss(
    filled_store: Store, source_dir: Path
) -> None:
    store = filled_store
    old = store.search("lecture hall", limit=1)[0]
    (source_dir / "misc" / "memo.txt").write_text("Memo\n\nThe lecture hall moves to building D.\n")
    summary = store.ingest(source_dir, name="field")
    assert (summary.modified, summary.unchanged) == (1, 2)
    new = store.search("lecture hall", limit=1)[0]
    assert new["chunk_id"] != old["chunk_id"] and new["report_id"] == old["report_id"]
    assert store.call("research_get_chunk", {"chunk_id": old["chunk_id"]}) == {
        "result": {"chunk": None}
    }
    _agree(store)


def test_long_text_is_chunked_and_searchable(store: Store, tmp_path: Path) -> None:
    root = tmp_path / "long"
    write_report(
        root, "r", title="Long", date="2026-01-01", tags={}, files={"long.txt": long_text(200)}
    )
    summary = store.ingest(root)
    assert summary.chunks > 20
    _agree(store)


def test_read_connections_of_ended_threads_are_closed(filled_store: Store) -> None:
    import threading

    chunk_id = filled_store.search("varroa")[0]["chunk_id"]
    for _ in range(5):
        reader = threading.Thread(target=filled_store.get_chunk, args=(chunk_id,))
        reader.start()
        reader.join()
    filled_store.get_chunk(chunk_id)
    # One connection for this thread, and at most one for the last thread that ended.
    assert len(filled_store._readers) <= 2
