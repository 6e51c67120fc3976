"""Embed a store with the hashing model and die before the vector index commit lands.

Usage: ``crashing_embed.py STORE``. SQLite commits the vectors (and their
``index_pending`` rows); the process then exits with status 9 where the
vector index would commit, as a crash would leave it. The next open must
bring the vector index level with SQLite.
"""

from __future__ import annotations

import os
import sys

from hashing import HashingEmbedder

from researchstore import Store
from researchstore.indexes.vector_index import VectorIndex

#: The exit status that tells the test the process died where it was meant to.
CRASHED = 9


real_commit = VectorIndex.commit


def die(self: VectorIndex) -> None:
    """Stands in for ``VectorIndex.commit``: the process dies before a commit of vectors lands
    (making the empty index for the store's first vectors goes through)."""
    if self._dirty:
        os._exit(CRASHED)
    real_commit(self)


def main(argv: list[str]) -> None:
    (store_path,) = argv
    VectorIndex.commit = die  # type: ignore[method-assign]
    store = Store(store_path, progress=False, embedder=HashingEmbedder())
    store.embed()


if __name__ == "__main__":
    main(sys.argv[1:])
