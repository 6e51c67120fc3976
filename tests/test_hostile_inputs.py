"""Hostile inputs: nothing found in a source stops a run, leaks past it, or grows unbounded.

Report ids out of range, names that are not UTF-8, report.json nested to
any depth, directories that cannot be read, links out of the source, text
without a space, huge caption files: each fails (or is skipped, and listed
with the reason) for that report or entry alone; the rest of the run goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import program, run_cli, run_summaries
from hypothesis import given
from hypothesis import strategies as st

from researchstore import InvalidInput, Store
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


# -- 2. inputs that used to stop every run ---------------------------------------


def test_a_name_that_is_not_utf8_is_skipped_alone(tmp_path: Path) -> None:
    root = tmp_path / "source"
    report_dir(root, "field/bees", "Beeword.")
    (root / "field").joinpath("plain.txt").write_text("Plainword.")
    raw_root = os.fsencode(root)
    with open(raw_root + b"/field/caf\xe9.txt", "wb") as file:
        file.write(b"Latinword.")
    os.makedirs(raw_root + b"/field/bees/sub\xff")
    with open(raw_root + b"/field/bees/sub\xff/deep.txt", "wb") as file:
        file.write(b"Deepword.")
    os.makedirs(raw_root + b"/r\xe9ports")
    report_dir(Path(os.fsdecode(raw_root + b"/r\xe9ports")), "inner", "Innerword.")
    with Store(tmp_path / "r.db", progress=False) as store:
        for summary in (store.ingest(root, name="src"), *reingest(store)):
            assert summary.failed == 0
            passed = skipped(summary)
            assert "not valid UTF-8" in passed["field/caf\\xe9.txt"]
            assert "not valid UTF-8" in passed["field/bees/sub\\xff"]
            assert "not valid UTF-8" in passed["r\\xe9ports"]
            json.dumps(summary.to_dict(), ensure_ascii=False).encode("utf-8")
        assert found(store, "beeword") == ["field/bees"]
        assert found(store, "plainword") == ["plain"]
        assert found(store, "latinword") == found(store, "deepword") == []


@pytest.mark.slow
def test_the_command_line_reports_a_name_that_is_not_utf8(tmp_path: Path) -> None:
    root = tmp_path / "source"
    root.mkdir()
    (root / "good.txt").write_text("Goodword.")
    with open(os.fsencode(root) + b"/bad\xff.txt", "wb") as file:
        file.write(b"Badword.")
    done = run_cli("ingest", str(tmp_path / "r.db"), str(root), "--json")
    assert done.returncode == 0, done.stderr
    summary = run_summaries(done.stdout)[-1]
    assert summary["new"] == 1
    assert summary["skipped"][0]["path"] == "bad\\xff.txt"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("[" * 100_000 + "]" * 100_000, id="arrays"),
        pytest.param('{"a":' * 100_000 + "1" + "}" * 100_000, id="objects"),
        pytest.param('{"title": "T", "tags": ' + "[" * 50_000 + "]" * 50_000 + "}", id="tags"),
    ],
)
def test_report_json_nested_deep_fails_that_report_alone(tmp_path: Path, body: str) -> None:
    root = tmp_path / "source"
    deep = report_dir(root, "deep", "Deepword.")
    (deep / "report.json").write_text(body)
    report_dir(root, "plain", "Plainword.")
    with Store(tmp_path / "r.db", progress=False) as store:
        summary = store.ingest(root)
        assert (summary.new, summary.failed) == (1, 1)
        assert "nested too deeply" in failures(summary)["deep"]
        assert found(store, "plainword") == ["plain"]


def test_an_oversized_report_json_fails_that_report_alone(tmp_path: Path) -> None:
    root = tmp_path / "source"
    huge = report_dir(root, "huge", "Hugeword.")
    (huge / "report.json").write_text(json.dumps({"title": "T", "pad": "x" * 2_000_000}))
    with Store(tmp_path / "r.db", progress=False) as store:
        summary = store.ingest(root)
        assert "report.json was not read: file is" in failures(summary)["huge"]


def denied_cli(denied: list[Path], *args: str) -> subprocess.CompletedProcess[str]:
    """``researchstore ARGS...`` in a child that cannot read the ``denied`` directories."""
    return subprocess.run(
        [*program("denied_cli"), os.pathsep.join(map(str, denied)), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
def test_a_directory_that_cannot_be_read_is_skipped_and_its_reports_kept(tmp_path: Path) -> None:
    root = tmp_path / "source"
    report_dir(root, "open/bees", "Beeword.")
    report_dir(root, "locked/river", "Riverword.")
    (root / "locked" / "memo.txt").write_text("Memoword.")
    report_dir(root, "partly", "Partword.")
    (root / "partly" / "more").mkdir()
    (root / "partly" / "more" / "extra.txt").write_text("Extraword.")
    db = str(tmp_path / "r.db")
    first = run_cli("ingest", db, str(root), "--name", "src", "--json")
    assert first.returncode == 0, first.stderr
    assert run_summaries(first.stdout)[-1]["new"] == 4

    # Now "locked" and a directory inside the report "partly" cannot be read.
    denied = [root / "locked", root / "partly" / "more"]
    for args in (["ingest", db, str(root), "--name", "src"], ["reingest", db]):
        done = denied_cli(denied, *args, "--json")
        assert "Traceback" not in done.stderr
        assert done.returncode == 1, done.stderr  # the report "partly" failed
        summary = run_summaries(done.stdout)[-1]
        assert summary["removed"] == 0
        assert "directory cannot be read" in skipped_of(summary)["locked"]
        assert failures_of(summary) == {
            "partly": "directory partly/more cannot be read (Permission denied)"
        }
    with Store(db, progress=False) as store:
        # Nothing under what could not be read was removed or changed.
        for word, title in [("riverword", "locked/river"), ("memoword", "memo")]:
            assert found(store, word) == [title]
        assert found(store, "extraword") == ["partly"]

    # The source root itself: the run says so and keeps every report.
    done = denied_cli([root], "reingest", db, "--json")
    assert "Traceback" not in done.stderr and done.returncode == 0, done.stderr
    summary = run_summaries(done.stdout)[-1]
    assert summary["removed"] == 0 and "directory cannot be read" in skipped_of(summary)["."]
    with Store(db, progress=False) as store:
        assert found(store, "beeword") == ["open/bees"]


@pytest.mark.slow
def test_a_named_report_that_cannot_be_reached_is_kept(tmp_path: Path) -> None:
    root = tmp_path / "source"
    report_dir(root, "locked/river", "Riverword.")
    db = str(tmp_path / "r.db")
    assert run_cli("ingest", db, str(root), "--name", "src").returncode == 0
    done = denied_cli([root / "locked"], "reingest", db, "--only", "locked/river", "--json")
    assert "Traceback" not in done.stderr and done.returncode == 0, done.stderr
    summary = run_summaries(done.stdout)[-1]
    assert summary["removed"] == 0
    assert "the report is kept as it was" in skipped_of(summary)["locked/river"]
    with Store(db, progress=False) as store:
        assert found(store, "riverword") == ["locked/river"]


def test_a_directory_that_cannot_be_listed_does_not_stop_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "source"
    report_dir(root, "open/bees", "Beeword.")
    report_dir(root, "locked/river", "Riverword.")
    locked = str(root / "locked")
    scandir = os.scandir

    def refusing_scandir(path: Any) -> Any:
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", path)
        return scandir(path)

    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(root, name="src")
        monkeypatch.setattr(os, "scandir", refusing_scandir)
        [summary] = reingest(store)
        assert (summary.removed, summary.failed) == (0, 0)
        assert "directory cannot be read (Permission denied)" in skipped(summary)["locked"]
        assert found(store, "riverword") == ["locked/river"]


def skipped_of(summary: dict[str, Any]) -> dict[str, str]:
    return {entry["path"]: entry["reason"] for entry in summary["skipped"]}


def failures_of(summary: dict[str, Any]) -> dict[str, str]:
    return {failure["report"]: failure["reason"] for failure in summary["failures"]}


# -- 13. symbolic links ---------------------------------------------------------


@pytest.fixture
def linked_source(tmp_path: Path) -> Path:
    """A source with links: to a file outside it, to one inside, and from a report."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("Secretword from outside.")
    (outside / "meta.json").write_text(json.dumps({"title": "Stolen title"}))
    root = tmp_path / "source"
    report_dir(root, "bees", "Beeword.")
    (root / "bees" / "leak.txt").symlink_to(outside / "secret.txt")
    (root / "shadow.txt").symlink_to(outside / "secret.txt")
    (root / "inside.txt").symlink_to(root / "bees" / "notes.txt")
    stolen = root / "stolen"
    stolen.mkdir()
    (stolen / "report.json").symlink_to(outside / "meta.json")
    (stolen / "notes.txt").write_text("Stolenword.")
    return root


LINK_OUTSIDE = "symbolic link to a file outside the source is not followed"


def test_a_link_to_a_file_outside_the_source_is_skipped(
    tmp_path: Path, linked_source: Path
) -> None:
    with Store(tmp_path / "r.db", progress=False) as store:
        for summary in (store.ingest(linked_source, name="src"), *reingest(store)):
            passed = skipped(summary)
            assert LINK_OUTSIDE in passed["shadow.txt"]
            assert LINK_OUTSIDE in passed["bees/leak.txt"]
            assert "resolves outside the source" in failures(summary)["stolen"]
        assert found(store, "secretword") == []
        assert found(store, "beeword") == ["bees", "inside"]  # a link inside is read
        assert found(store, "stolenword") == []


def test_following_external_links_is_a_choice_reingest_keeps(
    tmp_path: Path, linked_source: Path
) -> None:
    with Store(tmp_path / "r.db", progress=False) as store:
        summary = store.ingest(linked_source, name="src", follow_external_links=True)
        assert summary.failed == 0 and not any("symbolic" in r for r in skipped(summary).values())
        assert found(store, "secretword") == ["bees", "shadow"]
        assert found(store, "stolenword") == ["Stolen title"]
        [again] = reingest(store)
        assert again.failed == 0 and again.removed == 0
        assert found(store, "secretword") == ["bees", "shadow"]
        # A plain ingest says no again, and re-ingest keeps that.
        store.ingest(linked_source, name="src")
        [last] = reingest(store)
        assert LINK_OUTSIDE in skipped(last)["shadow.txt"]
        assert found(store, "secretword") == []


@pytest.mark.slow
def test_the_command_line_flag_is_recorded_with_the_source(
    tmp_path: Path, linked_source: Path
) -> None:
    db = str(tmp_path / "r.db")
    done = run_cli("ingest", db, str(linked_source), "--follow-external-links", "--json")
    assert done.returncode == 0, done.stderr
    assert run_summaries(done.stdout)[-1]["failed"] == 0
    (tmp_path / "outside" / "secret.txt").write_text("Changedword from outside.")
    os.utime(tmp_path / "outside" / "secret.txt", ns=(1, 1))
    again = run_cli("reingest", db, "--json")
    assert again.returncode == 0, again.stderr
    assert run_summaries(again.stdout)[-1]["modified"] == 2
    with Store(db, progress=False) as store:
        assert found(store, "changedword") == ["bees", "shadow"]


def test_a_named_report_behind_a_linked_directory_is_not_read(
    tmp_path: Path, linked_source: Path
) -> None:
    (linked_source / "elsewhere").symlink_to(tmp_path / "outside", target_is_directory=True)
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(linked_source, name="src")
        # Naming only what cannot be read is an error that says why, not a run.
        with pytest.raises(InvalidInput) as refused:
            reingest(store, only=["elsewhere/secret.txt", "shadow.txt"])
        assert "symbolic link to a directory is not followed" in refused.value.message
        assert LINK_OUTSIDE in refused.value.message
        assert found(store, "secretword") == []


def test_a_link_swapped_in_after_the_walk_is_not_read(tmp_path: Path) -> None:
    from researchstore.ingest.prepare import prepare_document

    root = (tmp_path / "source").resolve()
    root.mkdir()
    (tmp_path / "secret.txt").write_text("Secretword.")
    (root / "notes.txt").symlink_to(tmp_path / "secret.txt")
    document = prepare_document(root, "notes.txt", 256, inside=str(root))
    assert (document.status, document.reason, document.drafts) == ("invalid", "outside_source", [])


# -- 14. limits --------------------------------------------------------------------


def test_parse_and_ingest_apply_the_same_size_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from researchstore.ingest import parsers
    from researchstore.ingest.inspect import describe_file

    root = tmp_path / "source"
    root.mkdir()
    page = root / "page.html"
    page.write_text("<title>Big</title><p>" + "Bigword. " * 40 + "</p>")
    (root / "small.txt").write_text("Smallword.")
    monkeypatch.setattr(parsers, "MAX_FILE_BYTES", 200)
    described = describe_file(page)
    assert (described["status"], described["reason"], described["chunks"]) == (
        "invalid",
        "too_large",
        [],
    )
    with Store(tmp_path / "r.db", progress=False) as store:
        summary = store.ingest(root)
        outcome = {entry["path"]: entry for entry in summary.skipped}["page.html"]
        assert (outcome["status"], outcome["reason"]) == ("invalid", "too_large")
        assert outcome["details"] == described["skipped"]
        assert found(store, "bigword") == [] and found(store, "smallword") == ["small"]


def test_parse_refuses_a_fifo_instead_of_waiting_on_it(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    done = run_cli("parse", str(fifo), "--json", timeout=60)
    assert done.returncode == 0, done.stderr
    described = json.loads(done.stdout)
    assert (described["status"], described["reason"]) == ("invalid", "not_regular")


@pytest.mark.slow
def test_text_without_a_space_is_cut_into_bounded_chunks(tmp_path: Path) -> None:
    from researchstore.ingest.chunking import max_chunk_chars

    bound = max_chunk_chars(256)
    root = tmp_path / "source"
    root.mkdir()
    run = "y" * 1_000_000
    (root / "run.txt").write_text(f"Needleword {run} Tailword.")
    heading = "H" * 100_000
    (root / "heading.md").write_text(f"# {heading}\n\nUnderword lives below a long heading.\n")
    cjk = "北京的天气很好我们去公园散步" * 20_000
    (root / "cjk.txt").write_text(cjk)
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(root)
        with store.reading() as conn:
            rows = conn.execute(
                "SELECT d.path, c.text, c.heading_path FROM chunks c "
                "JOIN documents d ON d.id = c.document_rowid ORDER BY d.path, c.position"
            ).fetchall()
        texts: dict[str, list[str]] = {}
        for path, text, heading_path in rows:
            assert 0 < len(text) <= bound
            assert heading_path is None or len(heading_path) < 400
            texts.setdefault(path, []).append(text)
        # Cut at character boundaries: nothing lost, nothing added.
        assert "".join(texts["cjk.txt"]) == cjk
        assert "".join(texts["run.txt"]).replace(" ", "") == f"Needleword{run}Tailword."
        [hit] = store.search("needleword")
        assert len(hit["text"]) <= bound
        [under] = store.search("underword")
        assert len(under["text"]) <= bound


def test_a_caption_cue_too_long_for_a_chunk_is_split_and_keeps_its_times(tmp_path: Path) -> None:
    from researchstore.ingest.chunking import chunk_segments, max_chunk_chars
    from researchstore.ingest.model import Segment

    words = " ".join(f"w{number}" for number in range(5_000))
    segments = [Segment(0, 1000, "Short."), Segment(1000, 9000, words + " " + "z" * 20_000)]
    text, chunks = chunk_segments(segments, target_tokens=64)
    assert len(chunks) > 2
    assert all(len(chunk.text) <= max_chunk_chars(64) for chunk in chunks)
    assert all(chunk.token_count <= 64 for chunk in chunks)
    # A cue of ordinary length stays whole, whatever its tokens.
    cue = Segment(0, 1000, " ".join(["hive"] * 100))
    assert [chunk.text for chunk in chunk_segments([cue], target_tokens=16)[1]] == [cue.text]
    assert [(chunk.start_ms, chunk.end_ms) for chunk in chunks[1:]] == [(1000, 9000)] * (
        len(chunks) - 1
    )
    assert "".join(chunk.text for chunk in chunks).replace(" ", "").replace("\n", "") == (
        text.replace(" ", "").replace("\n", "")
    )


def test_a_huge_title_and_description_are_clipped(tmp_path: Path) -> None:
    from researchstore.ingest.parsers import MAX_DESCRIPTION_CHARS, MAX_TITLE_CHARS, parse_file

    page = tmp_path / "page.html"
    page.write_bytes(
        b"<html><head><title>"
        + b"T" * 1_000_000
        + b'</title><meta name="description" content="'
        + b"D" * 1_000_000
        + b'"></head><body><p>Body.</p></body></html>'
    )
    parsed = parse_file(page)
    assert parsed.title is not None and len(parsed.title) == MAX_TITLE_CHARS
    assert parsed.description is not None and len(parsed.description) == MAX_DESCRIPTION_CHARS


def caption_file(path: Path, cues: int) -> Path:
    """A caption file of ``cues`` ordinary cues: two lines, now and then a dash or an accent."""
    vtt = path.suffix == ".vtt"
    mark = "." if vtt else ","
    out = ["WEBVTT\n\n"] if vtt else []
    for number in range(cues):
        start, end = (
            f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}"
            f"{mark}{ms % 1000:03d}"
            for ms in (number * 2000, number * 2000 + 1900)
        )
        if not vtt:
            out.append(f"{number + 1}\n")
        dash = " —" if number % 10 == 0 else ","
        out.append(
            f"{start} --> {end}\nThe speaker says words number {number} here\n"
            f"and goes on{dash} café {number % 97}\n\n"
        )
    path.write_text("".join(out), encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".srt", ".vtt"])
def test_a_large_caption_file_is_parsed_in_bounded_memory(tmp_path: Path, suffix: str) -> None:
    path = caption_file(tmp_path / f"large{suffix}", 120_000)
    done = subprocess.run(
        [*program("caption_memory"), str(path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    assert (measured["status"], measured["segments"]) == ("ok", 120_000)
    assert measured["bytes"] > 9_000_000
    assert measured["growth"] <= 4 * measured["bytes"], measured


def test_notes_on_a_caption_file_are_bounded(tmp_path: Path) -> None:
    from researchstore.ingest.captions import MAX_NOTES, parse_vtt

    good = "00:00:01.000 --> 00:00:02.000\nSpoken.\n\n"
    bad = "".join(f"00:00:{n % 60:02d}.000 --> 00:00:0x.000\nBroken {n}.\n\n" for n in range(5000))
    doc = parse_vtt(f"WEBVTT\n\n{good}{bad}".encode())
    assert (doc.status, doc.reason) == ("partial", "invalid_cues")
    assert len(doc.skipped) == MAX_NOTES + 1
    assert doc.skipped[-1] == f"and {5000 - MAX_NOTES} more cues or blocks skipped"


@pytest.mark.parametrize("suffix", ["vtt", "srt"])
def test_a_cue_of_endless_lines_keeps_its_first_lines_and_says_so(suffix: str) -> None:
    from researchstore.ingest.captions import MAX_BLOCK_LINES, parse_srt, parse_vtt

    body = "\n".join(f"line {n}" for n in range(MAX_BLOCK_LINES + 500))
    if suffix == "vtt":
        doc = parse_vtt(f"WEBVTT\n\n00:01.000 --> 00:02.000\n{body}\n".encode())
    else:
        doc = parse_srt(f"1\n00:00:01,000 --> 00:00:02,000\n{body}\n".encode())
    assert (doc.status, doc.reason) == ("partial", "invalid_cues")
    [segment] = doc.segments
    assert segment.text.startswith("line 0\nline 1\n")
    assert "line 1499" not in segment.text
    assert "lines past the first" in doc.skipped[0]


@given(
    st.lists(
        st.sampled_from(["a", "b", " ", "\r", "\n", "\r\n", "é", "—", "😀", "\ufeff", "\x81"]),
        max_size=60,
    ),
    st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "cp1252", "latin-1"]),
    st.integers(min_value=1, max_value=9),
)
def test_lines_decoded_piece_by_piece_are_the_lines_of_the_whole_text(
    pieces: list[str], encoding: str, piece_bytes: int
) -> None:
    from researchstore.ingest import decode

    try:
        data = "".join(pieces).encode(encoding)
    except UnicodeEncodeError:
        return
    text, expected_encoding = decode.decode_text(data)
    saved = decode._STREAM_BYTES
    decode._STREAM_BYTES = piece_bytes  # pieces end inside characters and "\r\n"
    try:
        lines, used = decode.decode_lines(data)
        assert used == expected_encoding
        assert list(lines) == text.split("\n") == list(lines)
    finally:
        decode._STREAM_BYTES = saved


def test_a_path_under_the_root_resolves_as_realpath_does(tmp_path: Path) -> None:
    """``read_document`` resolves a file under the source root looking only at
    the parts below it; links anywhere (a folder, the file, the root itself),
    ``..``, doubled slashes and missing parts resolve as ``os.path.realpath``."""
    from researchstore.ingest.parsers import _realpath_under

    outside = tmp_path / "outside.html"
    outside.write_text("<p>x</p>")
    real = tmp_path / "real"
    (real / "a" / "b").mkdir(parents=True)
    (real / "a" / "b" / "f.html").write_text("<p>f</p>")
    (real / "folder-link").symlink_to(real / "a")
    (real / "a" / "file-link.html").symlink_to(outside)
    (tmp_path / "root-link").symlink_to(real)
    for root in (str(real), str(tmp_path / "root-link")):
        for tail in (
            "a/b/f.html",
            "folder-link/b/f.html",
            "a/file-link.html",
            "a/../a/b/f.html",
            "a//b/f.html",
            "a/./b/f.html",
            "a/missing/f.html",
            "a/b/f.html/under-a-file",
        ):
            path = f"{root}/{tail}"
            assert _realpath_under(path, root) == os.path.realpath(path), path
    assert _realpath_under(str(outside), str(real)) == os.path.realpath(outside)
