"""A store on a disk that fills up: what each command says, then after space is freed.

Usage: ``disk_full.py FOLDER`` where FOLDER is a small filesystem of its own
(the test mounts a tmpfs there in a private mount namespace). The program
builds a store in FOLDER, leaves index work pending the way a crash does
(a re-ingest killed before its index commit), fills the disk, runs commands
as a user would, frees the space and runs some again. It prints one JSON
object: each step's name -> exit code, stdout and stderr.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from researchstore import Store

#: ``researchstore ARGS...`` as the tests start it (see ``cli.py`` beside this file).
CLI = [sys.executable, str(Path(__file__).with_name("cli.py"))]
CRASHING_REINGEST = [sys.executable, str(Path(__file__).with_name("crashing_reingest.py"))]


def paragraphs(report: int, version: int) -> str:
    return "\n\n".join(
        f"Varroa mite counts in hive {report} rose after brood cycle {number}, "
        f"survey round {version}. Foragers carried lime pollen home on day {number}."
        for number in range(40)
    )


def write_source(root: Path, version: int) -> None:
    for report in range(6):
        folder = root / f"hive-{report}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.json").write_text(
            json.dumps({"title": f"Hive {report}", "date": "2026-05-04", "tags": {}})
        )
        (folder / "notes.txt").write_text(paragraphs(report, version))


def fill(path: Path) -> None:
    """Write ``path`` until the disk refuses; the disk is small, so this ends soon."""
    with open(path, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError:
            pass


def run(*args: str) -> dict[str, Any]:
    result = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)
    return {"rc": result.returncode, "stdout": result.stdout, "stderr": result.stderr}


def main(argv: list[str]) -> None:
    (folder,) = (Path(arg) for arg in argv)
    root, db = folder / "source", folder / "r.db"
    write_source(root, 1)
    with Store(db, progress=False) as store:
        store.ingest(root, name="hives")
    write_source(root, 2)
    crashed = subprocess.run(
        [*CRASHING_REINGEST, str(db), "before_index_commit", "1", str(folder / "log"), "2", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    steps: dict[str, Any] = {"crash": {"rc": crashed.returncode, "stderr": crashed.stderr}}
    filler = folder / "filler"
    fill(filler)
    steps["full_search"] = run("search", str(db), "varroa mite", "--json")
    steps["full_get_chunk"] = run(
        "call", str(db), "research_get_chunk", json.dumps({"chunk_id": "none"})
    )
    steps["full_check"] = run("check", str(db))
    steps["full_reingest"] = run("reingest", str(db))
    steps["full_rebuild_index"] = run("rebuild-index", str(db))
    steps["full_leftovers"] = sorted(entry.name for entry in folder.iterdir())
    filler.unlink()
    steps["freed_search"] = run("search", str(db), "varroa mite", "--json")
    steps["freed_check"] = run("check", str(db))
    steps["freed_reingest"] = run("reingest", str(db))
    steps["freed_check_again"] = run("check", str(db))
    print(json.dumps(steps))


if __name__ == "__main__":
    main(sys.argv[1:])
