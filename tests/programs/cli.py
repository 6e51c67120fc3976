"""The ``researchstore`` command line, started the way a fresh clone can.

No console script is needed: ``python tests/programs/cli.py ARGS...`` runs
``researchstore ARGS...`` with whatever ``researchstore`` is importable.
"""

from __future__ import annotations

import sys

from researchstore.cli import main as researchstore


def main(argv: list[str]) -> None:
    """Run the command line with ``argv``; exit with its status."""
    researchstore(args=argv, prog_name="researchstore")


if __name__ == "__main__":
    main(sys.argv[1:])
