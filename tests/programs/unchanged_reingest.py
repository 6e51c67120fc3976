"""Run ``researchstore ARGS...`` in this process, then say which model modules it loaded.

Usage: ``unchanged_reingest.py ARGS...``. The command's own output comes
first; the last line is JSON: its exit code and which of torch and
sentence_transformers were imported.
"""

from __future__ import annotations

import json
import sys

from researchstore.cli import main


def run(argv: list[str]) -> None:
    try:
        main(argv, standalone_mode=False)
        code = 0
    except SystemExit as stop:
        code = int(stop.code or 0)
    loaded = sorted(name for name in ("torch", "sentence_transformers") if name in sys.modules)
    print(json.dumps({"exit": code, "loaded": loaded}))


if __name__ == "__main__":
    run(sys.argv[1:])
