"""The re-ingest job: readers never see a mixed report, crashes lose nothing.

Most tests here use real processes (``tests/programs``): a reader hammering
the tools while another process re-ingests, a child re-ingest killed
(SIGKILL) at chosen points or at random times, a second run refused by the
lock, the ``--every`` loop stopped by SIGTERM. After each crash the store is
reopened and checked against a simple model: report key -> document name ->
the words of its text.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers import CLI, program, run_cli, run_summaries
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from researchstore import InvalidInput, Store, StoreLocked
from researchstore.check import check_store
from researchstore.errors import Interrupted
from researchstore.reingest import reingest, run_every
from researchstore.storage.dates import parse_duration
from researchstore.storage.forwarding import prune_history

#: report key -> document file name -> text
Source = dict[str, dict[str, str]]
#: report key -> document file name -> the words of its text, as stored
Snapshot = dict[str, dict[str, list[str]]]

REPORT_DATE = "2026-05-04"


# -- sources on disk and the model of what the store must hold ---------------


def write_file(path: Path, text: str) -> None:
    """Write ``text`` and move the mtime forward, so every edit changes the signature."""
    previous = path.stat().st_mtime_ns if path.exists() else 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    stamp = max(time.time_ns(), previous + 1_000_000)
    os.utime(path, ns=(stamp, stamp))


def paragraph(key: str, name: str, version: int, number: int) -> str:
    """About 45 tokens: one chunk each at ``chunk_tokens=64``."""
    words = " ".join(f"w{(number * 7 + version * 3 + k) % 97}" for k in range(36))
    return f"Zebrafish gen{version} {key} {name} paragraph {number}: {words}."


def document_text(key: str, name: str, version: int, paragraphs: int = 4) -> str:
    body = [paragraph(key, name, version, number) for number in range(paragraphs)]
    return f"{key} {name} gen{version}\n\n" + "\n\n".join(body) + "\n"


def sync_source(root: Path, source: Source) -> None:
    """Make the tree under ``root`` hold exactly ``source`` (touching only what changed)."""
    root.mkdir(parents=True, exist_ok=True)
    for folder in root.iterdir():
        if folder.name not in source:
            shutil.rmtree(folder)
    for key, files in source.items():
        folder = root / key
        meta = folder / "report.json"
        if not meta.exists():
            write_file(
                meta,
                json.dumps(
                    {
                        "title": f"Report {key}",
                        "date": REPORT_DATE,
                        "tags": {"audience": "students"},
                    }
                ),
            )
        for existing in folder.iterdir():
            if existing.name != "report.json" and existing.name not in files:
                existing.unlink()
        for name, text in files.items():
            path = folder / name
            if not path.exists() or path.read_text() != text:
                write_file(path, text)


def expected(source: Source) -> Snapshot:
    return {
        key: {name: text.split() for name, text in files.items()} for key, files in source.items()
    }


def snapshot(conn: sqlite3.Connection) -> Snapshot:
    """What the SQLite file holds, in the model's terms (one read transaction)."""
    conn.execute("BEGIN")
    try:
        out: Snapshot = {key: {} for (key,) in conn.execute("SELECT key FROM reports")}
        rows = conn.execute(
            "SELECT r.key, d.path, c.text FROM chunks c "
            "JOIN documents d ON d.id = c.document_rowid "
            "JOIN reports r ON r.report_id = c.report_id ORDER BY r.key, d.path, c.position"
        )
        for key, path, text in rows:
            name = path[len(key) + 1 :]
            out[key].setdefault(name, []).extend(text.split())
    finally:
        conn.execute("COMMIT")
    return out


def raw_snapshot(db: Path) -> Snapshot:
    """The committed state of a store file, read with plain sqlite3 (no recovery)."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        return snapshot(conn)
    finally:
        conn.close()


def chunk_ids(conn: sqlite3.Connection) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for key, chunk_id in conn.execute(
        "SELECT r.key, c.chunk_id FROM chunks c JOIN reports r ON r.report_id = c.report_id"
    ):
        out.setdefault(key, set()).add(chunk_id)
    return out


def assert_sound(store: Store) -> None:
    """SQLite intact, index and store agree, no index work left over."""
    assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    report = check_store(store)
    assert report["consistent"], report
    assert report["pending"] == 0, report


def assert_each_report_old_or_new(now: Snapshot, old: Snapshot, new: Snapshot) -> None:
    for key in set(now) | set(old) | set(new):
        assert now.get(key) in (old.get(key), new.get(key)), (
            f"report {key!r} is neither its old nor its new version"
        )


# -- a reader in another process never sees a mixed report -------------------


def write_generation(root: Path, keys: list[str], generation: int) -> None:
    """Every document of every report (and its title) at ``generation``."""
    for key in keys:
        folder = root / key
        write_file(
            folder / "report.json",
            json.dumps({"title": f"Report {key} gen{generation}", "date": REPORT_DATE, "tags": {}}),
        )
        for name in ("a.txt", "b.txt"):
            write_file(folder / name, document_text(key, name, generation, paragraphs=8))


@pytest.mark.slow
def test_a_reader_in_another_process_never_sees_a_mixed_report(tmp_path: Path) -> None:
    root, db, stop = tmp_path / "source", tmp_path / "r.db", tmp_path / "stop"
    keys = [f"r{number}" for number in range(6)]
    write_generation(root, keys, 1)
    rng = random.Random(11)
    with Store(db, progress=False, chunk_tokens=64) as store:
        store.ingest(root, name="gen")
        with subprocess.Popen(
            [*program("reader"), str(db), str(stop), "30"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as reader:
            try:
                assert reader.stdout is not None and reader.stdout.readline() == "ready\n"
                for generation in range(2, 12):
                    write_generation(root, keys, generation)
                    (summary,) = reingest(store)
                    assert (summary.modified, summary.failed) == (len(keys), 0)
                    # Now and then a pause long enough for the reader's index to catch
                    # up (another process sees an index commit up to ~0.5 s late).
                    time.sleep(0.6 if generation % 3 == 0 else rng.uniform(0.0, 0.1))
            finally:
                stop.touch()
            out, err = reader.communicate(timeout=60)
        assert reader.returncode == 0, err
        report = json.loads(out)
        assert report["problems"] == []
        stats = report["stats"]
        # The reader did real work and saw the writer's runs land.
        assert len(stats["generations"]) >= 4, stats
        assert stats["searches_with_hits"] and stats["gets_after_search"], stats
        assert stats["documents_read"] >= 20 and stats["neighbors_read"] >= 20, stats
        assert_sound(store)


def test_search_finds_a_modified_report_while_its_run_is_still_indexing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from researchstore.indexes.index import SearchIndex

    root, db = tmp_path / "source", tmp_path / "r.db"
    keys = ["r0", "r1"]
    write_generation(root, keys, 1)
    with Store(db, progress=False) as writer, Store(db, progress=False) as reader:
        writer.ingest(root, name="gen")
        reader.sync.refresh()
        assert reader.search("r0")
        seen: list[list[dict[str, Any]]] = []
        real_commit = SearchIndex.commit

        def look_then_commit(self: SearchIndex) -> None:
            reader.sync.refresh()
            seen.append(reader.search("r0"))
            real_commit(self)

        monkeypatch.setattr(SearchIndex, "commit", look_then_commit)
        write_generation(root, ["r0"], 2)
        reingest(writer)
        assert seen, "the run never committed the index"
        assert all(hits for hits in seen), "report r0 vanished from search during the run"
        for hits in seen:  # forwarded to the new version: never the old, never a mix
            for hit in hits:
                if hit["title"].startswith("Report r0"):
                    assert hit["title"] == "Report r0 gen2"
                    assert reader.get_chunk(hit["chunk_id"]) is not None
        assert any(hit["title"] == "Report r0 gen2" for hits in seen for hit in hits)


# -- SIGKILL at each point of a run, then reopen -----------------------------


def start_child(
    db: Path,
    log: Path,
    point: str = "none",
    nth: int = 1,
    *,
    batch_reports: int = 2,
    index_commit_chunks: int = 100_000,
) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [
            *program("crashing_reingest"),
            str(db),
            point,
            str(nth),
            str(log),
            str(batch_reports),
            str(index_commit_chunks),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line == "ready\n", child.communicate()[1]
    return child


def committed_keys(log: Path) -> set[str]:
    return set(log.read_text().split()) if log.exists() else set()


def crash_source(version: int) -> Source:
    return {
        f"r{number}": {
            name: document_text(f"r{number}", name, version) for name in ("a.txt", "b.txt")
        }
        for number in range(8)
    }


def crash_edit(source: Source) -> Source:
    """Six reports modified, one removed, one untouched, two added."""
    edited = {key: dict(files) for key, files in source.items()}
    for number in range(6):
        key = f"r{number}"
        edited[key] = {name: document_text(key, name, 2) for name in ("a.txt", "b.txt")}
    del edited["r6"]
    for key in ("r8", "r9"):
        edited[key] = {name: document_text(key, name, 2) for name in ("a.txt", "b.txt")}
    return edited


ALL_WRITES = {"r0", "r1", "r2", "r3", "r4", "r5", "r8", "r9"}
# Writes run in key order (r0..r5 modified, r8, r9 new) in batches of two
# reports; a batch that replaced reports commits the index at once (batches
# 1-3), the new reports' batch waits; the removal of r6 follows them; then
# the final index commit (the 4th). Each case: the patched point, which call
# of it dies, the chunks between index commits, and the reports that must be
# new after the crash.
FIRST_BATCH = {"r0", "r1"}
CRASH_POINTS = [
    ("mid_batch", 1, 100_000, set()),
    ("mid_batch", 5, 100_000, {"r0", "r1", "r2", "r3"}),
    ("before_index_commit", 2, 1, {"r0", "r1", "r2", "r3"}),  # a mid-run index commit
    ("mid_removal", 7, 100_000, ALL_WRITES),  # 6 modified reports retire first
    ("before_removal", 1, 100_000, ALL_WRITES),
    ("before_index_commit", 1, 100_000, FIRST_BATCH),
    ("before_sidecar", 1, 100_000, FIRST_BATCH),
    ("before_pending_deleted", 1, 100_000, FIRST_BATCH),
    ("before_index_commit", 4, 100_000, ALL_WRITES | {"r6"}),
    ("before_sidecar", 4, 100_000, ALL_WRITES | {"r6"}),
    ("before_pending_deleted", 4, 100_000, ALL_WRITES | {"r6"}),
]


# The first case (dead in the first batch) runs in the fast tier too; the others are slow.
CRASH_CASES = [
    pytest.param(
        *case, id=f"{case[0]}-{case[1]}-{case[2]}", marks=() if n == 0 else pytest.mark.slow
    )
    for n, case in enumerate(CRASH_POINTS)
]


@pytest.mark.parametrize(("point", "nth", "index_commit_chunks", "must_be_new"), CRASH_CASES)
def test_a_run_killed_at_any_point_is_finished_by_the_next(
    tmp_path: Path, point: str, nth: int, index_commit_chunks: int, must_be_new: set[str]
) -> None:
    root, db, log = tmp_path / "source", tmp_path / "r.db", tmp_path / "committed.log"
    old_source = crash_source(1)
    sync_source(root, old_source)
    with Store(db, progress=False) as store:
        store.ingest(root, name="crash")
        ids_before = chunk_ids(store._conn)
    new_source = crash_edit(old_source)
    sync_source(root, new_source)

    child = start_child(db, log, point, nth, index_commit_chunks=index_commit_chunks)
    _, err = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL, err

    old, new = expected(old_source), expected(new_source)
    committed = raw_snapshot(db)
    assert {key for key in set(old) | set(new) if committed.get(key) == new.get(key)} == (
        must_be_new | {"r7"}  # r7 is the same in both
    )
    with Store(db, progress=False) as store:
        assert_sound(store)
        now = snapshot(store._conn)
        assert now == committed  # reopening lost nothing that was committed
        assert_each_report_old_or_new(now, old, new)
        assert all(now.get(key) == new.get(key) for key in committed_keys(log))
        assert chunk_ids(store._conn)["r7"] == ids_before["r7"]
        for key in set(old) - must_be_new - {"r7"}:
            assert chunk_ids(store._conn).get(key) == ids_before[key]

        (summary,) = reingest(store)
        assert summary.failed == 0
        assert snapshot(store._conn) == new
        assert_sound(store)
        assert chunk_ids(store._conn)["r7"] == ids_before["r7"]
        statuses = [
            status
            for (status,) in store._conn.execute("SELECT status FROM source_versions ORDER BY id")
        ]
        assert statuses == ["completed", "interrupted", "completed"]


def big_document(key: str, name: str, version: int) -> str:
    return document_text(key, name, version, paragraphs=50)


@pytest.mark.slow
def test_kill_9_at_random_times_loses_nothing(tmp_path: Path) -> None:
    root, db, log = tmp_path / "source", tmp_path / "r.db", tmp_path / "committed.log"
    rng = random.Random(20260504)
    versions = {f"r{number:03d}": 1 for number in range(80)}

    def edit() -> Source:
        for key in rng.sample(sorted(versions), 55):
            versions[key] += 1
        for key in rng.sample(sorted(versions), 2):
            del versions[key]
        for _ in range(2):
            versions[f"r{rng.randrange(10**6):07d}"] = 1
        source = {
            key: {name: big_document(key, name, version) for name in ("a.txt", "b.txt")}
            for key, version in versions.items()
        }
        sync_source(root, source)
        log.unlink(missing_ok=True)
        return source

    sync_source(
        root,
        {
            key: {name: big_document(key, name, 1) for name in ("a.txt", "b.txt")}
            for key in versions
        },
    )
    with Store(db, progress=False) as store:
        store.ingest(root, name="big")
    # A first run, in full, tells how long a run takes on this machine.
    edit()
    child = start_child(db, log, batch_reports=3, index_commit_chunks=60)
    started = time.perf_counter()
    out, err = child.communicate(timeout=120)
    run_seconds = time.perf_counter() - started
    assert child.returncode == 0, err
    assert json.loads(out)[0]["modified"] >= 53
    killed = 0
    for _ in range(5):
        old = raw_snapshot(db)
        source = edit()
        child = start_child(db, log, batch_reports=3, index_commit_chunks=60)
        # Early enough in the run to land mid-run even on a busy machine.
        time.sleep(rng.uniform(0.0, 0.6 * run_seconds))
        child.send_signal(signal.SIGKILL)
        _, err = child.communicate(timeout=60)
        assert child.returncode in (0, -signal.SIGKILL), err
        killed += child.returncode == -signal.SIGKILL
        committed = raw_snapshot(db)
        with Store(db, progress=False) as store:
            assert_sound(store)
            now = snapshot(store._conn)
        assert now == committed
        assert_each_report_old_or_new(now, old, expected(source))
        assert all(now[key] == expected(source)[key] for key in committed_keys(log))
    assert killed >= 3, f"only {killed} of 5 runs were cut short ({run_seconds:.2f}s a run)"
    with Store(db, progress=False) as store:
        (summary,) = reingest(store)
        assert summary.failed == 0
        assert snapshot(store._conn) == expected(source)
        assert_sound(store)


# -- a property: any edits, runs and crashes end in the source, exactly -----

PROPERTY_KEYS = ("k0", "k1", "k2", "k3")
PROPERTY_NAMES = ("a.txt", "b.txt", "c.txt")
#: Hooks a run reaches once per report (or per index commit, here one per report).
CRASH_HOOKS = (
    "mid_batch",
    "mid_removal",
    "before_index_commit",
    "before_sidecar",
    "before_pending_deleted",
)
EDIT = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(PROPERTY_KEYS), st.sampled_from(PROPERTY_NAMES)),
    st.tuples(
        st.just("drop_document"), st.sampled_from(PROPERTY_KEYS), st.sampled_from(PROPERTY_NAMES)
    ),
    st.tuples(st.just("remove_report"), st.sampled_from(PROPERTY_KEYS)),
)
#: Some edits to the source, then a run or a run killed at a point (or not: "none").
ROUND = st.tuples(
    st.lists(EDIT, min_size=1, max_size=4),
    st.one_of(
        st.just(("run", "", 0)),
        st.tuples(st.just("crash"), st.sampled_from(CRASH_HOOKS), st.integers(1, 3)),
        st.tuples(st.just("crash"), st.sampled_from(("none", "before_removal")), st.just(1)),
    ),
)


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds=st.lists(ROUND, min_size=1, max_size=4))
def test_any_edits_runs_and_crashes_end_with_the_store_equal_to_the_source(
    tmp_path_factory: pytest.TempPathFactory,
    rounds: list[tuple[list[tuple[str, ...]], tuple[str, str, int]]],
) -> None:
    base = tmp_path_factory.mktemp("property")
    root, db, log = base / "source", base / "r.db", base / "committed.log"
    source: Source = {
        key: {"a.txt": document_text(key, "a.txt", 0, paragraphs=2)} for key in PROPERTY_KEYS[:3]
    }
    sync_source(root, source)
    with Store(db, progress=False) as store:
        store.ingest(root, name="prop")
        held = snapshot(store._conn)  # what the store holds, in the model's terms
    version = 0

    def run_in_process() -> None:
        nonlocal held
        with Store(db, progress=False) as store:
            ids_before = chunk_ids(store._conn)
            (summary,) = reingest(store)
            now = snapshot(store._conn)
            if not source and held:  # an empty root: refused, nothing removed
                assert summary.failed == 1 and now == held
            else:
                assert summary.failed == 0 and now == expected(source)
            ids_after = chunk_ids(store._conn)
            for key, files in held.items():
                if files and expected(source).get(key) == files:
                    assert ids_after[key] == ids_before[key], f"{key} unchanged, ids changed"
            assert_sound(store)
        held = now

    def crash(point: str, nth: int) -> None:
        nonlocal held
        log.unlink(missing_ok=True)
        child = start_child(db, log, point, nth, batch_reports=1, index_commit_chunks=1)
        _, err = child.communicate(timeout=60)
        assert child.returncode in (0, -signal.SIGKILL), err
        committed = raw_snapshot(db)
        with Store(db, progress=False) as store:
            assert_sound(store)
            now = snapshot(store._conn)
        assert now == committed
        assert_each_report_old_or_new(now, held, expected(source))
        if source or not held:
            assert all(now[key] == expected(source)[key] for key in committed_keys(log))
        held = now

    for edits, (kind, point, nth) in rounds:
        for edit, key, *name in edits:
            if edit == "write":
                version += 1
                source.setdefault(key, {})[name[0]] = document_text(
                    key, name[0], version, paragraphs=2
                )
            elif edit == "drop_document":
                source.get(key, {}).pop(name[0], None)
            else:
                source.pop(key, None)
        sync_source(root, source)
        if kind == "run":
            run_in_process()
        else:
            crash(point, nth)
    run_in_process()


# -- one run at a time --------------------------------------------------------


@pytest.mark.slow
def test_a_second_run_is_refused_while_another_process_holds_the_store(tmp_path: Path) -> None:
    root, db = tmp_path / "source", tmp_path / "r.db"
    source = crash_source(1)
    sync_source(root, source)
    with Store(db, progress=False) as store:
        store.ingest(root, name="locked")
    edited = crash_edit(source)
    sync_source(root, edited)
    with subprocess.Popen(
        [*program("lock_holder"), str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        with Store(db, progress=False) as store:
            with pytest.raises(StoreLocked) as refused:
                reingest(store)
            assert f"process {holder.pid} " in refused.value.message
            assert (refused.value.code, refused.value.exit_code) == ("upstream_unavailable", 75)
        result = run_cli("reingest", str(db))
        assert result.returncode == 75, result.stderr
        assert "another run is at work" in result.stderr
        assert f"process {holder.pid} " in result.stderr
        assert raw_snapshot(db) == expected(source)  # neither refused run changed anything
        holder.communicate(timeout=30)  # its stdin closes: it lets go
    assert holder.returncode == 0
    result = run_cli("reingest", str(db))
    assert result.returncode == 0, result.stderr
    assert "6 modified" in result.stdout
    assert raw_snapshot(db) == expected(edited)


# -- a broken report fails alone ----------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("broken", ["invalid_json", "duplicate_id", "existing_turns_invalid"])
def test_one_broken_report_fails_alone_and_the_cli_exits_1(tmp_path: Path, broken: str) -> None:
    root, db = tmp_path / "source", tmp_path / "r.db"
    source = {key: {"a.txt": document_text(key, "a.txt", 1)} for key in ("g0", "g1", "g2")}
    sync_source(root, source)
    write_file(root / "g0" / "report.json", json.dumps({"title": "G0", "id": 7}))
    with Store(db, progress=False) as store:
        store.ingest(root, name="broken")
        ids_before = chunk_ids(store._conn)
    old = raw_snapshot(db)
    source["g1"] = {"a.txt": document_text("g1", "a.txt", 2)}
    source["g3"] = {"a.txt": document_text("g3", "a.txt", 1)}
    if broken == "existing_turns_invalid":
        bad_key = "g2"
    else:
        bad_key = "bad"
        source[bad_key] = {"a.txt": document_text(bad_key, "a.txt", 1)}
    sync_source(root, source)
    meta = root / bad_key / "report.json"
    if broken == "duplicate_id":
        write_file(meta, json.dumps({"title": "Wants 7", "id": 7}))
        reason = "asks for id 7, which report 'g0' already has"
    else:
        write_file(meta, '{"title": "half a report", ')
        reason = "report.json is not valid JSON"

    result = run_cli("reingest", str(db), "--json")
    assert result.returncode == 1, result.stderr
    [summary] = run_summaries(result.stdout)
    assert summary["failed"] == 1
    assert [failure["report"] for failure in summary["failures"]] == [bad_key]
    assert reason in summary["failures"][0]["reason"]
    assert (summary["modified"], summary["new"], summary["removed"]) == (1, 1, 0)

    now = raw_snapshot(db)
    stored = {key: files for key, files in expected(source).items() if key != bad_key}
    if broken == "existing_turns_invalid":
        stored[bad_key] = old[bad_key]  # kept as it was, not removed
    assert now == stored
    with Store(db, progress=False) as store:
        assert store.get_report(7)["key"] == "g0"  # type: ignore[index]
        assert chunk_ids(store._conn)["g0"] == ids_before["g0"]
        if broken == "existing_turns_invalid":
            assert chunk_ids(store._conn)[bad_key] == ids_before[bad_key]
        assert_sound(store)
        # The broken report is tried again by every run until it is fixed.
        (again,) = reingest(store)
        good = {"g0", "g1", "g3"} | ({"g2"} if broken != "existing_turns_invalid" else set())
        assert (again.failed, again.unchanged) == (1, len(good))
        assert again.failures[0]["report"] == bad_key


# -- ids: kept when unchanged, forwarded when replaced ------------------------


def long_paragraph(key: str, number: int, edit: str = "") -> str:
    """About 170 tokens: one chunk each at the default 256 tokens a chunk."""
    words = " ".join(f"{key}w{(number * 11 + k) % 89}" for k in range(160))
    return f"Paragraph {number} of {key}{edit}: {words}."


def paragraphs_text(key: str, count: int, *, edited: int | None = None) -> str:
    body = [
        long_paragraph(key, number, " edited here" if number == edited else "")
        for number in range(count)
    ]
    return f"{key} notes\n\n" + "\n\n".join(body) + "\n"


def chunks_by_position(store: Store, key: str) -> list[dict[str, Any]]:
    rows = store._conn.execute(
        "SELECT c.chunk_id, c.text FROM chunks c JOIN reports r ON r.report_id = c.report_id "
        "WHERE r.key = ? ORDER BY c.position",
        (key,),
    ).fetchall()
    return [{"chunk_id": chunk_id, "text": text} for chunk_id, text in rows]


def resolve(store: Store, chunk_id: str) -> Any:
    envelope = store.call("research_resolve_chunk", {"chunk_id": chunk_id})
    assert set(envelope) == {"result"}, envelope
    return envelope["result"]["resolution"]


def test_replaced_ids_miss_and_resolve_to_where_their_text_lives_now(tmp_path: Path) -> None:
    root, db = tmp_path / "source", tmp_path / "r.db"
    source = {key: {"notes.txt": paragraphs_text(key, 5)} for key in ("keep", "edit", "gone")}
    sync_source(root, source)
    with Store(db, progress=False) as store:
        store.ingest(root, name="forward")
        keep = chunks_by_position(store, "keep")
        edit = chunks_by_position(store, "edit")
        gone = chunks_by_position(store, "gone")
        assert len(edit) == 5  # one chunk per paragraph, the title with the first
        source["edit"]["notes.txt"] = paragraphs_text("edit", 5, edited=2)
        del source["gone"]
        sync_source(root, source)
        (summary,) = reingest(store)
        assert (summary.unchanged, summary.modified, summary.removed) == (1, 1, 1)

        # Unchanged: the same ids, still current.
        assert chunks_by_position(store, "keep") == keep
        current = resolve(store, keep[1]["chunk_id"])
        assert current["status"] == "current" and current["replaced_by_run"] is None
        assert [chunk["chunk_id"] for chunk in current["chunks"]] == [keep[1]["chunk_id"]]

        # Modified: every old id misses, exactly as seed 000 says.
        now = chunks_by_position(store, "edit")
        assert not {chunk["chunk_id"] for chunk in now} & {chunk["chunk_id"] for chunk in edit}
        for chunk in edit:
            assert store.call("research_get_chunk", {"chunk_id": chunk["chunk_id"]}) == {
                "result": {"chunk": None}
            }
        searched = {hit["chunk_id"] for hit in store.search("editw3 editw40", limit=50)}
        assert searched and searched <= {chunk["chunk_id"] for chunk in now}

        # An untouched paragraph: the new chunk with the very same text.
        for position in (0, 1, 3, 4):
            resolution = resolve(store, edit[position]["chunk_id"])
            assert resolution["status"] == "replaced", resolution
            assert resolution["match"] == "same_text"
            assert resolution["replaced_by_run"] == summary.version_id
            assert resolution["replaced_at"]
            assert [chunk["chunk_id"] for chunk in resolution["chunks"]] == [
                now[position]["chunk_id"]
            ]
            assert resolution["chunks"][0]["text"] == edit[position]["text"]
        # The edited paragraph: the chunk(s) now covering the same span.
        resolution = resolve(store, edit[2]["chunk_id"])
        assert (resolution["status"], resolution["match"]) == ("replaced", "overlapping_span")
        assert resolution["replaced_by_run"] == summary.version_id
        assert now[2]["chunk_id"] in [chunk["chunk_id"] for chunk in resolution["chunks"]]
        assert any("edited here" in chunk["text"] for chunk in resolution["chunks"])

        # Removed: gone, and said so.
        for chunk in gone:
            resolution = resolve(store, chunk["chunk_id"])
            assert resolution["status"] == "gone" and resolution["chunks"] == []
            assert resolution["replaced_by_run"] == summary.version_id
            assert "removed" in resolution["reason"]
        # Never seen: a miss.
        assert store.call(
            "research_resolve_chunk", {"chunk_id": "01a22bb1-0000-7000-8000-000000000000"}
        ) == {"result": {"resolution": None}}
        assert_sound(store)


@pytest.mark.slow
def test_the_forwarding_record_is_pruned_after_the_retention(tmp_path: Path) -> None:
    root, db = tmp_path / "source", tmp_path / "r.db"
    source = {"edit": {"notes.txt": paragraphs_text("edit", 3)}}
    sync_source(root, source)
    with Store(db, progress=False) as store:
        store.ingest(root, name="retention")
        old = chunks_by_position(store, "edit")
    source["edit"]["notes.txt"] = paragraphs_text("edit", 3, edited=1)
    sync_source(root, source)
    result = run_cli("reingest", str(db), "--forwarding-retention", "1s")
    assert result.returncode == 0, result.stderr
    retired = time.monotonic()
    with Store(db, progress=False) as store:
        assert store._conn.execute(
            "SELECT value FROM meta WHERE key = 'forwarding_retention_days'"
        ).fetchone()[0] == repr(1 / 86400)
        assert all(resolve(store, chunk["chunk_id"]) is not None for chunk in old)
    # retired_at has whole seconds: past 2 s the rows are surely older than 1 s.
    time.sleep(max(0.0, 2.2 - (time.monotonic() - retired)))
    result = run_cli("reingest", str(db))
    assert result.returncode == 0, result.stderr
    with Store(db, progress=False) as store:
        assert all(resolve(store, chunk["chunk_id"]) is None for chunk in old)
        assert store._conn.execute("SELECT count(*) FROM chunk_history").fetchone()[0] == 0


def test_the_default_retention_keeps_thirty_days(store: Store, tmp_path: Path) -> None:
    root = tmp_path / "source"
    source = {"edit": {"notes.txt": paragraphs_text("edit", 2)}}
    sync_source(root, source)
    store.ingest(root, name="retention")
    sync_source(root, {"edit": {"notes.txt": paragraphs_text("edit", 2, edited=0)}})
    reingest(store)
    history = store._conn.execute("SELECT count(*) FROM chunk_history").fetchone()[0]
    assert history == 2
    now = datetime.now(UTC)
    with store.transaction() as conn:
        assert prune_history(conn, now=now + timedelta(days=29)) == 0
        assert prune_history(conn, now=now + timedelta(days=31)) == history


def test_a_removed_reports_id_is_never_given_to_another_report(
    store: Store, tmp_path: Path
) -> None:
    root = tmp_path / "source"
    source = {key: {"a.txt": document_text(key, "a.txt", 1)} for key in ("r0", "r1", "r2")}
    sync_source(root, source)
    store.ingest(root, name="ids")
    removed_id = store._conn.execute("SELECT report_id FROM reports WHERE key = 'r2'").fetchone()[0]
    stale_chunk = chunks_by_position(store, "r2")[0]["chunk_id"]
    del source["r2"]
    sync_source(root, source)
    reingest(store)
    source["r9"] = {"a.txt": document_text("r9", "a.txt", 1)}
    sync_source(root, source)
    reingest(store)
    # An agent holding the removed report's id must get a miss, not another report.
    assert store.call("research_get_report", {"report_id": removed_id}) == {
        "result": {"report": None}
    }
    assert resolve(store, stale_chunk)["status"] == "gone"


# -- a source that is not there -------------------------------------------------


@pytest.mark.slow
def test_an_emptied_source_root_removes_nothing(tmp_path: Path) -> None:
    root, db = tmp_path / "source", tmp_path / "r.db"
    sync_source(root, crash_source(1))
    with Store(db, progress=False) as store:
        store.ingest(root, name="unmounted")
        ids_before = chunk_ids(store._conn)
        for folder in root.iterdir():
            shutil.rmtree(folder)
        (summary,) = reingest(store)
        assert (summary.failed, summary.removed) == (1, 0)
        assert summary.failures[0]["report"] == "*"
        assert "refusing to remove all 8 reports" in summary.failures[0]["reason"]
        assert chunk_ids(store._conn) == ids_before
        status, recorded = store._conn.execute(
            "SELECT status, summary FROM source_versions ORDER BY id DESC LIMIT 1"
        ).fetchone()
        assert status == "completed_with_failures"
        assert "refusing" in json.loads(recorded)["failures"][0]["reason"]
        assert_sound(store)
    result = run_cli("reingest", str(db))
    assert result.returncode == 1
    assert "refusing to remove all" in result.stdout
    assert raw_snapshot(db) == expected(crash_source(1))


@pytest.mark.slow
def test_a_missing_source_root_is_a_failure_and_changes_nothing(tmp_path: Path) -> None:
    root, db = tmp_path / "source", tmp_path / "r.db"
    sync_source(root, crash_source(1))
    with Store(db, progress=False) as store:
        store.ingest(root, name="missing")
        ids_before = chunk_ids(store._conn)
        versions = store._conn.execute("SELECT count(*) FROM source_versions").fetchone()[0]
        root.rename(tmp_path / "elsewhere")
        (summary,) = reingest(store)
        assert summary.failed == 1 and summary.removed == 0
        assert "is not a directory; nothing was changed" in summary.failures[0]["reason"]
        assert chunk_ids(store._conn) == ids_before
        assert store._conn.execute("SELECT count(*) FROM source_versions").fetchone()[0] == versions
    result = run_cli("reingest", str(db))
    assert result.returncode == 1
    assert "is not a directory" in result.stdout
    (tmp_path / "elsewhere").rename(root)
    with Store(db, progress=False) as store:
        (summary,) = reingest(store)
        assert (summary.failed, summary.unchanged) == (0, 8)
        assert chunk_ids(store._conn) == ids_before


def test_an_unknown_source_name_is_invalid_input(filled_store: Store) -> None:
    with pytest.raises(InvalidInput, match="no source named 'nope'"):
        reingest(filled_store, source="nope")
    (summary,) = reingest(filled_store, source="field")
    assert summary.unchanged == 3


# -- the schedule: --every and durations ----------------------------------------


#: A run's summary line: ``<time> source every: N new, ...``.
SUMMARY_LINE = re.compile(r"^\S+Z source every: \d+ new, ")


@pytest.mark.slow
def test_every_runs_again_and_again_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    root, db = tmp_path / "source", tmp_path / "r.db"
    source = {key: {"a.txt": document_text(key, "a.txt", 1)} for key in ("e0", "e1")}
    sync_source(root, source)
    with Store(db, progress=False) as store:
        store.ingest(root, name="every")
    with subprocess.Popen(
        [*CLI, "reingest", str(db), "--every", "1s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as loop:
        assert loop.stdout is not None and loop.stderr is not None
        lines: list[str] = []
        reading = threading.Thread(target=lambda: lines.extend(iter(loop.stdout.readline, "")))
        reading.start()

        def wait_for(count: int) -> list[str]:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and loop.poll() is None:
                runs = [line for line in list(lines) if SUMMARY_LINE.match(line)]
                if len(runs) >= count:
                    return runs
                time.sleep(0.05)
            raise AssertionError(f"{count} runs expected; output so far: {lines}")

        try:
            assert "0 modified" in wait_for(1)[0]
            source["e1"]["a.txt"] = document_text("e1", "a.txt", 2)
            sync_source(root, source)
            wait_for(3)  # the edit is picked up by the second or the third run
            loop.send_signal(signal.SIGTERM)  # most likely between runs, just after one
            loop.wait(timeout=20)
        finally:
            loop.kill()
            reading.join(timeout=20)
        err = loop.stderr.read()
    if loop.returncode == 143:  # it met a run: that run stopped where it was
        assert err.startswith("Error: interrupted by SIGTERM") and err.count("\n") == 1, err
    else:  # between runs: the schedule simply ends
        assert loop.returncode == 0 and err == "", err
    assert any("1 modified" in line for line in lines), lines
    assert raw_snapshot(db) == expected(source)
    with Store(db, progress=False) as store:  # the lock was let go
        (summary,) = reingest(store)
        assert summary.unchanged == 2
        assert_sound(store)


class InstantStop(threading.Event):
    """A stop event whose waits return at once; each wait is written down in order.

    With ``signal_at_wait``, the process sends itself SIGTERM during that wait
    (counting from 1).
    """

    def __init__(
        self, log: list[tuple[str, float | None, bool]], *, signal_at_wait: int = 0
    ) -> None:
        super().__init__()
        self.log = log
        self.signal_at_wait = signal_at_wait

    def wait(self, timeout: float | None = None) -> bool:
        waits = sum(1 for what, _, _ in self.log if what == "wait")
        if waits + 1 == self.signal_at_wait:
            os.kill(os.getpid(), signal.SIGTERM)  # handled: a stop between runs
        self.log.append(("wait", timeout, self.is_set()))
        return self.is_set()


def test_run_every_stops_between_runs_on_sigterm() -> None:
    before = signal.getsignal(signal.SIGTERM)
    log: list[tuple[str, float | None, bool]] = []
    runs: list[int] = []  # where each run stands in the log

    def run_once() -> None:
        runs.append(len(log))
        log.append(("run", None, False))

    interval = 3600.0  # never slept: the waits return at once and are looked at
    run_every(interval, run_once, stop=InstantStop(log, signal_at_wait=2))
    assert runs == [0, 2]
    # Run, wait the interval (less the run's own time), run; the SIGTERM during
    # the second wait ends the loop there, before a third run.
    assert [(what, stopped) for what, _, stopped in log] == [
        ("run", False),
        ("wait", False),
        ("run", False),
        ("wait", True),
    ]
    first_wait = log[1][1]
    assert first_wait is not None and 0 < first_wait <= interval
    assert signal.getsignal(signal.SIGTERM) == before


def test_run_every_stops_a_run_where_it_is_on_sigterm() -> None:
    before = signal.getsignal(signal.SIGTERM)
    log: list[tuple[str, float | None, bool]] = []
    reached: list[str] = []

    def run_once() -> None:
        log.append(("run", None, False))
        if len(log) == 3:  # the second run
            os.kill(os.getpid(), signal.SIGTERM)
            reached.append("past the signal")  # never: the run stops at the signal

    with pytest.raises(Interrupted) as stopped:
        run_every(3600.0, run_once, stop=InstantStop(log))
    assert stopped.value.signum == signal.SIGTERM and stopped.value.exit_code == 143
    assert [what for what, _, _ in log] == ["run", "wait", "run"] and reached == []
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("15m", 900),
        ("1h", 3600),
        ("1h30m", 5400),
        ("2d", 172_800),
        ("1w", 604_800),
        (" 1H 30M ", 5400),
        ("0.5s", 0.5),
    ],
)
def test_parse_duration_accepts(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "junk",
        "90",
        "s",
        "1x",
        "-5s",
        "0s",
        "0m0s",
        "1h junk",
        "1.2.3h",
        "15 minutes",
        "1h30",
        "h1",
    ],
)
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_duration(text)
    assert refused.value.field == "every"


def test_the_cli_rejects_a_bad_duration(tmp_path: Path, source_dir: Path) -> None:
    from click.testing import CliRunner

    from researchstore.cli import main

    db = tmp_path / "r.db"
    with Store(db, progress=False) as store:
        store.ingest(source_dir, name="field")
    for option in ("--every", "--forwarding-retention"):
        result = CliRunner().invoke(main, ["reingest", str(db), option, "soon"])
        assert result.exit_code == 2
        assert "not a duration: 'soon'" in result.output


def test_a_targeted_run_looks_only_at_the_named_reports(tmp_path: Path) -> None:
    root, db = tmp_path / "source", tmp_path / "r.db"
    write_generation(root, ["r0", "r1", "r2"], 1)
    with Store(db, progress=False) as store:
        store.ingest(root, name="gen")
        write_generation(root, ["r0", "r1"], 2)  # both change on disk ...
        shutil.rmtree(root / "r2")
        with pytest.raises(InvalidInput, match="'../outside': not a report path inside"):
            reingest(store, only=["r0", "r2", "../outside"])  # nothing changes
        [summary] = reingest(store, only=["r0", "r2"])  # ... one is named, one is gone
        assert (summary.modified, summary.removed, summary.unchanged) == (1, 1, 0)
        assert not [hit for hit in store.search("r2") if "r2" in hit["title"]]
        titles = {hit["title"] for hit in store.search("r0 r1", limit=50)}
        assert titles == {"Report r0 gen2", "Report r1 gen1"}  # r1 was not looked at
        [full] = reingest(store)  # the next full walk catches up with r1
        assert (full.modified, full.unchanged) == (1, 1)


def test_a_forwarded_hit_still_meets_the_filters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from researchstore.indexes.index import SearchIndex

    root, db = tmp_path / "source", tmp_path / "r.db"
    write_file(
        root / "r0" / "report.json",
        json.dumps({"title": "Hives", "date": REPORT_DATE, "tags": {"season": "spring"}}),
    )
    write_file(root / "r0" / "a.txt", "Hives\n\nThe queen was marked in April.\n")
    with Store(db, progress=False) as writer, Store(db, progress=False) as reader:
        writer.ingest(root, name="gen")
        seen: dict[str, list[dict[str, Any]]] = {}
        real_commit = SearchIndex.commit

        def look_then_commit(self: SearchIndex) -> None:
            reader.sync.refresh()
            for season in ("spring", "autumn"):
                seen[season] = reader.search("queen", tags={"season": [season]})
            real_commit(self)

        monkeypatch.setattr(SearchIndex, "commit", look_then_commit)
        write_file(
            root / "r0" / "report.json",
            json.dumps({"title": "Hives", "date": REPORT_DATE, "tags": {"season": "autumn"}}),
        )
        write_file(root / "r0" / "a.txt", "Hives\n\nThe queen was marked in April.\n")
        reingest(writer)
    # The index still says spring; the current chunk says autumn: not a spring hit.
    assert seen["spring"] == []
    assert seen["autumn"] == []  # the index does not know autumn yet


def test_single_files_are_refreshed_by_name_never_by_walking_their_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from researchstore.ingest import pipeline

    notes = tmp_path / "desk" / "notes.txt"
    other = tmp_path / "desk" / "other.txt"
    write_file(notes, "Notes\n\nThe swarm settled in the hawthorn.\n")
    write_file(other, "Other\n\nA second file.\n")
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest_file(notes)
        store.ingest_file(other)

        def no_walk(root: Path) -> Any:
            raise AssertionError(f"walked {root}")

        monkeypatch.setattr(pipeline, "discover", no_walk)
        [unchanged] = reingest(store)
        assert (unchanged.unchanged, unchanged.modified) == (2, 0)
        write_file(notes, "Notes\n\nThe swarm settled in the rowan.\n")
        other.unlink()
        [refreshed] = reingest(store)
        assert (refreshed.modified, refreshed.removed, refreshed.unchanged) == (1, 1, 0)
        assert [hit["title"] for hit in store.search("rowan")] == ["Notes"]
        assert store.search("hawthorn") == [] and store.search("second file") == []


def test_a_source_name_keeps_its_kind(tmp_path: Path, source_dir: Path) -> None:
    write_file(tmp_path / "one.txt", "One\n\nA file.\n")
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest_file(tmp_path / "one.txt")
        with pytest.raises(InvalidInput, match="taken by a source of kind 'files'"):
            store.ingest(source_dir, name="local-files")
