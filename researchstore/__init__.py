"""researchstore: research reports in one SQLite file with a Tantivy index beside it."""

from researchstore import evidence  # noqa: F401  (registers research_evidence_retrieve)
from researchstore.errors import (
    InvalidInput,
    NotEntitled,
    ResearchStoreError,
    StoreLocked,
    UpstreamUnavailable,
)
from researchstore.filters import SearchFilters
from researchstore.ingest.summary import IngestSummary
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
