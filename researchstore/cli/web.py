"""The ``web`` command: the pages for people, served on their own.

Standalone the pages act as the local user (as the command line does) and
ask for no key: bind them to loopback. ``researchstore serve --transport
http`` serves the same pages under ``/web/`` behind its API keys.
"""

from __future__ import annotations

import signal

import click

from researchstore.cli.common import open_store, stopping_on_signals
from researchstore.errors import Interrupted


@click.command()
@click.argument("store_path", metavar="STORE")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind. The pages ask for no key: keep loopback unless every "
    "machine that can reach the address may read the store.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8766,
    show_default=True,
    help="Port to bind (0 picks a free one).",
)
def web(store_path: str, host: str, port: int) -> None:
    """Serve web pages of STORE for people: overview, search, documents, reports.

    Every page is also JSON (add .json to its path). Nothing a page does
    writes to the store, so a read-only store works. The address is printed
    on stderr once the server listens.
    """
    from researchstore.meaning.embedding import bound_query_threads
    from researchstore.serving.hosts import is_loopback
    from researchstore.serving.mcp_server import bind_socket, endpoint_url, serve_http
    from researchstore.web import web_app

    bound_query_threads()  # the pages embed queries only, each on few threads
    try:
        with stopping_on_signals(), open_store(store_path) as store:
            try:
                sock = bind_socket(host, port)
            except OSError as error:
                raise click.ClickException(f"cannot listen on {host}:{port}: {error}") from None
            address = endpoint_url(sock).removesuffix("/mcp")
            bound = str(sock.getsockname()[0])  # what ``host`` named, however spelled
            if not is_loopback(bound):
                click.echo(
                    f"note: {host} is not loopback and the pages ask for no key; for keys, "
                    "use: researchstore serve --transport http (pages under /web/)",
                    err=True,
                )
            store.warm_query_model()  # the first search by meaning then waits for no model
            click.echo(f"researchstore: pages of {store_path} at {address}/", err=True)
            serve_http(web_app(store, host=bound), sock)
    except KeyboardInterrupt as stop:
        signum = stop.signum if isinstance(stop, Interrupted) else signal.SIGINT
        raise click.exceptions.Exit(128 + signum) from None
