"""Commands that call the tools: call, search, chunk, doc, tools, retrieve.

Each prints the tool's envelope (``search`` prints hits unless ``--json``) and
leaves an error envelope with the exit code of its ``code``.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from researchstore.cli.common import echo_envelope, echo_json, fail_with_envelope, open_store
from researchstore.errors import ResearchStoreError

if TYPE_CHECKING:
    from researchstore.library import Library


@click.command()
@click.argument("store_path", metavar="STORE")
@click.argument("tool_name")
@click.argument("arguments", default="{}")
def call(store_path: str, tool_name: str, arguments: str) -> None:
    """Call the tool TOOL_NAME with ARGUMENTS and print its envelope as JSON.

    ARGUMENTS is one JSON object of the tool's arguments (default: {}; see
    'researchstore tools' for each tool's). Give - instead to read that
    object from standard input, for arguments too long for a command line.
    A tool's error is printed as its envelope, then the command exits with
    the error's code.

    \b
    Examples:
      researchstore call research.db get_chunk_next '{"id": "...", "count": 2}'
      echo '{"query": "varroa mite"}' | researchstore call research.db research_chunk_search -
    """
    if arguments == "-":
        arguments = sys.stdin.read()
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
    with open_store(store_path, open_indexes=False) as store:
        echo_envelope(store.call(tool_name, parsed))


def load_query_model(store: Library) -> None:
    """Load the model that embeds the query, saying so on stderr: a one-shot search by
    meaning waits for it (seconds) more than for the search (milliseconds). A model
    that cannot load is left for the search to report, in its envelope."""
    try:
        store.query_embedder(
            on_load=lambda name: click.echo(f"loading {name} for the query…", err=True)
        )
    except ResearchStoreError:
        pass


@click.command()
@click.argument("store_path", metavar="STORE")
@click.argument("query")
@click.option("--limit", type=int, default=10, show_default=True, help="Hits to list (1-50).")
@click.option("--report-id", type=int, help="Only chunks of this report.")
@click.option(
    "--tag",
    "tags",
    multiple=True,
    metavar="NAME=VALUE",
    help="Only reports with this tag; repeatable (same name: any of the values).",
)
@click.option("--date-from", metavar="YYYY-MM-DD", help="Only reports dated on or after this.")
@click.option("--date-to", metavar="YYYY-MM-DD", help="Only reports dated on or before this.")
@click.option("--source", help="Only reports of this source.")
@click.option(
    "--kind",
    type=click.Choice(["html", "vtt", "srt", "text"]),
    help="Only documents of this kind.",
)
@click.option(
    "--next",
    "next_count",
    type=click.IntRange(1, 100),
    help="Also show the N chunks that follow each hit.",
)
@click.option(
    "--mode",
    type=click.Choice(["keyword", "semantic", "hybrid"]),
    help="By words, by meaning, or both (default: hybrid when STORE has vectors, else keyword).",
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
    mode: str | None,
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
        "mode": mode,
    }
    from researchstore.meaning.embedding import bound_query_threads

    bound_query_threads()  # one query: few threads, before any runtime loads
    with open_store(store_path) as store:
        if (mode or store.default_search_mode()) != "keyword":
            load_query_model(store)
        envelope = store.call("research_chunk_search", arguments)
        if as_json:
            echo_envelope(envelope)
            return
        if "error" in envelope:
            fail_with_envelope(envelope)
        hits = envelope["result"]["hits"]
        if not hits:
            click.echo("no hits")
        for rank, hit in enumerate(hits, 1):
            where = f"{hit['title']} ({hit['date'] or 'no date'})"
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


@click.command()
@click.argument("store_path", metavar="STORE")
@click.argument("chunk_id")
@click.option("--next", "next_count", type=int, help="Also walk N chunks forward.")
@click.option("--prev", "prev_count", type=int, help="Also walk N chunks backward.")
@click.option("--parents", is_flag=True, help="Show where the chunk lives instead.")
def chunk(
    store_path: str, chunk_id: str, next_count: int | None, prev_count: int | None, parents: bool
) -> None:
    """Show one chunk, its parents, or a walk from it (as JSON envelopes)."""
    with open_store(store_path, open_indexes=False) as store:
        if parents:
            echo_envelope(store.call("get_chunk_parents", {"id": chunk_id}))
        elif next_count is not None:
            echo_envelope(store.call("get_chunk_next", {"id": chunk_id, "count": next_count}))
        elif prev_count is not None:
            echo_envelope(store.call("get_chunk_prev", {"id": chunk_id, "count": prev_count}))
        else:
            echo_envelope(store.call("research_get_chunk", {"chunk_id": chunk_id}))


@click.command()
@click.argument("store_path", metavar="STORE")
@click.argument("document_id")
@click.option("--from", "start", type=int, help="Print chunk bodies from this position.")
@click.option(
    "--limit", type=int, default=20, show_default=True, help="Chunk bodies to print (1-100)."
)
def doc(store_path: str, document_id: str, start: int | None, limit: int) -> None:
    """Show a document's skeleton, or a window of its chunk bodies with --from."""
    with open_store(store_path, open_indexes=False) as store:
        if start is None:
            echo_envelope(store.call("get_document", {"id": document_id}))
        else:
            echo_envelope(
                store.call(
                    "get_document_chunks", {"id": document_id, "from": start, "limit": limit}
                )
            )


@click.command()
def tools() -> None:
    """List every tool with its input schema."""
    from researchstore.catalogue import TOOLS

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


@click.command()
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
