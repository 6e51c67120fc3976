"""Each page as data: the tools' results, and what its template needs beside them.

A page function takes the store and the request's parameters and returns a
``Page``: ``data`` is what the page's JSON form says (the tools' result
shapes, under the names the tools give them), ``context`` what its HTML
form needs beyond that (forms, paging, links). A tool's error envelope
becomes a ``PageError`` with the HTTP status its code means. Nothing here
writes: every call is a read tool or a read of ``overview.py`` in one read
transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from researchstore.kinds import DOCUMENT_KINDS
from researchstore.overview import change_marker, list_reports, store_overview
from researchstore.params import MAX_SAFE_INTEGER
from researchstore.principal import ANY_WORKSPACE, Principal
from researchstore.storage.db import pending_count

if TYPE_CHECKING:
    from researchstore.library import Library

#: Hits on one page of search results, and the most the search tool returns.
HITS_PER_PAGE = 10
MAX_HITS = 50
#: Chunk bodies shown on one page of a document (the most one tool call reads).
CHUNKS_PER_PAGE = 100
#: Reports listed on one page of a folder.
REPORTS_PER_PAGE = 50
#: The HTTP status of each tool error code.
STATUS_OF_CODE = {
    "invalid_input": 400,
    "not_entitled": 403,
    "upstream_unavailable": 503,
    "internal": 500,
}


@dataclass
class Page:
    """One page: its template, its JSON result, and the template's extra context."""

    template: str
    data: dict[str, Any]
    context: dict[str, Any] = field(default_factory=dict)
    #: Where the HTML form of this page is instead (a 303), if elsewhere.
    redirect: str | None = None
    #: Why the page could not give its data: JSON gets the error alone; HTML the
    #: page (a search form, filled in) with the error on it, with the error's status.
    failure: PageError | None = None


class PageError(Exception):
    """A page that cannot be shown: an HTTP status and an error envelope."""

    def __init__(
        self, status: int, code: str, message: str, *, field: str | None = None, title: str = ""
    ) -> None:
        super().__init__(message)
        self.status = status
        self.title = title or {404: "Not found", 400: "Bad request"}.get(status, "Error")
        error: dict[str, Any] = {"code": code, "message": message}
        if field is not None:
            error["field"] = field
        self.envelope = {"error": error}

    @classmethod
    def from_envelope(cls, envelope: Mapping[str, Any]) -> PageError:
        error = envelope["error"]
        made = cls(STATUS_OF_CODE.get(error["code"], 500), error["code"], error["message"])
        made.envelope = {"error": dict(error)}
        return made


def not_found(what: str) -> PageError:
    return PageError(404, "invalid_input", what, title="Not found")


def call(store: Library, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool's result; its error as a ``PageError``."""
    envelope = store.call(tool, arguments)
    if "error" in envelope:
        raise PageError.from_envelope(envelope)
    result: dict[str, Any] = envelope["result"]
    return result


def visible_workspaces(principal: Principal) -> Collection[str] | None:
    """The workspaces whose evidence ``principal`` may see (None: all)."""
    if principal.unrestricted or ANY_WORKSPACE in principal.workspaces:
        return None
    return principal.workspaces if "agent:research" in principal.scopes else frozenset()


class OverviewCache:
    """The store's overview, read again only when ``change_marker`` moves.

    The overview counts every report, document and chunk: on a big store that
    is too much to read on every visit of the home page, and it changes only
    with a run.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[Any, tuple[tuple[Any, ...], dict[str, Any]]] = {}

    def get(self, store: Library, workspaces: Collection[str] | None) -> dict[str, Any]:
        view = None if workspaces is None else frozenset(workspaces)
        with store.reading() as conn:
            marker = change_marker(conn)
            with self._lock:
                kept = self._kept.get(view)
            if kept is not None and kept[0] == marker:
                return kept[1]
            overview = store_overview(conn, workspaces=view)
        with self._lock:
            if len(self._kept) > 64:  # one entry per set of workspaces a key may see
                self._kept.clear()
            self._kept[view] = (marker, overview)
        return overview


# -- the pages -----------------------------------------------------------------


def home_page(store: Library, cache: OverviewCache, principal: Principal) -> Page:
    """The store at a glance."""
    overview = cache.get(store, visible_workspaces(principal))
    data = {"overview": overview, "index": index_state(store)}
    return Page("home.html", data)


def index_state(store: Library) -> dict[str, Any]:
    """The word index's size and pending work, and the search modes the store offers."""
    words = store.search_index()
    with store.reading() as conn:
        pending = pending_count(conn)
    default_mode = store.default_search_mode()
    return {
        "word_index": {
            "path": str(store.index_path),
            "documents": words.document_count(),
            "pending_changes": pending,
        },
        "vectors": store.keeps_vectors(),
        "default_mode": default_mode,
        "modes": search_modes(default_mode),
        "read_only": store.read_only_reason,
    }


def search_modes(default_mode: str) -> list[str]:
    return ["keyword"] if default_mode == "keyword" else ["hybrid", "keyword", "semantic"]


def search_page(
    store: Library,
    cache: OverviewCache,
    principal: Principal,
    params: Sequence[tuple[str, str]],
) -> Page:
    """The search form, and a page of hits when a query is given."""
    form = search_form(params)
    overview = cache.get(store, visible_workspaces(principal))
    default_mode = store.default_search_mode()
    context: dict[str, Any] = {
        "form": form,
        "choices": {
            "sources": [source["name"] for source in overview["sources"]],
            "kinds": list(DOCUMENT_KINDS),
            "tags": overview["tags"],
            "modes": search_modes(default_mode) if default_mode != "keyword" else [],
        },
    }
    empty: dict[str, Any] = {"hits": [], "mode": None, "page": None}
    try:
        page = parse_int(form["page"] or "1", "page", minimum=1, maximum=MAX_HITS // HITS_PER_PAGE)
        arguments = search_arguments(form)
        if not form["q"].strip():
            return Page("search.html", empty, context)
        arguments["limit"] = page * HITS_PER_PAGE
        result = call(store, "research_chunk_search", arguments)
    except PageError as error:
        return Page("search.html", empty, context, failure=error)
    hits = result["hits"][(page - 1) * HITS_PER_PAGE :]
    more = len(result["hits"]) == arguments["limit"] and page * HITS_PER_PAGE < MAX_HITS
    data = {
        "hits": hits,
        "mode": result["mode"],
        "page": {"number": page, "per_page": HITS_PER_PAGE, "has_next": more},
    }
    context["parts"] = [snippet_parts(hit["snippet"]) for hit in hits]
    context["first"] = (page - 1) * HITS_PER_PAGE + 1
    kept = [(name, value) for name, value in params if name != "page" and value]
    context["pager"] = {
        "previous": urlencode([*kept, ("page", str(page - 1))] if page > 2 else kept),
        "next": urlencode([*kept, ("page", str(page + 1))]),
    }
    return Page("search.html", data, context)


def search_form(params: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The search form's fields from the query string; tags as ``tag.NAME=VALUE``."""
    single = {
        name: ""
        for name in ("q", "page", "date_from", "date_to", "source", "kind", "mode", "report_id")
    }
    tags: dict[str, list[str]] = {}
    for name, value in params:
        if name.startswith("tag.") and len(name) > 4:
            if value:
                tags.setdefault(name[4:], []).append(value)
        elif name in single:
            single[name] = value
    return {**single, "tags": tags}


def search_arguments(form: Mapping[str, Any]) -> dict[str, Any]:
    """The search tool's arguments from the form (left to the tool to check)."""
    arguments: dict[str, Any] = {"query": form["q"]}
    for name in ("date_from", "date_to", "source", "kind", "mode"):
        if form[name]:
            arguments[name] = form[name]
    if form["report_id"]:
        arguments["report_id"] = parse_int(form["report_id"], "report_id", minimum=1)
    if form["tags"]:
        arguments["tags"] = {
            name: values[0] if len(values) == 1 else values for name, values in form["tags"].items()
        }
    return arguments


def snippet_parts(snippet: str) -> list[tuple[str, bool]]:
    """A search snippet as plain-text pieces, each marked or not.

    The tool's snippet is HTML: its text escaped, its matches in ``<b>``. The
    page never shows that HTML: it is cut at the marks and unescaped here, and
    the template escapes each piece again and wraps the marked ones itself.
    """
    parts: list[tuple[str, bool]] = []
    for index, piece in enumerate(snippet.split("<b>")):
        marked, _, rest = piece.partition("</b>") if index else ("", "", piece)
        if marked:
            parts.append((unescape_snippet(marked), True))
        if rest:
            parts.append((unescape_snippet(rest), False))
    return parts


def unescape_snippet(text: str) -> str:
    """Undo exactly the snippet's escaping (``&``, ``<``, ``>``): nothing else is decoded."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def document_page(store: Library, document_id: str, start_text: str) -> Page:
    """A document's chunks in order (a window of them), its report and its parents."""
    start = parse_int(start_text or "0", "from", minimum=0)
    document = call(store, "get_document", {"id": document_id})["document"]
    if document is None:
        raise not_found(f"no document with id {document_id!r} (a re-ingest gives new ids)")
    window = call(
        store, "get_document_chunks", {"id": document_id, "from": start, "limit": CHUNKS_PER_PAGE}
    )
    report = call(store, "research_get_report", {"report_id": document["report_id"]})["report"]
    parents = None
    if document["chunks"]:
        first = document["chunks"][0]["chunk_id"]
        parents = call(store, "get_chunk_parents", {"id": first})["parents"]
    documents = report["documents"] if report else []
    at = next((i for i, other in enumerate(documents) if other["document_id"] == document_id), None)
    context = {
        "previous": documents[at - 1] if at else None,
        "next": documents[at + 1] if at is not None and at + 1 < len(documents) else None,
        "crumbs": breadcrumbs(parents, report),
        "window_links": {
            "previous": max(0, start - CHUNKS_PER_PAGE) if start > 0 else None,
            "next": start + CHUNKS_PER_PAGE
            if start + CHUNKS_PER_PAGE < window["total_chunks"]
            else None,
        },
    }
    data = {"document": document, "window": window, "report": report, "parents": parents}
    return Page("document.html", data, context)


def chunk_page(store: Library, chunk_id: str) -> Page:
    """Where a chunk id is: its document at that chunk, or where its text lives now."""
    resolution = call(store, "research_resolve_chunk", {"chunk_id": chunk_id})["resolution"]
    if resolution is None:
        raise not_found(
            f"no chunk with id {chunk_id!r}: never in this store, or replaced longer ago "
            "than the forwarding record keeps"
        )
    data = {"resolution": resolution}
    if resolution["status"] == "current":
        chunk = resolution["chunks"][0]
        start = chunk["position"] // CHUNKS_PER_PAGE * CHUNKS_PER_PAGE
        query = f"?from={start}" if start else ""
        target = f"/document/{chunk['document_id']}{query}#chunk-{chunk['chunk_id']}"
        return Page("chunk.html", data, redirect=target)
    report = None
    if resolution.get("report_id") is not None:
        found = call(store, "research_get_report", {"report_id": resolution["report_id"]})
        report = found["report"]
    return Page("chunk.html", data, {"report": report})


def reports_page(
    store: Library,
    cache: OverviewCache,
    principal: Principal,
    *,
    source: str,
    folder: str,
    page_text: str,
) -> Page:
    """The sources (no source given), or the folders and reports inside one folder."""
    workspaces = visible_workspaces(principal)
    if not source:
        sources = cache.get(store, workspaces)["sources"]
        return Page("reports.html", {"sources": sources, "listing": None})
    page = parse_int(page_text or "1", "page", minimum=1)
    folder = folder.strip("/")
    with store.reading() as conn:
        listing = list_reports(
            conn,
            source=source,
            folder=folder,
            start=(page - 1) * REPORTS_PER_PAGE,
            limit=REPORTS_PER_PAGE,
            workspaces=workspaces,
        )
    if listing is None:
        where = f"no folder {folder!r} in " if folder else "no "
        raise not_found(f"{where}source {source!r}")
    context = {
        "crumbs": folder_crumbs(source, folder),
        "page": page,
        "has_next": page * REPORTS_PER_PAGE < listing["total_reports"],
    }
    return Page("reports.html", {"sources": None, "listing": listing}, context)


def report_page(store: Library, report_text: str) -> Page:
    """A report: its title, date, tags and documents."""
    report_id = parse_int(report_text, "report_id", minimum=1)
    report = call(store, "research_get_report", {"report_id": report_id})["report"]
    if report is None:
        raise not_found(f"no report with id {report_id}")
    # A report's folder is the one holding it, whether it is a directory or a file.
    context = {"crumbs": folder_crumbs(report["source"], report["key"].rpartition("/")[0])}
    return Page("report.html", {"report": report}, context)


# -- pieces ------------------------------------------------------------------


def parse_int(text: str, name: str, *, minimum: int, maximum: int = MAX_SAFE_INTEGER) -> int:
    """A whole number from a query parameter, or a 400 that says what was wrong."""
    try:
        value = int(text) if text.isascii() else None
    except ValueError:
        value = None
    if value is None:
        raise PageError(400, "invalid_input", f"{name}: must be a whole number", field=name)
    if not minimum <= value <= maximum:
        raise PageError(
            400, "invalid_input", f"{name}: must be between {minimum} and {maximum}", field=name
        )
    return value


def folder_crumbs(source: str, folder: str) -> list[dict[str, str]]:
    """The source and each folder down to ``folder``: a name and the listing's query."""
    crumbs = [{"name": source, "source": source, "folder": ""}]
    if folder:
        parts = folder.split("/")
        for depth, name in enumerate(parts, start=1):
            crumbs.append({"name": name, "source": source, "folder": "/".join(parts[:depth])})
    return crumbs


def breadcrumbs(
    parents: list[dict[str, Any]] | None, report: dict[str, Any] | None
) -> list[dict[str, str]]:
    """Source, folders and report above a document, from its parent chain (outermost first)."""
    if report is None:
        return []
    if parents is None:  # a document without chunks has no chain: the report's key says it
        folder = report["key"].rpartition("/")[0]
        return folder_crumbs(report["source"], folder)
    source = next(node["source"] for node in parents if node["kind"] == "source_version")
    folders = [node for node in reversed(parents) if node["kind"] == "folder"]
    return [{"name": source, "source": source, "folder": ""}] + [
        {"name": node["name"], "source": source, "folder": node["path"]} for node in folders
    ]
