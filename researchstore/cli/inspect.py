"""Commands that look inside a store: sources, reports, stats, export.

They only read, through one read transaction each, so they work on a
read-only store as on any other. ``--json`` prints what ``researchstore.listing``
returns (keys documented in the README); otherwise a table for a person.
``export`` writes data alone on stdout (or to a file), and its progress and
closing summary on stderr.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from researchstore.cli.common import echo_json, fail, open_store
from researchstore.errors import InvalidInput

#: Titles longer than this are cut in the reports table (``--json`` has them whole).
TITLE_WIDTH = 48


@click.command()
@click.argument("store_path", metavar="STORE")
@click.option("--json", "as_json", is_flag=True, help='Print {"sources": [...]} as JSON.')
def sources(store_path: str, as_json: bool) -> None:
    """List STORE's sources: root, whether it is there now, counts and last run."""
    from researchstore.listing import list_sources

    with open_store(store_path, open_indexes=False) as store, store.reading() as conn:
        listed = list_sources(conn)
    if as_json:
        echo_json({"sources": listed})
        return
    print_table(
        ("SOURCE", "KIND", "ROOT", "ON DISK", "REPORTS", "DOCUMENTS", "CHUNKS", "LAST RUN"),
        [
            (
                source["name"],
                source["kind"],
                source["root"] or "",
                {True: "yes", False: "NO", None: "-"}[source["root_present"]],
                source["reports"],
                source["documents"],
                source["chunks"],
                describe_run(source["last_run"]),
            )
            for source in listed
        ],
        empty="no sources (add one with 'researchstore ingest')",
    )


@click.command()
@click.argument("store_path", metavar="STORE")
@click.option("--source", help="Only the reports of this source.")
@click.option("--json", "as_json", is_flag=True, help='Print {"reports": [...]} as JSON.')
def reports(store_path: str, source: str | None, as_json: bool) -> None:
    """List STORE's reports by source and key, with their status and counts."""
    from researchstore.listing import list_every_report

    with open_store(store_path, open_indexes=False) as store, store.reading() as conn:
        listed = list_every_report(conn, source=source)
    if as_json:
        echo_json({"reports": listed})
        return
    print_table(
        ("ID", "SOURCE", "KEY", "TITLE", "DATE", "STATUS", "DOCS", "CHUNKS", "LANG", "INGESTED"),
        [
            (
                str(report["report_id"]),
                report["source"],
                report["key"],
                shorten(report["title"], TITLE_WIDTH),
                report["date"] or "-",
                report["status"],
                report["documents"],
                report["chunks"],
                ",".join(report["languages"]) or "-",
                report["ingested_at"] or "-",
            )
            for report in listed
        ],
        empty="no reports",
    )


@click.command()
@click.argument("store_path", metavar="STORE")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
def stats(store_path: str, as_json: bool) -> None:
    """Show STORE's sizes on disk, its counts by kind, status and language, vectors and
    pending index work."""
    from researchstore.listing import store_stats

    with open_store(store_path, open_indexes=False) as store, store.reading() as conn:
        found = store_stats(conn, store.path)
    if as_json:
        echo_json(found)
        return
    print_table(("", ""), stats_lines(found), header=False)


def stats_lines(found: dict[str, Any]) -> list[tuple[str, str]]:
    """``store_stats`` as label and value lines."""
    files = found["files"]
    on_disk = [f"{files['store']['human']} store", f"{files['wal']['human']} write-ahead log"]
    on_disk += [f"{size['human']} {name}" for name, size in files["indexes"].items()]
    documents, chunks = found["documents"], found["chunks"]
    vectors, pending = found["vectors"], found["index_pending"]
    if vectors["model"]:
        vector_line = (
            f"{vectors['model']} ({vectors['dimension']} dimensions): "
            f"{vectors['chunks_with_vector']:,} chunks with a vector, {vectors['failed']:,} "
            f"failed, {vectors['waiting']:,} waiting"
        )
    else:
        vector_line = "none (no model: see 'researchstore embed')"
    lines = [
        ("store", found["store"]),
        ("on disk", f"{', '.join(on_disk)}; {files['total']['human']} in all"),
        ("index copies", f"{files['packed_indexes']['human']} (inside the store file)"),
        ("sources", f"{found['sources']:,}"),
        ("reports", f"{found['reports']:,}"),
        ("documents", f"{documents['total']:,}"),
        ("  by kind", counted(documents["by_kind"])),
        ("  by status", counted(documents["by_status"])),
        ("  by language", counted(documents["by_language"])),
        ("chunks", f"{chunks['total']:,} ({chunks['tokens']:,} tokens)"),
        ("  by status", ", ".join(f"{name} {n:,}" for name, n in chunks["by_status"].items())),
        ("vectors", vector_line),
        (
            "index pending",
            f"{pending['total']:,}"
            + "".join(f", {target} {n:,}" for target, n in pending["by_target"].items()),
        ),
    ]
    lines += [(f"last run {name}", describe_run(run)) for name, run in found["last_runs"].items()]
    return lines


def counted(groups: dict[str, dict[str, int]]) -> str:
    """``html 6 (20 chunks), vtt 7 (9 chunks)``: documents, and their chunks, per value."""
    return (
        ", ".join(
            f"{name} {n['documents']:,} ({n['chunks']:,} chunks)" for name, n in groups.items()
        )
        or "-"
    )


def describe_run(run: dict[str, Any] | None) -> str:
    """A last run in one line: when it ended, how, and its counts."""
    if run is None:
        return "never"
    counts = ", ".join(f"{value:,} {name}" for name, value in run["counts"].items())
    when = run["finished_at"] or f"{run['started_at']} (not finished)"
    return f"{when} {run['status']}" + (f" ({counts})" if counts else "")


def shorten(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], *, empty: str = "", header: bool = True
) -> None:
    """Rows in aligned columns, numbers to the right; ``empty`` when there are none."""
    if not rows:
        if empty:
            click.echo(empty)
        return
    shown = [
        [f"{value:,}" if isinstance(value, int) else str(value) for value in row] for row in rows
    ]
    # Counts are ints (shown with separators), ids strings of digits: both to the right.
    numeric = [
        all(isinstance(row[column], int) or str(row[column]).isdigit() for row in rows)
        for column in range(len(headers))
    ]
    table = ([list(headers)] if header else []) + shown
    widths = [max(len(line[column]) for line in table) for column in range(len(headers))]
    for line in table:
        cells = [
            cell.rjust(width) if right else cell.ljust(width)
            for cell, width, right in zip(line, widths, numeric, strict=True)
        ]
        click.echo("  ".join(cells).rstrip())


@click.command()
@click.argument("store_path", metavar="STORE")
@click.option(
    "--output",
    "-o",
    default="-",
    show_default=True,
    metavar="FILE|-",
    help="Where to write (- for standard output); a file appears only once complete.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["jsonl", "parquet"]),
    default="jsonl",
    show_default=True,
    help="JSON lines, or Parquet (needs pyarrow: pip install pyarrow).",
)
@click.option("--source", help="Only the chunks of this source's reports.")
def export(store_path: str, output: str, output_format: str, source: str | None) -> None:
    """Export every chunk of STORE with its report and document, in store order.

    Rows are read from one snapshot and written as they are read, so memory
    stays small whatever the store's size. Progress (on a terminal) and a
    closing summary go to stderr; stdout holds the data alone.
    """
    from researchstore.export import export_store, require_pyarrow

    to_stdout = output == "-"
    if output_format == "parquet":
        require_pyarrow()
        if to_stdout and sys.stdout.isatty():
            raise InvalidInput(
                "Parquet is binary: write it to a file with --output FILE, or pipe it",
                field="output",
            )
    destination = sys.stdout.buffer if to_stdout else Path(output)
    try:
        with open_store(store_path, open_indexes=False) as store:
            summary = export_store(
                store,
                destination,
                output_format=output_format,
                source=source,
                # A bar among the rows on the same screen would garble both.
                progress=False if to_stdout and sys.stdout.isatty() else None,
            )
    except BrokenPipeError:
        # The reader has had enough (``| head``): stop as cat does, quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
    except OSError as error:
        fail(f"cannot write {output}: {error.strerror or error}", exit_code=1)
    click.echo(
        f"exported {summary.chunks:,} chunks as {summary.format} to {summary.destination} "
        f"in {summary.seconds:.2f}s ({summary.chunks_per_second:,.0f} chunks/s)",
        err=True,
    )
