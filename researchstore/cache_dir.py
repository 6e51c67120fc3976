"""The folder for what researchstore keeps outside a store: caches it can always rebuild."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Where the caches go: read-only stores' indexes, the language model unpacked.

    ``RESEARCHSTORE_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/researchstore``,
    else ``~/.cache/researchstore``.
    """
    chosen = os.environ.get("RESEARCHSTORE_CACHE_DIR")
    if chosen:
        return Path(chosen)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "researchstore"
