#!/usr/bin/env python
"""Main-text extraction quality on the Mozilla Readability test pages.

    .venv/bin/python bench/quality_html.py [--worst 10] [--page NAME] [--no-trafilatura]

For every folder under ``../shared/eval/html/readability_pages/pages/``:
``source.html`` is the raw page, the text of ``expected.html`` is the gold
article and ``expected-metadata.json`` holds the gold title. Each extractor
reads the raw bytes; its text is compared with the gold text as word 4-gram
shingles (lower-cased ``\\w+`` tokens, unigrams for texts under four tokens):
precision, recall and F1 per page, macro-averaged over pages.

Extractors, in the same run: researchstore (``parse_html``, the blocks as
ingest stores them), trafilatura (the ``bench`` extra; defaults, no
comments) and all of the page's body text (the floor any extractor must
beat). Pages per second are timed over the whole set, parse only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quality_common import eval_dir, percent

from researchstore.ingest.chunking import document_text_of_blocks
from researchstore.ingest.html import parse_html

_WORD = re.compile(r"\w+")
_SPACE = re.compile(r"\s+")
#: Repeat the fast extractors until this many seconds have passed (stable rates).
_MIN_SECONDS = 2.0


@dataclass(slots=True)
class Page:
    name: str
    source: bytes
    gold: str
    title: str


@dataclass(slots=True)
class Score:
    precision: float
    recall: float
    f1: float


class _TextOnly(HTMLParser):
    """The text of an HTML fragment, a space between every piece (stdlib only)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def gold_text(markup: str) -> str:
    parser = _TextOnly()
    parser.feed(markup)
    parser.close()
    return " ".join(parser.parts)


def load_pages(root: Path, only: str | None) -> list[Page]:
    pages = []
    for folder in sorted(path for path in root.iterdir() if path.is_dir()):
        if only and folder.name != only:
            continue
        metadata = json.loads((folder / "expected-metadata.json").read_text(encoding="utf-8"))
        pages.append(
            Page(
                name=folder.name,
                source=(folder / "source.html").read_bytes(),
                gold=gold_text((folder / "expected.html").read_text(encoding="utf-8")),
                title=metadata.get("title") or "",
            )
        )
    return pages


def shingles(text: str) -> Counter[tuple[str, ...]]:
    tokens = _WORD.findall(text.lower())
    size = 4 if len(tokens) >= 4 else 1
    return Counter(tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1))


def score(predicted: str, gold: str) -> Score:
    guess, truth = shingles(predicted), shingles(gold)
    if not guess and not truth:
        return Score(1.0, 1.0, 1.0)
    common = sum((guess & truth).values())
    precision = common / sum(guess.values()) if guess else 0.0
    recall = common / sum(truth.values()) if truth else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Score(precision, recall, f1)


def normalize_title(title: str | None) -> str:
    return _SPACE.sub(" ", title or "").strip().casefold()


# -- extractors ------------------------------------------------------------------


def researchstore_extract(source: bytes) -> tuple[str, str | None]:
    doc = parse_html(source)
    return document_text_of_blocks(doc.blocks), doc.title


def body_text_extract(source: bytes) -> tuple[str, str | None]:
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(source.decode("utf-8", "replace"))
    for node in tree.css("script, style, noscript, template"):
        node.decompose()
    body = tree.body or tree.root
    title = tree.css_first("title")
    return (body.text(separator=" ") if body else ""), (title.text() if title else None)


def trafilatura_extractor() -> Callable[[bytes], tuple[str, str | None]] | None:
    try:
        import trafilatura
    except ImportError:
        return None

    def extract(source: bytes) -> tuple[str, str | None]:
        document = trafilatura.bare_extraction(source, include_comments=False, with_metadata=True)
        if document is None:
            return "", None
        return document.text or "", document.title

    return extract


def run(
    name: str,
    extract: Callable[[bytes], tuple[str, str | None]],
    pages: list[Page],
    *,
    repeat: bool,
) -> tuple[list[tuple[str, str | None]], float]:
    """Every page's (text, title) and the pages per second of the extractor."""
    started = time.perf_counter()
    outputs = [extract(page.source) for page in pages]
    elapsed = time.perf_counter() - started
    done = len(pages)
    while repeat and elapsed < _MIN_SECONDS and pages:
        for page in pages:
            extract(page.source)
        done += len(pages)
        elapsed = time.perf_counter() - started
    return outputs, done / elapsed if elapsed else float("inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worst", type=int, default=0, help="list the N worst pages (ours)")
    parser.add_argument("--page", help="only this page folder")
    parser.add_argument("--no-trafilatura", action="store_true", help="skip trafilatura")
    args = parser.parse_args()

    root = eval_dir("html", "readability_pages", "pages")
    pages = load_pages(root, args.page)
    print(f"{len(pages)} pages from {root}")

    extractors: list[tuple[str, Callable[[bytes], tuple[str, str | None]], bool]] = [
        ("researchstore", researchstore_extract, True),
    ]
    trafilatura = None if args.no_trafilatura else trafilatura_extractor()
    if trafilatura is not None:
        extractors.append(("trafilatura", trafilatura, False))
    elif not args.no_trafilatura:
        print("trafilatura is not installed (pip install -e '.[bench]'): skipped")
    extractors.append(("all body text", body_text_extract, True))

    print(
        f"\n{'extractor':<15} {'precision':>9} {'recall':>7} {'F1':>6} "
        f"{'title exact':>11} {'pages/s':>8}"
    )
    results: dict[str, list[Score]] = {}
    rates: dict[str, float] = {}
    for name, extract, repeat in extractors:
        outputs, rate = run(name, extract, pages, repeat=repeat)
        scores = [score(text, page.gold) for (text, _), page in zip(outputs, pages, strict=True)]
        titles = sum(
            normalize_title(title) == normalize_title(page.title)
            for (_, title), page in zip(outputs, pages, strict=True)
        )
        results[name], rates[name] = scores, rate
        count = len(scores) or 1
        print(
            f"{name:<15} {sum(s.precision for s in scores) / count:>9.3f} "
            f"{sum(s.recall for s in scores) / count:>7.3f} "
            f"{sum(s.f1 for s in scores) / count:>6.3f} "
            f"{percent(titles, len(pages)):>11} {rate:>8.1f}"
        )
    if "trafilatura" in rates:
        print(
            f"\nresearchstore is {rates['researchstore'] / rates['trafilatura']:.1f}x "
            "trafilatura's pages per second"
        )

    if args.worst:
        ours = results["researchstore"]
        ranked = sorted(zip(ours, pages, strict=True), key=lambda pair: pair[0].f1)
        print(f"\nworst {args.worst} pages (researchstore):")
        for page_score, page in ranked[: args.worst]:
            print(
                f"  {page.name:<40} P {page_score.precision:.2f} R {page_score.recall:.2f} "
                f"F1 {page_score.f1:.2f}"
            )


if __name__ == "__main__":
    main()
