"""A deterministic stand-in for an embedding model, for tests and their child programs.

Imported by ``helpers`` (as ``HashingEmbedder``) and by the programs here,
which run with this folder first on their path.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

WORD = re.compile(r"\w+")


class HashingEmbedder:
    """A deterministic stand-in for a model: a hashed bag of words (``zlib.crc32``).

    Texts that share words are near; texts that share none are orthogonal.
    Meets ``researchstore.embedding.Embedder`` with numpy alone, so nothing
    loads torch. ``calls`` counts the texts it was given, per call.
    """

    folder = None

    def __init__(self, *, dimension: int = 48, model_id: str = "hashing-words@1") -> None:
        self.dimension = dimension
        self.model_id = model_id
        self.calls: list[int] = []

    def vector(self, text: str) -> Any:
        import numpy as np

        row = np.zeros(self.dimension, dtype=np.float32)
        for word in WORD.findall(text.lower()):
            row[zlib.crc32(word.encode()) % self.dimension] += 1.0
        return row

    def embed(self, texts: Any, *, batch_size: int = 64) -> Any:
        import numpy as np

        self.calls.append(len(texts))
        rows = [self.vector(text) for text in texts]
        return np.stack(rows) if rows else np.zeros((0, self.dimension), dtype=np.float32)
