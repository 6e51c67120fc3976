"""Commands that write a store or look at what it would hold: ingest, reingest,
parse, rebuild-index, check."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from researchstore.cli.common import echo_json, fail, open_store
from researchstore.errors import ResearchStoreError, StoreDamaged, StoreLocked

if TYPE_CHECKING:
    from researchstore.store import Store

CHUNK_TOKENS = click.IntRange(16, 8192)


@click.command()
@click.argument("store_path", metavar="STORE")
@click.argument("source_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--name", help="Source name (default: the directory's name).")
@click.option(
    "--chunk-tokens",
    type=CHUNK_TOKENS,
    default=256,
    show_default=True,
    help="Target tokens per chunk.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def ingest(
    store_path: str, source_dir: str, name: str | None, chunk_tokens: int, as_json: bool
) -> None:
    """Ingest every report under SOURCE_DIR into STORE (created if missing).

    Exits 1 when a report failed, 75 when another process is writing STORE.
    """
    with open_store(store_path, must_exist=False, chunk_tokens=chunk_tokens) as store:
        summary = store.ingest(source_dir, name=name)
    if as_json:
        echo_json(summary.to_dict())
    else:
        print_summary(summary.to_dict())
    if summary.failed:
        sys.exit(1)


def print_summary(summary: dict[str, Any]) -> None:
    click.echo(
        f"source {summary['source']}: {summary['new']} new, {summary['modified']} modified, "
        f"{summary['unchanged']} unchanged, {summary['removed']} removed, "
        f"{summary['failed']} failed; {summary['documents']} documents, "
        f"{summary['chunks']} chunks in {summary['seconds']:.2f}s"
    )
    for failure in summary["failures"]:
        click.echo(f"  failed   {failure['report']}: {failure['reason']}")
    for skipped in summary["skipped"]:
        detail = f" ({skipped['details'][0]})" if skipped["details"] else ""
        click.echo(f"  {skipped['status']:<8} {skipped['path']}: {skipped['reason']}{detail}")


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
@click.option("--json", "as_json", is_flag=True, help="Print each summary as JSON.")
def reingest(
    store_path: str,
    source: str | None,
    every: str | None,
    only: tuple[str, ...],
    forwarding_retention: str | None,
    as_json: bool,
) -> None:
    """Refresh STORE from its sources: replace modified reports, add new, drop gone.

    Exits 1 when a report failed, 75 when another run holds the store.
    """
    from researchstore.dates import parse_duration
    from researchstore.forwarding import set_retention_days
    from researchstore.reingest import reingest as run_reingest
    from researchstore.reingest import run_every

    try:
        interval = parse_duration(every) if every else None
        retention = parse_duration(forwarding_retention) if forwarding_retention else None
    except ResearchStoreError as error:
        raise click.BadParameter(error.message) from None
    failed = False

    def run_once(store: Store) -> None:
        nonlocal failed
        try:
            summaries = run_reingest(store, source=source, only=only or None)
        except StoreLocked as error:
            if interval is None:
                fail(f"another run is at work: {error.message}", exit_code=error.exit_code)
            # On a schedule the next turn tries again.
            click.echo(f"researchstore: another run is at work: {error.message}", err=True)
            return
        for summary in summaries:
            if as_json:
                echo_json(summary.to_dict())
            else:
                print_summary(summary.to_dict())
            failed = failed or bool(summary.failed)

    with open_store(store_path) as store:
        if retention is not None:
            with store.transaction() as conn:
                set_retention_days(conn, retention / 86400)
        if interval is None:
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
