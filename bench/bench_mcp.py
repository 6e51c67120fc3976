#!/usr/bin/env python
"""MCP round trips: every tool over stdio and over streamable HTTP (SPEC §5, issue 3).

    python bench/bench_mcp.py [--chunks 2000] [--calls 300] [--store PATH] [--json FILE]

Builds a store of synthetic text reports (or uses ``--store``), starts
``researchstore serve`` as a subprocess over stdio and over HTTP, and times
``session.call_tool`` with the SDK's own client, one call at a time, per tool:
p50 and p99 in milliseconds. Beside them: the same call in-process through
``store.call``, the floor any transport adds to. Aim: ``research_get_chunk``
over stdio p50 <= 2 ms. Nothing here is part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from researchstore import Store
from researchstore.serving.auth import create_key

CLI = "from researchstore.cli import main; main()"
WORDS = (
    "pollen colony varroa brood hive forager nectar queen drone comb honey survey sample "
    "river nitrate oxygen runoff storm sediment algae trout bank flow gauge season field "
    "student teacher method result finding measure count weekly morning evening cycle"
).split()
WARMUP = 20


def build_store(folder: Path, chunks: int) -> Path:
    """About ``chunks`` chunks: reports of ~10 chunks each, plain text."""
    random.seed(7)
    source = folder / "source"
    reports = max(1, chunks // 10)
    for number in range(reports):
        report = source / f"topic-{number % 20:02d}" / f"report-{number:05d}"
        report.mkdir(parents=True)
        (report / "report.json").write_text(
            json.dumps(
                {
                    "title": f"Field report {number}",
                    "date": f"2026-{number % 12 + 1:02d}-{number % 28 + 1:02d}",
                    "tags": {
                        "audience": random.choice(["students", "public"]),
                        "season": random.choice(["spring", "summer", "autumn", "winter"]),
                    },
                }
            )
        )
        paragraphs = [
            " ".join(random.choice(WORDS) for _ in range(200)).capitalize() + "." for _ in range(10)
        ]
        (report / "notes.txt").write_text("\n\n".join(paragraphs))
    path = folder / "bench.db"
    with Store(path, progress=False) as store:
        store.ingest(source, name="bench")
    return path


def sample_calls(store: Store) -> dict[str, dict[str, Any]]:
    """One typical call per tool, on ids from the middle of the store."""
    conn = store._conn
    total = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    chunk_id, document_rowid, report_id = conn.execute(
        "SELECT chunk_id, document_rowid, report_id FROM chunks LIMIT 1 OFFSET ?",
        (total // 2,),
    ).fetchone()
    document_id = conn.execute(
        "SELECT document_id FROM documents WHERE id = ?", (document_rowid,)
    ).fetchone()[0]
    ids = [
        row[0]
        for row in conn.execute(
            "SELECT chunk_id FROM chunks WHERE document_rowid = ? LIMIT 10", (document_rowid,)
        )
    ]
    return {
        "research_chunk_search": {"query": "varroa brood", "limit": 10},
        "research_get_chunk": {"chunk_id": chunk_id},
        "research_get_report": {"report_id": report_id},
        "get_chunks": {"ids": ids},
        "get_chunk_next": {"id": chunk_id, "count": 5},
        "get_chunk_prev": {"id": chunk_id, "count": 5},
        "get_chunk_neighbors": {"id": chunk_id, "count": 2},
        "get_chunk_parents": {"id": chunk_id},
        "get_document": {"id": document_id},
        "get_document_chunks": {"id": document_id, "from": 0, "limit": 20},
    }


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return (ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))])


def pair(figures: tuple[float, float], digits: int) -> str:
    p50, p99 = figures
    return f"{p50:.{digits}f} / {p99:.{digits}f}"


def time_in_process(store: Store, calls: dict[str, dict[str, Any]], repeat: int) -> dict[str, Any]:
    figures = {}
    for name, arguments in calls.items():
        for _ in range(WARMUP):
            store.call(name, arguments)
        samples = []
        for _ in range(repeat):
            started = time.perf_counter()
            envelope = store.call(name, arguments)
            samples.append((time.perf_counter() - started) * 1000)
            assert "result" in envelope, envelope
        figures[name] = percentiles(samples)
    return figures


async def time_session(
    session: ClientSession, calls: dict[str, dict[str, Any]], repeat: int
) -> dict[str, Any]:
    figures = {}
    await session.list_tools()
    for name, arguments in calls.items():
        for _ in range(WARMUP):
            await session.call_tool(name, arguments)
        samples = []
        for _ in range(repeat):
            started = time.perf_counter()
            result = await session.call_tool(name, arguments)
            samples.append((time.perf_counter() - started) * 1000)
            assert not result.isError, result
        figures[name] = percentiles(samples)
    return figures


async def over_stdio(db: Path, run: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", CLI, "serve", str(db), "--profile", "core"],
        env=dict(os.environ),
    )
    async with AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        return await run(session)


async def over_http(db: Path, key: str, run: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    server = subprocess.Popen(
        [sys.executable, "-c", CLI, "serve", str(db), "--transport", "http", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        url = wait_for_url(Path(log.name), server)
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(
                httpx.AsyncClient(headers={"x-api-key": key}, timeout=30)
            )
            read, write, _ = await stack.enter_async_context(
                streamable_http_client(url, http_client=client)
            )
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            return await run(session)
    finally:
        server.terminate()
        server.wait(10)
        os.unlink(log.name)


def wait_for_url(log: Path, server: subprocess.Popen[bytes], timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"at (http://\S+/mcp)", log.read_text())
        if found:
            return found.group(1)
        if server.poll() is not None:
            raise RuntimeError(f"server exited: {log.read_text()}")
        time.sleep(0.05)
    raise RuntimeError("server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000, help="size of the built store")
    parser.add_argument("--calls", type=int, default=300, help="timed calls per tool")
    parser.add_argument("--store", type=Path, help="use this store instead of building one")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        db = options.store or build_store(Path(scratch), options.chunks)
        with Store(db, progress=False) as store:
            chunks = store._conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            calls = sample_calls(store)
            key = create_key(store, label="bench")
            local = time_in_process(store, calls, options.calls)

        def timed(session: ClientSession) -> Awaitable[dict[str, Any]]:
            return time_session(session, calls, options.calls)

        stdio = anyio.run(over_stdio, db, timed)
        http = anyio.run(over_http, db, key, timed)
        with Store(db, progress=False) as store:
            from researchstore.serving.auth import revoke_key

            revoke_key(store, key)

    print(f"store: {chunks} chunks; {options.calls} calls per tool, one at a time")
    print(
        f"{'tool':<24}{'in-process p50/p99 ms':>24}{'stdio p50/p99 ms':>20}{'http p50/p99 ms':>20}"
    )
    for name in calls:
        print(
            f"{name:<24}{pair(local[name], 3):>24}{pair(stdio[name], 2):>20}"
            f"{pair(http[name], 2):>20}"
        )
    aim = stdio["research_get_chunk"][0]
    print(
        f"aim research_get_chunk over stdio p50 <= 2 ms: {aim:.2f} ms "
        f"({'met' if aim <= 2 else 'missed'})"
    )
    if options.json:
        options.json.write_text(
            json.dumps(
                {
                    "chunks": chunks,
                    "calls": options.calls,
                    "in_process": local,
                    "stdio": stdio,
                    "http": http,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
