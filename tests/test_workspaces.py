"""Workspaces are isolated: a key limited to one workspace cannot read another's evidence."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from researchstore import Store
from researchstore.principal import Principal, acting_as

WORKSPACE_A = str(uuid.UUID(int=0xA))
WORKSPACE_B = str(uuid.UUID(int=0xB))


@pytest.fixture
def evidence_store(filled_store: Store) -> Store:
    """The ingested source relabelled as workspace B's evidence, plus public reports."""
    store = filled_store
    with store.transaction() as conn:
        conn.execute(
            "UPDATE sources SET kind = 'workspace', name = ? WHERE name = 'field'",
            (f"workspace:{WORKSPACE_B}",),
        )
    return store


def _ids(store: Store) -> dict[str, Any]:
    row = store._conn.execute(
        "SELECT c.chunk_id, d.document_id, c.report_id FROM chunks c "
        "JOIN documents d ON d.id = c.document_rowid ORDER BY c.id LIMIT 1"
    ).fetchone()
    return {"chunk": row[0], "document": row[1], "report": row[2]}


def _key(*workspaces: str) -> Principal:
    return Principal(
        scopes=frozenset({"agent:research"}), workspaces=frozenset(workspaces), key_id="test"
    )


CALLS = [
    ("research_get_chunk", lambda i: {"chunk_id": i["chunk"]}, {"chunk": None}),
    ("research_resolve_chunk", lambda i: {"chunk_id": i["chunk"]}, {"resolution": None}),
    ("get_chunk_next", lambda i: {"id": i["chunk"]}, {"found": False, "chunks": []}),
    ("get_chunk_prev", lambda i: {"id": i["chunk"]}, {"found": False, "chunks": []}),
    ("get_chunk_neighbors", lambda i: {"id": i["chunk"]}, {"chunk": None, "prev": [], "next": []}),
    ("get_chunk_parents", lambda i: {"id": i["chunk"]}, {"parents": None}),
    ("get_document", lambda i: {"id": i["document"]}, {"document": None}),
    ("research_get_report", lambda i: {"report_id": i["report"]}, {"report": None}),
]


@pytest.mark.parametrize(("tool", "arguments", "miss"), CALLS, ids=[c[0] for c in CALLS])
def test_another_workspaces_evidence_is_a_miss(
    evidence_store: Store, tool: str, arguments: Any, miss: dict[str, Any]
) -> None:
    ids = _ids(evidence_store)
    with acting_as(_key(WORKSPACE_A)):
        assert evidence_store.call(tool, arguments(ids)) == {"result": miss}
    with acting_as(_key(WORKSPACE_B)):
        assert evidence_store.call(tool, arguments(ids))["result"] != miss
    assert evidence_store.call(tool, arguments(ids))["result"] != miss  # the local user


def test_document_chunks_and_batches_hide_it_too(evidence_store: Store, tmp_path: Path) -> None:
    ids = _ids(evidence_store)
    with acting_as(_key(WORKSPACE_A)):
        window = evidence_store.call("get_document_chunks", {"id": ids["document"]})["result"]
        batch = evidence_store.call("get_chunks", {"ids": [ids["chunk"], "nope"]})["result"]
    assert window == {
        "found": False,
        "document_id": ids["document"],
        "from": 0,
        "total_chunks": 0,
        "chunks": [],
    }
    assert batch == {"chunks": [], "not_found": [ids["chunk"], "nope"]}
