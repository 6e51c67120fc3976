"""Search a store by meaning once; print what the query model left behind.

Usage: ``query_threads.py STORE QUERY``. Starts as ``researchstore search``,
``serve`` and ``web`` do (``bound_query_threads``). Prints one JSON line: the store's
model, the threads this process gained with the search and holds after it
(Linux: ``/proc/self/task``), torch's intra-op threads where torch was loaded, and
``OMP_NUM_THREADS`` as the environment holds it after the model loaded.
"""

from __future__ import annotations

import json
import os
import sys

from researchstore import Store
from researchstore.meaning.embedding import bound_query_threads


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def main(argv: list[str]) -> None:
    store_path, query = argv
    bound_query_threads()  # as the commands that answer queries do
    with Store(store_path, progress=False) as store:
        store.search("warm the word index", mode="keyword")
        before = threads()
        hits = store.search(query, mode="semantic")
        after = threads()
        model = store.query_embedder().model_id
    torch_threads = None
    if "torch" in sys.modules:
        torch_threads = sys.modules["torch"].get_num_threads()
    print(
        json.dumps(
            {
                "model": model,
                "hits": len(hits),
                "threads_added": after - before,
                "threads": after,
                "torch_threads": torch_threads,
                "omp_env": os.environ.get("OMP_NUM_THREADS"),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
