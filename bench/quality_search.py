#!/usr/bin/env python
"""Search relevance on BEIR SciFact through the normal ingest and search path, per mode.

    .venv/bin/python bench/quality_search.py [--chunk-tokens 256] [--workdir DIR]
        [--modes keyword,semantic,hybrid] [--queries dev|test]
        [--model all-MiniLM-L6-v2|multilingual-e5-small|FOLDER] [--documents N]

Every abstract of ``../shared/eval/ir/scifact/corpus.jsonl`` becomes a report
in a temporary source folder (``<id>/report.json`` with its title and id,
``<id>/abstract.txt`` with its text), ingested by ``Store.ingest`` and, for
the semantic modes, embedded by ``Store.embed`` with ``--model`` (default:
the store's choice; all-MiniLM-L6-v2 takes about 6 minutes on 2 cores,
multilingual-e5-small much longer: keep the store with ``--workdir`` and
later runs reuse it; one workdir per model, as a store keeps one model).
``--documents N`` keeps a subset of the corpus: every abstract judged
relevant to a query, and a fixed sample of the others up to N in all (for a
model too slow to embed all 5,183 here; compare models on the same N).
Each dev query is searched in each mode, 100 deep: through
``research_chunk_search`` (``store.call``) for the first 50 hits, the tool's
deepest page, checked to agree with the search function that serves it,
which is asked for 100 (Recall@100); a document scores as its best chunk.
Printed per mode: nDCG@10, Recall@50, Recall@100 and queries/s against
``qrels_dev.tsv``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quality_common import eval_dir

from researchstore import Store

#: The deepest page research_chunk_search returns.
SEARCH_LIMIT = 50
#: How deep Recall is measured (past the tool's page, through its search function).
RECALL_DEPTH = 100


def write_source(corpus: Path, source: Path, keep: set[str] | None = None) -> int:
    """One report per abstract (those in ``keep``, where given)."""
    count = 0
    with corpus.open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if keep is not None and record["_id"] not in keep:
                continue
            report = source / record["_id"]
            report.mkdir(parents=True)
            meta = {"id": int(record["_id"]), "title": record["title"] or record["_id"]}
            (report / "report.json").write_text(json.dumps(meta), encoding="utf-8")
            (report / "abstract.txt").write_text(record["text"], encoding="utf-8")
            count += 1
    return count


def subset(corpus: Path, judged: set[str], documents: int) -> set[str]:
    """Every judged abstract, and others by a fixed hash of their ids: ``documents`` in all."""
    ids = [json.loads(line)["_id"] for line in corpus.read_text(encoding="utf-8").splitlines()]
    others = sorted(
        (doc_id for doc_id in ids if doc_id not in judged),
        key=lambda doc_id: hashlib.sha256(doc_id.encode()).hexdigest(),
    )
    return judged | set(others[: max(0, documents - len(judged))])


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        query_id, corpus_id, grade = line.split("\t")
        if int(grade) > 0:
            qrels[query_id][corpus_id] = int(grade)
    return qrels


def ndcg_at(ranked: list[str], relevant: dict[str, int], depth: int) -> float:
    dcg = sum(
        (2 ** relevant.get(doc_id, 0) - 1) / math.log2(rank + 2)
        for rank, doc_id in enumerate(ranked[:depth])
    )
    ideal = sorted(relevant.values(), reverse=True)[:depth]
    idcg = sum((2**grade - 1) / math.log2(rank + 2) for rank, grade in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def rank_documents(hits: list[dict[str, object]]) -> list[str]:
    """Documents in order of their best chunk (hits come best first)."""
    return list(dict.fromkeys(str(hit["report_id"]) for hit in hits))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--chunk-tokens", type=int, default=None, help="chunk size (default: the store's)"
    )
    parser.add_argument("--workdir", type=Path, help="keep the source and store here")
    parser.add_argument("--modes", default="keyword,semantic,hybrid")
    parser.add_argument("--queries", default="dev", help="dev (or a queries_*.jsonl name)")
    parser.add_argument(
        "--model", help="a model name or a sentence-transformers folder (default: the store's)"
    )
    parser.add_argument(
        "--documents", type=int, help="a subset: the judged abstracts and others, N in all"
    )
    args = parser.parse_args()
    modes = args.modes.split(",")

    root = eval_dir("ir", "scifact")
    queries = [
        json.loads(line)
        for line in (root / f"queries_{args.queries}.jsonl").read_text().splitlines()
        if line
    ]
    qrels = load_qrels(root / f"qrels_{args.queries}.tsv")
    queries = [query for query in queries if query["_id"] in qrels]

    with tempfile.TemporaryDirectory(prefix="rs-scifact-") as scratch:
        work = args.workdir or Path(scratch)
        source, store_path = work / "scifact", work / "scifact.db"
        if not source.exists():
            keep = None
            if args.documents is not None:
                judged = {doc_id for relevant in qrels.values() for doc_id in relevant}
                keep = subset(root / "corpus.jsonl", judged, args.documents)
            write_source(root / "corpus.jsonl", source, keep)
        options: dict[str, Any] = {}
        if args.chunk_tokens is not None:
            options["chunk_tokens"] = args.chunk_tokens
        if args.model is not None and set(modes) - {"keyword"}:
            from researchstore.meaning.embedding import load_embedder, parse_model

            spec = parse_model(args.model)
            options["embedder"] = load_embedder(spec.folder, name=spec.name)
        with Store(store_path, progress=False, **options) as store:
            started = time.perf_counter()
            summary = store.ingest(source, name="scifact", progress=False)
            ingest_seconds = time.perf_counter() - started
            with store.reading() as conn:
                chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            print(
                f"ingested {summary.new + summary.modified + summary.unchanged} reports, "
                f"{chunks} chunks, in {ingest_seconds:.1f} s (chunk size {store.chunk_tokens})"
            )
            if set(modes) - {"keyword"}:
                embedded = store.embed(progress=True)
                print(
                    f"embedded {embedded.embedded} chunks in {embedded.seconds:.0f} s "
                    f"({embedded.model}); {embedded.failed} failed"
                )
            print(f"{len(queries)} {args.queries} queries")
            print(f"{'mode':9} {'nDCG@10':>8} {'R@50':>7} {'R@100':>7} {'q/s':>6}")
            for mode in modes:
                scores = evaluate(store, mode, queries, qrels)
                print(
                    f"{mode:9} {scores['ndcg']:8.4f} {scores['recall50']:7.4f} "
                    f"{scores['recall100']:7.4f} {scores['rate']:6.0f}"
                )


def evaluate(
    store: Store, mode: str, queries: list[dict[str, str]], qrels: dict[str, dict[str, int]]
) -> dict[str, float]:
    from researchstore.indexes.index import SearchIndex
    from researchstore.retrieval.semantic import run_search
    from researchstore.storage.filters import SearchFilters

    words = store.sync.get(SearchIndex)
    vectors = store.vector_index() if mode != "keyword" else None
    embedder = store.query_embedder() if mode != "keyword" else None
    ndcg, recall50, recall100 = [], [], []
    started = time.perf_counter()
    for query in queries:
        answer = store.call(
            "research_chunk_search",
            {"query": query["text"], "limit": SEARCH_LIMIT, "mode": mode},
        )
        if "error" in answer:
            sys.exit(f"query {query['_id']}: {answer['error']}")
        deep = run_search(
            mode=mode,
            query=query["text"],
            limit=RECALL_DEPTH,
            filters=SearchFilters(),
            reading=store.reading,
            words=words,
            vectors=vectors,
            embedder=embedder,
        )
        page = rank_documents(answer["result"]["hits"])
        ranked = rank_documents(deep)
        relevant = qrels[query["_id"]]
        ndcg.append(ndcg_at(page, relevant, 10))
        recall50.append(sum(doc_id in relevant for doc_id in page) / len(relevant))
        recall100.append(sum(doc_id in relevant for doc_id in ranked) / len(relevant))
    seconds = time.perf_counter() - started
    return {
        "ndcg": sum(ndcg) / len(ndcg),
        "recall50": sum(recall50) / len(recall50),
        "recall100": sum(recall100) / len(recall100),
        "rate": len(queries) / seconds,
    }


if __name__ == "__main__":
    main()
