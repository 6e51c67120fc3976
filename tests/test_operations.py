"""Running the store from cron and a shell: sources keep their roots, runs stop
cleanly on a signal and leave no process behind, logs say what changed, and
every way out of the command line has the exit code the README's table gives.

Signals and kills are sent to real child processes (``tests/programs``), and
what is left running is read from ``/proc``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from helpers import ROOT, program, run_events, write_report

from researchstore import InvalidInput, Store
from researchstore.check import check_store
from researchstore.cli import main
from researchstore.errors import ResearchStoreError
from researchstore.reingest import reingest

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def invoke(*args: str, **options: Any) -> Result:
    return CliRunner().invoke(main, list(args), **options)


def report_ids(db: Path) -> dict[str, int]:
    """Every report's key -> id, read with plain sqlite3."""
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT key, report_id FROM reports").fetchall())
    finally:
        conn.close()


def source_roots(db: Path) -> dict[str, str]:
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT name, root FROM sources").fetchall())
    finally:
        conn.close()


def docs(root: Path, *keys: str) -> Path:
    """A source at ``root`` with one single-file report per key."""
    for key in keys:
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{key}\n\nNotes about {key.replace('/', ' ')} and the hive scale.\n")
    return root


# -- item 3: a source's root changes only when asked ------------------------------


def test_a_second_directory_with_the_same_name_is_refused_and_loses_nothing(
    tmp_path: Path,
) -> None:
    first = docs(tmp_path / "a" / "docs", "one.txt", "two.txt")
    second = docs(tmp_path / "b" / "docs", "three.txt")
    db = tmp_path / "s.db"
    assert invoke("ingest", str(db), str(first)).exit_code == 0

    refused = invoke("ingest", str(db), str(second))
    assert refused.exit_code == 2, refused.output
    message = refused.stderr
    assert message.startswith("Error: ") and message.count("\n") == 1
    for words in (str(first.resolve()), str(second.resolve()), "--name", "--move-root"):
        assert words in message
    assert source_roots(db) == {"docs": str(first.resolve())}

    again = invoke("reingest", str(db))
    assert again.exit_code == 0, again.output
    assert sorted(report_ids(db)) == ["one.txt", "two.txt"]


def test_an_explicit_name_with_another_root_is_refused(tmp_path: Path) -> None:
    first = docs(tmp_path / "first", "one.txt")
    second = docs(tmp_path / "second", "two.txt")
    db = tmp_path / "s.db"
    assert invoke("ingest", str(db), str(first), "--name", "field").exit_code == 0
    refused = invoke("ingest", str(db), str(second), "--name", "field")
    assert refused.exit_code == 2
    assert str(first.resolve()) in refused.stderr and str(second.resolve()) in refused.stderr
    assert sorted(report_ids(db)) == ["one.txt"]
    # Under a name of its own it is a second source.
    assert invoke("ingest", str(db), str(second), "--name", "other").exit_code == 0
    assert source_roots(db) == {"field": str(first.resolve()), "other": str(second.resolve())}


def test_the_same_root_spelled_another_way_is_the_same_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = docs(tmp_path / "docs", "one.txt")
    db = tmp_path / "s.db"
    assert invoke("ingest", str(db), str(root)).exit_code == 0
    monkeypatch.chdir(tmp_path)
    for spelling in ("docs", "docs/", "./docs/../docs"):
        result = invoke("ingest", str(db), spelling)
        assert result.exit_code == 0, result.output
    assert source_roots(db) == {"docs": str(root.resolve())}


def test_move_root_moves_a_source_and_the_next_run_drops_what_is_not_there(
    tmp_path: Path,
) -> None:
    old = docs(tmp_path / "old" / "docs", "kept.txt", "gone.txt")
    new = docs(tmp_path / "new" / "docs", "kept.txt", "added.txt")
    db = tmp_path / "s.db"
    assert invoke("ingest", str(db), str(old)).exit_code == 0
    before = report_ids(db)

    moved = invoke("ingest", str(db), str(new), "--move-root")
    assert moved.exit_code == 0, moved.output
    assert re.search(
        rf"^{STAMP} source docs: root moved from {re.escape(str(old.resolve()))} "
        rf"to {re.escape(str(new.resolve()))}$",
        moved.stdout,
        re.MULTILINE,
    ), moved.stdout
    assert source_roots(db) == {"docs": str(new.resolve())}

    run = invoke("reingest", str(db))
    assert run.exit_code == 0, run.output
    assert f"removed  gone.txt (report {before['gone.txt']})" in run.stdout
    after = report_ids(db)
    assert sorted(after) == ["added.txt", "kept.txt"]
    assert after["kept.txt"] == before["kept.txt"]


def test_store_ingest_refuses_another_root_unless_asked_to_move(tmp_path: Path) -> None:
    first = docs(tmp_path / "a" / "docs", "one.txt")
    second = docs(tmp_path / "b" / "docs", "two.txt")
    with Store(tmp_path / "s.db", progress=False) as store:
        store.ingest(first)
        with pytest.raises(InvalidInput) as refused:
            store.ingest(second)
        assert refused.value.field == "name"
        summary = store.ingest(second, move_root=True)
        assert summary.new == 1
        [source] = store._conn.execute("SELECT root FROM sources").fetchall()
        assert source["root"] == str(second.resolve())


def test_a_root_that_now_leads_elsewhere_fails_that_source_and_removes_nothing(
    tmp_path: Path,
) -> None:
    real = docs(tmp_path / "real", "one.txt", "two.txt")
    link = tmp_path / "docs"
    link.symlink_to(real)
    stray = docs(tmp_path / "stray", "other.txt")
    kept = docs(tmp_path / "kept", "k.txt")
    db = tmp_path / "s.db"
    with Store(db, progress=False) as store:
        store.ingest(real, name="docs")
        store.ingest(kept, name="kept")
    # The stored root is the real folder; make that path lead somewhere else.
    moved_away = tmp_path / "real-moved"
    real.rename(moved_away)
    real.symlink_to(stray)
    result = invoke("reingest", str(db), "--json")
    assert result.exit_code == 1, result.output
    [summary] = [
        event
        for event in run_events(result.stdout)
        if event["event"] == "summary" and event["source"] == "docs"
    ]
    assert summary["status"] == "failed"
    assert str(stray.resolve()) in summary["failures"][0]["reason"]
    assert "--move-root" in summary["failures"][0]["reason"]
    assert sorted(report_ids(db)) == ["k.txt", "one.txt", "two.txt"]


# -- item 12: logs an operator can grep --------------------------------------------


@pytest.fixture
def changed_source(tmp_path: Path, source_dir: Path) -> tuple[Path, dict[str, int]]:
    """``source_dir`` ingested as ``field``, then: one report modified, one removed,
    one added and one that turns invalid."""
    db = tmp_path / "r.db"
    assert invoke("ingest", str(db), str(source_dir), "--name", "field").exit_code == 0
    ids = report_ids(db)
    (source_dir / "field/2026/river/summary.txt").write_text("River notes, second edition.\n")
    (source_dir / "misc/memo.txt").unlink()
    write_report(
        source_dir,
        "field/2026/moths",
        title="Moth trap",
        date="2026-07-01",
        tags={},
        files={"notes.txt": "Hawkmoths at the light trap.\n"},
    )
    (source_dir / "field/2026/bees/report.json").write_text('{"title": "half a report", ')
    return db, ids


def test_each_run_line_has_a_timestamp_and_each_changed_report_its_own_line(
    changed_source: tuple[Path, dict[str, int]],
) -> None:
    db, ids = changed_source
    result = invoke("reingest", str(db))
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines and all(re.match(rf"^{STAMP} source field: ", line) for line in lines), lines
    body = [line.split(": ", 1)[1] for line in lines]
    new_id = report_ids(db)["field/2026/moths"]
    assert f"modified field/2026/river (report {ids['field/2026/river']})" in body
    assert f"removed  misc/memo.txt (report {ids['misc/memo.txt']})" in body
    assert f"new      field/2026/moths (report {new_id})" in body
    [failed] = [line for line in body if line.startswith("failed")]
    assert failed.startswith(f"failed   field/2026/bees (report {ids['field/2026/bees']}): ")
    assert "report.json is not valid JSON" in failed
    assert any(
        line.startswith("1 new, 1 modified, 0 unchanged, 1 removed, 1 failed") for line in body
    )


def test_json_gives_one_object_per_event_then_the_summary(
    changed_source: tuple[Path, dict[str, int]],
) -> None:
    db, ids = changed_source
    result = invoke("reingest", str(db), "--json")
    assert result.exit_code == 1
    events = run_events(result.stdout)
    for event in events:
        assert re.fullmatch(STAMP, event["time"]) and event["source"] == "field"
    *changes, summary = events
    by_report = {event["report"]: event for event in changes}
    new_id = report_ids(db)["field/2026/moths"]
    assert {key: (event["event"], event["report_id"]) for key, event in by_report.items()} == {
        "field/2026/bees": ("failed", ids["field/2026/bees"]),
        "field/2026/river": ("modified", ids["field/2026/river"]),
        "misc/memo.txt": ("removed", ids["misc/memo.txt"]),
        "field/2026/moths": ("new", new_id),
    }
    assert "not valid JSON" in by_report["field/2026/bees"]["reason"]
    assert summary["event"] == "summary" and summary["status"] == "completed_with_failures"
    assert (summary["new"], summary["modified"], summary["removed"], summary["failed"]) == (
        1,
        1,
        1,
        1,
    )
    assert summary["failures"] == [
        {"report": "field/2026/bees", "reason": by_report["field/2026/bees"]["reason"]}
    ]


def test_ingest_json_lists_each_new_report_then_the_summary(
    tmp_path: Path, source_dir: Path
) -> None:
    db = tmp_path / "r.db"
    result = invoke("ingest", str(db), str(source_dir), "--json")
    assert result.exit_code == 0
    *news, summary = run_events(result.stdout)
    ids = report_ids(db)
    assert [(event["event"], event["report"], event["report_id"]) for event in news] == [
        ("new", key, ids[key]) for key in sorted(ids)
    ]
    assert summary["event"] == "summary" and summary["new"] == 3


@pytest.mark.parametrize(
    "only",
    ["no/such/report", "field/2026", "../outside", ".hidden", "field/2026/bees/notes.txt"],
)
def test_only_that_names_no_report_is_an_error_and_changes_nothing(
    tmp_path: Path, source_dir: Path, only: str
) -> None:
    db = tmp_path / "r.db"
    assert invoke("ingest", str(db), str(source_dir), "--name", "field").exit_code == 0
    (source_dir / "misc/memo.txt").unlink()  # a full run would remove it
    result = invoke("reingest", str(db), "--only", only, "--only", "field/2026/bees")
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ") and repr(only.strip("/")) in result.stderr
    assert "misc/memo.txt" in report_ids(db)


def test_only_that_names_a_vanished_report_removes_it(tmp_path: Path, source_dir: Path) -> None:
    db = tmp_path / "r.db"
    assert invoke("ingest", str(db), str(source_dir), "--name", "field").exit_code == 0
    memo_id = report_ids(db)["misc/memo.txt"]
    (source_dir / "misc/memo.txt").unlink()
    result = invoke("reingest", str(db), "--only", "misc/memo.txt")
    assert result.exit_code == 0, result.output
    assert f"removed  misc/memo.txt (report {memo_id})" in result.stdout
    assert "misc/memo.txt" not in report_ids(db)


def test_only_is_an_error_only_when_no_source_has_the_report(tmp_path: Path) -> None:
    first = docs(tmp_path / "first", "a.txt")
    second = docs(tmp_path / "second", "b.txt")
    with Store(tmp_path / "s.db", progress=False) as store:
        store.ingest(first)
        store.ingest(second)
        summaries = reingest(store, only=["b.txt"])
        assert [(summary.source, summary.unchanged) for summary in summaries] == [
            ("first", 0),
            ("second", 1),
        ]
        with pytest.raises(InvalidInput, match="'c.txt'") as refused:
            reingest(store, only=["b.txt", "c.txt"])
        assert refused.value.field == "only"
        with pytest.raises(InvalidInput, match="'b.txt'"):
            reingest(store, source="first", only=["b.txt"])


# -- item 12: one table of exit codes, and every way out follows it ----------------


def documented_exit_codes() -> dict[int, str]:
    """The exit-code table of the README's "The command line" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## The command line", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", section, re.MULTILINE)
    assert rows, "no exit-code table in the README's command line section"
    return {int(code): meaning for code, meaning in rows}


def test_the_readme_documents_every_exit_code_once() -> None:
    def tree(error: type[ResearchStoreError]) -> Iterator[type[ResearchStoreError]]:
        yield error
        for subclass in error.__subclasses__():
            yield from tree(subclass)

    from_errors = {error.exit_code for error in tree(ResearchStoreError)}
    # SIGPIPE: export stops when its reader goes away (``| head``).
    signals = {128 + signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGPIPE}
    assert set(documented_exit_codes()) == {0, 2} | from_errors | signals


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A store with one source, and paths for each way a command can fail."""
    base = tmp_path_factory.mktemp("walk")
    source = docs(base / "source", "bees.txt", "river.txt")
    other = docs(base / "other", "moths.txt")
    broken = base / "broken"
    (broken / "bad").mkdir(parents=True)
    (broken / "bad" / "report.json").write_text("{ not json")
    (broken / "bad" / "a.txt").write_text("Some text.")
    gone = docs(base / "gone", "g.txt")
    db = base / "walk.db"
    with Store(db, progress=False) as store:
        store.ingest(source, name="field")
    gone_db = base / "gone.db"
    with Store(gone_db, progress=False) as store:
        store.ingest(gone, name="gone")
    shutil.rmtree(gone)
    inconsistent = base / "inconsistent.db"
    with Store(inconsistent, progress=False) as store:
        store.ingest(source, name="field")
    conn = sqlite3.connect(inconsistent)
    with conn:  # a chunk id changed behind the store's back: the counts still agree
        conn.execute(
            "UPDATE chunks SET chunk_id = '00000000-0000-4000-8000-000000000000' "
            "WHERE id = (SELECT min(id) FROM chunks)"
        )
    conn.close()
    return {
        "db": str(db),
        "base": str(base),
        "source": str(source),
        "other": str(other),
        "broken": str(broken),
        "gone_db": str(gone_db),
        "inconsistent": str(inconsistent),
        "missing": str(base / "missing.db"),
        "fresh": str(base / "fresh.db"),
    }


WORKSPACE = "11111111-1111-4111-8111-111111111111"


def fill(arg: str, paths: dict[str, str]) -> str:
    """``arg`` with each ``{name}`` of ``paths`` filled in (JSON braces stay)."""
    return re.sub(r"\{(\w+)\}", lambda match: paths.get(match[1], match[0]), arg)


#: Every way each command can fail that does not need another process:
#: (what, arguments, exit code). ``{name}`` is filled from the ``walk`` fixture.
ERROR_PATHS = [
    ("usage: no command", [], 2),
    ("usage: unknown command", ["nope"], 2),
    ("ingest: no such source", ["ingest", "{db}", "{base}/nowhere"], 2),
    ("ingest: STORE is a directory", ["ingest", "{base}", "{source}"], 2),
    ("ingest: bad --chunk-tokens", ["ingest", "{db}", "{source}", "--chunk-tokens", "3"], 2),
    ("ingest: name taken by another root", ["ingest", "{db}", "{other}", "--name", "field"], 2),
    ("ingest: a report failed", ["ingest", "{fresh}", "{broken}"], 1),
    ("reingest: no store", ["reingest", "{missing}"], 2),
    ("reingest: unknown --source", ["reingest", "{db}", "--source", "nope"], 2),
    ("reingest: --only names nothing", ["reingest", "{db}", "--only", "no/such"], 2),
    ("reingest: bad --every", ["reingest", "{db}", "--every", "soon"], 2),
    ("reingest: a source root is gone", ["reingest", "{gone_db}"], 1),
    ("parse: no such file", ["parse", "{base}/nothing.html"], 2),
    ("rebuild-index: no store", ["rebuild-index", "{missing}"], 2),
    ("check: no store", ["check", "{missing}"], 2),
    ("check: inconsistent", ["check", "{inconsistent}"], 1),
    ("call: no store", ["call", "{missing}", "research_get_chunk", '{"chunk_id": "x"}'], 2),
    ("call: ARGUMENTS not JSON", ["call", "{db}", "get_chunk_next", "{nope"], 2),
    ("call: unknown tool", ["call", "{db}", "no_such_tool", "{}"], 2),
    ("search: no store", ["search", "{missing}", "bees"], 2),
    ("search: bad --limit", ["search", "{db}", "bees", "--limit", "0"], 2),
    ("search: bad --tag", ["search", "{db}", "bees", "--tag", "season"], 2),
    ("search: bad --date-from", ["search", "{db}", "bees", "--date-from", "May"], 2),
    ("chunk: no store", ["chunk", "{missing}", "x"], 2),
    ("chunk: bad --next", ["chunk", "{db}", "x", "--next", "0"], 2),
    ("doc: no store", ["doc", "{missing}", "x"], 2),
    ("doc: bad --limit", ["doc", "{db}", "x", "--from", "0", "--limit", "0"], 2),
    ("tools: an argument too many", ["tools", "extra"], 2),
    (
        "retrieve: bad workspace",
        ["retrieve", "{db}", "https://example.org/", "--kind", "url_text", "--workspace", "w"],
        2,
    ),
    (
        "retrieve: offline, nothing stored",
        [
            "retrieve",
            "{db}",
            "https://example.org/",
            "--kind",
            "url_text",
            "--workspace",
            WORKSPACE,
        ],
        1,
    ),
    ("serve: no store", ["serve", "{missing}"], 2),
    ("serve: unknown transport", ["serve", "{db}", "--transport", "pigeon"], 2),
    ("keys create: no store", ["keys", "create", "{missing}"], 2),
    ("keys list: no store", ["keys", "list", "{missing}"], 2),
    ("keys revoke: no live key", ["keys", "revoke", "{db}", "000000000000"], 1),
]


@pytest.mark.parametrize(
    ("what", "args", "exit_code"), ERROR_PATHS, ids=[p[0] for p in ERROR_PATHS]
)
def test_every_way_out_of_the_command_line_has_a_documented_exit_code(
    walk: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    what: str,
    args: list[str],
    exit_code: int,
) -> None:
    monkeypatch.setenv("RESEARCHSTORE_EGRESS", "off")
    result = invoke(*[fill(arg, walk) for arg in args])
    assert result.exit_code == exit_code, (what, result.output)
    assert exit_code in documented_exit_codes()
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in result.output
    if what == "usage: no command":
        assert result.stderr.startswith("Usage: ")  # the help, as click gives it
    elif exit_code == 2 or what == "keys revoke: no live key":
        assert "Error: " in result.stderr, result.output
    if "no store" in what:
        assert result.stderr.startswith(f"Error: no store at {walk['missing']} ")
        assert not Path(walk["missing"]).exists()


@pytest.mark.parametrize(
    "args",
    [["search", "{db}", "bees"], ["call", "{db}", "research_get_chunk", '{"chunk_id": "x"}']],
    ids=lambda args: args[0],
)
def test_ctrl_c_in_any_command_exits_130_with_one_line(
    walk: dict[str, str], monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(Store, "call", interrupted)
    result = invoke(*[fill(arg, walk) for arg in args])
    assert result.exit_code == 130 == 128 + signal.SIGINT
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("Error: interrupted by SIGINT")
    assert 130 in documented_exit_codes()


# -- item 11: a signal stops a run cleanly; no process outlives it -----------------


def proc_stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state, start time) of a live process, None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return int(fields[1]), fields[0], int(fields[19])


def children_of(parent: int) -> dict[int, tuple[int, str]]:
    """The processes whose parent is ``parent``: pid -> (start time, command line)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = proc_stat(int(entry.name))
        if stat is None or stat[0] != parent:
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        found[int(entry.name)] = (stat[2], command)
    return found


def still_running(processes: dict[int, tuple[int, str]]) -> dict[int, str]:
    """Those of ``processes`` that still run (a zombie has stopped running)."""
    running = {}
    for pid, (started, command) in processes.items():
        stat = proc_stat(pid)
        if stat is not None and stat[2] == started and stat[1] != "Z":
            running[pid] = command
    return running


def wait_until_gone(processes: dict[int, tuple[int, str]], *, within: float = 30) -> None:
    deadline = time.monotonic() + within
    while still_running(processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not still_running(processes), f"left running: {still_running(processes)}"


REPORTS = 120  # more than workers.PARALLEL_MIN_REPORTS: the run starts parser workers


def parallel_run(tmp_path: Path, command: str) -> tuple[Path, list[str]]:
    """A store and the arguments of an ``ingest`` or ``reingest`` with REPORTS new reports."""
    root, db = tmp_path / "big", tmp_path / "r.db"
    docs(root, "seed.txt")
    if command == "reingest":
        with Store(db, progress=False) as store:
            store.ingest(root, name="big")
        args = ["reingest", str(db)]
    else:
        args = ["ingest", str(db), str(root), "--name", "big"]
    docs(root, *(f"r{number:03}.txt" for number in range(REPORTS)))
    return db, args


def start_stalled(
    args: list[str],
) -> tuple[subprocess.Popen[str], dict[int, tuple[int, str]], str]:
    """The run in a child (its own session), stalled after its first commit: the
    child, its own children, and what it printed until it stalled."""
    child = subprocess.Popen(
        [*program("stalled_cli"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert child.stdout is not None
    lines = []
    for line in child.stdout:  # bounded: the child stalls or ends
        lines.append(line)
        if line == "stalled\n":
            break
    else:
        child.wait(timeout=30)
        raise AssertionError(f"the run never stalled: {lines} {child.stderr.read()}")  # type: ignore[union-attr]
    helpers = children_of(child.pid)
    commands = " ".join(command for _, command in helpers.values())
    assert "multiprocessing.spawn" in commands and "resource_tracker" in commands, helpers
    return child, helpers, "".join(lines[:-1])


def last_version(db: Path) -> tuple[str, dict[str, Any]]:
    conn = sqlite3.connect(db)
    try:
        status, summary = conn.execute(
            "SELECT status, summary FROM source_versions ORDER BY id DESC LIMIT 1"
        ).fetchone()
    finally:
        conn.close()
    return status, json.loads(summary or "{}")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "signum", "to_group"),
    [
        ("ingest", signal.SIGTERM, False),  # kill PID, as cron or an operator does
        ("reingest", signal.SIGINT, True),  # Ctrl-C: the whole foreground group
        ("reingest", signal.SIGTERM, True),  # systemd stopping the unit's cgroup
    ],
    ids=["ingest-SIGTERM", "reingest-Ctrl-C", "reingest-SIGTERM-to-all"],
)
def test_a_signal_stops_the_run_cleanly_and_leaves_no_process(
    tmp_path: Path, command: str, signum: int, to_group: bool
) -> None:
    db, args = parallel_run(tmp_path, command)
    child, helpers, printed = start_stalled([*args, "--json"])
    try:
        if to_group:
            os.killpg(child.pid, signum)
        else:
            child.send_signal(signum)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    name = signal.Signals(signum).name
    assert child.returncode == 128 + signum, err
    assert err.count("\n") == 1 and err.startswith(f"Error: interrupted by {name}"), err
    assert 128 + signum in documented_exit_codes()
    wait_until_gone(helpers)

    *changes, summary = run_events(printed + out)
    committed = [event["report"] for event in changes if event["event"] == "new"]
    assert summary["event"] == "summary" and summary["status"] == "interrupted"
    assert name in summary["stopped"]
    status, recorded = last_version(db)
    assert status == "interrupted" and recorded["new"] == len(committed) > 0
    # What was committed stays, and the next open brings the index level with it.
    with Store(db, progress=False) as store:
        stored = {row["key"] for row in store._conn.execute("SELECT key FROM reports")}
        assert set(committed) <= stored
        assert len(stored - {"seed.txt"}) == len(committed)
        report = check_store(store)
        assert report["consistent"] and report["pending"] == 0, report
        [again] = reingest(store) if command == "reingest" else [store.ingest(db.parent / "big")]
        assert again.new == REPORTS + 1 - len(stored) and again.failed == 0


@pytest.mark.slow
@pytest.mark.parametrize("command", ["ingest", "reingest"])
def test_kill_9_of_the_run_leaves_no_worker_or_tracker_running(
    tmp_path: Path, command: str
) -> None:
    db, args = parallel_run(tmp_path, command)
    child, helpers, _ = start_stalled(args)
    try:
        child.kill()
        child.communicate(timeout=30)
    finally:
        child.kill()
    assert child.returncode == -signal.SIGKILL
    wait_until_gone(helpers)
    with Store(db, progress=False) as store:  # the next open finishes the work
        report = check_store(store)
        assert report["consistent"] and report["pending"] == 0, report


@pytest.mark.slow
def test_workers_die_with_their_parent_and_leave_ctrl_c_to_it() -> None:
    """The worker initializer, run in a child of a child: the grandchild must die
    with its parent, and ignore SIGINT meanwhile."""
    script = (
        "import os, signal, sys, time\n"
        "from researchstore.ingest.workers import stay_with_parent\n"
        "parent = os.getpid()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    stay_with_parent(parent)\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    print(os.getpid(), flush=True)\n"
        "    time.sleep(60)\n"
        "    os._exit(0)\n"
        "time.sleep(60)\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
    ) as parent:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line.strip().isdigit(), line  # it lived through its own SIGINT
        worker = int(line)
        stat = proc_stat(worker)
        assert stat is not None
        parent.kill()
        parent.wait(timeout=30)
        wait_until_gone({worker: (stat[2], "worker")})


@pytest.mark.slow
def test_a_log_reader_that_goes_away_stops_the_printing_not_the_run(tmp_path: Path) -> None:
    """``ingest ... | head -1``: the pipe closes early; every report is still stored."""
    import fcntl

    root = docs(tmp_path / "many", *(f"r{number:02}.txt" for number in range(60)))
    db = tmp_path / "r.db"
    reading, writing = os.pipe()
    fcntl.fcntl(writing, fcntl.F_SETPIPE_SZ, 4096)  # 60 events overflow it
    with subprocess.Popen(
        [*program("cli"), "ingest", str(db), str(root), "--json"],
        stdout=writing,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        os.close(writing)
        with os.fdopen(reading) as head:
            first = json.loads(head.readline())
        _, err = child.communicate(timeout=60)
    assert first["event"] == "new"
    assert child.returncode == 0, err
    assert err == ""
    assert len(report_ids(db)) == 60
