"""Progress bars for long work, shown only when stderr is a terminal."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class Progress(Protocol):
    def advance(self, amount: int = 1) -> None: ...

    def total(self, total: int) -> None: ...


class _Silent:
    def advance(self, amount: int = 1) -> None:
        pass

    def total(self, total: int) -> None:
        pass


class _Rich:
    def __init__(self, bar: object, task: object) -> None:
        self._bar = bar
        self._task = task

    def advance(self, amount: int = 1) -> None:
        self._bar.advance(self._task, amount)  # type: ignore[attr-defined]

    def total(self, total: int) -> None:
        self._bar.update(self._task, total=total)  # type: ignore[attr-defined]


def wanted(enabled: bool | None) -> bool:
    """None means: show progress when stderr is a terminal."""
    if enabled is None:
        return sys.stderr.isatty()
    return enabled


@contextmanager
def progress_bar(
    description: str, *, total: int | None, enabled: bool | None
) -> Iterator[Progress]:
    if not wanted(enabled):
        yield _Silent()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as RichProgress

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with RichProgress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task(description, total=total)
        yield _Rich(bar, task)
