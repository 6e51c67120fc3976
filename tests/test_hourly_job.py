"""The hourly job: cheap when nothing changed, never stuck on a source that is gone.

- An unchanged re-ingest loads no embedding model: with nothing to embed,
  ``Store.embed`` answers before any model is chosen.
- A run that embeds chunks older than itself says how many.
- A source whose folder vanished fails alone; ``remove-source`` removes it
  on purpose, with a confirmation that scripts give as ``--yes``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import FIXTURE_SOURCE, HashingEmbedder, long_text, program, run_cli, write_report

from researchstore import Store
from researchstore.errors import InvalidInput
from researchstore.meaning.embed import EmbedSummary
from researchstore.reingest import reingest


def _two_sources(tmp_path: Path) -> tuple[Path, Path]:
    kept, gone = tmp_path / "kept", tmp_path / "gone"
    write_report(
        kept,
        "field/bees",
        title="Bees",
        date="2026-05-01",
        tags={},
        files={"notes.txt": long_text(6)},
    )
    write_report(
        gone,
        "field/river",
        title="River",
        date="2026-05-01",
        tags={},
        files={"notes.txt": long_text(5, seed=3)},
    )
    write_report(
        gone,
        "field/lake",
        title="Lake",
        date="2026-05-01",
        tags={},
        files={"notes.txt": long_text(4, seed=5)},
    )
    return kept, gone


def _embedded_store(db: Path, source: Path) -> None:
    with Store(db, progress=False, embedder=HashingEmbedder()) as store:
        store.ingest(source, name="fixtures")
        assert store.embed().embedded > 0


# -- no model for nothing --------------------------------------------------------


@pytest.mark.slow
def test_embedding_with_nothing_to_embed_loads_no_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "r.db"
    _embedded_store(db, FIXTURE_SOURCE)

    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was loaded with nothing to embed")

    monkeypatch.setattr("researchstore.meaning.embedding.load_embedder", no_model)
    with Store(db, progress=False) as store:
        summary = store.embed()
    assert summary.nothing_to_do and summary.embedded == 0
    assert summary.model == HashingEmbedder().model_id


@pytest.mark.slow
def test_an_unchanged_reingest_imports_no_model_even_when_asked_to_embed(tmp_path: Path) -> None:
    """``--embed`` on a store whose every chunk has a vector: no torch, no model,
    exit 0, one line saying so (before, the default model was loaded for nothing)."""
    db = tmp_path / "r.db"
    _embedded_store(db, FIXTURE_SOURCE)
    done = subprocess.run(
        [*program("unchanged_reingest"), "reingest", str(db), "--embed"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RESEARCHSTORE_EMBED": "auto"},
    )
    *printed, last = done.stdout.strip().splitlines()
    outcome = json.loads(last)
    assert outcome == {"exit": 0, "loaded": []}, done.stderr
    assert "every chunk has a vector; no model was loaded" in "\n".join(printed)
    assert "embedded 0 chunks" not in done.stdout


def test_a_run_that_embeds_older_chunks_says_how_many(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write_report(
        first, "a", title="First", date="2026-05-01", tags={}, files={"notes.txt": long_text(6)}
    )
    write_report(
        second,
        "b",
        title="Second",
        date="2026-05-01",
        tags={},
        files={"notes.txt": long_text(3, seed=2)},
    )
    with Store(tmp_path / "r.db", progress=False, embedder=HashingEmbedder()) as store:
        store.ingest(first, name="first")  # left without vectors
        older = store._conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        before = store.last_chunk_rowid()
        new = store.ingest(second, name="second").chunks
        summary = store.embed(older_than=before)
    assert older > 0 and new > 0
    assert (summary.embedded, summary.older) == (older + new, older)
    assert summary.to_dict()["older"] == older


def test_the_embed_line_tells_older_chunks_and_nothing_to_do(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from researchstore.cli.common import print_embed_summary

    print_embed_summary(EmbedSummary(model="m@1", embedded=12, older=9, seconds=1.0), as_json=False)
    print_embed_summary(EmbedSummary(model="m@1", nothing_to_do=True), as_json=False)
    first, second = capsys.readouterr().out.splitlines()
    assert "embedded 12 chunks (9 of them older chunks that had no vector) with m@1" in first
    assert second.endswith("embed: every chunk has a vector; no model was loaded")


# -- a source that is gone -------------------------------------------------------


@pytest.mark.slow
def test_a_vanished_source_fails_alone_and_the_others_are_refreshed(tmp_path: Path) -> None:
    kept, gone = _two_sources(tmp_path)
    db = tmp_path / "r.db"
    with Store(db, progress=False) as store:
        store.ingest(kept, name="kept")
        store.ingest(gone, name="gone")
    write_report(
        kept,
        "field/moths",
        title="Moths",
        date="2026-05-01",
        tags={},
        files={"notes.txt": long_text(3, seed=9)},
    )
    (gone / "field" / "river" / "notes.txt").unlink()
    gone.rename(tmp_path / "unmounted")
    result = run_cli("reingest", str(db), "--json")
    assert result.returncode == 1, result.stderr
    summaries = {
        event["source"]: event
        for event in map(json.loads, result.stdout.splitlines())
        if event["event"] == "summary"
    }
    assert (summaries["kept"]["new"], summaries["kept"]["failed"]) == (1, 0)
    assert summaries["gone"]["failed"] == 1
    reason = summaries["gone"]["failures"][0]["reason"]
    assert "is not a directory; nothing was changed" in reason
    assert f"researchstore remove-source {db} gone" in reason
    with Store(db, progress=False) as store:
        titles = {row[0] for row in store._conn.execute("SELECT title FROM reports")}
    assert titles == {"Bees", "Moths", "River", "Lake"}  # the vanished source's kept whole


@pytest.mark.slow
def test_remove_source_takes_its_reports_out_of_store_and_index(tmp_path: Path) -> None:
    kept, gone = _two_sources(tmp_path)
    db = tmp_path / "r.db"
    with Store(db, progress=False) as store:
        store.ingest(kept, name="kept")
        store.ingest(gone, name="gone")
        old_ids = [
            row[0]
            for row in store._conn.execute(
                "SELECT c.chunk_id FROM chunks c JOIN reports r ON r.report_id = c.report_id "
                "JOIN sources s ON s.id = r.source_id WHERE s.name = 'gone'"
            )
        ]
        hits = store.search("colony", limit=50)
        kept_hits = {hit["chunk_id"] for hit in hits if hit["title"] == "Bees"}
    assert kept_hits and len(hits) > len(kept_hits)
    assert old_ids
    (tmp_path / "gone").rename(tmp_path / "unmounted")

    refused = subprocess.run(
        [*program("cli"), "remove-source", str(db), "gone"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "say --yes to remove it" in refused.stderr
    assert "2 reports" in refused.stderr

    removed = run_cli("remove-source", str(db), "gone", "--yes", "--json")
    assert removed.returncode == 0, removed.stderr
    assert json.loads(removed.stdout) == {
        "name": "gone",
        "root": str(gone),
        "reports": 2,
        "chunks": len(old_ids),
    }
    with Store(db, progress=False) as store:
        assert store.check()["consistent"]
        assert (
            store._conn.execute(
                "SELECT count(*) FROM chunks c JOIN reports r ON r.report_id = c.report_id "
                "JOIN sources s ON s.id = r.source_id WHERE s.name = 'kept'"
            ).fetchone()[0]
            == store._conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        )
        assert {hit["chunk_id"] for hit in store.search("colony", limit=50)} == kept_hits
        resolved = store.resolve_chunk(old_ids[0])
        assert resolved is not None and resolved["status"] == "gone", resolved
        assert resolved["reason"] == "the report was removed from its source"
        assert [summary.source for summary in reingest(store)] == ["kept"]
        # The name is free again.
        store.ingest(tmp_path / "unmounted", name="gone")
        assert store.check()["consistent"]
    again = run_cli("reingest", str(db))
    assert again.returncode == 0, again.stdout + again.stderr


@pytest.mark.slow
def test_remove_source_of_an_unknown_name_is_invalid_input(store: Store) -> None:
    with pytest.raises(InvalidInput, match="no source named 'nowhere'"):
        store.remove_source("nowhere")
    result = run_cli("remove-source", str(store.path), "nowhere", "--yes")
    assert result.returncode == 2
    assert "no source named 'nowhere'" in result.stderr
