"""What a search may be narrowed to, and how a stored row is checked against it.

The full-text index turns ``SearchFilters`` into query clauses; a row that
reaches search by another way (a hit forwarded to the chunk that now holds a
replaced chunk's text) is checked here with ``SearchFilters.matches``, so
the two readings of a filter are defined side by side. A report's tags are
read back from the store here too (``report_tags``), in one way for every reader.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from researchstore.storage.stored import json_object


@dataclass(frozen=True, slots=True)
class SearchFilters:
    report_id: int | None = None
    tags: dict[str, list[str]] | None = None
    date_from: str | None = None
    date_to: str | None = None
    source: str | None = None
    kind: str | None = None
    #: Only that workspace's evidence; None: only chunks that are not evidence.
    workspace: str | None = None

    def matches(self, row: dict[str, Any]) -> bool:
        """Whether a search row (report_id, source, kind, date, tags, workspace) meets every filter.

        The word index holds a chunk's workspace as a term; a row read from
        SQLite (a nearest neighbour, a forwarded hit) is checked for it here.
        """
        if self.workspace is not None and row.get("_workspace") != self.workspace:
            return False
        if self.report_id is not None and row["report_id"] != self.report_id:
            return False
        if self.source is not None and row["source"] != self.source:
            return False
        if self.kind is not None and row["kind"] != self.kind:
            return False
        if self.date_from is not None or self.date_to is not None:
            if not row["date"]:
                return False  # a chunk without a date is in no date range
            if self.date_from is not None and row["date"] < self.date_from:
                return False
            if self.date_to is not None and row["date"] > self.date_to:
                return False
        for name, wanted in (self.tags or {}).items():
            value = row["tags"].get(name)
            if value is None:
                return False
            have = {tag_value(item) for item in (value if isinstance(value, list) else [value])}
            if not have.intersection(wanted):
                return False
        return True


def tag_value(value: Any) -> str:
    """A tag value as a filter names it: JSON's spelling for true, false and numbers."""
    return value if isinstance(value, str) else json.dumps(value)


def tag_terms(tags: dict[str, Any]) -> list[str]:
    """``{"audience": ["students"], "season": "spring"}`` → ``["audience=students", ...]``."""
    terms: list[str] = []
    for name, value in tags.items():
        values = value if isinstance(value, list) else [value]
        terms.extend(f"{name}={tag_value(item)}" for item in values if item is not None)
    return terms


def stored_tags(stored: object) -> dict[str, Any] | None:
    """A report's tags as the store keeps them (JSON), decoded; None if they are not
    a JSON object. Ingest writes nothing else, but a store file may come from anyone."""
    if stored == "{}":
        return {}
    return json_object(stored)


def report_tags(stored: object) -> dict[str, Any]:
    """A report's tags, never raising: tags that are not a JSON object read as none
    (``researchstore check`` names their report)."""
    tags = stored_tags(stored)
    return {} if tags is None else tags
