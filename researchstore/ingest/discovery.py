"""Find the reports of a source on disk, and tell cheaply whether they changed.

A report is a directory holding ``report.json`` (with its document files,
at any depth) or a single supported file; other directories are folders.
Hidden entries are ignored on purpose; every other file becomes a document
or is listed as passed over, with the reason.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
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


def discover(root: Path) -> tuple[list[ReportSource], list[dict[str, Any]]]:
    """Every report under ``root`` and the files that were passed over (and why).

    Hidden entries (names starting with ".") are ignored on purpose; every
    other file becomes a document or is listed as passed over.
    """
    reports: list[ReportSource] = []
    passed_over: list[dict[str, Any]] = []
    if (root / REPORT_FILE).is_file():
        passed_over.append(
            _passed_over(
                REPORT_FILE,
                "a report.json at the source root is ignored: a report is a "
                "directory inside the source",
            )
        )
    stack = [""]
    while stack:
        relative = stack.pop()
        directory = root / relative if relative else root
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        subdirs = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = f"{relative}/{entry.name}" if relative else entry.name
            link_problem = _link_problem(entry)
            if link_problem:
                passed_over.append(_passed_over(path, link_problem))
            elif entry.is_dir():
                subdirs.append(path)
            elif not entry.is_file():
                passed_over.append(_passed_over(path, "not a regular file"))
            elif Path(entry.name).suffix.lower() in SUPPORTED_SUFFIXES:
                reports.append(ReportSource(path, relative, False, [path]))
            elif not (entry.name == REPORT_FILE and relative):
                passed_over.append(_passed_over(path, "unsupported file type"))
        for path in reversed(subdirs):
            if (root / path / REPORT_FILE).is_file():
                files, skipped = _report_files(root, path)
                reports.append(ReportSource(path, relative, True, files))
                passed_over.extend(skipped)
            else:
                stack.append(path)
    reports.sort(key=lambda report: report.key)
    return reports, passed_over


def discover_keys(
    root: Path, keys: Sequence[str]
) -> tuple[list[ReportSource], list[dict[str, Any]]]:
    """The reports named by ``keys`` (paths relative to ``root``) that exist."""
    reports: list[ReportSource] = []
    passed_over: list[dict[str, Any]] = []
    for key in sorted(set(keys)):
        key = key.strip("/")
        parts = key.split("/")
        if not key or any(part in ("", ".", "..") or part.startswith(".") for part in parts):
            passed_over.append(_passed_over(key or "/", "not a report path inside the source"))
            continue
        path = root / key
        folder = key.rpartition("/")[0]
        if (path / REPORT_FILE).is_file():
            files, skipped = _report_files(root, key)
            reports.append(ReportSource(key, folder, True, files))
            passed_over.extend(skipped)
        elif path.is_file() and path.suffix.lower() in SUPPORTED_SUFFIXES:
            reports.append(ReportSource(key, folder, False, [key]))
        elif path.exists():
            passed_over.append(_passed_over(key, "neither a report directory nor a supported file"))
    return reports, passed_over


def _link_problem(entry: os.DirEntry[str]) -> str | None:
    """Why a symbolic link is not followed, or None for anything else."""
    if not entry.is_symlink():
        return None
    if not os.path.exists(entry.path):
        return "broken symbolic link"
    if entry.is_dir():
        return "symbolic link to a directory is not followed (it could loop)"
    return None  # a link to a file is read like the file


def _passed_over(path: str, reason: str) -> dict[str, Any]:
    return {"path": path, "status": "skipped", "reason": reason, "details": []}


def _report_files(root: Path, report_key: str) -> tuple[list[str], list[dict[str, Any]]]:
    # Plain strings, not pathlib: this runs for every report on every re-ingest.
    files: list[str] = []
    skipped: list[dict[str, Any]] = []
    base = os.path.join(root, report_key)
    stack = [(base, report_key)]
    while stack:
        directory, relative = stack.pop()
        subdirs = []
        for entry in sorted(os.scandir(directory), key=lambda entry: entry.name):
            name = entry.name
            if name.startswith("."):
                continue
            path = f"{relative}/{name}"
            link_problem = _link_problem(entry)
            if link_problem:
                skipped.append(_passed_over(path, link_problem))
            elif entry.is_dir():
                subdirs.append((entry.path, path))
            elif not entry.is_file():
                skipped.append(_passed_over(path, "not a regular file"))
            elif os.path.splitext(name)[1].lower() in SUPPORTED_SUFFIXES:
                files.append(path)
            elif not (name == REPORT_FILE and relative == report_key):
                skipped.append(_passed_over(path, "unsupported file type"))
        stack.extend(reversed(subdirs))
    files.sort()
    return files, skipped


def report_signature(root: Path, report: ReportSource) -> str:
    """Cheap change detection: names, sizes and modification times."""
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
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
