"""Embed a store on a Ray cluster with the slow hashing model; a signal stops it cleanly.

Usage: ``ray_embed_store.py STORE ADDRESS READ_BATCH``. Runs
``Store.embed(ray=...)`` under ``StopSignals``, as ``researchstore embed
--ray`` does, and prints the summary as JSON; stopped by SIGINT or SIGTERM,
it exits with 128 + the signal's number. The actors import
``programs.hashing``: the test's cluster has ``tests/`` on its path.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # programs.hashing, as the actors

import ray  # noqa: F401  (loaded before usearch: researchstore.meaning.ray_embed.load_ray)
from programs.hashing import HashingEmbedder

from researchstore import Store
from researchstore.errors import Interrupted
from researchstore.meaning import embed as embed_module
from researchstore.meaning.ray_embed import RayEmbedding
from researchstore.reingest import StopSignals


def main(argv: list[str]) -> None:
    store_path, address, read_batch = argv
    embed_module.READ_BATCH = int(read_batch)
    load_model = functools.partial(HashingEmbedder, seconds_per_call=0.3)
    try:
        with StopSignals(), Store(store_path, progress=False) as store:
            summary = store.embed(ray=RayEmbedding(address, load_model=load_model))
    except Interrupted as stop:
        sys.exit(stop.exit_code)
    print(json.dumps(summary.to_dict()))


if __name__ == "__main__":
    main(sys.argv[1:])
