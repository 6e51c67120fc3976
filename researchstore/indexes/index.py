"""The Tantivy full-text index: the only module that searches with ``tantivy``.

The word index is one of the store's derived indexes (``derived.py``): it
holds nothing that SQLite does not, lives in ``STORE.db.index/`` and follows
SQLite through ``sync.IndexSync``.

Queries are never given to Tantivy's query parser: user text is analysed with
the index's own analyzers and turned into term and phrase queries here, so no
input can raise a parse error.

Each chunk's words are analysed in its document's language
(``language.analysis_key``), all in one ``text`` field, by the analyzers of
``analysis.py`` (English by Tantivy, any other language's terms marked so
that the English analysis leaves them be), in the index and the query alike.
A query asks for its words as every analysis that holds chunks makes them,
the forms of one word weighed as one.

Damage is Tantivy's to find and this module's to name: a folder whose
``meta.json`` or segment files are missing or empty is refused on opening,
and whatever Tantivy raises while reading (an error about the data, or a
Rust panic, which Python sees as a ``BaseException``) leaves here as
``IndexDamaged``. ``verify`` reads every file back against its checksum.
An I/O error from Tantivy leaves as the ``OSError`` it names, so a full
disk is told apart from damage.

Snippets are cut from a hit's own text by ``highlight.Highlighter``, with
Tantivy's analyzers (``HIGHLIGHTER``).
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import tantivy

from researchstore.indexes.index_files import (
    META,
    SEGMENT_FILES,
    checksum_problem,
    foreign_managed_files,
    missing_files,
    segment_files,
)
from researchstore.storage.derived import (
    IndexDamaged,
    IndexedChunk,
    count_searchable_chunks,
    indexed_chunks,
)
from researchstore.storage.filters import SearchFilters, tag_terms
from researchstore.storage.foreign_errors import index_read_errors, index_write_errors
from researchstore.text.analysis import (
    MARK,
    PHRASE,
    STOPWORD_SET,
    WORDS,
    build_analyzer,
    english_words,
    index_terms,
    indexed_text,
    phrase_terms,
    query_forms,
    stop_words,
)
from researchstore.text.highlight import Highlighter, WordAnalysis
from researchstore.text.language import (
    ANALYSES,
    DEFAULT_ANALYSIS,
    analysis_key,
)

#: Bump when the fields or the analyzer change: older indexes are rebuilt.
INDEX_SCHEMA_VERSION = 5
ANALYZER = "rs_en"

#: The ``workspace`` term of every chunk that is not workspace evidence. A
#: search without a workspace filter asks for it, so evidence (retrieved into
#: a workspace by ``research_evidence_retrieve``) is only ever found by a
#: search that names its workspace, and then only that workspace's.
NO_WORKSPACE = "-"
#: A report id no report has (ids start at 1).
NO_REPORT = -1


def _build_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("chunk_id", stored=True, tokenizer_name="raw")
    builder.add_integer_field("report_id", indexed=True, fast=True)
    builder.add_text_field("document_id", tokenizer_name="raw")
    # Every chunk's words, analysed in its own language (``indexed_text``):
    # one field for all, so that every chunk is ranked with the same
    # statistics (a field per language would rank a chunk of a language the
    # store holds little of by rarer terms, and as a longer text, than the
    # rest: Tantivy's BM25 takes the mean length over every document).
    builder.add_text_field("title", tokenizer_name=ANALYZER)
    builder.add_text_field("text", tokenizer_name=ANALYZER)
    # Which analysis a chunk has: tells the analyses that hold chunks.
    builder.add_text_field("analysis", tokenizer_name="raw")
    # The stop words a chunk's analysis dropped from its title and text
    # (``stop_words``): never searched, only counted, so a query weighs such
    # a word as common as it is (``_blended``).
    builder.add_text_field("stop_word", tokenizer_name="raw", index_option="basic")
    builder.add_text_field("tag", tokenizer_name="raw")
    builder.add_integer_field("date", indexed=True, fast=True)
    builder.add_text_field("source", tokenizer_name="raw")
    builder.add_text_field("kind", tokenizer_name="raw")
    builder.add_text_field("workspace", tokenizer_name="raw")
    return builder.build()


SCHEMA = _build_schema()


def date_number(date: str | None) -> int:
    """``"2026-03-14"`` → ``20260314``: sortable, and a plain integer field.

    No date is 0, below every date a range can ask for.
    """
    return int(date[:10].replace("-", "")) if date else 0


#: How far apart the query's words may be for the proximity clause.
PROXIMITY_SLOP = 3
#: From how many postings of its words on a query with phrase clauses is
#: ranked as two queries (``SplitQuery``): the whole query scores every
#: posting, the split pays a second search and a merge (about 10 µs; even
#: at 4,000 postings on SciFact, 1.5x faster at 100,000 and up on 1,000,000
#: chunks).
SPLIT_POSTINGS = 4_000


class SearchIndex:
    """One Tantivy index folder: open, write, search."""

    def __init__(self, path: Path, index: tantivy.Index) -> None:
        self.path = path
        self._index = index
        self._writer: tantivy.IndexWriter | None = None

    name: ClassVar[str] = "index"
    label: ClassVar[str] = "word index"
    suffix: ClassVar[str] = ".index"
    schema_version: ClassVar[int] = INDEX_SCHEMA_VERSION
    fed_on_write: ClassVar[bool] = True

    @classmethod
    def read(cls, conn: sqlite3.Connection, report_id: int | None = None) -> Iterator[IndexedChunk]:
        return indexed_chunks(conn, report_id)

    @classmethod
    def expected_count(cls, conn: sqlite3.Connection) -> int:
        return count_searchable_chunks(conn)

    # -- opening ---------------------------------------------------------

    @classmethod
    def open(cls, path: Path) -> SearchIndex:
        # Tantivy would take a folder without meta.json for a new, empty
        # index, and reads a segment's files only when a search needs them:
        # look at what meta.json lists first, so such a folder is rebuilt.
        problems = missing_files(path) + foreign_managed_files(path)
        if problems:
            raise IndexDamaged(f"{path}: {'; '.join(problems)}")
        return cls._load(path)

    @classmethod
    def create(cls, path: Path) -> SearchIndex:
        path.mkdir(parents=True, exist_ok=False)
        index = cls._load(path)
        index.writer(bulk=True)
        return index

    @classmethod
    def _load(cls, path: Path) -> SearchIndex:
        with index_read_errors(path):  # ValueError: tantivy's word for a damaged folder
            index = tantivy.Index(SCHEMA, path=str(path), reuse=True)
            index.register_tokenizer(ANALYZER, build_analyzer())
            # We reload by hand after our own commits; the watcher picks up
            # commits made by other processes.
            index.config_reader(reload_policy="commit")
        return cls(path, index)

    @classmethod
    def holds_data(cls, path: Path) -> bool:
        """Whether the folder at ``path`` holds an index with documents (or what may be one)."""
        if not path.is_dir():
            return False
        try:
            segments = json.loads((path / META).read_text())["segments"]
        except FileNotFoundError:
            suffixes = {f".{ext}" for ext in SEGMENT_FILES}
            return any(entry.suffix in suffixes for entry in path.iterdir())
        except (OSError, ValueError, KeyError, TypeError):
            return True  # something is there, and it is not ours to judge
        return bool(segments)

    # -- writing ---------------------------------------------------------

    def writer(self, *, bulk: bool = False) -> tantivy.IndexWriter:
        # Never ``with index.writer()``: tantivy-py commits when the block
        # exits, even on an exception. Commit and rollback are explicit.
        if self._writer is None:
            # A rebuild (bulk) may use both cores and a bigger buffer: the
            # stemmer in Tantivy's indexing thread is its bottleneck.
            heap, threads = (128_000_000, 2) if bulk else (64_000_000, 1)
            with index_write_errors(self.path):
                writer = self._index.writer(heap_size=heap, num_threads=threads)
                # A writer killed mid-run (kill -9) leaves files its commit never
                # named, e.g. "<segment>.<opstamp>.del"; the next writer reuses
                # that opstamp and would fail with FileAlreadyExists. Tantivy's
                # own garbage collection removes exactly those orphans.
                writer.garbage_collect_files()
                # A new writer stamps its first operation with the opstamp of
                # the last commit, which Tantivy takes for part of that commit:
                # a merge it starts before this writer's first commit (at that
                # commit's opstamp) consumes the operation for some segments
                # and skips it for a segment whose deletes date from that
                # commit, so a first delete of documents in such a segment is
                # lost when the merge lands (the documents come back). A
                # writer opened after a kill meets this: the killed run left
                # unmerged segments, and replaying starts with a delete. The
                # opstamp is spent here on a delete that matches nothing.
                writer.delete_documents_by_term("report_id", NO_REPORT)
            self._writer = writer
        return self._writer

    def add(self, chunks: Sequence[IndexedChunk]) -> None:
        writer = self.writer()
        with index_write_errors(self.path):
            self._add(writer, chunks)

    @staticmethod
    def _add(writer: tantivy.IndexWriter, chunks: Sequence[IndexedChunk]) -> None:
        # Chunks come a document at a time: what a document's chunks share
        # (their title, language, date and tags) is worked out once.
        shared: tuple[object, ...] | None = None
        analysis = title = ""
        date = 0
        terms: list[str] = []
        title_stop_words: set[str] = set()
        for chunk in chunks:
            now = (chunk.title, chunk.language, chunk.date, id(chunk.tags))
            if now != shared:
                shared = now
                analysis = analysis_key(chunk.language)
                title = indexed_text(chunk.title, analysis)
                title_stop_words = stop_words(chunk.title, analysis)
                date = date_number(chunk.date)
                terms = list(tag_terms(chunk.tags))
            document = tantivy.Document(
                chunk_id=chunk.chunk_id,
                report_id=chunk.report_id,
                document_id=chunk.document_id,
                date=date,
                source=chunk.source,
                kind=chunk.kind,
                workspace=chunk.workspace or NO_WORKSPACE,
                analysis=analysis,
            )
            document.add_text("title", title)
            # The title in every chunk's text too: a chunk is found by what
            # its report is about, not only by its own words (SciFact:
            # nDCG@10 up with the title field kept as well).
            text = indexed_text(chunk.text, analysis)
            document.add_text("text", f"{title}\n{text}" if title else text)
            for term in terms:
                document.add_text("tag", term)
            for word in title_stop_words | stop_words(chunk.text, analysis):
                document.add_text("stop_word", word)
            writer.add_document(document)

    def delete_report(self, report_id: int) -> None:
        writer = self.writer()
        with index_write_errors(self.path):
            writer.delete_documents_by_term("report_id", report_id)

    def commit(self) -> None:
        if self._writer is not None:
            with index_write_errors(self.path):
                self._writer.commit()
                self._index.reload()

    def rollback(self) -> None:
        if self._writer is not None:
            self._writer.rollback()

    def close_writer(self) -> None:
        """Release Tantivy's writer lock; what was not committed is dropped."""
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.wait_merging_threads()
            except ValueError:
                # A background merge failed (a full disk, say): merges are
                # optional, the last commit stands, and the writer is gone.
                pass

    # -- reading ---------------------------------------------------------

    def searcher(self) -> tantivy.Searcher:
        """A snapshot of the index as of its last reload (cheap to take)."""
        with index_read_errors(self.path):
            return self._index.searcher()

    def refresh(self) -> None:
        """Pick up commits made by another process now."""
        with index_read_errors(self.path):
            self._index.reload()

    def all_chunk_ids(self) -> list[str]:
        """Every chunk id the index holds, each read back from its stored document.

        For consistency checks, not hot paths: it reads every stored document.
        """
        searcher = self.searcher()
        with index_read_errors(self.path):
            total = searcher.num_docs
            if total == 0:
                return []
            result = searcher.search(tantivy.Query.all_query(), limit=total, count=False)
            return [_chunk_id(searcher, address) for _, address in result.hits]

    def document_count(self) -> int:
        """How many documents the index holds (as its segment list says: no reads)."""
        return self.num_docs

    @property
    def num_docs(self) -> int:
        searcher = self.searcher()
        with index_read_errors(self.path):
            return int(searcher.num_docs)

    def report_counts(self, report_ids: Sequence[int]) -> dict[int, int]:
        """How many documents each report has in the index, counted through its postings."""
        searcher = self.searcher()
        counts = {}
        with index_read_errors(self.path):
            for report_id in report_ids:
                query = tantivy.Query.term_query(SCHEMA, "report_id", report_id)
                result = searcher.search(query, limit=1, count=True)
                # ``count`` is there when asked for, but missing from tantivy's stubs.
                counts[report_id] = int(result.count or 0)  # type: ignore[attr-defined]
        return counts

    rewritten_files: ClassVar[frozenset[str]] = frozenset({META})
    file_names: ClassVar[re.Pattern[str]] = re.compile(
        rf"{re.escape(META)}|[0-9a-f]{{32}}\.(?:{'|'.join(SEGMENT_FILES)}|[0-9]{{1,20}}\.del)"
    )

    def committed_files(self) -> list[Path]:
        """``meta.json`` and every file of the segments it lists."""
        files = [self.path / META]
        for listed in segment_files(self.path).values():
            files.extend(path for path in listed if path.exists())
        return files

    def verify(self) -> list[str]:
        """Read every file of the index back against its checksum; what is wrong, if anything."""
        problems = []
        for files in segment_files(self.path).values():
            for file in files:
                problem = checksum_problem(file)
                if problem is not None:
                    problems.append(problem)
        return problems

    def build_query(self, text: str, filters: SearchFilters) -> WordQuery | None:
        """Turn any user text into a query; None when it has no searchable term.

        The text is analysed every way that holds chunks (``analyses``): a
        chunk's words were analysed in its own language, so each chunk is
        asked for the terms of its language, all in one field.

        The words highlighted are each analysis's forms of every word the
        English analysis keeps, its own stop words too: a snippet is read
        under the analysis that matches most of its words (``highlight``),
        and without them a Norwegian text would be read as English for the
        query "bok om naturvern" (English matching "om" and "naturvern",
        Norwegian only "bok" and "naturvern").
        """
        searcher = self.searcher()
        analysed = {analysis: query_forms(text, analysis) for analysis in self.analyses(searcher)}
        filter_clauses = self._filter_clauses(filters)
        with index_read_errors(self.path):
            query_words = _words(text, analysed)
            bonus, words = self._text_clauses(text, list(analysed), query_words, searcher)
            # Only a query without filters is ranked with WAND, split or not.
            postings = _postings(query_words, searcher) if bonus and not filter_clauses else 0
        if not words:
            return None
        highlight = {
            analysis: frozenset(_unmarked(forms, analysis))
            for analysis, (forms, _) in analysed.items()
        }
        if not filter_clauses:
            # A plain disjunction of term queries is what Tantivy ranks with
            # block-max WAND, skipping most postings: keep it plain (no
            # wrapper). Evidence is then dropped by the caller.
            query = tantivy.Query.boolean_query(bonus + words)
            if not bonus or postings < SPLIT_POSTINGS:
                return WordQuery(query, highlight)
            # Phrase clauses stop WAND: they are ranked apart (``SplitQuery``).
            split = SplitQuery(
                words=tantivy.Query.boolean_query(words),
                bonused=tantivy.Query.boolean_query(
                    [(tantivy.Occur.Must, tantivy.Query.boolean_query(bonus)), *words]
                ),
            )
            return WordQuery(query, highlight, split)
        clauses: list[tuple[tantivy.Occur, tantivy.Query]] = [
            (tantivy.Occur.Must, tantivy.Query.boolean_query(bonus + words))
        ]
        for occur_query in filter_clauses:
            clauses.append((tantivy.Occur.Must, occur_query))
        return WordQuery(tantivy.Query.boolean_query(clauses), highlight)

    def analyses(self, searcher: tantivy.Searcher | None = None) -> list[str]:
        """The analyses that hold chunks (English alone in an empty index).

        A query asks only these: each other analysis would cost a term
        lookup per term and segment for nothing.
        """
        searcher = searcher or self.searcher()
        with index_read_errors(self.path):
            held = [
                analysis for analysis in ANALYSES if searcher.doc_freq("analysis", analysis) > 0
            ]
        return held or [DEFAULT_ANALYSIS]

    @staticmethod
    def _text_clauses(
        text: str, analyses: list[str], words: QueryWords, searcher: tantivy.Searcher
    ) -> tuple[Clauses, Clauses]:
        """The query's phrase clauses, under each of ``analyses``, and its words, each
        as the terms its analyses make of it (``_words``).

        A word every analysis stems alike is one term. A word they stem
        apart ("werden": "werden" in English, "werd" in German) is one term
        for each, weighed together as one word: each is boosted so that it
        counts with the rarity of all of them at once (Lucene's blended
        synonym weight), or the rarer form would outweigh the common one
        only for being rare where it was stemmed that way. A word the query
        repeats weighs more (BM25's query-term frequency): it is simply
        asked for again, which keeps the query a disjunction of term queries.
        A word some analyses drop as a stop word of their language counts
        their chunks that hold it too (``_blended``).
        """
        if not words:
            return [], []
        phrases: dict[tuple[tuple[int, str], ...], None] = {}
        for phrase in PHRASE.findall(text):
            for analysis in analyses:
                placed = tuple(phrase_terms(phrase, analysis))
                if len(placed) > 1:
                    phrases[placed] = None
        bonus: Clauses = []
        for placed in phrases:
            for field, boost in (("text", 1.0), ("title", 0.5)):
                query = tantivy.Query.phrase_query(SCHEMA, field, list(placed))
                bonus.append((tantivy.Occur.Should, tantivy.Query.boost_query(query, boost)))
        if not phrases and 3 <= len(index_terms(text)) <= 16:
            # Words of the query close together, in its order, count for more
            # (proximity): a sloppy phrase of the whole query, of three words
            # or more as English counts them (an analysis that drops some of
            # them as its stop words asks for the rest).
            near: dict[tuple[str, ...], None] = {}
            for analysis in analyses:
                placed_all = [term for _, term in phrase_terms(text, analysis)]
                if len(placed_all) > 1:
                    near[tuple(placed_all)] = None
            for sequence in near:
                query = tantivy.Query.phrase_query(
                    SCHEMA, "text", list(enumerate(sequence)), slop=PROXIMITY_SLOP
                )
                bonus.append((tantivy.Occur.Should, query))
        # The title is indexed in every chunk's text too, so the text field
        # alone ranks.
        clauses: Clauses = []
        titles: Clauses = []
        for (forms, stop_word), count in words.items():
            for term, weight in _blended(forms, stop_word, searcher):
                query = tantivy.Query.term_query(SCHEMA, "text", term)
                if weight != 1.0:
                    query = tantivy.Query.boost_query(query, weight)
                clauses.extend([(tantivy.Occur.Should, query)] * count)
                title = tantivy.Query.term_query(SCHEMA, "title", term)
                titles.append(
                    (tantivy.Occur.Should, tantivy.Query.boost_query(title, 0.5 * weight))
                )
        return bonus, clauses + titles

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
            # From 1, not 0: a chunk without a date is in no date range.
            lower = date_number(filters.date_from) if filters.date_from else 1
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
        query: WordQuery | tantivy.Query,
        *,
        limit: int,
        offset: int,
        searcher: tantivy.Searcher,
    ) -> list[tuple[float, Any]]:
        """Top hits as ``(score, address)``: cheap; loading a hit's id is not.

        Equal scores come in the order of their addresses.
        """
        with index_read_errors(None):
            if isinstance(query, WordQuery):
                if query.split is not None:
                    return query.split.top(limit + offset, searcher)[offset:]
                query = query.query
            result = searcher.search(query, limit=limit, offset=offset, count=False)
        return [(float(score), address) for score, address in result.hits]

    @staticmethod
    def chunk_ids(addresses: Sequence[Any], *, searcher: tantivy.Searcher) -> list[str]:
        """The chunk ids stored for these hits (each costs a doc-store read)."""
        with index_read_errors(None):
            return [_chunk_id(searcher, address) for address in addresses]

    def snippets(
        self,
        query: WordQuery | tantivy.Query,
        texts: Sequence[str],
        *,
        max_chars: int = 200,
        searcher: tantivy.Searcher | None = None,
    ) -> list[str]:
        """Highlighted fragments (HTML-escaped, matches in ``<b>``) of ``texts``.

        Each is cut from the hit's own text in one cheap pass (``highlight``),
        with no pass of Tantivy's over it: a text's words are matched as
        analysed in its own language; which that is, the text does not say,
        so each analysis the query was built for is tried and the one that
        matches most words wins (English on a tie). A query not built here
        highlights nothing. ``searcher`` is not needed; it is taken for the
        callers that have one.
        """
        terms = query.terms if isinstance(query, WordQuery) else {}
        return HIGHLIGHTER.highlights(texts, terms, max_chars=max_chars)


def _unmarked(terms: Sequence[str], analysis: str) -> list[str]:
    if analysis == DEFAULT_ANALYSIS:
        return list(terms)
    return [term[: -len(MARK)] for term in terms]


#: A query's words: (its forms, the word lower-cased where some analysis
#: drops it as a stop word, else "") → how many times the query has it.
QueryWords = Counter[tuple[tuple[str, ...], str]]


def _words(text: str, analysed: dict[str, tuple[tuple[str, ...], tuple[bool, ...]]]) -> QueryWords:
    """The words of ``text`` from each analysis's ``analysis.query_forms`` of it (``analysed``).

    Every analysis makes a term of each word the English analysis keeps, so
    the n-th term of each comes from the query's n-th word. A word's forms
    are the terms of the analyses that do not drop it; one that every
    analysis drops is no word of the query.
    """
    words: QueryWords = Counter()
    columns = [zip(terms, dropped, strict=True) for terms, dropped in analysed.values()]
    lowered = english_words(text)
    for word, made in zip(lowered, zip(*columns, strict=True), strict=True):
        forms = tuple(sorted({term for term, dropped in made if not dropped}))
        if forms:
            stopped = any(dropped for _, dropped in made)
            words[forms, word if stopped else ""] += 1
    return words


def _blended(
    forms: tuple[str, ...], stop_word: str, searcher: tantivy.Searcher
) -> list[tuple[str, float]]:
    """Each form of one word with the boost that gives it the word's blended weight.

    BM25 weighs a term by ``idf(df)``; a form is boosted by
    ``idf(sum of the forms' df) / idf(its df)``. A word some analyses drop
    as a stop word (``stop_word``, lower-cased) counts the chunks of theirs
    that hold it too (``stop_word`` field): it is as common as it would be
    had they kept it. A form no chunk holds is left out. One form of a word
    no analysis drops is itself, unboosted.
    """
    if len(forms) == 1 and not stop_word:
        return [(forms[0], 1.0)]
    frequencies = {form: searcher.doc_freq("text", form) for form in forms}
    held = {form: frequency for form, frequency in frequencies.items() if frequency > 0}
    if not held:
        return [(forms[0], 1.0)]  # matches nothing; keeps the query a query
    stopped = searcher.doc_freq("stop_word", stop_word) if stop_word else 0
    total_docs = max(1, searcher.num_docs)
    blended = _idf(min(total_docs, sum(held.values()) + stopped), total_docs)
    return [(form, blended / _idf(frequency, total_docs)) for form, frequency in held.items()]


def _idf(document_frequency: int, total_docs: int) -> float:
    """BM25's inverse document frequency, as Tantivy computes it."""
    return math.log(1 + (total_docs - document_frequency + 0.5) / (document_frequency + 0.5))


Clauses = list[tuple[tantivy.Occur, tantivy.Query]]


@dataclass(frozen=True, slots=True)
class SplitQuery:
    """A query of words and phrases, ranked as two cheaper queries.

    A phrase clause (a quoted phrase, or the proximity of the query's words)
    keeps Tantivy from ranking the whole query with block-max WAND, which
    skips most postings of the words: it scores every chunk holding any
    word. A chunk's score is its words' score, plus its phrases' only if it
    holds one. So the words alone are ranked with WAND (``words``), and the
    chunks holding a phrase are ranked by the whole score (``bonused``: the
    phrases required, the words optional), which visits only those chunks.
    Merged, the two give the whole query's best hits, with its scores.
    """

    words: tantivy.Query
    bonused: tantivy.Query

    def top(self, want: int, searcher: tantivy.Searcher) -> list[tuple[float, Any]]:
        """The whole query's ``want`` best hits, in Tantivy's order (by score,
        then by address), each with its whole score.

        Why the merge is whole: each ranking returns its best ``want`` in that
        order. A hit the phrase ranking returned has its whole score; a hit
        only the word ranking returned has its words' score, which is its
        whole score unless it holds a phrase. If it does, the phrase ranking
        was cut short before it (its whole score is higher), so it is past
        the phrase ranking's ``want`` hits however it is scored here. Any hit
        neither ranking returned is past one ranking's ``want``.
        """
        known: dict[tuple[int, int], tuple[float, int, int, Any]] = {}
        for query in (self.bonused, self.words):  # a phrase hit's whole score first
            for score, address in searcher.search(query, limit=want, count=False).hits:
                key = (address.segment_ord, address.doc)
                if key not in known:
                    known[key] = (-score, *key, address)
        return [(-hit[0], hit[3]) for hit in sorted(known.values())[:want]]


@dataclass(frozen=True, slots=True)
class WordQuery:
    """A search of the word index: Tantivy's query, the terms to highlight by
    analysis, and the query split in two cheaper rankings where it can be."""

    query: tantivy.Query
    terms: dict[str, frozenset[str]]
    split: SplitQuery | None = None


def _postings(words: QueryWords, searcher: tantivy.Searcher) -> int:
    """How many postings of the text field the query's terms have."""
    held = {term for forms, _ in words for term in forms}
    return sum(searcher.doc_freq("text", term) for term in held)


#: The index's words as highlighting finds them in a hit's own text: split
#: as the index splits them, then lower-cased and folded (one for one,
#: nothing dropped); then each analysis's stemmer alone, for words folded.
HIGHLIGHTER = Highlighter(
    WordAnalysis(
        words=WORDS,
        folded=tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .build(),
        stemmers={
            analysis: (
                tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace())
                .filter(tantivy.Filter.stemmer(stemmer))
                .build()
                if stemmer is not None
                else None
            )
            for analysis, stemmer in ANALYSES.items()
        },
        stopwords=STOPWORD_SET,
    )
)


def _chunk_id(searcher: tantivy.Searcher, address: Any) -> str:
    return str(searcher.doc(address).get_first("chunk_id"))
