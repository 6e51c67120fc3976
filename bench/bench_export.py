"""Export of a big store: rows/s and peak memory, against a bare SELECT of the same rows.

    python bench/bench_export.py [--chunks 100000] [--workdir DIR] [--tries 3]

Builds (or, with ``--workdir``, reuses) the synthetic corpus of
``bench_core.py`` and a store of it, then runs, each in a fresh child
process so that each peak is its own, one after the other ``--tries`` times:

- **bare**: the export's own query (``export.ROWS_SQL``) on a read-only
  connection set up as the store's reader is (page cache, mmap), its rows
  fetched 1,000 at a time as plain tuples and dropped: the floor, what
  reading the rows costs;
- **jsonl**: ``researchstore export`` as the command runs it
  (``export.export_store`` into a file beside the store);
- **parquet**: the same as Parquet, when pyarrow is installed;
- once, **fetchall**: the same query's rows all held at once, for scale:
  what an export that read the store before writing would hold.

Memory is the growth of the peak RSS (``VmHWM``) over the RSS once the
store is open (the mapped store file's pages count there), and of private
(anonymous) memory, sampled, with its peak in each quarter of the run (flat
when memory is bounded by a batch). The store file is read once beforehand, so
each try reads it from the page cache. Nothing here is part of the test suite.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_core import RssSampler, ensure_corpus, log, proc_status, wait_for_quiet

MODES = ("bare", "jsonl", "parquet")
#: Seconds between RSS samples: a bare read of 100,000 chunks takes half a second.
SAMPLE_S = 0.02


def child(mode: str, db: Path, out: Path) -> dict[str, Any]:
    """One measurement in this (fresh) process."""
    from researchstore.export import ROWS_SQL, export_store
    from researchstore.storage.db import connect
    from researchstore.store import READER_CACHE_KIB, Store

    if mode in ("bare", "fetchall"):
        # Set up as the store's own read connection is (page cache, mmap).
        conn = connect(db, cache_kib=READER_CACHE_KIB, read_only=True)
        conn.row_factory = None
        conn.execute("SELECT 1").fetchone()  # the connection is open, as a store's would be
        gc.collect()
        baseline = proc_status()
        with RssSampler(SAMPLE_S) as sampler:
            started = time.perf_counter()
            cursor = conn.execute(ROWS_SQL.format(where=""))
            rows = 0
            if mode == "fetchall":
                held = cursor.fetchall()
                rows = len(held)
            else:
                while batch := cursor.fetchmany(1_000):
                    rows += len(batch)
            seconds = time.perf_counter() - started
        written = 0
        conn.close()
    else:
        if mode == "parquet":
            import pyarrow.parquet  # noqa: F401  # its import is no part of the export's memory
        store = Store(db, open_indexes=False, progress=False)
        with store.reading() as conn:  # the reader connection is open before the baseline
            conn.execute("SELECT 1").fetchone()
        gc.collect()
        baseline = proc_status()
        with RssSampler(SAMPLE_S) as sampler:
            started = time.perf_counter()
            summary = export_store(store, out, output_format=mode, progress=False)
            seconds = time.perf_counter() - started
        rows = summary.chunks
        written = out.stat().st_size
        out.unlink()
        store.close()
    final = proc_status()
    return {
        "mode": mode,
        "rows": rows,
        "seconds": seconds,
        "rows_per_s": rows / seconds,
        "written_mib": round(written / 2**20, 1),
        "peak_growth_mib": round((final["VmHWM"] - baseline["VmRSS"]) / 1024, 1),
        **sampler.summary(baseline),
        "private_by_quarter_mib": private_by_quarter(sampler, baseline),
    }


def private_by_quarter(sampler: RssSampler, baseline: dict[str, int]) -> list[float]:
    """The peak growth of anonymous memory in each quarter of the run (flat: bounded)."""
    end = sampler.samples[-1][0] if sampler.samples else 0.0
    quarters = []
    for index in range(4):
        window = [
            anon for t, _, anon in sampler.samples if index * end / 4 <= t <= (index + 1) * end / 4
        ]
        if window:
            quarters.append(round((max(window) - baseline.get("RssAnon", 0)) / 1024, 1))
    return quarters


def run_child(mode: str, db: Path, out: Path) -> dict[str, Any]:
    import subprocess

    command = [sys.executable, __file__, "--_child", mode, "--_db", str(db), "--_out", str(out)]
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0:
        sys.stderr.write(completed.stdout + completed.stderr)
        raise SystemExit(f"child {mode} failed")
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def ensure_store(workdir: Path, chunks: int, seed: int) -> tuple[Path, int]:
    from researchstore import Store

    corpus, _ = ensure_corpus(workdir, chunks, seed)
    db = workdir / f"export-{chunks}.db"
    with Store(db, progress=False) as store:
        with store.reading() as conn:
            count = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        if not count:
            log(f"ingesting {corpus} into {db} (not timed)")
            store.ingest(corpus, name="bench")
            with store.reading() as conn:
                count = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    return db, count


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="about how many chunks")
    parser.add_argument("--workdir", type=Path, help="keep corpus and store here (reusable)")
    parser.add_argument("--keep", action="store_true", help="keep the temp workdir afterwards")
    parser.add_argument("--tries", type=int, default=3, help="runs of each mode, in turn")
    parser.add_argument("--seed", type=int, default=20_260_314)
    parser.add_argument(
        "--quiet-wait", type=float, default=60.0, help="wait up to this long for idle CPUs first"
    )
    parser.add_argument("--_child", choices=(*MODES, "fetchall"), help=argparse.SUPPRESS)
    parser.add_argument("--_db", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--_out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._child:
        print(json.dumps(child(args._child, args._db, args._out)))
        return 0

    temporary = args.workdir is None
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="rs-bench-export-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        measure(args, workdir)
    finally:
        if temporary and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"workdir kept: {workdir}")
    return 0


def measure(args: argparse.Namespace, workdir: Path) -> None:
    db, count = ensure_store(workdir, args.chunks, args.seed)
    size = db.stat().st_size
    log(f"store: {db} ({count:,} chunks, {size / 2**20:.0f} MiB)")
    with open(db, "rb") as handle:  # into the page cache: every try reads it from there
        while handle.read(1 << 24):
            pass
    try:
        import pyarrow  # noqa: F401

        modes = MODES
    except ImportError:
        log("pyarrow is not installed: no Parquet (pip install pyarrow)")
        modes = MODES[:2]
    if args.quiet_wait:
        wait_for_quiet(args.quiet_wait)
    out = workdir / "export.out"
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for attempt in range(args.tries):
        for mode in modes:
            result = run_child(mode, db, out)
            results[mode].append(result)
            log(
                f"  try {attempt + 1} {mode:<8} {result['rows_per_s']:>9,.0f} rows/s  "
                f"peak RSS +{result['peak_growth_mib']} MiB, private "
                f"+{result.get('anon_peak_mib', 0.0)} MiB"
            )
    held = run_child("fetchall", db, out)

    bare = statistics.median(r["rows_per_s"] for r in results["bare"])
    print(
        f"\nexport of {count:,} chunks ({size / 2**20:.0f} MiB store), median of {args.tries} "
        "tries, each in a fresh process"
    )
    header = ("mode", "rows/s", "vs bare", "seconds", "peak RSS", "private", "written")
    print("{:<9} {:>10} {:>8} {:>8} {:>10} {:>10} {:>9}  {}".format(*header, "private by quarter"))
    for mode in modes:
        print_row(mode, results[mode], bare)
    print_row("fetchall", [held], bare)
    print(
        "peak RSS: growth of VmHWM over the RSS once the store is open (the store file's pages\n"
        "that SQLite maps count there: they are the page cache's, shared and dropped at will);\n"
        "private: the peak growth of anonymous memory (RssAnon, sampled every 20 ms), what the\n"
        "process holds itself, and its peak in each quarter of the run (the same from the\n"
        "second quarter on when memory is bounded). fetchall: every row held at once, for scale."
    )


def print_row(mode: str, runs: list[dict[str, Any]], bare: float) -> None:
    rows_per_s = statistics.median(r["rows_per_s"] for r in runs)
    seconds = statistics.median(r["seconds"] for r in runs)
    peak = max(r["peak_growth_mib"] for r in runs)
    private = max(r.get("anon_peak_mib", 0.0) for r in runs)
    quarters = max((r["private_by_quarter_mib"] for r in runs), key=max)
    written = runs[0]["written_mib"]
    print(
        f"{mode:<9} {rows_per_s:>10,.0f} {rows_per_s / bare:>7.2f}x {seconds:>8.2f} "
        f"{peak:>+6.1f} MiB {private:>+6.1f} MiB {f'{written} MiB' if written else '-':>9}  "
        + " ".join(f"{quarter:+.1f}" for quarter in quarters)
    )


if __name__ == "__main__":
    os.environ.setdefault("RESEARCHSTORE_EMBED", "off")
    sys.exit(main())
