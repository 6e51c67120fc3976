"""Worker processes for the HTTP server: the read tools' calls on every core.

A Python process runs one thread of Python at a time, so a server that
answers every call in its own threads uses one core however many its machine
has: in ``bench/bench_serving.py`` 16 clients got no more calls a second than
one. ``WorkerPool`` forks worker processes when ``serve`` starts, before the
server has a thread or has opened anything. Each worker opens the store
read-only and answers the read tools' calls the server sends it, with the
same ``ToolCalls`` as the server's own threads (a pool for lookups, turns for
searches). The server keeps everything else: HTTP, API keys, sessions, each
key's turns, the calls that write, and the repair of a damaged index (a
worker hands such a call back, and reopens its indexes once it is repaired).
A worker that ends leaves its calls to the others, and once none is left the
server answers every call itself.

Server and worker speak over a socket pair, in frames: a 4-byte length, then
a pickle of a tuple. To a worker: ``("go",)`` (the store is ready to open),
``("call", id, principal, tool, arguments, request_id)``, ``("reopen",)``.
From one: ``("ready", pid)`` or ``("failed", message)``, then
``("answer", id, outcome, answer)`` or ``("repair", id)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import pickle
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from researchstore.principal import Principal
from researchstore.serving import (
    LOOKUPS,
    SEARCH_TURN_S,
    SEARCHES,
    WORKER_THREADS,
    answer_as,
    search_threads_default,
    tune_for_serving,
)

_LENGTH = struct.Struct("!I")
#: How long ``start`` waits for the workers to open the store.
START_TIMEOUT_S = 300.0
#: How long ``close`` waits for a worker to end before it is killed.
CLOSE_TIMEOUT_S = 5.0
#: A call in flight for longer than this is a long one (``WorkerPool._pick``):
#: lookups take well under a millisecond, searches a few.
LONG_CALL_S = 0.1
#: The CPU priority (nice value) of a worker thread whose call has run longer
#: than ``serving.SEARCH_TURN_S``: every other call comes first.
LONG_CALL_NICE = 15
#: The CPU priority (nice value) of the threads that run searches: a lookup
#: (nice 0) that wakes while searches hold every core runs first. Lookups
#: take a fraction of a millisecond of CPU, so searches lose little to them.
SEARCH_NICE = 8
#: Lookups in flight in the lookups' lane beyond which one more goes to the
#: least busy worker (``WorkerPool._pick``).
LANE_DEPTH = 4
#: Above this many bytes waiting to be sent to a worker, a call waits for them.
_SEND_BUFFER_BYTES = 1 << 20


def default_workers() -> int:
    """One worker per core, the lookups' lane among them (``WorkerPool._pick``), so
    that searches never hold every core: the server process, the lane and the
    clients on the same machine keep one; none on a one-core machine, where
    workers would only add work."""
    cores = os.cpu_count() or 1
    return cores if cores > 1 else 0


class NoWorker(Exception):
    """No worker is left: the server answers the call itself."""


class WorkerGone(Exception):
    """The worker answering a call ended before it answered."""


class RepairHere(Exception):
    """The worker met a damaged index: the server, which may write, repairs it."""


class _HandBack(Exception):
    """Raised in a worker by a call that met a damaged index (``call_tool``'s
    ``on_damage``): the call goes back to the server."""


def _frame(message: tuple[Any, ...]) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


def _recv_blocking(sock: socket.socket, timeout_s: float | None = None) -> Any:
    """One frame, read from a blocking socket; None at its end (or past ``timeout_s``)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    buffer = b""
    wanted = _LENGTH.size
    length = None
    while True:
        while len(buffer) < wanted:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([sock], [], [], left)[0]:
                    return None
            try:
                data = sock.recv(wanted - len(buffer))
            except OSError:
                return None
            if not data:
                return None
            buffer += data
        if length is None:
            (length,) = _LENGTH.unpack(buffer[: _LENGTH.size])
            buffer = buffer[_LENGTH.size :]
            wanted = length
            continue
        return pickle.loads(buffer[:length])


async def _recv(reader: asyncio.StreamReader) -> Any:
    """One frame from ``reader``; None at its end."""
    try:
        (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
        return pickle.loads(await reader.readexactly(length))
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        return None


def _threads_now() -> int:
    """This process's threads, native ones included (a fork copies only the caller)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


# -- the server's side ---------------------------------------------------------------


@dataclass(eq=False)
class _Worker:
    pid: int
    sock: socket.socket
    number: int
    alive: bool = True
    ended: str = ""
    pending: dict[int, asyncio.Future[tuple[Any, ...]]] = field(default_factory=dict)
    #: When each pending call was sent (``time.monotonic()``), by id.
    sent: dict[int, float] = field(default_factory=dict)
    writer: asyncio.StreamWriter | None = None
    reader_task: asyncio.Task[None] | None = None


class WorkerPool:
    """Worker processes answering the read tools' calls of one served store.

    ``fork`` makes them (before the server starts a thread), ``start`` lets
    them open the store once the server has opened it, ``call`` sends one
    call to the worker with the fewest in flight, ``close`` ends them.
    """

    def __init__(self, workers: list[_Worker], *, log: Any = None) -> None:
        self._workers = workers
        self._ids = itertools.count(1)
        self._log = log or sys.stderr
        self._closed = False
        self._connected = False
        self._connecting: asyncio.Lock | None = None

    @classmethod
    def fork(cls, store_path: str | os.PathLike[str], *, profile: str, count: int) -> WorkerPool:
        """``count`` worker processes for the store at ``store_path``, each waiting
        for ``start``. Only a process with one thread can fork safely: a fork
        copies the calling thread alone, and a lock another thread held stays
        held in the copy."""
        if _threads_now() > 1:
            raise RuntimeError("worker processes must be forked before any thread starts")
        sys.stdout.flush()
        sys.stderr.flush()
        workers: list[_Worker] = []
        try:
            for number in range(1, count + 1):
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                pid = os.fork()
                if pid == 0:  # pragma: no cover - the worker (its coverage is not collected)
                    ours.close()
                    for other in workers:
                        other.sock.close()
                    _worker_main(theirs, Path(store_path), profile)
                theirs.close()
                workers.append(_Worker(pid=pid, sock=ours, number=number))
        except BaseException:
            cls(workers).close()
            raise
        return cls(workers)

    @property
    def live(self) -> int:
        """How many workers are answering calls."""
        return sum(worker.alive for worker in self._workers)

    @property
    def pids(self) -> list[int]:
        return [worker.pid for worker in self._workers if worker.alive]

    def start(self, timeout_s: float = START_TIMEOUT_S) -> list[str]:
        """Let every worker open the store, and wait until each has; what went wrong."""
        problems: list[str] = []
        for worker in self._workers:
            try:
                worker.sock.sendall(_frame(("go",)))
            except OSError as error:
                self._lost(worker, f"it could not be started ({error})", tell=False)
        deadline = time.monotonic() + timeout_s
        for worker in self._workers:
            if not worker.alive:
                problems.append(f"worker process {worker.number} did not start: {worker.ended}")
                continue
            reply = _recv_blocking(worker.sock, max(0.0, deadline - time.monotonic()))
            if reply is None or reply[0] != "ready":
                why = reply[1] if reply is not None else "it did not open the store"
                self._lost(worker, why, tell=False)
                problems.append(f"worker process {worker.number} did not start: {why}")
        return problems

    async def call(
        self,
        principal: Principal,
        name: str,
        arguments: dict[str, Any],
        request_id: str | int | None,
    ) -> tuple[str, Any]:
        """How the call ended and its answer (``ToolCalls.here``'s), from a worker."""
        if not self._connected:
            await self._connect()
        # No wait from here to the write: a worker seen alive here is sent the call.
        worker = self._pick(name)
        writer = worker.writer
        assert writer is not None
        call_id = next(self._ids)
        future: asyncio.Future[tuple[Any, ...]] = asyncio.get_running_loop().create_future()
        worker.pending[call_id] = future
        worker.sent[call_id] = time.monotonic()
        try:
            writer.write(_frame(("call", call_id, principal, name, arguments, request_id)))
            if writer.transport.get_write_buffer_size() > _SEND_BUFFER_BYTES:
                await writer.drain()
            reply = await future
        except (ConnectionError, OSError) as error:
            raise WorkerGone(self._gone_message(worker, str(error))) from None
        finally:
            worker.pending.pop(call_id, None)
            worker.sent.pop(call_id, None)
        if reply[0] == "repair":
            raise RepairHere
        return reply[2], reply[3]

    async def reopen_indexes(self) -> None:
        """Every worker opens its indexes afresh (the server has repaired them)."""
        for worker in self._workers:
            if worker.alive and worker.writer is not None:
                with contextlib.suppress(ConnectionError, OSError):
                    worker.writer.write(_frame(("reopen",)))

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """End every worker: each ends once its socket closes; one that does not is killed."""
        if self._closed:
            return
        self._closed = True
        for worker in self._workers:
            worker.alive = False
            if worker.reader_task is not None:
                worker.reader_task.cancel()
            with contextlib.suppress(OSError):
                if worker.writer is not None:
                    worker.writer.transport.abort()
                worker.sock.close()
        deadline = time.monotonic() + timeout_s
        for worker in self._workers:
            while not _reaped(worker.pid):
                if time.monotonic() > deadline:
                    with contextlib.suppress(OSError):
                        os.kill(worker.pid, signal.SIGKILL)
                    with contextlib.suppress(OSError):
                        os.waitpid(worker.pid, 0)
                    break
                time.sleep(0.01)

    # -- inside -------------------------------------------------------------------

    def _pick(self, name: str) -> _Worker:
        """The worker to send a call of tool ``name`` to.

        A worker with a long call in flight gets no other while one without
        does: that call computes for as long as it runs (at a lower CPU
        priority), and calls beside it would wait for its interpreter lock;
        but when the only worker free is the lane, searches go to those with
        a long call, so that lookups never wait behind a search.
        Of the others, the first worker is the lookups' lane: lookups take
        well under a millisecond, and there they never wait behind a search
        holding the interpreter lock. Searches go to the rest (to the lane too
        when the rest have ``LANE_DEPTH`` more calls in flight than it), and so
        do lookups once ``LANE_DEPTH`` are waiting in the lane. Each time, the
        worker with the fewest calls in flight.
        """
        live = [worker for worker in self._workers if worker.alive]
        if not live:
            raise NoWorker
        if len(live) == 1:
            return live[0]
        long_ago = time.monotonic() - LONG_CALL_S
        free = [
            worker for worker in live if not any(sent < long_ago for sent in worker.sent.values())
        ] or live
        lane, rest = free[0], free[1:]
        if name in LOOKUPS and (not rest or len(lane.pending) < LANE_DEPTH):
            return lane
        if not rest:
            # The lane is the one worker free: a search goes to the least busy
            # of those with a long call (its thread outranks that call's),
            # rather than hold the lane's interpreter lock from the lookups.
            held = [worker for worker in live if worker not in free]
            if held and name not in LOOKUPS:
                return min(held, key=lambda worker: len(worker.pending))
            return lane
        least = min(rest, key=lambda worker: len(worker.pending))
        if name in LOOKUPS:
            return lane if len(lane.pending) <= len(least.pending) else least
        # A search goes to the lane only when the others are far busier.
        return lane if len(least.pending) > len(lane.pending) + LANE_DEPTH else least

    async def _connect(self) -> None:
        """Each worker's stream on this event loop, and a task reading its answers
        (which also sees it end)."""
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._connected:
                return
            loop = asyncio.get_running_loop()
            for worker in self._workers:
                if not worker.alive:
                    continue
                reader, writer = await asyncio.open_unix_connection(sock=worker.sock)
                worker.reader_task = loop.create_task(self._read_answers(worker, reader))
                worker.writer = writer
            self._connected = True

    async def _read_answers(self, worker: _Worker, reader: asyncio.StreamReader) -> None:
        while True:
            reply = await _recv(reader)
            if reply is None:
                break
            future = worker.pending.pop(reply[1], None)
            if future is not None and not future.done():
                future.set_result(reply)
        if not self._closed:
            self._lost(worker, "it ended")

    def _lost(self, worker: _Worker, why: str, *, tell: bool = True) -> None:
        """``worker`` answers no more calls; those it held fail with ``WorkerGone``.
        ``tell``: say so on the server's log (``start`` returns what it says)."""
        if not worker.alive:
            return
        worker.alive = False
        status = _exit_status(worker.pid)
        worker.ended = why + (f" ({status})" if status else "")
        for future in worker.pending.values():
            if not future.done():
                future.set_exception(WorkerGone(self._gone_message(worker, worker.ended)))
        worker.pending.clear()
        worker.sent.clear()
        with contextlib.suppress(OSError):
            if worker.writer is not None:
                worker.writer.transport.abort()
            worker.sock.close()
        if not tell:
            return
        left = self.live
        then = (
            f"its calls go to the other {left}"
            if left
            else "the server answers every call itself from now on"
        )
        with contextlib.suppress(OSError, ValueError):
            print(
                f"researchstore: worker process {worker.number} (pid {worker.pid}) stopped: "
                f"{worker.ended}; {then}",
                file=self._log,
                flush=True,
            )

    @staticmethod
    def _gone_message(worker: _Worker, why: str) -> str:
        return (
            f"the worker process answering this call (pid {worker.pid}) ended before it "
            f"answered: {why}. Make the call again"
        )


def _exit_status(pid: int) -> str:
    """How process ``pid`` ended, if it has (it is reaped here)."""
    for _ in range(20):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return ""
        if done:
            if os.WIFSIGNALED(status):
                return f"killed by signal {os.WTERMSIG(status)}"
            return f"exit code {os.waitstatus_to_exitcode(status)}"
        time.sleep(0.005)
    return ""


def _reaped(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return bool(done)


# -- the worker's side ---------------------------------------------------------------


def _worker_main(sock: socket.socket, store_path: Path, profile: str) -> None:  # pragma: no cover
    """A worker's whole life: it never returns to the code that forked it."""
    code = 0
    try:
        # Ctrl-C reaches the whole process group: the server stops its workers.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _serve_calls(sock, store_path, profile)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _serve_calls(sock: socket.socket, store_path: Path, profile: str) -> None:  # pragma: no cover
    from researchstore.catalogue import served_tools
    from researchstore.errors import ResearchStoreError
    from researchstore.store import Store

    if _recv_blocking(sock) is None:
        return  # the server ended before its store opened
    try:
        store = Store(store_path, progress=False, read_only=True)
    except ResearchStoreError as error:
        sock.sendall(_frame(("failed", error.message)))
        return
    except Exception as error:
        sock.sendall(_frame(("failed", f"{type(error).__name__}: {error}")))
        return
    with store:
        store.warm_query_model()
        calls = _WorkerCalls(store, served_tools(profile, "http"), sock)
        sock.sendall(_frame(("ready", os.getpid())))
        tune_for_serving()
        try:
            while True:
                message = _recv_blocking(sock)
                if message is None:
                    break
                if message[0] == "call":
                    calls.submit(*message[1:])
                elif message[0] == "reopen":
                    store.sync.open()
        finally:
            calls.shutdown()


@dataclass
class _Running:
    """A call running in one of a worker's threads (``_WorkerCalls``)."""

    started: float
    native_id: int
    #: Whether it holds a search turn.
    turn: bool
    #: Whether its thread's CPU priority has been lowered.
    lowered: bool = False


class _Threads:
    """Threads that take jobs in turn, made as needed up to ``size``.

    A job returns whether its thread may take another: one whose CPU priority
    was lowered for a long call, and cannot be raised back (only a privileged
    process can), ends, and the next job gets a new thread.
    """

    def __init__(self, size: int, name: str, *, nice: int = 0) -> None:
        import queue

        self._jobs: queue.SimpleQueue[tuple[Any, tuple[Any, ...]] | None] = queue.SimpleQueue()
        self._size = size
        self._name = name
        #: Each thread's CPU priority, set as it starts.
        self.nice = nice
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    def submit(self, job: Any, *args: Any) -> None:
        self._jobs.put((job, args))
        with self._lock:
            if self._idle or self._threads >= self._size:
                return
            self._threads += 1
        threading.Thread(target=self._run, name=self._name, daemon=True).start()

    def _run(self) -> None:
        if self.nice:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.nice)
        while True:
            with self._lock:
                self._idle += 1
            taken = self._jobs.get()
            with self._lock:
                self._idle -= 1
            if taken is None:
                break
            job, args = taken
            if job(*args) is False:
                break
        with self._lock:
            self._threads -= 1
            # A job may have come while this thread was ending, with no one idle.
            more = not self._jobs.empty() and not self._idle and self._threads < self._size
            if more:
                self._threads += 1
        if more:
            threading.Thread(target=self._run, name=self._name, daemon=True).start()

    def shutdown(self) -> None:
        with self._lock:
            count = self._threads
        for _ in range(count):
            self._jobs.put(None)


class _WorkerCalls:  # pragma: no cover - runs in the workers
    """A worker's calls, each in a thread, its answer sent from there.

    As in ``mcp_calls.ToolCalls``: lookups have threads of their own; a search
    first takes one of ``search_threads_default()`` turns, and one still
    running after ``SEARCH_TURN_S`` gives its turn up, so that a long search
    never holds the others behind it. A call running that long also has its
    thread's CPU priority lowered (``LONG_CALL_NICE``) until it ends: across
    processes there is no shared interpreter lock to slow it down, and a long
    call would otherwise take a whole core from every other session's calls.
    A keeper thread sees to both. Searches run in threads of their own at a
    lower priority (``SEARCH_NICE``), so that lookups, in whichever worker,
    come first when searches keep every core busy.
    """

    def __init__(self, store: Any, tools: dict[str, Any], sock: socket.socket) -> None:
        self.store = store
        self.tools = tools
        self.sock = sock
        self.lookups = LOOKUPS
        self.searches = SEARCHES
        self.turn_s = SEARCH_TURN_S
        self._lookups = _Threads(WORKER_THREADS, "researchstore-lookup")
        self._searches = _Threads(WORKER_THREADS, "researchstore-search", nice=SEARCH_NICE)
        self._others = _Threads(WORKER_THREADS, "researchstore-call")
        self._turns = threading.Semaphore(search_threads_default())
        #: The calls running in ``_others``' threads, by thread.
        self._running: dict[int, _Running] = {}
        self._running_lock = threading.Lock()
        self._busy = threading.Event()
        self._send_lock = threading.Lock()
        self._stopped = False
        threading.Thread(target=self._keep, name="researchstore-keeper", daemon=True).start()

    def submit(
        self, call_id: int, principal: Principal, name: str, arguments: Any, request_id: Any
    ) -> None:
        if name in self.lookups:
            self._lookups.submit(self._answer, call_id, principal, name, arguments, request_id)
        else:
            threads = self._searches if name in self.searches else self._others
            threads.submit(self._tracked, call_id, principal, name, arguments, request_id)

    def _tracked(
        self, call_id: int, principal: Principal, name: str, arguments: Any, request_id: Any
    ) -> bool:
        """``_answer``, seen by the keeper while it runs; whether its thread may go on."""
        turn = name in self.searches
        if turn:
            self._turns.acquire()
        ident = threading.get_ident()
        with self._running_lock:
            self._running[ident] = _Running(time.monotonic(), threading.get_native_id(), turn)
        self._busy.set()
        try:
            self._answer(call_id, principal, name, arguments, request_id)
        finally:
            with self._running_lock:
                running = self._running.pop(ident)
            if running.turn:
                self._turns.release()
        if running.lowered:
            try:
                # Back to its own threads' priority (a search's, or the rest's).
                own = self._searches if turn else self._others
                os.setpriority(os.PRIO_PROCESS, running.native_id, own.nice)
            except OSError:
                return False  # not allowed to raise it back: this thread ends
        return True

    def _answer(
        self, call_id: int, principal: Principal, name: str, arguments: Any, request_id: Any
    ) -> bool:
        from researchstore.errors import ResearchStoreError
        from researchstore.principal import acting_as
        from researchstore.tools import call_tool

        try:
            with acting_as(principal):
                envelope = call_tool(
                    self.store, name, arguments, tools=self.tools, on_damage=_hand_back
                )
            outcome = envelope["error"]["code"] if "error" in envelope else "ok"
            answer = answer_as(request_id, name, envelope)
            reply: tuple[Any, ...] = ("answer", call_id, outcome, answer)
        except _HandBack:
            reply = ("repair", call_id)
        except Exception as error:  # every call is answered
            envelope = ResearchStoreError(f"{type(error).__name__}: {error}").to_envelope()
            reply = ("answer", call_id, "internal", answer_as(request_id, name, envelope))
        frame = _frame(reply)
        with self._send_lock, contextlib.suppress(OSError):
            self.sock.sendall(frame)
        return True

    def _keep(self) -> None:
        """Every half turn while calls run: a long call gives its search turn up and
        has its thread's CPU priority lowered."""
        while not self._stopped:
            self._busy.wait()
            time.sleep(self.turn_s / 2)
            now = time.monotonic()
            with self._running_lock:
                for running in self._running.values():
                    if now - running.started < self.turn_s:
                        continue
                    if running.turn:
                        running.turn = False
                        self._turns.release()
                    if not running.lowered:
                        running.lowered = True
                        with contextlib.suppress(OSError):
                            os.setpriority(os.PRIO_PROCESS, running.native_id, LONG_CALL_NICE)
                if not self._running:
                    self._busy.clear()

    def shutdown(self) -> None:
        self._stopped = True
        self._busy.set()
        self._lookups.shutdown()
        self._searches.shutdown()
        self._others.shutdown()


def _hand_back(store: Any, damage: Exception) -> dict[str, Any]:  # pragma: no cover
    raise _HandBack(str(damage))
