"""The ``serve`` and ``keys`` commands: the MCP server and its API keys.

The MCP SDK is imported inside ``serve`` only: every other command, and
``--help``, starts without it.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import click

from researchstore.cli.common import echo_json, open_store, stopping_on_signals
from researchstore.errors import Interrupted
from researchstore.params import PROFILES, TRANSPORTS
from researchstore.principal import ANY_WORKSPACE, SCOPES

if TYPE_CHECKING:
    from researchstore.library import Library
    from researchstore.serving.settings import ServeSettings

#: The defaults of ``mcp_server.HttpLimits``, here too so that ``--help`` can
#: show them without loading the MCP SDK (a test keeps the two the same).
REQUESTS_PER_KEY = 256
CALLS_PER_KEY = 8


@click.command()
@click.argument("store_path", metavar="STORE")
@click.option(
    "--transport",
    type=click.Choice(TRANSPORTS),
    default="stdio",
    show_default=True,
    help="stdio for a client that starts the server; http for streamable HTTP.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind over HTTP. Keep loopback unless clients are elsewhere.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port to bind over HTTP (0 picks a free one).",
)
@click.option(
    "--profile",
    type=click.Choice(PROFILES),
    default="core",
    show_default=True,
    help="core: search, get and navigation; full: adds evidence retrieval and, "
    "over stdio, ingest_file.",
)
@click.option(
    "--access-log",
    type=click.Path(dir_okay=False, writable=True),
    metavar="FILE",
    help="Over HTTP, append the access log (one line per request: time, key id, "
    "tool, status, ms) to FILE instead of stderr.",
)
@click.option(
    "--requests-per-key",
    type=click.IntRange(1),
    default=REQUESTS_PER_KEY,
    show_default=True,
    help="Over HTTP, the requests one API key may have in flight at once, in each server process.",
)
@click.option(
    "--calls-per-key",
    type=click.IntRange(1),
    default=CALLS_PER_KEY,
    show_default=True,
    help="Over HTTP, the tool calls one API key may run at once, in each server "
    "process (more wait their turn).",
)
@click.option(
    "--workers",
    type=click.IntRange(1),
    default=None,
    metavar="N",
    help="Over HTTP, uvicorn worker processes serving the port, so that calls use "
    "every core [default: one per core]; 1 serves in this process.",
)
def serve(
    store_path: str,
    transport: str,
    host: str,
    port: int,
    profile: str,
    access_log: str | None,
    requests_per_key: int,
    calls_per_key: int,
    workers: int | None,
) -> None:
    """Serve STORE's tools to MCP clients (stdio, or HTTP with an x-api-key).

    Over HTTP every request needs a key from 'researchstore keys create'; the
    address is printed on stderr once the server listens, and each request is
    a line of the access log.
    """
    from researchstore.meaning.embedding import bound_query_threads
    from researchstore.serving.settings import ServeSettings, default_workers

    bound_query_threads()  # a server embeds queries only, each on few threads
    try:
        with stopping_on_signals():
            if transport == "stdio":
                with open_store(store_path) as store:
                    _serve_stdio(store, profile)
                return
            settings = ServeSettings(
                store=store_path,
                profile=profile,
                host=host,
                access_log=access_log,
                requests_per_key=requests_per_key,
                calls_per_key=calls_per_key,
            )
            _serve_http(settings, port, default_workers() if workers is None else workers)
    except KeyboardInterrupt as stop:
        # Stopped as a server is: the store was closed (and checkpointed) on the way out.
        signum = stop.signum if isinstance(stop, Interrupted) else signal.SIGINT
        raise click.exceptions.Exit(128 + signum) from None


def _serve_stdio(store: Library, profile: str) -> None:
    import anyio

    from researchstore.serving.mcp_server import serve_stdio

    store.warm_query_model()
    anyio.run(lambda: serve_stdio(store, profile=profile))


def _serve_http(settings: ServeSettings, port: int, workers: int) -> None:
    """Bind, say where, then serve with ``workers`` processes (each opens the store)."""
    from dataclasses import replace

    from researchstore.serving.auth import list_keys
    from researchstore.serving.mcp_server import (
        WEB_PATH,
        bind_socket,
        endpoint_url,
        serve_processes,
    )

    # Opened here to check it and its keys before binding; closed before serving.
    with open_store(settings.store) as store:
        has_keys = bool(list_keys(store, include_revoked=False))
    if settings.access_log is not None:
        try:
            with open(settings.access_log, "a", encoding="utf-8"):
                pass
        except OSError as error:
            raise click.ClickException(f"cannot write {settings.access_log}: {error}") from None
    try:
        sock = bind_socket(settings.host, port)
    except OSError as error:
        raise click.ClickException(f"cannot listen on {settings.host}:{port}: {error}") from None
    with sock:
        if not has_keys:
            click.echo(
                f"note: {settings.store} has no API key yet; every request will be refused. "
                f"Create one with: researchstore keys create {settings.store}",
                err=True,
            )
        if workers > 1:
            click.echo(f"researchstore: {workers} worker processes serve the port", err=True)
        else:
            click.echo("researchstore: one process serves the port", err=True)
        url = endpoint_url(sock)
        click.echo(
            f"researchstore: serving the {settings.profile} profile at {url} (x-api-key required)",
            err=True,
        )
        click.echo(
            f"researchstore: pages for people at {url.removesuffix('/mcp')}{WEB_PATH}/ "
            "(the same API keys: a sign-in form sets a cookie)",
            err=True,
        )
        bound = str(sock.getsockname()[0])  # what ``host`` named, however spelled
        serve_processes(replace(settings, host=bound), sock, workers=workers)


@click.group()
def keys() -> None:
    """Create, list and revoke the API keys of the HTTP server."""


@keys.command("create")
@click.argument("store_path", metavar="STORE")
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    type=click.Choice(sorted(SCOPES)),
    help="A right the key grants (repeatable): "
    + "; ".join(f"{scope}: {meaning}" for scope, meaning in SCOPES.items()),
)
@click.option(
    "--workspace",
    "workspaces",
    multiple=True,
    metavar="UUID",
    help=f"A workspace the key may use (repeatable); {ANY_WORKSPACE!r} for any.",
)
@click.option("--label", help="A note to recognise the key by in 'keys list'.")
def create(
    store_path: str, scopes: tuple[str, ...], workspaces: tuple[str, ...], label: str | None
) -> None:
    """Create a key and print it: it is shown this once and stored only hashed.

    A key with no scope can use the read tools (search, get, navigation).
    """
    from researchstore.serving.auth import create_key

    with open_store(store_path) as store:
        key = create_key(store, scopes=scopes, workspaces=workspaces, label=label)
    click.echo(key)
    click.echo("Store this key now: it cannot be shown again.", err=True)


@keys.command("list")
@click.argument("store_path", metavar="STORE")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--live", is_flag=True, help="Leave out revoked keys.")
def list_command(store_path: str, as_json: bool, live: bool) -> None:
    """List STORE's keys: id, label, scopes, workspaces and dates (never a secret)."""
    from researchstore.serving.auth import list_keys

    with open_store(store_path) as store:
        listed = list_keys(store, include_revoked=not live)
    if as_json:
        echo_json(listed)
        return
    if not listed:
        click.echo("no keys")
    for key in listed:
        state = f"revoked {key['revoked_at']}" if key["revoked_at"] else "live"
        click.echo(
            f"{key['prefix']}…  {state}  scopes={','.join(key['scopes']) or '-'}  "
            f"workspaces={','.join(key['workspaces']) or '-'}  created {key['created_at']}  "
            f"last used {key['last_used_at'] or 'never'}"
            + (f"  ({key['label']})" if key["label"] else "")
        )


@keys.command("revoke")
@click.argument("store_path", metavar="STORE")
@click.argument("key_id")
def revoke(store_path: str, key_id: str) -> None:
    """Revoke the key KEY_ID (as 'keys list' shows it); it is refused at once."""
    from researchstore.serving.auth import revoke_key

    with open_store(store_path) as store:
        revoked = revoke_key(store, key_id)
    if not revoked:
        raise click.ClickException(f"no live key {key_id!r} in {store_path}")
    click.echo(f"revoked {key_id}")
