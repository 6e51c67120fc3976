"""A reader that calls the read tools in a loop while another process writes.

Usage: ``reader.py STORE STOP_FILE SECONDS``. Prints ``ready`` once the store
is open, then searches, reads chunks, reports, document windows and
neighbours until ``STOP_FILE`` exists or ``SECONDS`` pass. Every text carries
its generation (``genN``); whatever one call returns about one report must be
of one generation. At the end it prints ``{"stats": ..., "problems": [...]}``.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import time
from typing import Any

from researchstore import Store

MARK = re.compile(r"\bgen(\d+)\b")


def generations(*texts: str | None) -> set[int]:
    return {int(number) for text in texts for number in MARK.findall(text or "")}


class Reader:
    """The tool calls, what they saw, and anything that broke the rules."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.stats: dict[str, Any] = {
            "calls": 0,
            "searches": 0,
            "searches_with_hits": 0,
            "gets_after_search": 0,
            "get_misses": 0,
            "documents_read": 0,
            "document_misses": 0,
            "neighbors_read": 0,
            "neighbor_misses": 0,
            "generations": set(),
        }
        self.problems: list[Any] = []
        self.rng = random.Random(7)
        self.report_ids = [row[0] for row in store._conn.execute("SELECT report_id FROM reports")]

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        self.stats["calls"] += 1
        envelope = self.store.call(name, arguments)
        if set(envelope) != {"result"}:
            self.problems.append([name, arguments, envelope])
            return None
        return envelope["result"]

    def one_generation(self, what: Any, texts: list[str], wanted: int | None = None) -> int | None:
        seen = generations(*texts)
        if len(seen) != 1 or (wanted is not None and seen != {wanted}):
            self.problems.append([what, sorted(seen), wanted])
            return None
        self.stats["generations"].update(seen)
        return seen.pop()

    def round(self) -> None:
        """One search, the chunks it found, one report and its documents."""
        stats, rng = self.stats, self.rng
        result = self.call("research_chunk_search", {"query": "zebrafish", "limit": 50})
        hits = result["hits"] if result is not None else []
        stats["searches"] += 1
        stats["searches_with_hits"] += bool(hits)
        by_report: dict[int, list[str]] = {}
        for hit in hits:
            by_report.setdefault(hit["report_id"], []).append(hit["text"])
        for report_id, texts in by_report.items():
            self.one_generation(["search", report_id], texts)
        for hit in hits[:5]:
            got = self.call("research_get_chunk", {"chunk_id": hit["chunk_id"]})
            if got is None:
                continue
            stats["gets_after_search"] += 1
            if got["chunk"] is None:
                stats["get_misses"] += 1
            elif got["chunk"]["text"] != hit["text"]:
                self.problems.append(["get_chunk differs from its hit", hit["chunk_id"]])
        found = self.call("research_get_report", {"report_id": rng.choice(self.report_ids)})
        if found is None:
            return
        report = found["report"]
        if report is None or len(report["documents"]) != 2:
            self.problems.append(["report", report])
            return
        titles = [report["title"]] + [doc["title"] for doc in report["documents"]]
        generation = self.one_generation(["report", report["report_id"]], titles)
        for document in report["documents"]:
            self.read_document(document["document_id"], generation)

    def read_document(self, document_id: str, generation: int | None) -> None:
        stats = self.stats
        window = self.call("get_document_chunks", {"id": document_id, "limit": 100})
        if window is None:
            return
        if not window["found"]:
            stats["document_misses"] += 1
            return
        stats["documents_read"] += 1
        if window["total_chunks"] != len(window["chunks"]) or not window["chunks"]:
            self.problems.append(["document window", window["total_chunks"], len(window["chunks"])])
            return
        self.one_generation(
            ["document", document_id], [c["text"] for c in window["chunks"]], generation
        )
        anchor = self.rng.choice(window["chunks"])["chunk_id"]
        around = self.call("get_chunk_neighbors", {"id": anchor, "count": 100})
        if around is None:
            return
        if around["chunk"] is None:
            stats["neighbor_misses"] += 1
            return
        stats["neighbors_read"] += 1
        texts = [c["text"] for c in [*around["prev"], around["chunk"], *around["next"]]]
        self.one_generation(["neighbors", anchor], texts, generation)


def main(argv: list[str]) -> None:
    db, stop, seconds = argv
    reader = Reader(Store(db, progress=False))
    print("ready", flush=True)
    # The limit only ends a reader whose test has gone; the test stops it with STOP_FILE.
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline and not os.path.exists(stop):
        reader.round()
    reader.stats["generations"] = sorted(reader.stats["generations"])
    print(json.dumps({"stats": reader.stats, "problems": reader.problems[:10]}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
