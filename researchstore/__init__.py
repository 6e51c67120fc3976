"""researchstore: research reports in one SQLite file with a Tantivy index beside it.

The names below load on first use, so ``import researchstore`` (and the
command line's start, and ``--help``) costs almost nothing; ``Library`` brings
in the store, Tantivy and the tool catalogue when it is first named.

``Store`` is kept as a name for ``Library``: programs written before the tools
moved off ``store.Store`` (now the file, its transactions and its indexes,
with no tools) open a ``Library`` by it and call the same methods.
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
    from researchstore.ingest.summary import IngestSummary
    from researchstore.library import Library
    from researchstore.storage.filters import SearchFilters
    from researchstore.tools import call_tool

    Store = Library

    __version__: str

#: Each lazily loaded name: the module that defines it, and its name there.
_LAZY = {
    "TOOLS": ("researchstore.catalogue", "TOOLS"),
    "IngestSummary": ("researchstore.ingest.summary", "IngestSummary"),
    "Library": ("researchstore.library", "Library"),
    "SearchFilters": ("researchstore.storage.filters", "SearchFilters"),
    "Store": ("researchstore.library", "Library"),
    "call_tool": ("researchstore.tools", "call_tool"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, defined_as = _LAZY[name]
        value = getattr(import_module(module), defined_as)
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
    "Library",
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
