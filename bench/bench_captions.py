#!/usr/bin/env python
"""Caption parsing at scale: time and peak memory grow linearly with the file.

    python bench/bench_captions.py [--megabytes 6 60]

For each size and each format (SubRip, WebVTT), writes a caption file of
ordinary cues (two lines of text, now and then a dash or an accent) into a
temporary folder, then parses it in a fresh child process that reports the
parse's wall time and how far its peak resident memory (``VmHWM``) rose,
as a multiple of the file's size. Rows for growing sizes show whether time
per megabyte stays flat (linear) and memory stays a bounded multiple.

It prints numbers and asserts nothing: it is never part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys, time
from pathlib import Path
from researchstore.ingest.captions import parse_srt, parse_vtt

def peak():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0

path = Path(sys.argv[1])
data = path.read_bytes()
before = peak()
started = time.perf_counter()
doc = (parse_vtt if path.suffix == ".vtt" else parse_srt)(data)
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "growth": peak() - before, "segments": len(doc.segments)}))
"""

#: Bytes one generated cue takes, about (to size a file before writing it).
CUE_BYTES = 100


def write_captions(path: Path, megabytes: float) -> int:
    """Write a caption file of about ``megabytes``; return its size in bytes."""
    vtt = path.suffix == ".vtt"
    mark = "." if vtt else ","
    cues = int(megabytes * 1_000_000 / CUE_BYTES)
    with path.open("w", encoding="utf-8") as out:
        if vtt:
            out.write("WEBVTT\n\n")
        for number in range(cues):
            stamps = [
                f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}"
                f"{mark}{ms % 1000:03d}"
                for ms in (number * 2000, number * 2000 + 1900)
            ]
            if not vtt:
                out.write(f"{number + 1}\n")
            dash = " —" if number % 10 == 0 else ","
            out.write(
                f"{stamps[0]} --> {stamps[1]}\nThe speaker says words number {number} here\n"
                f"and goes on{dash} café {number % 97}\n\n"
            )
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=float, nargs="+", default=[6, 60])
    args = parser.parse_args()
    print(f"{'file':<10} {'MB':>7} {'seconds':>8} {'s/MB':>6} {'peak / size':>12} {'segments':>9}")
    with tempfile.TemporaryDirectory() as folder:
        for megabytes in args.megabytes:
            for suffix in (".srt", ".vtt"):
                path = Path(folder) / f"captions{suffix}"
                size = write_captions(path, megabytes)
                done = subprocess.run(
                    [sys.executable, "-c", CHILD, str(path)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                measured = json.loads(done.stdout)
                print(
                    f"{path.name:<10} {size / 1e6:>7.1f} {measured['seconds']:>8.1f} "
                    f"{measured['seconds'] / (size / 1e6):>6.2f} "
                    f"{measured['growth'] / size:>11.1f}x {measured['segments']:>9}"
                )
                path.unlink()


if __name__ == "__main__":
    main()
