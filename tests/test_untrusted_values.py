"""A store file from elsewhere: no value in it is trusted blindly.

Each case is a real store, tampered with through plain sqlite3 as a hostile
sender would, then opened, searched, read, listed, exported and served
(the web pages, the tools), writable and read-only where both apply:

1. JSON columns (tags, heading paths, skipped files, run summaries, an API
   key's rights, evidence receipts) holding text that is not JSON, JSON of
   another shape, a blob or a number read as empty or unknown; a key whose
   rights cannot be read grants none.
2. Numbers in ``meta`` (what each index applied and packed, the last change
   queued, the retention) that no researchstore writes: derived data is
   rebuilt; the vectors' dimension, which names their model, is
   ``StoreDamaged`` said plainly.
3. Links (and other files) where the store's lock and temporary files go
   are never written through.
4. Without a writable home, the records of what was built here and the
   language model's cache fall back to a private temporary folder.
5. A store file replaced while a ``Store`` has it open is never read
   through the new name, nor stamped by a key's use.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import threading
import uuid
from collections.abc import Callable
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import FIXTURE_SOURCE, WORKSPACE, HashingEmbedder, long_text, ok, write_report
from starlette.testclient import TestClient

from researchstore import InvalidInput, Store, StoreClosed, StoreDamaged, call_tool
from researchstore.cli import main
from researchstore.errors import NotEntitled
from researchstore.evidence.config import RetrievalConfig
from researchstore.serving.auth import authenticate, create_key, list_keys
from researchstore.web import web_app

QUERY = "varroa mite"
#: The fixture report QUERY finds (``field-studies/2026/rooftop-bees``).
BEES = 9001
MODES = ["writable", "read-only"]
API_KEY_HEADER = "x-api-key"

#: Values no researchstore writes in a JSON column, by what they are.
NOT_JSON: dict[str, object] = {
    "not-json": "{not json",
    "deep": "[" * 100_000,
    "a-blob": b"\xff\xfe\x00junk",
    "a-number": 7,
}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A closed store of the fixtures (its index beside it) with a key of every right."""
    db = tmp_path_factory.mktemp("template") / "r.db"
    with Store(db, progress=False) as store:
        store.ingest(FIXTURE_SOURCE, name="fixtures")
        key = create_key(store, scopes=("agent:research",), workspaces=("*",))
    return db, key


def copied(template: tuple[Path, str], folder: Path, *, with_index: bool = False) -> Path:
    """The template's ``.db`` (and its index folder) copied into ``folder``, as sent."""
    db = folder / "sent.db"
    shutil.copyfile(template[0], db)
    if with_index:
        shutil.copytree(template[0].with_name("r.db.index"), folder / "sent.db.index")
    return db


def tamper(db: Path, sql: str, *parameters: object) -> None:
    """Run ``sql`` on ``db`` with plain sqlite3, as whoever sent it could."""
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(sql, parameters)


def opened(db: Path, mode: str, **options: Any) -> Store:
    return Store(db, progress=False, read_only=mode == "read-only", **options)


def pages_answer(store: Store, *pages: str) -> None:
    """Every page answers 200 (a value that crashed one would raise here)."""
    with TestClient(web_app(store), base_url="http://127.0.0.1") as client:
        for page in pages:
            assert client.get(page).status_code == 200, page


def cli(*args: str) -> Any:
    done = CliRunner().invoke(main, list(args))
    assert done.exception is None or isinstance(done.exception, SystemExit), done.output
    assert done.exit_code == 0, done.output
    return done


# -- 1: JSON columns -----------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "junk", [*NOT_JSON.values(), '["a", 2]', '{"a": "b"}'], ids=[*NOT_JSON, "mixed", "object"]
)
def test_a_heading_path_that_is_not_a_list_of_strings_reads_as_none(
    template: tuple[Path, str], tmp_path: Path, junk: object, mode: str
) -> None:
    db = copied(template, tmp_path)
    tamper(db, "UPDATE chunks SET heading_path = ?", junk)
    with opened(db, mode) as store:
        hits = store.search(QUERY, limit=5)
        assert hits and all(hit["heading_path"] == [] for hit in hits)
        chunk_id, document_id = hits[0]["chunk_id"], hits[0]["document_id"]
        chunk = store.get_chunk(chunk_id)
        assert chunk is not None and chunk["heading_path"] == []
        assert ok(store.call("research_get_chunk", {"chunk_id": chunk_id}))["chunk"]
        assert ok(store.call("get_document_chunks", {"id": document_id}))["chunks"]
        pages_answer(store, f"/search?q={QUERY}", f"/document/{document_id}", f"/chunk/{chunk_id}")
    exported = tmp_path / "out.jsonl"
    cli("export", str(db), "--output", str(exported))
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    assert rows and all(row["heading_path"] == [] for row in rows)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("junk", [*NOT_JSON.values(), "[1, 2]"], ids=[*NOT_JSON, "numbers"])
def test_skipped_files_that_cannot_be_read_read_as_none(
    template: tuple[Path, str], tmp_path: Path, junk: object, mode: str
) -> None:
    db = copied(template, tmp_path)
    tamper(db, "UPDATE documents SET skipped = ?", junk)
    with opened(db, mode) as store:
        document_id = store.search(QUERY, limit=1)[0]["document_id"]
        document = store.get_document(document_id)
        assert document is not None and document["skipped"] == []
        assert "result" in store.call("get_document", {"id": document_id})
        pages_answer(store, f"/document/{document_id}")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "junk",
    ["{not json", "[" * 100_000, b"\xff", '{"new": "many", "failures": 5}', '{"failures": [1]}'],
    ids=["not-json", "deep", "a-blob", "odd-counts", "odd-failures"],
)
def test_a_run_summary_that_cannot_be_read_reads_as_empty(
    template: tuple[Path, str], tmp_path: Path, junk: object, mode: str
) -> None:
    db = copied(template, tmp_path)
    tamper(db, "UPDATE source_versions SET summary = ?", junk)
    with opened(db, mode) as store:
        pages_answer(store, "/", "/index.json")
    listed = json.loads(cli("sources", str(db), "--json").output)["sources"]
    cli("sources", str(db))
    assert listed and all(source["last_run"]["counts"] == {} for source in listed), listed


@pytest.mark.parametrize("junk", [*NOT_JSON.values(), "[1, 2]"], ids=[*NOT_JSON, "a-list"])
def test_tags_that_cannot_be_read_are_listed_and_exported_as_none(
    template: tuple[Path, str], tmp_path: Path, junk: object
) -> None:
    db = copied(template, tmp_path)
    tamper(db, "UPDATE reports SET tags = ? WHERE report_id = ?", junk, BEES)
    listed = json.loads(cli("reports", str(db), "--json").output)["reports"]
    cli("reports", str(db))
    assert [report["tags"] for report in listed if report["report_id"] == BEES] == [{}]
    exported = tmp_path / "out.jsonl"
    cli("export", str(db), "--output", str(exported))
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    assert {json.dumps(row["tags"]) for row in rows if row["report_id"] == BEES} == {"{}"}
    assert any(row["tags"] for row in rows if row["report_id"] != BEES)
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    cli("export", str(db), "--output", str(tmp_path / "out.parquet"), "--format", "parquet")
    table = pq.read_table(tmp_path / "out.parquet").to_pylist()
    assert {row["tags"] for row in table if row["report_id"] == BEES} == {"{}"}


@pytest.mark.parametrize("column", ["scopes", "workspaces"])
@pytest.mark.parametrize(
    "junk",
    [*NOT_JSON.values(), '"agent:research"', '["agent:research", "*", 5]', '{"*": 1}'],
    ids=[*NOT_JSON, "a-string", "mixed", "an-object"],
)
def test_a_key_whose_rights_cannot_be_read_grants_none(
    template: tuple[Path, str], tmp_path: Path, column: str, junk: object
) -> None:
    db = copied(template, tmp_path)
    key = template[1]
    tamper(db, f"UPDATE api_keys SET {column} = ?", junk)
    with Store(db, progress=False) as store:
        principal = authenticate(store, key)
        assert principal is not None  # the key is one, holding no right
        assert principal.scopes == frozenset() and principal.workspaces == frozenset()
        with pytest.raises(NotEntitled):
            principal.require("agent:research", WORKSPACE)
        assert list_keys(store)[0][column] == []
        with TestClient(web_app(store, require_key=True), base_url="http://127.0.0.1") as client:
            assert client.get("/", headers={API_KEY_HEADER: key}).status_code == 200
    assert key.split("_")[1] in cli("keys", "list", str(db)).output


@pytest.mark.parametrize("column", ["salt", "secret_hash"])
def test_a_key_whose_hash_is_not_bytes_opens_nothing(
    template: tuple[Path, str], tmp_path: Path, column: str
) -> None:
    db = copied(template, tmp_path)
    tamper(db, f"UPDATE api_keys SET {column} = 'text'")
    with Store(db, progress=False) as store:
        assert authenticate(store, template[1]) is None
        with TestClient(web_app(store, require_key=True), base_url="http://127.0.0.1") as client:
            response = client.get("/", headers={API_KEY_HEADER: template[1]})
            assert response.status_code in (401, 403), response.status_code


def _never_fetch(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a stored receipt was answered with a fetch")


RECEIPT_URL = "https://evidence.test/article.html"
RECEIPT_ARGUMENTS = json.dumps(
    {"url": RECEIPT_URL, "kind": "url_text", "language": None}, sort_keys=True
)


def _receipt(db: Path, **values: object) -> str:
    """A receipt row as a hostile sender may write it; its mutation id."""
    now = datetime.now(UTC)
    row: dict[str, object] = {
        "id": str(uuid.uuid4()),
        "workspace_id": WORKSPACE,
        "mutation_id": str(uuid.uuid4()),
        "arguments": RECEIPT_ARGUMENTS,
        "state": "completed",
        "kind": "url_text",
        "created_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "settled_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "valid_until": (now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "result": None,
        "evidence_id": None,
        "evidence_revision": None,
        "owner": "{}",
        **values,
    }
    columns, marks = ", ".join(row), ", ".join("?" * len(row))
    tamper(db, f"INSERT INTO retrievals ({columns}) VALUES ({marks})", *row.values())
    return str(row["mutation_id"])


RECEIPTS: dict[str, tuple[dict[str, object], Callable[[dict[str, Any]], bool]]] = {
    "result-not-json": (
        {"result": "{not json"},
        lambda answer: answer["retrieval"]["result"] is None,
    ),
    "result-a-blob": ({"result": b"\xff"}, lambda answer: answer["retrieval"]["result"] is None),
    "valid-until-junk": (
        {"valid_until": "tomorrow"},
        lambda answer: answer["retrieval"]["state"] == "expired",
    ),
    "created-at-junk": (
        {"state": "running", "created_at": "a while ago", "settled_at": None},
        lambda answer: answer["retrieval"]["state"] == "unconfirmed",
    ),
    "owner-a-list": (
        {"state": "running", "settled_at": None, "owner": "[1, 2]"},
        lambda answer: answer["retrieval"]["state"] == "unconfirmed",
    ),
    "owner-pid-huge": (
        {"state": "running", "settled_at": None, "owner": "PLACEHOLDER"},
        lambda answer: answer["retrieval"]["state"] == "unconfirmed",
    ),
}


@pytest.mark.parametrize("case", sorted(RECEIPTS))
def test_a_receipt_that_cannot_be_read_is_answered_never_crashing(
    template: tuple[Path, str], tmp_path: Path, case: str
) -> None:
    import socket

    values, expected = RECEIPTS[case]
    if values.get("owner") == "PLACEHOLDER":
        values = {**values, "owner": json.dumps({"host": socket.gethostname(), "pid": 10**30})}
    db = copied(template, tmp_path)
    mutation = _receipt(db, **values)
    config = RetrievalConfig(fetcher=_never_fetch)
    with Store(db, progress=False, retrieval=config) as store:
        envelope = call_tool(
            store,
            "research_evidence_retrieve",
            {
                "url": RECEIPT_URL,
                "kind": "url_text",
                "workspace_id": WORKSPACE,
                "mutation_id": mutation,
            },
        )
    assert "result" in envelope, envelope
    assert expected(envelope["result"]), envelope


def test_a_receipt_of_other_arguments_that_cannot_be_read_is_refused_plainly(
    template: tuple[Path, str], tmp_path: Path
) -> None:
    db = copied(template, tmp_path)
    mutation = _receipt(db, arguments="{not json")
    with Store(db, progress=False, retrieval=RetrievalConfig(fetcher=_never_fetch)) as store:
        envelope = call_tool(
            store,
            "research_evidence_retrieve",
            {
                "url": RECEIPT_URL,
                "kind": "url_text",
                "workspace_id": WORKSPACE,
                "mutation_id": mutation,
            },
        )
    assert envelope["error"]["code"] == "invalid_input", envelope
    assert envelope["error"]["field"] == "mutation_id"
    assert envelope["error"]["details"]["arguments"] is None


# -- 2: numbers in meta ----------------------------------------------------------------

JUNK_NUMBERS = {"word": "abc", "huge": "9" * 5000, "float": "1.5"}
#: Where each number is read: what an index applied, against the folder beside the
#: store; what its copy in the file reflects, when the file comes alone.
READ_WHERE = {"index_applied_seq": True, "index_packed_seq": False}


def _more(tmp_path: Path) -> Path:
    """A source of one report that ``QUERY`` finds."""
    report = write_report(
        tmp_path / "more",
        "hives",
        title="Hive notes",
        date="2026-04-01",
        tags={},
        files={"notes.txt": "The varroa mite count at the hives was low."},
    )
    return report.parent


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("key", "junk"),
    [
        *((key, junk) for key in READ_WHERE for junk in JUNK_NUMBERS.values()),
        ("index_packed_seq", ""),  # what an index applied reads "" as none (0)
    ],
    ids=[*(f"{key}-{name}" for key in READ_WHERE for name in JUNK_NUMBERS), "packed-empty"],
)
def test_a_sequence_number_no_researchstore_writes_rebuilds_the_index(
    template: tuple[Path, str], tmp_path: Path, junk: str, key: str, mode: str
) -> None:
    db = copied(template, tmp_path, with_index=READ_WHERE[key])
    tamper(db, "UPDATE meta SET value = ? WHERE key = ?", junk, key)
    with opened(db, mode) as store:
        assert BEES in {hit["report_id"] for hit in store.search(QUERY, limit=10)}
        assert store.check()["integrity"] == "ok"
        if mode == "writable":
            store.ingest(_more(tmp_path), name="more")
            assert len(store.search(QUERY, limit=20)) > 1
    if mode == "writable":
        with closing(sqlite3.connect(db)) as conn:
            value = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0]
        assert value.isdigit() and len(value) < 19, value  # written again, as a number


@pytest.mark.parametrize("junk", list(JUNK_NUMBERS.values()), ids=list(JUNK_NUMBERS))
def test_a_number_left_for_an_index_the_store_does_not_keep_never_stops_a_write(
    template: tuple[Path, str], tmp_path: Path, junk: str
) -> None:
    db = copied(template, tmp_path, with_index=True)
    tamper(db, "INSERT INTO meta (key, value) VALUES ('vectors_applied_seq', ?)", junk)
    with Store(db, progress=False) as store:
        store.ingest(_more(tmp_path), name="more")  # its commit forgets what was applied
        assert len(store.search(QUERY, limit=20)) > 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("junk", ["abc", "2.5", b"\x01"], ids=["word", "float", "a-blob"])
def test_a_last_change_number_no_researchstore_writes_never_crashes(
    template: tuple[Path, str], tmp_path: Path, junk: object, mode: str
) -> None:
    db = copied(template, tmp_path, with_index=True)
    tamper(db, "UPDATE sqlite_sequence SET seq = ? WHERE name = 'index_pending'", junk)
    with opened(db, mode) as store:
        assert BEES in {hit["report_id"] for hit in store.search(QUERY, limit=10)}
        if mode == "writable":
            store.ingest(_more(tmp_path), name="more")
            assert len(store.search(QUERY, limit=20)) > 1


@pytest.mark.parametrize("junk", ["abc", "nan", "inf", "1e308", "-5", "0"])
def test_a_retention_no_researchstore_writes_is_the_default(
    template: tuple[Path, str], tmp_path: Path, junk: str
) -> None:
    db = copied(template, tmp_path)
    tamper(db, "INSERT INTO meta (key, value) VALUES ('forwarding_retention_days', ?)", junk)
    a_day_ago = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    tamper(
        db,
        "INSERT INTO chunk_history (chunk_id, report_id, document_path, position, char_start, "
        "char_end, text_hash, reason, retired_at, retired_by) "
        "SELECT 'gone', ?, 'x', 0, 0, 1, 'h', 'r', ?, max(id) FROM source_versions",
        BEES,
        a_day_ago,
    )
    with Store(db, progress=False) as store:
        store.ingest(_more(tmp_path), name="more")  # each run prunes the forwarding record
    with closing(sqlite3.connect(db)) as conn:
        kept = conn.execute("SELECT count(*) FROM chunk_history WHERE chunk_id = 'gone'")
        assert kept.fetchone()[0] == 1  # a day old is within the default 30 days


@pytest.fixture(scope="module")
def with_vectors(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed store with vectors (of ``HashingEmbedder``)."""
    folder = tmp_path_factory.mktemp("vectors")
    source = folder / "source"
    for number in range(3):
        write_report(
            source,
            f"r{number}",
            title=f"Colony notes {number}",
            date="2026-03-01",
            tags={},
            files={"notes.txt": long_text(4, seed=number)},
        )
    db = folder / "v.db"
    with Store(db, progress=False, embedder=HashingEmbedder()) as store:
        store.ingest(source, name="s")
        store.embed()
    return db


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "junk", ["abc", "", "9" * 5000, "-3"], ids=["word", "empty", "huge", "neg"]
)
def test_a_vector_dimension_no_researchstore_writes_is_damage_said_plainly(
    with_vectors: Path, tmp_path: Path, junk: str, mode: str
) -> None:
    db = tmp_path / "v.db"
    shutil.copyfile(with_vectors, db)
    tamper(db, "UPDATE meta SET value = ? WHERE key = 'vector_dim'", junk)
    damage = r"the dimension of its vectors \(meta.vector_dim\) is '.*', not a number"
    with opened(db, mode, embedder=HashingEmbedder()) as store:
        for search_mode in ("semantic", "hybrid"):
            with pytest.raises(StoreDamaged, match=damage):
                store.search("colony", limit=5, mode=search_mode)
            envelope = store.call("research_chunk_search", {"query": "colony", "mode": search_mode})
            assert "meta.vector_dim" in envelope["error"]["message"], envelope
        assert store.search("colony", limit=5)  # by words: what needs no model
        pages_answer(store, "/", "/index.json", "/search?q=colony", "/search.json?q=colony")
        problems = store.check()["problems"]
        assert any("meta.vector_dim" in problem for problem in problems), problems
        if mode == "writable":
            store.drop_vectors()  # what the message says to do
            assert store.search("colony", limit=5)


# -- 3: links where the store's own files go ---------------------------------------------


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "elsewhere" / "precious"
    victim.parent.mkdir(exist_ok=True)
    victim.write_text("keep me\n")
    return victim


@pytest.mark.parametrize("what", ["link", "hard-link", "fifo", "folder"])
def test_a_lock_file_that_is_no_plain_file_is_refused_never_written_through(
    template: tuple[Path, str], tmp_path: Path, what: str
) -> None:
    db = copied(template, tmp_path)  # the file alone: opening writes its index back
    victim = _victim(tmp_path)
    lock = db.with_name(db.name + ".lock")
    if what == "link":
        lock.symlink_to(victim)
    elif what == "hard-link":
        os.link(victim, lock)
    elif what == "fifo":
        os.mkfifo(lock)
    else:
        lock.mkdir()
    with pytest.raises(InvalidInput, match=r"writer lock .*\.lock cannot be taken"):
        Store(db, progress=False)
    assert victim.read_text() == "keep me\n"
    done = CliRunner().invoke(main, ["search", str(db), QUERY])
    assert done.exit_code == 2 and "writer lock" in done.output, done.output
    # Read-only, no lock is taken: the store is read.
    with Store(db, progress=False, read_only=True) as store:
        assert store.search(QUERY, limit=5)
    assert victim.read_text() == "keep me\n"


def test_a_link_where_a_rebuild_folder_goes_is_removed_not_followed(
    template: tuple[Path, str], tmp_path: Path
) -> None:
    db = copied(template, tmp_path, with_index=True)
    victim = tmp_path / "elsewhere"
    victim.mkdir()
    (victim / "precious").write_text("keep me\n")
    for name in (f".index.rebuild-{os.getpid()}", f".index.old-{os.getpid()}"):
        db.with_name(db.name + name).symlink_to(victim, target_is_directory=True)
    with Store(db, progress=False) as store:
        store.rebuild_index()
        assert store.search(QUERY, limit=5)
        assert not store.index_path.is_symlink()
    assert sorted(path.name for path in victim.iterdir()) == ["precious"]
    assert (victim / "precious").read_text() == "keep me\n"


def test_an_index_folder_that_is_a_link_is_rebuilt_in_a_folder_of_its_own(
    template: tuple[Path, str], tmp_path: Path
) -> None:
    db = copied(template, tmp_path)
    victim = tmp_path / "elsewhere" / "index"
    shutil.copytree(template[0].with_name("r.db.index"), victim)  # as current as can be
    db.with_name(db.name + ".index").symlink_to(victim, target_is_directory=True)
    before = {path.name: path.stat().st_mtime_ns for path in victim.iterdir()}
    with Store(db, progress=False) as store:
        assert BEES in {hit["report_id"] for hit in store.search(QUERY, limit=10)}
        assert not store.index_path.is_symlink() and store.index_path.is_dir()
        assert any("a link to another folder" in note for note in store.sync.repairs)
        store.ingest(_more(tmp_path), name="more")
    assert {path.name: path.stat().st_mtime_ns for path in victim.iterdir()} == before


@pytest.mark.parametrize("name", ["../../elsewhere/precious", "{victim}", "..", "a/b"])
def test_an_index_folder_whose_managed_files_lead_outside_it_is_rebuilt(
    template: tuple[Path, str], tmp_path: Path, name: str
) -> None:
    # Tantivy deletes every file its .managed.json lists once no segment uses it.
    db = copied(template, tmp_path, with_index=True)
    victim = _victim(tmp_path)
    managed = db.with_name(db.name + ".index") / ".managed.json"
    listed = json.loads(managed.read_text())
    managed.write_text(json.dumps([*listed, name.format(victim=victim)]))
    with Store(db, progress=False) as store:
        assert BEES in {hit["report_id"] for hit in store.search(QUERY, limit=10)}
        assert any(".managed.json names" in note for note in store.sync.repairs)
        store.ingest(_more(tmp_path), name="more")  # a commit: Tantivy collects garbage
        store.rebuild_index()
    assert victim.read_text() == "keep me\n"


def test_links_where_the_vector_index_writes_are_never_written_through(
    with_vectors: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "store"
    shutil.copytree(with_vectors.parent, folder, ignore=shutil.ignore_patterns("source"))
    db = folder / with_vectors.name
    with Store(db, progress=False, embedder=HashingEmbedder()) as store:
        vectors = store.vector_index().path
    generation = json.loads((vectors / "manifest.json").read_text())["generation"]
    victims = []
    for name in (
        "manifest.json.tmp",
        f"reports-{generation + 1}.npy",
        f"vectors-{generation + 1}.usearch",
    ):
        victim = tmp_path / "elsewhere" / name
        victim.parent.mkdir(exist_ok=True)
        victim.write_text("keep me\n")
        (vectors / name).symlink_to(victim)
        victims.append(victim)
    source = write_report(
        tmp_path / "more",
        "hives",
        title="Hive notes",
        date="2026-04-01",
        tags={},
        files={"notes.txt": "The colony count at the hives was low."},
    )
    with Store(db, progress=False, embedder=HashingEmbedder()) as store:
        store.ingest(source.parent, name="more")
        store.embed()
        assert store.search("colony hives", limit=5, mode="semantic")
    assert [victim.read_text() for victim in victims] == ["keep me\n"] * 3
    assert not any((vectors / victim.name).is_symlink() for victim in victims)


# -- 4: the cache without a writable home --------------------------------------------------


def test_without_a_writable_home_built_here_and_the_language_model_use_the_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from researchstore.storage import built_here
    from researchstore.text.language import DETECTED_LANGUAGES
    from researchstore.text.language_model import cache_path

    home = tmp_path / "home"
    home.write_text("a file: nothing can be made under it, not even by root")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.delenv("RESEARCHSTORE_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    private = temporary / f"researchstore-{os.getuid()}"

    graph = tmp_path / "graph.bin"
    graph.write_bytes(b"a graph this process wrote")
    digest = built_here.record(graph)
    assert built_here.is_built_here(graph, digest)
    assert (private / built_here.FOLDER / digest).is_file()
    assert cache_path("a" * 64, DETECTED_LANGUAGES).is_relative_to(private)


# -- 5: a store file replaced while open -----------------------------------------------------


def _in_a_new_thread(call: Callable[[], object]) -> object:
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as error:
            outcome.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    return outcome[0]


@pytest.mark.parametrize("mode", MODES)
def test_a_store_file_replaced_while_open_is_never_read_through_the_new_name(
    template: tuple[Path, str], tmp_path: Path, mode: str
) -> None:
    db = copied(template, tmp_path)
    other = tmp_path / "other.db"
    shutil.copyfile(db, other)
    tamper(other, "DELETE FROM chunks WHERE report_id = ?", BEES)
    with opened(db, mode) as store:
        assert BEES in {hit["report_id"] for hit in store.search(QUERY, limit=10)}
        os.replace(other, db)
        refused = _in_a_new_thread(lambda: store.search(QUERY, limit=10))
        assert isinstance(refused, StoreClosed), refused
        assert "was replaced" in refused.message
        envelope = _in_a_new_thread(lambda: store.call("research_chunk_search", {"query": QUERY}))
        assert isinstance(envelope, dict) and "was replaced" in envelope["error"]["message"]
        # The thread that read the file before goes on reading it, as it was.
        assert BEES in {hit["report_id"] for hit in store.search(QUERY, limit=10)}


def test_a_keys_use_is_never_stamped_in_a_file_that_replaced_the_store(
    template: tuple[Path, str], tmp_path: Path
) -> None:
    db = copied(template, tmp_path)
    other = tmp_path / "other.db"
    shutil.copyfile(db, other)
    # A trigger no open would let run: this file is never opened as a store.
    tamper(
        other,
        "CREATE TRIGGER stamped AFTER UPDATE OF last_used_at ON api_keys BEGIN "
        "INSERT INTO meta (key, value) VALUES ('stamped', 'yes'); END",
    )
    with Store(db, progress=False) as store:
        os.replace(other, db)
        principal = authenticate(store, template[1])  # stamps the key's last use
        assert principal is not None
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'stamped'").fetchone() is None
        assert conn.execute("SELECT last_used_at FROM api_keys").fetchone()[0] is None


def test_a_keys_use_is_stamped_through_a_connection_that_distrusts_the_schema(
    template: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = copied(template, tmp_path)
    statements: list[list[str]] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        statements.append([])
        conn.set_trace_callback(statements[-1].append)
        return conn

    with Store(db, progress=False) as store:
        monkeypatch.setattr(sqlite3, "connect", traced)
        assert authenticate(store, template[1]) is not None  # stamps the key's last use
        monkeypatch.undo()
    (stamping,) = [made for made in statements if any("SET last_used_at" in line for line in made)]
    assert "PRAGMA trusted_schema = OFF" in stamping
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT last_used_at FROM api_keys").fetchone()[0] is not None
