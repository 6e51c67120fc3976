"""Dates and timestamps, spelled one way everywhere."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Any

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def utc_now() -> str:
    """Now, as ``2026-11-30T09:00:00Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_iso_date(value: Any) -> bool:
    """True for a real calendar date written ``YYYY-MM-DD``."""
    if not isinstance(value, str) or not _ISO_DATE.match(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True
