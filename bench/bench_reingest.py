#!/usr/bin/env python
"""Re-ingest benchmark (SPEC §8): one modified report, and a run where nothing changed.

    python bench/bench_reingest.py [--chunks 10000 100000] [--reports 10000] [--workdir DIR]

For each ``--chunks`` size, a corpus of about that many chunks (bench_core's
report folders when ``bench/bench_core.py`` is there, else small text reports)
is generated and ingested once; neither is timed. Then, in-process on the
open store, the median of ``--runs`` runs of ``reingest(store)``:

1. nothing changed (the walk, the signature checks, the bookkeeping);
2. one report modified (a different report each run, a paragraph appended to
   one of its documents): the whole run, as the job would do it.

The second must stay under 100 ms and flat in store size; the difference
between the two is what replacing the report itself costs. A separate corpus
of ``--reports`` small reports (one chunk each) times a run with nothing
changed over that many reports (target ≤ 3 s). With ``--workdir`` corpora and
stores are kept and reused. Nothing here is part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:  # the project's corpus generator, when it is there
    import bench_core
except ImportError:  # pragma: no cover - bench_core is optional
    bench_core = None  # type: ignore[assignment]

from researchstore import Store
from researchstore.reingest import reingest

SOURCE_NAME = "bench"
STORE_NAME = "research.db"
MODIFIED_TARGET_MS = 100.0
UNCHANGED_TARGET_S = 3.0
#: "Flat in store size": the largest store may cost at most this much more.
FLAT_RATIO = 1.5
WORDS = (
    "research study survey data results analysis method sample students teachers school "
    "learning field season bees hives honey colony pollen flowers garden farmers crops yield "
    "rainfall drought river lake coast fishing harvest market price income household village "
    "region county report review evidence policy program training workshop interview lecture "
    "the of and to in a is that for it as with was on be by are this from at or an which"
).split()


def log(message: str) -> None:
    print(message, flush=True)


# -- corpora (never timed) ------------------------------------------------------


def write_small_reports(root: Path, count: int, words: int, seed: int) -> None:
    """``count`` report folders of one text file of ``words`` words each."""
    rng = random.Random(seed)
    for number in range(count):
        folder = root / f"group-{number // 100:04d}" / f"report-{number:06d}"
        folder.mkdir(parents=True)
        meta = {
            "title": f"Report {number}",
            "date": f"20{10 + number % 15}-0{1 + number % 9}-14",
            "tags": {"audience": rng.choice(("students", "public", "policy"))},
        }
        (folder / "report.json").write_text(json.dumps(meta))
        sentences = []
        for start in range(0, words, 15):
            sentence = rng.choices(WORDS, k=min(15, words - start))
            sentences.append(" ".join(sentence).capitalize() + ".")
        (folder / "notes.txt").write_text(f"Notes {number}\n\n" + " ".join(sentences) + "\n")


def chunk_corpus(workdir: Path, chunks: int, seed: int) -> tuple[Path, dict[str, Any]]:
    """bench_core's corpus of ~``chunks`` chunks, or small reports of ~8 chunks each."""
    if bench_core is not None:
        return bench_core.ensure_corpus(workdir, chunks, seed)
    return small_corpus(workdir, reports=max(1, chunks // 8), words=1_400, seed=seed)


def small_corpus(
    workdir: Path, *, reports: int, words: int, seed: int
) -> tuple[Path, dict[str, Any]]:
    corpus, marker = workdir / "corpus", workdir / "corpus.json"
    wanted = {"generator": "small", "reports": reports, "words": words, "seed": seed}
    if marker.exists() and corpus.is_dir() and json.loads(marker.read_text()) == wanted:
        log(f"corpus: reusing {corpus}")
        return corpus, wanted
    shutil.rmtree(corpus, ignore_errors=True)
    log(f"corpus: generating {reports:,} reports of {words} words in {corpus} (not timed)")
    write_small_reports(corpus, reports, words, seed)
    marker.write_text(json.dumps(wanted))
    return corpus, wanted


def open_ingested(workdir: Path, corpus: Path, corpus_info: dict[str, Any]) -> Store:
    """The store of this corpus, ingested once (reused when it matches the corpus)."""
    db, marker = workdir / STORE_NAME, workdir / "store.json"
    if not (db.exists() and marker.exists() and json.loads(marker.read_text()) == corpus_info):
        for path in workdir.glob(STORE_NAME + "*"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        log(f"store: ingesting {corpus} (not timed)")
        started = time.perf_counter()
        with Store(db, progress=False) as store:
            summary = store.ingest(corpus, name=SOURCE_NAME, progress=False)
        log(
            f"  {summary.new:,} reports, {summary.chunks:,} chunks in "
            f"{time.perf_counter() - started:.1f} s"
        )
        marker.write_text(json.dumps(corpus_info))
    store = Store(db, progress=False)
    reingest(store, progress=False)  # warm-up, and catch up with any earlier edits
    return store


def report_folders(corpus: Path) -> list[Path]:
    return sorted(path.parent for path in corpus.rglob("report.json"))


def append_paragraph(folder: Path, marker: str) -> None:
    """Change one document of the report: a paragraph more at its end."""
    documents = sorted(
        path for path in folder.rglob("*") if path.is_file() and path.name != "report.json"
    )
    document = documents[0]
    text = document.read_text()
    paragraph = f"Edit {marker}: the survey was repeated and the counts were checked again."
    if "</article>" in text:
        text = text.replace("</article>", f"<p>{paragraph}</p>\n</article>", 1)
    else:
        text = text.rstrip("\n") + f"\n\n{paragraph}\n"
    document.write_text(text)


# -- measurements -----------------------------------------------------------------


def timed_runs(
    store: Store,
    runs: int,
    before_each: Callable[[int], None] | None = None,
    check: Callable[[Any], None] | None = None,
    only: Callable[[int], list[str]] | None = None,
) -> list[float]:
    """Seconds of each ``reingest`` run (the edit before it is not timed)."""
    seconds = []
    for number in range(runs):
        if before_each is not None:
            before_each(number)
        started = time.perf_counter()
        keys = only(number) if only is not None else None
        (summary,) = reingest(store, only=keys, progress=False)
        seconds.append(time.perf_counter() - started)
        if check is not None:
            check(summary)
    return seconds


def expect(*, modified: int) -> Callable[[Any], None]:
    """A check that a run modified exactly ``modified`` reports and did nothing else."""

    def check(summary: Any) -> None:
        got = (summary.modified, summary.new, summary.removed, summary.failed)
        if got != (modified, 0, 0, 0):
            raise RuntimeError(
                f"expected {modified} modified and nothing else, got {got}: {summary.failures[:3]}"
            )

    return check


def store_counts(store: Store) -> tuple[int, int]:
    reports = store._conn.execute("SELECT count(*) FROM reports").fetchone()[0]
    chunks = store._conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    return reports, chunks


def quiet(max_wait: float) -> None:
    wait = getattr(bench_core, "wait_for_quiet", None)
    if wait is not None and max_wait > 0:
        wait(max_wait)


def bench_size(workdir: Path, chunks: int, args: argparse.Namespace) -> dict[str, Any]:
    log(f"\n== {chunks:,} chunks ==")
    corpus, info = chunk_corpus(workdir, chunks, args.seed)
    store = open_ingested(workdir, corpus, info)
    try:
        reports, stored_chunks = store_counts(store)
        log(f"store: {reports:,} reports, {stored_chunks:,} chunks")
        folders = report_folders(corpus)
        rng = random.Random(args.seed + chunks)
        picked = rng.sample(folders, min(args.runs, len(folders)))
        stamp = time.strftime("%Y%m%dT%H%M%S")

        quiet(args.quiet_wait)
        nothing = timed_runs(store, args.runs, check=expect(modified=0))
        quiet(args.quiet_wait)
        modified = timed_runs(
            store,
            len(picked),
            before_each=lambda number: append_paragraph(picked[number], f"{stamp}-{number}"),
            check=expect(modified=1),
        )
        quiet(args.quiet_wait)
        # The same edit, named: what a publishing hook would run
        # (researchstore reingest STORE --only PATH): no walk of the tree.
        targeted = timed_runs(
            store,
            len(picked),
            before_each=lambda number: append_paragraph(picked[number], f"{stamp}-t{number}"),
            check=expect(modified=1),
            only=lambda number: [picked[number].relative_to(corpus).as_posix()],
        )
    finally:
        store.close()
    result = {
        "chunks_asked": chunks,
        "reports": reports,
        "chunks": stored_chunks,
        "unchanged_ms": [round(s * 1000, 1) for s in nothing],
        "modified_ms": [round(s * 1000, 1) for s in modified],
        "unchanged_median_ms": statistics.median(nothing) * 1000,
        "modified_median_ms": statistics.median(modified) * 1000,
        "targeted_ms": [round(s * 1000, 1) for s in targeted],
        "targeted_median_ms": statistics.median(targeted) * 1000,
    }
    log(
        f"nothing changed:     median {result['unchanged_median_ms']:7.1f} ms  "
        f"{result['unchanged_ms']}"
    )
    log(
        f"one report modified: median {result['modified_median_ms']:7.1f} ms  "
        f"{result['modified_ms']}"
    )
    log(
        f"one report, --only:  median {result['targeted_median_ms']:7.1f} ms  "
        f"{result['targeted_ms']}"
    )
    return result


def bench_many_reports(workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    log(f"\n== {args.reports:,} small reports ==")
    corpus, info = small_corpus(workdir, reports=args.reports, words=150, seed=args.seed)
    store = open_ingested(workdir, corpus, info)
    try:
        reports, chunks = store_counts(store)
        log(f"store: {reports:,} reports, {chunks:,} chunks")
        quiet(args.quiet_wait)
        runs = max(3, args.runs // 2)
        seconds = timed_runs(store, runs, check=expect(modified=0))
    finally:
        store.close()
    log(
        f"nothing changed:     median {statistics.median(seconds):.2f} s  "
        f"{[round(s, 2) for s in seconds]}"
    )
    return {
        "reports": reports,
        "chunks": chunks,
        "seconds": seconds,
        "median_s": statistics.median(seconds),
    }


# -- the report ---------------------------------------------------------------------


def print_table(rows: list[tuple[str, str, str, str]]) -> None:
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    log("")
    for number, (metric, measured, target, result) in enumerate(rows):
        log(f"{metric:{widths[0]}}  {measured:>{widths[1]}}  {target:{widths[2]}}  {result}")
        if number == 0:
            log("-" * (sum(widths) + 12))


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--chunks",
        type=int,
        nargs="+",
        default=[10_000, 100_000],
        help="store sizes, about this many chunks each (default: 10000 100000)",
    )
    parser.add_argument(
        "--reports",
        type=int,
        default=10_000,
        help="small reports for the nothing-changed run (0: skip)",
    )
    parser.add_argument("--runs", type=int, default=7, help="timed runs per measurement")
    parser.add_argument("--workdir", type=Path, help="keep corpora and stores here (reusable)")
    parser.add_argument("--keep", action="store_true", help="keep the temp workdir afterwards")
    parser.add_argument("--seed", type=int, default=20_260_504)
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=60.0,
        help="wait up to this long for other processes to leave the CPUs "
        "idle before each measurement (needs bench_core; 0: do not wait)",
    )
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)

    temporary = args.workdir is None
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="rs-bench-reingest-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"sizes": [], "many_reports": None}
    try:
        for chunks in sorted(args.chunks):
            folder = workdir / f"reingest-{chunks}"
            folder.mkdir(exist_ok=True)
            results["sizes"].append(bench_size(folder, chunks, args))
        if args.reports:
            folder = workdir / f"reingest-reports-{args.reports}"
            folder.mkdir(exist_ok=True)
            results["many_reports"] = bench_many_reports(folder, args)
    finally:
        if temporary and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"workdir kept: {workdir}")

    rows = [("metric", "measured", "target", "result")]
    for size in results["sizes"]:
        where = f"{size['chunks']:,} chunks, {size['reports']:,} reports"
        rows.append(
            (
                f"one modified report ({where})",
                f"{size['modified_median_ms']:.1f} ms",
                f"<= {MODIFIED_TARGET_MS:.0f} ms",
                verdict(size["modified_median_ms"] <= MODIFIED_TARGET_MS),
            )
        )
        rows.append(
            (
                f"one modified report, --only ({where})",
                f"{size['targeted_median_ms']:.1f} ms",
                f"<= {MODIFIED_TARGET_MS:.0f} ms",
                verdict(size["targeted_median_ms"] <= MODIFIED_TARGET_MS),
            )
        )
        rows.append(
            (f"  nothing changed ({where})", f"{size['unchanged_median_ms']:.1f} ms", "-", "-")
        )
        rows.append(
            (
                "  so replacing the report itself",
                f"{size['modified_median_ms'] - size['unchanged_median_ms']:.1f} ms",
                "-",
                "-",
            )
        )
    if len(results["sizes"]) >= 2:
        small, large = results["sizes"][0], results["sizes"][-1]
        ratio = large["modified_median_ms"] / small["modified_median_ms"]
        targeted_ratio = large["targeted_median_ms"] / small["targeted_median_ms"]
        results["flat_ratio"] = ratio
        results["targeted_flat_ratio"] = targeted_ratio
        rows.append(
            (
                f"one modified report, {large['chunks']:,} vs {small['chunks']:,} chunks",
                f"{ratio:.2f}x",
                f"flat (<= {FLAT_RATIO}x)",
                verdict(ratio <= FLAT_RATIO),
            )
        )
        rows.append(
            (
                f"  the same with --only, {large['chunks']:,} vs {small['chunks']:,} chunks",
                f"{targeted_ratio:.2f}x",
                f"flat (<= {FLAT_RATIO}x)",
                verdict(targeted_ratio <= FLAT_RATIO),
            )
        )
    many = results["many_reports"]
    if many is not None:
        rows.append(
            (
                f"nothing changed ({many['reports']:,} reports)",
                f"{many['median_s']:.2f} s",
                f"<= {UNCHANGED_TARGET_S:.0f} s",
                verdict(many["median_s"] <= UNCHANGED_TARGET_S),
            )
        )
    print_table(rows)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
