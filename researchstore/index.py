"""The Tantivy full-text index: the only module that imports ``tantivy``.

The word index is one of the store's derived indexes (``derived.py``): it
holds nothing that SQLite does not, lives in ``STORE.db.index/`` and follows
SQLite through ``sync.IndexSync``.

Queries are never given to Tantivy's query parser: user text is analysed with
the index's own analyzer and turned into term and phrase queries here, so no
input can raise a parse error.

Damage is Tantivy's to find and this module's to name: a folder whose
``meta.json`` or segment files are missing or empty is refused on opening,
and whatever Tantivy raises while reading (an error about the data, or a
Rust panic, which Python sees as a ``BaseException``) leaves here as
``IndexDamaged``. ``verify`` reads every file back against its checksum.
An I/O error from Tantivy leaves as the ``OSError`` it names, so a full
disk is told apart from damage.
"""

from __future__ import annotations

import errno
import json
import os
import re
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import tantivy

from researchstore.db import no_space_left
from researchstore.derived import IndexDamaged, IndexedChunk, is_panic
from researchstore.filters import SearchFilters, tag_terms
from researchstore.language import (
    ANALYSES,
    DEFAULT_ANALYSIS,
    analysis_key,
    cjk_bigrams,
    cjk_bigrams_with_offsets,
)

#: Bump when the fields or the analyzer change: older indexes are rebuilt.
INDEX_SCHEMA_VERSION = 4

_PHRASE = re.compile(r'"([^"]+)"')
#: The ``workspace`` term of every chunk that is not workspace evidence. A
#: search without a workspace filter asks for it, so evidence (retrieved into
#: a workspace by ``research_evidence_retrieve``) is only ever found by a
#: search that names its workspace, and then only that workspace's.
NO_WORKSPACE = "-"
#: A report id no report has (ids start at 1).
NO_REPORT = -1


#: Lucene's English stop words (what Anserini's BM25 drops): measured on
#: SciFact (bench/quality_search.py), dropping them gains relevance.
STOPWORDS = (
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with"
).split()


def build_analyzer(
    analysis: str = DEFAULT_ANALYSIS, *, query: bool = False
) -> tantivy.TextAnalyzer:
    """One analysis (``language.ANALYSES``): split on non-alphanumerics, lower-case,
    drop the language's stop words, fold accents, stem.

    Accents are folded before stemming, so a word written with or without
    them has one stem. The English stop words are dropped from a query in
    every analysis (``query=True``): a query then asks each field for at most
    the terms it asks the English one for, which ``query_size`` bounds.
    """
    stemmer = ANALYSES[analysis]
    builder = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
    )
    if analysis == "en":
        builder = builder.filter(tantivy.Filter.ascii_fold()).filter(
            tantivy.Filter.custom_stopword(STOPWORDS)
        )
    else:
        if stemmer is not None:
            # Tantivy's lists are written with their accents: before folding.
            builder = builder.filter(tantivy.Filter.stopword(stemmer))
        builder = builder.filter(tantivy.Filter.ascii_fold())
        if query:
            builder = builder.filter(tantivy.Filter.custom_stopword(STOPWORDS))
    if stemmer is not None:
        builder = builder.filter(tantivy.Filter.stemmer(stemmer))
    return builder.build()


def analyzer_name(analysis: str) -> str:
    return f"rs_{analysis}"


def text_field(analysis: str) -> str:
    """The field holding the text (title included) of chunks under ``analysis``."""
    return f"text_{analysis}"


def title_field(analysis: str) -> str:
    return f"title_{analysis}"


_ANALYZER = build_analyzer()
_QUERY_ANALYZERS = {analysis: build_analyzer(analysis, query=True) for analysis in ANALYSES}
# The same tokens before any is dropped: a token's place in this list is its
# position in the index, which a phrase needs to step over stop words.
_WORDS = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).build()


def analyze(text: str) -> list[str]:
    """The terms the index stores for ``text`` in English."""
    return _ANALYZER.analyze(text)


def query_terms(text: str, analysis: str = DEFAULT_ANALYSIS) -> list[str]:
    """The terms a query asks the ``analysis`` fields for (CJK runs as bigrams)."""
    return _QUERY_ANALYZERS[analysis].analyze(cjk_bigrams(text))


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
    """The number of tokens the index's English analyzer yields for ``text``."""
    return len(_COUNTER.analyze(text))


def phrase_terms(phrase: str, analysis: str = DEFAULT_ANALYSIS) -> list[tuple[int, str]]:
    """The query terms of ``phrase`` with their positions (stop words leave gaps)."""
    analyzer = _QUERY_ANALYZERS[analysis]
    placed = []
    for position, word in enumerate(_WORDS.analyze(cjk_bigrams(phrase))):
        terms = analyzer.analyze(word)
        if terms:
            placed.append((position, terms[0]))
    return placed


def query_size(text: str) -> tuple[int, int]:
    """What ``SearchIndex.build_query`` asks of each analysis for ``text``: (terms, phrases).

    Terms are counted with repeats (a repeated term is asked for again), a
    run of CJK characters as its bigrams; phrases are the quoted groups of
    more than one term. The English count is the largest: every analysis
    drops the English stop words from a query, some drop more. A search's
    cost grows with both, and with the analyses that hold documents, so the
    tool bounds them (``catalogue``).
    """
    phrases = sum(1 for phrase in _PHRASE.findall(text) if len(phrase_terms(phrase)) > 1)
    return len(query_terms(text)), phrases


def _build_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("chunk_id", stored=True, tokenizer_name="raw")
    builder.add_integer_field("report_id", indexed=True, fast=True)
    builder.add_text_field("document_id", tokenizer_name="raw")
    # Each chunk's words go into the two fields of its own analysis only.
    for analysis in ANALYSES:
        builder.add_text_field(title_field(analysis), tokenizer_name=analyzer_name(analysis))
        builder.add_text_field(text_field(analysis), tokenizer_name=analyzer_name(analysis))
    # Which analysis a chunk has: tells the analyses that hold chunks.
    builder.add_text_field("analysis", tokenizer_name="raw")
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


META = "meta.json"
#: The files Tantivy writes for every segment (``<segment>.<ext>``); a segment
#: with deletes also has ``<segment>.<opstamp>.del``.
SEGMENT_FILES = ("idx", "pos", "term", "store", "fast", "fieldnorm")
#: The end of every file Tantivy writes: a JSON footer, its length, this number.
_FOOTER_MAGIC = 1337
_CHECKSUM_BLOCK = 1 << 20
_OS_ERROR = re.compile(r"os error (\d+)")


def _raise_read_error(error: BaseException, path: Path | None = None) -> NoReturn:
    """Leave with what a failed read of the index means: its OSError, or damage."""
    where = f"{path}: " if path is not None else ""
    if isinstance(error, ValueError):
        code = _os_error(error)
        if code is not None and code not in (errno.ENOENT, errno.EIO):
            raise OSError(code, f"{where}{error}") from None
        raise IndexDamaged(f"{where}{error}") from None
    if is_panic(error):
        raise IndexDamaged(f"{where}Tantivy panicked reading it ({error})") from None
    raise error


def _raise_write_error(error: BaseException, path: Path) -> NoReturn:
    """Leave with what a failed write of the index means: its OSError, or damage."""
    if isinstance(error, ValueError):
        code = _os_error(error)
        if code is None and no_space_left(path):
            # e.g. "The index writer was killed. It can happen if an indexing
            # worker encountered an Io error": the worker's error is not quoted.
            code = errno.ENOSPC
        if code is not None:
            raise OSError(code, f"{path}: {error}") from None
        raise error
    if is_panic(error):
        raise IndexDamaged(f"{path}: Tantivy panicked writing it ({error})") from None
    raise error


def _os_error(error: ValueError) -> int | None:
    """The errno Tantivy quotes in an I/O error ("... (os error 28)"), if any."""
    if "No space left on device" in str(error):
        return errno.ENOSPC
    found = _OS_ERROR.search(str(error))
    return int(found.group(1)) if found else None


def segment_files(path: Path) -> dict[str, list[Path]]:
    """Every file ``meta.json`` says each segment has, by segment id.

    Raises ``IndexDamaged`` when ``meta.json`` is missing or unreadable.
    """
    try:
        meta = json.loads((path / META).read_text())
        segments = meta["segments"]
        files = {}
        for segment in segments:
            name = str(segment["segment_id"]).replace("-", "")
            listed = [path / f"{name}.{ext}" for ext in SEGMENT_FILES]
            deletes = segment.get("deletes")
            if deletes:
                listed.append(path / f"{name}.{int(deletes['opstamp'])}.del")
            files[name] = listed
    except FileNotFoundError:
        raise IndexDamaged(f"{path}: {META} is missing") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise IndexDamaged(f"{path}: {META} cannot be read ({error})") from None
    return files


def missing_files(path: Path) -> list[str]:
    """The files ``meta.json`` lists that are missing or empty (a cheap look, no reads)."""
    problems = []
    for files in segment_files(path).values():
        for file in files:
            try:
                size = file.stat().st_size
            except FileNotFoundError:
                problems.append(f"{file.name} is missing")
                continue
            if size == 0:
                problems.append(f"{file.name} is empty")
    return problems


def checksum_problem(file: Path) -> str | None:
    """Why ``file`` fails the checksum in its Tantivy footer, or None if it passes.

    The file is read once, a block at a time: memory stays flat however large.
    """
    try:
        with open(file, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size < 8:
                return f"{file.name} is truncated ({size} bytes)"
            handle.seek(size - 8)
            length, magic = struct.unpack("<II", handle.read(8))
            if magic != _FOOTER_MAGIC or length > size - 8:
                return f"{file.name} has no readable footer"
            body = size - 8 - length
            handle.seek(body)
            try:
                expected = int(json.loads(handle.read(length))["crc"])
            except (ValueError, KeyError, TypeError):
                return f"{file.name} has no readable footer"
            handle.seek(0)
            crc, left = 0, body
            while left:
                block = handle.read(min(left, _CHECKSUM_BLOCK))
                if not block:
                    return f"{file.name} is truncated"
                crc = zlib.crc32(block, crc)
                left -= len(block)
    except FileNotFoundError:
        return f"{file.name} is missing"
    if crc != expected:
        return f"{file.name} fails its checksum"
    return None


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
        # Tantivy would take a folder without meta.json for a new, empty
        # index, and reads a segment's files only when a search needs them:
        # look at what meta.json lists first, so such a folder is rebuilt.
        problems = missing_files(path)
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
        try:
            index = tantivy.Index(SCHEMA, path=str(path), reuse=True)
            for analysis in ANALYSES:
                index.register_tokenizer(analyzer_name(analysis), build_analyzer(analysis))
            # We reload by hand after our own commits; the watcher picks up
            # commits made by other processes.
            index.config_reader(reload_policy="commit")
        except BaseException as error:  # ValueError: tantivy's word for a damaged folder
            _raise_read_error(error, path)
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
            try:
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
            except BaseException as error:
                _raise_write_error(error, self.path)
            self._writer = writer
        return self._writer

    def add(self, chunks: Sequence[IndexedChunk]) -> None:
        writer = self.writer()
        try:
            self._add(writer, chunks)
        except BaseException as error:
            _raise_write_error(error, self.path)

    @staticmethod
    def _add(writer: tantivy.IndexWriter, chunks: Sequence[IndexedChunk]) -> None:
        for chunk in chunks:
            analysis = analysis_key(chunk.language)
            document = tantivy.Document(
                chunk_id=chunk.chunk_id,
                report_id=chunk.report_id,
                document_id=chunk.document_id,
                date=date_number(chunk.date),
                source=chunk.source,
                kind=chunk.kind,
                workspace=chunk.workspace or NO_WORKSPACE,
                analysis=analysis,
            )
            title = cjk_bigrams(chunk.title)
            document.add_text(title_field(analysis), title)
            # The title in every chunk's text too: a chunk is found by what
            # its report is about, not only by its own words (SciFact:
            # nDCG@10 up with the title field kept as well).
            text = cjk_bigrams(chunk.text)
            document.add_text(text_field(analysis), f"{title}\n{text}" if title else text)
            for term in tag_terms(chunk.tags):
                document.add_text("tag", term)
            writer.add_document(document)

    def delete_report(self, report_id: int) -> None:
        writer = self.writer()
        try:
            writer.delete_documents_by_term("report_id", report_id)
        except BaseException as error:
            _raise_write_error(error, self.path)

    def commit(self) -> None:
        if self._writer is not None:
            try:
                self._writer.commit()
                self._index.reload()
            except BaseException as error:
                _raise_write_error(error, self.path)

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
        try:
            return self._index.searcher()
        except BaseException as error:
            _raise_read_error(error, self.path)

    def refresh(self) -> None:
        """Pick up commits made by another process now."""
        try:
            self._index.reload()
        except BaseException as error:
            _raise_read_error(error, self.path)

    def all_chunk_ids(self) -> list[str]:
        """Every chunk id the index holds, each read back from its stored document.

        For consistency checks, not hot paths: it reads every stored document.
        """
        searcher = self.searcher()
        try:
            total = searcher.num_docs
            if total == 0:
                return []
            result = searcher.search(tantivy.Query.all_query(), limit=total, count=False)
            return [_chunk_id(searcher, address) for _, address in result.hits]
        except BaseException as error:
            _raise_read_error(error, self.path)

    def document_count(self) -> int:
        """How many documents the index holds (as its segment list says: no reads)."""
        return self.num_docs

    @property
    def num_docs(self) -> int:
        searcher = self.searcher()
        try:
            return int(searcher.num_docs)
        except BaseException as error:
            _raise_read_error(error, self.path)

    def report_counts(self, report_ids: Sequence[int]) -> dict[int, int]:
        """How many documents each report has in the index, counted through its postings."""
        searcher = self.searcher()
        counts = {}
        try:
            for report_id in report_ids:
                query = tantivy.Query.term_query(SCHEMA, "report_id", report_id)
                result = searcher.search(query, limit=1, count=True)
                # ``count`` is there when asked for, but missing from tantivy's stubs.
                counts[report_id] = int(result.count or 0)  # type: ignore[attr-defined]
        except BaseException as error:
            _raise_read_error(error, self.path)
        return counts

    def verify(self) -> list[str]:
        """Read every file of the index back against its checksum; what is wrong, if anything."""
        problems = []
        for files in segment_files(self.path).values():
            for file in files:
                problem = checksum_problem(file)
                if problem is not None:
                    problems.append(problem)
        return problems

    def build_query(self, text: str, filters: SearchFilters) -> tantivy.Query | None:
        """Turn any user text into a query; None when it has no searchable term.

        The text is analysed every way that holds chunks (``analyses``), each
        asking its own fields: a chunk is in one analysis only, so it is
        ranked by the terms of its own language.
        """
        text_clauses = self._text_clauses(text, self.analyses())
        if not text_clauses:
            return None
        filter_clauses = self._filter_clauses(filters)
        if not filter_clauses:
            # A plain disjunction of term queries is what Tantivy ranks with
            # block-max WAND, skipping most postings: keep it plain (no
            # wrapper). Evidence is then dropped by the caller.
            return tantivy.Query.boolean_query(text_clauses)
        clauses: list[tuple[tantivy.Occur, tantivy.Query]] = [
            (tantivy.Occur.Must, tantivy.Query.boolean_query(text_clauses))
        ]
        for occur_query in filter_clauses:
            clauses.append((tantivy.Occur.Must, occur_query))
        return tantivy.Query.boolean_query(clauses)

    def analyses(self, searcher: tantivy.Searcher | None = None) -> list[str]:
        """The analyses that hold chunks (English alone in an empty index).

        A query asks only these: each other analysis would cost a term
        lookup per term and segment for nothing.
        """
        searcher = searcher or self.searcher()
        try:
            held = [
                analysis for analysis in ANALYSES if searcher.doc_freq("analysis", analysis) > 0
            ]
        except BaseException as error:
            _raise_read_error(error, self.path)
        return held or [DEFAULT_ANALYSIS]

    @staticmethod
    def _text_clauses(
        text: str, analyses: Sequence[str]
    ) -> list[tuple[tantivy.Occur, tantivy.Query]]:
        clauses: list[tuple[tantivy.Occur, tantivy.Query]] = []
        phrases = _PHRASE.findall(text)
        if not query_terms(text):
            return clauses  # nothing but stop words: no analysis has a term
        for analysis in analyses:
            text_name, title_name = text_field(analysis), title_field(analysis)
            for phrase in phrases:
                terms = phrase_terms(phrase, analysis)
                if len(terms) > 1:
                    for field, boost in ((text_name, 1.0), (title_name, 0.5)):
                        query = tantivy.Query.phrase_query(SCHEMA, field, list(terms))
                        clauses.append(
                            (tantivy.Occur.Should, tantivy.Query.boost_query(query, boost))
                        )
            # The title is indexed in every chunk's text too, so the text field
            # alone ranks. A term the query repeats weighs more (BM25's query-term
            # frequency): it is simply asked for again, which keeps the query a
            # plain disjunction of term queries.
            words = query_terms(text, analysis)
            for term in words:
                query = tantivy.Query.term_query(SCHEMA, text_name, term)
                clauses.append((tantivy.Occur.Should, query))
            for term in dict.fromkeys(words):
                title = tantivy.Query.term_query(SCHEMA, title_name, term)
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
        try:
            result = searcher.search(query, limit=limit, offset=offset, count=False)
        except BaseException as error:
            _raise_read_error(error)
        return [(float(score), address) for score, address in result.hits]

    @staticmethod
    def chunk_ids(addresses: Sequence[Any], *, searcher: tantivy.Searcher) -> list[str]:
        """The chunk ids stored for these hits (each costs a doc-store read)."""
        try:
            return [_chunk_id(searcher, address) for address in addresses]
        except BaseException as error:
            _raise_read_error(error)

    def snippets(
        self,
        query: tantivy.Query,
        texts: Sequence[str],
        *,
        max_chars: int = 200,
        searcher: tantivy.Searcher | None = None,
    ) -> list[str]:
        """Highlighted fragments (HTML-escaped, matches in ``<b>``) of ``texts``.

        A text is highlighted as analysed in its own field; which field that
        is, the text does not say, so each analysis that holds chunks is tried
        and the one that finds the most matches wins (English on a tie).
        """
        searcher = searcher or self.searcher()
        snippets = _Snippets(searcher, query, self.analyses(searcher), max_chars)
        try:
            return [snippets.of(text) for text in texts]
        except BaseException as error:
            _raise_read_error(error, self.path)


class _Snippets:
    """The snippets of one search: a generator per field (and width), made when first needed."""

    def __init__(
        self, searcher: tantivy.Searcher, query: tantivy.Query, analyses: list[str], max_chars: int
    ) -> None:
        self._searcher = searcher
        self._query = query
        self._fields = [text_field(analysis) for analysis in analyses]
        self._max_chars = max_chars
        self._generators: dict[tuple[str, int], tantivy.SnippetGenerator] = {}

    def _generator(self, field: str, chars: int) -> tantivy.SnippetGenerator:
        generator = self._generators.get((field, chars))
        if generator is None:
            generator = tantivy.SnippetGenerator.create(self._searcher, self._query, SCHEMA, field)
            generator.set_max_num_chars(chars)
            self._generators[field, chars] = generator
        return generator

    def of(self, text: str) -> str:
        indexed, origins = cjk_bigrams_with_offsets(text)
        # A CJK character is indexed about three times (in two bigrams, and a space).
        chars = self._max_chars if origins is None else 3 * self._max_chars
        best: tantivy.Snippet | None = None
        most = 0
        for field in self._fields:
            snippet = self._generator(field, chars).snippet_from_doc(
                tantivy.Document(**{field: indexed})
            )
            found = len(snippet.highlighted())
            if found > most:
                best, most = snippet, found
        if best is None:
            return _escape(text[: self._max_chars])
        if origins is None:
            return best.to_html()
        return _cjk_snippet_html(best, text, indexed, origins, self._max_chars)


def _cjk_snippet_html(
    snippet: tantivy.Snippet, text: str, indexed: str, origins: list[int], max_chars: int
) -> str:
    """A snippet found in the bigram form of ``text``, shown in ``text`` itself.

    Tantivy's ranges are byte offsets into the indexed form; ``origins``
    maps each of its characters to the character of ``text`` it came from
    (-1 for a space put between bigrams).
    """
    encoded = indexed.encode()

    def character(offset: int) -> int:
        return len(encoded[:offset].decode(errors="ignore"))

    def original_span(start: int, end: int) -> tuple[int, int] | None:
        placed = [origins[index] for index in range(character(start), character(end))]
        placed = [origin for origin in placed if origin >= 0]
        return (min(placed), max(placed) + 1) if placed else None

    fragment = snippet.fragment_range()
    span = original_span(fragment.start, fragment.end)
    if span is None:
        return ""
    begin, stop = span
    # Bigrams take three times the room of their text: widen the fragment
    # back to about ``max_chars`` of the text around it.
    stop = min(len(text), stop + max(0, max_chars - (stop - begin)) // 2)
    begin = max(0, min(begin, stop - max_chars))
    marks: list[tuple[int, int]] = []
    for highlighted in snippet.highlighted():
        found = original_span(fragment.start + highlighted.start, fragment.start + highlighted.end)
        if found is None:
            continue
        if marks and found[0] <= marks[-1][1]:  # overlapping bigrams: one mark
            marks[-1] = (marks[-1][0], max(marks[-1][1], found[1]))
        else:
            marks.append(found)
    pieces, at = [], begin
    for mark_start, mark_end in marks:
        pieces.append(_escape(text[at:mark_start]))
        pieces.append(f"<b>{_escape(text[mark_start:mark_end])}</b>")
        at = mark_end
    pieces.append(_escape(text[at:stop]))
    return "".join(pieces)


def _chunk_id(searcher: tantivy.Searcher, address: Any) -> str:
    return str(searcher.doc(address).get_first("chunk_id"))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
