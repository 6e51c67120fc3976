"""Content-Encoding undone under a byte cap: a compression bomb stops at the cap.

Raw bytes go in as they arrive; gzip and deflate layers (at most two) are
undone with ``max_length``, so decoded output never grows past ``limit``
in memory, however small the compressed input.
"""

from __future__ import annotations

import zlib

__all__ = ["BodyDecoder", "ContentTooLarge", "UnsupportedContent", "body_decoder"]


class ContentTooLarge(Exception):
    """The decoded body would be over the limit."""


class UnsupportedContent(Exception):
    """An encoding we do not undo, or a corrupt compressed body."""


class _Inflate:
    """One gzip or deflate layer whose output never exceeds ``limit`` bytes in total."""

    def __init__(self, coding: str, limit: int) -> None:
        self.coding = coding
        self.limit = limit
        self.produced = 0
        self._wbits = 16 + zlib.MAX_WBITS if coding == "gzip" else zlib.MAX_WBITS
        self._inflater = zlib.decompressobj(self._wbits)
        self._first = True

    def feed(self, data: bytes) -> bytes:
        out = []
        while data:
            room = self.limit - self.produced
            try:
                chunk = self._inflater.decompress(data, room + 1)
            except zlib.error:
                if self.coding == "deflate" and self._first:
                    # Some servers send raw deflate (no zlib header).
                    self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
                    self._first = False
                    continue
                raise
            self._first = False
            self.produced += len(chunk)
            if self.produced > self.limit or self._inflater.unconsumed_tail:
                raise ContentTooLarge()
            out.append(chunk)
            data = b""
            if self._inflater.eof and self._inflater.unused_data:
                data = self._inflater.unused_data  # another gzip member follows
                self._inflater = zlib.decompressobj(self._wbits)
        return b"".join(out)

    def finish(self) -> bytes:
        tail = self._inflater.flush(max(self.limit - self.produced + 1, 1))
        self.produced += len(tail)
        if self.produced > self.limit:
            raise ContentTooLarge()
        return tail


class BodyDecoder:
    """Content-Encoding layers, undone in order, then the decoded body (bounded)."""

    def __init__(self, layers: list[_Inflate], limit: int) -> None:
        self.layers = layers
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0

    def _keep(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.limit:
            raise ContentTooLarge()
        if data:
            self.parts.append(data)

    def _through(self, data: bytes, start: int = 0) -> bytes:
        for layer in self.layers[start:]:
            data = layer.feed(data)
        return data

    def feed(self, data: bytes) -> None:
        try:
            self._keep(self._through(data))
        except zlib.error as error:
            raise UnsupportedContent(f"the compressed body is corrupt: {error}") from None

    def finish(self, *, strict: bool) -> bytes:
        """The whole decoded body; with ``strict``, a truncated stream is an error."""
        try:
            for index, layer in enumerate(self.layers):
                self._keep(self._through(layer.finish(), index + 1))
        except zlib.error as error:
            if strict:
                raise UnsupportedContent(f"the compressed body is corrupt: {error}") from None
        return b"".join(self.parts)


def body_decoder(content_encoding: str, limit: int) -> BodyDecoder:
    """A decoder for a ``Content-Encoding`` header's codings (last applied, first undone)."""
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    layers = []
    for coding in reversed(codings):
        if coding in ("identity", "none"):
            continue
        if coding in ("gzip", "x-gzip"):
            layers.append(_Inflate("gzip", limit))
        elif coding == "deflate":
            layers.append(_Inflate("deflate", limit))
        else:
            raise UnsupportedContent(f"unsupported Content-Encoding {coding!r}")
    if len(layers) > 2:
        raise UnsupportedContent("more than two content encodings")
    return BodyDecoder(layers, limit)
