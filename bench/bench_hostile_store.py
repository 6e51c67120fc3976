#!/usr/bin/env python
"""A store file from elsewhere, crafted or fuzzed: what it can do to the machine that opens it.

    .venv/bin/python bench/bench_hostile_store.py [--cases 30] [--seed 1] [--timeout 60]
        [--only CLASS,...] [--match TEXT] [--modes writable,read-only] [--workdir DIR] [--keep]

Builds one store of the fixtures (with the hashing model's vectors and an API
key), then crafts copies of its ``.db`` the way a hostile sender could
(every class below), and fuzzes more (``--cases``, seeded by ``--seed``):
random bytes in the SQLite file, random values in random columns of random
rows, random bytes in the index copies the file keeps. Each copy is put
alone in a sandbox folder and, writable and read-only, each in a child
process of its own under ``--timeout`` seconds (60), with HOME, the cache
directory and the temporary folder inside the sandbox:

1. opened (``Store``, with the hashing model for queries, so no torch loads);
2. searched in every mode (keyword, semantic, hybrid, twice: a damaged index
   is repaired by the first call that meets it) and read through the other
   read tools, at the tool boundary (``Store.call``, as the command line and
   both MCP transports call it);
3. served: the web pages through Starlette's client (HTML and JSON), and the
   MCP app over HTTP (``initialize`` with the key, then ``tools/call``);
4. checked: ``researchstore check`` (in process; for a read-only open, the
   same ``check_store``/``check_file`` it runs), and, writable, ``stats``,
   ``reports`` and ``export``.

A case holds when, afterwards: no file in the sandbox outside the store's
folder and the cache was made, changed or removed (HOME's ``.bashrc``, a
canary folder, the folders a crafted name points at); no SQL of the file
ran (each crafted trigger writes a ``hostile_canary`` row into ``meta``;
views spin or make huge blobs); no code of the file's choosing ran (the model
folder it names holds a pickle that writes a canary file); no crash (the
child exits 0, nothing on its stderr is a Python traceback, no answer is an
unexpected exception turned ``internal`` at a boundary, which the pages serve
as a 500 and log with a traceback); and nothing hangs past the bound.
Everything else is a clear error or a rebuild: both hold. A damaged
store or index is ``StoreDamaged``, whose code is ``internal`` by design
(``errors.py``): it is counted as a clear error, never as a crash.

It prints a line per case, then held / total per class, then every case
that did not hold and why. It is a bench, not a test: every class of real
bug it found has a fast test in the suite (``tests/test_untrusted_*.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import random
import re
import shutil
import sqlite3
import stat
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "tests" / "programs"
FIXTURES = ROOT / "fixtures" / "source"
QUERY = "varroa mite"
#: A word only the second snapshot holds.
SNAPSHOT_WORD = "zebrafinchsnapshot"
STORE_NAME = "sent.db"
#: Far out of range for the graph's node ids.
FAR_ID = 1_000_000
CANARY_KEY = "hostile_canary"
#: An exception's name at the start of a message: what a boundary makes of an
#: unexpected exception (``TypeError: ...``).
UNEXPECTED = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Warning|Exit)\b: ")
TRACEBACK = "Traceback (most recent call last)"
MODES = ("writable", "read-only")
ENDLESS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)"


# -- the sandbox ---------------------------------------------------------------


class Sandbox:
    """One case's folder: the store alone in ``a/b/store``, its cache in ``a/b/cache``,
    and around them what must never change (HOME, canaries, targets of crafted paths).

    The store sits two folders down, so that a name climbing out of it
    (``../../x``) still lands in the sandbox, where it is seen.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.canary = root / "canary"
        self.absolute = root / "abs"
        self.work = root / "work"
        self.tmp = root / "tmp"
        self.store_folder = root / "a" / "b" / "store"
        self.cache = root / "a" / "b" / "cache"
        self.db = self.store_folder / STORE_NAME
        self.model_canary = self.canary / "model-code-ran"
        #: Where opening may write: the store's folders (a second snapshot's too),
        #: the cache, and the process's temporary folder (libraries keep theirs there).
        self.allowed = [self.store_folder, self.cache, self.tmp]
        for folder in (self.home, self.canary, self.absolute, self.work, self.tmp):
            folder.mkdir(parents=True)
        self.store_folder.mkdir(parents=True)
        (self.home / ".bashrc").write_text("# the user's own\nexport KEPT=1\n")
        (self.canary / "victim.txt").write_text("never to be written\n")
        (self.canary / "folder").mkdir()
        (self.canary / "folder" / "inside.txt").write_text("never to be removed\n")
        (self.absolute / "x").write_text("an absolute path's target\n")

    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "RESEARCHSTORE_CACHE_DIR": str(self.cache),
            "TMPDIR": str(self.tmp),
            "RESEARCHSTORE_EMBED": "off",
            "RESEARCHSTORE_EGRESS": "off",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": str(ROOT),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }

    def snapshot(self) -> dict[str, tuple[Any, ...]]:
        """Everything in the sandbox outside the folders opening may write."""
        seen: dict[str, tuple[Any, ...]] = {}
        for folder, folders, files in os.walk(self.root, followlinks=False):
            here = Path(folder)
            if here in self.allowed:
                folders.clear()
                continue
            for name in folders + files:
                path = here / name
                if path in self.allowed:
                    continue
                seen[str(path.relative_to(self.root))] = _fingerprint(path)
        return seen


def _fingerprint(path: Path) -> tuple[Any, ...]:
    found = path.lstat()
    if stat.S_ISLNK(found.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISDIR(found.st_mode):
        return ("folder",)
    if stat.S_ISREG(found.st_mode):
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if found.st_size < 8 << 20 else ""
        return ("file", found.st_size, found.st_mtime_ns, digest)
    return ("other", stat.S_IFMT(found.st_mode))


def strays(before: dict[str, tuple[Any, ...]], after: dict[str, tuple[Any, ...]]) -> list[str]:
    made = [f"made {path}" for path in sorted(set(after) - set(before))]
    gone = [f"removed {path}" for path in sorted(set(before) - set(after))]
    changed = [
        f"changed {path}"
        for path in sorted(set(before) & set(after))
        if before[path] != after[path]
    ]
    return made + gone + changed


# -- crafting ------------------------------------------------------------------


@dataclass
class Case:
    klass: str
    name: str
    craft: Callable[[Sandbox], None]
    #: Query with the model the environment chooses, not the hashing model.
    own_model: bool = False
    #: More stores to open after the first, in the same child (snapshots).
    more_stores: Callable[[Sandbox], list[Path]] | None = None
    #: A check of its own on the probe's answers: why it failed, or None.
    expect: Callable[[Sandbox, list[dict[str, Any]]], str | None] | None = None


@dataclass
class Template:
    db: Path
    second: Path  # the same store, one report later (another snapshot)
    key: str


def sql(db: Path, *statements: str, parameters: tuple[Any, ...] = ()) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:
        for statement in statements:
            conn.execute(statement, parameters) if parameters else conn.execute(statement)


def packed_rows(db: Path, index_name: str) -> list[tuple[str, int, int]]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(
            "SELECT name, part, length(data) FROM index_files WHERE index_name = ? "
            "ORDER BY name, part",
            (index_name,),
        ).fetchall()


def packed_file(db: Path, index_name: str, suffix: str) -> tuple[str, bytearray]:
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute(
            "SELECT name, data FROM index_files WHERE index_name = ? AND name LIKE ? "
            "ORDER BY name, part",
            (index_name, f"%{suffix}"),
        ).fetchall()
    name = rows[0][0]
    return name, bytearray(b"".join(bytes(data) for found, data in rows if found == name))


def replace_packed(db: Path, index_name: str, name: str, data: bytes) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(
            "DELETE FROM index_files WHERE index_name = ? AND name = ?", (index_name, name)
        )
        conn.execute(
            "INSERT INTO index_files (index_name, name, part, data) VALUES (?, ?, 0, ?)",
            (index_name, name, data),
        )


def tantivy_body(data: bytearray) -> tuple[int, dict[str, Any]]:
    """Where a Tantivy file's body ends, and its footer."""
    length, _ = struct.unpack("<II", data[-8:])
    body = len(data) - 8 - length
    return body, json.loads(bytes(data[body:-8]))


def with_checksum(data: bytearray, body: int, footer: dict[str, Any]) -> bytearray:
    """``data`` with its footer's checksum written anew, as a hostile sender would."""
    footer = {**footer, "crc": zlib.crc32(bytes(data[:body]))}
    written = json.dumps(footer).encode()
    return data[:body] + written + struct.pack("<II", len(written), 1337)


def alter_tantivy(suffix: str, *, keep_checksum: bool) -> Callable[[Sandbox], None]:
    def craft(box: Sandbox) -> None:
        name, data = packed_file(box.db, "index", suffix)
        body, footer = tantivy_body(data)
        data[body // 4 : body // 2] = b"\xff" * (body // 2 - body // 4)
        if keep_checksum:
            data = with_checksum(data, body, footer)
        replace_packed(box.db, "index", name, bytes(data))

    return craft


def alter_graph(box: Sandbox) -> None:
    name, data = packed_file(box.db, "vectors", ".usearch")
    data[-100:] = struct.pack("<I", FAR_ID) * 25
    replace_packed(box.db, "vectors", name, bytes(data))


def rename_packed(hostile: str | Callable[[Sandbox], str]) -> Callable[[Sandbox], None]:
    def craft(box: Sandbox) -> None:
        name = hostile(box) if callable(hostile) else hostile
        [(first, _, _)] = packed_rows(box.db, "index")[:1]
        sql(
            box.db,
            "UPDATE index_files SET name = ? WHERE index_name = 'index' AND name = ?",
            parameters=(name, first),
        )

    return craft


def set_meta(key: str, value: Any) -> Callable[[Sandbox], None]:
    def craft(box: Sandbox) -> None:
        chosen = value(box) if callable(value) else value
        sql(
            box.db,
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
            parameters=(key, chosen),
        )

    return craft


def triggers_on(table: str) -> Callable[[Sandbox], None]:
    """Triggers on every write to ``table``, each leaving a canary row in ``meta``."""

    def craft(box: Sandbox) -> None:
        statements = [
            f"CREATE TRIGGER hostile_{table}_{when.lower()} AFTER {when} ON {table} BEGIN "
            f"INSERT OR REPLACE INTO meta (key, value) VALUES "
            f"('{CANARY_KEY}', 'a trigger ran: {when} on {table}'); END"
            for when in ("INSERT", "UPDATE", "DELETE")
        ]
        sql(box.db, *statements)

    return craft


def view_for(table: str, select: str) -> Callable[[Sandbox], None]:
    def craft(box: Sandbox) -> None:
        sql(
            box.db,
            f"ALTER TABLE {table} RENAME TO {table}_kept",
            f"CREATE VIEW {table} AS {select}",
        )

    return craft


def index_files_view(box: Sandbox) -> None:
    sql(
        box.db,
        "CREATE TABLE index_kept AS SELECT index_name, name, part FROM index_files",
        "DROP TABLE index_files",
        "CREATE VIEW index_files (index_name, name, part, data) AS "
        "SELECT index_name, name, part, zeroblob(256 << 20) FROM index_kept",
    )


def plant_model(box: Sandbox) -> None:
    """A model folder of the sender's, its pickle writing a canary when loaded, named in meta."""
    folder = box.root / "sender-model"
    folder.mkdir()
    (folder / "modules.json").write_text(
        json.dumps([{"idx": 0, "name": "0", "path": "", "type": "canary.Canary"}])
    )
    (folder / "config.json").write_text("{}")
    (folder / "canary.py").write_text(
        f"open({str(box.model_canary)!r}, 'w').write('ran')\nclass Canary: pass\n"
    )
    code = f"open({str(box.model_canary)!r}, 'w').write('ran')"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(_Exec(code)))
    set_meta("vector_model_folder", str(folder))(box)


class _Exec:
    """Pickles as a call of ``exec``: what a hostile model file may hold."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, (self.code,))


def beside(name: str, make: Callable[[Sandbox, Path], None]) -> Callable[[Sandbox], None]:
    """Something put beside the store file, as a folder sent whole could hold it."""

    def craft(box: Sandbox) -> None:
        make(box, box.store_folder / name.format(db=STORE_NAME))

    return craft


def link_to(target: Callable[[Sandbox], Path]) -> Callable[[Sandbox, Path], None]:
    def make(box: Sandbox, path: Path) -> None:
        path.symlink_to(target(box))

    return make


def hard_link_to_victim(box: Sandbox, path: Path) -> None:
    os.link(box.canary / "victim.txt", path)


def fifo(box: Sandbox, path: Path) -> None:
    os.mkfifo(path)


def junk_folder(box: Sandbox, path: Path) -> None:
    path.mkdir()
    (path / "junk").write_text("junk")


def index_folder_with_links(box: Sandbox, path: Path) -> None:
    """An index folder beside the store whose Tantivy lock files and sidecar are links
    into HOME: what Tantivy or researchstore write there must not go through them."""
    path.mkdir()
    for name in (".tantivy-writer.lock", ".tantivy-meta.lock", "researchstore-index.json"):
        (path / name).symlink_to(box.home / ".bashrc")
    (path / "meta.json").symlink_to(box.canary / "victim.txt")


def current_index_folder_altered(box: Sandbox, path: Path) -> None:
    """A current index folder beside the store (as a writable open leaves it), its
    files altered with their checksums written anew."""
    _unpacked_beside(box, "index")
    for file in sorted((box.store_folder / f"{STORE_NAME}.index").glob("*.idx")):
        data = bytearray(file.read_bytes())
        body, footer = tantivy_body(data)
        data[body // 4 : body // 2] = b"\xff" * (body // 2 - body // 4)
        file.write_bytes(bytes(with_checksum(data, body, footer)))


def current_vector_folder_altered(box: Sandbox, path: Path) -> None:
    _unpacked_beside(box, "vectors")
    for file in (box.store_folder / f"{STORE_NAME}.vectors").glob("*.usearch"):
        data = bytearray(file.read_bytes())
        data[-100:] = struct.pack("<I", FAR_ID) * 25
        file.write_bytes(bytes(data))


def _unpacked_beside(box: Sandbox, index_name: str) -> None:
    """Write the packed copy of ``index_name`` beside the store with a current sidecar, as
    the sender's own machine left it (no researchstore code runs here)."""
    folder = box.store_folder / f"{STORE_NAME}{'.index' if index_name == 'index' else '.vectors'}"
    folder.mkdir(exist_ok=True)
    with closing(sqlite3.connect(box.db)) as conn:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        for name, data in conn.execute(
            "SELECT name, data FROM index_files WHERE index_name = ? ORDER BY name, part",
            (index_name,),
        ):
            with open(folder / name, "ab") as handle:
                handle.write(data)
    (folder / "researchstore-index.json").write_text(
        json.dumps(
            {
                "store_uuid": meta["store_uuid"],
                "index_schema": int(meta[f"{index_name}_packed_schema"]),
                "applied_seq": int(meta[f"{index_name}_applied_seq"]),
            }
        )
    )


def wal_link(box: Sandbox, path: Path) -> None:
    path.symlink_to(box.home / ".bashrc")


def pending_flood(box: Sandbox) -> None:
    sql(
        box.db,
        f"INSERT INTO index_pending (report_id, queued_at, target) "
        f"SELECT 1000000 + i, '2026-01-01T00:00:00Z', NULL FROM ({ENDLESS} "
        f"SELECT i FROM n LIMIT 200000)",
    )


def not_json_everywhere(box: Sandbox) -> None:
    """Every column researchstore keeps JSON in, holding text that is not JSON."""
    with closing(sqlite3.connect(box.db)) as conn, conn:
        for table, column in json_columns(conn):
            conn.execute(f'UPDATE "{table}" SET "{column}" = ?', ("{not json",))


def json_of_another_shape(box: Sandbox) -> None:
    with closing(sqlite3.connect(box.db)) as conn, conn:
        for number, (table, column) in enumerate(json_columns(conn)):
            shape = ['[1, {"a": null}]', '{"season": [1, 2]}', "42", '"text"', "null"][number % 5]
            conn.execute(f'UPDATE "{table}" SET "{column}" = ?', (shape,))


def json_nested_deep(box: Sandbox) -> None:
    with closing(sqlite3.connect(box.db)) as conn, conn:
        for table, column in json_columns(conn):
            conn.execute(f'UPDATE "{table}" SET "{column}" = ?', ("[" * 100_000 + "]" * 100_000,))


def json_columns(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """The text columns whose every value in the template is a JSON list or object."""
    found = []
    for table in store_tables(conn):
        for column in [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]:
            values = [
                row[0]
                for row in conn.execute(
                    f'SELECT "{column}" FROM "{table}" WHERE "{column}" IS NOT NULL LIMIT 50'
                )
            ]
            if values and all(_is_json_container(value) for value in values):
                found.append((table, column))
    return found


def _is_json_container(value: Any) -> bool:
    if not isinstance(value, str) or value[:1] not in "[{":
        return False
    try:
        return isinstance(json.loads(value), list | dict)
    except ValueError:
        return False


def invalid_utf8_text(box: Sandbox) -> None:
    sql(
        box.db,
        "UPDATE chunks SET text = CAST(x'c328ffe282' AS TEXT) || text WHERE id % 2 = 0",
        "UPDATE reports SET title = CAST(x'ff' AS TEXT) WHERE report_id % 2 = 1",
        "UPDATE documents SET path = CAST(x'c0af2e2e2f' AS TEXT)",
    )


def run_sql(*statements: str) -> Callable[[Sandbox], None]:
    def craft(box: Sandbox) -> None:
        sql(box.db, *statements)

    return craft


def emptied(box: Sandbox) -> None:
    box.db.write_bytes(b"")


def truncated(box: Sandbox) -> None:
    data = box.db.read_bytes()
    box.db.write_bytes(data[: len(data) // 2])


def not_sqlite(box: Sandbox) -> None:
    box.db.write_bytes(random.Random(3).randbytes(64 << 10))


def two_snapshots(
    template: Template,
) -> tuple[Callable[[Sandbox], list[Path]], Callable[[Sandbox, list[dict[str, Any]]], str | None]]:
    """Yesterday's copy and today's, under one name: each must answer its own content."""

    def more(box: Sandbox) -> list[Path]:
        today = box.root / "a" / "b" / "today" / STORE_NAME
        today.parent.mkdir()
        box.allowed.append(today.parent)
        shutil.copyfile(template.second, today)
        return [box.db, today, box.db]

    return more, _snapshot_answers


def _snapshot_answers(box: Sandbox, stages: list[dict[str, Any]]) -> str | None:
    found = [stage for stage in stages if stage["stage"] == "snapshot-word"]
    counts = [stage["detail"] for stage in found]
    if len(counts) != 4:
        return f"the snapshots were not all searched: {counts}"
    if counts[0] != 0 or counts[1] == 0 or counts[2] != 0 or counts[3] != 0:
        return (
            "a snapshot answered another's content: hits for yesterday, today, yesterday "
            f"opened again, yesterday still open: {counts}"
        )
    return None


def _all_answered(box: Sandbox, stages: list[dict[str, Any]]) -> str | None:
    """The control: an unaltered store answers every call, or the probe is wrong."""
    errors = [
        f"{stage['stage']}: {stage['detail']}" for stage in stages if stage["outcome"] != "ok"
    ]
    return f"the unaltered store gave errors: {errors[:3]}" if errors else None


def store_tables(conn: sqlite3.Connection) -> list[str]:
    return [
        name
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        )
    ]


def crafted_cases(template: Template) -> list[Case]:
    cases: list[Case] = []

    def add(klass: str, name: str, craft: Callable[[Sandbox], None], **options: Any) -> None:
        cases.append(Case(klass, name, craft, **options))

    add("control", "the store as it was made", lambda box: None, expect=_all_answered)
    names: dict[str, str | Callable[[Sandbox], str]] = {
        "../../x": "../../x",
        "/abs": lambda box: str(box.absolute / "x"),
        "nodir/x": "nodir/x",
        "''": "",
        ".": ".",
        "..": "..",
        "nul": "x\x00y",
        "home": "../../../../home/.bashrc",
    }
    for label, hostile in names.items():
        add("packed-names", label, rename_packed(hostile))
    for label, uuid in {
        "/abs": lambda box: str(box.absolute / "uuid"),
        "../..": "../..",
        "../../x": "../../x",
        "''": "",
        "uuid-like/../..": "01a24558-b032-7000-b5ad-2c73d0f5bd68/../..",
    }.items():
        add("store-uuid", label, set_meta("store_uuid", uuid))
    add("model-folder", "a pickle in the folder meta names", plant_model, own_model=True)
    add("model-folder", "hashing queries beside it", plant_model)
    for label, make in {
        "old-20-digits folder": ("{db}.index.old-" + "9" * 20, junk_folder),
        "old-20-digits link": (
            "{db}.index.old-" + "9" * 20,
            link_to(lambda box: box.canary / "folder"),
        ),
        "rebuild-20-digits link": (
            "{db}.index.rebuild-" + "1" * 20,
            link_to(lambda box: box.canary / "folder"),
        ),
        "vectors old-0 link": (
            "{db}.vectors.old-0",
            link_to(lambda box: box.canary / "folder"),
        ),
    }.items():
        add("leftover-folders", label, beside(*make))
    with closing(sqlite3.connect(template.db)) as conn:
        tables = store_tables(conn)
    for table in tables:
        add("triggers", table, triggers_on(table))
    for table, select in {
        "meta": f"{ENDLESS} SELECT 'schema_version' AS key, i AS value FROM n WHERE i < 0",
        "reports": (
            f"SELECT * FROM reports_kept WHERE EXISTS ({ENDLESS} SELECT 1 FROM n WHERE i < 0)"
        ),
        "chunks": "SELECT * FROM chunks_kept",
        "api_keys": "SELECT * FROM api_keys_kept",
    }.items():
        add("views", table, view_for(table, select))
    add("views", "index_files of zeroblobs", index_files_view)
    for label, statements in {
        "a table": ("CREATE TABLE extra (x)",),
        "an index": ("CREATE INDEX chunks_heavy ON chunks (length(zeroblob(1 << 20)))",),
        "a check": (
            "ALTER TABLE api_keys ADD COLUMN note TEXT CHECK (length(zeroblob(1 << 20)) > 0)",
        ),
        "a virtual table": ("CREATE VIRTUAL TABLE extra_fts USING fts5(x)",),
        "its trigger rewritten": (
            "DROP TRIGGER chunks_vectors_go",
            "CREATE TRIGGER chunks_vectors_go AFTER DELETE ON chunks BEGIN "
            "DELETE FROM vectors WHERE chunk_rowid = old.id; "
            f"INSERT OR REPLACE INTO meta VALUES ('{CANARY_KEY}', 'rewritten trigger ran'); END",
        ),
    }.items():
        add("extra-schema", label, run_sql(*statements))
    for key, value in [
        ("schema_version", "nine"),
        ("schema_version", "9.0"),
        ("schema_version", "-1"),
        ("schema_version", "99999999999999999999999"),
        ("schema_version", ""),
        ("schema_version", "1"),
        ("index_applied_seq", "x"),
        ("index_applied_seq", "-5"),
        ("index_packed_seq", "junk"),
        ("index_packed_seq", "99999999999999999999999"),
        ("index_packed_schema", "x"),
        ("vectors_applied_seq", "1e3"),
        ("vectors_packed_seq", "-1"),
        ("report_id_high", "x"),
        ("vector_dim", "x"),
        ("vector_dim", "-1"),
        ("vector_dim", "0"),
        ("vector_dim", "100000"),
        ("vector_model", ""),
    ]:
        add("meta-values", f"{key}={value[:12]!r}", set_meta(key, value))
    add("meta-values", "schema_version a blob", set_meta("schema_version", b"\x00\x01"))
    add("not-json", "text that is not JSON", not_json_everywhere)
    add("not-json", "JSON of another shape", json_of_another_shape)
    add("not-json", "JSON nested 100,000 deep", json_nested_deep)
    add("not-json", "invalid UTF-8 text", invalid_utf8_text)
    add("vector-graph", "far ids at the end", alter_graph)
    add("vector-graph", "current folder beside, altered", beside("", current_vector_folder_altered))
    for suffix in (".store", ".term", ".idx", ".pos", ".fieldnorm", ".fast"):
        for keep in (False, True):
            label = f"{suffix} checksum {'rewritten' if keep else 'failing'}"
            add("tantivy", label, alter_tantivy(suffix, keep_checksum=keep))
    add("tantivy", "current folder beside, altered", beside("", current_index_folder_altered))
    for label, made in {
        "lock -> ~/.bashrc": ("{db}.lock", link_to(lambda box: box.home / ".bashrc")),
        "lock -> missing file": ("{db}.lock", link_to(lambda box: box.canary / "made-by-lock")),
        "lock hard link": ("{db}.lock", hard_link_to_victim),
        "lock FIFO": ("{db}.lock", fifo),
        "-wal -> ~/.bashrc": ("{db}-wal", wal_link),
        "-shm -> ~/.bashrc": ("{db}-shm", wal_link),
        "index folder -> canary": ("{db}.index", link_to(lambda box: box.canary / "folder")),
        "vectors folder -> canary": ("{db}.vectors", link_to(lambda box: box.canary / "folder")),
        "index folder of links": ("{db}.index", index_folder_with_links),
    }.items():
        add("links-beside", label, beside(*made))
    more, expect = two_snapshots(template)
    add("snapshots", "yesterday's and today's", lambda box: None, more_stores=more, expect=expect)
    add("whole-file", "truncated to half", truncated)
    add("whole-file", "not SQLite", not_sqlite)
    add("whole-file", "empty", emptied)
    add("pending", "200,000 changes pointing nowhere", pending_flood)
    return cases


# -- fuzzing -------------------------------------------------------------------


def fuzz_cases(count: int, seed: int) -> list[Case]:
    kinds = [("fuzz-bytes", fuzz_bytes), ("fuzz-values", fuzz_values), ("fuzz-packed", fuzz_packed)]
    cases = []
    for number in range(count):
        klass, make = kinds[number % len(kinds)]
        case_seed = seed * 1_000_003 + number
        cases.append(Case(klass, f"seed {case_seed}", make(case_seed)))
    return cases


def fuzz_bytes(seed: int) -> Callable[[Sandbox], None]:
    """Random bytes in the SQLite file, page by page; the header kept valid most times."""

    def craft(box: Sandbox) -> None:
        chance = random.Random(seed)
        data = bytearray(box.db.read_bytes())
        page_size = int.from_bytes(data[16:18], "big") or 65536
        pages = len(data) // page_size
        how = chance.choice(["flip", "flip", "flip", "page-header", "zero-page", "header", "cut"])
        if how == "header":
            for _ in range(chance.randint(1, 4)):
                data[chance.randrange(100)] = chance.randrange(256)
        elif how == "cut":
            data = data[: page_size * chance.randrange(1, pages)]
        else:
            for _ in range(chance.randint(1, 6)):
                page = chance.randrange(1, pages)  # page 1 (the header and schema) kept
                start = page * page_size
                if how == "zero-page":
                    data[start : start + page_size] = bytes(page_size)
                elif how == "page-header":
                    for offset in range(chance.randint(1, 8)):
                        data[start + offset] = chance.randrange(256)
                else:
                    for _ in range(chance.randint(1, 32)):
                        data[start + chance.randrange(page_size)] = chance.randrange(256)
        box.db.write_bytes(bytes(data))

    return craft


def random_value(chance: random.Random, conn: sqlite3.Connection) -> tuple[str, tuple[Any, ...]]:
    """An SQL expression and its parameters: a value of any type researchstore never writes."""
    pick = chance.randrange(22)
    if pick == 0:
        return "NULL", ()
    if pick == 1:
        return "?", (chance.choice([-1, 0, -(2**63), 2**63 - 1, 2**31, chance.randrange(-9, 9)]),)
    if pick == 2:
        return "?", (chance.choice([3.5, -0.0, 1e308, -1e-300]),)
    if pick == 3:
        return "?", (chance.choice(["", "x", "not json {", "{}", "[]", "[1,2]", "null", "true"]),)
    if pick == 4:
        return "zeroblob(?)", (chance.choice([1 << 20, 8 << 20, 16 << 20]),)
    if pick == 5:
        return "?", (chance.randbytes(chance.randrange(1, 300)),)
    if pick == 6:
        return "CAST(? AS TEXT)", (chance.randbytes(chance.randrange(1, 60)),)
    if pick == 7:
        return "?", ("x" * chance.choice([10_000, 1_000_000, 5_000_000]),)
    if pick == 8:
        return "?", ("[" * 50_000 + "]" * 50_000,)
    if pick == 9:
        return "?", (chance.choice(["../../x", "/etc/passwd", "a\x00b", "\u202e", "<script>"]),)
    if pick == 10:
        return "?", ('{"season": 5, "x": {"y": []}}',)
    if pick == 11:
        return "?", ('["*"]',)
    if pick == 12:
        return "?", ("2026-13-45T99:99:99Z",)
    if pick == 13:
        return "?", ("01a24558-b032-7000-b5ad-2c73d0f5bd68",)
    if pick == 14:
        return "?", (str(chance.randrange(-(10**30), 10**30)),)
    if pick in (15, 16):
        # An id of another row, or one pointing nowhere.
        return "?", (chance.choice([chance.randrange(1, 50), 10**9, -7]),)
    if pick == 17:
        return "?", ("varroa " * chance.randrange(1, 2000),)
    if pick == 18:
        return "?", (chance.choice(["ok", "replaced", "failed", "", "OK"]),)
    if pick == 19:
        return "?", (chance.choice(["html", "captions", "text", "pdf", ""]),)
    if pick == 20:
        return "?", (-chance.randrange(1, 10**6),)
    return "?", (json.dumps({"k": chance.randbytes(8).hex()}),)


def fuzz_values(seed: int) -> Callable[[Sandbox], None]:
    """Random values into random columns of random rows; rows removed under others."""

    def craft(box: Sandbox) -> None:
        chance = random.Random(seed)
        with closing(sqlite3.connect(box.db)) as conn:
            tables = [*store_tables(conn), "sqlite_sequence"]
            done = 0
            for _ in range(60):
                if done >= chance.randint(1, 5):
                    break
                table = chance.choice(tables)
                rowids = [row[0] for row in conn.execute(f'SELECT rowid FROM "{table}"')]
                if not rowids:
                    continue
                rowid = chance.choice(rowids)
                try:
                    with conn:
                        if chance.random() < 0.1:
                            conn.execute(f'DELETE FROM "{table}" WHERE rowid = ?', (rowid,))
                        else:
                            columns = [
                                row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')
                            ]
                            column = chance.choice(columns)
                            expression, parameters = random_value(chance, conn)
                            conn.execute(
                                f'UPDATE "{table}" SET "{column}" = {expression} WHERE rowid = ?',
                                (*parameters, rowid),
                            )
                    done += 1
                except sqlite3.DatabaseError:
                    continue  # a constraint: try another

    return craft


def fuzz_packed(seed: int) -> Callable[[Sandbox], None]:
    """Random bytes in the index copies the store file keeps, checksums rewritten at times."""

    def craft(box: Sandbox) -> None:
        chance = random.Random(seed)
        with closing(sqlite3.connect(box.db)) as conn, conn:
            rows = conn.execute(
                "SELECT rowid, index_name, name, part, data FROM index_files ORDER BY rowid"
            ).fetchall()
            for _ in range(chance.randint(1, 3)):
                rowid, index_name, name, part, data = chance.choice(rows)
                data = bytearray(data)
                how = chance.choice(
                    [
                        "flip",
                        "flip",
                        "flip-crc",
                        "flip-crc",
                        "cut",
                        "grow",
                        "empty",
                        "text",
                        "part",
                        "junk-json",
                        "swap",
                    ]
                )
                if how.startswith("flip") and data:
                    for _ in range(chance.choice([1, 4, 16, 64, 512])):
                        data[chance.randrange(len(data))] = chance.randrange(256)
                    if how == "flip-crc" and len(data) > 16:
                        try:
                            body, footer = tantivy_body(data)
                            if 0 < body < len(data):
                                data = with_checksum(data, body, footer)
                        except (ValueError, struct.error):
                            pass
                    value: Any = bytes(data)
                elif how == "cut":
                    value = bytes(data[: chance.randrange(len(data) + 1)])
                elif how == "grow":
                    value = bytes(data) + chance.randbytes(chance.randrange(1, 4096))
                elif how == "empty":
                    value = b""
                elif how == "text":
                    value = bytes(data).decode("latin-1")[:1000]
                elif how == "junk-json":
                    value = chance.choice(
                        [b"{}", b"[]", b'{"segments": 5}', b'{"files": {"../../x": 1}}', b"\xff"]
                    )
                elif how == "swap":
                    other = chance.choice(rows)
                    value = other[4]
                else:
                    conn.execute(
                        "UPDATE index_files SET part = ? WHERE rowid = ?",
                        (chance.choice([-1, 7, 2**40]), rowid),
                    )
                    continue
                conn.execute("UPDATE index_files SET data = ? WHERE rowid = ?", (value, rowid))

    return craft


# -- the probe: runs in the child ----------------------------------------------


def probe(spec: dict[str, Any]) -> None:
    """Open, search, read, serve and check each store of ``spec``; a JSON line per stage."""
    sys.path.insert(0, str(PROGRAMS))
    from researchstore import Store
    from researchstore.errors import ResearchStoreError

    read_only = bool(spec["read_only"])
    embedder = None
    if not spec["own_model"]:
        from hashing import HashingEmbedder  # type: ignore[import-not-found]

        embedder = HashingEmbedder()

    def say(stage: str, outcome: str, detail: Any = None) -> None:
        print(json.dumps({"stage": stage, "outcome": outcome, "detail": detail}), flush=True)

    def failed(stage: str, error: BaseException) -> None:
        if isinstance(error, ResearchStoreError) and not UNEXPECTED.match(error.message):
            say(stage, "clear", f"{type(error).__name__}: {error.message[:300]}")
        else:
            text = "".join(traceback.format_exception(error))
            say(stage, "crash", text[-1500:])

    snapshots = len(spec["stores"]) > 1
    kept: list[Any] = []  # snapshots stay open while the others are opened
    for number, path in enumerate(spec["stores"]):
        opened = f"open#{number}" if number else "open"
        try:
            store = Store(path, progress=False, read_only=read_only, embedder=embedder)
        except BaseException as error:
            failed(opened, error)
            continue
        say(opened, "ok")
        try:
            if snapshots:
                _snapshot_word(store, say)
            if number == 0:
                ids = _probe_tools(store, say)
                _probe_pages(store, ids, say, failed)
                _probe_mcp(store, spec["key"], say, failed)
        except BaseException as error:
            failed("serving", error)
        if snapshots:
            kept.append(store)
            continue
        _close(store, say, failed)
    if kept:
        _snapshot_word(kept[0], say)  # the first, still open, after the others opened
    for store in kept:
        _close(store, say, failed)
    _probe_check(spec, say, failed)


def _snapshot_word(store: Any, say: Callable[..., None]) -> None:
    envelope = store.call("research_chunk_search", {"query": SNAPSHOT_WORD, "mode": "keyword"})
    say("snapshot-word", "ok", len(envelope.get("result", {}).get("hits", [])))


def _close(store: Any, say: Callable[..., None], failed: Callable[..., None]) -> None:
    try:
        store.close()
    except BaseException as error:
        failed("close", error)
    say("repairs", "ok", store.sync.repairs)


def _envelope_outcome(envelope: Any) -> tuple[str, Any]:
    if not isinstance(envelope, dict):
        return "crash", f"not an envelope: {envelope!r:.200}"
    from researchstore.storage.stored import json_default

    try:
        json.dumps(envelope, default=json_default)  # as every transport sends it
    except (TypeError, ValueError) as error:
        return "crash", f"the envelope is not JSON: {error}"
    if "result" in envelope:
        return "ok", None
    error = envelope.get("error") or {}
    message = str(error.get("message", ""))
    if UNEXPECTED.match(message) or TRACEBACK in message:
        return "crash", f"{error.get('code')}: {message[:600]}"
    return "clear", f"{error.get('code')}: {message[:300]}"


def _probe_tools(store: Any, say: Callable[..., None]) -> dict[str, Any]:
    ids: dict[str, Any] = {}
    for round_ in (1, 2):
        for mode in ("keyword", "semantic", "hybrid"):
            envelope = store.call(
                "research_chunk_search", {"query": QUERY, "mode": mode, "limit": 10}
            )
            outcome, detail = _envelope_outcome(envelope)
            say(f"search {mode} #{round_}", outcome, detail)
            for hit in envelope.get("result", {}).get("hits", [])[:1]:
                ids.setdefault("chunk", hit.get("chunk_id"))
                ids.setdefault("report", hit.get("report_id"))
                ids.setdefault("document", hit.get("document_id"))
    chunk, report, document = ids.get("chunk"), ids.get("report"), ids.get("document")
    calls: list[tuple[str, dict[str, Any]]] = [
        (
            "research_chunk_search",
            {"query": QUERY, "mode": "keyword", "tags": {"season": "spring"}},
        ),
        ("research_chunk_search", {"query": '"colony was treated"', "mode": "hybrid"}),
    ]
    if isinstance(chunk, str):
        calls += [
            ("research_get_chunk", {"chunk_id": chunk}),
            ("get_chunks", {"ids": [chunk]}),
            ("get_chunk_next", {"id": chunk}),
            ("get_chunk_prev", {"id": chunk}),
            ("get_chunk_neighbors", {"id": chunk}),
            ("get_chunk_parents", {"id": chunk}),
            ("research_resolve_chunk", {"chunk_id": chunk}),
        ]
    if isinstance(document, str):
        calls += [
            ("get_document", {"id": document}),
            ("get_document_chunks", {"id": document}),
        ]
    if isinstance(report, int):
        calls.append(("research_get_report", {"report_id": report}))
    for name, arguments in calls:
        outcome, detail = _envelope_outcome(store.call(name, arguments))
        say(name, outcome, detail)
    return ids


def _probe_pages(
    store: Any, ids: dict[str, Any], say: Callable[..., None], failed: Callable[..., None]
) -> None:
    from starlette.testclient import TestClient

    from researchstore.web import web_app

    paths = [
        "/",
        "/index.json",
        "/reports",
        "/reports.json",
        f"/search?q={QUERY}",
        *(f"/search.json?q={QUERY}&mode={mode}" for mode in ("keyword", "semantic", "hybrid")),
    ]
    if ids.get("chunk"):
        paths.append(f"/chunk/{ids['chunk']}")
    if ids.get("document"):
        paths.append(f"/document/{ids['document']}")
    if ids.get("report") is not None:
        paths += [f"/report/{ids['report']}", f"/report/{ids['report']}?format=json"]
    try:
        with TestClient(web_app(store), base_url="http://127.0.0.1") as client:
            for path in paths:
                response = client.get(path)
                say(f"page {path.split('?')[0]}", *_http_outcome(response))
    except BaseException as error:
        failed("pages", error)


def _http_outcome(response: Any) -> tuple[str, Any]:
    if response.status_code < 500:
        return "ok", response.status_code
    text = response.text
    try:
        message = str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        found = re.search(r"\b[A-Z]\w*(?:Error|Exception): [^<]*", text)
        message = found.group(0) if found else text[:300]
    if UNEXPECTED.match(message) or TRACEBACK in text:
        return "crash", f"HTTP {response.status_code}: {message[:600]}"
    return "clear", f"HTTP {response.status_code}: {message[:300]}"


def _probe_mcp(store: Any, key: str, say: Callable[..., None], failed: Callable[..., None]) -> None:
    from starlette.testclient import TestClient

    from researchstore.serving.mcp_server import http_app

    accept = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    url = "http://127.0.0.1/mcp"
    try:
        with TestClient(http_app(store), base_url="http://127.0.0.1") as client:
            opened = client.post(
                url,
                json={
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "bench", "version": "1"},
                    },
                },
                headers={**accept, "x-api-key": key},
            )
            say("mcp initialize", *_http_outcome(opened))
            if opened.status_code != 200:
                return
            headers = {
                **accept,
                "x-api-key": key,
                "mcp-session-id": opened.headers.get("mcp-session-id", ""),
                "mcp-protocol-version": "2025-06-18",
            }
            client.post(
                url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
            )
            for number, mode in enumerate(("keyword", "semantic", "hybrid"), start=1):
                response = client.post(
                    url,
                    json={
                        "jsonrpc": "2.0",
                        "id": number,
                        "method": "tools/call",
                        "params": {
                            "name": "research_chunk_search",
                            "arguments": {"query": QUERY, "mode": mode},
                        },
                    },
                    headers=headers,
                )
                outcome, detail = _http_outcome(response)
                if outcome == "ok":
                    outcome, detail = _mcp_result_outcome(response)
                say(f"mcp search {mode}", outcome, detail)
    except BaseException as error:
        failed("mcp", error)


def _mcp_result_outcome(response: Any) -> tuple[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return "crash", f"not JSON: {response.text[:200]}"
    if "error" in body:
        return "clear", str(body["error"])[:300]
    result = body.get("result", {})
    if not result.get("isError"):
        return "ok", None
    return _envelope_outcome(result.get("structuredContent") or {"error": {"message": str(result)}})


def _probe_check(
    spec: dict[str, Any], say: Callable[..., None], failed: Callable[..., None]
) -> None:
    from researchstore.check import check_file, check_store
    from researchstore.errors import StoreDamaged
    from researchstore.store import Store

    path = spec["stores"][-1]
    if not spec["read_only"]:
        from click.testing import CliRunner

        from researchstore.cli import main

        runner = CliRunner()
        commands = [
            ["check", path],
            ["stats", path],
            ["reports", path, "--json"],
            ["export", path],
        ]
        for command in commands:
            result = runner.invoke(main, command, catch_exceptions=True)
            output = result.output or ""
            if result.exception is not None and not isinstance(result.exception, SystemExit):
                failed(f"cli {command[0]}", result.exception)
            elif TRACEBACK in output or re.search(r"^Error: [A-Z]\w*Error: ", output, re.M):
                say(f"cli {command[0]}", "crash", output[-800:])
            else:
                say(f"cli {command[0]}", "ok" if result.exit_code == 0 else "clear", output[-200:])
        return
    try:
        try:
            with Store(path, progress=False, read_only=True) as store:
                report = check_store(store)
        except StoreDamaged as error:
            report = check_file(Path(path), error)
        say("check", "ok" if report.get("consistent") else "clear", report.get("problems", [])[:3])
    except BaseException as error:
        failed("check", error)


# -- the parent ----------------------------------------------------------------


@dataclass
class Verdict:
    case: Case
    mode: str
    held: bool
    seconds: float
    reasons: list[str] = field(default_factory=list)
    summary: str = ""


def build_template(folder: Path) -> Template:
    sys.path.insert(0, str(PROGRAMS))
    sys.path.insert(0, str(ROOT))
    from hashing import HashingEmbedder

    from researchstore import Store
    from researchstore.serving.auth import create_key

    source = folder / "source"
    shutil.copytree(FIXTURES, source)
    db = folder / "template" / STORE_NAME
    with Store(db, progress=False, embedder=HashingEmbedder()) as store:
        store.ingest(source, name="fixtures")
        store.embed()
        key = create_key(store, scopes=(), workspaces=())
    second = folder / "second" / STORE_NAME
    second.parent.mkdir()
    shutil.copyfile(db, second)
    extra = source / "extra-report"
    extra.mkdir()
    (extra / "report.json").write_text(json.dumps({"title": "Later", "date": "2026-05-01"}))
    (extra / "notes.txt").write_text(f"A {SNAPSHOT_WORD} was seen on the roof.\n")
    with Store(second, progress=False, embedder=HashingEmbedder()) as store:
        store.ingest(source, name="fixtures")
        store.embed()
    return Template(db, second, key)


def run_case(case: Case, mode: str, template: Template, work: Path, timeout: float) -> Verdict:
    box = Sandbox(Path(tempfile.mkdtemp(dir=work, prefix=f"{case.klass}-")))
    shutil.copyfile(template.db, box.db)
    try:
        case.craft(box)
    except Exception as error:
        return Verdict(case, mode, False, 0.0, [f"crafting failed: {error!r}"])
    stores = [str(box.db)]
    if case.more_stores is not None:
        stores = [str(path) for path in case.more_stores(box)]
    spec = {
        "stores": stores,
        "read_only": mode == "read-only",
        "own_model": case.own_model,
        "key": template.key,
    }
    before = box.snapshot()
    started = time.monotonic()
    reasons: list[str] = []
    stages: list[dict[str, Any]] = []
    try:
        child = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--probe", json.dumps(spec)],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            cwd=box.work,
            env=box.env(),
        )
        stdout, stderr, code = child.stdout, child.stderr, child.returncode
    except subprocess.TimeoutExpired as expired:
        stdout = _text(expired.stdout)
        stderr = _text(expired.stderr)
        code = None
        reasons.append(f"hung: still running after {timeout:.0f} s")
    seconds = time.monotonic() - started
    for line in stdout.splitlines():
        try:
            stages.append(json.loads(line))
        except ValueError:
            pass
    if code is not None and code < 0:
        reasons.append(f"killed by signal {-code}")
    elif code:
        reasons.append(f"exit {code}: {stderr.strip()[-600:]}")
    if TRACEBACK in stderr:
        at = stderr.index(TRACEBACK)
        reasons.append(f"a traceback on stderr: {stderr[at : at + 1200]}")
    for stage in stages:
        if stage["outcome"] == "crash":
            reasons.append(f"{stage['stage']}: {stage['detail']}")
    if code is None and stages:
        reasons.append(f"last stage reached: {stages[-1]['stage']}")
    reasons += [f"outside the store and cache: {stray}" for stray in strays(before, box.snapshot())]
    if box.model_canary.exists():
        reasons.append("code from the model folder the file names ran")
    ran = canary_row(box.db)
    if ran:
        reasons.append(f"SQL of the file ran: {ran}")
    if case.expect is not None:
        problem = case.expect(box, stages)
        if problem:
            reasons.append(problem)
    verdict = Verdict(case, mode, not reasons, seconds, reasons, _summary(stages))
    return verdict


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def canary_row(db: Path) -> str | None:
    """The canary a crafted trigger leaves in ``meta``, read without running the file's SQL."""
    if not db.exists():
        return None
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    with closing(conn):
        steps = [0]

        def bounded() -> int:
            steps[0] += 1
            return 1 if steps[0] > 10_000 else 0

        conn.set_progress_handler(bounded, 1000)
        conn.text_factory = lambda data: data.decode("utf-8", "replace")
        try:
            conn.execute("PRAGMA trusted_schema = OFF")
            found = conn.execute("SELECT type FROM sqlite_master WHERE name = 'meta'").fetchone()
            if not found or found[0] != "table":
                return None
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (CANARY_KEY,)).fetchone()
        except (sqlite3.Error, ValueError):
            return None
    return str(row[0]) if row else None


def _summary(stages: list[dict[str, Any]]) -> str:
    """What the child saw, in a few words: how each stage ended."""
    counts = Counter(stage["outcome"] for stage in stages if stage["stage"] != "repairs")
    first_clear = next((stage for stage in stages if stage["outcome"] == "clear"), None)
    repairs = next((stage["detail"] for stage in stages if stage["stage"] == "repairs"), None)
    parts = [", ".join(f"{count} {outcome}" for outcome, count in sorted(counts.items()))]
    if first_clear is not None:
        parts.append(f"first error: {first_clear['stage']}: {str(first_clear['detail'])[:140]}")
    if repairs:
        parts.append(f"repairs: {str(repairs)[:140]}")
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=30, help="fuzzed cases (default 30)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per child")
    parser.add_argument("--only", default="", help="classes to run, comma-separated")
    parser.add_argument("--match", default="", help="only cases whose name holds this text")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the sandboxes")
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe is not None:
        probe(json.loads(args.probe))
        return
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-hostile-store-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with _quiet_cache(work):
        template = build_template(Path(tempfile.mkdtemp(dir=work, prefix="template-")))
    cases = crafted_cases(template) + fuzz_cases(args.cases, args.seed)
    if args.only:
        wanted = set(args.only.split(","))
        cases = [case for case in cases if case.klass in wanted]
    cases = [case for case in cases if args.match in case.name]
    modes = [mode for mode in args.modes.split(",") if mode]
    print(f"{len(cases)} cases x {len(modes)} modes, {args.timeout:.0f} s bound each, in {work}")
    verdicts: list[Verdict] = []
    for case in cases:
        for mode in modes:
            try:
                verdict = run_case(case, mode, template, work, args.timeout)
            except Exception as error:  # the bench's own failure: said, and the run goes on
                verdict = Verdict(case, mode, False, 0.0, [f"the bench failed: {error!r}"])
            verdicts.append(verdict)
            mark = "held" if verdict.held else "FAILED"
            print(
                f"{mark:6} {case.klass:17} {case.name[:38]:38} {mode:9} {verdict.seconds:5.1f}s  "
                f"{verdict.summary if verdict.held else verdict.reasons[0][:200]}",
                flush=True,
            )
    report(verdicts, time.monotonic() - started)
    if not args.keep and args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


@contextmanager
def _quiet_cache(work: Path) -> Iterator[None]:
    """The template is built with its cache in the work folder, never the user's."""
    saved = os.environ.get("RESEARCHSTORE_CACHE_DIR")
    os.environ["RESEARCHSTORE_CACHE_DIR"] = str(work / "template-cache")
    os.environ["RESEARCHSTORE_EMBED"] = "off"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("RESEARCHSTORE_CACHE_DIR", None)
        else:
            os.environ["RESEARCHSTORE_CACHE_DIR"] = saved


def report(verdicts: list[Verdict], seconds: float) -> None:
    per_class: dict[str, list[Verdict]] = defaultdict(list)
    for verdict in verdicts:
        per_class[verdict.case.klass].append(verdict)
    print()
    print(f"{'class':18} held / total")
    for klass, found in per_class.items():
        print(f"{klass:18} {sum(v.held for v in found):4} / {len(found)}")
    held = sum(verdict.held for verdict in verdicts)
    slowest = max(verdicts, key=lambda verdict: verdict.seconds, default=None)
    print(f"{'all':18} {held:4} / {len(verdicts)}  ({seconds:.0f} s", end="")
    if slowest is not None:
        print(f"; slowest child {slowest.seconds:.1f} s: {slowest.case.klass} {slowest.case.name})")
    failed = [verdict for verdict in verdicts if not verdict.held]
    if failed:
        print("\nDid not hold:")
        for verdict in failed:
            print(f"- {verdict.case.klass} / {verdict.case.name} / {verdict.mode}:")
            for reason in verdict.reasons:
                print(f"    {reason[:1500]}")


if __name__ == "__main__":
    main()
