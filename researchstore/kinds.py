"""The kinds of document a store holds, named once for parsers, tools and schemas."""

from __future__ import annotations

from typing import Literal, get_args

DocumentKind = Literal["html", "vtt", "srt", "text"]
#: Every document kind, in the order tools and schemas list them.
DOCUMENT_KINDS: tuple[str, ...] = get_args(DocumentKind)
