"""How a server runs tool calls, on whichever side of a process it runs them.

What ``mcp_calls`` (the server's threads) and ``mcp_workers`` (its worker
processes) share, without the MCP SDK: which tools are lookups and which
search, how long a search keeps its turn, how many threads there are, and
a call's answer as the JSON-RPC response the SDK would send.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import orjson

from researchstore import contracts
from researchstore.stored import json_default

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


def search_threads_default() -> int:
    """As many searches at once as there are cores (at least two): more only share them."""
    return max(2, os.cpu_count() or 2)


#: A call's answer as its envelope (the SDK's handler encodes it), not as the
#: JSON-RPC response to a request of this id (``answer_as``).
ENVELOPE = None


def answer_as(request_id: str | int | None, tool_name: str, envelope: dict[str, Any]) -> Any:
    """``envelope`` itself (``ENVELOPE``), or the encoded JSON-RPC response to
    request ``request_id`` whose result it is."""
    if request_id is ENVELOPE:
        return envelope
    response = {"jsonrpc": "2.0", "id": request_id, "result": tool_result_json(tool_name, envelope)}
    return dumps(response)


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
    """``tool_result`` as the SDK writes it (``model_dump`` without the unset fields)."""
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
