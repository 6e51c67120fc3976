"""Looking inside a store: ``sources``, ``reports``, ``stats`` and ``export``.

Real stores of the bundled fixtures and of generated reports; the commands
run through click's CliRunner, and in a child process where the process
matters (a reader that closes the pipe).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import tracemalloc
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from helpers import CLI, FIXTURE_SOURCE, long_text, ok, write_report

from researchstore import Store
from researchstore.cli import main
from researchstore.export import COLUMNS, export_store, write_jsonl, write_parquet
from researchstore.listing import STATUS_ORDER, human_size, list_sources, store_stats

SOURCE_KEYS = {
    "name",
    "kind",
    "root",
    "root_present",
    "created_at",
    "reports",
    "documents",
    "chunks",
    "last_run",
}
RUN_KEYS = {"version_id", "started_at", "finished_at", "status", "counts"}
REPORT_KEYS = {
    "report_id",
    "source",
    "key",
    "title",
    "date",
    "status",
    "documents",
    "documents_by_status",
    "chunks",
    "languages",
    "tags",
    "created_at",
    "ingested_at",
}
STATS_KEYS = {
    "store",
    "files",
    "sources",
    "reports",
    "documents",
    "chunks",
    "vectors",
    "index_pending",
    "last_runs",
}


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def json_of(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def exported(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


@dataclass
class Ingested:
    db: str
    #: The ingest's summary of each source, by name.
    summaries: dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Ingested:
    """The bundled fixtures (source ``fixtures``) and three reports of notes (``notes``)."""
    folder = tmp_path_factory.mktemp("listing")
    shutil.copytree(FIXTURE_SOURCE, folder / "fixtures")
    notes = folder / "notes"
    for number in range(3):
        write_report(
            notes,
            f"season/{number}",
            title=f"Hive notes {number}",
            date=f"2026-0{number + 1}-01",
            tags={"audience": "students"},
            files={"notes.txt": long_text(4 + number, seed=number)},
        )
    db = folder / "research.db"
    with Store(db, progress=False) as store:
        summaries = {
            name: store.ingest(folder / name, name=name).to_dict() for name in ("fixtures", "notes")
        }
    return Ingested(str(db), summaries)


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A few thousand small chunks, for the export's streaming."""
    folder = tmp_path_factory.mktemp("big")
    for number in range(10):
        write_report(
            folder / "source",
            f"long/{number}",
            title=f"Long report {number}",
            date="2026-02-02",
            tags={},
            files={"notes.txt": long_text(160, seed=number)},
        )
    db = folder / "big.db"
    with Store(db, progress=False, chunk_tokens=16) as store:
        store.ingest(folder / "source", name="long")
        with store.reading() as conn:
            assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] > 4_000
    return db


# -- sources ----------------------------------------------------------------------


@pytest.mark.slow
def test_sources_json_has_each_source_with_what_was_ingested(ingested: Ingested) -> None:
    listed = json_of(invoke("sources", ingested.db, "--json"))["sources"]
    assert [source["name"] for source in listed] == ["fixtures", "notes"]
    for source in listed:
        assert set(source) == SOURCE_KEYS
        summary = ingested.summaries[source["name"]]
        assert source["kind"] == "directory"
        assert source["root_present"] is True and Path(source["root"]).is_dir()
        assert (source["reports"], source["documents"], source["chunks"]) == (
            summary["new"],
            summary["documents"],
            summary["chunks"],
        )
        run = source["last_run"]
        assert set(run) == RUN_KEYS
        assert run["version_id"] == summary["version_id"]
        assert run["status"] == "completed" and run["finished_at"]
        assert run["counts"]["new"] == summary["new"]
        assert run["counts"]["chunks"] == summary["chunks"]


def test_sources_table_lists_each_source(ingested: Ingested) -> None:
    result = invoke("sources", ingested.db)
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header.split()[:3] == ["SOURCE", "KIND", "ROOT"]
    assert [row.split()[0] for row in rows] == ["fixtures", "notes"]
    assert "completed" in rows[0]


def test_a_source_whose_root_is_gone_says_so(tmp_path: Path) -> None:
    write_report(tmp_path / "gone", "one", title="One", date="2026-01-01", tags={}, files={})
    (tmp_path / "gone" / "one" / "a.txt").write_text("A note about wasps.")
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(tmp_path / "gone", name="gone")
    shutil.rmtree(tmp_path / "gone")
    (source,) = json_of(invoke("sources", str(tmp_path / "r.db"), "--json"))["sources"]
    assert source["root_present"] is False
    assert source["reports"] == 1
    assert "NO" in invoke("sources", str(tmp_path / "r.db")).stdout.split()


# -- reports ----------------------------------------------------------------------


def test_reports_json_agrees_with_each_report(ingested: Ingested) -> None:
    listed = json_of(invoke("reports", ingested.db, "--json"))["reports"]
    assert len(listed) == sum(summary["new"] for summary in ingested.summaries.values())
    assert [(r["source"], r["key"]) for r in listed] == sorted(
        (r["source"], r["key"]) for r in listed
    )
    with Store(ingested.db, open_indexes=False) as store:
        for report in listed:
            assert set(report) == REPORT_KEYS
            stored = ok(store.call("research_get_report", {"report_id": report["report_id"]}))
            stored = stored["report"]
            documents = stored["documents"]
            assert (report["source"], report["key"], report["title"]) == (
                stored["source"],
                stored["key"],
                stored["title"],
            )
            assert report["date"] == stored["date"]
            assert report["tags"] == stored["tags"]
            assert report["ingested_at"] == stored["updated_at"]
            assert report["documents"] == len(documents)
            assert report["chunks"] == sum(document["total_chunks"] for document in documents)
            assert report["documents_by_status"] == dict(
                Counter(document["status"] for document in documents)
            )
            assert report["languages"] == sorted(
                {document["language"] for document in documents if document["language"]}
            )
            worst = max(documents, key=lambda document: STATUS_ORDER.index(document["status"]))
            assert report["status"] == worst["status"]


def test_reports_status_names_the_worst_document(ingested: Ingested) -> None:
    listed = json_of(invoke("reports", ingested.db, "--json"))["reports"]
    by_key = {report["key"]: report for report in listed}
    assert by_key["misc/malformed-inputs"]["status"] == "invalid"
    assert by_key["archive/2024/truncated-upload.srt"]["status"] == "partial"
    assert by_key["field-studies/2026/rooftop-bees"]["status"] == "ok"
    assert by_key["field-studies/2025/elvemusling-liaelva"]["languages"] == ["nb"]


def test_reports_source_keeps_only_that_source(ingested: Ingested) -> None:
    listed = json_of(invoke("reports", ingested.db, "--source", "notes", "--json"))["reports"]
    assert [report["key"] for report in listed] == ["season/0", "season/1", "season/2"]
    assert {report["source"] for report in listed} == {"notes"}
    result = invoke("reports", ingested.db, "--source", "notes")
    assert result.exit_code == 0
    assert len(result.stdout.splitlines()) == 1 + 3
    assert "Hive notes 1" in result.stdout


@pytest.mark.parametrize("command", ["reports", "export"])
def test_an_unknown_source_is_refused_naming_the_others(
    ingested: Ingested, command: str, tmp_path: Path
) -> None:
    output = ["-o", str(tmp_path / "out.jsonl")] if command == "export" else []
    result = invoke(command, ingested.db, "--source", "nope", *output)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "no source named 'nope'" in result.stderr
    assert "fixtures, notes" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_missing_store_is_refused(tmp_path: Path) -> None:
    for command in ("sources", "reports", "stats", "export"):
        result = invoke(command, str(tmp_path / "none.db"))
        assert result.exit_code == 2, command
        assert "no store at" in result.stderr
    assert list(tmp_path.iterdir()) == []


# -- stats ------------------------------------------------------------------------


def test_stats_json_counts_what_was_ingested(ingested: Ingested) -> None:
    found = json_of(invoke("stats", ingested.db, "--json"))
    assert set(found) == STATS_KEYS
    summaries = ingested.summaries.values()
    assert found["sources"] == 2
    assert found["reports"] == sum(summary["new"] for summary in summaries)
    documents, chunks = found["documents"], found["chunks"]
    assert documents["total"] == sum(summary["documents"] for summary in summaries)
    assert chunks["total"] == sum(summary["chunks"] for summary in summaries)
    for grouping in ("by_kind", "by_status", "by_language"):
        groups = documents[grouping].values()
        assert sum(group["documents"] for group in groups) == documents["total"], grouping
        assert sum(group["chunks"] for group in groups) == chunks["total"], grouping
    assert set(documents["by_kind"]) == {"html", "srt", "text", "vtt"}
    assert list(documents["by_status"]) == ["ok", "partial", "empty", "invalid"]
    assert documents["by_language"]["nb"] == {"documents": 1, "chunks": 6}
    assert "unknown" in documents["by_language"]  # the empty and invalid files
    assert chunks["by_status"] == {"ok": chunks["total"]}
    assert chunks["tokens"] > chunks["total"]
    assert found["vectors"] == {
        "model": None,
        "dimension": None,
        "chunks_with_vector": 0,
        "failed": 0,
        "waiting": 0,
    }
    assert found["index_pending"] == {"total": 0, "by_target": {}}
    assert set(found["last_runs"]) == {"fixtures", "notes"}
    assert found["last_runs"]["notes"]["version_id"] == ingested.summaries["notes"]["version_id"]


def test_stats_measures_the_files(ingested: Ingested) -> None:
    files = json_of(invoke("stats", ingested.db, "--json"))["files"]
    assert set(files) == {"store", "wal", "indexes", "packed_indexes", "total"}
    assert files["store"]["path"] == ingested.db
    assert files["store"]["bytes"] == os.path.getsize(ingested.db)
    assert files["store"]["human"] == human_size(files["store"]["bytes"])
    assert list(files["indexes"]) == ["index"]
    index_folder = Path(files["indexes"]["index"]["path"])
    assert index_folder == Path(ingested.db + ".index")
    assert files["indexes"]["index"]["bytes"] == sum(
        path.stat().st_size for path in index_folder.rglob("*") if path.is_file()
    )
    assert 0 < files["packed_indexes"]["bytes"] < files["store"]["bytes"]
    parts = files["store"]["bytes"] + files["wal"]["bytes"] + files["indexes"]["index"]["bytes"]
    assert files["total"]["bytes"] == parts


def test_stats_counts_pending_work_by_target(ingested: Ingested, tmp_path: Path) -> None:
    db = tmp_path / "copy.db"
    shutil.copy(ingested.db, db)
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO index_pending (report_id, queued_at, target) VALUES (1, 'now', ?)",
            [(None,), (None,), ("vectors",)],
        )
    conn.close()
    with Store(db, read_only=True, open_indexes=False) as store, store.reading() as read:
        pending = store_stats(read, store.path)["index_pending"]
    assert pending == {"total": 3, "by_target": {"all": 2, "vectors": 1}}


def test_stats_table_reads_as_labels_and_values(ingested: Ingested) -> None:
    result = invoke("stats", ingested.db)
    assert result.exit_code == 0, result.output
    labels = [re.split(r"\s{2,}", line.strip())[0] for line in result.stdout.splitlines()]
    for label in ("store", "on disk", "documents", "by kind", "chunks", "vectors", "index pending"):
        assert label in labels
    assert "last run fixtures" in labels


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (5 * 1024**2 + 1, "5.0 MiB"),
        (3 * 1024**4, "3.0 TiB"),
    ],
)
def test_human_size(size: int, shown: str) -> None:
    assert human_size(size) == shown


# -- an empty store, a read-only one ----------------------------------------------


@pytest.fixture
def empty_db(tmp_path: Path) -> str:
    with Store(tmp_path / "empty.db", progress=False):
        pass
    return str(tmp_path / "empty.db")


def test_an_empty_store_lists_nothing(empty_db: str) -> None:
    assert json_of(invoke("sources", empty_db, "--json")) == {"sources": []}
    assert json_of(invoke("reports", empty_db, "--json")) == {"reports": []}
    assert invoke("sources", empty_db).stdout.startswith("no sources")
    found = json_of(invoke("stats", empty_db, "--json"))
    assert (found["sources"], found["reports"], found["documents"]["total"]) == (0, 0, 0)
    assert found["chunks"] == {"total": 0, "tokens": 0, "by_status": {"ok": 0}}
    assert found["last_runs"] == {}


def test_export_of_an_empty_store_writes_nothing(empty_db: str, tmp_path: Path) -> None:
    result = invoke("export", empty_db)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "exported 0 chunks" in result.stderr
    out = tmp_path / "empty.jsonl"
    assert invoke("export", empty_db, "-o", str(out)).exit_code == 0
    assert out.read_bytes() == b""


def test_a_read_only_store_is_listed_and_exported(ingested: Ingested) -> None:
    before = Path(ingested.db).read_bytes()
    with Store(ingested.db, read_only=True, open_indexes=False) as store:
        with store.reading() as conn:
            assert [source["name"] for source in list_sources(conn)] == ["fixtures", "notes"]
            assert store_stats(conn, store.path)["documents"]["total"] > 0
        out = io.BytesIO()
        summary = export_store(store, out)
    assert summary.chunks == len(out.getvalue().splitlines()) > 0
    assert Path(ingested.db).read_bytes() == before


# -- export -----------------------------------------------------------------------


def all_chunks(db: str) -> dict[str, dict[str, Any]]:
    """Every chunk as the tools show it, with its document and report, by chunk id."""
    found: dict[str, dict[str, Any]] = {}
    with Store(db, open_indexes=False) as store:
        with store.reading() as conn:
            report_ids = [row[0] for row in conn.execute("SELECT report_id FROM reports")]
        for report_id in report_ids:
            report = ok(store.call("research_get_report", {"report_id": report_id}))["report"]
            for document in report["documents"]:
                window = ok(
                    store.call("get_document_chunks", {"id": document["document_id"], "limit": 100})
                )
                assert len(window["chunks"]) == document["total_chunks"]
                for chunk in window["chunks"]:
                    found[chunk["chunk_id"]] = {**chunk, "document": document, "report": report}
    return found


def test_export_writes_every_chunk_once_as_the_tools_show_it(ingested: Ingested) -> None:
    rows = exported(invoke("export", ingested.db))
    expected = all_chunks(ingested.db)
    assert [list(row) for row in rows] == [list(COLUMNS)] * len(rows)
    assert Counter(row["chunk_id"] for row in rows) == dict.fromkeys(expected, 1)
    for row in rows:
        chunk = expected[row["chunk_id"]]
        document, report = chunk["document"], chunk["report"]
        assert row == {
            "chunk_id": chunk["chunk_id"],
            "report_id": report["report_id"],
            "source": report["source"],
            "report_key": report["key"],
            "report_title": report["title"],
            "report_date": report["date"],
            "tags": report["tags"],
            "document_id": document["document_id"],
            "document_path": document["path"],
            "document_title": document["title"],
            "document_kind": document["kind"],
            "document_language": document["language"],
            "document_status": document["status"],
            "position": chunk["position"],
            "start_ms": chunk["start_ms"],
            "end_ms": chunk["end_ms"],
            "heading_path": chunk["heading_path"],
            "text": chunk["text"],
            "token_count": chunk["token_count"],
            "status": chunk["status"],
        }
    assert any(row["start_ms"] is not None for row in rows)  # the captions' times


def test_export_is_in_store_order(ingested: Ingested) -> None:
    """By source and report key; each document's chunks together, by position."""
    rows = exported(invoke("export", ingested.db))
    places = [(row["source"], row["report_key"]) for row in rows]
    assert places == sorted(places)
    documents: list[str] = []
    for row in rows:
        if not documents or documents[-1] != row["document_id"]:
            assert row["document_id"] not in documents  # a document's chunks come together
            documents.append(row["document_id"])
            expected_position = 0
        assert row["position"] == expected_position
        expected_position += 1


def test_export_to_a_file_keeps_stdout_for_data(ingested: Ingested, tmp_path: Path) -> None:
    out = tmp_path / "chunks.jsonl"
    result = invoke("export", ingested.db, "--output", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert out.read_text() == invoke("export", ingested.db).stdout
    count = len(out.read_text().splitlines())
    (summary,) = result.stderr.splitlines()
    assert summary.startswith(f"exported {count} chunks as jsonl to {out} in ")
    assert [path.name for path in tmp_path.iterdir()] == ["chunks.jsonl"]


def test_export_source_keeps_only_that_source(ingested: Ingested) -> None:
    rows = exported(invoke("export", ingested.db, "--source", "notes"))
    assert {row["source"] for row in rows} == {"notes"}
    assert len(rows) == ingested.summaries["notes"]["chunks"]
    everything = exported(invoke("export", ingested.db))
    assert rows == [row for row in everything if row["source"] == "notes"]


def test_export_into_a_missing_folder_fails_clearly(ingested: Ingested, tmp_path: Path) -> None:
    result = invoke("export", ingested.db, "-o", str(tmp_path / "no" / "such" / "out.jsonl"))
    assert result.exit_code == 1
    assert "cannot write" in result.stderr and "No such file or directory" in result.stderr


@pytest.mark.slow
def test_export_streams_its_first_rows_before_reading_the_rest(big_store: Path) -> None:
    """SQLite's virtual machine counts its steps: few have run by the first write."""
    steps = 0

    def count_steps() -> int:
        nonlocal steps
        steps += 1
        return 0  # go on

    class FirstWrite(io.BytesIO):
        steps_then: int | None = None

        def write(self, data: Any) -> int:
            if self.steps_then is None:
                self.steps_then = steps
            return super().write(data)

    out = FirstWrite()
    with Store(big_store, open_indexes=False) as store, store.reading() as conn:
        conn.set_progress_handler(count_steps, 100)
        written = write_jsonl(conn, out, batch_rows=100)
        conn.set_progress_handler(None, 0)
    assert written > 4_000
    assert out.steps_then is not None
    assert out.steps_then < steps / 10


@pytest.mark.slow
def test_export_memory_is_bounded_by_a_batch(big_store: Path) -> None:
    """Far less is held at once than is written: a batch of rows, and the decoding caches."""

    class Discard(io.RawIOBase):
        written = 0

        def write(self, data: Any) -> int:
            self.written += len(data)
            return len(data)

    with Store(big_store, open_indexes=False) as store, store.reading() as conn:
        write_jsonl(conn, Discard(), batch_rows=50)  # type: ignore[arg-type]  # caches filled
        out = Discard()
        tracemalloc.start()
        try:
            write_jsonl(conn, out, batch_rows=50)  # type: ignore[arg-type]
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert out.written > 4_000_000
    assert peak < out.written / 4


@pytest.mark.slow
def test_export_stops_quietly_when_the_reader_goes(big_store: Path) -> None:
    with subprocess.Popen(
        [*CLI, "export", str(big_store)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as child:
        assert child.stdout is not None and child.stderr is not None
        first = json.loads(child.stdout.readline())
        child.stdout.close()
        stderr = child.stderr.read().decode()
        assert child.wait(timeout=60) == 141
    assert first["position"] == 0
    assert "Traceback" not in stderr and "exported" not in stderr


# -- Parquet ----------------------------------------------------------------------


def test_parquet_without_pyarrow_says_what_to_install(
    ingested: Ingested, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)  # import fails
    out = tmp_path / "out.parquet"
    result = invoke("export", ingested.db, "--format", "parquet", "-o", str(out))
    assert result.exit_code == 2
    assert "pip install pyarrow" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_parquet_holds_the_same_rows_as_json_lines(ingested: Ingested, tmp_path: Path) -> None:
    pq = pytest.importorskip(
        "pyarrow.parquet", reason="pyarrow is not installed (pip install pyarrow)"
    )
    out = tmp_path / "chunks.parquet"
    result = invoke("export", ingested.db, "--format", "parquet", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "as parquet" in result.stderr
    table = pq.read_table(out)
    assert table.column_names == list(COLUMNS)
    rows = table.to_pylist()
    for row in rows:
        row["tags"] = json.loads(row["tags"])
    assert rows == exported(invoke("export", ingested.db))


def test_parquet_is_written_in_row_groups(big_store: Path, tmp_path: Path) -> None:
    pq = pytest.importorskip(
        "pyarrow.parquet", reason="pyarrow is not installed (pip install pyarrow)"
    )
    out = tmp_path / "big.parquet"
    with Store(big_store, open_indexes=False) as store, store.reading() as conn:
        written = write_parquet(conn, str(out), row_group_rows=500)
    metadata = pq.ParquetFile(out).metadata
    assert metadata.num_rows == written
    assert metadata.num_row_groups == -(-written // 500)


def test_export_parquet_to_stdout(ingested: Ingested) -> None:
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install pyarrow)")
    import pyarrow.parquet as pq

    result = CliRunner().invoke(main, ["export", ingested.db, "--format", "parquet"])
    assert result.exit_code == 0, result.output
    table = pq.read_table(pa.BufferReader(result.stdout_bytes))
    assert table.num_rows == len(exported(invoke("export", ingested.db)))
