"""Values read back from a store file: as researchstore wrote them, or not at all.

A store file may come from anyone, so a column researchstore fills with JSON
or a number can hold any value SQLite can (text that is not JSON, JSON of
another shape, a blob, a number past every limit). Each reader here returns
the value in the shape researchstore writes, or None for anything else; the
caller says what None means where it reads (no tags, no heading, no rights).
Nothing here raises for a stored value.
"""

from __future__ import annotations

import json
from typing import Any

#: The largest number SQLite keeps as an integer.
SQLITE_INT_MAX = 2**63 - 1


def json_default(value: object) -> str:
    """For a JSON encoder's ``default``: bytes read where researchstore writes text or a
    number (SQLite keeps any type in any column), as text, undecodable bytes replaced;
    anything else is no JSON (``TypeError``, as the encoder raises it)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def json_value(stored: object) -> Any:
    """``stored`` decoded as JSON; None where it is not JSON text (or is JSON's null)."""
    if not isinstance(stored, str | bytes):
        return None
    try:
        return json.loads(stored)
    except (ValueError, RecursionError):  # RecursionError: nested past the stack
        return None


def json_object(stored: object) -> dict[str, Any] | None:
    """``stored`` as a JSON object, or None."""
    decoded = json_value(stored)
    return decoded if isinstance(decoded, dict) else None


def string_list(stored: object) -> list[str] | None:
    """``stored`` as a JSON list of strings, or None (a list holding anything else too)."""
    decoded = json_value(stored)
    if isinstance(decoded, list) and all(isinstance(item, str) for item in decoded):
        return decoded
    return None


def whole_number(stored: object) -> int | None:
    """``stored`` as researchstore writes a count or a sequence number (decimal digits,
    0 to SQLite's largest integer), or None."""
    if isinstance(stored, int) and not isinstance(stored, bool):
        number = stored
    elif isinstance(stored, str) and stored.isascii() and stored.isdigit() and len(stored) <= 19:
        number = int(stored)
    else:
        return None
    return number if number <= SQLITE_INT_MAX and number >= 0 else None
