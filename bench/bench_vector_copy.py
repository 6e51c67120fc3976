#!/usr/bin/env python
"""First answer of a copied `.db` with vectors: its graph read as built here, or rebuilt.

    .venv/bin/python bench/bench_vector_copy.py [--chunks 100000] [--dimension 384]
        [--workdir DIR] [--tries 3]

Builds (or reuses, with ``--workdir``) a store of bench_core's synthetic
corpus and gives every chunk an int8 vector of ``--dimension`` (random
directions around a few thousand centres, as ``bench_semantic.py`` does,
recorded under a stand-in model). Then, each in a fresh child process once
the copy is on disk, it times opening a copy of the `.db` alone and a first
keyword answer (opening the store opens every index, the vector index among
them), then a first semantic one:

- ``same_machine``: the cache directory the store was built with. The graph
  the store file carries is one this machine recorded (``built_here``): it is
  hashed once, then read (``--tries`` copies: the median).
- ``another_machine``: an empty cache directory, as on a machine that did
  not build the store: the graph is rebuilt from the vectors in SQLite.
- ``another_machine_read_only``: the same, opened read-only (built in the cache).

Every keyword answer must be the same as the original store's; a semantic one
may differ from it after a rebuild (a new graph proposes other candidates).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

MODEL_ID = "bench-random-directions@1"

CHILD = """
import json, sys, time
started = time.perf_counter()
import numpy as np
from researchstore import Store

class StandIn:
    folder = None
    def __init__(self, dimension):
        self.model_id, self.dimension = sys.argv[4], dimension
    def embed(self, texts, *, batch_size=64):
        rng = np.random.default_rng(abs(hash(tuple(texts))) % (1 << 32))
        return rng.standard_normal((len(texts), self.dimension)).astype(np.float32)

queries = json.loads(sys.argv[2])
store = Store(sys.argv[1], progress=False, read_only=sys.argv[3] == "read-only" or None,
              embedder=StandIn(int(sys.argv[5])))
keyword = [hit["chunk_id"] for hit in store.search(queries[0], limit=10, mode="keyword")]
first_keyword = time.perf_counter() - started
semantic = [hit["chunk_id"] for hit in store.search("fixed", limit=10, mode="semantic")]
first_semantic = time.perf_counter() - started
print(json.dumps({"keyword_s": first_keyword, "semantic_s": first_semantic,
                  "answers": [keyword, semantic], "repairs": store.sync.repairs}))
store.close()
"""


def _child(
    db: Path, queries: list[str], dimension: int, *, cache: Path | None, read_only: bool
) -> dict[str, Any]:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"}
    env["RESEARCHSTORE_CACHE_DIR"] = str(cache or _cache_dir())
    how = "read-only" if read_only else "writable"
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(db), json.dumps(queries), how, MODEL_ID, str(dimension)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    answer: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def _cache_dir() -> Path:
    from researchstore.storage.cache_dir import cache_root

    return cache_root()


def _give_vectors(store: Any, dimension: int) -> None:
    """Every chunk without a vector gets one of ``dimension`` (random, clustered)."""
    import numpy as np

    from researchstore.storage.db import queue_pending
    from researchstore.storage.vectors import ChunkToEmbed, claim_model, quantize, write_vectors

    class Model:
        folder = None
        model_id = MODEL_ID

    Model.dimension = dimension  # type: ignore[attr-defined]
    with store.reading() as conn:
        rows = conn.execute(
            "SELECT id, chunk_id, report_id, text FROM chunks WHERE status = 'ok' "
            "AND id NOT IN (SELECT chunk_rowid FROM vectors) ORDER BY id"
        ).fetchall()
    if not rows:
        return
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((2_000, dimension)).astype(np.float32)
    with store.writing(), store.transaction() as conn:
        claim_model(conn, Model())  # type: ignore[arg-type]
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


def main() -> None:
    from bench_core import ensure_corpus

    from researchstore import Store

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--dimension", type=int, default=384)
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rs-vector-copy-") as scratch:
        work = args.workdir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        corpus, _ = ensure_corpus(work, args.chunks, seed=7)
        db = work / f"vector-copy-{args.chunks}-{args.dimension}.db"
        fresh = not db.exists()
        with Store(db, progress=True) as store:
            if fresh:
                store.ingest(corpus, name="corpus")
            _give_vectors(store, args.dimension)
            with store.reading() as conn:
                texts = [row[0] for row in conn.execute("SELECT text FROM chunks LIMIT 20")]
                packed = conn.execute(
                    "SELECT sum(length(data)) FROM index_files WHERE index_name = 'vectors'"
                ).fetchone()[0]
        queries = [" ".join(text.split()[10:13]) for text in texts]
        size = db.stat().st_size
        print(f"store file {size / 1e6:.0f} MB, vector index copy {packed / 1e6:.0f} MB")
        expected = _child(db, queries, args.dimension, cache=None, read_only=False)["answers"]
        runs = [("same_machine", False, False)] * args.tries + [
            ("another_machine", True, False),
            ("another_machine_read_only", True, True),
        ]
        results: dict[str, list[dict[str, Any]]] = {}
        for how, elsewhere, read_only in runs:
            folder = Path(tempfile.mkdtemp(dir=work, prefix=f"copy-{how}-"))
            copy = folder / db.name
            shutil.copyfile(db, copy)
            os.sync()
            cache = folder / "cache" if elsewhere else None
            answer = _child(copy, queries, args.dimension, cache=cache, read_only=read_only)
            pairs = zip(answer["answers"], expected, strict=True)
            answer["same"] = [got == want for got, want in pairs]
            results.setdefault(how, []).append(answer)
            shutil.rmtree(folder)
        for how, tries in results.items():
            tries.sort(key=lambda one: one["keyword_s"])
            median = tries[len(tries) // 2]
            print(
                f"{how:26}: first keyword answer {median['keyword_s']:6.2f} s, first semantic "
                f"{median['semantic_s']:6.2f} s; same answers (keyword, semantic): "
                f"{[all(one['same'][at] for one in tries) for at in (0, 1)]}"
                + (f"; {'; '.join(median['repairs'])}" if median["repairs"] else "")
            )
            if len(tries) > 1:
                print("    tries: " + ", ".join(f"{one['keyword_s']:.2f} s" for one in tries))


if __name__ == "__main__":
    main()
