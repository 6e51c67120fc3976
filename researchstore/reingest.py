"""The scheduled re-ingest job: refresh every directory source of a store.

Each source is walked again: unchanged reports keep their ids, modified ones
are replaced with new ids (their old chunks go to the forwarding record),
new ones are added and vanished ones removed. One run at a time: the store's
writer lock is taken without waiting, and a second run is told who holds it.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from researchstore.errors import InvalidInput
from researchstore.ingest.pipeline import ingest_source
from researchstore.ingest.summary import IngestSummary
from researchstore.store import Store


def reingest(
    store: Store,
    *,
    source: str | None = None,
    only: Sequence[str] | None = None,
    progress: bool | None = None,
) -> list[IngestSummary]:
    """Refresh every directory source (or only ``source``); one summary each.

    ``only`` names report paths (relative to the source root) to refresh
    instead of walking the whole tree, e.g. from a publishing hook.
    """
    with store.writing(wait=False):
        with store.reading() as conn:
            rows = conn.execute(
                "SELECT name, root, kind FROM sources WHERE kind IN ('directory', 'files') "
                "ORDER BY name"
            ).fetchall()
        if source is not None:
            rows = [row for row in rows if row["name"] == source]
            if not rows:
                raise InvalidInput(f"no source named {source!r} to refresh", field="source")
        summaries = []
        for name, root, kind in rows:
            if not Path(root).is_dir():
                summary = IngestSummary(source=name, version_id="")
                summary.failed = 1
                summary.failures.append(
                    {
                        "report": "*",
                        "reason": f"source root {root} is not a directory; nothing was changed",
                    }
                )
                summaries.append(summary)
                continue
            keys = only
            if kind == "files" and keys is None:
                # Single files ingested one by one: refresh them by name,
                # never walk the file system from their common root.
                with store.reading() as conn:
                    keys = [
                        row["key"]
                        for row in conn.execute(
                            "SELECT r.key FROM reports r JOIN sources s ON s.id = r.source_id "
                            "WHERE s.name = ?",
                            (name,),
                        )
                    ]
            summaries.append(
                ingest_source(
                    store,
                    Path(root),
                    name=name,
                    remove_missing=True,
                    only=keys,
                    kind=kind,
                    progress=progress,
                )
            )
        return summaries


def run_every(
    interval: float, run_once: Callable[[], None], *, stop: threading.Event | None = None
) -> None:
    """Call ``run_once`` now and then every ``interval`` seconds until stopped.

    SIGTERM and SIGINT end the loop between runs (never in the middle of
    one: a run is cut short only by the kill that no handler can catch,
    and the next run repairs that).
    """
    stop = stop or threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {
        signum: signal.signal(signum, request_stop) for signum in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        while not stop.is_set():
            started = time.monotonic()
            run_once()
            stop.wait(max(0.0, interval - (time.monotonic() - started)))
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
