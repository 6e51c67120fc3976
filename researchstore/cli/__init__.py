"""The ``researchstore`` command line: each command is a few lines around one call.

    common.py   opening a store, printing JSON, leaving with an error's exit code
    ingest.py   ingest, reingest, parse, rebuild-index, check
    read.py     call, search, chunk, doc, tools, retrieve
    serve.py    serve, keys (the only commands that load the MCP SDK, when run)

The topic modules import ``common`` and nothing else of the CLI; this module
puts their commands under ``main``.
"""

from __future__ import annotations

import click

from researchstore.cli import ingest, read, serve
from researchstore.cli.common import Group


@click.group(cls=Group)
@click.version_option(package_name="researchstore")
def main() -> None:
    """researchstore: research reports in one SQLite file, searchable offline."""


for command in (
    ingest.ingest,
    ingest.reingest,
    ingest.parse,
    ingest.rebuild_index,
    ingest.check,
    read.call,
    read.search,
    read.chunk,
    read.doc,
    read.tools,
    read.retrieve,
    serve.serve,
    serve.keys,
):
    main.add_command(command)

__all__ = ["main"]
