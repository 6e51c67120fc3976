"""Parallel preparation gives exactly what serial preparation gives, in order."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from helpers import long_text, write_report

from researchstore import Store
from researchstore.ingest import workers
from researchstore.ingest.discovery import ReportSource, discover


def _contents(store: Store) -> dict[str, list[tuple[str, int, str]]]:
    rows = store._conn.execute(
        "SELECT r.key, d.path, c.position, c.text FROM chunks c "
        "JOIN documents d ON d.id = c.document_rowid JOIN reports r ON r.report_id = c.report_id "
        "ORDER BY r.key, d.path, c.position"
    ).fetchall()
    out: dict[str, list[tuple[str, int, str]]] = {}
    for key, path, position, text in rows:
        out.setdefault(key, []).append((path, position, text))
    return out


@pytest.fixture
def many_reports(tmp_path: Path) -> Path:
    root = tmp_path / "many"
    for number in range(12):
        write_report(
            root,
            f"group-{number % 3}/report-{number:02d}",
            title=f"Report {number}",
            date="2026-05-01",
            tags={"n": str(number)},
            files={"notes.txt": long_text(4 + number, seed=number)},
        )
    (root / "loose.txt").write_text(long_text(3))
    (root / "group-0" / "report-00" / "report.json").write_text("{ broken")
    return root


def test_worker_processes_store_what_one_process_stores(
    tmp_path: Path, many_reports: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store(tmp_path / "serial.db", progress=False) as serial:
        expected = serial.ingest(many_reports, name="many")
        expected_contents = _contents(serial)
    monkeypatch.setattr(workers, "PARALLEL_MIN_REPORTS", 1)
    monkeypatch.setattr(workers, "default_workers", lambda: 2)
    with Store(tmp_path / "parallel.db", progress=False) as parallel:
        summary = parallel.ingest(many_reports, name="many")
        assert _contents(parallel) == expected_contents
        assert parallel.search("varroa", limit=3)
    assert (summary.new, summary.failed, summary.chunks) == (
        expected.new,
        expected.failed,
        expected.chunks,
    )
    assert summary.failures == expected.failures
    assert summary.failures[0]["report"] == "group-0/report-00"


@pytest.mark.slow
def test_a_worker_that_dies_fails_only_the_report_it_was_reading(
    tmp_path: Path, many_reports: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import worker_crash

    write_report(
        many_reports,
        "group-1/poison",
        title="Kills its parser",
        date="2026-05-02",
        tags={},
        files={"notes.txt": long_text(3)},
    )
    with Store(tmp_path / "serial.db", progress=False) as serial:
        serial.ingest(many_reports, name="many")
        expected = _contents(serial)
    del expected["group-1/poison"]
    monkeypatch.setattr(workers, "PARALLEL_MIN_REPORTS", 1)
    monkeypatch.setattr(workers, "default_workers", lambda: 2)
    monkeypatch.setattr(workers, "BATCH_FILES", 3)  # the poison shares a batch
    monkeypatch.setattr(workers, "prepare_batch", worker_crash.prepare_batch_or_die)
    with Store(tmp_path / "parallel.db", progress=False) as parallel:
        summary = parallel.ingest(many_reports, name="many")
        assert _contents(parallel) == expected
    died = [failure for failure in summary.failures if failure["report"] == "group-1/poison"]
    assert [failure["reason"] for failure in died] == [
        "the parser process died while reading this report"
    ]
    assert len(summary.failures) == 2  # and the broken report.json, as in one process


@pytest.mark.slow
def test_a_batch_submitted_after_a_worker_died_is_still_prepared(
    tmp_path: Path, many_reports: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool breaks between two submits: the later batch is retried, not lost."""
    import worker_crash

    write_report(
        many_reports,
        "group-0/a-poison",
        title="Kills its parser",
        date="2026-05-02",
        tags={},
        files={"notes.txt": long_text(3)},
    )
    reports = [r for r in discover(many_reports).reports if r.key.startswith("group-")]
    poison = next(r for r in reports if "poison" in r.key)
    others = [r for r in reports if r is not poison and r.key != "group-0/report-00"][:3]
    died = tmp_path / "died"
    monkeypatch.setenv(worker_crash.DIED_ENV, str(died))
    monkeypatch.setattr(workers, "BATCH_FILES", 1)  # one report a batch
    monkeypatch.setattr(workers, "prepare_batch", worker_crash.prepare_batch_or_die)

    def tasks() -> Iterator[workers.Task]:
        yield (poison, None, "signature")
        yield (others[0], None, "signature")
        # Batches look one task ahead: the poison is submitted now. Its worker
        # is gone (and the pool has seen it) before the next batch is submitted.
        for _ in range(200):
            if died.exists():
                break
            time.sleep(0.05)
        time.sleep(0.5)
        for report in others[1:]:
            yield (report, None, "signature")

    prepared = workers.prepare_in_order(many_reports, tasks(), chunk_tokens=256, workers=1)
    with closing(prepared) as run:
        outcomes = {task[0].key: outcome for task, outcome in run}
    assert died.exists()
    assert list(outcomes) == [poison.key] + [r.key for r in others]
    assert outcomes[poison.key] == "the parser process died while reading this report"
    assert [outcomes[r.key] for r in others if isinstance(outcomes[r.key], str)] == []


def _task(key: str, files: int) -> workers.Task:
    names = [f"{key}/{number}.txt" for number in range(files)]
    report = ReportSource(key=key, folder="", is_dir=True, files=names)
    return (report, None, "signature")


def test_batches_hold_up_to_the_files_allowed_in_order() -> None:
    sizes = [1, 3, 4, 2, 8, 12, 1, 0, 7, 1]
    tasks = [_task(f"r{number}", files) for number, files in enumerate(sizes)]
    found = list(workers.batches(tasks))
    assert [task for batch in found for task in batch] == tasks
    for batch in found:
        files = sum(max(1, len(task[0].files)) for task in batch)
        assert len(batch) == 1 or files <= workers.BATCH_FILES
    # each batch is as full as the next task allowed
    for batch, following in zip(found, found[1:], strict=False):
        files = sum(max(1, len(task[0].files)) for task in batch)
        assert files + max(1, len(following[0][0].files)) > workers.BATCH_FILES
