"""Dates, timestamps and durations, spelled one way everywhere."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Any

from researchstore.errors import InvalidInput

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


STAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"

#: A report's date when neither its pages nor its report.json give one. The
#: column is NOT NULL in stores of every version, so "no date" is stored as
#: the empty string; the tools answer null for it, except where seed 000's
#: schema requires a string (``research_get_chunk``), which gets "" there.
NO_DATE = ""


def utc_now() -> str:
    """Now, as ``2026-11-30T09:00:00Z``."""
    return stamp(datetime.now(UTC))


def stamp(moment: datetime) -> str:
    """``moment`` as ``2099-01-15T09:00:00Z`` (UTC, whole seconds)."""
    return moment.astimezone(UTC).strftime(STAMP_FORMAT)


def parse_stamp(text: str) -> datetime:
    """The moment a ``stamp`` wrote."""
    return datetime.strptime(text, STAMP_FORMAT).replace(tzinfo=UTC)


def stored_stamp(stored: object) -> datetime | None:
    """The moment a ``stamp`` kept in a store file wrote; None for any value it does not
    write (a store file may come from anyone)."""
    if not isinstance(stored, str) or len(stored) > 40:
        return None
    try:
        return parse_stamp(stored)
    except ValueError:
        return None


def is_iso_date(value: Any) -> bool:
    """True for a real calendar date written ``YYYY-MM-DD``."""
    if not isinstance(value, str) or not _ISO_DATE.match(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """``"90s"``, ``"15m"``, ``"1h30m"``, ``"2d"`` → seconds."""
    cleaned = text.strip().replace(" ", "")
    parts = _DURATION_PART.findall(cleaned)
    if not cleaned or "".join(f"{n}{u}" for n, u in parts).lower() != cleaned.lower():
        raise InvalidInput(
            f"not a duration: {text!r} (use e.g. 90s, 15m, 1h, 1h30m, 2d)", field="every"
        )
    seconds = sum(float(number) * _UNIT_SECONDS[unit.lower()] for number, unit in parts)
    if seconds <= 0:
        raise InvalidInput("a duration must be more than zero", field="every")
    return seconds
