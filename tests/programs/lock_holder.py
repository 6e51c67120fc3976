"""Hold a store's write lock until stdin closes.

Usage: ``lock_holder.py STORE``. Prints ``holding`` once the lock is taken,
then waits for a line (or the end) on stdin and lets go.
"""

from __future__ import annotations

import sys

from researchstore import Store


def main(argv: list[str]) -> None:
    (store_path,) = argv
    with Store(store_path, progress=False) as store, store.writing():
        print("holding", flush=True)
        sys.stdin.readline()


if __name__ == "__main__":
    main(sys.argv[1:])
