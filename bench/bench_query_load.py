#!/usr/bin/env python
"""Hybrid query latency on a busy machine, with the real query models, per thread bound.

    .venv/bin/python bench/bench_query_load.py [--chunks 100000] [--queries 200]
        [--models all-MiniLM-L6-v2,multilingual-e5-small] [--threads 1] [--no-hog]
        [--workdir DIR]

The store: bench_core's synthetic corpus (``--chunks`` chunks, ingested
through ``Store.ingest``), each chunk given a synthetic vector of 384
dimensions (random directions around 2,000 centres, written through the
normal write path: ``write_vectors`` and the vector index's catch-up;
embedding 100,000 real chunks takes hours on 2 cores, and the index's cost
does not depend on what the vectors mean). The queries: short runs of the
corpus's words, embedded by the real model (``load_embedder(name=...)``).

The process starts as ``researchstore serve``, ``web`` and ``search`` do
(``bound_query_threads``, with ``RESEARCHSTORE_QUERY_THREADS`` set to
``--threads``; 0: the libraries' defaults, every core), loads each model
with ``threads=query_threads()`` as ``Store.query_embedder`` does, then
starts one child process per core that spins (the load) and times each
hybrid query through ``semantic.run_search``: p50/p90/p99 in ms, and the
query embedding's p50. The bound is the process's (OpenMP reads it once):
run once per ``--threads`` value. Nothing here is part of the test suite.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class SyntheticModel:
    """Names the vectors written here (384 dimensions); never embeds a query."""

    model_id = "synthetic-384@bench"
    dimension = 384
    folder = None

    def embed(self, texts: object, *, batch_size: int = 64) -> object:
        raise AssertionError("the synthetic model embeds nothing")


def build_store(work: Path, chunks: int) -> Path:
    """The corpus ingested and every chunk given a synthetic vector (reused when there)."""
    import numpy as np
    from bench_core import ensure_corpus

    from researchstore import Store
    from researchstore.storage.db import queue_pending
    from researchstore.storage.vectors import ChunkToEmbed, claim_model, quantize, write_vectors

    corpus, _ = ensure_corpus(work, chunks, seed=7)
    store_path = work / f"load-{chunks}.db"
    with Store(store_path, progress=False) as store:
        with store.reading() as conn:
            has_chunks = conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone() is not None
        if not has_chunks:
            started = time.perf_counter()
            store.ingest(corpus, name="corpus")
            print(f"ingested in {time.perf_counter() - started:.0f} s", flush=True)
        with store.reading() as conn:
            rows = conn.execute(
                "SELECT id, chunk_id, report_id, text FROM chunks WHERE status = 'ok' "
                "AND id NOT IN (SELECT chunk_rowid FROM vectors) ORDER BY id"
            ).fetchall()
        if rows:
            rng = np.random.default_rng(7)
            model = SyntheticModel()
            centres = rng.standard_normal((2_000, model.dimension)).astype(np.float32)
            with store.writing(), store.transaction() as conn:
                claim_model(conn, model)  # type: ignore[arg-type]
            store.sync.reload_kinds()
            started = time.perf_counter()
            for start in range(0, len(rows), 20_000):
                part = rows[start : start + 20_000]
                vectors = centres[rng.integers(0, len(centres), len(part))]
                vectors = vectors + 0.7 * rng.standard_normal(vectors.shape).astype(np.float32)
                blobs = quantize(vectors.astype(np.float32))
                batch = [ChunkToEmbed(row[0], row[1], row[2], row[3]) for row in part]
                with store.writing(), store.transaction() as conn:
                    reports, _ = write_vectors(conn, zip(batch, blobs, strict=True))
                    for report_id in sorted(reports):
                        queue_pending(conn, report_id, "2026-01-01T00:00:00Z", target="vectors")
            store.sync.catch_up()
            print(f"vectors written and indexed in {time.perf_counter() - started:.0f} s")
        with store.reading() as conn:
            count = conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
        print(f"store: {count:,} chunks with vectors", flush=True)
    return store_path


def spin() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--models", default="all-MiniLM-L6-v2,multilingual-e5-small")
    parser.add_argument("--threads", type=int, default=1, help="RESEARCHSTORE_QUERY_THREADS")
    parser.add_argument("--no-hog", action="store_true", help="measure on an idle machine")
    parser.add_argument("--workdir", type=Path, help="keep the corpus and store here")
    args = parser.parse_args()

    os.environ["RESEARCHSTORE_QUERY_THREADS"] = str(args.threads)
    from researchstore.meaning.embedding import (
        bound_query_threads,
        load_embedder,
        model_installed,
        query_threads,
    )

    bound_query_threads()  # before anything loads an OpenMP runtime, as the commands do
    from researchstore import Store
    from researchstore.indexes.index import SearchIndex
    from researchstore.indexes.vector_index import VectorIndex
    from researchstore.retrieval.semantic import run_search
    from researchstore.storage.filters import SearchFilters

    with tempfile.TemporaryDirectory(prefix="rs-query-load-") as scratch:
        work = args.workdir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        store_path = build_store(work, args.chunks)
        with Store(store_path, progress=False) as store:
            words = store.sync.get(SearchIndex)
            vectors = store.sync.get(VectorIndex)
            with store.reading() as conn:
                texts = [row[0] for row in conn.execute("SELECT text FROM chunks LIMIT 2000")]
            pick = random.Random(7)
            asked = []
            for _ in range(args.queries):
                words_of = pick.choice(texts).split()
                start = pick.randrange(max(1, len(words_of) - 6))
                asked.append(" ".join(words_of[start : start + pick.randint(2, 6)]))
            cores = len(os.sched_getaffinity(0))
            load = "no load" if args.no_hog else f"{cores} spinning processes"
            print(
                f"hybrid, {args.queries} queries, {load}, query threads "
                f"{query_threads() or 'default'} (OMP_NUM_THREADS="
                f"{os.environ.get('OMP_NUM_THREADS', 'unset')})"
            )
            print(f"{'model':24} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'embed p50':>10}")
            for name in args.models.split(","):
                if not model_installed(name):
                    print(f"{name:24} skipped: not installed")
                    continue
                embedder = load_embedder(name=name, threads=query_threads())

                def search(query: str, timings: dict[str, float] | None = None) -> None:
                    run_search(
                        mode="hybrid",
                        query=query,
                        limit=10,
                        filters=SearchFilters(),
                        reading=store.reading,
                        words=words,
                        vectors=vectors,
                        embedder=embedder,  # noqa: B023 (used within the iteration)
                        timings=timings,
                    )

                for query in asked[:10]:  # warm, before the load starts
                    search(query)
                hogs = (
                    []
                    if args.no_hog
                    else [multiprocessing.Process(target=spin, daemon=True) for _ in range(cores)]
                )
                for hog in hogs:
                    hog.start()
                try:
                    time.sleep(0.5 if hogs else 0)
                    total_ms: list[float] = []
                    embed_ms: list[float] = []
                    for query in asked:
                        timings: dict[str, float] = {}
                        started = time.perf_counter()
                        search(query, timings)
                        total_ms.append((time.perf_counter() - started) * 1000)
                        embed_ms.append(timings.get("embed_ms", 0.0))
                finally:
                    for hog in hogs:
                        hog.terminate()
                        hog.join()
                print(
                    f"{name:24} {percentile(total_ms, 0.5):8.1f} {percentile(total_ms, 0.9):8.1f} "
                    f"{percentile(total_ms, 0.99):8.1f} {percentile(embed_ms, 0.5):10.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
