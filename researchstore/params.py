"""Tool parameters: one declaration gives both the validation and the JSON Schema.

``Param`` checks one argument and describes it; ``Tool`` binds a whole call's
arguments (unknown names refused, defaults filled in) and publishes its input
schema, so what the MCP server lists and what the tools accept cannot drift
apart. Nothing here touches a store.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from researchstore.dates import is_iso_date
from researchstore.errors import InvalidInput
from researchstore.ids import canonical_uuid

if TYPE_CHECKING:
    from researchstore.store import Store

#: What a tool may be served in: ``core`` tools in every MCP profile, ``full``
#: ones only in ``full``; and over which MCP transports.
PROFILES = ("core", "full")
TRANSPORTS = ("stdio", "http")
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


def _check_string(param: Param, given: Any) -> str:
    if not isinstance(given, str):
        raise _fail(param, f"must be a string, got {type(given).__name__}")
    value = _without_lone_surrogates(given)
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
    # The hyphenated form JSON Schema's "uuid" means.
    return len(value) == 36 and canonical_uuid(value) is not None


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
    run: Callable[[Store, dict[str, Any]], dict[str, Any]]
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
    #: The MCP transports that may serve it.
    transports: frozenset[str] = frozenset({"stdio", "http"})

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
