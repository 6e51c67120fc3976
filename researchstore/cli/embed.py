"""``researchstore embed``: a vector for every chunk that has none."""

from __future__ import annotations

import sys

import click

from researchstore.cli.common import open_store, print_embed_summary


@click.command()
@click.argument("store_path", metavar="STORE")
@click.option(
    "--model",
    "model_folder",
    type=click.Path(exists=True, file_okay=False),
    help="A local sentence-transformers model folder (default: the store's model, "
    "else all-MiniLM-L6-v2 from the semantic extra).",
)
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    help="Where the model runs (default: cuda when torch sees a GPU, else cpu).",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1, 4096),
    default=64,
    show_default=True,
    help="Chunks the model embeds at once.",
)
@click.option("--no-retry", is_flag=True, help="Leave chunks whose embedding failed before.")
@click.option(
    "--drop",
    is_flag=True,
    help="First forget every vector and the model they came from (to change models).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def embed(
    store_path: str,
    model_folder: str | None,
    device: str | None,
    batch_size: int,
    no_retry: bool,
    drop: bool,
    as_json: bool,
) -> None:
    """Embed every chunk of STORE that has no vector yet, for search by meaning.

    Resumable: what was embedded stays when the run is stopped (Ctrl-C,
    SIGTERM), and the next run goes on from there. Chunks whose embedding
    fails are marked embed_failed with the reason (search still finds them by
    words; navigation skips them) and tried again on the next run. Exits 1
    when a chunk failed, 130/143 when stopped.
    """
    from researchstore.embedding import load_embedder
    from researchstore.reingest import StopSignals

    with StopSignals(), open_store(store_path) as store:
        if drop:
            dropped = store.drop_vectors()
            click.echo(f"dropped {dropped} vectors", err=True)
        embedder = load_embedder(model_folder, device=device) if model_folder else None
        if embedder is None and device is not None:
            embedder = store.model_for_chunks(device)
        summary = store.embed(embedder=embedder, batch_size=batch_size, retry_failed=not no_retry)
    print_embed_summary(summary, as_json=as_json)
    if summary.failed:
        sys.exit(1)
