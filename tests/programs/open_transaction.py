"""An ingest that stops inside its write transaction until told to go on.

Usage: ``open_transaction.py STORE SOURCE NAME``. Ingests SOURCE as the source
NAME; once the first changed report is written inside the batch's SQLite
transaction (its old chunks deleted, its new ones inserted, nothing
committed), prints ``in transaction`` and waits for a line on stdin; then
the run goes on, commits and ends. Nothing else changes.
"""

from __future__ import annotations

import sys
from typing import Any

from researchstore import Store
from researchstore.ingest import writer


def stop_inside_the_transaction() -> None:
    real_write = writer.ReportWriter.write_report
    stopped = False

    def write_report(self: Any, *arguments: Any) -> Any:
        nonlocal stopped
        written = real_write(self, *arguments)
        if not stopped:
            stopped = True
            print("in transaction", flush=True)
            sys.stdin.readline()
        return written

    writer.ReportWriter.write_report = write_report  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    store_path, source, name = argv
    stop_inside_the_transaction()
    with Store(store_path, progress=False) as store:
        summary = store.ingest(source, name=name)
    print(f"done {summary.modified} modified", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
