"""Open a store and search it in each mode, in a process of its own.

Usage: ``search_store.py STORE QUERY [--read-only]``. Opens the store with the
hashing model, searches ``QUERY`` through the tool boundary (as the command
line and the MCP server do) in every mode, twice over (semantic first), and
prints one JSON line:
``{"repairs": [...], "answers": [[mode, chunk ids or {"error": message}], ...]}``.
Run in a child so that a crash in native code is a negative exit status, not
the end of the test run.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from hashing import HashingEmbedder

from researchstore import Store
from researchstore.tools import call_tool

MODES = ("semantic", "hybrid", "keyword") * 2


def main(argv: list[str]) -> None:
    store_path, query, *options = argv
    answers: list[Any] = []
    with Store(
        store_path, progress=False, embedder=HashingEmbedder(), read_only="--read-only" in options
    ) as store:
        for mode in MODES:
            envelope = call_tool(
                store, "research_chunk_search", {"query": query, "mode": mode, "limit": 10}
            )
            if "error" in envelope:
                answers.append([mode, {"error": envelope["error"]["message"]}])
            else:
                answers.append([mode, [hit["chunk_id"] for hit in envelope["result"]["hits"]]])
        print(json.dumps({"repairs": store.sync.repairs, "answers": answers}))


if __name__ == "__main__":
    main(sys.argv[1:])
