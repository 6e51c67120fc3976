"""Commands that write a store or look at what it would hold: ingest, reingest,
parse, rebuild-index, check."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from researchstore.cli.common import echo_json, fail, open_store, print_embed_summary
from researchstore.errors import ResearchStoreError, StoreDamaged, StoreLocked

if TYPE_CHECKING:
    from researchstore.library import Library

CHUNK_TOKENS = click.IntRange(16, 8192)

EMBED_OPTION = click.option(
    "--embed/--no-embed",
    default=None,
    help="Embed the new chunks after the run (default: when the semantic extra is "
    "installed, unless RESEARCHSTORE_EMBED=off).",
)


def embed_after_run(
    store: Library, embed: bool | None, *, as_json: bool, older_than: int | None = None
) -> None:
    """Embed the chunks a run wrote, when asked (or by default with the extra there).

    Chosen by default, a model that cannot load is told and skipped: the
    run's words are searchable already, and ``researchstore embed`` follows.
    With nothing to embed no model is loaded. ``older_than``: the newest
    chunk before the run, so that the summary tells apart the older chunks
    it embedded too (left without a vector by earlier runs).
    """
    from researchstore.meaning.embedding import auto_embed_enabled

    if embed is False or (embed is None and not auto_embed_enabled()):
        return
    try:
        summary = store.embed(older_than=older_than)
    except ResearchStoreError as error:
        if embed:
            raise
        click.echo(f"researchstore: embedding skipped: {error.message}", err=True)
        return
    print_embed_summary(summary, as_json=as_json)


@click.command()
@click.argument("store_path", metavar="STORE")
@click.argument("source_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--name", help="Source name (default: the directory's name).")
@click.option(
    "--move-root",
    is_flag=True,
    help="The source NAME has moved to SOURCE_DIR: take it as the source's root "
    "(without this, another directory under a taken name is refused).",
)
@click.option(
    "--chunk-tokens",
    type=CHUNK_TOKENS,
    default=256,
    show_default=True,
    help="Target tokens per chunk.",
)
@click.option(
    "--follow-external-links",
    is_flag=True,
    help="Read symbolic links to files outside SOURCE_DIR (skipped by default); "
    "reingest keeps the choice.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON lines: each event, then the summary."
)
@EMBED_OPTION
def ingest(
    store_path: str,
    source_dir: str,
    name: str | None,
    move_root: bool,
    chunk_tokens: int,
    follow_external_links: bool,
    as_json: bool,
    embed: bool | None,
) -> None:
    """Ingest every report under SOURCE_DIR into STORE (created if missing).

    Prints a line for each report written or failed, then the summary.
    Exits 1 when a report failed, 2 when the source name is taken by another
    directory, 75 when another process is writing STORE, 130/143 when
    stopped by SIGINT/SIGTERM (what was committed stays).
    """
    from researchstore.reingest import StopSignals

    with (
        StopSignals(),
        open_store(store_path, must_exist=False, chunk_tokens=chunk_tokens) as store,
    ):
        before = store.last_chunk_rowid()
        summary = store.ingest(
            source_dir,
            name=name,
            move_root=move_root,
            follow_external_links=follow_external_links,
            on_event=EventPrinter(as_json=as_json),
        )
        embed_after_run(store, embed, as_json=as_json, older_than=before)
    if summary.failed:
        sys.exit(1)


class EventPrinter:
    """Prints a run's events as they come, as ``print_event`` does.

    A reader that goes away (``| head``: a closed pipe) stops the printing,
    never the run.
    """

    def __init__(self, *, as_json: bool) -> None:
        self.as_json = as_json
        self.reader_gone = False

    def __call__(self, event: dict[str, Any]) -> None:
        if self.reader_gone:
            return
        try:
            print_event(event, as_json=self.as_json)
        except BrokenPipeError:
            self.reader_gone = True
            # Python flushes stdout once more on exit: point it at nothing.
            nothing = os.open(os.devnull, os.O_WRONLY)
            os.dup2(nothing, sys.stdout.fileno())
            os.close(nothing)


def print_event(event: dict[str, Any], *, as_json: bool) -> None:
    """One event of a run: a JSON line, or lines that start with the time and source."""
    if as_json:
        click.echo(json.dumps(event, ensure_ascii=False))
        return
    for line in describe_event(event):
        click.echo(f"{event['time']} source {event['source']}: {line}")


def describe_event(event: dict[str, Any]) -> list[str]:
    """An event in words (without the time and source every line starts with)."""
    what = event["event"]
    if what == "summary":
        counts = (
            f"{event['new']} new, {event['modified']} modified, {event['unchanged']} unchanged, "
            f"{event['removed']} removed, {event['failed']} failed; {event['documents']} "
            f"documents, {event['chunks']} chunks in {event['seconds']:.2f}s"
        )
        if event["status"] == "interrupted":
            counts += f"; {event['stopped']}, what was committed stays"
        lines = [counts]
        for skipped in event["skipped"]:
            detail = f" ({skipped['details'][0]})" if skipped["details"] else ""
            lines.append(f"{skipped['status']:<8} {skipped['path']}: {skipped['reason']}{detail}")
        return lines
    if what == "moved":
        return [f"root moved from {event['moved_from']} to {event['root']}"]
    line = f"{what:<8} {event['report']}"
    if event.get("report_id") is not None:
        line += f" (report {event['report_id']})"
    if what == "failed":
        line += f": {event['reason']}"
    return [line]


@click.command()
@click.argument("store_path", metavar="STORE")
@click.option("--source", help="Only this source (default: every directory source).")
@click.option(
    "--every",
    metavar="DURATION",
    help="Run now and then every DURATION (e.g. 15m, 1h) until stopped.",
)
@click.option(
    "--only",
    "only",
    multiple=True,
    metavar="REPORT_PATH",
    help="Refresh just this report (path inside the source); repeatable.",
)
@click.option(
    "--forwarding-retention",
    metavar="DURATION",
    help="How long replaced chunk ids stay resolvable (default 30d); saved.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON lines: each event, then each summary."
)
@EMBED_OPTION
def reingest(
    store_path: str,
    source: str | None,
    every: str | None,
    only: tuple[str, ...],
    forwarding_retention: str | None,
    as_json: bool,
    embed: bool | None,
) -> None:
    """Refresh STORE from its sources: replace modified reports, add new, drop gone.

    Prints a line for each report written, removed or failed, then each
    source's summary. Exits 1 when a report or a source failed, 2 when
    --only names no report, 75 when another run holds the store, 130/143
    when stopped by SIGINT/SIGTERM during a run (what was committed stays).
    """
    from researchstore.reingest import StopSignals, run_every
    from researchstore.reingest import reingest as run_reingest
    from researchstore.storage.dates import parse_duration, utc_now
    from researchstore.storage.forwarding import set_retention_days

    try:
        interval = parse_duration(every) if every else None
        retention = parse_duration(forwarding_retention) if forwarding_retention else None
    except ResearchStoreError as error:
        raise click.BadParameter(error.message) from None
    failed = False
    printer = EventPrinter(as_json=as_json)

    def run_once(store: Library) -> None:
        nonlocal failed
        before = store.last_chunk_rowid()
        try:
            summaries = run_reingest(store, source=source, only=only or None, on_event=printer)
        except StoreLocked as error:
            if interval is None:
                fail(f"another run is at work: {error.message}", exit_code=error.exit_code)
            # On a schedule the next turn tries again.
            click.echo(
                f"{utc_now()} researchstore: another run is at work: {error.message}", err=True
            )
            return
        failed = failed or any(summary.failed for summary in summaries)
        embed_after_run(store, embed, as_json=as_json, older_than=before)

    with open_store(store_path) as store:
        if retention is not None:
            with store.transaction() as conn:
                set_retention_days(conn, retention / 86400)
        if interval is None:
            with StopSignals():
                run_once(store)
        else:
            run_every(interval, lambda: run_once(store))
    if failed:
        sys.exit(1)


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the default today).")
@click.option(
    "--chunk-tokens",
    type=CHUNK_TOKENS,
    default=256,
    show_default=True,
    help="Target tokens per chunk.",
)
def parse(file: str, as_json: bool, chunk_tokens: int) -> None:
    """Print what ingest would store for FILE: metadata, text, segments, chunks."""
    from researchstore.ingest.inspect import describe_file

    echo_json(describe_file(Path(file), chunk_tokens=chunk_tokens))


@click.command("rebuild-index")
@click.argument("store_path", metavar="STORE")
def rebuild_index(store_path: str) -> None:
    """Rebuild STORE's full-text index from its SQLite file."""
    with open_store(store_path) as store:
        count = store.rebuild_index()
    click.echo(f"indexed {count} chunks")


@click.command()
@click.argument("store_path", metavar="STORE")
def check(store_path: str) -> None:
    """Check SQLite integrity and the index against the store, reading both back in full.

    Prints a JSON report whose ``problems`` say what is wrong and what to do;
    exits 1 when there is any (a damaged store file, a damaged index, or
    the two disagreeing).
    """
    from researchstore.check import check_file, check_store

    try:
        with open_store(store_path) as store:
            report = check_store(store)
    except StoreDamaged as error:  # it cannot even be opened: look at the file alone
        report = check_file(Path(store_path), error)
    echo_json(report)
    for problem in report["problems"]:
        click.echo(f"problem: {problem}", err=True)
    if not report["consistent"]:
        sys.exit(1)


@click.command("remove-source")
@click.argument("store_path", metavar="STORE")
@click.argument("name")
@click.option(
    "--yes", is_flag=True, help="Remove without asking (for scripts: nothing is asked then)."
)
@click.option("--json", "as_json", is_flag=True, help="Print what was removed as JSON.")
def remove_source(store_path: str, name: str, yes: bool, as_json: bool) -> None:
    """Remove the source NAME from STORE, with every report of it, on purpose.

    For a source whose folder is gone for good (re-ingest leaves such a
    source as it is and fails it). Its chunks leave every index; their ids
    still say "removed" through the forwarding record. Asks first unless
    --yes; without a terminal to ask on, --yes is required. Exits 2 when
    there is no such source or it was not confirmed, 75 when another run
    holds the store.
    """
    from researchstore.ingest.writer import remove_source as run_removal
    from researchstore.ingest.writer import source_contents

    with open_store(store_path) as store:
        contents = source_contents(store, name)
        if not yes:
            what = (
                f"source {name!r} ({contents.root}): {contents.reports} reports, "
                f"{contents.chunks} chunks"
            )
            if not sys.stdin.isatty():
                fail(f"not removed: {what}; say --yes to remove it", exit_code=2)
            if not click.confirm(f"Remove {what}?", default=False, err=True):
                fail("not removed", exit_code=2)
        removed = run_removal(store, name)
    if as_json:
        echo_json(removed._asdict())
    else:
        click.echo(
            f"removed source {removed.name!r} ({removed.root}): {removed.reports} reports, "
            f"{removed.chunks} chunks"
        )
