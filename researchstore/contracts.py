"""Output JSON Schemas of the tools, and the structured content MCP carries.

Most schemas have the shape of seed 000: an object with a ``result`` branch
and an ``error`` branch, exactly one of them present (``oneOf``); the
structured content of such a tool is its whole envelope. The schema of
``research_get_chunk`` is seed 000's, copied verbatim. ``research_evidence_
retrieve`` follows seed 002 instead: its structured content is seed 002's
object itself (``{"retrieval": ...}``) and its schema is seed 002's, field for
field; its errors come back as the error envelope with ``isError`` set. The
others describe what ``queries.py`` and ``search.py`` return, field by field,
so a change of shape there fails the contract tests instead of surprising a
client. (``Library.call`` returns the envelope for every tool.)

The MCP server lists these in discovery when ``RESEARCHSTORE_OUTPUT_SCHEMAS=1``.
"""

from __future__ import annotations

import copy
from typing import Any

from researchstore.kinds import DOCUMENT_KINDS

Schema = dict[str, Any]

ERROR_CODES = ("invalid_input", "not_entitled", "upstream_unavailable", "internal")

ERROR: Schema = {
    "type": "object",
    "description": (
        "Present instead of `result` when the call was rejected. "
        "Branch on `code`; never string-match `message`."
    ),
    "properties": {
        "code": {"type": "string", "enum": list(ERROR_CODES)},
        "message": {"type": "string"},
        "field": {
            "type": "string",
            "description": "Offending parameter, when the failure is attributable to one.",
        },
        "details": {"type": "object", "additionalProperties": True},
    },
    "required": ["code", "message"],
}


def envelope(result: Schema) -> Schema:
    """The seed-000 envelope around a ``result`` schema."""
    return {
        "type": "object",
        "properties": {"result": result, "error": copy.deepcopy(ERROR)},
        "oneOf": [{"required": ["result"]}, {"required": ["error"]}],
        "additionalProperties": False,
    }


# -- building blocks ---------------------------------------------------------


def _object(properties: Schema, *, optional: tuple[str, ...] = ()) -> Schema:
    """A closed object: every property required unless named in ``optional``."""
    return {
        "type": "object",
        "properties": properties,
        "required": [name for name in properties if name not in optional],
        "additionalProperties": False,
    }


def _nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


def _array(items: Schema, **limits: int) -> Schema:
    return {"type": "array", "items": items, **limits}


_STRING: Schema = {"type": "string"}
_ID: Schema = {"type": "string", "minLength": 1}
_DATE: Schema = {"type": "string", "format": "date"}
_TIMESTAMP: Schema = {"type": "string", "format": "date-time"}
_COUNT: Schema = {"type": "integer", "minimum": 0}
_REPORT_ID: Schema = {"type": "integer", "minimum": 1}
_MILLISECONDS: Schema = _nullable({"type": "integer", "minimum": 0})
_KIND: Schema = {"type": "string", "enum": list(DOCUMENT_KINDS)}
_CHUNK_STATUS: Schema = {"type": "string", "enum": ["ok", "embed_failed"]}
_DOCUMENT_STATUS: Schema = {"type": "string", "enum": ["ok", "partial", "empty", "invalid"]}
_TAGS: Schema = {
    "type": "object",
    "description": "The report's taxonomy tags, e.g. audience and season.",
    "additionalProperties": {
        "anyOf": [
            {"type": "string"},
            {"type": "number"},
            {"type": "boolean"},
            _array({"type": "string"}),
        ]
    },
}

#: A chunk with its body, as the navigation tools return it.
CHUNK: Schema = _object(
    {
        "chunk_id": _ID,
        "document_id": _ID,
        "report_id": _REPORT_ID,
        "position": _COUNT,
        "text": _STRING,
        "token_count": _COUNT,
        "status": _CHUNK_STATUS,
        "heading_path": _array(_STRING),
        "start_ms": _MILLISECONDS,
        "end_ms": _MILLISECONDS,
    }
)

SEARCH_HIT: Schema = _object(
    {
        "chunk_id": _ID,
        "report_id": _REPORT_ID,
        "document_id": _ID,
        "title": _STRING,
        "date": _nullable(_DATE),
        "score": {"type": "number"},
        "text": _STRING,
        "snippet": {"type": "string", "description": "The text around the matches, in <b>."},
        "tags": _TAGS,
        "position": _COUNT,
        "start_ms": _MILLISECONDS,
        "end_ms": _MILLISECONDS,
        "heading_path": _array(_STRING),
        "kind": _KIND,
        "document_title": _nullable(_STRING),
        "source": _STRING,
    }
)

_DOCUMENT_FIELDS: Schema = {
    "document_id": _ID,
    "report_id": _REPORT_ID,
    "path": _STRING,
    "name": _STRING,
    "kind": _KIND,
    "title": _nullable(_STRING),
    "description": _nullable(_STRING),
    "language": _nullable(_STRING),
    "date": _nullable(_DATE),
    "status": _DOCUMENT_STATUS,
    "reason": _nullable(_STRING),
    "skipped": _array(_STRING),
    "total_chunks": _COUNT,
    "token_count": _COUNT,
    "created_at": _TIMESTAMP,
    "encoding": _nullable(_STRING),
    "date_source": _nullable(_STRING),
}

DOCUMENT: Schema = _object(_DOCUMENT_FIELDS)

DOCUMENT_SKELETON: Schema = _object(
    {
        **_DOCUMENT_FIELDS,
        "chunks": _array(
            _object(
                {
                    "chunk_id": _ID,
                    "position": _COUNT,
                    "token_count": _COUNT,
                    "status": _CHUNK_STATUS,
                }
            )
        ),
    }
)

REPORT: Schema = _object(
    {
        "report_id": _REPORT_ID,
        "title": _STRING,
        "date": _nullable(_DATE),
        "tags": _TAGS,
        "key": _STRING,
        "is_directory": {"type": "boolean"},
        "source": _STRING,
        "created_at": _TIMESTAMP,
        "updated_at": _TIMESTAMP,
        "documents": _array(DOCUMENT),
    }
)


def _parent(kind: str, fields: Schema) -> Schema:
    return _object({"id": _ID, "name": _STRING, "kind": {"const": kind}, **fields})


PARENT: Schema = {
    "oneOf": [
        _parent(
            "document",
            {
                "document_id": _ID,
                "path": _STRING,
                "document_kind": _KIND,
                "title": _nullable(_STRING),
            },
        ),
        _parent("report", {"report_id": _REPORT_ID, "path": _STRING, "title": _STRING}),
        _parent("folder", {"path": _STRING}),
        _parent("source_version", {"source": _STRING, "started_at": _TIMESTAMP}),
    ]
}

_WALK: Schema = _object({"found": {"type": "boolean"}, "chunks": _array(CHUNK, maxItems=100)})

INGEST_SUMMARY: Schema = _object(
    {
        "source": _STRING,
        "version_id": _ID,
        "new": _COUNT,
        "modified": _COUNT,
        "unchanged": _COUNT,
        "removed": _COUNT,
        "failed": _COUNT,
        "documents": _COUNT,
        "chunks": _COUNT,
        "seconds": {"type": "number", "minimum": 0},
        "failures": _array(_object({"report": _STRING, "reason": _STRING})),
        "skipped": _array(
            {
                "type": "object",
                "properties": {
                    "path": _STRING,
                    "status": _STRING,
                    "reason": _nullable(_STRING),
                    "details": _array(_STRING),
                },
                "required": ["path", "status", "reason", "details"],
            }
        ),
    }
)


# -- seed 000: research_get_chunk, verbatim ------------------------------------

GET_CHUNK_OUTPUT: Schema = {
    "type": "object",
    "properties": {
        "result": {
            "properties": {
                "chunk": {
                    "anyOf": [
                        {
                            "properties": {
                                "report_id": {"type": "integer"},
                                "title": {"type": "string"},
                                "date": {"format": "date", "type": "string"},
                                "score": {"type": "number"},
                                "text": {"type": "string"},
                                "chunk_id": {"type": "string"},
                            },
                            "required": ["report_id", "title", "date", "score", "text", "chunk_id"],
                            "type": "object",
                        },
                        {"type": "null"},
                    ]
                }
            },
            "required": ["chunk"],
            "type": "object",
        },
        "error": copy.deepcopy(ERROR),
    },
    "oneOf": [{"required": ["result"]}, {"required": ["error"]}],
    "x-fastmcp-wrap-result": True,
}


# -- seed 002: research_evidence_retrieve's structured output ------------------

_DATE_TIME_PATTERN = (
    r"^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29"
    r"|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)"
    r"|(?:02)-(?:0[1-9]|1\d|2[0-8])))T(?:(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d+)?)?"
    r"(?:Z|([+-](?:[01]\d|2[0-3]):[0-5]\d)))$"
)
_LANGUAGE_PATTERN = r"^[a-zA-Z]{2,8}(?:-[a-zA-Z0-9]{1,8})*$"
_MAX_SAFE_INTEGER = 9007199254740991
_RETRIEVAL_KINDS = ["url_text", "published_captions"]
_REASONS = [
    "unsafe_url",
    "unsupported_source",
    "unsupported_media",
    "unsupported_content",
    "access_denied",
    "login_required",
    "no_text",
    "metadata_only",
    "no_captions",
    "invalid_captions",
    "not_found",
    "rate_limited",
    "response_too_large",
    "text_limited",
    "nodes_limited",
    "cues_limited",
    "invalid_cues",
    "language_mismatch",
    "source_partial",
    "timeout",
    "cancelled",
    "egress_unavailable",
    "unavailable",
]


def _seed_date_time() -> Schema:
    return {"type": "string", "pattern": _DATE_TIME_PATTERN, "format": "date-time"}


def _seed_uuid() -> Schema:
    return {"type": "string", "format": "uuid"}


def _seed_closed(properties: Schema) -> Schema:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


_PROVENANCE: Schema = _seed_closed(
    {
        "source_url": _nullable({"type": "string", "maxLength": 2048, "format": "uri"}),
        "retrieved_at": _seed_date_time(),
        "mime_type": _nullable(
            {
                "type": "string",
                "enum": [
                    "text/html",
                    "application/xhtml+xml",
                    "text/plain",
                    "text/vtt",
                    "application/x-subrip",
                    "application/srt",
                    "text/srt",
                ],
            }
        ),
        "parser_version": {"type": "string", "const": "research-public-retrieval/v1"},
        "content_kind": {
            "type": "string",
            "enum": ["document_text", "metadata_only", "published_caption_file", "none"],
        },
        "caption_format": _nullable({"type": "string", "enum": ["webvtt", "subrip"]}),
        "language": _nullable(
            {"type": "string", "minLength": 1, "maxLength": 35, "pattern": _LANGUAGE_PATTERN}
        ),
        "language_source": {"type": "string", "enum": ["publisher_declared", "unknown"]},
        "platform_native_verified": {"type": "boolean", "const": False},
    }
)

_SEGMENT: Schema = _seed_closed(
    {
        "start_ms": {"type": "integer", "minimum": 0, "maximum": _MAX_SAFE_INTEGER},
        "end_ms": {"type": "integer", "exclusiveMinimum": 0, "maximum": _MAX_SAFE_INTEGER},
        "text": {"type": "string", "minLength": 1, "maxLength": 20000},
    }
)

_RETRIEVAL_RESULT: Schema = _seed_closed(
    {
        "kind": {"type": "string", "enum": _RETRIEVAL_KINDS},
        "status": {
            "type": "string",
            "enum": [
                "ready",
                "partial",
                "blocked",
                "unsupported",
                "empty",
                "rate_limited",
                "unavailable",
                "cancelled",
            ],
        },
        "text": {"type": "string", "maxLength": 20000},
        "title": _nullable({"type": "string", "minLength": 1, "maxLength": 200}),
        "description": _nullable({"type": "string", "minLength": 1, "maxLength": 2000}),
        "segments": {"maxItems": 1000, "type": "array", "items": _SEGMENT},
        "provenance": _PROVENANCE,
        "reason": _nullable({"type": "string", "enum": list(_REASONS)}),
        "warnings": {
            "maxItems": 10,
            "type": "array",
            "items": {"type": "string", "enum": list(_REASONS)},
        },
        "retry_after_seconds": _nullable({"type": "integer", "minimum": 1, "maximum": 86400}),
    }
)

#: Seed 002's structured output (``{"retrieval": ...}``), field for field.
EVIDENCE_RETRIEVAL: Schema = {
    "type": "object",
    "properties": {
        "retrieval": _seed_closed(
            {
                "id": _seed_uuid(),
                "workspace_id": _seed_uuid(),
                "mutation_id": _seed_uuid(),
                "state": {
                    "type": "string",
                    "enum": [
                        "pending",
                        "running",
                        "completed",
                        "cancelled",
                        "unconfirmed",
                        "expired",
                    ],
                },
                "kind": _nullable({"type": "string", "enum": _RETRIEVAL_KINDS}),
                "created_at": _seed_date_time(),
                "settled_at": _nullable(_seed_date_time()),
                "valid_until": _seed_date_time(),
                "result": _nullable(_RETRIEVAL_RESULT),
                "evidence": _nullable(
                    _seed_closed(
                        {
                            "evidence_id": _seed_uuid(),
                            "revision": {
                                "type": "integer",
                                "exclusiveMinimum": 0,
                                "maximum": _MAX_SAFE_INTEGER,
                            },
                        }
                    )
                ),
            }
        )
    },
    "required": ["retrieval"],
    "$schema": "http://json-schema.org/draft-07/schema#",
    "additionalProperties": False,
}


#: Where a (possibly stale) chunk id's content lives now.
RESOLUTION: Schema = _object(
    {
        "chunk_id": _STRING,
        "status": {"type": "string", "enum": ["current", "replaced", "gone"]},
        "replaced_at": _nullable(_TIMESTAMP),
        "replaced_by_run": _nullable(_ID),
        "match": _nullable(
            {"type": "string", "enum": ["same_id", "same_text", "overlapping_span"]}
        ),
        "chunks": _array(CHUNK),
        "report_id": _REPORT_ID,
        "document_path": _STRING,
        "reason": _STRING,
    },
    optional=("report_id", "document_path", "reason"),
)


# -- one schema per tool ---------------------------------------------------------

_SCHEMAS: dict[str, Schema] = {
    "research_chunk_search": envelope(
        _object(
            {
                "hits": _array(SEARCH_HIT, maxItems=50),
                "mode": {"type": "string", "enum": ["keyword", "semantic", "hybrid"]},
            }
        )
    ),
    "research_get_chunk": GET_CHUNK_OUTPUT,
    "research_get_report": envelope(_object({"report": _nullable(REPORT)})),
    "get_chunks": envelope(
        _object({"chunks": _array(CHUNK, maxItems=20), "not_found": _array(_STRING, maxItems=20)})
    ),
    "get_chunk_next": envelope(_WALK),
    "get_chunk_prev": envelope(_WALK),
    "get_chunk_neighbors": envelope(
        _object(
            {
                "chunk": _nullable(CHUNK),
                "prev": _array(CHUNK, maxItems=100),
                "next": _array(CHUNK, maxItems=100),
            }
        )
    ),
    "get_chunk_parents": envelope(_object({"parents": _nullable(_array(PARENT, minItems=1))})),
    "get_document": envelope(_object({"document": _nullable(DOCUMENT_SKELETON)})),
    "get_document_chunks": envelope(
        _object(
            {
                "found": {"type": "boolean"},
                "document_id": _STRING,
                "from": _COUNT,
                "total_chunks": _COUNT,
                "chunks": _array(CHUNK, maxItems=100),
            }
        )
    ),
    "research_resolve_chunk": envelope(_object({"resolution": _nullable(RESOLUTION)})),
    "research_evidence_retrieve": EVIDENCE_RETRIEVAL,
    "ingest_file": envelope(INGEST_SUMMARY),
}


#: Tools whose structured content is their result itself (a seed's own object).
BARE_RESULTS = frozenset({"research_evidence_retrieve"})


def structured_content(tool_name: str, envelope_: dict[str, Any]) -> dict[str, Any]:
    """What MCP carries as ``structuredContent`` for a call that returned ``envelope_``."""
    if tool_name in BARE_RESULTS and "result" in envelope_:
        result: dict[str, Any] = envelope_["result"]
        return result
    return envelope_


def output_schema(tool_name: str) -> Schema:
    """The output schema of ``tool_name`` (a fresh copy); ``KeyError`` if it has none."""
    return copy.deepcopy(_SCHEMAS[tool_name])


def has_output_schema(tool_name: str) -> bool:
    return tool_name in _SCHEMAS


__all__ = [
    "BARE_RESULTS",
    "structured_content",
    "ERROR",
    "ERROR_CODES",
    "EVIDENCE_RETRIEVAL",
    "GET_CHUNK_OUTPUT",
    "envelope",
    "has_output_schema",
    "output_schema",
]
