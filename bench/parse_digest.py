#!/usr/bin/env python
"""A hash of ``parse_html``'s output for every HTML page we can read, to hold
a change of the HTML walk to the same output.

    .venv/bin/python bench/parse_digest.py --out digest.json
    .venv/bin/python bench/parse_digest.py --compare before.json after.json

The pages: every ``.html``/``.htm`` file under ``fixtures/``, and the pages
the HTML quality benches read from ``../shared/eval/html/`` (Readability's
test pages and trafilatura's evaluation set; a set not found is left out
and said so). Each page's ``ParsedDocument`` (status, reason, metadata,
encoding, skipped notes, every block's text, kind and heading path) is
written as canonical JSON and hashed; ``--out`` writes ``{page: hash}``.
``--compare`` lists the pages whose hashes differ, or that only one run
read, and exits 1 if there are any. The package parsed is the one Python
imports: set ``PYTHONPATH`` to hash another tree's.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVAL_HTML = ROOT.parent / "shared" / "eval" / "html"


def fixture_pages() -> Iterator[tuple[str, bytes]]:
    """The HTML files of ``fixtures/``, by their path there."""
    for path in sorted((ROOT / "fixtures").rglob("*")):
        if path.is_file() and path.suffix.lower() in (".html", ".htm"):
            yield f"fixtures/{path.relative_to(ROOT / 'fixtures')}", path.read_bytes()


def readability_pages() -> Iterator[tuple[str, bytes]]:
    """``readability_pages``' raw pages (``bench/quality_html.py`` reads the same)."""
    root = EVAL_HTML / "readability_pages" / "pages"
    if not root.exists():
        print(f"skipped: {root} not found", file=sys.stderr)
        return
    for folder in sorted(path for path in root.iterdir() if path.is_dir()):
        yield f"readability_pages/{folder.name}", (folder / "source.html").read_bytes()


def trafilatura_pages() -> Iterator[tuple[str, bytes]]:
    """``trafilatura_eval``'s pages, each read once (the quality and the
    known-item benches read them from ``eval/``, else ``cache/``)."""
    root = EVAL_HTML / "trafilatura_eval" / "pages"
    if not root.exists():
        print(f"skipped: {root} not found", file=sys.stderr)
        return
    seen: set[str] = set()
    for folder in ("eval", "cache"):
        for path in sorted((root / folder).glob("*.gz")):
            if path.name in seen:
                continue
            seen.add(path.name)
            yield f"trafilatura_eval/{path.name[: -len('.gz')]}", gzip.decompress(path.read_bytes())


def digest(source: bytes) -> str:
    """The SHA-256 of the page's ``ParsedDocument`` as canonical JSON."""
    from researchstore.ingest.html import parse_html

    parsed = dataclasses.asdict(parse_html(source))
    canonical = json.dumps(parsed, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def write_digest(out: Path) -> None:
    pages = [*fixture_pages(), *readability_pages(), *trafilatura_pages()]
    hashes = {name: digest(source) for name, source in pages}
    out.write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    import researchstore.ingest.html as html_module

    print(f"{len(hashes)} pages hashed with {html_module.__file__} into {out}")


def compare(before: Path, after: Path) -> int:
    """Print the pages whose hashes differ; how many there are."""
    old = json.loads(before.read_text(encoding="utf-8"))
    new = json.loads(after.read_text(encoding="utf-8"))
    differ = sorted(name for name in old.keys() & new.keys() if old[name] != new[name])
    only_old = sorted(old.keys() - new.keys())
    only_new = sorted(new.keys() - old.keys())
    for name in differ:
        print(f"differs: {name}")
    for name in only_old:
        print(f"only in {before}: {name}")
    for name in only_new:
        print(f"only in {after}: {name}")
    common = len(old.keys() & new.keys())
    print(f"{common - len(differ)} of {common} pages the same; {len(differ)} differ")
    return len(differ) + len(only_old) + len(only_new)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write {page: hash} JSON here")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        sys.exit(1 if compare(*args.compare) else 0)
    if args.out is None:
        parser.error("give --out FILE or --compare BEFORE AFTER")
    write_digest(args.out)


if __name__ == "__main__":
    main()
