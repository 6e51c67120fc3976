#!/usr/bin/env python
"""Embedding on a Ray cluster: chunks/s alone, on a 1-node and on a 2-node local cluster.

    .venv/bin/python bench/bench_ray.py [--abstracts 400] [--read-batch 64] [--workdir DIR]

Needs the semantic and ray extras
(``pip install -e '.[semantic,ray]' --extra-index-url
https://download.pytorch.org/whl/cpu``). In one run,
with the real all-MiniLM-L6-v2 on this machine's cores:

1. ``--abstracts`` SciFact abstracts (``../shared/eval/ir/scifact``, read at
   run time) are ingested once, and the store copied (the same chunk ids)
   for each run below.
2. **One process, no Ray**: ``Store.embed`` (the model loaded first, timed
   apart; torch on every core).
3. **A 1-node cluster** (one node of every core, one actor) and **a 2-node
   cluster** (the cores split between two nodes, one actor each), started
   here with ``ray.cluster_utils.Cluster`` in a folder of their own
   (``RAY_TMPDIR``) and stopped by it: never ``ray stop``. For each: the
   cluster's start; the fixed cost of a run (``Store.embed(ray=...)`` of a
   one-chunk store: connecting, starting the actors, loading the model in
   them, one batch); then the whole store, ``Store.embed(ray=...)``.
4. The vectors of each cluster run against the one-process run's, chunk by
   chunk: identical bytes, or how far apart (int8 steps).

``--read-batch`` sets ``embed.READ_BATCH`` for every run alike (a Ray
actor takes one read batch a call: a few hundred chunks need batches
smaller than the 512 of a long run to keep two actors busy). The
one-process run is timed again after the clusters: the two figures show
how much the machine's other work moved the numbers. Ray starts its
workers at nice 15 (``RAY_worker_niceness``), which on a machine shared
with other work hands the actors' cores to anything else; the clusters here
run theirs at 0, as the one process runs (``--ray-niceness`` to change it).
Nothing here is part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

# Before anything loads usearch (the vector index): see researchstore.meaning.ray_embed.load_ray.
import ray
from ray.cluster_utils import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quality_common import eval_dir

from researchstore import Store
from researchstore.meaning import embed as embed_module
from researchstore.meaning.embedding import load_embedder
from researchstore.meaning.ray_embed import RayEmbedding


def scifact_source(folder: Path, count: int) -> Path:
    corpus = eval_dir("ir", "scifact") / "corpus.jsonl"
    with corpus.open(encoding="utf-8") as lines:
        for index, line in enumerate(lines):
            if index >= count:
                break
            record = json.loads(line)
            report = folder / record["_id"]
            report.mkdir(parents=True)
            (report / "report.json").write_text(json.dumps({"title": record["title"]}))
            (report / "abstract.txt").write_text(record["text"], encoding="utf-8")
    return folder


def copy_store(origin: Path, target: Path) -> Path:
    with closing(sqlite3.connect(origin)) as source, closing(sqlite3.connect(target)) as copy:
        source.backup(copy)
    return target


def vectors(path: Path) -> dict[str, bytes]:
    with closing(sqlite3.connect(path)) as conn:
        return dict(
            conn.execute(
                "SELECT c.chunk_id, v.vector FROM vectors v JOIN chunks c ON c.id = v.chunk_rowid"
            )
        )


def compare(one: dict[str, bytes], other: dict[str, bytes]) -> str:
    import numpy as np

    assert set(one) == set(other), "not the same chunks"
    differing = [key for key in one if one[key] != other[key]]
    if not differing:
        return f"identical bytes ({len(one)} vectors)"
    steps = max(
        int(
            np.abs(
                np.frombuffer(one[key], np.int8).astype(int)
                - np.frombuffer(other[key], np.int8).astype(int)
            ).max()
        )
        for key in differing
    )
    return f"{len(differing)} of {len(one)} vectors differ, by at most {steps} int8 step(s)"


def cluster_run(
    name: str, nodes: list[dict[str, Any]], base: Path, tiny: Path, work: Path
) -> dict[str, Any]:
    print(f"\n== {name}: {len(nodes)} node(s), {[node['num_cpus'] for node in nodes]} CPUs")
    started = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args=nodes[0])
    for node in nodes[1:]:
        cluster.add_node(**node)
    cluster.wait_for_nodes()
    start = time.perf_counter() - started
    try:
        settings = RayEmbedding(cluster.address)
        with Store(copy_store(tiny, work / f"{name}-tiny.db"), progress=False) as store:
            fixed = store.embed(ray=settings)
        store_path = copy_store(base, work / f"{name}.db")
        with Store(store_path, progress=False) as store:
            summary = store.embed(ray=settings)
    finally:
        ray.shutdown()
        cluster.shutdown()
    steady = summary.embedded / max(summary.seconds - fixed.seconds, 1e-9)
    print(f"cluster start        {start:6.1f} s")
    print(f"fixed cost of a run  {fixed.seconds:6.1f} s  (1 chunk: connect, actors, model)")
    print(
        f"whole store          {summary.seconds:6.1f} s  {summary.chunks_per_second:5.1f} chunks/s "
        f"({steady:.1f} without the fixed cost); chunks per node: "
        f"{sorted(summary.nodes.values(), reverse=True)}"
    )
    return {
        "start": start,
        "fixed": fixed.seconds,
        "seconds": summary.seconds,
        "rate": summary.chunks_per_second,
        "steady": steady,
        "path": store_path,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--abstracts", type=int, default=400)
    parser.add_argument("--read-batch", type=int, default=64)
    parser.add_argument("--workdir", type=Path, help="keep the stores here")
    parser.add_argument("--ray-niceness", type=int, default=0)
    args = parser.parse_args()
    os.environ["RAY_worker_niceness"] = str(args.ray_niceness)  # the nodes started here read it
    cores = os.cpu_count() or 2
    embed_module.READ_BATCH = args.read_batch
    os.environ["RESEARCHSTORE_EMBED"] = "off"
    with (
        tempfile.TemporaryDirectory(prefix="rs-ray-bench-") as scratch,
        # The clusters' files: a short path (their sockets live there), never /tmp/ray.
        tempfile.TemporaryDirectory(prefix="rs-ray-", dir="/tmp") as ray_folder,
    ):
        os.environ["RAY_TMPDIR"] = ray_folder
        work = args.workdir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        base = work / "base.db"
        with Store(base, progress=False) as store:
            store.ingest(scifact_source(work / "abstracts", args.abstracts), name="scifact")
            with store.reading() as conn:
                chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        tiny = work / "tiny.db"
        with Store(tiny, progress=False) as store:
            store.ingest(scifact_source(work / "one", 1), name="scifact")
        print(f"{chunks} chunks from {args.abstracts} abstracts; read batch {args.read_batch}")

        print(f"\n== one process, no Ray ({cores} cores)")
        started = time.perf_counter()
        model = load_embedder()
        load = time.perf_counter() - started
        alone_path = copy_store(base, work / "alone.db")
        with Store(alone_path, progress=False, embedder=model) as store:
            alone = store.embed()
        print(f"model load           {load:6.1f} s")
        print(
            f"whole store          {alone.seconds:6.1f} s  {alone.chunks_per_second:5.1f} chunks/s"
        )

        node = {"object_store_memory": 200 * 1024 * 1024}
        runs = {
            "1-node": cluster_run("1-node", [{**node, "num_cpus": cores}], base, tiny, work),
            "2-node": cluster_run(
                "2-node", [{**node, "num_cpus": max(1, cores // 2)}] * 2, base, tiny, work
            ),
        }
        with Store(copy_store(base, work / "again.db"), progress=False, embedder=model) as store:
            again = store.embed()
        print(f"\n== one process again: {again.chunks_per_second:5.1f} chunks/s")
        print("\n== vectors against the one-process run's")
        for name, run in runs.items():
            print(f"{name:8} {compare(vectors(alone_path), vectors(run['path']))}")
        print("\n== summary (chunks/s; with the fixed cost / without it)")
        print(
            f"one process          {alone.chunks_per_second:5.1f}, then "
            f"{again.chunks_per_second:.1f}  (+ {load:.1f} s model load)"
        )
        for name, run in runs.items():
            print(
                f"{name} cluster       {run['rate']:5.1f} / {run['steady']:5.1f}  "
                f"(+ {run['start']:.1f} s cluster start, {run['fixed']:.1f} s fixed per run)"
            )


if __name__ == "__main__":
    main()
