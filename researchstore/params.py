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

from researchstore.errors import InvalidInput
from researchstore.storage.dates import is_iso_date
from researchstore.storage.ids import canonical_uuid

if TYPE_CHECKING:
    from researchstore.store import Store

#: What a tool may be served in: ``core`` tools in every MCP profile, ``full``
#: ones only in ``full``; and over which MCP transports.
PROFILES = ("core", "full")
TRANSPORTS = ("stdio", "http")
#: The largest integer JSON clients can carry exactly (2**53 - 1).
MAX_SAFE_INTEGER = 9_007_199_254_740_991
#: How deep a call's arguments may nest arrays and objects. No tool takes more
#: than three levels (``{"tags": {"name": ["value"]}}``); deeper is refused
#: before anything looks inside, so nothing that recurses ever meets it.
MAX_NESTING = 32


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
    #: For an object (the ``tags`` filter): how many names it may hold, and
    #: how long a name may be. Its values are bounded by ``max_items`` (values
    #: per name) and ``max_length`` (characters per value).
    max_keys: int | None = None
    max_key_length: int | None = None
    #: A further bound on a string that JSON Schema cannot state (the search
    #: query's terms): returns why a value is refused, or None. The
    #: description says it in words.
    bound: Callable[[str], str | None] | None = None

    def schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": self.type, "description": self.description}
        if self.type == "string":
            schema.update(self._length(self.min_length))
        if self.type == "array":
            schema["items"] = {"type": "string", **self._length(1)}
        if self.type == "object":
            # ``max_length`` bounds each value, ``max_items`` the values of one name.
            one: dict[str, Any] = {"type": "string", **self._length(1)}
            several: dict[str, Any] = {"type": "array", "items": one, "minItems": 1}
            if self.max_items is not None:
                several["maxItems"] = self.max_items
            schema["additionalProperties"] = {"anyOf": [one, several]}
            names: dict[str, Any] = {"minLength": 1}
            if self.max_key_length is not None:
                names["maxLength"] = self.max_key_length
            schema["propertyNames"] = names
            if self.max_keys is not None:
                schema["maxProperties"] = self.max_keys
        for key, value in (
            ("default", self.default),
            ("minimum", self.minimum),
            ("maximum", self.maximum),
            ("minItems", self.min_items if self.type == "array" else None),
            ("maxItems", self.max_items if self.type == "array" else None),
            ("enum", list(self.enum) if self.enum else None),
            ("format", self.format),
            ("pattern", self.pattern),
        ):
            if value is not None:
                schema[key] = value
        return schema

    def _length(self, min_length: int | None) -> dict[str, int]:
        """``minLength`` / ``maxLength`` of a string (the value, an item, a tag value)."""
        bounds = {"minLength": min_length, "maxLength": self.max_length}
        return {key: value for key, value in bounds.items() if value is not None}

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
    if param.bound is not None:
        problem = param.bound(value)
        if problem is not None:
            raise _fail(param, problem)
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


def check_nesting(arguments: Any, limit: int = MAX_NESTING) -> None:
    """Raise ``InvalidInput`` if ``arguments`` nest arrays and objects deeper than
    ``limit``; level by level, so a value a million deep costs ``limit`` steps."""
    level = [arguments] if isinstance(arguments, dict | list) else []
    for _ in range(limit):
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, dict | list)
        ]
        if not level:
            return
    raise InvalidInput(f"arguments must not nest arrays and objects deeper than {limit} levels")


def _shown_name(name: Any) -> str:
    """An argument's name as ``field`` may carry it: a lone surrogate, which UTF-8
    cannot carry, as its escape (``\\ud800``)."""
    return str(name).encode("utf-8", "backslashreplace").decode("utf-8")


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
        if param.max_length is not None and len(item) > param.max_length:
            raise _fail(
                param,
                f"every item must be at most {param.max_length} characters long; "
                f"got {item[:60]!r}… ({len(item)})",
            )
    return [_without_lone_surrogates(item) for item in value]


def _check_tags(param: Param, value: Any) -> dict[str, list[str]]:
    """``{name: value or [values]}`` → ``{name: [distinct values]}``, every bound checked first.

    The counts are checked before anything is copied, so an oversized filter
    costs no more than its refusal. Repeated values are asked for once.
    """
    if not isinstance(value, dict):
        raise _fail(param, 'must be an object such as {"audience": "students"}')
    if param.max_keys is not None and len(value) > param.max_keys:
        raise _fail(param, f"may name at most {param.max_keys} tags; got {len(value)}")
    tags: dict[str, list[str]] = {}
    for name, wanted in value.items():
        if not isinstance(name, str):
            raise _fail(param, f"a tag name must be a string, got {type(name).__name__}")
        if not name:
            raise _fail(param, "a tag name must not be empty")
        shown = repr(name) if len(name) <= 60 else f"{name[:60]!r}…"
        if param.max_key_length is not None and len(name) > param.max_key_length:
            raise _fail(
                param,
                f"a tag name must be at most {param.max_key_length} characters long; "
                f"got {shown} ({len(name)})",
            )
        values = wanted if isinstance(wanted, list) else [wanted]
        if param.max_items is not None and len(values) > param.max_items:
            raise _fail(
                param, f"{shown} may list at most {param.max_items} values; got {len(values)}"
            )
        if not values or not all(isinstance(item, str) and item for item in values):
            raise _fail(param, f"{shown} must be a non-empty string or a list of them")
        if param.max_length is not None:
            for item in values:
                if len(item) > param.max_length:
                    raise _fail(
                        param,
                        f"a value of {shown} must be at most {param.max_length} characters "
                        f"long; got {item[:60]!r}… ({len(item)})",
                    )
        # Two names can meet here once lone surrogates are replaced: merged.
        known = tags.setdefault(_without_lone_surrogates(name), [])
        known.extend(_without_lone_surrogates(item) for item in values)
    return {name: list(dict.fromkeys(values)) for name, values in tags.items()}


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
        check_nesting(arguments)
        known = {param.name: param for param in self.params}
        for name in arguments:
            if name not in known:
                text, shown = str(name), _shown_name(name)
                # repr escapes a lone surrogate, as it does a control character.
                quoted = repr(text[:60]) + ("…" if len(text) > 60 else "")
                why = "" if shown == text else " (a lone surrogate: not text)"
                raise InvalidInput(f"unknown argument {quoted}{why}", field=shown)
        bound: dict[str, Any] = {}
        for param in self.params:
            if param.name in arguments and arguments[param.name] is not None:
                bound[param.name] = param.check(arguments[param.name])
            elif param.required:
                raise InvalidInput(f"{param.name}: is required", field=param.name)
            else:
                bound[param.name] = param.default
        return bound
