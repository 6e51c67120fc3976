"""Tool calls for the MCP server: how a call's body runs, in which thread, after which turn.

``ToolCalls`` runs a call's body in a worker thread, as its caller, after
that caller's key has taken one of its turns. The SDK's handler
(``mcp_server.build_server``) runs every call through it, over stdio and
over HTTP. Its bounds are this process's own: ``serve`` over HTTP runs one
``ToolCalls`` in each of its processes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, MutableMapping
from typing import Any, TypeVar

import anyio
import mcp.types as types
from starlette.types import Scope

from researchstore.library import Library
from researchstore.params import Tool
from researchstore.principal import Principal, acting_as
from researchstore.serving.settings import (
    LOOKUPS,
    SEARCH_TURN_S,
    SEARCHES,
    search_threads_default,
    tool_result_json,
)
from researchstore.tools import call_tool

#: Where ``ApiKeyMiddleware`` leaves a request's principal, and where the
#: access log reads what a request asked and how its call ended.
PRINCIPAL_SCOPE_KEY = "researchstore.principal"
CALL_SCOPE_KEY = "researchstore.call"
OUTCOME_SCOPE_KEY = "researchstore.outcome"

T = TypeVar("T")


class ToolCalls:
    """Run tool calls over ``store``: each in a worker thread, as its caller.

    Calls take one of ``worker_threads`` workers, all together; a search
    (``SEARCHES``) first takes one of ``search_threads`` turns: searches
    compute, and more of them at once than there are cores would only take
    the interpreter lock from each other and from the lookups. A search holds
    its turn for ``SEARCH_TURN_S`` at most (a search takes milliseconds), so a
    long one never holds the others behind it. A lookup
    (``LOOKUPS``) has workers of its own (``worker_threads`` more), so it
    never waits behind a search, however long that search runs. Over HTTP a
    key's calls first take one of that key's ``calls_per_key`` turns, so
    that one key waiting for its turn holds no worker another key could use.
    Limiters belong to the event loop that serves: they are made on first use.
    """

    def __init__(
        self,
        store: Library,
        tools: dict[str, Tool],
        *,
        worker_threads: int,
        calls_per_key: int,
        search_threads: int | None = None,
    ) -> None:
        self.store = store
        self.tools = tools
        self.worker_threads = worker_threads
        self.calls_per_key = calls_per_key
        self.search_threads = search_threads or search_threads_default()
        #: The pools and turns by name (a key's turns by ``key:`` and its id).
        self._limiters: dict[str, anyio.CapacityLimiter] = {}

    def _limiter(self, name: str, capacity: int) -> anyio.CapacityLimiter:
        limiter = self._limiters.get(name)
        if limiter is None:
            limiter = self._limiters[name] = anyio.CapacityLimiter(capacity)
        return limiter

    async def run(
        self,
        principal: Principal,
        name: str,
        arguments: dict[str, Any],
        scope: MutableMapping[str, Any],
    ) -> dict[str, Any]:
        """The call's envelope; ``scope`` gets what the access log says of it."""
        scope[CALL_SCOPE_KEY] = name
        turns: contextlib.AbstractAsyncContextManager[Any] = contextlib.nullcontext()
        if principal.key_id is not None:
            turns = self._limiter(f"key:{principal.key_id}", self.calls_per_key)
        async with turns:
            envelope = await self._in_thread(principal, name, arguments)
        scope[OUTCOME_SCOPE_KEY] = envelope["error"]["code"] if "error" in envelope else "ok"
        return envelope

    async def _in_thread(
        self, principal: Principal, name: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        """The call's envelope, its body run in a worker thread of this process."""

        def body() -> dict[str, Any]:
            with acting_as(principal):
                return call_tool(self.store, name, arguments, tools=self.tools)

        pool = "lookups" if name in LOOKUPS else "workers"
        workers = self._limiter(pool, self.worker_threads)
        if name in SEARCHES:
            return await self._search(body, workers)
        return await anyio.to_thread.run_sync(body, limiter=workers)

    async def _search(self, body: Callable[[], T], workers: anyio.CapacityLimiter) -> T:
        """``body`` in a worker once a search turn is free; a search still running
        after ``SEARCH_TURN_S`` gives its turn up, so that no search, however long,
        holds the others behind it."""
        searches = self._limiter("searches", self.search_threads)
        token = object()
        await searches.acquire_on_behalf_of(token)
        held = True

        def give_up_turn() -> None:
            nonlocal held
            if held:
                held = False
                searches.release_on_behalf_of(token)

        try:
            async with anyio.create_task_group() as group:

                async def give_up_later() -> None:
                    await anyio.sleep(SEARCH_TURN_S)
                    give_up_turn()

                group.start_soon(give_up_later)
                answer = await anyio.to_thread.run_sync(body, limiter=workers)
                group.cancel_scope.cancel()
        except BaseExceptionGroup as raised:
            # What the body raised, as it would be raised without the group.
            if len(raised.exceptions) == 1:
                raise raised.exceptions[0] from None
            raise
        finally:
            give_up_turn()
        return answer


def tool_result(tool_name: str, envelope: dict[str, Any]) -> types.CallToolResult:
    """An envelope as an MCP tool result: structured, with a text copy."""
    return types.CallToolResult.model_validate(tool_result_json(tool_name, envelope))


def header(scope: Scope, name: str) -> str | None:
    """The first value of request header ``name`` (any case), if it came."""
    wanted = name.lower().encode("latin-1")
    for header, value in scope.get("headers", ()):
        if header.lower() == wanted:
            return str(value.decode("latin-1"))
    return None
