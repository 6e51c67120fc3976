#!/usr/bin/env python
"""Known-item search in many languages: is a page found by a rare sentence of its own?

    .venv/bin/python bench/quality_known_item.py [--pages N] [--workdir DIR]

The 990 pages of ``../shared/eval/html/trafilatura_eval/`` (German, English,
French, Chinese, Russian, ...: the data does not say, the store detects it)
are ingested, one single-file report a page. Each page's query is one of its
own must-have snippets (``with`` in ``evaldata.json``), chosen by a rule: of
the snippets of at least three words (a CJK bigram counts as a word) whose
words the stored page holds, the one whose words are rarest across the pages
(highest mean IDF), cut to 40 query terms. The page is found when a chunk of
it is the first hit (rank 1) or among the first ten.

Two stores in the same run: the store as ingested (each page analysed in its
language, declared or detected), and a copy of it whose every document is set
to English and whose index is rebuilt from it (the analysis every page had
before languages were told apart, but with CJK runs as bigrams; run this file
with an older researchstore on the path for what came before that). Printed
per language (as the first store holds it), then the same for the Norwegian
fixtures (hand-written queries in other inflections than the text's, the
chunk holding the word wanted first), and two Chinese checks: three or four
characters from inside a run of a Chinese page's snippet, the page wanted
first; and words inside the runs of three short notes written for it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quality_common import REPO_ROOT, eval_dir, percent

from researchstore import Store
from researchstore.text.analysis import query_size

#: The most query terms a known-item query keeps (the tool takes 64).
MAX_TERMS = 40
#: A word in at most this share of the pages is rare.
RARE_SHARE = 0.01
#: A language with fewer pages than this is counted under "other".
MIN_PAGES = 5
_CJK = re.compile(
    "[\u3041-\u309f\u30a0-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+"
)

#: Norwegian queries for the fixture elvemusling-liaelva, each in another
#: inflection than its text has (written before any was run), with the start
#: of the word that the chunk wanted first holds in some form.
NORWEGIAN = [
    ("larve på gjellen", "larve"),
    ("vegetasjonssone langs elva", "vegetasjonssone"),
    ("sedimentfanger", "sedimentfanger"),
    ("skyvelæren", "skyvelære"),
    ("vanntemperaturen", "vanntemperatur"),
    ("varme ettermiddag", "ettermiddag"),
    ("transekt", "transekt"),
    ("tellingene", "telling"),
    ("døde musling på grusbanken", "grusbanke"),
    ("kverndam", "kverndam"),
    ("deltaker", "deltaker"),
    ("trussel mot bestanden", "trus"),
]


#: Three short Chinese notes written for this bench, and words inside their
#: runs (no spaces anywhere), with the note each is in.
CHINESE_NOTES = {
    "bees": "春天的时候，我们在图书馆屋顶上检查了十二个蜂箱。"
    "大多数蜂群安全过冬，但是有两个蜂群失去了蜂王。",
    "river": "河流调查显示，下游的溶解氧含量比去年低。志愿者们在六个采样点测量了水温和浊度。",
    "space": "今年两会期间，中国宇航员们在空间站完成了新的实验，代表们讨论了航天计划。",
}
CHINESE_WORDS = [
    ("蜂箱", "bees"), ("蜂王", "bees"), ("图书馆", "bees"), ("过冬", "bees"),
    ("溶解氧", "river"), ("志愿者", "river"), ("采样点", "river"), ("浊度", "river"),
    ("两会", "space"), ("宇航员", "space"), ("空间站", "space"), ("航天", "space"),
]  # fmt: skip


def tokens(text: str) -> list[str]:
    """Words, and CJK runs as their bigrams (as the index has them), lower-cased."""
    spaced = _CJK.sub(lambda run: f" {' '.join(_bigrams(run.group()))} ", text.lower())
    return re.findall(r"\w+", spaced)


def _bigrams(run: str) -> list[str]:
    return [run] if len(run) < 2 else [run[i : i + 2] for i in range(len(run) - 1)]


def fit(query: str) -> str:
    """``query`` cut to at most ``MAX_TERMS`` terms, at a word (or a character)."""
    query = query.replace('"', " ").strip()
    while query_size(query)[0] > MAX_TERMS:
        words = query.split()
        query = " ".join(words[:-1]) if len(words) > 1 else query[: max(1, len(query) * 3 // 4)]
    return query


def write_pages(entries: dict[str, Any], pages_dir: Path, source: Path, limit: int | None) -> dict:
    """One single-file report a page; the page's snippets by report key."""
    source.mkdir(parents=True)
    snippets = {}
    for number, entry in enumerate(entries.values()):
        if limit is not None and number >= limit:
            break
        name = entry["file"] + ".gz"
        path = next((p for p in (pages_dir / "eval" / name, pages_dir / "cache" / name)
                     if p.exists()), None)  # fmt: skip
        if path is None:
            continue
        key = f"{number:04d}.html"
        (source / key).write_bytes(gzip.decompress(path.read_bytes()))
        snippets[key] = [s for s in entry.get("with") or [] if isinstance(s, str)]
    return snippets


def page_texts(db: Path) -> tuple[dict[str, str], dict[str, str | None], dict[int, str]]:
    conn = sqlite3.connect(db)
    texts: dict[str, list[str]] = defaultdict(list)
    for key, text in conn.execute(
        "SELECT r.key, c.text FROM chunks c JOIN reports r USING (report_id) "
        "ORDER BY r.key, c.position"
    ):
        texts[key].append(text)
    languages = dict(
        conn.execute("SELECT r.key, d.language FROM documents d JOIN reports r USING (report_id)")
    )
    keys = dict(conn.execute("SELECT report_id, key FROM reports"))
    conn.close()
    return {key: "\n".join(parts) for key, parts in texts.items()}, languages, keys


def choose_queries(
    texts: dict[str, str], snippets: dict[str, list[str]], *, rare_only: bool = True
) -> dict[str, str]:
    """Each page's rarest must-have snippet that the stored page holds, as a query.

    A snippet is rare when at least half of its distinct words stand in no
    more than ``RARE_SHARE`` of the pages; a page with no rare snippet has
    no query (unless ``rare_only`` is off: then its rarest snippet is taken).
    """
    page_tokens = {key: set(tokens(text)) for key, text in texts.items()}
    document_frequency: Counter[str] = Counter()
    for words in page_tokens.values():
        document_frequency.update(words)
    total = len(page_tokens)
    chosen = {}
    for key, candidates in snippets.items():
        held = page_tokens.get(key)
        if not held:
            continue
        best, best_score = None, -1.0
        for snippet in candidates:
            words = set(tokens(snippet))
            if len(tokens(snippet)) < 3 or len(words & held) < 0.8 * len(words):
                continue
            rare = sum(1 for w in words if document_frequency.get(w, 0) <= RARE_SHARE * total)
            if rare_only and rare < len(words) / 2:
                continue
            score = sum(math.log(total / document_frequency.get(w, 1)) for w in words) / len(words)
            if score > best_score:
                best, best_score = snippet, score
        if best is not None:
            chosen[key] = fit(best)
    return chosen


def english_copy(db: Path, copy: Path) -> Store:
    """A copy of the store with every document set to English, its index rebuilt."""
    source, target = sqlite3.connect(db), sqlite3.connect(copy)
    source.backup(target)
    source.close()
    target.execute("UPDATE documents SET language = 'en'")
    target.commit()
    target.close()
    # The file keeps a copy of the index (``index_files``), which opening the
    # copy would unpack as it is: every page would still be searched in its
    # own language. Rebuilt from the chunks, it is analysed as English.
    store = Store(copy, progress=False)
    store.rebuild_index()
    return store


#: Seconds each search took, by store ("lang" or "en").
TIMES: dict[str, list[float]] = defaultdict(list)


def rank_of(
    store: Store, query: str, wanted: Any, keys: dict[int, str], mode: str = ""
) -> int | None:
    """The rank (1-based) of the first hit that ``wanted(hit, key)`` accepts, in the top 10."""
    started = time.perf_counter()
    answer = store.call("research_chunk_search", {"query": query, "limit": 10})
    if mode:
        TIMES[mode].append(time.perf_counter() - started)
    if "result" not in answer:
        raise SystemExit(f"search failed for {query!r}: {answer}")
    for rank, hit in enumerate(answer["result"]["hits"], start=1):
        if wanted(hit, keys[hit["report_id"]]):
            return rank
    return None


def language_of(tag: str | None) -> str:
    return tag.split("-")[0].lower() if tag else "und"


def run_pages(workdir: Path, limit: int | None) -> tuple[list[list[str]], list[list[str]], float]:
    folder = eval_dir("html", "trafilatura_eval")
    entries = json.loads((folder / "evaldata.json").read_text(encoding="utf-8"))
    source = workdir / "pages"
    snippets = write_pages(entries, folder / "pages", source, limit)
    started = time.perf_counter()
    db = workdir / "pages.db"
    with Store(db, progress=False) as store:
        store.ingest(source, name="pages", progress=False)
    ingest_seconds = time.perf_counter() - started
    texts, languages, keys = page_texts(db)
    queries = choose_queries(texts, snippets)
    results: dict[str, dict[str, list[int | None]]] = {"lang": {}, "en": {}}
    chinese: dict[str, dict[str, list[int | None]]] = {"lang": {}, "en": {}}
    # Inside runs of Chinese must-have snippets the page holds: three or four
    # characters from the middle of each run of six or more (three a page).
    chinese_queries: list[tuple[str, str]] = []
    for key, candidates in snippets.items():
        if language_of(languages.get(key)) != "zh":
            continue
        runs = [run for snippet in candidates for run in _CJK.findall(snippet)]
        runs = [run for run in dict.fromkeys(runs) if len(run) >= 6 and run in texts.get(key, "")]
        for run in runs[:3]:
            middle = len(run) // 2
            chinese_queries.append((key, run[middle - 2 : middle + 1 + len(run) % 2]))
    for mode in ("lang", "en"):
        opened = (
            Store(db, progress=False) if mode == "lang" else english_copy(db, workdir / "en.db")
        )
        with opened as store:
            for key, query in queries.items():
                rank = rank_of(store, query, lambda hit, k, key=key: k == key, keys, mode)
                results[mode].setdefault(language_of(languages.get(key)), []).append(rank)
            for key, query in chinese_queries:
                rank = rank_of(store, query, lambda hit, k, key=key: k == key, keys)
                chinese[mode].setdefault("zh", []).append(rank)
    counts = Counter(language_of(languages.get(key)) for key in queries)
    groups = [lang for lang, n in counts.most_common() if n >= MIN_PAGES]
    rows = []
    for group in [*groups, "other", "all"]:
        members = (
            [lang for lang in counts if lang not in groups]
            if group == "other"
            else list(counts)
            if group == "all"
            else [group]
        )
        row = [group, str(sum(counts[lang] for lang in members))]
        for mode in ("lang", "en"):
            ranks = [rank for lang in members for rank in results[mode].get(lang, [])]
            row += [rate(ranks, 1), rate(ranks, 10)]
        if row[1] != "0":
            rows.append(row)
    chinese_rows = []
    if chinese_queries:
        row = ["zh, 3-4 characters in a run", str(len(chinese_queries))]
        for mode in ("lang", "en"):
            row += [rate(chinese[mode]["zh"], 1), rate(chinese[mode]["zh"], 10)]
        chinese_rows.append(row)
    print(
        f"pages: {len(snippets)} written, {len(texts)} stored with text, {len(queries)} with a "
        f"query; ingest {ingest_seconds:.1f} s"
    )
    return rows, chinese_rows, ingest_seconds


def run_norwegian(workdir: Path) -> list[str]:
    source = REPO_ROOT / "fixtures" / "source"
    db = workdir / "fixtures.db"
    with Store(db, progress=False) as store:
        store.ingest(source, name="fixtures", progress=False)
    return run_queries(
        db, workdir / "fx-en.db", "nb fixtures, other inflections",
        [(query, lambda hit, key, marker=marker: marker in hit["text"].lower())
         for query, marker in NORWEGIAN],
    )  # fmt: skip


def run_chinese(workdir: Path) -> list[str]:
    source = workdir / "chinese"
    source.mkdir()
    for name, text in CHINESE_NOTES.items():
        (source / f"{name}.txt").write_text(text, encoding="utf-8")
    db = workdir / "chinese.db"
    with Store(db, progress=False) as store:
        store.ingest(source, name="chinese", progress=False)
    return run_queries(
        db, workdir / "zh-en.db", "zh notes, words inside runs",
        [(word, lambda hit, key, name=name: key == f"{name}.txt") for word, name in CHINESE_WORDS],
    )  # fmt: skip


def run_queries(db: Path, copy: Path, label: str, queries: list[tuple[str, Any]]) -> list[str]:
    _, _, keys = page_texts(db)
    row = [label, str(len(queries))]
    for mode in ("lang", "en"):
        opened = Store(db, progress=False) if mode == "lang" else english_copy(db, copy)
        with opened as store:
            ranks = [rank_of(store, query, wanted, keys) for query, wanted in queries]
        row += [rate(ranks, 1), rate(ranks, 10)]
    return row


def rate(ranks: list[int | None], depth: int) -> str:
    return percent(sum(1 for rank in ranks if rank is not None and rank <= depth), len(ranks))


def print_table(rows: list[list[str]]) -> None:
    header = ["language", "queries", "rank 1", "top 10", "rank 1 (en)", "top 10 (en)"]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, help="only the first N pages (a quick run)")
    parser.add_argument("--workdir", type=Path, help="keep the stores here (must not exist)")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="rs-known-item-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        rows, chinese_rows, _ = run_pages(workdir, args.pages)
        norwegian = run_norwegian(workdir)
        chinese = run_chinese(workdir)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print("(en): every document analysed as English, as before languages were told apart")
    print_table([*rows, *chinese_rows, norwegian, chinese])
    latency = ", ".join(
        f"{mode} {1000 * sorted(times)[len(times) // 2]:.2f} ms" for mode, times in TIMES.items()
    )
    print(f"search p50 on the pages: {latency}")
    print(f"in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
