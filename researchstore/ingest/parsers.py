"""Choose a parser by file suffix; bad content becomes a status, never an exception."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from researchstore.ingest.captions import parse_srt, parse_vtt
from researchstore.ingest.html import parse_html
from researchstore.ingest.model import ParsedDocument
from researchstore.ingest.text import parse_text
from researchstore.kinds import DocumentKind

__all__ = ["SUPPORTED_SUFFIXES", "kind_for_path", "parse_file"]

_PARSERS: dict[str, tuple[DocumentKind, Callable[[bytes], ParsedDocument]]] = {
    ".html": ("html", parse_html),
    ".htm": ("html", parse_html),
    ".xhtml": ("html", parse_html),
    ".vtt": ("vtt", parse_vtt),
    ".srt": ("srt", parse_srt),
    ".txt": ("text", parse_text),
    ".md": ("text", parse_text),
}

#: Lower-case suffixes ``parse_file`` reads, with the dot.
SUPPORTED_SUFFIXES: frozenset[str] = frozenset(_PARSERS)


def kind_for_path(path: Path | str) -> DocumentKind | None:
    """Return the document kind for ``path``'s suffix, or None if unsupported."""
    entry = _PARSERS.get(Path(path).suffix.lower())
    return entry[0] if entry else None


def parse_file(path: Path | str, *, data: bytes | None = None) -> ParsedDocument:
    """Parse one file (``data`` if given, else read from ``path``).

    Raises ``ValueError`` for an unsupported suffix and ``OSError`` when the
    file cannot be read; for any content at all it returns a document whose
    ``status`` says how it went. An unexpected error inside a library becomes
    status ``invalid``, reason ``parser_error``, with the message in ``skipped``.
    """
    path = Path(path)
    entry = _PARSERS.get(path.suffix.lower())
    if entry is None:
        supported = ", ".join(sorted(SUPPORTED_SUFFIXES))
        raise ValueError(f"unsupported file type {path.suffix!r} (supported: {supported})")
    kind, parse = entry
    if data is None:
        data = path.read_bytes()
    try:
        return parse(data)
    except Exception as error:
        return ParsedDocument(
            kind=kind,
            status="invalid",
            reason="parser_error",
            skipped=[f"{type(error).__name__}: {error}"[:500]],
        )
