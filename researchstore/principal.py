"""Who is calling a tool: a ``Principal`` and the context it runs in.

A principal holds scopes (``agent:research`` for evidence retrieval) and the
workspaces it may use (``*`` for any). The HTTP server runs each tool
``acting_as`` the principal of the request's API key (``keys.py``); a tool
that needs a right calls ``current_principal().require(...)``, which raises
``NotEntitled``. Everything else, the library, the CLI and the MCP server over
stdio, acts as ``LOCAL_USER``, who has every right.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from researchstore.errors import InvalidInput, NotEntitled
from researchstore.storage.ids import canonical_uuid

#: Every scope a key can hold, and what it allows.
SCOPES: dict[str, str] = {
    "agent:research": "retrieve public sources as evidence (research_evidence_retrieve)",
}
ANY_WORKSPACE = "*"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the rights of one API key, or the local user's (all)."""

    scopes: frozenset[str]
    workspaces: frozenset[str]
    key_id: str | None = None
    unrestricted: bool = False

    def require(self, scope: str, workspace: str | None = None) -> None:
        """Raise ``NotEntitled`` unless this caller holds ``scope`` (in ``workspace``)."""
        if self.unrestricted:
            return
        if scope not in self.scopes:
            raise NotEntitled(
                f"this API key lacks the scope {scope!r}",
                details={"required_scope": scope, "key_id": self.key_id},
            )
        if workspace is None or ANY_WORKSPACE in self.workspaces:
            return
        if canonical_workspace(workspace) not in self.workspaces:
            raise NotEntitled(
                f"this API key may not use workspace {workspace!r}",
                field="workspace_id",
                details={"workspace_id": workspace, "key_id": self.key_id},
            )


LOCAL_USER = Principal(
    scopes=frozenset(SCOPES), workspaces=frozenset({ANY_WORKSPACE}), unrestricted=True
)
#: Holds nothing: what a request that somehow lost its key acts as.
NOBODY = Principal(scopes=frozenset(), workspaces=frozenset())

_current: ContextVar[Principal] = ContextVar("researchstore_principal", default=LOCAL_USER)


def current_principal() -> Principal:
    """The caller of the tool now running (``LOCAL_USER`` outside the HTTP server)."""
    return _current.get()


@contextmanager
def acting_as(principal: Principal) -> Iterator[Principal]:
    """Run the block as ``principal``."""
    token = _current.set(principal)
    try:
        yield principal
    finally:
        _current.reset(token)


def canonical_workspace(workspace: str) -> str:
    return (canonical_uuid(workspace) if isinstance(workspace, str) else None) or workspace


def check_scopes(scopes: Iterable[str]) -> list[str]:
    checked = sorted(set(scopes))
    for scope in checked:
        if scope not in SCOPES:
            raise InvalidInput(
                f"unknown scope {scope!r}; known scopes: {', '.join(sorted(SCOPES))}",
                field="scope",
            )
    return checked


def check_workspaces(workspaces: Iterable[str]) -> list[str]:
    checked: set[str] = set()
    for workspace in workspaces:
        if workspace == ANY_WORKSPACE:
            checked.add(workspace)
            continue
        canonical = canonical_uuid(workspace) if isinstance(workspace, str) else None
        if canonical is None:
            raise InvalidInput(
                f"workspace must be a UUID or {ANY_WORKSPACE!r}; got {workspace!r}",
                field="workspace",
            )
        checked.add(canonical)
    return sorted(checked)
