"""A store file from elsewhere is untrusted: no name read from it becomes a path unchecked.

The names of the index files it keeps (``index_files.name``) and its
``store_uuid`` never lead a write outside the store's folder or the cache
directory: a packed copy naming a file no researchstore writes is refused and
the index rebuilt from SQLite; a uuid no researchstore writes is refused
where it would name a cache folder. Junk beside a store (``<db>.index.old-<n>``)
never stops it opening. A read-only store's cache entry belongs to one state
of its file: another process opening another snapshot of the same store
never swaps the index under an open ``Store``. Without a writable home, the
cache falls back to a private folder in the system's temporary folder.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from helpers import write_report

from researchstore import Store, StoreDamaged
from researchstore.reingest import reingest

QUERY = "zebrafinch"
ROOT = Path(__file__).resolve().parents[1]


def _source(root: Path, count: int) -> Path:
    for number in range(count):
        write_report(
            root,
            f"r{number}",
            title=f"Survey {number}",
            date="2026-03-01",
            tags={"season": "spring"},
            files={"notes.txt": f"The zebrafinch survey number {number} counted nests."},
        )
    return root


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed (checkpointed) store of three reports, each one hit for ``QUERY``."""
    folder = tmp_path_factory.mktemp("template")
    db = folder / "r.db"
    with Store(db, progress=False) as store:
        store.ingest(_source(folder / "source", 3), name="field")
        assert len(store.search(QUERY)) == 3
    return db


class Layout:
    """A store copied alone into ``base/store`` of a ``tmp_path``, its cache in ``base/cache``.

    ``base`` is two folders down, so that a name climbing out of the store's
    (or the cache's) folders still lands inside ``tmp_path``, where it is seen.
    """

    def __init__(self, tmp_path: Path, template: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp_path = tmp_path
        self.base = tmp_path / "a" / "b"
        self.store_folder = self.base / "store"
        self.cache = self.base / "cache"
        self.store_folder.mkdir(parents=True)
        self.db = self.store_folder / template.name
        shutil.copyfile(template, self.db)
        monkeypatch.setenv("RESEARCHSTORE_CACHE_DIR", str(self.cache))
        self.before = self.files()

    def files(self) -> set[Path]:
        return set(self.tmp_path.rglob("*"))

    def tamper(self, sql: str, *parameters: object) -> None:
        with closing(sqlite3.connect(self.db)) as conn, conn:
            conn.execute(sql, parameters)

    def strays(self) -> list[Path]:
        """What appeared outside the store's folder and the cache since the copy."""
        return sorted(
            path
            for path in self.files() - self.before
            if not path.is_relative_to(self.store_folder) and not path.is_relative_to(self.cache)
        )


@pytest.fixture
def layout(tmp_path: Path, template: Path, monkeypatch: pytest.MonkeyPatch) -> Layout:
    return Layout(tmp_path, template, monkeypatch)


def _packed_names(db: Path) -> set[str]:
    with closing(sqlite3.connect(db)) as conn:
        return {name for (name,) in conn.execute("SELECT name FROM index_files")}


# -- 1: the names of the packed index files ------------------------------------------


HOSTILE_NAMES = {
    "climbing": "../../../x",
    "absolute": "{tmp_path}/outside/x",
    "in a folder": "nodir/x",
    "empty": "",
    "dot": ".",
    "dot dot": "..",
    "nul": "x\x00y",
    "too long": "x" * 300,
    "a model's files": "modules.json",
}


@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only"])
@pytest.mark.parametrize("name", list(HOSTILE_NAMES.values()), ids=list(HOSTILE_NAMES))
def test_a_packed_file_named_outside_the_index_is_refused_and_the_index_rebuilt(
    layout: Layout, name: str, read_only: bool
) -> None:
    name = name.format(tmp_path=layout.tmp_path)
    (layout.tmp_path / "outside").mkdir()
    layout.before = layout.files()
    layout.tamper(
        "INSERT INTO index_files (index_name, name, part, data) VALUES ('index', ?, 0, ?)",
        name,
        b"owned",
    )
    with Store(layout.db, progress=False, read_only=read_only) as store:
        assert len(store.search(QUERY)) == 3
        assert any("the copy the store file keeps" in note for note in store.sync.repairs), (
            store.sync.repairs
        )
        index_path = store.index_path
    assert layout.strays() == []
    assert not (layout.tmp_path / "outside" / "x").exists()
    assert not (index_path / "modules.json").exists()
    if read_only:
        assert name in _packed_names(layout.db)  # nothing written to a read-only store
    else:
        assert name not in _packed_names(layout.db)  # packed again, from the rebuilt index


def test_a_renamed_packed_file_is_refused_without_a_crash(layout: Layout) -> None:
    layout.tamper("UPDATE index_files SET name = 'nodir/x' WHERE name = 'meta.json'")
    with Store(layout.db, progress=False) as store:
        assert len(store.search(QUERY)) == 3
    assert layout.strays() == []
    assert "meta.json" in _packed_names(layout.db)


def test_a_segment_id_naming_a_path_is_damage_not_a_path(layout: Layout) -> None:
    from researchstore.indexes.index_files import segment_files
    from researchstore.storage.derived import IndexDamaged

    folder = layout.base / "index"
    folder.mkdir()
    (folder / "meta.json").write_text(
        json.dumps({"segments": [{"segment_id": "../../../etc/passwd", "deletes": None}]})
    )
    with pytest.raises(IndexDamaged, match="segment"):
        segment_files(folder)


def test_a_link_in_the_index_folder_is_never_written_through(layout: Layout) -> None:
    from researchstore.storage.index_folders import SIDECAR

    with Store(layout.db, progress=False) as store:  # the index beside it, unpacked
        folder = store.index_path
    target = layout.tmp_path / "outside" / "precious"
    target.parent.mkdir()
    target.write_text("keep me")
    (folder / (SIDECAR + ".tmp")).symlink_to(target)
    source = _source(layout.tmp_path / "more", 1)
    with Store(layout.db, progress=False) as store:
        store.ingest(source, name="more")  # its commit writes the sidecar
        assert len(store.search(QUERY)) == 4
    assert target.read_text() == "keep me"
    assert not (folder / SIDECAR).is_symlink()


# -- 2: the store's uuid -------------------------------------------------------------


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "climbing"])
def test_a_store_uuid_naming_a_path_is_refused_where_it_would_name_the_cache(
    layout: Layout, relative: bool
) -> None:
    # The cache folder was <cache>/<store_uuid>/r.db.index, its lock <cache>/<store_uuid>/lock.
    victim = layout.base.parent if relative else layout.tmp_path / "victim"
    store_uuid = "../.." if relative else str(victim)
    (victim / "r.db.index").mkdir(parents=True)
    (victim / "r.db.index" / "precious").write_text("keep me")
    (victim / "lock").write_text("keep me too")
    layout.before = layout.files()
    layout.tamper("UPDATE meta SET value = ? WHERE key = 'store_uuid'", store_uuid)

    with pytest.raises(StoreDamaged, match="store_uuid"):
        with Store(layout.db, progress=False, read_only=True) as store:
            store.search(QUERY)
    assert (victim / "r.db.index" / "precious").read_text() == "keep me"
    assert (victim / "lock").read_text() == "keep me too"
    assert layout.strays() == []

    # Writable, the uuid names no folder: the store opens and is searched.
    with Store(layout.db, progress=False) as store:
        assert len(store.search(QUERY)) == 3
    assert (victim / "r.db.index" / "precious").read_text() == "keep me"
    assert (victim / "lock").read_text() == "keep me too"
    assert layout.strays() == []


# -- 4: junk beside the store --------------------------------------------------------


@pytest.mark.parametrize(
    "suffix", [".old-99999999999999999999", ".rebuild-99999999999999999999", ".old-0"]
)
def test_a_leftover_folder_with_a_junk_process_number_is_removed_not_a_crash(
    layout: Layout, suffix: str
) -> None:
    with Store(layout.db, progress=False) as store:  # the index beside it, unpacked
        assert len(store.search(QUERY)) == 3
    junk = layout.store_folder / f"{layout.db.name}.index{suffix}"
    junk.mkdir()
    (junk / "meta.json").write_text("{}")
    with Store(layout.db, progress=False) as store:
        assert len(store.search(QUERY)) == 3
    assert not junk.exists()


# -- 8: one cache entry per state of the file ----------------------------------------

CHILD = """
import json, sys
from researchstore import Store
with Store(sys.argv[1], progress=False, read_only=True) as store:
    hits = store.search(sys.argv[2])
    print(json.dumps({"hits": len(hits), "index_path": str(store.index_path)}))
"""


def _search_in_a_child(db: Path, env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(db), QUERY],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


@pytest.mark.slow
def test_another_snapshot_opened_elsewhere_never_swaps_the_index_of_an_open_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("RESEARCHSTORE_CACHE_DIR", str(cache))
    source = _source(tmp_path / "source", 3)
    original = tmp_path / "original" / "r.db"
    with Store(original, progress=False) as store:
        store.ingest(source, name="field")
    (tmp_path / "yesterday").mkdir()
    yesterday = tmp_path / "yesterday" / "r.db"
    shutil.copyfile(original, yesterday)
    shutil.rmtree(source / "r2")
    with Store(original, progress=False) as store:
        reingest(store, source="field")  # one report fewer
        assert len(store.search(QUERY)) == 2
    (tmp_path / "today").mkdir()
    today = tmp_path / "today" / "r.db"
    shutil.copyfile(original, today)  # the same uuid and file name as yesterday's

    with Store(yesterday, progress=False, read_only=True) as old:
        assert len(old.search(QUERY)) == 3
        newer = _search_in_a_child(today, dict(os.environ))
        assert newer["hits"] == 2
        old.sync.refresh()  # what the index folder holds now
        assert len(old.search(QUERY)) == 3
        assert Path(str(newer["index_path"])) != old.index_path
        # The older snapshot, opened again, finds its own entry.
        assert _search_in_a_child(yesterday, dict(os.environ))["hits"] == 3
        assert len(old.search(QUERY)) == 3


def test_entries_of_older_states_are_removed_once_unused_and_kept_while_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from researchstore.storage.index_cache import KEEP_UNUSED

    cache = tmp_path / "cache"
    monkeypatch.setenv("RESEARCHSTORE_CACHE_DIR", str(cache))
    source = _source(tmp_path / "source", 2)
    original = tmp_path / "original" / "r.db"
    snapshots = []
    for number in range(KEEP_UNUSED + 4):
        write_report(
            source,
            f"extra{number}",
            title=f"Extra {number}",
            date="2026-03-02",
            tags={},
            files={"notes.txt": f"The zebrafinch extra {number}."},
        )
        with Store(original, progress=False) as store:
            store.ingest(source, name="field")
        snapshot = tmp_path / f"snapshot{number}" / "r.db"
        snapshot.parent.mkdir()
        shutil.copyfile(original, snapshot)
        snapshots.append(snapshot)

    with Store(snapshots[0], progress=False, read_only=True) as first:
        assert len(first.search(QUERY)) == 3
        held = first.index_path
        for number, snapshot in enumerate(snapshots[1:], start=1):
            with Store(snapshot, progress=False, read_only=True) as later:
                assert len(later.search(QUERY)) == 3 + number
        [store_folder] = [entry for entry in cache.iterdir() if entry.is_dir()]
        entries = [entry for entry in store_folder.iterdir() if entry.is_dir()]
        assert held.exists() and held.parent in entries  # in use: kept
        assert len(entries) <= 1 + KEEP_UNUSED + 1
        first.sync.refresh()
        assert len(first.search(QUERY)) == 3


# -- no writable home ----------------------------------------------------------------

#: Root without the capabilities that override file permissions (as in test_readonly).
WITHOUT_OVERRIDES = [
    "setpriv",
    "--inh-caps=-dac_override,-dac_read_search",
    "--bounding-set=-dac_override,-dac_read_search",
]


def _wrap_for_permissions() -> list[str] | None:
    """The wrapper under which a 0555 folder stops this user; None if there is none."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        return None
    probe = subprocess.run([*WITHOUT_OVERRIDES, "true"], capture_output=True, timeout=30)
    return WITHOUT_OVERRIDES if probe.returncode == 0 else None


def test_without_a_writable_home_a_read_only_store_is_cached_in_a_private_temporary_folder(
    layout: Layout,
) -> None:
    wrap = _wrap_for_permissions()
    if wrap is None:
        pytest.skip("needs a user that file permissions stop (root needs setpriv)")
    home = layout.tmp_path / "home"
    home.mkdir()
    temporary = layout.tmp_path / "tmp"
    temporary.mkdir()
    layout.store_folder.chmod(0o555)  # read-only: its index goes to the cache
    home.chmod(0o555)
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("RESEARCHSTORE_CACHE_DIR", "XDG_CACHE_HOME")
    }
    env.update(HOME=str(home), TMPDIR=str(temporary), PYTHONPATH=str(ROOT))
    try:
        done = subprocess.run(
            [*wrap, sys.executable, "-c", CHILD, str(layout.db), QUERY],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    finally:
        home.chmod(0o755)
        layout.store_folder.chmod(0o755)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["hits"] == 3
    private = temporary / f"researchstore-{os.getuid()}"
    assert Path(answer["index_path"]).is_relative_to(private)
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    assert done.stderr.count(str(private)) == 1, done.stderr  # said once
    assert list(home.iterdir()) == []
