#!/usr/bin/env python
"""Main-text extraction quality on every HTML evaluation set, against its peers.

    .venv/bin/python bench/quality_html.py [--set NAME] [--worst 10] [--no-trafilatura]

Every set under ``../shared/eval/html/`` is read at run time:

- ``readability_pages`` (Mozilla Readability's test pages): ``source.html``
  is the raw page, the text of ``expected.html`` the gold article. Text is
  compared with the gold as word 4-gram shingles (lower-cased ``\\w+``
  tokens, unigrams for texts under four tokens): precision, recall and F1
  per page, macro-averaged over pages.
- ``trafilatura_eval`` (trafilatura's evaluation set, gzip-compressed
  pages): per page, snippets that must be in the main text (``with``) and
  boilerplate that must not (``without``). Counted over all snippets: the
  share of ``with`` snippets kept and of ``without`` snippets kept out,
  whitespace collapsed on both sides.

Extractors, in the same run: researchstore (``parse_html``, the blocks as
ingest stores them), trafilatura (the ``bench`` extra; defaults, no
comments) and all of the page's body text (the floor any extractor must
beat). Pages per second are timed over each whole set, parse only.

Each set is also split in two halves by a hash of the page's name, so that
a change tuned while looking at one half can be checked on the other. A
page is *lost* when researchstore misses its article entirely (shingle
recall under 0.2, or none of its ``with`` snippets) while trafilatura finds
it (recall at least 0.5, or at least half of the snippets).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quality_common import eval_dir

from researchstore.ingest.chunking import document_text_of_blocks
from researchstore.ingest.html import parse_html

_WORD = re.compile(r"\w+")
_SPACE = re.compile(r"\s+")
#: Repeat the fast extractors until this many seconds have passed (stable rates).
_MIN_SECONDS = 2.0
SETS = ("readability_pages", "trafilatura_eval")
#: researchstore must read at least this many times trafilatura's pages per
#: second, in the same run (the extraction's speed floor).
SPEED_FLOOR = 5.0
Extract = Callable[[bytes], str]


@dataclass(slots=True)
class Page:
    name: str
    source: bytes
    #: The gold article (readability_pages), else empty.
    gold: str = ""
    #: Snippets that must be kept and must be left out (trafilatura_eval).
    keep: list[str] = field(default_factory=list)
    drop: list[str] = field(default_factory=list)

    @property
    def half(self) -> str:
        return "A" if hashlib.sha1(self.name.encode()).digest()[0] % 2 == 0 else "B"


@dataclass(slots=True)
class Score:
    """One page's result: shingle P/R/F1, or snippet counts."""

    precision: float = 0.0
    recall: float = 0.0
    f1: float = 0.0
    kept: int = 0
    kept_out: int = 0


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


# -- the sets --------------------------------------------------------------------


def load_readability(only: str | None) -> list[Page]:
    root = eval_dir("html", "readability_pages", "pages")
    pages = []
    for folder in sorted(path for path in root.iterdir() if path.is_dir()):
        if only and folder.name != only:
            continue
        pages.append(
            Page(
                name=folder.name,
                source=(folder / "source.html").read_bytes(),
                gold=gold_text((folder / "expected.html").read_text(encoding="utf-8")),
            )
        )
    return pages


def load_trafilatura(only: str | None) -> list[Page]:
    root = eval_dir("html", "trafilatura_eval")
    entries = json.loads((root / "evaldata.json").read_text(encoding="utf-8"))
    pages = []
    for entry in sorted(entries.values(), key=lambda item: item["file"]):
        name = entry["file"]
        if only and name != only:
            continue
        for folder in ("eval", "cache"):
            path = root / "pages" / folder / f"{name}.gz"
            if path.exists():
                break
        else:
            continue
        pages.append(
            Page(
                name=name,
                source=gzip.decompress(path.read_bytes()),
                keep=[_collapse(s) for s in entry.get("with", []) if _collapse(s)],
                drop=[_collapse(s) for s in entry.get("without", []) if _collapse(s)],
            )
        )
    return pages


# -- scoring ---------------------------------------------------------------------


def _collapse(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def shingles(text: str) -> Counter[tuple[str, ...]]:
    tokens = _WORD.findall(text.lower())
    size = 4 if len(tokens) >= 4 else 1
    return Counter(tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1))


def score_page(predicted: str, page: Page) -> Score:
    if page.keep or page.drop:
        text = _collapse(predicted)
        return Score(
            kept=sum(snippet in text for snippet in page.keep),
            kept_out=sum(snippet not in text for snippet in page.drop),
        )
    guess, truth = shingles(predicted), shingles(page.gold)
    if not guess and not truth:
        return Score(1.0, 1.0, 1.0)
    common = sum((guess & truth).values())
    precision = common / sum(guess.values()) if guess else 0.0
    recall = common / sum(truth.values()) if truth else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Score(precision, recall, f1)


def found_article(result: Score, page: Page, *, strict: bool) -> bool:
    """Whether the extraction holds the article (strict: a lenient reading for peers)."""
    if page.keep:
        return result.kept >= (1 if strict else max(1, len(page.keep) / 2))
    if not page.gold.strip():
        return True
    return result.recall >= (0.2 if strict else 0.5)


def summary(scores: Sequence[Score], pages: Sequence[Page]) -> str:
    if not pages:
        return "n/a"
    if pages[0].keep or pages[0].drop:
        keep = sum(len(page.keep) for page in pages) or 1
        drop = sum(len(page.drop) for page in pages) or 1
        return (
            f"kept {sum(s.kept for s in scores) / keep:.3f}  "
            f"kept out {sum(s.kept_out for s in scores) / drop:.3f}"
        )
    count = len(scores) or 1
    return (
        f"P {sum(s.precision for s in scores) / count:.3f}  "
        f"R {sum(s.recall for s in scores) / count:.3f}  "
        f"F1 {sum(s.f1 for s in scores) / count:.3f}"
    )


# -- extractors ------------------------------------------------------------------


def researchstore_extract(source: bytes) -> str:
    return document_text_of_blocks(parse_html(source).blocks)


def body_text_extract(source: bytes) -> str:
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(source.decode("utf-8", "replace"))
    for node in tree.css("script, style, noscript, template"):
        node.decompose()
    body = tree.body or tree.root
    return body.text(separator=" ") if body else ""


def trafilatura_extractor() -> Extract | None:
    try:
        import trafilatura
    except ImportError:
        return None

    def extract(source: bytes) -> str:
        return trafilatura.extract(source, include_comments=False) or ""

    return extract


def run(extract: Extract, pages: list[Page], *, repeat: bool) -> tuple[list[str], float]:
    """Every page's text and the extractor's pages per second."""
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


def measure(
    set_name: str,
    pages: list[Page],
    extractors: list[tuple[str, Extract, bool]],
    worst: int,
    rounds: int = 1,
) -> None:
    """Score each extractor on the set and time it: in ``rounds`` rounds, each
    extractor in turn, so that all see the machine alike (its speed drifts by
    a fifth from one minute to the next); the median round is the figure."""
    print(f"\n== {set_name}: {len(pages)} pages")
    halves = {half: [i for i, page in enumerate(pages) if page.half == half] for half in "AB"}
    results: dict[str, list[Score]] = {}
    rates: dict[str, list[float]] = {name: [] for name, _, _ in extractors}
    for _ in range(rounds):
        for name, extract, repeat in extractors:
            outputs, rate = run(extract, pages, repeat=repeat)
            rates[name].append(rate)
            if name not in results:
                results[name] = [
                    score_page(text, page) for text, page in zip(outputs, pages, strict=True)
                ]
    print(f"{'extractor':<15} {'all':<34} {'half A':<34} {'half B':<34} {'pages/s':>8}")
    for name, _, _ in extractors:
        scores = results[name]
        cells = [summary(scores, pages)] + [
            summary([scores[i] for i in rows], [pages[i] for i in rows]) for rows in halves.values()
        ]
        rate = statistics.median(rates[name])
        print(f"{name:<15} {cells[0]:<34} {cells[1]:<34} {cells[2]:<34} {rate:>8.1f}")
    ours = results["researchstore"]
    if "trafilatura" in rates:
        ratios = sorted(
            mine / theirs
            for mine, theirs in zip(rates["researchstore"], rates["trafilatura"], strict=True)
        )
        shown = ", ".join(f"{each:.1f}x" for each in ratios)
        ratio = statistics.median(ratios)
        print(
            f"researchstore is {ratio:.1f}x trafilatura's pages per second "
            f"(median of {rounds} rounds: {shown}); "
            f"floor {SPEED_FLOOR:.0f}x: {'PASS' if ratio >= SPEED_FLOOR else 'FAIL'}"
        )
        peer = results["trafilatura"]
        lost = [
            page.name
            for mine, theirs, page in zip(ours, peer, pages, strict=True)
            if not found_article(mine, page, strict=True)
            and found_article(theirs, page, strict=False)
        ]
        print(f"lost (article missed, trafilatura finds it): {len(lost)} {' '.join(lost)}")
    empty = sum(not found_article(s, p, strict=True) for s, p in zip(ours, pages, strict=True))
    print(f"researchstore pages without the article: {empty}")
    if worst:
        snippets = bool(pages and pages[0].keep)

        def badness(pair: tuple[Score, Page]) -> float:
            result, page = pair
            if snippets:
                missed = len(page.keep) - result.kept
                return -(missed + len(page.drop) - result.kept_out)
            return result.f1

        print(f"worst {worst} pages (researchstore):")
        for result, page in sorted(zip(ours, pages, strict=True), key=badness)[:worst]:
            if snippets:
                detail = (
                    f"kept {result.kept}/{len(page.keep)} "
                    f"kept out {result.kept_out}/{len(page.drop)}"
                )
            else:
                detail = f"P {result.precision:.2f} R {result.recall:.2f} F1 {result.f1:.2f}"
            print(f"  {page.name:<48} {page.half} {detail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=SETS, action="append", help="only this set (repeatable)")
    parser.add_argument("--worst", type=int, default=10, help="list the N worst pages (ours)")
    parser.add_argument("--page", help="only this page (folder or file name)")
    parser.add_argument("--no-trafilatura", action="store_true", help="skip trafilatura")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="time every extractor this many times, in turn; the median round counts",
    )
    args = parser.parse_args()

    extractors: list[tuple[str, Extract, bool]] = [("researchstore", researchstore_extract, True)]
    trafilatura = None if args.no_trafilatura else trafilatura_extractor()
    if trafilatura is not None:
        extractors.append(("trafilatura", trafilatura, False))
    elif not args.no_trafilatura:
        print("trafilatura is not installed (pip install -e '.[bench]'): skipped")
    extractors.append(("all body text", body_text_extract, True))
    loaders = {"readability_pages": load_readability, "trafilatura_eval": load_trafilatura}
    for set_name in args.set or SETS:
        pages = loaders[set_name](args.page)
        if pages:
            measure(set_name, pages, extractors, args.worst, args.rounds)


if __name__ == "__main__":
    main()
