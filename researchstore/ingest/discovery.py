"""Find the reports of a source on disk, and tell cheaply whether they changed.

A report is a directory holding ``report.json`` (with its document files,
at any depth) or a single supported file; other directories are folders.
Hidden entries are ignored on purpose; every other entry becomes a document
or is listed as passed over, with the reason. Nothing found on disk stops
the walk:

- a name that is not valid UTF-8 cannot be a key in the store: the entry
  (a directory with everything under it) is passed over;
- a directory that cannot be listed is passed over, and the reports the
  store holds under it are kept as they are (``Discovery.unread``); a report
  directory that cannot be listed whole fails alone (``ReportSource.problem``);
- a symbolic link is followed only to a file that resolves inside the source
  root, unless the source follows external links; a link to a directory is
  never followed (it could loop).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from researchstore.ingest.parsers import SUPPORTED_SUFFIXES

REPORT_FILE = "report.json"


@dataclass(slots=True)
class ReportSource:
    """One report found on disk."""

    key: str  # its path relative to the source root (posix)
    folder: str  # the folder holding it ("" for the root)
    is_dir: bool
    files: list[str]  # its document files, relative to the root, sorted
    #: Why the report cannot be stored as found (part of it could not be
    #: listed), or None. Such a report fails alone and keeps what it had.
    problem: str | None = None
    #: Whether its files may resolve outside the source root.
    follow_external_links: bool = False


@dataclass(slots=True)
class Discovery:
    """What a walk found: the reports, the entries passed over, what it could not read."""

    reports: list[ReportSource] = field(default_factory=list)
    #: Entries not stored, each ``{"path", "status", "reason", "details"}``.
    passed_over: list[dict[str, Any]] = field(default_factory=list)
    #: Paths (relative to the root; "" for the root itself) that could not be
    #: listed: reports under them were not looked at, so none may be removed.
    unread: list[str] = field(default_factory=list)

    def was_unread(self, key: str) -> bool:
        """Tell whether the report ``key`` lies where the walk could not look."""
        return any(not path or key == path or key.startswith(path + "/") for path in self.unread)


def discover(root: Path, *, follow_external_links: bool = False) -> Discovery:
    """Every report under ``root``, the entries passed over (and why), what could not be read.

    ``root`` is resolved (``Path.resolve``). Hidden entries (names starting
    with ".") are ignored on purpose; every other entry becomes a document
    or is listed as passed over.
    """
    walk = _Walk(root, follow_external_links)
    found = walk.found
    if os.path.isfile(os.path.join(root, REPORT_FILE)):
        found.passed_over.append(
            _passed_over(
                REPORT_FILE,
                "a report.json at the source root is ignored: a report is a "
                "directory inside the source",
            )
        )
    stack = [""]
    while stack:
        relative = stack.pop()
        directory = os.path.join(root, relative) if relative else str(root)
        try:
            entries = walk.list(directory, relative)
        except OSError as error:
            found.passed_over.append(_passed_over(relative or ".", _unlisted(error)))
            found.unread.append(relative)
            continue
        subdirs = []
        for entry, path, kind in entries:
            if kind == "dir":
                subdirs.append(path)
            elif Path(entry.name).suffix.lower() in SUPPORTED_SUFFIXES:
                found.reports.append(
                    ReportSource(path, relative, False, [path], None, follow_external_links)
                )
            elif not (entry.name == REPORT_FILE and relative):
                found.passed_over.append(_passed_over(path, "unsupported file type"))
        for path in reversed(subdirs):
            if os.path.isfile(os.path.join(root, path, REPORT_FILE)):
                found.reports.append(walk.report(path, relative))
            else:
                stack.append(path)
    found.reports.sort(key=lambda report: report.key)
    return found


def discover_keys(
    root: Path, keys: Sequence[str], *, follow_external_links: bool = False
) -> Discovery:
    """The reports named by ``keys`` (paths relative to ``root``) that exist.

    A key is looked up the way the walk would reach it: through real
    directories only, never a link to one.
    """
    walk = _Walk(root, follow_external_links)
    found = walk.found
    for key in sorted(set(keys)):
        key = key.strip("/")
        parts = key.split("/")
        shown = _printable(key) or "/"
        if not key or any(part in ("", ".", "..") or part.startswith(".") for part in parts):
            found.passed_over.append(_passed_over(shown, "not a report path inside the source"))
            continue
        if not _is_utf8(key):
            found.passed_over.append(_passed_over(shown, _NOT_UTF8))
            continue
        path = os.path.join(root, key)
        folder = key.rpartition("/")[0]
        linked = next(
            (
                "/".join(parts[:depth])
                for depth in range(1, len(parts))
                if os.path.islink(os.path.join(root, *parts[:depth]))
            ),
            None,
        )
        if linked is not None:
            found.passed_over.append(_passed_over(linked, _LINK_TO_DIRECTORY))
            continue
        try:
            os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            continue  # gone
        except OSError as error:
            why = error.strerror or type(error).__name__
            found.passed_over.append(
                _passed_over(key, f"cannot be read ({why}); the report is kept as it was")
            )
            found.unread.append(key)
            continue
        if os.path.islink(path):
            problem = walk.link_problem(path)
            if problem is not None:
                found.passed_over.append(_passed_over(key, problem))
                continue
        if os.path.isfile(os.path.join(path, REPORT_FILE)):
            found.reports.append(walk.report(key, folder))
        elif os.path.isfile(path) and os.path.splitext(path)[1].lower() in SUPPORTED_SUFFIXES:
            found.reports.append(
                ReportSource(key, folder, False, [key], None, follow_external_links)
            )
        elif os.path.exists(path):
            found.passed_over.append(
                _passed_over(key, "neither a report directory nor a supported file")
            )
    return found


_NOT_UTF8 = "the name is not valid UTF-8, so it cannot be stored"
_LINK_TO_DIRECTORY = "symbolic link to a directory is not followed (it could loop)"
_LINK_OUTSIDE = (
    "symbolic link to a file outside the source is not followed "
    "(ingest --follow-external-links follows it)"
)


class _Walk:
    """What one walk shares: the root, its resolved form, the link choice, the findings."""

    def __init__(self, root: Path, follow_external_links: bool) -> None:
        self.root = str(root)
        self.real_root = os.path.realpath(root)
        self.follow_external_links = follow_external_links
        self.found = Discovery()

    def list(self, directory: str, relative: str) -> list[tuple[os.DirEntry[str], str, str]]:
        """``(entry, path, "dir" | "file")`` for each entry of ``directory`` worth a look.

        Entries passed over are listed in ``found.passed_over`` on the way.
        Raises ``OSError`` when the directory cannot be listed.
        """
        with os.scandir(directory) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
        listed = []
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            path = f"{relative}/{name}" if relative else name
            if not _is_utf8(name):
                self.found.passed_over.append(_passed_over(_printable(path), _NOT_UTF8))
                continue
            try:
                kind = self.kind(entry)
            except OSError as error:
                kind = _unreadable(error)
            if kind in ("dir", "file"):
                listed.append((entry, path, kind))
            else:
                self.found.passed_over.append(_passed_over(path, kind))
        return listed

    def kind(self, entry: os.DirEntry[str]) -> str:
        """``dir``, ``file``, or why the entry is passed over."""
        if entry.is_symlink():
            problem = self.link_problem(entry.path)
            if problem is not None:
                return problem
        if entry.is_dir():
            return "dir"
        if not entry.is_file():
            return "not a regular file"
        return "file"

    def link_problem(self, path: str) -> str | None:
        """Why the symbolic link ``path`` is not followed, or None to read it like a file."""
        target = os.path.realpath(path)
        if not os.path.exists(target):
            return "broken symbolic link"
        if os.path.isdir(target):
            return _LINK_TO_DIRECTORY
        if not self.follow_external_links and not _inside(target, self.real_root):
            return _LINK_OUTSIDE
        return None

    def report(self, key: str, folder: str) -> ReportSource:
        """The report directory ``key``: its files, or the problem that stops it."""
        files: list[str] = []
        problem = None
        stack = [key]
        while stack:
            relative = stack.pop()
            try:
                entries = self.list(os.path.join(self.root, relative), relative)
            except OSError as error:
                # A report read in part would be stored without the files it
                # could not list: it fails instead, and keeps what it had.
                why = error.strerror or type(error).__name__
                problem = problem or f"directory {relative} cannot be read ({why})"
                continue
            subdirs = []
            for entry, path, kind in entries:
                name = entry.name
                if kind == "dir":
                    subdirs.append(path)
                elif os.path.splitext(name)[1].lower() in SUPPORTED_SUFFIXES:
                    files.append(path)
                elif not (name == REPORT_FILE and relative == key):
                    self.found.passed_over.append(_passed_over(path, "unsupported file type"))
            stack.extend(reversed(subdirs))
        files.sort()
        return ReportSource(key, folder, True, files, problem, self.follow_external_links)


def _inside(path: str, real_root: str) -> bool:
    return os.path.commonpath([real_root, path]) == real_root


def _is_utf8(name: str) -> bool:
    # os.scandir turns bytes that are not UTF-8 into lone surrogates.
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _printable(path: str) -> str:
    """``path`` with any byte that is not UTF-8 shown as ``\\xNN``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _unreadable(error: OSError) -> str:
    return f"cannot be read ({error.strerror or type(error).__name__})"


def _unlisted(error: OSError) -> str:
    why = error.strerror or type(error).__name__
    return f"directory cannot be read ({why}); the reports under it are kept as they were"


def _passed_over(path: str, reason: str) -> dict[str, Any]:
    return {"path": path, "status": "skipped", "reason": reason, "details": []}


def report_signature(root: Path, report: ReportSource) -> str:
    """Cheap change detection: names, sizes and modification times.

    A report with a problem never matches a stored signature, so it is
    looked at (and fails) on every run until the problem is gone.
    """
    parts = []
    names = [*report.files, f"{report.key}/{REPORT_FILE}"] if report.is_dir else report.files
    base = str(root)
    for name in names:
        try:
            info = os.stat(os.path.join(base, name))
        except OSError:
            parts.append(f"{name}:missing")
            continue
        parts.append(f"{name}:{info.st_size}:{info.st_mtime_ns}")
    if report.problem is not None:
        parts.append(f"problem:{report.problem}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
