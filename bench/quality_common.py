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
    """The evaluation folder ``../shared/eval/<parts>``; without it, say so and exit (0).

    Missing third-party data is not a failure of the code: the bench skips.
    """
    path = EVAL.joinpath(*parts)
    if not path.exists():
        print(
            f"skipped: evaluation data not found at {path}\n"
            "The quality benches read ../shared/eval/ beside the repository clone; "
            "put it there and run again.",
            file=sys.stderr,
        )
        sys.exit(0)
    return path


def percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"
