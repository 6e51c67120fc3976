"""parse_file: the parser by suffix, and a status instead of an exception for bad content."""

from __future__ import annotations

from pathlib import Path

import pytest

from researchstore.ingest import parsers
from researchstore.ingest.model import ParsedDocument
from researchstore.ingest.parsers import SUPPORTED_SUFFIXES, kind_for_path, parse_file


@pytest.mark.parametrize(
    ("name", "data", "kind"),
    [
        pytest.param("page.html", b"<p>Hello.</p>", "html", id="html"),
        pytest.param("PAGE.HTM", b"<p>Hello.</p>", "html", id="htm-upper"),
        pytest.param("page.xhtml", b"<p>Hello.</p>", "html", id="xhtml"),
        pytest.param("talk.vtt", b"WEBVTT\n\n00:01.000 --> 00:02.000\nHello.\n", "vtt", id="vtt"),
        pytest.param("talk.srt", b"1\n00:00:01,000 --> 00:00:02,000\nHello.\n", "srt", id="srt"),
        pytest.param("notes.txt", b"Hello.\n", "text", id="txt"),
        pytest.param("notes.md", b"# Hello\n", "text", id="md"),
    ],
)
def test_parser_by_suffix(name: str, data: bytes, kind: str) -> None:
    doc = parse_file(name, data=data)
    assert (doc.kind, doc.status) == (kind, "ok")
    assert kind_for_path(name) == kind
    assert Path(name).suffix.lower() in SUPPORTED_SUFFIXES


def test_reads_the_file_when_no_data_is_given(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("Written to disk.\n")
    assert parse_file(path).blocks[0].text == "Written to disk."


def test_unsupported_suffix_raises() -> None:
    assert kind_for_path("archive.zip") is None
    with pytest.raises(ValueError, match="unsupported"):
        parse_file("archive.zip", data=b"PK")


def test_a_library_error_becomes_an_invalid_status(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(data: bytes) -> ParsedDocument:
        raise RuntimeError("the library fell over")

    monkeypatch.setitem(parsers._PARSERS, ".srt", ("srt", explode))
    doc = parse_file("talk.srt", data=b"anything")
    assert (doc.kind, doc.status, doc.reason) == ("srt", "invalid", "parser_error")
    assert doc.skipped == ["RuntimeError: the library fell over"]
