"""Time-ordered UUIDs (version 7 layout) for documents and chunks.

New ids sort by creation time, so inserting a million chunks appends to the
end of the ``chunk_id`` index instead of splitting random B-tree pages.
"""

from __future__ import annotations

import os
import time
import uuid

_last_ms = 0
_counter = 0


def new_id() -> str:
    """Return a new UUIDv7 string, monotonic within this process."""
    global _last_ms, _counter
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
    rand = int.from_bytes(os.urandom(8), "big") & 0x3FFFFFFFFFFFFFFF
    value = (now_ms << 80) | (0x7 << 76) | (_counter << 64) | (0b10 << 62) | rand
    return str(uuid.UUID(int=value))
