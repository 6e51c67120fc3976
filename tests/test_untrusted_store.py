"""A store file from elsewhere is untrusted input: its own SQL never runs.

Each case is a real store, tampered with through plain sqlite3 as a hostile
sender would: a trigger that undoes a revocation or widens every new key, a
view in place of a table (an endless recursive query; a blob the size the
sender chooses), a table or index defined otherwise, a schema version that
is not a number, tags that are not JSON. Opening, writable or read-only,
refuses a file that holds SQL of its own and names what it found; nothing of
it runs; nothing hangs (an open that could spin runs in a child process with
a timeout). Tags that cannot be read read as none, and ``check`` names them.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from helpers import CLI, FIXTURE_SOURCE, program, run_cli
from starlette.testclient import TestClient

from researchstore import Store, StoreDamaged
from researchstore.serving.auth import create_key
from researchstore.storage.schema import (
    MIGRATIONS,
    SCHEMA_DIGEST,
    SCHEMA_VERSION,
    expected_schema,
    read_schema,
    schema_digest,
)
from researchstore.web import web_app

#: Seconds a child process may take to open a store and search it (a few, here).
OPENING_TIMEOUT = 60
QUERY = "varroa mite"
#: The fixture report QUERY finds (``field-studies/2026/rooftop-bees``).
BEES = 9001
MODES = ["writable", "read-only"]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A closed store of the fixtures holding one API key, and that key."""
    db = tmp_path_factory.mktemp("template") / "r.db"
    with Store(db, progress=False) as store:
        store.ingest(FIXTURE_SOURCE, name="fixtures")
        key = create_key(store, scopes=(), workspaces=())
    return db, key


def copied(template: tuple[Path, str], folder: Path) -> Path:
    """The template's ``.db`` alone, copied into ``folder`` (as a store is sent)."""
    db = folder / "sent.db"
    shutil.copyfile(template[0], db)
    return db


def tamper(db: Path, *statements: str) -> None:
    """Run ``statements`` on ``db`` with plain sqlite3, as whoever sent it could."""
    with closing(sqlite3.connect(db)) as conn, conn:
        for statement in statements:
            conn.execute(statement)


def open_and_search(db: Path, mode: str) -> dict[str, Any]:
    """``programs/open_store.py``'s outcome; a child that spins fails the test."""
    done = subprocess.run(
        [*program("open_store"), str(db), mode, QUERY],
        capture_output=True,
        text=True,
        timeout=OPENING_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    outcome: dict[str, Any] = json.loads(done.stdout)
    return outcome


def rows(db: Path, query: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(query).fetchall()


# -- SQL of the file's own is refused, named, and never run ---------------------

UNREVOKE = (
    "CREATE TRIGGER keys_unrevoke AFTER UPDATE OF revoked_at ON api_keys BEGIN"
    " UPDATE api_keys SET revoked_at = NULL WHERE id = new.id; END"
)
WIDEN = (
    "CREATE TRIGGER keys_widen AFTER INSERT ON api_keys BEGIN"
    " UPDATE api_keys SET scopes = '[\"agent:research\"]', workspaces = '[\"*\"]'"
    " WHERE id = new.id; END"
)
ENDLESS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)"

HOSTILE: dict[str, tuple[tuple[str, ...], str]] = {
    "trigger-undoing-revoke": ((UNREVOKE,), "trigger keys_unrevoke on api_keys"),
    "trigger-widening-new-keys": ((WIDEN,), "trigger keys_widen on api_keys"),
    "meta-as-endless-view": (
        (
            "ALTER TABLE meta RENAME TO meta_kept",
            "CREATE VIEW meta (key, value) AS "
            f"{ENDLESS} SELECT 'schema_version', i FROM n WHERE i < 0",
        ),
        "view meta in place of researchstore's table meta",
    ),
    "reports-as-endless-view": (
        (
            "ALTER TABLE reports RENAME TO reports_kept",
            "CREATE VIEW reports AS SELECT * FROM reports_kept "
            f"WHERE EXISTS ({ENDLESS} SELECT 1 FROM n WHERE i < 0)",
        ),
        "view reports in place of researchstore's table reports",
    ),
    "index-files-as-blob-view": (
        (
            "CREATE TABLE index_kept AS SELECT index_name, name, part FROM index_files",
            "DROP TABLE index_files",
            "CREATE VIEW index_files (index_name, name, part, data) AS "
            "SELECT index_name, name, part, zeroblob(64 << 20) FROM index_kept",
        ),
        "view index_files in place of researchstore's table index_files",
    ),
    "its-own-trigger-rewritten": (
        (
            "DROP TRIGGER chunks_vectors_go",
            "CREATE TRIGGER chunks_vectors_go AFTER DELETE ON chunks BEGIN"
            " DELETE FROM vectors WHERE chunk_rowid = old.id;"
            " DELETE FROM embed_failures WHERE chunk_rowid = old.id; DELETE FROM api_keys; END",
        ),
        "trigger chunks_vectors_go (not as researchstore makes it)",
    ),
    "a-check-added-to-a-table": (
        ("ALTER TABLE api_keys ADD COLUMN note TEXT CHECK (length(zeroblob(1 << 20)) > 0)",),
        "table api_keys (not as researchstore makes it)",
    ),
    "an-index-of-its-own": (
        ("CREATE INDEX chunks_heavy ON chunks (length(zeroblob(1 << 20)))",),
        "index chunks_heavy",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_sql_of_the_files_own_is_refused_by_name_and_never_runs(
    template: tuple[Path, str], tmp_path: Path, case: str, mode: str
) -> None:
    statements, named = HOSTILE[case]
    db = copied(template, tmp_path)
    tamper(db, *statements)
    before = db.read_bytes()
    outcome = open_and_search(db, mode)
    assert "hits" not in outcome, outcome
    assert outcome["error"]["type"] == "StoreDamaged"
    message = outcome["error"]["message"]
    assert message.startswith(f"the store file {db} holds a schema researchstore did not make")
    assert named in message and "Nothing in it was run" in message
    assert db.read_bytes() == before  # not migrated, not converted to WAL, not written
    written = sum(path.stat().st_size for path in tmp_path.rglob("*") if path.is_file())
    assert written < 2 * len(before)  # no blob of the sender's size unpacked beside it


@pytest.mark.parametrize("mode", MODES)
def test_opening_refuses_in_process_with_the_objects_in_its_details(
    template: tuple[Path, str], tmp_path: Path, mode: str
) -> None:
    db = copied(template, tmp_path)
    tamper(db, UNREVOKE, WIDEN)
    with pytest.raises(StoreDamaged) as refused:
        Store(db, progress=False, read_only=mode == "read-only")
    details = refused.value.details or {}
    assert details["objects"] == [
        "trigger keys_unrevoke on api_keys",
        "trigger keys_widen on api_keys",
    ]


@pytest.mark.slow
def test_keys_revoke_never_says_revoked_under_a_trigger_that_undoes_it(
    template: tuple[Path, str], tmp_path: Path
) -> None:
    db = copied(template, tmp_path)
    tamper(db, UNREVOKE)
    (key_id,) = (row[0] for row in rows(db, "SELECT key_id FROM api_keys"))
    done = run_cli("keys", "revoke", str(db), key_id)
    assert done.returncode == StoreDamaged.exit_code == 1, done
    assert "revoked" not in done.stdout
    assert done.stderr.startswith("Error: the store file") and "keys_unrevoke" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_keys_create_makes_no_key_under_a_trigger_that_widens_it(
    template: tuple[Path, str], tmp_path: Path
) -> None:
    db = copied(template, tmp_path)
    tamper(db, WIDEN)
    keys_before = rows(db, "SELECT key_id, scopes, workspaces FROM api_keys")
    done = subprocess.run(
        [*CLI, "keys", "create", str(db)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and "keys_widen" in done.stderr, done
    assert not re.search(r"rsk_[0-9a-f]{12}_", done.stdout)
    assert rows(db, "SELECT key_id, scopes, workspaces FROM api_keys") == keys_before


@pytest.mark.slow
def test_check_reports_sql_of_the_files_own_and_exits_1(
    template: tuple[Path, str], tmp_path: Path
) -> None:
    db = copied(template, tmp_path)
    tamper(db, UNREVOKE)
    done = run_cli("check", str(db))
    assert done.returncode == 1, done
    report = json.loads(done.stdout)
    assert not report["consistent"] and report["integrity"] == "ok"
    assert "trigger keys_unrevoke on api_keys" in report["problems"][0]
    assert "Traceback" not in done.stderr


# -- what a store file may legitimately hold -----------------------------------


def test_the_digest_of_the_current_schema_is_current() -> None:
    made = schema_digest(expected_schema(SCHEMA_VERSION))
    assert made == SCHEMA_DIGEST, (
        f"set SCHEMA_DIGEST in researchstore/storage/schema.py to {made!r}"
    )


@pytest.mark.slow
def test_a_current_store_opens_without_running_the_migrations(
    template: tuple[Path, str], tmp_path: Path
) -> None:
    db = copied(template, tmp_path)
    for mode in MODES:
        outcome = open_and_search(db, mode)
        assert BEES in outcome["hits"] and not outcome["sqlite_utils_imported"], outcome


def older_store(db: Path, version: int) -> None:
    """A store file as a researchstore of schema ``version`` left it (its migrations, run)."""
    import sqlite_utils

    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        for migration in MIGRATIONS[:version]:
            migration(sqlite_utils.Database(conn))
        conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(version),))
        conn.execute("INSERT INTO meta VALUES ('store_uuid', 'older')")


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_a_store_of_every_older_version_is_accepted_and_migrated(
    tmp_path: Path, version: int
) -> None:
    db = tmp_path / "older.db"
    older_store(db, version)
    with Store(db, progress=False, open_indexes=False) as store:
        assert store.store_uuid == "older"
    with closing(sqlite3.connect(db)) as conn:
        assert schema_digest(read_schema(conn)) == SCHEMA_DIGEST


def test_names_quoted_as_sqlite_utils_3_quoted_them_are_researchstores_own(
    tmp_path: Path,
) -> None:
    """sqlite-utils 3 wrote ``[name]`` where 4 writes ``"name"``, and other spacing."""
    made = tmp_path / "made.db"
    older_store(made, SCHEMA_VERSION)
    db = tmp_path / "sqlite-utils-3.db"
    with closing(sqlite3.connect(made)) as source, closing(sqlite3.connect(db)) as conn:
        for (sql,) in source.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite%' "
            "ORDER BY rowid"
        ):
            conn.execute(re.sub(r'"(\w+)"', r"[\1]", sql).replace("\n   ", "\n    "))
        conn.executemany("INSERT INTO meta VALUES (?, ?)", source.execute("SELECT * FROM meta"))
        conn.commit()
    assert "[sources]" in rows(db, "SELECT sql FROM sqlite_master WHERE name = 'sources'")[0][0]
    with Store(db, progress=False, read_only=True, open_indexes=False) as store:
        assert store.store_uuid == "older"


def test_a_sqlite_file_of_another_application_is_not_a_store(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    tamper(db, "CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)")
    done = run_cli("search", str(db), QUERY)
    assert done.returncode == 2, done
    assert f"{db} is not a researchstore store: it holds table photos" in done.stderr
    assert rows(db, "SELECT name FROM sqlite_master") == [("photos",)]  # nothing added


# -- values no researchstore writes ---------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "version", ["abc", "", "9" * 5000, "2.5"], ids=["word", "empty", "huge", "float"]
)
def test_a_schema_version_that_is_not_a_number_is_damage_said_plainly(
    template: tuple[Path, str], tmp_path: Path, version: str, mode: str
) -> None:
    db = copied(template, tmp_path)
    tamper(db, f"UPDATE meta SET value = '{version}' WHERE key = 'schema_version'")
    with pytest.raises(StoreDamaged, match=r"its schema version \(meta.schema_version\) is '"):
        Store(db, progress=False, read_only=mode == "read-only")
    done = run_cli("check", str(db))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done
    assert "is damaged: its schema version" in json.loads(done.stdout)["problems"][0]


@pytest.mark.parametrize(
    "tags",
    ["{not json", "[1, 2]", "null", "[" * 100_000],
    ids=["not-json", "a-list", "null", "deep"],
)
def test_tags_that_are_not_a_json_object_read_as_none_and_check_names_them(
    template: tuple[Path, str], tmp_path: Path, tags: str
) -> None:
    db = copied(template, tmp_path)
    tamper(db, f"UPDATE reports SET tags = '{tags}' WHERE report_id = {BEES}")
    with Store(db, progress=False) as store:
        hits = store.search(QUERY, limit=20)
        assert any(hit["report_id"] == BEES and hit["tags"] == {} for hit in hits)
        assert store.search(QUERY, tags={"season": "spring"}, mode="keyword") is not None
        report = store.get_report(BEES)
        assert report is not None and report["tags"] == {}
        store.rebuild_index()
        assert any(hit["report_id"] == BEES for hit in store.search(QUERY, limit=20))
        checked = store.check()
        assert checked["unreadable_tags"] == [BEES] and not checked["consistent"]
        assert f"tags that are not a JSON object (report {BEES})" in checked["problems"][0]
        with TestClient(web_app(store), base_url="http://127.0.0.1") as client:
            for page in ("/", "/index.json", f"/search?q={QUERY}", "/reports", f"/report/{BEES}"):
                assert client.get(page).status_code == 200, page
    with Store(db, progress=False, read_only=True) as store:
        assert any(hit["report_id"] == BEES for hit in store.search(QUERY, limit=20))


def test_text_that_is_not_utf8_is_damage_said_plainly_on_every_surface(
    template: tuple[Path, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite keeps any bytes as text; Python cannot read them as ``str``. Each surface
    says the store is damaged (no traceback, no bare ``OperationalError``)."""
    db = copied(template, tmp_path)
    tamper(db, f"UPDATE reports SET title = CAST(x'ff' AS TEXT) WHERE report_id = {BEES}")
    done = run_cli("reports", str(db), "--json")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done
    assert f"the store file {db} is damaged (Could not decode to UTF-8" in done.stderr
    with Store(db, progress=False) as store:
        envelope = store.call("research_get_report", {"report_id": BEES})
        assert "is damaged (Could not decode to UTF-8" in envelope["error"]["message"]
        with TestClient(web_app(store), base_url="http://127.0.0.1") as client:
            page = client.get(f"/report/{BEES}", headers={"accept": "application/json"})
            assert "is damaged (Could not decode to UTF-8" in page.json()["error"]["message"]
    assert not [record for record in caplog.records if record.exc_info], caplog.text


@pytest.mark.parametrize("mode", MODES)
def test_a_schema_whose_sql_is_not_utf8_is_damage_not_a_decode_error(
    template: tuple[Path, str], tmp_path: Path, mode: str
) -> None:
    """SQLite's message then quotes bytes Python's sqlite3 cannot decode."""
    db = copied(template, tmp_path)
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute(
            "UPDATE sqlite_master SET sql = CAST(x'435245415445c9' AS TEXT) "
            "WHERE name = 'idx_documents_report_id'"
        )
    with pytest.raises(StoreDamaged, match="malformed database schema"):
        Store(db, progress=False, read_only=mode == "read-only")
    done = run_cli("check", str(db))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done
    assert "malformed database schema" in json.loads(done.stdout)["integrity"]


@pytest.mark.parametrize("start_ms", ['{"season": 5}', -1, 2.5, b"\x00"], ids=repr)
def test_a_caption_time_of_another_type_is_shown_as_none_on_the_pages(
    template: tuple[Path, str], tmp_path: Path, start_ms: object
) -> None:
    db = copied(template, tmp_path)
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE chunks SET start_ms = ?, end_ms = ?", (start_ms, start_ms))
        (chunk_id,) = conn.execute("SELECT chunk_id FROM chunks LIMIT 1").fetchone()
    with Store(db, progress=False) as store:
        with TestClient(web_app(store), base_url="http://127.0.0.1") as client:
            for page in (f"/search?q={QUERY}", f"/chunk/{chunk_id}"):
                assert client.get(page).status_code == 200, page


@pytest.mark.slow
def test_bytes_where_text_belongs_are_answered_as_text_on_every_json_surface(
    template: tuple[Path, str], tmp_path: Path
) -> None:
    """SQLite keeps a blob in any column: every JSON answer carries it as text."""
    from researchstore.serving.settings import dumps

    db = copied(template, tmp_path)
    tamper(
        db, f"UPDATE reports SET title = x'00ff41', updated_at = x'0102' WHERE report_id = {BEES}"
    )
    with Store(db, progress=False) as store:
        envelope = store.call("research_chunk_search", {"query": QUERY, "mode": "keyword"})
        sent = json.loads(dumps(envelope))["result"]["hits"]
        assert {hit["title"] for hit in sent if hit["report_id"] == BEES} == {"\x00\ufffdA"}
        with TestClient(web_app(store), base_url="http://127.0.0.1") as client:
            for page in (f"/search.json?q={QUERY}", "/reports.json", f"/report/{BEES}"):
                assert client.get(page).status_code == 200, page
    for command in (["reports", str(db), "--json"], ["export", str(db)]):
        done = run_cli(*command)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (command, done.stderr)
