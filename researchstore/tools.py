"""The tools: plain functions over a ``Store`` that return envelopes.

Every tool returns ``{"result": ...}`` or ``{"error": {"code", "message",
"field"?, "details"?}}``. A miss is a result. Parameters are declared once
(``Param``) and give both the validation here and the JSON Schema that the
MCP server publishes, so the two cannot drift apart.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from researchstore.auth import current_principal
from researchstore.errors import InvalidInput, NotEntitled, ResearchStoreError, UpstreamUnavailable
from researchstore.evidence import spec as evidence_spec
from researchstore.index import SearchFilters
from researchstore.ingest.model import DOCUMENT_KINDS
from researchstore.params import MAX_SAFE_INTEGER, Param, Tool

if TYPE_CHECKING:
    from researchstore.store import Store

# -- the tool bodies: bound arguments in, result payload out -----------------


def _search(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    if args["date_from"] and args["date_to"] and args["date_from"] > args["date_to"]:
        raise InvalidInput("date_from: must not be after date_to", field="date_from")
    filters = SearchFilters(
        report_id=args["report_id"],
        tags=args["tags"],
        date_from=args["date_from"],
        date_to=args["date_to"],
        source=args["source"],
        kind=args["kind"],
        workspace=_search_workspace(args["workspace_id"]),
    )
    return {"hits": store.search(args["query"], limit=args["limit"], filters=filters)}


def _search_workspace(workspace_id: str | None) -> str | None:
    """A workspace's evidence is searched only by a caller who may use that workspace."""
    if workspace_id is None:
        return None
    workspace = str(uuid.UUID(workspace_id))
    current_principal().require("agent:research", workspace)
    return workspace


def _get_chunk(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    return {"chunk": store.get_chunk(args["chunk_id"])}


def _get_report(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    return {"report": store.get_report(args["report_id"])}


def _get_chunks(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    return store.get_chunks(args["ids"])


def _get_chunk_next(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    return store.get_chunk_next(args["id"], args["count"])


def _get_chunk_prev(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    return store.get_chunk_prev(args["id"], args["count"])


def _get_chunk_neighbors(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    return store.get_chunk_neighbors(args["id"], args["count"])


def _get_chunk_parents(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    return {"parents": store.get_chunk_parents(args["id"])}


def _get_document(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    return {"document": store.get_document(args["id"])}


def _get_document_chunks(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    return store.get_document_chunks(args["id"], args["from"], args["limit"])


def _resolve_chunk(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    return {"resolution": store.resolve_chunk(args["chunk_id"])}


def _retrieve_evidence(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    # Imported here: the fetcher's HTTP stack loads on the first retrieval only.
    from researchstore.evidence.retrieve import retrieve

    return retrieve(
        store,
        url=args["url"],
        kind=args["kind"],
        workspace_id=args["workspace_id"],
        mutation_id=args["mutation_id"],
        language=args["language"],
    )


_CHUNK_ID = Param(
    "chunk_id",
    "string",
    "The chunk_id returned by a previous research_chunk_search call.",
    required=True,
    min_length=1,
    max_length=200,
)


def _anchor(description: str = "Anchor chunk UUID.") -> Param:
    return Param("id", "string", description, required=True, min_length=1, max_length=200)


def _count(default: int, description: str) -> Param:
    return Param("count", "integer", description, default=default, minimum=1, maximum=100)


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "research_chunk_search",
            "Search chunks",
            "Full-text search over every chunk; best first, with highlighted snippets.\n\n"
            "Returns hits with chunk_id, report_id, document_id, title, date, score, text, "
            "snippet (matches in <b>), tags, position and caption times. Any text is a valid "
            "query; put words in double quotes to ask for a phrase.",
            (
                Param(
                    "query",
                    "string",
                    "What to look for, in plain words.",
                    required=True,
                    min_length=1,
                    max_length=4096,
                ),
                Param(
                    "limit",
                    "integer",
                    "How many hits to return.",
                    default=10,
                    minimum=1,
                    maximum=50,
                ),
                Param(
                    "report_id",
                    "integer",
                    "Only chunks of this report.",
                    minimum=1,
                    maximum=MAX_SAFE_INTEGER,
                ),
                Param(
                    "tags",
                    "object",
                    'Only reports with these tags, e.g. {"audience": "students"}; a list '
                    "of values matches any of them.",
                ),
                Param(
                    "date_from",
                    "string",
                    "Only reports dated on or after (YYYY-MM-DD).",
                    format="date",
                ),
                Param(
                    "date_to",
                    "string",
                    "Only reports dated on or before (YYYY-MM-DD).",
                    format="date",
                ),
                Param(
                    "source",
                    "string",
                    "Only chunks of this source (its name).",
                    min_length=1,
                    max_length=200,
                ),
                Param("kind", "string", "Only documents of this kind.", enum=DOCUMENT_KINDS),
                Param(
                    "workspace_id",
                    "string",
                    "Search only the evidence retrieved into this workspace "
                    "(research_evidence_retrieve); without it, no evidence is searched.",
                    format="uuid",
                ),
            ),
            _search,
        ),
        Tool(
            "research_get_chunk",
            "Get Passage (Research)",
            "Fetch a single text chunk by its stable id.\n\n"
            "Use after research_chunk_search when you have a chunk_id. On a hit: "
            '{"result": {"chunk": {report_id, title, date, score, text, chunk_id}}}, score 0.0. '
            'On a miss: {"result": {"chunk": null}}, not an error. chunk_id is NOT durable '
            "across re-ingestion: a modified report's chunks get new ids.",
            (_CHUNK_ID,),
            _get_chunk,
        ),
        Tool(
            "research_get_report",
            "Get report",
            "A report's metadata, tags and documents; null when there is no such report.",
            (
                Param(
                    "report_id",
                    "integer",
                    "The report_id from a search hit or chunk.",
                    required=True,
                    minimum=1,
                    maximum=MAX_SAFE_INTEGER,
                ),
            ),
            _get_report,
        ),
        Tool(
            "get_chunks",
            "Get chunks",
            "Fetch the full content of 1-20 chunks by id in one batched call, in the order "
            "asked; ids that do not exist are listed in not_found.",
            (
                Param(
                    "ids",
                    "array",
                    "Array of 1-20 chunk UUIDs.",
                    required=True,
                    min_items=1,
                    max_items=20,
                ),
            ),
            _get_chunks,
        ),
        Tool(
            "get_chunk_next",
            "Next chunks",
            "Walk forward count chunks from an anchor chunk, in reading order, skipping "
            "embed_failed gaps. Past the document's end: an empty list.",
            (_anchor(), _count(5, "Chunks to return; range 1-100.")),
            _get_chunk_next,
        ),
        Tool(
            "get_chunk_prev",
            "Previous chunks",
            "Walk backward count chunks from an anchor chunk; returned in reading order, "
            "skipping embed_failed gaps. Past the document's start: an empty list.",
            (_anchor(), _count(5, "Chunks to return; range 1-100.")),
            _get_chunk_prev,
        ),
        Tool(
            "get_chunk_neighbors",
            "Chunk with neighbours",
            "A chunk plus count neighbours on each side (prev + the chunk + next) in one call. "
            "A side that runs past the document's edge comes back empty.",
            (_anchor(), _count(2, "Chunks to fetch on each side; range 1-100.")),
            _get_chunk_neighbors,
        ),
        Tool(
            "get_chunk_parents",
            "Chunk parents",
            "The parent chain of a chunk up to its source-version root: document, report, "
            "folders, source version. Each node has id, name and kind; the document node "
            "has a document_id for get_document.",
            (_anchor("Chunk UUID."),),
            _get_chunk_parents,
        ),
        Tool(
            "get_document",
            "Document overview",
            "A document's metadata plus the ordered skeleton of its chunks (chunk_id, "
            "position, token_count, status), without chunk bodies.",
            (_anchor("Document UUID (from a search hit or get_chunk_parents)."),),
            _get_document,
        ),
        Tool(
            "get_document_chunks",
            "Read a document",
            "A window of a document's chunk bodies by position, with an accurate "
            "total_chunks. A position past the end returns an empty window, not an error.",
            (
                _anchor("Document UUID."),
                Param(
                    "from",
                    "integer",
                    "Zero-based chunk position to start from.",
                    default=0,
                    minimum=0,
                    maximum=MAX_SAFE_INTEGER,
                ),
                Param(
                    "limit",
                    "integer",
                    "Chunk bodies to return; range 1-100.",
                    default=20,
                    minimum=1,
                    maximum=100,
                ),
            ),
            _get_document_chunks,
        ),
        Tool(
            "research_resolve_chunk",
            "Resolve a stale chunk id",
            "Say where a chunk_id's content lives now, after a re-ingest replaced it.\n\n"
            "status is current (the id is live; chunks holds it), replaced (chunks are the "
            "current chunks of the same document holding the same text, or the same span "
            "of it; replaced_at and replaced_by_run say when and by which run), or gone "
            "(the report or document was removed). An id never seen, or forgotten after "
            'the retention period, is a miss: {"result": {"resolution": null}}.',
            (_CHUNK_ID,),
            _resolve_chunk,
        ),
        Tool(
            evidence_spec.NAME,
            evidence_spec.TITLE,
            evidence_spec.DESCRIPTION,
            evidence_spec.PARAMS,
            _retrieve_evidence,
            read_only=False,
            annotations=dict(evidence_spec.ANNOTATIONS),
            profile=evidence_spec.PROFILE,
            scope=evidence_spec.SCOPE,
            schema_override=evidence_spec.INPUT_SCHEMA,
        ),
    )
}


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


def _may_read(principal: Any, workspace: str | None) -> bool:
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
    from researchstore.queries import owning_workspace

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
    store: Store, name: str, arguments: Any = None, *, tools: Mapping[str, Tool] | None = None
) -> dict[str, Any]:
    """Run tool ``name`` (of ``tools``, by default all); always an envelope, never an exception."""
    tools = TOOLS if tools is None else tools
    tool = tools.get(name)
    if tool is None:
        return InvalidInput(
            f"unknown tool {name!r}; known tools: {', '.join(sorted(tools))}", field="tool"
        ).to_envelope()
    try:
        bound = tool.bind(arguments)
        principal = current_principal()
        if tool.scope is not None:
            principal.require(tool.scope, bound.get("workspace_id"))
        if not principal.unrestricted:
            return {"result": _run_within_workspaces(store, tool, bound)}
        return {"result": tool.run(store, bound)}
    except ResearchStoreError as error:
        return error.to_envelope()
    except sqlite3.OperationalError as error:
        return UpstreamUnavailable(f"the store is busy or unreadable: {error}").to_envelope()
    except Exception as error:  # the envelope boundary: nothing escapes a tool
        return ResearchStoreError(f"{type(error).__name__}: {error}").to_envelope()
