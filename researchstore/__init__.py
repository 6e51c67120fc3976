"""researchstore: research reports in one SQLite file with a Tantivy index beside it.

The names below load on first use, so ``import researchstore`` (and the
command line's start, and ``--help``) costs almost nothing; ``Store`` brings
in the store, Tantivy and the tool catalogue when it is first named.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from researchstore.errors import (
    DiskFull,
    InvalidInput,
    NotEntitled,
    ResearchStoreError,
    StoreClosed,
    StoreDamaged,
    StoreLocked,
    StoreReadOnly,
    UpstreamUnavailable,
)

if TYPE_CHECKING:
    from researchstore.catalogue import TOOLS
    from researchstore.filters import SearchFilters
    from researchstore.ingest.summary import IngestSummary
    from researchstore.store import Store
    from researchstore.tools import call_tool

    __version__: str

#: Each lazily loaded name and the module that defines it.
_LAZY = {
    "TOOLS": "researchstore.catalogue",
    "IngestSummary": "researchstore.ingest.summary",
    "SearchFilters": "researchstore.filters",
    "Store": "researchstore.store",
    "call_tool": "researchstore.tools",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("researchstore")
        except PackageNotFoundError:  # a source tree that was never installed
            found = "0+unknown"
        globals()["__version__"] = found
        return found
    raise AttributeError(f"module 'researchstore' has no attribute {name!r}")


__all__ = [
    "TOOLS",
    "DiskFull",
    "IngestSummary",
    "InvalidInput",
    "NotEntitled",
    "ResearchStoreError",
    "SearchFilters",
    "Store",
    "StoreClosed",
    "StoreDamaged",
    "StoreLocked",
    "StoreReadOnly",
    "UpstreamUnavailable",
    "__version__",
    "call_tool",
]
