"""How a server runs: its settings, how many processes, which calls are which.

Without the MCP SDK: ``cli/serve.py`` reads this before it loads the SDK,
and each of uvicorn's worker processes reads its ``ServeSettings`` from the
environment ``serve`` started it with (``SETTINGS_ENV``), since uvicorn
starts a worker from an import string, not from objects of the parent.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from researchstore import contracts
from researchstore.storage.stored import json_default

#: Worker threads running tool calls, all clients together. Tool bodies are
#: sync and never run on the event loop: each call takes a worker for as long
#: as it runs, so a slow call holds one worker, never the others' calls.
WORKER_THREADS = 32
#: Tools whose work is bounded by their input (a chunk, 20 ids, 100 chunks of
#: a walk): answered in microseconds from SQLite. They never wait for a
#: worker behind the calls that compute.
LOOKUPS = frozenset(
    {
        "research_get_chunk",
        "get_chunks",
        "get_chunk_next",
        "get_chunk_prev",
        "get_chunk_neighbors",
        "get_chunk_parents",
        "get_document",
        "get_document_chunks",
        "research_get_report",
        "research_resolve_chunk",
    }
)
#: Tools that compute for as long as they run (Python and Tantivy, not I/O).
SEARCHES = frozenset({"research_chunk_search"})


#: How long a search keeps its turn (``ToolCalls``); after it, a search still
#: running lets the next one start beside it.
SEARCH_TURN_S = 0.1

#: Where ``serve`` leaves the ``ServeSettings`` (as JSON) for its worker processes.
SETTINGS_ENV = "RESEARCHSTORE_SERVE_SETTINGS"


def search_threads_default() -> int:
    """As many searches at once as there are cores (at least two): more only share them."""
    return max(2, os.cpu_count() or 2)


def default_workers() -> int:
    """One server process per core: a process runs one thread of Python at a time."""
    return os.cpu_count() or 1


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """What every process of ``serve --transport http`` serves, and how.

    The bounds on a key (``requests_per_key``, ``calls_per_key``) are kept
    by each process for itself: with N processes a key may have N times as
    many in flight in all (the processes share nothing but the store file).
    """

    store: str
    profile: str = "core"
    #: The address the socket is bound to: the Host check follows it.
    host: str = "127.0.0.1"
    #: The access log's file (appended to by every process), None for stderr.
    access_log: str | None = None
    requests_per_key: int = 256
    calls_per_key: int = 8
    max_request_bytes: int = 1024 * 1024

    def to_environment(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_environment(cls) -> ServeSettings:
        """The settings ``serve`` left for this process (``SETTINGS_ENV``)."""
        text = os.environ.get(SETTINGS_ENV)
        if not text:
            raise RuntimeError(
                f"{SETTINGS_ENV} is not set: this app is started by 'researchstore serve'"
            )
        settings: dict[str, Any] = json.loads(text)
        return cls(**settings)


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON (orjson, else the standard library's: an
    integer orjson cannot hold, past 64 bits, can come back in an error's details)."""
    try:
        return orjson.dumps(value, default=json_default)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(
            value, ensure_ascii=False, separators=(",", ":"), default=json_default
        ).encode()


def tool_result_json(tool_name: str, envelope: dict[str, Any]) -> dict[str, Any]:
    """An envelope as an MCP tool result's fields: structured, with a text copy."""
    structured = contracts.structured_content(tool_name, envelope)
    return {
        "content": [{"type": "text", "text": dumps(structured).decode()}],
        "structuredContent": structured,
        "isError": "error" in envelope,
    }


#: How long a thread may hold Python's interpreter lock while another waits
#: for it, in a server (Python's default: 5 ms). A call that computes (a
#: search) would otherwise keep the event loop and every lookup waiting up
#: to 5 ms at each of the many times they take the lock back: latency, not
#: work, so a server trades a little switching for it. At 0.1 ms (was 0.5),
#: 16 clients of a 1,000,092-chunk store got as many calls a second, and a
#: lookup's p99 beside a 10-second call fell (``bench/bench_serving.py``).
SERVER_SWITCH_INTERVAL_S = 0.0001


def tune_for_serving() -> None:
    """Set this process up as a server (``SERVER_SWITCH_INTERVAL_S``)."""
    sys.setswitchinterval(SERVER_SWITCH_INTERVAL_S)
