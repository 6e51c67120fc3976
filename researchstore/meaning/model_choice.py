"""Which model embeds a store's chunks and its queries.

In this order:

1. the model the user named: ``RESEARCHSTORE_MODEL`` (a name) or
   ``RESEARCHSTORE_MODEL_FOLDER`` (a folder), or ``researchstore embed --model``;
2. the store's own, where its recorded id is a named model's
   (``multilingual-e5-small@…``): a store file picks only among the named
   models installed here, by name, never a folder (a folder can hold
   pickles, that is code, and a store may come from anyone); the model
   loaded must still match the recorded id and dimension;
3. for a store with no model yet, the default for its languages:
   multilingual-e5-small where it is installed and most documents whose
   language is known are not in English, else all-MiniLM-L6-v2 (else
   whichever is installed). A store's model changes only when its vectors
   are dropped (``researchstore embed --drop``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from researchstore.meaning.embedding import (
    MINILM,
    MULTILINGUAL,
    ModelSpec,
    chosen_model,
    model_installed,
    packaged_name,
)
from researchstore.storage.vectors import StoreModel, store_model


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """A model to load, and why, when the store's languages chose it (one line for people)."""

    spec: ModelSpec
    note: str | None = None


def documents_by_language(conn: sqlite3.Connection) -> dict[str, int]:
    """Documents by the primary subtag of their language (``nb-NO`` is ``nb``), known ones only."""
    counts: dict[str, int] = {}
    for language, count in conn.execute(
        "SELECT lower(language), count(*) FROM documents "
        "WHERE language IS NOT NULL AND language != '' GROUP BY 1"
    ):
        primary = str(language).replace("_", "-").split("-", 1)[0]
        counts[primary] = counts.get(primary, 0) + int(count)
    return counts


def mostly_not_english(counts: dict[str, int]) -> bool:
    """Whether more than half the documents of a known language are not in English."""
    english = counts.get("en", 0)
    return sum(counts.values()) - english > english


def model_for_chunks(conn: sqlite3.Connection) -> ModelChoice:
    """The model that embeds the store's chunks (see the module's doc)."""
    chosen = chosen_model()
    if chosen is not None:
        return ModelChoice(chosen)
    recorded = store_model(conn)
    if recorded is not None:
        return ModelChoice(_recorded_spec(recorded))
    counts = documents_by_language(conn)
    if not mostly_not_english(counts):
        return ModelChoice(ModelSpec())
    english = counts.get("en", 0)
    languages = ", ".join(
        f"{language} {count}"
        for language, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:4]
    )
    why = (
        f"{sum(counts.values()) - english} of {sum(counts.values())} documents are not in "
        f"English ({languages})"
    )
    if model_installed(MULTILINGUAL):
        return ModelChoice(
            ModelSpec(name=MULTILINGUAL),
            f"{why}: embedding with {MULTILINGUAL} (the model is the store's until "
            f"researchstore embed --drop; --model {MINILM} for the English one)",
        )
    return ModelChoice(
        ModelSpec(),
        f"{why}, and {MINILM} reads English: pip install 'researchstore[multilingual]' "
        f"and embed again with --drop --model {MULTILINGUAL}",
    )


def model_for_queries(recorded: StoreModel) -> ModelSpec:
    """The model that embeds queries for vectors of ``recorded`` (see the module's doc)."""
    return chosen_model() or _recorded_spec(recorded)


def query_model_installed(recorded: StoreModel) -> bool:
    """Whether a model for ``recorded``'s queries is here (named by the user, or installed)."""
    spec = model_for_queries(recorded)
    if spec.folder is not None:
        return True
    return spec.name is not None and model_installed(spec.name)


def _recorded_spec(recorded: StoreModel) -> ModelSpec:
    """The named model the store records, else the default (which will be refused as
    another model unless it is the store's: the user names a folder model)."""
    return ModelSpec(name=packaged_name(recorded.model_id))
