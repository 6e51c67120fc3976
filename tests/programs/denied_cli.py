"""The command line, run as if some directories could not be read.

``python tests/programs/denied_cli.py DIR[:DIR...] ARGS...`` runs
``researchstore ARGS...`` in a process where listing each DIR fails, and so
does looking up anything beneath it, with ``PermissionError`` (EACCES), as
for a directory of mode 000 read by a user other than root. Tests run as
root, which no mode bit stops, so the refusal is made here, at the boundary
with the operating system.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any

from researchstore.cli import main as researchstore


def deny(directories: list[str]) -> None:
    """Make ``os.scandir``, ``os.stat`` and ``os.lstat`` refuse ``directories``."""
    denied = [os.path.realpath(directory) for directory in directories]
    scandir, stat, lstat = os.scandir, os.stat, os.lstat

    def refuse(path: Any, *, beneath: bool) -> None:
        if isinstance(path, int):
            return
        real = os.path.abspath(os.fsdecode(path))
        for directory in denied:
            if (not beneath and real == directory) or real.startswith(directory + os.sep):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)

    def denied_scandir(path: Any = ".") -> Any:
        refuse(path, beneath=False)
        return scandir(path)

    def denied_stat(path: Any, *args: Any, **kwargs: Any) -> Any:
        refuse(path, beneath=True)
        return stat(path, *args, **kwargs)

    def denied_lstat(path: Any, *args: Any, **kwargs: Any) -> Any:
        refuse(path, beneath=True)
        return lstat(path, *args, **kwargs)

    os.scandir = denied_scandir  # type: ignore[assignment]
    os.stat = denied_stat  # type: ignore[assignment]
    os.lstat = denied_lstat  # type: ignore[assignment]


def main(argv: list[str]) -> None:
    """Deny the directories in ``argv[0]`` (``os.pathsep``-separated), then run the rest."""
    deny([directory for directory in argv[0].split(os.pathsep) if directory])
    researchstore(args=argv[1:], prog_name="researchstore")


if __name__ == "__main__":
    main(sys.argv[1:])
