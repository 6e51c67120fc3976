"""Prepare one file (parse and chunk) and say what it cost.

``python tests/programs/page_cost.py FILE`` reads FILE, notes the peak
resident memory (``VmHWM``), parses and chunks it as an ingest run does
(``prepare.prepare_document``), and prints JSON: ``{"bytes", "growth",
"seconds", "status", "chunks", "chars"}``, ``growth`` being how far the peak
rose while preparing, in bytes, and ``chars`` the characters its chunks hold.
A process of its own, so nothing else a test run holds counts.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from researchstore.ingest.prepare import prepare_document


def peak_resident_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def main(argv: list[str]) -> None:
    path = Path(argv[0]).resolve()
    size = path.stat().st_size
    # Warm up on a small file of the same kind: imports, the analyzers,
    # selectolax, outside the measure.
    with tempfile.TemporaryDirectory() as folder:
        small = Path(folder) / f"small{path.suffix}"
        small.write_bytes(b"<p>A first sentence. And a second one.</p>")
        prepare_document(small.parent, small.name, 256)
    before = peak_resident_bytes()
    started = time.perf_counter()
    prepared = prepare_document(path.parent, path.name, 256)
    seconds = time.perf_counter() - started
    growth = peak_resident_bytes() - before
    print(
        json.dumps(
            {
                "bytes": size,
                "growth": growth,
                "seconds": round(seconds, 3),
                "status": prepared.status,
                "chunks": len(prepared.drafts),
                "chars": sum(len(draft.text) for draft in prepared.drafts),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
