#!/usr/bin/env python
"""Warm top-10 search against its peers, on the same chunk texts, in one run.

    .venv/bin/python bench/bench_search_peers.py [--corpus scifact,synthetic]
        [--chunks 100000] [--queries 300] [--workdir DIR] [--seed N] [--store DB]

Two corpora: SciFact (every abstract of ``../shared/eval/ir/scifact/corpus.jsonl``
a report, ingested by ``Store.ingest`` as ``bench/quality_search.py`` does;
its dev queries) and the synthetic corpus of ``bench_core`` (``--chunks``
chunks, 1,000,000 when asked; its query mix, filters left out). On each, the
same queries, warmed once, are run through:

- researchstore: ``research_chunk_search`` through ``store.call``, keyword
  mode, top 10 with snippets;
- bm25s, English stop words and PyStemmer's English stemmer, on the store's
  chunk texts (top 10, the texts returned with the ids);
- raw Tantivy: one stored text field, English stemming, the query's stemmed
  terms as a disjunction, each of the 10 hits' stored documents fetched.

Printed per corpus and engine: p50/p99 in ms of wall time, the p50 of the
process's CPU time (steadier on a shared machine), and researchstore's p50
as a multiple of each peer's (issue 12's targets: ≤ 1.0× bm25s on SciFact, ≤ 2×
raw Tantivy at 1,000,000 chunks). ``--workdir`` keeps the stores between
runs. ``run_peers`` is the entry point for other benches.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_core import ensure_corpus, make_queries, percentile
from quality_common import eval_dir
from quality_search import write_source

from researchstore import Store

LIMIT = 10


def timed(run: Callable[[str], Any], queries: list[str], warmup: int = 1) -> dict[str, float]:
    """p50/p99/mean of ``run`` over ``queries``, after ``warmup`` passes of the first 50."""
    for _ in range(warmup):
        for query in queries[:50]:
            run(query)
    timings, cpu = [], []
    clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
    for query in queries:
        started, cpu_started = clock(), cpu_clock()
        run(query)
        cpu.append(cpu_clock() - cpu_started)
        timings.append(clock() - started)
    timings.sort()
    cpu.sort()
    return {
        "p50_ms": percentile(timings, 50) / 1e6,
        "p99_ms": percentile(timings, 99) / 1e6,
        "mean_ms": sum(timings) / len(timings) / 1e6,
        "cpu_p50_ms": percentile(cpu, 50) / 1e6,
    }


def store_texts(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [row[0] for row in conn.execute("SELECT text FROM chunks ORDER BY id")]
    finally:
        conn.close()


def researchstore_runner(store: Store) -> Callable[[str], Any]:
    def run(query: str) -> Any:
        answer = store.call(
            "research_chunk_search", {"query": query, "limit": LIMIT, "mode": "keyword"}
        )
        if "error" in answer:
            raise RuntimeError(f"{query!r}: {answer['error']}")
        return answer

    return run


def bm25s_runner(texts: list[str]) -> Callable[[str], Any]:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    k = min(LIMIT, len(texts))

    def run(query: str) -> Any:
        asked = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, show_progress=False)
        if not asked.vocab:
            return []
        ids, _ = retriever.retrieve(asked, k=k, show_progress=False, n_threads=1)
        return [texts[i] for i in ids[0]]

    return run


def tantivy_runner(texts: list[str], path: Path) -> Callable[[str], Any]:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", stored=True, tokenizer_name="en_stem")
    schema = builder.build()
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    index = tantivy.Index(schema, path=str(path))
    writer = index.writer(heap_size=128_000_000, num_threads=2)
    for text in texts:
        writer.add_document(tantivy.Document(text=text))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    analyzer = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )

    def run(query: str) -> Any:
        terms = analyzer.analyze(query)
        if not terms:
            return []
        searcher = index.searcher()
        clauses = [
            (tantivy.Occur.Should, tantivy.Query.term_query(schema, "text", term)) for term in terms
        ]
        result = searcher.search(tantivy.Query.boolean_query(clauses), limit=LIMIT)
        return [searcher.doc(address)["text"][0] for _, address in result.hits]

    return run


def run_peers(
    store: Store, queries: list[str], scratch: Path, peers: tuple[str, ...] = ("bm25s", "tantivy")
) -> dict[str, dict[str, float]]:
    """The same queries through researchstore, bm25s and raw Tantivy: p50/p99 each."""
    texts = store_texts(store.path)
    results = {"researchstore": timed(researchstore_runner(store), queries)}
    if "bm25s" in peers:
        results["bm25s"] = timed(bm25s_runner(texts), queries)
    if "tantivy" in peers:
        results["tantivy"] = timed(tantivy_runner(texts, scratch / "raw-tantivy"), queries)
    for peer in peers:
        for key in ("p50_ms", "cpu_p50_ms"):
            results[peer][f"researchstore_{key}_ratio"] = (
                results["researchstore"][key] / results[peer][key]
            )
    results["chunks"] = {"count": len(texts), "queries": len(queries)}
    return results


def print_results(name: str, results: dict[str, dict[str, float]]) -> None:
    chunks = results["chunks"]
    print(f"\n{name}: {chunks['count']:,} chunks, {chunks['queries']} queries, top {LIMIT}")
    print(
        f"  {'engine':14} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8} {'CPU p50':>8}"
        "  researchstore p50 ÷ (wall, CPU)"
    )
    for engine in ("researchstore", "bm25s", "tantivy"):
        if engine not in results:
            continue
        row = results[engine]
        shown = ""
        if "researchstore_p50_ms_ratio" in row:
            wall, cpu = row["researchstore_p50_ms_ratio"], row["researchstore_cpu_p50_ms_ratio"]
            shown = f"{wall:6.2f}×  {cpu:6.2f}×"
        times = f"{row['p50_ms']:8.3f} {row['p99_ms']:8.3f} {row['mean_ms']:8.3f}"
        print(f"  {engine:14} {times} {row['cpu_p50_ms']:8.3f}  {shown}")


def scifact(work: Path, count: int) -> tuple[Store, list[str]]:
    root = eval_dir("ir", "scifact")
    source, db = work / "scifact", work / "scifact.db"
    if not source.exists():
        write_source(root / "corpus.jsonl", source)
    store = Store(db, progress=False)
    store.ingest(source, name="scifact", progress=False)
    lines = (root / "queries_dev.jsonl").read_text(encoding="utf-8").splitlines()
    queries = [json.loads(line)["text"] for line in lines if line]
    return store, repeat(queries, count)


def synthetic(work: Path, chunks: int, count: int, seed: int) -> tuple[Store, list[str]]:
    corpus, _ = ensure_corpus(work, chunks, seed)
    store = Store(work / f"synthetic-{chunks}.db", progress=False)
    store.ingest(corpus, name="bench", progress=False)
    return store, [query["query"] for query in make_queries(seed, count)]


def repeat(queries: list[str], count: int) -> list[str]:
    return [queries[i % len(queries)] for i in range(max(count, len(queries)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="scifact,synthetic")
    parser.add_argument("--chunks", type=int, default=100_000, help="synthetic corpus size")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=20_260_314)
    parser.add_argument("--workdir", type=Path, help="keep corpora and stores here (reusable)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--peers", default="bm25s,tantivy", help="which peers to run (bm25s at 1M is slow)"
    )
    parser.add_argument(
        "--store",
        type=Path,
        help="the synthetic corpus's store as another bench built it (bench_copy's, say), "
        "instead of ingesting one here",
    )
    args = parser.parse_args(argv)
    corpora = args.corpus.split(",")
    with tempfile.TemporaryDirectory(prefix="rs-peers-") as scratch:
        work = (args.workdir or Path(scratch)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        everything: dict[str, Any] = {}
        for name in corpora:
            if name == "scifact":
                store, queries = scifact(work, args.queries)
                label = "SciFact"
            elif name == "synthetic" and args.store is not None:
                store = Store(args.store, progress=False)
                queries = [query["query"] for query in make_queries(args.seed, args.queries)]
                label = f"synthetic ({args.store.name})"
            elif name == "synthetic":
                store, queries = synthetic(work, args.chunks, args.queries, args.seed)
                label = f"synthetic {args.chunks:,}"
            else:
                parser.error(f"unknown corpus {name!r}")
            with store:
                results = run_peers(store, queries, work, tuple(args.peers.split(",")))
            print_results(label, results)
            everything[name] = results
        if args.json:
            args.json.write_text(json.dumps(everything, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
