"""UUIDs: time-ordered new ones (version 7 layout), and the one spelling of any.

New ids sort by creation time, so inserting a million chunks appends to the
end of the ``chunk_id`` index instead of splitting random B-tree pages.
(The ``uuid`` module is not imported: reading ids is on every call's path.)
"""

from __future__ import annotations

import os
import string
import time

_HEX = frozenset(string.hexdigits)

_last_ms = 0
_counter = 0


def new_id() -> str:
    """Return a new UUIDv7 string, monotonic within this process."""
    return new_ids(1)[0]


def new_ids(count: int) -> list[str]:
    """``count`` new UUIDv7 strings, in order, their random bits read at once."""
    global _last_ms, _counter
    randomness = os.urandom(8 * count)
    ids = []
    for at in range(0, 8 * count, 8):
        now_ms = time.time_ns() // 1_000_000
        if now_ms <= _last_ms:
            _counter += 1
            if _counter > 0xFFF:  # 12-bit sequence exhausted: borrow the next millisecond
                _last_ms += 1
                _counter = 0
            now_ms = _last_ms
        else:
            _last_ms = now_ms
            _counter = 0
        rand = int.from_bytes(randomness[at : at + 8], "big") & 0x3FFFFFFFFFFFFFFF
        value = (now_ms << 80) | (0x7 << 76) | (_counter << 64) | (0b10 << 62) | rand
        ids.append(_spelled(f"{value:032x}"))
    return ids


def canonical_uuid(value: str) -> str | None:
    """``value`` as a lower-case hyphenated UUID, or None if it is not one.

    Accepts what ``uuid.UUID(value)`` accepts: 32 hex digits, with hyphens
    anywhere, in braces, or after ``urn:uuid:``.
    """
    digits = value.replace("urn:", "").replace("uuid:", "").strip("{}").replace("-", "")
    if len(digits) != 32 or not _HEX.issuperset(digits):
        return None
    return _spelled(digits.lower())


def _spelled(digits: str) -> str:
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"
