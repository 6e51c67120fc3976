"""A re-ingest run that SIGKILLs itself at a chosen point.

Usage::

    crashing_reingest.py STORE POINT NTH LOG BATCH_REPORTS INDEX_COMMIT_CHUNKS

``POINT`` names where the run dies, on the ``NTH`` time it gets there
(``none``: it never dies on purpose, so a test may kill it from outside).
Each batch SQLite committed is appended to ``LOG`` (one report key a line):
those must never be lost. The program prints ``ready`` before the run and
the run's summaries as JSON after it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from researchstore import Store
from researchstore.indexes.index import SearchIndex
from researchstore.ingest import pipeline, writer
from researchstore.reingest import reingest
from researchstore.storage import sync


class Killer:
    """Counts the calls of the patched points and kills the process on the ``nth``."""

    def __init__(self, nth: int) -> None:
        self.nth = nth
        self.calls = 0

    def count_and_maybe_die(self) -> None:
        self.calls += 1
        if self.calls == self.nth:
            os.kill(os.getpid(), signal.SIGKILL)

    def patch(self, owner: Any, name: str, *, die_after: bool = False) -> None:
        real = getattr(owner, name)

        def patched(*args: Any, **kwargs: Any) -> Any:
            if not die_after:
                self.count_and_maybe_die()
            result = real(*args, **kwargs)
            if die_after:
                self.count_and_maybe_die()
            return result

        setattr(owner, name, patched)


def log_committed_batches(log: str) -> None:
    real_flush = writer.ReportWriter.flush

    def logged_flush(self: Any) -> None:
        # A batch logged here was committed to SQLite: it must never be lost.
        keys = [prepared.source.key for prepared in self.batch]
        real_flush(self)
        with open(log, "a") as handle:
            handle.write("".join(key + "\n" for key in keys))

    writer.ReportWriter.flush = logged_flush  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    db, point, nth, log, batch_reports, index_commit_chunks = argv
    killer = Killer(int(nth))
    store = Store(db, progress=False)
    log_committed_batches(log)
    writer.BATCH_REPORTS = int(batch_reports)
    writer.INDEX_COMMIT_CHUNKS = int(index_commit_chunks)
    if point == "mid_batch":  # inside the batch's SQLite transaction
        killer.patch(writer.ReportWriter, "write_report")
    elif point == "mid_removal":  # inside the removal's SQLite transaction
        killer.patch(writer, "retire_report_chunks")
    elif point == "before_removal":
        killer.patch(pipeline, "remove_reports")
    elif point == "before_index_commit":  # SQLite committed, the index not
        killer.patch(SearchIndex, "commit")
    elif point == "before_sidecar":  # index committed, its sidecar not written
        killer.patch(sync, "write_sidecar")
    elif point == "before_pending_deleted":  # sidecar written, pending rows kept
        killer.patch(sync, "write_sidecar", die_after=True)
    print("ready", flush=True)
    summaries = reingest(store)
    store.close()
    print(json.dumps([summary.to_dict() for summary in summaries]), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
