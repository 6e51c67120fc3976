#!/usr/bin/env python
"""Search relevance on BEIR SciFact through the normal ingest and search path.

    .venv/bin/python bench/quality_search.py [--chunk-tokens 256] [--workdir DIR]

Every abstract of ``../shared/eval/ir/scifact/corpus.jsonl`` becomes a report
in a temporary source folder (``<id>/report.json`` with its title and id,
``<id>/abstract.txt`` with its text), ingested by ``Store.ingest``. Each of
the 150 dev queries goes through ``research_chunk_search`` (``store.call``)
with the deepest limit the tool allows (50); a document scores as its best
chunk. Printed: nDCG@10 and Recall@50 against ``qrels_dev.tsv``, the
ingest time and the query rate.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quality_common import eval_dir

from researchstore import Store

#: The deepest page research_chunk_search returns.
SEARCH_LIMIT = 50


def write_source(corpus: Path, source: Path) -> int:
    count = 0
    with corpus.open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            report = source / record["_id"]
            report.mkdir(parents=True)
            meta = {"id": int(record["_id"]), "title": record["title"] or record["_id"]}
            (report / "report.json").write_text(json.dumps(meta), encoding="utf-8")
            (report / "abstract.txt").write_text(record["text"], encoding="utf-8")
            count += 1
    return count


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
    args = parser.parse_args()

    root = eval_dir("ir", "scifact")
    queries = [
        json.loads(line) for line in (root / "queries_dev.jsonl").read_text().splitlines() if line
    ]
    qrels = load_qrels(root / "qrels_dev.tsv")
    queries = [query for query in queries if query["_id"] in qrels]

    with tempfile.TemporaryDirectory(prefix="rs-scifact-") as scratch:
        work = args.workdir or Path(scratch)
        source, store_path = work / "scifact", work / "scifact.db"
        if not source.exists():
            write_source(root / "corpus.jsonl", source)
        options = {} if args.chunk_tokens is None else {"chunk_tokens": args.chunk_tokens}
        with Store(store_path, progress=False, **options) as store:
            started = time.perf_counter()
            summary = store.ingest(source, name="scifact", progress=False)
            ingest_seconds = time.perf_counter() - started
            chunks = store._conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            print(
                f"ingested {summary.new + summary.modified + summary.unchanged} reports, "
                f"{chunks} chunks, in {ingest_seconds:.1f} s (chunk size {store.chunk_tokens})"
            )
            ndcg, recall = [], []
            started = time.perf_counter()
            for query in queries:
                answer = store.call(
                    "research_chunk_search", {"query": query["text"], "limit": SEARCH_LIMIT}
                )
                if "error" in answer:
                    sys.exit(f"query {query['_id']}: {answer['error']}")
                ranked = rank_documents(answer["result"]["hits"])
                relevant = qrels[query["_id"]]
                ndcg.append(ndcg_at(ranked, relevant, 10))
                recall.append(sum(doc_id in relevant for doc_id in ranked) / len(relevant))
            query_seconds = time.perf_counter() - started

    print(f"{len(queries)} queries, {len(queries) / query_seconds:.0f} queries/s")
    print(f"nDCG@10   {sum(ndcg) / len(ndcg):.4f}")
    print(f"Recall@50 {sum(recall) / len(recall):.4f}")


if __name__ == "__main__":
    main()
