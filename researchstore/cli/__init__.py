"""The ``researchstore`` command line: each command is a few lines around one call.

    common.py   opening a store, printing JSON, leaving with an error's exit code
    ingest.py   ingest, reingest, parse, rebuild-index, check, remove-source
    embed.py    embed (vectors for search by meaning)
    read.py     call, search, chunk, doc, tools, retrieve
    inspect.py  sources, reports, stats, export (what a store holds, read only)
    serve.py    serve, keys (the only commands that load the MCP SDK, when run)
    web.py      web (the pages for people; it serves them with the MCP server's HTTP stack)

The topic modules import ``common`` and nothing else of the CLI; this module
names their commands under ``main``. A topic module is imported only when one
of its commands runs (or when ``--help`` lists them all), so a one-shot
``researchstore call`` from an agent loads what that call needs and no more.
"""

from __future__ import annotations

from importlib import import_module

import click

from researchstore.cli.common import Group

#: Every command: its name, and the module and attribute that define it.
COMMANDS: dict[str, tuple[str, str]] = {
    "ingest": ("ingest", "ingest"),
    "reingest": ("ingest", "reingest"),
    "parse": ("ingest", "parse"),
    "rebuild-index": ("ingest", "rebuild_index"),
    "check": ("ingest", "check"),
    "remove-source": ("ingest", "remove_source"),
    "embed": ("embed", "embed"),
    "call": ("read", "call"),
    "search": ("read", "search"),
    "chunk": ("read", "chunk"),
    "doc": ("read", "doc"),
    "tools": ("read", "tools"),
    "retrieve": ("read", "retrieve"),
    "sources": ("inspect", "sources"),
    "reports": ("inspect", "reports"),
    "stats": ("inspect", "stats"),
    "export": ("inspect", "export"),
    "serve": ("serve", "serve"),
    "keys": ("serve", "keys"),
    "web": ("web", "web"),
}


class LazyGroup(Group):
    """A group that imports a command's module when the command is wanted."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute = COMMANDS[cmd_name]
        command = getattr(import_module(f"researchstore.cli.{module}"), attribute)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup)
@click.version_option(package_name="researchstore")
def main() -> None:
    """researchstore: research reports in one SQLite file, searchable offline."""


__all__ = ["main"]
