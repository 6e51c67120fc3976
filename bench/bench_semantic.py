#!/usr/bin/env python
"""Search by meaning: embedding throughput, hybrid latency and vector size (issue targets).

    .venv/bin/python bench/bench_semantic.py [--chunks 100000] [--embed-chunks 256]
        [--queries 200] [--device cpu|cuda] [--workdir DIR]

Needs the semantic extra
(``pip install -e '.[semantic]' --extra-index-url https://download.pytorch.org/whl/cpu``).
In one run:

1. **Embedding throughput**: ``--embed-chunks`` SciFact abstracts (from
   ``../shared/eval/ir/scifact``, read at run time) are ingested as reports;
   their chunks (each after its titles, exactly as the stage gives them to
   the model) are embedded by a bare ``SentenceTransformer.encode``
   (batch 64, normalised) and then by ``Store.embed`` (the whole stage:
   reading, the model, int8 vectors written to SQLite, the vector index
   committed). Printed: chunks/s of each and their ratio (target ≥ 0.9).
2. **Hybrid latency at ``--chunks`` chunks**: bench_core's synthetic corpus is
   ingested; every chunk is given a vector of the real model's dimension
   (random directions around a few thousand centres: embedding 100,000 real
   chunks takes hours on this CPU, and the index's cost does not depend on
   what the vectors mean), recorded under the real model, and the vector
   index is built. Each query is timed through ``semantic.run_search``,
   split into embedding the query (the real model) and the rest (vector
   search, word search, fusion, rows, snippets). Target: hybrid p50 ≤ query
   embedding + 3 ms.
3. **Bytes per chunk**: the ``vectors`` table's pages (``dbstat``) and the
   vector index's files, divided by the number of vectors (target ≤ 800).

Nothing here is part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quality_common import eval_dir

from researchstore import Store
from researchstore.indexes.index import SearchIndex
from researchstore.indexes.vector_index import VectorIndex
from researchstore.meaning.embedding import load_embedder
from researchstore.retrieval.semantic import run_search
from researchstore.storage.db import queue_pending
from researchstore.storage.filters import SearchFilters
from researchstore.storage.vectors import (
    ChunkToEmbed,
    chunks_to_embed,
    claim_model,
    quantize,
    write_vectors,
)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def throughput(work: Path, count: int, device: str | None) -> None:
    print(f"\n== 1. embedding throughput ({count} SciFact abstracts, {device or 'auto'})")
    source = work / "abstracts"
    corpus = eval_dir("ir", "scifact") / "corpus.jsonl"
    with corpus.open(encoding="utf-8") as lines:
        for index, line in enumerate(lines):
            if index >= count:
                break
            record = json.loads(line)
            report = source / record["_id"]
            report.mkdir(parents=True)
            (report / "report.json").write_text(json.dumps({"title": record["title"]}))
            (report / "abstract.txt").write_text(record["text"], encoding="utf-8")
    embedder = load_embedder(device=device)
    with Store(work / "throughput.db", progress=False) as store:
        store.ingest(source, name="abstracts", progress=False)
        with store.reading() as conn:
            # The very texts the stage gives the model: each chunk after its titles.
            pending = chunks_to_embed(conn, after=0, limit=1 << 30, retry_failed=True)
            texts = [chunk.embedded_text for chunk in pending]
        model = embedder._model  # type: ignore[attr-defined]
        model.encode(texts[:32], batch_size=32)  # warm both the same way
        started = time.perf_counter()
        model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
        bare = len(texts) / (time.perf_counter() - started)
        summary = store.embed(embedder=embedder, batch_size=64, progress=False)
        stage = summary.embedded / summary.seconds
    print(f"chunks            {len(texts)} (embedded by the stage: {summary.embedded})")
    print(f"bare encode       {bare:8.1f} chunks/s")
    print(f"Store.embed       {stage:8.1f} chunks/s")
    print(f"ratio             {stage / bare:8.2f}  (target >= 0.90)")


def latency(work: Path, chunks: int, queries: int, device: str | None) -> None:
    import numpy as np
    from bench_core import ensure_corpus

    print(f"\n== 2. hybrid latency at {chunks:,} chunks")
    corpus, _ = ensure_corpus(work, chunks, seed=7)
    embedder = load_embedder(device=device)
    store_path = work / f"latency-{chunks}.db"
    fresh = not store_path.exists()
    with Store(store_path, progress=True) as store:
        if fresh:
            started = time.perf_counter()
            store.ingest(corpus, name="corpus")
            print(f"ingested in {time.perf_counter() - started:.0f} s")
        with store.reading() as conn:
            rows = conn.execute(
                "SELECT id, chunk_id, report_id, text FROM chunks WHERE status = 'ok' "
                "AND id NOT IN (SELECT chunk_rowid FROM vectors) ORDER BY id"
            ).fetchall()
        if rows:
            rng = np.random.default_rng(7)
            centres = rng.standard_normal((2_000, embedder.dimension)).astype(np.float32)
            with store.writing(), store.transaction() as conn:
                claim_model(conn, embedder)
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
        words = store.sync.get(SearchIndex)
        vectors_index = store.sync.get(VectorIndex)
        with store.reading() as conn:
            texts = [row[0] for row in conn.execute("SELECT text FROM chunks LIMIT 2000")]
        rng2 = random.Random(7)
        asked = []
        for _ in range(queries):
            words_of = rng2.choice(texts).split()
            start = rng2.randrange(max(1, len(words_of) - 6))
            asked.append(" ".join(words_of[start : start + rng2.randint(2, 6)]))
        results: dict[str, dict[str, list[float]]] = {}
        for mode in ("keyword", "semantic", "hybrid"):
            embed_ms: list[float] = []
            rest_ms: list[float] = []
            total_ms: list[float] = []
            for query in asked[:10]:  # warm
                run_search(
                    mode=mode,
                    query=query,
                    limit=10,
                    filters=SearchFilters(),
                    reading=store.reading,
                    words=words,
                    vectors=vectors_index,
                    embedder=embedder,
                )
            for query in asked:
                timings: dict[str, float] = {}
                started = time.perf_counter()
                run_search(
                    mode=mode,
                    query=query,
                    limit=10,
                    filters=SearchFilters(),
                    reading=store.reading,
                    words=words,
                    vectors=vectors_index,
                    embedder=embedder,
                    timings=timings,
                )
                total = (time.perf_counter() - started) * 1000
                total_ms.append(total)
                embed_ms.append(timings.get("embed_ms", 0.0))
                rest_ms.append(total - timings.get("embed_ms", 0.0))
            results[mode] = {"total": total_ms, "embed": embed_ms, "rest": rest_ms}
        print(
            f"{'mode':10} {'p50 ms':>8} {'p99 ms':>8} {'embed p50':>10} "
            f"{'rest p50':>9} {'rest p99':>9}"
        )
        for mode, found in results.items():
            print(
                f"{mode:10} {percentile(found['total'], 0.5):8.2f} "
                f"{percentile(found['total'], 0.99):8.2f} {percentile(found['embed'], 0.5):10.2f} "
                f"{percentile(found['rest'], 0.5):9.2f} {percentile(found['rest'], 0.99):9.2f}"
            )
        hybrid = results["hybrid"]
        margin = percentile(hybrid["total"], 0.5) - percentile(hybrid["embed"], 0.5)
        print(f"hybrid p50 - query embedding p50 = {margin:.2f} ms (target <= 3 ms)")
        size(store)


def size(store: Store) -> None:
    print("\n== 3. bytes per chunk for vectors")
    with store.reading() as conn:
        count = conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
        table = (
            conn.execute("SELECT sum(pgsize) FROM dbstat WHERE name = 'vectors'").fetchone()[0] or 0
        )
    folder = store.sync.places.folder(VectorIndex)
    index_bytes = sum(path.stat().st_size for path in folder.iterdir() if path.is_file())
    if not count:
        print("no vectors")
        return
    print(f"vectors           {count:,}")
    print(f"SQLite (truth)    {table / count:6.0f} B/chunk")
    print(f"vector index      {index_bytes / count:6.0f} B/chunk")
    print(f"together          {(table + index_bytes) / count:6.0f} B/chunk (target <= 800)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--embed-chunks", type=int, default=256)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--device", choices=["cpu", "cuda"])
    parser.add_argument("--workdir", type=Path, help="keep the corpus and stores here")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rs-semantic-") as scratch:
        work = args.workdir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        if not args.skip_throughput:
            run = Path(tempfile.mkdtemp(dir=work, prefix="throughput-"))
            throughput(run, args.embed_chunks, args.device)
        latency(work, args.chunks, args.queries, args.device)


if __name__ == "__main__":
    main()
