"""``researchstore serve``, with a search that can be held for as long as a test likes.

Usage: ``slow_server.py HOLD_DIR serve ARGS...`` runs ``researchstore serve
ARGS...`` unchanged, except that a search whose query starts with
``hold`` (``hold a``, ``hold 1``...) first writes the file ``started-<query>``
into ``HOLD_DIR`` (spaces as ``-``), then waits, in its worker thread, until
the file ``release`` appears there, and only then searches. A test so holds
one call as long as it needs and knows, from the file, that the call is
running. Every other call is the real one.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from researchstore.cli import main as researchstore
from researchstore.retrieval import semantic

#: Long enough for any test to act; a test that forgets to release still ends.
HOLD_SECONDS = 120


def hold_searches(folder: Path) -> None:
    real_search = semantic.run_search

    def run_search(**arguments: Any) -> list[dict[str, Any]]:
        query = str(arguments["query"])
        if query.startswith("hold"):
            (folder / f"started-{query.replace(' ', '-')}").touch()
            deadline = time.monotonic() + HOLD_SECONDS
            while not (folder / "release").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        return real_search(**arguments)

    semantic.run_search = run_search


def main(argv: list[str]) -> None:
    folder, *arguments = argv
    hold_searches(Path(folder))
    researchstore(args=arguments, prog_name="researchstore")


if __name__ == "__main__":
    main(sys.argv[1:])
