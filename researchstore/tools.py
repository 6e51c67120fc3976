"""Calling a tool: the envelope boundary and the workspace guard.

Every call returns ``{"result": ...}`` or ``{"error": {"code", "message",
"field"?, "details"?}}``; a miss is a result, and nothing escapes as an
exception: not a Rust panic from an extension either (a ``BaseException``).
A call that meets a damaged index gets ``internal`` saying so, and the index
is repaired (``sync.IndexSync.recover``), so the next call works without a
restart. A caller restricted to some workspaces (an API key over HTTP)
gets, for an id in another workspace, exactly the miss an unknown id gets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from researchstore.catalogue import TOOLS
from researchstore.errors import (
    InvalidInput,
    NotEntitled,
    ResearchStoreError,
    StoreDamaged,
)
from researchstore.params import Tool
from researchstore.principal import Principal, current_principal
from researchstore.storage.derived import IndexDamaged
from researchstore.storage.foreign_errors import tool_errors
from researchstore.storage.queries import owning_workspace

if TYPE_CHECKING:
    from researchstore.store import Store

#: What a call that met a damaged index returns (``call_tool``).
OnDamage = Callable[["Store", IndexDamaged], dict[str, Any]]

#: Which argument of a tool names what, for the workspace guard below.
_ANCHORS: dict[str, tuple[str, str]] = {
    "research_get_chunk": ("chunk_id", "chunk"),
    "research_resolve_chunk": ("chunk_id", "chunk"),
    "get_chunk_next": ("id", "chunk"),
    "get_chunk_prev": ("id", "chunk"),
    "get_chunk_neighbors": ("id", "chunk"),
    "get_chunk_parents": ("id", "chunk"),
    "get_document": ("id", "document"),
    "get_document_chunks": ("id", "document"),
    "research_get_report": ("report_id", "report"),
}
#: An id no row can have: asking for it gives each tool its own natural miss.
_HIDDEN = "\x00hidden"


def _may_read(principal: Principal, workspace: str | None) -> bool:
    if workspace is None:
        return True
    try:
        principal.require("agent:research", workspace)
    except NotEntitled:
        return False
    return True


def _run_within_workspaces(store: Store, tool: Tool, bound: dict[str, Any]) -> dict[str, Any]:
    """Run a read tool for a restricted caller: evidence of another workspace is a miss.

    Workspaces are isolated: an API key limited to workspace A that holds an
    id from workspace B gets exactly what an unknown id gets.
    """
    principal = current_principal()
    with store.reading() as conn:
        if tool.name in _ANCHORS:
            argument, kind = _ANCHORS[tool.name]
            asked = bound[argument]
            if _may_read(principal, owning_workspace(conn, kind, asked)):
                return tool.run(store, bound)
            result = tool.run(store, {**bound, argument: 0 if kind == "report" else _HIDDEN})
            if result.get("document_id") == _HIDDEN:
                result["document_id"] = asked
            return result
        if tool.name == "get_chunks":
            ids = bound["ids"]
            hidden = {
                chunk_id
                for chunk_id in ids
                if not _may_read(principal, owning_workspace(conn, "chunk", chunk_id))
            }
            visible = [chunk_id for chunk_id in ids if chunk_id not in hidden]
            result = tool.run(store, {**bound, "ids": visible}) if visible else {"chunks": []}
            missing = set(result.get("not_found", [])) | hidden
            result["not_found"] = [i for i in dict.fromkeys(ids) if i in missing]
            return result
        return tool.run(store, bound)


def call_tool(
    store: Store,
    name: str,
    arguments: Any = None,
    *,
    tools: Mapping[str, Tool] | None = None,
    on_damage: OnDamage | None = None,
) -> dict[str, Any]:
    """Run tool ``name`` (of ``tools``, by default all); always an envelope, never an exception.

    A call that meets a damaged index returns ``on_damage(store, damage)``: by
    default the index is repaired and the envelope says so. A process that
    must not write the store (a server's worker) hands the call on instead.
    """
    on_damage = on_damage or _index_damaged
    tools = TOOLS if tools is None else tools
    tool = tools.get(name)
    if tool is None:
        return InvalidInput(
            f"unknown tool {name!r}; known tools: {', '.join(sorted(tools))}", field="tool"
        ).to_envelope()
    try:
        # The envelope boundary: every error leaves the block as one of ours.
        with tool_errors(store.path):
            bound = tool.bind(arguments)
            principal = current_principal()
            if tool.scope is not None:
                principal.require(tool.scope, bound.get("workspace_id"))
            if not principal.unrestricted:
                return {"result": _run_within_workspaces(store, tool, bound)}
            return {"result": tool.run(store, bound)}
    except IndexDamaged as damage:
        return on_damage(store, damage)
    except ResearchStoreError as error:
        return error.to_envelope()


def _index_damaged(store: Store, damage: IndexDamaged) -> dict[str, Any]:
    """The envelope of a call that met a damaged index, the index repaired meanwhile."""
    try:
        return store.recover_index(damage).to_envelope()
    except Exception as error:  # the boundary holds even if the repair breaks
        return StoreDamaged(
            f"the word index beside {store.path} is damaged ({damage.message}); repairing it "
            f"failed ({type(error).__name__}: {error}). To repair it by hand: "
            f"researchstore rebuild-index {store.path}"
        ).to_envelope()
