"""Render time of every web page on a big store: p50 and p99 per page, against 50 ms.

    python bench/bench_web.py [--chunks 100000] [--workdir DIR] [--requests 200]

Builds (or, with ``--workdir``, reuses) the synthetic corpus of
``bench_core.py`` and a store of it, then asks each page in process through
Starlette's test client (the whole app: routing, tool calls, templates;
no sockets): home, search (page 1 and 3), document, chunk (its 303 to
the document), reports (a source, a folder), report, and the JSON forms.
Each page is asked ``--requests`` times over sampled ids and queries; the
first request of each page is timed on its own (the home page's overview
is read then, and kept until the store changes).
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_core import ensure_corpus, log, make_queries, percentile, sample_ids

from researchstore import Store
from researchstore.web import web_app

TARGET_MS = 50.0


def folders(db: Path, count: int, seed: int) -> list[tuple[str, str]]:
    """Sampled (source, folder path) pairs of the store's folders."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = conn.execute(
        "SELECT s.name, f.path FROM folders f JOIN sources s ON s.id = f.source_id"
    ).fetchall()
    conn.close()
    rng = random.Random(seed)
    return [rows[rng.randrange(len(rows))] for _ in range(count)]


def time_page(client: Any, urls: list[str], expected: int) -> dict[str, float]:
    first = None
    times = []
    for url in urls:
        started = time.perf_counter()
        response = client.get(url, follow_redirects=False)
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != expected:
            raise SystemExit(f"{url}: HTTP {response.status_code}, not {expected}")
        if first is None:
            first = elapsed
        else:
            times.append(elapsed)
    times.sort()
    return {"first": first or 0.0, "p50": percentile(times, 50), "p99": percentile(times, 99)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="about how many chunks")
    parser.add_argument("--workdir", type=Path, help="keep corpus and store here (reusable)")
    parser.add_argument("--requests", type=int, default=200, help="requests per page")
    parser.add_argument("--seed", type=int, default=20_260_314)
    args = parser.parse_args()
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="rs-bench-web-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    corpus, _ = ensure_corpus(workdir, args.chunks, args.seed)
    db = workdir / f"web-{args.chunks}.db"
    with Store(db, progress=False) as store:
        with store.reading() as conn:
            chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        if not chunks:
            log(f"ingesting {corpus} into {db} (not timed)")
            store.ingest(corpus, name="bench")
            with store.reading() as conn:
                chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    n = args.requests
    ids = sample_ids(db, n, args.seed)
    queries = [query["query"] for query in make_queries(args.seed, n)]
    places = folders(db, n, args.seed)
    pages: dict[str, tuple[Callable[[int], str], int]] = {
        "home": (lambda i: "/", 200),
        "home.json": (lambda i: "/index.json", 200),
        "search": (lambda i: f"/search?q={queries[i]}", 200),
        "search page 3": (lambda i: f"/search?q={queries[i]}&page=3", 200),
        "search.json": (lambda i: f"/search.json?q={queries[i]}", 200),
        "document": (lambda i: f"/document/{ids['documents'][i]}", 200),
        "document.json": (lambda i: f"/document/{ids['documents'][i]}.json", 200),
        "chunk (303)": (lambda i: f"/chunk/{ids['chunks'][i]}", 303),
        "chunk.json": (lambda i: f"/chunk/{ids['chunks'][i]}.json", 200),
        "reports (source)": (lambda i: "/reports?source=bench", 200),
        "reports (folder)": (
            lambda i: f"/reports?source={places[i][0]}&folder={places[i][1]}",
            200,
        ),
        "report": (lambda i: f"/report/{ids['reports'][i]}", 200),
        "report.json": (lambda i: f"/report/{ids['reports'][i]}.json", 200),
    }
    from starlette.testclient import TestClient

    results = {}
    with Store(db, progress=False) as store, TestClient(web_app(store)) as client:
        client.base_url = "http://127.0.0.1"  # type: ignore[assignment]
        for name, (url, expected) in pages.items():
            results[name] = time_page(client, [url(i) for i in range(n)], expected)
    print(f"\nweb pages at {chunks:,} chunks, {n} requests each (ms; target p99 <= {TARGET_MS})")
    print(f"{'page':<18} {'first':>8} {'p50':>8} {'p99':>8}  verdict")
    failed = False
    for name, timing in results.items():
        verdict = "PASS" if timing["p99"] <= TARGET_MS else "FAIL"
        failed |= verdict == "FAIL"
        print(
            f"{name:<18} {timing['first']:>8.1f} {timing['p50']:>8.1f} {timing['p99']:>8.1f}  "
            f"{verdict}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
