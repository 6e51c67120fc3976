"""Choose a parser by file suffix; bad content becomes a status, never an exception.

Every document file, for ``ingest`` and for ``parse`` alike, is read by
:func:`read_document`: one size limit (``MAX_FILE_BYTES``), checked once,
on the open file, so what one command reads the other reads too.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from researchstore.ingest.captions import parse_srt, parse_vtt
from researchstore.ingest.html import parse_html
from researchstore.ingest.model import ParsedDocument
from researchstore.ingest.text import parse_text
from researchstore.kinds import DocumentKind

__all__ = [
    "MAX_FILE_BYTES",
    "SUPPORTED_SUFFIXES",
    "NotRead",
    "kind_for_path",
    "parse_file",
    "read_document",
]

#: The largest document file read; a larger one is stored as ``invalid`` /
#: ``too_large`` and never read.
MAX_FILE_BYTES = 64 * 1024 * 1024
#: A document's title and description are kept to this many characters (the
#: title is indexed with every chunk of its document).
MAX_TITLE_CHARS = 500
MAX_DESCRIPTION_CHARS = 2000

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


class NotRead(Exception):
    """A file that was not read, on purpose: ``reason`` and a ``note`` saying why.

    ``too_large`` (over the size limit), ``not_regular`` (not a regular file
    once opened), ``outside_source`` (it resolves outside the source root).
    """

    def __init__(self, reason: str, note: str) -> None:
        super().__init__(note)
        self.reason = reason
        self.note = note

    def outcome(self, kind: DocumentKind) -> ParsedDocument:
        """The document as stored: ``invalid`` with this reason."""
        return ParsedDocument(kind=kind, status="invalid", reason=self.reason, skipped=[self.note])


def kind_for_path(path: Path | str) -> DocumentKind | None:
    """Return the document kind for ``path``'s suffix, or None if unsupported."""
    entry = _PARSERS.get(Path(path).suffix.lower())
    return entry[0] if entry else None


def read_document(
    path: Path | str, *, inside: str | None = None, max_bytes: int | None = None
) -> bytes:
    """The bytes of one file, read once and never past the size limit.

    ``max_bytes`` defaults to ``MAX_FILE_BYTES``. With ``inside`` (a real,
    resolved directory), the file must resolve there, and the file opened
    must be the one that path names, so a link swapped in after the walk
    looked cannot lead the read elsewhere. Raises ``NotRead`` for a file
    refused on purpose and ``OSError`` for one that cannot be read.
    """
    limit = MAX_FILE_BYTES if max_bytes is None else max_bytes
    # O_NONBLOCK: a FIFO swapped in for a file must not hang the run at open.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    with open(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRead("not_regular", "not a regular file")
        if inside is not None:
            real = _realpath_under(os.fspath(path), inside)
            if os.path.commonpath([inside, real]) != inside:
                raise NotRead("outside_source", "the file resolves outside the source")
            now = os.stat(real)
            if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
                raise NotRead("outside_source", "the file changed while it was opened")
        if info.st_size > limit:
            raise NotRead("too_large", f"file is {info.st_size} bytes; the limit is {limit}")
        wanted = info.st_size + 1
        data = file.read(wanted)
        if len(data) == wanted:  # it grew since fstat: read on, up to the limit
            data += file.read(limit + 1 - len(data))
    if len(data) > limit:
        raise NotRead("too_large", f"file is over {limit} bytes; the limit is {limit}")
    return data


#: Source roots found to be their own real path (``_realpath_under``).
_REAL_ROOTS: set[str] = set()


def _realpath_under(path: str, root: str) -> str:
    """``os.path.realpath(path)``, for a path under ``root`` looking only at
    the parts below it: a real root and parts none of which is a link (nor
    ``.`` or ``..``) resolve to the path itself. Anything else is resolved
    whole. ``os.path.realpath`` looks at every part of the path, in Python.
    """
    prefix = root.rstrip(os.sep) + os.sep
    if not path.startswith(prefix) or os.altsep:
        return os.path.realpath(path)
    if root not in _REAL_ROOTS:
        if os.path.realpath(root) != root:
            return os.path.realpath(path)
        _REAL_ROOTS.add(root)
    current = root.rstrip(os.sep)
    for part in path[len(prefix) :].split(os.sep):
        if part in ("", ".", ".."):
            return os.path.realpath(path)
        current = f"{current}{os.sep}{part}"
        try:
            if stat.S_ISLNK(os.lstat(current).st_mode):
                return os.path.realpath(path)
        except OSError:  # gone, or not a folder: as realpath takes it
            return os.path.realpath(path)
    return current


def parse_file(path: Path | str, *, data: bytes | None = None) -> ParsedDocument:
    """Parse one file (``data`` if given, else read from ``path``).

    Raises ``ValueError`` for an unsupported suffix and ``OSError`` when the
    file cannot be read; for any content at all it returns a document whose
    ``status`` says how it went. A file over the size limit is not read
    (``invalid`` / ``too_large``). An unexpected error inside a library
    becomes status ``invalid``, reason ``parser_error``, with the message in
    ``skipped``.
    """
    path = Path(path)
    entry = _PARSERS.get(path.suffix.lower())
    if entry is None:
        supported = ", ".join(sorted(SUPPORTED_SUFFIXES))
        raise ValueError(f"unsupported file type {path.suffix!r} (supported: {supported})")
    kind, parse = entry
    if data is None:
        try:
            data = read_document(path)
        except NotRead as refused:
            return refused.outcome(kind)
    try:
        parsed = parse(data)
    except Exception as error:
        return ParsedDocument(
            kind=kind,
            status="invalid",
            reason="parser_error",
            skipped=[f"{type(error).__name__}: {error}"[:500]],
        )
    parsed.title = _clip(parsed.title, MAX_TITLE_CHARS)
    parsed.description = _clip(parsed.description, MAX_DESCRIPTION_CHARS)
    return parsed


def _clip(value: str | None, limit: int) -> str | None:
    if value is None or len(value) <= limit:
        return value
    return value[: limit - 1] + "…"
