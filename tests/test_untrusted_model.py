"""A store file never chooses code to run: no model is loaded from a folder it names.

A model folder can hold pickles, that is code, and the store file may come
from anyone. The store records its model's id and dimension (and, as a note,
the folder it was made with); a model comes only from what the user
installed or named (``RESEARCHSTORE_MODEL_FOLDER``, ``embed --model``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURE_SOURCE, HashingEmbedder

from researchstore import Store
from researchstore.errors import InvalidInput


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """A store with vectors whose meta names a folder of the sender's choosing."""
    db, folder = tmp_path / "r.db", tmp_path / "sender-model"
    folder.mkdir()
    (folder / "modules.json").write_text("[]")
    (folder / "config.json").write_text("{}")
    with Store(db, progress=False, embedder=HashingEmbedder()) as store:
        store.ingest(FIXTURE_SOURCE, name="fixtures")
        store.embed()
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('vector_model_folder', ?)",
            (str(folder),),
        )
    return db, folder


def _recording_loader(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record the folder each model load is asked for, and load the hashing model."""
    asked: list[Any] = []

    def load(folder: Any = None, **options: Any) -> HashingEmbedder:
        asked.append(folder)
        return HashingEmbedder()

    monkeypatch.setattr("researchstore.meaning.embedding.load_embedder", load)
    monkeypatch.setattr("researchstore.meaning.embedding.semantic_installed", lambda: True)
    monkeypatch.delenv("RESEARCHSTORE_MODEL_FOLDER", raising=False)
    return asked


@pytest.mark.slow
def test_searching_never_loads_the_folder_the_file_names(
    planted: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, folder = planted
    asked = _recording_loader(monkeypatch)
    with Store(db, progress=False) as store:
        assert store.search("varroa mite", mode="semantic")
    assert asked == [None]  # the installed default, never ``folder``


@pytest.mark.slow
def test_embedding_never_loads_the_folder_the_file_names(
    planted: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, folder = planted
    asked = _recording_loader(monkeypatch)
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "notes.txt").write_text("Moth survey\n\nMoths came to the lamp at dusk.\n")
    with Store(db, progress=False) as store:
        store.ingest(tmp_path / "new", name="new")
        assert store.embed().embedded > 0
    assert asked == [None]


def test_a_model_named_by_the_user_is_loaded_and_must_match(
    planted: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, _ = planted
    asked = _recording_loader(monkeypatch)
    mine = tmp_path / "my-model"
    monkeypatch.setenv("RESEARCHSTORE_MODEL_FOLDER", str(mine))
    with Store(db, progress=False) as store:
        assert store.search("varroa mite", mode="semantic")
    assert asked == [mine]

    def other(folder: Any = None, **options: Any) -> HashingEmbedder:
        return HashingEmbedder(model_id="another@2")

    monkeypatch.setattr("researchstore.meaning.embedding.load_embedder", other)
    with Store(db, progress=False) as store, pytest.raises(InvalidInput) as raised:
        store.search("varroa mite", mode="semantic")
    assert "RESEARCHSTORE_MODEL_FOLDER" in raised.value.message
