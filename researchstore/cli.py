"""The ``researchstore`` command line: each command is a few lines around one call."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from researchstore.errors import ResearchStoreError
from researchstore.store import Store


class StoreError(click.ClickException):
    """A library error shown as a message, with the error's own exit code."""

    def __init__(self, error: ResearchStoreError) -> None:
        super().__init__(error.message)
        self.exit_code = error.exit_code


@contextmanager
def open_store(path: str, *, must_exist: bool = True, **options: Any) -> Iterator[Store]:
    if must_exist and not Path(path).exists():
        raise click.ClickException(f"no store at {path} (create one with 'researchstore ingest')")
    try:
        with Store(path, **options) as store:
            yield store
    except ResearchStoreError as error:
        raise StoreError(error) from None


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def echo_envelope(envelope: dict[str, Any]) -> None:
    """Print a tool's envelope; exit with the error's code when it is an error."""
    echo_json(envelope)
    if "error" in envelope:
        codes = {"invalid_input": 2, "not_entitled": 3, "upstream_unavailable": 4}
        sys.exit(codes.get(envelope["error"]["code"], 1))


@click.group()
@click.version_option(package_name="researchstore")
def main() -> None:
    """researchstore: research reports in one SQLite file, searchable offline."""


@main.command()
@click.argument("store_path", metavar="STORE")
@click.argument("source_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--name", help="Source name (default: the directory's name).")
@click.option(
    "--chunk-tokens",
    type=click.IntRange(16, 8192),
    default=256,
    show_default=True,
    help="Target tokens per chunk.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def ingest(
    store_path: str, source_dir: str, name: str | None, chunk_tokens: int, as_json: bool
) -> None:
    """Ingest every report under SOURCE_DIR into STORE (created if missing)."""
    with open_store(store_path, must_exist=False, chunk_tokens=chunk_tokens) as store:
        try:
            summary = store.ingest(source_dir, name=name)
        except ResearchStoreError as error:
            raise StoreError(error) from None
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


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the default today).")
@click.option("--chunk-tokens", type=click.IntRange(16, 8192), default=256, show_default=True)
def parse(file: str, as_json: bool, chunk_tokens: int) -> None:
    """Print what ingest would store for FILE: metadata, text, segments, chunks."""
    from researchstore.ingest.inspect import describe_file

    echo_json(describe_file(Path(file), chunk_tokens=chunk_tokens))


@main.command()
@click.argument("store_path", metavar="STORE")
@click.argument("tool_name")
@click.argument("arguments", default="{}")
def call(store_path: str, tool_name: str, arguments: str) -> None:
    """Call any tool by name with JSON ARGUMENTS and print its envelope.

    Example: researchstore call research.db get_chunk_next '{"id": "...", "count": 2}'
    """
    try:
        parsed = json.loads(arguments)
    except ValueError as error:
        echo_envelope(
            {
                "error": {
                    "code": "invalid_input",
                    "field": "arguments",
                    "message": f"ARGUMENTS is not JSON: {error}",
                }
            }
        )
        return
    with open_store(store_path) as store:
        echo_envelope(store.call(tool_name, parsed))


@main.command()
@click.argument("store_path", metavar="STORE")
@click.argument("query")
@click.option("--limit", type=int, default=10, show_default=True)
@click.option("--report-id", type=int)
@click.option("--tag", "tags", multiple=True, metavar="NAME=VALUE", help="Repeatable.")
@click.option("--date-from", metavar="YYYY-MM-DD")
@click.option("--date-to", metavar="YYYY-MM-DD")
@click.option("--source")
@click.option("--kind", type=click.Choice(["html", "vtt", "srt", "text"]))
@click.option(
    "--next",
    "next_count",
    type=click.IntRange(1, 100),
    help="Also show the N chunks that follow each hit.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the tool's envelope.")
def search(
    store_path: str,
    query: str,
    limit: int,
    report_id: int | None,
    tags: tuple[str, ...],
    date_from: str | None,
    date_to: str | None,
    source: str | None,
    kind: str | None,
    next_count: int | None,
    as_json: bool,
) -> None:
    """Search STORE for QUERY and list the best chunks."""
    tag_filter: dict[str, list[str]] = {}
    for tag in tags:
        name, sep, value = tag.partition("=")
        if not sep:
            raise click.BadParameter(f"{tag!r} is not NAME=VALUE", param_hint="--tag")
        tag_filter.setdefault(name, []).append(value)
    arguments = {
        "query": query,
        "limit": limit,
        "report_id": report_id,
        "tags": tag_filter or None,
        "date_from": date_from,
        "date_to": date_to,
        "source": source,
        "kind": kind,
    }
    with open_store(store_path) as store:
        envelope = store.call("research_chunk_search", arguments)
        if as_json or "error" in envelope:
            echo_envelope(envelope)
            return
        hits = envelope["result"]["hits"]
        if not hits:
            click.echo("no hits")
        for rank, hit in enumerate(hits, 1):
            where = f"{hit['title']} ({hit['date']})"
            if hit["start_ms"] is not None:
                where += f" at {hit['start_ms'] / 1000:.1f}s"
            click.echo(f"{rank}. {hit['score']:.2f}  {where}")
            click.echo(f"   chunk {hit['chunk_id']}  report {hit['report_id']}")
            click.echo("   " + plain_snippet(hit["snippet"]))
            if next_count:
                walk = store.call("get_chunk_next", {"id": hit["chunk_id"], "count": next_count})
                for following in walk["result"]["chunks"]:
                    click.echo(
                        f"   next: chunk {following['chunk_id']} (position {following['position']})"
                    )
                    click.echo("   " + shorten(following["text"]))


def shorten(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rsplit(" ", 1)[0] + " …"


def plain_snippet(snippet: str) -> str:
    """The snippet for a terminal: matches in bold, entities decoded."""
    import html

    text = snippet.replace("\n", " ")
    if sys.stdout.isatty():
        text = text.replace("<b>", "\x1b[1m").replace("</b>", "\x1b[0m")
    else:
        text = text.replace("<b>", "[").replace("</b>", "]")
    return html.unescape(text)


@main.command()
@click.argument("store_path", metavar="STORE")
@click.argument("chunk_id")
@click.option("--next", "next_count", type=int, help="Also walk N chunks forward.")
@click.option("--prev", "prev_count", type=int, help="Also walk N chunks backward.")
@click.option("--parents", is_flag=True, help="Show where the chunk lives instead.")
def chunk(
    store_path: str, chunk_id: str, next_count: int | None, prev_count: int | None, parents: bool
) -> None:
    """Show one chunk, its parents, or a walk from it (as JSON envelopes)."""
    with open_store(store_path) as store:
        if parents:
            echo_envelope(store.call("get_chunk_parents", {"id": chunk_id}))
        elif next_count is not None:
            echo_envelope(store.call("get_chunk_next", {"id": chunk_id, "count": next_count}))
        elif prev_count is not None:
            echo_envelope(store.call("get_chunk_prev", {"id": chunk_id, "count": prev_count}))
        else:
            echo_envelope(store.call("research_get_chunk", {"chunk_id": chunk_id}))


@main.command()
@click.argument("store_path", metavar="STORE")
@click.argument("document_id")
@click.option("--from", "start", type=int, help="Print chunk bodies from this position.")
@click.option("--limit", type=int, default=20, show_default=True)
def doc(store_path: str, document_id: str, start: int | None, limit: int) -> None:
    """Show a document's skeleton, or a window of its chunk bodies with --from."""
    with open_store(store_path) as store:
        if start is None:
            echo_envelope(store.call("get_document", {"id": document_id}))
        else:
            echo_envelope(
                store.call(
                    "get_document_chunks", {"id": document_id, "from": start, "limit": limit}
                )
            )


@main.command()
def tools() -> None:
    """List every tool with its input schema."""
    from researchstore.tools import TOOLS

    echo_json(
        [
            {
                "name": tool.name,
                "description": tool.description.splitlines()[0],
                "input_schema": tool.input_schema(),
            }
            for tool in TOOLS.values()
        ]
    )


@main.command("rebuild-index")
@click.argument("store_path", metavar="STORE")
def rebuild_index(store_path: str) -> None:
    """Rebuild STORE's full-text index from its SQLite file."""
    with open_store(store_path) as store:
        count = store.rebuild_index()
    click.echo(f"indexed {count} chunks")


@main.command()
@click.argument("store_path", metavar="STORE")
def check(store_path: str) -> None:
    """Check SQLite integrity and that the index holds every ok chunk."""
    from researchstore.check import check_store

    with open_store(store_path) as store:
        report = check_store(store)
    echo_json(report)
    if not report["consistent"]:
        sys.exit(1)


@main.command()
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
    from researchstore.errors import StoreLocked
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
            click.echo(f"researchstore: another run is at work: {error.message}", err=True)
            if interval is None:
                sys.exit(error.exit_code)
            return
        except ResearchStoreError as error:
            raise StoreError(error) from None
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


@main.command()
@click.argument("store_path", metavar="STORE")
@click.argument("url")
@click.option(
    "--kind",
    type=click.Choice(["url_text", "published_captions"]),
    required=True,
    help="url_text: a page's main text; published_captions: caption segments.",
)
@click.option(
    "--workspace",
    "workspace_id",
    required=True,
    metavar="UUID",
    help="The workspace the evidence is stored in.",
)
@click.option("--language", metavar="TAG", help="Language wanted, e.g. en or nb-NO.")
@click.option(
    "--mutation-id",
    metavar="UUID",
    help="Idempotency key; reuse it to get the same receipt (default: a new one).",
)
def retrieve(
    store_path: str,
    url: str,
    kind: str,
    workspace_id: str,
    language: str | None,
    mutation_id: str | None,
) -> None:
    """Fetch a public https URL as evidence into STORE and print the receipt.

    Exits 0 when the result is ready or partial (stored as evidence), 1 for any
    other status, and with the error's code when the call is refused. The
    environment configures the fetcher (RESEARCHSTORE_EGRESS=off, ...).
    """
    import uuid

    arguments = {
        "url": url,
        "kind": kind,
        "workspace_id": workspace_id,
        "mutation_id": mutation_id or str(uuid.uuid4()),
    }
    if language is not None:
        arguments["language"] = language
    with open_store(store_path, must_exist=False) as store:
        envelope = store.call("research_evidence_retrieve", arguments)
    echo_envelope(envelope)
    result = envelope["result"]["retrieval"]["result"]
    if result is None or result["status"] not in ("ready", "partial"):
        sys.exit(1)


from researchstore.cli_mcp import keys, serve  # noqa: E402

main.add_command(serve)
main.add_command(keys)
