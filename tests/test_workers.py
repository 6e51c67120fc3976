"""Parallel preparation gives exactly what serial preparation gives, in order."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import long_text, write_report

from researchstore import Store
from researchstore.ingest import workers


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
