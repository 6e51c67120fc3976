"""``researchstore embed``: a vector for every chunk that has none."""

from __future__ import annotations

import sys

import click

from researchstore.cli.common import open_store, print_embed_summary


@click.command()
@click.argument("store_path", metavar="STORE")
@click.option(
    "--model",
    "model",
    metavar="NAME|DIR",
    help="all-MiniLM-L6-v2 (English; the semantic extra) or multilingual-e5-small (the "
    "multilingual extra), or a local sentence-transformers model folder (default: "
    "RESEARCHSTORE_MODEL or RESEARCHSTORE_MODEL_FOLDER, else the store's model, else "
    "chosen by the store's languages; it must be the store's model).",
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
@click.option(
    "--ray",
    "ray_address",
    metavar="ADDRESS",
    help="Embed on the Ray cluster at ADDRESS (auto: the one started on this machine with "
    "ray start --head); this process stays the store's one writer. Needs the ray extra.",
)
@click.option(
    "--ray-actors",
    type=click.IntRange(1, 4096),
    help="With --ray: the actors that embed (default: one per GPU where the cluster has "
    "GPUs, else one per node).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def embed(
    store_path: str,
    model: str | None,
    device: str | None,
    batch_size: int,
    no_retry: bool,
    drop: bool,
    ray_address: str | None,
    ray_actors: int | None,
    as_json: bool,
) -> None:
    """Embed every chunk of STORE that has no vector yet, for search by meaning.

    Resumable: what was embedded stays when the run is stopped (Ctrl-C,
    SIGTERM), and the next run goes on from there. Chunks whose embedding
    fails are marked embed_failed with the reason (search still finds them by
    words; navigation skips them) and tried again on the next run. Exits 1
    when a chunk failed, 130/143 when stopped. With --ray, the actors of a
    Ray cluster embed (each loads the model from its own node's files) and
    this process reads and writes the store as it does alone.
    """
    from researchstore.meaning.embedding import load_embedder, parse_model
    from researchstore.reingest import StopSignals

    spec = parse_model(model) if model else None
    if ray_actors is not None and ray_address is None:
        raise click.UsageError("--ray-actors goes with --ray ADDRESS")
    ray = None
    if ray_address is not None:
        from researchstore.meaning.ray_embed import LocalModel, RayEmbedding, load_ray

        load_ray()  # before the store loads its vector index (ray_embed.load_ray says why)
        load_model = LocalModel(spec, device=device) if spec is not None else None
        ray = RayEmbedding(ray_address, actors=ray_actors, load_model=load_model)

    with StopSignals(), open_store(store_path) as store:
        if drop:
            dropped = store.drop_vectors()
            click.echo(f"dropped {dropped} vectors", err=True)
        embedder = (
            load_embedder(spec.folder, name=spec.name, device=device)
            if spec is not None and ray is None
            else None
        )
        summary = store.embed(
            embedder=embedder,
            device=device,
            batch_size=batch_size,
            retry_failed=not no_retry,
            ray=ray,
        )
    print_embed_summary(summary, as_json=as_json)
    if summary.failed:
        sys.exit(1)
