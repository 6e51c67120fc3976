"""researchstore: research reports in one SQLite file with a Tantivy index beside it."""

from researchstore.errors import (
    InvalidInput,
    NotEntitled,
    ResearchStoreError,
    StoreLocked,
    UpstreamUnavailable,
)
from researchstore.index import SearchFilters
from researchstore.ingest.pipeline import IngestSummary
from researchstore.store import Store
from researchstore.tools import TOOLS, call_tool

__all__ = [
    "TOOLS",
    "IngestSummary",
    "InvalidInput",
    "NotEntitled",
    "ResearchStoreError",
    "SearchFilters",
    "Store",
    "StoreLocked",
    "UpstreamUnavailable",
    "call_tool",
]
