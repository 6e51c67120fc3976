"""The vector index: candidate neighbours of a query vector, derived from SQLite.

The only module that imports ``usearch``. An HNSW graph over the sign bits
of the vectors in ``vectors`` (Hamming distance), keyed by chunk rowid, in a
folder beside the store (``STORE.db.vectors``) that ``sync.IndexSync``
keeps in step with SQLite exactly as it does the word index: through
``index_pending``, with a sidecar, rebuilt when missing, stale or damaged.
It proposes candidates; search ranks them by their exact cosine, computed
from the int8 vectors SQLite holds (``semantic.py``).

Why usearch: its HNSW graph answers a query over 100,000 vectors in a
fraction of a millisecond and opens by memory-mapping its file; an exact
scan of 100,000 int8 vectors costs about 10 ms a query on this project's
2-core machine, and sqlite-vec cannot be used (this Python's sqlite3 loads
no extensions). Why sign bits: a graph of int8 vectors costs 533 bytes a
chunk on top of SQLite's 410; one of bits costs 196, and re-ranking 300
bit-neighbours by their int8 cosine keeps 97-98% of the exact top 10 on
SciFact (measured by ``bench/bench_semantic.py`` and a recall check).

The folder holds a generation of two files, the graph
(``vectors-<gen>.usearch``) and each key's report (``reports-<gen>.npy``),
named by ``manifest.json``, which a commit replaces last: a crash leaves the
previous generation whole. Readers search a memory-mapped view of the last
commit; writes go to a copy loaded in memory and are seen after ``commit``.

usearch trusts the graph files it reads: neighbour ids out of range in one
make a search read outside its memory, and the process dies (SIGSEGV). So
a graph is handed to usearch only if this machine built it
(``built_here``): each commit records the graph it wrote, and a graph from
anywhere else (written back from a store file made on another machine, or
altered since) is refused as ``IndexDamaged``, and rebuilt from the
vectors in SQLite. Its bytes are never read, not even to check them.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

import numpy as np
import numpy.typing as npt
from usearch.index import Index

from researchstore.storage import built_here
from researchstore.storage.db import read_meta_number
from researchstore.storage.derived import IndexDamaged
from researchstore.storage.vectors import DIMENSION_KEY, report_vectors

MANIFEST = "manifest.json"
#: Graph degree and search breadth: measured on SciFact's chunks (bench/bench_semantic.py).
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 256

#: What the index is fed: (chunk rowid, report_id, int8 vector bytes).
VectorRow = tuple[int, int, bytes]


class VectorIndex:
    """One vector index folder: open, write, search."""

    name: ClassVar[str] = "vectors"
    label: ClassVar[str] = "vector index"
    suffix: ClassVar[str] = ".vectors"
    schema_version: ClassVar[int] = 2
    fed_on_write: ClassVar[bool] = False

    def __init__(
        self, path: Path, generation: int, dimension: int, *, graph_sha256: str | None = None
    ) -> None:
        self.path = path
        self.dimension = dimension
        self._generation = generation
        #: The digest the manifest names for the generation's graph (where to
        #: look it up in ``built_here``, not a proof of anything).
        self._graph_sha256 = graph_sha256
        self._view: Index = _empty(dimension) if generation == 0 else self._restore(generation)
        #: Pending writes: a loaded copy of the graph and its key ↔ report maps.
        self._writer: Index | None = None
        self._reports: _KeyMap | None = None
        self._dirty = False

    # -- opening ---------------------------------------------------------

    @classmethod
    def open(cls, path: Path) -> VectorIndex:
        manifest = _read_manifest(path)
        return cls(
            path,
            manifest["generation"],
            manifest["dimension"],
            graph_sha256=manifest["graph_sha256"],
        )

    @classmethod
    def create(cls, path: Path) -> VectorIndex:
        path.mkdir(parents=True, exist_ok=False)
        _write_manifest(path, generation=0, dimension=0, count=0)
        return cls(path, 0, 0)

    @classmethod
    def holds_data(cls, path: Path) -> bool:
        if not path.is_dir():
            return False
        try:
            return bool(_read_manifest(path)["count"])
        except IndexDamaged:
            return any(path.iterdir())

    @classmethod
    def read(cls, conn: sqlite3.Connection, report_id: int | None = None) -> Iterator[VectorRow]:
        """Each vector of the store's dimension; one of another size or type (a file
        altered elsewhere) is left out, its chunk found by its words only (``check``
        counts it). With no dimension that is a number, none: searching by meaning
        says why (``vectors.store_model``)."""
        size = read_meta_number(conn, DIMENSION_KEY)
        for row in report_vectors(conn, report_id):
            if isinstance(row[2], bytes) and len(row[2]) == size:
                yield row

    @classmethod
    def expected_count(cls, conn: sqlite3.Connection) -> int:
        return int(conn.execute("SELECT count(*) FROM vectors").fetchone()[0])

    def _restore(self, generation: int) -> Index:
        file = _built_graph(self.path, generation, self._graph_sha256)
        try:
            index = Index.restore(str(file), view=True)
        except (ValueError, RuntimeError, OSError) as error:
            raise IndexDamaged(f"{file}: {error}") from None
        if index is None:
            raise IndexDamaged(f"{file} is not a vector index")
        index.expansion_search = EXPANSION_SEARCH  # type: ignore[misc]
        return index

    # -- writing ---------------------------------------------------------

    def _writable(self) -> tuple[Index, _KeyMap]:
        if self._writer is None or self._reports is None:
            if self._generation == 0:
                self._writer, self._reports = None, _KeyMap()
            else:
                graph = _built_graph(self.path, self._generation, self._graph_sha256)
                try:
                    loaded = Index.restore(str(graph))
                    keys = _load_reports(self.path / _reports_name(self._generation))
                except (ValueError, RuntimeError, OSError) as error:
                    raise IndexDamaged(f"{self.path}: {error}") from None
                if loaded is None:
                    raise IndexDamaged(f"{self.path} holds no vector index")
                self._writer = loaded
                self._reports = _KeyMap(keys[:, 0].tolist(), keys[:, 1].tolist())
        if self._writer is None:
            if not self.dimension:
                raise IndexDamaged(f"{self.path}: the first vectors have not come yet")
            self._writer = _empty(self.dimension)
        return self._writer, self._reports

    def add(self, rows: Sequence[VectorRow]) -> None:
        if not rows:
            return
        if not self.dimension:
            self.dimension = len(rows[0][2])
        for _, _, blob in rows:
            if len(blob) != self.dimension:
                raise ValueError(f"a vector of {len(blob)} bytes in an index of {self.dimension}")
        writer, reports = self._writable()
        keys = np.fromiter((row[0] for row in rows), dtype=np.uint64, count=len(rows))
        held = writer.contains(keys)
        if np.any(held):
            writer.remove(keys[held])
        matrix = np.frombuffer(b"".join(row[2] for row in rows), dtype=np.int8)
        writer.add(keys, sign_bits(matrix.reshape(len(rows), self.dimension)), threads=2)
        for key, report, _ in rows:
            reports.put(key, report)
        self._dirty = True

    def delete_report(self, report_id: int) -> None:
        if self._generation == 0 and self._writer is None:
            return  # nothing held yet
        writer, reports = self._writable()
        keys = reports.pop_report(report_id)
        if keys:
            writer.remove(np.array(keys, dtype=np.uint64))
            self._dirty = True

    def commit(self) -> None:
        """Write a new generation, then name it in the manifest (the commit point)."""
        if not self._dirty or self._writer is None or self._reports is None:
            return
        generation = self._generation + 1
        graph = self.path / _graph_name(generation)
        keys = self.path / _reports_name(generation)
        try:
            # Each file is made new, never written through a link: a folder
            # from elsewhere may hold one by any name this index writes.
            graph.unlink(missing_ok=True)
            self._writer.save(str(graph))
            pairs = self._reports.pairs()
            with _new_file(keys) as handle:
                np.save(handle, pairs)
                handle.flush()
                os.fsync(handle.fileno())
            _fsync(graph)
            graph_sha256 = built_here.record(graph)
            _write_manifest(
                self.path,
                generation=generation,
                dimension=self.dimension,
                count=len(self._writer),
                graph_sha256=graph_sha256,
            )
        except (ValueError, RuntimeError) as error:
            raise IndexDamaged(f"{self.path}: {error}") from error
        previous = self._generation
        built_here.forget(self._graph_sha256)
        self._generation = generation
        self._graph_sha256 = graph_sha256
        self._view = self._restore(generation)
        self._dirty = False
        for old in (_graph_name(previous), _reports_name(previous)):
            (self.path / old).unlink(missing_ok=True)

    def close_writer(self) -> None:
        """Drop what was not committed, and the loaded copy."""
        self._writer = None
        self._reports = None
        self._dirty = False

    def refresh(self) -> None:
        """Pick up a generation another process committed."""
        manifest = _read_manifest(self.path)
        if manifest["generation"] != self._generation:
            self._generation = manifest["generation"]
            self.dimension = manifest["dimension"]
            self._graph_sha256 = manifest["graph_sha256"]
            self._view = (
                _empty(self.dimension) if self._generation == 0 else self._restore(self._generation)
            )

    # -- reading ---------------------------------------------------------

    def search(self, vector: npt.NDArray[np.float32], count: int) -> list[int]:
        """Up to ``count`` chunk rowids whose vectors' signs are nearest the query's."""
        view = self._view
        if len(view) == 0 or count <= 0:
            return []
        try:
            matches = view.search(sign_bits(vector[None, :])[0], min(count, len(view)), threads=1)
        except (ValueError, RuntimeError) as error:
            raise IndexDamaged(f"{self.path}: {error}") from None
        return [int(key) for key in matches.keys.tolist()]

    def __len__(self) -> int:
        return len(self._view)

    def document_count(self) -> int:
        return len(self._view)

    def all_chunk_ids(self) -> list[str]:
        """Every key held (chunk rowids, as text), for checks."""
        if self._generation == 0:
            return []
        try:
            keys = _load_reports(self.path / _reports_name(self._generation))
        except (ValueError, OSError) as error:
            raise IndexDamaged(f"{self.path}: {error}") from None
        return [str(key) for key in keys[:, 0].tolist()]

    rewritten_files: ClassVar[frozenset[str]] = frozenset({MANIFEST})
    file_names: ClassVar[re.Pattern[str]] = re.compile(
        rf"{re.escape(MANIFEST)}|vectors-[0-9]{{1,20}}\.usearch|reports-[0-9]{{1,20}}\.npy"
    )

    def committed_files(self) -> list[Path]:
        """The manifest and the generation it names."""
        files = [self.path / MANIFEST]
        if self._generation:
            files += [
                self.path / _graph_name(self._generation),
                self.path / _reports_name(self._generation),
            ]
        return files

    def verify(self) -> list[str]:
        """Read the generation back: both files there, the graph built here, and the
        same keys in each."""
        try:
            manifest = _read_manifest(self.path)
        except IndexDamaged as error:
            return [error.message]
        generation = manifest["generation"]
        if generation == 0:
            return []
        problems = []
        try:
            file = _built_graph(self.path, generation, manifest["graph_sha256"])
            graph = Index.restore(str(file), view=True)
            keys = _load_reports(self.path / _reports_name(generation))
        except IndexDamaged as error:
            return [error.message]
        except (ValueError, RuntimeError, OSError) as error:
            return [f"{self.path}: {error}"]
        if graph is None:
            return [f"{self.path / _graph_name(generation)} is not a vector index"]
        if len(graph) != manifest["count"] or len(keys) != manifest["count"]:
            problems.append(
                f"{self.path}: the manifest says {manifest['count']} vectors, the graph holds "
                f"{len(graph)} and the key list {len(keys)}"
            )
        elif len(keys) and not bool(np.all(graph.contains(keys[:, 0].astype(np.uint64)))):
            problems.append(f"{self.path}: keys listed are missing from the graph")
        return problems


class _KeyMap:
    """Which report each key belongs to, and each report's keys."""

    def __init__(self, keys: Sequence[int] = (), reports: Sequence[int] = ()) -> None:
        self._report_of: dict[int, int] = dict(zip(keys, reports, strict=True))
        self._keys_of: dict[int, set[int]] = {}
        for key, report in self._report_of.items():
            self._keys_of.setdefault(report, set()).add(key)

    def put(self, key: int, report: int) -> None:
        previous = self._report_of.get(key)
        if previous is not None and previous != report:
            self._keys_of[previous].discard(key)
        self._report_of[key] = report
        self._keys_of.setdefault(report, set()).add(key)

    def pop_report(self, report: int) -> list[int]:
        keys = sorted(self._keys_of.pop(report, ()))
        for key in keys:
            del self._report_of[key]
        return keys

    def pairs(self) -> npt.NDArray[np.int64]:
        return np.array(list(self._report_of.items()), dtype=np.int64).reshape(-1, 2)


def sign_bits(matrix: npt.NDArray[Any]) -> npt.NDArray[np.uint8]:
    """Each row's signs, packed eight to a byte (the graph's vectors)."""
    return np.packbits(matrix > 0, axis=1)


def _empty(dimension: int) -> Index:
    index = Index(
        ndim=max(dimension, 8),
        metric="hamming",
        dtype="b1",
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
        expansion_search=EXPANSION_SEARCH,
    )
    return index


def _built_graph(folder: Path, generation: int, named: str | None) -> Path:
    """The graph file of ``generation``, once it is known to be built here
    (``named``: the digest its manifest gives it)."""
    file = folder / _graph_name(generation)
    try:
        known = built_here.is_built_here(file, named)
    except OSError as error:
        raise IndexDamaged(f"{file}: {error}") from None
    if not known:
        raise IndexDamaged(
            f"{file} was not built on this machine (or was changed since), so it is not "
            "read: the graph is rebuilt from the store's vectors"
        )
    return file


def _load_reports(file: Path) -> npt.NDArray[np.int64]:
    """Each key's report, as ``(key, report)`` rows; ValueError if the file holds no such rows."""
    try:
        keys = np.load(file, allow_pickle=False)
    except EOFError:
        raise ValueError(f"{file.name} is empty") from None
    if not isinstance(keys, np.ndarray) or keys.dtype != np.int64 or keys.shape[1:] != (2,):
        raise ValueError(f"{file.name} holds no list of keys and their reports")
    return keys


def _graph_name(generation: int) -> str:
    return f"vectors-{generation}.usearch"


def _reports_name(generation: int) -> str:
    return f"reports-{generation}.npy"


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads((path / MANIFEST).read_text())
        manifest: dict[str, Any] = {
            key: int(data[key]) for key in ("generation", "dimension", "count")
        }
        digest = data.get("graph_sha256")
        manifest["graph_sha256"] = digest if isinstance(digest, str) else None
    except FileNotFoundError:
        raise IndexDamaged(f"{path}: {MANIFEST} is missing") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise IndexDamaged(f"{path}: {MANIFEST} cannot be read ({error})") from None
    if manifest["generation"]:
        for name in (_graph_name(manifest["generation"]), _reports_name(manifest["generation"])):
            if not (path / name).is_file():
                raise IndexDamaged(f"{path}: {name} is missing")
    return manifest


def _write_manifest(
    path: Path, *, generation: int, dimension: int, count: int, graph_sha256: str | None = None
) -> None:
    temporary = path / (MANIFEST + ".tmp")
    manifest = {
        "generation": generation,
        "dimension": dimension,
        "count": count,
        "graph_sha256": graph_sha256,
    }
    with _new_file(temporary) as handle:
        handle.write(json.dumps(manifest).encode())
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path / MANIFEST)
    _fsync(path)


def _new_file(path: Path) -> BinaryIO:
    """``path`` made anew for writing: whatever had its name (a link too) is removed,
    and the file is created, never opened through a link."""
    path.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.fdopen(os.open(path, flags, 0o644), "wb")


def _fsync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
