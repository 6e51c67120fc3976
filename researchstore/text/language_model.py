"""py3langid's model, restricted to ``DETECTED_LANGUAGES``, and a cache of it.

py3langid ships its model LZMA-compressed (4.5 MB, 68 MB unpacked). Loading
it takes about a second: unpacking, a temporary file and a copy of every
array. Every process that detects a language pays that once, and an ingest
has a worker process per core. So the first process to load it writes the
part detection uses (the languages of ``DETECTED_LANGUAGES``: 46 MB) to one
uncompressed file in the cache directory (``writable_cache_root()``), and later ones
map that file, which takes a few milliseconds.

The cache is named by the SHA-256 of the package's model file and by the
languages, so a new py3langid model or another language list gets its own.
It is written to a temporary file and renamed into place, and it carries the
SHA-256 of its arrays, checked at every load: a file that is short, changed
or unreadable is not used (the package's model is loaded and the cache
written again). Where the cache directory cannot be written, every process
loads the package's model, as before: slower, same answers.

This is the only module that imports ``py3langid``, and only when a text is
first detected, so a process that only reads the store never pays for it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import struct
import tempfile
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from researchstore.storage.cache_dir import writable_cache_root

#: The first bytes of a cache file; a new layout gets a new number.
MAGIC = b"researchstore py3langid model 1\n"
_LENGTH = struct.Struct("<Q")
_ALIGN = 64
#: The arrays kept, as py3langid 0.4 names them: per-feature log-probabilities
#: per language, per-language priors, and the tokenizer's automaton.
_ARRAYS = ("ptc", "pc", "nextmove", "nextmove_row", "out_feat")


def load_identifier(languages: Sequence[str]) -> Any:
    """py3langid's identifier over ``languages``, with normalised probabilities.

    From the cache when it holds a sound copy; else from the package's
    model, writing the cache for the next process.
    """
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    model = Path(MODEL_DIR, MODEL_FILE)
    try:
        source: str | None = _file_digest(model)
    except OSError:
        source = None
    path = None
    if source is not None:
        try:
            path = cache_path(source, languages)
        except OSError:  # no cache directory can be written: load the package's model
            path = None
    if path is not None and source is not None:
        arrays = read_cache(path, source=source, languages=languages)
        if arrays is not None:
            return _identifier_of(LanguageIdentifier, arrays)
    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(languages))
    if path is not None and source is not None:
        write_cache(path, _arrays_of(identifier), source=source, languages=languages)
    return identifier


def cache_path(source: str, languages: Sequence[str]) -> Path:
    """Where the cache of the model whose file has digest ``source`` is kept (in
    ``writable_cache_root()``, whose ``OSError`` says that no cache can be kept)."""
    chosen = hashlib.sha256(" ".join(languages).encode()).hexdigest()[:8]
    return writable_cache_root() / f"py3langid-{source[:16]}-{chosen}.bin"


def read_cache(path: Path, *, source: str, languages: Sequence[str]) -> dict[str, Any] | None:
    """The arrays of a sound cache file at ``path`` made for this model; None otherwise."""
    import numpy as np

    try:
        with open(path, "rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # missing, unreadable, or empty
        return None
    try:
        if mapped[: len(MAGIC)] != MAGIC:
            return None
        at = len(MAGIC)
        (length,) = _LENGTH.unpack_from(mapped, at)
        at += _LENGTH.size
        header = json.loads(mapped[at : at + length])
        data = at + length
        if (
            header.get("source") != source
            or header.get("languages") != list(languages)
            or hashlib.sha256(memoryview(mapped)[data:]).hexdigest() != header.get("sha256")
        ):
            return None
        arrays: dict[str, Any] = {"classes": header["classes"]}
        for name in _ARRAYS:
            dtype, shape, offset = header["arrays"][name]
            count = int(np.prod(shape))
            arrays[name] = np.frombuffer(
                mapped, dtype=np.dtype(dtype), count=count, offset=data + offset
            ).reshape(shape)
    except (ValueError, KeyError, TypeError, struct.error):
        return None
    # The arrays keep the map open; it closes with the last of them.
    return arrays


def write_cache(
    path: Path, arrays: dict[str, Any], *, source: str, languages: Sequence[str]
) -> bool:
    """Write the cache file at ``path``, whole or not at all; False when it cannot be written."""
    import numpy as np

    layout: dict[str, Any] = {}
    pieces: list[bytes] = []
    offset = 0
    digest = hashlib.sha256()
    for name in _ARRAYS:
        array = np.ascontiguousarray(arrays[name])
        padding = -offset % _ALIGN
        if padding:
            pieces.append(b"\0" * padding)
            digest.update(pieces[-1])
            offset += padding
        layout[name] = [array.dtype.str, list(array.shape), offset]
        pieces.append(array.tobytes())
        digest.update(pieces[-1])
        offset += len(pieces[-1])
    header = json.dumps(
        {
            "source": source,
            "languages": list(languages),
            "classes": list(arrays["classes"]),
            "arrays": layout,
            "sha256": digest.hexdigest(),
        }
    ).encode()
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(handle, "wb") as out:
            out.write(MAGIC + _LENGTH.pack(len(header)) + header)
            for piece in pieces:
                out.write(piece)
        os.chmod(temporary, 0o644)  # public data: any user sharing the folder may read it
        os.replace(temporary, path)
    except OSError:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        return False
    return True


def _identifier_of(kind: Any, arrays: dict[str, Any]) -> Any:
    """An identifier made from cached arrays, as py3langid 0.4 makes one from its
    file, through its constructor's arguments."""
    return kind(
        arrays["ptc"],
        arrays["pc"],
        list(arrays["classes"]),
        _unsigned_array(arrays["nextmove"]),
        arrays["out_feat"].tolist(),
        norm_probs=True,
        tk_row=_unsigned_array(arrays["nextmove_row"]),
    )


def _unsigned_array(values: Any) -> array[int]:
    """A NumPy array of unsigned integers as the standard library's ``array`` of
    the same item size (what the identifier's automaton is given)."""
    import numpy as np

    typecode = next(code for code in "BHILQ" if array(code).itemsize == values.dtype.itemsize)
    made: array[int] = array(typecode)
    made.frombytes(np.ascontiguousarray(values).data.cast("B"))  # the bytes copied once
    return made


def _arrays_of(identifier: Any) -> dict[str, Any]:
    """What the cache keeps of an identifier restricted to its languages."""
    import numpy as np

    def unsigned(values: Any) -> Any:  # an array.array of unsigned integers
        return np.frombuffer(values, dtype=f"u{values.itemsize}")

    return {
        "classes": list(identifier.nb_classes),
        "ptc": identifier.nb_ptc,
        "pc": identifier.nb_pc,
        "nextmove": unsigned(identifier.tk_nextmove),
        "nextmove_row": unsigned(identifier.tk_row),
        "out_feat": np.asarray(identifier.tk_output, dtype=np.int32),
    }


def _file_digest(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
