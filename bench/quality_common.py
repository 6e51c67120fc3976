"""Shared helpers of the quality benches: where the evaluation data lives, timing.

The data is third-party and stays in ``../shared/eval/`` beside the clone; the
benches read it at run time and never copy it into the repository.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
EVAL = SHARED / "eval"


def eval_dir(*parts: str) -> Path:
    """The evaluation folder ``../shared/eval/<parts>``; exit with a message if absent."""
    path = EVAL.joinpath(*parts)
    if not path.exists():
        sys.exit(
            f"evaluation data not found: {path}\n"
            "The quality benches read ../shared/eval/ beside the repository clone; "
            "check it out there and run again."
        )
    return path


def percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"
