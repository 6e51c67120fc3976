"""Prepare reports (read, parse, chunk) in worker processes, in order.

Parsing is pure CPU work with no shared state, so on a machine with more
than one core a large run hands it to a pool of worker processes while the
main process writes SQLite and feeds the index. Results come back in the
order asked, through a bounded window, so memory stays flat however large
the source. A worker that dies on a report fails that report alone.

A report may take ``parse_seconds()`` per file (60 s by default,
``RESEARCHSTORE_PARSE_SECONDS`` sets another): past that, its worker is
killed (SIGALRM, whose default ends the process even inside a parser's C
code), replaced, and the report fails alone as ``parse_timeout``. The bound
holds where reports are prepared in workers: runs of many reports, and
any run holding a file of ``ISOLATE_BYTES`` or more; smaller files are
prepared in the run's own process, where nothing can stop a parser.

Workers never outlive the run: each asks the kernel to kill it when its
parent dies (``stay_with_parent``), however the parent ends, kill -9
included; with them goes multiprocessing's resource tracker, which lives as
long as any of them holds its pipe. Ctrl-C reaches the whole foreground
process group: workers ignore it and leave the stop to the parent.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Generator, Iterable, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from researchstore.errors import InvalidInput
from researchstore.ingest.prepare import PreparedReport, ReportError, prepare_report

if TYPE_CHECKING:
    from researchstore.ingest.discovery import ReportSource
    from researchstore.ingest.writer import KnownReport

#: Below this many reports to prepare, starting workers costs more than it saves.
PARALLEL_MIN_REPORTS = 100
#: A run holding a file this large prepares in a worker however few its
#: reports, under the time bound: below it, the parsers' bounds (size,
#: nesting, attributes, sentences) keep the worst page known to a few seconds.
ISOLATE_BYTES = 1_000_000
#: How long one file may take to prepare, in seconds, unless
#: ``PARSE_SECONDS_ENV`` says otherwise (``parse_seconds``).
PARSE_SECONDS = 60.0
PARSE_SECONDS_ENV = "RESEARCHSTORE_PARSE_SECONDS"
#: Batches in flight per worker: enough to keep workers busy, few enough
#: that memory does not grow with the source.
WINDOW_PER_WORKER = 4
#: Reports go to a worker in batches of up to this many files (a report with
#: more goes alone). Each hand-over costs the main process about half a
#: millisecond (a future, pickling, waking its threads): more than a small
#: report takes to prepare, and the main process is the busier one.
BATCH_FILES = 8

Task = tuple["ReportSource", "KnownReport | None", str]  # (report, known, signature)

#: prctl(2)'s request for a signal when the parent dies (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
#: Where the kernel cannot be asked, how often a worker looks for its parent.
_PARENT_POLL_SECONDS = 0.5


def stay_with_parent(parent_pid: int) -> None:
    """Worker initializer: die with the parent process, leave SIGINT to it, and
    die of SIGALRM (``prepare_batch``'s time bound).

    Without this a worker whose parent was killed waits for ever on a queue
    whose write end it holds itself, and keeps the resource tracker alive.
    A worker starts with SIGINT blocked (``_sigint_held``): it is ignored
    here before it is let through, so a Ctrl-C while it starts is no
    traceback either.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the time bound ends the worker
    if not _kill_me_when_my_parent_dies():
        threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()
    if os.getppid() != parent_pid:  # it died before the request took effect
        os._exit(1)


def _kill_me_when_my_parent_dies() -> bool:
    """Ask the kernel (Linux) for SIGKILL when the parent dies; False if it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


@contextmanager
def _sigint_held() -> Iterator[None]:
    """Hold SIGINT back from this thread while it starts workers.

    A process starts with its parent's blocked signals, so a worker starts
    with SIGINT blocked until it ignores it. Here a SIGINT waits, and is
    handled as soon as the workers have started (as multiprocessing does
    for its resource tracker).
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _exit_when_orphaned(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(_PARENT_POLL_SECONDS)
    os._exit(1)


@contextmanager
def _main_module_hidden() -> Iterator[None]:
    """Start workers without re-running the caller's script in each of them.

    A spawned worker imports the parent's ``__main__`` first; a script that
    calls ``Library.ingest`` at top level (no ``if __name__ == "__main__"``
    guard) would then run again inside every worker. Workers need nothing
    from ``__main__``, so it is hidden while they start (they start inside
    ``submit``, in the calling thread).
    """
    main = sys.modules.get("__main__")
    saved: dict[str, Any] = {
        name: main.__dict__[name]
        for name in ("__file__", "__spec__")
        if main is not None and name in main.__dict__
    }
    if main is not None:
        main.__dict__.pop("__file__", None)
        main.__dict__["__spec__"] = None
    try:
        yield
    finally:
        if main is not None:
            main.__dict__.update(saved)


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def prepare_one(
    root: Path, report: ReportSource, existing_id: int | None, signature: str, chunk_tokens: int
) -> PreparedReport | str:
    """Prepare one report; a report that cannot be prepared gives the reason."""
    try:
        prepared = prepare_report(
            root, report, existing_id=existing_id, signature=signature, chunk_tokens=chunk_tokens
        )
    except (ReportError, OSError) as error:
        return str(error)
    for document in prepared.documents:
        # The writer needs the metadata and the chunks, not the parse tree:
        # do not carry blocks and segments across the process boundary.
        document.parsed.blocks = []
        document.parsed.segments = []
    return prepared


Job = tuple["ReportSource", "int | None", str]  # (report, existing id, signature)


def prepare_batch(
    root: Path, jobs: list[Job], chunk_tokens: int, seconds: float | None = None
) -> list[PreparedReport | str]:
    """Prepare reports in a worker, one outcome each, in order.

    With ``seconds``, a report that takes longer than that per file ends
    this process: call it in a worker only (``stay_with_parent``).
    """
    outcomes: list[PreparedReport | str] = []
    for job in jobs:
        with _alarm(None if seconds is None else time_allowed(job[0], seconds)):
            outcomes.append(prepare_one(root, *job, chunk_tokens))
    return outcomes


def time_allowed(report: ReportSource, seconds: float) -> float:
    """How long a report may take to prepare: ``seconds`` per file."""
    return seconds * max(1, len(report.files))


@contextmanager
def _alarm(seconds: float | None) -> Iterator[None]:
    """SIGALRM for this process after ``seconds`` (None: never), unless the block ends first."""
    if seconds is None or not hasattr(signal, "setitimer"):
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def parse_seconds(environ: Mapping[str, str] | None = None) -> float | None:
    """How long one file may take to prepare: ``PARSE_SECONDS_ENV`` if set
    (``off`` or ``0``: no bound), else ``PARSE_SECONDS``."""
    value = (os.environ if environ is None else environ).get(PARSE_SECONDS_ENV, "").strip()
    if not value:
        return PARSE_SECONDS
    if value.lower() in ("off", "0"):
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < 10**6:
        raise InvalidInput(
            f"{PARSE_SECONDS_ENV} must be a number of seconds, or off; got {value!r}",
            field=PARSE_SECONDS_ENV,
        )
    return seconds


def largest_file(root: Path, tasks: Iterable[Task]) -> int:
    """The size of the largest file the tasks' reports hold (0 for one not found)."""
    largest = 0
    for report, _, _ in tasks:
        for path in report.files:
            try:
                largest = max(largest, os.stat(root / path).st_size)
            except OSError:
                continue
    return largest


def batches(tasks: Iterable[Task]) -> Iterator[list[Task]]:
    """Consecutive tasks in groups of up to ``BATCH_FILES`` files, in order."""
    batch: list[Task] = []
    files = 0
    for task in tasks:
        size = max(1, len(task[0].files))
        if batch and files + size > BATCH_FILES:
            yield batch
            batch, files = [], 0
        batch.append(task)
        files += size
    if batch:
        yield batch


def prepare_in_order(
    root: Path,
    tasks: Iterable[Task],
    *,
    chunk_tokens: int,
    workers: int,
    seconds: float | None = None,
) -> Generator[tuple[Task, PreparedReport | str], None, None]:
    """Yield each task with its prepared report (or the reason it failed), in order.

    In ``workers`` processes (0: in this one, with no time bound), each
    report given ``seconds`` per file (None: no bound).

    Close the generator when done with it (``contextlib.closing``): that
    shuts the workers down, also when the caller stopped early (reports not
    yet started are dropped; those being parsed are let finish).
    """
    if workers < 1:
        for task in tasks:
            report, known, signature = task
            yield (
                task,
                prepare_one(
                    root, report, known.report_id if known else None, signature, chunk_tokens
                ),
            )
        return
    pending = batches(tasks)
    context = multiprocessing.get_context("spawn")  # never fork a process holding Tantivy threads

    def new_pool() -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=workers,
            mp_context=context,
            initializer=stay_with_parent,
            initargs=(os.getpid(),),
        )

    pool = new_pool()
    window: deque[tuple[list[Task], Future[list[PreparedReport | str]]]] = deque()

    def submit(batch: list[Task]) -> None:
        jobs = [(report, known.report_id if known else None, sig) for report, known, sig in batch]
        future: Future[list[PreparedReport | str]]
        try:
            with _main_module_hidden(), _sigint_held():  # a submit may start a worker
                future = pool.submit(prepare_batch, root, jobs, chunk_tokens, seconds)
        except BrokenProcessPool as broken:
            # A worker died after the last result was read: the batch fails
            # as one in flight would, and is retried below like them.
            future = Future()
            future.set_exception(broken)
        window.append((batch, future))

    try:
        for batch in pending:
            submit(batch)
            if len(window) >= workers * WINDOW_PER_WORKER:
                break
        while window:
            batch, future = window.popleft()
            try:
                outcomes = future.result()
            except BrokenProcessPool:
                # A worker died (a crash inside a parser, or past its time)
                # and took the pool with it. Retry this batch's reports one
                # at a time to learn which one was the culprit, then
                # resubmit what was in flight.
                in_flight = [waiting for waiting, _ in window]
                window.clear()
                pool.shutdown(wait=False, cancel_futures=True)
                pool = new_pool()
                outcomes = []
                for task in batch:
                    submit([task])
                    started = time.monotonic()
                    try:
                        outcomes.extend(window.pop()[1].result())
                    except BrokenProcessPool:
                        waited = time.monotonic() - started
                        outcomes.append(_why_it_died(task[0], waited, seconds))
                        pool.shutdown(wait=False, cancel_futures=True)
                        pool = new_pool()
                for waiting in in_flight:
                    submit(waiting)
            next_batch = next(pending, None)
            if next_batch is not None:
                submit(next_batch)
            yield from zip(batch, outcomes, strict=True)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _why_it_died(report: ReportSource, waited: float, seconds: float | None) -> str:
    """The reason a report whose worker died fails with.

    Its worker was started for it alone: one that died once the report's
    time was up (the time counted from before the worker started) was
    ended by the time bound.
    """
    if seconds is not None and waited >= time_allowed(report, seconds):
        allowed = time_allowed(report, seconds)
        return (
            f"parse_timeout: preparing this report took longer than {allowed:g} s "
            f"({seconds:g} s per file; {PARSE_SECONDS_ENV} sets it)"
        )
    return "the parser process died while reading this report"
