"""The tool catalogue: every tool, its parameters and its body, in one literal.

A body takes the store and arguments already checked by ``Tool.bind`` and
returns the result payload; ``tools.call_tool`` wraps it in an envelope.
Bodies run on a ``store.Store``; a search by meaning needs the models a
``library.Library`` loads too (``QueryModels``), and without them searches
by words.
Evidence retrieval's body lives in ``researchstore.evidence`` and is imported
only when the tool is called, so listing the tools never loads the HTTP stack.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from researchstore.errors import InvalidInput
from researchstore.evidence import spec as evidence_spec
from researchstore.kinds import DOCUMENT_KINDS
from researchstore.params import MAX_SAFE_INTEGER, PROFILES, TRANSPORTS, Param, Tool
from researchstore.principal import current_principal
from researchstore.storage import queries
from researchstore.storage.filters import SearchFilters
from researchstore.storage.forwarding import resolve_chunk
from researchstore.storage.ids import canonical_uuid

if TYPE_CHECKING:
    from researchstore.meaning.embedding import Embedder
    from researchstore.store import Store


@runtime_checkable
class QueryModels(Protocol):
    """What a search by meaning asks of its store beyond ``Store``: the model that
    embeds queries. ``library.Library`` has it; this module sits below it, so
    it names it by what it uses."""

    def default_search_mode(self) -> str: ...

    def query_embedder(self) -> Embedder: ...


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
    # The indexes load with the first search: a one-shot lookup never needs them.
    from researchstore.retrieval.semantic import run_search

    index = store.search_index()
    models = store if isinstance(store, QueryModels) else None
    mode = args["mode"] or (models.default_search_mode() if models else "keyword")
    vectors = embedder = None
    if mode != "keyword":
        if models is None:
            from researchstore.meaning.embedding import SemanticUnavailable

            raise SemanticUnavailable(
                f"a search by meaning needs the model that embeds queries, which a bare Store "
                f"loads none of: open {store.path} as a researchstore.Library (or search with "
                "mode keyword)",
                field="mode",
            )
        embedder = models.query_embedder()
        vectors = store.vector_index()
    hits = run_search(
        mode=mode,
        query=args["query"],
        limit=args["limit"],
        filters=filters,
        reading=store.reading,
        words=index,
        vectors=vectors,
        embedder=embedder,
    )
    return {"hits": hits, "mode": mode}


def _search_workspace(workspace_id: str | None) -> str | None:
    """A workspace's evidence is searched only by a caller who may use that workspace."""
    if workspace_id is None:
        return None
    workspace = canonical_uuid(workspace_id) or workspace_id  # checked by its Param
    current_principal().require("agent:research", workspace)
    return workspace


def _get_chunk(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    with store.reading() as conn:
        return {"chunk": queries.get_chunk(conn, args["chunk_id"])}


def _get_report(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    with store.reading() as conn:
        return {"report": queries.get_report(conn, args["report_id"])}


def _get_chunks(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    with store.reading() as conn:
        return queries.get_chunks(conn, args["ids"])


def _get_chunk_next(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    with store.reading() as conn:
        return queries.get_chunk_walk(conn, args["id"], args["count"], forward=True)


def _get_chunk_prev(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    with store.reading() as conn:
        return queries.get_chunk_walk(conn, args["id"], args["count"], forward=False)


def _get_chunk_neighbors(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    with store.reading() as conn:
        return queries.get_chunk_neighbors(conn, args["id"], args["count"])


def _get_chunk_parents(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    with store.reading() as conn:
        return {"parents": queries.get_chunk_parents(conn, args["id"])}


def _get_document(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    with store.reading() as conn:
        return {"document": queries.get_document(conn, args["id"])}


def _get_document_chunks(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    with store.reading() as conn:
        return queries.get_document_chunks(conn, args["id"], args["from"], args["limit"])


def _resolve_chunk(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    with store.reading() as conn:
        return {"resolution": resolve_chunk(conn, args["chunk_id"])}


#: Bounds that keep any one search cheap, whatever a caller sends: a search's
#: cost grows with its terms and phrases (each a Tantivy clause) and with its
#: tag filters (one clause per value). The worst query within them (common
#: words, common phrases) takes ~0.1 s at 100,000 chunks, ~0.8 s at 1,000,000.
MAX_QUERY_TERMS = 64
MAX_QUERY_PHRASES = 8
MAX_TAGS = 16
MAX_TAG_VALUES = 32
MAX_TAG_NAME_LENGTH = 100
MAX_TAG_VALUE_LENGTH = 200
#: The longest id any tool takes (a UUID is 36 characters).
MAX_ID_LENGTH = 200


def _query_problem(query: str) -> str | None:
    """Why a search query asks too much of the index, or None."""
    from researchstore.text.analysis import query_size

    terms, phrases = query_size(query)
    if terms > MAX_QUERY_TERMS:
        return (
            f"must hold at most {MAX_QUERY_TERMS} search terms (stop words aside); "
            f"got {terms}: ask with fewer words"
        )
    if phrases > MAX_QUERY_PHRASES:
        return f"must hold at most {MAX_QUERY_PHRASES} quoted phrases; got {phrases}"
    return None


_CHUNK_ID = Param(
    "chunk_id",
    "string",
    "The chunk_id returned by a previous research_chunk_search call.",
    required=True,
    min_length=1,
    max_length=MAX_ID_LENGTH,
)


def _anchor(description: str = "Anchor chunk UUID.") -> Param:
    return Param("id", "string", description, required=True, min_length=1, max_length=MAX_ID_LENGTH)


def _count(default: int, description: str) -> Param:
    return Param("count", "integer", description, default=default, minimum=1, maximum=100)


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


def _ingest_file(store: Store, args: dict[str, Any]) -> dict[str, Any]:
    from researchstore.ingest.pipeline import ingest_file

    return ingest_file(store, Path(args["path"]), name=args["source"], progress=False).to_dict()


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "research_chunk_search",
            "Search chunks",
            "Search every chunk by words, by meaning or both (mode); best first, with "
            "highlighted snippets.\n\n"
            "Returns hits with chunk_id, report_id, document_id, title, date, score, text, "
            "snippet (matches in <b>), tags, position and caption times. Any text is a valid "
            "query; put words in double quotes to ask for a phrase.",
            (
                Param(
                    "query",
                    "string",
                    f"What to look for, in plain words: at most {MAX_QUERY_TERMS} search "
                    f"terms (stop words aside) and {MAX_QUERY_PHRASES} quoted phrases.",
                    required=True,
                    min_length=1,
                    max_length=4096,
                    bound=_query_problem,
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
                    f"of values matches any of them. At most {MAX_TAGS} tags of "
                    f"{MAX_TAG_VALUES} values each.",
                    max_keys=MAX_TAGS,
                    max_key_length=MAX_TAG_NAME_LENGTH,
                    max_items=MAX_TAG_VALUES,
                    max_length=MAX_TAG_VALUE_LENGTH,
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
                Param(
                    "mode",
                    "string",
                    "keyword: by words (score: BM25). semantic: by meaning (score: cosine "
                    "similarity, -1 to 1). hybrid: both, fused (score: 0 to 1; half BM25 "
                    "over the best candidate's, half cosine scaled by the lowest and highest "
                    "candidates). Default: hybrid when the store has vectors for its model, "
                    "else keyword.",
                    enum=("keyword", "semantic", "hybrid"),
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
                    max_length=MAX_ID_LENGTH,
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
        Tool(
            "ingest_file",
            "Ingest a local file",
            "Ingest one local file (HTML, WebVTT, SubRip or plain text) as its own report, so "
            "search and navigation reach it; ingesting the same file again refreshes it.\n\n"
            "Returns the ingest summary (new / modified / unchanged, documents, chunks, and any "
            "file skipped with its reason). Available over stdio only.",
            (
                Param(
                    "path",
                    "string",
                    "Path of the file on this machine (absolute, or relative "
                    "to the server's working directory).",
                    required=True,
                    min_length=1,
                    max_length=4096,
                ),
                Param(
                    "source",
                    "string",
                    "Source to file the report under.",
                    default="local-files",
                    min_length=1,
                    max_length=200,
                ),
            ),
            _ingest_file,
            read_only=False,
            annotations={"destructiveHint": False, "idempotentHint": True, "openWorldHint": False},
            profile="full",
            # It reads the server's own files: never for a caller over the network.
            transports=frozenset({"stdio"}),
        ),
    )
}


def served_tools(profile: str, transport: str) -> dict[str, Tool]:
    """The tools a server of ``profile`` over ``transport`` serves, by name."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}; choose one of {', '.join(TRANSPORTS)}")
    return {
        name: tool
        for name, tool in TOOLS.items()
        if transport in tool.transports
        and (profile == "full" or (tool.profile == "core" and tool.read_only))
    }
