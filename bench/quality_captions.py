#!/usr/bin/env python
"""Caption parsing quality on the vtt.js test suite and the webvtt-py samples.

    .venv/bin/python bench/quality_captions.py [--show 20] [--timeout 10]

Data under ``../shared/eval/captions/``:

- ``vtt_js/manifest.json``: 266 cases, each a ``.vtt`` file and the cues
  vtt.js expects (``X.json``), or a parsing error. A case is exact when the
  cue count, every start and end time (within 1 ms) and every cue text
  match. Expected texts are read as vtt.js reads them (tags stripped; its
  ``&amp; &lt; &gt; &lrm; &rlm; &nbsp;`` decoded); texts are compared line by
  line with runs of whitespace collapsed. Expected cues without text are not
  counted (ingest stores text; a cue with none has nothing to store). A case
  that expects a parsing error passes when the file is rejected.
- the same cases again in legacy encodings (cp1252, or UTF-16 with a BOM
  where cp1252 cannot hold the text), made in memory at run time;
- ``webvtt_py_samples/``: the files webvtt-py 0.6.0 ships, checked against
  what its own tests assert (cue counts, times, texts, rejections).

Every file is parsed in a worker process with a per-file timeout, so a hang
or a crash is counted, not suffered. Parsers: researchstore (``parse_file``,
as ingest reads a file) and the baseline of webvtt-py alone (``webvtt.read``
for ``.vtt``, ``from_srt``/``from_sbv``; ``pysrt.open`` for ``.srt`` in the
legacy pass), in the same run.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quality_common import eval_dir, percent

#: vtt.js's cue-text escapes (lib/vtt.js, ``ESCAPE``): nothing else is decoded.
_VTTJS_ESCAPES = {
    "&amp;": "&", "&lt;": "<", "&gt;": ">",
    "&lrm;": "\u200e", "&rlm;": "\u200f", "&nbsp;": "\u00a0",
}  # fmt: skip
_VTTJS_ESCAPE = re.compile("|".join(map(re.escape, _VTTJS_ESCAPES)))
# vtt.js reads "<" up to the next ">" (or the end) as a tag.
_VTTJS_TAG = re.compile(r"<[^>]*>?")

Cue = tuple[int, int, str]


# -- reference texts ---------------------------------------------------------------


def vttjs_text(raw: str) -> str:
    """A cue's text as vtt.js shows it: tags dropped, its escapes decoded."""
    return _VTTJS_ESCAPE.sub(lambda match: _VTTJS_ESCAPES[match.group()], _VTTJS_TAG.sub("", raw))


def normalize_text(text: str) -> str:
    lines = (" ".join(line.split()) for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def compare(got: list[Cue], expected: list[Cue]) -> str | None:
    """None when the cues agree, else what differs first."""
    expected = sorted(
        ((start, end, normalize_text(text)) for start, end, text in expected),
        key=lambda cue: cue[0],
    )
    expected = [cue for cue in expected if cue[2]]
    got = [(start, end, normalize_text(text)) for start, end, text in got]
    if len(got) != len(expected):
        return f"{len(got)} cues, expected {len(expected)}"
    for index, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        if abs(mine[0] - theirs[0]) > 1 or abs(mine[1] - theirs[1]) > 1:
            return f"cue {index}: times {mine[:2]} != {theirs[:2]}"
        if mine[2] != theirs[2]:
            return f"cue {index}: text {mine[2]!r} != {theirs[2]!r}"
    return None


# -- parsers (run in the worker) -----------------------------------------------------


def parse_researchstore(name: str, data: bytes) -> dict[str, Any]:
    from researchstore.ingest.parsers import parse_file

    try:
        doc = parse_file(Path(name), data=data)
    except ValueError as error:  # an unsupported suffix
        return {"status": "rejected", "reason": str(error), "cues": []}
    cues = [(s.start_ms, s.end_ms, s.text) for s in doc.segments]
    status = "ok" if doc.status in ("ok", "partial") and cues else "rejected"
    reason = f"{doc.status}/{doc.reason}" + (f": {doc.skipped[0]}" if doc.skipped else "")
    return {"status": status, "reason": reason, "cues": cues}


def parse_webvtt_py(name: str, data: bytes) -> dict[str, Any]:
    """webvtt-py alone (pysrt for ``.srt``), reading a file as a user would."""
    import pysrt
    import webvtt

    suffix = Path(name).suffix.lower()
    with tempfile.NamedTemporaryFile(suffix=suffix) as handle:
        handle.write(data)
        handle.flush()
        try:
            if suffix == ".srt":
                items = pysrt.open(handle.name)
                cues = [(item.start.ordinal, item.end.ordinal, item.text) for item in items]
            else:
                reader = webvtt.from_sbv if suffix == ".sbv" else webvtt.read
                captions = reader(handle.name)
                cues = [
                    (c.start_time.in_milliseconds(), c.end_time.in_milliseconds(), c.text)
                    for c in captions
                ]
        except Exception as error:
            return {"status": "rejected", "reason": f"{type(error).__name__}: {error}"[:200],
                    "cues": []}  # fmt: skip
    return {"status": "ok", "reason": "", "cues": cues}


def parse_webvtt_py_vtt_only(name: str, data: bytes) -> dict[str, Any]:
    """webvtt-py for every format it reads (``from_srt`` for SubRip)."""
    import webvtt

    suffix = Path(name).suffix.lower()
    reader = {".srt": webvtt.from_srt, ".sbv": webvtt.from_sbv}.get(suffix, webvtt.read)
    with tempfile.NamedTemporaryFile(suffix=suffix) as handle:
        handle.write(data)
        handle.flush()
        try:
            captions = reader(handle.name)
        except Exception as error:
            return {"status": "rejected", "reason": f"{type(error).__name__}: {error}"[:200],
                    "cues": []}  # fmt: skip
    cues = [
        (c.start_time.in_milliseconds(), c.end_time.in_milliseconds(), c.text) for c in captions
    ]
    return {"status": "ok", "reason": "", "cues": cues}


PARSERS: dict[str, Callable[[str, bytes], dict[str, Any]]] = {
    "researchstore": parse_researchstore,
    "webvtt-py": parse_webvtt_py,
    "webvtt-py (from_srt)": parse_webvtt_py_vtt_only,
}


def _serve(connection: Connection) -> None:
    while True:
        request = connection.recv()
        if request is None:
            return
        parser, name, data = request
        try:
            result = PARSERS[parser](name, data)
        except BaseException as error:
            result = {"status": "crash", "reason": f"{type(error).__name__}: {error}"[:300],
                      "cues": []}  # fmt: skip
        connection.send(result)


class Worker:
    """A child process that parses one file at a time, killed and replaced on a hang."""

    def __init__(self) -> None:
        self._context = multiprocessing.get_context("fork")
        self._start()

    def _start(self) -> None:
        self._connection, child = self._context.Pipe()
        self._process = self._context.Process(target=_serve, args=(child,), daemon=True)
        self._process.start()

    def parse(self, parser: str, name: str, data: bytes, timeout: float) -> dict[str, Any]:
        self._connection.send((parser, name, data))
        if self._connection.poll(timeout):
            try:
                return self._connection.recv()
            except EOFError:
                pass  # the worker died (a segfault, say)
            else:
                return {}
            self._process.join()
            self._start()
            return {"status": "crash", "reason": "the process died", "cues": []}
        self._process.kill()
        self._process.join()
        self._start()
        return {"status": "hang", "reason": f"no answer within {timeout:g} s", "cues": []}

    def close(self) -> None:
        self._connection.send(None)
        self._process.join(5)


# -- the suites ---------------------------------------------------------------------


@dataclass(slots=True)
class Case:
    name: str
    file_name: str
    data: bytes
    #: Expected cues, or None when the file must be rejected.
    expected: list[Cue] | None
    #: For the webvtt-py samples: a check of the result instead of cues.
    check: Callable[[dict[str, Any]], str | None] | None = None


@dataclass(slots=True)
class Tally:
    exact: int = 0
    total: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    misses: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0


def vttjs_cases(root: Path) -> list[Case]:
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    cases = []
    for entry in manifest:
        path = root / entry["vtt"]
        expected = None
        if entry["method"] != "expectParsingError":
            cues = json.loads((root / entry["expected_json"]).read_text(encoding="utf-8"))["cues"]
            expected = [
                (round(cue["startTime"] * 1000), round(cue["endTime"] * 1000),
                 vttjs_text(cue["text"]))
                for cue in cues
            ]  # fmt: skip
        cases.append(Case(entry["vtt"], path.name, path.read_bytes(), expected))
    return cases


#: Legacy code pages, tried in order: the first that holds a file's text is used.
LEGACY_ENCODINGS = (
    "cp1252", "cp1251", "cp1253", "cp1255", "cp1256", "cp874", "shift_jis", "gbk", "cp949",
)  # fmt: skip


def legacy_cases(cases: list[Case]) -> list[Case]:
    """Non-ASCII cases in the legacy code page of their script, without a BOM.

    A text no single code page holds (several scripts at once) goes as UTF-16
    with a BOM. ASCII-only files are the same bytes in any of these: left out.
    """
    out = []
    for case in cases:
        try:
            text = case.data.decode("utf-8-sig")
        except UnicodeDecodeError:
            continue  # not UTF-8 to begin with: nothing to re-encode
        if text.isascii():
            continue
        for label in LEGACY_ENCODINGS:
            try:
                data = text.encode(label)
            except UnicodeEncodeError:
                continue
            break
        else:
            data, label = text.encode("utf-16"), "utf-16"
        out.append(
            Case(f"{case.name} [{label}]", case.file_name, data, case.expected, check=case.check)
        )
    return out


def _timestamp_ms(value: str) -> int:
    parts = value.split(":")
    seconds = (
        float(parts[-1]) + 60 * int(parts[-2]) + (3600 * int(parts[-3]) if len(parts) > 2 else 0)
    )
    return round(seconds * 1000)


def sample_check(assertions: list[dict[str, Any]]) -> Callable[[dict[str, Any]], str | None]:
    """A check built from what webvtt-py's own tests assert of one sample file."""

    def check(result: dict[str, Any]) -> str | None:
        cues = result["cues"]
        for assertion in assertions:
            if assertion.get("strict"):
                continue  # strict mode rejects what a store should read
            if "raises" in assertion:
                if result["status"] == "ok":
                    return f"accepted; webvtt-py raises {assertion['raises']}"
                continue
            if result["status"] != "ok":
                return f"rejected: {result['reason']}"
            count = assertion.get("caption_count")
            # Cues without text hold nothing to store: they are not segments,
            # and the cues after them move up.
            empty = [
                int(match.group(1))
                for key, value in assertion.items()
                if value == "" and (match := re.fullmatch(r"captions\[(\d+)\]\.text", key))
            ]
            if count is not None and len(cues) != count - len(empty):
                return f"{len(cues)} cues, expected {count - len(empty)}"
            for key, value in assertion.items():
                match = re.fullmatch(r"captions\[(-?\d+)\]\.(start|end|text|lines)", key)
                if match is None or int(match.group(1)) in empty:
                    continue
                index = int(match.group(1))
                if index >= 0:
                    index -= sum(1 for position in empty if position < index)
                if not -len(cues) <= index < len(cues):
                    return f"no cue {index}"
                start, end, text = cues[index]
                field_name = match.group(2)
                if field_name in ("start", "end"):
                    got = start if field_name == "start" else end
                    if abs(got - _timestamp_ms(value)) > 1:
                        return f"{key}: {got} ms != {value}"
                else:
                    wanted = "\n".join(value) if field_name == "lines" else value
                    if normalize_text(text) != normalize_text(wanted):
                        return f"{key}: {text!r} != {wanted!r}"
        return None

    return check


def sample_cases(root: Path) -> list[Case]:
    expected = json.loads((root / "expected_webvtt_py_0.6.0.json").read_text(encoding="utf-8"))
    cases = []
    for path in sorted((root / "samples").iterdir()):
        assertions = expected.get(path.name, [])
        cases.append(
            Case(path.name, path.name, path.read_bytes(), None, check=sample_check(assertions))
        )
    return cases


def run_suite(worker: Worker, parser: str, cases: list[Case], timeout: float) -> Tally:
    tally = Tally()
    started = time.perf_counter()
    for case in cases:
        result = worker.parse(parser, case.file_name, case.data, timeout)
        tally.total += 1
        tally.outcomes[result["status"]] += 1
        if result["status"] in ("crash", "hang"):
            problem: str | None = f"{result['status']}: {result['reason']}"
        elif case.check is not None:
            problem = case.check(result)
        elif case.expected is None:
            problem = None if result["status"] != "ok" else "accepted; a parsing error expected"
        elif result["status"] != "ok":
            expected_cues = [cue for cue in case.expected if normalize_text(cue[2])]
            problem = None if not expected_cues else f"rejected: {result['reason']}"
        else:
            problem = compare(result["cues"], case.expected)
        if problem is None:
            tally.exact += 1
        else:
            tally.misses.append((case.name, problem))
    tally.seconds = time.perf_counter() - started
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show", type=int, default=10, help="list up to N misses per suite")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per file")
    args = parser.parse_args()

    root = eval_dir("captions")
    vttjs = vttjs_cases(root / "vtt_js")
    samples = sample_cases(root / "webvtt_py_samples")
    suites = {
        "vtt.js cases": vttjs,
        "webvtt-py samples": samples,
        "legacy encodings": legacy_cases(vttjs) + legacy_cases(samples),
    }
    worker = Worker()
    try:
        print(
            f"{'suite':<26} {'parser':<21} {'exact':>13} {'crash':>6} {'hang':>5} {'rejected':>9}"
        )
        tallies: dict[tuple[str, str], Tally] = {}
        for suite, cases in suites.items():
            for name in ("researchstore", "webvtt-py"):
                tally = run_suite(worker, name, cases, args.timeout)
                tallies[suite, name] = tally
                print(
                    f"{suite:<26} {name:<21} "
                    f"{tally.exact:>4}/{tally.total:<3} {percent(tally.exact, tally.total):>5} "
                    f"{tally.outcomes['crash']:>6} {tally.outcomes['hang']:>5} "
                    f"{tally.outcomes['rejected']:>9}"
                )
    finally:
        worker.close()

    ours = tallies["vtt.js cases", "researchstore"]
    print(f"\nresearchstore: {ours.total / ours.seconds:.0f} vtt.js files/s (in a worker process)")
    for (suite, name), tally in tallies.items():
        if name != "researchstore" or not tally.misses or not args.show:
            continue
        print(f"\nresearchstore misses, {suite}:")
        for case_name, problem in tally.misses[: args.show]:
            print(f"  {case_name}: {problem}")
    print("\nresearchstore rejections (file: reason):")
    rejected = 0
    for suite, cases in suites.items():
        for case in cases:
            if suite == "legacy encodings":
                continue
            result = PARSERS["researchstore"](case.file_name, case.data)
            if result["status"] != "ok":
                rejected += 1
                if rejected <= 3 * args.show:
                    print(f"  {case.name}: {result['reason'] or '(no reason!)'}")
    missing_reason = [
        case.name
        for cases in suites.values()
        for case in cases
        if (r := PARSERS["researchstore"](case.file_name, case.data))["status"] != "ok"
        and not r["reason"]
    ]
    print(f"  {rejected} rejected, {len(missing_reason)} without a reason")


if __name__ == "__main__":
    main()
