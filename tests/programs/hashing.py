"""A deterministic stand-in for an embedding model, for tests and their child programs.

Imported by ``helpers`` (as ``HashingEmbedder``) and by the programs here,
which run with this folder first on their path.
"""

from __future__ import annotations

import re
import time
import zlib
from typing import Any

WORD = re.compile(r"\w+")


class HashingEmbedder:
    """A deterministic stand-in for a model: a hashed bag of words (``zlib.crc32``).

    Texts that share words are near; texts that share none are orthogonal.
    Meets ``researchstore.meaning.embedding.Embedder`` with numpy alone, so nothing
    loads torch. ``calls`` counts the texts it was given, per call;
    ``seconds_per_call`` makes each call take that long, as a real model's do;
    a call given a text holding the word ``fails_on`` raises, as a model can.
    """

    folder = None

    def __init__(
        self,
        *,
        dimension: int = 48,
        model_id: str = "hashing-words@1",
        seconds_per_call: float = 0.0,
        fails_on: str | None = None,
    ) -> None:
        self.dimension = dimension
        self.model_id = model_id
        self.seconds_per_call = seconds_per_call
        self.fails_on = fails_on
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
        if self.seconds_per_call:
            time.sleep(self.seconds_per_call)
        if self.fails_on and any(self.fails_on in WORD.findall(text) for text in texts):
            raise RuntimeError(f"the model cannot take {self.fails_on!r}")
        rows = [self.vector(text) for text in texts]
        return np.stack(rows) if rows else np.zeros((0, self.dimension), dtype=np.float32)
