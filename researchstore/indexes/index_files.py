"""The files of a Tantivy index folder, read without Tantivy: what is there, and whole.

Tantivy takes a folder without ``meta.json`` for a new, empty index, reads
a segment's files only when a search needs them, and deletes every file its
``.managed.json`` lists that it no longer uses, wherever the name leads. So
a folder is looked at here before Tantivy opens it (``index.SearchIndex.open``):
the files ``meta.json`` lists must be there and not empty, the managed list
must name plain files of the folder; ``checksum_problem`` reads a file back
against the checksum in its footer (``researchstore check``). A folder that
fails is damaged (``IndexDamaged``) and rebuilt from SQLite.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from pathlib import Path

from researchstore.storage.derived import IndexDamaged

META = "meta.json"
#: Tantivy's list of the files it manages (and garbage-collects).
MANAGED = ".managed.json"
#: A plain name in the folder: what Tantivy lists there (no ``/``, not ``.`` or ``..``).
_MANAGED_NAME = re.compile(r"(?!\.\.?\Z)[A-Za-z0-9._-]{1,255}")
#: The files Tantivy writes for every segment (``<segment>.<ext>``); a segment
#: with deletes also has ``<segment>.<opstamp>.del``.
SEGMENT_FILES = ("idx", "pos", "term", "store", "fast", "fieldnorm")
#: The end of every file Tantivy writes: a JSON footer, its length, this number.
_FOOTER_MAGIC = 1337
_CHECKSUM_BLOCK = 1 << 20
#: A segment's id as its files are named: a UUID's 32 hex digits.
_SEGMENT_ID = re.compile(r"[0-9a-f]{32}")


def segment_files(path: Path) -> dict[str, list[Path]]:
    """Every file ``meta.json`` says each segment has, by segment id.

    Raises ``IndexDamaged`` when ``meta.json`` is missing or unreadable.
    """
    try:
        meta = json.loads((path / META).read_text())
        segments = meta["segments"]
        files = {}
        for segment in segments:
            name = str(segment["segment_id"]).replace("-", "")
            if not _SEGMENT_ID.fullmatch(name):
                # A file from elsewhere may say anything: a name, never a path.
                raise ValueError(f"segment id {name[:80]!r} is not one Tantivy writes")
            listed = [path / f"{name}.{ext}" for ext in SEGMENT_FILES]
            deletes = segment.get("deletes")
            if deletes:
                listed.append(path / f"{name}.{int(deletes['opstamp'])}.del")
            files[name] = listed
    except FileNotFoundError:
        raise IndexDamaged(f"{path}: {META} is missing") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise IndexDamaged(f"{path}: {META} cannot be read ({error})") from None
    return files


def foreign_managed_files(path: Path) -> list[str]:
    """The names in Tantivy's list of the files it manages (``.managed.json``) that
    are no plain name of a file in the folder.

    Tantivy deletes every listed file it no longer uses, wherever the name
    leads: a folder from elsewhere listing ``../../.bashrc`` had that file
    deleted at its first commit. Such a folder is rebuilt, never opened.
    """
    try:
        listed = json.loads((path / MANAGED).read_bytes())
    except FileNotFoundError:
        return []
    except (OSError, ValueError, RecursionError):
        return [f"{MANAGED} cannot be read"]  # Tantivy would refuse it too
    if not isinstance(listed, list):
        return [f"{MANAGED} is not a list of files"]
    foreign = [
        name for name in listed if not (isinstance(name, str) and _MANAGED_NAME.fullmatch(name))
    ]
    return [f"{MANAGED} names {str(name)[:80]!r}, no file of the index" for name in foreign[:3]]


def missing_files(path: Path) -> list[str]:
    """The files ``meta.json`` lists that are missing or empty (a cheap look, no reads)."""
    problems = []
    for files in segment_files(path).values():
        for file in files:
            try:
                size = file.stat().st_size
            except FileNotFoundError:
                problems.append(f"{file.name} is missing")
                continue
            if size == 0:
                problems.append(f"{file.name} is empty")
    return problems


def checksum_problem(file: Path) -> str | None:
    """Why ``file`` fails the checksum in its Tantivy footer, or None if it passes.

    The file is read once, a block at a time: memory stays flat however large.
    """
    try:
        with open(file, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size < 8:
                return f"{file.name} is truncated ({size} bytes)"
            handle.seek(size - 8)
            length, magic = struct.unpack("<II", handle.read(8))
            if magic != _FOOTER_MAGIC or length > size - 8:
                return f"{file.name} has no readable footer"
            body = size - 8 - length
            handle.seek(body)
            try:
                expected = int(json.loads(handle.read(length))["crc"])
            except (ValueError, KeyError, TypeError):
                return f"{file.name} has no readable footer"
            handle.seek(0)
            crc, left = 0, body
            while left:
                block = handle.read(min(left, _CHECKSUM_BLOCK))
                if not block:
                    return f"{file.name} is truncated"
                crc = zlib.crc32(block, crc)
                left -= len(block)
    except FileNotFoundError:
        return f"{file.name} is missing"
    if crc != expected:
        return f"{file.name} fails its checksum"
    return None
