"""Parse one caption file and say how far the process's peak memory rose.

``python tests/programs/caption_memory.py FILE`` reads FILE, notes the peak
resident memory (``VmHWM``), parses it as its suffix says, and prints JSON:
``{"bytes", "growth", "segments", "status"}``, ``growth`` being how far the
peak rose while parsing, in bytes. A process of its own, so nothing else a
test run holds counts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from researchstore.ingest.captions import parse_srt, parse_vtt


def peak_resident_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def main(argv: list[str]) -> None:
    path = Path(argv[0])
    data = path.read_bytes()
    parse = parse_vtt if path.suffix == ".vtt" else parse_srt
    before = peak_resident_bytes()
    doc = parse(data)
    growth = peak_resident_bytes() - before
    print(
        json.dumps(
            {
                "bytes": len(data),
                "growth": growth,
                "segments": len(doc.segments),
                "status": doc.status,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
