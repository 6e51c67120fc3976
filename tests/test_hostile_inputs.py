"""Hostile inputs: nothing found in a source stops a run, leaks past it, or grows unbounded.

Report ids out of range fail that report alone; the rest of the run goes on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from researchstore import Store
from researchstore.ingest.prepare import MAX_REPORT_ID
from researchstore.reingest import reingest

# -- helpers ---------------------------------------------------------------------


def report_dir(root: Path, key: str, text: str, **meta: Any) -> Path:
    """A report directory: report.json with ``meta`` (a title by default) and notes.txt."""
    folder = root / key
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps({"title": key, **meta}))
    (folder / "notes.txt").write_text(text)
    return folder


def failures(summary: Any) -> dict[str, str]:
    return {failure["report"]: failure["reason"] for failure in summary.failures}


def skipped(summary: Any) -> dict[str, str]:
    return {entry["path"]: entry["reason"] for entry in summary.skipped}


def found(store: Store, word: str) -> list[str]:
    """The titles of the reports whose chunks hold ``word``."""
    return sorted({hit["title"] for hit in store.search(word, limit=50)})


def report_ids(store: Store) -> dict[str, int]:
    with store.reading() as conn:
        return {row["key"]: row["report_id"] for row in conn.execute("SELECT * FROM reports")}


# -- 1. report ids -----------------------------------------------------------------


@pytest.mark.parametrize(
    "wanted",
    [
        pytest.param(2**63 - 1, id="sqlite-max"),
        pytest.param(1180591620717411303424, id="beyond-sqlite"),
        pytest.param(MAX_REPORT_ID + 1, id="beyond-json-safe"),
        pytest.param(0, id="zero"),
    ],
)
def test_a_report_id_out_of_range_fails_that_report_alone(tmp_path: Path, wanted: int) -> None:
    root = tmp_path / "source"
    report_dir(root, "a-greedy", "Greedyword.", id=wanted)
    report_dir(root, "b-plain", "Plainword.")
    (root / "c-single.txt").write_text("Singleword.")
    with Store(tmp_path / "r.db", progress=False) as store:
        summary = store.ingest(root)
        assert summary.new == 2 and summary.failed == 1
        reason = failures(summary)["a-greedy"]
        assert f"id must be an integer from 1 to {MAX_REPORT_ID}" in reason
        assert found(store, "plainword") == ["b-plain"] and found(store, "greedyword") == []
        # Later runs go on adding reports.
        report_dir(root, "d-later", "Laterword.")
        later = store.ingest(root)
        assert later.new == 1 and failures(later).keys() == {"a-greedy"}
        assert 0 < max(report_ids(store).values()) <= MAX_REPORT_ID


def test_the_largest_id_in_range_is_honoured_and_new_ids_still_come(tmp_path: Path) -> None:
    root = tmp_path / "source"
    report_dir(root, "a-top", "Topword.", id=MAX_REPORT_ID)
    with Store(tmp_path / "r.db", progress=False) as store:
        assert store.ingest(root).new == 1
        report_dir(root, "b-next", "Nextword.")
        report_dir(root, "c-next", "Otherword.")
        summary = store.ingest(root)
        assert (summary.new, summary.failed) == (2, 0)
        ids = report_ids(store)
        assert ids["a-top"] == MAX_REPORT_ID
        assert len(set(ids.values())) == 3
        assert all(1 <= report_id <= MAX_REPORT_ID for report_id in ids.values())


def _store_legacy_report(store: Store, report_id: int) -> None:
    """What an older version left: a report with an id out of range, and the mark with it."""
    with store.transaction() as conn:
        source_id = conn.execute("SELECT id FROM sources").fetchone()[0]
        conn.execute(
            "INSERT INTO reports (report_id, source_id, key, title, date, tags) "
            "VALUES (?, ?, 'legacy', 'Legacy', '2020-01-01', '{}')",
            (report_id, source_id),
        )
        conn.execute("UPDATE meta SET value = ? WHERE key = 'report_id_high'", (str(report_id),))


def test_a_store_holding_an_id_out_of_range_still_claims_new_ids(tmp_path: Path) -> None:
    root = tmp_path / "source"
    report_dir(root, "a-kept", "Keptword.")
    report_dir(root, "b-gone", "Goneword.")
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(root)
        gone_id = report_ids(store)["b-gone"]
        (root / "b-gone" / "notes.txt").unlink()
        (root / "b-gone" / "report.json").unlink()
        (root / "b-gone").rmdir()
        [removed] = reingest(store)
        assert removed.removed == 1
        _store_legacy_report(store, 2**63 - 1)

        report_dir(root, "c-new", "Newword.")
        summary = store.ingest(root)
        assert (summary.new, summary.failed) == (1, 0)
        new_id = report_ids(store)["c-new"]
        # Above every id in range that was ever handed out: the removed
        # report's id (still named by the forwarding record) is not reused.
        assert gone_id < new_id <= MAX_REPORT_ID
        (root / "a-kept" / "notes.txt").write_text("Keptword, changed.")
        os.utime(root / "a-kept" / "notes.txt", ns=(1, 1))
        report_dir(root, "d-newer", "Newerword.")
        [again] = reingest(store)
        assert (again.new, again.modified, again.failed) == (1, 1, 0)
        assert new_id < report_ids(store)["d-newer"] <= MAX_REPORT_ID
        assert found(store, "newerword") == ["d-newer"]
