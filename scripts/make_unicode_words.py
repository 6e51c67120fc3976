"""Write ``researchstore/unicode_words.py`` from the installed Tantivy.

Tantivy's simple tokenizer takes a character for part of a word when Rust's
``char::is_alphanumeric`` says so, by the Unicode version Tantivy was built
with; its folding (Lucene's ASCII folding) spells some letters in ASCII.
``analysis.count_tokens`` counts words without Tantivy, so it needs both as
tables. Run this after a Tantivy upgrade if ``tests/test_analysis.py`` says
the tables no longer agree:

    .venv/bin/python scripts/make_unicode_words.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import tantivy

TARGET = Path(__file__).resolve().parent.parent / "researchstore" / "unicode_words.py"


def word_characters() -> list[tuple[int, int]]:
    """The ranges of characters past ASCII that Tantivy's simple tokenizer keeps."""
    words = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).build()
    kept: list[int] = []
    candidates = [c for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000]
    for start in range(0, len(candidates), 4096):
        batch = candidates[start : start + 4096]
        found = set(words.analyze(" ".join(map(chr, batch))))
        kept.extend(c for c in batch if chr(c) in found)
    ranges: list[list[int]] = []
    for code in kept:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return [(first, last) for first, last in ranges]


def ascii_folds(ranges: list[tuple[int, int]]) -> dict[str, str]:
    """Each word character past ASCII that lower-casing and folding spell in ASCII
    letters and digits, with that spelling."""
    folding = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .build()
    )
    folds = {}
    for first, last in ranges:
        for code in range(first, last + 1):
            spelled = folding.analyze(chr(code))
            if len(spelled) == 1 and spelled[0].isascii() and spelled[0].isalnum():
                folds[chr(code)] = spelled[0]
    return folds


def _escape(code: int) -> str:
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def render(ranges: list[tuple[int, int]], folds: dict[str, str]) -> str:
    pieces = [_escape(a) if a == b else f"{_escape(a)}-{_escape(b)}" for a, b in ranges]
    lines, line = [], ""
    for piece in pieces:
        if len(line) + len(piece) > 80:
            lines.append(line)
            line = ""
        line += piece
    lines.append(line)
    pairs = [f"{_escape(ord(char))}{spelled}" for char, spelled in sorted(folds.items())]
    fold_lines, line = [], ""
    for pair in pairs:
        if len(line) + len(pair) + 1 > 80:
            fold_lines.append(line)
            line = ""
        line += pair + " "
    fold_lines.append(line)
    version = getattr(tantivy, "__version__", "?")
    return (
        '"""Tantivy\'s word characters and ASCII folding as tables (generated: do not edit).\n\n'
        f"Written by ``scripts/make_unicode_words.py`` ({version});\n"
        "``tests/test_analysis.py`` checks them against the Tantivy installed.\n"
        '"""\n\n'
        "#: The characters past ASCII that Tantivy's simple tokenizer keeps in a word\n"
        "#: (Rust's ``char::is_alphanumeric``), as a regular expression's class.\n"
        "WORD_CHARACTERS = (\n" + "".join(f'    "{line}"\n' for line in lines) + ")\n\n"
        "#: Each such character that lower-casing and folding spell in ASCII letters\n"
        "#: and digits, then its spelling; one pair to a space.\n"
        "ASCII_FOLDS = (\n" + "".join(f'    "{line}"\n' for line in fold_lines) + ")\n"
    )


def main() -> None:
    ranges = word_characters()
    TARGET.write_text(render(ranges, ascii_folds(ranges)))
    print(f"wrote {TARGET} ({len(ranges)} ranges)", file=sys.stderr)


if __name__ == "__main__":
    main()
