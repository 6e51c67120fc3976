"""A worker's batch function that dies, as a crash inside a parser would.

Imported by name in the worker processes the test starts (spawned workers
import what they run), so it lives in a module of its own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from researchstore.ingest import workers

#: A file this module creates just before it kills its worker, when set.
DIED_ENV = "RESEARCHSTORE_TEST_DIED_FILE"


def prepare_batch_or_die(root: Path, jobs: list[Any], *args: Any) -> list[Any]:
    """Kill this worker process when the batch holds a report named ``poison``."""
    if any("poison" in report.key for report, _, _ in jobs):
        if marker := os.environ.get(DIED_ENV):
            Path(marker).touch()
        os._exit(70)
    return workers.prepare_batch(root, jobs, *args)
