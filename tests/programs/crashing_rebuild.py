"""Rebuild a store's word index and die (SIGKILL) just before the rebuilt index commits.

Usage: ``crashing_rebuild.py STORE``. The rebuild's own folder
(``STORE.index.rebuild-<pid>``) is left behind, as a killed
``researchstore rebuild-index`` leaves it; the next open must remove it.
"""

from __future__ import annotations

import os
import signal
import sys

from researchstore import Store
from researchstore.indexes.index import SearchIndex


def die(self: SearchIndex) -> None:
    """Stands in for ``SearchIndex.commit``: the process is killed before the commit lands."""
    os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str]) -> None:
    (store_path,) = argv
    store = Store(store_path, progress=False)
    SearchIndex.commit = die  # type: ignore[method-assign]
    store.rebuild_index()


if __name__ == "__main__":
    main(sys.argv[1:])
