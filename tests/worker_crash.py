"""A worker's batch function that dies, as a crash inside a parser would.

Imported by name in the worker processes the test starts (spawned workers
import what they run), so it lives in a module of its own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from researchstore.ingest import workers


def prepare_batch_or_die(root: Path, jobs: list[Any], *args: Any) -> list[Any]:
    """Kill this worker process when the batch holds a report named ``poison``."""
    if any("poison" in report.key for report, _, _ in jobs):
        os._exit(70)
    return workers.prepare_batch(root, jobs, *args)
