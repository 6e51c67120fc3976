"""The command line, stalled after its first committed batch until a signal or a kill.

Usage: ``stalled_cli.py ARGS...`` runs ``researchstore ARGS...`` (an ``ingest``
or a ``reingest`` with enough reports to start parser workers) in batches of
``BATCH_REPORTS`` reports. Once SQLite has committed the first batch it prints
``stalled`` on stdout and sleeps, so a test can signal or kill it while its
parser workers and their resource tracker are alive. Nothing else changes:
the command's own signal handling and exit codes are the real ones.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from researchstore.cli import main as researchstore
from researchstore.ingest import writer

BATCH_REPORTS = 10
#: Long enough for any test to act; a test that forgets the child still ends.
STALL_SECONDS = 120


def stall_after_first_batch() -> None:
    real_flush = writer.ReportWriter.flush
    stalled = False

    def flush(self: Any) -> None:
        nonlocal stalled
        real_flush(self)
        if not stalled and self.summary.new + self.summary.modified:
            stalled = True
            print("stalled", flush=True)
            time.sleep(STALL_SECONDS)

    writer.ReportWriter.flush = flush  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    writer.BATCH_REPORTS = BATCH_REPORTS
    stall_after_first_batch()
    researchstore(args=argv, prog_name="researchstore")


if __name__ == "__main__":
    main(sys.argv[1:])
