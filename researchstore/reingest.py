"""The scheduled re-ingest job: refresh every directory source of a store.

Each source is walked again: unchanged reports keep their ids, modified ones
are replaced with new ids (their old chunks go to the forwarding record),
new ones are added and vanished ones removed. One run at a time: the store's
writer lock is taken without waiting, and a second run is told who holds it.

A source whose root is gone, or now leads somewhere else, is not touched
(its reports stay) and fails alone with the reason; the other sources are
refreshed. A source gone for good is removed on purpose
(``researchstore remove-source``, ``writer.remove_source``).

SIGTERM and SIGINT stop a run where it is (``StopSignals``): what was
committed stays, the run is recorded as interrupted and the next one
carries on.
"""

from __future__ import annotations

import shlex
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from researchstore.errors import Interrupted, InvalidInput
from researchstore.ingest.discovery import REPORT_FILE, discover_keys
from researchstore.ingest.pipeline import ingest_source
from researchstore.ingest.summary import EventListener, IngestSummary
from researchstore.store import Store

#: The signals that stop a run, or a schedule of runs, cleanly.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def reingest(
    store: Store,
    *,
    source: str | None = None,
    only: Sequence[str] | None = None,
    progress: bool | None = None,
    on_event: EventListener | None = None,
) -> list[IngestSummary]:
    """Refresh every directory source (or only ``source``); one summary each.

    ``only`` names report paths (relative to the source root) to refresh
    instead of walking the whole tree, e.g. from a publishing hook; a path
    that names no report of any source refreshed (on disk or in the store)
    is refused before anything changes. ``on_event`` hears of each report
    written, removed or failed, and of each source's end.
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
        if only is not None:
            check_only(store, rows, only)
        summaries = []
        for name, root, kind in rows:
            problem = root_problem(Path(root))
            if problem is not None and not Path(root).is_dir():
                problem += (
                    " (if it is gone for good, remove the source and its reports: "
                    f"researchstore remove-source {shlex.quote(str(store.path))} "
                    f"{shlex.quote(name)})"
                )
            if problem is not None:
                summary = IngestSummary(source=name, version_id="", on_event=on_event)
                summary.refuse("*", problem)
                summary.finish("failed")
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
                    on_event=on_event,
                )
            )
        return summaries


def root_problem(root: Path) -> str | None:
    """Why a source's stored root cannot be refreshed as it is, or None."""
    if not root.is_dir():
        return f"source root {root} is not a directory; nothing was changed"
    resolved = root.resolve()
    if resolved != root:
        # Walking it would remove every report not found at the new place.
        return (
            f"source root {root} now leads to {resolved}; nothing was changed (if the "
            f"source has moved there, say so: researchstore ingest STORE {resolved} "
            "--name NAME --move-root)"
        )
    return None


def check_only(store: Store, rows: Sequence[Any], only: Sequence[str]) -> None:
    """Refuse ``only`` paths that name no report of any of these sources.

    A path names a report when one is there on disk (a report directory or
    a supported file, not inside another report), or when the store holds a
    report of that path (gone from disk: the run removes it).
    """
    keys = list(dict.fromkeys(key.strip("/") for key in only))
    named: set[str] = set()
    reasons: dict[str, str] = {}
    marks = ",".join("?" * len(keys))
    with store.reading() as conn:
        for row in rows:
            named.update(
                stored["key"]
                for stored in conn.execute(
                    "SELECT r.key FROM reports r JOIN sources s ON s.id = r.source_id "
                    f"WHERE s.name = ? AND r.key IN ({marks})",
                    (row["name"], *keys),
                )
            )
    for row in rows:
        root = Path(row["root"])
        if not root.is_dir():
            continue
        found = discover_keys(root, keys)
        for report in found.reports:
            holder = _report_holding(root, report.key) if row["kind"] == "directory" else None
            if holder is None:
                named.add(report.key)
            else:
                reasons.setdefault(report.key, f"it is inside report {holder!r}; name that")
        for item in found.passed_over:
            reasons.setdefault(item["path"], item["reason"])
    unnamed = [key for key in keys if key not in named]
    if unnamed:
        where = f"source {rows[0]['name']!r}" if len(rows) == 1 else "any source"
        listed = "; ".join(f"{key or '/'!r}: {_reason(reasons, key)}" for key in unnamed)
        raise InvalidInput(f"--only names no report of {where}: {listed}", field="only")


def _reason(reasons: dict[str, str], key: str) -> str:
    """Why ``key`` names nothing: its own reason, or that of a folder above it."""
    path = key or "/"
    while path:
        if path in reasons:
            return reasons[path]
        path = path.rpartition("/")[0]
    return "nothing there, and the store holds no report of that path"


def _report_holding(root: Path, key: str) -> str | None:
    """The report directory that ``key`` lies inside, if any (its files are documents)."""
    parts = key.split("/")
    for depth in range(1, len(parts)):
        folder = "/".join(parts[:depth])
        if (root / folder / REPORT_FILE).is_file():
            return folder
    return None


class StopSignals:
    """SIGTERM and SIGINT as a clean stop, while the ``with`` block lasts.

    The first signal sets ``stopped``; unless the work is ``idle()`` it also
    raises ``Interrupted`` where the work is, so a run stops at once: the
    SQLite transaction in flight rolls back, the run records itself as
    interrupted and its parser workers are shut down. Later signals are
    ignored, so that cleanup finishes. Main thread only (as every handler).
    """

    def __init__(self, stopped: threading.Event | None = None) -> None:
        self.stopped = stopped or threading.Event()
        self._idle = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        self._previous = {signum: signal.signal(signum, self._handle) for signum in STOP_SIGNALS}
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    @contextmanager
    def idle(self) -> Iterator[None]:
        """Between runs: a signal only sets ``stopped``; nothing is interrupted."""
        self._idle = True
        try:
            yield
        finally:
            self._idle = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.stopped.is_set():
            return
        self.stopped.set()
        if not self._idle:
            raise Interrupted(signum)


def run_every(
    interval: float, run_once: Callable[[], None], *, stop: threading.Event | None = None
) -> None:
    """Call ``run_once`` now and then every ``interval`` seconds until stopped.

    SIGTERM and SIGINT between runs end the loop; during a run they stop it
    where it is and ``Interrupted`` goes on up (``StopSignals``).
    """
    with StopSignals(stop) as signals:
        while not signals.stopped.is_set():
            started = time.monotonic()
            run_once()
            with signals.idle():
                signals.stopped.wait(max(0.0, interval - (time.monotonic() - started)))
