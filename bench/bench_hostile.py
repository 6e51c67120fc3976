#!/usr/bin/env python
"""Hostile inputs, faults and clients against one store: how many cases hold.

    python bench/bench_hostile.py [--workdir DIR] [--keep] [--big-mb 60] [--costly]

Runs every case of the hardening list through the real command line (and a
real HTTP server on loopback), as a careless operator or a hostile user
would, against one store that also holds a set of good reports. Destructive
cases (an emptied or overwritten store file, a damaged index, a full disk)
work on copies. After each case the store must still answer; at the end
``researchstore check`` must say it is consistent and every good report must
still be found. The last line says how many cases held.

It is a bench, not a test: it builds inputs of tens of megabytes and takes a
few minutes. Every case has a bounded test in the suite as well.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

CLI = [sys.executable, "-m", "researchstore"]
GOOD_WORDS = ("lindenpollen", "oxbowlake", "quarrymoss", "heathfire", "saltmarsh")


@dataclass
class Outcome:
    held: bool
    detail: str


def run(*args: str, timeout: float = 300, env: dict[str, str] | None = None, **kw: Any) -> Any:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "RESEARCHSTORE_EGRESS": "off", **(env or {})},
        **kw,
    )


def clean(result: Any) -> bool:
    """No Python traceback reached the operator."""
    return "Traceback (most recent call last)" not in (result.stderr or "")


def write_report(root: Path, key: str, text: str, **meta: Any) -> Path:
    folder = root / key
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps({"title": key, "date": "2026-05-01", **meta}))
    (folder / "notes.txt").write_text(text)
    return folder


def hits(db: Path, query: str, **args: Any) -> list[dict[str, Any]] | None:
    """The search's hits for ``query``'s words (keyword mode unless ``args`` say
    otherwise: by meaning every store has a nearest chunk, so "not found"
    can only be asked of words)."""
    args.setdefault("mode", "keyword")
    result = run("call", str(db), "research_chunk_search", json.dumps({"query": query, **args}))
    try:
        envelope = json.loads(result.stdout)
    except ValueError:
        return None
    if "result" not in envelope:
        return None
    found: list[dict[str, Any]] = envelope["result"]["hits"]
    return found


def consistent(db: Path) -> bool:
    result = run("check", str(db))
    try:
        return bool(json.loads(result.stdout).get("consistent"))
    except ValueError:
        return False


class Bench:
    def __init__(self, workdir: Path, big_mb: int) -> None:
        self.work = workdir
        self.big_mb = big_mb
        self.db = workdir / "store.db"
        self.good = workdir / "good"
        self.results: list[tuple[str, Outcome]] = []

    def case(self, name: str, body: Callable[[], Outcome]) -> None:
        started = time.perf_counter()
        try:
            outcome = body()
        except Exception as error:  # a case that blows up did not hold
            outcome = Outcome(False, f"{type(error).__name__}: {error}"[:300])
        seconds = time.perf_counter() - started
        mark = "held  " if outcome.held else "FAILED"
        print(f"{mark} {name:<58} {seconds:6.1f}s  {outcome.detail}", flush=True)
        self.results.append((name, outcome))

    def source(self, name: str) -> Path:
        path = self.work / "sources" / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def copy_store(self, name: str) -> Path:
        folder = self.work / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        for path in self.work.glob("store.db*"):
            target = folder / path.name
            if path.is_dir():
                shutil.copytree(path, target)
            else:
                shutil.copy2(path, target)
        return folder / "store.db"

    # -- the store every case runs against ---------------------------------

    def setup(self) -> None:
        for number, word in enumerate(GOOD_WORDS):
            text = "\n\n".join(
                f"Paragraph {k}: the {word} survey counted plots along transect {number}." * 3
                for k in range(20)
            )
            write_report(self.good, f"field/{word}", text, tags={"audience": "students"})
        result = run("ingest", str(self.db), str(self.good), "--name", "good")
        assert result.returncode == 0, result.stderr

    def good_still_found(self) -> bool:
        return all(
            (found := hits(self.db, word)) and any(word in hit["text"] for hit in found)
            for word in GOOD_WORDS
        )

    # -- 1. report ids ------------------------------------------------------

    def report_ids(self) -> Outcome:
        root = self.source("ids")
        write_report(root, "sqlite-max", "Idcase one.", id=9223372036854775807)
        write_report(root, "beyond", "Idcase two.", id=1180591620717411303424)
        write_report(root, "fine", "Idcase three.")
        first = run("ingest", str(self.db), str(root), "--name", "ids")
        later = self.source("after-ids")
        write_report(later, "later", "Afterids report.")
        second = run("ingest", str(self.db), str(later), "--name", "after-ids")
        held = (
            first.returncode == 1
            and clean(first)
            and second.returncode == 0
            and bool(hits(self.db, "idcase"))
            and bool(hits(self.db, "afterids"))
        )
        return Outcome(
            held,
            f"bad ids fail alone (exit {first.returncode}); later run exit {second.returncode}",
        )

    # -- 2. inputs that stopped every run ----------------------------------

    def bad_names_and_deep_json(self) -> Outcome:
        root = self.source("names")
        write_report(root, "plain", "Namecase plain report.")
        bad = os.fsencode(root) + b"/caf\xe9.txt"
        with open(bad, "wb") as handle:
            handle.write(b"Namecase latin one file.")
        deep = root / "deep"
        deep.mkdir()
        (deep / "report.json").write_text("[" * 100_000 + "]" * 100_000)
        (deep / "notes.txt").write_text("Namecase deep report.")
        result = run("ingest", str(self.db), str(root), "--name", "names")
        again = run("reingest", str(self.db), "--source", "names")
        found = hits(self.db, "namecase") or []
        held = (
            result.returncode == 1
            and clean(result)
            and clean(again)
            and again.returncode in (0, 1)
            and any("plain" in hit["title"] for hit in found)
        )
        return Outcome(
            held,
            f"ingest exit {result.returncode}, reingest exit "
            f"{again.returncode}, {len(found)} hits of the good report",
        )

    def unreadable_directory(self) -> Outcome:
        root = self.source("denied")
        write_report(root, "open", "Deniedcase open report.")
        write_report(root, "closed/inside", "Deniedcase closed report.")
        first = run("ingest", str(self.db), str(root), "--name", "denied")
        # Root is never refused a directory: refuse it at the OS boundary.
        closed = str(root / "closed")
        code = (
            "import os, sys\n"
            f"closed = {closed!r}\n"
            "real_scandir = os.scandir\n"
            "def scandir(path='.'):\n"
            "    if os.fspath(path) == closed:\n"
            "        raise PermissionError(13, 'Permission denied', os.fspath(path))\n"
            "    return real_scandir(path)\n"
            "os.scandir = scandir\n"
            "from researchstore.cli import main\n"
            f"sys.argv = ['researchstore', 'reingest', {str(self.db)!r}, '--source', 'denied']\n"
            "main()\n"
        )
        second = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
        )
        kept = hits(self.db, "deniedcase") or []
        held = (
            first.returncode == 0
            and clean(second)
            and second.returncode in (0, 1)
            and len({hit["report_id"] for hit in kept}) == 2
        )
        return Outcome(
            held,
            f"reingest exit {second.returncode}; reports under the "
            f"unreadable folder kept: {len(kept) >= 2}",
        )

    # -- 3. a source re-pointed in silence ---------------------------------

    def repointed_source(self) -> Outcome:
        first, second = self.work / "a" / "docs", self.work / "b" / "docs"
        write_report(first, "one", "Repointcase first root.")
        write_report(second, "two", "Repointcase second root.")
        a = run("ingest", str(self.db), str(first))
        b = run("ingest", str(self.db), str(second))
        again = run("reingest", str(self.db), "--source", "docs")
        found = hits(self.db, "repointcase") or []
        held = (
            a.returncode == 0
            and b.returncode == 2
            and str(first) in b.stderr
            and str(second) in b.stderr
            and any("first root" in hit["text"] for hit in found)
        )
        return Outcome(
            held,
            f"second root refused (exit {b.returncode}), reingest exit "
            f"{again.returncode}, first root's report kept",
        )

    # -- 4. an emptied store file -------------------------------------------

    def emptied_store(self) -> Outcome:
        db = self.copy_store("emptied")
        index = db.with_name(db.name + ".index")
        files_before = sorted(path.name for path in index.iterdir())
        for suffix in ("-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        db.write_bytes(b"")
        result = run("search", str(db), "lindenpollen")
        files_after = sorted(path.name for path in index.iterdir())
        held = result.returncode != 0 and clean(result) and files_before == files_after
        return Outcome(held, f"exit {result.returncode}: {result.stderr.strip()[:90]}")

    # -- 5, 6. index damage, panics ----------------------------------------

    def damaged_index(self) -> Outcome:
        details = []
        held = True
        for damage in ("meta.json gone", "segment list emptied", ".pos gone", "bytes flipped"):
            db = self.copy_store("damaged")
            index = db.with_name(db.name + ".index")
            if damage == "meta.json gone":
                (index / "meta.json").unlink()
            elif damage == "segment list emptied":
                meta = json.loads((index / "meta.json").read_text())
                meta["segments"] = []
                (index / "meta.json").write_text(json.dumps(meta))
            elif damage == ".pos gone":
                next(index.glob("*.pos")).unlink()
            else:
                for path in [*index.glob("*.store"), *index.glob("*.idx")]:
                    data = bytearray(path.read_bytes())
                    for offset in range(len(data) // 3, len(data) // 3 + 64):
                        data[offset] ^= 0xFF
                    path.write_bytes(bytes(data))
            searched = run("search", str(db), "lindenpollen", "--json")
            checked = run("check", str(db))
            repaired = run("rebuild-index", str(db))
            found = hits(db, "lindenpollen")
            ok = (
                clean(searched)
                and clean(checked)
                and repaired.returncode == 0
                and bool(found)
                and consistent(db)
                # what opening cannot see, check must: never "consistent" and wrong
                and (checked.returncode != 0 or bool(hits_from(searched)))
            )
            held = held and ok
            details.append(f"{damage}: {'ok' if ok else 'NOT HELD'}")
        return Outcome(held, "; ".join(details))

    # -- 7. a flood of tag values -------------------------------------------

    def tag_flood(self) -> Outcome:
        arguments = {"query": "survey", "tags": {"audience": ["students"] * 300_000}}
        started = time.perf_counter()
        result = run(
            "call", str(self.db), "research_chunk_search", "-", input=json.dumps(arguments)
        )
        seconds = time.perf_counter() - started
        held = result.returncode == 2 and clean(result)
        return Outcome(held, f"exit {result.returncode} in {seconds:.1f}s (invalid_input)")

    # -- 8, 15. the HTTP server ----------------------------------------------

    def http_server(self) -> Outcome:
        import httpx

        keys = []
        for label in ("flooder", "other"):
            made = run("keys", "create", str(self.db), "--label", label)
            keys.append(made.stdout.strip().splitlines()[-1])
        with socket.socket() as probe:
            probe.bind(("127.0.0.2", 0))
            port = probe.getsockname()[1]
        log = self.work / "access.log"
        server = subprocess.Popen(
            [*CLI, "serve", str(self.db), "--transport", "http", "--host", "127.0.0.2",
             "--port", str(port), "--access-log", str(log)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        url = f"http://127.0.0.2:{port}/mcp"
        hello = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
        headers = {"accept": "application/json, text/event-stream"}
        try:
            for _ in range(100):
                try:
                    httpx.get(url, timeout=0.5)
                    break
                except httpx.TransportError:
                    time.sleep(0.1)
            statuses: dict[int, int] = {}
            with httpx.Client(timeout=10) as client:
                for _ in range(300):
                    answer = client.post(url, json=hello, headers={**headers, "x-api-key": keys[0]})
                    statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1
                other = client.post(url, json=hello, headers={**headers, "x-api-key": keys[1]})
                # A client that goes away mid-request.
                with socket.create_connection(("127.0.0.2", port)) as gone:
                    gone.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.2\r\n"
                                 b"content-length: 100000\r\n\r\n{")  # fmt: skip
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                _, errors = server.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                _, errors = server.communicate()
        logged = log.read_text() if log.exists() else ""
        secret_leaked = any(key.rsplit("_", 1)[-1] in logged for key in keys)
        held = (
            other.status_code == 200
            and 421 not in statuses
            and "Traceback" not in errors
            and logged.count("\n") >= 300
            and not secret_leaked
        )
        return Outcome(
            held,
            f"flood statuses {statuses}; another key: {other.status_code}; "
            f"access-log lines {logged.count(chr(10))}; secret in log: {secret_leaked}",
        )

    def special_addresses(self) -> Outcome:
        blocked = []
        for url in ("https://[fec0::1]/notes", "https://[3fff::1]/notes",
                    "https://[fd00::1]/", "https://169.254.169.254/latest"):  # fmt: skip
            result = run("call", str(self.db), "research_evidence_retrieve", json.dumps({
                "url": url, "kind": "url_text",
                "workspace_id": "11111111-1111-4111-8111-111111111111",
                "mutation_id": f"22222222-2222-4222-8222-{len(blocked):012d}",
            }), env={"RESEARCHSTORE_EGRESS": "on"})  # fmt: skip
            try:
                retrieval = json.loads(result.stdout)["result"]["retrieval"]
            except (ValueError, KeyError):
                return Outcome(False, f"{url}: {result.stdout[:120]} {result.stderr[:120]}")
            blocked.append(retrieval["result"]["reason"] == "unsafe_url")
        return Outcome(all(blocked), f"refused before any socket: {sum(blocked)}/{len(blocked)}")

    # -- 9. a full disk -------------------------------------------------------

    def full_disk(self) -> Outcome:
        if shutil.which("unshare") is None:
            return Outcome(False, "unshare is missing: cannot mount a small filesystem here")
        mount = self.work / "small-disk"
        mount.mkdir(exist_ok=True)
        big = self.source("big-for-disk")
        for number in range(40):
            write_report(big, f"r{number}", f"Diskcase {number}. " + "Soil cores. " * 20_000)
        script = (
            f'mount -t tmpfs -o size=6m tmpfs "{mount}" && cp {self.db} "{mount}/s.db" && '
            f'{" ".join(CLI)} ingest "{mount}/s.db" "{big}" --name big > "{mount}.ingest" 2>&1; '
            f'echo "ingest exit $?" >> "{mount}.ingest"; '
            f'{" ".join(CLI)} search "{mount}/s.db" lindenpollen > "{mount}.search" 2>&1; '
            f'echo "search exit $?" >> "{mount}.search"'
        )
        subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            timeout=600, env={**os.environ, "RESEARCHSTORE_EGRESS": "off"},
        )  # fmt: skip
        ingest_log = Path(f"{mount}.ingest").read_text()
        search_log = Path(f"{mount}.search").read_text()
        held = (
            "Traceback" not in ingest_log
            and "ingest exit 0" not in ingest_log
            and "search exit 0" in search_log
            and "lindenpollen" in search_log.lower()
        )
        last = [line for line in ingest_log.splitlines() if line.startswith("Error")][-1:]
        return Outcome(held, f"{last[0][:90] if last else ingest_log[-90:]}; search works")

    # -- 10. a damaged store file ---------------------------------------------

    def corrupted_store(self) -> Outcome:
        db = self.copy_store("corrupted")
        size = db.stat().st_size
        with open(db, "r+b") as handle:
            for page in range(2, max(3, size // 4096), 3):
                handle.seek(page * 4096 + 100)
                handle.write(os.urandom(512))
        checked = run("check", str(db))
        searched = run("search", str(db), "lindenpollen")
        leftovers = [path.name for path in db.parent.iterdir() if ".rebuild-" in path.name]
        held = clean(checked) and checked.returncode != 0 and clean(searched) and not leftovers
        return Outcome(
            held,
            f"check exit {checked.returncode}; search exit "
            f"{searched.returncode}; rebuild folders left: {leftovers}",
        )

    # -- 11. killing a run ---------------------------------------------------

    def killed_runs(self) -> Outcome:
        big = self.source("many")
        for number in range(3000):
            write_report(big, f"r{number:04d}", f"Killcase {number}. " + "Moss plots. " * 600)
        details = []
        held = True
        for how in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
            db = self.copy_store(f"killed-{how.name}")
            child = subprocess.Popen(
                [*CLI, "ingest", str(db), str(big), "--name", "many"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                start_new_session=True,
            )  # fmt: skip
            assert child.stdout is not None
            child.stdout.readline()  # the first report is committed: the run is at work
            child.send_signal(how)
            _, errors = child.communicate(timeout=120)
            deadline = time.monotonic() + 20
            alive = True
            while alive and time.monotonic() < deadline:
                try:
                    os.killpg(child.pid, 0)
                    time.sleep(0.2)
                except ProcessLookupError:
                    alive = False
            expected = {signal.SIGKILL: -9, signal.SIGTERM: 143, signal.SIGINT: 130}[how]
            ok = not alive and child.returncode == expected and "Traceback" not in errors
            if not ok and alive:
                os.killpg(child.pid, signal.SIGKILL)
            ok = ok and consistent(db)
            held = held and ok
            details.append(f"{how.name}: exit {child.returncode}, left behind {alive}")
        return Outcome(held, "; ".join(details))

    # -- 12. logs and --only ---------------------------------------------------

    def logs(self) -> Outcome:
        root = self.source("logged")
        write_report(root, "one", "Logcase one.")
        plain = run("ingest", str(self.db), str(root), "--name", "logged")
        (root / "one" / "notes.txt").write_text("Logcase one, changed.")
        as_json = run("reingest", str(self.db), "--source", "logged", "--json")
        nothing = run("reingest", str(self.db), "--source", "logged", "--only", "no/such/report")
        events = [json.loads(line) for line in as_json.stdout.splitlines() if line.strip()]
        stamped = all(line[:4].isdigit() for line in plain.stdout.splitlines() if line.strip())
        modified = [event for event in events if event.get("event") == "modified"]
        held = stamped and bool(modified) and nothing.returncode == 2 and clean(nothing)
        return Outcome(
            held,
            f"timestamped lines: {stamped}; modified events: {len(modified)}; "
            f"--only naming nothing: exit {nothing.returncode}",
        )

    # -- 13. links out of a source --------------------------------------------

    def links_out(self) -> Outcome:
        root = self.source("linked")
        write_report(root, "report", "Linkcase inside.")
        secret = self.work / "outside-secret.txt"
        secret.write_text("Linksecretword stays outside.")
        (root / "shadow.txt").symlink_to(secret)
        result = run("ingest", str(self.db), str(root), "--name", "linked")
        held = (
            clean(result)
            and hits(self.db, "linksecretword") == []
            and bool(hits(self.db, "linkcase"))
        )
        return Outcome(held, f"exit {result.returncode}; the outside file was not read")

    # -- 14. limits ------------------------------------------------------------

    def limits(self) -> Outcome:
        root = self.source("huge")
        folder = root / "nospace"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.json").write_text('{"title": "No spaces"}')
        with open(folder / "run.txt", "w") as handle:
            for _ in range(self.big_mb):
                handle.write("x" * (1 << 20))
        result = run("ingest", str(self.db), str(root), "--name", "huge", timeout=1200)
        found = hits(self.db, "no spaces") or []
        longest = max((len(hit["text"]) for hit in found), default=0)
        captions = self.work / "big.srt"
        with open(captions, "w") as handle:
            for cue in range(300_000):
                start = cue * 2
                handle.write(
                    f"{cue + 1}\n{start // 3600:02d}:{start // 60 % 60:02d}:{start % 60:02d},000"
                    f" --> {start // 3600:02d}:{start // 60 % 60:02d}:{start % 60:02d},900\n"
                    f"Caption {cue} about the river survey and its moss plots.\n\n"
                )
        size = captions.stat().st_size
        code = (
            "import sys, resource\n"
            "from researchstore.ingest.parsers import parse_file\n"
            "def peak():\n"
            "    for line in open('/proc/self/status'):\n"
            "        if line.startswith('VmHWM'): return int(line.split()[1]) * 1024\n"
            "before = peak()\n"
            f"parse_file({str(captions)!r})\n"
            "print(peak() - before)\n"
        )
        measured = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=900
        )
        growth = int(measured.stdout.strip() or 10**12)
        too_big = self.work / "too-big.html"
        with open(too_big, "wb") as handle:
            handle.truncate(70 * 1024 * 1024)
        parsed = run("parse", str(too_big), "--json")
        held = (
            clean(result)
            and 0 < longest <= 16_384
            and growth <= 4 * size
            and "too_large" in parsed.stdout + parsed.stderr
        )
        return Outcome(
            held,
            f"{self.big_mb} MB without a space: longest hit {longest} chars; "
            f"{size / 1e6:.0f} MB SubRip peak {growth / size:.1f}x its size; "
            f"parse of 70 MB: too_large",
        )

    # -- 16. costly pages -------------------------------------------------------

    def costly_pages(self) -> Outcome:
        """Time and peak memory to prepare pages built to cost, per size; the time bound."""
        folder = self.work / "costly"
        folder.mkdir(exist_ok=True)
        print(f"       {'page':<44} {'MB':>6} {'seconds':>8} {'peak':>7}", flush=True)
        worst_seconds, worst_growth = 0.0, 0.0
        for name, build in COSTLY_PAGES:
            page = folder / name
            page.write_text(build())
            measured = prepare_cost(page)
            ratio = measured["growth"] / measured["bytes"]
            print(
                f"       {name:<44} {measured['bytes'] / 1e6:6.1f} {measured['seconds']:8.2f} "
                f"{ratio:6.1f}x  {measured['status']}",
                flush=True,
            )
            worst_seconds = max(worst_seconds, measured["seconds"])
            if name.startswith("sentences"):
                worst_growth = max(worst_growth, ratio)
        # The time bound: a page that takes longer than RESEARCHSTORE_PARSE_SECONDS
        # fails alone; the report beside it is stored.
        root = self.source("costly")
        (root / "beside.txt").write_text("The costlyneighbour report is stored.")
        crowded = f"<div {' '.join(f'a{n}' for n in range(256))}>cell</div>"
        (root / "slow.html").write_text(crowded * (16_000_000 // len(crowded)))
        result = run(
            "ingest", str(self.db), str(root), "--name", "costly", "--json",
            env={"RESEARCHSTORE_PARSE_SECONDS": "0.5"},
        )  # fmt: skip
        timed_out = "parse_timeout" in result.stdout and bool(hits(self.db, "costlyneighbour"))
        held = clean(result) and timed_out and worst_seconds < 10 and worst_growth <= 8
        return Outcome(
            held,
            f"slowest page {worst_seconds:.1f} s; sentences at most {worst_growth:.1f}x their "
            f"size; a page past 0.5 s: {'parse_timeout' if timed_out else 'NOT stopped'}",
        )

    # -- the end ----------------------------------------------------------------

    def finish(self) -> Outcome:
        held = consistent(self.db) and self.good_still_found()
        return Outcome(held, "check: consistent; every good report still found")


def _one_tag(count: int) -> str:
    return "<p " + " ".join(f'data-field-{n:06d}="value {n}"' for n in range(count)) + ">x"


def _crowded(mb: int, per_tag: int) -> str:
    tag = f"<div {' '.join(f'a{n}' for n in range(per_tag))}>cell</div>"
    return "<html><body>" + tag * (mb * 1_000_000 // len(tag)) + "</body></html>"


def _sentences(mb: int, html: bool) -> str:
    dots = ". " * (mb * 500_000)
    return f"<p>{dots}</p>" if html else dots


#: Pages built to cost (file name, its text): one tag of many attributes
#: (Lexbor compares each with every earlier one), pages of tags with the
#: most attributes kept and a few more, pages of one-character sentences.
COSTLY_PAGES: list[tuple[str, Callable[[], str]]] = [
    *(
        (f"attributes-{count}-on-one-tag.html", partial(_one_tag, count))
        for count in (10_000, 40_000, 100_000, 500_000)
    ),
    *(
        (f"crowded-{mb}mb-{count}-per-tag.html", partial(_crowded, mb, count))
        for mb in (2, 8)
        for count in (256, 300)
    ),
    *(
        (f"sentences-{mb}mb.{kind}", partial(_sentences, mb, kind == "html"))
        for mb in (1, 4, 10)
        for kind in ("html", "txt")
    ),
]

_PREPARE_COST = """
import json, sys, tempfile, time
from pathlib import Path
from researchstore.ingest.prepare import prepare_document
def peak():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM'):
            return int(line.split()[1]) * 1024
page = Path(sys.argv[1])
with tempfile.TemporaryDirectory() as folder:  # warm up: imports, models
    small = Path(folder) / ('small' + page.suffix)
    small.write_text('<p>A first sentence. And a second one.</p>')
    prepare_document(small.parent, small.name, 256)
before, started = peak(), time.perf_counter()
prepared = prepare_document(page.parent, page.name, 256)
print(json.dumps({'bytes': page.stat().st_size, 'growth': peak() - before,
                  'seconds': time.perf_counter() - started, 'status': prepared.status}))
"""


def prepare_cost(page: Path) -> dict[str, Any]:
    """Prepare ``page`` in a process of its own: its size, seconds, peak memory growth."""
    done = subprocess.run(
        [sys.executable, "-c", _PREPARE_COST, str(page)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        return {"bytes": page.stat().st_size, "growth": 10**12, "seconds": 10**6, "status": "died"}
    return dict(json.loads(done.stdout))


def hits_from(result: Any) -> list[Any]:
    try:
        return list(json.loads(result.stdout)["result"]["hits"])
    except (ValueError, KeyError, TypeError):
        return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, help="work here (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the workdir afterwards")
    parser.add_argument("--big-mb", type=int, default=60, help="size of the run without spaces")
    parser.add_argument("--costly", action="store_true", help="run case 16 (costly pages) only")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="researchstore-hostile-"))
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    bench = Bench(workdir, args.big_mb)
    try:
        bench.setup()
        cases: list[tuple[str, Callable[[], Outcome]]] = [
            ("1. report ids out of range", bench.report_ids),
            ("2. a name not UTF-8, report.json nested 100,000 deep", bench.bad_names_and_deep_json),
            ("2. a directory that cannot be read", bench.unreadable_directory),
            ("3. a second root under a taken source name", bench.repointed_source),
            ("4. a store file emptied beside its index", bench.emptied_store),
            ("5, 6. a damaged index (4 kinds)", bench.damaged_index),
            ("7. 300,000 tag values", bench.tag_flood),
            ("8, 15. a session flood, 127.0.0.2, a disconnect, the log", bench.http_server),
            ("9. a full disk", bench.full_disk),
            ("10. a store file with pages overwritten", bench.corrupted_store),
            ("11. SIGKILL, SIGTERM, SIGINT of a run", bench.killed_runs),
            ("12. logs, --json, --only naming nothing", bench.logs),
            ("13. a link to a file outside the source", bench.links_out),
            ("14. no spaces, a huge caption file, parse's size limit", bench.limits),
            ("15. special-purpose IPv6 and metadata addresses", bench.special_addresses),
            ("16. costly pages: attributes, sentences, a file past its time", bench.costly_pages),
        ]
        if args.costly:
            cases = cases[-1:]
        for name, body in cases:
            bench.case(name, body)
            if not bench.good_still_found():
                print(f"       the good reports are no longer all found after {name!r}")
        bench.case("the store at the end", bench.finish)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    held = sum(outcome.held for _, outcome in bench.results)
    print(f"hostile-input bench: {held} of {len(bench.results)} cases held")
    sys.exit(0 if held == len(bench.results) else 1)


if __name__ == "__main__":
    main()
