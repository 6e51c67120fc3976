"""researchstore: research reports in one SQLite file with a Tantivy index beside it."""

from importlib.metadata import PackageNotFoundError, version

from researchstore.catalogue import TOOLS
from researchstore.errors import (
    InvalidInput,
    NotEntitled,
    ResearchStoreError,
    StoreClosed,
    StoreLocked,
    UpstreamUnavailable,
)
from researchstore.filters import SearchFilters
from researchstore.ingest.summary import IngestSummary
from researchstore.store import Store
from researchstore.tools import call_tool

try:
    __version__ = version("researchstore")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "TOOLS",
    "__version__",
    "IngestSummary",
    "InvalidInput",
    "NotEntitled",
    "ResearchStoreError",
    "SearchFilters",
    "Store",
    "StoreClosed",
    "StoreLocked",
    "UpstreamUnavailable",
    "call_tool",
]
