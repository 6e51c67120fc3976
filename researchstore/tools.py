"""The tools: plain functions over a ``Store`` that return envelopes.

Every tool returns ``{"result": ...}`` or ``{"error": {"code", "message",
"field"?, "details"?}}``. A miss is a result. Parameters are declared once
(``Param``) and give both the validation here and the JSON Schema that the
MCP server publishes, so the two cannot drift apart.
"""

from __future__ import annotations

import copy
import re
import sqlite3
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from researchstore.auth import current_principal
from researchstore.dates import is_iso_date
from researchstore.errors import InvalidInput, NotEntitled, ResearchStoreError, UpstreamUnavailable
from researchstore.index import SearchFilters

if TYPE_CHECKING:
    from researchstore.store import Store

DOCUMENT_KINDS = ("html", "vtt", "srt", "text")
#: The largest integer JSON clients can carry exactly (2**53 - 1).
MAX_SAFE_INTEGER = 9_007_199_254_740_991


@dataclass(frozen=True, slots=True)
class Param:
    """One tool parameter: its JSON Schema and how to check a value against it."""

    name: str
    type: str  # "string", "integer", "array", "object"
    description: str
    required: bool = False
    default: Any = None
    minimum: int | None = None
    maximum: int | None = None
    min_length: int | None = None
    max_length: int | None = None
    min_items: int | None = None
    max_items: int | None = None
    enum: tuple[str, ...] | None = None
    format: str | None = None  # "date" and "uuid" are checked; others are documentation
    pattern: str | None = None

    def schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": self.type, "description": self.description}
        if self.type == "array":
            schema["items"] = {"type": "string", "minLength": 1}
        if self.type == "object":
            schema["additionalProperties"] = {
                "anyOf": [
                    {"type": "string"},
                    {"type": "array", "items": {"type": "string"}, "minItems": 1},
                ]
            }
        for key, value in (
            ("default", self.default),
            ("minimum", self.minimum),
            ("maximum", self.maximum),
            ("minLength", self.min_length),
            ("maxLength", self.max_length),
            ("minItems", self.min_items),
            ("maxItems", self.max_items),
            ("enum", list(self.enum) if self.enum else None),
            ("format", self.format),
            ("pattern", self.pattern),
        ):
            if value is not None:
                schema[key] = value
        return schema

    def check(self, value: Any) -> Any:
        """Return the value if it fits, else raise ``InvalidInput`` naming the field."""
        checker = _CHECKERS[self.type]
        return checker(self, value)


def _fail(param: Param, message: str) -> InvalidInput:
    return InvalidInput(f"{param.name}: {message}", field=param.name)


def _check_string(param: Param, value: Any) -> str:
    if not isinstance(value, str):
        raise _fail(param, f"must be a string, got {type(value).__name__}")
    value = _without_lone_surrogates(value)
    if param.min_length is not None and len(value) < param.min_length:
        raise _fail(param, f"must be at least {param.min_length} character(s) long")
    if param.max_length is not None and len(value) > param.max_length:
        raise _fail(param, f"must be at most {param.max_length} characters long")
    if param.enum is not None and value not in param.enum:
        raise _fail(param, f"must be one of {', '.join(param.enum)}; got {value!r}")
    if param.format == "date" and not is_iso_date(value):
        raise _fail(param, f"must be a date as YYYY-MM-DD; got {value!r}")
    if param.format == "uuid" and not _is_uuid(value):
        raise _fail(param, f"must be a UUID; got {value[:60]!r}")
    if param.pattern is not None and not re.search(param.pattern, value):
        raise _fail(param, f"must match {param.pattern}; got {value[:60]!r}")
    return value


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return len(value) == 36  # the hyphenated form JSON Schema's "uuid" means


def _without_lone_surrogates(value: str) -> str:
    """JSON can carry a lone surrogate (``"\\ud800"``) that UTF-8 cannot: make it U+FFFD."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


def _check_integer(param: Param, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(param, f"must be an integer, got {type(value).__name__}")
    if param.minimum is not None and value < param.minimum:
        raise _fail(param, f"must be at least {param.minimum}; got {value}")
    if param.maximum is not None and value > param.maximum:
        raise _fail(param, f"must be at most {param.maximum}; got {value}")
    return value


def _check_array(param: Param, value: Any) -> list[str]:
    if not isinstance(value, list):
        raise _fail(param, f"must be an array of strings, got {type(value).__name__}")
    if param.min_items is not None and len(value) < param.min_items:
        raise _fail(param, f"must hold at least {param.min_items} item(s)")
    if param.max_items is not None and len(value) > param.max_items:
        raise _fail(param, f"must hold at most {param.max_items} items; got {len(value)}")
    for item in value:
        if not isinstance(item, str) or not item:
            raise _fail(param, "every item must be a non-empty string")
    return [_without_lone_surrogates(item) for item in value]


def _check_tags(param: Param, value: Any) -> dict[str, list[str]]:
    if not isinstance(value, dict):
        raise _fail(param, 'must be an object such as {"audience": "students"}')
    tags: dict[str, list[str]] = {}
    for name, wanted in value.items():
        values = wanted if isinstance(wanted, list) else [wanted]
        if not values or not all(isinstance(item, str) and item for item in values):
            raise _fail(param, f"{name!r} must be a non-empty string or a list of them")
        tags[_without_lone_surrogates(name)] = [_without_lone_surrogates(v) for v in values]
    return tags


_CHECKERS: dict[str, Callable[[Param, Any], Any]] = {
    "string": _check_string,
    "integer": _check_integer,
    "array": _check_array,
    "object": _check_tags,
}


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    title: str
    description: str
    params: tuple[Param, ...]
    run: Callable[..., dict[str, Any]]
    read_only: bool = True
    annotations: dict[str, Any] = field(default_factory=dict)
    #: ``core`` tools are served in every MCP profile, ``full`` ones only in ``full``.
    profile: str = "core"
    #: The scope a caller needs (``auth.Principal.require``); a ``workspace_id``
    #: argument is checked against the caller's workspaces too.
    scope: str | None = None
    #: An exact input schema to publish instead of the one built from
    #: ``params`` (a seed's contract); ``params`` still check the arguments.
    schema_override: dict[str, Any] | None = None

    def input_schema(self) -> dict[str, Any]:
        if self.schema_override is not None:
            return copy.deepcopy(self.schema_override)
        return {
            "type": "object",
            "properties": {param.name: param.schema() for param in self.params},
            "required": [param.name for param in self.params if param.required],
            "additionalProperties": False,
        }

    def bind(self, arguments: Any) -> dict[str, Any]:
        """Check ``arguments`` and fill in defaults; raise ``InvalidInput``."""
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidInput("arguments must be a JSON object")
        known = {param.name: param for param in self.params}
        for name in arguments:
            if name not in known:
                raise InvalidInput(f"unknown argument {name!r}", field=str(name))
        bound: dict[str, Any] = {}
        for param in self.params:
            if param.name in arguments and arguments[param.name] is not None:
                bound[param.name] = param.check(arguments[param.name])
            elif param.required:
                raise InvalidInput(f"{param.name}: is required", field=param.name)
            else:
                bound[param.name] = param.default
        return bound


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
    )
}


def register(tool: Tool) -> None:
    """Add a tool (used by modules that bring their own, such as evidence)."""
    TOOLS[tool.name] = tool


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
