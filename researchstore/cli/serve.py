"""The ``serve`` and ``keys`` commands: the MCP server and its API keys.

The MCP SDK is imported inside ``serve`` only: every other command, and
``--help``, starts without it.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from typing import TYPE_CHECKING, TextIO

import click

from researchstore.cli.common import echo_json, open_store, stopping_on_signals
from researchstore.errors import Interrupted
from researchstore.params import PROFILES, TRANSPORTS
from researchstore.principal import ANY_WORKSPACE, SCOPES

if TYPE_CHECKING:
    from researchstore.mcp_server import HttpLimits
    from researchstore.mcp_workers import WorkerPool
    from researchstore.store import Store

#: The defaults of ``mcp_server.HttpLimits``, here too so that ``--help`` can
#: show them without loading the MCP SDK (a test keeps the two the same).
MAX_SESSIONS = 1000
SESSIONS_PER_KEY = 64
SESSION_IDLE_TIMEOUT_S = 300.0
REQUESTS_PER_KEY = 256


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
    "--sessions-per-key",
    type=click.IntRange(1),
    default=SESSIONS_PER_KEY,
    show_default=True,
    help="Over HTTP, the MCP sessions one API key may hold open at once.",
)
@click.option(
    "--max-sessions",
    type=click.IntRange(1),
    default=MAX_SESSIONS,
    show_default=True,
    help="Over HTTP, the MCP sessions open at once, all keys together.",
)
@click.option(
    "--session-idle-timeout",
    type=click.FloatRange(0, min_open=True),
    default=SESSION_IDLE_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="Over HTTP, end a session that has had no request for this long.",
)
@click.option(
    "--requests-per-key",
    type=click.IntRange(1),
    default=REQUESTS_PER_KEY,
    show_default=True,
    help="Over HTTP, the requests one API key may have in flight at once.",
)
@click.option(
    "--workers",
    type=click.IntRange(0),
    default=None,
    metavar="N",
    help="Over HTTP, worker processes answering the read tools' calls, so that calls "
    "use every core [default: one per core, none on one core]; "
    "0 answers every "
    "call in the server process.",
)
def serve(
    store_path: str,
    transport: str,
    host: str,
    port: int,
    profile: str,
    access_log: str | None,
    sessions_per_key: int,
    max_sessions: int,
    session_idle_timeout: float,
    requests_per_key: int,
    workers: int | None,
) -> None:
    """Serve STORE's tools to MCP clients (stdio, or HTTP with an x-api-key).

    Over HTTP every request needs a key from 'researchstore keys create'; the
    address is printed on stderr once the server listens, and each request is
    a line of the access log.
    """
    from researchstore.embedding import bound_query_threads
    from researchstore.mcp_server import HttpLimits

    bound_query_threads()  # a server embeds queries only, each on few threads
    limits = HttpLimits(
        max_sessions=max_sessions,
        sessions_per_key=sessions_per_key,
        session_idle_timeout_s=session_idle_timeout,
        requests_per_key=requests_per_key,
    )
    from researchstore.mcp_workers import WorkerPool, default_workers

    pool = None
    if transport == "http":
        count = default_workers() if workers is None else workers
        if count:
            # Before anything opens or starts a thread: a fork copies one thread.
            try:
                pool = WorkerPool.fork(store_path, profile=profile, count=count)
            except (RuntimeError, OSError) as error:
                click.echo(f"researchstore: no worker processes ({error})", err=True)
    try:
        with stopping_on_signals(), open_store(store_path) as store:
            _serve(store, store_path, transport, host, port, profile, access_log, limits, pool)
    except KeyboardInterrupt as stop:
        # Stopped as a server is: the store was closed (and checkpointed) on the way out.
        signum = stop.signum if isinstance(stop, Interrupted) else signal.SIGINT
        raise click.exceptions.Exit(128 + signum) from None
    finally:
        if pool is not None:
            pool.close()


def _serve(
    store: Store,
    store_path: str,
    transport: str,
    host: str,
    port: int,
    profile: str,
    access_log: str | None,
    limits: HttpLimits,
    pool: WorkerPool | None,
) -> None:
    import anyio

    from researchstore.auth import list_keys
    from researchstore.mcp_server import (
        bind_socket,
        endpoint_url,
        http_app,
        serve_http,
        serve_stdio,
    )

    if transport == "stdio":
        store.warm_query_model()
        anyio.run(lambda: serve_stdio(store, profile=profile))
        return
    try:
        sock = bind_socket(host, port)
    except OSError as error:
        raise click.ClickException(f"cannot listen on {host}:{port}: {error}") from None
    if pool is not None:
        for problem in pool.start():
            click.echo(f"researchstore: {problem}", err=True)
    if pool is None or not pool.live:
        store.warm_query_model()  # no worker: searches are answered here (workers load their own)
    with contextlib.ExitStack() as stack:
        log: TextIO = sys.stderr
        if access_log is not None:
            try:
                log = stack.enter_context(open(access_log, "a", encoding="utf-8"))
            except OSError as error:
                raise click.ClickException(f"cannot write {access_log}: {error}") from None
        if not list_keys(store, include_revoked=False):
            click.echo(
                f"note: {store_path} has no API key yet; every request will be refused. "
                f"Create one with: researchstore keys create {store_path}",
                err=True,
            )
        if pool is not None and pool.live:
            click.echo(
                f"researchstore: {pool.live} worker processes answer the read tools' calls "
                f"(pids {', '.join(map(str, pool.pids))})",
                err=True,
            )
        else:
            click.echo("researchstore: the server process answers every call", err=True)
        click.echo(
            f"researchstore: serving the {profile} profile at {endpoint_url(sock)} "
            "(x-api-key required)",
            err=True,
        )
        from researchstore.mcp_server import WEB_PATH
        from researchstore.web import web_app

        click.echo(
            f"researchstore: pages for people at {endpoint_url(sock).removesuffix('/mcp')}"
            f"{WEB_PATH}/ (the same API keys: a sign-in form sets a cookie)",
            err=True,
        )
        bound = str(sock.getsockname()[0])  # what ``host`` named, however spelled
        pages = web_app(store, require_key=True, host=bound)
        app = http_app(
            store,
            profile=profile,
            host=bound,
            limits=limits,
            access_log=log,
            pages=pages,
            workers=pool,
        )
        serve_http(app, sock)


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
    from researchstore.auth import create_key

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
    from researchstore.auth import list_keys

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
    from researchstore.auth import revoke_key

    with open_store(store_path) as store:
        revoked = revoke_key(store, key_id)
    if not revoked:
        raise click.ClickException(f"no live key {key_id!r} in {store_path}")
    click.echo(f"revoked {key_id}")
