"""Read-only stores: a read-only mount, folder or file serves every read tool.

A store that cannot be written (a read-only bind mount, a folder the reader
may not write, a file it may not write) opens without writing a byte beside
itself: SQLite opens it read-only, no writer lock is taken, and its word
index is used where it is when it can be, else built in the cache directory.
Every read tool works through ``Store``, the command line and the MCP server
over stdio and HTTP; every write is refused with ``StoreReadOnly`` (exit 2).
And every process that writes leaves the store checkpointed, so the ``.db``
alone is complete: the HTTP server stopped with SIGTERM too.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    CLI,
    FIXTURE_SOURCE,
    mcp_call,
    mcp_http_server,
    mcp_open_session,
    program,
    session_of,
)

from researchstore import InvalidInput, Store, StoreReadOnly
from researchstore.errors import EXIT_CODES
from researchstore.serving.auth import create_key
from researchstore.storage.cache_dir import cache_root
from researchstore.storage.schema import SCHEMA_VERSION

BIND_READ_ONLY = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"'


def build(folder: Path) -> tuple[Path, str]:
    """A store of the fixtures in ``folder``, with an API key; closed (checkpointed)."""
    db = folder / "r.db"
    with Store(db, progress=False) as store:
        store.ingest(FIXTURE_SOURCE, name="fixtures")
        key = create_key(store, scopes=("agent:research",), workspaces=("*",))
    return db, key


def _can_bind_read_only() -> bool:
    try:
        with tempfile.TemporaryDirectory() as folder:
            probe = subprocess.run(
                ["unshare", "--mount", "--propagation", "private", "sh", "-c", BIND_READ_ONLY]
                + ["sh", folder, "true"],
                capture_output=True,
                timeout=30,
            )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


#: Root without the capabilities that override file permissions: a 0555 folder
#: or a 0444 file stops it as it stops any other user.
WITHOUT_OVERRIDES = [
    "setpriv",
    "--inh-caps=-dac_override,-dac_read_search",
    "--bounding-set=-dac_override,-dac_read_search",
]


def _can_drop_overrides() -> bool:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    try:
        probe = subprocess.run([*WITHOUT_OVERRIDES, "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def tour(db: Path, key: str, work: Path, *, wrap: list[str]) -> dict[str, Any]:
    """Run the read-only tour on ``db`` (inside ``wrap``); its outcome."""
    env = {**os.environ, "RESEARCHSTORE_CACHE_DIR": str(work / "cache")}
    done = subprocess.run(
        [*wrap, *program("read_only_tour"), str(db), key, str(work)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    steps: dict[str, Any] = json.loads(done.stdout)
    return steps


def assert_reads_work_and_writes_are_refused(steps: dict[str, Any], db: Path) -> None:
    refusal = f"the store {db} is read-only"
    store = steps["store"]
    assert store["search"] and store["get_chunk"] and store["next"] and store["neighbors"]
    assert store["get_chunks"] == 1 and store["document_chunks"] >= 1
    assert store["parents"] and store["document"] and store["report"] and store["resolve"]
    assert store["check"]["consistent"], store["check"]
    for name, refused in store["refused"].items():
        assert refused is not None and refused["type"] == "StoreReadOnly", (name, refused)
        assert refused["message"].startswith(refusal), (name, refused)
    error = store["retrieve"]["error"]
    assert error["code"] == "invalid_input" and error["message"].startswith(refusal)

    cli = steps["cli"]
    search = json.loads(cli["search"]["stdout"])["result"]["hits"]
    assert [hit["chunk_id"] for hit in search][:3] == store["search"]
    for name in ("search", "call", "chunk", "doc", "check"):
        assert cli[name]["rc"] == 0, (name, cli[name])
    assert json.loads(cli["call"]["stdout"])["result"]["chunk"]["chunk_id"] == store["chunk_id"]
    for name in ("ingest", "reingest", "embed", "keys_create", "retrieve"):
        assert cli[name]["rc"] == StoreReadOnly.exit_code == 2, (name, cli[name])
        assert cli[name]["stderr"].startswith(f"Error: {refusal}"), (name, cli[name])
    for name, step in cli.items():
        assert "Traceback" not in step["stderr"], (name, step["stderr"])

    for page, status in steps["web"].items():  # the pages for people
        assert status == (303 if page == f"/chunk/{store['chunk_id']}" else 200), (page, status)

    stdio = steps["stdio"]
    assert [hit["chunk_id"] for hit in stdio["search"]["result"]["hits"]][:3] == store["search"]
    assert stdio["get_chunk"]["result"]["chunk"]["chunk_id"] == store["chunk_id"]
    assert stdio["ingest_file"]["error"]["code"] == "invalid_input"
    assert stdio["ingest_file"]["error"]["message"].startswith(refusal)

    http = steps["http"]
    hits = http["research_chunk_search"]["result"]["hits"]
    assert [hit["chunk_id"] for hit in hits][:3] == store["search"]
    assert http["research_get_chunk"]["result"]["chunk"]["chunk_id"] == store["chunk_id"]
    assert http["get_chunk_next"]["result"]["found"]
    assert "Traceback" not in http["log"], http["log"]


@pytest.mark.slow
def test_a_read_only_bind_mount_serves_every_read_tool_and_refuses_writes(
    tmp_path: Path,
) -> None:
    if not _can_bind_read_only():
        pytest.skip("needs root and a private mount namespace to bind a folder read-only")
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    db, key = build(mounted)
    before = sorted(entry.name for entry in mounted.iterdir())
    assert f"{db.name}-wal" not in before  # closed, so checkpointed
    work = tmp_path / "work"
    work.mkdir()
    wrap = ["unshare", "--mount", "--propagation", "private", "sh", "-c", BIND_READ_ONLY]
    steps = tour(db, key, work, wrap=[*wrap, "sh", str(mounted)])
    assert steps["store"]["reason"] == "a read-only mount"
    assert_reads_work_and_writes_are_refused(steps, db)
    # Tantivy cannot take its lock in the read-only index folder: the cache holds a copy.
    assert Path(steps["store"]["index_path"]).is_relative_to(work / "cache")
    [built] = steps["store"]["check"]["repaired_on_open"]
    assert built.startswith(
        f"index written in {steps['store']['index_path']} from the copy the store file "
        "keeps: the store is read-only"
    )
    assert steps["left_beside"] == before  # no -wal, -shm or lock file could be made


@pytest.mark.slow
def test_a_read_only_folder_serves_every_read_tool_and_refuses_writes(tmp_path: Path) -> None:
    if not _can_drop_overrides():
        pytest.skip("needs root and setpriv to read as a user that file permissions stop")
    store_folder = tmp_path / "store"
    store_folder.mkdir()
    db, key = build(store_folder)
    before = sorted(entry.name for entry in store_folder.iterdir())
    (tmp_path / "work").mkdir()
    store_folder.chmod(0o555)
    try:
        steps = tour(db, key, tmp_path / "work", wrap=WITHOUT_OVERRIDES)
    finally:
        store_folder.chmod(0o755)
    assert steps["store"]["reason"] == "a read-only folder"
    assert_reads_work_and_writes_are_refused(steps, db)
    assert steps["left_beside"] == before


@pytest.mark.slow
def test_a_read_only_file_serves_every_read_tool_and_refuses_writes(tmp_path: Path) -> None:
    if not _can_drop_overrides():
        pytest.skip("needs root and setpriv to read as a user that file permissions stop")
    store_folder = tmp_path / "store"
    store_folder.mkdir()
    db, key = build(store_folder)
    before = {entry.name for entry in store_folder.iterdir()}
    (tmp_path / "work").mkdir()
    db.chmod(0o444)  # its folder can be written: SQLite makes its -shm there
    steps = tour(db, key, tmp_path / "work", wrap=WITHOUT_OVERRIDES)
    assert steps["store"]["reason"] == "a read-only file"
    assert_reads_work_and_writes_are_refused(steps, db)
    assert wal_bytes(db) == 0
    assert set(steps["left_beside"]) - before <= {f"{db.name}-shm", f"{db.name}-wal"}


# -- without root: a store opened read-only ------------------------------------------


@pytest.mark.slow
def test_a_store_opened_read_only_reads_and_refuses_every_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESEARCHSTORE_CACHE_DIR", str(tmp_path / "cache"))
    db, key = build(tmp_path)
    with Store(db, progress=False) as store:
        expected = [hit["chunk_id"] for hit in store.search("varroa mite")]
    with Store(db, read_only=True, progress=False) as store:
        assert store.read_only and store.read_only_reason == "opened read-only"
        assert [hit["chunk_id"] for hit in store.search("varroa mite")] == expected
        with pytest.raises(StoreReadOnly, match="read-only"):
            store.ingest(FIXTURE_SOURCE, name="fixtures")
        with pytest.raises(StoreReadOnly):
            create_key(store)
        with pytest.raises(StoreReadOnly):
            store.drop_vectors()
        assert store.check()["consistent"]
    assert StoreReadOnly.code == "invalid_input" and EXIT_CODES["invalid_input"] == 2
    assert wal_bytes(db) == 0


@pytest.mark.slow
def test_pending_index_work_waits_on_a_read_only_store_and_check_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESEARCHSTORE_CACHE_DIR", str(tmp_path / "cache"))
    db, _ = build(tmp_path)
    with sqlite3.connect(db) as conn:  # a change the index has yet to follow
        report_id = conn.execute("SELECT min(report_id) FROM reports").fetchone()[0]
        conn.execute(
            "INSERT INTO index_pending (report_id, queued_at) VALUES (?, '2026-01-01')",
            (report_id,),
        )
    conn.close()
    with Store(db, read_only=True, progress=False) as store:
        assert store.search("varroa mite")
        report = store.check()
        assert report["pending"] == 1 and not report["consistent"]
        assert "cannot be applied: the store is read-only" in report["problems"][0]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM index_pending").fetchone()[0] == 1
    conn.close()


@pytest.mark.slow
def test_a_read_only_store_that_needs_a_migration_is_refused(tmp_path: Path) -> None:
    db, _ = build(tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE meta SET value = CAST(value AS INTEGER) - 1 WHERE key = 'schema_version'"
        )
    conn.close()
    with pytest.raises(StoreReadOnly, match="needs migrating to version"):
        Store(db, read_only=True)
    with sqlite3.connect(db) as conn:  # untouched
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    conn.close()
    assert int(version[0]) == SCHEMA_VERSION - 1


def test_no_store_where_none_can_be_made_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no store at"):
        Store(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()


def test_the_cache_directory_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCHSTORE_CACHE_DIR", "/somewhere/cache")
    assert cache_root() == Path("/somewhere/cache")
    monkeypatch.delenv("RESEARCHSTORE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert cache_root() == Path("/xdg/researchstore")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", "/home/reader")
    assert cache_root() == Path("/home/reader/.cache/researchstore")


# -- every writer leaves the store checkpointed -------------------------------------


def wal_bytes(db: Path) -> int:
    wal = db.with_name(db.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def copied_alone(db: Path, folder: Path) -> Path:
    """The ``.db`` file copied alone into ``folder``, as a sandbox receives it."""
    folder.mkdir()
    return Path(shutil.copy2(db, folder / db.name))


@pytest.mark.slow
def test_the_http_server_stopped_by_sigterm_leaves_its_last_write_in_the_db(
    tmp_path: Path,
) -> None:
    import httpx

    db, key = build(tmp_path)
    with mcp_http_server(db, tmp_path / "http.log") as url, httpx.Client(timeout=60) as client:
        session = session_of(mcp_open_session(client, url, key))
        response = mcp_call(client, url, key, session, "research_chunk_search", {"query": "bees"})
        assert response.status_code == 200
        assert wal_bytes(db) > 0  # the key's last-used time, not yet merged
    # mcp_http_server stopped it with SIGTERM.
    assert wal_bytes(db) == 0
    copy = copied_alone(db, tmp_path / "copy")
    with sqlite3.connect(copy) as conn:
        (stamped,) = conn.execute("SELECT last_used_at FROM api_keys").fetchone()
    conn.close()
    assert stamped is not None
    assert "Traceback" not in (tmp_path / "http.log").read_text()


@pytest.mark.slow
def test_the_stdio_server_stopped_by_sigterm_leaves_the_store_checkpointed(
    tmp_path: Path,
) -> None:
    db, _ = build(tmp_path)
    server = subprocess.Popen(
        [*CLI, "serve", str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    hello = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "tests", "version": "1"},
        },
    }
    server.stdin.write(json.dumps(hello) + "\n")
    server.stdin.flush()
    assert json.loads(server.stdout.readline())["id"] == 0  # serving, the store open
    with sqlite3.connect(db) as conn:  # a write by another process, left in -wal
        conn.execute("UPDATE meta SET value = value WHERE key = 'store_uuid'")
        conn.execute("INSERT INTO meta (key, value) VALUES ('written_while_serving', '1')")
    conn.close()
    assert wal_bytes(db) > 0
    server.send_signal(signal.SIGTERM)
    _, errors = server.communicate(timeout=30)
    assert server.returncode == 128 + signal.SIGTERM, errors
    assert "Traceback" not in errors
    assert wal_bytes(db) == 0
    with sqlite3.connect(copied_alone(db, tmp_path / "copy")) as conn:
        found = conn.execute("SELECT value FROM meta WHERE key = 'written_while_serving'")
        assert found.fetchone() is not None
    conn.close()
