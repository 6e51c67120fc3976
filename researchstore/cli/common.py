"""What every command shares: opening a store, printing JSON, leaving on an error.

Errors leave in one way: ``Error: <message>`` on stderr and the exit code that
``researchstore.errors`` gives the error's class (``EXIT_CODES`` for an error
envelope, whose class is known only by its ``code``). Commands that print an
envelope print it on stdout first, so a script still reads JSON there. A
command stopped by SIGINT (Ctrl-C) or, where a command stops cleanly on it,
SIGTERM leaves the same way with 130 or 143. The README's exit-code table
lists them all.
"""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

import click

from researchstore.errors import EXIT_CODES, Interrupted, InvalidInput, ResearchStoreError
from researchstore.storage.dates import utc_now
from researchstore.storage.stored import json_default

if TYPE_CHECKING:
    from researchstore.library import Library
    from researchstore.meaning.embed import EmbedSummary


def fail(message: str, *, exit_code: int) -> NoReturn:
    """Leave the command: ``Error: <message>`` on stderr, then ``exit_code``."""
    # click reads a ClickException's exit code from its class; ours vary by error.
    click.ClickException(message).show()
    raise click.exceptions.Exit(exit_code)


def fail_with_envelope(envelope: dict[str, Any]) -> NoReturn:
    """Leave with an error envelope's message and the exit code of its ``code``."""
    error = envelope["error"]
    fail(error["message"], exit_code=EXIT_CODES.get(error["code"], ResearchStoreError.exit_code))


class Group(click.Group):
    """A group whose commands leave a ``ResearchStoreError`` with its own exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ResearchStoreError as error:
            fail(error.message, exit_code=error.exit_code)
        except KeyboardInterrupt as error:
            # Before click's own "Aborted!" and exit 1, which means a failure here.
            stop = error if isinstance(error, Interrupted) else Interrupted(signal.SIGINT)
            fail(
                f"{stop}; stopped where it was (what was committed stays)", exit_code=stop.exit_code
            )


@contextlib.contextmanager
def stopping_on_signals() -> Iterator[None]:
    """SIGTERM, as SIGINT already does, unwinds a server, so that the store closes.

    uvicorn stops gracefully on either, then raises it again for the handler
    it found (this one); over stdio the handler stops the event loop.
    """

    def stop(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def open_store(path: str, *, must_exist: bool = True, **options: Any) -> Library:
    """The store at ``path``, to use as a context manager."""
    if must_exist and not Path(path).exists():
        raise InvalidInput(
            f"no store at {path} (create one with 'researchstore ingest')", field="store"
        )
    from researchstore.library import Library

    return Library(path, **options)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=json_default))


def echo_envelope(envelope: dict[str, Any]) -> None:
    """Print a tool's envelope on stdout; leave with its exit code if it is an error."""
    echo_json(envelope)
    if "error" in envelope:
        fail_with_envelope(envelope)


def print_embed_summary(summary: EmbedSummary, *, as_json: bool) -> None:
    """An embedding run's summary: one line (or JSON), then the first failures."""
    if as_json:
        click.echo(json.dumps({"embed": summary.to_dict()}, ensure_ascii=False))
        return
    # Stamped as the ingest's own lines are, so that a log reads line by line.
    now = utc_now()
    if summary.note:
        click.echo(f"{now} embed: {summary.note}")
    if summary.nothing_to_do:
        click.echo(f"{now} embed: every chunk has a vector; no model was loaded")
        return
    older = f" ({summary.older} of them older chunks that had no vector)" if summary.older else ""
    count = len(summary.nodes)
    nodes = f" on {count} Ray node{'s' if count > 1 else ''}" if count else ""
    click.echo(
        f"{now} embedded {summary.embedded} chunks{older} with {summary.model}{nodes} in "
        f"{summary.seconds:.1f}s ({summary.chunks_per_second:.1f} chunks/s); "
        f"{summary.failed} failed, {summary.passed_over} replaced meanwhile"
    )
    for failure in summary.failures[:20]:
        click.echo(f"{now} embed_failed {failure['chunk_id']}: {failure['reason']}")
