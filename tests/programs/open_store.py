"""Open a store and search it, in a process of its own (so that a test can time it out).

Usage: ``open_store.py STORE writable|read-only QUERY``. Prints one JSON
object: ``{"hits": [report ids]}``, or ``{"error": {"type", "message"}}``
for an error researchstore raised; anything else leaves with a traceback.
Also ``{"modules": [...]}``: whether sqlite-utils was imported.
"""

from __future__ import annotations

import json
import sys

from researchstore import ResearchStoreError, Store


def main(path: str, mode: str, query: str) -> dict[str, object]:
    try:
        with Store(path, progress=False, read_only=mode == "read-only") as store:
            hits = store.search(query, limit=10, mode="keyword")
    except ResearchStoreError as error:
        outcome: dict[str, object] = {
            "error": {"type": type(error).__name__, "message": error.message}
        }
    else:
        outcome = {"hits": [hit["report_id"] for hit in hits]}
    outcome["sqlite_utils_imported"] = "sqlite_utils" in sys.modules
    return outcome


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
