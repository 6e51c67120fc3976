"""Shared fixtures: a store in a temporary folder and small sources to ingest."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from researchstore import Store

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_SOURCE = ROOT / "fixtures" / "source"
SHARED = ROOT.parent / "shared"

PARAGRAPHS = [
    "Foragers returned to the hive at dusk carrying pollen from the lime trees.",
    "Varroa mite counts rose sharply after the second brood cycle in June.",
    "The colony was treated with oxalic acid once the brood had capped.",
    "Students logged hive weight every morning on a shared spreadsheet.",
    "Dissolved oxygen in the river fell below five milligrams per litre in August.",
    "Nitrate runoff from the fields peaked after the first autumn storm.",
]


def write_report(
    root: Path,
    key: str,
    *,
    title: str,
    date: str,
    tags: dict[str, str],
    files: dict[str, str],
) -> Path:
    """A report directory with report.json and the given document files."""
    folder = root / key
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps({"title": title, "date": date, "tags": tags}))
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def long_text(paragraphs: int, *, seed: int = 0) -> str:
    """Paragraphs of distinct sentences, enough for several chunks."""
    out = []
    for number in range(paragraphs):
        sentences = [
            f"{PARAGRAPHS[(number + seed + k) % len(PARAGRAPHS)]} Note {number}.{k}."
            for k in range(6)
        ]
        out.append(" ".join(sentences))
    return "\n\n".join(out)


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
