"""Bytes to text: BOM, strict UTF-8, a declared encoding, then legacy fallbacks.

Every parser decodes through :func:`decode_text`, so a file in a legacy
encoding never reaches a library as bytes it would choke on, and
:func:`looks_binary` lets a parser answer ``invalid`` / ``binary`` for
garbage instead of producing mojibake.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator

from researchstore.ingest.model import ParsedDocument
from researchstore.kinds import DocumentKind

__all__ = [
    "DecodedLines",
    "decode_lines",
    "decode_text",
    "declared_encoding",
    "looks_binary",
    "normalize_language",
    "normalize_newlines",
]

_SNIFF_BYTES = 8192

# Longest first: the UTF-32 LE BOM starts with the UTF-16 LE one.
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# Labels the WHATWG Encoding Standard maps to a superset; decoding with the
# superset is what browsers do, and it decodes more real pages without loss.
_SUPERSETS = {
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "gb2312": "gbk",
    "euc_kr": "cp949",
    "iso8859-9": "cp1254",
    "tis-620": "cp874",
}

_NEWLINES = re.compile(r"\r\n?")

# Control bytes that never occur in text (tab, LF, FF, CR and ESC do).
_TEXT_CONTROLS = frozenset(b"\t\n\x0c\r\x1b")
_CONTROL_BYTES = bytes(b for b in range(32) if b not in _TEXT_CONTROLS) + b"\x7f"

_LANGUAGE_TAG = re.compile(r"^[a-zA-Z]{2,8}(?:-[a-zA-Z0-9]{1,8})*$")

_META_CHARSET = re.compile(
    rb"""<meta[^>]*?charset\s*=\s*["']?\s*([a-zA-Z0-9_.:\-]+)""", re.IGNORECASE
)
_XML_ENCODING = re.compile(rb"""<\?xml[^>]*encoding\s*=\s*["']([a-zA-Z0-9_.:\-]+)""")


def normalize_newlines(text: str) -> str:
    """Turn ``\\r\\n`` and lone ``\\r`` into ``\\n``."""
    return _NEWLINES.sub("\n", text) if "\r" in text else text


def normalize_language(value: str | None) -> str | None:
    """Return ``value`` if it is shaped like a language tag (``en``, ``nb-NO``), else None.

    ``en_US`` (a POSIX locale, common in the wild) is read as ``en-US``.
    """
    if not value:
        return None
    tag = value.strip().replace("_", "-")
    return tag if _LANGUAGE_TAG.match(tag) else None


def _bom_encoding(data: bytes) -> tuple[str, int] | None:
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name, len(bom)
    return None


def _utf16_without_bom(sample: bytes) -> str | None:
    """Guess UTF-16 without a BOM from NUL bytes on every other position.

    Mostly-ASCII UTF-16 text has a NUL in the high byte of nearly every code
    unit; binary data has NULs too, but not in that regular pattern.
    """
    if len(sample) < 16 or b"\x00" not in sample:
        return None
    sample = sample[: len(sample) - len(sample) % 2]
    even, odd = sample[0::2], sample[1::2]
    half = len(sample) // 2
    if odd.count(0) >= 0.9 * half and even.count(0) <= 0.05 * half:
        return "utf-16-le"
    if even.count(0) >= 0.9 * half and odd.count(0) <= 0.05 * half:
        return "utf-16-be"
    return None


def looks_binary(data: bytes, *, stray_nul_is_text: bool = False) -> bool:
    """Tell whether ``data`` is binary rather than text, from its first 8 KiB.

    NUL bytes (outside UTF-16/32 text) or more than 10% control characters
    mean binary. Empty input is not binary. With ``stray_nul_is_text`` (for
    WebVTT, whose parsing turns a NUL into U+FFFD), a few stray NULs (two,
    or one byte in a thousand) do not: a real binary holds far more, and
    control characters still count.
    """
    sample = data[:_SNIFF_BYTES]
    if not sample or _bom_encoding(sample) is not None:
        return False
    if _utf16_without_bom(sample) is not None:
        return False
    nuls = sample.count(0)
    if nuls and not (stray_nul_is_text and nuls <= max(2, len(sample) // 1000)):
        return True
    controls = len(sample) - len(sample.translate(None, _CONTROL_BYTES)) - nuls
    return controls > 0.1 * len(sample)


def _canonical(name: str | None) -> str | None:
    """Return Python's codec name for an encoding label, or None if unknown."""
    if not name:
        return None
    try:
        codec = codecs.lookup(name.strip().strip("\"'").lower())
    except LookupError:
        return None
    canonical = codec.name
    # A page cannot really declare UTF-16/32 in its own ASCII-compatible
    # markup; the WHATWG standard reads such a declaration as UTF-8.
    if canonical.startswith(("utf-16", "utf-32")):
        return "utf-8"
    return _SUPERSETS.get(canonical, canonical)


def declared_encoding(data: bytes) -> str | None:
    """Find the encoding an HTML or XML document declares in its first 4 KiB.

    Reads ``<meta charset>``, ``<meta http-equiv="Content-Type"
    content="...; charset=...">`` and ``<?xml encoding=...?>``.
    """
    head = data[:4096]
    match = _META_CHARSET.search(head) or _XML_ENCODING.search(head)
    if match is None:
        return None
    return _canonical(match.group(1).decode("ascii", "ignore"))


def _try_decode(data: bytes, encoding: str, *, final: bool) -> str | None:
    try:
        # An incremental decoder with final=False tolerates a multi-byte
        # sequence cut at the end, as a size limit can leave it.
        return codecs.getincrementaldecoder(encoding)("strict").decode(data, final=final)
    except (UnicodeDecodeError, LookupError):
        return None


#: UTF-8 with this many damaged sequences per well-formed multi-byte one, at
#: most, is UTF-8 with a few stray bytes, not a legacy encoding.
_STRAY_PER_CHARACTER = 0.02
#: Well-formed multi-byte characters needed before a damaged one is forgiven.
_MIN_WIDE = 5


def _mostly_utf8(data: bytes, *, final: bool) -> str | None:
    """``data`` as UTF-8 when only a few stray bytes spoil it, else None.

    A page in a single-byte legacy encoding is almost never valid UTF-8 in
    any of its accented letters, so many damaged sequences and few good
    ones mean it is not; one bad byte in a long UTF-8 page must not turn
    every letter of it into mojibake.
    """
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=final)
    stray = text.count("\ufffd")
    wide = len(text) - len(text.encode("ascii", "ignore")) - stray
    if wide >= _MIN_WIDE and stray <= 1 + _STRAY_PER_CHARACTER * wide:
        return text
    return None


def decode_text(data: bytes, *, declared: str | None = None, final: bool = True) -> tuple[str, str]:
    """Decode ``data`` and return ``(text, encoding_name)``.

    Order: a BOM; strict UTF-8 (it wins over a declaration, as pages that
    declare gb2312 or latin-1 are often UTF-8); the ``declared`` encoding;
    UTF-8 spoilt by a few stray bytes (they become U+FFFD); cp1252;
    latin-1, which never fails. Newlines are normalised to ``\\n``
    and a leading BOM character is removed. Pass ``final=False`` when
    ``data`` was cut at a size limit, so a multi-byte character cut in half
    at the end is dropped instead of failing the UTF-8 step.
    """
    text, encoding, _ = decode_exact(data, declared=declared, final=final)
    return text, encoding


def decode_exact(
    data: bytes, *, declared: str | None = None, final: bool = True
) -> tuple[str, str, bool]:
    """``decode_text``, and whether the text is exactly ``data`` read as UTF-8.

    When it is, ``data`` is the text's own UTF-8: a parser that wants UTF-8
    can be given ``data`` as it is, instead of the text encoded again.
    """
    text: str | None = None
    encoding = "utf-8"
    exact = False
    bom = _bom_encoding(data)
    if bom is not None:
        encoding, skip = bom
        # The BOM is authoritative; damaged bytes after it become U+FFFD.
        decoder = codecs.getincrementaldecoder(encoding)("replace")
        text = decoder.decode(data[skip:], final=final)
    else:
        guessed = _utf16_without_bom(data[:_SNIFF_BYTES])
        candidates: list[str | None] = [guessed, "utf-8", _canonical(declared)]
        for candidate in candidates:
            if candidate is None:
                continue
            text = _try_decode(data, candidate, final=final)
            if text is not None:
                encoding = candidate
                # Cut at a size limit, a character cut in half was dropped.
                exact = candidate == "utf-8" and final and b"\r" not in data
                break
        if text is None:
            text = _mostly_utf8(data, final=final)
        if text is None:
            text = _try_decode(data, "cp1252", final=final)
            encoding = "cp1252"
        if text is None:
            encoding = "latin-1"
            text = data.decode("latin-1")
    text = normalize_newlines(text)
    if text.startswith("\ufeff"):
        text = text[1:]
        exact = False
    return text, encoding, exact


def unreadable(data: bytes, kind: DocumentKind) -> ParsedDocument | None:
    """The outcome for bytes no parser should read (empty or binary), else None.

    A caption file with a stray NUL is text: its lines carry U+FFFD there.
    """
    if not data.strip():
        return ParsedDocument(kind=kind, status="empty", reason="no_text")
    if looks_binary(data, stray_nul_is_text=kind in ("vtt", "srt")):
        return ParsedDocument(kind=kind, status="invalid", reason="binary")
    return None


#: How many bytes a streaming decode reads at a time.
_STREAM_BYTES = 1 << 16


def _decodes(data: bytes, encoding: str, skip: int = 0) -> bool:
    """Tell whether all of ``data[skip:]`` decodes strictly, holding a piece at a time."""
    decoder = codecs.getincrementaldecoder(encoding)("strict")
    try:
        for offset in range(skip, len(data), _STREAM_BYTES):
            decoder.decode(data[offset : offset + _STREAM_BYTES])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


class DecodedLines:
    """The lines of some bytes as text, decoded afresh on every pass, never whole.

    Iterating yields what ``decode_text(data)[0].split("\\n")`` holds, one
    line at a time: a long file costs its lines, not one string of it all
    (which CPython stores at four bytes a character once a single emoji
    appears in it).
    """

    def __init__(
        self,
        data: bytes,
        encoding: str,
        *,
        skip: int = 0,
        errors: str = "strict",
        nul_replaced: bool = False,
    ):
        self.data = data
        #: Each NUL character becomes U+FFFD, as WebVTT's parsing rules say.
        self.nul_replaced = nul_replaced
        self.encoding = encoding
        self.skip = skip
        self.errors = errors

    def __iter__(self) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder(self.encoding)(self.errors)
        data = self.data
        pending: list[str] = []  # the start of the line being read
        carriage_return = False  # a "\r" that may pair with a "\n" in the next piece
        first = True
        offsets = range(self.skip, len(data), _STREAM_BYTES)
        for offset in offsets or [len(data)]:
            final = offset + _STREAM_BYTES >= len(data)
            piece = decoder.decode(data[offset : offset + _STREAM_BYTES], final=final)
            if carriage_return:
                piece = "\r" + piece
            carriage_return = piece.endswith("\r") and not final
            if carriage_return:
                piece = piece[:-1]
            if "\r" in piece:
                piece = _NEWLINES.sub("\n", piece)
            if self.nul_replaced and "\x00" in piece:
                piece = piece.replace("\x00", "\ufffd")
            if first and piece:
                first = False
                if piece.startswith("\ufeff"):
                    piece = piece[1:]
            lines = piece.split("\n")
            if len(lines) == 1:
                pending.append(lines[0])
                continue
            pending.append(lines[0])
            yield "".join(pending)
            yield from lines[1:-1]
            pending = [lines[-1]]
        yield "".join(pending)


def decode_lines(data: bytes, *, nul_replaced: bool = False) -> tuple[DecodedLines, str]:
    """The lines of ``data`` and the encoding read, chosen as ``decode_text`` chooses.

    For files too large to hold as one string: each pass decodes a piece at
    a time. No declared encoding is looked for. With ``nul_replaced``, NUL
    characters read as U+FFFD.
    """
    bom = _bom_encoding(data)
    if bom is not None:
        encoding, skip = bom
        lines = DecodedLines(data, encoding, skip=skip, errors="replace", nul_replaced=nul_replaced)
        return lines, encoding
    guessed = _utf16_without_bom(data[:_SNIFF_BYTES])
    for candidate in (guessed, "utf-8", "cp1252"):
        if candidate is not None and _decodes(data, candidate):
            return DecodedLines(data, candidate, nul_replaced=nul_replaced), candidate
    return DecodedLines(data, "latin-1", nul_replaced=nul_replaced), "latin-1"
