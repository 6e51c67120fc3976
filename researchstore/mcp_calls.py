"""Tool calls for the MCP server: one runner for both ways a call arrives over HTTP.

``ToolCalls`` runs a call's body in a worker thread, as its caller, after
that caller's key has taken one of its turns; the SDK's handler
(``mcp_server.build_server``) and ``DirectCalls`` both go through it, so
the bounds on workers and on each key's calls hold whichever way a call came.

``DirectCalls`` answers ``tools/call`` requests of an open, initialized
session itself, as the SDK would answer them, without the SDK's message
loop: that loop hands each message through several memory streams and
tasks and validates it with pydantic both ways, which costs several times
what a lookup does (``bench/bench_serving.py``). Anything but a plain,
well-formed call of a session this process admitted (an ``initialize``, a
notification, a batch, a bad header, an unknown, ended or other key's
session) goes on to the SDK, which answers it as it always does. What the
SDK does around a request is done here too: its header checks, the
session's owner, its idle countdown (held while a call runs), the access
log's fields (the Host check, ``hosts.HostGuard``, stands in front of
both). The answer is the SDK's own JSON-RPC response, with the same
fields; a test compares the two for every tool.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, MutableMapping
from typing import Any, TypeVar

import anyio
import mcp.types as types
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    AuthorizationContext,
    authorization_context,
)
from mcp.server.streamable_http import MCP_PROTOCOL_VERSION_HEADER, MCP_SESSION_ID_HEADER
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import Scope, Send

from researchstore.errors import ResearchStoreError
from researchstore.mcp_workers import NoWorker, RepairHere, WorkerGone, WorkerPool
from researchstore.params import Tool
from researchstore.principal import NOBODY, Principal, acting_as
from researchstore.serving import (
    ENVELOPE,
    LOOKUPS,
    SEARCH_TURN_S,
    SEARCHES,
    answer_as,
    search_threads_default,
    tool_result_json,
)
from researchstore.store import Store
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

    With ``workers`` (``mcp_workers.WorkerPool``), the read tools' calls go to
    worker processes, each running its calls as this class does, so that
    calls use every core; the rest (writes, and every call once no worker
    is left) run here.
    """

    def __init__(
        self,
        store: Store,
        tools: dict[str, Tool],
        *,
        worker_threads: int,
        calls_per_key: int,
        search_threads: int | None = None,
        workers: WorkerPool | None = None,
    ) -> None:
        self.store = store
        self.tools = tools
        self.worker_threads = worker_threads
        self.calls_per_key = calls_per_key
        self.search_threads = search_threads or search_threads_default()
        self.workers = workers
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
        answer: dict[str, Any] = await self._run(principal, name, arguments, scope, ENVELOPE)
        return answer

    async def run_response(
        self,
        principal: Principal,
        name: str,
        arguments: dict[str, Any],
        scope: MutableMapping[str, Any],
        request_id: str | int,
    ) -> bytes:
        """The call as the JSON-RPC response to request ``request_id``, encoded where
        it ran (an answer's encoding costs as much as a lookup)."""
        answer: bytes = await self._run(principal, name, arguments, scope, request_id)
        return answer

    async def _run(
        self,
        principal: Principal,
        name: str,
        arguments: dict[str, Any],
        scope: MutableMapping[str, Any],
        request_id: str | int | None,
    ) -> Any:
        scope[CALL_SCOPE_KEY] = name
        turns: contextlib.AbstractAsyncContextManager[Any] = contextlib.nullcontext()
        if principal.key_id is not None:
            turns = self._limiter(f"key:{principal.key_id}", self.calls_per_key)
        async with turns:
            outcome, answer = await self._dispatch(principal, name, arguments, request_id)
        scope[OUTCOME_SCOPE_KEY] = outcome
        return answer

    async def _dispatch(
        self,
        principal: Principal,
        name: str,
        arguments: dict[str, Any],
        request_id: str | int | None,
    ) -> tuple[str, Any]:
        tool = self.tools.get(name)
        workers = self.workers
        if workers is None or tool is None or not tool.read_only:
            return await self.here(principal, name, arguments, request_id)
        try:
            return await workers.call(principal, name, arguments, request_id)
        except NoWorker:
            return await self.here(principal, name, arguments, request_id)
        except WorkerGone as gone:
            envelope = ResearchStoreError(str(gone)).to_envelope()
            return "internal", answer_as(request_id, name, envelope)
        except RepairHere:
            # The worker met a damaged index: this process, which may write,
            # repairs it as a call made here would, then the workers reopen it.
            answer = await self.here(principal, name, arguments, request_id)
            await workers.reopen_indexes()
            return answer

    async def here(
        self,
        principal: Principal,
        name: str,
        arguments: dict[str, Any],
        request_id: str | int | None,
    ) -> tuple[str, Any]:
        """The call run in a worker thread of this process: how it ended, and its answer."""
        outcome = "internal"

        def body() -> Any:
            nonlocal outcome
            with acting_as(principal):
                envelope = call_tool(self.store, name, arguments, tools=self.tools)
            outcome = envelope["error"]["code"] if "error" in envelope else "ok"
            return answer_as(request_id, name, envelope)

        pool = "lookups" if name in LOOKUPS else "workers"
        workers = self._limiter(pool, self.worker_threads)
        if name in SEARCHES:
            answer = await self._search(body, workers)
        else:
            answer = await anyio.to_thread.run_sync(body, limiter=workers)
        return outcome, answer

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


#: What a session's transport is to ``DirectCalls``: the SDK's, looked up by id.
Sessions = Callable[[str], Any]
#: Who opened a session (``AuthorizationContext``), by its id.
Owners = Callable[[str], AuthorizationContext | None]


class DirectCalls:
    """Answer the ``tools/call`` requests of open sessions without the SDK's message loop.

    ``sessions`` and ``owners`` look a session's transport and its opener up
    by id (the session manager's own records). A session is served here
    only once this process has answered its ``initialize`` (``opened``),
    and only for the key that opened it.
    """

    def __init__(
        self,
        calls: ToolCalls,
        *,
        sessions: Sessions,
        owners: Owners,
        security: TransportSecuritySettings | None,
        idle_timeout_s: float | None,
    ) -> None:
        self.calls = calls
        self.sessions = sessions
        self.owners = owners
        self.security = TransportSecurityMiddleware(security)
        self.idle_timeout_s = idle_timeout_s
        #: Sessions whose ``initialize`` this process has answered.
        self.initialized: set[str] = set()
        #: Direct calls in flight, by session: the idle countdown waits for them.
        self.in_flight: dict[str, int] = {}
        #: Calls answered here so far.
        self.served = 0
        self._prune_at = 1024

    def opened(self, session_id: str) -> None:
        """The session's ``initialize`` has been answered: its calls may come here."""
        self.initialized.add(session_id)
        if len(self.initialized) >= self._prune_at:
            # Sessions that ended while no call came (idle, DELETE) are forgotten.
            self.initialized = {known for known in self.initialized if self.sessions(known)}
            self._prune_at = max(1024, 2 * len(self.initialized))

    async def answer(self, scope: Scope, body: bytes, send: Send) -> bool:
        """Answer the request if it is a plain call of an open session; whether it did."""
        session_id = header(scope, MCP_SESSION_ID_HEADER)
        if session_id is None or session_id not in self.initialized:
            return False
        transport = self.sessions(session_id)
        if transport is None:
            self.initialized.discard(session_id)  # ended: the SDK answers 404
            return False
        if getattr(transport, "is_terminated", True) or not _plain_post(scope):
            return False
        user = scope.get("user")
        if not isinstance(user, AuthenticatedUser) or self.owners(
            session_id
        ) != authorization_context(user):
            return False  # not its opener: the SDK answers as if there were no session
        call = _parse_call(body)
        if call is None:
            return False
        request = Request(scope)
        if await self.security.validate_request(request, is_post=True) is not None:
            return False  # the SDK refuses it, in its own words
        idle = getattr(transport, "idle_scope", None)
        if idle is not None and idle.cancel_called:
            return False  # timed out while it waited: the SDK ends the session
        request_id, name, arguments = call
        principal = scope.get(PRINCIPAL_SCOPE_KEY)
        if not isinstance(principal, Principal):
            principal = NOBODY  # fail closed

        self._hold(session_id, idle)
        self.served += 1
        try:
            encoded = await self.calls.run_response(principal, name, arguments, scope, request_id)
        finally:
            self._release(session_id, idle, transport)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(encoded)).encode()),
                    (MCP_SESSION_ID_HEADER.encode(), session_id.encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": encoded})
        return True

    def _hold(self, session_id: str, idle: anyio.CancelScope | None) -> None:
        self.in_flight[session_id] = self.in_flight.get(session_id, 0) + 1
        if idle is not None:
            idle.deadline = math.inf

    def _release(self, session_id: str, idle: anyio.CancelScope | None, transport: Any) -> None:
        left = self.in_flight[session_id] - 1
        if left:
            self.in_flight[session_id] = left
            return
        del self.in_flight[session_id]
        # The countdown starts again once nothing holds the session: neither a
        # call here nor a request (an open GET stream) the SDK is serving.
        if idle is not None and self.idle_timeout_s is not None:
            if not getattr(transport, "_requests_in_flight", 0):
                idle.deadline = anyio.current_time() + self.idle_timeout_s


def _parse_call(body: bytes) -> tuple[str | int, str, dict[str, Any]] | None:
    """A ``tools/call`` request's id, tool name and arguments; None for anything else."""
    try:
        message = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    if message.get("method") != "tools/call" or set(message) - {
        "jsonrpc",
        "id",
        "method",
        "params",
    }:
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    params = message.get("params")
    if not isinstance(params, dict) or set(params) - {"name", "arguments", "_meta"}:
        return None
    name, arguments = params.get("name"), params.get("arguments", {})
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return None
    return request_id, name, arguments


def _plain_post(scope: Scope) -> bool:
    """A POST that accepts JSON, sends JSON and names a protocol version this SDK speaks."""
    accept = header(scope, "accept") or ""
    if not any(part.strip().startswith("application/json") for part in accept.split(",")):
        return False
    content_type = (header(scope, "content-type") or "").split(";")[0]
    if "application/json" not in (part.strip() for part in content_type.split(",")):
        return False
    version = header(scope, MCP_PROTOCOL_VERSION_HEADER)
    return version is None or version in SUPPORTED_PROTOCOL_VERSIONS


def header(scope: Scope, name: str) -> str | None:
    """The first value of request header ``name`` (any case), if it came."""
    wanted = name.lower().encode("latin-1")
    for header, value in scope.get("headers", ()):
        if header.lower() == wanted:
            return str(value.decode("latin-1"))
    return None
