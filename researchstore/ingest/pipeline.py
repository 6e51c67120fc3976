"""One ingest run: walk a source, prepare each report, write it, follow with the indexes.

Per report: unchanged (same file metadata, or same content) → untouched, its
ids stay; modified → replaced whole with new ids in one transaction; new →
inserted; gone (when asked to remove them) → deleted. Each run is a new
source version. Preparation (``prepare.py``) runs in worker processes on
large runs; the writing is ``writer.py``'s. A file that cannot be read or
parsed is recorded with its reason and never stops the run.

A run stopped on its way (Ctrl-C, SIGTERM turned into ``Interrupted``, or
any error) keeps what it committed, shuts its workers down and is recorded
as ``interrupted`` with its counts so far; the next run carries on.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from contextlib import ExitStack, closing, suppress
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from researchstore.errors import Interrupted, InvalidInput
from researchstore.ingest import workers
from researchstore.ingest.discovery import ReportSource, discover, discover_keys, report_signature
from researchstore.ingest.parsers import SUPPORTED_SUFFIXES
from researchstore.ingest.prepare import PreparedReport
from researchstore.ingest.summary import EventListener, IngestSummary
from researchstore.ingest.writer import (
    KnownReport,
    ReportWriter,
    begin_version,
    existing_reports,
    finish_version,
    record_link_choice,
    record_signature,
    remove_reports,
)
from researchstore.progress import progress_bar
from researchstore.storage.db import last_pending_seq

if TYPE_CHECKING:
    from researchstore.store import Store


def ingest_source(
    store: Store,
    root: Path,
    *,
    name: str | None = None,
    remove_missing: bool = False,
    only: Sequence[str] | None = None,
    kind: str = "directory",
    wait: bool = False,
    progress: bool | None = None,
    move_root: bool = False,
    follow_external_links: bool | None = None,
    on_event: EventListener | None = None,
) -> IngestSummary:
    """Ingest (or refresh) every report under ``root`` as source ``name``.

    With ``only``, just those report keys (paths relative to ``root``) are
    looked at: the cost is then that of the named reports, not of the tree.
    A source of kind ``files`` is a set of single files, refreshed by name,
    never walked. A source keeps its root unless ``move_root`` is given.
    ``follow_external_links`` says whether symbolic links to files outside
    ``root`` are read; it is recorded with the source, and None keeps the
    source's recorded choice (no, for a new source). ``on_event`` hears of
    each report written, removed or failed, and of the run's end
    (``summary.IngestSummary``).
    """
    if not root.is_dir():
        raise InvalidInput(f"not a directory: {root}", field="source_dir")
    root = root.resolve()
    try:
        str(root).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(
            f"the source path is not valid UTF-8: {root}", field="source_dir"
        ) from None
    name = name or root.name
    seconds = workers.parse_seconds()
    started = time.perf_counter()
    with store.writing(wait=wait), ExitStack() as run:
        store.sync_index(wait=True)
        source_id, version_rowid, version_id, moved_from = begin_version(
            store, root, name, kind, move_root=move_root
        )
        follow = _link_choice(store, source_id, follow_external_links)
        summary = IngestSummary(source=name, version_id=version_id, on_event=on_event)
        run.push(partial(_record_stop, store, version_rowid, summary, started))
        if moved_from is not None:
            summary.emit("moved", root=str(root), moved_from=moved_from)
        writer = ReportWriter(store, source_id, name, version_rowid, summary)
        if only is None:
            found = discover(root, follow_external_links=follow)
            existing = existing_reports(store, source_id)
        else:
            found = discover_keys(root, only, follow_external_links=follow)
            existing = existing_reports(store, source_id, keys=[key.strip("/") for key in only])
        reports = found.reports
        summary.skipped.extend(found.passed_over)
        for key in [key for key in existing if found.was_unread(key)]:
            del existing[key]  # not looked at: kept as it is, never removed
        with progress_bar(f"Ingesting {name}", total=len(reports), enabled=progress) as bar:
            tasks = []
            for report in reports:
                known = existing.pop(report.key, None)
                signature = report_signature(root, report)
                if known is not None and known.signature == signature:
                    summary.unchanged += 1
                    bar.advance()
                else:
                    tasks.append((report, known, signature))
            prepared = workers.prepare_in_order(
                root,
                tasks,
                chunk_tokens=store.chunk_tokens,
                workers=_worker_count(root, tasks),
                seconds=seconds,
            )
            # The workers stop with the run, however it ends.
            for (report, known, signature), outcome in run.enter_context(closing(prepared)):
                _accept(store, report, known, signature, outcome, writer, summary)
                bar.advance()
            writer.flush()
            if remove_missing and existing and not reports and only is None:
                # An empty root is far more often an unmounted disk than a
                # source whose every report was deleted on purpose.
                summary.refuse(
                    "*",
                    f"no reports found under {root}; refusing to remove "
                    f"all {len(existing)} reports of source {name!r}",
                )
            elif remove_missing and existing:
                gone = [report_id for report_id, _, _ in existing.values()]
                remove_reports(store, gone, version_rowid=version_rowid)
                for key, known in existing.items():
                    summary.count_removed(key, known.report_id)
            with store.reading() as conn:
                writer.last_seq = last_pending_seq(conn)
            writer.commit_index()
        summary.seconds = time.perf_counter() - started
        finish_version(store, version_rowid, summary)
        summary.finish(summary.status)
    return summary


def _worker_count(root: Path, tasks: list[workers.Task]) -> int:
    """How many worker processes prepare the run's reports (0: this process does).

    Many reports go to a pool; a few, to one worker when a file among them
    is large enough that only a worker's time bound can stop its parser.
    """
    if workers.PARALLEL_MIN_REPORTS <= len(tasks):
        return workers.default_workers()
    return 1 if workers.largest_file(root, tasks) >= workers.ISOLATE_BYTES else 0


def _record_stop(
    store: Store,
    version_rowid: int,
    summary: IngestSummary,
    started: float,
    error_type: type[BaseException] | None,
    error: BaseException | None,
    traceback: TracebackType | None,
) -> bool:
    """On the way out of a run stopped before its end: record it ``interrupted``.

    An exit callback of the run's ``ExitStack``; the error goes on up.
    """
    if error is None:
        return False
    if isinstance(error, Interrupted):
        stopped = str(error)
    elif isinstance(error, KeyboardInterrupt):
        stopped = "interrupted by SIGINT"
    else:
        stopped = f"stopped by an error: {error!r}"
    summary.seconds = time.perf_counter() - started
    # When the store itself is what failed, the version stays "running" and
    # the next run marks it interrupted.
    with suppress(sqlite3.Error):
        finish_version(store, version_rowid, summary, status="interrupted", stopped=stopped)
    summary.finish("interrupted", stopped=stopped)
    return False


def ingest_file(
    store: Store, path: Path, *, name: str = "local-files", progress: bool | None = None
) -> IngestSummary:
    """Ingest one local file as a single-file report of source ``name``.

    The report's key is the file's absolute path, so files from different
    folders never collide and ingesting the same file again refreshes it.
    The source is of kind ``files``: a re-ingest refreshes its files by name
    and never walks the file system from its root.
    """
    path = path.resolve()
    if not path.is_file():
        raise InvalidInput(f"not a file: {path}", field="path")
    if path.suffix.lower() not in SUPPORTED_SUFFIXES:
        raise InvalidInput(
            f"unsupported file type {path.suffix!r}; supported: "
            f"{', '.join(sorted(SUPPORTED_SUFFIXES))}",
            field="path",
        )
    root = Path(path.anchor)
    return ingest_source(
        store,
        root,
        name=name,
        only=[path.relative_to(root).as_posix()],
        kind="files",
        wait=True,
        progress=progress,
    )


def _link_choice(store: Store, source_id: int, follow: bool | None) -> bool:
    """Record whether the source follows links outside its root; None reads the record."""
    with store.reading() as conn:
        recorded = bool(
            conn.execute(
                "SELECT follow_external_links FROM sources WHERE id = ?", (source_id,)
            ).fetchone()[0]
        )
    if follow is None or follow == recorded:
        return recorded
    with store.transaction() as conn:
        record_link_choice(conn, source_id, follow)
    return follow


def _accept(
    store: Store,
    report: ReportSource,
    known: KnownReport | None,
    signature: str,
    outcome: PreparedReport | str,
    writer: ReportWriter,
    summary: IngestSummary,
) -> None:
    """Hand a prepared report to the writer, or record why it failed."""
    if isinstance(outcome, str):
        summary.refuse(report.key, outcome, report_id=known.report_id if known else None)
        return
    if known is not None and known.content_hash == outcome.content_hash:
        # Touched but not changed: remember the new file times only.
        with store.transaction() as conn:
            record_signature(conn, known.report_id, signature)
        summary.unchanged += 1
        return
    writer.add(outcome)
