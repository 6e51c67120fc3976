"""The server and its limits: no input, client or key can hold the store or lock others out.

In-process: the bounds of every tool parameter (and that the published input
schemas state them), the fetcher's address guard against IANA's
special-purpose registries, and the server log's handling of disconnects.
Over HTTP, with ``researchstore serve`` as a real child process on loopback:
request bodies, sessions per key and idle expiry, another loopback address,
clients that go away, and the access log.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from helpers import ok

from researchstore import Store
from researchstore.catalogue import (
    MAX_QUERY_PHRASES,
    MAX_QUERY_TERMS,
    MAX_TAG_NAME_LENGTH,
    MAX_TAG_VALUE_LENGTH,
    MAX_TAG_VALUES,
    MAX_TAGS,
    TOOLS,
)

# -- envelopes and schemas -----------------------------------------------------


def invalid_field(envelope: dict[str, Any]) -> str | None:
    assert set(envelope) == {"error"}, envelope
    assert envelope["error"]["code"] == "invalid_input", envelope
    field: str | None = envelope["error"].get("field")
    return field


def published_schema_refuses(tool_name: str, arguments: dict[str, Any]) -> bool:
    schema = TOOLS[tool_name].input_schema()
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    return not validator.is_valid(arguments)


# -- 7. every input is bounded ---------------------------------------------------


TAG_FILTERS_REFUSED = {
    # 3.6 MB of one value: it held the server for a minute before.
    "300000-values": {"audience": ["students"] * 300_000},
    "too-many-values": {"audience": [f"v{n}" for n in range(MAX_TAG_VALUES + 1)]},
    "too-many-tags": {f"tag{n}": "x" for n in range(MAX_TAGS + 1)},
    "long-name": {"a" * (MAX_TAG_NAME_LENGTH + 1): "students"},
    "long-value": {"audience": "s" * (MAX_TAG_VALUE_LENGTH + 1)},
    "long-value-in-list": {"audience": ["students", "s" * (MAX_TAG_VALUE_LENGTH + 1)]},
    "empty-name": {"": "students"},
}


@pytest.mark.parametrize("tags", TAG_FILTERS_REFUSED.values(), ids=TAG_FILTERS_REFUSED.keys())
def test_a_tag_filter_is_bounded_and_its_schema_says_so(
    fixture_store: Store, tags: dict[str, Any]
) -> None:
    arguments = {"query": "varroa", "tags": tags}
    assert invalid_field(fixture_store.call("research_chunk_search", arguments)) == "tags"
    assert published_schema_refuses("research_chunk_search", arguments)


def test_the_largest_tag_filter_allowed_is_served(fixture_store: Store) -> None:
    tags = {
        "a" * (MAX_TAG_NAME_LENGTH - 3) + f"{n:03}": ["s" * MAX_TAG_VALUE_LENGTH] * MAX_TAG_VALUES
        for n in range(MAX_TAGS)
    }
    arguments = {"query": "varroa", "tags": tags}
    assert ok(fixture_store.call("research_chunk_search", arguments)) == {"hits": []}
    assert not published_schema_refuses("research_chunk_search", arguments)


def test_repeated_tag_values_are_asked_for_once(fixture_store: Store) -> None:
    tool = TOOLS["research_chunk_search"]
    repeated = {"audience": ["students", "public", "students"] * 10}
    bound = tool.bind({"query": "varroa", "tags": repeated})
    assert bound["tags"] == {"audience": ["students", "public"]}
    once = fixture_store.search("varroa mite", tags={"audience": ["students", "public"]})
    assert once and fixture_store.search("varroa mite", tags=repeated) == once


def words(count: int) -> str:
    return " ".join(f"word{n}" for n in range(count))


def phrases(count: int) -> str:
    return " ".join(f'"varroa mite{n}"' for n in range(count))


@pytest.mark.parametrize(
    ("query", "refused"),
    [
        (words(MAX_QUERY_TERMS), False),
        (words(MAX_QUERY_TERMS + 1), True),
        ("varroa " * (MAX_QUERY_TERMS + 1), True),  # a repeated term is asked for again
        ("the of and " * 300 + words(MAX_QUERY_TERMS), False),  # stop words are no terms
        (phrases(MAX_QUERY_PHRASES), False),
        (phrases(MAX_QUERY_PHRASES + 1), True),
        ('"varroa" ' * (MAX_QUERY_PHRASES + 1), False),  # a quoted word is no phrase
    ],
    ids=[
        "most-terms",
        "one-term-too-many",
        "one-term-repeated",
        "stop-words",
        "most-phrases",
        "one-phrase-too-many",
        "quoted-words",
    ],
)
def test_a_query_is_bounded_in_terms_and_phrases(
    fixture_store: Store, query: str, refused: bool
) -> None:
    envelope = fixture_store.call("research_chunk_search", {"query": query})
    if refused:
        assert invalid_field(envelope) == "query"
        assert "at most" in envelope["error"]["message"]
    else:
        ok(envelope)


def test_the_query_bounds_are_published_in_its_description() -> None:
    described = TOOLS["research_chunk_search"].input_schema()["properties"]["query"]
    assert f"at most {MAX_QUERY_TERMS} search terms" in described["description"]
    assert f"{MAX_QUERY_PHRASES} quoted phrases" in described["description"]


def test_ids_are_bounded_in_length(fixture_store: Store) -> None:
    arguments = {"ids": ["x" * 201]}
    assert invalid_field(fixture_store.call("get_chunks", arguments)) == "ids"
    assert published_schema_refuses("get_chunks", arguments)
    assert ok(fixture_store.call("get_chunks", {"ids": ["x" * 200]}))["not_found"] == ["x" * 200]


def unbounded(schema: dict[str, Any], where: str) -> list[str]:
    """Where a JSON Schema lets a value grow without a limit (strings, arrays, objects)."""
    kind = schema.get("type")
    if "anyOf" in schema:
        return [
            problem
            for number, option in enumerate(schema["anyOf"])
            for problem in unbounded(option, f"{where}|{number}")
        ]
    if kind == "string":
        bounded = (
            "maxLength" in schema
            or "enum" in schema
            or schema.get("format")
            in {
                "uuid",
                "date",
            }
        )
        return [] if bounded else [where]
    if kind == "array":
        problems = [] if "maxItems" in schema else [f"{where} (items)"]
        return problems + unbounded(schema["items"], f"{where}[]")
    if kind == "object":
        problems = []
        if schema.get("additionalProperties", True) is not False:
            if "maxProperties" not in schema:
                problems.append(f"{where} (properties)")
            if "maxLength" not in schema.get("propertyNames", {}):
                problems.append(f"{where} (names)")
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict):
                problems += unbounded(extra, f"{where}.*")
        for name, inner in schema.get("properties", {}).items():
            problems += unbounded(inner, f"{where}.{name}")
        return problems
    return []


@pytest.mark.parametrize("tool_name", list(TOOLS))
def test_every_published_input_schema_bounds_every_value(tool_name: str) -> None:
    """No call the input schemas allow is unbounded in size (the store checks the same)."""
    assert unbounded(TOOLS[tool_name].input_schema(), tool_name) == []
