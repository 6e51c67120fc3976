"""The embedding stage spread over a Ray cluster: its actors embed, this process writes.

``researchstore embed STORE --ray ADDRESS`` (``Library.embed(ray=...)``). This
process stays the store's one reader and writer (the file belongs to one
host and one writer): it reads the chunks that have no vector by rowid, as a
run in one process does (``embed.read_batches``), hands them to the cluster a
round at a time, and writes what comes back as it comes, through the same
write path (``embed.write_outcomes``: short transactions, ``embed_failed``,
the vector index's pending rows). On the cluster, Ray Data's ``map_batches``
runs ``embed.embed_batch`` in a pool of actors (``ChunkEmbedder``), each
loading the model once from its own node's files: what travels is what
names the model (``LocalModel``: the folder the user named, or the default
model's package), never a loaded model nor a folder a store file records.

Each read batch is one block and one call of ``embed_batch``: a chunk the
model cannot embed fails alone, and the model is given the texts in the
batches a one-process run gives it. Every actor reports its model's id with
each batch, and the store refuses vectors of a model that is not its own.

Every batch written stays: an interrupted run (Ctrl-C, SIGTERM) goes on from
there the next time. A node lost mid-run loses nothing: Ray restarts its
actor and retries the batches it held, and a batch written twice would
still be one vector a chunk.

This is the only module that imports ``ray`` (``pip install 'researchstore[ray]'``),
and only once a run starts; Ray's errors become researchstore's in one
place (``cluster_errors``).
"""

from __future__ import annotations

import importlib.util
import logging
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from researchstore.errors import InvalidInput, ResearchStoreError, UpstreamUnavailable
from researchstore.meaning.embed import (
    BatchOutcome,
    EmbedSummary,
    claim_store_model,
    embed_batch,
    read_batches,
    write_outcomes,
)
from researchstore.meaning.embedding import MULTILINGUAL, SemanticUnavailable, packaged_name
from researchstore.meaning.model_choice import model_for_chunks
from researchstore.storage.vectors import ChunkToEmbed, ModelMismatch, StoreModel, store_model

if TYPE_CHECKING:
    import pyarrow as pa

    from researchstore.meaning.embedding import Embedder, ModelSpec
    from researchstore.store import Store

#: Read batches handed to the cluster at once. Their texts wait in the
#: cluster's object store, and each round starts its actors (and loads the
#: model) anew: 64 batches of 512 chunks take about 25 minutes on two
#: one-CPU nodes, against about 15 s to start.
ROUND_BATCHES = 64
#: What a read batch carries to the actors.
CHUNK_COLUMNS = ("rowid", "chunk_id", "report_id", "text", "context")
#: Colour codes Ray puts in its messages.
ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: A traceback's last line: the exception raised, and its message.
RAISED = re.compile(r"([A-Za-z_][\w.]*): (.*)")
#: The native modules that must load in this order (``load_ray``).
RAY_NATIVE, USEARCH_NATIVE = "ray._raylet", "usearch.compiled"


@dataclass(frozen=True, slots=True)
class LocalModel:
    """Loads the model in an actor, from its own node's files.

    ``spec``: a named model, from its package (its extra installed on every
    node), or a sentence-transformers folder (at the same path on every
    node). Picklable: this, not a model, is what travels.
    """

    spec: ModelSpec
    device: str | None = None

    def __call__(self) -> Embedder:
        from researchstore.meaning.embedding import load_embedder

        return load_embedder(self.spec.folder, name=self.spec.name, device=self.device)


@dataclass(frozen=True, slots=True)
class RayEmbedding:
    """An embedding run on a Ray cluster: where, with how many actors, with which model."""

    #: ``auto``: the cluster running on this machine (``ray start --head``);
    #: else the ``HOST:PORT`` of its head.
    address: str = "auto"
    #: Actors that embed; None: one per GPU where the cluster has GPUs, else one per node.
    actors: int | None = None
    #: Builds the model in each actor (picklable: it travels to them); None:
    #: ``LocalModel`` of the model a one-process run would load
    #: (``model_choice.model_for_chunks``).
    load_model: Callable[[], Embedder] | None = None


@dataclass(frozen=True, slots=True)
class ActorPlan:
    """How many actors embed, and what each asks Ray for."""

    actors: int
    num_cpus: float
    num_gpus: float | None = None


@dataclass(frozen=True, slots=True)
class ModelOnCluster:
    """The model an actor loaded, as it reports it with each batch (a ``ModelIdentity``)."""

    model_id: str
    dimension: int
    folder: Path | None


def embed_on_ray(
    store: Store,
    settings: RayEmbedding | str,
    *,
    device: str | None = None,
    batch_size: int = 64,
    retry_failed: bool = True,
    progress: bool | None = None,
    older_than: int | None = None,
) -> EmbedSummary:
    """Embed every chunk of ``store`` that has no vector on a Ray cluster (see the module)."""
    if isinstance(settings, str):
        settings = RayEmbedding(address=settings)
    if settings.actors is not None and settings.actors < 1:
        raise InvalidInput("a Ray run needs at least one actor", field="ray_actors")
    load_ray()
    started = time.perf_counter()
    with store.reading() as conn:
        recorded = store_model(conn)
        choice = None if settings.load_model else model_for_chunks(conn)
    summary = EmbedSummary(model=recorded.model_id if recorded else "")
    if choice is not None:
        load_model: Callable[[], Embedder] = LocalModel(choice.spec, device=device)
        summary.note = choice.note
    else:
        load_model = cast("Callable[[], Embedder]", settings.load_model)
    if isinstance(load_model, LocalModel):
        refuse_another_named_model(recorded, load_model.spec)
        device = model_device(load_model.spec, device)
    with cluster_errors(settings.address), connected(settings.address):
        plan = actor_plan(settings.actors, device)
        outcomes = embedded_on_cluster(
            store,
            load_model,
            summary,
            plan=plan,
            batch_size=batch_size,
            retry_failed=retry_failed,
        )
        return write_outcomes(
            store,
            outcomes,
            summary,
            description=f"Embedding on Ray ({plan.actors} actors)",
            started=started,
            retry_failed=retry_failed,
            progress=progress,
            older_than=older_than,
        )


def refuse_another_named_model(recorded: StoreModel | None, spec: ModelSpec) -> None:
    """Refuse a model named by name that is not the one the store's vectors come from.

    Before a cluster is reached: the actors would load the model only for
    their first batch to be refused (``claim_store_model`` still refuses
    what this cannot tell by name: a folder, or another file of a name).
    """
    if recorded is None or spec.name is None:
        return
    if packaged_name(recorded.model_id) != spec.name:
        raise ModelMismatch(
            f"this store's vectors come from {recorded.model_id} ({recorded.dimension} "
            f"dimensions), not {spec.name}; vectors of two models are never mixed. Use the "
            "store's model, or drop its vectors first (researchstore embed STORE --drop) "
            "and embed again with the new one",
            field="model",
        )


def model_device(spec: ModelSpec, device: str | None) -> str | None:
    """Where the actors' model computes: multilingual-e5-small on the CPU only.

    Its actors then ask the cluster for CPUs, never for a GPU they would hold
    and leave idle.
    """
    if spec.folder is not None or spec.name != MULTILINGUAL:
        return device
    if device == "cuda":
        raise SemanticUnavailable(
            f"{MULTILINGUAL} runs on the CPU only (--device cpu)", field="device"
        )
    return "cpu"


def load_ray() -> None:
    """Import Ray, or say why it cannot run in this process.

    Ray must be loaded before usearch (the vector index): usearch's wheel
    links its own copy of the C++ standard library and exports it, and a
    Ray loaded after it aborts the whole process at ``ray.init``
    (``std::regex_error``, usearch 2.26, Ray 2.60). The command line calls
    this before it opens the store.
    """
    if importlib.util.find_spec("ray") is None:
        raise InvalidInput(
            "embedding on a Ray cluster needs the ray extra: pip install 'researchstore[ray]'",
            field="ray",
        )
    loaded = list(sys.modules)  # in the order they were first imported
    if USEARCH_NATIVE in sys.modules and (
        RAY_NATIVE not in sys.modules or loaded.index(USEARCH_NATIVE) < loaded.index(RAY_NATIVE)
    ):
        raise InvalidInput(
            "this process loaded the vector index (usearch) before Ray, and Ray would abort "
            "it: import ray before opening the store (researchstore embed --ray does)",
            field="ray",
        )
    import ray  # noqa: F401


def embedded_on_cluster(
    store: Store,
    load_model: Callable[[], Embedder],
    summary: EmbedSummary,
    *,
    plan: ActorPlan,
    batch_size: int,
    retry_failed: bool,
) -> Iterator[BatchOutcome]:
    """Each read batch's outcome, as the actors finish it (in no set order).

    The first batch claims the store for the actors' model (or is refused);
    every later one must come from the same model.
    """
    import ray

    batches = read_batches(store, retry_failed=retry_failed)
    model: ModelOnCluster | None = None
    while chunks_round := list(islice(batches, ROUND_BATCHES)):
        # Put here, read by the actors' nodes: the driver owns the blocks, so
        # a lost node loses none of them.
        blocks: list[Any] = [ray.put(chunk_table(batch)) for batch in chunks_round]
        mapped = ray.data.from_arrow_refs(blocks).map_batches(
            ChunkEmbedder,
            fn_constructor_kwargs={"load_model": load_model, "batch_size": batch_size},
            # A block is a read batch, and a call takes one whole: the model is
            # given the batches a one-process run gives it.
            batch_size=len(chunks_round[0]),
            batch_format="pyarrow",
            # No more actors than blocks: each would load the model for nothing.
            compute=ray.data.ActorPoolStrategy(size=min(plan.actors, len(blocks))),
            num_cpus=plan.num_cpus,
            num_gpus=plan.num_gpus,
        )
        for block in mapped.iter_batches(batch_size=None, batch_format="pyarrow"):
            table = cast("pa.Table", block)
            if not table.num_rows:
                continue
            reported, node_id, outcome = batch_outcome(table)
            if model is None:
                claim_store_model(store, reported)
                model, summary.model = reported, reported.model_id
            elif (reported.model_id, reported.dimension) != (model.model_id, model.dimension):
                raise ModelMismatch(
                    f"the actors on the Ray cluster loaded two models, {model.model_id} and "
                    f"{reported.model_id} (node {node_id}): install the same model on every "
                    "node; what was written stays",
                    field="model",
                )
            summary.nodes[node_id] = summary.nodes.get(node_id, 0) + table.num_rows
            yield outcome


class ChunkEmbedder:
    """An actor's part: loads the model once, then embeds one read batch a call."""

    def __init__(self, load_model: Callable[[], Embedder], batch_size: int) -> None:
        import ray

        self.embedder = load_model()
        self.batch_size = batch_size
        self.node_id = str(ray.get_runtime_context().get_node_id())

    def __call__(self, table: pa.Table) -> pa.Table:
        import pyarrow as pa

        columns = [table.column(name).to_pylist() for name in CHUNK_COLUMNS]
        batch = [
            ChunkToEmbed(rowid, chunk_id, report_id, text, context=context)
            for rowid, chunk_id, report_id, text, context in zip(*columns, strict=True)
        ]
        vectors, failures = embed_batch(self.embedder, batch, batch_size=self.batch_size)
        done: list[tuple[ChunkToEmbed, bytes | None, str | None]] = [
            (chunk, blob, None) for chunk, blob in vectors
        ]
        done += [(chunk, None, reason) for chunk, reason in failures]
        count = len(done)
        folder = self.embedder.folder
        return pa.table(
            {
                "rowid": pa.array([chunk.rowid for chunk, _, _ in done], pa.int64()),
                "chunk_id": pa.array([chunk.chunk_id for chunk, _, _ in done], pa.string()),
                "report_id": pa.array([chunk.report_id for chunk, _, _ in done], pa.int64()),
                "vector": pa.array([blob for _, blob, _ in done], pa.binary()),
                "failure": pa.array([reason for _, _, reason in done], pa.string()),
                "model_id": pa.array([self.embedder.model_id] * count, pa.string()),
                "dimension": pa.array([self.embedder.dimension] * count, pa.int64()),
                "folder": pa.array([str(folder) if folder else None] * count, pa.string()),
                "node_id": pa.array([self.node_id] * count, pa.string()),
            }
        )


def chunk_table(batch: list[ChunkToEmbed]) -> pa.Table:
    """A read batch as the block the actors are given."""
    import pyarrow as pa

    return pa.table(
        {
            "rowid": pa.array([chunk.rowid for chunk in batch], pa.int64()),
            "chunk_id": pa.array([chunk.chunk_id for chunk in batch], pa.string()),
            "report_id": pa.array([chunk.report_id for chunk in batch], pa.int64()),
            "text": pa.array([chunk.text for chunk in batch], pa.string()),
            "context": pa.array([chunk.context for chunk in batch], pa.string()),
        }
    )


def batch_outcome(table: pa.Table) -> tuple[ModelOnCluster, str, BatchOutcome]:
    """What an actor sent back: its model, its node, and the batch's vectors and failures.

    The chunks come back without their text: writing needs only which row
    each one is, and that it still holds the same chunk.
    """
    rows = table.to_pylist()
    first = rows[0]
    model = ModelOnCluster(
        model_id=first["model_id"],
        dimension=first["dimension"],
        folder=Path(first["folder"]) if first["folder"] else None,
    )
    vectors: list[tuple[ChunkToEmbed, bytes]] = []
    failures: list[tuple[ChunkToEmbed, str]] = []
    for row in rows:
        chunk = ChunkToEmbed(row["rowid"], row["chunk_id"], row["report_id"], "")
        if row["vector"] is not None:
            vectors.append((chunk, row["vector"]))
        else:
            failures.append((chunk, row["failure"]))
    return model, first["node_id"], (vectors, failures)


def actor_plan(requested: int | None, device: str | None) -> ActorPlan:
    """How many actors embed, and what each asks Ray for.

    A GPU each where the cluster has GPUs (unless ``device`` is ``cpu``);
    else CPUs, as many as the smallest node has (shared out when more actors
    than nodes are asked for), so that one actor takes a node and its model
    all its cores.
    """
    import ray

    live = [node for node in ray.nodes() if node.get("Alive")]  # type: ignore[no-untyped-call]
    nodes = [node["Resources"] for node in live]
    gpus = int(sum(node.get("GPU", 0) for node in nodes))
    if device == "cuda" and not gpus:
        raise InvalidInput(
            "--device cuda was asked for, but the Ray cluster has no GPU", field="device"
        )
    if gpus and device != "cpu":
        actors = requested or gpus
        if actors > gpus:
            raise InvalidInput(
                f"{actors} actors were asked for, but the Ray cluster has {gpus} GPUs: "
                "one actor per GPU",
                field="ray_actors",
            )
        return ActorPlan(actors, num_cpus=1, num_gpus=1)
    cpus = [int(node.get("CPU", 0)) for node in nodes if node.get("CPU", 0) >= 1]
    if not cpus:
        raise UpstreamUnavailable("the Ray cluster has no node with a CPU to embed on", field="ray")
    actors = requested or len(cpus)
    if actors > sum(cpus):
        raise InvalidInput(
            f"{actors} actors were asked for, but the Ray cluster has {sum(cpus)} CPUs",
            field="ray_actors",
        )
    return ActorPlan(actors, num_cpus=max(1, min(min(cpus), sum(cpus) // actors)))


@contextmanager
def connected(address: str) -> Iterator[None]:
    """Connected to the cluster at ``address`` while the block lasts.

    A process already connected (its own ``ray.init``) embeds on that
    cluster and stays connected. Ray Data's own progress bars and notes
    are silenced while the block lasts: the run has its bar and summary.
    """
    import ray

    if ray.is_initialized():
        with quiet_ray_data():
            yield
        return
    in_main_thread = threading.current_thread() is threading.main_thread()
    on_sigterm = signal.getsignal(signal.SIGTERM)
    try:
        ray.init(address=address, logging_level=logging.WARNING)
    finally:
        # ray.init makes SIGTERM exit the process at once; a SIGTERM must stop
        # the run as Ctrl-C does (``reingest.StopSignals``), its batches kept.
        if in_main_thread and on_sigterm is not None:
            signal.signal(signal.SIGTERM, on_sigterm)
    try:
        with quiet_ray_data():
            yield
    finally:
        ray.shutdown()  # this process's connection and its actors; never the cluster


@contextmanager
def quiet_ray_data() -> Iterator[None]:
    import ray.data

    context = ray.data.DataContext.get_current()
    logger = logging.getLogger("ray.data")
    bars, level = context.enable_progress_bars, logger.level
    context.enable_progress_bars = False
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        context.enable_progress_bars = bars
        logger.setLevel(level)


@contextmanager
def cluster_errors(address: str) -> Iterator[None]:
    """Ray's errors as researchstore's: the one place they are translated.

    What was written before an error stays; the next run goes on from there.
    """
    import ray.exceptions

    try:
        yield
    except ray.exceptions.AuthenticationError as error:
        raise UpstreamUnavailable(
            f"the Ray cluster at {address} refused this process ({error.message}): since Ray "
            "2.59 set RAY_AUTH_MODE=token here as on every node of the cluster, with its "
            "token (~/.ray/auth_token, RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN)",
            field="ray",
        ) from None
    except ray.exceptions.RayError as error:
        cause = _cause(error)
        if isinstance(cause, ResearchStoreError):  # raised in an actor's call
            raise type(cause)(
                f"on the Ray cluster: {cause.message}", field=cause.field, details=cause.details
            ) from None
        raised, why = _raised_in_actor(cause)
        if raised is not None:  # an actor could not start (its model did not load)
            raise raised(f"on the Ray cluster: {why}", field="model") from None
        raise UpstreamUnavailable(
            f"the Ray cluster at {address} failed the run: {why}; what was "
            "written stays, and the next run goes on from there",
            field="ray",
        ) from error
    except ResearchStoreError:
        raise
    except ConnectionError as error:  # ray.init found no cluster there
        raise UpstreamUnavailable(
            f"no Ray cluster at {address} ({_first_line(error)}): start one (ray start "
            "--head, see the README's 'Embedding on a Ray cluster') or name its address",
            field="ray",
        ) from None


def _cause(error: BaseException) -> BaseException:
    """The error a Ray task or actor raised, under Ray's wrappers."""
    seen = {id(error)}
    cause = getattr(error, "cause", None)
    while isinstance(cause, BaseException) and id(cause) not in seen:
        seen.add(id(cause))
        error, cause = cause, getattr(cause, "cause", None)
    return error


def _raised_in_actor(error: BaseException) -> tuple[type[ResearchStoreError] | None, str]:
    """What an actor raised, as far as Ray's message tells it: ours, or None; and why.

    An actor that died in ``__init__`` comes back as Ray's message alone,
    the actor's traceback in it: its last line is ``module.Class: message``.
    """
    lines = [line.strip() for line in ANSI.sub("", str(error)).splitlines() if line.strip()]
    raised = RAISED.match(lines[-1]) if len(lines) > 1 else None
    if raised is None:
        return None, _first_line(error)
    name, message = raised.groups()
    pending: list[type[ResearchStoreError]] = [ResearchStoreError]
    while pending:
        known = pending.pop()
        if f"{known.__module__}.{known.__qualname__}" == name:
            return known, message[:500]
        pending.extend(known.__subclasses__())
    return None, lines[-1][:500]


def _first_line(error: BaseException) -> str:
    text = ANSI.sub("", str(error)).strip() or type(error).__name__
    return text.splitlines()[0][:300]
