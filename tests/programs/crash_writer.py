"""Ingest a source and die before the search index commit lands.

Usage: ``crash_writer.py STORE SOURCE_DIR``. SQLite commits the ingest; the
process then exits with status 9 where the index would commit, as a crash
would leave it. The next open must bring the index level with SQLite.
"""

from __future__ import annotations

import os
import sys

from researchstore import Store
from researchstore.indexes.index import SearchIndex

#: The exit status that tells the test the process died where it was meant to.
CRASHED = 9


def die(self: SearchIndex) -> None:
    """Stands in for ``SearchIndex.commit``: the process dies before the commit lands."""
    os._exit(CRASHED)


def main(argv: list[str]) -> None:
    store_path, source_dir = argv
    SearchIndex.commit = die  # type: ignore[method-assign]
    store = Store(store_path, progress=False)
    store.ingest(source_dir, name="field")


if __name__ == "__main__":
    main(sys.argv[1:])
