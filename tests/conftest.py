"""Shared fixtures: a store in a temporary folder, small sources to ingest, an HTTPS site.

The helpers these fixtures are built from live in ``helpers.py``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import FIXTURE_SOURCE, Site, long_text, serve_site, write_report

from researchstore import Store

# Ingest and re-ingest embed in the same run when the semantic extra is
# installed: the suite's runs (child processes included) embed only where a
# test asks for it, so that no test waits for a model it does not need.
os.environ["RESEARCHSTORE_EMBED"] = "off"
# What researchstore caches outside a store (the language model unpacked,
# read-only stores' indexes) goes to one folder per session, never the home
# folder of whoever runs the tests.
if "RESEARCHSTORE_CACHE_DIR" not in os.environ:
    _CACHE = tempfile.mkdtemp(prefix="researchstore-tests-cache-")
    os.environ["RESEARCHSTORE_CACHE_DIR"] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)


@pytest.fixture
def source_dir(tmp_path: Path) -> Path:
    """Two report directories in nested folders and one single-file report."""
    root = tmp_path / "source"
    write_report(
        root,
        "field/2026/bees",
        title="Bee colony survey",
        date="2026-03-14",
        tags={"audience": "students", "season": "spring"},
        files={"notes.txt": long_text(30)},
    )
    write_report(
        root,
        "field/2026/river",
        title="River water quality",
        date="2026-09-02",
        tags={"audience": "public", "season": "autumn"},
        files={"summary.txt": long_text(12, seed=4)},
    )
    (root / "misc").mkdir(parents=True)
    (root / "misc" / "memo.txt").write_text("Memo\n\nThe lecture hall moves to building C.\n")
    return root


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "research.db", progress=False) as opened:
        yield opened


@pytest.fixture
def filled_store(store: Store, source_dir: Path) -> Store:
    store.ingest(source_dir, name="field")
    return store


@pytest.fixture(scope="session")
def fixture_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """The bundled fixtures/source, ingested once for the whole session."""
    folder = tmp_path_factory.mktemp("fixture-store")
    source = folder / "source"
    shutil.copytree(FIXTURE_SOURCE, source)
    with Store(folder / "research.db", progress=False) as opened:
        opened.ingest(source, name="fixtures")
        yield opened


@pytest.fixture(scope="session")
def site() -> Iterator[Site]:
    """The HTTPS test site on loopback (``helpers.serve_site``), one for the session."""
    with serve_site() as running:
        yield running
