#!/usr/bin/env python
"""Serving many agents at once: MCP over HTTP with 1, 4 and 16 concurrent clients (issue 12).

    python bench/bench_serving.py [--chunks 100000] [--workdir DIR] [--seconds 10]
                                  [--levels 1,4,16] [--slow-seconds 10] [--json FILE]
                                  [--clients raw,httpx] [--skip-copy] [--skip-peers]
                                  [--workers N] [--old-tree DIR]

Builds a store from ``bench_core``'s synthetic corpus (kept in ``--workdir``
and reused while ``--chunks``/``--seed`` match), starts a real ``researchstore
serve --transport http`` child process on it, and measures, in one run:

1. ``first_answer_of_a_copy()``: the ``.db`` copied alone, first search
   against a rebuild, each in a fresh process (``bench_copy``).
2. ``concurrent_clients()``: for each level, that many MCP clients at once,
   each its own session and its own API key, each calling in turn
   ``research_chunk_search`` (bench_core's queries, a quarter filtered),
   ``research_get_chunk`` and ``get_chunk_next`` (random existing chunks)
   for ``--seconds``: calls/s, and p50/p99 per tool. Then the ratio of the
   highest level's calls/s to one client's (aim >= 1.6) and
   ``research_get_chunk``'s p99 at the highest level (aim <= 20 ms).
3. ``one_slow_call()``: one more session makes a call that takes
   ``--slow-seconds`` while the highest level's clients run; their p99 is
   measured only while it runs (aim: ``research_get_chunk`` p99 <= 20 ms).
   No search of this corpus takes 10 s, so the server is this script run as
   a child that changes one thing: a search whose query starts with
   ``bench slow`` keeps searching (real searches, one after another, in its
   worker thread) for ``--slow-seconds`` before answering. Every other call
   is the real one. The child sets ``SLOW_ENV`` so that each worker process
   uvicorn spawns (which imports this script again as ``__mp_main__``)
   holds such searches too.
4. ``search_against_peers()``: the same warm searches through researchstore,
   bm25s (PyStemmer English) and raw Tantivy top-10 with stored fields, on
   this store's chunks and on SciFact's (``bench_search_peers.run_peers``).

The clients are one asyncio process sending raw JSON-RPC, as an MCP client
sends it, on a 2-core machine shared with the server; ``--clients`` runs each
kind in turn: ``raw`` (kept-alive HTTP/1.1 written and read with asyncio's
streams, costing the machine little: what the server itself can do) and
``httpx`` (as the MCP SDK's own client: what agents' calls cost the machine,
clients and server together).
With ``--old-tree DIR`` (a checkout of an earlier researchstore, its C
extension built), sections 2 and 3 run first against a server of that tree
(``PYTHONPATH=DIR``, run from outside this checkout), then against this
one, on the same store and keys: before and after, in one run.
Nothing here is part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import ensure_corpus, log, make_queries, percentile, sample_ids

#: A query that starts so is held by the child server (``one_slow_call``).
SLOW_PREFIX = "bench slow"
#: How long the child server holds such a query, for its worker processes too.
SLOW_ENV = "BENCH_SERVING_SLOW_SECONDS"
TOOLS = ("research_chunk_search", "research_get_chunk", "get_chunk_next")
PROTOCOL = "2025-06-18"
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


# -- the store and the server ---------------------------------------------------------


def build_store(workdir: Path, chunks: int, seed: int) -> Path:
    """The corpus ingested once into ``workdir/serving.db`` (reused while it matches)."""
    from researchstore import Store

    corpus, _ = ensure_corpus(workdir, chunks, seed)
    db = workdir / "serving.db"
    marker = workdir / "serving.json"
    wanted = {"chunks": chunks, "seed": seed}
    if db.exists() and marker.exists() and json.loads(marker.read_text()) == wanted:
        log(f"store: reusing {db}")
        return db
    for stale in workdir.glob("serving.db*"):
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    log(f"store: ingesting {corpus} into {db} (not timed)")
    with Store(db, progress=False) as store:
        summary = store.ingest(corpus, name="bench", progress=False)
    log(f"store: {summary.chunks:,} chunks")
    marker.write_text(json.dumps(wanted))
    return db


def make_keys(db: Path, count: int) -> list[str]:
    from researchstore import Store
    from researchstore.serving.auth import create_key

    with Store(db, progress=False, open_indexes=False) as store:
        return [create_key(store, label=f"bench-serving-{number}") for number in range(count)]


def revoke_keys(db: Path, keys: list[str]) -> None:
    from researchstore import Store
    from researchstore.serving.auth import revoke_key

    with Store(db, progress=False, open_indexes=False) as store:
        for key in keys:
            revoke_key(store, key)


@contextmanager
def server(
    db: Path,
    workdir: Path,
    slow_seconds: float,
    workers: int | None = None,
    tree: Path | None = None,
) -> Iterator[str]:
    """``researchstore serve --transport http`` as a child (``child_server``); its URL.

    With ``tree``, the researchstore of that checkout serves (``PYTHONPATH``).
    """
    log_path = workdir / ("server-old.log" if tree else "server.log")
    environment = dict(os.environ)
    if tree is not None:
        environment["PYTHONPATH"] = str(tree)
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child-server",
        str(slow_seconds),
        "serve",
        str(db),
        "--transport",
        "http",
        "--port",
        "0",
        "--access-log",
        str(workdir / "access.log"),
        *(["--workers", str(workers)] if workers is not None else []),
    ]
    with open(log_path, "w") as errors:
        child = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            env=environment,
            # Out of this checkout, so that its researchstore is not the one imported.
            cwd=str(tree.parent) if tree is not None else None,
        )
    try:
        deadline = time.monotonic() + 600
        while True:
            found = re.search(r"at (http://\S+/mcp) ", log_path.read_text())
            if found:
                break
            if child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start:\n{log_path.read_text()}")
            time.sleep(0.05)
        yield found.group(1)
    finally:
        child.terminate()
        child.wait(30)


def hold_slow_searches(slow_seconds: float) -> None:
    """A search on ``bench slow ...`` kept busy for ``slow_seconds`` (real searches)."""
    from researchstore.retrieval import semantic

    real_search = semantic.run_search

    def run_search(**arguments: Any) -> list[dict[str, Any]]:
        query = str(arguments["query"])
        if not query.startswith(SLOW_PREFIX):
            return real_search(**arguments)
        words = query[len(SLOW_PREFIX) :].split() or ["the"]
        deadline = time.monotonic() + slow_seconds
        hits: list[dict[str, Any]] = []
        turn = 0
        while time.monotonic() < deadline:
            hits = real_search(**{**arguments, "query": words[turn % len(words)]})
            turn += 1
        return hits

    semantic.run_search = run_search


def child_server(slow_seconds: float, argv: list[str]) -> None:
    """The command line, with a search on ``bench slow ...`` kept busy for ``slow_seconds``."""
    from researchstore.cli import main

    os.environ[SLOW_ENV] = str(slow_seconds)  # for the worker processes it spawns
    hold_slow_searches(slow_seconds)
    main(args=argv, prog_name="researchstore")


if __name__ == "__mp_main__" and os.environ.get(SLOW_ENV):
    # A worker process spawned by the child server: it imports this script again.
    hold_slow_searches(float(os.environ[SLOW_ENV]))


# -- the clients ------------------------------------------------------------------------


class Client:
    """One MCP client: its own key, session and connection; raw JSON-RPC over HTTP/1.1.

    A load generator that shares two cores with the server must cost far
    less than the server does per call, or it measures itself: an httpx
    client spent ~4 ms a call here, more than the server's whole answer to a
    lookup. So this one writes each request in one piece on a kept-alive
    connection and reads the response by its ``content-length``, parsing
    the JSON as any client must.
    """

    def __init__(self, url: str, key: str) -> None:
        address = httpx.URL(url)
        self.host, self.port, self.path = address.host, address.port or 80, address.path
        self.headers = {**ACCEPT, "x-api-key": key}
        self.session = ""
        self.next_id = 1
        self.errors = 0
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, message: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        body = json.dumps(message).encode()
        head = "".join(f"{name}: {value}\r\n" for name, value in self.headers.items())
        self.writer.write(
            f"POST {self.path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n{head}"
            f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" not in headers:
            raise RuntimeError(f"a response without content-length: {headers}")
        content = await self.reader.readexactly(int(headers["content-length"]))
        return status, headers, content

    async def open(self) -> None:
        message = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "bench_serving", "version": "1"},
            },
        }
        status, headers, content = await self.post(message)
        if status != 200:
            raise RuntimeError(f"initialize: {status} {content[:200]!r}")
        # A stateless server names no session: each request then stands alone.
        self.session = headers.get("mcp-session-id", "")
        if self.session:
            self.headers["mcp-session-id"] = self.session
        self.headers["mcp-protocol-version"] = PROTOCOL
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        message = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        self.next_id += 1
        status, _, content = await self.post(message)
        if status != 200:
            self.errors += 1
            return None
        result = json.loads(content).get("result") or {}
        if result.get("isError", True):
            self.errors += 1
            return None
        structured: dict[str, Any] = result["structuredContent"]
        return structured

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()


class HttpxClient(Client):
    """The same client on httpx, as the MCP SDK's own HTTP client is: what an
    agent's calls cost the machine, client and server together."""

    def __init__(self, url: str, key: str) -> None:
        super().__init__(url, key)
        self.url = url
        self.http = httpx.AsyncClient(timeout=120)

    async def post(self, message: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        response = await self.http.post(self.url, json=message, headers=self.headers)
        return response.status_code, dict(response.headers), response.content

    async def close(self) -> None:
        await self.http.aclose()


CLIENTS: dict[str, type[Client]] = {"raw": Client, "httpx": HttpxClient}


async def work(
    client: Client,
    rng: random.Random,
    queries: list[dict[str, Any]],
    chunk_ids: list[str],
    until: asyncio.Event,
    timings: dict[str, list[float]],
) -> int:
    """Search, get a chunk, the chunk after it, in turn, until ``until`` is set."""
    calls = 0
    while not until.is_set():
        chunk_id = chunk_ids[rng.randrange(len(chunk_ids))]
        plan = [
            ("research_chunk_search", queries[rng.randrange(len(queries))]),
            ("research_get_chunk", {"chunk_id": chunk_id}),
            ("get_chunk_next", {"id": chunk_id, "count": 1}),
        ]
        for tool, arguments in plan:
            started = time.perf_counter()
            await client.call(tool, arguments)
            timings[tool].append((time.perf_counter() - started) * 1000)
            calls += 1
    return calls


async def run_level(
    url: str,
    keys: list[str],
    clients: int,
    seconds: float,
    queries: list[dict[str, Any]],
    chunk_ids: list[str],
    *,
    slow: tuple[str, float] | None = None,
    client_kind: type[Client] = Client,
) -> dict[str, Any]:
    """``clients`` clients at once for ``seconds`` (or, with ``slow``, while the
    slow call runs); calls/s and p50/p99 per tool, after a short warm-up."""
    opened = [client_kind(url, key) for key in keys[:clients]]
    await asyncio.gather(*(client.open() for client in opened))
    try:
        warm = asyncio.Event()
        warmup: dict[str, list[float]] = {tool: [] for tool in TOOLS}
        warming = [
            asyncio.create_task(work(c, random.Random(n), queries, chunk_ids, warm, warmup))
            for n, c in enumerate(opened)
        ]
        await asyncio.sleep(min(2.0, seconds / 4))
        warm.set()
        await asyncio.gather(*warming)
        for client in opened:
            client.errors = 0
        done = asyncio.Event()
        timings: dict[str, list[float]] = {tool: [] for tool in TOOLS}
        started = time.perf_counter()
        tasks = [
            asyncio.create_task(work(c, random.Random(100 + n), queries, chunk_ids, done, timings))
            for n, c in enumerate(opened)
        ]
        slow_ms = None
        if slow is None:
            await asyncio.sleep(seconds)
        else:
            slow_key, _ = slow
            holder = client_kind(url, slow_key)
            await holder.open()
            clock = time.perf_counter()
            answer = await holder.call("research_chunk_search", {"query": f"{SLOW_PREFIX} soil"})
            slow_ms = (time.perf_counter() - clock) * 1000
            await holder.close()
            if answer is None:
                raise RuntimeError("the slow call failed")
        done.set()
        calls = sum(await asyncio.gather(*tasks))
        elapsed = time.perf_counter() - started
    finally:
        await asyncio.gather(*(client.close() for client in opened))
    figures: dict[str, Any] = {
        "clients": clients,
        "calls": calls,
        "seconds": round(elapsed, 2),
        "calls_per_s": calls / elapsed,
        "errors": sum(client.errors for client in opened),
    }
    if slow_ms is not None:
        figures["slow_call_ms"] = round(slow_ms)
    for tool, samples in timings.items():
        samples.sort()
        figures[tool] = {"p50_ms": percentile(samples, 50), "p99_ms": percentile(samples, 99)}
    return figures


# -- the sections ----------------------------------------------------------------------


def first_answer_of_a_copy(db: Path, workdir: Path) -> dict[str, Any]:
    """Copy the ``.db`` alone into a fresh folder; time its first search against a
    rebuild in the same run (``bench_copy.py``, each in a fresh process)."""
    from bench_copy import first_answer_of_a_copy as measure
    from bench_copy import print_first_answers

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        texts = [row[0] for row in conn.execute("SELECT text FROM chunks LIMIT 20")]
    queries = [" ".join(text.split()[10:13]) for text in texts]
    results = measure(db, queries, workdir)
    print_first_answers(results)
    return results


def concurrent_clients(
    url: str,
    keys: list[str],
    levels: list[int],
    seconds: float,
    db: Path,
    seed: int,
    client: str = "raw",
) -> dict[str, Any]:
    queries = make_queries(seed, 300)
    chunk_ids = sample_ids(db, 2000, seed)["chunks"]
    results = {}
    for level in levels:
        log(f"concurrent clients ({client}): {level} for {seconds:g} s")
        results[level] = asyncio.run(
            run_level(url, keys, level, seconds, queries, chunk_ids, client_kind=CLIENTS[client])
        )
    print_levels(results, title=f"clients on {client}")
    one, top = results[levels[0]], results[levels[-1]]
    ratio = top["calls_per_s"] / one["calls_per_s"]
    p99 = top["research_get_chunk"]["p99_ms"]
    print(
        f"{levels[-1]} clients vs {levels[0]}: {ratio:.2f}x calls/s (aim >= 1.6: "
        f"{'met' if ratio >= 1.6 else 'missed'}); research_get_chunk p99 at {levels[-1]}: "
        f"{p99:.1f} ms (aim <= 20: {'met' if p99 <= 20 else 'missed'})"
    )
    return {"levels": results, "ratio": ratio}


def one_slow_call(
    url: str,
    keys: list[str],
    level: int,
    slow_seconds: float,
    db: Path,
    seed: int,
    client: str = "raw",
) -> dict[str, Any]:
    queries = make_queries(seed, 300)
    chunk_ids = sample_ids(db, 2000, seed)["chunks"]
    log(f"one slow call ({slow_seconds:g} s) beside {level} clients ({client})")
    figures = asyncio.run(
        run_level(
            url,
            keys,
            level,
            slow_seconds,
            queries,
            chunk_ids,
            slow=(keys[-1], slow_seconds),
            client_kind=CLIENTS[client],
        )
    )
    print_levels({level: figures}, title=f"beside one {slow_seconds:g}-second call ({client})")
    p99 = figures["research_get_chunk"]["p99_ms"]
    print(
        f"the slow call took {figures['slow_call_ms'] / 1000:.1f} s; research_get_chunk p99 "
        f"meanwhile: {p99:.1f} ms (aim <= 20: {'met' if p99 <= 20 else 'missed'})"
    )
    return figures


def search_against_peers(db: Path, workdir: Path, seed: int) -> dict[str, Any]:
    """The same warm search workload through researchstore, bm25s (PyStemmer English)
    and raw Tantivy top-10 with stored fields, on this store's chunks and on SciFact's
    (``bench_search_peers``)."""
    from bench_search_peers import print_results, run_peers, scifact

    from researchstore import Store

    log("search against bm25s and raw Tantivy")
    results: dict[str, Any] = {}
    scratch = workdir / "peers"
    scratch.mkdir(exist_ok=True)
    with Store(db, progress=False) as store:
        queries = [query["query"] for query in make_queries(seed, 300)]
        results["synthetic"] = run_peers(store, queries, scratch)
    print_results(
        f"this store ({results['synthetic']['chunks']['count']:,} chunks)", results["synthetic"]
    )
    try:
        store, queries = scifact(scratch, 300)
    except (OSError, SystemExit) as error:
        print(f"SciFact: not measured ({error})")
        return results
    with store:
        results["scifact"] = run_peers(store, queries, scratch)
    print_results("SciFact", results["scifact"])
    ratio = results["scifact"]["bm25s"]["researchstore_p50_ms_ratio"]
    print(f"SciFact: researchstore p50 {ratio:.2f}x bm25s's (target <= 1.0)")
    ratio = results["synthetic"]["tantivy"]["researchstore_p50_ms_ratio"]
    print(f"this store: researchstore p50 {ratio:.2f}x raw Tantivy's (target <= 2 at 1M)")
    return results


def print_levels(results: dict[int, dict[str, Any]], title: str = "") -> None:
    header = f"{'clients':>7} {'calls/s':>8} {'errors':>6}" + "".join(
        f" {tool + ' p50/p99 ms':>34}" for tool in TOOLS
    )
    if title:
        print(title)
    print(header)
    for level, figures in results.items():
        cells = "".join(
            f" {figures[tool]['p50_ms']:>16.1f} / {figures[tool]['p99_ms']:<15.1f}"
            for tool in TOOLS
        )
        print(f"{level:>7} {figures['calls_per_s']:>8.0f} {figures['errors']:>6}{cells}")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child-server"]:
        child_server(float(argv[1]), argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="size of the corpus")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(os.environ.get("TMPDIR", "/tmp")) / "researchstore-bench-serving",
        help="where the corpus and the store are kept between runs",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="timed seconds per level")
    parser.add_argument("--levels", default="1,4,16", help="concurrent clients, in turn")
    parser.add_argument("--slow-seconds", type=float, default=10.0, help="the slow call's length")
    parser.add_argument(
        "--clients",
        default="raw,httpx",
        help="the clients, in turn: raw (HTTP/1.1 on asyncio streams, costing the machine "
        "little: the server's own capacity) and httpx (as the MCP SDK's client)",
    )
    parser.add_argument("--skip-copy", action="store_true", help="no first answer of a copy")
    parser.add_argument("--skip-peers", action="store_true", help="no search against peers")
    parser.add_argument(
        "--workers", type=int, help="the server's --workers (default: the server's own default)"
    )
    parser.add_argument(
        "--old-tree",
        type=Path,
        help="a checkout of an earlier researchstore: measure its server first, same store",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    options = parser.parse_args(argv)
    levels = [int(level) for level in options.levels.split(",")]
    workdir: Path = options.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    db = build_store(workdir, options.chunks, options.seed)
    results: dict[str, Any] = {"chunks": options.chunks, "cpus": os.cpu_count()}
    if not options.skip_copy:
        results["first_answer_of_a_copy"] = first_answer_of_a_copy(db, workdir)
    keys = make_keys(db, max(levels) + 1)
    trees: list[tuple[str, Path | None]] = [("", None)]
    if options.old_tree is not None:
        trees.insert(0, ("old_", options.old_tree.resolve()))
    try:
        for label, tree in trees:
            print(f"== the server of {tree or 'this checkout'}")
            with server(db, workdir, options.slow_seconds, options.workers, tree) as url:
                for client in options.clients.split(","):
                    results[f"{label}concurrent_clients_{client}"] = concurrent_clients(
                        url, keys, levels, options.seconds, db, options.seed, client
                    )
                    results[f"{label}one_slow_call_{client}"] = one_slow_call(
                        url, keys, levels[-1], options.slow_seconds, db, options.seed, client
                    )
    finally:
        revoke_keys(db, keys)
    if not options.skip_peers:
        results["search_against_peers"] = search_against_peers(db, workdir, options.seed)
    if options.json:
        options.json.write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
