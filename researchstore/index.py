"""The Tantivy full-text index: the only module that imports ``tantivy``.

The word index is one of the store's derived indexes (``derived.py``): it
holds nothing that SQLite does not, lives in ``STORE.db.index/`` and follows
SQLite through ``sync.IndexSync``.

Queries are never given to Tantivy's query parser: user text is analysed with
the index's own analyzer and turned into term and phrase queries here, so no
input can raise a parse error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import tantivy

from researchstore.derived import IndexDamaged, IndexedChunk
from researchstore.filters import SearchFilters, tag_terms

#: Bump when the fields or the analyzer change: older indexes are rebuilt.
INDEX_SCHEMA_VERSION = 3
ANALYZER = "rs_en"

_PHRASE = re.compile(r'"([^"]+)"')
#: The ``workspace`` term of every chunk that is not workspace evidence. A
#: search without a workspace filter asks for it, so evidence (retrieved into
#: a workspace by ``research_evidence_retrieve``) is only ever found by a
#: search that names its workspace, and then only that workspace's.
NO_WORKSPACE = "-"


#: Lucene's English stop words (what Anserini's BM25 drops): measured on
#: SciFact (bench/quality_search.py), dropping them gains relevance.
STOPWORDS = (
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with"
).split()


def build_analyzer() -> tantivy.TextAnalyzer:
    """English: split on non-alphanumerics, lower-case, fold accents, drop stop words, stem."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.custom_stopword(STOPWORDS))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


_ANALYZER = build_analyzer()
# The same tokens before any is dropped: a token's place in this list is its
# position in the index, which a phrase needs to step over stop words.
_WORDS = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).build()


def analyze(text: str) -> list[str]:
    """The terms the index stores for ``text``."""
    return _ANALYZER.analyze(text)


# The index's analyzer less its stemmer: a stemmer maps a token to its stem
# and never drops one, so this counts the same tokens at less than half the cost.
_COUNTER = (
    tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
    .filter(tantivy.Filter.remove_long(40))
    .filter(tantivy.Filter.lowercase())
    .filter(tantivy.Filter.ascii_fold())
    .filter(tantivy.Filter.custom_stopword(STOPWORDS))
    .build()
)


def count_tokens(text: str) -> int:
    """The number of tokens the index's analyzer yields for ``text``."""
    return len(_COUNTER.analyze(text))


def phrase_terms(phrase: str) -> list[tuple[int, str]]:
    """The index terms of ``phrase`` with their positions (stop words leave gaps)."""
    placed = []
    for position, word in enumerate(_WORDS.analyze(phrase)):
        terms = _ANALYZER.analyze(word)
        if terms:
            placed.append((position, terms[0]))
    return placed


def query_size(text: str) -> tuple[int, int]:
    """What ``SearchIndex.build_query`` asks of Tantivy for ``text``: (terms, phrases).

    Terms are counted with repeats (a repeated term is asked for again);
    phrases are the quoted groups of more than one term. A search's cost
    grows with both, so the tool bounds them (``catalogue``).
    """
    phrases = sum(1 for phrase in _PHRASE.findall(text) if len(phrase_terms(phrase)) > 1)
    return len(analyze(text)), phrases


def _build_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("chunk_id", stored=True, tokenizer_name="raw")
    builder.add_integer_field("report_id", indexed=True, fast=True)
    builder.add_text_field("document_id", tokenizer_name="raw")
    builder.add_text_field("title", tokenizer_name=ANALYZER)
    builder.add_text_field("text", tokenizer_name=ANALYZER)
    builder.add_text_field("tag", tokenizer_name="raw")
    builder.add_integer_field("date", indexed=True, fast=True)
    builder.add_text_field("source", tokenizer_name="raw")
    builder.add_text_field("kind", tokenizer_name="raw")
    builder.add_text_field("workspace", tokenizer_name="raw")
    return builder.build()


SCHEMA = _build_schema()


def date_number(date: str) -> int:
    """``"2026-03-14"`` → ``20260314``: sortable, and a plain integer field."""
    return int(date[:10].replace("-", ""))


class SearchIndex:
    """One Tantivy index folder: open, write, search."""

    def __init__(self, path: Path, index: tantivy.Index) -> None:
        self.path = path
        self._index = index
        self._writer: tantivy.IndexWriter | None = None

    name: ClassVar[str] = "index"
    suffix: ClassVar[str] = ".index"
    schema_version: ClassVar[int] = INDEX_SCHEMA_VERSION

    # -- opening ---------------------------------------------------------

    @classmethod
    def open(cls, path: Path) -> SearchIndex:
        try:
            index = tantivy.Index(SCHEMA, path=str(path), reuse=True)
        except ValueError as error:  # tantivy's word for a damaged folder
            raise IndexDamaged(f"{path}: {error}") from None
        index.register_tokenizer(ANALYZER, build_analyzer())
        # We reload by hand after our own commits; the watcher picks up
        # commits made by other processes.
        index.config_reader(reload_policy="commit")
        return cls(path, index)

    @classmethod
    def create(cls, path: Path) -> SearchIndex:
        path.mkdir(parents=True, exist_ok=False)
        index = cls.open(path)
        index.writer(bulk=True)
        return index

    # -- writing ---------------------------------------------------------

    def writer(self, *, bulk: bool = False) -> tantivy.IndexWriter:
        # Never ``with index.writer()``: tantivy-py commits when the block
        # exits, even on an exception. Commit and rollback are explicit.
        if self._writer is None:
            # A rebuild (bulk) may use both cores and a bigger buffer: the
            # stemmer in Tantivy's indexing thread is its bottleneck.
            heap, threads = (128_000_000, 2) if bulk else (64_000_000, 1)
            self._writer = self._index.writer(heap_size=heap, num_threads=threads)
            # A writer killed mid-run (kill -9) leaves files its commit never
            # named, e.g. "<segment>.<opstamp>.del"; the next writer reuses
            # that opstamp and would fail with FileAlreadyExists. Tantivy's
            # own garbage collection removes exactly those orphans.
            self._writer.garbage_collect_files()
        return self._writer

    def add(self, chunks: Sequence[IndexedChunk]) -> None:
        writer = self.writer()
        for chunk in chunks:
            document = tantivy.Document(
                chunk_id=chunk.chunk_id,
                report_id=chunk.report_id,
                document_id=chunk.document_id,
                title=chunk.title,
                # The title in every chunk's text too: a chunk is found by what
                # its report is about, not only by its own words (SciFact:
                # nDCG@10 up with the title field kept as well).
                text=f"{chunk.title}\n{chunk.text}" if chunk.title else chunk.text,
                date=date_number(chunk.date),
                source=chunk.source,
                kind=chunk.kind,
                workspace=chunk.workspace or NO_WORKSPACE,
            )
            for term in tag_terms(chunk.tags):
                document.add_text("tag", term)
            writer.add_document(document)

    def delete_report(self, report_id: int) -> None:
        self.writer().delete_documents_by_term("report_id", report_id)

    def commit(self) -> None:
        if self._writer is not None:
            self._writer.commit()
            self._index.reload()

    def rollback(self) -> None:
        if self._writer is not None:
            self._writer.rollback()

    def close_writer(self) -> None:
        """Release Tantivy's writer lock (after a commit or a rollback)."""
        if self._writer is not None:
            self._writer.wait_merging_threads()
            self._writer = None

    # -- reading ---------------------------------------------------------

    def searcher(self) -> tantivy.Searcher:
        """A snapshot of the index as of its last reload (cheap to take)."""
        return self._index.searcher()

    def refresh(self) -> None:
        """Pick up commits made by another process now."""
        self._index.reload()

    def all_chunk_ids(self) -> list[str]:
        """Every chunk id the index holds (for consistency checks, not hot paths)."""
        searcher = self.searcher()
        total = searcher.num_docs
        if total == 0:
            return []
        result = searcher.search(tantivy.Query.all_query(), limit=total, count=False)
        return [_chunk_id(searcher, address) for _, address in result.hits]

    @property
    def num_docs(self) -> int:
        return self.searcher().num_docs

    def build_query(self, text: str, filters: SearchFilters) -> tantivy.Query | None:
        """Turn any user text into a query; None when it has no searchable term."""
        text_clauses = self._text_clauses(text)
        if not text_clauses:
            return None
        filter_clauses = self._filter_clauses(filters)
        if not filter_clauses:
            # A plain disjunction of term queries is what Tantivy ranks with
            # block-max WAND, skipping most postings: keep it plain (no
            # boosts, no wrapper). Evidence is then dropped by the caller.
            return tantivy.Query.boolean_query(text_clauses)
        clauses: list[tuple[tantivy.Occur, tantivy.Query]] = [
            (tantivy.Occur.Must, tantivy.Query.boolean_query(text_clauses))
        ]
        for occur_query in filter_clauses:
            clauses.append((tantivy.Occur.Must, occur_query))
        return tantivy.Query.boolean_query(clauses)

    def _text_clauses(self, text: str) -> list[tuple[tantivy.Occur, tantivy.Query]]:
        clauses: list[tuple[tantivy.Occur, tantivy.Query]] = []
        for phrase in _PHRASE.findall(text):
            terms = phrase_terms(phrase)
            if len(terms) > 1:
                for field, boost in (("text", 1.0), ("title", 0.5)):
                    query = tantivy.Query.phrase_query(SCHEMA, field, list(terms))
                    clauses.append((tantivy.Occur.Should, tantivy.Query.boost_query(query, boost)))
        # The title is indexed in every chunk's text too, so the text field
        # alone ranks. A term the query repeats weighs more (BM25's query-term
        # frequency): it is simply asked for again, which keeps the query a
        # plain disjunction of term queries.
        words = analyze(text)
        for term in words:
            clauses.append((tantivy.Occur.Should, tantivy.Query.term_query(SCHEMA, "text", term)))
        for term in dict.fromkeys(words):
            title = tantivy.Query.term_query(SCHEMA, "title", term)
            clauses.append((tantivy.Occur.Should, tantivy.Query.boost_query(title, 0.5)))
        return clauses

    @staticmethod
    def _filter_clauses(filters: SearchFilters) -> list[tantivy.Query]:
        queries: list[tantivy.Query] = []
        if filters.report_id is not None:
            queries.append(tantivy.Query.term_query(SCHEMA, "report_id", filters.report_id))
        for name, values in (filters.tags or {}).items():
            alternatives = [
                (tantivy.Occur.Should, tantivy.Query.term_query(SCHEMA, "tag", f"{name}={value}"))
                for value in values
            ]
            queries.append(tantivy.Query.boolean_query(alternatives))
        if filters.date_from is not None or filters.date_to is not None:
            lower = date_number(filters.date_from) if filters.date_from else 0
            upper = date_number(filters.date_to) if filters.date_to else 99_991_231
            queries.append(
                tantivy.Query.range_query(SCHEMA, "date", tantivy.FieldType.Integer, lower, upper)
            )
        if filters.source is not None:
            queries.append(tantivy.Query.term_query(SCHEMA, "source", filters.source))
        if filters.kind is not None:
            queries.append(tantivy.Query.term_query(SCHEMA, "kind", filters.kind))
        if filters.workspace is not None:
            queries.append(tantivy.Query.term_query(SCHEMA, "workspace", filters.workspace))
        elif queries:
            queries.append(tantivy.Query.term_query(SCHEMA, "workspace", NO_WORKSPACE))
        return queries

    @staticmethod
    def top(
        query: tantivy.Query, *, limit: int, offset: int, searcher: tantivy.Searcher
    ) -> list[tuple[float, Any]]:
        """Top hits as ``(score, address)``: cheap; loading a hit's id is not."""
        result = searcher.search(query, limit=limit, offset=offset, count=False)
        return [(float(score), address) for score, address in result.hits]

    @staticmethod
    def chunk_ids(addresses: Sequence[Any], *, searcher: tantivy.Searcher) -> list[str]:
        """The chunk ids stored for these hits (each costs a doc-store read)."""
        return [_chunk_id(searcher, address) for address in addresses]

    def snippets(
        self,
        query: tantivy.Query,
        texts: Sequence[str],
        *,
        max_chars: int = 200,
        searcher: tantivy.Searcher | None = None,
    ) -> list[str]:
        """Highlighted fragments (HTML-escaped, matches in ``<b>``) of ``texts``."""
        searcher = searcher or self.searcher()
        generator = tantivy.SnippetGenerator.create(searcher, query, SCHEMA, "text")
        generator.set_max_num_chars(max_chars)
        out = []
        for text in texts:
            snippet = generator.snippet_from_doc(tantivy.Document(text=text))
            html = snippet.to_html()
            if not html:
                html = _escape(text[:max_chars])
            out.append(html)
        return out


def _chunk_id(searcher: tantivy.Searcher, address: Any) -> str:
    return str(searcher.doc(address).get_first("chunk_id"))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
