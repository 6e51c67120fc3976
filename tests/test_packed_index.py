"""The indexes travel inside the store file: a copy of the one `.db` opens without a rebuild."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from helpers import HashingEmbedder, long_text, rewrite, write_report

from researchstore import Store
from researchstore.storage.sync import IndexSync

QUERY = "colony"


@pytest.fixture
def hashing() -> HashingEmbedder:
    return HashingEmbedder()


def _copy_alone(db: Path, to: Path) -> Path:
    """The `.db` file alone, as a sandbox receives it."""
    to.mkdir(parents=True, exist_ok=True)
    copy = to / db.name
    shutil.copyfile(db, copy)
    return copy


def _no_rebuild(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an index was rebuilt from the chunks")

    monkeypatch.setattr(IndexSync, "_rebuild", refuse)


def _answers(store: Store, **options: Any) -> list[tuple[str, float]]:
    return [(hit["chunk_id"], round(hit["score"], 4)) for hit in store.search(QUERY, **options)]


def _source(root: Path, count: int = 4) -> Path:
    for number in range(count):
        write_report(
            root,
            f"r{number}",
            title=f"Colony notes {number}",
            date="2026-03-01",
            tags={"season": "spring"},
            files={"notes.txt": long_text(6, seed=number)},
        )
    return root


def test_a_copied_file_alone_opens_without_a_rebuild_with_the_same_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store(tmp_path / "a" / "r.db", progress=False) as store:
        store.ingest(_source(tmp_path / "source"), name="s")
        expected = _answers(store, limit=20)
        assert expected
    copy = _copy_alone(tmp_path / "a" / "r.db", tmp_path / "sandbox")
    _no_rebuild(monkeypatch)
    with Store(copy, progress=False) as store:
        assert store.sync.repairs == []
        assert _answers(store, limit=20) == expected
        assert store.check()["consistent"]


def test_changes_after_the_last_copy_are_replayed_on_a_copied_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _source(tmp_path / "source", count=2)
    db = tmp_path / "a" / "r.db"
    with Store(db, progress=False) as store:
        store.ingest(source, name="s")
        # The next run's index work reaches the index folder, not the store
        # file's copy (as a run stopped before its end leaves it).
        monkeypatch.setattr(IndexSync, "_pack", lambda *args, **kwargs: None)
        _source(tmp_path / "source", count=4)
        store.ingest(source, name="s")
        expected = _answers(store, limit=50)
        monkeypatch.undo()
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT count(*) FROM index_pending").fetchone()[0] > 0
    copy = _copy_alone(db, tmp_path / "sandbox")
    _no_rebuild(monkeypatch)
    with Store(copy, progress=False) as store:
        assert _answers(store, limit=50) == expected
        titles = {hit["title"] for hit in store.search(QUERY, limit=50)}
        assert {"Colony notes 2", "Colony notes 3"} <= titles
        report = store.check()
        assert report["consistent"] and report["pending"] == 0, report


def test_the_vector_index_travels_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hashing: HashingEmbedder
) -> None:
    db = tmp_path / "a" / "r.db"
    with Store(db, progress=False, embedder=hashing) as store:
        store.ingest(_source(tmp_path / "source"), name="s")
        store.embed()
        expected = _answers(store, limit=10, mode="semantic")
    copy = _copy_alone(db, tmp_path / "sandbox")
    _no_rebuild(monkeypatch)
    with Store(copy, progress=False, embedder=hashing) as store:
        assert store.sync.repairs == []
        assert _answers(store, limit=10, mode="semantic") == expected
        assert store.check()["vectors"]["indexed"] == store.check()["vectors"]["stored"] > 0


def test_a_damaged_copy_in_the_store_file_is_rebuilt_from_the_chunks(tmp_path: Path) -> None:
    db = tmp_path / "a" / "r.db"
    with Store(db, progress=False) as store:
        store.ingest(_source(tmp_path / "source"), name="s")
        expected = _answers(store, limit=20)
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(
            "UPDATE index_files SET data = zeroblob(length(data)) WHERE name = 'meta.json'"
        )
    copy = _copy_alone(db, tmp_path / "sandbox")
    with Store(copy, progress=False) as store:
        [repair] = store.sync.repairs
        assert repair.startswith("index rebuilt on opening (missing; the copy the store file ")
        assert "meta.json cannot be read" in repair
        assert _answers(store, limit=20) == expected
        assert store.check()["consistent"]


def test_the_store_file_keeps_only_the_files_of_the_last_commit(tmp_path: Path) -> None:
    source = _source(tmp_path / "source")
    db = tmp_path / "r.db"
    with Store(db, progress=False) as store:
        store.ingest(source, name="s")
        for round_ in range(3):
            (source / "r0" / "notes.txt").write_text(long_text(6, seed=100 + round_))
            store.ingest(source, name="s")
        folder = store.index_path
        with store.reading() as conn:
            packed = {
                row[0]
                for row in conn.execute(
                    "SELECT DISTINCT name FROM index_files WHERE index_name = 'index'"
                )
            }
        from researchstore.indexes.index import SearchIndex

        committed = {path.name for path in store.sync.get(SearchIndex).committed_files()}
        assert packed == committed
        assert all((folder / name).exists() for name in packed)


def test_dropping_vectors_drops_their_copy(tmp_path: Path, hashing: HashingEmbedder) -> None:
    with Store(tmp_path / "r.db", progress=False, embedder=hashing) as store:
        store.ingest(_source(tmp_path / "source"), name="s")
        store.embed()
        store.drop_vectors()
        with store.reading() as conn:
            left = conn.execute(
                "SELECT count(*) FROM index_files WHERE index_name = 'vectors'"
            ).fetchone()[0]
            keys = conn.execute("SELECT key FROM meta WHERE key LIKE 'vectors%'").fetchall()
        assert left == 0 and keys == []


@pytest.fixture
def boot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The machine's boot id, as a file a test can change (a restart)."""
    from researchstore.storage import index_folders

    path = tmp_path / "boot_id"
    path.write_text("boot-1\n")
    monkeypatch.setattr(index_folders, "BOOT_ID", path)
    return path


def _fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the index files waited for on disk from now on."""
    import os

    from researchstore.storage.index_folders import SIDECAR

    names: list[str] = []
    real = os.fsync

    def counted(fd: int) -> None:
        name = Path(os.readlink(f"/proc/self/fd/{fd}")).name
        if not name.startswith(SIDECAR) and "." in name:
            names.append(name)
        real(fd)

    monkeypatch.setattr(os, "fsync", counted)
    return names


def test_a_copy_is_written_back_without_waiting_for_the_disk_and_again_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, boot: Path
) -> None:
    """Waiting for the disk is most of a large copy's first answer; what the page
    cache holds is lost only with a restart, after which the files are written
    back again, and the answers are the same."""
    from researchstore.storage.index_folders import SIDECAR, read_sidecar

    db = tmp_path / "a" / "r.db"
    source = _source(tmp_path / "source", count=2)
    with Store(db, progress=False) as store:
        store.ingest(source, name="s")
        expected = _answers(store, limit=20)
    copy = _copy_alone(db, tmp_path / "sandbox")
    _no_rebuild(monkeypatch)
    fsyncs = _fsyncs(monkeypatch)
    with Store(copy, progress=False) as store:
        assert _answers(store, limit=20) == expected
        assert store.sync.repairs == []
        folder = store.index_path
        assert fsyncs == []
        assert read_sidecar(folder)["unflushed_boot"] == "boot-1"  # type: ignore[index]
    # The same boot: the files are as written (the page cache holds them).
    with Store(copy, progress=False) as store:
        assert _answers(store, limit=20) == expected
        assert store.sync.repairs == []
    # A restart: they may never have reached the disk. Damage them as a lost
    # page cache would (as new files: see helpers.rewrite), and see them
    # written back again.
    boot.write_text("boot-2\n")
    for file in folder.iterdir():
        if file.name != SIDECAR and file.suffix in {".idx", ".term", ".store"}:
            rewrite(file, b"\0" * file.stat().st_size)
    with Store(copy, progress=False) as store:
        assert store.sync.repairs == [
            "index restored from the store file (written back before the machine "
            "restarted, and perhaps never on disk)"
        ]
        assert _answers(store, limit=20) == expected
        assert read_sidecar(folder)["unflushed_boot"] == "boot-2"  # type: ignore[index]
        # A commit keeps the mark: the files written back are still there.
        _source(tmp_path / "source", count=3)
        store.ingest(source, name="s")
        assert read_sidecar(folder)["unflushed_boot"] == "boot-2"  # type: ignore[index]
        assert store.check()["consistent"]


def test_where_no_boot_can_be_named_a_copy_is_written_back_to_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from researchstore.storage import index_folders

    monkeypatch.setattr(index_folders, "BOOT_ID", tmp_path / "no-such-file")
    db = tmp_path / "a" / "r.db"
    with Store(db, progress=False) as store:
        store.ingest(_source(tmp_path / "source", count=2), name="s")
        expected = _answers(store, limit=20)
    copy = _copy_alone(db, tmp_path / "sandbox")
    fsyncs = _fsyncs(monkeypatch)
    with Store(copy, progress=False) as store:
        assert _answers(store, limit=20) == expected
        assert {path.name for path in store.index_path.glob("*.idx")} <= set(fsyncs)
        assert "unflushed_boot" not in (index_folders.read_sidecar(store.index_path) or {})
