#!/usr/bin/env python
"""Startup benchmark: what a one-shot ``researchstore`` command costs to start.

    python bench/bench_startup.py [--runs 20] [--imports 15]

Builds a small store from ``fixtures/source`` in a temporary folder (with
``researchstore ingest``), picks one chunk id, then times, as fresh
subprocesses taking turns in the same run:

1. ``python -c pass`` (the interpreter alone, the floor);
2. ``python -c "import researchstore"``;
3. ``researchstore --help``;
4. ``researchstore call STORE research_get_chunk '{"chunk_id": ...}'``.

It prints the median and p90 wall time and the median CPU time (user + system,
from ``getrusage(RUSAGE_CHILDREN)``) of each, the ratio of the one-shot call
to the bare interpreter (the target is 4x or less), and the slowest imports of
the one-shot call from ``python -X importtime``: what to cut next.

It prints numbers and asserts nothing: it is never part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_SOURCE = ROOT / "fixtures" / "source"
TARGET_RATIO = 4.0


def researchstore_command() -> list[str]:
    """The console script beside this interpreter, or ``python -m researchstore``."""
    script = Path(sys.executable).parent / "researchstore"
    if script.is_file():
        return [str(script)]
    found = shutil.which("researchstore")
    return [found] if found else [sys.executable, "-m", "researchstore"]


@dataclass
class Timings:
    label: str
    argv: list[str]
    wall_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)

    def run_once(self) -> None:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(self.argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        self.wall_ms.append(wall * 1000)
        self.cpu_ms.append(cpu * 1000)

    @property
    def median(self) -> float:
        return statistics.median(self.wall_ms)

    @property
    def p90(self) -> float:
        return statistics.quantiles(self.wall_ms, n=10, method="inclusive")[-1]


def build_store(workdir: Path, researchstore: list[str]) -> tuple[Path, str]:
    """A store of ``fixtures/source`` and the id of its first chunk."""
    db = workdir / "startup.db"
    subprocess.run(
        [*researchstore, "ingest", str(db), str(FIXTURE_SOURCE), "--json"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT chunk_id FROM chunks WHERE status = 'ok' ORDER BY rowid LIMIT 1"
        ).fetchone()
    if row is None:
        raise SystemExit(f"no chunk in {db}: is {FIXTURE_SOURCE} empty?")
    return db, row[0]


@dataclass
class Imported:
    module: str
    depth: int
    self_us: int
    cumulative_us: int


def slowest_imports(argv: list[str], count: int) -> list[Imported]:
    """The ``count`` imports of ``argv`` with the largest cumulative time."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    imported = []
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = line.removeprefix("import time:").split("|")
        depth = (len(name) - len(name.lstrip())) // 2
        imported.append(Imported(name.strip(), depth, int(self_us), int(cumulative_us)))
    return sorted(imported, key=lambda entry: entry.cumulative_us, reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="Runs of each command.")
    parser.add_argument("--imports", type=int, default=15, help="Slowest imports to list.")
    options = parser.parse_args()

    researchstore = researchstore_command()
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="rs-startup-") as workdir:
        db, chunk_id = build_store(Path(workdir), researchstore)
        call_argv = [
            *researchstore,
            "call",
            str(db),
            "research_get_chunk",
            json.dumps({"chunk_id": chunk_id}),
        ]
        timings = [
            Timings("python -c pass", [python, "-c", "pass"]),
            Timings('python -c "import researchstore"', [python, "-c", "import researchstore"]),
            Timings("researchstore --help", [*researchstore, "--help"]),
            Timings("researchstore call (one shot)", call_argv),
        ]
        for timing in timings:  # warm the page cache and the .pyc files
            timing.run_once()
            timing.wall_ms.clear()
            timing.cpu_ms.clear()
        for _ in range(options.runs):  # taking turns, so drift hits each alike
            for timing in timings:
                timing.run_once()
        if researchstore[0] == sys.executable:
            import_argv = researchstore[1:] + call_argv[len(researchstore) :]
        else:  # the console script is a Python file
            import_argv = call_argv
        imports = slowest_imports(import_argv, options.imports)

    print(
        f"researchstore startup: {options.runs} runs each; Python {platform.python_version()} "
        f"on {platform.machine()}, {os.cpu_count()} CPUs"
    )
    print(f"command: {' '.join(researchstore)}")
    print()
    width = max(len(timing.label) for timing in timings)
    print(f"{'':<{width}}  {'wall median':>11}  {'wall p90':>9}  {'CPU median':>10}")
    for timing in timings:
        print(
            f"{timing.label:<{width}}  {timing.median:>8.1f} ms  {timing.p90:>6.1f} ms  "
            f"{statistics.median(timing.cpu_ms):>7.1f} ms"
        )
    ratio = timings[-1].median / timings[0].median
    verdict = "within" if ratio <= TARGET_RATIO else "over"
    print()
    print(
        f"one-shot call / python -c pass: {ratio:.1f}x (median wall; "
        f"target <= {TARGET_RATIO:.0f}x: {verdict})"
    )
    print()
    print("slowest imports of the one-shot call (python -X importtime, by cumulative time):")
    print(f"  {'cumulative':>10}  {'self':>8}  module (indented by nesting)")
    for entry in imports:
        print(
            f"  {entry.cumulative_us / 1000:>7.1f} ms  {entry.self_us / 1000:>5.1f} ms  "
            f"{'  ' * entry.depth}{entry.module}"
        )


if __name__ == "__main__":
    main()
